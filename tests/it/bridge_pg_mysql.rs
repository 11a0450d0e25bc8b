//! PostgreSQL clients served by the harness's real MariaDB through a cross-protocol pool
//! (`protocol = "mysql"`): psql (`-c` and `-f`) and the `postgres` crate run DDL, every mapped
//! type in text and binary results, prepared statements with repeated and reordered parameters,
//! transactions with rollback, and errors with PostgreSQL SQLSTATEs.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use postgres::error::SqlState;
use postgres::types::{FromSql, Type};
use postgres::{Client, SimpleQueryMessage};

use crate::pg_util::psql;
use crate::router::Router;
use crate::support::{dbs, unique_name};

/// A router with a PostgreSQL listener whose default pool `myx` is the MariaDB primary.
pub(crate) fn bridge_router(mode: &str) -> Router {
    Router::start(&bridge_router_toml(mode))
}

/// The configuration of [`bridge_router`].
pub(crate) fn bridge_router_toml(mode: &str) -> String {
    let my = &dbs().my;
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.myx]\nprotocol = \"mysql\"\nmode = \"{mode}\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
         max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
         [routing]\ndefault_pool = \"myx\"\n",
        u = my.user,
        p = my.password,
        d = my.database,
        port = my.primary_port,
    )
}

fn client(router: &Router) -> Client {
    router.pg(&dbs().my.database)
}

/// Any value's raw bytes, for types the `postgres` crate has no Rust type for without features
/// (numeric, date, interval): the test checks the binary wire form itself.
#[derive(Debug, PartialEq)]
struct Raw(Vec<u8>);

impl<'a> FromSql<'a> for Raw {
    fn from_sql(_: &Type, raw: &'a [u8]) -> Result<Self, Box<dyn std::error::Error + Sync + Send>> {
        Ok(Raw(raw.to_vec()))
    }
    fn accepts(_: &Type) -> bool {
        true
    }
}

const DDL: &str = "(id INT PRIMARY KEY, ti TINYINT, si SMALLINT, su SMALLINT UNSIGNED, i INT, iu INT UNSIGNED, \
    bi BIGINT, bu BIGINT UNSIGNED, d DECIMAL(30,10), f FLOAT, db DOUBLE, dt DATE, tm TIME(3), ts DATETIME(6), \
    tsp TIMESTAMP(2) NULL DEFAULT NULL, s VARCHAR(50), tx TEXT, b VARBINARY(16), bl BLOB)";

const ROW1: &str = "(1, -128, -32768, 65535, -2147483648, 4294967295, -9223372036854775808, 18446744073709551615, \
    -12345678901234567890.0123456789, -1.5, 2.25, '2024-02-29', '-838:59:58.5', '2024-01-02 03:04:05.123456', \
    '1999-12-31 23:59:59.50', 'héllo wörld ✓ 日本', 'plain text', 0x00FF41, 0xDEADBEEF)";

const ROW2: &str =
    "(2, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL)";

/// Row 1 as PostgreSQL prints it (psql unaligned, `|`-separated).
const ROW1_TEXT: &str = "1|-128|-32768|65535|-2147483648|4294967295|-9223372036854775808|18446744073709551615|\
    -12345678901234567890.0123456789|-1.5|2.25|2024-02-29|-838:59:58.5|2024-01-02 03:04:05.123456|\
    1999-12-31 23:59:59.5|héllo wörld ✓ 日本|plain text|\\x00ff41|\\xdeadbeef";

fn drop_table(c: &mut Client, t: &str) {
    let _ = c.batch_execute(&format!("DROP TABLE IF EXISTS {t}"));
}

#[test]
fn psql_round_trip_over_mariadb() {
    let router = bridge_router("transaction");
    let db = &dbs().my.database;
    let t = unique_name("bpsql");
    // -c: one statement, proving where it ran.
    let out = psql(router.port(), db, "app", &["-A", "-t", "-c", "SELECT VERSION() LIKE '%MariaDB%', @@port"], "");
    assert!(out.status.success(), "psql -c: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("1|{}", dbs().my.primary_port));
    // -f: a script with DDL, inserts, every type, a rolled-back transaction and errors.
    let script = format!(
        "\\set VERBOSITY verbose\n\
         CREATE TABLE {t} {DDL};\n\
         INSERT INTO {t} VALUES {ROW1}, {ROW2};\n\
         SELECT * FROM {t} ORDER BY id;\n\
         BEGIN;\n\
         INSERT INTO {t} (id) VALUES (3);\n\
         SELECT count(*) AS in_tx FROM {t};\n\
         ROLLBACK;\n\
         SELECT count(*) AS after_rollback FROM {t};\n\
         INSERT INTO {t} (id) VALUES (1);\n\
         SELECT * FROM no_such_table_{t};\n\
         UPDATE {t} SET s = 'x' WHERE id = 2;\n\
         DELETE FROM {t} WHERE id = 2;\n\
         DROP TABLE {t};\n"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("script.sql");
    std::fs::write(&file, script).expect("write script");
    let out = psql(router.port(), db, "app", &["-A", "-t", "-f", file.to_str().expect("path")], "");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.contains(&ROW1_TEXT), "row 1 exactly as PostgreSQL prints it:\n{stdout}\n{stderr}");
    let nulls = format!("2{}", "|".repeat(18));
    assert!(lines.contains(&nulls.as_str()), "row 2 all NULL:\n{stdout}");
    for tag in ["CREATE TABLE", "INSERT 0 2", "BEGIN", "INSERT 0 1", "ROLLBACK", "UPDATE 1", "DELETE 1", "DROP TABLE"] {
        assert!(lines.contains(&tag), "command tag {tag}:\n{stdout}");
    }
    assert!(lines.contains(&"3"), "3 rows inside the transaction:\n{stdout}");
    assert!(lines.contains(&"2"), "2 rows after ROLLBACK:\n{stdout}");
    assert!(stderr.contains("ERROR:  23505: Duplicate entry '1'"), "duplicate key is 23505:\n{stderr}");
    assert!(stderr.contains("ERROR:  42P01:"), "unknown table is 42P01:\n{stderr}");
    assert_eq!(stderr.matches("ERROR:").count(), 2, "only the two intended errors:\n{stderr}");
    // The DROP ran: the table is gone.
    let out = psql(
        router.port(),
        db,
        "app",
        &["-A", "-t", "-v", "VERBOSITY=verbose", "-c", &format!("SELECT count(*) FROM {t}")],
        "",
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("42P01"));
}

#[test]
fn rust_client_text_and_binary_results() {
    let router = bridge_router("transaction");
    let mut c = client(&router);
    let t = unique_name("btypes");
    c.batch_execute(&format!("CREATE TABLE {t} {DDL}")).expect("create");
    let n = c.execute(&format!("INSERT INTO {t} VALUES {ROW1}, {ROW2}"), &[]).expect("insert");
    assert_eq!(n, 2, "INSERT 0 2");
    // Simple query: text format, exactly PostgreSQL's text forms.
    let msgs = c.simple_query(&format!("SELECT * FROM {t} ORDER BY id")).expect("simple select");
    let rows: Vec<_> =
        msgs.iter().filter_map(|m| if let SimpleQueryMessage::Row(r) = m { Some(r) } else { None }).collect();
    assert_eq!(rows.len(), 2);
    let texts: Vec<&str> = (0..19).map(|i| rows[0].get(i).expect("not null")).collect();
    assert_eq!(texts.join("|"), ROW1_TEXT);
    assert!((0..19).skip(1).all(|i| rows[1].get(i).is_none()), "row 2 is NULL");
    assert!(msgs.iter().any(|m| matches!(m, SimpleQueryMessage::CommandComplete(2))));

    // Extended protocol: binary results.
    let row = c.query_one(&format!("SELECT * FROM {t} WHERE id = 1"), &[]).expect("binary select");
    let types: Vec<Type> = row.columns().iter().map(|col| col.type_().clone()).collect();
    let want = [
        Type::INT4,
        Type::INT2,
        Type::INT2,
        Type::INT4,
        Type::INT4,
        Type::INT8,
        Type::INT8,
        Type::NUMERIC,
        Type::NUMERIC,
        Type::FLOAT4,
        Type::FLOAT8,
        Type::DATE,
        Type::INTERVAL,
        Type::TIMESTAMP,
        Type::TIMESTAMP,
        Type::TEXT,
        Type::TEXT,
        Type::BYTEA,
        Type::BYTEA,
    ];
    assert_eq!(types, want);
    assert_eq!(row.get::<_, i32>(0), 1);
    assert_eq!(row.get::<_, i16>(1), -128);
    assert_eq!(row.get::<_, i16>(2), -32768);
    assert_eq!(row.get::<_, i32>(3), 65535);
    assert_eq!(row.get::<_, i32>(4), i32::MIN);
    assert_eq!(row.get::<_, i64>(5), 4_294_967_295);
    assert_eq!(row.get::<_, i64>(6), i64::MIN);
    // numeric 18446744073709551615: weight 4, groups 1844 6744 0737 0955 1615, dscale 0.
    let numeric = |groups: &[i16], weight: i16, sign: u16, dscale: u16| {
        let mut v = Vec::new();
        for w in [groups.len() as i16, weight] {
            v.extend_from_slice(&w.to_be_bytes());
        }
        v.extend_from_slice(&sign.to_be_bytes());
        v.extend_from_slice(&dscale.to_be_bytes());
        groups.iter().for_each(|g| v.extend_from_slice(&g.to_be_bytes()));
        Raw(v)
    };
    assert_eq!(row.get::<_, Raw>(7), numeric(&[1844, 6744, 737, 955, 1615], 4, 0, 0));
    assert_eq!(row.get::<_, Raw>(8), numeric(&[1234, 5678, 9012, 3456, 7890, 123, 4567, 8900], 4, 0x4000, 10));
    assert_eq!(row.get::<_, f32>(9), -1.5);
    assert_eq!(row.get::<_, f64>(10), 2.25);
    assert_eq!(row.get::<_, Raw>(11), Raw(8825i32.to_be_bytes().to_vec()), "2024-02-29 is day 8825 after 2000-01-01");
    let mut interval = (-3_020_398_500_000i64).to_be_bytes().to_vec();
    interval.extend_from_slice(&[0; 8]);
    assert_eq!(row.get::<_, Raw>(12), Raw(interval), "-838:59:58.5 as microseconds");
    assert_eq!(row.get::<_, SystemTime>(13), UNIX_EPOCH + Duration::from_micros(1_704_164_645_123_456));
    assert_eq!(row.get::<_, SystemTime>(14), UNIX_EPOCH + Duration::from_millis(946_684_799_500));
    assert_eq!(row.get::<_, String>(15), "héllo wörld ✓ 日本");
    assert_eq!(row.get::<_, String>(16), "plain text");
    assert_eq!(row.get::<_, Vec<u8>>(17), vec![0x00, 0xFF, 0x41]);
    assert_eq!(row.get::<_, Vec<u8>>(18), vec![0xDE, 0xAD, 0xBE, 0xEF]);
    let nulls = c.query_one(&format!("SELECT * FROM {t} WHERE id = 2"), &[]).expect("null row");
    assert!((1..19).all(|i| nulls.get::<_, Option<Raw>>(i).is_none()));
    drop_table(&mut c, &t);
}

#[test]
fn rust_client_prepared_statements_and_transactions() {
    let router = bridge_router("transaction");
    let mut c = client(&router);
    let t = unique_name("bprep");
    c.batch_execute(&format!(
        "CREATE TABLE {t} (id INT PRIMARY KEY, s VARCHAR(40), bi BIGINT, f DOUBLE, b BLOB, ts DATETIME(6), ok BOOL)"
    ))
    .expect("create");
    let insert = c
        .prepare_typed(
            &format!("INSERT INTO {t} VALUES ($1, $2, $3, $4, $5, $6, $7)"),
            &[Type::INT4, Type::TEXT, Type::INT8, Type::FLOAT8, Type::BYTEA, Type::TIMESTAMP, Type::BOOL],
        )
        .expect("prepare insert");
    let when = UNIX_EPOCH + Duration::from_micros(1_704_164_645_000_001);
    for id in 1..=3i32 {
        let s = format!("ünï {id}");
        let n = c
            .execute(
                &insert,
                &[
                    &id,
                    &s,
                    &(-(id as i64) * 1_000_000_000_000),
                    &(id as f64 / 4.0),
                    &vec![0u8, id as u8],
                    &when,
                    &(id % 2 == 1),
                ],
            )
            .expect("insert");
        assert_eq!(n, 1);
    }
    let none: Option<String> = None;
    c.execute(
        &insert,
        &[&4i32, &none, &None::<i64>, &None::<f64>, &None::<Vec<u8>>, &None::<SystemTime>, &None::<bool>],
    )
    .expect("insert NULLs");
    // Parameters repeated and out of order: $2 is sent to MySQL twice, after $1.
    let row = c
        .query_one(
            &format!("SELECT CONCAT($2, '-', $1, '-', $2), count(*) FROM {t} WHERE id >= $3"),
            &[&"a", &"b", &"2"],
        )
        .expect("reordered parameters");
    assert_eq!(row.get::<_, String>(0), "b-a-b");
    assert_eq!(row.get::<_, i64>(1), 3);
    let sel = c
        .prepare_typed(&format!("SELECT s, bi, f, b, ts, ok FROM {t} WHERE id = $1"), &[Type::INT4])
        .expect("prepare select");
    let r = c.query_one(&sel, &[&2i32]).expect("select 2");
    assert_eq!(r.get::<_, String>(0), "ünï 2");
    assert_eq!(r.get::<_, i64>(1), -2_000_000_000_000);
    assert_eq!(r.get::<_, f64>(2), 0.5);
    assert_eq!(r.get::<_, Vec<u8>>(3), vec![0, 2]);
    assert_eq!(r.get::<_, SystemTime>(4), when);
    assert_eq!(r.get::<_, i16>(5), 0, "BOOL is TINYINT(1) on MariaDB");
    let r = c.query_one(&sel, &[&4i32]).expect("select 4");
    assert_eq!(r.get::<_, Option<String>>(0), None);

    // A transaction rolled back leaves nothing behind; one committed stays.
    let mut tx = c.transaction().expect("begin");
    tx.execute(&format!("INSERT INTO {t} (id) VALUES (10)"), &[]).expect("insert in tx");
    let n: i64 = tx.query_one(&format!("SELECT count(*) FROM {t}"), &[]).expect("count").get(0);
    assert_eq!(n, 5);
    tx.rollback().expect("rollback");
    let mut tx = c.transaction().expect("begin");
    let n = tx.execute(&format!("UPDATE {t} SET s = 'upd' WHERE id <= 2"), &[]).expect("update");
    assert_eq!(n, 2, "UPDATE 2");
    tx.commit().expect("commit");
    let n: i64 = c.query_one(&format!("SELECT count(*) FROM {t}"), &[]).expect("count").get(0);
    assert_eq!(n, 4, "the rolled-back insert is gone");
    let n = c.execute(&format!("DELETE FROM {t} WHERE s = 'upd'"), &[]).expect("delete");
    assert_eq!(n, 2, "DELETE 2");

    // Errors carry PostgreSQL SQLSTATEs and the client stays usable.
    let e = c.execute(&insert, &[&3i32, &"dup", &0i64, &0f64, &Vec::<u8>::new(), &when, &true]).expect_err("duplicate");
    assert_eq!(e.code(), Some(&SqlState::UNIQUE_VIOLATION), "{e}");
    let e = c.batch_execute(&format!("INSERT INTO {t} (id) VALUES (3)")).expect_err("duplicate (simple)");
    assert_eq!(e.code(), Some(&SqlState::UNIQUE_VIOLATION), "{e}");
    let e = c.prepare("SELEC 1").expect_err("syntax error at Parse");
    assert_eq!(e.code(), Some(&SqlState::SYNTAX_ERROR), "{e}");
    let e = c.query("SELECT * FROM no_such_table_here", &[]).expect_err("unknown table");
    assert_eq!(e.code(), Some(&SqlState::UNDEFINED_TABLE), "{e}");
    // Inside a transaction an error does not abort it on MySQL: the transaction goes on.
    let mut tx = c.transaction().expect("begin");
    let e = tx.execute(&format!("INSERT INTO {t} (id) VALUES (3)"), &[]).expect_err("duplicate in tx");
    assert_eq!(e.code(), Some(&SqlState::UNIQUE_VIOLATION));
    tx.execute(&format!("INSERT INTO {t} (id) VALUES (11)"), &[]).expect("insert after error");
    tx.commit().expect("commit");
    let n: i64 = c.query_one(&format!("SELECT count(*) FROM {t} WHERE id = 11"), &[]).expect("count").get(0);
    assert_eq!(n, 1);
    let version: String = c.query_one("SELECT VERSION()", &[]).expect("version").get(0);
    assert!(version.contains("MariaDB"), "ran on MariaDB: {version}");
    drop_table(&mut c, &t);
}

#[test]
fn session_mode_keeps_mysql_session_state() {
    let router = bridge_router("session");
    let mut c = client(&router);
    c.batch_execute("SET @qp_bridge = 42").expect("set user variable");
    let v: i64 = c.query_one("SELECT @qp_bridge", &[]).expect("read it back").get(0);
    assert_eq!(v, 42);
    let empty = c.simple_query("").expect("empty query");
    assert!(empty.iter().all(|m| !matches!(m, SimpleQueryMessage::Row(_))));
    let msgs = c.simple_query("SELECT 1; SELECT 'two'").expect("two statements");
    let rows = msgs.iter().filter(|m| matches!(m, SimpleQueryMessage::Row(_))).count();
    assert_eq!(rows, 2);
}

#[test]
fn cancel_request_kills_the_mysql_query() {
    use mysql::prelude::Queryable;
    let router = bridge_router("transaction");
    let mut c = client(&router);
    let marker = unique_name("bcancel");
    let token = c.cancel_token();
    let m = marker.clone();
    let canceller = std::thread::spawn(move || {
        let my = &dbs().my;
        let mut admin = my.superuser_client(my.primary_port);
        let sql = format!("SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{m}%' AND INFO NOT LIKE '%PROCESSLIST%'");
        crate::support::eventually(Duration::from_secs(20), "the statement runs on MariaDB", || {
            admin.query_first::<i64, _>(&sql).ok().flatten() == Some(1)
        });
        token.cancel_query(postgres::NoTls).expect("send cancel");
    });
    // KILL QUERY interrupts SLEEP, which then returns 1 (or fails with 1317 → 57014).
    match c.simple_query(&format!("SELECT SLEEP(60) /* {marker} */")) {
        Ok(msgs) => {
            let v = msgs.iter().find_map(|m| {
                if let SimpleQueryMessage::Row(r) = m {
                    r.get(0).map(str::to_owned)
                } else {
                    None
                }
            });
            assert_eq!(v.as_deref(), Some("1"), "SLEEP was interrupted");
        }
        Err(e) => assert_eq!(e.code(), Some(&SqlState::QUERY_CANCELED), "{e}"),
    }
    canceller.join().expect("canceller");
    let n: i32 = c.query_one("SELECT 5", &[]).expect("usable after cancel").get(0);
    assert_eq!(n, 5);
}

#[test]
fn portal_row_limit_hands_out_rows_in_batches() {
    let router = bridge_router("transaction");
    let mut c = client(&router);
    let mut tx = c.transaction().expect("begin");
    let portal = tx.bind("SELECT CAST(seq AS SIGNED) FROM seq_1_to_5 ORDER BY seq", &[]).expect("bind");
    let mut batches = Vec::new();
    loop {
        let rows = tx.query_portal(&portal, 2).expect("execute with a row limit");
        if rows.is_empty() {
            break;
        }
        batches.push(rows.iter().map(|r| r.get::<_, i64>(0)).collect::<Vec<_>>());
    }
    assert_eq!(batches, vec![vec![1, 2], vec![3, 4], vec![5]]);
    tx.commit().expect("commit");
}

/// Raw protocol (`pg_raw`), session and transaction mode: on a MySQL pool, as on PostgreSQL, a
/// Parse of a statement name that exists fails with 42P05 whatever the text, the rest of the
/// batch is skipped, and the first statement stays usable under that name.
#[test]
fn a_duplicate_parse_fails_with_42p05_and_keeps_the_first_statement() {
    use crate::pg_raw::{bind, code, columns, execute, parse, sync, tags, Raw};
    for mode in ["session", "transaction"] {
        let r = Router::start(
            &bridge_router_toml(mode)
                .replace("bind = \"127.0.0.1:0\"\n", "bind = \"127.0.0.1:0\"\nauth_method = \"md5\"\n"),
        );
        let mut c = Raw::login(r.port(), &dbs().my.database, &dbs().my.password)
            .unwrap_or_else(|e| panic!("{mode}: login: {e:?}"));
        let mut first = parse("s1", "SELECT 9");
        first.extend(bind("s1", &[], 0));
        first.extend(execute());
        first.extend(sync());
        c.send(&first);
        let got = c.until_ready();
        assert_eq!(tags(&got), "12DCZ", "{mode}");
        assert_eq!(columns(&got[2].1), vec![Some(b"9".to_vec())], "{mode}");
        let mut dup = parse("s1", "SELECT 10");
        dup.extend(bind("s1", &[], 0));
        dup.extend(execute());
        dup.extend(sync());
        c.send(&dup);
        let got = c.until_ready();
        assert_eq!((tags(&got).as_str(), code(&got[0].1).as_str()), ("EZ", "42P05"), "{mode}: {got:?}");
        let mut again = bind("s1", &[], 0);
        again.extend(execute());
        again.extend(sync());
        c.send(&again);
        let got = c.until_ready();
        assert_eq!(tags(&got), "2DCZ", "{mode}");
        assert_eq!(columns(&got[1].1), vec![Some(b"9".to_vec())], "{mode}: the first statement stays");
    }
}
