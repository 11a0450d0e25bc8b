//! Routing from engine state, for both wires: the router's input built in one place, and what
//! both sessions apply after the router decided — a session changes pools only when nothing
//! holds it (what a held replica connection may take is [`super::replica`]'s).

use std::ops::Deref;
use std::sync::Arc;
use std::time::Instant;

use super::hold::Hold;
use crate::config::{PoolRole, Protocol};
use crate::id::Position;
use crate::routing::{
    Decision, DecisionError, DecisionKind, Outcome, RouteInput, RuleSet, RywState, SessionView, StatementKey,
};
use crate::sql::mode::SessionModes;

/// What routing reads of a session, past the statement itself.
#[derive(Debug, Clone, Copy)]
pub struct RouteContext<'a> {
    /// The protocol the client speaks (the statement's dialect).
    pub protocol: Protocol,
    /// The client's user name.
    pub user: &'a str,
    /// The database rules match on (MySQL: the one `USE` chose last).
    pub database: &'a str,
    /// The pool the session is on now.
    pub pool: &'a Arc<str>,
    /// Read-your-writes and causal bookkeeping.
    pub ryw: &'a RywState,
    /// How the session's server tokenizes SQL now.
    pub lex: &'a SessionModes,
}

impl<'a> RouteContext<'a> {
    /// Where a session of `protocol` sits: `user` on `database` (whose rules match), on `pool`
    /// now, with its read-your-writes state `ryw` and its server's tokenizing modes `lex`.
    pub fn new(
        protocol: Protocol,
        user: &'a str,
        database: &'a str,
        pool: &'a Arc<str>,
        ryw: &'a RywState,
        lex: &'a SessionModes,
    ) -> Self {
        Self { protocol, user, database, pool, ryw, lex }
    }

    /// The router's input for `sql` at `now`, as if the session were `held` on its connection
    /// or not (a session asks both ways to learn what a statement inside a transaction would
    /// be routed to outside it, #24). `read_only_transaction` is the wire's to say on purpose:
    /// a MySQL server reports it in its status flags, while a PostgreSQL session also counts a
    /// `BEGIN READ ONLY` (or a read-only default) that the statement itself opens, so the
    /// transaction can go to a replica with its first statement.
    pub fn input(
        &self,
        sql: &'a str,
        key: Option<StatementKey>,
        held: bool,
        read_only_transaction: bool,
        now: Instant,
    ) -> RouteInput<'a> {
        RouteInput {
            sql,
            protocol: self.protocol,
            user: self.user,
            database: self.database,
            session: SessionView {
                transaction_pool: held.then_some(self.pool),
                pinned_to_primary: self.ryw.pinned(now),
                read_only_transaction,
                lex_mode: self.lex.mode,
                primary_only: self.lex.primary_only(),
            },
            key,
        }
    }
}

/// Whether a session on `pool` (of `role`) sits on a replica, for `protocol` clients under
/// `rules`: a replica-role pool, or the protocol's read pool of the split that is not also its
/// primary. A held connection there takes only replica-safe statements, and an autocommit read
/// there writes nothing a commit position must cover.
pub fn on_replica(role: PoolRole, pool: &str, rules: &RuleSet, protocol: Protocol) -> bool {
    let read = rules.read_pool(protocol).is_some_and(|r| **r == *pool);
    role == PoolRole::Replica
        || rules.is_replica(pool)
        || (read && rules.primary_pool(protocol).is_none_or(|p| **p != *pool))
}

/// Where the session goes for a statement routed to pool `target`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// It stays on the pool it is on (the same pool, or one it is held to).
    Stay,
    /// It gives its idle connection back and moves to `target`.
    Move,
}

/// A session moves pools only between statements that leave nothing on its connection: a
/// transaction, a cursor, a batch in flight or session state stay where they are.
pub fn plan(hold: Hold, current: &str, target: &str) -> Plan {
    if target != current && !hold.held() {
        Plan::Move
    } else {
        Plan::Stay
    }
}

/// Whether `d` sends the statement to a replica as a read, which then skips unhealthy or
/// lagging replicas and may fall back as `routing.replica_fallback` says: a split read, and a
/// rule- or hint-routed read alike (#19). A statement kept on a held replica connection is no
/// new read: it runs where the transaction is.
pub fn replica_read(d: &Decision) -> bool {
    d.step == DecisionKind::ReadWriteSplit || (d.on_replica() && d.kind != DecisionKind::TransactionPin)
}

/// causal (#22): the commit position a replica must have replayed before it serves this read,
/// when it must: a replica read by a session nothing holds, on a replica-role pool.
pub fn causal_position(ryw: &RywState, replica_read: bool, hold: Hold, role: PoolRole) -> Option<&Position> {
    let waits = replica_read && !hold.held() && role == PoolRole::Replica;
    ryw.required_position().filter(|_| waits)
}

/// What a wire tells its client about a statement routing left nowhere to run; each wire has
/// its own code for each kind and words nothing itself, so both say the same thing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// What refused it.
    pub kind: Refused,
    /// The text the client reads.
    pub text: String,
}

/// What refused a statement before it ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refused {
    /// A `reject` rule (a policy refusal).
    Rule,
    /// A hint the router cannot honour, or one it cannot read (`QP001` on both wires).
    Hint,
    /// The pool has the replica role and the statement is not replica-safe (#19).
    ReplicaUnsafe,
    /// No pool serves it.
    NoPool,
    /// A value a translation cannot carry (#35).
    BadValue,
}

impl Refusal {
    /// The refusal a routing error means.
    pub fn of(e: &DecisionError) -> Refusal {
        let kind = match e {
            DecisionError::HintNotHonored { .. } | DecisionError::InvalidHint => Refused::Hint,
            DecisionError::ReplicaUnsafe { .. } => Refused::ReplicaUnsafe,
            DecisionError::NoPool { .. } => Refused::NoPool,
            DecisionError::TranslationValue { .. } => Refused::BadValue,
        };
        Refusal { kind, text: e.to_string() }
    }
}

/// The pool a decided statement goes to, before replica reads and other protocols' pools are
/// sorted out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The pool.
    pub pool: Arc<str>,
    /// It is the pool the client named as its database, kept because no rule and no split
    /// decided (the `Default` step): its role was not checked by the router.
    pub named: bool,
}

/// Where `d` sends its statement, or why it runs nowhere: a client that named a pool as its
/// database (`named`, asked only when it matters) stays on that pool rather than the configured
/// default when nothing else decided.
pub fn target(d: &Decision, named: impl FnOnce() -> Option<Arc<str>>) -> Result<Target, Refusal> {
    let pool = match &d.outcome {
        Outcome::Route(pool) => pool,
        Outcome::Reject(message) => return Err(Refusal { kind: Refused::Rule, text: message.to_string() }),
        Outcome::Error(e) => return Err(Refusal::of(e)),
    };
    match (d.step == DecisionKind::Default).then(named).flatten() {
        Some(own) => Ok(Target { pool: own, named: true }),
        None => Ok(Target { pool: pool.clone(), named: false }),
    }
}

/// [`target`], with the role check the router could not make for a named pool: a statement that
/// is not replica-safe is refused on a replica-role pool the client named (`rules`: those in
/// force, asked only then).
pub fn checked_target<R: Deref<Target = RuleSet>>(
    d: &Decision,
    named: impl FnOnce() -> Option<Arc<str>>,
    rules: impl FnOnce() -> R,
) -> Result<Target, Refusal> {
    let t = target(d, named)?;
    match t.named.then(|| rules().replica_refusal(d, &t.pool)).flatten() {
        Some(e) => Err(Refusal::of(&e)),
        None => Ok(t),
    }
}
