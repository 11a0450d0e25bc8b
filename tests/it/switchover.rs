//! Issue #40, switchover: `POST /api/switchover?pool=&backend=` (console: `SWITCHOVER pool
//! host:port`, used by the PostgreSQL test) pauses the write pool, waits until the named replica has replayed what the
//! primary wrote and is the pool's only writable server — the operator stops or demotes the old
//! primary and promotes the replica meanwhile — then resumes onto it. Under the failover tests'
//! 16-client load no client sees any error, not even inside a transaction (the pause lets every
//! running transaction finish before the old primary goes), and every commit is on the new
//! primary. A replica that has not replayed the primary's writes is refused, the pool left
//! paused until RESUME.

use std::net::SocketAddr;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;

use crate::admin::{addrs, http, with_metrics, Reply};
use crate::failover::{config, my_tables, pgbench, pool, report, Load, MyClient, PgClient, COMMITS_PER_PHASE};
use crate::router::Router;
use crate::support::{eventually, Dbs, Kind, Server};

/// Waits until the switchover's pause drained, as the old primary sees it: a paused pool
/// closes its server connections once the transactions in flight ended, leaving the app user
/// only the health probe's (`app_connections` counts them). The admin API cannot be asked: a
/// SWITCHOVER holds its thread until it is done.
fn drained(mut app_connections: impl FnMut() -> i64) {
    eventually(Duration::from_secs(30), "the pause to drain the pool", || app_connections() <= 1);
}

/// Starts `POST /api/switchover` of pool `main` to `backend` on its own thread.
fn switch_to(api: SocketAddr, port: u16, timeout: &str) -> mpsc::Receiver<Reply> {
    let (tx, rx) = mpsc::channel();
    let path = format!("/api/switchover?pool=main&backend=127.0.0.1:{port}&timeout={timeout}");
    thread::spawn(move || {
        let _ = tx.send(http(api, "POST", &path, &[]));
    });
    rx
}

/// Runs `SWITCHOVER main 127.0.0.1:PORT` in psql on the router's admin console, on its own
/// thread; the channel gets psql's output once the command returned (after the resume).
fn console_switch_to(router: &Router, port: u16) -> mpsc::Receiver<std::process::Output> {
    let (tx, rx) = mpsc::channel();
    let args =
        ["-X", "-h", "127.0.0.1", "-p", &router.port().to_string(), "-U", "dba", "-d", "pgbouncer"].map(str::to_owned);
    let command = format!("SWITCHOVER main 127.0.0.1:{port}");
    thread::spawn(move || {
        let mut psql = std::process::Command::new("psql");
        psql.args(&args).args(["-c", &command]).env("PGPASSWORD", "dba-pw");
        let _ = tx.send(psql.output().expect("run psql"));
    });
    rx
}

/// The JSON number `key` of a switchover reply.
fn field(reply: &Reply, key: &str) -> u64 {
    let v: serde_json::Value = serde_json::from_str(&reply.body).expect("JSON");
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {}", reply.body))
}

#[test]
fn pg_switchover_under_tpcb_loses_nothing_and_refuses_a_replica_behind() {
    let env = Dbs::private();
    let pg = &env.pg;
    pgbench(pg.primary_port, &["-i", "-q", "-s", "1"]);
    pg.primary_client()
        .batch_execute(
            "ALTER TABLE pgbench_history ADD COLUMN port int DEFAULT inet_server_port(); CREATE TABLE marker (v int)",
        )
        .expect("schema");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    let pools = pool(&pg.user, &pg.password, "app", [pg.primary_port, pg.replica_port]);
    let console = "\n[console]\nadmin_users = [\"dba\"]\npasswords = { dba = \"dba-pw\" }\n";
    let r = Router::start(&(with_metrics(&config("postgres", &pools), None) + console));
    let (_, api) = addrs(&r);

    // A standby that has not replayed the primary's last write is refused; the pool stays
    // paused (a statement waits) until RESUME.
    env.pause_replication(Kind::Pg);
    let mut c = crate::pg_util::connect(r.port(), "main", "app").expect("client");
    c.batch_execute("INSERT INTO marker VALUES (1)").expect("a write the standby does not replay");
    let behind = switch_to(api, pg.replica_port, "2s").recv_timeout(Duration::from_secs(30)).expect("reply");
    assert_eq!(behind.status, 409, "{}", behind.body);
    assert!(behind.body.contains("switchover.behind"), "{}", behind.body);
    let (tx, held) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(c.query_one("SELECT count(*) FROM marker", &[]).map(|row| row.get::<_, i64>(0)));
    });
    thread::sleep(Duration::from_millis(300));
    assert!(held.try_recv().is_err(), "held while the refused switchover leaves the pool paused");
    assert_eq!(http(api, "POST", "/api/resume?pool=main", &[]).status, 200);
    let count = held.recv_timeout(Duration::from_secs(15)).expect("runs after RESUME").expect("no error");
    assert_eq!(count, 1, "on the primary");
    env.resume_replication(Kind::Pg);

    let load = Load::start::<PgClient>(&r.port());
    let before = load.until_commits(0, COMMITS_PER_PHASE, Duration::from_secs(60), "commits on the primary");
    // This time from the admin console, as a DBA would in psql.
    let mut old_primary = pg.superuser_client(pg.primary_port);
    let switching = console_switch_to(&r, pg.replica_port);
    drained(|| {
        let sql = "SELECT count(*) FROM pg_stat_activity WHERE usename = 'app'";
        old_primary.query_one(sql, &[]).expect("pg_stat_activity").get(0)
    });
    let stopping = Instant::now();
    env.stop(Server::PgPrimary); // pg_ctl stop -m fast: its last WAL reaches the standby
    let stop = stopping.elapsed();
    let promoting = Instant::now();
    env.promote(Kind::Pg);
    let promotion = promoting.elapsed();
    let out = switching.recv_timeout(Duration::from_secs(90)).expect("SWITCHOVER returns");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && stdout.contains("SWITCHOVER"), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    load.until_commits(before, COMMITS_PER_PHASE, Duration::from_secs(60), "commits after the switchover");
    let mut tally = load.finish();
    report("PostgreSQL switchover", stopping, stop, promotion, &mut tally);

    assert!(tally.refused.is_empty(), "clients got errors outside a transaction: {:?}", tally.refused);
    let errors = (tally.failed_in_transaction, tally.in_doubt, tally.read_only_refusals);
    assert_eq!(errors, (0, 0, 0), "no error at all");
    let mut new_primary = pg.superuser_client(pg.replica_port);
    let row = new_primary
        .query_one(
            "SELECT count(*), count(*) FILTER (WHERE port = $1), count(*) FILTER (WHERE port = $2) FROM pgbench_history",
            &[&i32::from(pg.primary_port), &i32::from(pg.replica_port)],
        )
        .expect("history");
    let (rows, on_old, on_new): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
    assert_eq!(rows, i64::try_from(tally.committed).expect("count"), "every acknowledged commit, nothing else");
    assert!(on_old > 0 && on_new > 0 && on_old + on_new == rows, "old {on_old}, new {on_new}, all {rows}");
}

#[test]
fn mariadb_switchover_sends_no_write_to_the_demoted_primary() {
    let env = Dbs::private();
    let my = &env.my;
    my_tables(my);
    let pools = pool(&my.user, &my.password, &my.database, [my.primary_port, my.replica_port]);
    let r = Router::start(&with_metrics(&config("mysql", &pools), None));
    let (_, api) = addrs(&r);
    let server_id = |port: u16| -> u32 {
        my.superuser_client(port).query_first("SELECT @@server_id").expect("@@server_id").expect("a row")
    };
    let (old_id, new_id) = (server_id(my.primary_port), server_id(my.replica_port));

    let load = Load::start::<MyClient>(&my.opts(r.port(), &my.user, &my.password));
    let before = load.until_commits(0, COMMITS_PER_PHASE, Duration::from_secs(60), "commits on the primary");
    let mut old_primary = my.superuser_client(my.primary_port);
    let switching = switch_to(api, my.replica_port, "60s");
    drained(|| {
        let sql = "SELECT count(*) FROM information_schema.PROCESSLIST WHERE USER = 'app'";
        old_primary.query_first(sql).expect("PROCESSLIST").expect("a row")
    });
    // The old primary stays up, read-only: a write the router sent there would fail with 1290.
    let demoting = Instant::now();
    my.superuser_client(my.primary_port).query_drop("SET GLOBAL read_only = 1").expect("demote");
    my.wait_replica_caught_up(Duration::from_secs(30));
    let demotion = demoting.elapsed();
    let promoting = Instant::now();
    env.promote(Kind::Mariadb);
    let promotion = promoting.elapsed();
    let reply = switching.recv_timeout(Duration::from_secs(60)).expect("SWITCHOVER returns");
    assert_eq!(reply.status, 200, "{}", reply.body);
    load.until_commits(before, COMMITS_PER_PHASE, Duration::from_secs(60), "commits after the switchover");
    let mut tally = load.finish();
    report("MariaDB switchover", demoting, demotion, promotion, &mut tally);
    eprintln!("[failover] MariaDB switchover: pool paused {} ms", field(&reply, "paused_ms"));

    assert!(tally.refused.is_empty(), "clients got errors outside a transaction: {:?}", tally.refused);
    let errors = (tally.failed_in_transaction, tally.in_doubt, tally.read_only_refusals);
    assert_eq!(errors, (0, 0, 0), "no error at all");
    let history = |port: u16| -> (i64, i64, i64) {
        my.superuser_client(port)
            .query_first(format!(
                "SELECT count(*), coalesce(sum(server = {old_id}), 0), coalesce(sum(server = {new_id}), 0) FROM app.hist"
            ))
            .expect("history")
            .expect("a row")
    };
    let (rows, on_old, on_new) = history(my.replica_port);
    assert_eq!(rows, i64::try_from(tally.committed).expect("count"), "every acknowledged commit, nothing else");
    assert!(on_old > 0 && on_new > 0 && on_old + on_new == rows, "old {on_old}, new {on_new}, all {rows}");
    let (on_demoted, ..) = history(my.primary_port);
    assert_eq!(on_demoted, on_old, "the demoted primary took no write after the switchover");
}
