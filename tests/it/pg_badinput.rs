//! Issue #3: hostile or broken clients — garbage bytes, a 2 GiB length prefix, a truncated
//! startup packet, oversized messages after login, wrong passwords — each
//! get the documented error (or a quiet close), and a healthy client of the same core keeps
//! querying throughout.

use std::net::Shutdown;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;

use crate::pg_raw::{code, md5_router, msg, query, startup, tags, Raw};
use crate::pg_util::{connect, sqlstate};

/// Reads messages until the router closes; returns them.
fn drain(c: &mut Raw) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(m) = c.recv() {
        out.push(m);
    }
    out
}

/// Asserts the router answered with one FATAL ErrorResponse carrying `want` and then closed.
fn assert_fatal(got: &[(u8, Vec<u8>)], want: &str, what: &str) {
    assert_eq!(tags(got), "E", "{what}: one ErrorResponse then close: {got:?}");
    assert_eq!(code(&got[0].1), want, "{what}");
    let fields = crate::pg_raw::fields(&got[0].1);
    assert!(fields.iter().any(|(k, v)| *k == b'S' && v == "FATAL"), "{what}: FATAL: {fields:?}");
}

#[test]
fn bad_input_is_refused_and_other_sessions_carry_on() {
    let r = md5_router("transaction", 2);
    let port = r.port();
    let stop = Arc::new(AtomicBool::new(false));
    let flag = stop.clone();
    let (started, first_answer) = std::sync::mpsc::channel();
    let healthy = thread::spawn(move || {
        let mut c = Raw::login(port, "main", "app").expect("healthy login");
        let mut n = 0u32;
        while !flag.load(Ordering::Relaxed) {
            c.send(&query("SELECT 1"));
            assert_eq!(tags(&c.until_ready()), "TDCZ", "healthy query {n}");
            n += 1;
            let _ = started.send(());
        }
        n
    });
    // The bad input must arrive while the healthy client is at work, not before its login
    // (a loaded machine once let the whole test run before its first query).
    first_answer.recv_timeout(std::time::Duration::from_secs(30)).expect("the healthy client answered once");

    // Garbage instead of a startup packet (an HTTP request): its "length" is absurd.
    let mut c = Raw::open(port);
    c.send_lossy(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_fatal(&drain(&mut c), "08P01", "garbage");

    // A startup packet announcing 2 GiB.
    let mut c = Raw::open(port);
    c.send_lossy(&[0x80, 0, 0, 0, 0, 3, 0, 0]);
    assert_fatal(&drain(&mut c), "08P01", "2 GiB startup length");

    // A truncated startup packet, then the client gives up: closed quietly, as PostgreSQL does.
    let mut c = Raw::open(port);
    let full = startup("main");
    c.send_lossy(&full[..full.len() / 2]);
    c.shutdown(Shutdown::Write);
    assert_eq!(tags(&drain(&mut c)), "", "truncated startup: nothing to say");

    // After login: a 2 GiB message, and a message with an impossible length.
    for (what, bytes) in [
        ("2 GiB query", vec![b'Q', 0x7f, 0xff, 0xff, 0xff, b'S']),
        ("length below 4", vec![b'Q', 0, 0, 0, 2]),
        ("unknown message type", msg(b'!', b"hello")),
    ] {
        let mut c = Raw::login(port, "main", "app").expect("login");
        c.send_lossy(&bytes);
        assert_fatal(&drain(&mut c), "08P01", what);
    }

    // A wrong password (MD5 here, SCRAM below).
    let e = Raw::login(port, "main", "wrong").err().expect("wrong password refused");
    assert!(e.iter().any(|(k, v)| *k == b'C' && v == "28P01"), "{e:?}");

    stop.store(true, Ordering::Relaxed);
    let n = healthy.join().expect("the healthy client never failed");
    assert!(n > 0, "the healthy client kept querying");
}

#[test]
fn scram_clients_get_28p01_and_unknown_databases_use_the_default_pool() {
    let pools = crate::router::pg_pool("main", crate::support::dbs().pg.primary_port, "transaction", 2);
    let config = crate::router::pg_config(&[0], &pools, "main")
        .replace("default_pool = \"main\"\n", "default_pool = \"main\"\nunknown_database = \"default_pool\"\n");
    let r = crate::router::Router::start(&config);
    let e = connect(r.port(), "main", "wrong").err().expect("wrong password refused");
    assert_eq!(sqlstate(&e), "28P01", "{e}");
    // A database that names no pool maps to the default pool only when the configuration asks
    // for it (`routing.unknown_database = "default_pool"`); by default it gets 3D000
    // (tests/it/unknown_database.rs).
    let mut other = connect(r.port(), "nope", "app").expect("unknown database uses the default pool");
    other.simple_query("SELECT 1").expect("served by the default pool");
    let mut ok = connect(r.port(), "main", "app").expect("right password");
    ok.simple_query("SELECT 1").expect("works");
}
