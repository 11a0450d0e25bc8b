//! Behaving like the server for MySQL clients (#18). Stored programs: `CREATE PROCEDURE /
//! FUNCTION / TRIGGER ... BEGIN ...; ...; END` is one statement, which the server runs without
//! `CLIENT_MULTI_STATEMENTS`, and `CALL` of a procedure returning several result sets works
//! with `CLIENT_MULTI_RESULTS`, driven by PyMySQL (multi-statements off by default) and the
//! mariadb command-line client (`DELIMITER`) in transaction and session pooling; both must print
//! what MariaDB itself prints. Also what transaction pooling does with `wait_timeout`.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use crate::mysql_session::my_router;
use crate::router::Router;
use crate::support::{dbs, unique_name};

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors");

fn pymysql_procedures(port: u16) -> Vec<String> {
    let my = &dbs().my;
    let prefix = unique_name("qp_sp");
    let out = Command::new("/usr/bin/python3")
        .arg(Path::new(SCRIPTS).join("pymysql_procedures.py"))
        .args(["127.0.0.1", &port.to_string(), &my.user, &my.password, &my.database, &prefix])
        .output()
        .unwrap_or_else(|e| panic!("run PyMySQL: {e} (installed by .ci/deps.sh)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "PyMySQL failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

/// PyMySQL creates a procedure, a function and a trigger with compound bodies and calls the
/// procedure's two result sets, exactly as on the server directly.
#[test]
fn pymysql_creates_and_calls_stored_programs() {
    let direct = pymysql_procedures(dbs().my.primary_port);
    assert_eq!(
        direct,
        [
            "procedure created",
            "function created",
            "trigger created",
            "call set 1 ((3,),)",
            "more True",
            "call set 2 ((1, 10), (2, 20), (3, 30))",
            "function (0, 14)",
            "trigger ('changed',)",
            "multi refused 1064",
            "dropped",
        ],
        "what MariaDB itself answers"
    );
    for mode in ["transaction", "session"] {
        let router = my_router(mode, 2);
        assert_eq!(pymysql_procedures(router.port()), direct, "{mode}");
    }
}

/// The mariadb CLI's `DELIMITER` script: a procedure whose body holds semicolons, then its call.
fn cli_script(proc_name: &str) -> String {
    format!(
        "DROP PROCEDURE IF EXISTS {proc_name};\nDELIMITER //\n\
         CREATE PROCEDURE {proc_name}()\nBEGIN\n  SELECT 'first' AS a;\n  SELECT 'second' AS b, 2 AS n;\nEND //\n\
         DELIMITER ;\nCALL {proc_name}();\nDROP PROCEDURE {proc_name};\n"
    )
}

fn mariadb_cli(port: u16, script: &str) -> String {
    let my = &dbs().my;
    let mut child = Command::new("mariadb")
        .args(["--no-defaults", "--protocol=TCP", "-h", "127.0.0.1", "-P", &port.to_string()])
        .args(["-u", &my.user, &format!("-p{}", my.password), "-B", "-N", &my.database])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run the mariadb CLI: {e}"));
    child.stdin.take().expect("stdin").write_all(script.as_bytes()).expect("write the script");
    let out = child.wait_with_output().expect("mariadb CLI");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "mariadb CLI failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout
}

#[test]
fn mariadb_cli_creates_and_calls_a_procedure() {
    let my = &dbs().my;
    let direct = mariadb_cli(my.primary_port, &cli_script(&unique_name("qp_cli")));
    assert_eq!(direct, "first\nsecond\t2\n", "what MariaDB itself prints");
    for mode in ["transaction", "session"] {
        let router: Router = my_router(mode, 2);
        assert_eq!(mariadb_cli(router.port(), &cli_script(&unique_name("qp_cli"))), direct, "{mode}");
    }
}

/// `SET wait_timeout` in transaction pooling (documented in tuning.md): the setting follows the
/// client to every connection it borrows, the server never sees the client idle (the router
/// holds the client's connection), and a pooled connection the server closed for idling under
/// that setting costs the next statement nothing.
#[test]
fn wait_timeout_in_transaction_pooling() {
    use mysql::prelude::Queryable;
    let router = my_router("transaction", 1);
    let mut c = crate::mysql_session::client(&router);
    c.query_drop("SET wait_timeout = 2").expect("set");
    let seen: Option<u64> = c.query_first("SELECT @@wait_timeout").expect("read back");
    assert_eq!(seen, Some(2), "replayed on the borrowed connection");
    std::thread::sleep(std::time::Duration::from_secs(4));
    let after: Option<u64> = c.query_first("SELECT @@wait_timeout").expect("the client idled past wait_timeout");
    assert_eq!(after, Some(2));
}
