//! Per-statement routing for PostgreSQL sessions: asks the core's router where a statement
//! runs, applies the answer (switching the session's pool only at a safe point), and reports
//! rejections and unhonorable hints as errors that never reach a backend.

use super::bridged::cross::speaks_mysql;
use super::Session;
use crate::config::Protocol;
use crate::id::Position;
use crate::pool::health::pg_commit_position;
use crate::pool::CorePool;
use crate::protocol::pg::backend::BackendMessage;
use crate::protocol::pg::{sqlstate, TransactionStatus};
use crate::routing::causal::TOKEN_NAME;
use crate::routing::{Decision, DecisionKind, Outcome, StatementKey};
use crate::rt;
use crate::session::client_error::PgClientError;
use crate::session::commit_io;
use crate::session::context::Chosen;
use crate::session::engine::hold::Hold;
use crate::session::engine::readonly::Step;
use crate::session::engine::release;
use crate::session::engine::route::{self, Refusal, Refused, RouteContext};
use crate::session::engine::ryw;
use crate::session::engine::text::Text;
use crate::session::placement::{self, Placed};
pub(super) use crate::session::state::startup::INVALID_PARAMETER_VALUE;
use crate::sql::analyze::AccessMode;
use std::rc::Rc;

/// SQLSTATE for statements a `reject` rule refuses (insufficient_privilege: a policy refusal).
const REJECTED: &str = "42501";
/// SQLSTATE for a statement refused on a replica-role pool (read_only_sql_transaction), #19.
const REPLICA_UNSAFE: &str = "25006";

impl Session {
    /// Asks the router about `sql` without moving the session (for a named Parse, which only
    /// needs to know whether a translation rewrites it). `key` is the statement's routing key
    /// when computed before (a prepared statement's), sparing a fingerprint per execute.
    pub(super) fn decide(&mut self, sql: &str, key: Option<StatementKey>) -> Decision {
        self.decide_text(&Text::pg(sql), key, self.holding().held())
    }

    /// [`Session::decide`] as if the session were `held` on its connection or not: what a
    /// statement inside a transaction would be routed to outside it (#24).
    pub(super) fn decide_as(&self, sql: &str, key: Option<StatementKey>, held: bool) -> Decision {
        self.decide_text(&Text::pg(sql), key, held)
    }

    /// [`Session::decide_as`] of a statement whose reading is kept for what follows routing.
    fn decide_text(&self, text: &Text<'_>, key: Option<StatementKey>, held: bool) -> Decision {
        let who = &self.identity;
        let seat = RouteContext::new(
            Protocol::Postgres,
            &who.user,
            &who.database,
            self.seat.pool.name(),
            &self.seat.ryw,
            &who.lex,
        );
        self.seat.ctx.route(&seat.input(text.sql, key, held, self.read_only_view(text, held), rt::now()))
    }

    /// Routes `text` and moves the session to the decided pool when it may move. Returns the
    /// rewritten SQL when a translation rule applied. Only a statement that `runs` is counted
    /// (decision metrics, digest, read-your-writes): a Describe routes too, to reach the pool
    /// its Bind will run on, but counting it would count one execution twice.
    /// `key` is the statement's routing key when computed before (see [`Session::decide`]).
    pub(super) async fn route_statement(
        &mut self,
        text: &Text<'_>,
        runs: bool,
        key: Option<StatementKey>,
    ) -> Result<Option<String>, PgClientError> {
        let sql = text.sql;
        if runs {
            self.move_fresh_transaction(text).await?; // #34
        }
        let decision = self.decide_in_batch(text, key);
        if let Some(e) = self.replica_hold_refusal(&decision, sql) {
            return Err(e);
        }
        let now = rt::now();
        // Both observe_statement and note_unseen ask: the text is read once, a repeated
        // parameterized one not even that (the router's memo keeps the answer, #39).
        let opens = runs && self.seat.ctx.opens_transaction(sql, Protocol::Postgres).is_some();
        let decided = self.seat.ctx.decided_pool(&decision, &self.seat.pool); // once (#39)
        if runs {
            self.observe_statement(text, &decision, decided.as_deref(), now, opens);
        }
        let (target, to_replica) = self.choose_target(&decision, decided, runs)?;
        placement::move_to(self, target, to_replica, runs).await?;
        self.ex.routed_by(decision.retry); // retry (#11)
        self.progress.no_effect = release::without_effect(decision.rewritten.is_none().then_some(&*decision.facts));
        if runs {
            self.note_unseen(sql, &decision, opens); // causal reads (#34)
            self.seat.record_digest(Protocol::Postgres);
            self.seat.digest.begin(decision.fingerprint, sql, now);
        }
        Ok(decision.rewritten.map(|t| t.sql))
    }

    /// Stages the session effects of a routed text the client sent as it is: a repeated
    /// parameterized text (pgbench's, any driver's unnamed Parse) is read from the router's
    /// memo rather than scanned again (#39).
    pub(super) fn stage_routed(&mut self, sql: &str) {
        let effects = self.seat.ctx.session_effects(sql, Protocol::Postgres);
        self.state.stage(effects.into_effects());
    }
}

impl Session {
    /// [`Session::decide`], except that a session held only by an open extended batch (no
    /// transaction, no pin) takes a translation onto the pool it is on, or its refusal, as it
    /// would outside the batch: it stays on its pool either way. asyncpg binds a statement in
    /// the batch that described it on its translation's pool (#35); untranslated, the client's
    /// text would run on an engine that cannot read it.
    fn decide_in_batch(&mut self, text: &Text<'_>, key: Option<StatementKey>) -> Decision {
        let decision = self.decide_text(text, key, self.holding().held());
        let batch_only = self.holding() == Hold::MidBatch && self.state.pin().is_none();
        if !batch_only || decision.rewritten.is_some() || !self.seat.ctx.rules().has_translations() {
            return decision;
        }
        let outside = self.decide_text(text, key, false);
        let translated_here = outside.rewritten.is_some() && outside.pool() == Some(self.seat.pool.name());
        let refused = outside.kind == DecisionKind::Translation && matches!(outside.outcome, Outcome::Reject(_));
        if translated_here || refused {
            outside
        } else {
            decision
        }
    }

    /// What a statement that runs tells the session: a read-only transaction, a write or a
    /// reset for read-your-writes, a change of how its SQL is tokenized; and the decision counts.
    /// `decided`: the decision's pool ([`crate::session::CoreContext::decided_pool`]); `opens`:
    /// whether the statement opens a transaction block (`sql::analyze::opens_transaction`).
    fn observe_statement(
        &mut self,
        text: &Text<'_>,
        decision: &Decision,
        decided: Option<&CorePool>,
        now: std::time::Instant,
        opens: bool,
    ) {
        let sql = text.sql;
        let in_transaction = self.progress.tx != TransactionStatus::Idle;
        match self.read_only_step(text) {
            Step::Open { .. } => self.progress.read_only_tx = true,
            Step::Declare { access, .. } => self.progress.read_only_tx = access == AccessMode::ReadOnly,
            Step::Pass | Step::Next | Step::EndEmpty | Step::Refuse => {}
        }
        self.note_fresh(text);
        let transaction = in_transaction || opens;
        let on_primary = decision.pool().is_some_and(|p| !self.seat.ctx.is_replica_pool(p));
        if transaction && !self.progress.read_only_tx && on_primary {
            self.seat.ryw.observe_unproven(); // #34
        }
        self.seat.ryw.observe(decision, now);
        if self.progress.tx == TransactionStatus::Idle && resets_session(sql) {
            // causal reads (#22): the client asked for a fresh session (after `observe`: the
            // reset itself is no write to wait for).
            self.seat.ryw.reset();
        }
        self.seat.ctx.count_decision(decision, decided);
        if decision.facts.may_change_session() {
            let in_transaction = self.progress.tx != TransactionStatus::Idle;
            self.identity.lex.observe(sql, crate::sql::Dialect::Postgres, in_transaction);
        }
    }

    /// The pool `decision` sends the statement to, and whether that is a replica read; an
    /// error when it was refused or the pool cannot take it. `decided`: the decision's pool,
    /// found once for the statement (#39), as every pool here is.
    fn choose_target(
        &self,
        decision: &Decision,
        decided: Option<Rc<CorePool>>,
        runs: bool,
    ) -> Result<(Chosen, bool), PgClientError> {
        let ctx = &self.seat.ctx;
        let own = ctx.pool_named(&self.identity.database, &self.seat.pool);
        let named = || own.as_ref().filter(|p| !p.is_on_demand()).map(|p| p.name().clone());
        let t = route::checked_target(decision, named, || ctx.rules()).map_err(refusal)?;
        if let Some(own) = own.as_ref().filter(|p| p.is_on_demand()) {
            // A pool made for the client's database (#36): every pool a rule or split names
            // serves another database.
            return Ok((Chosen { name: own.name().clone(), pool: Some(own.clone()) }, false));
        }
        let mut target = Chosen { pool: if t.named { own } else { decided }, name: t.pool };
        if let Some(primary) = self.batch_override(decision, &target.name) {
            target = ctx.choose(primary, &self.seat.pool);
        }
        let to_replica = route::replica_read(decision);
        if to_replica {
            let read = placement::replica_target::<Self>(&self.seat, target.name.clone(), runs)?;
            if read != target.name {
                target = ctx.choose(read, &self.seat.pool);
            }
        }
        if *target.name != *self.seat.pool.config.name && target.pool.as_ref().is_some_and(|p| speaks_mysql(p)) {
            // Statements routed to a MySQL pool run there through `bridged::cross` (#24), which
            // sees them first; those reaching here (SQL-level EXECUTE, the default pool) cannot.
            return Err(PgClientError::new(
                sqlstate::FEATURE_NOT_SUPPORTED,
                format!(
                    "routing chose pool \"{}\", whose backends speak MySQL; this statement cannot run there \
                     (simple queries and the extended protocol can; or log in to that pool to be bridged to it)",
                    target.name
                ),
            ));
        }
        Ok((target, to_replica))
    }

    /// causal (#22): reads where the write that just committed ends in the primary's WAL, on
    /// the connection that committed it, before it serves anyone else. The client's answer is
    /// buffered up to its ReadyForQuery, which waits for the position: the token goes ahead of it.
    pub(super) async fn learn_commit_position(&mut self) {
        let bridged = self.is_bridged();
        match self.seat.conn.as_mut().filter(|_| !bridged) {
            Some(conn) => {
                self.progress.unnamed.elsewhere(); // a simple query of the router's drops it
                match pg_commit_position(conn).await {
                    Ok(position) => self.seat.ryw.learned(Some(Position::Wal(position))),
                    Err(e) => commit_io::position_unknown(conn, &mut self.seat.ryw, &e, "commit position"),
                }
            }
            None => self.seat.ryw.learned(None),
        }
        // The token a client may hand to another connection, as a ParameterStatus ahead of
        // the commit's own ReadyForQuery: a client reads no further once its commit returns
        // (libpq, psycopg's `info.parameter_status`), so a token sent after it would be the
        // previous one until the next statement, and a holder of that reads stale. `primary`
        // when the position is lost, never an older position (#34).
        let value = ryw::show_token(&self.seat.ryw);
        let mut status = Vec::with_capacity(TOKEN_NAME.len() + value.len() + 7);
        let _ = BackendMessage::ParameterStatus { name: TOKEN_NAME, value: &value }.encode(&mut status);
        super::settings::insert_before_ready(&mut self.io.out, &status);
    }
}

/// Whether `sql` is `DISCARD ALL` or `RESET ALL` alone: the client resets its whole session.
fn resets_session(sql: &str) -> bool {
    use crate::sql::lexer::{may_start_with, Lexer, TokenKind};
    if !may_start_with(sql, &["discard", "reset"]) {
        return false;
    }
    let mut words = Lexer::new(sql, crate::sql::Dialect::Postgres)
        .filter(|t| !matches!(t.kind, TokenKind::Comment | TokenKind::Semicolon));
    let first = words.next();
    let second = words.next();
    let resets = first.is_some_and(|t| t.is_word("DISCARD") || t.is_word("RESET"));
    resets && second.is_some_and(|t| t.is_word("ALL")) && words.next().is_none()
}

/// How a refused statement's error reaches the client: hints that cannot be honored are QP001.
fn refusal(r: Refusal) -> PgClientError {
    let code = match r.kind {
        Refused::Rule => REJECTED,
        Refused::Hint => sqlstate::ROUTE_HINT_NOT_HONORED,
        Refused::ReplicaUnsafe => REPLICA_UNSAFE,
        Refused::NoPool => sqlstate::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
        Refused::BadValue => INVALID_PARAMETER_VALUE,
    };
    PgClientError::new(code, r.text)
}
