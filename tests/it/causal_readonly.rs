//! Issue #34, PostgreSQL: declared read-only transactions run on the standby when it replayed
//! the session's last write and on the primary when it has not (replay paused); a transaction
//! on the primary that wrote nothing, and a write that failed, leave no commit position to wait
//! for. Placement is proven by `pg_is_in_recovery()` inside the transaction; each client
//! (psycopg 3, asyncpg: `tests/connectors/causal_readonly.py`; PgJDBC:
//! `tests/connectors/JdbcReadOnly.java`; psql) declares read-only its own way.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::causal::{be, pool, router, where_read};
use crate::pg_util::{psql, sqlstate};
use crate::router::Router;
use crate::support::{eventually, unique_name, Dbs, Kind, PgEnv};

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors");

/// A causal router over the private environment's primary and standby, in pool `mode`.
fn causal_router(pg: &PgEnv, mode: &str) -> Router {
    let pools = pool(pg, "primary", &[be(pg.primary_port, "")]) + &pool(pg, "replica", &[be(pg.replica_port, "")]);
    let pools = pools.replace("mode = \"transaction\"", &format!("mode = \"{mode}\""));
    router(&pools, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"")
}

fn python(phase: &str, pg: &PgEnv, port: u16, table: &str, first_id: u32) -> Vec<String> {
    let out = Command::new("/usr/bin/python3")
        .arg(Path::new(SCRIPTS).join("causal_readonly.py"))
        .args([phase, "127.0.0.1", &port.to_string(), &pg.user, &pg.password, &pg.database, table])
        .arg(first_id.to_string())
        .output()
        .unwrap_or_else(|e| panic!("run python3: {e} (installed by .ci/deps.sh)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "causal_readonly.py {phase} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout.lines().map(str::to_owned).collect()
}

fn jdbc(phase: &str, pg: &PgEnv, port: u16, table: &str, id: u32) -> Vec<String> {
    let url = format!("jdbc:postgresql://127.0.0.1:{port}/{}?sslmode=disable", pg.database);
    let out = Command::new("java")
        .args(["-cp", "/usr/share/java/postgresql.jar", &format!("{SCRIPTS}/JdbcReadOnly.java")])
        .args([&url, &pg.user, &pg.password, table, phase, &id.to_string()])
        .output()
        .expect("run java (installed by .ci/deps.sh)");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "JdbcReadOnly {phase}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

fn psql_lines(port: u16, pg: &PgEnv, script: &str) -> Vec<String> {
    let out = psql(port, &pg.database, &pg.password, &["-Atq", "-v", "ON_ERROR_STOP=1"], script);
    assert!(out.status.success(), "psql: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

/// The cases of `causal_readonly.py`, each with its recovery state and what it saw.
fn python_expected(recovery: &str, seen: &str) -> Vec<String> {
    [
        "psycopg_read_only",
        "psycopg BEGIN READ ONLY prepare=None",
        "psycopg START TRANSACTION READ ONLY prepare=True",
        "psycopg BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY prepare=False",
        "psycopg SET TRANSACTION READ ONLY",
        "psycopg default characteristics",
        "psycopg default set",
        "psycopg default startup",
        "psycopg pipeline",
        "asyncpg readonly",
    ]
    .iter()
    .map(|case| format!("{case} {recovery} {seen}"))
    .collect()
}

fn jdbc_expected(recovery: &str, seen: &str) -> Vec<String> {
    vec![
        format!("jdbc readOnly round 0 {recovery} {seen}"),
        format!("jdbc readOnly round 6 {recovery} {seen}"),
        "jdbc read-write f".to_owned(),
    ]
}

#[test]
fn declared_read_only_transactions_run_on_a_standby_that_replayed_the_sessions_writes() {
    let env = Dbs::private();
    let pg = &env.pg;
    let table = unique_name("causal_ro");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {table} (id int PRIMARY KEY)")).expect("create");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    for mode in ["transaction", "session"] {
        let router = causal_router(pg, mode);
        let port = router.port();
        let mut c = router.pg(&pg.database);
        let read = format!("SELECT count(*), pg_is_in_recovery() FROM {table}");
        eventually(Duration::from_secs(15), "reads on the standby", || where_read(&mut c, &read)[1] == "t");

        let mut replica = python_expected("t", "-");
        replica.extend(["advisory lock refused 25006", "after the refusal t", "read write moved f"].map(String::from));
        assert_eq!(python("replica", pg, port, &table, 1), replica, "{mode}: psycopg and asyncpg on the standby");
        assert_eq!(jdbc("replica", pg, port, &table, 0), jdbc_expected("t", "-"), "{mode}: PgJDBC");
        let script = "BEGIN READ ONLY;\nSELECT pg_is_in_recovery();\nCOMMIT;\n";
        assert_eq!(psql_lines(port, pg, script), ["t"], "{mode}: psql");

        env.pause_replication(Kind::Pg);
        let base = if mode == "transaction" { 100 } else { 200 };
        assert_eq!(
            python("paused", pg, port, &table, base),
            python_expected("f", "seen"),
            "{mode}: after its own write, each transaction runs on the primary and sees it"
        );
        assert_eq!(jdbc("paused", pg, port, &table, base + 50), jdbc_expected("f", "seen"), "{mode}: PgJDBC");
        let script = format!(
            "INSERT INTO {table} VALUES ({});\nBEGIN READ ONLY;\nSELECT pg_is_in_recovery(), count(*) FROM {table} WHERE id = {};\nCOMMIT;\n",
            base + 60,
            base + 60
        );
        assert_eq!(psql_lines(port, pg, &script), ["f|1"], "{mode}: psql");
        env.resume_replication(Kind::Pg);
        pg.wait_replica_caught_up(Duration::from_secs(20));
    }
}

/// A transaction on the primary that changed nothing, and a write the server refused, leave
/// the session's reads on the standby even while it is behind: neither committed anything.
/// A transaction that wrote through a trigger the parse cannot see still waits for its write.
#[test]
fn a_transaction_that_wrote_nothing_or_a_failed_write_holds_no_read_on_the_primary() {
    let env = Dbs::private();
    let pg = &env.pg;
    let table = unique_name("causal_nowrite");
    pg.primary_client()
        .batch_execute(&format!(
            "CREATE TABLE {table} (id int PRIMARY KEY);\nCREATE TABLE {table}_log (id int);\n\
             CREATE FUNCTION {table}_f() RETURNS trigger LANGUAGE plpgsql AS \
             $$ BEGIN INSERT INTO {table} VALUES (NEW.id); RETURN NEW; END $$;\n\
             CREATE TRIGGER {table}_t AFTER INSERT ON {table}_log FOR EACH ROW EXECUTE FUNCTION {table}_f();\n\
             INSERT INTO {table} VALUES (0);"
        ))
        .expect("create");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    let router = causal_router(pg, "transaction");
    let read = format!("SELECT count(*), pg_is_in_recovery() FROM {table}");
    let mut c = router.pg(&pg.database);
    eventually(Duration::from_secs(15), "reads on the standby", || where_read(&mut c, &read)[1] == "t");
    env.pause_replication(Kind::Pg);
    // Another client's write: the primary's WAL is now ahead of the paused standby.
    pg.primary_client().batch_execute(&format!("INSERT INTO {table}_log VALUES (-1)")).expect("direct write");

    for sql in ["BEGIN", &format!("SELECT count(*) FROM {table}"), "COMMIT"] {
        c.simple_query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    assert_eq!(where_read(&mut c, &read), ["1", "t"], "a transaction that wrote nothing");
    let failed = c.simple_query(&format!("INSERT INTO {table} VALUES (0)")).expect_err("duplicate key");
    assert_eq!(sqlstate(&failed), "23505");
    assert_eq!(where_read(&mut c, &read), ["1", "t"], "a failed write");
    let rolled_back = format!("BEGIN; INSERT INTO {table} VALUES (7); ROLLBACK");
    c.batch_execute(&rolled_back).expect("rolled back");
    assert_eq!(where_read(&mut c, &read), ["1", "t"], "a rolled-back write");

    // The parse sees an INSERT into the log table; the trigger's insert into `table` is
    // unseen, and in a transaction whose only visible statement is a read it still counts.
    for sql in ["BEGIN", &format!("SELECT count(*) FROM {table}_log"), "COMMIT"] {
        c.simple_query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    assert_eq!(where_read(&mut c, &read), ["1", "t"], "still nothing written by this session");
    let mut w = router.pg(&pg.database);
    w.batch_execute(&format!("BEGIN; INSERT INTO {table}_log VALUES (5); COMMIT")).expect("trigger write");
    assert_eq!(where_read(&mut w, &read), ["3", "f"], "the trigger's row is read on the primary");
    env.resume_replication(Kind::Pg);
}
