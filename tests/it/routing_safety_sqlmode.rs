//! Issue #19 case 5, MariaDB `ANSI_QUOTES` the router cannot read in any SET: in the servers'
//! global `sql_mode` (on both servers, or on the replica alone) and switched on through a
//! prepared SET. Under `ANSI_QUOTES` the server reads `"a\"` as an identifier where the default
//! mode reads a string running to the next `"`, so `SELECT @@server_id, "a\" , 1 FROM t FOR
//! UPDATE -- "` hides a row lock and `SELECT @@server_id, "a\" FROM t; UPDATE ... -- "` a write
//! from a router lexing in the default mode. MariaDB reports the mode in every answer's status
//! flags, and each statement meant for the replica is checked against the flags of the replica
//! connection it would run on. Clients: the `mysql` crate (multi-statements on) as the user the
//! replica lets write, so a misroute would succeed silently; placement is proven by
//! `@@server_id` and by the rows each server holds. The global mode is set on a private
//! environment, so no other test's connection can see it; `NO_BACKSLASH_ESCAPES` on the replica
//! alone is checked the same way.

use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::Conn;

use crate::mysql_safety::{replica_writer, split_config};
use crate::router::Router;
use crate::support::{dbs, unique_name, Dbs};

const PRIMARY: u64 = 1;
const REPLICA: u64 = 2;
const MODES: [&str; 3] = ["transaction", "session", "statement"];

/// A table `(id, v, "a\")` holding (1, 10, 0), made on `env`'s primary and replicated.
fn table(env: &crate::support::MyEnv) -> String {
    let t = unique_name("ansi");
    let mut root = env.superuser_client(env.primary_port);
    let db = &env.database;
    root.query_drop(format!(r"CREATE TABLE {db}.{t} (id INT PRIMARY KEY, v INT, `a\` INT)")).expect("create");
    root.query_drop(format!("INSERT INTO {db}.{t} VALUES (1, 10, 0)")).expect("seed");
    env.wait_replica_caught_up(Duration::from_secs(30));
    t
}

/// Asserts `v` of row 1 on `env`'s primary, then (once caught up) on its replica.
fn assert_v(env: &crate::support::MyEnv, t: &str, want: i64, what: &str) {
    let sql = format!("SELECT v FROM {}.{t} WHERE id = 1", env.database);
    let v = |port: u16| -> i64 { env.superuser_client(port).query_first(&sql).expect("read v").expect("row 1") };
    assert_eq!(v(env.primary_port), want, "{what}: the primary holds every acknowledged write");
    env.wait_replica_caught_up(Duration::from_secs(30));
    assert_eq!(v(env.replica_port), want, "{what}: the replica holds what the primary does, nothing more");
}

/// The server that answered `sql`, whose first column is `@@server_id` in every reading.
fn ran_on(c: &mut Conn, sql: &str) -> u64 {
    let row: mysql::Row = c.query_first(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).expect("a row");
    row.get(0).unwrap_or_else(|| panic!("{sql}: no @@server_id"))
}

/// The hostile statements quoting with `q`: (a locking read, a read followed by a write), both
/// plain reads of a string in the default mode. With `"` under `ANSI_QUOTES` the server reads
/// the column `a\`; with `'` under `NO_BACKSLASH_ESCAPES` the string `'a\'`.
fn hostile(t: &str, q: char) -> (String, String) {
    (
        format!(r"SELECT @@server_id, {q}a\{q} , 1 FROM {t} FOR UPDATE -- {q}"),
        format!(r"SELECT @@server_id, {q}a\{q} FROM {t}; UPDATE {t} SET v = v + 1 WHERE id = 1 -- {q}"),
    )
}

/// A private MariaDB pair whose global `sql_mode` gains `flag` on the replica (and on the
/// primary when `on_primary`), with the replica writer of the shared servers created there too.
fn mode_env(flag: &str, on_primary: bool) -> Dbs {
    let env = Dbs::private();
    let my = &env.my;
    let (user, password) = replica_writer();
    let mut root = my.superuser_client(my.primary_port);
    for sql in [
        format!("CREATE USER IF NOT EXISTS '{user}'@'%' IDENTIFIED BY '{password}'"),
        format!("GRANT ALL PRIVILEGES ON *.* TO '{user}'@'%'"),
        format!("GRANT READ_ONLY ADMIN ON *.* TO '{user}'@'%'"),
    ] {
        root.query_drop(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    my.wait_replica_caught_up(Duration::from_secs(30));
    let ports = if on_primary { vec![my.primary_port, my.replica_port] } else { vec![my.replica_port] };
    for port in ports {
        my.superuser_client(port)
            .query_drop(format!("SET GLOBAL sql_mode = CONCAT(@@GLOBAL.sql_mode, ',{flag}')"))
            .expect("global sql_mode");
    }
    env
}

/// The shared split config in `mode`, pointed at `env`'s servers.
fn env_config(env: &Dbs, mode: &str) -> String {
    let shared = &dbs().my;
    let text = split_config(mode, "")
        .replace(&format!("port = {} }}", shared.primary_port), &format!("port = {} }}", env.my.primary_port))
        .replace(&format!("port = {} }}", shared.replica_port), &format!("port = {} }}", env.my.replica_port));
    assert!(text.contains(&format!("port = {} }}", env.my.replica_port)), "{text}");
    text
}

fn client(env: &Dbs, r: &Router) -> Conn {
    let (u, p) = replica_writer();
    Conn::new(env.my.opts(r.port(), u, p)).unwrap_or_else(|e| panic!("connect through router: {e}"))
}

/// `ANSI_QUOTES` in both servers' global `sql_mode`: every session starts in it (the login's
/// status flags say so), the hidden lock and write run on the primary, where the write lands,
/// and text without `"` still reads from the replica.
#[test]
fn mariadb_global_ansi_quotes_keeps_hidden_locks_and_writes_off_the_replica() {
    let env = mode_env("ANSI_QUOTES", true);
    let t = table(&env.my);
    let (lock, write) = hostile(&t, '"');
    for (i, mode) in MODES.into_iter().enumerate() {
        let r = Router::start(&env_config(&env, mode));
        let mut c = client(&env, &r);
        let mode_seen: String = c.query_first("SELECT @@sql_mode").expect("read").expect("row");
        assert!(mode_seen.contains("ANSI_QUOTES"), "{mode}: {mode_seen}");
        assert_eq!(ran_on(&mut c, "SELECT @@server_id"), REPLICA, "{mode}: plain reads still split");
        assert_eq!(ran_on(&mut c, &lock), PRIMARY, "{mode}: the FOR UPDATE is real");
        assert_eq!(ran_on(&mut c, &write), PRIMARY, "{mode}: the UPDATE is real");
        assert_v(&env.my, &t, 11 + i as i64, mode);
    }
}

/// `ANSI_QUOTES` (and, the same way, `NO_BACKSLASH_ESCAPES`) in the replica's global
/// `sql_mode` only: sessions learn the primary's default mode, and the replica connection a read
/// is about to run on reports otherwise. The hostile text moves to the primary (which reads it
/// as one string: nothing is written anywhere).
#[test]
fn mariadb_sql_mode_on_the_replica_alone_is_seen_on_its_connection() {
    for (flag, q) in [("ANSI_QUOTES", '"'), ("NO_BACKSLASH_ESCAPES", '\'')] {
        let env = mode_env(flag, false);
        let t = table(&env.my);
        let (lock, write) = hostile(&t, q);
        for mode in MODES {
            let r = Router::start(&env_config(&env, mode));
            let mut c = client(&env, &r);
            assert_eq!(ran_on(&mut c, "SELECT @@server_id"), REPLICA, "{flag} {mode}: plain reads still split");
            for _ in 0..2 {
                // Twice: the primary's answer puts the session back in the primary's mode, so
                // each read meant for the replica is checked on its connection again.
                assert_eq!(ran_on(&mut c, &lock), PRIMARY, "{flag} {mode}: the replica would lock");
                assert_eq!(ran_on(&mut c, &write), PRIMARY, "{flag} {mode}: the replica would write");
            }
            assert_v(&env.my, &t, 10, &format!("{flag} {mode}"));
        }
    }
}

/// `ANSI_QUOTES` switched on through a prepared SET the router does not read, on the shared
/// servers (the mode is the session's own; one connection per pool, so the next client would
/// get the very connection the SET ran on, and must not get its mode).
#[test]
fn mariadb_ansi_quotes_from_a_prepared_set_is_followed() {
    let env_t = crate::mysql_safety::table();
    let my = &dbs().my;
    my.superuser_client(my.primary_port)
        .query_drop(format!(r"ALTER TABLE {}.{env_t} ADD COLUMN `a\` INT DEFAULT 0", my.database))
        .expect("alter");
    my.wait_replica_caught_up(Duration::from_secs(30));
    let (lock, write) = hostile(&env_t, '"');
    for mode in MODES {
        let r = Router::start(&split_config(mode, "").replace("max_connections = 4", "max_connections = 1"));
        let mut c = crate::mysql_safety::client(&r);
        assert_eq!(ran_on(&mut c, "SELECT @@server_id"), REPLICA, "{mode}");
        c.query_drop("PREPARE qp_ansi FROM 'SET sql_mode = CONCAT(@@sql_mode, '',ANSI_QUOTES'')'").expect("prepare");
        c.query_drop("EXECUTE qp_ansi").expect("execute");
        assert_eq!(ran_on(&mut c, &lock), PRIMARY, "{mode}: the FOR UPDATE is real");
        assert_eq!(ran_on(&mut c, &write), PRIMARY, "{mode}: the UPDATE is real");
        drop(c);
        let mut next = crate::mysql_safety::client(&r);
        let seen: String =
            next.query_first("/* querypilot: route=primary */ SELECT @@sql_mode").expect("read").expect("row");
        assert!(!seen.contains("ANSI_QUOTES"), "{mode}: the next client got the prepared mode: {seen}");
    }
    crate::mysql_safety::assert_v_everywhere(&env_t, 13, "prepared SET");
}
