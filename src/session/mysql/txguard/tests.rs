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
