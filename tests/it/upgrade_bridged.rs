//! Issue #40, binary upgrade of sessions served across protocols: a PostgreSQL client on a
//! MariaDB pool (the bridge) and a MySQL client on a PostgreSQL pool keep their sessions, with
//! the statements they prepared there, in the new process. Where the statements ran after the
//! hand-over is the server's own word (`VERSION()`, `version()`).

// Blocking test code driving child processes, not data-plane code.
#![allow(clippy::disallowed_methods)]

use crate::bridge_pg_mysql::bridge_router_toml;
use crate::support::dbs;
use crate::upgrade::{app_client, Upgrade};

/// In both pool modes; in session mode the server session the client owns moves with it (the
/// same MariaDB connection id, the same PostgreSQL backend pid).
#[test]
fn a_bridged_postgresql_session_moves_with_its_statements_on_mariadb() {
    for mode in ["transaction", "session"] {
        let up = Upgrade::new(&bridge_router_toml(mode));
        let mut old = up.start("old", false);
        let mut c = app_client(up.port, &dbs().my.database);
        let stmt = c
            .prepare("SELECT CONCAT(CAST($1 AS SIGNED) + 1), VERSION(), CONCAT(CONNECTION_ID())")
            .expect("a statement prepared on MariaDB");
        let before = c.query_one(&stmt, &[&"41"]).expect("run it");
        assert_eq!(before.get::<_, String>(0), "42");
        let (new, took) = up.hand_over(&mut old, "new");
        eprintln!("[upgrade] one bridged PostgreSQL client ({mode} mode): handed over in {took:?}");
        let after = c.query_one(&stmt, &[&"1"]).unwrap_or_else(|e| {
            panic!("{mode}: the statement prepared before: {e}\nold:\n{}\nnew:\n{}", old.log(), new.log())
        });
        assert_eq!(after.get::<_, String>(0), "2", "{mode}");
        assert!(after.get::<_, String>(1).contains("MariaDB"), "{mode}: ran on MariaDB: {}", after.get::<_, String>(1));
        if mode == "session" {
            assert_eq!(after.get::<_, String>(2), before.get::<_, String>(2), "the same MariaDB connection");
        }
        let n: String = c.query_one("SELECT CONCAT(40 + 2)", &[]).expect("a new statement").get(0);
        assert_eq!(n, "42", "{mode}");
    }
}

/// A MySQL client served by a PostgreSQL pool keeps its prepared statement (under the id it was
/// given) in the new process, and the statement runs on PostgreSQL; in session mode on the
/// same backend.
#[test]
fn a_bridged_mysql_session_moves_with_its_statements_on_postgresql() {
    use mysql::prelude::Queryable;
    let pg = &dbs().pg;
    for mode in ["transaction", "session"] {
        let up = Upgrade::new(&crate::bridge_mysql_pg::bridge_router_toml(mode, &pg.database));
        let mut old = up.start("old", false);
        let mut c =
            mysql::Conn::new(dbs().my.opts(up.port, &pg.user, &pg.password)).expect("connect through the bridge");
        let stmt = c
            .prep("SELECT CAST(? AS int) + 1, version(), pg_backend_pid()")
            .expect("a statement prepared on PostgreSQL");
        let before: (i64, String, i64) = c.exec_first(&stmt, (41,)).expect("run it").expect("a row");
        assert_eq!(before.0, 42);
        let (new, took) = up.hand_over(&mut old, "new");
        eprintln!("[upgrade] one bridged MySQL client ({mode} mode): handed over in {took:?}");
        let after: (i64, String, i64) = c
            .exec_first(&stmt, (1,))
            .unwrap_or_else(|e| {
                panic!("{mode}: the statement prepared before: {e}\nold:\n{}\nnew:\n{}", old.log(), new.log())
            })
            .expect("a row");
        assert_eq!(after.0, 2, "{mode}");
        assert!(after.1.starts_with("PostgreSQL"), "{mode}: ran on PostgreSQL: {}", after.1);
        if mode == "session" {
            assert_eq!(after.2, before.2, "the same PostgreSQL backend");
        }
        let n: Option<i64> = c.query_first("SELECT 40 + 2").expect("a new statement");
        assert_eq!(n, Some(42), "{mode}");
    }
}

/// A native PostgreSQL session with a statement a translation rule sends to a MariaDB pool
/// (#24) moves with it: after the hand-over the statement runs on MariaDB (its `@@server_id`)
/// and the session's own statements on PostgreSQL (`pg_is_in_recovery()`, which MariaDB lacks).
#[test]
fn a_native_session_moves_with_its_statement_routed_to_mariadb() {
    use crate::htap_pg::{cleanup, original, router_toml, table};
    use postgres::types::Type;
    let t = table();
    let up = Upgrade::new(&router_toml(&t, "transaction"));
    let mut old = up.start("old", false);
    let mut c = app_client(up.port, &dbs().pg.database);
    let stmt = c.prepare_typed(&original(&t, "$1"), &[Type::INT4]).expect("a statement routed to MariaDB");
    assert_eq!(c.query_one(&stmt, &[&1i32]).expect("run it").get::<_, i64>(5), 1, "ran on MariaDB");
    let (new, took) = up.hand_over(&mut old, "new");
    eprintln!("[upgrade] a native PostgreSQL client with a statement routed to MariaDB: handed over in {took:?}");
    let row = c
        .query_one(&stmt, &[&2i32])
        .unwrap_or_else(|e| panic!("the statement routed across: {e}\nold:\n{}\nnew:\n{}", old.log(), new.log()));
    assert_eq!((row.get::<_, String>(0), row.get::<_, i64>(5)), ("two".to_owned(), 1), "on MariaDB after the move");
    let in_recovery: bool = c.query_one("SELECT pg_is_in_recovery()", &[]).expect("native").get(0);
    assert!(!in_recovery, "the session's own statements on the PostgreSQL primary");
    cleanup(&t);
}
