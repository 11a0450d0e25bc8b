//! The held-replica rule, table-driven for both dialects over facts the analysis gives.

use super::*;
use crate::session::engine::hold::Hold;
use crate::sql::analyze::{analyze, PinReason};
use crate::sql::volatility::FunctionCatalog;

const PG: Dialect = Dialect::Postgres;
const MY: Dialect = Dialect::MySql;

fn facts(sql: &str, dialect: Dialect) -> Facts {
    Facts::from_analysis(&analyze(sql, dialect, &FunctionCatalog::builtin(dialect)))
}

/// Held on a replica, in a transaction declared read-only or not.
fn held(dialect: Dialect, read_only_tx: bool) -> HeldReplica {
    HeldReplica { held: true, on_replica: true, dialect, read_only_tx }
}

#[test]
fn what_a_held_replica_refuses_in_each_dialect() {
    let rows: [(Dialect, &str, bool, Option<&str>); 23] = [
        // dialect, statement, read-only transaction -> why it is refused
        (PG, "SELECT a FROM t", false, None),
        (PG, "UPDATE t SET a = 1", false, Some("write")),
        (PG, "INSERT INTO t VALUES (1)", true, Some("write")),
        (PG, "SELECT a FROM t FOR UPDATE", false, Some("row_lock")),
        (PG, "SELECT a FROM t FOR UPDATE", true, Some("row_lock")),
        // A volatile read may write: kept off a standby, unless the transaction was declared
        // read-only, where the server refuses every write itself (#34); a lock it would take.
        (PG, "SELECT random()", false, Some("volatile_function")),
        (PG, "SELECT random()", true, None),
        (PG, "SELECT pg_advisory_lock(1)", true, Some("volatile_function")),
        (PG, "SELECT my_function(1)", true, Some("volatile_function")),
        (PG, "COMMIT", false, None),
        (MY, "SELECT a FROM t", false, None),
        (MY, "UPDATE t SET a = 1", false, Some("write")),
        (MY, "SELECT a FROM t FOR UPDATE", false, Some("row_lock")),
        (MY, "COMMIT", false, None),
        (MY, "ROLLBACK", false, None),
        (MY, "SAVEPOINT s", false, None),
        (MY, "START TRANSACTION", false, Some("transaction")),
        (MY, "SET time_zone = '+00:00'", false, None),
        (MY, "SET @x = 1", false, Some("session_pin")),
        (MY, "LOCK TABLES t WRITE", false, Some("session_pin")),
        // About the held connection itself: that connection is the one to ask.
        (MY, "SHOW WARNINGS", false, None),
        (MY, "SELECT @x", false, Some("user_variable")),
        (MY, "SELECT RAND()", false, Some("volatile_function")),
    ];
    let wrong: Vec<_> = rows
        .iter()
        .map(|(dialect, sql, ro, want)| (sql, want, unsafe_there(&facts(sql, *dialect), sql, *dialect, *ro)))
        .filter(|(_, want, got)| *want != got)
        .collect();
    assert!(wrong.is_empty(), "{wrong:?}");
}

#[test]
fn only_a_held_replica_connection_refuses_or_detours() {
    let write = "UPDATE t SET a = 1";
    for dialect in [PG, MY] {
        let f = facts(write, dialect);
        for (held, on_replica, detour, want) in [
            (true, true, false, Guard::Refuse("write")),
            (true, true, true, Guard::Detour),
            (false, true, false, Guard::Pass),
            (false, true, true, Guard::Pass),
            (true, false, false, Guard::Pass),
            (true, false, true, Guard::Pass),
            (false, false, false, Guard::Pass),
        ] {
            let s = HeldReplica { held, on_replica, dialect, read_only_tx: false };
            assert_eq!(guard(&s, &f, write, || detour), want, "{dialect:?} {held} {on_replica} {detour}");
        }
        let read = "SELECT a FROM t";
        let asked = std::cell::Cell::new(false);
        let g = guard(&held(dialect, false), &facts(read, dialect), read, || asked.replace(true));
        assert_eq!((g, asked.get()), (Guard::Pass, false), "{dialect:?}: a safe statement asks nothing");
    }
}

#[test]
fn both_wires_word_a_refusal_alike() {
    let holds = [
        (Hold::Tx { read_only: true }, "a transaction is open"),
        (Hold::Cursor, "a cursor is open"),
        (Hold::MidBatch, "earlier statements of the batch ran there"),
        (Hold::Pin(PinReason::TempObject), "the session is pinned to it"),
        (Hold::Sticky, "the session is pinned to it"),
    ];
    for (hold, words) in holds {
        let text = refusal("replica", "write", hold.describe());
        assert!(text.starts_with("cannot run a statement that is not replica-safe (write)"), "{text}");
        assert!(text.contains("read pool \"replica\"") && text.contains(words), "{hold:?}: {text}");
    }
}
