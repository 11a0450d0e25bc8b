//! MySQL sessions through the router against the harness's real MariaDB: login, text and
//! binary results, pool modes, state isolation in transaction mode, the mysql CLI.

use std::process::Command;

use mysql::prelude::Queryable;
use mysql::{Conn, Value};

use crate::router::Router;
use crate::support::{dbs, unique_name, MyEnv};

/// `[pools.NAME]` for the harness's MariaDB primary, credentials app/app.
pub fn my_pool(name: &str, mode: &str, max: u32) -> String {
    let my: &MyEnv = &dbs().my;
    format!(
        "[pools.{name}]\nmode = \"{mode}\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
         max_connections = {max}\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n",
        u = my.user,
        p = my.password,
        d = my.database,
        port = my.primary_port,
    )
}

/// A complete config: one MySQL listener on an ephemeral port, `cores` cores, the given pools,
/// `mysql_default_pool = default`.
pub fn my_config(cores: &[usize], pools: &str, default: &str) -> String {
    let cores: Vec<String> = cores.iter().map(|c| c.to_string()).collect();
    format!(
        "[general]\ncores = [{}]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n{pools}\n[routing]\nmysql_default_pool = \"{default}\"\n",
        cores.join(", ")
    )
}

/// A router with one MySQL pool `main` in `mode` with `max` connections.
pub fn my_router(mode: &str, max: u32) -> Router {
    Router::start(&my_config(&[0], &my_pool("main", mode, max), "main"))
}

/// The `mysql` crate connected through the router as app/app.
pub fn client(router: &Router) -> Conn {
    let my = &dbs().my;
    Conn::new(my.opts(router.port(), &my.user, &my.password)).unwrap_or_else(|e| panic!("connect through router: {e}"))
}

fn server_error(e: mysql::Error) -> (u16, String) {
    match e {
        mysql::Error::MySqlError(e) => (e.code, e.state),
        other => panic!("expected a server error, got {other}"),
    }
}

#[test]
fn all_modes_run_text_and_prepared_queries() {
    for mode in ["session", "transaction", "statement"] {
        let router = my_router(mode, 2);
        let mut c = client(&router);
        let one: Option<i64> = c.query_first("SELECT 1").expect("select");
        assert_eq!(one, Some(1), "{mode}");
        let v: Option<(i64, String)> = c.exec_first("SELECT ? + 1, ?", (41, "x")).expect("prepared");
        assert_eq!(v, Some((42, "x".to_owned())), "{mode}");
        let rows: Vec<(i64, i64)> = c.query("SELECT 1, 2 UNION ALL SELECT 3, 4").expect("rows");
        assert_eq!(rows, vec![(1, 2), (3, 4)], "{mode}");
        let version: Option<String> = c.query_first("SELECT VERSION()").expect("version");
        assert!(version.unwrap_or_default().contains("MariaDB"), "{mode}");
    }
}

#[test]
fn wrong_password_is_1045() {
    let router = my_router("transaction", 2);
    let my = &dbs().my;
    let err = Conn::new(my.opts(router.port(), &my.user, "nope")).expect_err("wrong password must fail");
    assert_eq!(server_error(err), (1045, "28000".to_owned()));
    let err = Conn::new(my.opts(router.port(), "someone", &my.password)).expect_err("wrong user must fail");
    assert_eq!(server_error(err).0, 1045);
}

#[test]
fn multi_statements_and_multi_results() {
    for mode in ["session", "transaction", "statement"] {
        eprintln!("pool mode {mode}");
        multi_statements_in(mode);
    }
}

fn multi_statements_in(mode: &str) {
    let router = my_router(mode, 2);
    let mut c = client(&router);
    let table = unique_name("my_multi");
    c.query_drop(format!("CREATE TABLE {table} (id INT PRIMARY KEY AUTO_INCREMENT, v TEXT)")).expect("create");
    let mut result = c
        .query_iter(format!("INSERT INTO {table} (v) VALUES ('a'); SELECT v FROM {table}; SELECT 7, 8"))
        .expect("multi");
    let mut sets = Vec::new();
    while let Some(set) = result.iter() {
        let rows: Vec<Vec<Value>> = set.map(|r| r.expect("row").unwrap()).collect();
        sets.push(rows);
    }
    drop(result);
    assert_eq!(sets.len(), 3);
    assert_eq!(sets[1], vec![vec![Value::Bytes(b"a".to_vec())]]);
    assert_eq!(sets[2], vec![vec![Value::Bytes(b"7".to_vec()), Value::Bytes(b"8".to_vec())]]);
    // An error in the middle ends the response and the session goes on; directly against
    // the server the client sees the same thing.
    let direct = dbs()
        .my
        .primary_client()
        .query_drop("SELECT 1; SELECT * FROM no_such_table_here; SELECT 3")
        .map_err(server_error);
    let routed = c.query_drop("SELECT 1; SELECT * FROM no_such_table_here; SELECT 3").map_err(server_error);
    assert_eq!(routed, direct);
    let again: Option<i64> = c.query_first("SELECT 5").expect("after error");
    assert_eq!(again, Some(5));
}

#[test]
fn transaction_mode_keeps_clients_state_apart() {
    let router = my_router("transaction", 1);
    let mut a = client(&router);
    let mut b = client(&router);
    a.query_drop("SET time_zone = '+05:00'").expect("tz a");
    b.query_drop("SET time_zone = '-03:00'").expect("tz b");
    a.query_drop("USE mysql").expect("use a");
    for _ in 0..5 {
        let tz_a: Option<String> = a.query_first("SELECT @@time_zone").expect("a");
        let tz_b: Option<String> = b.query_first("SELECT @@time_zone").expect("b");
        assert_eq!(tz_a.as_deref(), Some("+05:00"));
        assert_eq!(tz_b.as_deref(), Some("-03:00"));
        let db_a: Option<String> = a.query_first("SELECT DATABASE()").expect("db a");
        let db_b: Option<String> = b.query_first("SELECT DATABASE()").expect("db b");
        assert_eq!(db_a.as_deref(), Some("mysql"));
        assert_eq!(db_b.as_deref(), Some(dbs().my.database.as_str()));
    }
    // A fresh client after both must see server defaults.
    drop(a);
    drop(b);
    let mut c = client(&router);
    let tz: Option<String> = c.query_first("SELECT @@time_zone").expect("c");
    assert_eq!(tz.as_deref(), Some("SYSTEM"));
}

#[test]
fn transactions_hold_the_connection_and_pins_stick() {
    let router = my_router("transaction", 2);
    let mut a = client(&router);
    let table = unique_name("my_tx");
    a.query_drop(format!("CREATE TABLE {table} (id INT PRIMARY KEY)")).expect("create");
    a.query_drop("BEGIN").expect("begin");
    a.query_drop(format!("INSERT INTO {table} VALUES (1)")).expect("insert");
    let id1: Option<u64> = a.query_first("SELECT CONNECTION_ID()").expect("id");
    let mut b = client(&router);
    let seen: Option<i64> = b.query_first(format!("SELECT COUNT(*) FROM {table}")).expect("b");
    assert_eq!(seen, Some(0), "uncommitted row visible to another client");
    let id2: Option<u64> = a.query_first("SELECT CONNECTION_ID()").expect("id");
    assert_eq!(id1, id2, "a transaction must stay on one backend connection");
    a.query_drop("ROLLBACK").expect("rollback");
    a.query_drop("SET @mine = 42").expect("user var");
    let _busy: Option<i64> = b.query_first("SELECT 1").expect("b busy");
    let v: Option<i64> = a.query_first("SELECT @mine").expect("user var read");
    assert_eq!(v, Some(42), "user variables pin the client to its connection");
}

#[test]
fn last_insert_id_right_after_insert() {
    let router = my_router("transaction", 2);
    let mut a = client(&router);
    let table = unique_name("my_lid");
    a.query_drop(format!("CREATE TABLE {table} (id INT PRIMARY KEY AUTO_INCREMENT, v INT)")).expect("create");
    for i in 1..=3u64 {
        a.query_drop(format!("INSERT INTO {table} (v) VALUES (0)")).expect("insert");
        assert_eq!(a.last_insert_id(), i);
        let lid: Option<u64> = a.query_first("SELECT LAST_INSERT_ID()").expect("lid");
        assert_eq!(lid, Some(i));
    }
}

#[test]
fn kill_query_with_the_router_issued_id() {
    let router = Router::start(&my_config(&[0, 1], &my_pool("main", "transaction", 4), "main"));
    let mut victim = client(&router);
    let id = victim.connection_id();
    let handle = std::thread::spawn(move || {
        let started = std::time::Instant::now();
        let r: Result<Option<i64>, _> = victim.query_first("SELECT SLEEP(30)");
        (r, started.elapsed())
    });
    std::thread::sleep(std::time::Duration::from_millis(700));
    let mut killer = client(&router);
    killer.query_drop(format!("KILL QUERY {id}")).expect("kill query");
    let (r, took) = handle.join().expect("join");
    assert!(took < std::time::Duration::from_secs(20), "the sleep was not interrupted");
    // MariaDB answers an interrupted SLEEP with 1 (or an error 1317/1969).
    match r {
        Ok(v) => assert_eq!(v, Some(1)),
        Err(e) => assert!(matches!(server_error(e).0, 1317 | 1969)),
    }
}

#[test]
fn mysql_cli_through_the_router() {
    for mode in ["session", "transaction", "statement"] {
        eprintln!("pool mode {mode}");
        mysql_cli_in(mode);
    }
}

fn mysql_cli_in(mode: &str) {
    let router = my_router(mode, 2);
    let out = Command::new("mariadb")
        .args(["--no-defaults", "--skip-ssl", "-h127.0.0.1", "-uapp", "-papp", "-N", "-B"])
        .arg(format!("-P{}", router.port()))
        .args(["app", "-e", "SELECT 1+1; SELECT 'x' AS y; SET @a = 5; SELECT @a"])
        .output()
        .expect("run mariadb");
    assert!(out.status.success(), "mariadb failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "2\nx\n5\n");
    let bad = Command::new("mariadb")
        .args(["--no-defaults", "--skip-ssl", "-h127.0.0.1", "-uapp", "-pwrong", "-e", "SELECT 1"])
        .arg(format!("-P{}", router.port()))
        .output()
        .expect("run mariadb");
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("1045"), "{}", String::from_utf8_lossy(&bad.stderr));
}

#[test]
fn pinned_and_session_clients_leave_a_clean_connection() {
    for mode in ["transaction", "session"] {
        let router = my_router(mode, 1);
        let mut a = client(&router);
        a.query_drop("SET @leak = 'a'; SET sql_mode = 'ANSI'").expect("set");
        a.query_drop("CREATE TEMPORARY TABLE leak_tmp (x INT)").expect("temp");
        drop(a);
        let mut b = client(&router);
        let v: Option<Option<String>> = b.query_first("SELECT @leak").expect("read");
        assert_eq!(v, Some(None), "{mode}: user variable leaked");
        let mode_b: Option<String> = b.query_first("SELECT @@sql_mode").expect("sql_mode");
        assert_ne!(
            mode_b.as_deref(),
            Some("REAL_AS_FLOAT,PIPES_AS_CONCAT,ANSI_QUOTES,IGNORE_SPACE,ANSI"),
            "{mode}: sql_mode leaked"
        );
        b.query_drop("CREATE TEMPORARY TABLE leak_tmp (x INT)").expect("temp table must not exist any more");
    }
}

#[test]
fn backend_dying_mid_query_gives_an_error_and_the_pool_recovers() {
    let router = my_router("transaction", 1);
    let my = &dbs().my;
    let mut a = client(&router);
    let marker = unique_name("victim");
    let sql = format!("SELECT SLEEP(20) AS {marker}");
    let handle = std::thread::spawn(move || a.query_drop(sql).map(|_| a));
    let mut root = my.superuser_client(my.primary_port);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let id = loop {
        let id: Option<u64> = root
            .query_first(format!("SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{marker}%' AND INFO NOT LIKE '%PROCESSLIST%'"))
            .expect("processlist");
        if let Some(id) = id {
            break id;
        }
        assert!(std::time::Instant::now() < deadline, "query never reached the backend");
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    root.query_drop(format!("KILL CONNECTION {id}")).expect("kill backend connection");
    let r = handle.join().expect("join");
    assert!(r.is_err(), "the client must see an error when its backend dies");
    let mut b = client(&router);
    let one: Option<i64> = b.query_first("SELECT 1").expect("pool recovered");
    assert_eq!(one, Some(1));
}
