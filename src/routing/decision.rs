//! What a routing decision says: where the statement runs (or why not), which chain step decided,
//! and the semantic evidence, for traffic, metrics and the dry-run alike.

use std::sync::Arc;

use crate::config::{Protocol, RetryPolicy};
use crate::error::{ErrorCode, Origin};
use crate::sql::analyze::{AffinitySet, Evidence, LockClause, Operation, StatementFacts, TxControl};
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
            DecisionError::NoPool { .. } => "routing.no_pool",
        }
    }

    fn origin(&self) -> Origin {
        match self {
            DecisionError::HintNotHonored { .. } | DecisionError::InvalidHint => Origin::Client,
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
