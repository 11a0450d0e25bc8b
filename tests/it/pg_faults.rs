//! Issue #3: a backend that dies under a statement gives that client an error and the pool
//! recovers without a restart; a prepared statement whose plan went stale after a schema
//! change is healed outside a transaction and reported inside one.

use std::thread;
use std::time::{Duration, Instant};

use crate::pg_util::{backend_pid, router, sqlstate, superuser};
use crate::support::{dbs, eventually, unique_name};

/// Terminates the backend running a statement that contains `marker`, once it runs.
fn terminate_when_running(marker: String) -> thread::JoinHandle<i32> {
    thread::spawn(move || {
        let mut su = superuser();
        let mut pid = 0;
        eventually(Duration::from_secs(10), "the statement to start", || {
            let row = su
                .query_opt(
                    "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%' \
                     AND pid <> pg_backend_pid()",
                    &[&marker],
                )
                .expect("pg_stat_activity");
            pid = row.map_or(0, |r| r.get(0));
            pid != 0
        });
        let done: bool = su.query_one("SELECT pg_terminate_backend($1)", &[&pid]).expect("terminate").get(0);
        assert!(done, "terminated {pid}");
        pid
    })
}

/// Transaction and statement pooling: the client gets `08006` naming the server's reason and
/// goes on, on a healthy connection; so does everybody else.
#[test]
fn a_backend_killed_mid_statement_gives_an_error_and_the_next_statement_works() {
    for mode in ["transaction", "statement"] {
        let r = router(mode, 2, "");
        let mut c = r.pg("main");
        let mut other = r.pg("main");
        for extended in [false, true] {
            let marker = unique_name("kill_me");
            let killer = terminate_when_running(marker.clone());
            let t0 = Instant::now();
            let sql = format!("SELECT pg_sleep(30) /* {marker} */");
            let e = if extended { c.query(&sql, &[]).map(|_| ()) } else { c.batch_execute(&sql) };
            let e = e.expect_err("the statement's backend died");
            let killed = killer.join().expect("killer");
            assert!(t0.elapsed() < Duration::from_secs(10), "{mode}: error after {:?}", t0.elapsed());
            assert_eq!(sqlstate(&e), "08006", "{mode}: {e}");
            let msg = e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default();
            assert!(msg.contains("57P01"), "{mode}: the backend's reason is named: {msg}");
            let pid = backend_pid(&mut c);
            assert_ne!(pid, killed, "{mode}: the dead connection was discarded");
            backend_pid(&mut other);
        }
    }
}

/// Session pooling (#18): the client's server session died with its backend, so the client
/// gets the error for the statement in flight and then its connection closes, as a direct
/// connection does; other clients go on. psql (simple protocol) prints the server's own FATAL
/// error (#36) and that the connection closed; the Rust client (extended protocol) is closed.
#[test]
fn a_backend_killed_mid_statement_closes_a_session_mode_client() {
    let r = router("session", 2, "");
    let mut other = r.pg("main");
    let marker = unique_name("kill_me");
    let killer = terminate_when_running(marker.clone());
    let out =
        crate::pg_util::psql(r.port(), "main", "app", &["-c", &format!("SELECT pg_sleep(30) /* {marker} */")], "");
    let killed = killer.join().expect("killer");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("FATAL:  terminating connection due to administrator command"), "psql: {stderr}");
    assert!(stderr.contains("server closed the connection"), "psql: the connection closed: {stderr}");
    assert_ne!(backend_pid(&mut other), killed);

    let mut c = r.pg("main");
    let marker = unique_name("kill_me");
    let killer = terminate_when_running(marker.clone());
    let e = c.query(&format!("SELECT pg_sleep(30) /* {marker} */"), &[]).map(|_| ()).expect_err("backend died");
    let killed = killer.join().expect("killer");
    // The Rust client's connection task may see the close before it hands the FATAL error to
    // the statement (it then reports "connection closed"); psql above shows the error is sent.
    if !e.is_closed() {
        assert_eq!(sqlstate(&e), "57P01", "the server's own FATAL (#36): {e}");
    }
    eventually(Duration::from_secs(5), "the client's connection to close", || {
        c.is_closed() || c.simple_query("SELECT 1").is_err()
    });
    assert!(c.is_closed(), "closed, not merely failing");
    assert_ne!(backend_pid(&mut other), killed);
}

#[test]
fn a_backend_killed_while_a_session_mode_client_idles_closes_that_client_only() {
    let r = router("session", 2, "");
    let mut victim = r.pg("main");
    let mut bystander = r.pg("main");
    // A simple query: no prepared statement whose Close the client would send later.
    let pid: i32 = match victim.simple_query("SELECT pg_backend_pid()").expect("pid").get(1) {
        Some(postgres::SimpleQueryMessage::Row(r)) => r.get(0).and_then(|v| v.parse().ok()).expect("pid value"),
        other => panic!("unexpected {other:?}"),
    };
    let done: bool = superuser().query_one("SELECT pg_terminate_backend($1)", &[&pid]).expect("terminate").get(0);
    assert!(done);
    // Like a direct connection: the session (and its server-side state) is gone.
    eventually(Duration::from_secs(5), "the victim to notice", || {
        victim.is_closed() || victim.simple_query("SELECT 1").is_err()
    });
    backend_pid(&mut bystander);
    let mut fresh = r.pg("main");
    assert_ne!(backend_pid(&mut fresh), pid);
}

/// A table through the router with one row, plus a statement selecting all of it.
fn stale_plan_setup(c: &mut postgres::Client) -> (String, postgres::Statement) {
    let table = unique_name("pgf_heal");
    c.batch_execute(&format!("CREATE TABLE {table} (id int, v text); INSERT INTO {table} VALUES (1, 'a')"))
        .expect("create");
    let stmt = c.prepare(&format!("SELECT * FROM {table} ORDER BY id")).expect("prepare");
    let rows = c.query(&stmt, &[]).expect("first execution");
    assert_eq!(rows[0].get::<_, String>(1), "a");
    (table, stmt)
}

/// Changes the result type of `SELECT * FROM table` behind the router's back.
fn alter(table: &str, column: &str) {
    dbs()
        .pg
        .primary_client()
        .batch_execute(&format!("ALTER TABLE {table} ADD COLUMN {column} int DEFAULT 7"))
        .expect("alter");
}

#[test]
fn a_stale_backend_copy_is_healed_when_a_client_prepares_after_a_schema_change() {
    for mode in ["session", "transaction", "statement"] {
        let r = router(mode, 1, "");
        let mut c = r.pg("main");
        let (table, old) = stale_plan_setup(&mut c);
        alter(&table, "w");
        // The backend connection still holds the router's copy from before the change: the
        // next prepare hits it at Describe, and the router re-prepares it transparently.
        // A statement described before the change gets the server's error, outside a
        // transaction too: its row description is stale (as on a direct connection).
        let e = c.query(&old, &[]).map(|_| ()).expect_err("stale description");
        assert_eq!(sqlstate(&e), "0A000", "{mode}: {e}");
        drop(old);
        let fresh =
            c.prepare(&format!("SELECT * FROM {table} ORDER BY id")).unwrap_or_else(|e| panic!("{mode}: {e:?}"));
        assert_eq!(fresh.columns().len(), 3, "{mode}: the new shape");
        let row = c.query_one(&fresh, &[]).unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(row.get::<_, Option<i32>>(2), Some(7), "{mode}");
        c.batch_execute(&format!("DROP TABLE {table}")).expect("drop");
    }
}

#[test]
fn a_stale_plan_inside_a_transaction_reaches_the_client() {
    for mode in ["session", "transaction"] {
        let r = router(mode, 1, "");
        let mut c = r.pg("main");
        let (table, _old) = stale_plan_setup(&mut c);
        alter(&table, "w");
        let mut tx = c.transaction().expect("begin");
        let e = tx
            .prepare(&format!("SELECT * FROM {table} ORDER BY id"))
            .map(|_| ())
            .expect_err("stale inside a transaction");
        assert_eq!(sqlstate(&e), "0A000", "{mode}: {e}");
        let msg = e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default();
        assert!(msg.contains("cached plan must not change result type"), "{mode}: {msg}");
        tx.rollback().expect("rollback");
        c.batch_execute(&format!("DROP TABLE {table}")).expect("drop");
    }
}
