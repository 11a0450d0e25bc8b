//! Issue #19, session state against the harness's real servers, in transaction, session and
//! statement pooling: the lexer follows the session's string mode (PostgreSQL
//! `standard_conforming_strings`, MariaDB `sql_mode`) however it was set — a SET, a startup
//! `options`, a role default, the server's own report after a function or a procedure set it —
//! serializable sessions read from the primary, and the read-your-writes window starts when a
//! long write commits. Clients: rust-postgres and the `mysql` crate; the MariaDB pools log in as
//! the user the replica lets write ([`crate::mysql_safety::replica_writer`]), so a misrouted
//! write would land there silently. Placement is proven by `pg_is_in_recovery()` /
//! `@@server_id` of the server that answered and by the rows each server holds.

use std::time::{Duration, Instant};

use mysql::prelude::Queryable;

use crate::mysql_safety::{assert_v_everywhere, client as my_client, split_config, table as my_table};
use crate::pg_util::first_value;
use crate::router::{pg_pool, Router};
use crate::support::{dbs, unique_name};

const MY_PRIMARY: u64 = 1;
const MY_REPLICA: u64 = 2;
const MODES: [&str; 3] = ["transaction", "session", "statement"];

/// PostgreSQL split config in pool `mode`; `ryw` is the read_your_writes value. The standby's
/// health probe gets a generous timeout: on a loaded machine three slow probes in a row would
/// mark it down and send reads to the primary, which is not what these tests are about.
fn pg_config(mode: &str, ryw: &str) -> String {
    let pg = &dbs().pg;
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n{}\n{}\
         [pools.replica.health]\ntimeout = \"30s\"\n\n\
         [routing]\nread_write_split = true\nread_pool = \"replica\"\nwrite_pool = \"primary\"\nread_your_writes = \"{ryw}\"\n",
        pg_pool("primary", pg.primary_port, mode, 4),
        pg_pool("replica", pg.replica_port, mode, 4),
    )
}

/// MariaDB split config in pool `mode` with read_your_writes `ryw`, as the replica writer.
fn my_config(mode: &str, ryw: &str) -> String {
    split_config(mode, "").replace("read_your_writes = \"none\"", &format!("read_your_writes = \"{ryw}\""))
}

/// A table `(id int primary key, a int)` holding (1, 0) on the primary and the standby.
fn pg_table(prefix: &str) -> String {
    let t = unique_name(prefix);
    dbs()
        .pg
        .primary_client()
        .batch_execute(&format!("CREATE TABLE {t}(id int primary key, a int); INSERT INTO {t} VALUES (1, 0)"))
        .expect("setup");
    dbs().pg.wait_replica_caught_up(Duration::from_secs(20));
    t
}

/// `a` of row 1 of `t` on the primary.
fn pg_a(t: &str) -> i32 {
    dbs().pg.primary_client().query_one(&format!("SELECT a FROM {t} WHERE id = 1"), &[]).expect("row").get(0)
}

#[test]
fn pg_standard_conforming_strings_off_sends_hidden_locks_and_writes_to_the_primary() {
    for mode in MODES {
        let t = pg_table("lexmode_");
        let r = Router::start(&pg_config(mode, "none"));
        let mut c = r.pg("app");
        c.batch_execute("SET standard_conforming_strings = off").expect("set");
        // Text without backslashes still reads from the standby in this mode.
        assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "t", "{mode}");
        // The server reads a string, then a locking read / a second statement that writes.
        let lock = format!(r"SELECT pg_is_in_recovery(), 'a\' , 1 FROM {t} FOR UPDATE -- '");
        assert_eq!(first_value(&mut c, &lock), "f", "{mode}: the hidden FOR UPDATE runs on the primary");
        let write = format!(r"SELECT pg_is_in_recovery(), 'x\' -- '; UPDATE {t} SET a = 1 WHERE id = 1");
        assert_eq!(first_value(&mut c, &write), "f", "{mode}: the hidden UPDATE runs on the primary");
        assert_eq!(pg_a(&t), 1, "{mode}: the write reached the primary");
        // Back in the default mode the same text is one harmless string again.
        c.batch_execute("SET standard_conforming_strings = on").expect("set");
        assert_eq!(first_value(&mut c, r"SELECT pg_is_in_recovery(), 'x\' -- '"), "t", "{mode}");
    }
}

/// A PostgreSQL client (`user`/`password`) of the router on `port`, with startup `options`.
fn pg_client_as(port: u16, user: &str, password: &str, options: Option<&str>) -> postgres::Client {
    let mut c = postgres::Config::new();
    c.host("127.0.0.1").port(port).user(user).password(password).dbname("app");
    if let Some(o) = options {
        c.options(o);
    }
    c.connect_timeout(Duration::from_secs(20));
    c.connect(postgres::NoTls).unwrap_or_else(|e| panic!("connect through router as {user}: {e:?}"))
}

/// The mode nobody typed a SET for (item 2 of #19's lexer line): a startup `options`, a role's
/// default (`ALTER ROLE ... SET`, which the server applies at login and reports), and a function
/// that calls `set_config` (the server's ParameterStatus is the only trace). In each the hidden
/// `FOR UPDATE` runs on the primary; and a SET rolled back with its transaction is believed
/// gone once the server reports the old value.
#[test]
fn pg_string_mode_from_options_role_defaults_and_server_reports() {
    let pg = &dbs().pg;
    let t = pg_table("lexsrc_");
    let (role, password) = (unique_name("qp_scs_off"), "scs-pass");
    let f = unique_name("qp_scs_fn");
    pg.superuser_client(pg.primary_port)
        .batch_execute(&format!(
            "CREATE ROLE {role} LOGIN PASSWORD '{password}'; ALTER ROLE {role} SET standard_conforming_strings = off; \
             GRANT ALL ON {t} TO {role}; \
             CREATE FUNCTION {f}() RETURNS text LANGUAGE sql AS \
             $$ SELECT set_config('standard_conforming_strings', 'off', false) $$; GRANT EXECUTE ON FUNCTION {f}() TO app"
        ))
        .expect("role and function");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    let lock = format!(r"SELECT pg_is_in_recovery(), 'a\' , 1 FROM {t} FOR UPDATE -- '");
    for mode in MODES {
        let r = Router::start(&pg_config(mode, "none"));
        let mut c = pg_client_as(r.port(), "app", "app", Some("-c standard_conforming_strings=off"));
        assert_eq!(first_value(&mut c, "SHOW standard_conforming_strings"), "off", "{mode}: options applied");
        assert_eq!(first_value(&mut c, &lock), "f", "{mode}: startup options: the FOR UPDATE is real");

        let as_role =
            pg_config(mode, "none").replace(&format!("username = \"{}\"", pg.user), &format!("username = \"{role}\""));
        let as_role =
            as_role.replace(&format!("password = \"{}\"", pg.password), &format!("password = \"{password}\""));
        let rr = Router::start(&as_role);
        let mut c = pg_client_as(rr.port(), &role, password, None);
        assert_eq!(first_value(&mut c, "SHOW standard_conforming_strings"), "off", "{mode}: the role's default");
        assert_eq!(first_value(&mut c, &lock), "f", "{mode}: role default: the FOR UPDATE is real");
        assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "t", "{mode}: plain reads still split");

        let mut c = r.pg("app");
        assert_eq!(first_value(&mut c, r"SELECT pg_is_in_recovery(), 'x\' -- '"), "t", "{mode}: default mode");
        if mode != "statement" {
            // Statement pooling runs each statement where it may: a rolled-back SET has no
            // connection of its own there, and a set_config by function pins nothing.
            // One statement per exchange: the server reports the value when it ends one that
            // changed it (within one batch that ends where it began, it reports nothing).
            for sql in ["BEGIN", "SET standard_conforming_strings = off", "ROLLBACK"] {
                c.batch_execute(sql).expect(sql);
            }
            assert_eq!(first_value(&mut c, r"SELECT pg_is_in_recovery(), 'x\' -- '"), "t", "{mode}: rolled back");
            assert_eq!(first_value(&mut c, &format!("SELECT {f}()")), "off", "{mode}: set by a function");
            assert_eq!(first_value(&mut c, &lock), "f", "{mode}: the server's report: the FOR UPDATE is real");
        }
    }
}

#[test]
fn mariadb_sql_mode_changes_what_reaches_the_replica() {
    for mode in MODES {
        let t = my_table();
        let r = Router::start(&my_config(mode, "none"));
        let mut c = my_client(&r);
        let server = |c: &mut mysql::Conn, sql: &str| -> u64 {
            let row: mysql::Row =
                c.query_first(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).unwrap_or_else(|| panic!("{sql}: no row"));
            row.get(0).unwrap_or_else(|| panic!("{sql}: no @@server_id"))
        };
        let lock = format!(r"SELECT @@server_id, 'a\' , 1 FROM {t} FOR UPDATE -- '");
        assert_eq!(server(&mut c, &lock), MY_REPLICA, "{mode}: default mode: one string, a plain read");
        c.query_drop("SET sql_mode = 'NO_BACKSLASH_ESCAPES'").expect("set");
        assert_eq!(server(&mut c, "SELECT @@server_id"), MY_REPLICA, "{mode}");
        assert_eq!(server(&mut c, &lock), MY_PRIMARY, "{mode}: NO_BACKSLASH_ESCAPES: the FOR UPDATE is real");
        c.query_drop("SET sql_mode = CONCAT(@@sql_mode, ',ANSI_QUOTES')").expect("set");
        assert_eq!(server(&mut c, &format!("SELECT @@server_id FROM {t} WHERE \"v\" = 10")), MY_PRIMARY, "{mode}");
        // A mode the router cannot know: nothing is read on the replica any more.
        c.query_drop("SET sql_mode = REPLACE(@@sql_mode, 'ANSI_QUOTES', '')").expect("set from an expression");
        assert_eq!(server(&mut c, "SELECT @@server_id"), MY_PRIMARY, "{mode}: unknown mode: primary");
        c.query_drop("SET sql_mode = 'STRICT_TRANS_TABLES'").expect("set literal");
        assert_eq!(server(&mut c, "SELECT @@server_id"), MY_REPLICA, "{mode}: known again");
        drop(c);
        assert_v_everywhere(&t, 10, mode);
    }
}

/// NO_BACKSLASH_ESCAPES switched on outside a plain SET: inside an executable comment (the
/// server runs it, and so the router reads it) and through `PREPARE` / `EXECUTE` (the router
/// does not read the prepared text, but `PREPARE` keeps the session on its connection, and the
/// server's status flag in each answer sets the mode the session is lexed in). The hidden
/// `FOR UPDATE` runs on the primary either way. A procedure's own `SET sql_mode` is undone by
/// the server when it returns.
#[test]
fn mariadb_no_backslash_escapes_set_out_of_sight_is_followed() {
    let my = &dbs().my;
    let p = unique_name("qp_nbe");
    let mut root = my.superuser_client(my.primary_port);
    root.query_drop(format!("CREATE PROCEDURE {}.{p}() SET sql_mode = 'NO_BACKSLASH_ESCAPES'", my.database))
        .expect("procedure");
    my.wait_replica_caught_up(Duration::from_secs(30));
    // Statement pooling: see `statement_pooling_does_not_hand_on_a_mode_set_in_an_executable_comment`.
    for mode in ["transaction", "session"] {
        let t = my_table();
        let r = Router::start(&my_config(mode, "none"));
        let lock = format!(r"SELECT @@server_id, 'a\' , 1 FROM {t} FOR UPDATE -- '");
        let ran_on = |c: &mut mysql::Conn, sql: &str| -> u64 {
            let row: mysql::Row = c.query_first(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).expect("row");
            row.get(0).expect("@@server_id")
        };
        let mut c = my_client(&r);
        assert_eq!(ran_on(&mut c, &lock), MY_REPLICA, "{mode}: default mode: one string, a plain read");
        for hidden in [
            &["/*!40101 SET sql_mode = 'NO_BACKSLASH_ESCAPES' */"][..],
            &["PREPARE qp_nbe FROM 'SET sql_mode = ''NO_BACKSLASH_ESCAPES'''", "EXECUTE qp_nbe"][..],
        ] {
            let mut c = my_client(&r);
            for stmt in hidden {
                c.query_drop(stmt).unwrap_or_else(|e| panic!("{mode}: {stmt}: {e}"));
            }
            assert_eq!(ran_on(&mut c, &lock), MY_PRIMARY, "{mode}: {hidden:?}: the FOR UPDATE is real");
        }
        // A procedure's own SET is undone when it returns.
        let mut c = my_client(&r);
        c.query_drop(format!("CALL {p}()")).expect("call");
        let after_call: String = c.query_first("SELECT @@sql_mode").expect("read").expect("row");
        assert!(!after_call.contains("NO_BACKSLASH_ESCAPES"), "{mode}: the server restored the caller's mode");
        drop(c);
        assert_v_everywhere(&t, 10, mode);
    }
}

/// Statement pooling, one primary connection: a mode one client set inside an executable
/// comment is not handed to the next client with the connection.
#[test]
fn statement_pooling_does_not_hand_on_a_mode_set_in_an_executable_comment() {
    let text = my_config("statement", "none").replace("max_connections = 4", "max_connections = 1");
    let r = Router::start(&text);
    let mut a = my_client(&r);
    a.query_drop("/*!40101 SET sql_mode = 'NO_BACKSLASH_ESCAPES' */").expect("hidden SET");
    let mut b = my_client(&r);
    let seen: String = b.query_first("/* querypilot: route=primary */ SELECT @@sql_mode").expect("read").expect("row");
    assert!(!seen.contains("NO_BACKSLASH_ESCAPES"), "the next client got the hidden mode: {seen}");
}

#[test]
fn serializable_sessions_read_from_the_primary() {
    for mode in MODES {
        let r = Router::start(&pg_config(mode, "none"));
        for set in [
            "SET default_transaction_isolation = 'serializable'",
            "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
        ] {
            let mut c = r.pg("app");
            assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "t", "{mode}");
            c.batch_execute(set).expect(set);
            // On the standby this would fail: "cannot use serializable mode in a hot standby".
            assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "f", "{mode}: {set}");
        }
        let mut c = r.pg("app");
        c.batch_execute("SET default_transaction_isolation = 'serializable'").expect("set");
        c.batch_execute("SET default_transaction_isolation = 'read committed'").expect("back");
        assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "t", "{mode}: read committed again: the standby");
        let m = Router::start(&my_config(mode, "none"));
        let mut c = my_client(&m);
        assert_eq!(c.query_first::<u64, _>("SELECT @@server_id").expect("read"), Some(MY_REPLICA), "{mode}");
        c.query_drop("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE").expect("set");
        assert_eq!(c.query_first::<u64, _>("SELECT @@server_id").expect("read"), Some(MY_PRIMARY), "{mode}");
    }
}

#[test]
fn the_read_your_writes_window_starts_when_a_long_write_commits() {
    for mode in MODES {
        let t = pg_table("ryw_");
        let r = Router::start(&pg_config(mode, "2s"));
        let mut c = r.pg("app");
        let started = Instant::now();
        c.batch_execute(&format!("UPDATE {t} SET a = 1 WHERE id = 1 AND pg_sleep(3) IS NOT NULL")).expect("slow write");
        assert!(started.elapsed() >= Duration::from_secs(3));
        // 3 s after routing, under a second after the commit: still the primary.
        assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "f", "{mode}: window counts from the commit");
        std::thread::sleep(Duration::from_millis(2_500));
        assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery()"), "t", "{mode}: and ends 2 s after it");
        assert_eq!(pg_a(&t), 1, "{mode}: the write is on the primary");

        let t = my_table();
        let m = Router::start(&my_config(mode, "2s"));
        let mut c = my_client(&m);
        c.query_drop(format!("UPDATE {t} SET v = 11 WHERE id = 1 AND SLEEP(3) = 0")).expect("slow write");
        assert_eq!(c.query_first::<u64, _>("SELECT @@server_id").expect("read"), Some(MY_PRIMARY), "{mode}");
        std::thread::sleep(Duration::from_millis(2_500));
        assert_eq!(c.query_first::<u64, _>("SELECT @@server_id").expect("read"), Some(MY_REPLICA), "{mode}");
        drop(c);
        assert_v_everywhere(&t, 11, mode);
    }
}
