//! Issue #24: a native MySQL session on a MariaDB pool sends one translated statement to a
//! PostgreSQL-protocol pool and gets MySQL results back, in the same session as its ordinary
//! statements. The analytics pool is the harness's PostgreSQL hot standby, so a row that says
//! `pg_is_in_recovery()` = true proves where the translated statement ran, and `@@server_id`
//! proves the ordinary ones ran on the MariaDB primary. Clients: the mariadb CLI, the `mysql`
//! crate (text and binary protocol), PyMySQL and JDBC, each in transaction and session mode; a statement
//! routed across inside a MariaDB transaction is refused with 9004 / 25001 and the
//! transaction goes on.

use std::process::Command;
use std::time::Duration;

use mysql::prelude::Queryable;

use crate::router::Router;
use crate::routing_api::{enc, http};
use crate::support::{dbs, unique_name};

const MY_PRIMARY: u64 = 1;

/// The tables: `mt` on MariaDB (id, label), `pt` on PostgreSQL (id, label, amount, note, at)
/// with row 1 fully set and row 2 with NULLs, replicated to the standby.
struct Tables {
    mt: String,
    pt: String,
}

fn tables() -> Tables {
    let (pg, my) = (&dbs().pg, &dbs().my);
    let t = Tables { mt: unique_name("htap_my"), pt: unique_name("htap_pg") };
    my.primary_client()
        .query_drop(format!("CREATE TABLE {} (id INT PRIMARY KEY, label VARCHAR(20))", t.mt))
        .expect("mariadb table");
    pg.primary_client()
        .batch_execute(&format!(
            "CREATE TABLE {pt} (id int PRIMARY KEY, label text, amount numeric(10,2), note text, at timestamp);\n\
             INSERT INTO {pt} VALUES (1, 'olap ✓', 12.50, 'it''s', '2026-12-03 04:05:06'), (2, 'two', NULL, NULL, NULL);",
            pt = t.pt
        ))
        .expect("postgres table");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    t
}

/// The MySQL statement the rule rewrites, for row `id`.
fn original(t: &Tables, id: &str) -> String {
    format!("SELECT label FROM {} WHERE id = {id}", t.mt)
}

/// MySQL listener; pool `oltp` on the MariaDB primary (the session's pool), pool `analytics` on
/// the PostgreSQL standby (`protocol = "postgres"`), both in `mode`; one translation rule sends
/// reads of `mt` by id to `pt` on `analytics`.
fn router(t: &Tables, mode: &str) -> Router {
    let (pg, my) = (&dbs().pg, &dbs().my);
    let translated =
        format!("SELECT label, amount, note, at, pg_is_in_recovery() AS standby FROM {} WHERE id = 1", t.pt);
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.oltp]\nmode = \"{mode}\"\nusername = \"{mu}\"\npassword = \"{mp}\"\ndatabase = \"{md}\"\n\
         max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {mport} }}]\n\n\
         [pools.analytics]\nprotocol = \"postgres\"\nmode = \"{mode}\"\nusername = \"{pu}\"\npassword = \"{pp}\"\n\
         database = \"{pd}\"\nmax_connections = 4\nacquire_timeout = \"20s\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {pport} }}]\n\n\
         [routing.mysql]\ndefault_pool = \"oltp\"\n\n\
         [[translation.rules]]\noriginal_sql = \"{orig}\"\ntranslated_sql = \"{translated}\"\ntarget_pool = \"analytics\"\n\n\
         [[translation.rules]]\noriginal_sql = \"SELECT COUNT(*) FROM {mt}\"\n\
         translated_sql = \"SELECT to_char(now(), 'TZH:TZM') AS tz\"\ntarget_pool = \"analytics\"\n\n\
         [metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n",
        mu = my.user,
        mp = my.password,
        md = my.database,
        mport = my.primary_port,
        pu = pg.user,
        pp = pg.password,
        pd = pg.database,
        pport = pg.replica_port,
        orig = original(t, "1"),
        mt = t.mt,
    ))
}

fn client(router: &Router) -> mysql::Conn {
    let my = &dbs().my;
    mysql::Conn::new(my.opts(router.port(), &my.user, &my.password)).unwrap_or_else(|e| panic!("connect: {e}"))
}

fn server_id(c: &mut mysql::Conn) -> u64 {
    c.query_first("SELECT @@server_id").expect("server id").expect("a row")
}

/// (code, SQLSTATE, message) of a server error.
fn server_error(e: mysql::Error) -> (u16, String, String) {
    match e {
        mysql::Error::MySqlError(e) => (e.code, e.state, e.message),
        other => panic!("expected a server error, got {other}"),
    }
}

/// The row of `pt` the translation reads, as the `mysql` crate gets it: label, amount, note,
/// timestamp, standby flag.
type Row = (String, Option<String>, Option<String>, Option<mysql::Value>, i64);

fn cleanup(t: &Tables) {
    let (pg, my) = (&dbs().pg, &dbs().my);
    my.primary_client().query_drop(format!("DROP TABLE {}", t.mt)).expect("drop mariadb table");
    pg.primary_client().batch_execute(&format!("DROP TABLE {}", t.pt)).expect("drop postgres table");
}

/// The `mysql` crate, text and prepared, in both pool modes: ordinary statements on the
/// MariaDB primary, the translated one on the PostgreSQL standby, with types and NULLs; inside
/// a transaction the translated statement is refused and the transaction's write still commits.
#[test]
fn mysql_session_runs_a_translated_statement_on_a_postgres_pool() {
    let t = tables();
    for mode in ["transaction", "session"] {
        let router = router(&t, mode);
        let mut c = client(&router);
        assert_eq!(server_id(&mut c), MY_PRIMARY, "{mode}: ordinary statement on MariaDB");
        let text: Vec<Row> = c.query(original(&t, "1")).unwrap_or_else(|e| panic!("{mode}: translated text: {e}"));
        // A timestamp without typmod is DATETIME(6) through the bridge.
        let expected_at = mysql::Value::Bytes(b"2026-12-03 04:05:06.000000".to_vec());
        assert_eq!(
            text,
            vec![("olap ✓".to_owned(), Some("12.50".to_owned()), Some("it's".to_owned()), Some(expected_at), 1)],
            "{mode}: text result from the standby"
        );
        // Another literal: the rule's template fills it in; row 2 has NULLs.
        let nulls: Vec<Row> = c.query(original(&t, "2")).expect("translated, NULLs");
        assert_eq!(nulls, vec![("two".to_owned(), None, None, None, 1)], "{mode}: NULLs");
        assert_eq!(server_id(&mut c), MY_PRIMARY, "{mode}: back on MariaDB");
        // Prepared: described and executed on PostgreSQL, binary rows.
        let stmt = c.prep(original(&t, "?")).unwrap_or_else(|e| panic!("{mode}: prepare: {e}"));
        for (id, label, standby) in [(1, "olap ✓", 1), (2, "two", 1)] {
            let row: Option<Row> = c.exec_first(&stmt, (id,)).unwrap_or_else(|e| panic!("{mode}: execute {id}: {e}"));
            let row = row.expect("a row");
            assert_eq!((row.0.as_str(), row.4), (label, standby), "{mode}: prepared row {id}");
            if id == 1 {
                assert_eq!(row.1.as_deref(), Some("12.50"), "{mode}: numeric in binary");
                assert_eq!(row.3, Some(mysql::Value::Date(2026, 12, 3, 4, 5, 6, 0)), "{mode}: timestamp in binary");
            } else {
                assert_eq!((row.1, row.2, row.3), (None, None, None), "{mode}: NULLs in binary");
            }
        }
        // A MariaDB transaction: the statement routed to PostgreSQL is refused, clearly, and
        // the transaction goes on and commits its write.
        c.query_drop("BEGIN").expect("begin");
        c.query_drop(format!("INSERT INTO {} VALUES (10, @@server_id)", t.mt)).expect("insert");
        let (code, state, message) = server_error(c.query_drop(original(&t, "1")).expect_err("refused in tx"));
        assert_eq!((code, state.as_str()), (9004, "25001"), "{mode}: {message}");
        assert!(message.contains("transaction") && message.contains("analytics"), "{mode}: {message}");
        let err = c.exec_drop(&stmt, (1,)).expect_err("prepared refused in tx");
        assert_eq!(server_error(err).0, 9004, "{mode}: prepared execute refused in tx");
        assert_eq!(server_id(&mut c), MY_PRIMARY, "{mode}: the transaction is still on MariaDB");
        c.query_drop("COMMIT").expect("commit");
        let stored: Option<String> = dbs()
            .my
            .primary_client()
            .query_first(format!("SELECT label FROM {} WHERE id = 10", t.mt))
            .expect("read back");
        assert_eq!(stored.as_deref(), Some("1"), "{mode}: the transaction's write committed on MariaDB");
        // After the transaction the translated statement runs across again.
        let again: Vec<Row> = c.query(original(&t, "1")).expect("after commit");
        assert_eq!(again.len(), 1, "{mode}");
        c.query_drop(format!("DELETE FROM {} WHERE id = 10", t.mt)).expect("delete");
        drop(c);
    }
    cleanup(&t);
}

/// The mariadb CLI (the client of the issue's report, which saw `ERROR 2027 Received malformed
/// packet`): one session runs MariaDB, the translated statement on the standby, MariaDB again;
/// a transaction that touched MariaDB gets the refusal.
#[test]
fn mariadb_cli_session_mixes_mariadb_and_postgres_statements() {
    let t = tables();
    for mode in ["transaction", "session"] {
        let router = router(&t, mode);
        let my = &dbs().my;
        let cli = |sql: &str| {
            Command::new("mariadb")
                .args([
                    "--no-defaults",
                    "--protocol=TCP",
                    "-h127.0.0.1",
                    "--skip-ssl",
                    "--batch",
                    "--skip-column-names",
                ])
                .arg(format!("-u{}", my.user))
                .arg(format!("-p{}", my.password))
                .arg(format!("-P{}", router.port()))
                .arg(&my.database)
                .args(["-e", sql])
                .output()
                .expect("run the mariadb CLI")
        };
        let out = cli(&format!("SELECT @@server_id; {}; SELECT @@server_id", original(&t, "1")));
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(stdout, "1\nolap ✓\t12.50\tit's\t2026-12-03 04:05:06.000000\t1\n1\n", "{mode}");
        let out = cli(&format!("BEGIN; INSERT INTO {} VALUES (11, 'x'); {}", t.mt, original(&t, "1")));
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!out.status.success());
        assert!(
            stderr.contains("ERROR 9004 (25001)") && stderr.contains("transaction never spans two pools"),
            "{stderr}"
        );
        drop(router);
    }
    cleanup(&t);
}

/// PyMySQL (text protocol, autocommit off by default): with autocommit off the statement would
/// belong to a MariaDB transaction and is refused; with autocommit on it runs on the standby.
#[test]
fn pymysql_runs_the_translated_statement_on_postgres() {
    let t = tables();
    for mode in ["transaction", "session"] {
        let router = router(&t, mode);
        let my = &dbs().my;
        let script = format!(
            r#"
import pymysql
c = pymysql.connect(host="127.0.0.1", port={port}, user="{u}", password="{p}", database="{d}")
cur = c.cursor()
try:
    cur.execute("{q}")
    print("ran with autocommit off")
except pymysql.MySQLError as e:
    print("refused", e.args[0])
c.rollback()
c.autocommit(True)
cur.execute("SELECT @@server_id")
print("server", cur.fetchone()[0])
cur.execute("{q}")
print("row", cur.fetchone())
cur.execute("{q2}")
print("row", cur.fetchone())
cur.execute("SELECT @@server_id")
print("server", cur.fetchone()[0])
"#,
            port = router.port(),
            u = my.user,
            p = my.password,
            d = my.database,
            q = original(&t, "1"),
            q2 = original(&t, "2"),
        );
        let out = Command::new("/usr/bin/python3").args(["-c", &script]).output().expect("run python3");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(
            stdout.lines().collect::<Vec<_>>(),
            vec![
                "refused 9004",
                "server 1",
                "row ('olap ✓', Decimal('12.50'), \"it's\", datetime.datetime(2026, 12, 3, 4, 5, 6), 1)",
                "row ('two', None, None, None, 1)",
                "server 1",
            ],
            "{mode}"
        );
        drop(router);
    }
    cleanup(&t);
}

/// The dry-run names the PostgreSQL pool, its protocol, the translated SQL and (for `?`) the
/// parameter order; session settings the PostgreSQL pool can take are carried over (a time
/// zone offset shows in `now()`'s offset there), and one it cannot is refused with 9005.
#[test]
fn dry_run_shows_the_target_protocol_and_session_settings_follow_or_refuse() {
    let t = tables();
    let router = router(&t, "transaction");
    let admin = router.control().endpoints().admin.expect("admin endpoint");
    let path = format!("/api/routing/test?sql={}&protocol=mysql", enc(&original(&t, "?")));
    let (status, d) = http(admin, "GET", &path, None);
    assert_eq!(status, 200, "{d}");
    assert_eq!((d["decision"].as_str(), d["pool"].as_str()), (Some("translation"), Some("analytics")), "{d}");
    assert_eq!((d["protocol"].as_str(), d["pool_protocol"].as_str()), (Some("mysql"), Some("postgres")), "{d}");
    assert_eq!(
        d["rewritten_sql"].as_str(),
        Some(
            format!("SELECT label, amount, note, at, pg_is_in_recovery() AS standby FROM {} WHERE id = ?", t.pt)
                .as_str()
        ),
        "{d}"
    );
    let path = format!("/api/routing/test?sql={}&protocol=mysql", enc("SELECT @@server_id"));
    let (_, d) = http(admin, "GET", &path, None);
    assert_eq!((d["pool"].as_str(), d["pool_protocol"].as_str()), (Some("oltp"), Some("mysql")), "{d}");

    let zone = format!("SELECT COUNT(*) FROM {}", t.mt);
    let mut c = client(&router);
    let default: Option<String> = c.query_first(&zone).expect("zone, default");
    assert_ne!(default.as_deref(), Some("+05:30"));
    c.query_drop("SET time_zone = '+05:30'").expect("time zone");
    let set: Option<String> = c.query_first(&zone).expect("zone, set");
    assert_eq!(set.as_deref(), Some("+05:30"), "the session's time zone applies on PostgreSQL");
    // The setting was this session's alone: another client's statement does not see it.
    let other: Option<String> = client(&router).query_first(&zone).expect("zone, other client");
    assert_eq!(other, default, "no setting leaks to another client");
    c.query_drop("SET sql_select_limit = 1").expect("select limit");
    let (code, state, message) = server_error(c.query_drop(original(&t, "1")).expect_err("unmappable setting"));
    assert_eq!((code, state.as_str()), (9005, "0A000"), "{message}");
    assert!(message.contains("sql_select_limit"), "{message}");
    assert_eq!(server_id(&mut c), MY_PRIMARY, "the session goes on on MariaDB");
    drop(c);
    drop(router);
    cleanup(&t);
}

/// MariaDB Connector/J, with client-side and with server-side prepared statements: MariaDB
/// before and after, the translated statement on the standby as a Statement and as a
/// PreparedStatement (NULLs included), refused once autocommit is off.
#[test]
fn jdbc_runs_the_translated_statement_on_postgres() {
    let t = tables();
    for mode in ["transaction", "session"] {
        let router = router(&t, mode);
        let my = &dbs().my;
        for server_prepare in [false, true] {
            let url = format!(
                "jdbc:mariadb://127.0.0.1:{}/{}?useSsl=false&useServerPrepStmts={server_prepare}",
                router.port(),
                my.database
            );
            let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors/JdbcHtap.java");
            let out = Command::new("java")
                .args(["-cp", "/usr/share/java/mariadb-java-client.jar", script])
                .args([&url, &my.user, &my.password, &original(&t, "?")])
                .output()
                .expect("run java (installed by .ci/deps.sh)");
            let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(
                stdout.lines().collect::<Vec<_>>(),
                vec![
                    "server 1",
                    "text olap ✓|12.50|it's|2026-12-03 04:05:06.0|1",
                    "prepared olap ✓|12.50|it's|2026-12-03 04:05:06.0|1",
                    "prepared two|null|null|null|1",
                    "refused 9004 25001",
                    "server 1",
                ],
                "{mode}: useServerPrepStmts={server_prepare}"
            );
        }
        drop(router);
    }
    cleanup(&t);
}
