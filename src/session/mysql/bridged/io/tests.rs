use super::{ends_uncommitted, opens_transaction};
use crate::protocol::pg::TransactionStatus;

#[test]
fn rollbacks_and_commits_of_failed_transactions_commit_nothing() {
    for sql in ["ROLLBACK", "abort;", "ROLLBACK WORK", "/* c */ ROLLBACK TRANSACTION"] {
        assert!(ends_uncommitted(sql, TransactionStatus::InBlock), "{sql}");
    }
    for sql in ["ROLLBACK TO SAVEPOINT s", "ROLLBACK PREPARED 'x'", "ROLLBACK AND CHAIN", "COMMIT", "SELECT 1"] {
        assert!(!ends_uncommitted(sql, TransactionStatus::InBlock), "{sql}");
    }
    assert!(ends_uncommitted("COMMIT", TransactionStatus::Failed), "a failed transaction's COMMIT rolls back");
    assert!(!ends_uncommitted("COMMIT; SELECT 1", TransactionStatus::Failed), "not alone");
}

#[test]
fn transaction_starts_are_recognized() {
    for sql in ["BEGIN", "begin work", "START TRANSACTION READ ONLY", "/* x */ BEGIN;"] {
        assert!(opens_transaction(sql), "{sql}");
    }
    assert!(opens_transaction("SELECT 1; /* x */ BEGIN; SELECT 2; COMMIT"), "not first in a text");
    for sql in ["COMMIT", "SELECT 'BEGIN'", "SET autocommit = 0", "SELECT begin FROM t"] {
        assert!(!opens_transaction(sql), "{sql}");
    }
}
