//! LOAD DATA LOCAL INFILE through the router (#4) against the harness's real MariaDB: a pool
//! with `local_infile = true` relays the server's file request and the client's file, with the
//! `mysql` crate and with the `mariadb` CLI, in every pool mode; a client that did not allow
//! local files gets a clear error; a client that breaks off mid-file costs its backend
//! connection, not the pool's health.

use std::io::Write;
use std::process::Command;
use std::sync::{Arc, Mutex};

use mysql::prelude::Queryable;
use mysql::LocalInfileHandler;

use crate::mysql_session::{my_config, my_pool};
use crate::router::Router;
use crate::support::{dbs, unique_name};

const MODES: [&str; 3] = ["session", "transaction", "statement"];

/// A router whose pool `main` (`mode`, `max` connections) relays LOCAL INFILE.
fn router(mode: &str, max: u32) -> Router {
    let pool = format!("{}local_infile = true\n", my_pool("main", mode, max));
    Router::start(&my_config(&[0], &pool, "main"))
}

/// The `mysql` crate through the router; it allows local files whenever the server offers them.
/// `packet` is its `max_allowed_packet`, which also sizes the packets it sends a file in.
pub(crate) fn client(router: &Router, packet: usize) -> mysql::Conn {
    let my = &dbs().my;
    let opts = my.opts(router.port(), &my.user, &my.password).max_allowed_packet(Some(packet));
    mysql::Conn::new(opts).unwrap_or_else(|e| panic!("connect through router: {e}"))
}

/// A table `(id INT PRIMARY KEY, label VARCHAR(64))`, made directly on the primary.
fn table() -> String {
    let t = unique_name("my_infile");
    dbs()
        .my
        .primary_client()
        .query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY, label VARCHAR(64))"))
        .expect("create");
    t
}

/// (rows, sum of ids) of `t`, read on the primary directly.
fn contents(t: &str) -> (i64, i64) {
    let row: Option<(i64, Option<i64>)> =
        dbs().my.primary_client().query_first(format!("SELECT COUNT(*), SUM(id) FROM {t}")).expect("count");
    let (n, sum) = row.expect("one row");
    (n, sum.unwrap_or(0))
}

/// CSV lines `id,label-id` for ids `from..to`.
fn csv(from: u32, to: u32) -> Vec<u8> {
    let mut out = Vec::new();
    for i in from..to {
        writeln!(out, "{i},label-{i:08}").expect("write");
    }
    out
}

/// A handler that sends `data` and records the file name the server asked for.
fn handler(data: Vec<u8>, asked: Arc<Mutex<Vec<u8>>>) -> LocalInfileHandler {
    LocalInfileHandler::new(move |name, w| {
        asked.lock().expect("lock").extend_from_slice(name);
        w.write_all(&data)
    })
}

fn sum(from: u32, to: u32) -> i64 {
    (from..to).map(i64::from).sum()
}

/// A few thousand rows in many small packets (4 KiB `max_allowed_packet`), in every pool mode;
/// the session goes on afterwards, and in transaction mode inside an explicit transaction too.
#[test]
fn rows_arrive_through_the_router_in_every_mode() {
    for mode in MODES {
        let t = table();
        let r = router(mode, 1);
        let mut c = client(&r, 4096);
        let asked = Arc::new(Mutex::new(Vec::new()));
        let data = csv(1, 5001);
        assert!(data.len() > 20 * 4096, "several packets");
        c.set_local_infile_handler(Some(handler(data, asked.clone())));
        c.query_drop(format!("LOAD DATA LOCAL INFILE 'rows.csv' INTO TABLE {t} FIELDS TERMINATED BY ','"))
            .unwrap_or_else(|e| panic!("{mode}: load: {e}"));
        assert_eq!(c.affected_rows(), 5000, "{mode}");
        assert_eq!(
            asked.lock().expect("lock").as_slice(),
            b"rows.csv",
            "{mode}: the server's request reached the client unchanged"
        );
        assert_eq!(contents(&t), (5000, sum(1, 5001)), "{mode}");
        let one: Option<i64> = c.query_first("SELECT 1").expect("session goes on");
        assert_eq!(one, Some(1), "{mode}");
        if mode != "statement" {
            c.set_local_infile_handler(Some(handler(csv(5001, 5101), Arc::default())));
            c.query_drop("BEGIN").expect("begin");
            c.query_drop(format!("LOAD DATA LOCAL INFILE 'more.csv' INTO TABLE {t} FIELDS TERMINATED BY ','"))
                .unwrap_or_else(|e| panic!("{mode}: load in a transaction: {e}"));
            let inside: Option<i64> = c.query_first(format!("SELECT COUNT(*) FROM {t}")).expect("count inside");
            assert_eq!(inside, Some(5100), "{mode}: the transaction's own connection sees the rows");
            c.query_drop("ROLLBACK").expect("rollback");
            assert_eq!(contents(&t), (5000, sum(1, 5001)), "{mode}: rolled back");
        }
    }
}

/// A file larger than one 16 MiB packet: the crate sends it in 16 MiB packets, which stream
/// through the router.
#[test]
fn a_file_over_one_packet_streams_through() {
    let t = table();
    let r = router("transaction", 1);
    let mut c = client(&r, 64 << 20);
    let rows = 900_000;
    let data = csv(1, rows + 1);
    assert!(data.len() > 16 << 20, "{} bytes", data.len());
    c.set_local_infile_handler(Some(handler(data, Arc::default())));
    c.query_drop(format!("LOAD DATA LOCAL INFILE 'big.csv' INTO TABLE {t} FIELDS TERMINATED BY ','")).expect("load");
    assert_eq!(contents(&t), (i64::from(rows), sum(1, rows + 1)));
}

fn cli(router: &Router, local_infile: bool, sql: &str) -> std::process::Output {
    Command::new("mariadb")
        .args(["--no-defaults", "--skip-ssl", "-h127.0.0.1", "-uapp", "-papp", "-N", "-B"])
        .arg(format!("--local-infile={}", u8::from(local_infile)))
        .arg(format!("-P{}", router.port()))
        .args(["app", "-e", sql])
        .output()
        .expect("run mariadb")
}

/// The MariaDB CLI loads a real file when it allows local files, and gets a clear error from
/// the router when it does not.
#[test]
fn mariadb_cli_with_and_without_local_files() {
    let t = table();
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cli.csv");
    std::fs::write(&path, csv(1, 3001)).expect("write file");
    let load = format!(
        "LOAD DATA LOCAL INFILE '{}' INTO TABLE {t} FIELDS TERMINATED BY ','; SELECT COUNT(*) FROM {t}",
        path.display()
    );
    let r = router("transaction", 2);
    let out = cli(&r, true, &load);
    assert!(out.status.success(), "mariadb failed: {}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(String::from_utf8_lossy(&out.stdout), "3000\n");
    assert_eq!(contents(&t), (3000, sum(1, 3001)));

    let refused = cli(&r, false, &load);
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("1148") && err.contains("needs a client that allows local files"), "{err}");
    assert_eq!(contents(&t), (3000, sum(1, 3001)), "nothing more was loaded");
}

/// A client that breaks off mid-file (its handler fails after sending part of it, and the
/// connection is dropped): the statement is aborted with the backend connection it ran on, and
/// the pool's only connection slot serves the next client normally.
#[test]
fn a_client_breaking_off_mid_file_costs_only_its_backend_connection() {
    for mode in MODES {
        let t = table();
        let r = router(mode, 1);
        let mut c = client(&r, 4096);
        let partial = csv(1, 2001);
        c.set_local_infile_handler(Some(LocalInfileHandler::new(move |_, w| {
            w.write_all(&partial)?;
            Err(std::io::Error::other("the client gives up"))
        })));
        let err = c.query_drop(format!("LOAD DATA LOCAL INFILE 'partial.csv' INTO TABLE {t} FIELDS TERMINATED BY ','"));
        assert!(err.is_err(), "{mode}: the handler failed");
        drop(c);
        let mut next = client(&r, 4096);
        let n: Option<i64> = next
            .query_first(format!("SELECT COUNT(*) FROM {t}"))
            .unwrap_or_else(|e| panic!("{mode}: next client: {e}"));
        assert_eq!(n, Some(0), "{mode}: the aborted load left no rows");
        next.set_local_infile_handler(Some(handler(csv(1, 11), Arc::default())));
        next.query_drop(format!("LOAD DATA LOCAL INFILE 'ok.csv' INTO TABLE {t} FIELDS TERMINATED BY ','"))
            .expect("load after");
        assert_eq!(contents(&t), (10, sum(1, 11)), "{mode}");
    }
}

/// A file packet larger than the listener's `max_message_size` is refused from its header
/// (1153) without being buffered: the session ends, the statement is aborted with its backend
/// connection, and the pool serves the next client.
#[test]
fn a_file_packet_over_max_message_size_ends_the_session() {
    let t = table();
    let pool = format!("{}local_infile = true\n", my_pool("main", "transaction", 1));
    let config = my_config(&[0], &pool, "main")
        .replace("bind = \"127.0.0.1:0\"\n", "bind = \"127.0.0.1:0\"\nmax_message_size = \"16KiB\"\n");
    let r = Router::start(&config);
    let mut c = client(&r, 64 << 10);
    c.set_local_infile_handler(Some(handler(csv(1, 20_001), Arc::default())));
    let err = c
        .query_drop(format!("LOAD DATA LOCAL INFILE 'big.csv' INTO TABLE {t} FIELDS TERMINATED BY ','"))
        .expect_err("a 64 KiB packet is over the limit");
    match err {
        mysql::Error::MySqlError(e) => {
            assert_eq!(e.code, 1153, "{}", e.message);
            assert!(e.message.contains("in a LOCAL INFILE file"), "{}", e.message);
        }
        other => panic!("expected ERR 1153, got {other}"),
    }
    drop(c);
    let mut next = client(&r, 64 << 10);
    let n: Option<i64> = next.query_first(format!("SELECT COUNT(*) FROM {t}")).expect("next client");
    assert_eq!(n, Some(0), "the refused load left no rows");
}

/// With the read/write split, only the write pool having `local_infile`: a session whose read
/// put it on the read pool loads through the write pool, as a text query and as a prepared
/// statement (MariaDB prepares LOAD DATA, and its execute asks for the file as the query
/// does) (#34: both were refused, the first by the read pool's missing `local_infile`, the
/// second as a file request of a statement that was not LOAD DATA).
#[test]
fn a_session_on_the_read_pool_loads_through_the_write_pool() {
    let my = &dbs().my;
    let t = table();
    my.wait_replica_caught_up(std::time::Duration::from_secs(20));
    let r = crate::causal_mysql::my_router_with(my, "local_infile = true\n", "");
    let mut c = client(&r, 4096);
    crate::support::eventually(std::time::Duration::from_secs(15), "a read on the replica", || {
        c.query_first::<u64, _>("SELECT @@server_id").expect("read") == Some(2)
    });
    c.set_local_infile_handler(Some(handler(csv(1, 101), Arc::default())));
    c.query_drop(format!("LOAD DATA LOCAL INFILE 'text.csv' INTO TABLE {t} FIELDS TERMINATED BY ','"))
        .expect("a text LOAD DATA after a read");
    assert_eq!(contents(&t), (100, sum(1, 101)));
    assert_eq!(c.query_first::<u64, _>("SELECT 1").expect("read"), Some(1));
    c.set_local_infile_handler(Some(handler(csv(101, 201), Arc::default())));
    c.exec_drop(format!("LOAD DATA LOCAL INFILE 'prepared.csv' INTO TABLE {t} FIELDS TERMINATED BY ','"), ())
        .expect("a prepared LOAD DATA");
    assert_eq!(c.affected_rows(), 100);
    assert_eq!(contents(&t), (200, sum(1, 201)));
}
