//! Issue #22: per-statement replica choice by weight, and causal reads (`read_your_writes =
//! "causal"`) against real PostgreSQL servers. Where a statement ran is proven by the server
//! (`inet_server_port()`, `pg_is_in_recovery()`); replay is paused with `pg_wal_replay_pause()`
//! on private environments only.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use crate::health::{backend, get};
use crate::pg_util::psql;
use crate::router::Router;
use crate::routing_api::{enc, http};
use crate::support::{dbs, eventually, unique_name, Dbs, Kind, PgEnv};

/// `[pools.NAME]` of the app user over `backends` (inline tables), fast health checks.
pub(crate) fn pool(pg: &PgEnv, name: &str, backends: &[String]) -> String {
    format!(
        "[pools.{name}]\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
         max_connections = 20\nacquire_timeout = \"20s\"\nbackends = [{}]\n\n\
         [pools.{name}.health]\ninterval = \"100ms\"\ntimeout = \"1s\"\nfailure_threshold = 2\nsuccess_threshold = 1\n\n",
        backends.join(", "),
        u = pg.user,
        p = pg.password,
        d = pg.database,
    )
}

pub(crate) fn be(port: u16, extra: &str) -> String {
    format!("{{ host = \"127.0.0.1\", port = {port}{extra} }}")
}

/// A router splitting reads to pool `replica` and writes to `primary`, with `routing` lines
/// added to `[routing]`, one core, admin API on an ephemeral port.
pub(crate) fn router(pools: &str, routing: &str) -> Router {
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         {pools}[routing]\nread_write_split = true\nread_pool = \"replica\"\nwrite_pool = \"primary\"\n{routing}\n\
         [metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n"
    ))
}

/// The value of `/metrics` series `series` (full name with labels), 0 when absent.
pub(crate) fn metric(router: &Router, series: &str) -> f64 {
    let addr = router.control().endpoints().metrics.expect("metrics endpoint");
    get(addr, "/metrics").lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok()).unwrap_or(0.0)
}

fn causal_reads(router: &Router, outcome: &str) -> f64 {
    metric(router, &format!("sqp_causal_reads_total{{core=\"0\",pool=\"replica\",outcome=\"{outcome}\"}}"))
}

fn healthy(router: &Router, port: u16) -> bool {
    backend(router, "replica", port)["healthy"].as_bool().expect("healthy flag")
}

/// The server port and recovery state of one simple-query read through `c`.
pub(crate) fn where_read(c: &mut postgres::Client, sql: &str) -> Vec<String> {
    let rows = c.simple_query(sql).expect("read through the router");
    rows.iter()
        .find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => {
                Some((0..r.len()).map(|i| r.get(i).unwrap_or("NULL").to_owned()).collect())
            }
            _ => None,
        })
        .expect("a row")
}

/// Writes on the primary every 50 ms until dropped, so a paused standby falls behind.
struct Writer {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Writer {
    fn start(pg: &PgEnv, table: &str) -> Writer {
        let stop = Arc::new(AtomicBool::new(false));
        let (flag, pg, sql) = (stop.clone(), pg.clone(), format!("INSERT INTO {table} DEFAULT VALUES"));
        let thread = std::thread::spawn(move || {
            let mut c = pg.primary_client();
            while !flag.load(Ordering::Relaxed) {
                let _ = c.execute(&sql, &[]);
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

#[test]
fn two_standbys_share_reads_three_to_one_and_a_lagging_one_gets_none() {
    let env = Dbs::private();
    let pg = &env.pg;
    let second = env.second_pg_standby();
    let lag = ", max_replica_lag = \"1s\"";
    let pools = pool(pg, "primary", &[be(pg.primary_port, "")])
        + &pool(
            pg,
            "replica",
            &[be(pg.replica_port, &format!("{lag}, weight = 3")), be(second, &format!("{lag}, weight = 1"))],
        );
    let router = router(&pools, "");
    for port in [pg.replica_port, second] {
        eventually(Duration::from_secs(15), "both standbys healthy", || healthy(&router, port));
    }
    // Four transaction-pooled clients at once, as an application pool reads.
    let count = |per_client: usize| {
        let ports: Vec<u16> = std::thread::scope(|s| {
            let clients: Vec<_> = (0..4)
                .map(|_| {
                    s.spawn(|| {
                        let mut client = router.pg(&pg.database);
                        (0..per_client)
                            .map(|_| where_read(&mut client, "SELECT inet_server_port()")[0].parse().expect("port"))
                            .collect::<Vec<u16>>()
                    })
                })
                .collect();
            clients.into_iter().flat_map(|c| c.join().expect("client")).collect()
        });
        let on = |port: u16| ports.iter().filter(|p| **p == port).count();
        assert_eq!(on(pg.replica_port) + on(second), ports.len(), "every read on a standby: {ports:?}");
        (on(pg.replica_port), on(second))
    };
    let (three, one) = count(100);
    println!("weights 3:1, 4 clients -> reads {three}:{one}");
    assert!((270..=330).contains(&three) && (90..=110).contains(&one), "3:1 within 10% expected, got {three}:{one}");
    let checkouts = |port: u16| {
        metric(
            &router,
            &format!("sqp_backend_checkouts_total{{core=\"0\",pool=\"replica\",backend=\"127.0.0.1:{port}\"}}"),
        )
    };
    let (a, b) = (checkouts(pg.replica_port), checkouts(second));
    assert!(a >= 270.0 && b >= 90.0 && a + b <= 408.0, "per-backend checkouts {a}:{b}");

    let table = unique_name("causal_lag");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {table} (id serial PRIMARY KEY)")).expect("create");
    let writer = Writer::start(pg, &table);
    pg.superuser_client(second).batch_execute("SELECT pg_wal_replay_pause()").expect("pause the second standby");
    eventually(Duration::from_secs(20), "the paused standby marked unhealthy", || !healthy(&router, second));
    let (three, one) = count(25);
    println!("second standby paused past max_replica_lag -> reads {three}:{one}");
    assert_eq!((three, one), (100, 0), "the lagging standby gets no reads");
    pg.superuser_client(second).batch_execute("SELECT pg_wal_replay_resume()").expect("resume");
    drop(writer);
    eventually(Duration::from_secs(20), "the second standby back", || healthy(&router, second));
}

#[test]
fn causal_reads_see_the_sessions_writes_and_return_to_the_standby() {
    let env = Dbs::private();
    let pg = &env.pg;
    // No lag threshold: the paused standby stays healthy, so only the causal check keeps a
    // session that wrote off it.
    let pools = pool(pg, "primary", &[be(pg.primary_port, "")]) + &pool(pg, "replica", &[be(pg.replica_port, "")]);
    let router = router(&pools, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let table = unique_name("causal");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {table} (id int PRIMARY KEY)")).expect("create");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    let read = format!("SELECT count(*), pg_is_in_recovery() FROM {table}");
    let mut client = router.pg(&pg.database);
    eventually(Duration::from_secs(15), "reads on the standby", || where_read(&mut client, &read)[1] == "t");

    env.pause_replication(Kind::Pg);
    client.simple_query(&format!("INSERT INTO {table} VALUES (1)")).expect("write");
    assert_eq!(where_read(&mut client, &read), ["1", "f"], "the writer reads its row, on the primary");
    assert!(causal_reads(&router, "fell_back_to_primary") >= 1.0, "the fallback is counted");
    let mut other = router.pg(&pg.database);
    assert_eq!(where_read(&mut other, &read), ["0", "t"], "a session that did not write reads the paused standby");
    // The causal token hands the writer's position to another connection.
    let token = where_read(&mut client, "SHOW querypilot.causal_token").remove(0);
    assert!(token.starts_with("pg:"), "token {token}");
    let bad = other.simple_query("SET querypilot.causal_token = 'nonsense'").expect_err("an invalid token is refused");
    assert_eq!(bad.code(), Some(&postgres::error::SqlState::INVALID_PARAMETER_VALUE), "{bad}");
    assert_eq!(where_read(&mut other, &read), ["0", "t"], "a refused token changes nothing");
    other.simple_query(&format!("SET querypilot.causal_token = '{token}'")).expect("hand the token over");
    assert_eq!(where_read(&mut other, &read), ["1", "f"], "the token's holder reads the write too");
    // The dry-run shows the position and the paused standby behind it (#22).
    let admin = router.control().endpoints().admin.expect("admin endpoint");
    let path = format!("/api/routing/test?protocol=postgres&sql={}&causal_token={}", enc(&read), enc(&token));
    let (status, view) = http(admin, "GET", &path, None);
    let replica = &view["causal"]["replicas"][0];
    assert_eq!(
        (status, replica["why"].as_str(), replica["qualifies"].as_bool()),
        (200, Some("behind"), Some(false)),
        "{view}"
    );
    assert!(replica["applied"].as_str().is_some_and(|a| a.starts_with("pg:")), "{view}");
    // ...or as a startup setting, `options=-c querypilot.causal_token=...` (PGOPTIONS).
    let mut startup = pg.config(router.port(), &pg.user, &pg.password);
    startup.options(&format!("-c querypilot.causal_token={token}"));
    let mut third = startup.connect(postgres::NoTls).expect("connect with the token at startup");
    assert_eq!(where_read(&mut third, &read), ["1", "f"], "a token passed at startup is adopted");
    startup.options("-c querypilot.causal_token=nonsense");
    let refused = startup.connect(postgres::NoTls).err().expect("an invalid startup token refuses the login");
    assert_eq!(refused.code(), Some(&postgres::error::SqlState::INVALID_PARAMETER_VALUE), "{refused}");
    client.batch_execute(&format!("BEGIN; INSERT INTO {table} VALUES (2); COMMIT")).expect("a writing transaction");
    assert_eq!(where_read(&mut client, &read), ["2", "f"]);

    env.resume_replication(Kind::Pg);
    eventually(Duration::from_secs(20), "the same session's reads back on the standby", || {
        where_read(&mut client, &read) == ["2", "t"]
    });
    let on_replica = causal_reads(&router, "served_by_replica") + causal_reads(&router, "waited");
    assert!(on_replica >= 1.0, "the read on the caught-up standby is counted");

    env.pause_replication(Kind::Pg);
    client.simple_query(&format!("INSERT INTO {table} VALUES (3)")).expect("write");
    assert_eq!(where_read(&mut client, &read), ["3", "f"]);
    client.simple_query("DISCARD ALL").expect("discard all");
    assert_eq!(where_read(&mut client, &read), ["2", "t"], "DISCARD ALL forgets the session's writes");
    client.simple_query(&format!("INSERT INTO {table} VALUES (4)")).expect("write");
    client.simple_query("RESET ALL").expect("reset all");
    assert_eq!(where_read(&mut client, &read), ["2", "t"], "RESET ALL forgets them too");
    env.resume_replication(Kind::Pg);
}

/// An application pool: 8 long-lived connections, each running "write one row, then read it
/// ten times" requests. Counts the reads served by the standby and any read that missed the
/// row its own request wrote.
fn app_pool_workload(router: &Router, pg: &PgEnv, table: &str) -> (usize, usize, usize) {
    std::thread::scope(|s| {
        let workers: Vec<_> = (0..8)
            .map(|w| {
                s.spawn(move || {
                    let mut c = router.pg(&pg.database);
                    let (mut on_standby, mut stale, mut reads) = (0, 0, 0);
                    for r in 0..15 {
                        let id = w * 1000 + r;
                        c.simple_query(&format!("INSERT INTO {table} VALUES ({id})")).expect("write");
                        for _ in 0..10 {
                            let row = where_read(
                                &mut c,
                                &format!("SELECT count(*), pg_is_in_recovery() FROM {table} WHERE id = {id}"),
                            );
                            reads += 1;
                            on_standby += usize::from(row[1] == "t");
                            stale += usize::from(row[0] != "1");
                        }
                    }
                    (on_standby, stale, reads)
                })
            })
            .collect();
        workers.into_iter().map(|h| h.join().expect("worker")).fold((0, 0, 0), |a, b| (a.0 + b.0, a.1 + b.1, a.2 + b.2))
    })
}

#[test]
fn app_pool_reads_mostly_from_the_standby_in_causal_mode_and_never_stale() {
    let pg = &dbs().pg;
    let pools = pool(pg, "primary", &[be(pg.primary_port, "")]) + &pool(pg, "replica", &[be(pg.replica_port, "")]);
    let mut shares = Vec::new();
    for mode in ["causal", "session"] {
        let table = unique_name("causal_app");
        pg.primary_client().batch_execute(&format!("CREATE TABLE {table} (id int PRIMARY KEY)")).expect("create");
        pg.wait_replica_caught_up(Duration::from_secs(20));
        let router = router(&pools, &format!("read_your_writes = \"{mode}\""));
        let (on_standby, stale, reads) = app_pool_workload(&router, pg, &table);
        let share = on_standby as f64 / reads as f64;
        println!(
            "read_your_writes = {mode}: {on_standby} of {reads} reads on the standby ({:.1}%), {stale} stale",
            share * 100.0
        );
        assert_eq!(stale, 0, "{mode}: a read missed the row its request wrote");
        shares.push(share);
        if mode == "causal" {
            // psql (libpq) takes the ParameterStatus that follows a write's answer in its stride.
            let script = format!(
                "INSERT INTO {table} VALUES (999999);\nSELECT count(*) FROM {table} WHERE id = 999999;\nSHOW querypilot.causal_token;\n"
            );
            let out = psql(router.port(), &pg.database, &pg.password, &["-q", "-At", "-v", "ON_ERROR_STOP=1"], &script);
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
            let lines: Vec<&str> = stdout.lines().collect();
            assert!(lines.len() == 2 && lines[0] == "1" && lines[1].starts_with("pg:"), "psql printed {stdout:?}");
        }
    }
    assert!(shares[0] > 0.5, "causal: most reads on the standby, got {:.1}%", shares[0] * 100.0);
    assert!(shares[1] < 0.05, "session: reads collapse onto the primary, got {:.1}%", shares[1] * 100.0);
}
