//! Issue #8: backend health checks, replica lag, the read fallback to the primary and weighted
//! selection, against real servers. Faults (paused replay, stopped SQL thread, stopped server)
//! are injected only on private environments. Health is observed from the outside —
//! `/api/pools` and `/metrics` — and routing and selection by where statements actually ran
//! (`pg_is_in_recovery()`, `@@server_id`, `inet_server_port()`).

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;

use crate::router::Router;
use crate::support::{dbs, eventually, free_port, unique_name, Dbs, Kind, Server};

/// Probe interval used throughout: short, so the tests are quick.
const INTERVAL_MS: u64 = 200;

pub(crate) fn get(addr: SocketAddr, path: &str) -> String {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect to admin");
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let req = format!("GET {path} HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\n\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read reply");
    let (head, body) = raw.split_once("\r\n\r\n").expect("reply has a head");
    assert!(head.starts_with("HTTP/1.1 200"), "{head}\n{body}");
    body.to_owned()
}

/// The `/api/pools` entry of backend `port` in `pool`.
pub(crate) fn backend(router: &Router, pool: &str, port: u16) -> serde_json::Value {
    let admin = router.control().endpoints().admin.expect("admin endpoint");
    let v: serde_json::Value = serde_json::from_str(&get(admin, "/api/pools")).expect("JSON");
    let pools = v["pools"].as_array().expect("pools").clone();
    let p = pools.into_iter().find(|p| p["name"] == pool).unwrap_or_else(|| panic!("pool {pool} in {v}"));
    let address = format!("127.0.0.1:{port}");
    let backends = p["backends"].as_array().expect("backends").clone();
    backends.into_iter().find(|b| b["address"] == address.as_str()).unwrap_or_else(|| panic!("{address} in {p}"))
}

fn healthy(router: &Router, pool: &str, port: u16) -> bool {
    backend(router, pool, port)["healthy"].as_bool().expect("healthy flag")
}

/// The value of the `/metrics` sample starting with `series`.
fn metric(router: &Router, series: &str) -> Option<f64> {
    let addr = router.control().endpoints().metrics.expect("metrics endpoint");
    get(addr, "/metrics").lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// `[pools.NAME]` with the given backends (inline tables) and fast health checks.
fn pool(name: &str, user: &str, password: &str, database: &str, mode: &str, backends: &[String]) -> String {
    format!(
        "[pools.{name}]\nmode = \"{mode}\"\nusername = \"{user}\"\npassword = \"{password}\"\ndatabase = \"{database}\"\n\
         max_connections = 40\nacquire_timeout = \"20s\"\nconnect_timeout = \"10s\"\nbackends = [{}]\n\n\
         [pools.{name}.health]\ninterval = \"{INTERVAL_MS}ms\"\ntimeout = \"1s\"\nfailure_threshold = 2\nsuccess_threshold = 2\n\n",
        backends.join(", ")
    )
}

/// A read pool `reads` over `backends` and a write pool `primary` on `primary`. #40: a
/// primary-role pool lends only its writable server, so a pool spread over a standby and the
/// primary (standing in for another replica) is a replica pool; clients name it as their
/// database to run on it.
fn reads_and_primary(db: (&str, &str, &str), mode: &str, backends: &[String], primary: u16) -> String {
    let (user, password, database) = db;
    pool("reads", user, password, database, mode, backends).replacen("]\nmode = ", "]\nrole = \"replica\"\nmode = ", 1)
        + &pool("primary", user, password, database, mode, &[be(primary, "")])
}

fn be(port: u16, extra: &str) -> String {
    format!("{{ host = \"127.0.0.1\", port = {port}{extra} }}")
}

/// A router with one listener of `protocol`, the pools, read/write split between `read` and
/// `write`, and metrics + admin API on ephemeral ports.
fn router(protocol: &str, pools: &str, read: &str, write: &str) -> Router {
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"{protocol}\"\nbind = \"127.0.0.1:0\"\n\n\
         {pools}[routing]\nread_write_split = true\nread_pool = \"{read}\"\nwrite_pool = \"{write}\"\n\n\
         [metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n"
    ))
}

/// Writes on a primary every 50 ms until dropped, so a paused replica falls behind.
struct Writer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(mut write: impl FnMut() + Send + 'static) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        // A plain test thread, not a core: pacing it with a sleep is fine.
        #[allow(clippy::disallowed_methods)]
        let thread = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                write();
                std::thread::sleep(Duration::from_millis(50));
            }
        });
        Writer { stop, thread: Some(thread) }
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Sum over cores of `sqp_replica_fallbacks_total` for read pool `pool` and `outcome`.
fn fallbacks(router: &Router, pool: &str, outcome: &str) -> f64 {
    let addr = router.control().endpoints().metrics.expect("metrics endpoint");
    let labels = format!("pool=\"{pool}\",outcome=\"{outcome}\"");
    get(addr, "/metrics")
        .lines()
        .filter(|l| l.starts_with("sqp_replica_fallbacks_total{") && l.contains(&labels))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// How long reads may take to move once the replica's lag is over the threshold: the check
/// that measured it is the first of `failure_threshold` (2) failing checks, so one or two more
/// intervals, plus generous slack for a loaded machine.
fn move_deadline() -> Duration {
    Duration::from_millis(2 * INTERVAL_MS) + Duration::from_secs(3)
}

/// Whether a replica-eligible read through the router ran on the PostgreSQL standby.
fn pg_read_on_standby(c: &mut postgres::Client) -> bool {
    c.query_one("SELECT pg_is_in_recovery()", &[]).expect("read through the router").get(0)
}

/// Waits until backend `port` of `pool` is `want`, returning how long that took.
fn until_health(router: &Router, pool: &str, port: u16, want: bool, timeout: Duration) -> Duration {
    let started = Instant::now();
    eventually(timeout, &format!("{pool} 127.0.0.1:{port} healthy = {want}"), || healthy(router, pool, port) == want);
    started.elapsed()
}

#[test]
fn pg_paused_replay_makes_the_standby_unhealthy_until_resumed() {
    let env = Dbs::private();
    let pg = &env.pg;
    let pools = pool("primary", &pg.user, &pg.password, &pg.database, "transaction", &[be(pg.primary_port, "")])
        + &pool(
            "replica",
            &pg.user,
            &pg.password,
            &pg.database,
            "transaction",
            &[be(pg.replica_port, ", max_replica_lag = \"1s\"")],
        );
    let router = router("postgres", &pools, "replica", "primary");
    until_health(&router, "replica", pg.replica_port, true, Duration::from_secs(10));
    let series = format!("sqp_backend_healthy{{pool=\"replica\",backend=\"127.0.0.1:{}\"}}", pg.replica_port);
    assert_eq!(metric(&router, &series), Some(1.0));
    let lag = backend(&router, "replica", pg.replica_port);
    assert!(lag["replica_lag_seconds"].as_f64().is_some_and(|s| s < 1.0), "caught up: {lag}");

    let table = unique_name("health_pg");
    let mut setup = pg.primary_client();
    setup
        .batch_execute(&format!("CREATE TABLE {table} (id serial PRIMARY KEY, at timestamptz DEFAULT now())"))
        .expect("create");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    // A client connected before the fault, and its reads on the standby.
    let mut client = router.pg(&pg.database);
    // A fresh environment's first checks may still fail while the standby settles.
    eventually(Duration::from_secs(15), "a healthy standby to serve reads", || pg_read_on_standby(&mut client));
    let insert = format!("INSERT INTO {table} DEFAULT VALUES");
    let (writer_env, writes) = (pg.clone(), insert.clone());
    let writer = Writer::start(move || {
        let _ = writer_env.primary_client().execute(&writes, &[]);
    });
    env.pause_replication(Kind::Pg);
    eventually(Duration::from_secs(15), "a check to measure lag over 1s", || {
        backend(&router, "replica", pg.replica_port)["replica_lag_seconds"].as_f64().is_some_and(|s| s > 1.0)
    });
    eventually(move_deadline(), "reads to move to the primary", || !pg_read_on_standby(&mut client));
    assert!(!pg_read_on_standby(&mut router.pg(&pg.database)), "a new client reads from the primary too");
    // Another client writes: after a write, read-your-writes keeps a session's reads on the primary.
    router.pg(&pg.database).execute(&insert, &[]).expect("writes still run on the primary");
    assert!(fallbacks(&router, "replica", "primary") >= 2.0, "each moved read is counted");
    let took = until_health(&router, "replica", pg.replica_port, false, Duration::from_secs(15));
    // Lag exceeds 1s about one second after the pause; two failing checks then mark it down.
    let allowed = Duration::from_millis(1000 + 3 * INTERVAL_MS + 1500);
    assert!(took <= allowed, "standby marked unhealthy after {took:?} (allowed {allowed:?})");
    let down = backend(&router, "replica", pg.replica_port);
    assert_eq!(down["health_cause"], "lag", "{down}");
    assert!(down["replica_lag_seconds"].as_f64().is_some_and(|s| s > 1.0), "{down}");
    assert!(down["replica_lag_bytes"].as_u64().is_some_and(|b| b > 0), "WAL behind: {down}");
    assert_eq!(metric(&router, &series), Some(0.0));
    let lag_series =
        format!("sqp_backend_replica_lag_seconds{{pool=\"replica\",backend=\"127.0.0.1:{}\"}}", pg.replica_port);
    assert!(metric(&router, &lag_series).is_some_and(|s| s > 1.0));
    assert!(healthy(&router, "primary", pg.primary_port), "the primary is not a lagging replica");

    env.resume_replication(Kind::Pg);
    eventually(Duration::from_secs(15), "reads to come back to the standby", || pg_read_on_standby(&mut client));
    assert!(healthy(&router, "replica", pg.replica_port));
    let back = backend(&router, "replica", pg.replica_port);
    assert!(back["replica_lag_seconds"].as_f64().is_some_and(|s| s <= 1.0), "{back}");
    drop(writer);
}

#[test]
fn mariadb_stopped_sql_thread_makes_the_replica_unhealthy_until_restarted() {
    let env = Dbs::private();
    let my = &env.my;
    let pools = pool("primary", &my.user, &my.password, &my.database, "transaction", &[be(my.primary_port, "")])
        + &pool(
            "replica",
            &my.user,
            &my.password,
            &my.database,
            "transaction",
            &[be(my.replica_port, ", max_replica_lag = \"1s\"")],
        );
    let router = router("mysql", &pools, "replica", "primary");
    until_health(&router, "replica", my.replica_port, true, Duration::from_secs(10));
    assert_eq!(backend(&router, "replica", my.replica_port)["replica_lag_seconds"].as_f64(), Some(0.0));
    let server_id =
        |c: &mut mysql::Conn| -> u64 { c.query_first("SELECT @@server_id").expect("@@server_id").expect("a row") };
    let replica_id = server_id(&mut my.replica_client());
    let primary_id = server_id(&mut my.primary_client());
    assert_ne!(replica_id, primary_id);
    let table = unique_name("health_my");
    my.primary_client()
        .query_drop(format!("CREATE TABLE {table} (id int AUTO_INCREMENT PRIMARY KEY)"))
        .expect("create");
    my.wait_replica_caught_up(Duration::from_secs(20));
    let mut client =
        mysql::Conn::new(my.opts(router.port(), &my.user, &my.password)).expect("connect through the router");
    eventually(Duration::from_secs(15), "a healthy replica to serve reads", || server_id(&mut client) == replica_id);

    env.pause_replication(Kind::Mariadb);
    // A stopped SQL thread is unknown lag from the next check on: reads move within the checks
    // that mark the replica down.
    eventually(move_deadline(), "reads to move to the primary", || server_id(&mut client) == primary_id);
    // Another client writes: after a write, read-your-writes keeps a session's reads on the primary.
    mysql::Conn::new(my.opts(router.port(), &my.user, &my.password))
        .expect("connect through the router")
        .query_drop(format!("INSERT INTO {table} VALUES ()"))
        .expect("writes still run on the primary (the replica refuses them)");
    assert!(fallbacks(&router, "replica", "primary") >= 1.0, "the moved read is counted");
    let took = until_health(&router, "replica", my.replica_port, false, Duration::from_secs(10));
    // A stopped SQL thread is unknown lag at once: two failing checks, no lag to build up.
    let allowed = Duration::from_millis(3 * INTERVAL_MS + 1500);
    assert!(took <= allowed, "replica marked unhealthy after {took:?} (allowed {allowed:?})");
    let down = backend(&router, "replica", my.replica_port);
    assert_eq!(down["health_cause"], "lag", "{down}");
    assert!(down["replica_lag_seconds"].is_null(), "unknown lag is shown as null: {down}");
    let failures = format!(
        "sqp_backend_health_check_failures_total{{pool=\"replica\",backend=\"127.0.0.1:{}\",reason=\"lag\"}}",
        my.replica_port
    );
    assert!(metric(&router, &failures).is_some_and(|n| n >= 2.0));

    env.resume_replication(Kind::Mariadb);
    eventually(Duration::from_secs(15), "reads to come back to the replica", || server_id(&mut client) == replica_id);
    assert!(healthy(&router, "replica", my.replica_port));
}

/// Opens `n` PostgreSQL clients at once through the router (session mode: each holds its own
/// backend connection) and returns the backend port each landed on. Clients name the pool as
/// their database.
fn pg_ports(router: &Router, pool: &str, n: usize) -> Vec<u16> {
    std::thread::scope(|s| {
        let clients: Vec<_> = (0..n)
            .map(|_| {
                s.spawn(|| {
                    let mut c = router.pg(pool);
                    let port: i32 = c.query_one("SELECT inet_server_port()", &[]).expect("port").get(0);
                    (c, port as u16)
                })
            })
            .collect();
        // Hold every client until all have answered, so no connection is reused.
        let held: Vec<_> = clients.into_iter().map(|h| h.join().expect("client thread")).collect();
        held.into_iter().map(|(_, port)| port).collect()
    })
}

#[test]
fn a_stopped_replica_is_skipped_and_returns_after_restart() {
    let env = Dbs::private();
    let pg = &env.pg;
    // The primary stands in as the pool's second backend.
    let pools = reads_and_primary(
        (&pg.user, &pg.password, &pg.database),
        "session",
        &[be(pg.replica_port, ""), be(pg.primary_port, "")],
        pg.primary_port,
    );
    // A fresh standby that is still starting fails the first checks and takes no connections.
    eventually(Duration::from_secs(30), "the standby to accept connections", || {
        pg.config(pg.replica_port, &pg.user, &pg.password).connect(postgres::NoTls).is_ok()
    });
    let router = router("postgres", &pools, "reads", "primary");
    let before = pg_ports(&router, "reads", 6);
    assert!(before.contains(&pg.replica_port) && before.contains(&pg.primary_port), "{before:?}");

    env.stop(Server::PgReplica);
    until_health(&router, "reads", pg.replica_port, false, Duration::from_secs(5));
    assert_eq!(backend(&router, "reads", pg.replica_port)["health_cause"], "connect");
    let during = pg_ports(&router, "reads", 6);
    assert!(during.iter().all(|p| *p == pg.primary_port), "new connections skip the stopped replica: {during:?}");

    env.start(Server::PgReplica);
    until_health(&router, "reads", pg.replica_port, true, Duration::from_secs(15));
    // The six connections of `during` are idle on the primary and reused first.
    let after = pg_ports(&router, "reads", 12);
    assert!(after.contains(&pg.replica_port), "the restarted replica gets connections again: {after:?}");
}

#[test]
fn an_unreachable_backend_costs_clients_nothing() {
    // A closed port: no fault on the shared servers. A long interval leaves the first failed
    // connects (passive health) or the prober's first check to find it, whichever comes first.
    let pg = &dbs().pg;
    let dead = free_port();
    let pools =
        pool("reads", &pg.user, &pg.password, &pg.database, "session", &[be(dead, ""), be(pg.primary_port, "")])
            .replace(&format!("interval = \"{INTERVAL_MS}ms\""), "interval = \"60s\"");
    let router = router("postgres", &pools, "reads", "reads");
    let ports = pg_ports(&router, "reads", 8);
    assert!(ports.iter().all(|p| *p == pg.primary_port), "{ports:?}");
    let b = backend(&router, "reads", dead);
    assert_eq!((b["healthy"].as_bool(), b["health_cause"].as_str()), (Some(false), Some("connect")), "{b}");
}

#[test]
fn weighted_backends_get_connections_two_to_one() {
    let pg = &dbs().pg;
    let pools = reads_and_primary(
        (&pg.user, &pg.password, &pg.database),
        "session",
        &[be(pg.primary_port, ", weight = 2"), be(pg.replica_port, ", weight = 1")],
        pg.primary_port,
    );
    // The default policy, least_outstanding: 30 logins racing each other skewed it (23:7 and
    // 28:2 were seen) until connections being opened counted as load (#22).
    let router = router("postgres", &pools, "reads", "primary");
    until_health(&router, "reads", pg.replica_port, true, Duration::from_secs(10));
    // The first login borrows a connection to learn the server parameters; after it, every
    // held client is one selection (but for that one idle connection, reused).
    let mut first = router.pg("reads");
    first.simple_query("SELECT 1").expect("warm-up");
    drop(first);
    let ports = pg_ports(&router, "reads", 30);
    let on_primary = ports.iter().filter(|p| **p == pg.primary_port).count();
    let on_replica = ports.iter().filter(|p| **p == pg.replica_port).count();
    assert_eq!(on_primary + on_replica, 30);
    assert!(
        (19..=21).contains(&on_primary) && (9..=11).contains(&on_replica),
        "2:1 expected, got {on_primary}:{on_replica}"
    );
}

/// Stopping the only standby of a split's read pool costs clients nothing: reads issued after
/// the stop (none was in flight) all succeed, on the primary, in an existing session and a new
/// one; once the standby is back, reads return to it.
#[test]
fn reads_survive_a_stopped_standby_and_return_after_restart() {
    let env = Dbs::private();
    let pg = &env.pg;
    let pools = pool("primary", &pg.user, &pg.password, &pg.database, "transaction", &[be(pg.primary_port, "")])
        + &pool("replica", &pg.user, &pg.password, &pg.database, "transaction", &[be(pg.replica_port, "")]);
    let router = router("postgres", &pools, "replica", "primary");
    until_health(&router, "replica", pg.replica_port, true, Duration::from_secs(10));
    let mut client = router.pg(&pg.database);
    // A fresh environment's first checks may still fail while the standby settles.
    eventually(Duration::from_secs(15), "a healthy standby to serve reads", || pg_read_on_standby(&mut client));

    env.stop(Server::PgReplica);
    let mut errors = Vec::new();
    for _ in 0..20 {
        match client.query_one("SELECT pg_is_in_recovery()", &[]) {
            Ok(row) => assert!(!row.get::<_, bool>(0), "the stopped standby ran nothing"),
            Err(e) => errors
                .push(format!("{:?}", e.as_db_error().map(|d| (d.code().code().to_owned(), d.message().to_owned())))),
        }
    }
    assert!(errors.is_empty(), "reads after the stop failed: {errors:?}");
    assert!(!pg_read_on_standby(&mut router.pg(&pg.database)), "a new session reads from the primary");
    assert!(!healthy(&router, "replica", pg.replica_port));
    assert!(fallbacks(&router, "replica", "primary") >= 20.0);

    env.start(Server::PgReplica);
    eventually(Duration::from_secs(20), "reads to come back to the standby", || pg_read_on_standby(&mut client));
}

/// The same for MariaDB: reads after the replica stopped all succeed on the primary, and return
/// to the replica once it is back.
#[test]
fn mariadb_reads_survive_a_stopped_replica_and_return_after_restart() {
    let env = Dbs::private();
    let my = &env.my;
    let pools = pool("primary", &my.user, &my.password, &my.database, "transaction", &[be(my.primary_port, "")])
        + &pool("replica", &my.user, &my.password, &my.database, "transaction", &[be(my.replica_port, "")]);
    let router = router("mysql", &pools, "replica", "primary");
    until_health(&router, "replica", my.replica_port, true, Duration::from_secs(10));
    let server_id =
        |c: &mut mysql::Conn| -> mysql::Result<u64> { c.query_first("SELECT @@server_id").map(|v| v.unwrap_or(0)) };
    let replica_id = server_id(&mut my.replica_client()).expect("replica id");
    let mut client =
        mysql::Conn::new(my.opts(router.port(), &my.user, &my.password)).expect("connect through the router");
    eventually(Duration::from_secs(15), "a healthy replica to serve reads", || {
        server_id(&mut client).is_ok_and(|id| id == replica_id)
    });

    env.stop(Server::MyReplica);
    let mut errors = Vec::new();
    for _ in 0..20 {
        match server_id(&mut client) {
            Ok(id) => assert_ne!(id, replica_id, "the stopped replica ran nothing"),
            Err(e) => errors.push(e.to_string()),
        }
    }
    assert!(errors.is_empty(), "reads after the stop failed: {errors:?}");
    assert!(!healthy(&router, "replica", my.replica_port));

    env.start(Server::MyReplica);
    eventually(Duration::from_secs(20), "reads to come back to the replica", || {
        server_id(&mut client).is_ok_and(|id| id == replica_id)
    });
}

/// A session on a backend that turns unhealthy finishes its transaction there; its next one
/// runs elsewhere. In session mode the session's settings and prepared statements follow it.
/// The pool's second backend is the primary, standing in for another replica.
#[test]
fn pg_a_transaction_finishes_on_a_backend_marked_down_and_the_next_one_moves() {
    let env = Dbs::private();
    let pg = &env.pg;
    let table = unique_name("move_pg");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {table} (id serial PRIMARY KEY)")).expect("create");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    for mode in ["transaction", "session"] {
        let pools = reads_and_primary(
            (&pg.user, &pg.password, &pg.database),
            mode,
            &[be(pg.replica_port, ", max_replica_lag = \"1s\""), be(pg.primary_port, "")],
            pg.primary_port,
        );
        let router = router("postgres", &pools, "reads", "primary");
        until_health(&router, "reads", pg.replica_port, true, Duration::from_secs(15));
        // New connections alternate between the backends; the others stay in their transactions
        // (`held`) so that each attempt opens one.
        let (mut client, mut held) = (None, Vec::new());
        for _ in 0..6 {
            let mut c = router.pg("reads");
            c.batch_execute("SET application_name = 'moved'").expect("SET");
            let statement = c.prepare("SELECT $1::int + 1").expect("prepare");
            // Read-only: the split sends it to the read pool (a read-write one goes to `primary`).
            c.batch_execute("BEGIN READ ONLY").expect("BEGIN");
            if pg_read_on_standby(&mut c) {
                client = Some((c, statement));
                break;
            }
            held.push(c);
        }
        drop(held);
        let (mut c, statement) = client.expect("a transaction on the standby");

        let insert = format!("INSERT INTO {table} DEFAULT VALUES");
        let writer_env = pg.clone();
        let writer = Writer::start(move || {
            let _ = writer_env.primary_client().execute(&insert, &[]);
        });
        env.pause_replication(Kind::Pg);
        until_health(&router, "reads", pg.replica_port, false, Duration::from_secs(20));
        assert!(pg_read_on_standby(&mut c), "{mode}: the open transaction stays on its backend");
        c.query_one(&format!("SELECT count(*) FROM {table}"), &[]).expect("the transaction goes on");
        c.batch_execute("COMMIT").expect("COMMIT on the backend marked down");
        for _ in 0..5 {
            assert!(!pg_read_on_standby(&mut c), "{mode}: the next transactions moved");
        }
        let name: String = c.query_one("SHOW application_name", &[]).expect("SHOW").get(0);
        assert_eq!(name, "moved", "{mode}: the setting followed the session");
        let two: i32 = c.query_one(&statement, &[&41i32]).expect("prepared statement after the move").get(0);
        assert_eq!(two, 42);
        drop(writer);
        env.resume_replication(Kind::Pg);
        pg.wait_replica_caught_up(Duration::from_secs(30));
    }
}

/// The same for MariaDB, with the replica's SQL thread stopped.
#[test]
fn mariadb_a_transaction_finishes_on_a_backend_marked_down_and_the_next_one_moves() {
    let env = Dbs::private();
    let my = &env.my;
    let server_id =
        |c: &mut mysql::Conn| -> u64 { c.query_first("SELECT @@server_id").expect("@@server_id").expect("a row") };
    let replica_id = server_id(&mut my.replica_client());
    for mode in ["transaction", "session"] {
        let pools = reads_and_primary(
            (&my.user, &my.password, &my.database),
            mode,
            &[be(my.replica_port, ", max_replica_lag = \"1s\""), be(my.primary_port, "")],
            my.primary_port,
        );
        let router = router("mysql", &pools, "reads", "primary");
        until_health(&router, "reads", my.replica_port, true, Duration::from_secs(15));
        let (mut client, mut held) = (None, Vec::new());
        for _ in 0..6 {
            let opts = my.opts(router.port(), &my.user, &my.password).db_name(Some("reads"));
            let mut c = mysql::Conn::new(opts).expect("connect through the router");
            c.query_drop("SET SESSION time_zone = '+03:00'").expect("SET");
            let statement = c.prep("SELECT ? + 1").expect("prepare");
            // Read-only: the split sends it to the read pool (a read-write one goes to `primary`).
            c.query_drop("START TRANSACTION READ ONLY").expect("START TRANSACTION");
            if server_id(&mut c) == replica_id {
                client = Some((c, statement));
                break;
            }
            held.push(c);
        }
        drop(held);
        let (mut c, statement) = client.expect("a transaction on the replica");

        env.pause_replication(Kind::Mariadb);
        until_health(&router, "reads", my.replica_port, false, Duration::from_secs(20));
        assert_eq!(server_id(&mut c), replica_id, "{mode}: the open transaction stays on its backend");
        c.query_drop("COMMIT").expect("COMMIT on the backend marked down");
        for _ in 0..5 {
            assert_ne!(server_id(&mut c), replica_id, "{mode}: the next transactions moved");
        }
        let zone: String = c.query_first("SELECT @@session.time_zone").expect("SELECT").expect("a row");
        assert_eq!(zone, "+03:00", "{mode}: the setting followed the session");
        let two: i64 = c.exec_first(&statement, (41,)).expect("prepared statement after the move").expect("a row");
        assert_eq!(two, 42);
        env.resume_replication(Kind::Mariadb);
        until_health(&router, "reads", my.replica_port, true, Duration::from_secs(20));
    }
}
