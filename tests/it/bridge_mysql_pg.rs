//! MySQL clients served by the harness's real PostgreSQL through a cross-protocol pool
//! (`protocol = "postgres"`): the `mysql` crate and the mariadb CLI run DDL, every mapped type
//! in text and binary results, prepared statements, transactions and errors.

use std::process::Command;

use mysql::prelude::Queryable;
use mysql::{Conn, Params, Value};

use crate::router::Router;
use crate::support::{dbs, unique_name};

/// A router with a MySQL listener whose default pool `pgx` is the PostgreSQL primary.
pub(crate) fn bridge_router(mode: &str) -> Router {
    bridge_router_on(mode, &dbs().pg.database)
}

/// [`bridge_router`] with the pool on PostgreSQL database `database`.
fn bridge_router_on(mode: &str, database: &str) -> Router {
    Router::start(&bridge_router_toml(mode, database))
}

/// The configuration of [`bridge_router_on`].
pub(crate) fn bridge_router_toml(mode: &str, database: &str) -> String {
    let pg = &dbs().pg;
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.pgx]\nprotocol = \"postgres\"\nmode = \"{mode}\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
         max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
         [routing]\nmysql_default_pool = \"pgx\"\n",
        u = pg.user,
        p = pg.password,
        d = database,
        port = pg.primary_port,
    )
}

/// The `mysql` crate through the router (TCP only: `prefer_socket(false)` in `opts`).
pub(crate) fn client(router: &Router) -> Conn {
    let my = &dbs().my;
    Conn::new(my.opts(router.port(), &dbs().pg.user, &dbs().pg.password))
        .unwrap_or_else(|e| panic!("connect through the bridge: {e}"))
}

fn server_error(e: mysql::Error) -> (u16, String, String) {
    match e {
        mysql::Error::MySqlError(e) => (e.code, e.state, e.message),
        other => panic!("expected a server error, got {other}"),
    }
}

/// Runs the mariadb CLI against the router; returns stdout (batch mode: tab-separated).
fn cli(router: &Router, sql: &str) -> Result<String, String> {
    let out = Command::new("mariadb")
        .args(["--no-defaults", "--protocol=TCP", "-h127.0.0.1", "-uapp", "-papp", "--skip-ssl", "--batch"])
        .arg(format!("-P{}", router.port()))
        .args(["-e", sql])
        .output()
        .expect("run the mariadb CLI");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

#[test]
fn connects_and_answers_connector_probes() {
    let router = bridge_router("transaction");
    let mut c = client(&router);
    let one: Option<i64> = c.query_first("SELECT 1").expect("select 1");
    assert_eq!(one, Some(1));
    c.query_drop("SET NAMES utf8mb4").expect("set names");
    c.query_drop("SET character_set_results = NULL").expect("charset results");
    c.query_drop("SET SESSION sql_mode='STRICT_TRANS_TABLES'").expect("sql_mode");
    let comment: Option<String> = c.query_first("SELECT @@version_comment LIMIT 1").expect("version comment");
    assert!(comment.unwrap_or_default().contains("QueryPilot"));
    let (inc, packet): (i64, i64) = c
        .query_first("SELECT @@session.auto_increment_increment AS a, @@max_allowed_packet")
        .expect("variables")
        .expect("row");
    assert_eq!((inc, packet > 0), (1, true));
    let vars: Vec<(String, String)> = c.query("SHOW VARIABLES LIKE 'max_allowed%'").expect("show variables");
    assert_eq!(vars.len(), 1);
    assert_eq!(vars[0].0, "max_allowed_packet");
    let db: Option<String> = c.query_first("SELECT DATABASE()").expect("database()");
    assert_eq!(db.as_deref(), Some(dbs().pg.database.as_str()));
    c.ping().expect("ping");
    let err = c.query_drop("SELECT @@no_such_variable").expect_err("unknown variable");
    assert_eq!(server_error(err).0, 1193);
    // Really ran on PostgreSQL.
    let version: Option<String> = c.query_first("SELECT version()").expect("version()");
    assert!(version.unwrap_or_default().starts_with("PostgreSQL"));
    let in_recovery: Option<bool> = c.query_first("SELECT pg_is_in_recovery()").expect("primary");
    assert_eq!(in_recovery, Some(false));
}

const TYPES_DDL: &str = "(id int4 PRIMARY KEY, s int2, i int4, b int8, n numeric(30,10), f4 float4, f8 float8, \
     t text, vc varchar(20), bp char(3), by bytea, bo bool, d date, tm time(6), ts timestamp(6), tz timestamptz(3), \
     j jsonb, u uuid, arr int4[])";

const TYPES_ROW: &str = "(1, -32768, -2147483648, -9223372036854775808, -12345678901234567890.0123456789, 1.5, -2.5e-300, \
     'héllo ✓ 日本', 'abc', 'xy', '\\x00ff7f'::bytea, true, '1999-12-31', '23:59:58.123456', '2024-02-29 12:34:56.789012', \
     '2024-01-02 03:04:05.678+00', '{\"a\": [1, 2.5, null]}', 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', '{1,2,3}')";

fn expected_row() -> Vec<Value> {
    vec![
        Value::Int(1),
        Value::Int(-32768),
        Value::Int(-2_147_483_648),
        Value::Int(i64::MIN),
        Value::Bytes(b"-12345678901234567890.0123456789".to_vec()),
        Value::Float(1.5),
        Value::Double(-2.5e-300),
        Value::Bytes("héllo ✓ 日本".as_bytes().to_vec()),
        Value::Bytes(b"abc".to_vec()),
        Value::Bytes(b"xy ".to_vec()),
        Value::Bytes(vec![0x00, 0xFF, 0x7F]),
        Value::Int(1),
        Value::Date(1999, 12, 31, 0, 0, 0, 0),
        Value::Time(false, 0, 23, 59, 58, 123_456),
        Value::Date(2024, 2, 29, 12, 34, 56, 789_012),
        Value::Date(2024, 1, 2, 3, 4, 5, 678_000),
        Value::Bytes(br#"{"a": [1, 2.5, null]}"#.to_vec()),
        Value::Bytes(b"a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11".to_vec()),
        Value::Bytes(b"{1,2,3}".to_vec()),
    ]
}

/// Text rows arrive as bytes; convert them with the column types the bridge announced.
fn typed(row: mysql::Row) -> Vec<Value> {
    let columns = row.columns();
    row.unwrap()
        .into_iter()
        .zip(columns.iter())
        .map(|(v, c)| match v {
            Value::Bytes(b) => {
                use mysql::consts::ColumnType as T;
                let text = String::from_utf8_lossy(&b).into_owned();
                match c.column_type() {
                    T::MYSQL_TYPE_SHORT | T::MYSQL_TYPE_LONG | T::MYSQL_TYPE_LONGLONG | T::MYSQL_TYPE_TINY => {
                        Value::Int(text.parse().expect("int"))
                    }
                    T::MYSQL_TYPE_FLOAT => Value::Float(text.parse().expect("float")),
                    T::MYSQL_TYPE_DOUBLE => Value::Double(text.parse().expect("double")),
                    T::MYSQL_TYPE_DATE | T::MYSQL_TYPE_DATETIME | T::MYSQL_TYPE_TIME => {
                        parse_temporal(&text, c.column_type())
                    }
                    _ => Value::Bytes(b),
                }
            }
            other => other,
        })
        .collect()
}

fn parse_temporal(text: &str, t: mysql::consts::ColumnType) -> Value {
    use mysql::consts::ColumnType as T;
    let num = |s: &str| s.parse::<u32>().expect("number");
    let frac = |s: Option<&str>| s.map_or(0, |f| num(&format!("{f:0<6}")));
    match t {
        T::MYSQL_TYPE_TIME => {
            let (hms, f) = text.split_once('.').map_or((text, None), |(a, b)| (a, Some(b)));
            let p: Vec<&str> = hms.split(':').collect();
            Value::Time(false, 0, num(p[0]) as u8, num(p[1]) as u8, num(p[2]) as u8, frac(f))
        }
        _ => {
            let (date, time) = text.split_once(' ').unwrap_or((text, "00:00:00"));
            let d: Vec<&str> = date.split('-').collect();
            let (hms, f) = time.split_once('.').map_or((time, None), |(a, b)| (a, Some(b)));
            let h: Vec<&str> = hms.split(':').collect();
            Value::Date(
                num(d[0]) as u16,
                num(d[1]) as u8,
                num(d[2]) as u8,
                num(h[0]) as u8,
                num(h[1]) as u8,
                num(h[2]) as u8,
                frac(f),
            )
        }
    }
}

#[test]
fn every_mapped_type_round_trips_in_text_and_binary() {
    let router = bridge_router("transaction");
    let mut c = client(&router);
    c.query_drop("SET TIME ZONE 'UTC'").expect("utc");
    let table = unique_name("br_types");
    c.query_drop(format!("CREATE TABLE {table} {TYPES_DDL}")).expect("create");
    c.query_drop(format!("INSERT INTO {table} VALUES {TYPES_ROW}")).expect("insert");
    let nulls = vec!["NULL"; 18].join(", ");
    c.query_drop(format!("INSERT INTO {table} VALUES (2, {nulls})")).expect("insert nulls");
    let want = expected_row();
    // Text protocol (COM_QUERY).
    let text: mysql::Row =
        c.query_first(format!("SELECT * FROM {table} WHERE id = 1")).expect("text select").expect("row");
    assert_eq!(typed(text), want, "text protocol");
    // Binary protocol (COM_STMT_EXECUTE).
    let bin: mysql::Row =
        c.exec_first(format!("SELECT * FROM {table} WHERE id = ?"), (1,)).expect("binary select").expect("row");
    assert_eq!(bin.unwrap(), want, "binary protocol");
    let nulls_text: mysql::Row =
        c.query_first(format!("SELECT * FROM {table} WHERE id = 2")).expect("nulls").expect("row");
    assert!(nulls_text.unwrap().iter().skip(1).all(|v| *v == Value::NULL));
    let nulls_bin: mysql::Row =
        c.exec_first(format!("SELECT * FROM {table} WHERE id = ?"), (2,)).expect("nulls").expect("row");
    assert!(nulls_bin.unwrap().iter().skip(1).all(|v| *v == Value::NULL));
    c.query_drop(format!("DROP TABLE {table}")).expect("drop");
}

#[test]
fn prepared_parameters_of_every_type() {
    let router = bridge_router("transaction");
    let mut c = client(&router);
    c.query_drop("SET TIME ZONE 'UTC'").expect("utc");
    let table = unique_name("br_params");
    c.query_drop(format!("CREATE TABLE {table} {TYPES_DDL}")).expect("create");
    let mut row = expected_row();
    row[11] = Value::Int(1); // bool from an integer
    let marks = vec!["?"; row.len()].join(", ");
    c.exec_drop(format!("INSERT INTO {table} VALUES ({marks})"), Params::Positional(row.clone()))
        .expect("insert with parameters");
    let nulls: Vec<Value> =
        std::iter::once(Value::Int(2)).chain(std::iter::repeat_n(Value::NULL, row.len() - 1)).collect();
    c.exec_drop(format!("INSERT INTO {table} VALUES ({marks})"), Params::Positional(nulls))
        .expect("insert NULL parameters");
    let got: mysql::Row =
        c.exec_first(format!("SELECT * FROM {table} WHERE id = ?"), (1,)).expect("select").expect("row");
    assert_eq!(got.unwrap(), expected_row());
    let count: Option<i64> =
        c.exec_first(format!("SELECT count(*) FROM {table} WHERE s IS NULL AND id = ?"), (2,)).expect("count");
    assert_eq!(count, Some(1));
    // Large binary data and a long string travel intact (long data, too).
    let blob: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
    c.exec_drop(format!("UPDATE {table} SET by = ?, t = ? WHERE id = ?"), (blob.clone(), "x".repeat(100_000), 2))
        .expect("update blob");
    let (b, t): (Vec<u8>, String) =
        c.exec_first(format!("SELECT by, t FROM {table} WHERE id = ?"), (2,)).expect("blob").expect("row");
    assert_eq!((b == blob, t.len()), (true, 100_000));
    // `?` inside strings and comments is not a parameter.
    let s: Option<(String, i64)> = c.exec_first("SELECT '?' /* ? */, ? + 1", (41,)).expect("question marks");
    assert_eq!(s, Some(("?".to_owned(), 42)));
    c.query_drop(format!("DROP TABLE {table}")).expect("drop");
}

#[test]
fn affected_rows_transactions_and_autocommit() {
    for mode in ["transaction", "session"] {
        let router = bridge_router(mode);
        let mut c = client(&router);
        let table = unique_name("br_tx");
        c.query_drop(format!("CREATE TABLE {table} (id int PRIMARY KEY, v text)")).expect("create");
        c.query_drop(format!("INSERT INTO {table} VALUES (1, 'a'), (2, 'b'), (3, 'c')")).expect("insert");
        assert_eq!(c.affected_rows(), 3, "{mode}");
        c.query_drop(format!("UPDATE {table} SET v = 'z' WHERE id < 3")).expect("update");
        assert_eq!(c.affected_rows(), 2, "{mode}");
        // BEGIN ... ROLLBACK.
        c.query_drop("BEGIN").expect("begin");
        c.query_drop(format!("DELETE FROM {table}")).expect("delete");
        assert_eq!(c.affected_rows(), 3);
        c.query_drop("ROLLBACK").expect("rollback");
        let n: Option<i64> = c.query_first(format!("SELECT count(*) FROM {table}")).expect("count");
        assert_eq!(n, Some(3), "{mode}: rollback restored the rows");
        // START TRANSACTION ... COMMIT through prepared statements.
        c.query_drop("START TRANSACTION").expect("start");
        c.exec_drop(format!("INSERT INTO {table} VALUES (?, ?)"), (4, "d")).expect("insert 4");
        c.query_drop("COMMIT").expect("commit");
        // autocommit = 0: statements run in a transaction until COMMIT/ROLLBACK.
        c.query_drop("SET autocommit = 0").expect("autocommit off");
        c.query_drop(format!("INSERT INTO {table} VALUES (5, 'e')")).expect("insert 5");
        let ac: Option<i64> = c.query_first("SELECT @@autocommit").expect("@@autocommit");
        assert_eq!(ac, Some(0));
        c.query_drop("ROLLBACK").expect("rollback 5");
        c.exec_drop(format!("INSERT INTO {table} VALUES (?, ?)"), (6, "f")).expect("insert 6");
        c.query_drop("SET autocommit = 1").expect("autocommit on commits");
        let ids: Vec<i32> = c.query(format!("SELECT id FROM {table} ORDER BY id")).expect("ids");
        assert_eq!(ids, vec![1, 2, 3, 4, 6], "{mode}");
        c.query_drop(format!("DROP TABLE {table}")).expect("drop");
    }
}

#[test]
fn errors_map_to_mysql_numbers() {
    let router = bridge_router("transaction");
    let mut c = client(&router);
    let table = unique_name("br_err");
    c.query_drop(format!("CREATE TABLE {table} (id int PRIMARY KEY, v text NOT NULL)")).expect("create");
    c.query_drop(format!("INSERT INTO {table} VALUES (1, 'a')")).expect("insert");
    let (code, state, msg) =
        server_error(c.query_drop(format!("INSERT INTO {table} VALUES (1, 'b')")).expect_err("duplicate"));
    assert_eq!((code, state.as_str()), (1062, "23000"));
    assert!(msg.contains("duplicate key"), "{msg}");
    let (code, state, _) = server_error(
        c.exec_drop(format!("INSERT INTO {table} VALUES (?, ?)"), (1, "c")).expect_err("duplicate prepared"),
    );
    assert_eq!((code, state.as_str()), (1062, "23000"));
    let (code, state, _) =
        server_error(c.query_drop(format!("INSERT INTO {table} VALUES (2, NULL)")).expect_err("not null"));
    assert_eq!((code, state.as_str()), (1048, "23000"));
    let (code, state, _) = server_error(c.query_drop("SELECT * FROM no_such_table_here").expect_err("missing table"));
    assert_eq!((code, state.as_str()), (1146, "42S02"));
    let (code, state, msg) = server_error(c.query_drop("SELEC 1").expect_err("syntax"));
    assert_eq!((code, state.as_str()), (1064, "42000"));
    assert!(msg.contains("syntax error"), "{msg}");
    let (code, state, _) = server_error(c.query_drop("SELECT 1/0").expect_err("division"));
    assert_eq!((code, state.as_str()), (1365, "22012"));
    let (code, _, _) =
        server_error(c.prep("SELECT * FROM no_such_table_here WHERE id = ?").map(|_| ()).expect_err("prepare error"));
    assert_eq!(code, 1146);
    // An error inside a transaction leaves it failed until ROLLBACK, as PostgreSQL does.
    c.query_drop("BEGIN").expect("begin");
    assert!(c.query_drop("SELECT 1/0").is_err());
    let (_, state, _) = server_error(c.query_drop("SELECT 1").expect_err("aborted transaction"));
    assert_eq!(state, "25P02");
    c.query_drop("ROLLBACK").expect("rollback");
    let one: Option<i64> = c.query_first("SELECT 1").expect("usable again");
    assert_eq!(one, Some(1));
    c.query_drop(format!("DROP TABLE {table}")).expect("drop");
}

#[test]
fn warnings_use_and_multi_results() {
    let router = bridge_router("transaction");
    let mut c = client(&router);
    c.query_drop("DROP TABLE IF EXISTS no_such_table_for_notice").expect("notice");
    let warnings: Vec<(String, i64, String)> = c.query("SHOW WARNINGS").expect("show warnings");
    assert_eq!(warnings.len(), 1);
    assert!(warnings[0].2.contains("does not exist"), "{warnings:?}");
    let schema = unique_name("br_schema");
    c.query_drop(format!("CREATE SCHEMA {schema}")).expect("schema");
    c.query_drop(format!("USE {schema}")).expect("use");
    c.query_drop("CREATE TABLE in_schema (id int)").expect("create in schema");
    let db: Option<String> = c.query_first("SELECT DATABASE()").expect("database");
    assert_eq!(db, Some(schema.clone()));
    // The search path follows the session onto other connections of the pool.
    let found: Option<String> = c.query_first("SELECT current_schema()").expect("current_schema");
    assert_eq!(found, Some(schema.clone()));
    let tables: Vec<String> = c.query("SHOW TABLES").expect("show tables");
    assert_eq!(tables, vec!["in_schema".to_owned()]);
    let err = c.query_drop("USE no_such_schema_anywhere").expect_err("unknown db");
    assert_eq!(server_error(err).0, 1049);
    c.query_drop(format!("USE {}", dbs().pg.database)).expect("back to the default");
    let found: Option<String> = c.query_first("SELECT current_schema()").expect("current_schema");
    assert_eq!(found.as_deref(), Some("public"));
    c.query_drop(format!("DROP SCHEMA {schema} CASCADE")).expect("drop schema");
    // A multi-statement query returns one result per statement, then the error that stopped it.
    let mut sets = Vec::new();
    let mut result = c.query_iter("SELECT 1 AS a; SELECT 'x' AS b, 2 AS c").expect("multi");
    while let Some(set) = result.iter() {
        sets.push(set.map(|r| r.expect("row").unwrap()).collect::<Vec<_>>());
    }
    drop(result);
    assert_eq!(
        sets,
        vec![
            vec![vec![Value::Bytes(b"1".to_vec())]],
            vec![vec![Value::Bytes(b"x".to_vec()), Value::Bytes(b"2".to_vec())]]
        ]
    );
    let mut result = c.query_iter("SELECT 1; SELECT 1/0; SELECT 3").expect("first result");
    let mut outcomes = Vec::new();
    while let Some(set) = result.iter() {
        outcomes.push(set.map(|r| r.map(|_| ()).map_err(server_error)).collect::<Vec<_>>());
    }
    drop(result);
    assert_eq!(outcomes.len(), 2, "the third statement never ran: {outcomes:?}");
    assert_eq!(outcomes[0], vec![Ok(())]);
    assert!(matches!(outcomes[1].last(), Some(Err((1365, _, _)))), "{outcomes:?}");
    let one: Option<i64> = c.query_first("SELECT 1").expect("still in sync");
    assert_eq!(one, Some(1));
}

#[test]
fn mariadb_cli_round_trip() {
    let router = bridge_router("transaction");
    let table = unique_name("br_cli");
    let script = format!(
        "CREATE TABLE {table} (id int PRIMARY KEY, n numeric(10,2), t text, ts timestamp(3), by bytea, ok bool); \
         INSERT INTO {table} VALUES (1, -3.50, 'ünï', '2024-01-02 03:04:05.6', '\\x6869', true), (2, NULL, NULL, NULL, NULL, false); \
         SELECT id, n, t, ts, by, ok FROM {table} ORDER BY id;"
    );
    let out = cli(&router, &script).unwrap_or_else(|e| panic!("mariadb CLI failed: {e}"));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(
        lines,
        vec!["id\tn\tt\tts\tby\tok", "1\t-3.50\tünï\t2024-01-02 03:04:05.600\thi\t1", "2\tNULL\tNULL\tNULL\tNULL\t0"]
    );
    let err = cli(&router, &format!("INSERT INTO {table} VALUES (1, 0, '', NULL, NULL, true)")).expect_err("duplicate");
    assert!(err.contains("ERROR 1062 (23000)"), "{err}");
    let out = cli(
        &router,
        &format!("BEGIN; DELETE FROM {table}; ROLLBACK; SELECT count(*) AS c FROM {table}; DROP TABLE {table};"),
    )
    .unwrap_or_else(|e| panic!("mariadb CLI failed: {e}"));
    assert_eq!(out.lines().collect::<Vec<_>>(), vec!["c", "2"]);
}

/// Runs sysbench; returns its output, or the output as the error when it failed.
fn sysbench(args: &[String]) -> Result<String, String> {
    let out = Command::new("sysbench").args(args).output().expect("run sysbench");
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    if out.status.success() {
        Ok(text)
    } else {
        Err(text)
    }
}

/// sysbench's MySQL driver, prepared statements on and off, against sysbench's own PostgreSQL
/// schema (created with its pgsql driver) through the bridge: every statement it sends is
/// valid on both. sysbench stops at the first error, so success means none. The read-write mix
/// runs on one thread: its DELETE-then-INSERT of the same id makes concurrent threads collide
/// with a duplicate key on PostgreSQL (where InnoDB would report a deadlock sysbench ignores).
#[test]
fn sysbench_mysql_driver_through_the_bridge() {
    let pg = &dbs().pg;
    let db = unique_name("sbpg");
    pg.superuser_client(pg.primary_port)
        .batch_execute(&format!("CREATE DATABASE {db} OWNER {}", pg.user))
        .expect("create database");
    let common = ["--tables=2".to_owned(), "--table-size=1000".to_owned()];
    let mut prepare: Vec<String> =
        ["oltp_read_write", "prepare", "--db-driver=pgsql", "--pgsql-host=127.0.0.1"].map(String::from).to_vec();
    prepare.extend([
        format!("--pgsql-port={}", pg.primary_port),
        format!("--pgsql-user={}", pg.user),
        format!("--pgsql-password={}", pg.password),
        format!("--pgsql-db={db}"),
    ]);
    prepare.extend(common.iter().cloned());
    sysbench(&prepare).unwrap_or_else(|e| panic!("sysbench pgsql prepare:\n{e}"));
    let router = bridge_router_on("transaction", &db);
    for (test, threads) in [("oltp_point_select", 32), ("oltp_read_only", 32), ("oltp_read_write", 1)] {
        for ps in ["auto", "disable"] {
            let mut run: Vec<String> =
                [test, "run", "--db-driver=mysql", "--mysql-host=127.0.0.1", "--mysql-ssl=off", "--time=2"]
                    .map(String::from)
                    .to_vec();
            run.extend([
                format!("--threads={threads}"),
                format!("--mysql-port={}", router.port()),
                format!("--mysql-user={}", pg.user),
                format!("--mysql-password={}", pg.password),
                format!("--mysql-db={db}"),
                format!("--db-ps-mode={ps}"),
            ]);
            run.extend(common.iter().cloned());
            let out = sysbench(&run).unwrap_or_else(|e| panic!("sysbench {test} ps={ps}:\n{e}"));
            assert!(out.contains("transactions:"), "{test} ps={ps}:\n{out}");
        }
    }
}
