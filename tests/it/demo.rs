//! Issue #25, the README's first command shows the product: `perf/demo.sh --exit` runs its whole
//! walkthrough against real servers it starts itself, and every placement it prints is the one
//! the product promises (the demo derives each from `pg_is_in_recovery()` / the backend port of
//! the statement itself, or for a MySQL INSERT the server id and port it stored on the primary);
//! PostgreSQL and MySQL clients are each split by the same router (#24). Without `--exit`,
//! Ctrl-C stops the router and the databases.

// Blocking test code driving child processes, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::support::free_port;

/// A free port whose successor is free too (the admin API listens on metrics port + 1). Both
/// are handed out by [`free_port`], so no other test of this process is given the successor
/// while the demo starts its databases (taking it only by a bind check let the next test's
/// `free_port` hand it out again: "cannot bind the admin server … Address already in use").
fn free_port_pair() -> u16 {
    loop {
        let (port, next) = (free_port(), free_port());
        if port.checked_add(1) == Some(next) {
            return port;
        }
    }
}

fn demo(base: &std::path::Path, exit: bool) -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg(concat!(env!("CARGO_MANIFEST_DIR"), "/perf/demo.sh"))
        .args(["--binary", env!("CARGO_BIN_EXE_querypilot")])
        .args(["--pg-port", &free_port().to_string(), "--mysql-port", &free_port().to_string()])
        .args(["--admin-port", &free_port_pair().to_string()])
        .arg("--base")
        .arg(base);
    if exit {
        cmd.arg("--exit");
    }
    cmd
}

/// The placement printed for the walkthrough line labelled `label`.
fn placement<'a>(out: &'a str, label: &str) -> &'a str {
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with(label) && l.contains("->"))
        .unwrap_or_else(|| panic!("no line for {label:?} in:\n{out}"));
    line.split("->").nth(1).map(str::trim).and_then(|r| r.split_whitespace().next()).unwrap_or("")
}

#[test]
fn the_demo_walkthrough_shows_each_statement_where_it_must_run() {
    let dir = tempfile::tempdir().expect("tempdir");
    let out = demo(&dir.path().join("dbs"), true).output().expect("run perf/demo.sh");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "demo failed:\n{text}\n{}", String::from_utf8_lossy(&out.stderr));
    let expected = [
        ("read ", "replica"),
        ("write (INSERT)", "primary"),
        ("read after its own write", "primary"),
        ("read in a new session", "replica"),
        ("nextval() (volatile)", "primary"),
        ("SELECT ... FOR UPDATE (row lock)", "primary"),
        ("MySQL read ", "replica"),
        ("MySQL write (INSERT)", "primary"),
        ("MySQL read after its own write", "primary"),
        ("MySQL read in a new session", "replica"),
        ("MySQL RAND() (volatile)", "primary"),
        ("MySQL SELECT ... FOR UPDATE", "primary"),
        ("read (pool myapp_replica)", "replica"),
    ];
    for (label, want) in expected {
        assert_eq!(placement(&text, label), want, "{label}:\n{text}");
    }
    // The dry-run explains both decisions, and /metrics shows the decisions made.
    assert_eq!(placement(&text, "SELECT note FROM demo_events"), "pool");
    assert!(text.contains("pool app_replica, reason replica_eligible"), "{text}");
    assert!(text.contains("SELECT nextval('demo_seq')") && text.contains("pool app, reason"), "{text}");
    assert!(text.contains("sqp_routing_decisions_total{"), "{text}");
    assert!(!dir.path().join("dbs").exists(), "--exit stops the databases and removes their directory");
}

#[test]
fn ctrl_c_stops_the_router_and_the_databases() {
    let dir = tempfile::tempdir().expect("tempdir");
    let base = dir.path().join("dbs");
    let mut child = demo(&base, false).stdout(Stdio::piped()).stderr(Stdio::null()).spawn().expect("start the demo");
    let stdout = child.stdout.take().expect("stdout");
    let mut router_pid = None;
    for line in BufReader::new(stdout).lines() {
        let line = line.expect("demo output");
        if let Some(rest) = line.strip_prefix("QueryPilot is running (pid ") {
            router_pid = rest.split(')').next().map(str::to_owned);
        }
        if line.contains("Press Ctrl-C") {
            break;
        }
    }
    let router_pid = router_pid.expect("the demo printed the router's pid");
    assert!(Command::new("kill").args(["-INT", &child.id().to_string()]).status().expect("kill").success());
    let t = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(30), "the demo did not stop on SIGINT");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(!status.success(), "interrupted, so not a success exit: {status:?}");
    let alive = Command::new("kill").args(["-0", &router_pid]).status().expect("kill -0").success();
    assert!(!alive, "the router (pid {router_pid}) is gone after Ctrl-C");
    assert!(!base.exists(), "the databases were stopped and their directory removed");
}
