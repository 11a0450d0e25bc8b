//! Both dialects' transaction statements, read by the one reader: where the languages agree the
//! rows run in both, and each dialect's own grammar has its rows.

use super::*;

const BOTH: [Dialect; 2] = [Dialect::Postgres, Dialect::MySql];

fn read(sql: &str, dialect: Dialect) -> Option<(TxKind, Option<AccessMode>, bool)> {
    transaction_statement(sql, dialect).map(|s| (s.kind, s.access, s.plain))
}

const RO: Option<AccessMode> = Some(AccessMode::ReadOnly);
const RW: Option<AccessMode> = Some(AccessMode::ReadWrite);

#[test]
fn statements_both_dialects_read_alike() {
    let rows = [
        ("BEGIN", Some((TxKind::Begin, None, true))),
        ("begin work;", Some((TxKind::Begin, None, true))),
        ("START TRANSACTION", Some((TxKind::Begin, None, true))),
        ("start transaction;", Some((TxKind::Begin, None, true))),
        ("START TRANSACTION READ ONLY", Some((TxKind::Begin, RO, true))),
        ("/* app */ START TRANSACTION READ ONLY", Some((TxKind::Begin, RO, true))),
        ("START TRANSACTION READ WRITE", Some((TxKind::Begin, RW, true))),
        ("START TRANSACTION READ WRITE, READ ONLY", Some((TxKind::Begin, RO, true))),
        ("START TRANSACTION READ ONLY, READ WRITE", Some((TxKind::Begin, RW, true))),
        ("START TRANSACTION READ", Some((TxKind::Begin, None, false))),
        ("SET TRANSACTION READ ONLY", Some((TxKind::SetTransaction, RO, true))),
        ("/* c */ SET TRANSACTION READ ONLY", Some((TxKind::SetTransaction, RO, true))),
        ("SET TRANSACTION READ WRITE", Some((TxKind::SetTransaction, RW, true))),
        ("set transaction isolation level serializable", Some((TxKind::SetTransaction, None, false))),
        ("COMMIT", Some((TxKind::Commit, None, true))),
        ("commit work;", Some((TxKind::Commit, None, true))),
        ("COMMIT ;", Some((TxKind::Commit, None, true))),
        ("COMMIT AND CHAIN", Some((TxKind::Commit, None, false))),
        ("ROLLBACK", Some((TxKind::Rollback, None, true))),
        ("ROLLBACK WORK", Some((TxKind::Rollback, None, true))),
        ("ROLLBACK TO SAVEPOINT a", Some((TxKind::Rollback, None, false))),
        // More than one statement, or something else altogether.
        ("BEGIN; SELECT 1", None),
        ("START TRANSACTION READ ONLY; SELECT 1", None),
        ("COMMIT; SELECT 1", None),
        ("COMMIT;;", None),
        ("; BEGIN", None),
        ("START", None),
        ("SET SESSION TRANSACTION READ ONLY", None),
        ("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", None),
        ("SET default_transaction_read_only = on", None),
        ("SELECT 'READ ONLY'", None),
        ("SELECT 1", None),
        ("", None),
    ];
    for dialect in BOTH {
        for (sql, want) in rows {
            assert_eq!(read(sql, dialect), want, "{dialect:?}: {sql}");
        }
    }
}

#[test]
fn postgresql_begin_takes_modes_and_end_commits() {
    let rows = [
        ("BEGIN READ ONLY", Some((TxKind::Begin, RO, true))),
        ("BEGIN READ ONLY;", Some((TxKind::Begin, RO, true))),
        ("BEGIN TRANSACTION READ ONLY", Some((TxKind::Begin, RO, true))),
        ("begin transaction isolation level repeatable read, read only", Some((TxKind::Begin, RO, false))),
        ("BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE", Some((TxKind::Begin, RO, false))),
        ("BEGIN ISOLATION LEVEL READ COMMITTED", Some((TxKind::Begin, None, false))),
        ("BEGIN READ WRITE, READ ONLY", Some((TxKind::Begin, RO, true))),
        ("BEGIN READ ONLY, READ WRITE", Some((TxKind::Begin, RW, true))),
        ("BEGIN READ ONLY; UPDATE t SET a = 1", None),
        ("END", Some((TxKind::Commit, None, true))),
        ("END WORK;", Some((TxKind::Commit, None, true))),
        ("abort;", Some((TxKind::Rollback, None, true))),
        ("/* c */ ROLLBACK TRANSACTION", Some((TxKind::Rollback, None, true))),
        ("ROLLBACK PREPARED 'x'", Some((TxKind::Rollback, None, false))),
        ("ROLLBACK AND CHAIN", Some((TxKind::Rollback, None, false))),
        ("/* c */ COMMIT TRANSACTION", Some((TxKind::Commit, None, true))),
        ("COMMIT PREPARED 'x'", Some((TxKind::Commit, None, false))),
        ("SET TRANSACTION SNAPSHOT '0001'", Some((TxKind::SetTransaction, None, false))),
    ];
    for (sql, want) in rows {
        assert_eq!(read(sql, Dialect::Postgres), want, "{sql}");
    }
}

#[test]
fn mysql_begin_takes_only_work_and_start_transaction_a_snapshot() {
    let rows = [
        ("BEGIN READ ONLY", Some((TxKind::Begin, None, false))),
        ("BEGIN TRANSACTION", Some((TxKind::Begin, None, false))),
        ("BEGIN NOT ATOMIC SELECT 1; END", None),
        ("END", None),
        ("ABORT", None),
        ("COMMIT TRANSACTION", Some((TxKind::Commit, None, false))),
        ("START TRANSACTION WITH CONSISTENT SNAPSHOT", Some((TxKind::Begin, None, true))),
        ("start transaction with consistent snapshot, read only;", Some((TxKind::Begin, RO, true))),
        ("START TRANSACTION WITH CONSISTENT", Some((TxKind::Begin, None, false))),
        ("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE, READ ONLY", Some((TxKind::SetTransaction, RO, false))),
    ];
    for (sql, want) in rows {
        assert_eq!(read(sql, Dialect::MySql), want, "{sql}");
    }
    let snapshot = |sql| transaction_statement(sql, Dialect::MySql).is_some_and(|s| s.snapshot);
    assert!(snapshot("START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"));
    assert!(!snapshot("START TRANSACTION READ ONLY"));
    assert!(!snapshot("START TRANSACTION WITH CONSISTENT"));
}
