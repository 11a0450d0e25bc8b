//! Issue #24, the reverse direction: a native PostgreSQL session on a PostgreSQL pool sends one
//! translated statement to a MySQL-protocol pool (the harness's MariaDB primary) and gets
//! PostgreSQL results back, in the same session as its ordinary statements. `pg_is_in_recovery()`
//! (a function MariaDB does not have) proves the ordinary statements ran on PostgreSQL, and
//! `@@server_id` in the translated text proves where that one ran. Clients: the `postgres` crate
//! (simple query, and the extended protocol with binary results), psql, psycopg 3 (unprepared,
//! prepared, binary, pipeline mode) and PgJDBC, each in transaction and session mode; a statement
//! routed across inside a PostgreSQL transaction is refused with 25001 and the transaction goes on.

use std::path::Path;
use std::process::Command;

use mysql::prelude::Queryable;
use postgres::types::Type;
use postgres::SimpleQueryMessage;

use crate::pg_util::{first_value, psql, sqlstate};
use crate::router::{pg_pool, Router};
use crate::support::{dbs, unique_name};

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors");
/// `@@server_id` of the harness's MariaDB primary.
const MY_PRIMARY: &str = "1";

/// A MariaDB table with row 1 fully set and row 2 with NULLs.
pub(crate) fn table() -> String {
    let t = unique_name("htap_pg");
    let mut my = dbs().my.primary_client();
    my.query_drop(format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, label VARCHAR(20), amount DECIMAL(10,2), note TEXT, at DATETIME, n BIGINT)"
    ))
    .expect("mariadb table");
    my.query_drop(format!(
        "INSERT INTO {t} VALUES (1, 'oltp ✓', 12.50, 'it''s', '2026-12-03 04:05:06', 7), (2, 'two', NULL, NULL, NULL, NULL)"
    ))
    .expect("mariadb rows");
    t
}

/// The PostgreSQL statement the rule rewrites, for row `id` (a literal or `$1`).
pub(crate) fn original(t: &str, id: &str) -> String {
    format!("SELECT label FROM {t} WHERE id = {id}")
}

/// PostgreSQL listener; pool `main` on the PostgreSQL primary (the session's pool) and pool
/// `oltp_my` on the MariaDB primary (`protocol = "mysql"`), both in `mode`; one translation rule
/// sends reads of `t` by id to MariaDB, another shows MariaDB's session time zone.
fn router(t: &str, mode: &str) -> Router {
    Router::start(&router_toml(t, mode))
}

/// The configuration of [`router`].
pub(crate) fn router_toml(t: &str, mode: &str) -> String {
    let my = &dbs().my;
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         {main}\n[pools.oltp_my]\nprotocol = \"mysql\"\nmode = \"{mode}\"\nusername = \"{mu}\"\npassword = \"{mp}\"\n\
         database = \"{md}\"\nmax_connections = 2\nacquire_timeout = \"20s\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {mport} }}]\n\n\
         [routing]\ndefault_pool = \"main\"\n\n\
         [[translation.rules]]\noriginal_sql = \"{orig}\"\n\
         translated_sql = \"SELECT label, amount, note, at, n, CAST(@@server_id AS SIGNED) AS sid FROM {t} WHERE id = 1\"\n\
         target_pool = \"oltp_my\"\n\n\
         [[translation.rules]]\noriginal_sql = \"SELECT 'mysql time zone'\"\n\
         translated_sql = \"SELECT @@session.time_zone AS tz\"\ntarget_pool = \"oltp_my\"\n\n\
         [[translation.rules]]\noriginal_sql = \"SELECT 'mysql error'\"\n\
         translated_sql = \"SELECT id FROM qp_htap_no_such_table\"\ntarget_pool = \"oltp_my\"\n",
        main = pg_pool("main", dbs().pg.primary_port, mode, 2),
        mu = my.user,
        mp = my.password,
        md = my.database,
        mport = my.primary_port,
        orig = original(t, "1"),
    )
}

/// The rows of a simple query, each column as text (`None` for NULL).
fn simple_rows(c: &mut postgres::Client, sql: &str) -> Vec<Vec<Option<String>>> {
    let msgs = c.simple_query(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let rows = msgs.iter().filter_map(|m| match m {
        SimpleQueryMessage::Row(r) => Some((0..r.len()).map(|i| r.get(i).map(str::to_owned)).collect()),
        _ => None,
    });
    rows.collect()
}

fn text(values: &[Option<&str>]) -> Vec<Vec<Option<String>>> {
    vec![values.iter().map(|v| v.map(str::to_owned)).collect()]
}

/// The `postgres` crate, simple and extended protocol (binary results), in both pool modes.
#[test]
fn postgres_session_runs_a_translated_statement_on_a_mysql_pool() {
    let t = table();
    for mode in ["transaction", "session"] {
        let router = router(&t, mode);
        let mut c = router.pg(&dbs().pg.database);
        assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "f", "{mode}: ordinary statement on PostgreSQL");
        let full =
            [Some("oltp ✓"), Some("12.50"), Some("it's"), Some("2026-12-03 04:05:06"), Some("7"), Some(MY_PRIMARY)];
        assert_eq!(simple_rows(&mut c, &original(&t, "1")), text(&full), "{mode}: text row on MariaDB");
        let nulls = [Some("two"), None, None, None, None, Some(MY_PRIMARY)];
        assert_eq!(simple_rows(&mut c, &original(&t, "2")), text(&nulls), "{mode}: NULLs");
        assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "f", "{mode}: back on PostgreSQL");
        // Extended protocol: Parse/Describe of a named statement, then Bind/Execute with binary
        // results. The row description carries PostgreSQL types mapped from MySQL's.
        let stmt = c.prepare_typed(&original(&t, "$1"), &[Type::INT4]).unwrap_or_else(|e| panic!("{mode}: {e}"));
        let types: Vec<Type> = stmt.columns().iter().map(|col| col.type_().clone()).collect();
        assert_eq!(types, [Type::TEXT, Type::NUMERIC, Type::TEXT, Type::TIMESTAMP, Type::INT8, Type::INT8], "{mode}");
        for (id, label, n) in [(1, "oltp ✓", Some(7i64)), (2, "two", None)] {
            let row = c.query_one(&stmt, &[&id]).unwrap_or_else(|e| panic!("{mode}: execute {id}: {e}"));
            assert_eq!((row.get::<_, String>(0), row.get::<_, Option<i64>>(4)), (label.to_owned(), n), "{mode}: {id}");
            assert_eq!(row.get::<_, Option<String>>(2).is_none(), id == 2, "{mode}: NULL text in binary");
            assert_eq!(row.get::<_, i64>(5).to_string(), MY_PRIMARY, "{mode}: prepared row ran on MariaDB");
        }
        // Inside a PostgreSQL transaction that touched its own pool: refused, and it goes on.
        c.batch_execute("BEGIN").expect("begin");
        assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "f");
        let err = c.simple_query(&original(&t, "1")).expect_err("refused in a transaction");
        let msg = err.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default();
        assert_eq!(sqlstate(&err), "25001", "{mode}: {msg}");
        assert!(msg.contains("transaction") && msg.contains("oltp_my"), "{mode}: {msg}");
        let err = c.query_one(&stmt, &[&1i32]).expect_err("prepared refused in a transaction");
        assert_eq!(sqlstate(&err), "25001", "{mode}: prepared");
        assert_eq!(first_value(&mut c, "SELECT 'still in'"), "still in", "{mode}: the transaction goes on");
        c.batch_execute("COMMIT").expect("commit");
        assert_eq!(c.query_one(&stmt, &[&1i32]).expect("after COMMIT").get::<_, String>(0), "oltp ✓", "{mode}");
    }
    cleanup(&t);
}

/// Session settings: a time zone the client set follows the statement to MariaDB (and leaks to
/// no one else), a setting with no MySQL equivalent refuses it with 0A000. MariaDB's errors come
/// back with PostgreSQL's SQLSTATE, at Parse for a prepared statement.
#[test]
fn postgres_session_settings_follow_a_statement_to_mysql_or_refuse_it() {
    let t = table();
    let router = router(&t, "transaction");
    let mut c = router.pg(&dbs().pg.database);
    let err = c.simple_query("SELECT 'mysql error'").expect_err("no such table on MariaDB");
    assert_eq!(sqlstate(&err), "42P01", "{err:?}");
    let err = c.prepare("SELECT 'mysql error'").expect_err("refused at Parse");
    assert_eq!(sqlstate(&err), "42P01", "{err:?}");
    assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "f", "the session goes on");
    let default = first_value(&mut c, "SELECT 'mysql time zone'");
    c.batch_execute("SET TIME ZONE INTERVAL '+05:30' HOUR TO MINUTE").expect("set time zone");
    assert_eq!(first_value(&mut c, "SELECT 'mysql time zone'"), "+05:30", "the session's time zone applies on MariaDB");
    assert_eq!(first_value(&mut router.pg(&dbs().pg.database), "SELECT 'mysql time zone'"), default, "no leak");
    c.batch_execute("SET search_path = public").expect("set search_path");
    let err = c.simple_query(&original(&t, "1")).expect_err("unmappable");
    let msg = err.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default();
    assert_eq!(sqlstate(&err), "0A000", "{msg}");
    assert!(msg.contains("search_path"), "{msg}");
    c.batch_execute("RESET search_path").expect("reset");
    assert_eq!(simple_rows(&mut c, &original(&t, "2"))[0][0].as_deref(), Some("two"), "runs again once reset");
    cleanup(&t);
}

/// With a read/write split for PostgreSQL clients (extended messages held until Sync and routed
/// as one unit), reads run on the standby and the translated statement, simple and prepared, on
/// MariaDB, in one session.
#[test]
fn split_reads_and_a_translated_statement_on_mysql_in_one_session() {
    let t = table();
    let (pg, my) = (&dbs().pg, &dbs().my);
    let router = Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         {primary}\n{standby}\n[pools.oltp_my]\nprotocol = \"mysql\"\nusername = \"{mu}\"\npassword = \"{mp}\"\n\
         database = \"{md}\"\nmax_connections = 2\nbackends = [{{ host = \"127.0.0.1\", port = {mport} }}]\n\n\
         [routing]\nread_write_split = true\nread_pool = \"standby\"\nwrite_pool = \"primary\"\n\n\
         [[translation.rules]]\noriginal_sql = \"{orig}\"\n\
         translated_sql = \"SELECT label, CAST(@@server_id AS SIGNED) AS sid FROM {t} WHERE id = 1\"\n\
         target_pool = \"oltp_my\"\n",
        primary = pg_pool("primary", pg.primary_port, "transaction", 2),
        standby = pg_pool("standby", pg.replica_port, "transaction", 2),
        mu = my.user,
        mp = my.password,
        md = my.database,
        mport = my.primary_port,
        orig = original(&t, "1"),
    ));
    let mut c = router.pg(&pg.database);
    let on_standby =
        |c: &mut postgres::Client| -> bool { c.query_one("SELECT pg_is_in_recovery()", &[]).expect("read").get(0) };
    assert!(on_standby(&mut c), "a split read runs on the standby");
    let text = [Some("oltp ✓"), Some(MY_PRIMARY)];
    assert_eq!(simple_rows(&mut c, &original(&t, "1")), [text.map(|v| v.map(str::to_owned)).to_vec()]);
    let stmt = c.prepare(&original(&t, "$1")).expect("prepare");
    let row = c.query_one(&stmt, &[&"2"]).expect("execute");
    assert_eq!((row.get::<_, String>(0), row.get::<_, i64>(1).to_string()), ("two".to_owned(), MY_PRIMARY.to_owned()));
    assert!(on_standby(&mut c), "the next read is on the standby again");
    cleanup(&t);
}

/// psql: text results of both pools in one session, and the in-transaction refusal by SQLSTATE.
#[test]
fn psql_session_mixes_postgres_and_mysql_statements() {
    let t = table();
    let pg = &dbs().pg;
    for mode in ["transaction", "session"] {
        let router = router(&t, mode);
        let script = format!(
            "SELECT pg_is_in_recovery();\n{q1};\n{q2};\nSELECT pg_is_in_recovery();\n\\set VERBOSITY verbose\nBEGIN;\n\
             SELECT 1;\n{q1};\nCOMMIT;\n",
            q1 = original(&t, "1"),
            q2 = original(&t, "2"),
        );
        let out = psql(router.port(), &pg.database, &pg.password, &["-A", "-t", "-F", "|"], &script);
        let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            stdout,
            format!(
                "f\noltp ✓|12.50|it's|2026-12-03 04:05:06|7|{MY_PRIMARY}\ntwo|||||{MY_PRIMARY}\nf\nBEGIN\n1\nCOMMIT\n"
            ),
            "{mode}: {stderr}"
        );
        assert!(stderr.contains("25001") && stderr.contains("oltp_my"), "{mode}: {stderr}");
    }
    cleanup(&t);
}

/// psycopg 3: unprepared, prepared and binary executes, Python types and NULLs, the refusal.
#[test]
fn psycopg_runs_the_translated_statement_on_mysql() {
    let t = table();
    let pg = &dbs().pg;
    for mode in ["transaction", "session"] {
        let router = router(&t, mode);
        let dsn = format!(
            "host=127.0.0.1 port={} user={} password={} dbname={} connect_timeout=10",
            router.port(),
            pg.user,
            pg.password,
            pg.database
        );
        let out = Command::new("/usr/bin/python3")
            .arg(Path::new(SCRIPTS).join("psycopg_htap.py"))
            .args([&dsn, &original(&t, "%s")])
            .output()
            .unwrap_or_else(|e| panic!("run psycopg (python3-psycopg, installed by .ci/deps.sh): {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{mode}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
        let full =
            format!("('oltp ✓', Decimal('12.50'), \"it's\", datetime.datetime(2026, 12, 3, 4, 5, 6), 7, {MY_PRIMARY})");
        let nulls = format!("('two', None, None, None, None, {MY_PRIMARY})");
        let mut want = vec!["recovery False".to_owned()];
        for kind in ["plain", "prepare", "binary"] {
            want.push(format!("{kind} {full}"));
            want.push(format!("{kind} {nulls}"));
        }
        want.extend([
            "recovery False".to_owned(),
            "pipeline ['oltp ✓', 'two']".to_owned(),
            "mixed pipeline refused 25001 oltp ✓".to_owned(),
            "mixed pipeline refused 25001 7".to_owned(),
            "recovery False".to_owned(),
            "refused 25001".to_owned(),
        ]);
        assert_eq!(stdout.lines().collect::<Vec<_>>(), want, "{mode}");
    }
    cleanup(&t);
}

/// PgJDBC: a Statement, and a PreparedStatement past `prepareThreshold` (unnamed, then named
/// server-side statements), in both pool modes; the refusal with autocommit off.
#[test]
fn jdbc_runs_the_translated_statement_on_mysql() {
    let t = table();
    let pg = &dbs().pg;
    for mode in ["transaction", "session"] {
        let router = router(&t, mode);
        let url = format!("jdbc:postgresql://127.0.0.1:{}/{}?sslmode=disable", router.port(), pg.database);
        let out = Command::new("java")
            .args(["-cp", "/usr/share/java/postgresql.jar", &format!("{SCRIPTS}/JdbcPgHtap.java")])
            .args([&url, &pg.user, &pg.password, &original(&t, "?")])
            .output()
            .expect("run java (installed by .ci/deps.sh)");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{mode}: {stdout}{}", String::from_utf8_lossy(&out.stderr));
        let full = format!("oltp ✓|12.50|it's|2026-12-03 04:05:06.0|7|{MY_PRIMARY}");
        let nulls = format!("two|null|null|null|null|{MY_PRIMARY}");
        assert_eq!(
            stdout.lines().collect::<Vec<_>>(),
            [
                "recovery false".to_owned(),
                format!("text {full}"),
                format!("prepared {full}"),
                format!("prepared {nulls}"),
                format!("prepared {full}"),
                format!("prepared {nulls}"),
                "recovery false".to_owned(),
                "refused 25001".to_owned(),
                "recovery false".to_owned(),
            ],
            "{mode}"
        );
    }
    cleanup(&t);
}

pub(crate) fn cleanup(t: &str) {
    dbs().my.primary_client().query_drop(format!("DROP TABLE {t}")).expect("drop mariadb table");
}
