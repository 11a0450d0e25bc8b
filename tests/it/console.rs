//! Issue #25, the PgBouncer-style admin console: psql on the virtual database `querypilot`
//! (alias `pgbouncer`) runs SHOW / PAUSE / RESUME / RELOAD, stats users only look, wrong
//! passwords are refused, and Debian's `prometheus-pgbouncer-exporter` scrapes the router as it
//! would scrape PgBouncer.

// Blocking test code driving child processes, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, free_port};

const CONSOLE: &str = "\n[console]\nadmin_users = [\"boss\"]\nstats_users = [\"watcher\"]\n\
                       passwords = { boss = \"b0ss-pw\", watcher = \"w-pw\" }\npause_timeout = \"5s\"\n";

fn router() -> Router {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 4);
    Router::start(&format!("{}{CONSOLE}", pg_config(&[0, 1], &pools, "main")))
}

/// Runs `commands` through psql as `user` on database `db`; (success, stdout, stderr).
fn psql(router: &Router, user: &str, password: &str, db: &str, commands: &[&str]) -> (bool, String, String) {
    let mut cmd = Command::new("psql");
    cmd.args(["-X", "-A", "-F", "|", "-h", "127.0.0.1", "-p", &router.port().to_string(), "-U", user, "-d", db])
        .env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "10");
    for c in commands {
        cmd.args(["-c", c]);
    }
    let out = cmd.output().expect("run psql");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn psql_shows_pools_stats_and_lists_and_admin_commands_act() {
    let router = router();
    let mut app = router.pg("main");
    for _ in 0..3 {
        app.simple_query("SELECT 1").expect("traffic through the pool");
    }
    let (ok, out, err) = psql(
        &router,
        "boss",
        "b0ss-pw",
        "querypilot",
        &["SHOW POOLS", "SHOW STATS", "SHOW LISTS", "SHOW DATABASES", "SHOW VERSION", "SHOW CONFIG", "SHOW USERS"],
    );
    assert!(ok, "{err}");
    assert!(out.contains("database|user|cl_active|cl_waiting"), "SHOW POOLS header:\n{out}");
    assert!(out.contains("main|app|"), "a row for pool main as user app:\n{out}");
    let stats = out.lines().find(|l| l.starts_with("main|") && l.split('|').count() == 16).expect("a SHOW STATS row");
    let queries: u64 = stats.split('|').nth(2).and_then(|v| v.parse().ok()).expect("total_query_count");
    assert!(queries >= 3, "the three statements are counted: {stats}");
    assert!(out.contains("used_clients|"), "SHOW LISTS:\n{out}");
    assert!(out.contains("QueryPilot Router"), "SHOW VERSION:\n{out}");
    assert!(out.contains("console.passwords.boss|***"), "SHOW CONFIG redacts:\n{out}");
    assert!(!out.contains("b0ss-pw") && !out.contains("w-pw"), "no secret is shown:\n{out}");

    let (ok, out, err) = psql(&router, "boss", "b0ss-pw", "pgbouncer", &["PAUSE main", "RESUME main", "RELOAD"]);
    assert!(ok, "admin commands on the pgbouncer alias: {err}");
    for tag in ["PAUSE", "RESUME", "RELOAD"] {
        assert!(out.contains(tag), "{tag} answered:\n{out}");
    }
    app.simple_query("SELECT 1").expect("the pool serves after RESUME");

    let (ok, _, err) = psql(&router, "watcher", "w-pw", "querypilot", &["SHOW POOLS", "PAUSE"]);
    assert!(!ok && err.contains("needs a console.admin_users user"), "a stats user may not PAUSE: {err}");
    let (ok, _, err) = psql(&router, "boss", "wrong", "querypilot", &["SHOW POOLS"]);
    assert!(!ok && err.contains("password authentication failed"), "{err}");
    let (ok, _, err) = psql(&router, "app", "app", "querypilot", &["SHOW POOLS"]);
    assert!(!ok && err.contains("password authentication failed"), "a pool user is no console user: {err}");
    let (_, out, err) = psql(&router, "boss", "b0ss-pw", "querypilot", &["SHOW NOTHING", "SHOW VERSION"]);
    assert!(err.contains("unknown SHOW \"NOTHING\""), "{err}");
    assert!(out.contains("QueryPilot Router"), "the console session goes on after an error:\n{out}");
}

fn http_get(port: u16, path: &str) -> Option<String> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(20))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    Some(text)
}

#[test]
fn debians_pgbouncer_exporter_scrapes_the_console() {
    let router = router();
    let mut app = router.pg("main");
    app.simple_query("SELECT 1").expect("traffic");
    let port = free_port();
    let mut exporter = Command::new("prometheus-pgbouncer-exporter")
        .args(["--host", "127.0.0.1", "--port", &port.to_string(), "--pgbouncer-host", "127.0.0.1"])
        .args(["--pgbouncer-port", &router.port().to_string(), "--pgbouncer-user", "watcher"])
        .env("PGPASSWORD", "w-pw")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start prometheus-pgbouncer-exporter");
    let started = Instant::now();
    let page = loop {
        if let Some(page) = http_get(port, "/metrics") {
            break page;
        }
        if let Some(status) = exporter.try_wait().expect("try_wait") {
            let mut err = String::new();
            let _ = exporter.stderr.take().map(|mut e| e.read_to_string(&mut err));
            panic!("the exporter exited ({status}):\n{err}");
        }
        assert!(started.elapsed() < Duration::from_secs(30), "the exporter never served /metrics");
        std::thread::sleep(Duration::from_millis(100));
    };
    let _ = exporter.kill();
    let _ = exporter.wait();
    assert!(page.starts_with("HTTP/1.0 200") || page.starts_with("HTTP/1.1 200"), "{page}");
    // PgBouncer's DATABASES rows are labelled by the server-side database name.
    let pool_size = format!("pgbouncer_pool_size{{database=\"{}\"}}", dbs().pg.database);
    for series in [
        "pgbouncer_requests_total{database=\"main\"}",
        "pgbouncer_active_clients{database=\"main\",user=\"app\"}",
        pool_size.as_str(),
        "pgbouncer_used_clients",
        "pgbouncer_databases",
    ] {
        assert!(page.contains(series), "{series} in the exporter's page:\n{page}");
    }
    let requests = page.lines().find(|l| l.starts_with("pgbouncer_requests_total{database=\"main\"}"));
    let value: f64 = requests.and_then(|l| l.rsplit(' ').next()).and_then(|v| v.parse().ok()).unwrap_or(0.0);
    assert!(value >= 1.0, "the statement run before is counted: {requests:?}");
}

/// Issue #33: `console.passwords` may hold what the auth file holds — a SCRAM verifier or an
/// MD5 secret — so the configuration needs no plaintext: psql logs in with the password, a
/// wrong one is refused, and an entry that cannot check the listener's exchange (a verifier
/// on an MD5 listener) is refused like a wrong password.
#[test]
fn console_passwords_may_be_scram_verifiers_or_md5_secrets() {
    use crate::pg_util::superuser;
    let role = crate::support::unique_name("console_pw");
    let mut su = superuser();
    su.batch_execute(&format!("CREATE ROLE {role} PASSWORD 'b0ss-pw'")).expect("a role to hash the password");
    let verifier: String =
        su.query_one("SELECT rolpassword FROM pg_authid WHERE rolname = $1", &[&role]).expect("verifier").get(0);
    su.batch_execute(&format!("DROP ROLE {role}")).expect("drop role");
    let md5: String = su.query_one("SELECT 'md5' || md5('w-pw' || 'watcher')", &[]).expect("md5").get(0);
    assert!(verifier.starts_with("SCRAM-SHA-256$"), "{verifier}");
    let console = CONSOLE
        .replace("boss = \"b0ss-pw\"", &format!("boss = \"{verifier}\""))
        .replace("watcher = \"w-pw\"", &format!("watcher = \"{md5}\""));
    assert!(!console.contains("b0ss-pw") && !console.contains("w-pw"), "no plaintext: {console}");
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
    let base = format!("{}{console}", pg_config(&[0], &pools, "main"));
    let scram = Router::start(&base);
    let md5_listener =
        Router::start(&base.replacen("bind = \"127.0.0.1:0\"\n", "bind = \"127.0.0.1:0\"\nauth_method = \"md5\"\n", 1));

    let (ok, out, err) = psql(&scram, "boss", "b0ss-pw", "querypilot", &["SHOW VERSION"]);
    assert!(ok && out.contains("QueryPilot Router"), "a SCRAM verifier checks a SCRAM login: {err}");
    let (ok, _, err) = psql(&scram, "boss", "wrong", "querypilot", &["SHOW VERSION"]);
    assert!(!ok && err.contains("password authentication failed for user \"boss\""), "{err}");
    let (ok, out, err) = psql(&md5_listener, "watcher", "w-pw", "querypilot", &["SHOW POOLS"]);
    assert!(ok && out.contains("main|app|"), "an MD5 secret checks an MD5 login: {err}");
    let (ok, _, err) = psql(&md5_listener, "watcher", "wrong", "querypilot", &["SHOW POOLS"]);
    assert!(!ok && err.contains("password authentication failed for user \"watcher\""), "{err}");
    let (ok, _, err) = psql(&md5_listener, "boss", "b0ss-pw", "querypilot", &["SHOW VERSION"]);
    assert!(
        !ok && err.contains("password authentication failed for user \"boss\""),
        "a verifier cannot check MD5: {err}"
    );
}
