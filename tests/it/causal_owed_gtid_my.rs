//! Issue #34, MariaDB: what a commit that reports no GTID in its own answer costs. A write that
//! leaves no GTID at all (`sql_log_bin = 0`) keeps the session's reads on the primary and its
//! backend connection open. An autocommit `SELECT f(n)` of an inserting function, whose result
//! set ends in an EOF packet (no session state), leaves its GTID owed on the connection: the
//! router collects it for the writing session as the session gives the connection up, so the
//! next client on that connection is never credited with it and the writer's reads go back to
//! the replica once it applied the write. The write pool holds one connection, so
//! `CONNECTION_ID()` shows whether it was kept; where a read ran is proven by `@@server_id`.

use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::Conn;

use crate::causal_matrix_my::{read, schema};
use crate::causal_mysql::client;
use crate::router::Router;
use crate::support::{dbs, eventually, Dbs, Kind, MyEnv};

const PRIMARY: u64 = 1;
const REPLICA: u64 = 2;

/// Causal reads over `mywrite` (the primary, one connection) and `myread` (the replica), both
/// in transaction pooling: every statement gives the write connection back.
fn one_connection_router(my: &MyEnv) -> Router {
    let pool = |name: &str, port: u16, max: u32| {
        format!(
            "[pools.{name}]\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
             max_connections = {max}\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
             [pools.{name}.health]\ninterval = \"100ms\"\ntimeout = \"1s\"\nfailure_threshold = 2\nsuccess_threshold = 1\n\n",
            u = my.user,
            p = my.password,
            d = my.database,
        )
    };
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         {}{}[routing]\nread_write_split = true\nwrite_pool = \"mywrite\"\nread_pool = \"myread\"\n\
         read_your_writes = \"causal\"\ncausal_wait = \"20ms\"\n",
        pool("mywrite", my.primary_port, 1),
        pool("myread", my.replica_port, 20),
    ))
}

/// `(rows with id n, @@server_id, CONNECTION_ID())` of one read through `c`.
fn read_on(c: &mut Conn, t: &str, n: u64) -> (u64, u64, u64) {
    let sql = format!("SELECT COUNT(*), @@server_id, CONNECTION_ID() FROM {t} WHERE id = {n}");
    c.query_first(&sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_else(|| panic!("{sql}: no row"))
}

fn token(c: &mut Conn) -> String {
    c.query_first("SHOW querypilot.causal_token").expect("show").expect("a row")
}

/// `SELECT CONNECTION_ID(), t_f(n)` in autocommit through `w` on `path` (text, prepared, or
/// first of a multi-statement text); returns the connection id.
fn select_function(w: &mut Conn, t: &str, path: &str, n: u64) -> u64 {
    let sql = format!("SELECT CONNECTION_ID(), {t}_f({n})");
    let row: mysql::Result<Option<(u64, u64)>> = match path {
        "text" => w.query_first(&sql),
        "prepared" => w.exec_first(format!("SELECT CONNECTION_ID(), {t}_f(?)"), (n,)),
        _ => w.query_first(format!("{sql}; SELECT 1")),
    };
    let (id, got) = row.unwrap_or_else(|e| panic!("{path}: {sql}: {e}")).expect("a row");
    assert_eq!(got, n, "{path}: the function's result");
    id
}

/// `sql_log_bin = 0`: an INSERT (its OK reports no GTID) and a `SELECT f(n)` (its EOF says no
/// state changed) each leave the session's reads on the primary, where they see the write the
/// replica will never get, and keep the one write connection open: the next statement runs on
/// the same `CONNECTION_ID()`. Every token SHOW hands out (`primary`) is accepted back.
#[test]
fn mariadb_a_write_without_a_gtid_keeps_its_connection_and_the_reads_on_the_primary() {
    let my = &dbs().my;
    let router = one_connection_router(my);
    let t = schema(my);
    let mut w = client(&router, my);
    w.query_drop("SET SESSION sql_log_bin = 0").expect("sql_log_bin (the app user may set it)");
    let mut ids = Vec::new();
    for n in 1..=4 {
        if n % 2 == 1 {
            w.query_drop(format!("INSERT INTO {t} VALUES ({n})")).expect("insert");
        } else {
            select_function(&mut w, &t, "text", n);
        }
        let (rows, server, id) = read_on(&mut w, &t, n);
        assert_eq!((rows, server), (1, PRIMARY), "write {n}: the reader sees it, on the primary");
        ids.push(id);
    }
    assert!(ids.windows(2).all(|w| w[0] == w[1]), "the write connection was closed between writes: {ids:?}");
    let tok = token(&mut w);
    assert_eq!(tok, "primary", "a write without a GTID keeps the session on the primary");
    let mut other = client(&router, my);
    other.query_drop(format!("SET querypilot.causal_token = '{tok}'")).expect("the token is accepted back");
    assert_eq!(read(&mut other, &t, 1), (1, PRIMARY), "its holder reads on the primary too");
}

/// With the replica's SQL thread stopped, an autocommit `SELECT f(n)` on each path (text,
/// prepared, first of a multi-statement text): the writer reads its row on the primary (none
/// stale) on the very connection it wrote on (collected, not closed), holds a GTID token (not
/// `primary`), and a fresh session on that connection is credited with nothing. Once the
/// replica applied the writes, each writer reads on the replica again.
#[test]
fn mariadb_an_owed_gtid_is_collected_for_the_writer_and_never_for_the_next_session() {
    let env = Dbs::private();
    let my = &env.my;
    let router = one_connection_router(my);
    let t = schema(my);
    let mut probe = client(&router, my);
    eventually(Duration::from_secs(15), "reads on the replica", || read(&mut probe, &t, 0).1 == REPLICA);
    env.pause_replication(Kind::Mariadb);
    let mut writers = Vec::new();
    let mut failures = Vec::new();
    let mut check = |what: String, ok: bool| {
        if !ok {
            failures.push(what);
        }
    };
    for (n, path) in (1u64..).zip(["text", "prepared", "multi"]) {
        let mut w = client(&router, my);
        let wrote_on = select_function(&mut w, &t, path, n);
        let got = read(&mut w, &t, n);
        check(format!("{path}: the writer read {got:?}, not its row on the primary"), got == (1, PRIMARY));
        let tok = token(&mut w);
        check(format!("{path}: the writer's token is '{tok}', not its collected GTID"), tok.starts_with("gtid:"));
        let mut next = client(&router, my);
        next.query_drop("SET autocommit = 1").expect("an OK packet on the pooled write connection");
        let theirs = token(&mut next);
        check(format!("{path}: the next session wrote nothing, yet holds '{theirs}'"), theirs.is_empty());
        // Last: the router counts a read of the volatile CONNECTION_ID() as a possible write.
        let (_, _, next_on) = read_on(&mut next, &t, n);
        check(format!("{path}: the writer's connection was closed, not collected"), next_on == wrote_on);
        writers.push((path, n, w));
    }
    env.resume_replication(Kind::Mariadb);
    my.wait_replica_caught_up(Duration::from_secs(20));
    for (path, n, mut w) in writers {
        let got = read(&mut w, &t, n);
        check(format!("{path}: the writer read {got:?} once the replica caught up"), got == (1, REPLICA));
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
