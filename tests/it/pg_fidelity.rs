//! Issue #36: a client library sees through the router what it sees from the server. Each case
//! of `tests/connectors/pg_fidelity.py` runs once against the server and once through a router
//! in session and in transaction mode, and the lines it prints must agree (a pooling difference
//! is asserted as such):
//! - SQL `EXECUTE` of a protocol-level statement as the text of a simple query (also among
//!   several statements), an unnamed Parse, a named Parse (psycopg `prepare=True`, asyncpg's
//!   statement cache) and a pipeline;
//! - the unnamed statement across round trips on another server connection (psql's `\gdesc`
//!   pattern), and not another client's;
//! - the server's own FATAL when the server process of a session is terminated.

use std::path::Path;
use std::process::Command;

use crate::pg_util::router;
use crate::support::dbs;

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors/pg_fidelity.py");

/// The lines `case` prints connected to `port` and `database` (the server or a router).
fn run(case: &str, port: u16, database: &str) -> Vec<String> {
    let su_port = dbs().pg.primary_port.to_string();
    let out = Command::new("/usr/bin/python3")
        .arg(Path::new(SCRIPT))
        .args([case, "127.0.0.1", &port.to_string(), database, &su_port])
        .output()
        .unwrap_or_else(|e| panic!("run python3 {case}: {e} (psycopg and asyncpg: .ci/deps.sh)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{case} on port {port} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

/// The lines `case` prints against the server itself.
fn direct(case: &str) -> Vec<String> {
    let pg = &dbs().pg;
    run(case, pg.primary_port, &pg.database)
}

/// `case` through a one-core router whose pool `main` has two connections, in `mode`.
fn routed(case: &str, mode: &str) -> Vec<String> {
    let r = router(mode, 2, "");
    run(case, r.port(), "main")
}

#[test]
fn psycopg_sql_execute_of_a_protocol_statement_works_on_every_route() {
    let server = direct("psycopg_execute");
    assert!(server.iter().all(|l| l.contains("doubled")), "the server runs every route: {server:#?}");
    for mode in ["session", "transaction"] {
        assert_eq!(routed("psycopg_execute", mode), server, "{mode} mode");
    }
}

#[test]
fn asyncpg_sql_execute_as_a_cached_named_statement_gets_its_row_type() {
    let server = direct("asyncpg_execute");
    assert_eq!(server.first().map(String::as_str), Some("cached {'doubled': 42}"), "{server:#?}");
    for mode in ["session", "transaction"] {
        assert_eq!(routed("asyncpg_execute", mode), server, "{mode} mode");
    }
}

#[test]
fn psycopg_the_unnamed_statement_follows_its_client_and_no_other() {
    let server = direct("psycopg_unnamed");
    assert_eq!(server.get(1).map(String::as_str), Some("describe, other connection fields ['one', 'two'] []"));
    for mode in ["session", "transaction"] {
        assert_eq!(routed("psycopg_unnamed", mode), server, "{mode} mode");
    }
}

#[test]
fn psycopg_an_unnamed_statement_too_long_to_keep_fails_with_a_limit_on_another_connection() {
    let server = direct("psycopg_unnamed_long");
    assert_eq!(server, ["prepare COMMAND_OK", "describe, other connection COMMAND_OK None", "next 2"]);
    assert_eq!(routed("psycopg_unnamed_long", "session"), server, "session mode: the same connection");
    // Transaction pooling: the router does not hold such a Parse to send again (a documented
    // limit), and says so rather than describing whatever the other connection holds.
    let pooled = routed("psycopg_unnamed_long", "transaction");
    assert_eq!(pooled, ["prepare COMMAND_OK", "describe, other connection FATAL_ERROR b'54000'", "next 2"]);
}

#[test]
fn psycopg_a_session_that_ends_with_its_server_process_gets_the_servers_fatal() {
    let server = direct("psycopg_terminate");
    let fatal = "OperationalError: consuming input failed: terminating connection due to administrator command";
    assert_eq!(server.first(), Some(&format!("autocommit=True: {fatal}")), "{server:#?}");
    assert_eq!(routed("psycopg_terminate", "session"), server, "session mode: the client owns its server session");
    // Transaction pooling: outside a transaction only the statement was lost, and the client
    // goes on (a documented pooling difference); inside one it ends as on the server.
    let pooled = routed("psycopg_terminate", "transaction");
    let lost = "ConnectionFailure: the backend connection was lost (57P01: terminating connection due to \
                administrator command); the statement may not have completed";
    assert_eq!(
        pooled.get(..3),
        Some(&[format!("autocommit=True: {lost}"), "   closed: False".into(), "   next: 1".into()][..])
    );
    assert_eq!(pooled.get(3..), server.get(2..), "transaction mode, inside a transaction");
}

#[test]
fn psycopg_an_idle_clients_terminated_server_process() {
    let server = direct("psycopg_terminate_idle");
    assert_eq!(routed("psycopg_terminate_idle", "session"), server, "session mode: the server's FATAL");
    // Transaction pooling: the idle client held no connection, and never learns of it.
    assert_eq!(routed("psycopg_terminate_idle", "transaction"), ["after terminate: 1", "closed: False"]);
}
