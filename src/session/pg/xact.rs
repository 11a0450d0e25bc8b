//! causal (#34): whether a transaction the analysis could not prove read-only wrote, asked of
//! the server inside it, in the same send as the client's COMMIT — no round trip of its own.
//! A transaction that wrote nothing (no transaction id) leaves no commit position, so it does
//! not hold the session's reads on the primary; one that wrote through something the parse
//! cannot see (a trigger, a rule, a function reached through a STABLE one or a view) has an id
//! and its position is learned after the commit as after any write.

use super::{relay, End, Session};
use crate::config::Engine;
use crate::pool::health::{pg_read_xact_probe, PG_XACT_PROBE};
use crate::protocol::pg::{frontend, TransactionStatus};
use crate::sql::lexer::{Lexer, TokenKind};
use crate::sql::Dialect;

impl Session {
    /// Whether the simple Query `sql` is a lone COMMIT of an open (not failed) transaction on a
    /// PostgreSQL server whose commit would learn a position only because nothing proved the
    /// transaction read-only.
    pub(super) fn commit_probe_due(&self, sql: &str) -> bool {
        self.progress.ryw.commit_unproven()
            && self.progress.tx == TransactionStatus::InBlock
            && self.pool.config.engine == Engine::Postgres
            && self.backend.is_some()
            && !self.is_bridged()
            && self.ctx.has_replica_reads()
            && is_commit(sql)
    }

    /// Sends the probe and the client's COMMIT (`raw`) together, reads the probe's answer
    /// (the client never sees it), then relays the COMMIT's. A probe that fails leaves the
    /// position due; one the server refused aborted the transaction, whose COMMIT then reports
    /// ROLLBACK, and nothing is due.
    pub(super) async fn on_probed_commit(&mut self, raw: &[u8]) -> Result<(), End> {
        let mut probe = Vec::with_capacity(PG_XACT_PROBE.len() + 6);
        if frontend::encode_query(PG_XACT_PROBE, &mut probe).is_err() {
            return self.on_simple(raw).await;
        }
        self.ex.bout.extend_from_slice(&probe);
        self.ex.bout.extend_from_slice(raw);
        self.arm_retry();
        self.send_backend().await?;
        if let Some(conn) = self.backend.as_mut() {
            match pg_read_xact_probe(conn).await {
                Ok(true) => {}
                Ok(false) => self.progress.ryw.wrote_nothing(),
                Err(e) => {
                    tracing::debug!("causal reads: cannot tell whether the transaction wrote: {e}");
                    conn.broken |= e.breaks_connection();
                }
            }
        }
        self.relay(relay::Until::Ready).await
    }
}

/// `COMMIT` or `END` alone (`TRANSACTION` / `WORK` allowed; not `AND CHAIN`, which keeps a
/// transaction open, nor `COMMIT PREPARED`).
fn is_commit(sql: &str) -> bool {
    let mut words = Lexer::new(sql, Dialect::Postgres).filter(|t| !matches!(t.kind, TokenKind::Comment));
    if !words.next().is_some_and(|t| t.is_word("COMMIT") || t.is_word("END")) {
        return false;
    }
    let rest: Vec<_> = words.collect();
    match rest.as_slice() {
        [] => true,
        [t] => t.kind == TokenKind::Semicolon || t.is_word("TRANSACTION") || t.is_word("WORK"),
        [t, end] => (t.is_word("TRANSACTION") || t.is_word("WORK")) && end.kind == TokenKind::Semicolon,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::is_commit;

    #[test]
    fn lone_commits_are_recognized() {
        for sql in ["COMMIT", "commit;", "END", "END WORK;", "/* c */ COMMIT TRANSACTION"] {
            assert!(is_commit(sql), "{sql}");
        }
        for sql in ["COMMIT PREPARED 'x'", "COMMIT AND CHAIN", "COMMIT; SELECT 1", "ROLLBACK", "SELECT 1"] {
            assert!(!is_commit(sql), "{sql}");
        }
    }
}
