//! Issue #18: an error inside a long extended-protocol batch reaches the client while it is
//! still sending the batch, as from the server itself. asyncpg's `executemany` streams 2,000
//! rows of 32 KiB (64 MB) before one Sync; the server reports the unique violation on row 3 at
//! once, and the client stops early — through the router too, in session and transaction mode.

use std::path::Path;
use std::process::Command;

use crate::pg_util::router;
use crate::support::{dbs, unique_name};

const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors");

/// Runs the asyncpg executemany script against `port`; returns its output lines.
fn asyncpg_executemany(port: u16, database: &str) -> Vec<String> {
    let table = unique_name("exm");
    let out = Command::new("/usr/bin/python3")
        .arg(Path::new(SCRIPTS).join("asyncpg_executemany.py"))
        .args([&port.to_string(), database, &table])
        .output()
        .unwrap_or_else(|e| panic!("run asyncpg (python3-asyncpg, installed by .ci/deps.sh): {e}"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "asyncpg failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

/// How many rows the client had generated when it saw the error.
fn rows_generated(lines: &[String]) -> usize {
    let line = lines.iter().find_map(|l| l.strip_prefix("rows generated ")).expect("rows generated line");
    line.trim().parse().expect("a count")
}

#[test]
fn asyncpg_executemany_sees_a_unique_violation_before_sending_the_whole_batch() {
    let direct = asyncpg_executemany(dbs().pg.primary_port, &dbs().pg.database);
    assert_eq!(direct.first().map(String::as_str), Some("unique violation"));
    let direct_rows = rows_generated(&direct);
    for mode in ["session", "transaction"] {
        let r = router(mode, 2, "");
        let lines = asyncpg_executemany(r.port(), "main");
        assert_eq!(lines.first().map(String::as_str), Some("unique violation"), "{mode}: {lines:?}");
        assert_eq!(lines.last().map(String::as_str), Some("after 0"), "{mode}: the failed batch left rows");
        let rows = rows_generated(&lines);
        // Directly the client stops after a few dozen rows, through the router after about a
        // hundred (one more hop of socket buffers); waiting for the whole batch means 2,000.
        assert!(rows < 1000, "{mode}: the error reached the client after {rows} rows (directly: {direct_rows})");
    }
}
