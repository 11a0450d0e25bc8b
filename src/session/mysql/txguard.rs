//! Sans-IO check of what a MySQL statement does to transactions, made before it runs (#19):
//! which statements may run on a replica connection the session holds (inside a transaction,
//! with a cursor open, or pinned). Which ones statement pooling refuses is the engine's
//! (`engine::release::statement_pooling_refusal`).
//!
//! Whether a transaction *is* open is never guessed here: the session learns it from the
//! server's status flags. These checks only cover what must be decided before the server has
//! seen the statement.

use crate::routing::Facts;
use crate::sql::analyze::{session_effects, Affinity, Operation, TxControl};
use crate::sql::volatility::Volatility;
use crate::sql::Dialect;

/// Why a statement may not run on the replica connection the session holds, or `None` when it
/// may: a replica-safe read, a read about that very connection (`SHOW WARNINGS`: the held
/// connection is the one it must ask; the catalog's volatile `FOUND_ROWS()` and
/// `LAST_INSERT_ID()` are still refused, as any volatile function is), the end of
/// the transaction (`COMMIT`, `ROLLBACK`, savepoints), or a session setting the router replays
/// anyway. Anything else — a write, a lock, a volatile function, a new transaction, state that
/// would pin the session to the replica — is refused.
pub(super) fn held_replica_refusal(facts: &Facts, sql: &str) -> Option<&'static str> {
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

#[cfg(test)]
mod tests;
