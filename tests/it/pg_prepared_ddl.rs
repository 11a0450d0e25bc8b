//! Issue #18: prepared statements behave as on the server — after schema changes (a client
//! preparing the same text again gets a statement parsed after the change, on its own
//! connection and on a new one sharing the server connection) and by name (protocol-level
//! statements usable from SQL `EXECUTE` / `DEALLOCATE`, a duplicate Parse refused with 42P05).
//!
//! Each case runs real client libraries (asyncpg 0.27, psycopg 3.1 — `tests/connectors/
//! pg_prepared_ddl.py`) once directly against PostgreSQL and once through the router, in
//! session mode and in transaction and statement mode with a pool of one server connection so
//! that consecutive clients share it; the outputs must be the same. The Rust `postgres` crate
//! and raw protocol messages (`pg_raw`) check the cases the libraries do not reach.

use std::path::Path;
use std::process::Command;

use crate::pg_util::{backend_pid, router};
use crate::router::Router;
use crate::support::{dbs, unique_name};

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors/pg_prepared_ddl.py");

/// Runs `case` of the script against `port` as `user`; its output lines.
fn script(case: &str, port: u16, user: &str, password: &str, database: &str) -> Vec<String> {
    let table = unique_name("ppd");
    let out = Command::new("/usr/bin/python3")
        .arg(Path::new(SCRIPT))
        .args([case, "127.0.0.1", &port.to_string(), user, password, database, &table])
        .output()
        .unwrap_or_else(|e| panic!("run python3 {case}: {e} (installed by .ci/deps.sh)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{case} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

/// The script's output directly against the primary.
fn direct(case: &str) -> Vec<String> {
    let pg = &dbs().pg;
    script(case, pg.primary_port, &pg.user, &pg.password, &pg.database)
}

/// The script's output through `r`.
fn through(r: &Router, case: &str) -> Vec<String> {
    script(case, r.port(), "app", "app", "main")
}

/// Runs `case` directly, checks `expected` lines are in that output (the server's behaviour
/// the test relies on), then through the router in every pool mode: the same output.
fn same_as_direct(case: &str, expected: &[&str]) {
    let want = direct(case);
    for line in expected {
        assert!(want.iter().any(|l| l == line), "direct {case}: no line {line:?} in {want:#?}");
    }
    // Session mode: each client has a server connection of its own (two at most at once);
    // transaction and statement mode share one.
    for (mode, max) in [("session", 2), ("transaction", 1), ("statement", 1)] {
        let r = router(mode, max, "");
        assert_eq!(through(&r, case), want, "{case} through the router in {mode} mode");
    }
}

#[test]
fn asyncpg_gets_the_new_row_type_after_alter_table() {
    same_as_direct("stale_plan", &["before (1, 2)", "after 0 (1, '2')", "after 1 (1, '2')", "new connection (1, '2')"]);
}

#[test]
fn asyncpg_new_client_never_gets_another_clients_stale_statement() {
    same_as_direct("other_client", &["client A (1, 2)", "client B (1, 'x')", "client A again (1, 'x')"]);
}

#[test]
fn asyncpg_sees_the_new_parameter_types_after_re_create() {
    same_as_direct("param_types", &["before ['date']", "after ['time']", "stored 12:34:00"]);
}

#[test]
fn psycopg_protocol_statements_are_usable_from_sql_execute_and_deallocate() {
    same_as_direct(
        "deallocate",
        &[
            "EXECUTE s1 -> SELECT 1 [(42,)]",
            "EXECUTE s1 -> ERROR 26000",
            "DEALLOCATE s1 -> DEALLOCATE ",
            "DEALLOCATE ALL -> DEALLOCATE ALL",
            "cache eviction ok",
        ],
    );
}

#[test]
fn psycopg_duplicate_parse_fails_with_42p05_and_keeps_the_statement() {
    same_as_direct("duplicate", &["exec s1 -> 2 b'1'"]);
}

/// The Rust `postgres` crate: after DDL through the router, a statement prepared again on the
/// same shared server connection gets the new parameter type, while the old one stays usable.
#[test]
fn postgres_crate_prepares_anew_after_ddl_on_the_shared_connection() {
    for (mode, max) in [("session", 2), ("transaction", 1)] {
        let r = router(mode, max, "");
        let mut a = r.pg("main");
        let mut b = r.pg("main");
        let pid = backend_pid(&mut a);
        let table = unique_name("ppd_rs");
        a.batch_execute(&format!("CREATE TABLE {table} (v int4)")).expect("create");
        let insert = format!("INSERT INTO {table} VALUES ($1)");
        let old = a.prepare(&insert).expect("prepare");
        assert_eq!(old.params(), &[postgres::types::Type::INT4], "{mode}");
        b.batch_execute(&format!("DROP TABLE {table}; CREATE TABLE {table} (v text)")).expect("re-create");
        let new = a.prepare(&insert).expect("prepare again");
        assert_eq!(new.params(), &[postgres::types::Type::TEXT], "{mode}: parsed after the change");
        a.execute(&new, &[&"x"]).expect("insert text");
        let other = b.prepare(&insert).expect("another client prepares");
        assert_eq!(other.params(), &[postgres::types::Type::TEXT], "{mode}");
        if mode == "transaction" {
            assert_eq!(backend_pid(&mut b), pid, "{mode}: one server connection for both clients");
        }
        // As on the server: the statement prepared before keeps its parameter type and is
        // revalidated against the new table (int4 is assigned to text).
        a.execute(&old, &[&1i32]).unwrap_or_else(|e| panic!("{mode}: the old statement runs: {e}"));
        let all: String =
            a.query_one(&format!("SELECT string_agg(v, ',' ORDER BY v) FROM {table}"), &[]).expect("read").get(0);
        assert_eq!(all, "1,x", "{mode}");
        a.batch_execute(&format!("DROP TABLE {table}")).expect("drop");
    }
}

/// Raw protocol messages (`pg_raw`): a named Parse the server rejects creates no name, so the
/// client may Parse that name again (as on the server); a duplicate fails with 42P05 whatever
/// the text, and the first statement stays.
#[test]
fn a_rejected_parse_leaves_its_name_free_and_a_duplicate_keeps_the_first() {
    use crate::pg_raw::{bind, code, columns, execute, md5_router, parse, query, sync, tags, Raw};
    for mode in ["session", "transaction"] {
        let r = md5_router(mode, 1);
        let mut c = Raw::login(r.port(), "main", "app").unwrap_or_else(|e| panic!("login: {e:?}"));
        // Inside a transaction the backend is attached: the Parse reaches the server.
        c.send(&query("BEGIN"));
        c.until_ready();
        let mut bad = parse("s1", "SELECT * FROM no_such_table_ppd");
        bad.extend(sync());
        c.send(&bad);
        let got = c.until_ready();
        assert_eq!((tags(&got).as_str(), code(&got[0].1).as_str()), ("EZ", "42P01"), "{mode}");
        c.send(&query("ROLLBACK"));
        c.until_ready();
        let mut good = parse("s1", "SELECT 9");
        good.extend(bind("s1", &[], 0));
        good.extend(execute());
        good.extend(sync());
        c.send(&good);
        let got = c.until_ready();
        assert_eq!(tags(&got), "12DCZ", "{mode}: the name was free");
        assert_eq!(columns(&got[2].1), vec![Some(b"9".to_vec())], "{mode}");
        let mut dup = parse("s1", "SELECT 10");
        dup.extend(bind("s1", &[], 0));
        dup.extend(execute());
        dup.extend(sync());
        c.send(&dup);
        let got = c.until_ready();
        assert_eq!((tags(&got).as_str(), code(&got[0].1).as_str()), ("EZ", "42P05"), "{mode}");
        let mut again = bind("s1", &[], 0);
        again.extend(execute());
        again.extend(sync());
        c.send(&again);
        let got = c.until_ready();
        assert_eq!(columns(&got[1].1), vec![Some(b"9".to_vec())], "{mode}: the first statement stays");
    }
}

/// Raw protocol (#33): once a batch failed, its messages up to the Sync are dropped unread, as
/// the server drops them (PostgreSQL reads only a skipped message's type): a malformed Parse
/// among them (no NUL, not UTF-8) ends nothing, the client gets the batch's one error and the
/// session goes on. A message of a type no client sends is still refused.
#[test]
fn a_failed_batch_is_skipped_unread_up_to_its_sync() {
    use crate::pg_raw::{code, columns, md5_router, msg, parse, query, sync, tags, Raw};
    for mode in ["session", "transaction"] {
        let r = md5_router(mode, 1);
        let mut c = Raw::login(r.port(), "main", "app").unwrap_or_else(|e| panic!("login: {e:?}"));
        let mut batch = parse("s1", "SELECT 1");
        batch.extend(parse("s1", "SELECT 2"));
        batch.extend(msg(b'P', b"s2\0SELECT '\xff"));
        batch.extend(parse("s3", "SELECT 3"));
        batch.extend(sync());
        c.send(&batch);
        let got = c.until_ready();
        let errors: Vec<String> = got.iter().filter(|m| m.0 == b'E').map(|m| code(&m.1)).collect();
        assert_eq!(errors, ["42P05"], "{mode}: the batch's one error: {got:?}");
        c.send(&query("SELECT 4"));
        let got = c.until_ready();
        assert_eq!(columns(&got[1].1), vec![Some(b"4".to_vec())], "{mode}: the session goes on");
        let mut unknown = parse("s1", "SELECT 2");
        unknown.extend(msg(b'?', b""));
        unknown.extend(sync());
        c.send(&unknown);
        let got: Vec<_> = std::iter::from_fn(|| c.recv()).collect();
        let codes: Vec<String> = got.iter().map(|m| code(&m.1)).collect();
        assert_eq!(tags(&got), "EE", "{mode}: the batch's error, the unknown type's, then the end: {got:?}");
        assert_eq!(codes, ["42P05", "08P01"], "{mode}");
    }
}

/// The Rust `postgres` crate (Bind + Execute, no Describe): in transaction mode a statement
/// prepared before a schema change and executed on a connection that never had it gets the
/// server's `0A000` when its row type changed, as its own connection would answer, and runs
/// when it did not. The connections are told apart by their backend pids.
#[test]
fn postgres_crate_moved_statement_after_ddl_gets_0a000_only_when_its_row_type_changed() {
    let r = router("transaction", 2, "");
    let table = unique_name("ppd_move");
    let mut a = r.pg("main");
    let mut b = r.pg("main");
    let mut ddl = r.pg("main");
    ddl.batch_execute(&format!("CREATE TABLE {table} (a int, b int); INSERT INTO {table} VALUES (1, 2)"))
        .expect("create");
    // b holds one connection (q), so a prepares and runs on the other (p).
    b.batch_execute("BEGIN").expect("begin");
    let q = backend_pid(&mut b);
    let all = a.prepare(&format!("SELECT * FROM {table}")).expect("prepare all");
    let cols = a.prepare(&format!("SELECT a, b FROM {table} WHERE a > 0")).expect("prepare cols");
    assert_eq!(a.query_one(&all, &[]).expect("all").get::<_, i32>(1), 2);
    assert_eq!(a.query_one(&cols, &[]).expect("cols").get::<_, i32>(1), 2);
    let p = backend_pid(&mut a);
    assert_ne!(p, q, "two server connections");
    b.batch_execute("COMMIT").expect("commit");
    // A schema change that keeps the row type, then hold p so that a runs on q.
    ddl.batch_execute(&format!("ALTER TABLE {table} ALTER COLUMN b SET DEFAULT 5")).expect("harmless alter");
    let mut holders = Vec::new();
    loop {
        let mut h = r.pg("main");
        h.batch_execute("BEGIN").expect("begin");
        let pid = backend_pid(&mut h);
        holders.push((pid, h));
        if pid == p {
            break;
        }
        assert!(holders.len() < 2, "p is held");
    }
    for (pid, h) in &mut holders {
        if *pid != p {
            h.batch_execute("COMMIT").expect("q given back");
        }
    }
    assert_eq!(a.query_one(&all, &[]).expect("same row type on q").get::<_, i32>(1), 2);
    // Change the row type through another client (on q), and run the statement q never had.
    let mut other = r.pg("main");
    other.batch_execute(&format!("ALTER TABLE {table} ALTER COLUMN b TYPE text")).expect("alter type");
    let e = a.query_one(&cols, &[]).map(|_| ()).expect_err("row type changed");
    let db = e.as_db_error().unwrap_or_else(|| panic!("not a server error: {e}"));
    assert_eq!((db.code().code(), db.message()), ("0A000", "cached plan must not change result type"));
    let fresh = a.prepare(&format!("SELECT a, b FROM {table} WHERE a > 0")).expect("prepare again");
    assert_eq!(a.query_one(&fresh, &[]).expect("fresh").get::<_, String>(1), "2");
    drop(holders);
    ddl.batch_execute(&format!("DROP TABLE {table}")).expect("drop");
}

/// A stale plan healed for one client is healed under a new server name: libpq's pattern
/// (Bind, Describe portal, Execute — `pg_raw`) gets the new rows transparently, while the Rust
/// `postgres` crate, which shares that server statement (pool of one) and decodes with the row
/// description it learned before, still gets the server's `0A000` for its old statement.
#[test]
fn healing_one_client_never_changes_a_statement_another_client_shares() {
    use crate::pg_raw::{bind, describe_portal, execute, md5_router, parse, sync, tags, Raw};
    let r = md5_router("transaction", 1);
    let table = unique_name("ppd_heal");
    let mut a = r.pg("main");
    a.batch_execute(&format!("CREATE TABLE {table} (id int); INSERT INTO {table} VALUES (1)")).expect("create");
    let sql = format!("SELECT * FROM {table}");
    let old = a.prepare(&sql).expect("prepare");
    assert_eq!(a.query(&old, &[]).expect("first run").len(), 1);
    let mut l = Raw::login(r.port(), "main", "app").unwrap_or_else(|e| panic!("login: {e:?}"));
    let mut prep = parse("p", &sql);
    prep.extend(sync());
    l.send(&prep);
    assert_eq!(tags(&l.until_ready()), "1Z");
    let mut exec = bind("p", &[], 0);
    exec.extend(describe_portal());
    exec.extend(execute());
    exec.extend(sync());
    l.send(&exec);
    assert_eq!(tags(&l.until_ready()), "2TDCZ");
    // Behind the router's back: no schema change passes through it.
    dbs().pg.primary_client().batch_execute(&format!("ALTER TABLE {table} ADD COLUMN w int DEFAULT 7")).expect("alter");
    l.send(&exec);
    let got = l.until_ready();
    assert_eq!(tags(&got), "2TDCZ", "healed for libpq's pattern");
    assert_eq!(crate::pg_raw::columns(&got[2].1).len(), 2, "the new row type");
    let e = a.query(&old, &[]).map(|_| ()).expect_err("the shared statement is still the old one");
    let db = e.as_db_error().unwrap_or_else(|| panic!("not a server error: {e}"));
    assert_eq!((db.code().code(), db.message()), ("0A000", "cached plan must not change result type"));
    let fresh = a.prepare(&sql).expect("prepare again");
    assert_eq!(a.query_one(&fresh, &[]).expect("fresh").get::<_, Option<i32>>(1), Some(7));
    a.batch_execute(&format!("DROP TABLE {table}")).expect("drop");
}

/// A healed batch that also prepares a named statement after the stale one (`pg_raw`,
/// libpq's pattern): the server skipped that Parse the first time and runs it in the resent
/// batch, so the name exists afterwards, as it would directly.
#[test]
fn a_named_parse_in_a_healed_batch_keeps_its_name() {
    use crate::pg_raw::{bind, columns, describe_portal, execute, md5_router, parse, sync, tags, Raw};
    for mode in ["session", "transaction"] {
        let r = md5_router(mode, 1);
        let table = unique_name("ppd_hb");
        let mut l = Raw::login(r.port(), "main", "app").unwrap_or_else(|e| panic!("login: {e:?}"));
        l.send(&crate::pg_raw::query(&format!("CREATE TABLE {table} (id int); INSERT INTO {table} VALUES (1)")));
        l.until_ready();
        let mut prep = parse("p", &format!("SELECT * FROM {table}"));
        prep.extend(sync());
        l.send(&prep);
        l.until_ready();
        let mut exec = bind("p", &[], 0);
        exec.extend(describe_portal());
        exec.extend(execute());
        exec.extend(sync());
        l.send(&exec);
        assert_eq!(tags(&l.until_ready()), "2TDCZ", "{mode}");
        dbs().pg.primary_client().batch_execute(&format!("ALTER TABLE {table} ADD COLUMN w int")).expect("alter");
        let mut batch = bind("p", &[], 0);
        batch.extend(describe_portal());
        batch.extend(execute());
        batch.extend(parse("s2", "SELECT 2"));
        batch.extend(bind("s2", &[], 0));
        batch.extend(execute());
        batch.extend(sync());
        l.send(&batch);
        assert_eq!(tags(&l.until_ready()), "2TDC12DCZ", "{mode}: healed");
        let mut again = bind("s2", &[], 0);
        again.extend(execute());
        again.extend(sync());
        l.send(&again);
        let got = l.until_ready();
        assert_eq!(tags(&got), "2DCZ", "{mode}: s2 exists");
        assert_eq!(columns(&got[1].1), vec![Some(b"2".to_vec())], "{mode}");
        l.send(&crate::pg_raw::query(&format!("DROP TABLE {table}")));
        l.until_ready();
    }
}
