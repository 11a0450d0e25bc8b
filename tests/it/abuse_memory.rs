//! Issue #33, "one client cannot exhaust the router", and #36's pipeline without Sync: each
//! attack runs through the router (in-process, one core, so the attacker shares its core with
//! the client that must keep working) against the harness's real servers. The attacker gets the
//! server's error for the limit it hit; what the router holds stays bounded, read from
//! `sqp_client_buffer_bytes` and from this process's RSS (shared with the router, so the tests
//! that read it hold `abuse::heavy()`); another client is served throughout.

use std::process::Command;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;

use crate::abuse::{heavy, vm_rss_kib, RawPg};
use crate::admin::{addrs, http, sum, with_metrics};
use crate::mysql_session::{client, my_config, my_pool};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::dbs;

/// A PostgreSQL router on one core, pool `main` (transaction mode), `[limits]` as given, and
/// the metrics endpoint.
fn pg_router(limits: &str) -> Router {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 8);
    Router::start(&with_metrics(&format!("{}\n[limits]\n{limits}\n", pg_config(&[0], &pools, "main")), None))
}

/// `sqp_client_buffer_bytes{kind}` now.
pub(crate) fn held(router: &Router, kind: &str) -> f64 {
    let (metrics, _) = addrs(router);
    let text = http(metrics, "GET", "/metrics", &[]).body;
    let (v, n) = sum(&text, "sqp_client_buffer_bytes", &[&format!("kind=\"{kind}\"")]);
    assert_eq!(n, 1, "one process-wide series for {kind}:\n{text}");
    v
}

/// A Parse message of statement `name`.
fn parse(name: &str, sql: &str, out: &mut Vec<u8>) {
    querypilot::protocol::pg::frontend::encode_parse(name, sql, &[], out).expect("encode Parse");
}

/// The SQLSTATE of an ErrorResponse body.
fn sqlstate(body: &[u8]) -> String {
    let fields = body.split(|b| *b == 0).find_map(|f| f.strip_prefix(b"C")).unwrap_or_default();
    String::from_utf8_lossy(fields).into_owned()
}

/// The first message other than ParseComplete that the router sent, if one arrived within
/// `wait` (the ParseCompletes of the statements it took may come first).
fn poll(c: &mut RawPg, wait: Duration) -> Option<(u8, Vec<u8>)> {
    c.stream.set_read_timeout(Some(wait)).expect("timeout");
    let got = loop {
        match c.next() {
            Ok((b'1', _)) => continue,
            Ok(m) => break Some(m),
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => break None,
            Err(e) => panic!("router closed the attacker: {e}"),
        }
    };
    c.stream.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    got
}

/// Sends named Parses of ~1 KiB each, without Sync, 1 MiB at a time, until the router answers
/// (at most `max_mib`): the answer, and the MiB sent.
fn parse_until_refused(c: &mut RawPg, prefix: &str, max_mib: usize) -> (Option<(u8, Vec<u8>)>, usize) {
    let sql = format!("SELECT 1 /* {} */", "x".repeat(1000));
    let mut n = 0;
    for mib in 1..=max_mib {
        let mut batch = Vec::with_capacity(1 << 20);
        while batch.len() < 1 << 20 {
            parse(&format!("{prefix}{n}"), &sql, &mut batch);
            n += 1;
        }
        c.send(&batch);
        if let Some(reply) = poll(c, Duration::from_millis(5)) {
            return (Some(reply), mib);
        }
    }
    (poll(c, Duration::from_secs(2)), max_mib)
}

/// Sync, then the messages up to ReadyForQuery: the client's session goes on after a refusal.
fn sync_then_select(c: &mut RawPg) {
    c.send(&[b'S', 0, 0, 0, 4]);
    while c.next().expect("after Sync").0 != b'Z' {}
    let mut q = Vec::new();
    querypilot::protocol::pg::frontend::encode_query("SELECT 41 + 1", &mut q).expect("encode");
    c.send(&q);
    let mut row = false;
    loop {
        let (tag, body) = c.next().expect("query reply");
        assert_ne!(tag, b'E', "query after the refusal failed: {}", String::from_utf8_lossy(&body));
        row |= tag == b'D' && body.ends_with(b"42");
        if tag == b'Z' {
            break;
        }
    }
    assert!(row, "the attacker's own session still answers");
}

#[test]
fn named_statements_without_sync_hit_the_session_limit_then_the_process_budget() {
    let _heavy = heavy();
    let router = pg_router("session_prepared_bytes = \"8MiB\"\nclient_buffer_budget = \"12MiB\"");
    let mut bystander = router.pg("main");
    let rss_before = vm_rss_kib();
    // One client: its statements' text stops at its own limit, with 54000, and only its batch
    // fails (the rest up to its Sync is skipped, as on the server).
    let mut first = RawPg::login(router.port());
    let (reply, mib) = parse_until_refused(&mut first, "a", 64);
    let (tag, body) = reply.unwrap_or_else(|| panic!("{mib} MiB of named Parses were all held"));
    assert_eq!((tag, sqlstate(&body)), (b'E', "54000".to_owned()), "{}", String::from_utf8_lossy(&body));
    assert!(String::from_utf8_lossy(&body).contains("limits.session_prepared_bytes"));
    let statements = held(&router, "statements");
    assert!((7.0 * 1048576.0..=8.25 * 1048576.0).contains(&statements), "held {statements}");
    sync_then_select(&mut first);
    // Another: the process's budget is spent before its own limit: 53200, new work refused.
    let mut second = RawPg::login(router.port());
    let (reply, _) = parse_until_refused(&mut second, "b", 64);
    let (_, body) = reply.expect("the second attacker is answered");
    assert_eq!(sqlstate(&body), "53200", "{}", String::from_utf8_lossy(&body));
    assert!(held(&router, "statements") <= 12.0 * 1048576.0 + 65536.0, "within the budget");
    // A simple query holds nothing: served while the budget is spent.
    bystander.simple_query("SELECT 1 + 1").expect("the bystander is served meanwhile");
    let grown_mib = vm_rss_kib().saturating_sub(rss_before) / 1024;
    assert!(grown_mib < 96, "router RSS grew by {grown_mib} MiB");
    // What a client held goes back when it leaves: the bystander may prepare again.
    drop((first, second));
    crate::support::eventually(Duration::from_secs(10), "buffers given back", || held(&router, "statements") == 0.0);
    let stmt = bystander.prepare("SELECT $1::int * 2").expect("prepare after the attackers left");
    assert_eq!(bystander.query(&stmt, &[&21i32]).expect("execute")[0].get::<_, i32>(0), 42);
}

#[test]
fn messages_without_sync_answered_by_the_router_itself_get_backpressure_not_buffering() {
    let router = pg_router("");
    let mut bystander = router.pg("main");
    let mut c = RawPg::login(router.port());
    // Close of a statement the client never had: the router answers CloseComplete itself.
    // Before #33 every answer was queued until the Sync (24 bytes per 8-byte message, without
    // bound); now past a backlog the answers go out while the client is still sending.
    let close = [b'C', 0, 0, 0, 7, b'S', b'x', 0];
    let n = 3 * 4096;
    let batch: Vec<u8> = close.iter().copied().cycle().take(close.len() * n).collect();
    c.send(&batch);
    let mut answered = 0;
    while answered < 4096 {
        let (tag, _) = poll(&mut c, Duration::from_secs(5))
            .unwrap_or_else(|| panic!("only {answered} of {n} Close messages answered before Sync: the rest is held"));
        assert_eq!(tag, b'3', "CloseComplete");
        answered += 1;
    }
    bystander.simple_query("SELECT 1").expect("the bystander is served meanwhile");
    c.send(&[b'S', 0, 0, 0, 4]);
    loop {
        match c.next().expect("the rest and ReadyForQuery") {
            (b'3', _) => answered += 1,
            (b'Z', _) => break,
            (tag, body) => panic!("unexpected {tag}: {}", String::from_utf8_lossy(&body)),
        }
    }
    assert_eq!(answered, n, "every Close answered, in order, once");
}

#[test]
fn too_many_named_statements_get_54000_and_the_session_goes_on() {
    let router = pg_router("session_prepared_statements = 3");
    let mut c = RawPg::login(router.port());
    let mut batch = Vec::new();
    for i in 0..4 {
        parse(&format!("s{i}"), "SELECT 1", &mut batch);
    }
    batch.extend_from_slice(&[b'S', 0, 0, 0, 4]);
    c.send(&batch);
    let mut tags = Vec::new();
    loop {
        let (tag, body) = c.next().expect("reply");
        if tag == b'E' {
            assert_eq!(sqlstate(&body), "54000");
            assert!(String::from_utf8_lossy(&body).contains("limits.session_prepared_statements"));
        }
        tags.push(tag);
        if tag == b'Z' {
            break;
        }
    }
    assert_eq!(tags, b"111EZ", "three statements, then the error, then ReadyForQuery");
    sync_then_select(&mut c);
}

/// psycopg in libpq pipeline mode: three statements, no Sync, the second failing. Prints what
/// the client got within 5 s (#36's reproduction, `../shared/repro/r_pipeline_nosync_error.py`).
const PIPELINE_NO_SYNC: &str = r#"
import sys, select, time
from psycopg import pq
pg = pq.PGconn.connect(sys.argv[1].encode())
assert pg.status == pq.ConnStatus.OK, pg.error_message
t = sys.argv[2]
pg.exec_(f"DROP TABLE IF EXISTS {t}".encode()); pg.exec_(f"CREATE TABLE {t}(id int primary key)".encode())
pg.nonblocking = True
pg.enter_pipeline_mode()
pg.send_query_params(f"insert into {t} values (1) returning id".encode(), None)
pg.send_query_params(f"insert into {t} values (1) returning id".encode(), None)
pg.send_query_params(b"select 'skipped'", None)
while pg.flush(): select.select([], [pg.socket], [], 1)
got = []; deadline = time.time() + 5
while len(got) < 3 and time.time() < deadline:
    r, _, _ = select.select([pg.socket], [], [], 0.2)
    if r: pg.consume_input()
    while not pg.is_busy():
        res = pg.get_result()
        if res is None:
            if got and got[-1] is None: break
            got.append(None); continue
        got.append(pq.ExecStatus(res.status).name)
pg.pipeline_sync()
print([g for g in got if g])
"#;

fn pipeline_no_sync(port: u16, database: &str, table: &str) -> String {
    let pg = &dbs().pg;
    let dsn = format!("host=127.0.0.1 port={port} user={} password={} dbname={database}", pg.user, pg.password);
    let out = Command::new("/usr/bin/python3")
        .args(["-c", PIPELINE_NO_SYNC, &dsn, table])
        .output()
        .unwrap_or_else(|e| panic!("run psycopg (python3-psycopg, installed by .ci/deps.sh): {e}"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn a_pipeline_without_sync_gets_the_servers_error_at_once() {
    let pg = &dbs().pg;
    let table = crate::support::unique_name("nosync");
    let direct = pipeline_no_sync(pg.primary_port, &pg.database, &table);
    assert_eq!(direct, "['TUPLES_OK', 'FATAL_ERROR', 'PIPELINE_ABORTED']", "directly");
    let plain = pg_router("");
    assert_eq!(pipeline_no_sync(plain.port(), "main", &table), direct, "transaction mode");
    // With a read/write split the batch is held for unit routing: a pause releases it too.
    let pools = format!(
        "{}{}",
        pg_pool("main", pg.primary_port, "transaction", 8),
        pg_pool("replica", pg.replica_port, "transaction", 8)
    );
    let split = pg_config(&[0], &pools, "main").replace(
        "[routing]\ndefault_pool = \"main\"\n",
        "[routing]\nread_write_split = true\nwrite_pool = \"main\"\nread_pool = \"replica\"\n",
    );
    let split = Router::start(&split);
    assert_eq!(pipeline_no_sync(split.port(), "main", &table), direct, "read/write split");
    let mut c = split.pg("main");
    c.batch_execute(&format!("DROP TABLE {table}")).expect("drop");
}

#[test]
fn an_oversized_causal_token_is_refused_and_never_held() {
    let router = pg_router("");
    let mut c = router.pg("main");
    let huge: Vec<String> = (0..100_000).map(|d| format!("{d}-1-5")).collect();
    let started = Instant::now();
    let err = c
        .batch_execute(&format!("SET querypilot.causal_token = 'gtid:{}'", huge.join(",")))
        .expect_err("a 1 MB token is refused");
    let db = err.as_db_error().expect("a server error");
    assert_eq!(db.code().code(), "22023");
    assert!(db.message().contains("too large"), "{}", db.message());
    assert!(db.message().len() < 300, "the token is not echoed back");
    let wide: Vec<String> = (0..65).map(|d| format!("{d}-1-5")).collect();
    assert!(c.batch_execute(&format!("SET querypilot.causal_token = 'gtid:{}'", wide.join(","))).is_err());
    c.batch_execute(&format!("SET querypilot.causal_token = 'gtid:{}'", wide[..64].join(","))).expect("64 domains");
    let mut other = router.pg("main");
    for _ in 0..20 {
        other.simple_query("SELECT 1").expect("served");
    }
    assert!(started.elapsed() < Duration::from_secs(10));

    let my = Router::start(&my_config(&[0], &my_pool("main", "transaction", 4), "main"));
    let mut m = client(&my);
    let err = m
        .query_drop(format!("SET querypilot.causal_token = 'gtid:{}'", huge.join(",")))
        .expect_err("refused on MySQL too");
    let mysql::Error::MySqlError(e) = err else { panic!("expected a server error, got {err}") };
    assert_eq!((e.code, e.state.as_str()), (1231, "42000"), "{}", e.message);
}

#[test]
fn an_oversized_causal_token_is_refused_from_its_head_before_any_charge() {
    // Megabytes in flight: not while another test reads this process's RSS.
    let _heavy = heavy();
    // A 1 MiB budget refuses any 1 MB message read whole (53200): the token SET must be refused
    // for what it is (22023) from its first bytes instead, its body dropped as it comes.
    let router = pg_router("client_buffer_budget = \"1MiB\"");
    let huge: Vec<String> = (0..100_000).map(|d| format!("{d}-1-5")).collect();
    let set = format!("SET querypilot.causal_token = 'gtid:{}'", huge.join(","));
    let mut c = router.pg("main");
    for _ in 0..3 {
        let err = c.batch_execute(&set).expect_err("a 1 MB token is refused");
        let db = err.as_db_error().expect("a server error");
        assert_eq!((db.code().code(), db.message().contains("too large")), ("22023", true), "{}", db.message());
    }
    assert_eq!(held(&router, "messages"), 0.0, "nothing of it is held");
    c.simple_query("SELECT 1").expect("the session goes on");

    // Pipelined behind a query and ahead of another in one write: exactly its bytes are dropped.
    let mut raw = crate::abuse::RawPg::login(router.port());
    let mut out = Vec::new();
    for sql in ["SELECT 41 + 1", set.as_str(), "SELECT 42 + 1"] {
        querypilot::protocol::pg::frontend::encode_query(sql, &mut out).expect("encode");
    }
    raw.send(&out);
    let mut seen = Vec::new();
    while seen.iter().filter(|(tag, _)| *tag == b'Z').count() < 3 {
        let (tag, body) = raw.next().expect("reply");
        seen.push((tag, if tag == b'E' { sqlstate(&body) } else { String::from_utf8_lossy(&body).into_owned() }));
    }
    let rows: Vec<&str> = seen.iter().filter(|(t, _)| *t == b'D').map(|(_, b)| b.as_str()).collect();
    assert!(rows.len() == 2 && rows[0].ends_with("42") && rows[1].ends_with("43"), "{seen:?}");
    let errors: Vec<&str> = seen.iter().filter(|(t, _)| *t == b'E').map(|(_, b)| b.as_str()).collect();
    assert_eq!(errors, ["22023"], "{seen:?}");
}

/// PyMySQL speaking the binary protocol by hand: prepares `SELECT LENGTH(?)`; for each count
/// `n` in its third argument, sends `n` pieces of `kib` KiB of COM_STMT_SEND_LONG_DATA for the
/// parameter and executes; then COM_STMT_RESET and one piece. Prints each execute's outcome.
const LONG_DATA: &str = r#"
import sys, struct, pymysql
from pymysql.constants import COMMAND
port, kib, before = int(sys.argv[1]), int(sys.argv[2]), [int(n) for n in sys.argv[3].split(",")]
database = sys.argv[6] if len(sys.argv) > 6 else None
c = pymysql.connect(host="127.0.0.1", port=port, user=sys.argv[4], password=sys.argv[5], database=database)
c._execute_command(COMMAND.COM_STMT_PREPARE, "SELECT LENGTH(?)")
ok = c._read_packet(); sid = struct.unpack("<I", ok._data[1:5])[0]
params, cols = struct.unpack("<H", ok._data[7:9])[0], struct.unpack("<H", ok._data[5:7])[0]
for _ in range(params + 1 + (cols + 1 if cols else 0)): c._read_packet()
def run(n):
    for _ in range(n):
        c._execute_command(COMMAND.COM_STMT_SEND_LONG_DATA, struct.pack("<IH", sid, 0) + b"x" * (kib << 10))
    c._execute_command(COMMAND.COM_STMT_EXECUTE, struct.pack("<IBI", sid, 0, 1) + b"\x00\x01\xfc\x00")
    try:
        c._read_packet(); c._read_packet(); c._read_packet()  # column count, definition, EOF
        row = c._read_packet(); print("ok", struct.unpack("<i", row._data[2:6])[0]); c._read_packet()
    except pymysql.err.MySQLError as e:
        print("error", e.args[0], e.args[1])
for n in before:
    run(n)
c._execute_command(COMMAND.COM_STMT_RESET, struct.pack("<I", sid)); c._read_packet()
run(1)
"#;

/// Runs [`LONG_DATA`] against `port` as `login` (user, password, and a database if given):
/// pieces of `kib` KiB, `before` the reset as its counts. One line per execute.
pub(crate) fn pymysql_long_data(port: u16, kib: usize, before: &[usize], login: &[&str]) -> Vec<String> {
    let before = before.iter().map(usize::to_string).collect::<Vec<_>>().join(",");
    let out = Command::new("/usr/bin/python3")
        .args(["-c", LONG_DATA, &port.to_string(), &kib.to_string(), &before])
        .args(login)
        .output()
        .unwrap_or_else(|e| panic!("run PyMySQL (installed by .ci/deps.sh): {e}"));
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

/// `mib` MiB for the parameter, then 1 MiB; COM_STMT_RESET, then 1 MiB again.
fn long_data(port: u16, mib: usize) -> Vec<String> {
    let my = &dbs().my;
    pymysql_long_data(port, 1024, &[mib, 1], &[&my.user, &my.password, &my.database])
}

#[test]
fn long_data_past_the_limit_is_dropped_and_refused_at_execute_as_mariadb_does() {
    let _heavy = heavy();
    let my = &dbs().my;
    // The harness's server has max_allowed_packet = 64M: past it, this is its answer.
    let direct = long_data(my.primary_port, 65);
    // MariaDB keeps failing the statement's executes until COM_STMT_RESET.
    assert_eq!(direct.len(), 3, "{direct:?}");
    assert!(direct[0].starts_with("error 1105 Parameter of prepared statement"), "{direct:?}");
    assert_eq!(direct[1], direct[0]);
    assert_eq!(direct[2], "ok 1048576", "{direct:?}");
    let toml =
        format!("{}\n[limits]\nlong_data = \"16MiB\"\n", my_config(&[0], &my_pool("main", "transaction", 4), "main"));
    let router = Router::start(&with_metrics(&toml, None));
    let mut bystander = client(&router);
    let rss_before = vm_rss_kib();
    let attack = std::thread::spawn({
        let port = router.port();
        move || long_data(port, 100)
    });
    let mut queries = 0;
    while !attack.is_finished() {
        let two: i64 = bystander.query_first("SELECT 1 + 1").expect("bystander").expect("row");
        assert_eq!(two, 2);
        queries += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    let through = attack.join().expect("attacker thread");
    assert_eq!(through, direct, "the server's error at execute, until the statement is reset");
    assert!(queries > 0);
    let grown_mib = vm_rss_kib().saturating_sub(rss_before) / 1024;
    assert!(grown_mib < 64, "router RSS grew by {grown_mib} MiB for 100 MiB of long data");
    assert_eq!(held(&router, "long_data"), 0.0, "nothing held after the executes");
}

#[test]
fn mysql_statements_per_session_are_capped_like_max_prepared_stmt_count() {
    let toml = format!(
        "{}\n[limits]\nsession_prepared_statements = 2\n",
        my_config(&[0], &my_pool("main", "transaction", 4), "main")
    );
    let router = Router::start(&toml);
    let mut c = client(&router);
    let a = c.prep("SELECT 1").expect("first");
    let _b = c.prep("SELECT 2").expect("second");
    let err = c.prep("SELECT 3").expect_err("third");
    let mysql::Error::MySqlError(e) = err else { panic!("expected a server error, got {err}") };
    assert_eq!((e.code, e.state.as_str()), (1461, "42000"));
    assert!(e.message.contains("max_prepared_stmt_count statements (current value: 2)"), "{}", e.message);
    c.close(a).expect("close one");
    c.prep("SELECT 3").expect("room again after a close");
}
