//! Issue #19, session state against the harness's real servers: the lexer follows the session's
//! string mode (PostgreSQL `standard_conforming_strings`, MariaDB `sql_mode`), serializable
//! sessions read from the primary, and the read-your-writes window starts when a long write
//! commits. Clients: rust-postgres and the `mysql` crate; placement is proven by
//! `pg_is_in_recovery()` / `@@server_id` of the server that answered and by the rows it holds.

use std::time::{Duration, Instant};

use mysql::prelude::Queryable;

use crate::pg_util::first_value;
use crate::router::{pg_pool, Router};
use crate::support::{dbs, unique_name};

const MY_PRIMARY: u64 = 1;
const MY_REPLICA: u64 = 2;

/// PostgreSQL split config; `ryw` is the read_your_writes value.
fn pg_config(ryw: &str) -> String {
    let pg = &dbs().pg;
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n{}\n{}\n\
         [routing]\nread_write_split = true\nread_pool = \"replica\"\nwrite_pool = \"primary\"\nread_your_writes = \"{ryw}\"\n",
        pg_pool("primary", pg.primary_port, "transaction", 4),
        pg_pool("replica", pg.replica_port, "transaction", 4),
    )
}

/// MariaDB split config, `ryw` as above.
fn my_config(ryw: &str) -> String {
    let my = &dbs().my;
    let pool = |name: &str, port: u16| {
        format!(
            "[pools.{name}]\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
             max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n",
            u = my.user,
            p = my.password,
            d = my.database
        )
    };
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n{}\n{}\n\
         [routing]\nread_write_split = true\nwrite_pool = \"mywrite\"\nread_pool = \"myread\"\nread_your_writes = \"{ryw}\"\n",
        pool("mywrite", my.primary_port),
        pool("myread", my.replica_port),
    )
}

fn my_client(r: &Router) -> mysql::Conn {
    let my = &dbs().my;
    mysql::Conn::new(my.opts(r.port(), &my.user, &my.password)).expect("connect through the router")
}

#[test]
fn pg_standard_conforming_strings_off_sends_hidden_locks_and_writes_to_the_primary() {
    let t = unique_name("lexmode_");
    let mut admin = dbs().pg.primary_client();
    admin
        .batch_execute(&format!("CREATE TABLE {t}(id int primary key, a int); INSERT INTO {t} VALUES (1, 0)"))
        .expect("setup");
    dbs().pg.wait_replica_caught_up(Duration::from_secs(20));
    let r = Router::start(&pg_config("none"));
    let mut c = r.pg("app");
    c.batch_execute("SET standard_conforming_strings = off").expect("set");
    // Text without backslashes still reads from the standby in this mode.
    assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "t");
    // The server reads a string, then a locking read / a second statement that writes.
    let lock = format!(r"SELECT pg_is_in_recovery(), 'a\' , 1 FROM {t} FOR UPDATE -- '");
    assert_eq!(first_value(&mut c, &lock), "f", "the hidden FOR UPDATE runs on the primary");
    let write = format!(r"SELECT pg_is_in_recovery(), 'x\' -- '; UPDATE {t} SET a = 1 WHERE id = 1");
    assert_eq!(first_value(&mut c, &write), "f", "the hidden UPDATE runs on the primary");
    let a: i32 = admin.query_one(&format!("SELECT a FROM {t} WHERE id = 1"), &[]).expect("row").get(0);
    assert_eq!(a, 1, "the write reached the primary");
    // Back in the default mode the same text is one harmless string again.
    c.batch_execute("SET standard_conforming_strings = on").expect("set");
    assert_eq!(first_value(&mut c, r"SELECT pg_is_in_recovery(), 'x\' -- '"), "t");
}

#[test]
fn mariadb_sql_mode_changes_what_reaches_the_replica() {
    let t = unique_name("lexmode_");
    let my = &dbs().my;
    let mut primary = my.primary_client();
    primary.query_drop(format!("CREATE TABLE {t}(id int primary key, a int)")).expect("setup");
    primary.query_drop(format!("INSERT INTO {t} VALUES (1, 0)")).expect("rows");
    my.wait_replica_caught_up(Duration::from_secs(20));
    let r = Router::start(&my_config("none"));
    let mut c = my_client(&r);
    let server = |c: &mut mysql::Conn, sql: &str| -> u64 {
        let row: mysql::Row =
            c.query_first(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_else(|| panic!("{sql}: no row"));
        row.get(0).unwrap_or_else(|| panic!("{sql}: no @@server_id"))
    };
    let lock = format!(r"SELECT @@server_id, 'a\' , 1 FROM {t} FOR UPDATE -- '");
    assert_eq!(server(&mut c, &lock), MY_REPLICA, "default mode: one string, a plain read");
    c.query_drop("SET sql_mode = 'NO_BACKSLASH_ESCAPES'").expect("set");
    assert_eq!(server(&mut c, "SELECT @@server_id"), MY_REPLICA);
    assert_eq!(server(&mut c, &lock), MY_PRIMARY, "NO_BACKSLASH_ESCAPES: the FOR UPDATE is real");
    c.query_drop("SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')").expect("set");
    assert_eq!(server(&mut c, &format!("SELECT @@server_id FROM {t} WHERE \"a\" = 0")), MY_PRIMARY);
    // A mode the router cannot know: nothing is read on the replica any more.
    c.query_drop("SET sql_mode = REPLACE(@@sql_mode, 'ANSI_QUOTES', '')").expect("set from an expression");
    assert_eq!(server(&mut c, "SELECT @@server_id"), MY_PRIMARY, "unknown mode: primary");
    c.query_drop("SET sql_mode = 'STRICT_TRANS_TABLES'").expect("set literal");
    assert_eq!(server(&mut c, "SELECT @@server_id"), MY_REPLICA, "known again");
}

#[test]
fn serializable_sessions_read_from_the_primary() {
    let r = Router::start(&pg_config("none"));
    for set in [
        "SET default_transaction_isolation = 'serializable'",
        "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
    ] {
        let mut c = r.pg("app");
        assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "t");
        c.batch_execute(set).expect(set);
        // On the standby this would fail: "cannot use serializable mode in a hot standby".
        assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "f", "{set}");
    }
    let mut c = r.pg("app");
    c.batch_execute("SET default_transaction_isolation = 'serializable'").expect("set");
    c.batch_execute("SET default_transaction_isolation = 'read committed'").expect("back");
    assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "t", "read committed again: the standby");
    let m = Router::start(&my_config("none"));
    let mut c = my_client(&m);
    assert_eq!(c.query_first::<u64, _>("SELECT @@server_id").expect("read"), Some(MY_REPLICA));
    c.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE").expect("set");
    assert_eq!(c.query_first::<u64, _>("SELECT @@server_id").expect("read"), Some(MY_PRIMARY));
}

#[test]
fn the_read_your_writes_window_starts_when_a_long_write_commits() {
    let t = unique_name("ryw_");
    let mut admin = dbs().pg.primary_client();
    admin
        .batch_execute(&format!("CREATE TABLE {t}(id int primary key, a int); INSERT INTO {t} VALUES (1, 0)"))
        .expect("setup");
    dbs().pg.wait_replica_caught_up(Duration::from_secs(20));
    let r = Router::start(&pg_config("2s"));
    let mut c = r.pg("app");
    let started = Instant::now();
    c.batch_execute(&format!("UPDATE {t} SET a = 1 WHERE id = 1 AND pg_sleep(3) IS NOT NULL")).expect("slow write");
    assert!(started.elapsed() >= Duration::from_secs(3));
    // 3 s after routing, under a second after the commit: still the primary.
    assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "f", "window counts from the commit");
    std::thread::sleep(Duration::from_millis(2_500));
    assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "t", "and ends 2 s after it");

    let my = &dbs().my;
    let mut primary = my.primary_client();
    primary.query_drop(format!("CREATE TABLE {t}(id int primary key, a int)")).expect("setup");
    primary.query_drop(format!("INSERT INTO {t} VALUES (1, 0)")).expect("rows");
    my.wait_replica_caught_up(Duration::from_secs(20));
    let m = Router::start(&my_config("2s"));
    let mut c = my_client(&m);
    c.query_drop(format!("UPDATE {t} SET a = 1 WHERE id = 1 AND SLEEP(3) = 0")).expect("slow write");
    assert_eq!(c.query_first::<u64, _>("SELECT @@server_id").expect("read"), Some(MY_PRIMARY));
    std::thread::sleep(Duration::from_millis(2_500));
    assert_eq!(c.query_first::<u64, _>("SELECT @@server_id").expect("read"), Some(MY_REPLICA));
}
