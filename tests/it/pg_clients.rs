//! Issue #3: the Rust `postgres` client works through the router in session, transaction and
//! statement mode — simple and multi-statement queries, the extended protocol (binary results
//! here, text in `pg_raw`), COPY both ways, notices, relayed errors — plus LISTEN/NOTIFY in
//! session mode, statement mode's refusal of BEGIN, and a prepared statement that follows its
//! client across backend connections.

use std::collections::HashSet;
use std::io::{Read, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use postgres::fallible_iterator::FallibleIterator;

use crate::pg_util::{backend_pid, router, sqlstate};
use crate::support::unique_name;

/// The first column of every row of a simple-query response.
fn simple_values(msgs: &[postgres::SimpleQueryMessage]) -> Vec<String> {
    msgs.iter()
        .filter_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        })
        .collect()
}

/// Everything a client does in every mode, on its own table.
fn exercise(mode: &str) {
    let r = router(mode, 2, "");
    let notices = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = notices.clone();
    let mut cfg = postgres::Config::new();
    cfg.host("127.0.0.1").port(r.port()).user("app").password("app").dbname("main");
    cfg.notice_callback(move |n| sink.lock().expect("notices").push(n.message().to_owned()));
    let mut c = cfg.connect(postgres::NoTls).expect("connect through router");
    let table = unique_name(&format!("pgc_{mode}"));

    // Simple query, then a multi-statement string (one implicit transaction).
    let rows = c.simple_query("SELECT 1 AS one").expect("simple query");
    assert_eq!(simple_values(&rows), vec!["1".to_owned()]);
    let multi = format!(
        "CREATE TABLE {table} (id int PRIMARY KEY, name text, data bytea); \
         INSERT INTO {table} VALUES (1, 'one', '\\x01'), (2, 'two', '\\x0203'); \
         SELECT count(*) FROM {table}"
    );
    let msgs = c.simple_query(&multi).expect("multi-statement string");
    assert_eq!(simple_values(&msgs), vec!["2".to_owned()], "{mode}: rows of the last statement");

    // Extended protocol, binary results and parameters of several types.
    let row = c
        .query_one(&format!("SELECT id, name, data, now()::date IS NOT NULL FROM {table} WHERE id = $1"), &[&2i32])
        .expect("extended query");
    assert_eq!(row.get::<_, i32>(0), 2);
    assert_eq!(row.get::<_, String>(1), "two");
    assert_eq!(row.get::<_, Vec<u8>>(2), vec![2u8, 3]);
    assert!(row.get::<_, bool>(3));
    let n = c.execute(&format!("UPDATE {table} SET name = $1 WHERE id = $2"), &[&"uno", &1i32]).expect("update");
    assert_eq!(n, 1);
    let typed =
        c.query_typed("SELECT $1::int8 * 2", &[(&21i64, postgres::types::Type::INT8)]).expect("unnamed statement");
    assert_eq!(typed[0].get::<_, i64>(0), 42);

    // COPY FROM STDIN then COPY TO STDOUT.
    let mut w = c.copy_in(&format!("COPY {table} (id, name) FROM STDIN")).expect("copy in");
    for i in 10..1010 {
        writeln!(w, "{i}\tcopied {i}").expect("copy data");
    }
    assert_eq!(w.finish().expect("copy in finish"), 1000);
    let mut out = String::new();
    c.copy_out(&format!("COPY (SELECT id, name FROM {table} ORDER BY id) TO STDOUT"))
        .expect("copy out")
        .read_to_string(&mut out)
        .expect("read copy out");
    assert_eq!(out.lines().count(), 1002, "{mode}: every row comes back");
    assert!(out.starts_with("1\tuno\n2\ttwo\n10\tcopied 10\n"), "{mode}: {}", &out[..40.min(out.len())]);

    // A COPY the server rejects mid-stream leaves the session usable.
    let mut w = c.copy_in(&format!("COPY {table} (id, name) FROM STDIN")).expect("copy in");
    writeln!(w, "not-a-number\tx").expect("copy data");
    let e = w.finish().expect_err("bad COPY data fails");
    assert_eq!(sqlstate(&e), "22P02", "{mode}: {e}");

    // Notices from a DO block reach the client.
    c.batch_execute("DO $$ BEGIN RAISE NOTICE 'hello from %', 'plpgsql'; END $$").expect("DO block");
    assert!(
        notices.lock().expect("notices").iter().any(|m| m == "hello from plpgsql"),
        "{mode}: notice relayed: {:?}",
        notices.lock().expect("notices")
    );

    // Errors keep their SQLSTATE, in both protocols, and the session carries on.
    let e = c.batch_execute("SELECT 1/0").expect_err("division by zero");
    assert_eq!(sqlstate(&e), "22012");
    let e = c.query("SELECT * FROM no_such_table_at_all", &[]).expect_err("missing table");
    assert_eq!(sqlstate(&e), "42P01");
    let e = c.execute(&format!("INSERT INTO {table} (id) VALUES ($1)"), &[&1i32]).expect_err("duplicate");
    assert_eq!(sqlstate(&e), "23505");
    let e = c
        .simple_query(&format!("SELECT 1; SELECT * FROM {table} WHERE id = 'x'; SELECT 3"))
        .expect_err("multi-statement error");
    assert_eq!(sqlstate(&e), "22P02");
    assert_eq!(c.query_one("SELECT 7::int", &[]).expect("after errors").get::<_, i32>(0), 7);

    if mode != "statement" {
        // Explicit transactions: a rollback undoes, an error aborts until ROLLBACK.
        let mut tx = c.transaction().expect("begin");
        tx.execute(&format!("DELETE FROM {table}"), &[]).expect("delete in tx");
        tx.rollback().expect("rollback");
        let mut tx = c.transaction().expect("begin");
        let e = tx.batch_execute("SELECT 1/0").expect_err("error in tx");
        assert_eq!(sqlstate(&e), "22012");
        let e = tx.batch_execute("SELECT 1").expect_err("aborted tx");
        assert_eq!(sqlstate(&e), "25P02");
        drop(tx);
        let n: i64 = c.query_one(&format!("SELECT count(*) FROM {table}"), &[]).expect("count").get(0);
        assert_eq!(n, 1002, "{mode}: rollback kept every row");
    }
    c.batch_execute(&format!("DROP TABLE {table}")).expect("drop");
}

#[test]
fn postgres_client_in_session_mode() {
    exercise("session");
}

#[test]
fn postgres_client_in_transaction_mode() {
    exercise("transaction");
}

#[test]
fn postgres_client_in_statement_mode() {
    exercise("statement");
}

#[test]
fn statement_mode_refuses_transaction_blocks_clearly() {
    let r = router("statement", 2, "");
    let mut c = r.pg("main");
    for begin in ["BEGIN", "begin isolation level serializable", "START TRANSACTION", "/* c */ BEGIN"] {
        let e = c.batch_execute(begin).expect_err("BEGIN refused");
        assert_eq!(sqlstate(&e), "0A000", "{begin}: {e}");
        let msg = e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default();
        assert!(msg.contains("statement pooling"), "message explains why: {msg}");
    }
    let e = c.transaction().map(|_| ()).expect_err("client-side transaction refused");
    assert_eq!(sqlstate(&e), "0A000");
    let e = c.query("BEGIN", &[]).expect_err("BEGIN over the extended protocol refused");
    assert_eq!(sqlstate(&e), "0A000");
    assert_eq!(c.query_one("SELECT 1::int", &[]).expect("still usable").get::<_, i32>(0), 1);
}

#[test]
fn listen_notify_in_session_mode() {
    let r = router("session", 3, "");
    let channel = unique_name("pgc_chan");
    let mut listener = r.pg("main");
    listener.batch_execute(&format!("LISTEN {channel}")).expect("listen");
    let mut talker = r.pg("main");
    talker.batch_execute(&format!("NOTIFY {channel}, 'first'")).expect("notify");
    talker.execute("SELECT pg_notify($1, 'second')", &[&channel]).expect("pg_notify");
    // The listener sends nothing: the router must relay notifications while it is idle.
    let got: Vec<String> = listener
        .notifications()
        .timeout_iter(Duration::from_secs(5))
        .take(2)
        .map(|n| Ok(format!("{}:{}", n.channel(), n.payload())))
        .collect()
        .expect("notifications");
    assert_eq!(got, vec![format!("{channel}:first"), format!("{channel}:second")]);
}

#[test]
fn listen_pins_a_transaction_mode_client_and_notifications_arrive() {
    let r = router("transaction", 3, "");
    let channel = unique_name("pgc_chan");
    let mut listener = r.pg("main");
    listener.batch_execute(&format!("LISTEN {channel}")).expect("listen");
    let pid = backend_pid(&mut listener);
    let mut talker = r.pg("main");
    talker.batch_execute(&format!("NOTIFY {channel}, 'hi'")).expect("notify");
    let n = listener.notifications().timeout_iter(Duration::from_secs(5)).next();
    let n = n.expect("notification").expect("a notification within 5 s");
    assert_eq!((n.channel(), n.payload(), n.process_id() != 0), (channel.as_str(), "hi", true));
    assert_eq!(backend_pid(&mut listener), pid, "LISTEN pins the client to its connection");
}

#[test]
fn a_prepared_statement_follows_its_client_across_backend_connections() {
    let r = router("transaction", 2, "");
    let mut a = r.pg("main");
    let mut b = r.pg("main");
    let stmt = a.prepare("SELECT $1::int4 + 1, pg_backend_pid()").expect("prepare");
    let mut pids = HashSet::new();
    for i in 0..100i32 {
        // Every few executions the other client holds the connection `a` used last, so `a`
        // lands on the other one, which may not have the statement yet.
        let hold = i % 3 == 0;
        if hold {
            b.batch_execute("BEGIN; SELECT 1").expect("b holds a connection");
        }
        let row = a.query_one(&stmt, &[&i]).expect("execute prepared statement");
        assert_eq!(row.get::<_, i32>(0), i + 1);
        pids.insert(row.get::<_, i32>(1));
        if hold {
            b.batch_execute("COMMIT").expect("b commits");
        }
        b.batch_execute("SELECT 2").expect("b interleaves");
    }
    assert!(pids.len() >= 2, "the statement ran on several backend connections: {pids:?}");
    // Closing the client's statement forgets only its name: the others keep working.
    let other = a.prepare("SELECT $1::text || '!'").expect("prepare another");
    drop(stmt);
    assert_eq!(a.query_one(&other, &[&"ok"]).expect("other statement").get::<_, String>(0), "ok!");
    let e = a.execute("DEALLOCATE no_such_statement", &[]).expect_err("unknown statement");
    assert_eq!(sqlstate(&e), "26000");
}

#[test]
fn session_mode_resets_the_connection_before_the_next_client() {
    let r = router("session", 1, "");
    let table = unique_name("pgc_tmp");
    let pid = {
        let mut c = r.pg("main");
        c.batch_execute(&format!("SET search_path = nowhere; CREATE TEMP TABLE {table} (x int)")).expect("state");
        backend_pid(&mut c)
    };
    let mut c = r.pg("main");
    assert_eq!(backend_pid(&mut c), pid, "pool of one: the same connection");
    let path: String = c.query_one("SHOW search_path", &[]).expect("show").get(0);
    assert_eq!(path, "\"$user\", public");
    let e = c.batch_execute(&format!("SELECT * FROM {table}")).expect_err("temp table gone");
    assert_eq!(sqlstate(&e), "42P01");
}
