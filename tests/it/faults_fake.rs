//! Issue #12, faults a real server will not produce, from scripted fake backends built with the
//! router's own codecs: a backend that accepts TCP and never answers, one that logs in and then
//! never replies (`connect_timeout` / `query_timeout`), an authentication exchange that never
//! ends, truncated messages, impossible lengths, a message type that has no place in a result
//! and a MySQL packet out of sequence; and a MySQL server asking for a local file (#4). For each: the client gets a clear error in bounded time,
//! the broken connection is closed rather than pooled, and a session on a healthy pool (the
//! shared real PostgreSQL / MariaDB) of the same one-core router keeps working meanwhile.
//!
//! A fake backend numbers its logins; its answer to an ordinary query names the connection it
//! ran on (a PostgreSQL row, a MySQL OK packet's affected-rows), which proves where statements
//! ran without asking the router.

// Blocking fake servers and clients on their own threads, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use mysql::prelude::Queryable;
use querypilot::protocol::mysql::capability::{
    CLIENT_CONNECT_WITH_DB, CLIENT_LONG_FLAG, CLIENT_LONG_PASSWORD, CLIENT_MULTI_RESULTS, CLIENT_MULTI_STATEMENTS,
    CLIENT_PLUGIN_AUTH, CLIENT_PROTOCOL_41, CLIENT_SECURE_CONNECTION, CLIENT_TRANSACTIONS,
};
use querypilot::protocol::mysql::response::{SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_IN_TRANS};
use querypilot::protocol::mysql::{
    decode_packet, encode_packets, AuthSwitchRequest, ErrorNumber, HandshakeV10, OkPacket,
};
use querypilot::protocol::pg::backend::{
    encode_data_row, encode_ready_for_query, encode_row_description, FieldDescription,
};
use querypilot::protocol::pg::{
    decode_frame, decode_startup_frame, encode_error, Authentication, BackendMessage, Severity, StartupPacket,
    TransactionStatus,
};

use crate::pg_util::connect;
use crate::router::{pg_pool, Router};
use crate::support::{dbs, eventually};

/// Far beyond what any timeout below needs, so only a hang reaches it.
const NO_HANG: Duration = Duration::from_secs(30);
/// How long the fake takes over a `fault_slow` statement: clients sending theirs together hold
/// a connection each meanwhile.
const SLOW: Duration = Duration::from_millis(300);

/// How a fake backend treats a new connection before any query.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Login {
    /// Completes the login at once.
    Normal,
    /// Accepts the TCP connection and never sends a byte.
    Silent,
    /// Asks for a password again after every answer (PostgreSQL MD5, MySQL auth switch).
    Endless,
    /// Refuses the login as a server shutting down does (PostgreSQL 57P03, MariaDB 1053).
    ShuttingDown,
}

/// What a fake backend saw.
#[derive(Default)]
struct Seen {
    /// Completed logins; the n-th login's connection answers queries with `n`.
    logins: AtomicU32,
    /// Connections the router closed (EOF on a connection the fake was holding or serving).
    closed: AtomicU32,
    /// PostgreSQL CancelRequests received.
    cancels: AtomicU32,
    /// A `fault_lost_once` statement was dropped unanswered.
    lost_once: std::sync::atomic::AtomicBool,
    /// The logins before the first `fault_lost_old` statement: those connections died then.
    lost_upto: AtomicU32,
}

/// A fake backend on an ephemeral loopback port; its threads end with the test binary.
struct Fake {
    port: u16,
    seen: Arc<Seen>,
}

impl Fake {
    fn start(serve: fn(TcpStream, &Seen, Login), login: Login) -> Fake {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake backend");
        let port = listener.local_addr().expect("local addr").port();
        let seen = Arc::new(Seen::default());
        let shared = seen.clone();
        thread::spawn(move || {
            for s in listener.incoming().flatten() {
                let seen = shared.clone();
                thread::spawn(move || serve(s, &seen, login));
            }
        });
        Fake { port, seen }
    }

    fn logins(&self) -> u32 {
        self.seen.logins.load(Ordering::SeqCst)
    }

    fn closed(&self) -> u32 {
        self.seen.closed.load(Ordering::SeqCst)
    }
}

/// Reads and discards until the router closes the connection, then counts that.
fn hold(s: &mut TcpStream, seen: &Seen) {
    let mut sink = [0u8; 4096];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    seen.closed.fetch_add(1, Ordering::SeqCst);
}

/// Reads into `buf` until `complete` finds a whole message; `None` at EOF.
fn fill(s: &mut TcpStream, buf: &mut Vec<u8>, complete: impl Fn(&[u8]) -> Option<usize>) -> Option<usize> {
    loop {
        if let Some(n) = complete(buf) {
            return Some(n);
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

// ---------------------------------------------------------------- PostgreSQL fake

fn pg_msg(msg: BackendMessage<'_>, out: &mut Vec<u8>) {
    msg.encode(out).expect("encode backend message");
}

/// A one-column text row description (`name`).
fn pg_row_description(name: &str, out: &mut Vec<u8>) {
    let f = FieldDescription {
        name,
        table_oid: 0,
        column_attr: 0,
        type_oid: 25,
        type_size: -1,
        type_modifier: -1,
        format: 0,
    };
    encode_row_description(&[f], out).expect("row description");
}

fn pg_serve(mut s: TcpStream, seen: &Seen, login: Login) {
    let mut buf = Vec::new();
    let Some(n) = fill(&mut s, &mut buf, |b| decode_startup_frame(b, 1 << 16).ok().flatten().map(|f| f.total_len))
    else {
        return;
    };
    let startup = buf.drain(..n).collect::<Vec<u8>>();
    match StartupPacket::decode(startup.get(4..).unwrap_or_default()) {
        Ok(StartupPacket::Cancel { .. }) => {
            seen.cancels.fetch_add(1, Ordering::SeqCst);
            return; // closing is the answer
        }
        Ok(StartupPacket::Startup { .. }) => {}
        _ => return,
    }
    let mut out = Vec::new();
    match login {
        Login::Silent => return hold(&mut s, seen),
        Login::Endless => loop {
            out.clear();
            pg_msg(BackendMessage::Authentication(Authentication::Md5Password { salt: *b"salt" }), &mut out);
            if s.write_all(&out).is_err() {
                return;
            }
            let Some(n) = fill(&mut s, &mut buf, |b| decode_frame(b, 1 << 16).ok().flatten().map(|f| f.total_len))
            else {
                seen.closed.fetch_add(1, Ordering::SeqCst);
                return;
            };
            buf.drain(..n);
        },
        Login::ShuttingDown => {
            encode_error(Severity::Fatal, "57P03", "the database system is shutting down", &mut out);
            let _ = s.write_all(&out);
            return;
        }
        Login::Normal => {}
    }
    let conn = seen.logins.fetch_add(1, Ordering::SeqCst) + 1;
    pg_msg(BackendMessage::Authentication(Authentication::Ok), &mut out);
    for (name, value) in [
        ("server_version", "15.0"),
        ("server_encoding", "UTF8"),
        ("client_encoding", "UTF8"),
        ("DateStyle", "ISO, MDY"),
        ("integer_datetimes", "on"),
        ("standard_conforming_strings", "on"),
        ("TimeZone", "UTC"),
    ] {
        pg_msg(BackendMessage::ParameterStatus { name, value }, &mut out);
    }
    pg_msg(BackendMessage::BackendKeyData { pid: conn as i32, key: 7 }, &mut out);
    encode_ready_for_query(TransactionStatus::Idle, &mut out);
    if s.write_all(&out).is_err() {
        return;
    }
    loop {
        let Some(n) = fill(&mut s, &mut buf, |b| decode_frame(b, 1 << 20).ok().flatten().map(|f| f.total_len)) else {
            seen.closed.fetch_add(1, Ordering::SeqCst);
            return;
        };
        let frame: Vec<u8> = buf.drain(..n).collect();
        out.clear();
        match frame.first() {
            Some(b'X') => return,
            Some(b'Q') => {
                let sql = String::from_utf8_lossy(frame.get(5..frame.len() - 1).unwrap_or_default()).into_owned();
                let then = pg_answer(&sql, conn, seen, &mut out);
                if then != Then::Serve {
                    let _ = s.write_all(&out);
                    if then == Then::Eof {
                        let _ = s.shutdown(std::net::Shutdown::Write);
                    }
                    return hold(&mut s, seen);
                }
            }
            // The extended protocol is not scripted: every batch fails at its Sync.
            Some(b'S') => {
                encode_error(Severity::Error, "0A000", "the fake backend speaks the simple protocol only", &mut out);
                encode_ready_for_query(TransactionStatus::Idle, &mut out);
            }
            _ => {}
        }
        if s.write_all(&out).is_err() {
            return;
        }
    }
}

/// What the fake does after sending its answer.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Then {
    /// Serves the next query.
    Serve,
    /// Never sends another byte, keeping the socket open.
    Hold,
    /// Ends its side of the connection (EOF for the router).
    Eof,
}

/// Appends the answer to `sql` and says what follows it.
fn pg_answer(sql: &str, conn: u32, seen: &Seen, out: &mut Vec<u8>) -> Then {
    let row = conn.to_string();
    let mut data_row = Vec::new();
    encode_data_row(&[Some(row.as_bytes())], &mut data_row).expect("data row");
    if sql.contains("fault_truncated") {
        // Half a DataRow, then EOF.
        pg_row_description("conn", out);
        out.extend_from_slice(data_row.get(..data_row.len() / 2).unwrap_or_default());
        return Then::Eof;
    }
    if sql.contains("fault_short_length") {
        pg_row_description("conn", out);
        out.extend_from_slice(&[b'D', 0, 0, 0, 2]);
        return Then::Hold;
    }
    if sql.contains("fault_huge_length") {
        pg_row_description("conn", out);
        out.extend_from_slice(&[b'D', 0x7f, 0xff, 0xff, 0xf0, 0, 1]);
        return Then::Hold;
    }
    if sql.contains("fault_auth_mid_result") {
        pg_row_description("conn", out);
        out.extend_from_slice(&data_row);
        pg_msg(BackendMessage::Authentication(Authentication::Ok), out);
        return Then::Hold;
    }
    if sql.contains("fault_stall") {
        return Then::Hold;
    }
    if lost_unanswered(sql, conn, seen) {
        return Then::Eof;
    }
    if shuts_down(sql, seen) {
        encode_error(Severity::Fatal, "57P01", "terminating connection due to administrator command", out);
        return Then::Eof;
    }
    if sql.contains("fault_slow") {
        thread::sleep(SLOW);
    }
    let upper = sql.trim_start().to_ascii_uppercase();
    if let Some(word) = ["SET", "RESET", "DISCARD"].iter().find(|w| upper.starts_with(*w)) {
        pg_msg(BackendMessage::CommandComplete(word), out);
    } else {
        pg_row_description("conn", out);
        out.extend_from_slice(&data_row);
        pg_msg(BackendMessage::CommandComplete("SELECT 1"), out);
    }
    // `fault_in_tx` opens a transaction as far as the router can tell.
    let status = if sql.contains("fault_in_tx") { TransactionStatus::InBlock } else { TransactionStatus::Idle };
    encode_ready_for_query(status, out);
    Then::Serve
}

/// Whether the fake answers `sql` as a MariaDB shutting down does (1053, then the close): the
/// first time for `fault_shutdown_once`, every time for `fault_shutdown_always`.
fn shuts_down(sql: &str, seen: &Seen) -> bool {
    sql.contains("fault_shutdown_always")
        || (sql.contains("fault_shutdown_once") && !seen.lost_once.swap(true, Ordering::SeqCst))
}

/// Whether the fake closes connection `conn`, which `sql` came on, without a word: the first
/// time for `fault_lost_once`, every time for `fault_lost_always`; for `fault_lost_old` on every
/// connection logged in before the first such statement came (as a stopping server closes them
/// all, the router seeing each close only once it sent something).
fn lost_unanswered(sql: &str, conn: u32, seen: &Seen) -> bool {
    if sql.contains("fault_lost_old") {
        let _ =
            seen.lost_upto.compare_exchange(0, seen.logins.load(Ordering::SeqCst), Ordering::SeqCst, Ordering::SeqCst);
        return conn <= seen.lost_upto.load(Ordering::SeqCst);
    }
    sql.contains("fault_lost_always")
        || (sql.contains("fault_lost_once") && !seen.lost_once.swap(true, Ordering::SeqCst))
}

/// One core; pool `fake` (one connection, so a leaked or reused broken connection shows) on
/// the fake backend and pool `real` on the shared PostgreSQL primary. Health probes are
/// effectively off for the fake (one probe at start; its failure alone marks nothing down).
fn pg_router(fake: &Fake, extra: &str) -> Router {
    pg_router_in(fake, "transaction", extra)
}

/// [`pg_router`] with the fake pool in `mode`.
fn pg_router_in(fake: &Fake, mode: &str, extra: &str) -> Router {
    Router::start(&pg_config_in(fake, mode, extra))
}

/// The config of [`pg_router_in`].
fn pg_config_in(fake: &Fake, mode: &str, extra: &str) -> String {
    let real = pg_pool("real", dbs().pg.primary_port, "transaction", 2);
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.fake]\nmode = \"{mode}\"\nusername = \"app\"\npassword = \"app\"\ndatabase = \"fake\"\nmax_connections = 1\n\
         acquire_timeout = \"10s\"\nconnect_timeout = \"1s\"\n{extra}\nbackends = [{{ host = \"127.0.0.1\", port = {} }}]\n\n\
         [pools.fake.health]\ninterval = \"1h\"\n\n{real}\n[routing]\ndefault_pool = \"real\"\n",
        fake.port
    )
}

/// SQLSTATE and message of a PostgreSQL error.
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{} {}", d.code().code(), d.message()),
        None => e.to_string(),
    }
}

/// The connection number the fake reports for `SELECT conn`.
fn pg_conn(c: &mut postgres::Client) -> u32 {
    let msgs = c.simple_query("SELECT conn").unwrap_or_else(|e| panic!("SELECT conn: {}", describe(&e)));
    msgs.iter()
        .find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
            _ => None,
        })
        .expect("a row naming the connection")
}

/// Runs `work` on a thread and returns its result, failing the test if it takes longer than
/// [`NO_HANG`].
fn bounded<T: Send + 'static>(what: &str, work: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx.recv_timeout(NO_HANG).unwrap_or_else(|_| panic!("{what}: no answer within {NO_HANG:?} (hang)"))
}

/// The healthy pool of the same router answers.
fn pg_real_works(real: &mut postgres::Client) {
    let port: i32 = real.query_one("SELECT inet_server_port()", &[]).expect("healthy pool").get(0);
    assert_eq!(port as u16, dbs().pg.primary_port);
}

#[test]
fn pg_backend_that_never_answers_the_login_is_bounded_by_connect_timeout() {
    for login in [Login::Silent, Login::Endless] {
        let fake = Fake::start(pg_serve, login);
        let r = pg_router(&fake, "");
        let mut real = r.pg("real");
        let port = r.port();
        let res = bounded("login", move || connect(port, "fake", "app").map(drop).map_err(|e| describe(&e)));
        let err = res.expect_err("no backend login, no session");
        assert!(err.starts_with("08001") && err.contains("connect_timeout"), "{err}");
        pg_real_works(&mut real);
        // The router gave up on the connection: the fake sees it closed.
        eventually(Duration::from_secs(10), "the router to close the stuck login", || fake.closed() >= 1);
    }
}

/// A backend that refuses every login because it is shutting down is unavailable, as if it had
/// refused the TCP connection: the client is not told its credentials are wrong (#40).
#[test]
fn pg_a_backend_shutting_down_is_unavailable_not_a_refusal_of_the_password() {
    let fake = Fake::start(pg_serve, Login::ShuttingDown);
    let r = pg_router(&fake, "");
    let mut real = r.pg("real");
    let port = r.port();
    let res = bounded("login", move || connect(port, "fake", "app").map(drop).map_err(|e| describe(&e)));
    let err = res.expect_err("no backend login, no session");
    assert!(err.starts_with("08001") && err.contains("57P03"), "{err}");
    pg_real_works(&mut real);
}

#[test]
fn pg_backend_that_stops_answering_mid_query_is_bounded_by_query_timeout() {
    let fake = Fake::start(pg_serve, Login::Normal);
    let r = pg_router(&fake, "query_timeout = \"1s\"");
    let mut real = r.pg("real");
    let mut c = r.pg("fake");
    let before = pg_conn(&mut c);
    let (res, mut c) = bounded("stalled query", move || {
        let res = c.simple_query("SELECT fault_stall").map(drop).map_err(|e| describe(&e));
        (res, c)
    });
    let err = res.expect_err("the statement was bounded");
    assert!(err.contains("query_timeout"), "{err}");
    assert!(fake.seen.cancels.load(Ordering::SeqCst) >= 1, "a cancel was tried first");
    pg_real_works(&mut real);
    let after = pg_conn(&mut c);
    assert_ne!(after, before, "the silent connection was not reused");
    eventually(Duration::from_secs(10), "the router to close the silent connection", || fake.closed() >= 1);
}

#[test]
fn pg_broken_backend_messages_give_an_error_and_a_fresh_connection() {
    for fault in ["fault_truncated", "fault_short_length", "fault_huge_length", "fault_auth_mid_result"] {
        let fake = Fake::start(pg_serve, Login::Normal);
        let r = pg_router(&fake, "");
        let mut real = r.pg("real");
        let mut c = r.pg("fake");
        let before = pg_conn(&mut c);
        let sql = format!("SELECT {fault}");
        let (res, c) = bounded(fault, move || {
            let res = c.simple_query(&sql).map(drop).map_err(|e| describe(&e));
            (res, c)
        });
        let err = res.expect_err("a broken backend is an error");
        assert!(err.starts_with("08006"), "{fault}: connection-failure error, got {err}");
        pg_real_works(&mut real);
        eventually(Duration::from_secs(10), "the router to close the broken connection", || fake.closed() >= 1);
        // The client's session goes on (outside a transaction), on a new connection: the
        // broken one was not pooled, and its budget came back (max_connections = 1).
        let mut c = c;
        let after = pg_conn(&mut c);
        assert!(after > before, "{fault}: a new connection ({before} -> {after})");
        assert!(fake.logins() >= 2, "{fault}");
    }
}

/// #40: a lone BEGIN whose connection is lost before any answer started nothing that outlives
/// the connection, so the router sends it again on a new one (through a failover, the new
/// primary's); the client sees it succeed. Lost on every connection, the client gets the
/// connection failure after three; a text with more than the BEGIN in it is never sent twice.
#[test]
fn pg_a_lone_begin_lost_unanswered_goes_again_on_a_new_connection() {
    let fake = Fake::start(pg_serve, Login::Normal);
    let r = pg_router(&fake, "");
    let mut c = r.pg("fake");
    let before = fake.logins();
    let (res, c) = bounded("lost BEGIN", move || {
        let res = c.simple_query("BEGIN /* fault_lost_once */").map(drop).map_err(|e| describe(&e));
        (res, c)
    });
    res.expect("the BEGIN went again on a new connection");
    assert_eq!(fake.logins(), before + 1, "one new connection");
    let mut c = c;
    assert_eq!(pg_conn(&mut c), before + 1, "the session goes on on the new connection");

    let before = fake.logins();
    let (res, mut c) = bounded("always lost", move || {
        let res = c.simple_query("START TRANSACTION /* fault_lost_always */").map(drop).map_err(|e| describe(&e));
        (res, c)
    });
    let err = res.expect_err("lost every time");
    assert!(err.starts_with("08006"), "{err}");
    assert_eq!(fake.logins(), before + 2, "three connections tried: the one the pool had, two new");

    let before = fake.logins();
    let (res, _c) = bounded("not lone", move || {
        let res = c.simple_query("BEGIN; SELECT 1 /* fault_lost_always */").map(drop).map_err(|e| describe(&e));
        (res, c)
    });
    assert!(res.expect_err("not sent again").starts_with("08006"));
    eventually(Duration::from_secs(10), "the lost connection closed", || fake.closed() >= 1);
    assert!(fake.logins() <= before + 1, "a text with more than a BEGIN is sent once");

    // A session-mode client's server session dies with its connection: its BEGIN is not sent
    // on a new one, which would hide that; the client is told, as on a direct connection.
    let fake = Fake::start(pg_serve, Login::Normal);
    let r = pg_router_in(&fake, "session", "");
    let c = r.pg("fake");
    let before = fake.logins();
    let (res, _c) = bounded("session mode", move || {
        let mut c = c;
        let res = c.simple_query("BEGIN /* fault_lost_once */").map(drop).map_err(|e| describe(&e));
        (res, c)
    });
    // The session ends (FATAL 08006, which the driver may report as the close that follows).
    let err = res.expect_err("not sent again in session mode");
    assert!(err.starts_with("08006") || err == "connection closed", "{err}");
    assert_eq!(fake.logins(), before, "no new connection was opened for it");
}

/// #40 through a stopping server: every connection the pool held when a lone BEGIN's was lost
/// died with it, their closes not yet seen by the router. The BEGIN goes again past all of them
/// (more than three), as they do not count against its attempts, and succeeds on a new
/// connection: the client, which had no transaction open, sees no error.
#[test]
fn pg_a_lone_begin_goes_past_every_connection_that_died_with_its_own() {
    let fake = Fake::start(pg_serve, Login::Normal);
    let r = Router::start(&pg_config_in(&fake, "transaction", "").replacen(
        "max_connections = 1",
        "max_connections = 4",
        1,
    ));
    // Four statements at once: four connections, then idle in the pool.
    let clients: Vec<_> = (0..4).map(|_| r.pg("fake")).collect();
    let slow: Vec<_> = clients
        .into_iter()
        .map(|mut c| thread::spawn(move || c.simple_query("SELECT fault_slow").map(drop).map_err(|e| describe(&e))))
        .collect();
    for t in slow {
        t.join().expect("client thread").expect("slow statement");
    }
    let old = fake.logins();
    assert!(old >= 4, "four connections in the pool (and the health probe's at start): {old}");
    let mut c = r.pg("fake");
    let (res, mut c) = bounded("BEGIN past dead connections", move || {
        let res = c.simple_query("BEGIN /* fault_lost_old */").map(drop).map_err(|e| describe(&e));
        (res, c)
    });
    res.expect("the BEGIN went again past every dead connection");
    assert_eq!(fake.seen.lost_upto.load(Ordering::SeqCst), old, "the pool's connections died");
    assert_eq!(pg_conn(&mut c), old + 1, "the session goes on on a new connection");
}

/// #40 for a read: one statement outside a transaction that routing proved without effect,
/// whose connection is lost before any of its answer reached the client, goes again on a new
/// connection, and the client gets its rows from there; it had no transaction open, so a
/// failover owes it no error.
#[test]
fn pg_a_read_lost_unanswered_gets_its_rows_from_a_new_connection() {
    let fake = Fake::start(pg_serve, Login::Normal);
    let r = pg_router(&fake, "");
    let c = r.pg("fake");
    let before = fake.logins();
    let (res, _c) = bounded("lost read", move || {
        let mut c = c;
        let res = c.simple_query("SELECT conn /* fault_lost_once */").map_err(|e| describe(&e));
        (res, c)
    });
    let rows: Vec<u32> = res
        .expect("the read went again on a new connection")
        .iter()
        .filter_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
            _ => None,
        })
        .collect();
    // As for MySQL: any connection opened after the loss, not necessarily the next one.
    assert!(matches!(rows[..], [n] if n > before), "its rows came from a new connection: {rows:?}");
}

/// Statements lost unanswered that #40 must not send again on either wire: writes, a row lock,
/// and a read inside an open transaction (the fake opens one for `fault_in_tx`; `; ` separates
/// the statements a test sends one by one).
const NOT_SENT_AGAIN: [&str; 4] = [
    "INSERT INTO t VALUES (1) /* fault_lost_once */",
    "UPDATE t SET a = 1 /* fault_lost_once */",
    "SELECT conn FROM t FOR UPDATE /* fault_lost_once */",
    "BEGIN /* fault_in_tx */; SELECT conn /* fault_lost_once */",
];

/// #40's limits: a statement that may have an effect (a write, a row lock, a volatile
/// function), or a read inside an open transaction, is never sent twice: its client gets the
/// loss as before.
#[test]
fn pg_a_statement_with_effect_lost_unanswered_is_not_sent_again() {
    for sql in NOT_SENT_AGAIN.into_iter().chain(["SELECT nextval('s') /* fault_lost_once */"]) {
        let fake = Fake::start(pg_serve, Login::Normal);
        let r = pg_router(&fake, "");
        let c = r.pg("fake");
        let (res, _c) = bounded(sql, move || {
            let mut c = c;
            let res = sql.split("; ").try_for_each(|one| c.simple_query(one).map(drop).map_err(|e| describe(&e)));
            (res, c)
        });
        let err = res.expect_err(sql);
        // In a transaction the session ends with it (FATAL 08006, which the driver may report
        // as the close that follows).
        let ended = sql.contains("fault_in_tx") && err == "connection closed";
        assert!(err.starts_with("08006") || ended, "{sql}: {err}");
    }
}

// ---------------------------------------------------------------- MySQL fake

const MY_CAPS: u64 = CLIENT_LONG_PASSWORD
    | CLIENT_LONG_FLAG
    | CLIENT_CONNECT_WITH_DB
    | CLIENT_PROTOCOL_41
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_STATEMENTS
    | CLIENT_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH;

fn my_send(s: &mut TcpStream, payload: &[u8], seq: u8) -> bool {
    let mut out = Vec::new();
    encode_packets(payload, seq, &mut out);
    s.write_all(&out).is_ok()
}

/// The next packet: (sequence id, payload); `None` at EOF.
fn my_read(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<(u8, Vec<u8>)> {
    let n = fill(s, buf, |b| decode_packet(b, 1 << 24).ok().flatten().map(|p| p.payload.len() + 4))?;
    let raw: Vec<u8> = buf.drain(..n).collect();
    Some((raw.get(3).copied().unwrap_or(0), raw.get(4..).unwrap_or_default().to_vec()))
}

fn my_ok(affected_rows: u64) -> Vec<u8> {
    my_ok_with(affected_rows, SERVER_STATUS_AUTOCOMMIT)
}

fn my_ok_with(affected_rows: u64, status: u16) -> Vec<u8> {
    let mut out = Vec::new();
    OkPacket { affected_rows, status, ..OkPacket::default() }.encode(MY_CAPS, &mut out);
    out
}

fn my_serve(mut s: TcpStream, seen: &Seen, login: Login) {
    if login == Login::Silent {
        return hold(&mut s, seen);
    }
    let id = seen.logins.load(Ordering::SeqCst) + 1;
    let mut greeting = Vec::new();
    HandshakeV10 {
        server_version: b"5.5.5-10.11.0-MariaDB-fake",
        connection_id: id,
        scramble: [7; 20],
        capabilities: MY_CAPS,
        charset: 45,
        status: SERVER_STATUS_AUTOCOMMIT,
        auth_plugin: b"mysql_native_password",
    }
    .encode(&mut greeting);
    if !my_send(&mut s, &greeting, 0) {
        return;
    }
    let mut buf = Vec::new();
    let Some((mut seq, _response)) = my_read(&mut s, &mut buf) else { return };
    if login == Login::ShuttingDown {
        let mut refusal = Vec::new();
        ErrorNumber { code: 1053, sql_state: *b"08S01" }.encode(
            b"Server shutdown in progress",
            seq.wrapping_add(1),
            &mut refusal,
        );
        let _ = s.write_all(&refusal);
        return;
    }
    if login == Login::Endless {
        let mut switch = Vec::new();
        AuthSwitchRequest { plugin: b"mysql_native_password", data: &[9; 21] }.encode(&mut switch);
        loop {
            if !my_send(&mut s, &switch, seq.wrapping_add(1)) {
                return;
            }
            let Some((next, _)) = my_read(&mut s, &mut buf) else {
                seen.closed.fetch_add(1, Ordering::SeqCst);
                return;
            };
            seq = next;
        }
    }
    let conn = seen.logins.fetch_add(1, Ordering::SeqCst) + 1;
    if !my_send(&mut s, &my_ok(0), seq.wrapping_add(1)) {
        return;
    }
    loop {
        let Some((_, cmd)) = my_read(&mut s, &mut buf) else {
            seen.closed.fetch_add(1, Ordering::SeqCst);
            return;
        };
        let sql = String::from_utf8_lossy(cmd.get(1..).unwrap_or_default()).into_owned();
        match cmd.first() {
            Some(0x01) => return, // COM_QUIT
            Some(0x03) if sql.contains("fault_stall") => return hold(&mut s, seen),
            Some(0x03) if lost_unanswered(&sql, conn, seen) => {
                let _ = s.shutdown(std::net::Shutdown::Write);
                return hold(&mut s, seen);
            }
            Some(0x03) if shuts_down(&sql, seen) => {
                let mut said = Vec::new();
                ErrorNumber { code: 1053, sql_state: *b"08S01" }.encode(b"Server shutdown in progress", 1, &mut said);
                let _ = s.write_all(&said);
                let _ = s.shutdown(std::net::Shutdown::Write);
                return hold(&mut s, seen);
            }
            Some(0x03) if sql.contains("fault_truncated") => {
                // A header announcing 100 bytes, 10 of them, then EOF.
                let _ = s.write_all(&[100, 0, 0, 1]);
                let _ = s.write_all(&[0; 10]);
                let _ = s.shutdown(std::net::Shutdown::Write);
                return hold(&mut s, seen);
            }
            Some(0x03) if sql.contains("fault_infile") => {
                // Asks for a file the statement did not name; answers OK with the bytes it got.
                if !my_send(&mut s, b"\xfb/etc/passwd", 1) {
                    return;
                }
                let (mut got, mut next) = (0u64, 2u8);
                loop {
                    let Some((seq, chunk)) = my_read(&mut s, &mut buf) else { return };
                    if seq != next {
                        return hold(&mut s, seen);
                    }
                    next = next.wrapping_add(1);
                    if chunk.is_empty() {
                        break;
                    }
                    got += chunk.len() as u64;
                }
                if !my_send(&mut s, &my_ok(got), next) {
                    return;
                }
            }
            Some(0x03) if sql.contains("fault_bad_seq") => {
                // An OK packet whose sequence id skips ahead.
                let _ = my_send(&mut s, &my_ok(u64::from(conn)), 5);
                return hold(&mut s, seen);
            }
            _ => {
                if sql.contains("fault_slow") {
                    thread::sleep(SLOW);
                }
                // `fault_in_tx` opens a transaction as far as the router can tell.
                let status =
                    SERVER_STATUS_AUTOCOMMIT | if sql.contains("fault_in_tx") { SERVER_STATUS_IN_TRANS } else { 0 };
                if !my_send(&mut s, &my_ok_with(u64::from(conn), status), 1) {
                    return;
                }
            }
        }
    }
}

/// One core; MySQL pool `fake` (one connection) on the fake backend, pool `real` on the shared
/// MariaDB primary; clients of database `fake` run their statements on the fake (a routing rule).
fn my_router(fake: &Fake, extra: &str) -> Router {
    Router::start(&my_config(fake, extra))
}

/// The config of [`my_router`].
fn my_config(fake: &Fake, extra: &str) -> String {
    let my = &dbs().my;
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.fake]\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"fake\"\nmax_connections = 1\n\
         acquire_timeout = \"10s\"\nconnect_timeout = \"1s\"\n{extra}\nbackends = [{{ host = \"127.0.0.1\", port = {fport} }}]\n\n\
         [pools.fake.health]\ninterval = \"1h\"\n\n\
         [pools.real]\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\nmax_connections = 2\n\
         acquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {rport} }}]\n\n\
         [routing]\nmysql_default_pool = \"real\"\n\n\
         [[routing.rules]]\nname = \"fake-db\"\ndatabase = \"fake\"\npool = \"fake\"\n",
        u = my.user,
        p = my.password,
        d = my.database,
        fport = fake.port,
        rport = my.primary_port,
    )
}

/// A MySQL client through the router into `db` (the pool of that name); `max_allowed_packet`
/// is given so the driver asks the (fake) server nothing at connect.
fn my_connect(port: u16, db: &str) -> Result<mysql::Conn, mysql::Error> {
    let my = &dbs().my;
    let opts = my.opts(port, &my.user, &my.password).db_name(Some(db)).max_allowed_packet(Some(4 << 20));
    mysql::Conn::new(opts)
}

fn my_real_works(real: &mut mysql::Conn) {
    let id: Option<u32> = real.query_first("SELECT @@server_id").expect("healthy pool");
    assert!(id.is_some());
}

/// The connection number the fake reports (affected rows of its OK packet).
fn my_conn(c: &mut mysql::Conn) -> u64 {
    c.query_drop("SELECT conn").expect("SELECT conn");
    c.affected_rows()
}

fn my_error(e: &mysql::Error) -> String {
    match e {
        mysql::Error::MySqlError(e) => format!("{} ({}) {}", e.code, e.state, e.message),
        other => format!("driver: {other}"),
    }
}

/// What a client logging in to the fake pool and running a statement is told; a session on the
/// healthy pool of the same router works meanwhile. The router is returned still running.
fn my_fake_login_error(fake: &Fake) -> (String, Router) {
    let r = my_router(fake, "");
    let mut real = my_connect(r.port(), &dbs().my.database).expect("real pool");
    let port = r.port();
    let res = bounded("login", move || {
        let mut c = my_connect(port, "fake").map_err(|e| my_error(&e))?;
        c.query_drop("SELECT 1").map_err(|e| my_error(&e))
    });
    my_real_works(&mut real);
    (res.expect_err("no backend login, no statement"), r)
}

#[test]
fn mysql_backend_that_never_answers_the_login_is_bounded_by_connect_timeout() {
    for login in [Login::Silent, Login::Endless] {
        let fake = Fake::start(my_serve, login);
        let (err, _r) = my_fake_login_error(&fake);
        assert!(err.starts_with("1105 ") && err.contains("connect_timeout"), "{err}");
        eventually(Duration::from_secs(10), "the router to close the stuck login", || fake.closed() >= 1);
    }
}

/// The MySQL half of [`pg_a_backend_shutting_down_is_unavailable_not_a_refusal_of_the_password`].
#[test]
fn mysql_a_backend_shutting_down_is_unavailable_not_a_refusal_of_the_password() {
    let (err, _r) = my_fake_login_error(&Fake::start(my_serve, Login::ShuttingDown));
    assert!(err.starts_with("1105 ") && err.contains("1053"), "{err}");
}

#[test]
fn mysql_backend_that_stops_answering_mid_query_is_bounded_by_query_timeout() {
    let fake = Fake::start(my_serve, Login::Normal);
    let r = my_router(&fake, "query_timeout = \"1s\"");
    let mut real = my_connect(r.port(), &dbs().my.database).expect("real pool");
    let mut c = my_connect(r.port(), "fake").expect("fake pool");
    let before = my_conn(&mut c);
    let (res, mut c) = bounded("stalled query", move || {
        let res = c.query_drop("SELECT fault_stall").map_err(|e| my_error(&e));
        (res, c)
    });
    let err = res.expect_err("the statement was bounded");
    assert!(err.starts_with("1105 "), "{err}");
    my_real_works(&mut real);
    eventually(Duration::from_secs(10), "the router to close the silent connection", || fake.closed() >= 1);
    let after = my_conn(&mut c);
    assert!(after > before, "a new connection ({before} -> {after})");
}

#[test]
fn mysql_broken_backend_packets_give_an_error_and_a_fresh_connection() {
    for fault in ["fault_truncated", "fault_bad_seq"] {
        let fake = Fake::start(my_serve, Login::Normal);
        let r = my_router(&fake, "");
        let mut real = my_connect(r.port(), &dbs().my.database).expect("real pool");
        let mut c = my_connect(r.port(), "fake").expect("fake pool");
        let before = my_conn(&mut c);
        let sql = format!("SELECT {fault}");
        let res = bounded(fault, move || c.query_drop(sql).map_err(|e| my_error(&e)));
        let err = res.expect_err("a broken backend is an error");
        assert!(err.starts_with("1105 "), "{fault}: lost-connection error, got {err}");
        my_real_works(&mut real);
        eventually(Duration::from_secs(10), "the router to close the broken connection", || fake.closed() >= 1);
        let mut c = my_connect(r.port(), "fake").expect("fake pool again");
        let after = my_conn(&mut c);
        assert!(after > before, "{fault}: a new connection ({before} -> {after})");
    }
}

/// #40, as `pg_a_lone_begin_lost_unanswered_goes_again_on_a_new_connection` for MySQL.
#[test]
fn mysql_a_lone_begin_lost_unanswered_goes_again_on_a_new_connection() {
    let fake = Fake::start(my_serve, Login::Normal);
    let r = my_router(&fake, "");
    let mut c = my_connect(r.port(), "fake").expect("fake pool");
    let first = my_conn(&mut c);
    let (res, mut c) = bounded("lost BEGIN", move || {
        let res = c.query_drop("START TRANSACTION /* fault_lost_once */").map_err(|e| my_error(&e));
        (res, c)
    });
    res.expect("the BEGIN went again on a new connection");
    assert!(my_conn(&mut c) > first, "the session goes on on a new connection");
    let before = fake.logins();
    let (res, mut c) = bounded("always lost", move || {
        let res = c.query_drop("BEGIN /* fault_lost_always */").map_err(|e| my_error(&e));
        (res, c)
    });
    let err = res.expect_err("lost every time");
    assert!(err.starts_with("1105 "), "{err}");
    assert_eq!(fake.logins(), before + 2, "three connections tried: the one the pool had, two new");
    let before = fake.logins();
    let res = bounded("not lone", move || {
        let res = c.query_drop("XA START 'x' /* fault_lost_always */").map_err(|e| my_error(&e));
        res.and_then(|()| c.query_drop("SELECT 1").map_err(|e| my_error(&e)))
    });
    assert!(res.expect_err("not sent again").starts_with("1105 "));
    assert!(fake.logins() <= before + 1, "an XA START, which the client names, is sent once");
}

/// #40: a server shutting down answers a statement with its last words (PostgreSQL's FATAL
/// 57P01, MariaDB's 1053) and closes the connection: the connection's loss, not the statement's
/// error. A lone BEGIN goes again on a new connection; a write is reported as lost, maybe not
/// completed (`lost`: the error's code), and the session goes on. `run` sends a statement,
/// `conn` names the fake's connection the session is on.
fn shutdown_under_a_statement_is_a_loss<C: Send + 'static>(
    mut c: C,
    run: fn(&mut C, &str) -> Result<(), String>,
    conn: fn(&mut C) -> u64,
    lost: &str,
) {
    let first = conn(&mut c);
    let (res, mut c) = bounded("BEGIN at shutdown", move || (run(&mut c, "BEGIN /* fault_shutdown_once */"), c));
    res.expect("the BEGIN went again on a new connection");
    assert!(conn(&mut c) > first, "the session goes on on a new connection");
    run(&mut c, "COMMIT").expect("COMMIT");
    let (res, mut c) =
        bounded("write at shutdown", move || (run(&mut c, "UPDATE t SET a = 1 /* fault_shutdown_always */"), c));
    let err = res.expect_err("the write's connection was lost");
    assert!(err.starts_with(lost) && err.contains("may not have completed"), "{err}");
    conn(&mut c);
}

#[test]
fn pg_a_server_shutting_down_under_a_statement_is_its_connections_loss() {
    let fake = Fake::start(pg_serve, Login::Normal);
    let r = pg_router(&fake, "");
    let run = |c: &mut postgres::Client, sql: &str| c.simple_query(sql).map(drop).map_err(|e| describe(&e));
    shutdown_under_a_statement_is_a_loss(r.pg("fake"), run, |c| u64::from(pg_conn(c)), "08006");
}

#[test]
fn mysql_a_server_shutting_down_under_a_statement_is_its_connections_loss() {
    let fake = Fake::start(my_serve, Login::Normal);
    let r = my_router(&fake, "");
    let run = |c: &mut mysql::Conn, sql: &str| c.query_drop(sql).map_err(|e| my_error(&e));
    shutdown_under_a_statement_is_a_loss(my_connect(r.port(), "fake").expect("fake pool"), run, my_conn, "1105 ");
}

/// #40, as `pg_a_lone_begin_goes_past_every_connection_that_died_with_its_own` for MySQL.
#[test]
fn mysql_a_lone_begin_goes_past_every_connection_that_died_with_its_own() {
    let fake = Fake::start(my_serve, Login::Normal);
    let r = Router::start(&my_config(&fake, "").replacen("max_connections = 1", "max_connections = 4", 1));
    let port = r.port();
    // Four statements at once: four connections, then idle in the pool.
    let clients: Vec<_> = (0..4).map(|_| my_connect(port, "fake").expect("fake pool")).collect();
    let slow: Vec<_> = clients
        .into_iter()
        .map(|mut c| thread::spawn(move || c.query_drop("SELECT fault_slow").map_err(|e| my_error(&e))))
        .collect();
    for t in slow {
        t.join().expect("client thread").expect("slow statement");
    }
    let old = fake.logins();
    assert!(old >= 4, "four connections in the pool (and the health probe's at start): {old}");
    let mut c = my_connect(port, "fake").expect("fake pool");
    let (res, mut c) = bounded("BEGIN past dead connections", move || {
        let res = c.query_drop("START TRANSACTION /* fault_lost_old */").map_err(|e| my_error(&e));
        (res, c)
    });
    res.expect("the BEGIN went again past every dead connection");
    assert_eq!(fake.seen.lost_upto.load(Ordering::SeqCst), old, "the pool's connections died");
    assert_eq!(my_conn(&mut c), u64::from(old) + 1, "the session goes on on a new connection");
}

/// #40, as `pg_a_read_lost_unanswered_gets_its_rows_from_a_new_connection` for MySQL (the fake
/// answers with the connection's number).
#[test]
fn mysql_a_read_lost_unanswered_gets_its_answer_from_a_new_connection() {
    let fake = Fake::start(my_serve, Login::Normal);
    let r = my_router(&fake, "");
    let mut c = my_connect(r.port(), "fake").expect("fake pool");
    let lost = my_conn(&mut c); // the pool's one connection, which the read then meets dead
    let before = fake.logins();
    let (res, c) = bounded("lost read", move || {
        let res = c.query_drop("SELECT conn /* fault_lost_once */").map_err(|e| my_error(&e));
        (res, c)
    });
    res.expect("the read went again on a new connection");
    // On a loaded host a new connection may time out at connect (`connect_timeout = "1s"`)
    // and the next one answer: a connection opened after the loss, not necessarily the next.
    assert!(
        c.affected_rows() > u64::from(before).max(lost),
        "its answer came from a new connection: {}",
        c.affected_rows()
    );
}

/// #40's limits, as `pg_a_statement_with_effect_lost_unanswered_is_not_sent_again` for MySQL.
#[test]
fn mysql_a_statement_with_effect_lost_unanswered_is_not_sent_again() {
    for sql in NOT_SENT_AGAIN.into_iter().chain(["SELECT RAND() /* fault_lost_once */"]) {
        let fake = Fake::start(my_serve, Login::Normal);
        let r = my_router(&fake, "");
        let c = my_connect(r.port(), "fake").expect("fake pool");
        let res = bounded(sql, move || {
            let mut c = c;
            sql.split("; ").try_for_each(|one| c.query_drop(one).map_err(|e| my_error(&e)))
        });
        let err = res.expect_err(sql);
        // In a transaction the session ends with it (1927, or the close, as the driver reads it).
        let ended = sql.contains("fault_in_tx") && (err.starts_with("1927 ") || err.starts_with("driver:"));
        assert!(err.starts_with("1105 ") || ended, "{sql}: {err}");
    }
}

/// A server that asks for a local file (`/etc/passwd`, whatever the statement said), through a
/// pool with `local_infile`, to a client that allows local files: for a statement that is not
/// LOAD DATA LOCAL INFILE the router sends the server an empty file itself and the client gets
/// 1148, its handler never asked; for a LOAD DATA LOCAL INFILE the request reaches the client
/// unchanged (the client decides) and the file the client sends reaches the server. The
/// connection stays in step either way.
#[test]
fn mysql_file_requests_are_relayed_only_for_load_data_local() {
    let fake = Fake::start(my_serve, Login::Normal);
    let r = my_router(&fake, "local_infile = true");
    let mut c = my_connect(r.port(), "fake").expect("fake pool");
    let before = my_conn(&mut c);
    let asked = Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let seen = asked.clone();
    c.set_local_infile_handler(Some(mysql::LocalInfileHandler::new(move |name, w| {
        seen.lock().expect("lock").push(String::from_utf8_lossy(name).into_owned());
        w.write_all(b"1,x\n")
    })));
    let (res, mut c) = bounded("unrequested file", move || {
        let res = c.query_drop("SELECT fault_infile").map_err(|e| my_error(&e));
        (res, c)
    });
    let err = res.expect_err("refused");
    assert!(err.starts_with("1148 (42000) the server asked for a local file"), "{err}");
    assert!(asked.lock().expect("lock").is_empty(), "the client was never asked");
    assert_eq!(my_conn(&mut c), before, "the same connection, still in step");

    let (res, mut c) = bounded("requested file", move || {
        let res = c.query_drop("LOAD DATA LOCAL INFILE 'fault_infile.csv' INTO TABLE t").map_err(|e| my_error(&e));
        (res, c)
    });
    res.expect("the load runs");
    assert_eq!(c.affected_rows(), 4, "the fake got the client's 4 bytes");
    assert_eq!(*asked.lock().expect("lock"), ["/etc/passwd"], "the request reached the client unchanged");
    assert_eq!(my_conn(&mut c), before, "the same connection, still in step");
}
