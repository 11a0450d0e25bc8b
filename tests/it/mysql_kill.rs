//! `KILL` through the router as on the server (#18), against the harness's real MariaDB with
//! two cores (so the killer may sit on another core than its victim):
//! - PyMySQL (`tests/connectors/pymysql_kill.py`): `KILL QUERY` from a second connection with the
//!   greeting's id (`thread_id()`) or the id `CONNECTION_ID()` showed cancels a running SLEEP;
//!   `KILL CONNECTION` closes the other client; an unknown id gets 1094; a client's KILL of
//!   itself behaves as on the server. Session mode prints exactly what a direct connection
//!   prints; in transaction mode a server id belongs to no client and is refused with 1094.
//! - the mariadb CLI: Ctrl-C during a statement kills the query through the router.
//! - a session-mode client whose server connection is killed under a statement gets the error
//!   and its connection closes, as directly; in transaction mode it goes on.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use mysql::prelude::Queryable;

use crate::mysql_session::{client, my_config, my_pool};
use crate::router::Router;
use crate::support::{dbs, eventually, unique_name};

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors");

/// A router on cores 0 and 1 with one MariaDB pool `main` in `mode`.
fn two_core_router(mode: &str) -> Router {
    Router::start(&my_config(&[0, 1], &my_pool("main", mode, 6), "main"))
}

fn pymysql_kill(port: u16) -> Vec<String> {
    let my = &dbs().my;
    let marker = unique_name("qpkill");
    let out = Command::new("/usr/bin/python3")
        .arg(Path::new(SCRIPTS).join("pymysql_kill.py"))
        .args(["127.0.0.1", &port.to_string(), &my.user, &my.password, &my.database])
        .args([&my.primary_port.to_string(), &marker])
        .output()
        .unwrap_or_else(|e| panic!("run PyMySQL: {e} (installed by .ci/deps.sh)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "PyMySQL failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

#[test]
fn pymysql_kill_by_either_id_behaves_as_on_the_server() {
    let direct = pymysql_kill(dbs().my.primary_port);
    assert_eq!(direct[0], "thread_id(): KILL QUERY ok 0", "directly: {direct:#?}");
    assert_eq!(direct.len(), 12, "directly: {direct:#?}");
    let session = two_core_router("session");
    assert_eq!(pymysql_kill(session.port()), direct, "session mode");
    // Transaction pooling: the server id CONNECTION_ID() showed belongs to whichever client
    // borrows that connection next, so KILL refuses it; everything else is as on the server.
    let transaction = two_core_router("transaction");
    let expected: Vec<String> = direct
        .iter()
        .filter(|l| !l.starts_with("CONNECTION_ID(): the sleep ended"))
        .map(
            |l| if l.starts_with("CONNECTION_ID(): KILL QUERY") { "CONNECTION_ID(): KILL QUERY error 1094" } else { l },
        )
        .map(str::to_owned)
        .collect();
    assert_eq!(pymysql_kill(transaction.port()), expected, "transaction mode");
}

/// The query `marker` is running on the MariaDB primary (seen in its process list).
fn running_on_server(marker: &str) -> impl FnMut() -> bool + '_ {
    let my = &dbs().my;
    let mut root = my.superuser_client(my.primary_port);
    move || {
        let sql = format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{marker}%' \
             AND INFO NOT LIKE '%PROCESSLIST%'"
        );
        root.query_first::<i64, _>(sql).ok().flatten() == Some(1)
    }
}

#[test]
fn mariadb_cli_ctrl_c_kills_the_running_query_through_the_router() {
    for mode in ["session", "transaction"] {
        let router = two_core_router(mode);
        let marker = unique_name("qpctrlc");
        let child = Command::new("mariadb")
            .args(["--no-defaults", "--skip-ssl", "-h127.0.0.1", "-uapp", "-papp", "app"])
            .arg(format!("-P{}", router.port()))
            .args(["-e", &format!("SELECT SLEEP(30) AS {marker}")])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run mariadb");
        eventually(Duration::from_secs(20), "the statement runs on MariaDB", running_on_server(&marker));
        // What Ctrl-C at the terminal sends: the CLI opens a second connection and sends
        // KILL QUERY with the id it was greeted with.
        let sent = Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill -INT");
        assert!(sent.success());
        let out = child.wait_with_output().expect("mariadb exits");
        let said = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert!(said.contains("Ctrl-C -- query killed"), "{mode}: {said}");
        assert!(said.contains("ERROR 1317"), "{mode}: the query was interrupted on the server: {said}");
        eventually(Duration::from_secs(5), "the statement is gone from the server", || !running_on_server(&marker)());
    }
}

#[test]
fn a_backend_killed_under_a_statement_closes_a_session_mode_client_only() {
    for mode in ["session", "transaction"] {
        let router = two_core_router(mode);
        let mut victim = client(&router);
        let server_id: Option<u32> = victim.query_first("SELECT CONNECTION_ID()").expect("id");
        let marker = unique_name("qpdie");
        let sql = format!("SELECT SLEEP(30) AS {marker}");
        let running = std::thread::spawn(move || {
            let r = victim.query_drop(sql);
            (r, victim)
        });
        eventually(Duration::from_secs(20), "the statement runs on MariaDB", running_on_server(&marker));
        let my = &dbs().my;
        let mut root = my.superuser_client(my.primary_port);
        let id: u64 = root
            .query_first(format!(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{marker}%' AND INFO NOT LIKE '%PROCESSLIST%'"
            ))
            .expect("processlist")
            .expect("the statement's connection");
        if mode == "session" {
            assert_eq!(Some(id as u32), server_id, "a session-mode client keeps its server connection");
        }
        root.query_drop(format!("KILL CONNECTION {id}")).expect("kill the server connection");
        let (r, mut victim) = running.join().expect("join");
        assert!(r.is_err(), "{mode}: the statement's connection died");
        let next: Result<Option<i64>, _> = victim.query_first("SELECT 1");
        match mode {
            // Its server session (variables, temporary tables) is gone, so is the client's.
            "session" => assert!(next.is_err(), "{mode}: the client's connection was closed"),
            _ => assert_eq!(next.expect("transaction mode goes on"), Some(1)),
        }
        let mut other = client(&router);
        assert_eq!(other.query_first::<i64, _>("SELECT 2").expect("others unaffected"), Some(2), "{mode}");
    }
}
