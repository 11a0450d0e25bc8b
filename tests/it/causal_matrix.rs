//! Issue #34, PostgreSQL: the causal-read matrix. With replay paused on the standby, every
//! write kind (plain, CTE, volatile function, STABLE function calling a VOLATILE one inside a
//! transaction, trigger, DO, CALL, COPY, two-phase commit) through every path a client takes
//! (simple, extended unnamed and named, pipeline, multi-statement) leaves a position that the
//! writer's own reads and a reader given its token (SET, SHOW then SET, startup parameter)
//! wait for: 0 stale reads. psycopg 3, asyncpg and psql each cover their own paths
//! (`tests/connectors/causal_matrix.py`), PgJDBC its own (`JdbcCausalMatrix.java`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::causal::{be, pool, router, where_read};
use crate::support::{eventually, unique_name, Dbs, Kind, PgEnv};

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors");

fn lines(out: std::process::Output, what: &str) -> Vec<String> {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

fn python(client: &str, pg: &PgEnv, port: u16, table: &str, first: u32) -> Vec<String> {
    let out = Command::new("/usr/bin/python3")
        .arg(Path::new(SCRIPTS).join("causal_matrix.py"))
        .args([client, "127.0.0.1", &port.to_string(), &pg.user, &pg.password, &pg.database, table])
        .arg(first.to_string())
        .output()
        .unwrap_or_else(|e| panic!("run python3: {e} (installed by .ci/deps.sh)"));
    lines(out, client)
}

fn jdbc(pg: &PgEnv, port: u16, table: &str, first: u32) -> Vec<String> {
    let out = Command::new("java")
        .args(["-cp", "/usr/share/java/postgresql.jar", &format!("{SCRIPTS}/JdbcCausalMatrix.java")])
        .args([&port.to_string(), &pg.database, &pg.user, &pg.password, table, &first.to_string()])
        .output()
        .expect("run java (installed by .ci/deps.sh)");
    lines(out, "JdbcCausalMatrix")
}

/// Every case read its row, on the primary (the standby is paused).
fn assert_none_stale(client: &str, got: &[String], cases: usize) {
    let bad: Vec<&String> = got.iter().filter(|l| !l.ends_with(" ok f")).collect();
    assert!(
        bad.is_empty(),
        "{client}: {} of {} reads not fresh on the primary:\n{}",
        bad.len(),
        got.len(),
        bad.iter().map(|l| l.as_str()).collect::<Vec<_>>().join("\n")
    );
    assert_eq!(got.len(), cases, "{client}: every case ran");
}

/// The objects the write kinds use: table `t`, `t_log` whose trigger inserts into `t`, the
/// VOLATILE function `t_w(i)` that inserts, the STABLE `t_s(i)` calling it, procedure `t_p(i)`.
pub(crate) fn write_kinds_schema(t: &str) -> String {
    format!(
        "CREATE TABLE {t} (id int PRIMARY KEY);\nCREATE TABLE {t}_log (id int);\n\
         CREATE FUNCTION {t}_tf() RETURNS trigger LANGUAGE plpgsql AS \
         $$ BEGIN INSERT INTO {t} VALUES (NEW.id); RETURN NEW; END $$;\n\
         CREATE TRIGGER {t}_tr AFTER INSERT ON {t}_log FOR EACH ROW EXECUTE FUNCTION {t}_tf();\n\
         CREATE FUNCTION {t}_w(i int) RETURNS int VOLATILE LANGUAGE sql AS 'INSERT INTO {t} VALUES (i) RETURNING i';\n\
         CREATE FUNCTION {t}_s(i int) RETURNS int STABLE LANGUAGE plpgsql AS $$ BEGIN RETURN {t}_w(i); END $$;\n\
         CREATE PROCEDURE {t}_p(i int) LANGUAGE sql AS 'INSERT INTO {t} VALUES (i)';"
    )
}

#[test]
fn no_write_kind_through_any_path_or_token_route_is_read_stale() {
    let env = Dbs::private();
    let pg = &env.pg;
    let t = unique_name("causal_matrix");
    pg.primary_client().batch_execute(&write_kinds_schema(&t)).expect("create");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    let pools = pool(pg, "primary", &[be(pg.primary_port, "")]) + &pool(pg, "replica", &[be(pg.replica_port, "")]);
    let router = router(&pools, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let mut c = router.pg(&pg.database);
    let read = format!("SELECT count(*), pg_is_in_recovery() FROM {t}");
    eventually(Duration::from_secs(15), "reads on the standby", || where_read(&mut c, &read)[1] == "t");
    env.pause_replication(Kind::Pg);
    let port = router.port();
    assert_none_stale("psycopg", &python("psycopg", pg, port, &t, 0), 5 * 3 * 9 * 2);
    assert_none_stale("asyncpg", &python("asyncpg", pg, port, &t, 10_000), 3 * 3 * 9 * 2);
    assert_none_stale("psql", &python("psql", pg, port, &t, 20_000), 2 * 3 * 9 * 2);
    assert_none_stale("PgJDBC", &jdbc(pg, port, &t, 30_000), 4 * 3 * 9 * 2);
    env.resume_replication(Kind::Pg);
}
