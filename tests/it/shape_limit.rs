//! Issue #41, limits per query shape and fair share, against the harness's real servers:
//! - a static `max_concurrent` rule holds a shape to its limit; the excess waits `limit_wait`,
//!   then psycopg gets SQLSTATE 53000 and PyMySQL error 1040 with a message naming the shape
//!   (its fingerprint and text), while other shapes run; the console, the API, `/metrics` and
//!   the dry-run show the shape, its limit, queue and refusals;
//! - statements that wait for their turn all run, each exactly once (rows counted), and never
//!   more than the limit at once (timestamps written by the statements themselves);
//! - fair share: while another user waits for a connection, a user holding more than its share
//!   of the pool waits in the limiter rather than in the pool's queue.
//!
//! Statements are held on the server by advisory locks (PostgreSQL) or `GET_LOCK` (MariaDB)
//! the test takes on a direct connection, so nothing depends on timing.

// Blocking test clients on their own threads, not data-plane code.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::process::Command;
use std::thread;
use std::time::Duration;

use mysql::prelude::Queryable;
use querypilot::sql::fingerprint::fingerprint;
use querypilot::sql::Dialect;

use crate::admin::{addrs, http, sum, with_metrics};
use crate::mysql_session::{my_config, my_pool};
use crate::passthrough::Roles;
use crate::pg_util::{connect, superuser};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, eventually, unique_name};

/// An advisory lock key no other test uses.
pub(crate) fn lock_key() -> i64 {
    let name = unique_name("k");
    name.bytes().fold(41_000_i64, |k, b| k.wrapping_mul(31).wrapping_add(i64::from(b))) & 0x7fff_ffff
}

/// A statement that runs until the test lets go of advisory lock `key`.
pub(crate) fn held_pg(key: i64) -> String {
    format!("SELECT pg_advisory_lock_shared({key}), pg_advisory_unlock_shared({key})")
}

/// `pool`'s extra lines: the limiter's keys.
fn limited(pool: &str, extra: &str) -> String {
    format!("{pool}limit_wait = \"300ms\"\n{extra}\n")
}

/// The value of `name` summed over the series of pool `pool`, from `/metrics`.
fn scrape_pool(router: &Router, name: &str, pool: &str) -> f64 {
    let reply = http(addrs(router).0, "GET", "/metrics", &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    sum(&reply.body, name, &[&format!("pool=\"{pool}\"")]).0
}

/// [`scrape_pool`] of pool `main`.
fn scrape(router: &Router, name: &str) -> f64 {
    scrape_pool(router, name, "main")
}

/// GET `path` on the admin API as JSON.
fn api(router: &Router, path: &str) -> serde_json::Value {
    let reply = http(addrs(router).1, "GET", path, &[]);
    assert_eq!(reply.status, 200, "{path}: {}", reply.body);
    serde_json::from_str(&reply.body).unwrap_or_else(|e| panic!("{path}: {e}: {}", reply.body))
}

/// Backends of the PostgreSQL primary waiting for advisory lock `key`.
pub(crate) fn pg_waiting_on(key: i64) -> i64 {
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%({key})%' \
         AND query NOT LIKE '%pg_stat_activity%'"
    );
    superuser().query_one(&sql, &[]).expect("pg_stat_activity").get(0)
}

const PSYCOPG: &str = r#"
import sys, psycopg
dsn, sql = sys.argv[1], sys.argv[2]
with psycopg.connect(dsn, autocommit=True) as c:
    try:
        c.execute(sql)
        print("ran")
    except psycopg.Error as e:
        print(e.sqlstate)
        print(e.diag.message_primary)
    print(c.execute("SELECT 'still here'").fetchone()[0])
"#;

#[test]
fn psycopg_over_a_static_limit_gets_53000_naming_the_shape_and_the_views_show_it() {
    let key = lock_key();
    let sql = held_pg(key);
    let digest = format!("{:016x}", fingerprint(&sql, Dialect::Postgres).0);
    let pool = limited(
        &pg_pool("main", dbs().pg.primary_port, "transaction", 4),
        &format!("[pools.main.max_concurrent]\n\"{digest}\" = 1"),
    );
    let router = Router::start(&with_metrics(&pg_config(&[0], &pool, "main"), None));
    let mut lock = superuser();
    lock.execute("SELECT pg_advisory_lock($1)", &[&key]).expect("take the lock");
    let port = router.port();
    let holder = {
        let sql = sql.clone();
        thread::spawn(move || connect(port, "main", "app").expect("login").simple_query(&sql).map(|_| ()))
    };
    eventually(Duration::from_secs(20), "the first statement of the shape to run", || pg_waiting_on(key) == 1);

    // While one runs, the dry-run says the next would wait and the views show the shape.
    let q = format!("/api/routing/test?sql={}", urlencode(&sql));
    let test = api(&router, &q);
    assert_eq!(test["shape_limit"]["kind"], "max_concurrent", "{test}");
    assert_eq!(test["shape_limit"]["would_wait"], true, "{test}");
    assert_eq!(api(&router, "/api/routing/test?sql=SELECT%201")["shape_limit"]["kind"], "none");

    let pg = &dbs().pg;
    let dsn = format!("host=127.0.0.1 port={port} dbname=main user={} password={}", pg.user, pg.password);
    let out = Command::new("/usr/bin/python3")
        .args(["-c", PSYCOPG, &dsn, &sql])
        .output()
        .unwrap_or_else(|e| panic!("run psycopg (python3-psycopg, installed by .ci/deps.sh): {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(lines.first(), Some(&"53000"), "{text}");
    let message = lines.get(1).copied().unwrap_or_default();
    assert!(message.contains(&format!("shape {digest}")), "{message}");
    assert!(message.contains("pg_advisory_lock_shared"), "the shape's text: {message}");
    assert!(message.contains("its limit is 1 on pool \"main\""), "{message}");
    assert_eq!(lines.get(2), Some(&"still here"), "an ERROR, not the end of the session: {text}");

    // Another shape is not held back.
    let mut other = connect(port, "main", "app").expect("login");
    other.simple_query("SELECT 1").expect("another shape runs");
    assert_eq!(scrape(&router, "sqp_limit_rejections_total"), 1.0);
    assert_eq!(scrape(&router, "sqp_limit_permits_in_use"), 1.0);
    let limits = api(&router, "/api/limits");
    let shape = &limits["pools"][0]["shapes"][0];
    assert_eq!(shape["fingerprint_hex"], digest.as_str(), "{limits}");
    assert_eq!((shape["limit"].as_u64(), shape["rejected"].as_u64()), (Some(1), Some(1)), "{limits}");

    lock.execute("SELECT pg_advisory_unlock($1)", &[&key]).expect("let go");
    holder.join().expect("holder thread").expect("the first statement ran");
    eventually(Duration::from_secs(10), "the permit to be given back", || {
        scrape(&router, "sqp_limit_permits_in_use") == 0.0
    });
}

fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

const PYMYSQL: &str = r#"
import sys, pymysql
port, user, password, db, sql = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], sys.argv[5]
c = pymysql.connect(host="127.0.0.1", port=port, user=user, password=password, database=db, autocommit=True)
cur = c.cursor()
try:
    cur.execute(sql)
    print("ran")
except pymysql.err.MySQLError as e:
    print(e.args[0])
    print(e.args[1])
cur.execute("SELECT 'still here'")
print(cur.fetchone()[0])
"#;

#[test]
fn pymysql_over_a_static_limit_gets_1040_naming_the_shape() {
    let lock = unique_name("qp41");
    let sql = format!("SELECT GET_LOCK('{lock}', 30), RELEASE_LOCK('{lock}')");
    let digest = format!("{:016x}", fingerprint(&sql, Dialect::MySql).0);
    let pool = limited(&my_pool("main", "transaction", 4), &format!("[pools.main.max_concurrent]\n\"{digest}\" = 1"));
    let router = Router::start(&my_config(&[0], &pool, "main"));
    let my = &dbs().my;
    let mut root = my.superuser_client(my.primary_port);
    root.query_drop(format!("SELECT GET_LOCK('{lock}', 0)")).expect("take the lock");
    let port = router.port();
    let holder = {
        let sql = sql.clone();
        thread::spawn(move || {
            let my = &dbs().my;
            let mut c = mysql::Conn::new(my.opts(port, &my.user, &my.password)).expect("login");
            c.query_drop(sql)
        })
    };
    eventually(Duration::from_secs(20), "the first statement of the shape to wait on the server", || {
        let q = format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT GET_LOCK(''{lock}''%'"
        );
        root.query_first::<i64, _>(q).ok().flatten() == Some(1)
    });
    let out = Command::new("/usr/bin/python3")
        .args(["-c", PYMYSQL, &port.to_string(), &my.user, &my.password, &my.database, &sql])
        .output()
        .unwrap_or_else(|e| panic!("run PyMySQL (python3-pymysql, installed by .ci/deps.sh): {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.first(), Some(&"1040"), "{text}");
    let message = lines.get(1).copied().unwrap_or_default();
    assert!(message.contains(&format!("shape {digest}")) && message.contains("GET_LOCK"), "{message}");
    assert!(message.contains("its limit is 1 on pool \"main\""), "{message}");
    assert_eq!(lines.get(2), Some(&"still here"), "the statement is refused, the connection stays: {text}");
    root.query_drop(format!("SELECT RELEASE_LOCK('{lock}')")).expect("let go");
    holder.join().expect("holder thread").expect("the first statement ran");
}

#[test]
fn statements_waiting_for_their_turn_all_run_once_and_never_more_than_the_limit_at_once() {
    const CLIENTS: i32 = 12;
    let table = unique_name("qp41_runs");
    let mut su = superuser();
    su.batch_execute(&format!(
        "CREATE TABLE {table} (i int, started timestamptz, finished timestamptz);
         GRANT ALL ON {table} TO {user};
         CREATE FUNCTION {table}_run(n int) RETURNS void LANGUAGE plpgsql AS $$
           DECLARE t0 timestamptz := clock_timestamp();
           BEGIN PERFORM pg_sleep(0.05); INSERT INTO {table} VALUES (n, t0, clock_timestamp()); END $$;
         GRANT EXECUTE ON FUNCTION {table}_run(int) TO {user};",
        user = dbs().pg.user
    ))
    .expect("table and function");
    let sql = |n: i32| format!("SELECT {table}_run({n})");
    let digest = format!("{:016x}", fingerprint(&sql(0), Dialect::Postgres).0);
    // A long limit_wait: every statement waits its turn, none is refused.
    let pool = pg_pool("main", dbs().pg.primary_port, "transaction", 8)
        + &format!("limit_wait = \"20s\"\n[pools.main.max_concurrent]\n\"{digest}\" = 2\n");
    let router = Router::start(&pg_config(&[0], &pool, "main"));
    let port = router.port();
    let clients: Vec<_> = (0..CLIENTS)
        .map(|n| {
            let sql = sql(n);
            thread::spawn(move || connect(port, "main", "app").expect("login").simple_query(&sql).map(|_| ()))
        })
        .collect();
    for c in clients {
        c.join().expect("client thread").expect("every statement ran");
    }
    let row = su.query_one(&format!("SELECT count(*), count(DISTINCT i) FROM {table}"), &[]).expect("count");
    assert_eq!((row.get::<_, i64>(0), row.get::<_, i64>(1)), (i64::from(CLIENTS), i64::from(CLIENTS)));
    // At any statement's start, how many were running (itself included).
    let most: i64 = su
        .query_one(
            &format!(
                "SELECT max((SELECT count(*) FROM {table} b WHERE b.started <= a.started AND b.finished > a.started)) \
                 FROM {table} a"
            ),
            &[],
        )
        .expect("overlap")
        .get(0);
    assert!(most <= 2, "{most} statements of the shape ran at once over a limit of 2");
    su.batch_execute(&format!("DROP FUNCTION {table}_run(int); DROP TABLE {table};")).expect("drop");
}

/// A client logged in as `user` through `port` (a pass-through login borrows a connection to
/// prove the credentials, so every client logs in before the pool is full).
fn login(port: u16, user: &str) -> postgres::Client {
    crate::passthrough::client(port, user, &format!("pw_{user}")).unwrap_or_else(|e| panic!("{user} logs in: {e}"))
}

/// Runs `sql` on `client` on its own thread.
fn run_on(mut client: postgres::Client, sql: String) -> thread::JoinHandle<Result<(), postgres::Error>> {
    thread::spawn(move || client.simple_query(&sql).map(|_| ()))
}

/// Alice fills a pool of 4, Bob queues for a connection, Alice sends two more: with the fair
/// share on they wait in the limiter (her share is 2 while Bob waits), otherwise in the pool's
/// queue with Bob. Every statement runs once the lock is let go.
fn alice_and_bob(fair_share: bool) -> (f64, f64) {
    let roles = Roles::create("qp41fs", "scram-sha-256");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    std::fs::write(&file, roles.userlist()).expect("write auth file");
    let share = if fair_share { "fair_share = true\n" } else { "adaptive_limit = false\n" };
    // The pool is named after the database the roles log in to (clients name their pool).
    let pool = &dbs().pg.database;
    let toml = format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\
         auth_method = \"scram-sha-256\"\n\n[pools.{pool}]\nmode = \"transaction\"\nmax_connections = 4\n\
         acquire_timeout = \"20s\"\nlimit_wait = \"20s\"\n{share}backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
         [routing]\ndefault_pool = \"{pool}\"\n\n[auth]\nfile = \"{file}\"\n",
        port = dbs().pg.primary_port,
        file = file.display(),
    );
    let router = Router::start(&with_metrics(&toml, None));
    let (alice, bob) = (&roles.names[0], &roles.names[1]);
    let key = lock_key();
    let mut lock = superuser();
    lock.execute("SELECT pg_advisory_lock($1)", &[&key]).expect("take the lock");
    let port = router.port();
    let mut alices: Vec<postgres::Client> = (0..6).map(|_| login(port, alice)).collect();
    let bobs = login(port, bob);
    let mut all: Vec<_> = alices.drain(..4).map(|c| run_on(c, held_pg(key))).collect();
    eventually(Duration::from_secs(20), "Alice to hold the pool", || pg_waiting_on(key) == 4);
    all.push(run_on(bobs, held_pg(key)));
    let depth = |name: &str| scrape_pool(&router, name, pool);
    eventually(Duration::from_secs(20), "Bob to queue for a connection", || depth("sqp_pool_queue_depth") == 1.0);
    all.extend(alices.drain(..).map(|c| run_on(c, held_pg(key))));
    eventually(Duration::from_secs(20), "Alice's two more to wait somewhere", || {
        depth("sqp_pool_queue_depth") + depth("sqp_limit_queue_depth") == 3.0
    });
    let seen = (depth("sqp_pool_queue_depth"), depth("sqp_limit_queue_depth"));
    lock.execute("SELECT pg_advisory_unlock($1)", &[&key]).expect("let go");
    for t in all {
        t.join().expect("client thread").expect("every statement ran");
    }
    seen
}

#[test]
fn a_user_over_its_fair_share_waits_in_the_limiter_while_another_user_waits_for_the_pool() {
    // Without the fair share Alice's two queue in the pool beside Bob...
    assert_eq!(alice_and_bob(false), (3.0, 0.0));
    // ...with it they wait for her share, and only Bob waits for a connection.
    assert_eq!(alice_and_bob(true), (1.0, 2.0));
}
