//! Issue #18 (protocol fidelity) and #19 case 3 with psycopg 3's pipeline mode (libpq
//! pipelines), driven through `tests/connectors/psycopg_pipeline.py`: an error inside a
//! pipeline is answered exactly as the server answers it, a client that leaves mid-pipeline
//! gives its backend back, and with read/write split on a pipeline is routed as one unit, in
//! statement pooling too (the batch up to Sync keeps one connection: a pipeline with a write runs
//! whole on the primary, and a write after a flushed standby read is refused before it runs).

use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use crate::pg_util::router;
use crate::router::{pg_pool, Router};
use crate::support::{dbs, unique_name};

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors");

/// Runs the psycopg pipeline script in `mode` against the router on `port`, database
/// `database`; returns its output lines, or its stderr as the error.
pub fn psycopg(mode: &str, port: u16, database: &str, table: &str) -> Result<Vec<String>, String> {
    let dsn = format!("host=127.0.0.1 port={port} user=app password=app dbname={database} connect_timeout=10");
    let out = Command::new("/usr/bin/python3")
        .arg(Path::new(SCRIPTS).join("psycopg_pipeline.py"))
        .args([mode, &dsn, table])
        .output()
        .unwrap_or_else(|e| panic!("run psycopg (python3-psycopg, installed by .ci/deps.sh): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
    if out.status.success() {
        Ok(stdout)
    } else {
        Err(format!("{stdout:?}\n{}", String::from_utf8_lossy(&out.stderr)))
    }
}

/// Asserts that a new client gets a backend through the router within `limit` (a leaked
/// backend in a 2-connection pool makes it wait for the pool's acquire timeout).
fn pool_serves_within(port: u16, limit: Duration) {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let r = crate::pg_util::connect(port, "main", "app").and_then(|mut c| c.query_one("SELECT 7", &[]));
        let _ = tx.send(r.map(|row| row.get::<_, i32>(0)).map_err(|e| e.to_string()));
    });
    let got = rx.recv_timeout(limit).unwrap_or_else(|_| panic!("no backend within {limit:?}: a backend leaked"));
    assert_eq!(got, Ok(7));
}

#[test]
fn psycopg_pipeline_error_then_sync_is_answered_like_the_server_and_frees_the_backend() {
    for mode in ["session", "transaction"] {
        let r = router(mode, 2, "");
        for round in 0..2 {
            let lines = psycopg("abort", r.port(), "main", "").unwrap_or_else(|e| panic!("{mode} abort {round}: {e}"));
            assert_eq!(lines, ["undefined table", "pipeline aborted", "(1,) (2,)", "(3,)"], "{mode} round {round}");
        }
        // Two clients vanish inside an aborted pipeline, before its Sync: each backend must
        // come back (closed or reset), or the 2-connection pool is exhausted for good.
        for round in 0..2 {
            let lines = psycopg("leave", r.port(), "main", "").unwrap_or_else(|e| panic!("{mode} leave {round}: {e}"));
            assert_eq!(lines, ["undefined table"], "{mode} leave {round}");
        }
        pool_serves_within(r.port(), Duration::from_secs(10));
        pool_serves_within(r.port(), Duration::from_secs(10));
    }
}

/// A read/write split router: pools `primary` and `replica` in `mode` on the harness's servers.
fn split_router(mode: &str) -> Router {
    split_router_with(mode, "")
}

/// [`split_router`] with more `[routing]` keys.
fn split_router_with(mode: &str, routing: &str) -> Router {
    let pg = &dbs().pg;
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n{}\n{}\n\
         [routing]\nread_write_split = true\nread_pool = \"replica\"\nwrite_pool = \"primary\"\n{routing}\n",
        pg_pool("primary", pg.primary_port, mode, 2),
        pg_pool("replica", pg.replica_port, mode, 2),
    ))
}

/// `v` of row 1 of `table` on the primary.
fn primary_v(table: &str) -> i32 {
    dbs().pg.primary_client().query_one(&format!("SELECT v FROM {table} WHERE id = 1"), &[]).expect("read v").get(0)
}

#[test]
fn psycopg_pipeline_with_a_write_runs_whole_on_the_primary_and_reads_alone_on_the_standby() {
    let t = unique_name("h3");
    let pg = &dbs().pg;
    pg.primary_client()
        .batch_execute(&format!("CREATE TABLE {t}(id int primary key, v int); INSERT INTO {t} VALUES (1, 10)"))
        .expect("setup");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    let mut v = 10;
    for mode in ["session", "transaction", "statement"] {
        let r = split_router(mode);
        let lines = psycopg("route", r.port(), &pg.database, &t).unwrap_or_else(|e| panic!("{mode} route: {e}"));
        let (a, b) = (v, v + 1);
        assert_eq!(
            lines,
            [format!("(False, {a}) (False, {b}) (False, {b})")],
            "{mode}: every statement on the primary"
        );
        v += 1;
        assert_eq!(primary_v(&t), v, "{mode}: the UPDATE landed on the primary");
        pg.wait_replica_caught_up(Duration::from_secs(20));
        let lines = psycopg("reads", r.port(), &pg.database, &t).unwrap_or_else(|e| panic!("{mode} reads: {e}"));
        assert_eq!(lines, [format!("(True, {v}) (True, 1)")], "{mode}: a pipeline of reads stays on the standby");
    }
}

#[test]
fn psycopg_pipeline_write_after_a_flushed_standby_read_is_refused_with_25006() {
    let t = unique_name("h3f");
    let pg = &dbs().pg;
    pg.primary_client()
        .batch_execute(&format!("CREATE TABLE {t}(id int primary key, v int); INSERT INTO {t} VALUES (1, 10)"))
        .expect("setup");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    for mode in ["session", "transaction", "statement"] {
        let r = split_router(mode);
        let lines = psycopg("flush", r.port(), &pg.database, &t).unwrap_or_else(|e| panic!("{mode} flush: {e}"));
        assert_eq!(lines.len(), 3, "{mode}: {lines:?}");
        assert!(
            lines[0].starts_with("update refused 25006 cannot run a statement that is not replica-safe")
                && lines[0].contains("read pool \"replica\""),
            "{mode}: {lines:?}"
        );
        assert_eq!(lines[1..], ["first in recovery: True", "after: (1,)"], "{mode}");
        assert_eq!(primary_v(&t), 10, "{mode}: the refused UPDATE ran nowhere");
    }
}

#[test]
fn psycopg_pipeline_refused_by_a_rule_after_a_flush_rolls_its_insert_back() {
    let t = unique_name("refp");
    let pg = &dbs().pg;
    pg.primary_client().batch_execute(&format!("CREATE TABLE {t}(id int primary key, v int)")).expect("setup");
    for mode in ["session", "transaction"] {
        let pools = pg_pool("main", pg.primary_port, mode, 2);
        let rule = "[[routing.pattern_rules]]\nname = \"no-drops\"\ntype = \"regex\"\n\
                    pattern = \"(?i)^\\\\s*drop\\\\s\"\nreject = \"DROP is disabled by policy\"\n";
        let r = Router::start(&format!("{}{rule}", crate::router::pg_config(&[0], &pools, "main")));
        let lines = psycopg("refused", r.port(), "main", &t).unwrap_or_else(|e| panic!("{mode} refused: {e}"));
        // As if the DROP had failed on the server: the pipeline's implicit transaction, and
        // with it the INSERT that ran before the Flush, is rolled back.
        assert_eq!(lines, ["refused 42501", "rows (0,)"], "{mode}");
    }
}

/// Whether `sql` (returning pg_is_in_recovery() first) ran on the standby.
fn on_standby(c: &mut postgres::Client, sql: &str) -> bool {
    c.query_one(sql, &[]).unwrap_or_else(|e| panic!("{sql}: {e}")).get(0)
}

#[test]
fn rust_postgres_read_only_transaction_does_not_pin_later_reads_to_the_primary() {
    // read_your_writes = "session": after a statement that may change data, the session reads
    // from the primary. In a READ ONLY transaction nothing can.
    for mode in ["session", "transaction"] {
        let r = split_router_with(mode, "read_your_writes = \"session\"");
        let mut c = r.pg(&dbs().pg.database);
        c.batch_execute("BEGIN READ ONLY").expect("begin");
        c.batch_execute("SELECT random()").expect("volatile read");
        c.batch_execute("COMMIT").expect("commit");
        assert!(on_standby(&mut c, "SELECT pg_is_in_recovery()"), "{mode}: pinned by a READ ONLY transaction");
        let mut rw = r.pg(&dbs().pg.database);
        rw.batch_execute("BEGIN").expect("begin");
        rw.batch_execute("SELECT random()").expect("volatile read");
        rw.batch_execute("COMMIT").expect("commit");
        assert!(!on_standby(&mut rw, "SELECT pg_is_in_recovery()"), "{mode}: a read-write one still pins");
    }
}
