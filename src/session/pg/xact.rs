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
//!
//! An autocommit statement the parse calls a read, run on the primary (a hint, a pin, a
//! fallback from a standby that has not replayed the session's position), is its own
//! transaction and may write as unseen ([`Unseen`]): a simple Query goes between `BEGIN` and
//! the probe + `COMMIT`, all in one send; an extended batch gets the probe (Parse, Bind,
//! Execute) ahead of its Sync, inside its implicit transaction. The client sees neither; a
//! position is learned after it only when the probe says it wrote.

use std::collections::HashMap;

use super::prepared::{self, Expect};
use super::{relay, End, Session};
use crate::config::Engine;
use crate::pool::health::{pg_read_xact_probe, PG_XACT_PROBE};
use crate::protocol::pg::tag::{backend as server, frontend as client};
use crate::protocol::pg::{frontend, Frame, FrontendMessage, RawFrames, TransactionStatus};
use crate::routing::Decision;
use crate::session::commit_io;
use crate::session::engine::ryw;
use crate::sql::analyze::Operation;
use crate::sql::lexer::{Lexer, TokenKind};
use crate::sql::Dialect;

/// causal: an autocommit statement the parse calls a read, running on the primary, where a
/// view, a policy or a function STABLE to the catalog may write unseen (#34). It is its own
/// transaction, so whether it wrote can be asked only inside it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Unseen {
    /// Nothing to ask: not such a statement.
    #[default]
    No,
    /// Asked inside its transaction when it is sent: a simple Query goes between `BEGIN` and
    /// the probe + `COMMIT`, an extended batch gets the probe ahead of its Sync.
    Probe,
    /// Cannot be asked (a statement a transaction block would change, a batch already partly
    /// sent, a retry that may send it again): its commit learns a position as after a write.
    Blind,
    /// A simple Query was sent wrapped (`trusted`: its `BEGIN` opened the block, so the probe
    /// speaks for the statement); the probe's and `COMMIT`'s answers follow its own.
    Wrapped {
        /// The `BEGIN` succeeded.
        trusted: bool,
    },
    /// The batch also opens or ends a transaction: a probe ahead of its Sync could run in
    /// another transaction than the read's, so nothing is asked; the transaction's own end
    /// learns what it committed.
    Transaction,
}

/// The command tags of the router's `BEGIN` and of a `COMMIT` that committed.
const BEGIN_TAG: &[u8] = b"BEGIN";
const COMMIT_TAG: &[u8] = b"COMMIT";

/// First words of the statements a transaction block leaves unchanged in effect: queries and
/// `SHOW` (`DECLARE`, say, would succeed in a block and fail outside one).
const BLOCK_NEUTRAL: [&str; 6] = ["SELECT", "WITH", "VALUES", "TABLE", "SHOW", "EXPLAIN"];

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
        ryw::probes_commit(&self.seat.ryw, in_block, self.seat.ctx.has_replica_reads())
            && self.seat.pool.config.engine == Engine::Postgres
            && self.seat.conn.is_some()
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
        if let Some(conn) = self.seat.conn.as_mut() {
            commit_io::read_xact_probe(conn, &mut self.seat.ryw, "transaction").await;
        }
        self.relay(relay::Until::Ready).await
    }

    /// causal: notes a statement about to run on the session's connection (`decision` for
    /// `sql`, which `opens` a transaction block or not) that is an autocommit read on a
    /// PostgreSQL primary ([`Unseen`]).
    pub(super) fn note_unseen(&mut self, sql: &str, decision: &Decision, opens: bool) {
        if matches!(decision.facts.operation, Operation::TransactionControl(_)) || opens {
            self.progress.unseen = Unseen::Transaction;
            return;
        }
        let read = !decision.writes && decision.facts.operation == Operation::Read;
        let on_replica = self.seat.on_replica(crate::config::Protocol::Postgres);
        let causal = self.seat.ctx.read_your_writes() == crate::config::ReadYourWrites::Causal
            && self.seat.ctx.has_replica_reads();
        if !read
            || on_replica
            || !causal
            || self.progress.tx != TransactionStatus::Idle
            || self.seat.pool.config.engine != Engine::Postgres
            || self.is_bridged()
        {
            return;
        }
        let kind = if block_neutral(sql) { Unseen::Probe } else { Unseen::Blind };
        self.progress.unseen = self.progress.unseen.max(kind);
    }

    /// causal: before a simple Query (`raw`, queued) is sent: a noted autocommit read goes
    /// between `BEGIN` and the probe + `COMMIT`, in the same send (no round trip added); its
    /// commit learns a position (one round trip more) only when the probe says it wrote. With
    /// a retry armed the wrapped text could not be sent again: blind.
    pub(super) fn wrap_unseen_query(&mut self, raw: &[u8]) {
        let unseen = std::mem::take(&mut self.progress.unseen);
        if matches!(unseen, Unseen::No | Unseen::Transaction) || self.progress.tx != TransactionStatus::Idle {
            return;
        }
        self.seat.ryw.autocommit_unproven();
        let query = raw.first() == Some(&client::QUERY);
        if unseen != Unseen::Probe || !query || self.ex.retry_batch().is_some() {
            return;
        }
        let (Some(begin), Some(probe), Some(commit)) = (query_message("BEGIN"), probe(), query_message("COMMIT"))
        else {
            return;
        };
        self.ex.forward_first(begin);
        self.ex.forward_unanswered(&probe);
        self.ex.forward_unanswered(&commit);
        self.progress.unseen = Unseen::Wrapped { trusted: true };
    }

    /// causal: before an extended batch whose Sync is queued is sent: the probe goes ahead of
    /// the Sync of a noted autocommit read ([`Exchange::probe_before_sync`]), when none of the
    /// batch was sent yet. It is prepared once per connection under its router name, like the
    /// client's statements (the server then neither parses nor plans it again); on a
    /// connection with no room left for it, it is parsed as the unnamed statement, which then
    /// no longer is the client's.
    ///
    /// [`Exchange::probe_before_sync`]: super::exchange::Exchange::probe_before_sync
    pub(super) fn probe_unseen_batch(&mut self) {
        let unseen = std::mem::take(&mut self.progress.unseen);
        if matches!(unseen, Unseen::No | Unseen::Transaction) || self.progress.tx != TransactionStatus::Idle {
            return;
        }
        self.seat.ryw.autocommit_unproven();
        if unseen != Unseen::Probe || self.ex.awaiting() {
            return;
        }
        let key = prepared::statement_key(PG_XACT_PROBE, &[], self.seat.pool.schema_generation());
        let here = self.has_prepared(key);
        let limit = self.seat.pool.config.limits.max_prepared_statements.get() as usize;
        let room = self.seat.conn.as_ref().is_some_and(|c| c.prepared.len() < limit);
        let name = if here || room { prepared::server_name(key) } else { String::new() };
        let mut probe = Vec::with_capacity(PG_XACT_PROBE.len() + 64);
        let mut expects = Vec::with_capacity(3);
        let mut encoded = Ok(());
        if !here {
            encoded = frontend::encode_parse(&name, PG_XACT_PROBE, &[], &mut probe);
            expects.push(Expect::Parse { swallow: true, key: room.then_some(key) });
        }
        let encoded = encoded
            .and_then(|()| frontend::encode_bind("", &name, &[], &[], &[], &mut probe))
            .and_then(|()| frontend::encode_execute("", 0, &mut probe));
        expects.extend([Expect::Swallow(server::BIND_COMPLETE), Expect::XactProbe]);
        if encoded.is_err() || !self.ex.probe_before_sync(&probe, &expects) {
            return;
        }
        match self.seat.conn.as_mut() {
            Some(conn) if !here && room => conn.prepared.push(key),
            _ if name.is_empty() => self.progress.unnamed.elsewhere(),
            _ => {}
        }
    }

    /// Reads the answer to the `BEGIN` of a wrapped simple Query ([`Session::wrap_unseen_query`]).
    pub(super) async fn read_unseen_begin(&mut self) {
        if self.progress.unseen != (Unseen::Wrapped { trusted: true }) {
            return;
        }
        let Some(conn) = self.seat.conn.as_mut() else { return };
        match relay::read_own_answer(conn, BEGIN_TAG).await {
            Ok((_, None)) => {}
            Ok((_, Some(_))) => self.progress.unseen = Unseen::Wrapped { trusted: false },
            Err(e) => {
                tracing::debug!("causal reads: the BEGIN around an autocommit read got no answer: {e}");
                conn.broken = true;
                self.progress.unseen = Unseen::Wrapped { trusted: false };
            }
        }
    }

    /// Ends a wrapped simple Query whose own ReadyForQuery (`status`, in the block) heads the
    /// client's output: reads the probe's and the `COMMIT`'s answers, relays an error the
    /// `COMMIT` reported (a deferred constraint, a serialization failure: what the statement's
    /// own commit would have said), and gives the client the status after the `COMMIT`, as
    /// after an autocommit statement. The status the session goes on with.
    pub(super) async fn end_unseen_wrap(&mut self, status: Option<u8>) -> Option<u8> {
        let Unseen::Wrapped { trusted } = std::mem::take(&mut self.progress.unseen) else { return status };
        let Some(conn) = self.seat.conn.as_mut() else { return status };
        match pg_read_xact_probe(conn).await {
            Ok(false) if trusted => self.seat.ryw.wrote_nothing(),
            Ok(_) => {}
            Err(e) => conn.broken |= e.breaks_connection(),
        }
        let Some(conn) = self.seat.conn.as_mut() else { return status };
        let (end, failed) = match relay::read_own_answer(conn, COMMIT_TAG).await {
            Ok(answer) => answer,
            Err(_) => {
                conn.broken = true;
                return status;
            }
        };
        if failed.is_some() {
            self.seat.ryw.nothing_committed();
        }
        let at = self.io.out.len().saturating_sub(super::exchange::READY_LEN);
        if self.io.out.get(at) == Some(&server::READY_FOR_QUERY) {
            self.io.out.truncate(at);
        }
        if let Some(error) = failed {
            self.io.out.extend_from_slice(&error);
        }
        self.io.out.extend_from_slice(&super::exchange::ready_for_query(end));
        end
    }
}

/// Whether every statement of `sql` has the same effect inside a transaction block as outside
/// one ([`BLOCK_NEUTRAL`]).
fn block_neutral(sql: &str) -> bool {
    let mut first = true;
    let mut any = false;
    for t in Lexer::new(sql, Dialect::Postgres) {
        match t.kind {
            TokenKind::Comment => {}
            TokenKind::Semicolon => first = true,
            _ if first => {
                first = false;
                any = true;
                let neutral = BLOCK_NEUTRAL.iter().any(|w| t.is_word(w)) || t.text == "(";
                if !neutral {
                    return false;
                }
            }
            _ => {}
        }
    }
    any
}

/// `sql` as a simple Query message.
fn query_message(sql: &str) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(sql.len() + 6);
    frontend::encode_query(sql, &mut out).ok()?;
    Some(out)
}

/// The probe as a simple Query message.
fn probe() -> Option<Vec<u8>> {
    query_message(PG_XACT_PROBE)
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
mod tests;
