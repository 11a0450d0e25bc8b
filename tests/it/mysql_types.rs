//! Prepared statements through the router: every column type round-trips exactly in the binary
//! protocol, a statement follows its client across backend connections, cursors, and bad input
//! on the MySQL listener.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::{Params, Value};

use crate::mysql_session::{client, my_router};
use crate::support::{dbs, unique_name};

#[test]
fn every_column_type_round_trips_in_binary_and_text() {
    for mode in ["session", "transaction", "statement"] {
        eprintln!("pool mode {mode}");
        every_type_round_trips(mode);
    }
}

fn every_type_round_trips(mode: &str) {
    let router = my_router(mode, 2);
    let mut c = client(&router);
    let table = unique_name("my_types");
    c.query_drop(format!(
        "CREATE TABLE {table} (id INT PRIMARY KEY, ti TINYINT, tu TINYINT UNSIGNED, si SMALLINT, su SMALLINT UNSIGNED, \
         mi MEDIUMINT, bi BIGINT, bu BIGINT UNSIGNED, de DECIMAL(30,10), fl FLOAT, db DOUBLE, da DATE, dt DATETIME(6), \
         tm TIME(6), ye YEAR, vc VARCHAR(100), tx LONGTEXT, bl LONGBLOB, js JSON, bt BIT(8), en ENUM('a','b'))"
    ))
    .expect("create");
    let big = "x".repeat((16 << 20) + 17);
    let blob: Vec<u8> = (0..(16 << 20) + 5).map(|i| (i % 251) as u8).collect();
    let row: Vec<Value> = vec![
        Value::Int(1),
        Value::Int(-128),
        Value::UInt(255),
        Value::Int(-32768),
        Value::UInt(65535),
        Value::Int(-8_388_608),
        Value::Int(i64::MIN),
        Value::UInt(u64::MAX),
        Value::Bytes(b"-12345678901234567890.0123456789".to_vec()),
        Value::Float(1.5),
        Value::Double(-2.5e-300),
        Value::Date(1000, 1, 1, 0, 0, 0, 0),
        Value::Date(9999, 12, 31, 23, 59, 59, 999_999),
        Value::Time(true, 34, 22, 59, 58, 123_456),
        Value::Int(2155),
        Value::Bytes("héllo ✓".as_bytes().to_vec()),
        Value::Bytes(big.clone().into_bytes()),
        Value::Bytes(blob.clone()),
        Value::Bytes(br#"{"a": [1, 2.5, null]}"#.to_vec()),
        Value::Bytes(vec![0xA5]),
        Value::Bytes(b"b".to_vec()),
    ];
    let marks = vec!["?"; row.len()].join(", ");
    c.exec_drop(format!("INSERT INTO {table} VALUES ({marks})"), Params::Positional(row.clone())).expect("insert");
    let nulls = vec!["NULL"; row.len() - 1].join(", ");
    c.query_drop(format!("INSERT INTO {table} VALUES (2, {nulls})")).expect("insert nulls");
    let sql = format!("SELECT * FROM {table} WHERE id = ?");
    let got: mysql::Row = c.exec_first(&sql, (1,)).expect("select").expect("row");
    let got = got.unwrap();
    for (i, (want, have)) in row.iter().zip(&got).enumerate() {
        match (want, have) {
            (Value::Time(n, d, h, m, s, us), Value::Time(n2, d2, h2, m2, s2, us2)) => {
                // TIME comes back normalized to days + hours.
                let total = |d: u32, h: u8| u64::from(d) * 24 + u64::from(h);
                assert_eq!((n, total(*d, *h), m, s, us), (n2, total(*d2, *h2), m2, s2, us2), "column {i}");
            }
            (Value::Int(a), Value::UInt(b)) => assert_eq!(*a, *b as i64, "column {i}"),
            (Value::UInt(a), Value::Int(b)) => assert_eq!(*a as i64, *b, "column {i}"),
            (Value::Date(y, mo, d, 0, 0, 0, 0), Value::Date(y2, mo2, d2, ..)) => {
                assert_eq!((y, mo, d), (y2, mo2, d2), "column {i}")
            }
            (Value::Bytes(a), Value::Bytes(b)) if i == 18 => {
                let norm = |v: &[u8]| String::from_utf8_lossy(v).replace(' ', "");
                assert_eq!(norm(a), norm(b), "json");
            }
            _ => assert!(want == have, "column {i}: sent {want:?}, got {:?}", short(have)),
        }
    }
    let nulls: mysql::Row = c.exec_first(&sql, (2,)).expect("select nulls").expect("row");
    assert!(nulls.unwrap().iter().skip(1).all(|v| *v == Value::NULL));
    // Text protocol: the big values arrive whole as well.
    let (t, b): (Vec<u8>, Vec<u8>) =
        c.query_first(format!("SELECT tx, bl FROM {table} WHERE id = 1")).expect("text").expect("row");
    assert!(t == big.as_bytes() && b == blob, "16 MiB+ values must round-trip in text results");
}

fn short(v: &Value) -> String {
    let s = format!("{v:?}");
    s.chars().take(80).collect()
}

#[test]
fn prepared_statement_follows_its_client_across_connections() {
    let router = my_router("transaction", 2);
    let my = &dbs().my;
    let mut a = client(&router);
    let stmt = a.prep("SELECT ? * 2, CONNECTION_ID()").expect("prepare");
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let busy: Vec<_> = (0..3)
        .map(|_| {
            let stop = stop.clone();
            let opts = my.opts(router.port(), &my.user, &my.password);
            std::thread::spawn(move || {
                let mut c = mysql::Conn::new(opts).expect("busy client");
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let _: Option<i64> = c.query_first("SELECT SLEEP(0.002)").expect("busy query");
                }
            })
        })
        .collect();
    let mut backends = std::collections::HashSet::new();
    for i in 0..100i64 {
        let (v, conn): (i64, u64) = a.exec_first(&stmt, (i,)).expect("execute").expect("row");
        assert_eq!(v, i * 2);
        backends.insert(conn);
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    for h in busy {
        h.join().expect("busy thread");
    }
    assert!(backends.len() > 1, "the statement never changed backend connection");
    a.close(stmt).expect("close");
}

fn raw(port: u16) -> TcpStream {
    let s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10))).expect("timeout");
    s
}

/// Reads until the router closes; returns everything it sent.
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let _ = s.read_to_end(&mut all);
    all
}

/// The error number of the last ERR packet in `bytes`.
fn last_err(bytes: &[u8]) -> Option<u16> {
    let mut pos = 0;
    let mut last = None;
    while let Some(h) = bytes.get(pos..pos + 4) {
        let len = u32::from_le_bytes([h[0], h[1], h[2], 0]) as usize;
        let payload = bytes.get(pos + 4..pos + 4 + len)?;
        if payload.first() == Some(&0xFF) {
            last = payload.get(1..3).map(|c| u16::from_le_bytes([c[0], c[1]]));
        }
        pos += 4 + len;
    }
    last
}

#[test]
fn bad_input_gets_an_error_and_a_close() {
    let router = my_router("transaction", 2);
    // Garbage instead of a handshake response.
    let mut s = raw(router.port());
    s.write_all(b"\x05\x00\x00\x01garbage and more garbage").expect("write");
    let got = read_to_close(&mut s);
    assert_eq!(last_err(&got), Some(1043), "garbage handshake");
    // A truncated handshake response, then silence: the router answers and closes.
    let mut s = raw(router.port());
    s.write_all(b"\x20\x00\x00\x01\x0d\xa2").expect("write");
    s.shutdown(std::net::Shutdown::Write).expect("shutdown");
    let got = read_to_close(&mut s);
    assert!(!got.is_empty(), "greeting expected");
    // An oversized length in the handshake response header.
    let mut c = client(&router);
    let mut s = raw(router.port());
    let mut greeting = [0u8; 4096];
    let _ = s.read(&mut greeting).expect("greeting");
    s.write_all(&[0xFF, 0xFF, 0xFF, 0x01]).expect("oversized header");
    let got = read_to_close(&mut s);
    assert_eq!(last_err(&got), Some(1043), "oversized: {got:?}");
    // The router is still fine.
    let one: Option<i64> = c.query_first("SELECT 1").expect("still serving");
    assert_eq!(one, Some(1));
}

#[test]
fn oversized_command_gets_1153_and_a_close() {
    let toml = crate::mysql_session::my_config(&[0], &crate::mysql_session::my_pool("main", "transaction", 2), "main")
        .replace("bind = \"127.0.0.1:0\"\n", "bind = \"127.0.0.1:0\"\nmax_message_size = \"4KiB\"\n");
    let router = crate::router::Router::start(&toml);
    let mut c = client(&router);
    let err = c.query_drop(format!("SELECT '{}'", "y".repeat(10_000))).expect_err("oversized");
    match err {
        mysql::Error::MySqlError(e) => assert_eq!(e.code, 1153, "{e}"),
        other => panic!("expected ERR 1153, got {other}"),
    }
    let mut again = client(&router);
    let one: Option<i64> = again.query_first("SELECT 1").expect("others unaffected");
    assert_eq!(one, Some(1));
}
