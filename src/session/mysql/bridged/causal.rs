//! Causal reads for a bridged MySQL session (#34): its statements run on PostgreSQL pools, so
//! its positions are WAL offsets, learned and waited for as a native PostgreSQL session's are.
//! After a statement that committed a write, the primary's commit position is read on the
//! connection that committed it, before the connection is given back: a position query rides
//! behind every statement that may commit a write (same write, same round trip), else one
//! query follows (the client has its answer first); the token statements (`SHOW`/`SET querypilot.causal_token`) are answered as
//! for a MySQL session on MariaDB ([`Session::on_token_query`]); a read routed to the standby
//! pool runs there only on a standby that replayed the session's position, else on the primary
//! (or fails with `replica_fallback = "error"`).
//!
//! A statement a native session runs across on a PostgreSQL pool (#24) learns nothing here:
//! that session's positions are MariaDB GTIDs.

use crate::config::{PoolRole, Protocol};
use crate::id::Position;
use crate::pool::health::{pg_commit_position, pg_read_commit_position, PG_COMMIT_POSITION};
use crate::protocol::pg::frontend;
use crate::protocol::pg::TransactionStatus;
use crate::rt;
use crate::session::client_error::MyClientError;

use super::super::route::Rewrite;
use super::super::Session;

impl Session {
    /// Queues the commit position query behind the statement in `link.out` when the statement
    /// may commit a write: the position then rides with it, in the same write and round trip.
    /// Its answer is read after the statement's, whatever the statement did.
    pub(super) fn queue_rider(&mut self) {
        let ride = self.routing.ryw.commit_awaited() && self.ctx.has_replica_reads() && !self.foreign.cross.crossing();
        self.foreign.bridge.rider = ride && frontend::encode_query(PG_COMMIT_POSITION, &mut self.link.out).is_ok();
    }

    /// Routes a bridged statement ([`Session::bridged_route`]), then, for a read the split sent
    /// to the standby pool, attaches a standby that replayed the session's position.
    pub(super) async fn bridged_routed(&mut self, sql: &str) -> Result<Option<Rewrite>, MyClientError> {
        let rewrite = self.bridged_route(sql)?;
        self.bridged_causal().await?;
        Ok(rewrite)
    }

    /// After a bridged statement's response: the statement (or the transaction it ended)
    /// finished, and when it committed a write the commit position is learned on the attached
    /// connection before it is released.
    pub(super) async fn bridged_statement_done(&mut self) {
        if self.foreign.cross.crossing() {
            return;
        }
        let in_tx = self.foreign.bridge.tx != TransactionStatus::Idle;
        self.routing.ryw.statement_done(rt::now(), in_tx);
        let rode = std::mem::take(&mut self.foreign.bridge.rider);
        let due = self.routing.ryw.position_due() && self.ctx.has_replica_reads();
        if !due && !rode {
            return;
        }
        if !rode {
            // The client has its answer before the router asks anything.
            let _ = self.flush_client().await;
        }
        let Some(conn) = self.link.conn.as_mut() else {
            if due {
                self.routing.ryw.learned(None);
            }
            return;
        };
        let position = if rode { pg_read_commit_position(conn).await } else { pg_commit_position(conn).await };
        if !due {
            // The statement committed nothing (it left a transaction open, or failed): the
            // answer is read only to keep the connection in step.
            conn.broken |= position.is_err_and(|e| e.breaks_connection());
            return;
        }
        match position {
            Ok(position) => self.routing.ryw.learned(Some(Position::Wal(position))),
            Err(e) => {
                tracing::debug!("causal reads: cannot read the bridged commit position: {e}");
                conn.broken |= e.breaks_connection();
                self.routing.ryw.learned(None);
            }
        }
    }

    /// Before a routed statement runs: when routing put the session on a standby pool and its
    /// reads must wait for a position, attaches a connection to a standby that replayed it
    /// (waiting up to `routing.causal_wait`), else moves to the primary pool. A connection the
    /// session kept idle (session pooling) is given back first: its standby may be behind.
    /// Nothing changes while a transaction or a pin holds the connection.
    pub(super) async fn bridged_causal(&mut self) -> Result<(), MyClientError> {
        let Some(position) = self.routing.ryw.required_position().cloned() else { return Ok(()) };
        // A transaction or a pin holds the session's connection where it is, as for a native one.
        let free = self.foreign.bridge.tx == TransactionStatus::Idle && !self.held();
        if self.pool.config.role != PoolRole::Replica || !free || self.foreign.cross.crossing() {
            return Ok(());
        }
        self.pg_release(false);
        let config = self.ctx.config();
        let deadline = rt::now() + self.pool.config.timeouts.acquire;
        let wait = config.routing.causal_wait;
        let caught_up = self.pool.checkout_caught_up(Protocol::Postgres, None, deadline, &position, wait);
        if let Some(conn) = caught_up.await.map_err(|e| MyClientError::from(&e))? {
            self.link.conn = Some(conn);
            return Ok(());
        }
        self.pool = self.causal_fallback(wait, Some(Protocol::Postgres))?;
        Ok(())
    }
}
