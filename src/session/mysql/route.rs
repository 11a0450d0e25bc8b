//! Per-statement routing for MySQL sessions: asks the core's router where a statement runs,
//! settles what only the session knows (#19: a split read that opens a transaction with
//! autocommit off goes to the primary; a held replica connection takes only replica-safe
//! statements), applies the answer (switching the session's pool only between commands,
//! outside a transaction and when nothing pins the connection), reports rejections and
//! unhonorable hints as ERR packets that never reach a backend, and records digest statistics.

use std::rc::Rc;

use super::relay::Outcome as Relayed;
use super::Session;
use crate::config::PoolMode;
use crate::config::Protocol;
use crate::pool::CorePool;
use crate::protocol::mysql::errcode::{ErrorNumber, ER_QP_ROUTE_HINT, ER_WRONG_ARGUMENTS};
use crate::protocol::mysql::response::{
    SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_IN_TRANS, SERVER_STATUS_IN_TRANS_READONLY,
};
use crate::routing::{Decision, DecisionKind, MySqlSession, Outcome, Settled, StatementKey};
use crate::rt;
use crate::session::client_error::MyClientError;
use crate::session::context::Chosen;
use crate::session::engine::release;
use crate::session::engine::retry::RulePolicy;
use crate::session::engine::route::{self, Refusal, Refused, RouteContext};
use crate::session::give_back::moving_to;
use crate::session::placement::{self, Placed};
use crate::sql::fingerprint::Fingerprint;

/// `ER_SPECIFIC_ACCESS_DENIED_ERROR`: a `reject` rule refuses the statement (a policy refusal).
const ER_REJECTED: ErrorNumber = ErrorNumber { code: 1227, sql_state: *b"42000" };
/// `ER_UNKNOWN_ERROR`: routing chose a pool this session cannot use (a server number, so every
/// client shows the text).
pub(super) const ER_NO_POOL: ErrorNumber = ErrorNumber { code: 1105, sql_state: *b"HY000" };
/// `ER_CANT_EXECUTE_IN_READ_ONLY_TRANSACTION` (SQLSTATE 25006): a statement that is not
/// replica-safe, refused on a replica-role pool or while the session holds a replica connection
/// (#19); the same text as PostgreSQL clients get.
pub(super) const ER_HELD_REPLICA: ErrorNumber = ErrorNumber { code: 1792, sql_state: *b"25006" };
/// `ER_NOT_SUPPORTED_YET`: statement pooling cannot serve a transaction.
pub(super) const ER_STATEMENT_POOLING: ErrorNumber = ErrorNumber { code: 1235, sql_state: *b"42000" };

/// A translation's SQL and, when it moves or repeats the client's `?`, the client parameter
/// each of its `?` takes.
pub(super) type Rewrite = (String, Option<Vec<u16>>);

/// What routing decided for a statement that will run.
pub(super) struct Routed {
    /// The SQL to send instead of the client's, when a translation rule applied.
    pub rewritten: Option<String>,
    /// The statement's fingerprint, for digest statistics.
    pub fingerprint: Fingerprint,
    /// Run it on the primary on another connection while the replica connection an open
    /// cursor holds waits (see [`Session::detour`]).
    pub detour: bool,
    /// Run it on this PostgreSQL-protocol pool through the bridge, the session staying on its
    /// own pool (#24).
    pub cross: Option<Rc<CorePool>>,
    /// Routing proved it without effect ([`release::without_effect`]): it may go again when its
    /// connection is lost unanswered (#40).
    pub no_effect: bool,
}

impl Session {
    /// Whether the next statement opens a transaction the client did not declare read-only:
    /// the server last reported autocommit off and no transaction open (so the statement opens
    /// one implicitly), and the session's transactions are not `READ ONLY`.
    fn opens_write_transaction(&self) -> bool {
        self.tx.status & (SERVER_STATUS_AUTOCOMMIT | SERVER_STATUS_IN_TRANS) == 0
            && !self.state.read_only_transactions()
    }

    /// The refusal of a statement statement pooling cannot serve, before anything runs (#19).
    pub(super) fn statement_pooling_refusal(&self, sql: &str) -> Option<MyClientError> {
        if self.seat.pool.config.mode != PoolMode::Statement {
            return None;
        }
        let text = release::statement_pooling_refusal(sql, crate::sql::Dialect::MySql)?;
        Some(MyClientError::new(ER_STATEMENT_POOLING, text))
    }

    /// What the session makes of the router's decision before it is counted (#19), through
    /// the same [`super::settle::settle`] the dry-run asks: a statement the held replica
    /// connection must not take is refused (or detours to the primary), and a split read that
    /// opens a write transaction goes to the primary. Returns the refusal, and whether the
    /// statement detours.
    fn settle(&self, decision: &mut Decision, sql: &str) -> (Option<String>, bool) {
        let (hold, opens_write_transaction) = (self.holding().kind(), self.opens_write_transaction());
        if hold.is_none() && !opens_write_transaction {
            return (None, false); // the common statement reads no rule set
        }
        let s = MySqlSession {
            pool: &self.seat.pool.config.name,
            on_replica: self.seat.on_replica(Protocol::MySql),
            hold,
            cursor_only: self.cursor_only(),
            opens_write_transaction,
            // Refused before routing (see `statement_pooling_refusal`).
            statement_pooling: false,
            primary: self.seat.ctx.rules().primary_pool(Protocol::MySql).cloned(),
        };
        match super::settle::settle(decision, sql, &s) {
            Settled::HeldReplica(text) | Settled::StatementPooling(text) => (Some(text), false),
            Settled::Detour => (None, true),
            Settled::AsRouted | Settled::WriteTransaction => (None, false),
        }
    }

    /// Asks the router about `sql` without moving the session (for COM_STMT_PREPARE, which only
    /// needs to know whether a translation rewrites what is prepared). `key` is the statement's
    /// memoized routing key, if any.
    pub(super) fn decide(&self, sql: &str, key: Option<StatementKey>) -> Decision {
        self.decide_held(sql, key, self.holding().held())
    }

    /// [`Session::decide`] as if the session held its connection (`held`) or not.
    pub(super) fn decide_held(&self, sql: &str, key: Option<StatementKey>, held: bool) -> Decision {
        let (database, seat) = (self.state.db().unwrap_or(&self.seat.pool.config.database), &self.seat);
        let lex = &self.routing.lex;
        let seat = RouteContext::new(Protocol::MySql, &self.client.user, database, seat.pool.name(), &seat.ryw, lex);
        // The server's status flags say whether the open transaction is read-only.
        let read_only = self.tx.status & SERVER_STATUS_IN_TRANS_READONLY != 0;
        self.seat.ctx.route(&seat.input(sql, key, held, read_only, rt::now()))
    }

    /// Routes `sql` and moves the session to the decided pool when it may move. `atomic_word`:
    /// whether `sql` begins with a word of an atomic statement, when the caller kept it
    /// ([`super::causal::CommitGtid::expecting`]).
    pub(super) async fn route_statement(
        &mut self,
        sql: &str,
        key: Option<StatementKey>,
        atomic_word: Option<bool>,
    ) -> Result<Routed, MyClientError> {
        let mut decision = self.decide(sql, key);
        if let Some(free) = self.cross_decision(&decision, sql, key) {
            decision = free; // #24: the cross-protocol executor refuses it inside a transaction
        }
        let (held_refusal, detour) = self.settle(&mut decision, sql);
        let decided = self.seat.ctx.decided_pool(&decision, &self.seat.pool);
        self.seat.ctx.count_decision(&decision, decided.as_deref());
        if let Some(text) = held_refusal {
            return Err(MyClientError::new(ER_HELD_REPLICA, text));
        }
        self.seat.ryw.observe(&decision, rt::now());
        self.routing.commit = super::causal::CommitGtid::expecting(sql, decision.facts.statement_count, atomic_word);
        if decision.facts.may_change_session() {
            // MySQL sql_mode does not roll back with a transaction.
            self.routing.lex.observe(sql, crate::sql::Dialect::MySql, false);
        }
        if detour {
            return Ok(Routed {
                rewritten: None,
                fingerprint: decision.fingerprint,
                detour,
                cross: None,
                no_effect: false,
            });
        }
        let target = self.target(&decision, decided)?;
        if let Some(pool) = self.crossing_to(target.pool.clone()) {
            // The session stays where it is; the statement borrows a connection there (#24).
            self.retry.rule = RulePolicy::Unrouted;
            let rewritten = decision.rewritten.map(|t| t.sql);
            return Ok(Routed {
                rewritten,
                fingerprint: decision.fingerprint,
                detour: false,
                cross: Some(pool),
                no_effect: false,
            });
        }
        let to_replica = route::replica_read(&decision);
        let target = if to_replica { self.replica(target)? } else { target };
        self.move_to(target, to_replica, sql).await?;
        self.retry.rule = RulePolicy::Same(decision.retry); // retry (#11)
        let no_effect = release::without_effect(decision.rewritten.is_none().then_some(&*decision.facts));
        let rewritten = decision.rewritten.map(|t| t.sql);
        Ok(Routed { rewritten, fingerprint: decision.fingerprint, detour: false, cross: None, no_effect })
    }

    /// Where `decision` sends its statement, with the pool of that name found once for it
    /// (#39): `decided`, the decision's own, unless the pool the client named stands in.
    fn target(&self, decision: &Decision, decided: Option<Rc<CorePool>>) -> Result<Chosen, MyClientError> {
        let mut named = None;
        let name = || {
            named = self.named_pool();
            named.as_ref().map(|p| p.name().clone())
        };
        let t = route::checked_target(decision, name, || self.seat.ctx.rules()).map_err(refusal)?;
        Ok(Chosen { name: t.pool, pool: if t.named { named } else { decided } })
    }

    /// The pool a read routed to `target` runs on, past unhealthy replicas: looked up only
    /// when it is another one.
    fn replica(&self, target: Chosen) -> Result<Chosen, MyClientError> {
        let read = placement::replica_target::<Self>(&self.seat, target.name.clone(), true)?;
        Ok(if read == target.name { target } else { self.seat.ctx.choose(read, &self.seat.pool) })
    }

    /// Moves the session to pool `target` (unless a transaction or pin holds it where it is)
    /// and attaches the connection a statement `sql` for it needs.
    async fn move_to(&mut self, target: Chosen, to_replica: bool, sql: &str) -> Result<(), MyClientError> {
        placement::move_to(self, target, to_replica, true).await?;
        if !self.is_bridged() && self.seat.on_replica(Protocol::MySql) {
            self.keep_misread_off_the_replica(sql).await?;
        }
        Ok(())
    }

    /// The pool the client named as its database, when it names one.
    fn named_pool(&self) -> Option<Rc<CorePool>> {
        self.client.named_pool.as_deref().and_then(|n| self.seat.ctx.pool_named(n, &self.seat.pool))
    }

    /// For a session bridged to a PostgreSQL pool, a text statement (#24): the whole chain
    /// (translations, rules, hints, the MySQL split, read-your-writes) picks its pool among the
    /// pools that speak PostgreSQL, and the session moves there when nothing holds it (no open
    /// transaction, as PostgreSQL reports it). Returns a translation's SQL and parameter order.
    /// A pool whose backends speak MySQL is refused: the bridged session cannot go there.
    pub(super) fn bridged_route(&mut self, sql: &str) -> Result<Option<Rewrite>, MyClientError> {
        let mut decision = self.decide(sql, None);
        let (held_refusal, _) = self.settle(&mut decision, sql);
        let decided = self.seat.ctx.decided_pool(&decision, &self.seat.pool);
        self.seat.ctx.count_decision(&decision, decided.as_deref());
        if let Some(text) = held_refusal {
            return Err(MyClientError::new(ER_HELD_REPLICA, text));
        }
        self.bridged_unproven(sql, &decision); // #34
        self.seat.ryw.observe(&decision, rt::now());
        let named = || self.named_pool().map(|p| p.name().clone());
        let mut target = route::target(&decision, named).map_err(refusal)?.pool;
        if route::replica_read(&decision) {
            target = self
                .seat
                .ctx
                .replica_fallback(Protocol::MySql, target, true)
                .map_err(|m| MyClientError::new(ER_NO_POOL, m))?;
        }
        let target = self.seat.ctx.choose(target, &self.seat.pool);
        let moving = moving_to(self.holding(), &self.seat.pool.config.name, &target);
        if let Some(pool) = moving.map_err(|m| MyClientError::new(ER_NO_POOL, m))? {
            if pool.config.backend_protocol(Protocol::MySql) != Protocol::Postgres {
                let text = format!(
                    "routing chose pool \"{}\", whose backends speak MySQL; this session is bridged to \
                     PostgreSQL pool \"{}\" and stays on PostgreSQL pools",
                    target.name, self.seat.pool.config.name
                );
                return Err(MyClientError::new(ER_NO_POOL, text));
            }
            // Idle here (session pooling keeps it between transactions): given back first.
            self.pg_release(false);
            self.seat.pool = pool;
        }
        Ok(decision.rewritten.map(|t| (t.sql, t.param_order)))
    }

    /// For a session bridged to a PostgreSQL pool: the rewritten SQL when a translation rule
    /// for `sql` targets this session's own pool, counted as a translation decision: for
    /// `COM_STMT_PREPARE`, whose text is fixed there, so a rule for another pool leaves the
    /// statement as written (each execute is routed by the client's text, #34). With the SQL comes the decision's
    /// `param_order` (how the rewrite moves or repeats the client's `?` parameters).
    pub(super) fn bridged_translation(&self, sql: &str) -> Option<Rewrite> {
        let d = self.decide(sql, None);
        let own_pool = matches!(&d.outcome, Outcome::Route(p) if **p == *self.seat.pool.config.name);
        if d.step != DecisionKind::Translation || !own_pool {
            return None;
        }
        self.seat.ctx.count_decision(&d, self.seat.ctx.decided_pool(&d, &self.seat.pool).as_deref());
        d.rewritten.map(|t| (t.sql, t.param_order))
    }

    /// Adds the statement being timed, which ended as `outcome` says, to the core's digest
    /// statistics.
    pub(super) fn record(&mut self, outcome: &Relayed) {
        self.seat.digest.rows(outcome.rows);
        self.seat.digest.failed(outcome.error);
        self.seat.record_digest(Protocol::MySql);
    }
}

/// How a refused statement's error reaches the client: hints that cannot be honored are 9001 /
/// `QP001`.
fn refusal(r: Refusal) -> MyClientError {
    let number = match r.kind {
        Refused::Rule => ER_REJECTED,
        Refused::Hint => ER_QP_ROUTE_HINT,
        Refused::ReplicaUnsafe => ER_HELD_REPLICA,
        Refused::NoPool => ER_NO_POOL,
        Refused::BadValue => ER_WRONG_ARGUMENTS,
    };
    MyClientError::new(number, r.text)
}

#[cfg(test)]
mod tests;
