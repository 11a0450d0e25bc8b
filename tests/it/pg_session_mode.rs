//! Issue #18, session mode speaks for the server it pins: the BackendKeyData a client gets
//! carries its server connection's real process id, so `pg_backend_pid()`, NOTIFY's sender pid
//! and `pg_terminate_backend` agree with it as on a direct connection, while the cancel key
//! stays the router's (cancels still reach the statement, from any core). In every mode a
//! listener tells its own notifications from others' by the pid it was given. Clients:
//! psycopg 3 and the Rust `postgres` crate.

use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use crate::pg_util::{router, sqlstate, superuser};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, eventually, unique_name};

/// psycopg 3: the pid libpq got in BackendKeyData is the server's, and a NOTIFY the client
/// sends to itself names that pid (libpq applications tell their own notifications apart so).
const PSYCOPG_PID: &str = r#"
import sys, psycopg
c = psycopg.connect(sys.argv[1], autocommit=True)
server = c.execute("select pg_backend_pid()").fetchone()[0]
got = []
c.add_notify_handler(got.append)
c.execute("listen qp_iso_chan")
c.execute("notify qp_iso_chan, 'hi'")
c.execute("select 1")
n = got[0]
print(c.info.backend_pid == server, n.pid == server, n.payload)
"#;

#[test]
fn psycopg_session_mode_backend_key_data_names_the_server_process() {
    let r = router("session", 2, "");
    let dsn = format!("host=127.0.0.1 port={} user=app password=app dbname=main", r.port());
    let out = Command::new("/usr/bin/python3").args(["-c", PSYCOPG_PID, &dsn]).output().expect("python3");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.trim(), "True True hi");
}

/// psycopg 3: a NOTIFY the listener sent itself carries the pid libpq got at login; one from
/// another client does not.
const PSYCOPG_OWN_NOTIFY: &str = r#"
import sys, psycopg
c = psycopg.connect(sys.argv[1], autocommit=True)
got = []
c.add_notify_handler(got.append)
c.execute("listen qp_iso_own")
c.execute("notify qp_iso_own, 'mine'")
o = psycopg.connect(sys.argv[1], autocommit=True)
o.execute("notify qp_iso_own, 'theirs'")
c.execute("select 1")
print([(n.payload, n.pid == c.info.backend_pid) for n in got])
"#;

#[test]
fn psycopg_a_listener_knows_its_own_notifications_in_every_mode() {
    for mode in ["session", "transaction"] {
        let r = router(mode, 2, "");
        let dsn = format!("host=127.0.0.1 port={} user=app password=app dbname=main", r.port());
        let out = Command::new("/usr/bin/python3").args(["-c", PSYCOPG_OWN_NOTIFY, &dsn]).output().expect("python3");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(stdout.trim(), "[('mine', True), ('theirs', False)]", "{mode}");
    }
}

/// The process the client's statements run in, as the server says.
fn server_pid(c: &mut postgres::Client) -> i32 {
    c.query_one("SELECT pg_backend_pid()", &[]).expect("pid").get(0)
}

#[test]
fn postgres_crate_session_mode_cancel_and_terminate_work_with_the_server_pid() {
    let pools = pg_pool("main", dbs().pg.primary_port, "session", 4);
    // Two cores: a cancel connection may land on the core that does not own the session.
    let r = Router::start(&pg_config(&[0, 1], &pools, "main"));
    for _ in 0..4 {
        let mut c = r.pg("main");
        let pid = server_pid(&mut c);
        let token = c.cancel_token();
        let marker = unique_name("cancel_me");
        let m = marker.clone();
        let canceller = thread::spawn(move || {
            let mut su = superuser();
            eventually(Duration::from_secs(10), "the statement to start", || {
                let q = "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%'";
                su.query_one(q, &[&m]).expect("activity").get::<_, i64>(0) > 0
            });
            token.cancel_query(postgres::NoTls).expect("send cancel");
        });
        let t0 = Instant::now();
        let e = c.batch_execute(&format!("SELECT pg_sleep(30) /* {marker} */")).expect_err("canceled");
        assert_eq!(sqlstate(&e), "57014", "{e}");
        assert!(t0.elapsed() < Duration::from_secs(10));
        canceller.join().expect("canceller");
        assert_eq!(server_pid(&mut c), pid, "session mode keeps its connection");
    }
    // The pid is the server's, so the server's own tools find the client's connection.
    let mut victim = r.pg("main");
    // A simple query: no prepared statement whose Close the client would send later.
    let pid: i32 = match victim.simple_query("SELECT pg_backend_pid()").expect("pid").get(1) {
        Some(postgres::SimpleQueryMessage::Row(r)) => r.get(0).and_then(|v| v.parse().ok()).expect("pid value"),
        other => panic!("unexpected {other:?}"),
    };
    let done: bool = superuser().query_one("SELECT pg_terminate_backend($1)", &[&pid]).expect("terminate").get(0);
    assert!(done);
    eventually(Duration::from_secs(15), "the victim to be closed", || {
        victim.is_closed() || victim.simple_query("SELECT 1").is_err()
    });
}

#[test]
fn session_mode_logs_in_only_with_a_server_connection() {
    // The connection is the client's from login on: with the one connection taken, the next
    // client waits for it at login (and gets in once the first leaves), as the server itself
    // would turn it away only when full.
    let pools = format!(
        "{}acquire_timeout = \"1s\"\n",
        pg_pool("main", dbs().pg.primary_port, "session", 1).replace("acquire_timeout = \"20s\"\n", "")
    );
    let r = Router::start(&pg_config(&[0], &pools, "main"));
    let mut first = r.pg("main");
    let pid = server_pid(&mut first);
    let mut cfg = postgres::Config::new();
    cfg.host("127.0.0.1").port(r.port()).user("app").password("app").dbname("main");
    let Err(e) = cfg.connect(postgres::NoTls) else { panic!("no connection left for a second client") };
    assert_eq!(sqlstate(&e), "53300", "{e}");
    drop(first);
    let mut second = r.pg("main");
    assert_eq!(server_pid(&mut second), pid);
}
