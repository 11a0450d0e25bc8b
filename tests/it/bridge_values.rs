//! Values stay values across a protocol bridge (#33). Each client writes values that quoting can
//! get wrong (`'`, `\`, `\'`, `\\'`, `''`, NUL, `%`, `_`, multibyte UTF-8, injection payloads),
//! reads them back, searches for them and runs injection payloads as parameters; every line it
//! prints must equal what the server of its own protocol prints when the client talks to it
//! directly (the same affected-row counts included). Where the statements ran is proven by
//! `version()` on the backend.
//!
//! MySQL clients on a PostgreSQL pool: PyMySQL (autocommit on and off), Connector/J (client- and
//! server-side prepare) and the mariadb CLI, greeted with and without NO_BACKSLASH_ESCAPES (a
//! router whose pools all speak PostgreSQL, and one that also has a MariaDB pool), and on a
//! MariaDB pool of a router whose default pool is PostgreSQL. PostgreSQL clients on a MySQL
//! pool: psycopg2, psycopg 3 (client- and server-side binding) and asyncpg.

use std::path::Path;
use std::process::Command;

use crate::bridge_mysql_pg::bridge_router;
use crate::mysql_session::my_pool;
use crate::router::Router;
use crate::support::{dbs, unique_name};

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors");
const JDBC_JAR: &str = "/usr/share/java/mariadb-java-client.jar";

/// `[pools.pgx]`: the harness's PostgreSQL primary, for MySQL clients.
fn pg_pool() -> String {
    let pg = &dbs().pg;
    format!(
        "[pools.pgx]\nprotocol = \"postgres\"\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\n\
         database = \"{d}\"\nmax_connections = 4\nacquire_timeout = \"20s\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n",
        u = pg.user,
        p = pg.password,
        d = pg.database,
        port = pg.primary_port,
    )
}

/// A MySQL listener with a MariaDB pool `main` and a PostgreSQL pool `pgx`; `default` is the
/// pool a client naming neither gets, and the one whose server greets.
fn mixed_router(default: &str) -> Router {
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         {}\n{}\n[routing]\nmysql_default_pool = \"{default}\"\n",
        my_pool("main", "transaction", 4),
        pg_pool(),
    ))
}

fn run(cmd: &mut Command, what: &str) -> Vec<String> {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {what}: {e} (installed by .ci/deps.sh)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

fn pymysql(port: u16, database: &str, autocommit: bool) -> Vec<String> {
    let my = &dbs().my;
    let table = unique_name("pymysql_values");
    let ac = if autocommit { "1" } else { "0" };
    run(
        Command::new("/usr/bin/python3").arg(Path::new(SCRIPTS).join("pymysql_values.py")).args([
            "127.0.0.1",
            &port.to_string(),
            &my.user,
            &my.password,
            database,
            &table,
            ac,
        ]),
        "PyMySQL values",
    )
}

fn jdbc(port: u16, database: &str, server_prepare: bool) -> Vec<String> {
    let my = &dbs().my;
    let table = unique_name("jdbc_values");
    let url = format!("jdbc:mariadb://127.0.0.1:{port}/{database}?useSsl=false&useServerPrepStmts={server_prepare}");
    run(
        Command::new("java").args(["-cp", JDBC_JAR]).arg(Path::new(SCRIPTS).join("JdbcValues.java")).args([
            &url,
            &my.user,
            &my.password,
            &table,
        ]),
        "JDBC values",
    )
}

/// `lines` with its `backend` line checked and dropped.
fn on(backend: &str, mut lines: Vec<String>, what: &str) -> Vec<String> {
    assert_eq!(lines.first().map(String::as_str), Some(format!("backend {backend}").as_str()), "{what}");
    lines.remove(0);
    lines
}

/// MariaDB's own lines with its answer to a NUL replaced by the bridge's refusal (PostgreSQL
/// text cannot hold NUL; 1366 is MySQL's error for a string value a column cannot take).
fn refusing_nul(mariadb: &[String]) -> Vec<String> {
    let stored = mariadb.iter().filter(|l| l.as_str() == "nul stored true").count();
    assert_eq!(stored, 1, "MariaDB stores NUL: {mariadb:?}");
    mariadb.iter().map(|l| if l == "nul stored true" { "nul refused 1366".to_owned() } else { l.clone() }).collect()
}

fn assert_no_injection(lines: &[String], what: &str) {
    let injected: Vec<_> = lines.iter().filter(|l| l.starts_with("injection") && !l.ends_with(" 0")).collect();
    assert!(injected.is_empty(), "{what}: a payload ran as SQL: {injected:?}");
    assert!(lines.iter().any(|l| l == "value 22 same"), "{what}: the victim row changed: {lines:?}");
}

/// PyMySQL on the PostgreSQL pool, greeted with NO_BACKSLASH_ESCAPES (every pool speaks
/// PostgreSQL) and without it (the listener also has a MariaDB pool, so the greeting cannot
/// promise it): the injection of #33 stays a value, and every value comes back byte-exact.
#[test]
fn pymysql_values_through_the_postgres_bridge() {
    let my = &dbs().my;
    let direct = on("mariadb", pymysql(my.primary_port, &my.database, false), "MariaDB");
    assert_no_injection(&direct, "MariaDB");
    let want = refusing_nul(&direct);
    let only_pg = bridge_router("transaction");
    let mixed = mixed_router("main");
    for autocommit in [false, true] {
        let got = on("postgres", pymysql(only_pg.port(), &dbs().pg.database, autocommit), "greeted with the flag");
        assert_eq!(got, want, "all pools PostgreSQL, autocommit {autocommit}");
        let got = on("postgres", pymysql(mixed.port(), "pgx", autocommit), "greeted without the flag");
        assert_no_injection(&got, "PostgreSQL pool chosen by database name");
        assert_eq!(got, want, "PostgreSQL pool chosen by database name, autocommit {autocommit}");
    }
}

/// A router whose default pool speaks PostgreSQL used to greet with NO_BACKSLASH_ESCAPES even
/// when the client's database then chose a MariaDB pool, which reads backslashes as escapes.
#[test]
fn pymysql_values_on_a_mariadb_pool_behind_a_postgres_default() {
    let my = &dbs().my;
    let want = on("mariadb", pymysql(my.primary_port, &my.database, true), "MariaDB");
    let router = mixed_router("pgx");
    for autocommit in [true, false] {
        let got = on("mariadb", pymysql(router.port(), "main", autocommit), "MariaDB pool");
        assert_no_injection(&got, "MariaDB pool behind a PostgreSQL default");
        assert_eq!(got, want, "autocommit {autocommit}");
    }
}

/// Connector/J and the mariadb CLI on a MariaDB pool behind a PostgreSQL default: what they send
/// is read by MariaDB exactly as when they connect to it directly.
#[test]
fn jdbc_and_cli_values_on_a_mariadb_pool_behind_a_postgres_default() {
    let my = &dbs().my;
    let router = mixed_router("pgx");
    for server_prepare in [false, true] {
        let want = on("mariadb", jdbc(my.primary_port, &my.database, server_prepare), "MariaDB");
        let got = on("mariadb", jdbc(router.port(), "main", server_prepare), "MariaDB pool");
        assert_no_injection(&got, "Connector/J on a MariaDB pool behind a PostgreSQL default");
        assert_eq!(got, want, "server prepare {server_prepare}");
    }
    let t = unique_name("cli_my_values");
    let cli = |port: u16, database: &str, sql: &str| {
        let out = Command::new("mariadb")
            .args(["--no-defaults", "--protocol=TCP", "-h127.0.0.1", "--skip-ssl", "--batch", "--raw"])
            .args([
                format!("-u{}", my.user),
                format!("-p{}", my.password),
                format!("-P{port}"),
                format!("-D{database}"),
            ])
            .args(["-e", sql])
            .output()
            .expect("run the mariadb CLI");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    cli(my.primary_port, &my.database, &format!("CREATE TABLE {t} (id int PRIMARY KEY, v text)"));
    let typed = [
        format!(r"INSERT INTO {t} VALUES (1, 'it\'s \\ back'), (2, 'nomatch\\\' OR id = 22 -- '), (22, 'victim')"),
        format!(r"UPDATE {t} SET v = 'X' WHERE v = 'nomatch\\\' OR id = 22 -- '"),
        format!("SELECT id, v FROM {t} ORDER BY id"),
    ];
    let through: Vec<String> = typed.iter().map(|sql| cli(router.port(), "main", sql)).collect();
    let rows = cli(my.primary_port, &my.database, &format!("SELECT id, v FROM {t} ORDER BY id"));
    cli(my.primary_port, &my.database, &format!("DROP TABLE {t}"));
    assert_eq!(
        rows, "id\tv\n1\tit's \\ back\n2\tX\n22\tvictim\n",
        "as MariaDB reads the CLI's escapes: only row 2 matched"
    );
    assert_eq!(through[2], rows, "read back through the router");
}

/// Connector/J with client-side and server-side prepared statements, both greetings.
#[test]
fn jdbc_values_through_the_postgres_bridge() {
    let my = &dbs().my;
    let only_pg = bridge_router("transaction");
    let mixed = mixed_router("main");
    for server_prepare in [false, true] {
        let direct = on("mariadb", jdbc(my.primary_port, &my.database, server_prepare), "MariaDB");
        assert_no_injection(&direct, "MariaDB");
        let want = refusing_nul(&direct);
        let got = on("postgres", jdbc(only_pg.port(), &dbs().pg.database, server_prepare), "all PostgreSQL");
        assert_eq!(got, want, "all pools PostgreSQL, server prepare {server_prepare}");
        let got = on("postgres", jdbc(mixed.port(), "pgx", server_prepare), "by database name");
        assert_eq!(got, want, "PostgreSQL pool chosen by database name, server prepare {server_prepare}");
    }
}

/// The mariadb CLI sends what a person typed: quoted with backslashes when the greeting did not
/// promise NO_BACKSLASH_ESCAPES, with `''` only when it did. What PostgreSQL stored is read back
/// with the `postgres` crate, on the server itself.
#[test]
fn mariadb_cli_values_through_the_postgres_bridge() {
    let pg = &dbs().pg;
    let t = unique_name("cli_values");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {t} (id int PRIMARY KEY, v text)")).expect("table");
    let cli = |port: u16, database: &str, sql: &str| {
        let out = Command::new("mariadb")
            .args(["--no-defaults", "--protocol=TCP", "-h127.0.0.1", "-uapp", "-papp", "--skip-ssl", "--batch"])
            .arg(format!("-P{port}"))
            .arg(format!("-D{database}"))
            .args(["-e", sql])
            .output()
            .expect("run the mariadb CLI");
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
        )
    };
    let mixed = mixed_router("main");
    let escaped =
        format!(r"INSERT INTO {t} VALUES (1, 'it\'s \\ back'), (2, 'nomatch\\\' OR id = 22 -- '), (3, 'tab\there\0')");
    let (ok, text) = cli(mixed.port(), "pgx", &escaped);
    assert!(!ok && text.contains("1366"), "a NUL is refused and nothing runs: {text}");
    let (ok, text) = cli(mixed.port(), "pgx", &escaped.replace(r"\0", ""));
    assert!(ok, "{text}");
    let (ok, text) =
        cli(mixed.port(), "pgx", &format!(r"UPDATE {t} SET v = 'X' WHERE v = 'nomatch\\\' OR id = 1 -- '"));
    assert!(ok, "{text}");
    let only_pg = bridge_router("transaction");
    let doubled = format!(r"INSERT INTO {t} VALUES (4, 'it''s \ back'), (5, 'nomatch\'' OR id = 22 -- ')");
    let (ok, text) = cli(only_pg.port(), &pg.database, &doubled);
    assert!(ok, "{text}");
    let (ok, text) =
        cli(only_pg.port(), &pg.database, &format!(r"SELECT v FROM {t} WHERE v = 'it''s \ back' ORDER BY id"));
    assert!(ok && text.lines().filter(|l| *l == r"it's \\ back").count() == 2, "{text}");
    let rows: Vec<(i32, String)> = pg
        .primary_client()
        .query(&format!("SELECT id, v FROM {t} ORDER BY id"), &[])
        .expect("rows")
        .iter()
        .map(|r| (r.get(0), r.get(1)))
        .collect();
    let want = [
        (1, r"it's \ back"),
        (2, r"nomatch\' OR id = 22 -- "),
        (3, "tab\there"),
        (4, r"it's \ back"),
        (5, r"nomatch\' OR id = 22 -- "),
    ];
    assert_eq!(rows, want.map(|(i, v)| (i, v.to_owned())).to_vec());
    pg.primary_client().batch_execute(&format!("DROP TABLE {t}")).expect("drop");
}

fn pg_values(port: u16, database: &str, driver: &str) -> Vec<String> {
    let pg = &dbs().pg;
    let dsn = if driver == "asyncpg" {
        format!("postgresql://{}:{}@127.0.0.1:{port}/{database}", pg.user, pg.password)
    } else {
        format!(
            "host=127.0.0.1 port={port} user={} password={} dbname={database} connect_timeout=10",
            pg.user, pg.password
        )
    };
    let table = unique_name("pg_values");
    run(
        Command::new("/usr/bin/python3").arg(Path::new(SCRIPTS).join("pg_values.py")).args([&dsn, &table, driver]),
        driver,
    )
}

/// psycopg2 and psycopg 3 interpolate on the client by `standard_conforming_strings` (psycopg2
/// sent every value as `E'..'`, which MariaDB refused with 1064); psycopg 3 and asyncpg also
/// bind on the server. Hand-written standard, escape, dollar-quoted and Unicode literals too.
#[test]
fn postgres_clients_values_through_the_mysql_bridge() {
    let pg = &dbs().pg;
    let router = crate::bridge_pg_mysql::bridge_router("transaction");
    for driver in ["psycopg2", "psycopg-client", "psycopg", "asyncpg"] {
        let want = on("postgres", pg_values(pg.primary_port, &pg.database, driver), driver);
        assert_no_injection(&want, driver);
        assert!(want.iter().any(|l| l == "nul refused 22021"), "{driver}: {want:?}");
        let got = on("mariadb", pg_values(router.port(), &dbs().my.database, driver), driver);
        assert_eq!(got, want, "{driver}");
    }
}
