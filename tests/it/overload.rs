//! Issue #12, overload and limits: pool exhaustion (200 clients over `max_connections = 2`
//! queue up to `acquire_timeout`, then get `53300`; the queue and the timeouts show in
//! `/metrics`; nobody waits forever; memory stays bounded), the per-listener
//! `max_client_connections` (PostgreSQL `53300`, MySQL 1040, the next client admitted once one
//! leaves) and `max_message_size` (an oversized message ends only its own session), on both
//! protocols.

// Blocking test clients on their own threads, not data-plane code.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::Read;
use std::net::TcpStream;
use std::sync::{mpsc, Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;

use crate::admin::{addrs, http, sum, with_metrics};
use crate::mysql_session::{my_config, my_pool};
use crate::pg_raw::{code, fields, startup, tags, Raw};
use crate::pg_util::{connect, sqlstate};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, eventually};

const LISTENER: &str = "bind = \"127.0.0.1:0\"\n";

/// Adds `lines` to the (single) listener of a generated config.
fn listener_with(toml: &str, lines: &str) -> String {
    toml.replace(LISTENER, &format!("{LISTENER}{lines}\n"))
}

/// The value of `name` summed over cores and the series matching `filters`, from `/metrics`.
fn scrape(router: &Router, name: &str, filters: &[&str]) -> f64 {
    let reply = http(addrs(router).0, "GET", "/metrics", &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    sum(&reply.body, name, filters).0
}

/// What one of the pool-exhaustion clients saw.
struct Outcome {
    waited: Duration,
    /// `None`: the statement ran; else SQLSTATE and message.
    error: Option<(String, String)>,
    client: Option<postgres::Client>,
}

#[test]
fn pool_exhaustion_queues_clients_until_acquire_timeout_then_answers_53300() {
    let _heavy = crate::abuse::heavy();
    const CLIENTS: usize = 200;
    const ACQUIRE: Duration = Duration::from_secs(1);
    // Both connections opened up front: in a debug build a backend login alone can take longer
    // than the 1 s acquire_timeout.
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2)
        .replace("acquire_timeout = \"20s\"", "acquire_timeout = \"1s\"\nmin_connections = 2");
    // MD5 keeps 200 logins cheap; one core, so every waiter queues on the same core pool.
    let toml = with_metrics(&listener_with(&pg_config(&[0], &pools, "main"), "auth_method = \"md5\""), None);
    let router = Router::start(&toml);
    let port = router.port();
    eventually(Duration::from_secs(30), "min_connections to open", || {
        scrape(&router, "sqp_pool_connections", &["pool=\"main\""]) == 2.0
    });
    // The first login learns the server parameters; after it, logins need no backend.
    connect(port, "main", "app").expect("warm-up login").simple_query("SELECT 1").expect("warm-up");
    let rss_before = crate::abuse::vm_rss_kib();

    let start = Arc::new(Barrier::new(CLIENTS + 1));
    let (tx, rx) = mpsc::channel();
    for _ in 0..CLIENTS {
        let (start, tx) = (start.clone(), tx.clone());
        thread::spawn(move || {
            let client = connect(port, "main", "app");
            start.wait();
            let outcome = match client {
                Err(e) => {
                    Outcome { waited: Duration::ZERO, error: Some(("login".into(), e.to_string())), client: None }
                }
                Ok(mut c) => {
                    let t = Instant::now();
                    let res = c.simple_query("SELECT pg_sleep(0.2)");
                    let waited = t.elapsed();
                    let error = res.err().map(|e| match e.as_db_error() {
                        Some(d) => (d.code().code().to_owned(), d.message().to_owned()),
                        None => ("none".to_owned(), e.to_string()),
                    });
                    Outcome { waited, error, client: Some(c) }
                }
            };
            let _ = tx.send(outcome);
        });
    }
    drop(tx);
    start.wait();
    eventually(Duration::from_secs(10), "sqp_pool_queue_depth to show the waiting clients", || {
        scrape(&router, "sqp_pool_queue_depth", &["pool=\"main\""]) > 0.0
    });

    // No client waits forever: every one has its answer well within a generous bound.
    let mut outcomes = Vec::with_capacity(CLIENTS);
    for i in 0..CLIENTS {
        let o = rx
            .recv_timeout(Duration::from_secs(120))
            .unwrap_or_else(|_| panic!("only {i} of {CLIENTS} clients got an answer"));
        outcomes.push(o);
    }
    let (ran, timed_out): (Vec<&Outcome>, Vec<&Outcome>) = outcomes.iter().partition(|o| o.error.is_none());
    for o in &timed_out {
        let (code, message) = o.error.as_ref().expect("partitioned");
        assert_eq!(code, "53300", "{message}");
        assert!(message.contains("no connection to pool \"main\" became available within"), "{message}");
        // A timeout cannot fire early: the client queued for the whole acquire_timeout.
        assert!(o.waited >= ACQUIRE - Duration::from_millis(50), "timed out after only {:?}", o.waited);
    }
    eprintln!("{CLIENTS} clients over 2 connections: {} ran, {} got 53300", ran.len(), timed_out.len());
    assert!(ran.len() >= 2, "the pool served someone");
    assert!(!timed_out.is_empty(), "200 × 0.2 s over 2 connections cannot fit in a 1 s acquire_timeout");

    let timeouts = scrape(&router, "sqp_pool_timeouts_total", &["pool=\"main\""]);
    assert_eq!(timeouts as usize, timed_out.len(), "sqp_pool_timeouts_total counts every client that got 53300");
    eventually(Duration::from_secs(10), "the queue to empty", || {
        scrape(&router, "sqp_pool_queue_depth", &["pool=\"main\""]) == 0.0
    });
    // 53300 is an ERROR, not FATAL: the client that got it carries on once the pool has room.
    let mut survivor =
        outcomes.iter_mut().find(|o| o.error.is_some()).and_then(|o| o.client.take()).expect("a client that timed out");
    survivor.simple_query("SELECT 1").expect("a client that got 53300 keeps its session");

    let grown_mib = crate::abuse::vm_rss_kib().saturating_sub(rss_before) / 1024;
    eprintln!("process RSS grew by {grown_mib} MiB with {CLIENTS} clients (and their test threads)");
    assert!(grown_mib < 256, "RSS grew by {grown_mib} MiB under pool exhaustion");
    drop(survivor);
    drop(outcomes);
    eventually(Duration::from_secs(10), "every session to close", || {
        router.control().collect().expect("collect").iter().map(|r| r.counters.sessions_active).sum::<u64>() == 0
    });
}

/// Clients refused at the listener cap, process-wide, from the cores' counters.
fn refused(router: &Router) -> u64 {
    let reports = router.control().collect().expect("collect");
    reports.iter().flat_map(|r| r.counters.clients.iter()).map(|c| c.refused_total).sum()
}

#[test]
fn pg_listener_cap_refuses_the_next_client_with_53300_and_admits_one_after_a_close() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 4);
    // Two cores: the cap is for the whole process, whichever core the kernel hands a client.
    let router = Router::start(&listener_with(&pg_config(&[0, 1], &pools, "main"), "max_client_connections = 3"));
    let port = router.port();
    let mut held: Vec<postgres::Client> =
        (0..3).map(|i| connect(port, "main", "app").unwrap_or_else(|e| panic!("client {i}: {e}"))).collect();

    let e = connect(port, "main", "app").err().expect("a fourth client is refused");
    assert_eq!(sqlstate(&e), "53300", "{e}");
    assert_eq!(e.as_db_error().map(|d| d.message()), Some("sorry, too many clients already"), "{e:?}");
    // On the wire: one FATAL ErrorResponse after the startup packet, then the close.
    let mut raw = Raw::open(port);
    raw.send(&startup("main"));
    let (tag, body) = raw.recv().expect("an answer before the close");
    assert_eq!((tag, code(&body)), (b'E', "53300".to_owned()), "{:?}", fields(&body));
    assert!(fields(&body).iter().any(|(k, v)| *k == b'S' && v == "FATAL"), "{:?}", fields(&body));
    assert!(raw.recv().is_none(), "the refused connection is closed");
    assert!(refused(&router) >= 2, "refusals are counted");

    for c in &mut held {
        c.simple_query("SELECT 1").expect("admitted clients are unaffected");
    }
    drop(held.pop());
    let mut next = None;
    eventually(Duration::from_secs(10), "a client to be admitted after one left", || {
        next = connect(port, "main", "app").ok();
        next.is_some()
    });
    next.expect("admitted").simple_query("SELECT 1").expect("the newcomer is served");
}

/// Reads a whole MySQL packet payload (3-byte length, sequence id) or `None` at EOF.
fn my_packet(s: &mut TcpStream) -> Option<(u8, Vec<u8>)> {
    let mut head = [0u8; 4];
    s.read_exact(&mut head).ok()?;
    let len = usize::from(head[0]) | usize::from(head[1]) << 8 | usize::from(head[2]) << 16;
    let mut payload = vec![0u8; len];
    s.read_exact(&mut payload).ok()?;
    Some((head[3], payload))
}

fn my_error(e: mysql::Error) -> (u16, String) {
    match e {
        mysql::Error::MySqlError(e) => (e.code, e.message),
        other => panic!("expected a server error, got {other:?}"),
    }
}

#[test]
fn mysql_listener_cap_refuses_the_next_client_with_1040_and_admits_one_after_a_close() {
    let toml =
        listener_with(&my_config(&[0, 1], &my_pool("main", "transaction", 4), "main"), "max_client_connections = 2");
    let router = Router::start(&toml);
    let port = router.port();
    let my = &dbs().my;
    let mut held: Vec<mysql::Conn> =
        (0..2).map(|_| mysql::Conn::new(my.opts(port, &my.user, &my.password)).expect("admitted")).collect();

    let (number, message) =
        my_error(mysql::Conn::new(my.opts(port, &my.user, &my.password)).expect_err("a third client is refused"));
    assert_eq!((number, message.as_str()), (1040, "Too many connections"));
    // On the wire: an ERR packet with sequence id 0 where the greeting would be, then EOF.
    let mut raw = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    raw.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let (seq, payload) = my_packet(&mut raw).expect("an ERR packet");
    assert_eq!((seq, payload.first().copied()), (0, Some(0xFF)), "{payload:?}");
    assert_eq!(u16::from_le_bytes([payload[1], payload[2]]), 1040);
    assert!(my_packet(&mut raw).is_none(), "the refused connection is closed");
    assert!(refused(&router) >= 2, "refusals are counted");

    for c in &mut held {
        let one: Option<i64> = c.query_first("SELECT 1").expect("admitted clients are unaffected");
        assert_eq!(one, Some(1));
    }
    drop(held.pop());
    let mut next = None;
    eventually(Duration::from_secs(10), "a client to be admitted after one left", || {
        next = mysql::Conn::new(my.opts(port, &my.user, &my.password)).ok();
        next.is_some()
    });
    let one: Option<i64> = next.expect("admitted").query_first("SELECT 1").expect("the newcomer is served");
    assert_eq!(one, Some(1));
}

#[test]
fn pg_message_over_max_message_size_ends_only_that_session() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
    // MD5, for the raw client below.
    let limits = "max_message_size = \"4KiB\"\nauth_method = \"md5\"";
    let router = Router::start(&listener_with(&pg_config(&[0], &pools, "main"), limits));
    let port = router.port();
    let mut bystander = connect(port, "main", "app").expect("login");
    let small = format!("SELECT length('{}')", "x".repeat(2_000));
    bystander.simple_query(&small).expect("a message under the limit passes");

    // A client that sends a whole 4 MB message (as drivers do: write everything, then read):
    // its write completes and the router's ErrorResponse arrives intact, then the close. (Had
    // the router closed with the rest unread, the kernel's reset would fail the write and
    // destroy the error.)
    let huge = format!("SELECT length('{}')", "x".repeat(4 << 20));
    let mut raw = Raw::login(port, "main", "app").expect("raw login");
    raw.send(&crate::pg_raw::query(&huge));
    let got: Vec<_> = std::iter::from_fn(|| raw.recv()).collect();
    assert_eq!(tags(&got), "E", "one ErrorResponse, then the close: {got:?}");
    assert_eq!(code(&got[0].1), "08P01");
    let message = fields(&got[0].1).into_iter().find(|(k, _)| *k == b'M').map(|(_, v)| v).unwrap_or_default();
    assert!(message.contains("exceeds the limit of 4096 bytes"), "the error names the limit: {message}");

    // psql (libpq) shows that error to its user. (The `postgres` crate reports a FATAL that
    // arrives together with the close only as "connection closed", as it does with PostgreSQL.)
    let big = format!("SELECT length('{}')", "x".repeat(8_000));
    let out = crate::pg_util::psql(port, "main", "app", &["-c", &big], "");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "psql must fail");
    assert!(stderr.contains("exceeds the limit of 4096 bytes"), "psql shows the router's error: {stderr}");

    // Only the announced length is needed to refuse: a 1 MB claim is answered before its body.
    let mut raw = Raw::login(port, "main", "app").expect("raw login");
    let mut header = vec![b'Q'];
    header.extend_from_slice(&(1_000_000u32).to_be_bytes());
    raw.send(&header);
    let got: Vec<_> = std::iter::from_fn(|| raw.recv()).collect();
    assert_eq!(tags(&got), "E", "{got:?}");
    assert_eq!(code(&got[0].1), "08P01");

    bystander.simple_query(&small).expect("the other session is unaffected");
    connect(port, "main", "app").expect("new clients are admitted").simple_query("SELECT 1").expect("served");
}

#[test]
fn mysql_packet_over_max_message_size_ends_only_that_session() {
    let toml =
        listener_with(&my_config(&[0], &my_pool("main", "transaction", 2), "main"), "max_message_size = \"4KiB\"");
    let router = Router::start(&toml);
    let port = router.port();
    let my = &dbs().my;
    let mut bystander = mysql::Conn::new(my.opts(port, &my.user, &my.password)).expect("login");
    let small = format!("SELECT length('{}')", "x".repeat(2_000));
    let n: Option<i64> = bystander.query_first(&small).expect("a packet under the limit passes");
    assert_eq!(n, Some(2_000));

    let mut big_client = mysql::Conn::new(my.opts(port, &my.user, &my.password)).expect("login");
    // 4 MB: the driver writes it all before reading, so the error reaches it only because the
    // router keeps reading (and discarding) after refusing, instead of resetting the connection.
    let big = format!("SELECT length('{}')", "x".repeat(4 << 20));
    let (number, message) = my_error(big_client.query_first::<i64, _>(&big).expect_err("a 4 MB packet is refused"));
    assert_eq!(number, 1153, "{message}");
    assert!(message.contains("max_allowed_packet"), "{message}");
    assert!(big_client.query_first::<i64, _>("SELECT 1").is_err(), "the session is closed after the error");

    let n: Option<i64> = bystander.query_first(&small).expect("the other session is unaffected");
    assert_eq!(n, Some(2_000));
    let mut fresh = mysql::Conn::new(my.opts(port, &my.user, &my.password)).expect("new clients are admitted");
    fresh.query_drop("SELECT 1").expect("served");
}
