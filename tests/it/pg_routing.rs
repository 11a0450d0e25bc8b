//! Issue #5 for PostgreSQL: where each statement actually ran (pg_is_in_recovery() on the
//! server that answered), through a read/write-split router in front of the harness's primary
//! and hot standby: safe reads on the standby, everything unsafe on the primary,
//! read-after-write, rules, rejects, hints, and pgbench -S counted on both servers.

use std::process::Command;
use std::time::Duration;

use crate::pg_util::{sqlstate, superuser};
use crate::router::{pg_pool, Router};
use crate::support::{dbs, eventually, unique_name};

/// A split config: `primary` and `replica` pools on the harness's servers, `extra` appended.
/// Clients here name databases no pool serves (pgbench's, a rule's `database`): they opt in to
/// the default pool.
fn split_config(database: &str, extra: &str) -> String {
    let pg = &dbs().pg;
    let primary = pg_pool("primary", pg.primary_port, "transaction", 4);
    let replica = pg_pool("replica", pg.replica_port, "transaction", 4);
    let db = |p: String| p.replace(&format!("database = \"{}\"", pg.database), &format!("database = \"{database}\""));
    format!(
        "[general]\ncores = [0, 1]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n{}\n{}\n\
         [routing]\nread_write_split = true\nread_pool = \"replica\"\nwrite_pool = \"primary\"\n\
         unknown_database = \"default_pool\"\n{extra}",
        db(primary),
        db(replica)
    )
}

/// Whether the statement (which must return pg_is_in_recovery() in its first column) ran on
/// the standby.
fn on_standby(c: &mut postgres::Client, sql: &str) -> bool {
    let rows = c.simple_query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let value = rows
        .iter()
        .find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{sql}: no row"));
    value == "t"
}

fn client(r: &Router, database: &str) -> postgres::Client {
    r.pg(database)
}

#[test]
fn safe_reads_reach_the_standby_and_everything_unsafe_the_primary() {
    let t = unique_name("route_t");
    let s = unique_name("route_s");
    let f = unique_name("route_f");
    let mut admin = dbs().pg.primary_client();
    admin
        .batch_execute(&format!(
            "CREATE TABLE {t}(id int primary key, v int); INSERT INTO {t} VALUES (1, 1);
             CREATE SEQUENCE {s};
             CREATE FUNCTION {f}() RETURNS int VOLATILE LANGUAGE sql AS 'SELECT 1';"
        ))
        .expect("setup");
    dbs().pg.wait_replica_caught_up(Duration::from_secs(20));
    let r = Router::start(&split_config(&dbs().pg.database, ""));
    let mut c = client(&r, "app");
    assert!(on_standby(&mut c, "SELECT pg_is_in_recovery()"), "a safe read runs on the standby");
    assert!(on_standby(&mut c, &format!("SELECT pg_is_in_recovery(), v FROM {t} WHERE id = 1")));
    let unsafe_reads = [
        format!("SELECT pg_is_in_recovery(), v FROM {t} WHERE id = 1 FOR UPDATE"),
        format!("SELECT pg_is_in_recovery(), nextval('{s}')"),
        "SELECT pg_is_in_recovery(), random()".to_owned(),
        format!("WITH u AS (UPDATE {t} SET v = v WHERE id = 1 RETURNING v) SELECT pg_is_in_recovery() FROM u"),
        format!("SELECT pg_is_in_recovery(), {f}()"),
        // sqlparser cannot parse ORDER BY ... USING: unknown never means safe.
        "SELECT pg_is_in_recovery() ORDER BY 1 USING <".to_owned(),
    ];
    for sql in &unsafe_reads {
        // A fresh session each time, so read-after-write of an earlier one does not decide.
        let mut fresh = client(&r, "app");
        assert!(!on_standby(&mut fresh, sql), "must run on the primary: {sql}");
    }
}

#[test]
fn after_a_write_the_session_reads_from_the_primary_and_others_do_not() {
    let t = unique_name("route_raw");
    dbs().pg.primary_client().batch_execute(&format!("CREATE TABLE {t}(id int)")).expect("setup");
    dbs().pg.wait_replica_caught_up(Duration::from_secs(20));
    // The session mode (causal, the default, has its own tests in causal.rs).
    let r = Router::start(&split_config(&dbs().pg.database, "read_your_writes = \"session\""));
    let mut writer = client(&r, "app");
    let mut other = client(&r, "app");
    assert!(on_standby(&mut writer, "SELECT pg_is_in_recovery()"));
    writer.batch_execute(&format!("INSERT INTO {t} VALUES (1)")).expect("insert");
    let seen: i64 = writer.query_one(&format!("SELECT count(*) FROM {t}"), &[]).expect("read").get(0);
    assert_eq!(seen, 1, "the writer reads its own write");
    assert!(!on_standby(&mut writer, "SELECT pg_is_in_recovery()"), "pinned to the primary after writing");
    assert!(on_standby(&mut other, "SELECT pg_is_in_recovery()"), "another session is unaffected");
    // Prepared statements follow the same decision at execute time.
    let row = other.query_one("SELECT pg_is_in_recovery()", &[]).expect("prepared read");
    assert!(row.get::<_, bool>(0), "an extended-protocol read also reaches the standby");
}

#[test]
fn rules_hints_and_rejects_behave_as_configured() {
    let hash = querypilot::sql::fingerprint::fingerprint(
        "SELECT pg_is_in_recovery(), 'hashed'",
        querypilot::sql::Dialect::Postgres,
    )
    .0;
    let extra = format!(
        r#"
[[routing.pattern_rules]]
name = "template-to-primary"
type = "template"
pattern = "SELECT pg_is_in_recovery(), 7"
pool = "primary"

[[routing.pattern_rules]]
name = "regex-to-primary"
type = "regex"
pattern = "force_primary"
pool = "primary"

[[routing.pattern_rules]]
name = "hash-to-primary"
type = "hash"
pattern = "{hash}"
pool = "primary"

[[routing.pattern_rules]]
name = "no-drops"
type = "regex"
pattern = "(?i)^\\s*drop\\s"
reject = "DROP is disabled by policy"

[[routing.rules]]
name = "reporting-db-on-primary"
database = "reporting"
pool = "primary"

[[routing.rules]]
name = "mysql-only"
protocol = "mysql"
reject = "never for postgres clients"
"#
    );
    let r = Router::start(&split_config(&dbs().pg.database, &extra));
    let mut c = client(&r, "app");
    assert!(!on_standby(&mut c, "SELECT pg_is_in_recovery(), 12345"), "template matches any literal");
    assert!(on_standby(&mut c, "SELECT pg_is_in_recovery(), 'x', 7"), "a different shape is not matched");
    assert!(!on_standby(&mut c, "SELECT pg_is_in_recovery() AS force_primary"), "regex rule");
    assert!(!on_standby(&mut c, "SELECT pg_is_in_recovery(), 'other literal'"), "hash rule (any literal, same shape)");
    let err = c.batch_execute("DROP TABLE nothing_here").expect_err("rejected");
    assert_eq!(sqlstate(&err), "42501");
    let message = err.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default();
    assert!(message.contains("DROP is disabled"), "{err:?}");
    let mut reporting = client(&r, "reporting");
    assert!(!on_standby(&mut reporting, "SELECT pg_is_in_recovery()"), "database-matched rule");
    // Hints: replica for a write is refused before running anywhere; primary wins and pins.
    let t = unique_name("route_hint");
    dbs().pg.primary_client().batch_execute(&format!("CREATE TABLE {t}(id int)")).expect("setup");
    let mut h = client(&r, "app");
    let err = h
        .batch_execute(&format!("/* querypilot: route=replica */ INSERT INTO {t} VALUES (1)"))
        .expect_err("a write cannot be hinted to the replica");
    assert_eq!(sqlstate(&err), "QP001", "{err}");
    let n: i64 = dbs().pg.primary_client().query_one(&format!("SELECT count(*) FROM {t}"), &[]).expect("count").get(0);
    assert_eq!(n, 0, "the refused statement ran nowhere");
    assert!(!on_standby(&mut h, "/* querypilot: route=primary */ SELECT pg_is_in_recovery()"));
    assert!(!on_standby(&mut h, "SELECT pg_is_in_recovery()"), "route=primary pins the session");
}

fn xact_commits(c: &mut postgres::Client, db: &str) -> i64 {
    c.query_one("SELECT xact_commit FROM pg_stat_database WHERE datname = $1", &[&db]).expect("stats").get(0)
}

#[test]
fn pgbench_select_only_reads_land_on_the_standby() {
    let db = unique_name("pgb_route");
    superuser().batch_execute(&format!("CREATE DATABASE {db} OWNER app")).expect("create database");
    let init = Command::new("pgbench")
        .args(["-i", "-q", "-s", "1", "-h", "127.0.0.1", "-p", &dbs().pg.primary_port.to_string(), "-U", "app", &db])
        .env("PGPASSWORD", "app")
        .output()
        .expect("pgbench -i");
    assert!(init.status.success(), "{}", String::from_utf8_lossy(&init.stderr));
    dbs().pg.wait_replica_caught_up(Duration::from_secs(30));
    let r = Router::start(&split_config(&db, "\n[metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n"));
    let mut primary = dbs().pg.superuser_client(dbs().pg.primary_port);
    let mut standby = dbs().pg.superuser_client(dbs().pg.replica_port);
    let (p0, s0) = (xact_commits(&mut primary, &db), xact_commits(&mut standby, &db));
    let out = Command::new("pgbench")
        .args([
            "-S",
            "-M",
            "prepared",
            "-c",
            "4",
            "-j",
            "2",
            "-t",
            "500",
            "-h",
            "127.0.0.1",
            "-p",
            &r.port().to_string(),
            "-U",
            "app",
            "app",
        ])
        .env("PGPASSWORD", "app")
        .output()
        .expect("pgbench -S");
    let report = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{report}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(report.contains("number of failed transactions: 0"), "{report}");
    // Statistics reach pg_stat_database within about a second of each backend's activity.
    eventually(Duration::from_secs(15), "standby counts the reads", || xact_commits(&mut standby, &db) - s0 >= 2000);
    let on_primary = xact_commits(&mut primary, &db) - p0;
    assert!(on_primary < 200, "the primary saw {on_primary} transactions of 2000 reads");
    // Per-shape statistics saw pgbench's one SELECT shape exactly as often as pgbench ran it.
    let admin = r.control().endpoints().admin.expect("admin API enabled");
    let digests = get_json(admin, "/api/stats/digests?limit=50");
    let rows = digests["digests"].as_array().or_else(|| digests.as_array()).cloned().unwrap_or_default();
    let select = rows
        .iter()
        .find(|d| d["normalized"].as_str().is_some_and(|n| n.contains("select abalance from pgbench_accounts")))
        .unwrap_or_else(|| panic!("pgbench's SELECT shape in {digests}"));
    assert_eq!(select["calls"].as_u64(), Some(2000), "{select}");
    // And the metrics count those decisions per pool: every one of the 2000 reads was a
    // read/write-split decision for the replica pool (fresh or from the plan cache).
    let metrics = r.control().endpoints().metrics.expect("metrics endpoint");
    let text = get_text(metrics, "/metrics");
    let split: f64 = text
        .lines()
        .filter(|l| l.starts_with("sqp_routing_decisions_total{") && l.contains("pool=\"replica\""))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum();
    assert!(split >= 2000.0, "decisions for the replica pool: {split}\n{text}");
    drop(r);
    let _ = superuser().batch_execute(&format!("DROP DATABASE IF EXISTS {db} WITH (FORCE)"));
}

/// GET `path` and return the body as text.
fn get_text(addr: std::net::SocketAddr, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: t\r\nContent-Length: 0\r\n\r\n").as_bytes()).expect("send");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read");
    raw.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default()
}

/// GET `path` from the admin API and parse the JSON body.
fn get_json(addr: std::net::SocketAddr, path: &str) -> serde_json::Value {
    let body = get_text(addr, path);
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"))
}

/// Issue #8: when every backend of the read pool is unhealthy, split reads go to the write pool
/// (`replica_fallback = "primary"`, the default) or fail clearly (`"error"`).
#[test]
fn reads_fall_back_to_the_primary_when_no_replica_is_healthy() {
    let dead = crate::support::free_port(); // nothing listens there: connects are refused
    let base = split_config(&dbs().pg.database, "").replace(
        &format!("port = {} }}]", dbs().pg.replica_port),
        &format!("port = {dead} }}]\n[pools.replica.health]\ninterval = \"200ms\"\nfailure_threshold = 1"),
    );
    assert!(base.contains(&format!("port = {dead}")), "{base}");
    let r = Router::start(&base);
    eventually(Duration::from_secs(15), "reads fall back to the primary", || {
        let Ok(mut c) = crate::pg_util::connect(r.port(), "app", "app") else { return false };
        matches!(c.query_one("SELECT pg_is_in_recovery()", &[]), Ok(row) if !row.get::<_, bool>(0))
    });
    drop(r);
    let r = Router::start(
        &base.replace("read_write_split = true", "read_write_split = true\nreplica_fallback = \"error\""),
    );
    eventually(Duration::from_secs(15), "reads fail clearly", || {
        let Ok(mut c) = crate::pg_util::connect(r.port(), "app", "app") else { return false };
        match c.query_one("SELECT pg_is_in_recovery()", &[]) {
            Err(e) => {
                e.as_db_error().is_some_and(|d| d.message().contains("replica_fallback") && d.code().code() == "08001")
            }
            Ok(_) => false,
        }
    });
}

/// Without a split or a matching rule, a client that names a pool as its database stays on that
/// pool instead of the configured default.
#[test]
fn a_pool_chosen_by_database_name_is_the_default_target() {
    let pg = &dbs().pg;
    let pools =
        pg_pool("primary", pg.primary_port, "transaction", 2) + &pg_pool("replica", pg.replica_port, "transaction", 2);
    let r = Router::start(&crate::router::pg_config(&[0], &pools, "primary"));
    let mut on_replica = client(&r, "replica");
    assert!(on_standby(&mut on_replica, "SELECT pg_is_in_recovery()"), "database \"replica\" selects that pool");
    let mut other = client(&r, "app");
    assert!(!on_standby(&mut other, "SELECT pg_is_in_recovery()"), "an unknown database uses the default pool");
}
