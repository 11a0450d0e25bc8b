//! Per-statement routing for PostgreSQL sessions: asks the core's router where a statement
//! runs, applies the answer (switching the session's pool only at a safe point), and reports
//! rejections and unhonorable hints as errors that never reach a backend.

use std::rc::Rc;

use super::Session;
use crate::config::Protocol;
use crate::pool::CorePool;
use crate::protocol::pg::{sqlstate, TransactionStatus};
use crate::routing::{Decision, DecisionError, DecisionKind, Outcome, RouteInput, SessionView, StatementKey};
use crate::rt;
use crate::session::client_error::PgClientError;

/// SQLSTATE for statements a `reject` rule refuses (insufficient_privilege: a policy refusal).
const REJECTED: &str = "42501";
/// SQLSTATE for a statement refused on a replica-role pool (read_only_sql_transaction), #19.
const REPLICA_UNSAFE: &str = "25006";

impl Session {
    /// Whether the session must stay on its current backend connection: inside a transaction,
    /// pinned by session state, or in the middle of an extended-protocol batch (also after a
    /// Flush sent part of it: its implicit transaction is open until ReadyForQuery).
    pub(super) fn held(&self) -> bool {
        self.backend.is_some()
            && (self.tx != TransactionStatus::Idle
                || self.awaiting_ready
                || self.state.pin().is_some()
                || !self.expect.is_empty()
                || !self.bout.is_empty())
    }

    /// Asks the router about `sql` without moving the session (for a named Parse, which only
    /// needs to know whether a translation rewrites it). `key` is the statement's routing key
    /// when computed before (a prepared statement's), sparing a fingerprint per execute.
    pub(super) fn decide(&mut self, sql: &str, key: Option<StatementKey>) -> Decision {
        let input = RouteInput {
            sql,
            protocol: Protocol::Postgres,
            user: &self.identity.user,
            database: &self.identity.database,
            session: SessionView {
                transaction_pool: self.held().then(|| self.pool.name()),
                pinned_to_primary: self.ryw.pinned(rt::now()),
                read_only_transaction: self.read_only_tx,
                lex_mode: self.identity.lex.mode,
                primary_only: self.identity.lex.primary_only(),
            },
            key,
        };
        self.ctx.route(&input)
    }

    /// Routes `sql` and moves the session to the decided pool when it may move. Returns the
    /// rewritten SQL when a translation rule applied. Only a statement that `runs` is counted
    /// (decision metrics, digest, read-your-writes): a Describe routes too, to reach the pool
    /// its Bind will run on, but counting it would count one execution twice.
    /// `key` is the statement's routing key when computed before (see [`Session::decide`]).
    pub(super) async fn route_statement(
        &mut self,
        sql: &str,
        key: Option<StatementKey>,
        runs: bool,
    ) -> Result<Option<String>, PgClientError> {
        let decision = self.decide(sql, key);
        if let Some(e) = self.replica_hold_refusal(&decision) {
            return Err(e);
        }
        let now = rt::now();
        if runs && declares_read_only(sql) {
            self.read_only_tx = true;
        }
        if runs {
            self.ryw.observe(&decision, now);
            self.ctx.count_decision(&decision);
            if decision.facts.may_change_session() {
                let in_transaction = self.tx != TransactionStatus::Idle;
                self.identity.lex.observe(sql, crate::sql::Dialect::Postgres, in_transaction);
            }
        }
        let mut target = match &decision.outcome {
            Outcome::Route(pool) => pool.clone(),
            Outcome::Reject(message) => return Err(PgClientError::new(REJECTED, message.to_string())),
            Outcome::Error(e) => return Err(decision_error(e)),
        };
        if decision.step == DecisionKind::Default {
            // No rule and no split decided: a client that named a pool as its database stays on
            // that pool rather than the configured default.
            if let Some(own) = self.ctx.pools().get(&self.identity.database) {
                target = own.name().clone();
                if let Some(e) = self.ctx.rules().replica_refusal(&decision, &target) {
                    return Err(decision_error(&e));
                }
            }
        }
        if let Some(primary) = self.batch_override(&decision, &target) {
            target = primary;
        }
        // Rule- and hint-routed reads skip unhealthy or lagging replicas as split reads do (#19).
        let to_replica = decision.step == DecisionKind::ReadWriteSplit
            || (decision.on_replica() && decision.kind != DecisionKind::TransactionPin);
        if to_replica {
            target = self
                .ctx
                .replica_fallback(Protocol::Postgres, target, runs)
                .map_err(|m| PgClientError::new(sqlstate::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION, m))?;
        }
        let speaks_mysql = |p: &&Rc<CorePool>| p.config.backend_protocol(Protocol::Postgres) == Protocol::MySql;
        if *target != *self.pool.config.name && self.ctx.pools().get(&target).filter(speaks_mysql).is_some() {
            // Running one statement of a PostgreSQL session on a MySQL pool is not built yet
            // (#24): refused by name rather than speaking PostgreSQL to a MySQL server.
            return Err(PgClientError::new(
                sqlstate::FEATURE_NOT_SUPPORTED,
                format!(
                    "routing chose pool \"{target}\", whose backends speak MySQL; a PostgreSQL session cannot run a \
                     statement there (log in to that pool to be bridged to it)"
                ),
            ));
        }
        if *target != *self.pool.config.name && !self.held() {
            let Some(pool) = self.ctx.pools().get(&target).cloned() else {
                return Err(PgClientError::new(
                    sqlstate::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
                    format!("routing chose pool \"{target}\", which does not exist"),
                ));
            };
            // A different pool: give the current connection back first (it is idle here).
            self.release_backend(false).await;
            self.pool = pool;
        }
        if to_replica && self.backend.is_none() {
            self.connect_split(runs).await?;
        }
        self.flight.rules.note(decision.retry); // retry (#11)
        if runs {
            self.finish_digest();
            self.digest.begin(decision.fingerprint, sql, now);
        }
        Ok(decision.rewritten.map(|t| t.sql))
    }
}

impl Session {
    /// Borrows a connection for a split statement. The read pool may have lost its last backend
    /// since the decision: the connect that finds out marks it down (passive health), and the
    /// read then falls back as `routing.replica_fallback` says instead of failing.
    async fn connect_split(&mut self, runs: bool) -> Result<(), PgClientError> {
        let Err(e) = self.ensure_backend().await else { return Ok(()) };
        let current = self.pool.name().clone();
        let next = match self.ctx.replica_fallback(Protocol::Postgres, current.clone(), runs) {
            Ok(next) if next != current => next,
            _ => return Err(e),
        };
        let Some(pool) = self.ctx.pools().get(&next).cloned() else { return Err(e) };
        self.pool = pool;
        self.ensure_backend().await
    }
}

/// Whether `sql` opens or sets a `READ ONLY` transaction (`BEGIN`/`START TRANSACTION`/`SET
/// TRANSACTION` with `READ ONLY` among its modes): the server then refuses every data change in
/// it, so nothing run there starts read-your-writes pinning.
fn declares_read_only(sql: &str) -> bool {
    use crate::sql::lexer::{Lexer, TokenKind};
    let mut words = Lexer::new(sql, crate::sql::Dialect::Postgres).filter(|t| t.kind != TokenKind::Comment);
    let opens = match words.next() {
        Some(t) if t.is_word("BEGIN") => true,
        Some(t) if t.is_word("START") || t.is_word("SET") => words.next().is_some_and(|t| t.is_word("TRANSACTION")),
        _ => false,
    };
    if !opens {
        return false;
    }
    // A string of several statements is left out: what follows could end the transaction.
    let (mut read, mut only, mut ended) = (false, false, false);
    for t in words {
        if ended {
            return false;
        }
        ended = t.kind == TokenKind::Semicolon;
        only |= read && t.is_word("ONLY");
        read = t.is_word("READ");
    }
    only
}

/// How a routing error reaches the client: hints that cannot be honored are QP001.
fn decision_error(e: &DecisionError) -> PgClientError {
    match e {
        DecisionError::HintNotHonored { .. } | DecisionError::InvalidHint => {
            PgClientError::new(sqlstate::ROUTE_HINT_NOT_HONORED, e.to_string())
        }
        DecisionError::ReplicaUnsafe { .. } => PgClientError::new(REPLICA_UNSAFE, e.to_string()),
        DecisionError::NoPool { .. } => {
            PgClientError::new(sqlstate::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION, e.to_string())
        }
    }
}

impl Session {
    /// Records the statement the digest tracks (if any) into the core's per-shape statistics.
    pub(super) fn finish_digest(&mut self) {
        if let Some(done) = self.digest.finish(rt::now()) {
            self.ctx.record_digest(
                done.fingerprint,
                done.sql,
                Protocol::Postgres,
                done.elapsed,
                done.rows,
                done.error,
                &self.pool.config.name,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::declares_read_only;

    #[test]
    fn read_only_transactions_are_recognized() {
        for sql in [
            "BEGIN READ ONLY",
            "begin transaction isolation level repeatable read, read only",
            "START TRANSACTION READ ONLY",
            "/* c */ SET TRANSACTION READ ONLY",
            "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE",
            "BEGIN READ ONLY;",
        ] {
            assert!(declares_read_only(sql), "{sql}");
        }
        for sql in [
            "BEGIN",
            "BEGIN READ WRITE",
            "SELECT 'READ ONLY'",
            "SET default_transaction_read_only = on",
            "BEGIN READ ONLY; UPDATE t SET a = 1",
            "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
        ] {
            assert!(!declares_read_only(sql), "{sql}");
        }
    }
}
