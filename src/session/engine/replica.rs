//! What a replica connection the session is held on may still take (#19), one rule for both
//! wires (#37): which statement is not replica-safe there, whether it detours to the primary
//! or is refused, and the words the client reads. A statement that is not replica-safe never
//! reaches a held replica connection, and cannot move either (the session is held).
//!
//! The dialects' servers differ, so the rule reads the dialect: a PostgreSQL standby refuses
//! writes and locks by itself, and only those are kept from it (inside a transaction declared
//! read-only, only what such a transaction may not run); a MySQL replica would run them, and
//! session state would then pin the session there, so for MySQL the rule refuses more.
//! Pure: no clock, no socket, no protocol frame.

use crate::routing::Facts;
use crate::sql::analyze::{session_effects, Affinity, Operation, TxControl};
use crate::sql::volatility::Volatility;
use crate::sql::Dialect;

/// A statement routed while the session may hold a replica connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeldReplica {
    /// Something holds the session on its connection.
    pub held: bool,
    /// That connection is to a replica (by role, or the protocol's read pool).
    pub on_replica: bool,
    /// The client's dialect, which is its server's.
    pub dialect: Dialect,
    /// The open transaction was declared read-only (PostgreSQL's reading of it, #34).
    pub read_only_tx: bool,
}

/// What becomes of a statement on a held replica connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Guard {
    /// It may run where the router sent it.
    Pass,
    /// It runs on the primary, the held connection untouched.
    Detour,
    /// It is refused before anything runs, for this reason.
    Refuse(&'static str),
}

/// What becomes of the statement `sql` with `facts` in the state `s` describes; `may_detour`
/// (asked only for an unsafe statement) says whether it may run on the primary on a
/// connection of its own while the held one waits (MySQL: only a cursor holds it and the
/// statement means the same on any connection).
pub fn guard(s: &HeldReplica, facts: &Facts, sql: &str, may_detour: impl FnOnce() -> bool) -> Guard {
    if !(s.held && s.on_replica) {
        return Guard::Pass;
    }
    match unsafe_there(facts, sql, s.dialect, s.read_only_tx) {
        None => Guard::Pass,
        Some(_) if may_detour() => Guard::Detour,
        Some(why) => Guard::Refuse(why),
    }
}

/// Why a statement may not run on the replica connection the session holds, or `None` when it
/// may (see the module header for why the dialects differ).
pub fn unsafe_there(facts: &Facts, sql: &str, dialect: Dialect, read_only_tx: bool) -> Option<&'static str> {
    if dialect == Dialect::Postgres {
        let changes_nothing = !facts.changes_data && facts.locking.is_none();
        let safe = changes_nothing || (read_only_tx && facts.safe_when_read_only());
        return (!safe).then(|| facts.ineligibility.unwrap_or("unanalyzable"));
    }
    mysql_unsafe(facts, sql)
}

/// MySQL: a replica-safe read may run, and a read about that very connection (`SHOW WARNINGS`:
/// the held connection is the one it must ask; the catalog's volatile `FOUND_ROWS()` and
/// `LAST_INSERT_ID()` are still refused, as any volatile function is), the end of the
/// transaction (`COMMIT`, `ROLLBACK`, savepoints), or a session setting the router replays
/// anyway. Anything else — a write, a lock, a volatile function, a new transaction, state that
/// would pin the session to the replica — is refused.
fn mysql_unsafe(facts: &Facts, sql: &str) -> Option<&'static str> {
    let why = facts.ineligibility?;
    let about_this_connection = |a: Affinity| {
        matches!(a, Affinity::ServerState | Affinity::LastInsertId | Affinity::FoundRows | Affinity::TransactionScoped)
    };
    match facts.operation {
        Operation::Read
            if facts.locking.is_none()
                && facts.volatility != Volatility::Volatile
                && facts.affinity.iter().all(about_this_connection) =>
        {
            None
        }
        Operation::TransactionControl(tx) => match tx {
            TxControl::Commit
            | TxControl::Rollback
            | TxControl::Savepoint
            | TxControl::Release
            | TxControl::RollbackTo
            | TxControl::SetTransaction => None,
            _ => Some("transaction"),
        },
        Operation::Session => session_effects(sql, Dialect::MySql).pins().then_some("session_pin"),
        _ => Some(why),
    }
}

/// What the client of either wire reads when a statement is refused for `why` on read pool
/// `pool`, which `hold` (what holds the session there, in words) keeps it on.
pub fn refusal(pool: &str, why: &str, hold: &str) -> String {
    format!("cannot run a statement that is not replica-safe ({why}) on read pool \"{pool}\": {hold}")
}

#[cfg(test)]
mod tests;
