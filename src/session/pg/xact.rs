//! causal (#34): whether a transaction the analysis could not prove read-only wrote, asked of
//! the server inside it, in the same send as the client's COMMIT — no round trip of its own.
//! A transaction that wrote nothing (no transaction id) leaves no commit position, so it does
//! not hold the session's reads on the primary; one that wrote through something the parse
//! cannot see (a trigger, a rule, a function reached through a STABLE one or a view) has an id
//! and its position is learned after the commit as after any write.
//!
//! The probe rides ahead of a lone simple-query COMMIT, and ahead of an extended batch whose
//! only Execute runs a COMMIT (PgJDBC, asyncpg and psycopg send COMMIT as Parse/Bind/Execute/
//! Sync): a batch nothing of which has reached the server yet, so the probe runs after every
//! statement of the transaction and before its end.

use std::collections::HashMap;

use super::{relay, End, Session};
use crate::config::Engine;
use crate::pool::health::PG_XACT_PROBE;
use crate::protocol::pg::{frontend, Frame, FrontendMessage, RawFrames, TransactionStatus};
use crate::session::commit_io;
use crate::session::engine::ryw;

impl Session {
    /// Whether the simple Query `sql` is a lone COMMIT of an open (not failed) transaction on a
    /// PostgreSQL server whose commit would learn a position only because nothing proved the
    /// transaction read-only.
    pub(super) fn commit_probe_due(&self, sql: &str) -> bool {
        self.probe_may_run() && ryw::is_lone_commit(sql)
    }

    /// Whether the extended batch about to be sent (its Sync queued last) is such a COMMIT:
    /// its only Execute runs a COMMIT parsed in the batch or before it, and none of the batch
    /// has been sent (a Flush or a long batch streamed ahead would have run first).
    pub(super) fn sync_probe_due(&self) -> bool {
        let known =
            |server_name: &str| self.stmts.values().find(|s| s.server_name == server_name).map(|s| s.query.as_str());
        self.probe_may_run() && !self.ex.awaiting() && !self.ex.refused() && commits_only(self.ex.queued(), known)
    }

    fn probe_may_run(&self) -> bool {
        let in_block = self.progress.tx == TransactionStatus::InBlock;
        ryw::probes_commit(&self.progress.ryw, in_block, self.ctx.has_replica_reads())
            && self.pool.config.engine == Engine::Postgres
            && self.backend.is_some()
            && !self.is_bridged()
    }

    /// Sends the probe and the client's COMMIT (`raw`) together, reads the probe's answer
    /// (the client never sees it), then relays the COMMIT's. A probe that fails leaves the
    /// position due; one the server refused aborted the transaction, whose COMMIT then reports
    /// ROLLBACK, and nothing is due.
    pub(super) async fn on_probed_commit(&mut self, raw: &[u8]) -> Result<(), End> {
        let Some(probe) = probe() else { return self.on_simple(raw).await };
        self.ex.forward_unanswered(&probe);
        self.ex.forward_unanswered(raw);
        self.arm_retry();
        self.send_probed().await
    }

    /// The extended form: the probe goes ahead of the batch queued with its Sync.
    pub(super) async fn on_probed_sync(&mut self) -> Result<(), End> {
        let Some(probe) = probe() else {
            self.send_backend().await?;
            return self.relay(relay::Until::Ready).await;
        };
        self.ex.forward_first(probe);
        self.send_probed().await
    }

    async fn send_probed(&mut self) -> Result<(), End> {
        self.send_backend().await?;
        if let Some(conn) = self.backend.as_mut() {
            commit_io::read_xact_probe(conn, &mut self.progress.ryw, "transaction").await;
        }
        self.relay(relay::Until::Ready).await
    }
}

/// The probe as a simple Query message.
fn probe() -> Option<Vec<u8>> {
    let mut probe = Vec::with_capacity(PG_XACT_PROBE.len() + 6);
    frontend::encode_query(PG_XACT_PROBE, &mut probe).ok()?;
    Some(probe)
}

/// Whether `batch` (extended messages as sent to the server) executes one portal and nothing
/// else, and that portal, bound in the batch, runs a lone COMMIT: parsed in the batch, or
/// before it under a server name `known` resolves. Any other message, or a name it cannot
/// resolve, means no.
fn commits_only<'k>(batch: &[u8], known: impl Fn(&str) -> Option<&'k str>) -> bool {
    let mut parsed: HashMap<&str, &str> = HashMap::new();
    // Whether each portal bound in the batch runs a lone COMMIT.
    let mut bound: HashMap<&str, bool> = HashMap::new();
    let mut executed = Vec::new();
    for f in RawFrames::new(batch, usize::MAX) {
        match FrontendMessage::decode(&Frame::new(f.tag(), f.body())) {
            Ok(FrontendMessage::Parse { name, query, .. }) => {
                parsed.insert(name, query);
            }
            Ok(FrontendMessage::Bind { portal, statement, .. }) => {
                let commit = match parsed.get(statement) {
                    Some(query) => ryw::is_lone_commit(query),
                    None => !statement.is_empty() && known(statement).is_some_and(ryw::is_lone_commit),
                };
                bound.insert(portal, commit);
            }
            Ok(FrontendMessage::Execute { portal, .. }) => executed.push(bound.get(portal).copied().unwrap_or(false)),
            Ok(FrontendMessage::Describe { .. } | FrontendMessage::Close { .. } | FrontendMessage::Sync) => {}
            _ => return false,
        }
    }
    executed == [true]
}

#[cfg(test)]
mod tests {
    use super::commits_only;
    use crate::protocol::pg::{frontend, Target};

    fn parse_bind_execute(name: &str, sql: Option<&str>, out: &mut Vec<u8>) {
        if let Some(sql) = sql {
            frontend::encode_parse(name, sql, &[], out).expect("parse");
        }
        frontend::encode_bind("", name, &[], &[], &[], out).expect("bind");
        frontend::encode_describe(Target::Portal, "", out).expect("describe");
        frontend::encode_execute("", 0, out).expect("execute");
    }

    fn none(_: &str) -> Option<&'static str> {
        None
    }

    #[test]
    fn an_extended_batch_is_probed_only_when_its_one_execute_commits() {
        let mut b = Vec::new();
        parse_bind_execute("", Some("COMMIT"), &mut b);
        frontend::encode_sync(&mut b);
        assert!(commits_only(&b, none), "unnamed Parse/Bind/Describe/Execute/Sync of COMMIT");
        let mut b = Vec::new();
        parse_bind_execute("qp_1", None, &mut b);
        assert!(commits_only(&b, |n| (n == "qp_1").then_some("commit")), "a named COMMIT prepared before");
        assert!(!commits_only(&b, none), "a name the router does not know");
        let mut b = Vec::new();
        parse_bind_execute("", None, &mut b);
        assert!(!commits_only(&b, |_| Some("COMMIT")), "an unnamed statement parsed before: unknown");
        let mut b = Vec::new();
        parse_bind_execute("", Some("SELECT w_outer(1)"), &mut b);
        parse_bind_execute("", Some("COMMIT"), &mut b);
        assert!(!commits_only(&b, none), "a statement before the COMMIT in the same batch");
        let mut b = Vec::new();
        parse_bind_execute("", Some("COMMIT AND CHAIN"), &mut b);
        assert!(!commits_only(&b, none));
        let mut b = Vec::new();
        frontend::encode_parse("", "COMMIT", &[], &mut b).expect("parse");
        assert!(!commits_only(&b, none), "nothing executed");
        frontend::encode_query("COMMIT", &mut b).expect("query");
        assert!(!commits_only(&b, none), "anything but extended messages");
    }
}
