//! Issue #10, `raw_passthrough = true`: the rows of prepared statements pass through unchanged
//! (binary format, 100,000 rows over many reads, rows wider than any read, NULLs, bytea)
//! and equal what a direct connection returns, in transaction and session mode; an error in
//! the middle of a result arrives after the rows before it; DDL, SET and DML in between take
//! the decoded path and work; query_timeout still cancels a statement whose rows pass through;
//! pgbench `-M prepared` runs without a failed transaction. `sqp_passthrough_bytes_total` shows
//! that the rows took the fast path, and that a pool without the flag never does.

use postgres::fallible_iterator::FallibleIterator;
use postgres::Client;

use crate::admin::{addrs, http, sum, with_metrics};
use crate::pg_pgbench::{number, pgbench, Database};
use crate::pg_util::sqlstate;
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, unique_name};

/// Many rows of mixed types: NULLs every 7th and 11th row, bytea, text of varying width.
const MANY: &str = "SELECT g, 'row ' || g || repeat('x', g % 97), \
                    CASE WHEN g % 7 = 0 THEN NULL ELSE g::int8 * 3 END, \
                    CASE WHEN g % 11 = 0 THEN NULL ELSE decode(md5(g::text), 'hex') END, g::float8 / 3 \
                    FROM generate_series(1, $1::int) g";

/// Rows from 6 KB to 240 KB: most wider than a backend read, some wider than several.
const WIDE: &str = "SELECT g, repeat(md5(g::text), 30 * g), convert_to(repeat(chr(65 + g % 26), 5000 * g), 'UTF8') \
                    FROM generate_series(1, $1::int) g";

/// Rows, then a division by zero at row `$1`.
const FAILS_AT: &str = "SELECT g, 1000000 / ($1::int - g) FROM generate_series(1, 200000) g";

type ManyRow = (i32, String, Option<i64>, Option<Vec<u8>>, f64);
type WideRow = (i32, String, Vec<u8>);

/// A router on one core with pool `main` in `mode`, `raw_passthrough = raw`, `extra` pool lines,
/// and `/metrics`.
fn router(mode: &str, raw: bool, extra: &str) -> Router {
    let pools = format!("{}raw_passthrough = {raw}\n{extra}\n", pg_pool("main", dbs().pg.primary_port, mode, 2));
    Router::start(&with_metrics(&pg_config(&[0], &pools, "main"), None))
}

/// `sqp_passthrough_bytes_total` of pool `main`, summed over cores.
fn passed_through(r: &Router) -> f64 {
    let reply = http(addrs(r).0, "GET", "/metrics", &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    sum(&reply.body, "sqp_passthrough_bytes_total", &["pool=\"main\""]).0
}

fn many(c: &mut Client, n: i32) -> Vec<ManyRow> {
    let stmt = c.prepare(MANY).expect("prepare");
    let rows = c.query(&stmt, &[&n]).expect("many rows");
    rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3), r.get(4))).collect()
}

fn wide(c: &mut Client, n: i32) -> Vec<WideRow> {
    let stmt = c.prepare(WIDE).expect("prepare");
    let rows = c.query(&stmt, &[&n]).expect("wide rows");
    rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect()
}

/// Rows received before the error, and the error's SQLSTATE (`None`: no error).
fn rows_until_error(c: &mut Client, at: i32) -> (usize, Option<String>) {
    let stmt = c.prepare(FAILS_AT).expect("prepare");
    let mut it = c.query_raw(&stmt, [at]).expect("execute");
    let mut rows = 0;
    loop {
        match it.next() {
            Ok(Some(row)) => {
                let g: i32 = row.get(0);
                assert_eq!(g as usize, rows + 1, "rows in order");
                rows += 1;
            }
            Ok(None) => return (rows, None),
            Err(e) => return (rows, Some(sqlstate(&e))),
        }
    }
}

/// Panics at the first row that differs, without printing whole result sets.
fn assert_same<T: PartialEq + std::fmt::Debug>(got: &[T], want: &[T], what: &str) {
    if let Some(i) = got.iter().zip(want).position(|(a, b)| a != b) {
        panic!("{what}: row {i} differs:\n got  {:?}\n want {:?}", got[i], want[i]);
    }
    assert_eq!(got.len(), want.len(), "{what}: row count");
}

/// The result sets of `c` (prepared statements, binary format) equal a direct connection's.
fn results_match_direct(c: &mut Client, mode: &str) {
    let mut direct = dbs().pg.primary_client();
    let want = many(&mut direct, 100_000);
    assert_eq!(want.len(), 100_000);
    assert_same(&many(c, 100_000), &want, &format!("{mode}: 100,000 rows"));
    assert_same(&many(c, 1), &want[..1], &format!("{mode}: one row"));
    assert_same(&many(c, 0), &want[..0], &format!("{mode}: no rows"));
    let want = wide(&mut direct, 40);
    assert_same(&wide(c, 40), &want, &format!("{mode}: wide rows"));
}

fn passes_rows_unchanged(mode: &str) {
    let r = router(mode, true, "");
    let mut c = r.pg("main");
    results_match_direct(&mut c, mode);
    // 100,000 rows of at least 30 bytes each went through the fast path, and 40 wide ones.
    let passed = passed_through(&r);
    assert!(passed > 100_000.0 * 30.0 + 40.0 * 6_000.0, "{mode}: only {passed} bytes passed through");

    // An error after 149,999 rows arrives after them, the same as directly, and the session
    // goes on, also inside a transaction.
    let mut direct = dbs().pg.primary_client();
    let want = rows_until_error(&mut direct, 150_000);
    assert_eq!(want, (149_999, Some("22012".into())));
    assert_eq!(rows_until_error(&mut c, 150_000), want, "{mode}: error mid-stream");
    assert_eq!(rows_until_error(&mut c, 300_000), (200_000, None), "{mode}: no error");
    c.batch_execute("BEGIN").expect("begin");
    assert_eq!(rows_until_error(&mut c, 50_000), (49_999, Some("22012".into())), "{mode}: in a transaction");
    let e = c.query("SELECT 1", &[]).expect_err("the transaction is aborted");
    assert_eq!(sqlstate(&e), "25P02");
    c.batch_execute("ROLLBACK").expect("rollback");
    assert_same(&many(&mut c, 5_000), &many(&mut direct, 5_000), &format!("{mode}: after the rollback"));
}

#[test]
fn prepared_results_pass_through_unchanged_in_transaction_mode() {
    passes_rows_unchanged("transaction");
}

#[test]
fn prepared_results_pass_through_unchanged_in_session_mode() {
    passes_rows_unchanged("session");
}

#[test]
fn without_the_flag_rows_take_the_decoded_path() {
    let r = router("transaction", false, "");
    let mut c = r.pg("main");
    results_match_direct(&mut c, "raw_passthrough = false");
    assert_eq!(passed_through(&r), 0.0);
}

#[test]
fn ddl_set_and_dml_between_passed_through_statements() {
    for mode in ["transaction", "session"] {
        let r = router(mode, true, "");
        let mut c = r.pg("main");
        let table = unique_name("rawpass");
        c.batch_execute(&format!("CREATE TABLE {table} (id int PRIMARY KEY, payload text)")).expect("create");
        let insert = c
            .prepare(&format!(
                "INSERT INTO {table} SELECT g, md5(g::text) FROM generate_series(1, $1::int) g RETURNING id"
            ))
            .expect("prepare insert");
        let returned = c.query(&insert, &[&3000i32]).expect("insert returning");
        assert_eq!(returned.iter().map(|r| r.get::<_, i32>(0)).sum::<i32>(), 3000 * 3001 / 2, "{mode}");
        c.execute("SET application_name = 'raw_passthrough_it'", &[]).expect("set");
        c.batch_execute(&format!("ALTER TABLE {table} ADD COLUMN extra int DEFAULT 7")).expect("alter");
        // A new statement after the DDL sees the new column, on whatever connection it lands.
        let select = c
            .prepare(&format!(
                "SELECT id, payload, extra, current_setting('application_name') FROM {table} ORDER BY id"
            ))
            .expect("prepare select");
        let rows = c.query(&select, &[]).expect("select");
        assert_eq!(rows.len(), 3000, "{mode}");
        for (i, row) in rows.iter().enumerate() {
            let (id, payload, extra, app): (i32, String, i32, String) =
                (row.get(0), row.get(1), row.get(2), row.get(3));
            assert_eq!((id, extra, app.as_str()), (i as i32 + 1, 7, "raw_passthrough_it"), "{mode}");
            assert_eq!(payload.len(), 32, "{mode}");
        }
        let updated = c.execute(&format!("UPDATE {table} SET extra = id WHERE id <= $1"), &[&10i32]).expect("update");
        assert_eq!(updated, 10, "{mode}");
        let sum: i64 = c.query_one(&format!("SELECT sum(extra)::int8 FROM {table}"), &[]).expect("sum").get(0);
        assert_eq!(sum, 55 + 7 * 2990, "{mode}");
        c.batch_execute(&format!("DROP TABLE {table}")).expect("drop");
        assert!(passed_through(&r) > 0.0, "{mode}");
    }
}

#[test]
fn query_timeout_cancels_a_statement_whose_rows_pass_through() {
    let r = router("transaction", true, "query_timeout = \"1s\"");
    let mut c = r.pg("main");
    let stmt = c
        .prepare("SELECT g, CASE WHEN g = 20000 THEN pg_sleep(60)::text END FROM generate_series(1, 40000) g")
        .expect("prepare");
    let mut it = c.query_raw(&stmt, std::iter::empty::<i32>()).expect("execute");
    let mut rows = 0;
    let err = loop {
        match it.next() {
            Ok(Some(_)) => rows += 1,
            Ok(None) => panic!("no timeout after {rows} rows"),
            Err(e) => break e,
        }
    };
    drop(it);
    assert_eq!(sqlstate(&err), "57014", "{err}");
    let message = err.as_db_error().map(|e| e.message().to_owned()).unwrap_or_default();
    assert!(message.contains("query_timeout"), "{err:?}");
    assert!(rows < 20_000, "{rows} rows");
    assert!(passed_through(&r) > 0.0, "rows before the sleep passed through");
    assert_eq!(many(&mut c, 10).len(), 10, "the session goes on");
}

#[test]
fn pgbench_prepared_through_raw_passthrough_has_no_failures() {
    let db = Database::create();
    let pools = pg_pool("pgb", dbs().pg.primary_port, "transaction", 4)
        .replace(&format!("database = \"{}\"", dbs().pg.database), &format!("database = \"{}\"", db.0));
    let r = Router::start(&with_metrics(&pg_config(&[0], &format!("{pools}raw_passthrough = true\n"), "pgb"), None));
    pgbench(r.port(), "pgb", &["-i", "-q", "-s", "1"]);
    let script = tempfile::NamedTempFile::new().expect("script");
    std::fs::write(
        script.path(),
        "\\set a random(1, 100000 - 99)\nSELECT aid, bid, abalance, filler FROM pgbench_accounts WHERE aid BETWEEN :a AND :a + 99;\n",
    )
    .expect("write script");
    let custom = format!("{}@1", script.path().display());
    for workload in [&["-S"][..], &[][..], &["-f", &custom][..]] {
        let mut args = vec!["-n", "-M", "prepared", "-c", "16", "-j", "2", "-t", "30"];
        args.extend_from_slice(workload);
        let report = pgbench(r.port(), "pgb", &args);
        assert_eq!(number(&report, "number of transactions actually processed"), 16 * 30, "{workload:?}:\n{report}");
        assert_eq!(number(&report, "number of failed transactions"), 0, "{workload:?}:\n{report}");
    }
    let reply = http(addrs(&r).0, "GET", "/metrics", &[]);
    // 480 transactions of 100 rows of at least 90 bytes took the fast path at least.
    let passed = sum(&reply.body, "sqp_passthrough_bytes_total", &["pool=\"pgb\""]).0;
    assert!(passed > 480.0 * 100.0 * 90.0, "only {passed} bytes passed through");
    drop(r);
}
