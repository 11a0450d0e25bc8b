//! Issue #33, "one client cannot exhaust the router", for data in flight: result rows on their
//! way to a client that reads slowly, COPY data on its way to a backend that takes it slowly,
//! and a MySQL client that pipelines commands without reading the answers. Each runs through
//! the router (in-process, one core) against the harness's real servers; what the router
//! holds is read from this process's RSS (shared with the router, so each test holds
//! `abuse::heavy()`) and from `sqp_client_buffer_bytes{kind}`, while another client is served.

use std::process::Command;
use std::time::{Duration, Instant};

use crate::abuse::{heavy, vm_rss_kib, RawPg};
use crate::admin::{addrs, http, sum, with_metrics};
use crate::mysql_session::{client, my_config, my_pool};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, unique_name};

/// Bytes of each large message the tests send or ask for.
const LARGE: usize = 48 << 20;

/// A router on one core with pool `main` of `protocol`, and the metrics endpoint.
fn router(mysql: bool) -> Router {
    let toml = if mysql {
        my_config(&[0], &my_pool("main", "transaction", 8), "main")
    } else {
        pg_config(&[0], &pg_pool("main", dbs().pg.primary_port, "transaction", 8), "main")
    };
    Router::start(&with_metrics(&toml, None))
}

/// `sqp_client_buffer_bytes{kind}` now.
fn held(router: &Router, kind: &str) -> f64 {
    let (metrics, _) = addrs(router);
    let text = http(metrics, "GET", "/metrics", &[]).body;
    let (v, n) = sum(&text, "sqp_client_buffer_bytes", &[&format!("kind=\"{kind}\"")]);
    assert_eq!(n, 1, "one process-wide series for {kind}:\n{text}");
    v
}

/// The largest RSS growth over `base` (KiB) seen in `wait`, sampled every 100 ms.
fn peak_growth_mib(base: u64, wait: Duration) -> u64 {
    let until = Instant::now() + wait;
    let mut peak = 0;
    while Instant::now() < until {
        peak = peak.max(vm_rss_kib().saturating_sub(base));
        std::thread::sleep(Duration::from_millis(100));
    }
    peak / 1024
}

#[test]
fn large_rows_reach_a_client_that_does_not_read_in_pieces_never_whole() {
    let _heavy = heavy();
    let router = router(false);
    let mut bystander = router.pg("main");
    let base = vm_rss_kib();
    // Four clients ask for a 48 MiB row each and read nothing: the backend sends it at once.
    // Before #33 the router read each row whole, then copied it for the client: ~400 MiB.
    let mut readers: Vec<RawPg> = (0..4).map(|_| RawPg::login(router.port())).collect();
    for c in &mut readers {
        let mut q = Vec::new();
        querypilot::protocol::pg::frontend::encode_query(&format!("SELECT repeat('x', {LARGE})"), &mut q)
            .expect("encode");
        c.send(&q);
    }
    let grown = peak_growth_mib(base, Duration::from_secs(3));
    assert!(grown < 64, "the router grew by {grown} MiB for rows its clients have not read");
    assert!(held(&router, "rows") < (1 << 20) as f64, "at most a read per session is in flight");
    assert_eq!(bystander.query_one("SELECT 21 * 2", &[]).expect("served").get::<_, i32>(0), 42);
    for c in &mut readers {
        let row = loop {
            match c.next().expect("the response") {
                (b'D', body) => break body,
                (b'T', _) => {}
                (tag, body) => panic!("unexpected {}: {}", char::from(tag), String::from_utf8_lossy(&body)),
            }
        };
        // One column: its 4-byte length, then the value, whole and in order.
        assert_eq!(row.len(), 2 + 4 + LARGE);
        assert!(row[6..].iter().all(|b| *b == b'x'));
        assert_eq!(c.next().expect("CommandComplete").0, b'C');
        assert_eq!(c.next().expect("ReadyForQuery").0, b'Z');
    }
}

/// psycopg's libpq: `COPY table FROM STDIN` with one CopyData message of `len` bytes (lines of
/// 4,095 characters), then CopyDone; prints the command tag.
const COPY: &str = r#"
import sys
from psycopg import pq
dsn, table, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
c = pq.PGconn.connect(dsn.encode())
assert c.status == pq.ConnStatus.OK, c.error_message
r = c.exec_(f"COPY {table} FROM STDIN".encode())
assert r.status == pq.ExecStatus.COPY_IN, r.error_message
assert c.put_copy_data((b"x" * 4095 + b"\n") * (n // 4096)) == 1, c.error_message
assert c.put_copy_end() == 1, c.error_message
r = c.get_result()
assert r.status == pq.ExecStatus.COMMAND_OK, r.error_message
print(r.command_status.decode())
"#;

#[test]
fn large_copy_data_goes_to_a_backend_that_takes_it_slowly_in_pieces() {
    let _heavy = heavy();
    let router = router(false);
    let table = unique_name("copy_gate");
    let mut direct = dbs().pg.primary_client();
    // Every row waits for advisory lock 33 (shared), which the test holds exclusively: the
    // backend takes the first row and then stops reading the COPY.
    direct
        .batch_execute(&format!(
            "CREATE TABLE {table} (v text);
             CREATE FUNCTION {table}_gate() RETURNS trigger LANGUAGE plpgsql AS
               $$ BEGIN PERFORM pg_advisory_lock_shared(33); PERFORM pg_advisory_unlock_shared(33); RETURN NEW; END $$;
             CREATE TRIGGER gate BEFORE INSERT ON {table} FOR EACH ROW EXECUTE FUNCTION {table}_gate();
             SELECT pg_advisory_lock(33);"
        ))
        .expect("gated table");
    let base = vm_rss_kib();
    // Two psycopg clients (libpq's PQputCopyData sends what it is given as one message), each
    // one CopyData of 48 MiB. Before #33 the router read each message whole and held it three
    // times over (read buffer, message, backend queue).
    let pg = &dbs().pg;
    let dsn = format!("host=127.0.0.1 port={} dbname=main user={} password={}", router.port(), pg.user, pg.password);
    let copiers: Vec<_> = (0..2)
        .map(|_| {
            Command::new("/usr/bin/python3")
                .args(["-c", COPY, &dsn, &table, &LARGE.to_string()])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("run psycopg (python3-psycopg, installed by .ci/deps.sh): {e}"))
        })
        .collect();
    let grown = peak_growth_mib(base, Duration::from_secs(3));
    assert!(grown < 64, "the router grew by {grown} MiB for COPY data its backend has not taken");
    assert!(held(&router, "copy") < (1 << 20) as f64, "at most a read per session is in flight");
    let mut bystander = router.pg("main");
    assert_eq!(bystander.query_one("SELECT 21 * 2", &[]).expect("served").get::<_, i32>(0), 42);
    direct.batch_execute("SELECT pg_advisory_unlock(33)").expect("open the gate");
    let per_client = LARGE / 4096;
    for c in copiers {
        let out = c.wait_with_output().expect("psycopg ends");
        let text = String::from_utf8_lossy(&out.stdout);
        assert_eq!(text.trim(), format!("COPY {per_client}"), "every row of the message arrived");
    }
    let n: i64 = direct.query_one(&format!("SELECT count(*) FROM {table} WHERE length(v) = 4095"), &[]).unwrap().get(0);
    assert_eq!(n as usize, 2 * per_client);
    direct.batch_execute(&format!("DROP TABLE {table}; DROP FUNCTION {table}_gate()")).expect("drop");
}

/// PyMySQL logs in, then writes COM_QUERY packets straight to its socket without reading a
/// single answer, until a write has blocked for 3 s (the router stopped reading) or 256 MiB
/// went out; prints the bytes sent. Then it reads the answers of the first ten and prints them.
const PIPELINE: &str = r#"
import socket, struct, sys, pymysql
port, user, password, db = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
c = pymysql.connect(host="127.0.0.1", port=port, user=user, password=password, database=db)
sql = b"\x03SELECT REPEAT('x', 4000) AS v"
packet = struct.pack("<I", len(sql))[:3] + b"\x00" + sql
batch = packet * 4096
c._sock.settimeout(3)
sent = 0
try:
    while sent < 256 << 20:
        sent += c._sock.send(batch)
except socket.timeout:
    pass
print("sent", sent)
c._sock.settimeout(30)
c._next_seq_id = 1
for _ in range(10):
    c._next_seq_id = 1
    r = pymysql.connections.MySQLResult(c); r.read()
    print("row", len(r.rows[0][0]))
"#;

#[test]
fn a_mysql_client_pipelining_commands_is_read_no_faster_than_it_reads_the_answers() {
    let _heavy = heavy();
    let router = router(true);
    let mut bystander = client(&router);
    let my = &dbs().my;
    let base = vm_rss_kib();
    let port = router.port().to_string();
    let script = Command::new("/usr/bin/python3")
        .args(["-c", PIPELINE, &port, &my.user, &my.password, &my.database])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("run PyMySQL (python3-pymysql, installed by .ci/deps.sh): {e}"));
    let grown = peak_growth_mib(base, Duration::from_secs(4));
    use mysql::prelude::Queryable;
    assert_eq!(bystander.query_first::<i32, _>("SELECT 21 * 2").expect("served"), Some(42));
    let out = script.wait_with_output().expect("PyMySQL ends");
    let text = String::from_utf8_lossy(&out.stdout);
    let sent: usize = text.lines().find_map(|l| l.strip_prefix("sent ")).and_then(|n| n.parse().ok()).expect(&text);
    // Each answer is ~4 KiB and each command 33 bytes: had the router read ahead of its
    // answers, the client would have sent all 256 MiB and the router held it or its answers.
    assert!(sent < 64 << 20, "the client got {sent} bytes in before the router pushed back");
    assert!(grown < 64, "the router grew by {grown} MiB for commands whose answers were not read");
    assert_eq!(text.lines().filter(|l| *l == "row 4000").count(), 10, "answers in order:\n{text}");
}

/// PyMySQL asks for a `len`-byte value, reads nothing for 4 s, then reads the result and
/// prints the value's length.
const SLOW_READER: &str = r#"
import sys, time, pymysql
from pymysql.constants import COMMAND
port, user, password, db, n = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
c = pymysql.connect(host="127.0.0.1", port=port, user=user, password=password, database=db)
c._execute_command(COMMAND.COM_QUERY, f"SELECT REPEAT('x', {n}) AS v")
time.sleep(4)
r = pymysql.connections.MySQLResult(c); r.read()
print("value", len(r.rows[0][0]))
"#;

#[test]
fn long_mysql_rows_reach_a_client_that_does_not_read_in_pieces_never_whole() {
    let _heavy = heavy();
    let router = router(true);
    let mut bystander = client(&router);
    let my = &dbs().my;
    let base = vm_rss_kib();
    // 12 MiB: one packet, under the server's 16 MiB max_allowed_packet. Four clients ask and
    // read nothing: before #33 the router held each packet whole, then copied it for the
    // client (~100 MiB).
    let len = (12 << 20).to_string();
    let port = router.port().to_string();
    let readers: Vec<_> = (0..4)
        .map(|_| {
            Command::new("/usr/bin/python3")
                .args(["-c", SLOW_READER, &port, &my.user, &my.password, &my.database, &len])
                .stdout(std::process::Stdio::piped())
                .spawn()
                .unwrap_or_else(|e| panic!("run PyMySQL (python3-pymysql, installed by .ci/deps.sh): {e}"))
        })
        .collect();
    let grown = peak_growth_mib(base, Duration::from_secs(3));
    assert!(grown < 40, "the router grew by {grown} MiB for rows its clients have not read");
    assert!(held(&router, "rows") < (1 << 20) as f64, "at most a read per session is in flight");
    use mysql::prelude::Queryable;
    assert_eq!(bystander.query_first::<i32, _>("SELECT 21 * 2").expect("served"), Some(42));
    for r in readers {
        let out = r.wait_with_output().expect("PyMySQL ends");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("value {len}"), "the value, whole");
    }
}
