//! Issue #40, binary upgrade of encrypted connections: a client's TLS session, and a server
//! connection's that a session owns, go on in the new process. The clients' own TLS layers
//! (OpenSSL under psycopg and Python's ssl under PyMySQL) verify every record after the
//! hand-over, in TLS 1.3 and TLS 1.2, with messages of many records each way; the server's
//! `pg_stat_ssl` shows the same encrypted server session before and after.

// Blocking test code driving child processes, not data-plane code.
#![allow(clippy::disallowed_methods)]

use crate::backend_tls::{pool, where_and_ssl};
use crate::client_tls::{certs, pg_router_config, tls_keys, with_listener_keys};
use crate::mysql_session::{my_config, my_pool};
use crate::router::pg_config;
use crate::scripts::{python_command, Staged};
use crate::support::dbs;
use crate::upgrade::{app_client, Upgrade};

/// A client of `kind` (see `client_tls.py moving`) connected to the old process over TLS goes
/// on, after the hand-over, on the same connection with the new one: its setting is there,
/// and 300 kB sent and echoed back decrypt on both sides.
fn tls_client_moves(kind: &str, config: &str, version: &str, setting: &str) {
    let up = Upgrade::new(config);
    let mut old = up.start("old", false);
    let ca = certs().path("ca.crt");
    let client =
        Staged::start(&mut python_command("client_tls.py", &["moving", &up.port.to_string(), &ca, kind]), kind);
    let (new, took) = up.hand_over(&mut old, "new");
    eprintln!("[upgrade] one idle {kind} client over TLS: handed over in {took:?}");
    let expected = format!("moving {kind} version={version} setting={setting} sent=300000 echoed=True");
    assert_eq!(client.finish(), [expected], "old:\n{}\nnew:\n{}", old.log(), new.log());
}

#[test]
fn a_postgresql_client_keeps_its_tls_13_session_through_the_hand_over() {
    let config = pg_router_config(&tls_keys("require", "server", ""));
    tls_client_moves("psycopg", &config, "TLSv1.3", "moving");
}

#[test]
fn a_postgresql_client_keeps_its_tls_12_session_through_the_hand_over() {
    let config = pg_router_config(&tls_keys("require", "server", ""));
    tls_client_moves("psycopg12", &config, "TLSv1.2", "moving");
}

#[test]
fn a_mysql_client_keeps_its_tls_session_through_the_hand_over() {
    let keys = tls_keys("require", "server", "");
    let config = with_listener_keys(&my_config(&[0, 1], &my_pool("app", "transaction", 4), "app"), &keys);
    tls_client_moves("pymysql", &config, "TLSv1.3", "ANSI_QUOTES");
}

/// A session-mode client's server connection is encrypted (the harness's TLS-only server): it
/// moves with the session, and the server shows the same backend, still encrypted, serving
/// messages of many records each way.
#[test]
fn a_session_owned_encrypted_server_connection_moves_with_its_session() {
    let port = dbs().pg_tls().port;
    let up =
        Upgrade::new(&pg_config(&[0, 1], &pool("tls_moves", port, "app", "app", "tls = \"require\""), "tls_moves"));
    let mut old = up.start("old", false);
    let mut c = app_client(up.port, "tls_moves");
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true));
    let pid: i32 = c.query_one("SELECT pg_backend_pid()", &[]).expect("pid").get(0);
    let (new, took) = up.hand_over(&mut old, "new");
    eprintln!("[upgrade] a session-mode client with an encrypted server connection: handed over in {took:?}");
    let big = "y".repeat(1 << 20);
    let row = c
        .query_one("SELECT pg_backend_pid(), length($1::text), repeat('x', 2 << 20)", &[&big])
        .unwrap_or_else(|e| panic!("the moved server connection: {e}\nold:\n{}\nnew:\n{}", old.log(), new.log()));
    assert_eq!((row.get::<_, i32>(0), row.get::<_, i32>(1)), (pid, 1 << 20), "the same server session");
    assert_eq!(row.get::<_, String>(2).len(), 2 << 20);
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true), "still encrypted");
}

/// A client caught half way through sending a TLS record when the hand-over starts: the old
/// process reads the record to its end before the session moves (rustls keeps a record's start
/// to itself, so the session cannot move in the middle of one), and the new process answers the
/// statement it carried. The relay in `client_tls.py split` holds the record's rest until the
/// hand-over has begun.
#[test]
fn a_tls_record_begun_before_the_hand_over_is_read_to_its_end_first() {
    let up = Upgrade::new(&pg_router_config(&tls_keys("require", "server", "")));
    let mut old = up.start("old", false);
    let ca = certs().path("ca.crt");
    let client = Staged::start(&mut python_command("client_tls.py", &["split", &up.port.to_string(), &ca]), "split");
    let handing = std::thread::spawn(move || {
        let (new, took) = up.hand_over(&mut old, "new");
        (new, old, took)
    });
    // The old process waits up to a second for the rest; send it while it waits.
    std::thread::sleep(std::time::Duration::from_millis(400));
    let answer = client.finish();
    let (new, old, took) = handing.join().expect("the hand-over");
    eprintln!("[upgrade] a TLS client half way through a record: handed over in {took:?}");
    assert_eq!(answer, ["split answer=(42, 'split')"], "old:\n{}\nnew:\n{}", old.log(), new.log());
}
