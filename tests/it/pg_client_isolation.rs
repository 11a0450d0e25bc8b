//! Issue #18, isolation between clients: a role, a session authorization or a temporary object
//! one client creates never reaches the next client of the same server connection. Every
//! router here has a pool of ONE server connection, so consecutive clients share it; each check
//! proves the sharing by the backend pid both clients ran on. Clients: psql (libpq, simple
//! protocol), psycopg 3 (extended protocol, unnamed and named statements) and the Rust
//! `postgres` crate.

use std::process::Command;
use std::sync::OnceLock;

use crate::pg_util::{router, superuser};
use crate::router::{pg_config, Router};
use crate::support::dbs;

/// A role the pool user `app` may switch to (NOLOGIN, not a superuser).
const OTHER: &str = "qp_iso_other";

/// Creates `OTHER` once for the whole binary, and a function that switches role inside itself.
fn roles() {
    static DONE: OnceLock<()> = OnceLock::new();
    DONE.get_or_init(|| {
        let mut su = superuser();
        su.batch_execute(&format!(
            "DO $$BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = '{OTHER}') THEN \
             CREATE ROLE {OTHER} NOLOGIN; END IF; END$$; GRANT {OTHER} TO app; \
             CREATE OR REPLACE FUNCTION public.qp_iso_become_app() RETURNS text LANGUAGE plpgsql AS \
             $$BEGIN EXECUTE 'SET ROLE app'; RETURN current_user; END$$; \
             GRANT EXECUTE ON FUNCTION public.qp_iso_become_app() TO PUBLIC"
        ))
        .expect("create role");
    });
}

/// Runs psql (libpq) as `user`/`password` through `r` with each of `commands` as a `-c`;
/// returns its unaligned, tuples-only output lines, panicking with stderr on failure.
fn psql(r: &Router, user: &str, password: &str, commands: &[&str]) -> Vec<String> {
    let mut cmd = Command::new("psql");
    cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", user, "-d", "main"])
        .args(["-p", &r.port().to_string()])
        .env("PGPASSWORD", password)
        .env("PGCONNECT_TIMEOUT", "20");
    for c in commands {
        cmd.args(["-c", c]);
    }
    let out = cmd.output().expect("run psql");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "psql {commands:?} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

/// A router whose one-connection pool logs in as the server's superuser (trusted without a
/// password; `unused` is what clients give the router).
fn superuser_router(mode: &str) -> Router {
    let pg = &dbs().pg;
    let pool = format!(
        "[pools.main]\nmode = \"{mode}\"\nusername = \"{u}\"\npassword = \"unused\"\ndatabase = \"{d}\"\n\
         max_connections = 1\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {p} }}]\n",
        u = pg.superuser,
        d = pg.database,
        p = pg.primary_port,
    );
    Router::start(&pg_config(&[0], &pool, "main"))
}

const ROLE_CHANGES: [&str; 8] = [
    "SET SESSION ROLE qp_iso_other",
    "SET ROLE qp_iso_other",
    "set role to 'qp_iso_other'",
    "SET role = qp_iso_other",
    "SET \"role\" TO qp_iso_other",
    "SET SESSION role TO qp_iso_other",
    "SELECT 1; SET ROLE qp_iso_other",
    "SELECT set_config('role', 'qp_iso_other', false)",
];

#[test]
fn psql_role_changes_never_reach_the_next_client() {
    roles();
    for mode in ["transaction", "session"] {
        let r = router(mode, 1, "");
        for change in ROLE_CHANGES {
            let a = psql(&r, "app", "app", &[change, "SELECT current_user, pg_backend_pid()"]);
            let (a_user, a_pid) = a.last().and_then(|l| l.split_once('|')).expect("a's row");
            assert_eq!(a_user, OTHER, "{mode}: {change} applies for its own client");
            let b = psql(&r, "app", "app", &["SELECT current_user, session_user, pg_backend_pid()"]);
            assert_eq!(b, vec![format!("app|app|{a_pid}")], "{mode}: after {change:?} the next client is itself");
        }
        // Going back to one's own role needs no pin, and changes nothing for the next client.
        let a =
            psql(&r, "app", "app", &["SET ROLE qp_iso_other", "RESET ROLE", "SET ROLE NONE", "SELECT current_user"]);
        assert_eq!(a, vec!["app"]);
    }
}

#[test]
fn postgres_crate_role_change_over_the_extended_protocol_never_reaches_the_next_client() {
    roles();
    for mode in ["transaction", "session"] {
        let r = router(mode, 1, "");
        let mut a = r.pg("main");
        a.execute("SET SESSION ROLE qp_iso_other", &[]).expect("set role (extended protocol)");
        let row = a.query_one("SELECT current_user::text, pg_backend_pid()", &[]).expect("a");
        assert_eq!(row.get::<_, String>(0), OTHER);
        let pid: i32 = row.get(1);
        drop(a);
        let mut b = r.pg("main");
        let row = b.query_one("SELECT current_user::text, pg_backend_pid()", &[]).expect("b");
        assert_eq!((row.get::<_, String>(0), row.get::<_, i32>(1)), ("app".to_owned(), pid), "{mode}");
    }
}

#[test]
fn psql_session_authorization_never_reaches_the_next_client() {
    roles();
    let su = dbs().pg.superuser.clone();
    for mode in ["transaction", "session"] {
        let r = superuser_router(mode);
        for change in [
            "SET SESSION AUTHORIZATION app",
            "set session authorization 'app'",
            "SET session_authorization = 'app'",
            "SELECT set_config('session_authorization', 'app', false)",
            // Changed inside a function, invisible in the statement: the server's report of
            // is_superuser gives it away.
            "SELECT public.qp_iso_become_app()",
        ] {
            let a = psql(&r, &su, "unused", &[change, "SELECT current_user, pg_backend_pid()"]);
            let (a_user, a_pid) = a.last().and_then(|l| l.split_once('|')).expect("a's row");
            assert_eq!(a_user, "app", "{mode}: {change} applies for its own client");
            let b = psql(&r, &su, "unused", &["SELECT current_user, session_user, pg_backend_pid()"]);
            assert_eq!(b, vec![format!("{su}|{su}|{a_pid}")], "{mode}: after {change:?} the next client is itself");
        }
    }
}

const TEMP_OBJECTS: [&str; 11] = [
    "SELECT 'A''s secret'::text AS secret INTO TEMP t_secret",
    "SELECT 'A''s secret'::text AS secret INTO TEMPORARY TABLE t_secret",
    "select 1 as x into local temp t_secret",
    "CREATE TEMP TABLE t_secret AS SELECT 'A''s secret'::text AS secret",
    "CREATE TABLE pg_temp.t_secret(secret text)",
    "CREATE VIEW pg_temp.v_secret AS SELECT 'A''s secret'::text AS secret",
    "CREATE FUNCTION pg_temp.f_secret() RETURNS text LANGUAGE sql AS 'SELECT 1::text'",
    "CREATE TEMP SEQUENCE s_secret",
    "CREATE OR REPLACE TEMP VIEW v_secret AS SELECT 1 AS x",
    "SELECT 1; SELECT 2 AS x INTO TEMP t_secret; SELECT 3",
    "SET search_path = pg_temp, public; CREATE TABLE t_secret(x int)",
];

/// What of its own temporary schema a client sees: relations and functions.
const MY_TEMP: &str = "SELECT (SELECT count(*) FROM pg_class WHERE relnamespace = pg_my_temp_schema()) \
                       + (SELECT count(*) FROM pg_proc WHERE pronamespace = pg_my_temp_schema()), pg_backend_pid()";

#[test]
fn psql_temporary_objects_never_reach_the_next_client() {
    for mode in ["transaction", "session"] {
        let r = router(mode, 1, "");
        for create in TEMP_OBJECTS {
            let a = psql(&r, "app", "app", &[create, MY_TEMP]);
            let (a_count, a_pid) = a.last().and_then(|l| l.split_once('|')).expect("a's row");
            assert_ne!(a_count, "0", "{mode}: {create} created a temporary object");
            let b = psql(&r, "app", "app", &[MY_TEMP]);
            assert_eq!(b, vec![format!("0|{a_pid}")], "{mode}: after {create:?} the next client sees none of it");
        }
    }
}

/// psycopg 3 creates temporary tables over the extended protocol (`binary=True`: an unnamed
/// statement; `prepare=True`: a named one), then a second client looks for them.
const PSYCOPG_TEMP: &str = r#"
import sys, psycopg
dsn = sys.argv[1]
my_temp = "select count(*) from pg_class where relnamespace = pg_my_temp_schema()"
for how, sql in [("unnamed", "SELECT 'A''s secret'::text AS secret INTO TEMP t_secret"),
                 ("named", "CREATE TEMP TABLE t_secret AS SELECT 'A''s secret'::text AS secret")]:
    a = psycopg.connect(dsn, autocommit=True)
    if how == "unnamed":
        a.execute(sql, binary=True)
    else:
        a.execute(sql, prepare=True)
    pid = a.execute("select pg_backend_pid()").fetchone()[0]
    mine = a.execute(my_temp).fetchone()[0]
    a.close()
    b = psycopg.connect(dsn, autocommit=True)
    theirs = b.execute(my_temp).fetchone()[0]
    same = b.execute("select pg_backend_pid()").fetchone()[0] == pid
    b.close()
    print(how, mine, theirs, same)
"#;

#[test]
fn psycopg_temporary_tables_over_the_extended_protocol_never_reach_the_next_client() {
    for mode in ["transaction", "session"] {
        let r = router(mode, 1, "");
        let dsn = format!("host=127.0.0.1 port={} user=app password=app dbname=main", r.port());
        let out = Command::new("/usr/bin/python3").args(["-c", PSYCOPG_TEMP, &dsn]).output().expect("python3");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(stdout.lines().collect::<Vec<_>>(), ["unnamed 1 0 True", "named 1 0 True"], "{mode}");
    }
}

/// Terminates, from outside, the server process running a statement that contains `marker`.
fn terminate_running(marker: String) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut su = superuser();
        let q = "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%' \
                 AND pid <> pg_backend_pid()";
        let mut pid = 0;
        crate::support::eventually(std::time::Duration::from_secs(10), "the statement to start", || {
            pid = su.query_opt(q, &[&marker]).expect("activity").map_or(0, |r| r.get(0));
            pid != 0
        });
        su.execute("SELECT pg_terminate_backend($1)", &[&pid]).expect("terminate");
    })
}

#[test]
fn postgres_crate_a_client_whose_role_died_with_its_backend_is_closed_not_moved() {
    roles();
    for mode in ["transaction", "session"] {
        let r = router(mode, 2, "");
        let mut c = r.pg("main");
        c.batch_execute("SET ROLE qp_iso_other").expect("set role");
        let marker = crate::support::unique_name("role_dies");
        let killer = terminate_running(marker.clone());
        let e = c.batch_execute(&format!("SELECT pg_sleep(30) /* {marker} */")).expect_err("backend terminated");
        killer.join().expect("killer");
        // The server's own FATAL 57P01 (#36), or the close right behind it when the driver sees
        // that first.
        assert!(e.code().is_none_or(|c| c.code() == "57P01"), "{mode}: {e}");
        // Going on would run the client's next statements as `app`, not as the role it chose.
        let next = c.simple_query("SELECT current_user");
        assert!(next.is_err(), "{mode}: the session ended with its server-side state: {next:?}");
    }
}
