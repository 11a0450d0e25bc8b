use super::{ends_uncommitted, my_controls_transaction, opens_transaction, pg_controls_transaction, uncarried};
use crate::protocol::pg::TransactionStatus;

#[test]
fn transaction_control_is_recognized() {
    for sql in ["BEGIN", "/* x */ start transaction", "COMMIT", "rollback to savepoint a", "SAVEPOINT a", "END"] {
        assert!(pg_controls_transaction(sql), "{sql}");
    }
    for sql in ["SELECT 1", "UPDATE t SET begin = 1", "", "WITH x AS (SELECT 1) SELECT * FROM x"] {
        assert!(!pg_controls_transaction(sql), "{sql}");
    }
}

#[test]
fn a_mysql_client_controls_transactions_without_savepoints() {
    for sql in ["BEGIN", "-- c\nStart transaction", "commit", "ROLLBACK", "abort"] {
        assert!(my_controls_transaction(sql), "{sql}");
    }
    for sql in ["SAVEPOINT a", "RELEASE SAVEPOINT a", "SELECT 'BEGIN'", ""] {
        assert!(!my_controls_transaction(sql), "{sql}");
    }
}

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

#[test]
fn load_data_and_xa_are_not_carried() {
    assert!(uncarried("LOAD DATA LOCAL INFILE 'f' INTO TABLE t").is_some_and(|m| m.starts_with("LOAD DATA")));
    assert!(uncarried("/* x */ xa start 'g'").is_some_and(|m| m.starts_with("XA transactions")));
    for sql in ["SELECT 1", "SELECT load FROM t", "'XA'", ""] {
        assert_eq!(uncarried(sql), None, "{sql}");
    }
}
