//! Issue #40, binary upgrade: the built binary started with `--take-over` takes the listening
//! sockets (client and admin) from a running router over its `general.handover_socket`; clients
//! connecting before, during and after are served without a refused or reset connection, and
//! the old process exits. A hand-over in another format, or from another uid, is refused and
//! the old router keeps serving.
//!
//! Sessions moving with their state: `upgrade.rs`.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use std::os::fd::AsFd;

use querypilot::config::Protocol;
use querypilot::handover::unix::Channel;
use querypilot::handover::wire::{self, Frame, ListenerEntry, Listeners, Session, FORMAT_VERSION, MAGIC};
use querypilot::id::{CancelKey, CoreId};

use crate::pg_raw::Raw;
use crate::router::{pg_config, pg_pool};
use crate::support::{dbs, eventually, free_port};

/// One router process of a test, its log kept for failures.
pub(crate) struct Proc {
    child: Child,
    log: PathBuf,
}

impl Proc {
    pub(crate) fn start(dir: &Path, name: &str, toml: &str, take_over: Option<&Path>) -> Proc {
        let config = dir.join(format!("{name}.toml"));
        std::fs::write(&config, toml).expect("write config");
        let log = dir.join(format!("{name}.log"));
        let out = std::fs::File::create(&log).expect("log file");
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_querypilot"));
        cmd.arg("-c").arg(&config).stdout(Stdio::from(out.try_clone().expect("dup"))).stderr(Stdio::from(out));
        if let Some(socket) = take_over {
            cmd.arg("--take-over").arg(socket);
        }
        Proc { child: cmd.spawn().expect("start the router"), log }
    }

    /// Whether the process is still running.
    pub(crate) fn running(&mut self) -> bool {
        self.child.try_wait().expect("wait").is_none()
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits for the process to exit, at most `limit`.
    pub(crate) fn exit_within(&mut self, limit: Duration, what: &str) -> std::process::ExitStatus {
        let t = Instant::now();
        loop {
            if let Some(s) = self.child.try_wait().expect("wait") {
                return s;
            }
            if t.elapsed() > limit {
                let _ = self.child.kill();
                panic!("{what} did not exit within {limit:?}; its log:\n{}", self.log());
            }
            thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

struct Setup {
    dir: tempfile::TempDir,
    port: u16,
    socket: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join("handover.sock");
        Setup { port: free_port(), socket, dir }
    }

    fn config(&self, cores: &[usize]) -> String {
        let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 4);
        pg_config(cores, &pools, "main").replace("127.0.0.1:0", &format!("127.0.0.1:{}", self.port)).replace(
            "shutdown_drain = \"2s\"",
            &format!(
                "shutdown_drain = \"2s\"\nhandover_socket = \"{}\"\nhandover_wait = \"3s\"",
                self.socket.display()
            ),
        ) + // Port 0: the admin ports are read from the log; the hand-over keeps them.
        "\n[metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n"
    }

    fn start(&self, name: &str, cores: &[usize], take_over: bool) -> Proc {
        let take = take_over.then_some(self.socket.as_path());
        Proc::start(self.dir.path(), name, &self.config(cores), take)
    }

    /// A login and a statement through the router.
    fn query(&self) -> Result<i32, postgres::Error> {
        let mut c = postgres::Config::new();
        c.host("127.0.0.1").port(self.port).user("app").password("app").dbname("main");
        c.connect_timeout(Duration::from_secs(20));
        let mut client = c.connect(postgres::NoTls)?;
        client.query_one("SELECT 1", &[]).map(|r| r.get(0))
    }

    /// Waits until the router serves clients and its socket is there; returns its `/metrics`
    /// port.
    fn wait_serving(&self, p: &mut Proc) -> u16 {
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.query().is_err() || !self.socket.exists() {
            if let Some(status) = p.child.try_wait().expect("wait") {
                panic!("the router exited ({status:?}):\n{}", p.log());
            }
            assert!(Instant::now() < deadline, "the router does not serve; its log:\n{}", p.log());
            thread::sleep(Duration::from_millis(50));
        }
        let log = strip_colours(&p.log());
        let at = log.split("metrics=127.0.0.1:").nth(1).expect("the admin server's address in the log");
        at.split(|c: char| !c.is_ascii_digit()).next().and_then(|n| n.parse().ok()).expect("a port")
    }

    fn metrics_up(&self, port: u16) -> bool {
        let Ok(mut s) = std::net::TcpStream::connect(("127.0.0.1", port)) else { return false };
        let _ = s.set_read_timeout(Some(Duration::from_secs(5)));
        let _ = s.write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        out.starts_with("HTTP/1.1 200") && out.contains("sqp_")
    }
}

#[test]
fn a_new_binary_takes_the_listeners_and_clients_keep_being_served() {
    let setup = Arc::new(Setup::new());
    let mut old = setup.start("old", &[0, 1], false);
    let metrics = setup.wait_serving(&mut old);
    assert!(setup.metrics_up(metrics), "the old router serves /metrics");
    assert_eq!(
        std::fs::metadata(&setup.socket).expect("socket").permissions().mode() & 0o777,
        0o600,
        "only the router's user may connect to the hand-over socket"
    );

    // Clients connect in a loop through the whole hand-over.
    let stop = Arc::new(AtomicBool::new(false));
    let looping = {
        let (setup, stop) = (setup.clone(), stop.clone());
        thread::spawn(move || {
            let (mut served, mut failed) = (0u32, Vec::new());
            while !stop.load(Ordering::Acquire) {
                match setup.query() {
                    Ok(1) => served += 1,
                    Ok(n) => failed.push(format!("SELECT 1 returned {n}")),
                    Err(e) => failed.push(format!("{e:?}")),
                }
            }
            (served, failed)
        })
    };
    // And bare connections, many per second: each sends an SSLRequest and must get the
    // router's one-byte answer, so that connections arriving at the switch itself are counted.
    let probes: Vec<_> = (0..4)
        .map(|_| {
            let (port, stop) = (setup.port, stop.clone());
            thread::spawn(move || {
                let (mut answered, mut lost) = (0u32, Vec::new());
                while !stop.load(Ordering::Acquire) {
                    match ssl_request(port) {
                        Ok(_) => answered += 1,
                        Err(e) => lost.push(e.to_string()),
                    }
                }
                (answered, lost)
            })
        })
        .collect();
    thread::sleep(Duration::from_millis(300));

    // One core fewer: old core 1's sockets go to new core 0.
    let mut new = setup.start("new", &[0], true);
    let status = old.exit_within(Duration::from_secs(20), "the old router");
    assert!(status.success(), "the old router exits 0 after handing over: {status:?}\n{}", old.log());
    thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Release);
    let (served, failed) = looping.join().expect("client loop");
    // A client logged in on the old process when it hands over moves with its session
    // (`tests/it/upgrade.rs` for what moves); one logging in meanwhile is served by either.
    eprintln!("hand-over: {served} logins served in the loop, {} failed: {failed:?}", failed.len());
    assert!(failed.is_empty(), "no login or query failed across the hand-over: {failed:?}\nold:\n{}", old.log());
    let (mut answered, mut probes_lost) = (0, Vec::new());
    for p in probes {
        let (a, l) = p.join().expect("probe loop");
        answered += a;
        probes_lost.extend(l);
    }
    eprintln!("hand-over: {answered} bare connections answered, {} lost", probes_lost.len());
    assert!(
        probes_lost.is_empty(),
        "no bare connection refused, reset or closed unanswered: {probes_lost:?}\nold:\n{}\nnew:\n{}",
        old.log(),
        new.log()
    );

    // The old process is gone: whatever answers now is the new one.
    assert!(new.child.try_wait().expect("wait").is_none(), "the new router runs:\n{}", new.log());
    assert_eq!(setup.query().expect("a client after the hand-over"), 1);
    assert!(setup.metrics_up(metrics), "the new router serves /metrics on the same port:\n{}", new.log());
    assert!(served > 0, "the loop ran");
    assert!(old.log().contains("hand-over finished"), "old log:\n{}", old.log());
    assert!(new.log().contains("took the listeners over"), "new log:\n{}", new.log());
    assert!(new.log().contains("hand-over complete"), "the old process said Done:\n{}", new.log());
    // The new router listens on the hand-over socket in turn (the old one left it alone).
    eventually(Duration::from_secs(30), "the new hand-over socket", || UnixStream::connect(&setup.socket).is_ok());
}

/// Connects, sends an SSLRequest and reads the router's answer: `N` (no TLS here) or, from a
/// router going away, the first byte of an error message. Refused, reset or a close without an
/// answer is an error.
fn ssl_request(port: u16) -> std::io::Result<u8> {
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(20)))?;
    s.write_all(&[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f])?;
    let mut answer = [0u8; 1];
    s.read_exact(&mut answer)?;
    match answer[0] {
        b'N' | b'E' => Ok(answer[0]),
        other => Err(std::io::Error::other(format!("unexpected answer {other}"))),
    }
}

/// Sends `hello` over the router's socket and returns its answer.
fn hello(socket: &Path, hello: &Frame) -> Frame {
    let mut s = UnixStream::connect(socket).expect("connect to the hand-over socket");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    let mut out = Vec::new();
    wire::encode(hello, &mut out).expect("encode");
    s.write_all(&out).expect("write Hello");
    read_frame(&mut s)
}

fn read_frame(s: &mut impl Read) -> Frame {
    let mut buf = Vec::new();
    loop {
        if let Some((f, _)) = wire::decode(&buf).expect("a valid frame") {
            return f;
        }
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).expect("read");
        assert!(n > 0, "the router closed without answering");
        buf.extend_from_slice(&chunk[..n]);
    }
}

#[test]
fn another_format_or_magic_is_refused_the_router_keeps_serving_and_then_hands_over_twice() {
    let setup = Setup::new();
    let mut old = setup.start("old", &[0], false);
    let metrics = setup.wait_serving(&mut old);

    let answer = hello(&setup.socket, &Frame::Hello { magic: MAGIC, version: FORMAT_VERSION + 1, pid: 1 });
    let expected =
        format!("the running router speaks hand-over format {FORMAT_VERSION}, this binary {}", FORMAT_VERSION + 1);
    assert_eq!(answer, Frame::Refuse { reason: expected });
    let answer = hello(&setup.socket, &Frame::Hello { magic: *b"NOTQPILO", version: FORMAT_VERSION, pid: 1 });
    assert!(matches!(&answer, Frame::Refuse { reason } if reason.contains("magic")), "{answer:?}");

    assert_eq!(setup.query().expect("served after the refusals"), 1);
    assert!(setup.metrics_up(metrics), "the admin server still runs");
    assert!(old.child.try_wait().expect("wait").is_none(), "the old router keeps running");
    assert!(old.log().contains("hand-over refused"), "the refusal is logged:\n{}", old.log());

    // The socket still takes a real hand-over afterwards; the new process's second core has
    // no socket of the old one and binds its own beside the inherited one.
    let mut new = setup.start("new", &[0, 1], true);
    let status = old.exit_within(Duration::from_secs(20), "the old router");
    assert!(status.success(), "{status:?}");
    for _ in 0..6 {
        assert_eq!(setup.query().expect("served by the new router, on either socket"), 1);
    }
    assert!(new.child.try_wait().expect("wait").is_none(), "{}", new.log());

    // A second upgrade in a row: the new router hands over in turn, its two sockets (inherited
    // and own) to one core.
    eventually(Duration::from_secs(30), "the new hand-over socket", || UnixStream::connect(&setup.socket).is_ok());
    let mut third = setup.start("third", &[0], true);
    let status = new.exit_within(Duration::from_secs(20), "the second router");
    assert!(status.success(), "{status:?}\n{}", new.log());
    assert_eq!(setup.query().expect("served by the third router"), 1);
    assert!(third.child.try_wait().expect("wait").is_none(), "{}", third.log());
}

#[test]
fn another_uid_is_refused() {
    // SAFETY: getuid cannot fail.
    if unsafe { libc::getuid() } != 0 {
        // Only root can run a peer as another user; the 0600 mode is asserted by the test above.
        eprintln!("skipped: not root");
        return;
    }
    let setup = Setup::new();
    let mut old = setup.start("old", &[0], false);
    setup.wait_serving(&mut old);
    // Let another user reach the socket file, so that the peer credentials are what refuse.
    std::fs::set_permissions(setup.dir.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod dir");
    std::fs::set_permissions(&setup.socket, std::fs::Permissions::from_mode(0o666)).expect("chmod socket");
    let mut hello_bytes = Vec::new();
    wire::encode(&Frame::Hello { magic: MAGIC, version: FORMAT_VERSION, pid: 1 }, &mut hello_bytes).expect("encode");
    let script = "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.connect(sys.argv[1])\n\
                  s.sendall(bytes.fromhex(sys.argv[2]))\ns.settimeout(10)\nb=b''\n\
                  while True:\n  c=s.recv(4096)\n  if not c: break\n  b+=c\nsys.stdout.write(b.hex())\n";
    let hex: String = hello_bytes.iter().map(|b| format!("{b:02x}")).collect();
    let out = std::os::unix::process::CommandExt::uid(Command::new("/usr/bin/python3").args(["-c", script]), 65534)
        .arg(&setup.socket)
        .arg(hex)
        .output()
        .expect("run python3 as uid 65534");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let answer: Vec<u8> = (0..out.stdout.len() / 2)
        .map(|i| u8::from_str_radix(std::str::from_utf8(&out.stdout[2 * i..2 * i + 2]).expect("hex"), 16).expect("hex"))
        .collect();
    let (frame, _) = wire::decode(&answer).expect("a frame").expect("a whole frame");
    assert!(matches!(&frame, Frame::Refuse { reason } if reason.contains("uid 65534")), "{frame:?}\n{}", old.log());
    assert_eq!(setup.query().expect("served after the refusal"), 1);
}

/// A stand-in for the old process, speaking the format by hand: what the new binary does with
/// each frame is observable from outside.
struct FakeOld {
    listener: std::os::unix::net::UnixListener,
    socket: PathBuf,
}

impl FakeOld {
    fn new(dir: &Path) -> FakeOld {
        let socket = dir.join("fake-old.sock");
        FakeOld { listener: std::os::unix::net::UnixListener::bind(&socket).expect("bind"), socket }
    }

    /// Accepts the new binary and reads its Hello.
    fn greet(&self) -> Channel {
        let (sock, _) = self.listener.accept().expect("the new binary connects");
        sock.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
        let mut channel = Channel::new(sock);
        let (hello, fds) = channel.recv().expect("Hello");
        assert!(fds.is_empty());
        assert!(matches!(hello, Frame::Hello { magic: MAGIC, version: FORMAT_VERSION, pid } if pid > 0), "{hello:?}");
        channel
    }
}

/// Pool `main` behind a PostgreSQL listener on `port` asking for MD5 (so a raw client reads
/// its cancel key), on one core, without admin ports.
fn fake_old_config(port: u16) -> String {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 4);
    pg_config(&[0], &pools, "main")
        .replace("bind = \"127.0.0.1:0\"\n", &format!("bind = \"127.0.0.1:{port}\"\nauth_method = \"md5\"\n"))
}

#[test]
fn the_new_binary_serves_the_sockets_it_is_given_and_issues_keys_above_the_old_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = FakeOld::new(dir.path());
    // The old process's listener: bound without SO_REUSEPORT, so the new binary can only serve
    // this port through the socket it is handed.
    let tcp = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = tcp.local_addr().expect("addr").port();
    let mut new = Proc::start(dir.path(), "new", &fake_old_config(port), Some(&old.socket));
    let mut channel = old.greet();
    channel.send(&Frame::Accept { pid: 1 }, &[]).expect("Accept");
    // Old core 1's socket (1 % 1 = core 0); keys of old core 1 went up to 5000.
    let listeners =
        Listeners { next_seq: vec![0, 5000], entries: vec![ListenerEntry { core: 1, listener: 0 }], admin: false };
    channel.send(&Frame::Listeners(listeners), &[tcp.as_fd()]).expect("Listeners");
    drop(tcp);

    let deadline = Instant::now() + Duration::from_secs(30);
    let (_client, pid, _) = loop {
        match Raw::login_keyed(port, "main", "app") {
            Ok(ok) => break ok,
            Err(e) => {
                assert!(Instant::now() < deadline, "no login on the handed socket: {e:?}\n{}", new.log());
                thread::sleep(Duration::from_millis(50));
            }
        }
    };
    assert_eq!(pid >> 24, 0, "a key of new core 0");
    assert!(pid & 0xff_ffff >= 5000, "new keys start above the old core's: pid {pid:#x}");

    // A client in flight: its socket goes to the core its key names, then Done ends it all.
    let (moved, peer) = tcp_pair();
    let key = CancelKey { pid: CancelKey::make_pid(CoreId(1), 7), secret: 42 };
    let session = Session { protocol: Protocol::Postgres, listener: 0, key, state: Vec::new(), backend: false };
    channel.send(&Frame::Session(session), &[moved.as_fd()]).expect("Session");
    drop(moved);
    channel.send(&Frame::Done, &[]).expect("Done");
    eventually(Duration::from_secs(10), "the new binary to finish taking over", || {
        new.log().contains("hand-over complete")
    });
    assert!(strip_colours(&new.log()).contains("adopted=1"), "{}", new.log());
    drop(peer);
    assert!(new.child.try_wait().expect("wait").is_none(), "{}", new.log());
}

#[test]
fn a_refused_take_over_exits_with_the_old_processs_reason() {
    let dir = tempfile::tempdir().expect("tempdir");
    let old = FakeOld::new(dir.path());
    let mut new = Proc::start(dir.path(), "new", &fake_old_config(free_port()), Some(&old.socket));
    let mut channel = old.greet();
    let reason = "the running router speaks hand-over format 2, this binary 1";
    channel.send(&Frame::Refuse { reason: reason.into() }, &[]).expect("Refuse");
    let status = new.exit_within(Duration::from_secs(10), "the refused binary");
    assert!(!status.success(), "a refused take-over fails");
    assert!(new.log().contains(reason), "the old process's reason is shown:\n{}", new.log());
}

/// A connected TCP socket and its peer.
fn tcp_pair() -> (std::net::TcpStream, std::net::TcpStream) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let a = std::net::TcpStream::connect(l.local_addr().expect("addr")).expect("connect");
    let (b, _) = l.accept().expect("accept");
    (b, a)
}

/// The log without the colour sequences (`\x1b[…m`) it may have.
fn strip_colours(raw: &str) -> String {
    let mut parts = raw.split('\x1b');
    let first = parts.next().unwrap_or_default().to_string();
    parts.fold(first, |log, part| log + part.split_once('m').map_or(part, |(_, rest)| rest))
}

#[test]
fn a_new_process_leaving_mid_way_crashes_nothing() {
    let setup = Setup::new();
    let mut old = setup.start("old", &[0], false);
    setup.wait_serving(&mut old);
    let mut c = postgres::Config::new();
    c.host("127.0.0.1").port(setup.port).user("app").password("app").dbname("main");
    let mut busy = c.connect(postgres::NoTls).expect("connect");
    busy.batch_execute("BEGIN").expect("BEGIN");

    // A taker that leaves once it holds the listeners.
    let mut channel = Channel::new(UnixStream::connect(&setup.socket).expect("connect"));
    channel.send(&Frame::Hello { magic: MAGIC, version: FORMAT_VERSION, pid: 1 }, &[]).expect("Hello");
    assert!(matches!(channel.recv().expect("answer").0, Frame::Accept { .. }));
    let (listeners, fds) = channel.recv().expect("Listeners");
    assert!(matches!(&listeners, Frame::Listeners(l) if l.admin && !l.entries.is_empty()), "{listeners:?}");
    assert_eq!(fds.len(), listeners.fds());
    drop((channel, fds));

    // The old process still answers the client it holds (the statement's result, or a drain's
    // 57P01 once the session is idle: the session side's call), then exits as after a drain.
    match busy.query_one("SELECT 1", &[]) {
        Ok(row) => assert_eq!(row.get::<_, i32>(0), 1),
        Err(e) => assert!(e.as_db_error().is_some(), "answered, not dropped: {e:?}\n{}", old.log()),
    }
    drop(busy);
    let status = old.exit_within(Duration::from_secs(20), "the old router");
    assert!(status.success(), "{status:?}\n{}", old.log());
    assert!(old.log().contains("hand-over finished"), "{}", old.log());
}
