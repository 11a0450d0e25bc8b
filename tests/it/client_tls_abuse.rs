//! Issue #38, bad input at the TLS layer touches no other session: garbage after a MySQL
//! SSLRequest, TLS records cut short mid-handshake on both protocols, and thousands of
//! handshakes that never finish while another client queries on the same core. Every stalled
//! connection is closed at the login deadline (15 s, which a handshake counts against) without a
//! plaintext byte in its TLS. The mass test runs the router binary as a child process, so each
//! end of its 10,000 connections lives in its own process under the open-file limit; the
//! router's memory per pending handshake is read from that child's RSS.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;

use crate::abuse::heavy;
use crate::client_tls::{certs, my_router, pg_router_config, tls_keys};
use crate::mysql_session::client;
use crate::support::{eventually, free_port};

/// The ClientHello rustls sends first, trusting the tests' CA, with ALPN `postgresql` when
/// `alpn`: one whole TLS record.
fn client_hello(alpn: bool) -> Vec<u8> {
    use rustls::pki_types::{pem::PemObject, CertificateDer, ServerName};
    let mut roots = rustls::RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(certs().path("ca.crt")).expect("ca.crt")).expect("root");
    // The router's provider (see src/control/tls.rs).
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    if alpn {
        config.alpn_protocols = vec![b"postgresql".to_vec()];
    }
    let name = ServerName::try_from("localhost").expect("name");
    let mut conn = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
    let mut hello = Vec::new();
    conn.write_tls(&mut hello).expect("ClientHello");
    hello
}

/// The first bytes of a record that announces 512 bytes of handshake and brings 2 of them.
const TRUNCATED: [u8; 7] = [0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00];

fn connect(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(90))).expect("timeout");
    s
}

const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// Finishes stalling a PostgreSQL connection that sent an SSLRequest: reads the `S` and sends
/// `bytes` (and nothing more).
fn stall_after_s(s: &mut TcpStream, bytes: &[u8]) {
    let mut answer = [0u8];
    s.read_exact(&mut answer).expect("answer");
    assert_eq!(answer[0], b'S');
    s.write_all(bytes).expect("handshake bytes");
}

/// A MySQL connection after the greeting and a 32-byte SSLRequest (CLIENT_SSL with protocol
/// 4.1), then `bytes`.
fn after_mysql_ssl_request(port: u16, bytes: &[u8]) -> TcpStream {
    let mut s = connect(port);
    let mut header = [0u8; 4];
    s.read_exact(&mut header).expect("greeting header");
    let len = u32::from_le_bytes([header[0], header[1], header[2], 0]) as usize;
    let mut greeting = vec![0u8; len];
    s.read_exact(&mut greeting).expect("greeting");
    // CLIENT_LONG_PASSWORD | CLIENT_PROTOCOL_41 | CLIENT_SSL | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH
    let caps: u32 = 0x1 | 0x200 | 0x800 | 0x8000 | 0x8_0000;
    let mut packet = vec![32, 0, 0, 1];
    packet.extend_from_slice(&caps.to_le_bytes());
    packet.extend_from_slice(&(16u32 << 20).to_le_bytes());
    packet.push(33);
    packet.extend_from_slice(&[0; 23]);
    packet.extend_from_slice(bytes);
    s.write_all(&packet).expect("SSLRequest");
    s
}

/// Reads until the router closes `s`: what it sent meanwhile, and when it closed.
fn until_closed(s: &mut TcpStream) -> (Vec<u8>, Instant) {
    let mut all = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return (all, Instant::now()),
            Ok(n) => all.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return (all, Instant::now()),
            Err(e) => panic!("the router did not close the connection: {e}"),
        }
    }
}

/// TLS records only (content types 20..=23; TLS 1.3 sends its encrypted handshake as 23): no
/// plaintext error in the middle of a handshake.
fn only_handshake_records(mut sent: &[u8]) -> bool {
    while sent.len() >= 5 {
        let len = u16::from_be_bytes([sent[3], sent[4]]) as usize;
        if !(20..=23).contains(&sent[0]) || sent.len() < 5 + len {
            return false;
        }
        sent = &sent[5 + len..];
    }
    sent.is_empty()
}

/// Connections the router holds (sessions being logged in included), after checking no
/// session panicked.

#[test]
fn mysql_garbage_and_records_cut_short_after_sslrequest_touch_no_other_session() {
    let r = my_router(&tls_keys("allow", "server", ""));
    let mut other = client(&r);
    // Garbage where the ClientHello belongs: closed, with a TLS alert at most.
    let mut garbage = after_mysql_ssl_request(r.port(), b"this is not a TLS record at all\r\n");
    let (sent, _) = until_closed(&mut garbage);
    assert!(only_handshake_records(&sent) && sent.first().is_none_or(|t| *t == 21), "{sent:?}");
    // A record cut short, and a whole ClientHello with no answer to the router's flight.
    let mut cut = after_mysql_ssl_request(r.port(), &TRUNCATED);
    let mut silent = after_mysql_ssl_request(r.port(), &client_hello(false));
    for i in 0..50 {
        let v: Option<i64> = other.query_first(format!("SELECT {i}")).expect("the other session");
        assert_eq!(v, Some(i));
    }
    let mut fresh = client(&r);
    assert_eq!(fresh.query_first::<i64, _>("SELECT 42").expect("a new session"), Some(42));
    // Both are closed at the login deadline, nothing but the router's handshake flight sent.
    let (sent, _) = until_closed(&mut cut);
    assert_eq!(sent, Vec::<u8>::new());
    let (sent, _) = until_closed(&mut silent);
    assert!(!sent.is_empty() && only_handshake_records(&sent), "{sent:?}");
    assert_eq!(other.query_first::<i64, _>("SELECT 7").expect("after"), Some(7));
}

/// How many stalled handshakes the mass test opens: the 10,000, or what the open-file
/// limit leaves this process beside the rest of the suite (the router child holds the other end).
fn stalled_count() -> usize {
    let mut limit = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit writes the struct it is given.
    assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) }, 0);
    (limit.rlim_cur as usize).saturating_sub(4000).min(10_000)
}

/// The router binary as a child process: one PostgreSQL listener with TLS `keys` on `port`,
/// pool `app`, and its metrics on `metrics`.
struct Child {
    process: std::process::Child,
    port: u16,
    metrics: u16,
    _dir: tempfile::TempDir,
}

impl Child {
    fn start(keys: &str) -> Self {
        let (port, metrics) = (free_port(), free_port());
        let toml = pg_router_config(keys).replacen("127.0.0.1:0", &format!("127.0.0.1:{port}"), 1)
            + &format!("\n[metrics]\nenabled = true\nbind = \"127.0.0.1:{metrics}\"\n");
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("querypilot.toml");
        std::fs::write(&path, toml).expect("write config");
        let process = std::process::Command::new(env!("CARGO_BIN_EXE_querypilot"))
            .arg("-c")
            .arg(&path)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start the router binary");
        let child = Child { process, port, metrics, _dir: dir };
        eventually(Duration::from_secs(20), "the router binary to serve", || {
            TcpStream::connect(("127.0.0.1", child.metrics)).is_ok() && plain_at(child.port).is_ok()
        });
        child
    }

    /// Sessions open in the child; no session may have panicked.
    fn sessions(&self) -> u64 {
        let mut s = TcpStream::connect(("127.0.0.1", self.metrics)).expect("metrics");
        s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n").expect("scrape");
        let mut text = String::new();
        s.read_to_string(&mut text).expect("metrics text");
        let sum = |name: &str| -> f64 {
            let values = text.lines().filter(|l| l.starts_with(name) && l[name.len()..].starts_with('{'));
            values.filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
        };
        assert_eq!(sum("sqp_session_panics_total"), 0.0, "a session panicked");
        sum("sqp_sessions_active") as u64
    }

    fn rss_kib(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.process.id())).expect("child status");
        let line = status.lines().find_map(|l| l.strip_prefix("VmRSS:")).expect("VmRSS line");
        line.trim().trim_end_matches("kB").trim().parse().expect("VmRSS value")
    }
}

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.process.kill();
        let _ = self.process.wait();
    }
}

/// A plaintext login as app to the router on `port`.
fn plain_at(port: u16) -> Result<postgres::Client, postgres::Error> {
    let mut c = postgres::Config::new();
    c.host("127.0.0.1").port(port).user("app").password("app").dbname("app");
    c.connect_timeout(Duration::from_secs(20));
    c.connect(postgres::NoTls)
}

#[test]
fn ten_thousand_unfinished_handshakes_are_closed_at_the_deadline_while_another_client_is_served() {
    let _heavy = heavy();
    let n = stalled_count();
    assert!(n >= 1000, "the open-file limit allows only {n} stalled handshakes");
    let r = Child::start(&tls_keys("allow", "server", ""));
    let mut other = plain_at(r.port).expect("the other session");
    let hello = (client_hello(false), client_hello(true));
    let before_kib = r.rss_kib();
    let started = Instant::now();
    // Half after an SSLRequest, half as direct TLS; one in a hundred of each sends a whole ClientHello
    // (the router answers with its flight and waits for the client's), the rest a record cut
    // short. The SSLRequests all go out before their answers are read, so that thousands are
    // pending well within the deadline even in a debug build on a loaded machine.
    let kind = |i: usize| (i % 2 == 1, i % 200 < 2);
    let open = |i: usize| {
        let mut s = connect(r.port);
        let first: &[u8] = match kind(i) {
            (false, _) => &SSL_REQUEST,
            (true, false) => &TRUNCATED,
            (true, true) => &hello.1,
        };
        s.write_all(first).expect("first bytes");
        (s, Instant::now())
    };
    // Opened from several threads, so that all of them are pending well before the first one's
    // deadline on a loaded machine too; kept in index order.
    const OPENERS: usize = 4;
    let mut stalled: Vec<(TcpStream, Instant)> = thread::scope(|scope| {
        let workers: Vec<_> =
            (0..OPENERS).map(|w| scope.spawn(move || (w..n).step_by(OPENERS).map(open).collect::<Vec<_>>())).collect();
        let mut parts: Vec<_> = workers.into_iter().map(|h| h.join().expect("opener").into_iter()).collect();
        (0..n).map(|i| parts[i % OPENERS].next().expect("opened")).collect()
    });
    for (i, (s, _)) in stalled.iter_mut().enumerate() {
        match kind(i) {
            (false, false) => stall_after_s(s, &TRUNCATED),
            (false, true) => stall_after_s(s, &hello.0),
            (true, _) => {}
        }
        if i % 500 == 0 {
            let v: i32 = other.query_one("SELECT $1::int", &[&(i as i32)]).expect("served while they pile up").get(0);
            assert_eq!(v, i as i32);
        }
    }
    let opened = started.elapsed();
    // They pile up in the router: all of them at once on a quiet machine (10,000 opened in
    // 7.6–9.6 s by a debug build). A loaded one may open the last after the first's deadline,
    // so at least half must be pending together; each one's own deadline is checked below.
    let mut peak = 0;
    while peak < n as u64 && started.elapsed() < Duration::from_secs(14) {
        peak = peak.max(r.sessions().saturating_sub(1));
        thread::sleep(Duration::from_millis(50));
    }
    assert!(peak >= n as u64 / 2, "only {peak} of {n} were pending at once (opened in {opened:?})");
    let pending_kib = r.rss_kib();
    let per_handshake = (pending_kib.saturating_sub(before_kib) * 1024) as usize / peak as usize;
    eprintln!(
        "{n} stalled handshakes opened in {opened:?}, {peak} pending at once; RSS {before_kib} -> {pending_kib} KiB: {per_handshake} bytes each"
    );
    assert!(per_handshake < 64 * 1024, "{per_handshake} bytes per pending handshake");
    // The other client, and new logins, are served while they wait for their deadline.
    let closer = thread::spawn(move || {
        stalled
            .into_iter()
            .enumerate()
            .map(|(i, (mut s, opened))| {
                let (sent, closed) = until_closed(&mut s);
                let ok = if kind(i).1 { !sent.is_empty() && only_handshake_records(&sent) } else { sent.is_empty() };
                assert!(ok, "stalled connection {i} got {sent:?}");
                closed - opened
            })
            .collect::<Vec<_>>()
    });
    let mut served = 0;
    while !closer.is_finished() {
        let v: i32 = other.query_one("SELECT $1::int", &[&served]).expect("served while they wait").get(0);
        assert_eq!(v, served);
        let mut fresh = plain_at(r.port).expect("a new login");
        assert_eq!(fresh.query_one("SELECT 1", &[]).expect("new session").get::<_, i32>(0), 1);
        served += 1;
        thread::sleep(Duration::from_millis(200));
    }
    let lived = closer.join().expect("every stalled connection closed");
    let (first, last) = (lived.iter().min().copied(), lived.iter().max().copied());
    eprintln!("closed after {first:?}..{last:?}; {served} rounds of queries and new logins meanwhile");
    // The login deadline closed them, not something sooner.
    assert!(first >= Some(Duration::from_secs(14)), "a stalled handshake closed after {first:?}");
    assert!(served > 0);
    // Only the other session is left (the last new login's close may still be on its way).
    let t = Instant::now();
    while r.sessions() != 1 {
        assert!(t.elapsed() < Duration::from_secs(10), "{} sessions left", r.sessions());
        thread::sleep(Duration::from_millis(50));
    }
    eprintln!("RSS after they closed: {} KiB", r.rss_kib());
}
