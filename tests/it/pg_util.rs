//! Shared helpers of the PostgreSQL proxy tests (issue #3): routers with one pool in a given
//! mode, psql runs through the router, and superuser access to the primary.

use std::process::{Command, Output};
use std::time::Duration;

use crate::router::{pg_config, pg_pool, Router};
use crate::support::dbs;

/// The three pool modes, for tests that run in each.
pub const MODES: [&str; 3] = ["session", "transaction", "statement"];

/// A router on one core with pool `main` on the primary in `mode` with `max` connections;
/// `extra` lines are appended to the pool table (e.g. `query_timeout = "1s"`).
pub fn router(mode: &str, max: u32, extra: &str) -> Router {
    let pools = format!("{}{extra}\n", pg_pool("main", dbs().pg.primary_port, mode, max));
    Router::start(&pg_config(&[0], &pools, "main"))
}

/// A superuser connection to the primary (bypasses the router).
pub fn superuser() -> postgres::Client {
    let pg = &dbs().pg;
    pg.superuser_client(pg.primary_port)
}

/// Runs psql through the router on `port` with `args` appended and `stdin` as its input.
pub fn psql(port: u16, database: &str, password: &str, args: &[&str], stdin: &str) -> Output {
    use std::io::Write;
    let mut cmd = Command::new("psql");
    cmd.args(["-X", "-h", "127.0.0.1", "-p", &port.to_string(), "-U", "app", "-d", database])
        .args(args)
        .env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "10")
        .env_remove("PGSERVICE")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn psql");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write psql stdin");
    child.wait_with_output().expect("psql output")
}

/// The SQLSTATE of a `postgres` error, or a panic naming the error when it has none.
pub fn sqlstate(e: &postgres::Error) -> String {
    e.code().map(|c| c.code().to_owned()).unwrap_or_else(|| panic!("error without SQLSTATE: {e}"))
}

/// The backend pid a statement ran on (proves which connection served it).
pub fn backend_pid(c: &mut postgres::Client) -> i32 {
    c.query_one("SELECT pg_backend_pid()", &[]).expect("pg_backend_pid").get(0)
}

/// A client through the router with a short connect timeout and an explicit password.
pub fn connect(port: u16, database: &str, password: &str) -> Result<postgres::Client, postgres::Error> {
    let mut c = postgres::Config::new();
    c.host("127.0.0.1").port(port).user("app").password(password).dbname(database);
    c.connect_timeout(Duration::from_secs(10));
    c.connect(postgres::NoTls)
}

/// The first column of the first row `sql` returns, as text (simple query protocol).
pub fn first_value(c: &mut postgres::Client, sql: &str) -> String {
    let rows = c.simple_query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    rows.iter()
        .find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        })
        .unwrap_or_else(|| panic!("{sql}: no row"))
}
