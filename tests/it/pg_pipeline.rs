//! Issue #18 (protocol fidelity) and #19 case 3 with psycopg 3's pipeline mode (libpq
//! pipelines), driven through `tests/connectors/psycopg_pipeline.py`: an error inside a
//! pipeline is answered exactly as the server answers it, a client that leaves mid-pipeline
//! gives its backend back, and with read/write split on a pipeline is routed as one unit.

use std::path::Path;
use std::process::Command;
use std::sync::mpsc;
use std::time::Duration;

use crate::pg_util::router;

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
