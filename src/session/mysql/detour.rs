//! Running a statement on the primary while an open cursor holds the session's replica
//! connection (#19): with autocommit on and no transaction, a write (or a locking read, DDL, a
//! volatile function) means the same on any connection, so it runs on a primary connection
//! borrowed for it alone, and the cursor's connection is given back to the session untouched.
//! Anything whose meaning depends on the connection — session state, a transaction start — is
//! refused instead (see `route`).

use super::relay::{Grammar, Outcome};
use super::{End, Session};
use crate::config::Protocol;
use crate::protocol::mysql::response::{SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_IN_TRANS};
use crate::session::client_error::MyClientError;
use crate::session::placement::Placed;

impl Session {
    /// Whether only a cursor holds the session's connection, with autocommit on and no
    /// transaction: a statement that means the same on any connection may then take a detour
    /// to the primary (see [`super::settle::settle`]).
    pub(super) fn cursor_only(&self) -> bool {
        let status = self.tx.status;
        self.tx.cursor.is_some()
            && status & SERVER_STATUS_IN_TRANS == 0
            && status & SERVER_STATUS_AUTOCOMMIT != 0
            && self.state.pin().is_none()
            && !self.tx.sticky
            && self.link.pos == 0
    }

    /// The MySQL primary (write) pool, when it is another pool than the session's.
    pub(super) fn primary_pool(&self) -> Option<std::rc::Rc<crate::pool::CorePool>> {
        let rules = self.seat.ctx.rules();
        let name = rules.primary_pool(Protocol::MySql)?;
        self.seat.ctx.pools().get(name).cloned().filter(|p| p.config.name != self.seat.pool.config.name)
    }

    /// Runs `payload` on a primary connection borrowed for it alone, then gives the session
    /// back its parked replica connection with the cursor open on it.
    pub(super) async fn detour(&mut self, payload: &[u8], grammar: Grammar) -> Result<Option<Outcome>, End> {
        let Some(primary) = self.primary_pool() else {
            MyClientError::new(super::route::ER_HELD_REPLICA, "no primary pool to run the statement on")
                .encode(self.client.reply_seq, &mut self.io.out);
            return Ok(None);
        };
        let pool = std::mem::replace(&mut self.seat.pool, primary);
        let (backend, tx, bseq) = (self.seat.conn.take(), self.tx, self.link.seq.take());
        self.tx.cursor = None;
        let result = self.run_command(payload, grammar, Vec::new()).await;
        if let Some(c) = self.seat.conn.as_mut() {
            // Nothing but an insert id should keep it (the statement cannot open a transaction
            // or pin); whatever did, the connection cannot follow the session back.
            c.broken |= self.tx.status & SERVER_STATUS_IN_TRANS != 0;
            self.tx.sticky = false;
            self.release_backend(false).await;
        }
        self.seat.pool = pool;
        *self.seat.conn = backend;
        self.tx = tx;
        self.link.seq = bseq;
        result
    }
}
