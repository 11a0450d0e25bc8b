//! The facts one analysis produces, and the eligibility rule applied to them.
//!
//! Everything here is plain data: the analysis fills it, the router and the session layer read it.
//! The rule is "unknown never means safe": [`StatementFacts::replica_eligible`] is true only when
//! every fact positively says the statement is a side-effect-free read with no connection affinity.

use std::fmt;

pub use crate::volatility::Volatility;

/// What kind of statement this is, as far as routing cares.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operation {
    /// SELECT / VALUES / TABLE / read-only WITH, EXPLAIN without ANALYZE, COPY ... TO STDOUT,
    /// FETCH, and SHOW (which carries [`Affinity::ServerState`] and so is never eligible).
    Read,
    /// INSERT / UPDATE / DELETE / MERGE / TRUNCATE / COPY FROM / LOAD DATA / NOTIFY, a
    /// data-changing CTE, or a read that calls a function with side effects (nextval, pg_notify...).
    Write,
    /// CREATE / ALTER / DROP / COMMENT / RENAME of schema objects, PostgreSQL `SELECT ... INTO`.
    Ddl,
    /// Transaction boundaries and savepoints.
    TransactionControl(TxControl),
    /// Statements that change connection state: SET, RESET, DISCARD, USE, LISTEN, PREPARE, LOCK TABLES...
    Session,
    /// Server administration: VACUUM, ANALYZE, GRANT, REVOKE, KILL, FLUSH, SET GLOBAL, roles and users.
    Admin,
    /// Not parsable, not analyzable, or a statement whose effect cannot be known (CALL, DO, EXECUTE).
    Unknown,
}

impl Operation {
    /// Rank used to combine a multi-statement string: the strongest statement names the whole.
    /// Unknown outranks everything because nothing can be claimed about it.
    pub(crate) fn rank(self) -> u8 {
        match self {
            Operation::Read => 0,
            Operation::Session => 1,
            Operation::TransactionControl(_) => 2,
            Operation::Admin => 3,
            Operation::Write => 4,
            Operation::Ddl => 5,
            Operation::Unknown => 6,
        }
    }

    /// Short stable name, used in the corpus files and as a bounded metric/log label.
    pub fn name(self) -> &'static str {
        match self {
            Operation::Read => "read",
            Operation::Write => "write",
            Operation::Ddl => "ddl",
            Operation::TransactionControl(_) => "transaction",
            Operation::Session => "session",
            Operation::Admin => "admin",
            Operation::Unknown => "unknown",
        }
    }
}

/// The transaction-control statement kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TxControl {
    /// BEGIN / START TRANSACTION.
    Begin,
    /// COMMIT / END.
    Commit,
    /// ROLLBACK / ABORT.
    Rollback,
    /// SAVEPOINT name.
    Savepoint,
    /// RELEASE [SAVEPOINT] name.
    Release,
    /// ROLLBACK TO [SAVEPOINT] name.
    RollbackTo,
    /// SET TRANSACTION ... (characteristics of the current transaction only).
    SetTransaction,
    /// PREPARE TRANSACTION 'gid' (PostgreSQL two-phase commit), or MySQL XA PREPARE.
    PrepareTransaction,
    /// COMMIT PREPARED 'gid'.
    CommitPrepared,
    /// ROLLBACK PREPARED 'gid'.
    RollbackPrepared,
}

/// One reason a statement is bound to the connection (or server) it runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Affinity {
    /// Session-level SET / RESET / DISCARD / USE / SET NAMES / set_config().
    SessionSet,
    /// CREATE TEMP TABLE (the table lives in this connection only).
    TempTable,
    /// pg_advisory_lock family: locks held by this connection.
    AdvisoryLock,
    /// LISTEN / UNLISTEN: notifications arrive on this connection only.
    Listen,
    /// SQL-level PREPARE / EXECUTE / DEALLOCATE.
    SqlPrepare,
    /// DECLARE ... CURSOR WITH HOLD: survives the transaction on this connection.
    CursorWithHold,
    /// DECLARE / FETCH / CLOSE / MOVE of a cursor (transaction-scoped unless WITH HOLD).
    Cursor,
    /// MySQL `@var` user variables (read or written).
    UserVariable,
    /// MySQL LAST_INSERT_ID(): value from the previous statement on this connection.
    LastInsertId,
    /// MySQL FOUND_ROWS() / ROW_COUNT(): results of the previous statement on this connection.
    FoundRows,
    /// Sequence functions: nextval/currval/setval/lastval (currval and lastval are per session).
    Sequence,
    /// MySQL GET_LOCK / RELEASE_LOCK family: named locks held by this connection.
    GetLock,
    /// MySQL LOCK TABLES / UNLOCK TABLES.
    LockTables,
    /// `SELECT ... INTO` variables or files (MySQL).
    SelectInto,
    /// State that lives until the end of the current transaction: SET LOCAL, txid_current(),
    /// pg_advisory_xact_lock, exported snapshots.
    TransactionScoped,
    /// The answer describes the server or connection asked (SHOW, DESCRIBE): never sent to a replica.
    ServerState,
}

impl Affinity {
    /// Every affinity, in bit order.
    pub const ALL: [Affinity; 16] = [
        Affinity::SessionSet,
        Affinity::TempTable,
        Affinity::AdvisoryLock,
        Affinity::Listen,
        Affinity::SqlPrepare,
        Affinity::CursorWithHold,
        Affinity::Cursor,
        Affinity::UserVariable,
        Affinity::LastInsertId,
        Affinity::FoundRows,
        Affinity::Sequence,
        Affinity::GetLock,
        Affinity::LockTables,
        Affinity::SelectInto,
        Affinity::TransactionScoped,
        Affinity::ServerState,
    ];

    fn bit(self) -> u32 {
        1 << (self as u32)
    }

    /// Short stable name, also the ineligibility reason when this affinity is the cause.
    pub fn name(self) -> &'static str {
        match self {
            Affinity::SessionSet => "session_set",
            Affinity::TempTable => "temp_table",
            Affinity::AdvisoryLock => "advisory_lock",
            Affinity::Listen => "listen",
            Affinity::SqlPrepare => "sql_prepare",
            Affinity::CursorWithHold => "cursor_with_hold",
            Affinity::Cursor => "cursor",
            Affinity::UserVariable => "user_variable",
            Affinity::LastInsertId => "last_insert_id",
            Affinity::FoundRows => "found_rows",
            Affinity::Sequence => "sequence",
            Affinity::GetLock => "get_lock",
            Affinity::LockTables => "lock_tables",
            Affinity::SelectInto => "select_into",
            Affinity::TransactionScoped => "transaction_scoped",
            Affinity::ServerState => "server_state",
        }
    }
}

/// A set of [`Affinity`] bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct AffinitySet(u32);

impl AffinitySet {
    /// No affinity at all.
    pub const EMPTY: AffinitySet = AffinitySet(0);

    /// A set holding exactly `a`.
    pub fn of(a: Affinity) -> Self {
        AffinitySet(a.bit())
    }

    /// Raw bits (stable: bit n is `Affinity::ALL[n]`).
    pub fn bits(self) -> u32 {
        self.0
    }

    /// True when `a` is in the set.
    pub fn contains(self, a: Affinity) -> bool {
        self.0 & a.bit() != 0
    }

    /// Adds `a`.
    pub fn insert(&mut self, a: Affinity) {
        self.0 |= a.bit();
    }

    /// Set union.
    pub fn union(self, other: AffinitySet) -> AffinitySet {
        AffinitySet(self.0 | other.0)
    }

    /// True when no affinity is set.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// The affinities present, in bit order.
    pub fn iter(self) -> impl Iterator<Item = Affinity> {
        Affinity::ALL.into_iter().filter(move |a| self.contains(*a))
    }
}

/// How strong a row lock a locking read takes (ordered weakest first).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum LockStrength {
    /// FOR KEY SHARE.
    KeyShare,
    /// FOR SHARE / LOCK IN SHARE MODE.
    Share,
    /// FOR NO KEY UPDATE.
    NoKeyUpdate,
    /// FOR UPDATE.
    Update,
}

/// What a locking read does when a row is already locked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LockWait {
    /// Wait for the lock (the default).
    Wait,
    /// NOWAIT: fail at once.
    Nowait,
    /// SKIP LOCKED: skip locked rows.
    SkipLocked,
}

/// The strongest row-locking clause found anywhere in the statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LockClause {
    /// Lock strength.
    pub strength: LockStrength,
    /// Behaviour on conflict.
    pub wait: LockWait,
}

impl fmt::Display for LockClause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self.strength {
            LockStrength::KeyShare => "FOR KEY SHARE",
            LockStrength::Share => "FOR SHARE",
            LockStrength::NoKeyUpdate => "FOR NO KEY UPDATE",
            LockStrength::Update => "FOR UPDATE",
        })?;
        match self.wait {
            LockWait::Wait => Ok(()),
            LockWait::Nowait => f.write_str(" NOWAIT"),
            LockWait::SkipLocked => f.write_str(" SKIP LOCKED"),
        }
    }
}

/// One observation behind the facts, for logs, `EXPLAIN ROUTE` style output and tests.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Evidence {
    /// What was observed, e.g. `volatile_function`, `row_lock`, `parse_error`.
    pub fact: &'static str,
    /// Specifics, e.g. the function name or the parser's message.
    pub detail: String,
}

/// Everything analysis learned about one SQL string (one or more statements).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatementFacts {
    /// Strongest operation across the statements.
    pub operation: Operation,
    /// Most volatile function called anywhere.
    pub volatility: Volatility,
    /// Strongest row-locking clause, if any.
    pub locking: Option<LockClause>,
    /// Union of the connection affinities.
    pub affinity: AffinitySet,
    /// Number of statements in the string.
    pub statement_count: u16,
    /// Why the facts are what they are.
    pub evidence: Vec<Evidence>,
}

impl StatementFacts {
    /// Empty facts for a read; analysis raises them as it finds things.
    pub(crate) fn read() -> Self {
        StatementFacts {
            operation: Operation::Read,
            volatility: Volatility::Immutable,
            locking: None,
            affinity: AffinitySet::EMPTY,
            statement_count: 1,
            evidence: Vec::new(),
        }
    }

    /// Facts for something that could not be analyzed.
    pub(crate) fn unknown(fact: &'static str, detail: impl Into<String>) -> Self {
        let mut f = StatementFacts::read();
        f.operation = Operation::Unknown;
        f.volatility = Volatility::Volatile;
        f.note(fact, detail);
        f
    }

    /// Records one piece of evidence.
    pub(crate) fn note(&mut self, fact: &'static str, detail: impl Into<String>) {
        self.evidence.push(Evidence { fact, detail: detail.into() });
    }

    /// Raises the operation to `op` if it is stronger than the current one.
    pub(crate) fn raise(&mut self, op: Operation) {
        if op.rank() > self.operation.rank() {
            self.operation = op;
        }
    }

    /// Merges the facts of a following statement of the same string into these.
    pub(crate) fn combine(&mut self, other: StatementFacts) {
        self.raise(other.operation);
        self.volatility = self.volatility.max(other.volatility);
        self.locking = match (self.locking, other.locking) {
            (Some(a), Some(b)) => Some(if b.strength > a.strength { b } else { a }),
            (a, b) => a.or(b),
        };
        self.affinity = self.affinity.union(other.affinity);
        self.statement_count = self.statement_count.saturating_add(other.statement_count);
        self.evidence.extend(other.evidence);
    }

    /// True only when analysis proved the statement(s) may run on a replica.
    pub fn replica_eligible(&self) -> bool {
        self.ineligibility_reason().is_none()
    }

    /// Why the statement may not run on a replica, or `None` when it may. The reason is a short
    /// stable label from a bounded set (safe as a metric label).
    pub fn ineligibility_reason(&self) -> Option<&'static str> {
        match self.operation {
            Operation::Read => {}
            Operation::Unknown => return Some("unanalyzable"),
            other => return Some(other.name()),
        }
        if self.statement_count == 0 {
            return Some("empty");
        }
        if self.locking.is_some() {
            return Some("row_lock");
        }
        if self.volatility == Volatility::Volatile {
            return Some("volatile_function");
        }
        self.affinity.iter().next().map(Affinity::name)
    }
}
