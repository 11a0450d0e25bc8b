//! Issue #3: cancel requests through the router reach the running statement (also when the
//! cancel connection lands on another core), a stale cancel never hits another client's
//! statement on the same backend connection, and `query_timeout` cancels long statements.

use std::thread;
use std::time::{Duration, Instant};

use crate::pg_util::{router, sqlstate, superuser};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, eventually, unique_name};

/// Blocks until a statement containing `marker` is running on the primary.
fn wait_running(marker: &str) {
    let mut su = superuser();
    eventually(Duration::from_secs(10), "the statement to start", || {
        let n: i64 = su
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%' \
                 AND pid <> pg_backend_pid()",
                &[&marker],
            )
            .expect("pg_stat_activity")
            .get(0);
        n > 0
    });
}

/// Sends `token`'s cancel from another thread once a statement containing `marker` runs.
fn cancel_when_running(token: postgres::CancelToken, marker: &str) -> thread::JoinHandle<()> {
    let marker = marker.to_owned();
    thread::spawn(move || {
        wait_running(&marker);
        token.cancel_query(postgres::NoTls).expect("send cancel");
    })
}

/// Runs `SELECT pg_sleep(30)` on `client`, cancels it through the router and checks that it
/// ends with 57014 quickly and the client stays usable.
fn cancel_round(client: &mut postgres::Client) {
    let marker = unique_name("cancel_me");
    let canceller = cancel_when_running(client.cancel_token(), &marker);
    let t0 = Instant::now();
    let e = client.batch_execute(&format!("SELECT pg_sleep(30) /* {marker} */")).expect_err("canceled");
    assert_eq!(sqlstate(&e), "57014", "{e}");
    assert!(t0.elapsed() < Duration::from_secs(10), "cancel took {:?}", t0.elapsed());
    canceller.join().expect("canceller");
    assert_eq!(client.query_one("SELECT 5::int", &[]).expect("usable after cancel").get::<_, i32>(0), 5);
}

#[test]
fn cancel_ends_a_running_statement_in_every_mode() {
    for mode in ["session", "transaction", "statement"] {
        let r = router(mode, 2, "");
        let mut c = r.pg("main");
        cancel_round(&mut c);
    }
}

#[test]
fn cancel_accepted_by_another_core_reaches_the_owning_core() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 4);
    let r = Router::start(&pg_config(&[0, 1], &pools, "main"));
    // The kernel spreads connections over both cores by source port: with several clients
    // and their cancel connections both the local and the forwarded path are taken.
    for _ in 0..6 {
        let mut c = r.pg("main");
        cancel_round(&mut c);
    }
}

#[test]
fn a_stale_cancel_does_not_hit_the_next_client_on_the_same_connection() {
    let r = router("transaction", 1, "");
    let mut a = r.pg("main");
    let pid_a: i32 = a.query_one("SELECT pg_backend_pid()", &[]).expect("a runs").get(0);
    let stale = a.cancel_token();
    let mut b = r.pg("main");
    let marker = unique_name("not_me");
    let m = marker.clone();
    let canceller = thread::spawn(move || {
        wait_running(&m);
        // `a` runs nothing now: its key must not reach the statement `b` runs on the
        // connection `a` used before.
        for _ in 0..3 {
            stale.cancel_query(postgres::NoTls).expect("send stale cancel");
        }
    });
    let row = b
        .query_one(&format!("SELECT pg_backend_pid(), pg_sleep(1.5)::text /* {marker} */"), &[])
        .expect("b's statement is not canceled");
    canceller.join().expect("canceller");
    assert_eq!(row.get::<_, i32>(0), pid_a, "pool of one: b ran on a's former connection");
}

#[test]
fn query_timeout_cancels_and_names_itself() {
    let r = router("transaction", 2, "query_timeout = \"400ms\"");
    let mut c = r.pg("main");
    for extended in [false, true] {
        let t0 = Instant::now();
        let e = if extended {
            c.query("SELECT pg_sleep(20)", &[]).map(|_| ()).expect_err("timed out")
        } else {
            c.batch_execute("SELECT pg_sleep(20)").expect_err("timed out")
        };
        assert_eq!(sqlstate(&e), "57014", "{e}");
        let msg = e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default();
        assert!(msg.contains("query_timeout"), "message names query_timeout: {msg}");
        assert!(t0.elapsed() < Duration::from_secs(5), "timed out after {:?}", t0.elapsed());
        assert!(t0.elapsed() >= Duration::from_millis(400), "not before the timeout: {:?}", t0.elapsed());
    }
    // Shorter statements and the connection itself are unaffected.
    c.batch_execute("SELECT pg_sleep(0.1)").expect("short statement");
    assert_eq!(c.query_one("SELECT 3::int", &[]).expect("after timeouts").get::<_, i32>(0), 3);
}

/// asyncpg (`tests/connectors/asyncpg_late_cancel.py`, the shape of the shared repro
/// `r_late_cancel.py`) with a 20 ms client-side timeout, on two cores so that some cancel
/// connections land on the other core: every timed-out call raises TimeoutError, and no cancel
/// ever reaches the statement after the one it was sent for (#18), in session and transaction
/// mode.
#[test]
fn asyncpg_timeouts_cancel_only_their_own_statement() {
    for mode in ["session", "transaction"] {
        let pools = pg_pool("main", dbs().pg.primary_port, mode, 2);
        let r = Router::start(&pg_config(&[0, 1], &pools, "main"));
        let out = std::process::Command::new("/usr/bin/python3")
            .arg(std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/connectors/asyncpg_late_cancel.py"))
            .args([&r.port().to_string(), "main", "40"])
            .output()
            .unwrap_or_else(|e| panic!("run asyncpg (python3-asyncpg, installed by .ci/deps.sh): {e}"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{mode}: {stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(stdout.lines().last(), Some("anomalies: 0"), "{mode}:\n{stdout}");
    }
}

/// A raw CancelRequest whose client closes its socket right after sending it is still delivered
/// (#18), in session and transaction mode.
#[test]
fn a_cancel_whose_client_hangs_up_at_once_is_still_delivered() {
    use crate::pg_raw::{md5_router, query, tags, Raw};
    use std::io::Write;
    for mode in ["session", "transaction"] {
        let r = md5_router(mode, 2);
        let (mut c, pid, secret) = Raw::login_keyed(r.port(), "main", "app").unwrap_or_else(|e| panic!("login: {e:?}"));
        let marker = unique_name("hang_up");
        c.send(&query(&format!("SELECT pg_sleep(30) /* {marker} */")));
        wait_running(&marker);
        let mut cancel = 16u32.to_be_bytes().to_vec();
        cancel.extend_from_slice(&80877102u32.to_be_bytes());
        cancel.extend_from_slice(&pid.to_be_bytes());
        cancel.extend_from_slice(&secret.to_be_bytes());
        let mut s = std::net::TcpStream::connect(("127.0.0.1", r.port())).expect("connect");
        s.write_all(&cancel).expect("send cancel");
        drop(s); // hang up without waiting for the router to close
        let got = c.until_ready();
        // The row description may come first; the statement then ends with the cancel's error.
        assert!(tags(&got).ends_with("EZ"), "{mode}: {got:?}");
        assert_eq!(crate::pg_raw::code(&got[got.len() - 2].1), "57014", "{mode}");
    }
}

/// A relay to the server on `upstream` that passes connections through but delivers each
/// CancelRequest twice, the second time `late` after the first, and closes the cancel connection
/// only then: what the postmaster does on a busy host (it signals the backend's process, then its
/// process group, and the second signal can come well after the first).
fn twice_cancelling_relay(upstream: u16, late: Duration) -> u16 {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind relay");
    let port = listener.local_addr().expect("relay address").port();
    thread::spawn(move || {
        for client in listener.incoming().flatten() {
            thread::spawn(move || relay_twice(client, upstream, late));
        }
    });
    port
}

fn relay_twice(mut client: std::net::TcpStream, upstream: u16, late: Duration) {
    use std::io::{Read, Write};
    const CANCEL_REQUEST: [u8; 8] = [0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e];
    let connect = || std::net::TcpStream::connect(("127.0.0.1", upstream)).expect("connect upstream");
    let mut head = [0u8; 8];
    if client.read_exact(&mut head).is_err() {
        return;
    }
    if head == CANCEL_REQUEST {
        let mut packet = head.to_vec();
        packet.resize(16, 0);
        if client.read_exact(&mut packet[8..]).is_err() {
            return;
        }
        for delay in [Duration::ZERO, late] {
            thread::sleep(delay);
            let mut server = connect();
            server.write_all(&packet).expect("forward cancel");
            let _ = server.read_to_end(&mut Vec::new()); // the server closes once it signalled
        }
        return; // closing the router's cancel connection only now
    }
    let mut server = connect();
    server.write_all(&head).expect("forward startup");
    let (mut from_server, mut to_client) = (server.try_clone().expect("clone"), client.try_clone().expect("clone"));
    thread::spawn(move || {
        let _ = std::io::copy(&mut from_server, &mut to_client);
        let _ = to_client.shutdown(std::net::Shutdown::Write);
    });
    let _ = std::io::copy(&mut client, &mut server);
    let _ = server.shutdown(std::net::Shutdown::Write);
}

/// #18 whatever the client library: tokio-postgres sends its next statement as soon as the
/// cancelled one ended, without waiting for its cancel connection to close as libpq and asyncpg
/// do, so a second signal of the same cancel could end that statement. The router holds a
/// statement for a connection while a cancel is still on its way to it. The relay puts 600 ms
/// between the two deliveries; the next statement runs 1.5 s, so without the hold it would be
/// cancelled. Transaction pooling outside a transaction already waited in the release between the
/// two statements; a held connection (session pooling, an open transaction) did not.
#[test]
fn a_late_second_delivery_of_a_cancel_does_not_reach_the_next_statement() {
    let relay = twice_cancelling_relay(dbs().pg.primary_port, Duration::from_millis(600));
    // (pool mode, next statement in the extended protocol, inside a transaction)
    for (mode, extended, in_tx) in [("session", false, false), ("session", true, false), ("transaction", false, true)] {
        let case = format!("{mode}, extended {extended}, in a transaction {in_tx}");
        let r = Router::start(&pg_config(&[0], &pg_pool("main", relay, mode, 2), "main"));
        let mut c = r.pg("main");
        if in_tx {
            c.batch_execute("BEGIN; SAVEPOINT before_cancel").expect("begin");
        }
        let marker = unique_name("twice");
        let canceller = cancel_when_running(c.cancel_token(), &marker);
        let e = c.batch_execute(&format!("SELECT pg_sleep(30) /* {marker} */")).expect_err("canceled");
        assert_eq!(sqlstate(&e), "57014", "{case}: {e}");
        canceller.join().expect("canceller");
        if in_tx {
            c.batch_execute("ROLLBACK TO SAVEPOINT before_cancel").expect("rollback to savepoint");
        }
        let next = if extended {
            c.query("SELECT pg_sleep(1.5)", &[]).map(drop)
        } else {
            c.batch_execute("SELECT pg_sleep(1.5)")
        };
        next.unwrap_or_else(|e| panic!("{case}: the next statement was hit: {e}"));
    }
}
