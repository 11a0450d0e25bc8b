//! Issue #33, "one client cannot exhaust the router", for the client messages the router must
//! hold whole to route them: a large PostgreSQL Query, Parse or Bind, a large MySQL COM_QUERY.
//! Many clients each send one, all but its last byte, through the router (in-process, one core)
//! against the harness's real servers with a small `limits.client_buffer_budget`: what the router
//! holds stays within the budget (this process's RSS, so each test holds `abuse::heavy()`, and
//! `sqp_client_buffer_bytes{kind="messages"}`), another client is served meanwhile, and once the
//! last bytes go the clients past the budget get the server's out-of-memory error and go on,
//! the others their answer.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdout, Command, Stdio};
use std::time::Duration;

use querypilot::protocol::pg::frontend;

use crate::abuse::{heavy, vm_rss_kib, RawPg};
use crate::admin::{addrs, http, sum, with_metrics};
use crate::mysql_session::{client, my_config, my_pool};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::dbs;

/// Clients sending a large message each.
const ATTACKERS: usize = 6;

/// `sqp_client_buffer_bytes{kind="messages"}` now.
fn held_messages(router: &Router) -> f64 {
    let (metrics, _) = addrs(router);
    let text = http(metrics, "GET", "/metrics", &[]).body;
    let (v, n) = sum(&text, "sqp_client_buffer_bytes", &[r#"kind="messages""#]);
    assert_eq!(n, 1, "one process-wide series:\n{text}");
    v
}

/// How many of the PostgreSQL attackers' messages fit the budget, and how often each is
/// charged (as read, and its copy for the backend).
const FIT: usize = 2;
const COPIES: usize = 2;

/// Waits until `sqp_client_buffer_bytes{kind="messages"}` reaches `at_least`.
fn wait_held(router: &Router, at_least: f64) {
    let until = std::time::Instant::now() + Duration::from_secs(60);
    while held_messages(router) < at_least {
        assert!(std::time::Instant::now() < until, "the router read {} of {at_least} bytes", held_messages(router));
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// The largest RSS growth over `base` (KiB) seen in 2 s, sampled every 100 ms, in MiB.
fn peak_growth_mib(base: u64) -> u64 {
    let mut peak = 0;
    for _ in 0..20 {
        peak = peak.max(vm_rss_kib().saturating_sub(base));
        std::thread::sleep(Duration::from_millis(100));
    }
    peak / 1024
}

/// One attacker's messages: the small ones before its large message, the large one, and the
/// ones after it; its answer is the length of a `len`-byte value.
struct Attack {
    before: Vec<u8>,
    large: Vec<u8>,
    after: Vec<u8>,
}

/// Attacker `i`'s messages, by turns a simple Query, an unnamed Parse with the value in its
/// text, and a Bind of a named statement with the value as its parameter.
fn attack(i: usize, len: usize) -> Attack {
    let value = "x".repeat(len);
    let (mut before, mut large, mut after) = (Vec::new(), Vec::new(), Vec::new());
    let text = format!("SELECT length('{value}')");
    match i % 3 {
        0 => frontend::encode_query(&text, &mut large).expect("Query"),
        1 => {
            frontend::encode_parse("", &text, &[], &mut large).expect("Parse");
            frontend::encode_bind("", "", &[], &[], &[], &mut after).expect("Bind");
        }
        _ => {
            frontend::encode_parse("big", "SELECT length($1::text)", &[], &mut before).expect("Parse");
            frontend::encode_bind("", "big", &[], &[Some(value.as_bytes())], &[], &mut large).expect("Bind");
        }
    }
    if i % 3 != 0 {
        frontend::encode_execute("", 0, &mut after).expect("Execute");
        frontend::encode_sync(&mut after);
    }
    Attack { before, large, after }
}

/// The answer up to ReadyForQuery: `Ok(value)` of its one row, or `Err(sqlstate)`.
fn answer(c: &mut RawPg) -> Result<String, String> {
    let mut got = Err("no row".to_owned());
    loop {
        let (tag, body) = c.next().expect("the router answers");
        match tag {
            b'D' => got = Ok(String::from_utf8_lossy(&body[6..]).into_owned()),
            b'E' => {
                let code = body.split(|b| *b == 0).find_map(|f| f.strip_prefix(b"C")).unwrap_or_default();
                got = Err(String::from_utf8_lossy(code).into_owned());
            }
            b'Z' => return got,
            _ => {}
        }
    }
}

#[test]
fn many_large_postgres_messages_stay_within_the_budget_and_past_it_get_53200() {
    let _heavy = heavy();
    // Each message is charged twice (as read, and its copy for the backend): two fit.
    let len = 24 << 20;
    assert!(COPIES * FIT * len < 100 << 20 && COPIES * (FIT + 1) * len > 100 << 20);
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 8);
    let toml = format!("{}\n[limits]\nclient_buffer_budget = \"100MiB\"\n", pg_config(&[0], &pools, "main"));
    let router = Router::start(&with_metrics(&toml, None));
    let mut bystander = router.pg("main");
    let mut clients: Vec<RawPg> = (0..ATTACKERS).map(|_| RawPg::login(router.port())).collect();
    let attacks: Vec<Attack> = (0..ATTACKERS).map(|i| attack(i, len)).collect();
    let base = vm_rss_kib();
    // The first two (a Query and a Parse) are read whole before the others send, so which fit
    // the budget does not depend on how the router's reads interleave.
    for (i, (c, a)) in clients.iter_mut().zip(&attacks).enumerate() {
        c.send(&a.before);
        c.send(&a.large[..a.large.len() - 1]);
        if i < FIT {
            wait_held(&router, (COPIES * (i + 1) * len) as f64);
        }
    }
    // Before #33 the router held every message whole: ~160 MiB; within the budget it grows by
    // ~80. The bound leaves 20 MiB over the budget for the other tests sharing this process's
    // RSS (one failed at 100 on a loaded machine).
    let grown = peak_growth_mib(base);
    assert!(grown < 120, "the router grew by {grown} MiB for messages it has not handled");
    let held = held_messages(&router);
    assert!(held > 0.0 && held <= (100 << 20) as f64, "the messages read so far, within the budget: {held}");
    assert_eq!(bystander.query_one("SELECT 21 * 2", &[]).expect("served").get::<_, i32>(0), 42);
    let mut refused = [0usize; 3];
    for (i, (c, a)) in clients.iter_mut().zip(&attacks).enumerate() {
        c.send(&a.large[a.large.len() - 1..]);
        c.send(&a.after);
        match answer(c) {
            Ok(v) => assert_eq!(v, len.to_string(), "attacker {i}: the server's answer"),
            Err(code) => {
                assert_eq!(code, "53200", "attacker {i}: out of memory, as from a server");
                refused[i % 3] += 1;
            }
        }
        // The session goes on.
        let mut q = Vec::new();
        frontend::encode_query("SELECT 41 + 1", &mut q).expect("encode");
        c.send(&q);
        assert_eq!(answer(c), Ok("42".to_owned()), "attacker {i} is served after its refusal");
    }
    // The two read first fit the budget; every later one, of each kind, was refused.
    assert_eq!(refused, [1, 1, 2], "attackers 2 to 5 refused, by kind (Query, Parse, Bind)");
    assert_eq!(held_messages(&router), 0.0, "nothing held once the messages were handled");
}

/// PyMySQL logs in and writes a COM_QUERY of `SELECT LENGTH('x…')` with `n` x's (in two
/// packets past 16 MiB) to its socket, all but its last byte; prints "sent", and waits for a
/// line on stdin to send the last byte. Then prints the answer ("ok <length>" or
/// "error <code>") and the answer of a next query.
const LARGE_QUERY: &str = r#"
import struct, sys, pymysql
port, user, password, db, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
c = pymysql.connect(host="127.0.0.1", port=port, user=user, password=password, database=db)
payload = b"\x03SELECT LENGTH('" + b"x" * n + b"') AS v"
wire, seq = b"", 0
while True:
    part, payload = payload[:0xFFFFFF], payload[0xFFFFFF:]
    wire += struct.pack("<I", len(part))[:3] + bytes([seq]) + part
    seq += 1
    if len(part) < 0xFFFFFF:
        break
c._sock.sendall(wire[:-1])
print("sent", flush=True)
sys.stdin.readline()
c._sock.sendall(wire[-1:])
c._next_seq_id = seq
try:
    r = pymysql.connections.MySQLResult(c); r.read()
    print("ok", r.rows[0][0])
except pymysql.err.MySQLError as e:
    print("error", e.args[0], e.args[1])
cur = c.cursor(); cur.execute("SELECT 41 + 1"); print("after", cur.fetchone()[0])
"#;

/// A running PyMySQL attacker and its output.
struct MyAttacker {
    child: Child,
    out: BufReader<ChildStdout>,
}

#[test]
fn many_large_mysql_commands_stay_within_the_budget_and_past_it_get_1041() {
    let _heavy = heavy();
    // Two packets each (over 16 MiB), charged twice: two fit the budget.
    let len = 20 << 20;
    let toml = format!(
        "{}\n[limits]\nclient_buffer_budget = \"88MiB\"\n",
        my_config(&[0], &my_pool("main", "transaction", 8), "main")
    );
    let router = Router::start(&with_metrics(&toml, None));
    let mut bystander = client(&router);
    let my = &dbs().my;
    let base = vm_rss_kib();
    let mut attackers: Vec<MyAttacker> = (0..ATTACKERS + 2)
        .map(|_| {
            let mut child = Command::new("/usr/bin/python3")
                .args(["-c", LARGE_QUERY, &router.port().to_string(), &my.user, &my.password, &my.database])
                .arg(len.to_string())
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("run PyMySQL (python3-pymysql, installed by .ci/deps.sh): {e}"));
            let mut out = BufReader::new(child.stdout.take().expect("stdout"));
            let mut line = String::new();
            out.read_line(&mut line).expect("PyMySQL's progress");
            assert_eq!(line.trim(), "sent");
            MyAttacker { child, out }
        })
        .collect();
    // Before #33 the router held every command whole: ~160 MiB; within the budget it grows by
    // ~65. As above, 20 MiB over the budget are left for the other tests sharing this RSS.
    let grown = peak_growth_mib(base);
    assert!(grown < 108, "the router grew by {grown} MiB for commands it has not handled");
    let held = held_messages(&router);
    assert!(held > 0.0 && held <= (88 << 20) as f64, "the commands read so far, within the budget: {held}");
    use mysql::prelude::Queryable;
    assert_eq!(bystander.query_first::<i32, _>("SELECT 21 * 2").expect("served"), Some(42));
    let mut refused = 0;
    for a in &mut attackers {
        a.child.stdin.as_mut().expect("stdin").write_all(b"go\n").expect("release the last byte");
    }
    for a in attackers {
        let MyAttacker { mut child, mut out } = a;
        let mut text = String::new();
        std::io::Read::read_to_string(&mut out, &mut text).expect("PyMySQL's answers");
        assert!(child.wait().expect("PyMySQL ends").success(), "{text}");
        let mut lines = text.lines();
        match lines.next().unwrap_or_default() {
            l if l == format!("ok {len}") => {}
            l => {
                assert!(l.starts_with("error 1041 Out of memory"), "the server's out-of-memory error: {text}");
                refused += 1;
            }
        }
        assert_eq!(lines.next(), Some("after 42"), "the session goes on: {text}");
    }
    assert!(refused >= ATTACKERS, "at most two of {} fit the budget; {refused} refused", ATTACKERS + 2);
    assert_eq!(held_messages(&router), 0.0, "nothing held once the commands were handled");
}

/// PyMySQL sends `SELECT LENGTH('x…')` with `n` x's and prints its answer ("ok <length>" or
/// "error <code> <text>"), then the answer of a next query.
const BRIDGED_QUERY: &str = r#"
import sys, pymysql
port, user, password, db, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
c = pymysql.connect(host="127.0.0.1", port=port, user=user, password=password, database=db)
cur = c.cursor()
try:
    cur.execute("SELECT LENGTH('" + "x" * n + "')"); print("ok", cur.fetchone()[0])
except pymysql.err.MySQLError as e:
    print("error", e.args[0], e.args[1])
cur.execute("SELECT 41 + 1"); print("after", cur.fetchone()[0])
"#;

/// A router on one core whose listener speaks `listener` and whose only pool `x` is the other
/// protocol's primary, with a 1 MiB budget.
fn bridged_router(listener: &str) -> Router {
    let (pool, port, user, password, database, default) = if listener == "mysql" {
        let pg = &dbs().pg;
        ("postgres", pg.primary_port, &pg.user, &pg.password, &pg.database, "mysql_default_pool")
    } else {
        let my = &dbs().my;
        ("mysql", my.primary_port, &my.user, &my.password, &my.database, "default_pool")
    };
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"{listener}\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.x]\nprotocol = \"{pool}\"\nmode = \"transaction\"\nusername = \"{user}\"\npassword = \"{password}\"\n\
         database = \"{database}\"\nmax_connections = 4\nacquire_timeout = \"20s\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n[routing]\n{default} = \"x\"\n\n\
         [limits]\nclient_buffer_budget = \"1MiB\"\n"
    ))
}

#[test]
fn bridged_sessions_refuse_a_large_message_past_the_budget_and_go_on() {
    let len = 2 << 20;
    // A MySQL client on a PostgreSQL pool.
    let router = bridged_router("mysql");
    let (pg, my) = (&dbs().pg, &dbs().my);
    let out = Command::new("/usr/bin/python3")
        .args(["-c", BRIDGED_QUERY, &router.port().to_string(), &pg.user, &pg.password, &my.database])
        .arg(len.to_string())
        .output()
        .unwrap_or_else(|e| panic!("run PyMySQL (python3-pymysql, installed by .ci/deps.sh): {e}"));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("error 1041 Out of memory"), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.ends_with("after 42\n"), "the session goes on: {text}");
    // A PostgreSQL client on a MySQL pool: a simple Query, then a Bind.
    let router = bridged_router("postgres");
    let mut c = router.pg(&my.database);
    let value = "x".repeat(len);
    let e = c.simple_query(&format!("SELECT LENGTH('{value}')")).expect_err("past the budget");
    assert_eq!(e.code(), Some(&postgres::error::SqlState::OUT_OF_MEMORY), "{e}");
    let stmt = c.prepare_typed("SELECT LENGTH($1)", &[postgres::types::Type::TEXT]).expect("prepare");
    let e = c.query_one(&stmt, &[&value]).expect_err("past the budget");
    assert_eq!(e.code(), Some(&postgres::error::SqlState::OUT_OF_MEMORY), "{e}");
    let rows = c.simple_query("SELECT 41 + 1").expect("the session goes on");
    let row = rows.iter().find_map(|m| match m {
        postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
        _ => None,
    });
    assert_eq!(row.as_deref(), Some("42"));
}
