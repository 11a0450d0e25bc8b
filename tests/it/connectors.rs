//! Connectors other than the Rust crates, through the MySQL listener: PyMySQL (client-side
//! parameter interpolation, autocommit off by default) and MariaDB Connector/J (JDBC, with
//! client-side and server-side prepared statements). Each runs the same round trip (see
//! `tests/connectors/`) against a MariaDB pool and against a PostgreSQL pool reached through the
//! protocol bridge; both must print what MariaDB itself makes of it.

use std::path::Path;
use std::process::Command;

use crate::bridge_mysql_pg::bridge_router;
use crate::mysql_session::my_router;
use crate::router::Router;
use crate::support::{dbs, unique_name};

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors");
const JDBC_JAR: &str = "/usr/share/java/mariadb-java-client.jar";

fn run(cmd: &mut Command, what: &str) -> Vec<String> {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {what}: {e} (installed by .ci/deps.sh)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

/// Runs the PyMySQL round trip as `user`/`password` on `database`.
fn pymysql(router: &Router, user: &str, password: &str, database: &str) -> Vec<String> {
    let table = unique_name("pymysql");
    run(
        Command::new("/usr/bin/python3").arg(Path::new(SCRIPTS).join("pymysql_roundtrip.py")).args([
            "127.0.0.1",
            &router.port().to_string(),
            user,
            password,
            database,
            &table,
        ]),
        "PyMySQL round trip",
    )
}

/// Runs the JDBC round trip, with server-side prepared statements when `server_prepare`.
fn jdbc(router: &Router, user: &str, password: &str, database: &str, server_prepare: bool) -> Vec<String> {
    let table = unique_name("jdbc");
    let url = format!(
        "jdbc:mariadb://127.0.0.1:{}/{database}?useSsl=false&useServerPrepStmts={server_prepare}",
        router.port()
    );
    run(
        Command::new("java")
            .args(["-cp", JDBC_JAR])
            .arg(Path::new(SCRIPTS).join("JdbcRoundTrip.java"))
            .args([&url, user, password, &table]),
        "JDBC round trip",
    )
}

fn expected_pymysql() -> Vec<String> {
    [
        "sum 2",
        r#"row (1, 'it\'s "quoted" \\ back', Decimal('-12.34'), datetime.datetime(2026, 12, 3, 4, 5, 6))"#,
        "row (2, 'ünïcödé ✓ 🐘', Decimal('99999999.99'), None)",
        "row (3, None, None, None)",
        "updated 1",
        r#"after rollback 'it\'s "quoted" \\ back'"#,
        "duplicate 1062",
        "closed",
    ]
    .map(str::to_owned)
    .to_vec()
}

fn expected_jdbc() -> Vec<String> {
    [
        "sum 2",
        r#"row 1|it's "quoted" \ back|-12.34|2026-12-03 04:05:06.0"#,
        "row 2|ünïcödé ✓ 🐘|99999999.99|null",
        "row 3|null|null|null",
        "updated 1",
        r#"after rollback it's "quoted" \ back"#,
        "duplicate 1062 23000",
        "closed",
    ]
    .map(str::to_owned)
    .to_vec()
}

#[test]
fn pymysql_round_trip_on_mariadb_and_through_the_postgres_bridge() {
    let my = &dbs().my;
    let router = my_router("transaction", 4);
    assert_eq!(pymysql(&router, &my.user, &my.password, &my.database), expected_pymysql());
    let pg = &dbs().pg;
    let bridge = bridge_router("transaction");
    assert_eq!(pymysql(&bridge, &pg.user, &pg.password, &pg.database), expected_pymysql());
}

#[test]
fn jdbc_round_trip_on_mariadb_and_through_the_postgres_bridge() {
    let my = &dbs().my;
    let pg = &dbs().pg;
    let router = my_router("transaction", 4);
    let bridge = bridge_router("transaction");
    for server_prepare in [false, true] {
        assert_eq!(
            jdbc(&router, &my.user, &my.password, &my.database, server_prepare),
            expected_jdbc(),
            "MariaDB, server prepare {server_prepare}"
        );
        assert_eq!(
            jdbc(&bridge, &pg.user, &pg.password, &pg.database, server_prepare),
            expected_jdbc(),
            "bridge, server prepare {server_prepare}"
        );
    }
}
