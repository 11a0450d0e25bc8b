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
mod tests {
    use super::*;
    use crate::sql::analyze::{AffinitySet, LockClause, LockStrength, LockWait};

    fn facts(operation: Operation, ineligibility: Option<&'static str>) -> Facts {
        Facts {
            operation,
            volatility: Volatility::Immutable,
            locking: None,
            affinity: AffinitySet::EMPTY,
            statement_count: 1,
            ineligibility,
            changes_data: false,
            evidence: Vec::new(),
        }
    }

    #[test]
    fn a_held_replica_takes_only_safe_statements() {
        assert_eq!(held_replica_refusal(&facts(Operation::Read, None), "SELECT 1"), None);
        let write = facts(Operation::Write, Some("write"));
        assert_eq!(held_replica_refusal(&write, "UPDATE t SET a = 1"), Some("write"));
        let mut locking = facts(Operation::Read, Some("row_lock"));
        locking.locking = Some(LockClause { strength: LockStrength::Update, wait: LockWait::Wait });
        assert_eq!(held_replica_refusal(&locking, "SELECT 1 FOR UPDATE"), Some("row_lock"));
        let commit = facts(Operation::TransactionControl(TxControl::Commit), Some("transaction"));
        assert_eq!(held_replica_refusal(&commit, "COMMIT"), None);
        let begin = facts(Operation::TransactionControl(TxControl::Begin), Some("transaction"));
        assert_eq!(held_replica_refusal(&begin, "BEGIN"), Some("transaction"));
        let set = facts(Operation::Session, Some("session"));
        assert_eq!(held_replica_refusal(&set, "SET time_zone = '+00:00'"), None);
        assert_eq!(held_replica_refusal(&set, "SET @x = 1"), Some("session_pin"));
        assert_eq!(held_replica_refusal(&set, "LOCK TABLES t WRITE"), Some("session_pin"));
        let mut show = facts(Operation::Read, Some("server_state"));
        show.affinity.insert(Affinity::ServerState);
        assert_eq!(held_replica_refusal(&show, "SHOW WARNINGS"), None, "about the held connection itself");
        let mut var = facts(Operation::Read, Some("user_variable"));
        var.affinity.insert(Affinity::UserVariable);
        assert_eq!(held_replica_refusal(&var, "SELECT @x"), Some("user_variable"));
        let mut volatile = facts(Operation::Read, Some("volatile_function"));
        volatile.volatility = Volatility::Volatile;
        assert_eq!(held_replica_refusal(&volatile, "SELECT f()"), Some("volatile_function"));
        let unknown = facts(Operation::Unknown, Some("unanalyzable"));
        assert_eq!(held_replica_refusal(&unknown, "CALL p()"), Some("unanalyzable"));
    }
}
