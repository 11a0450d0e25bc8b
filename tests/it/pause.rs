//! Issue #25, PAUSE and RESUME for switchovers (REST `POST /api/pause`, `/api/resume`, and the
//! admin console's `PAUSE`/`RESUME` in psql): a PAUSE lets the transaction in flight finish,
//! then closes the pool's server connections; a new statement is held — past its acquire
//! timeout — and RESUME runs it with no error on either client, also when a reload repointed the
//! pool's backend between PAUSE and RESUME.

use std::sync::mpsc;
use std::thread;
use std::time::Duration;

use crate::admin::{addrs, http, with_metrics};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, unique_name};

/// A pool of two connections whose checkouts give up after 2 s: a held statement that waits
/// longer than that proves the pause does not count against its acquire timeout.
fn config(port: u16) -> String {
    let pools =
        pg_pool("main", port, "transaction", 2).replace("acquire_timeout = \"20s\"", "acquire_timeout = \"2s\"");
    with_metrics(&pg_config(&[0], &pools, "main"), None)
}

fn idle_connections(router: &Router) -> u64 {
    let reports = router.control().collect().expect("collect");
    let pools = reports.iter().flat_map(|r| r.counters.pools.iter()).filter(|p| p.name == "main");
    pools.flat_map(|p| p.backends.iter()).map(|b| b.idle).sum()
}

/// Runs `sql` on `client` in a thread; its result arrives on the returned channel.
fn spawn_query(mut client: postgres::Client, sql: String) -> mpsc::Receiver<Result<String, String>> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let res = client.simple_query(&sql).map_err(|e| e.to_string()).map(|msgs| {
            msgs.into_iter()
                .find_map(|m| match m {
                    postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
                    _ => None,
                })
                .unwrap_or_default()
        });
        let _ = tx.send(res);
    });
    rx
}

#[test]
fn pause_waits_for_the_transaction_in_flight_and_resume_runs_the_held_statement() {
    let pg = &dbs().pg;
    let table = unique_name("paused");
    let mut direct = pg.config(pg.primary_port, &pg.user, &pg.password).connect(postgres::NoTls).expect("direct");
    direct.batch_execute(&format!("CREATE TABLE {table} (v int)")).expect("create");
    let router = Router::start(&config(pg.primary_port));
    let (_, api) = addrs(&router);
    let mut a = router.pg("main");
    let b = {
        let mut b = router.pg("main");
        b.simple_query("SELECT 1").expect("b is logged in and served before the pause");
        b
    };
    a.batch_execute(&format!("BEGIN; INSERT INTO {table} VALUES (1)")).expect("a's transaction starts");

    let (paused_tx, paused) = mpsc::channel();
    thread::spawn(move || {
        let _ = paused_tx.send(http(api, "POST", "/api/pause?pool=main&timeout=20s", &[]));
    });
    thread::sleep(Duration::from_millis(400));
    assert!(paused.try_recv().is_err(), "PAUSE waits while a transaction is in flight");
    a.batch_execute("COMMIT").expect("the transaction in flight finishes during the pause");
    let reply = paused.recv_timeout(Duration::from_secs(15)).expect("PAUSE returns once the transaction ended");
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert!(reply.body.contains("\"status\":\"paused\""), "{}", reply.body);
    assert_eq!(idle_connections(&router), 0, "a paused pool gives its server connections back");

    let held = spawn_query(b, format!("SELECT count(*) FROM {table}"));
    // Longer than the pool's 2 s acquire timeout.
    thread::sleep(Duration::from_millis(2600));
    assert!(held.try_recv().is_err(), "a new statement is held while the pool is paused");
    let resumed = http(api, "POST", "/api/resume?pool=main", &[]);
    assert_eq!(resumed.status, 200, "{}", resumed.body);
    let count = held.recv_timeout(Duration::from_secs(15)).expect("the held statement runs after RESUME");
    assert_eq!(count.expect("no error for the held client"), "1", "it saw the committed row");
    a.simple_query("SELECT 1").expect("the other client goes on too");

    let unknown = http(api, "POST", "/api/pause?pool=nope", &[]);
    assert_eq!(unknown.status, 404, "{}", unknown.body);
}

/// `config(port)` with an admin console user, for PAUSE and RESUME typed in psql.
fn console_config(port: u16) -> String {
    format!("{}\n[console]\nadmin_users = [\"dba\"]\npasswords = {{ dba = \"dba-pw\" }}\n", config(port))
}

/// Runs one console command through psql as the console's admin user; its output.
fn console(router: &Router, command: &str) -> String {
    let out = std::process::Command::new("psql")
        .args([
            "-X",
            "-h",
            "127.0.0.1",
            "-p",
            &router.port().to_string(),
            "-U",
            "dba",
            "-d",
            "pgbouncer",
            "-c",
            command,
        ])
        .env("PGPASSWORD", "dba-pw")
        .output()
        .expect("run psql");
    assert!(out.status.success(), "{command}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_reload_between_console_pause_and_resume_repoints_the_held_statement() {
    let pg = &dbs().pg;
    let router = Router::start(&console_config(pg.primary_port));
    let mut a = router.pg("main");
    let port_of = |c: &mut postgres::Client| -> String {
        c.query_one("SELECT current_setting('port')", &[]).expect("port").get(0)
    };
    assert_eq!(port_of(&mut a), pg.primary_port.to_string());
    let mut b = router.pg("main");
    b.simple_query("SELECT 1").expect("b served before the pause");

    // The DBA's runbook, in psql on the admin console.
    assert!(console(&router, "PAUSE main").contains("PAUSE"));
    let held = spawn_query(b, "SELECT current_setting('port')".into());
    thread::sleep(Duration::from_millis(300));
    assert!(held.try_recv().is_err(), "held while paused");

    // The switchover: the pool's backend moves to another server (here the standby).
    router.reload_with(&console_config(pg.replica_port)).expect("reload while paused");
    thread::sleep(Duration::from_millis(300));
    assert!(held.try_recv().is_err(), "still held after the reload: the pause survives it");
    assert!(console(&router, "RESUME").contains("RESUME"));
    let port = held.recv_timeout(Duration::from_secs(15)).expect("runs after RESUME");
    assert_eq!(port.expect("no error for the held client"), pg.replica_port.to_string(), "on the new backend");
    assert_eq!(port_of(&mut a), pg.replica_port.to_string(), "every client now uses the new backend");
}

#[test]
fn console_reconnect_retires_server_connections_once_their_transactions_end() {
    let pg = &dbs().pg;
    let router = Router::start(&console_config(pg.primary_port));
    let mut a = router.pg("main");
    let pid = |c: &mut postgres::Client| -> i32 { c.query_one("SELECT pg_backend_pid()", &[]).expect("pid").get(0) };
    let first = pid(&mut a);
    assert_eq!(pid(&mut a), first, "transaction pooling reuses the idle connection");
    // A transaction in flight keeps its connection through the RECONNECT.
    a.batch_execute("BEGIN").expect("begin");
    let in_tx = pid(&mut a);
    assert!(console(&router, "RECONNECT main").contains("RECONNECT"));
    assert_eq!(pid(&mut a), in_tx, "the open transaction is not interrupted");
    a.batch_execute("COMMIT").expect("commit on the old connection");
    let after = pid(&mut a);
    assert_ne!(after, in_tx, "after its transaction the old connection is closed, not reused");
    assert_eq!(pid(&mut a), after, "the new connection is pooled as usual");
    let mut direct = pg.superuser_client(pg.primary_port);
    crate::support::eventually(Duration::from_secs(10), "the old server process to exit", || {
        let n: i64 = direct
            .query_one("SELECT count(*) FROM pg_stat_activity WHERE pid = $1", &[&in_tx])
            .expect("pg_stat_activity")
            .get(0);
        n == 0
    });
}

#[test]
fn console_kill_ends_the_pools_sessions_and_holds_new_ones_until_resume() {
    let pg = &dbs().pg;
    let table = unique_name("killed");
    let mut direct = pg.config(pg.primary_port, &pg.user, &pg.password).connect(postgres::NoTls).expect("direct");
    direct.batch_execute(&format!("CREATE TABLE {table} (v int)")).expect("create");
    let router = Router::start(&console_config(pg.primary_port));
    let mut idle = router.pg("main");
    idle.simple_query("SELECT 1").expect("idle client served");
    let mut busy = router.pg("main");
    busy.batch_execute(&format!("BEGIN; INSERT INTO {table} VALUES (1)")).expect("transaction in flight");
    assert!(console(&router, "KILL main").contains("KILL"));
    let e = idle.simple_query("SELECT 1").expect_err("the idle client's connection was ended");
    // The FATAL's text is in the DbError, not in the error's Display ("db error").
    let ended = e.as_db_error().is_some_and(|d| d.message().contains("administrator command"));
    assert!(idle.is_closed() || ended, "{e:?}");
    assert!(busy.batch_execute("COMMIT").is_err(), "the client in a transaction was ended too");
    let rows: i64 = direct.query_one(&format!("SELECT count(*) FROM {table}"), &[]).expect("count").get(0);
    assert_eq!(rows, 0, "its transaction was rolled back, never committed");

    // A client that logs in after the KILL has its statements wait for RESUME, as after a PAUSE.
    let next = router.pg("main");
    let held = spawn_query(next, format!("SELECT count(*) FROM {table}"));
    thread::sleep(Duration::from_millis(400));
    assert!(held.try_recv().is_err(), "held while the killed pool is paused");
    assert!(console(&router, "RESUME main").contains("RESUME"));
    let count = held.recv_timeout(Duration::from_secs(15)).expect("runs after RESUME");
    assert_eq!(count.expect("no error for the held client"), "0");
}
