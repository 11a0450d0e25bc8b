//! The router's statements on the attached backend connection: which are prepared there
//! (`Conn::prepared`, most recently used last), preparing and evicting them, healing a stale
//! one under a fresh name, and correcting the bookkeeping from what the server answered (#18).

use std::rc::Rc;

use super::flight;
use super::prepared::{self, Expect, Stmt};
use super::Session;
use crate::protocol::pg::TransactionStatus;
use crate::session::engine::prepared as engine;

impl Session {
    /// Marks the message being queued as healable when it is the first of its batch to use a
    /// statement prepared earlier on this connection, outside a transaction (see `flight`).
    pub(super) fn mark_healable(&mut self, stmt: &Rc<Stmt>, bind: bool) {
        self.ex.mark_healable(stmt, bind, self.progress.tx == TransactionStatus::Idle);
    }

    pub(super) fn has_prepared(&mut self, key: u64) -> bool {
        self.seat.conn.as_mut().is_some_and(|conn| engine::touch(&mut conn.prepared, key).is_some())
    }

    /// Bookkeeping of a message the server did not run (it failed, or an earlier error of its
    /// batch made the server skip it).
    pub(super) fn not_run(&mut self, e: Expect) {
        match e {
            Expect::Parse { swallow, key: Some(k) } => {
                if let Some(conn) = self.seat.conn.as_mut() {
                    conn.prepared.retain(|p| *p != k);
                }
                // The client's own named Parse: as on the server, the name was not created,
                // and the client may use it again (#18). Unless the batch is sent again (a
                // healed stale plan, a retry): then the Parse runs again, and answers then.
                let again = self.ex.healing() || self.retry_pending();
                if swallow || again {
                    return;
                }
                if let Some((name, stmt)) = self.ex.parse_not_run() {
                    if self.stmts.get(&name).is_some_and(|s| Rc::ptr_eq(s, &stmt)) {
                        self.forget_stmt(&name);
                    }
                }
            }
            // The client's unnamed Parse: as on the server, its unnamed statement is gone
            // (unless the batch runs again and the Parse with it).
            Expect::Parse { swallow: false, key: None } if !self.ex.healing() && !self.retry_pending() => {
                self.progress.unnamed.dropped();
            }
            Expect::DescribeStatement if !self.ex.healing() && !self.retry_pending() => {
                self.ex.describe_not_run();
            }
            Expect::Close { key: Some(k), .. } => {
                // The evicted statement is still on the backend.
                if let Some(conn) = self.seat.conn.as_mut().filter(|c| !c.prepared.contains(&k)) {
                    conn.prepared.insert(0, k);
                }
            }
            _ => {}
        }
    }

    /// Heals `stale` for this client under a new server name: the client's names for it now
    /// mean the fresh statement, which is queued for preparing; returns the batch `bytes`
    /// renamed to it (or, should they not decode, the old name re-prepared in place).
    pub(super) fn heal_fresh(&mut self, stale: &Rc<Stmt>, bytes: &[u8]) -> Vec<u8> {
        let fresh = Rc::new(stale.regenerated(self.seat.pool.schema_generation()));
        let Some(renamed) = flight::renamed(bytes, &stale.server_name, &fresh.server_name) else {
            self.ex.close_on_backend(&stale.server_name, None);
            self.ex.forward(&stale.parse_msg, Expect::Parse { swallow: true, key: Some(stale.key) });
            return bytes.to_vec();
        };
        for s in self.stmts.values_mut().filter(|s| Rc::ptr_eq(s, stale)) {
            *s = fresh.clone();
        }
        self.ex.redescribing(stale, &fresh);
        self.prepare_on_backend(&fresh, true);
        renamed
    }

    /// Corrects the connection's bookkeeping of statement `key` from a server error that named
    /// it: the client sees the error once, and its next attempt prepares or reuses correctly.
    pub(super) fn correct_prepared(&mut self, key: u64, exists: bool) {
        let Some(conn) = self.seat.conn.as_mut() else { return };
        conn.prepared.retain(|k| *k != key);
        if exists {
            conn.prepared.push(key);
        }
    }

    /// Queues a Parse of `stmt` under its router name on the current backend connection,
    /// evicting the coldest statement when the connection is at its limit.
    pub(super) fn prepare_on_backend(&mut self, stmt: &Stmt, swallow: bool) {
        let limit = self.seat.pool.config.limits.max_prepared_statements.get() as usize;
        let Some(conn) = self.seat.conn.as_mut() else { return };
        for cold in engine::make_room(&mut conn.prepared, limit) {
            self.ex.close_on_backend(&prepared::server_name(cold), Some(cold));
        }
        self.ex.forward(&stmt.parse_msg, Expect::Parse { swallow, key: Some(stmt.key) });
        conn.prepared.push(stmt.key);
    }
}
