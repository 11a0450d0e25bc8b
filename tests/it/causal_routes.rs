//! Issue #34: the causal token on every route a client can send it by — psycopg 3 named
//! prepared statements and pipelines, asyncpg's prepared statements (`tests/connectors/
//! causal_routes.py`), psql's multi-statement texts. With replay paused on the standby, a read
//! after the token was set must run on the primary and see the write: on a route where the
//! token reached the server instead of the router, it reads the paused standby (`0 t`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::causal::{be, pool, router, where_read};
use crate::pg_util::psql;
use crate::routing_api::{enc, http};
use crate::support::{eventually, unique_name, Dbs, Kind, PgEnv};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors/causal_routes.py");

fn python(case: &str, pg: &PgEnv, port: u16, table: &str, token: &str) -> Vec<String> {
    let out = Command::new("/usr/bin/python3")
        .arg(Path::new(SCRIPT))
        .args([case, "127.0.0.1", &port.to_string(), &pg.user, &pg.password, &pg.database, table, token])
        .output()
        .unwrap_or_else(|e| panic!("run python3 {case}: {e} (installed by .ci/deps.sh)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{case} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

#[test]
fn the_token_set_by_any_route_keeps_reads_off_a_paused_standby() {
    let env = Dbs::private();
    let pg = &env.pg;
    let pools = pool(pg, "primary", &[be(pg.primary_port, "")]) + &pool(pg, "replica", &[be(pg.replica_port, "")]);
    let router = router(&pools, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let table = unique_name("causal_routes");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {table} (id int PRIMARY KEY)")).expect("create");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    let read = format!("SELECT count(*), pg_is_in_recovery() FROM {table}");
    let mut writer = router.pg(&pg.database);
    eventually(Duration::from_secs(15), "reads on the standby", || where_read(&mut writer, &read)[1] == "t");

    env.pause_replication(Kind::Pg);
    writer.simple_query(&format!("INSERT INTO {table} VALUES (1)")).expect("write");
    let token = where_read(&mut writer, "SHOW querypilot.causal_token").remove(0);
    assert!(token.starts_with("pg:"), "token {token}");
    let port = router.port();

    assert_eq!(
        python("psycopg_named", pg, port, &table, &token),
        ["show before ''", &format!("show after {token}"), "read 1 f", "invalid 22023", "read again 1 f"],
        "psycopg prepare=True: SET/SHOW answered by the router, the read on the primary"
    );
    assert_eq!(
        python("psycopg_pipeline", pg, port, &table, &token),
        ["read 1 f", &format!("show {token}")],
        "psycopg pipeline: the read after the token's SET in the same batch"
    );
    assert_eq!(
        python("asyncpg_prepared", pg, port, &table, &token),
        ["show before ''", &format!("show after {token}"), "read 1 f"],
        "asyncpg: fetchval(SHOW) and a prepared SET"
    );

    // psql: in a multi-statement text the token is refused before anything reaches a server;
    // `TO DEFAULT` is RESET, accepted.
    let multi = format!("select 1; set querypilot.causal_token = '{token}'");
    let out = psql(port, &pg.database, &pg.password, &["-At", "-v", "VERBOSITY=verbose", "-c", &multi], "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("0A000") && stderr.contains("statement of its own"), "{stderr}");
    let script = format!(
        "SET querypilot.causal_token TO DEFAULT;\n{read};\nSET querypilot.causal_token = '{token}';\n{read};\n"
    );
    let out = psql(port, &pg.database, &pg.password, &["-At"], &script);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["SET", "0|t", "SET", "1|f"],
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    env.resume_replication(Kind::Pg);
}

/// MariaDB: the token named where the router cannot answer it alone — a prepared statement
/// (COM_STMT_PREPARE) or a multi-statement text — is refused with 1235 by the router, not
/// sent to the server (which would answer 1193, unknown system variable).
#[test]
fn mariadb_refuses_the_token_in_prepared_and_multi_statement_texts() {
    use crate::causal_mysql::{client, my_router};
    use mysql::prelude::Queryable;
    let env = crate::support::dbs();
    let router = my_router(&env.my, "read_your_writes = \"causal\"");
    let mut c = client(&router, &env.my);
    let code = |r: Result<(), mysql::Error>| match r {
        Err(mysql::Error::MySqlError(e)) => (e.code, e.message.contains("querypilot.causal_token")),
        other => panic!("expected a server error, got {other:?}"),
    };
    let prepared = c.exec_drop("SET querypilot.causal_token = 'gtid:0-1-1'", ());
    assert_eq!(code(prepared), (1235, true), "COM_STMT_PREPARE");
    let prepared_show = c.exec_drop("SHOW querypilot.causal_token", ());
    assert_eq!(code(prepared_show), (1235, true), "COM_STMT_PREPARE of SHOW");
    let multi = c.query_drop("SELECT 1; SET querypilot.causal_token = 'gtid:0-1-1'");
    assert_eq!(code(multi), (1235, true), "multi-statement text");
    c.query_drop("SET querypilot.causal_token TO DEFAULT").expect("TO DEFAULT is RESET");
    c.query_drop("SET querypilot.causal_token = 'gtid:0-1-1'").expect("a text query still sets it");
}

/// A write the analysis cannot see — a STABLE function calling a VOLATILE one that inserts —
/// inside a transaction still leaves a commit position: the next read waits for it rather
/// than reading the paused standby.
#[test]
fn a_transaction_writing_through_a_stable_function_leaves_a_position() {
    let env = Dbs::private();
    let pg = &env.pg;
    let pools = pool(pg, "primary", &[be(pg.primary_port, "")]) + &pool(pg, "replica", &[be(pg.replica_port, "")]);
    let router = router(&pools, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let table = unique_name("causal_unseen");
    pg.primary_client()
        .batch_execute(&format!(
            "CREATE TABLE {table} (id int PRIMARY KEY);\n\
             CREATE FUNCTION {table}_w(i int) RETURNS int VOLATILE LANGUAGE sql AS 'INSERT INTO {table} VALUES (i) RETURNING i';\n\
             CREATE FUNCTION {table}_outer(i int) RETURNS int STABLE LANGUAGE plpgsql AS \
             $$ BEGIN RETURN {table}_w(i); END $$;"
        ))
        .expect("create");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    let read = format!("SELECT count(*), pg_is_in_recovery() FROM {table}");
    let mut c = router.pg(&pg.database);
    eventually(Duration::from_secs(15), "reads on the standby", || where_read(&mut c, &read)[1] == "t");
    env.pause_replication(Kind::Pg);
    for sql in ["BEGIN".to_owned(), format!("SELECT {table}_outer(1)"), "COMMIT".to_owned()] {
        c.simple_query(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    assert_eq!(where_read(&mut c, &read), ["1", "f"], "separate statements");
    c.batch_execute(&format!("BEGIN; SELECT {table}_outer(2); COMMIT")).expect("one text");
    assert_eq!(where_read(&mut c, &read), ["2", "f"], "one multi-statement text");
    env.resume_replication(Kind::Pg);
}

/// MariaDB: a write that leaves no GTID (`sql_log_bin = 0`) hands out the token `primary` (not
/// `gtid:`, which SET would refuse) and keeps the session's reads on the primary, the only
/// server with it.
#[test]
fn mariadb_a_write_without_a_gtid_keeps_reads_on_the_primary() {
    use crate::causal_mysql::{client, my_router};
    use mysql::prelude::Queryable;
    let env = crate::support::dbs();
    let my = &env.my;
    let router = my_router(my, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let t = unique_name("causal_nogtid");
    my.primary_client().query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY)")).expect("create");
    let primary: u64 = my.primary_client().query_first("SELECT @@server_id").expect("id").expect("row");
    let mut c = client(&router, my);
    c.query_drop("SET SESSION sql_log_bin = 0").expect("sql_log_bin = 0");
    c.query_drop(format!("INSERT INTO {t} VALUES (1)")).expect("a write without a GTID");
    let token: Option<String> = c.query_first("SHOW querypilot.causal_token").expect("show");
    assert_eq!(token.as_deref(), Some("primary"), "no GTID: only the primary is sure to have the write");
    c.query_drop("SET querypilot.causal_token = 'primary'").expect("every issued token is accepted");
    let (count, server): (u64, u64) =
        c.query_first(format!("SELECT COUNT(*), @@server_id FROM {t}")).expect("read").expect("row");
    assert_eq!((count, server), (1, primary), "the read stays on the primary");
}

/// psycopg 3 through the router: one INSERT into `argv[6]` with id `argv[7]`, then a read, then
/// prints the `querypilot.causal_token` ParameterStatus the session holds (`None`: none came).
const PARAMETER_STATUS: &str = r#"
import sys, psycopg
host, port, user, password, db, t, n = sys.argv[1:8]
with psycopg.connect(host=host, port=port, user=user, password=password, dbname=db, autocommit=True) as c:
    c.execute(f"INSERT INTO {t} VALUES ({n})")
    c.execute("SELECT 1").fetchall()
    print(c.info.parameter_status("querypilot.causal_token"))
"#;

/// A commit whose position cannot be read — here because the server refuses the router's
/// `pg_current_wal_insert_lsn()` to the pool's user (`REVOKE EXECUTE ... FROM PUBLIC`, as a
/// hardened server may) — keeps the session's reads on the primary, and its token is then
/// `primary` (by SHOW and ParameterStatus), never the older position learned before, which the
/// standby replayed without the new write: a holder of it (SET, startup parameter) reads on
/// the primary and sees the write (#34).
#[test]
fn a_lost_commit_position_hands_out_the_primary_token() {
    let env = Dbs::private();
    let pg = &env.pg;
    let pools = pool(pg, "primary", &[be(pg.primary_port, "")]) + &pool(pg, "replica", &[be(pg.replica_port, "")]);
    let router = router(&pools, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let t = unique_name("causal_lost");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {t} (id int PRIMARY KEY)")).expect("create");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    let read = format!("SELECT count(*) FILTER (WHERE id = 2), pg_is_in_recovery() FROM {t}");
    let mut c = router.pg(&pg.database);
    eventually(Duration::from_secs(15), "reads on the standby", || where_read(&mut c, &read)[1] == "t");
    c.batch_execute(&format!("INSERT INTO {t} VALUES (1)")).expect("a first write");
    let older = where_read(&mut c, "SHOW querypilot.causal_token").remove(0);
    assert!(older.starts_with("pg:"), "a learned position: {older}");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    let revoke = "REVOKE EXECUTE ON FUNCTION pg_catalog.pg_current_wal_insert_lsn() FROM PUBLIC";
    let mut su = pg.superuser_client(pg.primary_port);
    su.batch_execute(revoke).expect(revoke);
    env.pause_replication(Kind::Pg);
    c.batch_execute(&format!("INSERT INTO {t} VALUES (2)")).expect("a write whose position is unreadable");
    let mut failures = Vec::new();
    let check = |failures: &mut Vec<String>, what: &str, got: Vec<String>| {
        if got != ["1", "f"] {
            failures.push(format!("{what}: (rows, in recovery) = {got:?}, not the primary's row"));
        }
    };
    check(&mut failures, "the writer", where_read(&mut c, &read));
    let token = where_read(&mut c, "SHOW querypilot.causal_token").remove(0);
    let mut other = router.pg(&pg.database);
    assert_eq!(where_read(&mut other, &read), ["0", "t"], "without the token: the paused standby");
    match other.batch_execute(&format!("SET querypilot.causal_token = '{token}'")) {
        Ok(()) => check(&mut failures, &format!("the holder of '{token}' by SET"), where_read(&mut other, &read)),
        Err(e) => failures.push(format!("SET of '{token}' refused: {e}")),
    }
    let mut config = postgres::Config::new();
    config.host("127.0.0.1").port(router.port()).user(&pg.user).password(&pg.password).dbname(&pg.database);
    match config.options(&format!("-c querypilot.causal_token={token}")).connect(postgres::NoTls) {
        Ok(mut by_startup) => {
            check(&mut failures, &format!("the holder of '{token}' at startup"), where_read(&mut by_startup, &read))
        }
        Err(e) => failures.push(format!("'{token}' as startup parameter refused: {e}")),
    }
    let out = Command::new("/usr/bin/python3")
        .args(["-c", PARAMETER_STATUS, "127.0.0.1", &router.port().to_string(), &pg.user, &pg.password])
        .args([&pg.database, &t, "3"])
        .output()
        .expect("run python3 (psycopg 3, installed by .ci/deps.sh)");
    let status = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    if status != "primary" {
        failures.push(format!("ParameterStatus '{status}' {}", String::from_utf8_lossy(&out.stderr)));
    }
    if token != "primary" {
        failures.push(format!("SHOW answered '{token}' (the position learned before: '{older}'), not 'primary'"));
    }
    // '', what SHOW answers for a session that needs no position, is accepted back (#34).
    let mut fresh = router.pg(&pg.database);
    if let Err(e) = fresh.batch_execute("SET querypilot.causal_token = ''") {
        failures.push(format!("SET of '' refused: {e}"));
    }
    if let Err(e) = config.options("-c querypilot.causal_token=").connect(postgres::NoTls) {
        failures.push(format!("'' as startup parameter refused: {e}"));
    }
    // The dry-run takes every token a session hands out too.
    let admin = router.control().endpoints().admin.expect("admin endpoint");
    let path = format!("/api/routing/test?protocol=postgres&sql={}&causal_token=primary", enc(&read));
    let (status, view) = http(admin, "GET", &path, None);
    if (status, view["pool"].as_str(), view["reason"].as_str()) != (200, Some("primary"), Some("read_your_writes")) {
        failures.push(format!("the dry-run of a read with token 'primary': {status} {view}"));
    }
    su.batch_execute("GRANT EXECUTE ON FUNCTION pg_catalog.pg_current_wal_insert_lsn() TO PUBLIC").expect("grant");
    env.resume_replication(Kind::Pg);
    assert!(failures.is_empty(), "{failures:#?}");
}

/// psycopg 3: after each write returns, the token the session holds (its ParameterStatus), the
/// token SHOW answers, and whether a reader given the former by SET sees the write: a simple
/// autocommit INSERT, an extended (parameterised) one, and a transaction's COMMIT.
const STATUS_AT_COMMIT: &str = r#"
import sys, psycopg
host, port, user, password, db, t = sys.argv[1:7]
def connect(**kw):
    return psycopg.connect(host=host, port=port, user=user, password=password, dbname=db, **kw)
with connect(autocommit=True) as c, connect(autocommit=True) as reader:
    def report(what, n):
        status = c.info.parameter_status("querypilot.causal_token")
        show = c.execute("SHOW querypilot.causal_token").fetchone()[0]
        reader.execute(f"SET querypilot.causal_token = '{status or ''}'")
        row = reader.execute(f"SELECT count(*) FILTER (WHERE id = {n}), pg_is_in_recovery() FROM {t}").fetchone()
        print(what, status == show, show.startswith("pg:"), row[0], row[1])
    c.execute(f"INSERT INTO {t} VALUES (1)")
    report("simple", 1)
    c.execute(f"INSERT INTO {t} VALUES (%s)", (2,))
    report("extended", 2)
    with c.transaction():
        c.execute(f"INSERT INTO {t} VALUES (3)")
    report("commit", 3)
"#;

/// The token's ParameterStatus goes ahead of the write's (or the commit's) own ReadyForQuery
/// (#34): a client reads nothing after its statement returns, so a token sent later would
/// still be the previous one when the application hands it over, and its holder would read
/// the paused standby without the write.
#[test]
fn the_token_parameter_status_arrives_with_the_commits_own_ready_for_query() {
    let env = Dbs::private();
    let pg = &env.pg;
    let pools = pool(pg, "primary", &[be(pg.primary_port, "")]) + &pool(pg, "replica", &[be(pg.replica_port, "")]);
    let router = router(&pools, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let t = unique_name("causal_status");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {t} (id int PRIMARY KEY)")).expect("create");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    let mut c = router.pg(&pg.database);
    let read = format!("SELECT count(*), pg_is_in_recovery() FROM {t}");
    eventually(Duration::from_secs(15), "reads on the standby", || where_read(&mut c, &read)[1] == "t");
    env.pause_replication(Kind::Pg);
    let out = Command::new("/usr/bin/python3")
        .args(["-c", STATUS_AT_COMMIT, "127.0.0.1", &router.port().to_string(), &pg.user, &pg.password])
        .args([&pg.database, &t])
        .output()
        .expect("run python3 (psycopg 3, installed by .ci/deps.sh)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        ["simple True True 1 False", "extended True True 1 False", "commit True True 1 False"],
        "(what, ParameterStatus == SHOW, a position, the holder's row count, in recovery)"
    );
}
