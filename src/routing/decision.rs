//! What a routing decision says: where the statement runs (or why not), which chain step decided,
//! and the semantic evidence, for traffic, metrics and the dry-run alike.

use std::sync::Arc;

use crate::config::{Protocol, RetryPolicy};
use crate::error::{ErrorCode, Origin};
use crate::sql::analyze::{Affinity, AffinitySet, Evidence, LockClause, Operation, StatementFacts, TxControl};
use crate::sql::fingerprint::Fingerprint;
use crate::sql::hint::RouteHint;
use crate::sql::template::Translated;
use crate::sql::volatility::Volatility;

use super::StatementKey;

/// The chain step (or override) behind a decision; also the bounded `decision` metric label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionKind {
    /// The session's open transaction kept its pool.
    TransactionPin,
    /// A translation rule rewrote the statement.
    Translation,
    /// A pattern rule added at runtime matched.
    DynamicRule,
    /// The plan cache answered (a cached template/hash rule, split or default).
    Cache,
    /// A `[[routing.pattern_rules]]` entry matched.
    PatternRule,
    /// A `[[routing.rules]]` entry matched.
    RegexRule,
    /// The read/write split chose the pool.
    ReadWriteSplit,
    /// The default pool (no split, no rule).
    Default,
    /// A rule refused the statement.
    Reject,
    /// A client route hint chose the pool, or was refused.
    Hint,
}

impl DecisionKind {
    /// Stable label for metrics and the admin API.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::TransactionPin => "transaction_pin",
            DecisionKind::Translation => "translation",
            DecisionKind::DynamicRule => "dynamic_rule",
            DecisionKind::Cache => "cache",
            DecisionKind::PatternRule => "pattern_rule",
            DecisionKind::RegexRule => "regex_rule",
            DecisionKind::ReadWriteSplit => "read_write_split",
            DecisionKind::Default => "default",
            DecisionKind::Reject => "reject",
            DecisionKind::Hint => "hint",
        }
    }
}

/// A statement that must not run anywhere; sessions answer with SQLSTATE `QP001` (PostgreSQL) or
/// MySQL error 9001 with SQLSTATE `QP001`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecisionError {
    /// A `route=` hint asked for something the router will not do; `reason` says why.
    #[error("querypilot route hint not honored: {reason}")]
    HintNotHonored {
        /// Human-readable cause, e.g. "statement is not replica-eligible (row_lock)".
        reason: String,
    },
    /// A `/* querypilot: ... */` comment the router does not understand.
    #[error("invalid querypilot hint: use /* querypilot: route=primary */ or /* querypilot: route=replica */")]
    InvalidHint,
    /// The chosen pool has the `replica` role and the statement is not replica-safe (#19).
    #[error("cannot run on replica pool `{pool}`: the statement is not replica-safe ({reason}); chosen by {chosen_by} (a rule may set allow_writes = true to permit this, at the risk of writing to a replica)")]
    ReplicaUnsafe {
        /// The replica-role pool that was chosen.
        pool: Arc<str>,
        /// What chose it: `rule `name``, `the open transaction`, ...
        chosen_by: String,
        /// Why the statement is not replica-safe (a bounded label such as `write`, `row_lock`).
        reason: &'static str,
    },
    /// The statement has a translation's shape but a value that translation cannot carry (a
    /// JSON-array slot holding something else, #35): it runs nowhere.
    #[error("{message}")]
    TranslationValue {
        /// The translation and the reason, for the client.
        message: Arc<str>,
    },
    /// No pool serves clients of this protocol (validation normally prevents this).
    #[error("no pool is configured for {protocol} clients")]
    NoPool {
        /// The client's protocol.
        protocol: Protocol,
    },
}

impl ErrorCode for DecisionError {
    fn code(&self) -> &'static str {
        match self {
            DecisionError::HintNotHonored { .. } => "routing.hint_not_honored",
            DecisionError::InvalidHint => "routing.invalid_hint",
            DecisionError::ReplicaUnsafe { .. } => "routing.replica_unsafe",
            DecisionError::NoPool { .. } => "routing.no_pool",
            DecisionError::TranslationValue { .. } => "routing.translation_value",
        }
    }

    fn origin(&self) -> Origin {
        match self {
            DecisionError::HintNotHonored { .. }
            | DecisionError::InvalidHint
            | DecisionError::ReplicaUnsafe { .. }
            | DecisionError::TranslationValue { .. } => Origin::Client,
            DecisionError::NoPool { .. } => Origin::Internal,
        }
    }
}

/// Where the statement goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Run it on this pool.
    Route(Arc<str>),
    /// A rule refuses it; send the message to the client as an error.
    Reject(Arc<str>),
    /// It must not run (a hint that cannot be honored, no pool).
    Error(DecisionError),
}

/// The session-independent analysis facts of a statement shape: what the plan cache stores.
/// Literal-dependent parts of the analysis (session effects such as SET values) are left out;
/// `evidence` is that of the statement that filled the entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Facts {
    /// Strongest operation across the statements.
    pub operation: Operation,
    /// Most volatile function called.
    pub volatility: Volatility,
    /// Strongest row lock, if any.
    pub locking: Option<LockClause>,
    /// Connection affinities.
    pub affinity: AffinitySet,
    /// Statements in the string.
    pub statement_count: u16,
    /// Why it may not run on a replica (`None` = replica-eligible); a bounded label.
    pub ineligibility: Option<&'static str>,
    /// True when running it may change data, so read-your-writes must pin the session.
    pub changes_data: bool,
    /// The observations behind the facts.
    pub evidence: Vec<Evidence>,
}

impl Facts {
    /// The routing-relevant part of an analysis.
    pub fn from_analysis(f: &StatementFacts) -> Facts {
        Facts {
            operation: f.operation,
            volatility: f.volatility,
            locking: f.locking,
            affinity: f.affinity,
            statement_count: f.statement_count,
            ineligibility: f.ineligibility_reason(),
            changes_data: changes_data(f),
            evidence: f.evidence.clone(),
        }
    }

    /// True only when analysis proved the statement may run on a replica.
    pub fn replica_eligible(&self) -> bool {
        self.ineligibility.is_none()
    }

    /// Whether the statement may change the session's settings (SET, RESET, DISCARD,
    /// set_config, or anything unanalyzable), so the session re-reads its lexer mode from it.
    pub fn may_change_session(&self) -> bool {
        matches!(self.operation, Operation::Session | Operation::Unknown)
            || self.affinity.contains(Affinity::SessionSet)
            || self.affinity.contains(Affinity::TransactionScoped)
    }

    /// True when running the statement on a replica can neither change data, take a lock that
    /// should exclude others, nor call a function that might: replica-eligible reads, plus the
    /// transaction control and session settings a connection held on a replica needs. This is
    /// what a replica-role pool accepts whatever chose it (#19); anything unknown is unsafe.
    pub fn replica_safe(&self) -> bool {
        if self.replica_eligible() {
            return true;
        }
        if self.changes_data || self.locking.is_some() || self.volatility == Volatility::Volatile {
            return false;
        }
        let operation = match self.operation {
            Operation::Read | Operation::Session => true,
            Operation::TransactionControl(tx) => {
                !matches!(tx, TxControl::PrepareTransaction | TxControl::CommitPrepared | TxControl::RollbackPrepared)
            }
            Operation::Write | Operation::Ddl | Operation::Admin | Operation::Unknown => false,
        };
        operation && !self.affinity.iter().any(|a| UNSAFE_AFFINITIES.contains(&a))
    }
}

impl Facts {
    /// Whether the statement may run inside a transaction declared `READ ONLY` that runs on a
    /// replica (#34): what is [`Facts::replica_safe`], plus a read whose only reason to stay off
    /// replicas is a volatile function the catalog knows, without side effects or affinity
    /// (`random()`, `clock_timestamp()`, a VOLATILE user function): there the server itself
    /// refuses every change of data, on the primary as on a standby, so it answers alike.
    /// Unknown functions, row locks and the unsafe affinities (advisory locks...) stay unsafe.
    pub fn safe_when_read_only(&self) -> bool {
        if self.replica_safe() {
            return true;
        }
        let unseen = self.evidence.iter().any(|e| matches!(e.fact, "unknown_function" | "writing_function"));
        self.operation == Operation::Read
            && self.locking.is_none()
            && !unseen
            && !self.affinity.iter().any(|a| UNSAFE_AFFINITIES.contains(&a))
    }
}

/// Affinities whose statements must not run on a replica even when they change no data: locks
/// a replica cannot make exclusive with the primary's, files and tables it cannot write,
/// notifications it cannot deliver, sequences it cannot advance.
const UNSAFE_AFFINITIES: [Affinity; 7] = [
    Affinity::AdvisoryLock,
    Affinity::GetLock,
    Affinity::LockTables,
    Affinity::SelectInto,
    Affinity::Listen,
    Affinity::TempTable,
    Affinity::Sequence,
];

/// What the pool-role check said about a decision (#19), for the dry-run and tests.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplicaCheck {
    /// The statement does not run on a replica-role pool.
    NotReplica,
    /// It runs on a replica-role pool and is replica-safe.
    Safe,
    /// It is not replica-safe, but the rule that chose the replica says `allow_writes = true`.
    AllowedByRule,
    /// It is not replica-safe: refused ([`DecisionError::ReplicaUnsafe`]).
    Refused,
}

impl ReplicaCheck {
    /// Stable label for the admin API.
    pub fn as_str(self) -> &'static str {
        match self {
            ReplicaCheck::NotReplica => "not_replica",
            ReplicaCheck::Safe => "replica_safe",
            ReplicaCheck::AllowedByRule => "allowed_by_rule",
            ReplicaCheck::Refused => "refused",
        }
    }
}

/// Whether running the statement may change data someone could then read: writes, DDL, admin,
/// anything unknown, any volatile function (an unknown UDF may write) and committing a prepared
/// transaction. Transaction control, session settings (replayed on whichever backend serves the
/// session) and locking or server-state reads change no data, so they do not pin reads.
fn changes_data(f: &StatementFacts) -> bool {
    let by_operation = match f.operation {
        Operation::Write | Operation::Ddl | Operation::Admin | Operation::Unknown => true,
        Operation::TransactionControl(tx) => tx == TxControl::CommitPrepared,
        Operation::Read | Operation::Session => false,
    };
    by_operation || f.volatility == Volatility::Volatile
}

/// One routing decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Decision {
    /// Where the statement goes.
    pub outcome: Outcome,
    /// The label: the step that decided, or `cache`, `reject`, `hint` when those did.
    pub kind: DecisionKind,
    /// The chain step behind the target (for a cache hit, the step that was cached).
    pub step: DecisionKind,
    /// True when the plan cache supplied the facts.
    pub cached: bool,
    /// The statement's fingerprint under the configured strategy.
    pub fingerprint: Fingerprint,
    /// The name of the rule that matched, if one did.
    pub rule: Option<Arc<str>>,
    /// The SQL to send instead of the client's, when a translation rule matched, with how it
    /// moves or repeats the client's positional `?` parameters (MySQL clients only).
    pub rewritten: Option<Translated>,
    /// Why this target, a bounded label (`replica_eligible`, `row_lock`, `read_your_writes`...).
    pub reason: &'static str,
    /// The semantic evidence (cached facts on a cache hit).
    pub facts: Arc<Facts>,
    /// A `route=primary` hint: the session stays on the primary from now on.
    pub pins_primary: bool,
    /// Running it may change data (outside a read-only transaction): read-your-writes input.
    pub writes: bool,
    /// The retry policy of the pattern or regex rule that chose the pool, when that rule has
    /// one (#11); not set when a hint, an open transaction or a rejection overrode the rule.
    pub retry: Option<RetryPolicy>,
    /// The pool-role check (#19).
    pub replica_check: ReplicaCheck,
}

impl Decision {
    /// The translated SQL, when a translation rule matched.
    pub fn rewritten_sql(&self) -> Option<&str> {
        self.rewritten.as_ref().map(|t| t.sql.as_str())
    }

    /// How the translated SQL binds the client's `?` parameters, when it moves or repeats them.
    pub fn param_order(&self) -> Option<&[u16]> {
        self.rewritten.as_ref().and_then(|t| t.param_order.as_deref())
    }

    /// True when the statement runs on a replica-role pool (health and lag then decide whether
    /// that pool may serve it, as for split reads).
    pub fn on_replica(&self) -> bool {
        matches!(self.replica_check, ReplicaCheck::Safe | ReplicaCheck::AllowedByRule)
    }

    /// The pool to run on, if the statement runs at all.
    pub fn pool(&self) -> Option<&Arc<str>> {
        match &self.outcome {
            Outcome::Route(pool) => Some(pool),
            Outcome::Reject(_) | Outcome::Error(_) => None,
        }
    }

    /// True when the statement ends a transaction (its writes become visible to others).
    pub fn ends_transaction(&self) -> bool {
        matches!(
            self.facts.operation,
            Operation::TransactionControl(
                TxControl::Commit | TxControl::Rollback | TxControl::CommitPrepared | TxControl::RollbackPrepared
            )
        )
    }
}

/// A dry-run: the decision `route` would make plus everything behind it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Explanation {
    /// The decision, computed from a fresh analysis (never from or into the cache).
    pub decision: Decision,
    /// The full analysis of this statement, with its session effects.
    pub analysis: StatementFacts,
    /// The statement's key (fingerprints and normalization space).
    pub key: StatementKey,
    /// The lexer-normalized text whose hash is the lexer fingerprint.
    pub normalized: String,
    /// The route hint found in the leading comments, if any.
    pub hint: Option<RouteHint>,
    /// True when `route` would currently find this shape in the plan cache.
    pub in_cache: bool,
}
