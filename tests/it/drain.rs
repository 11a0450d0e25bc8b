//! Issue #12, drain without loss: pgbench TPC-B runs through the built binary in transaction
//! mode, the router gets SIGTERM mid-run, and afterwards every transaction pgbench counted as
//! committed is in `pgbench_history`, none is half applied (balances agree with the history),
//! in-flight clients got an error rather than silence, and the process exited 0 within its
//! drain window.

// Blocking test code driving child processes, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::pg_pgbench::{number, Database};
use crate::router::{pg_config, pg_pool};
use crate::support::{dbs, free_port};

/// The configured `general.shutdown_drain`.
const DRAIN: Duration = Duration::from_secs(10);
/// Scheduling slack on top of the drain window on a loaded machine.
const SLACK: Duration = Duration::from_secs(5);

fn pgbench(port: u16, db: &str, args: &[&str]) -> Command {
    let mut cmd = Command::new("pgbench");
    cmd.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "app"]).args(args).arg(db).env("PGPASSWORD", "app");
    cmd
}

/// Waits for `child` to exit, at most `limit`.
fn wait_at_most(child: &mut Child, limit: Duration, what: &str) -> std::process::ExitStatus {
    let t = Instant::now();
    loop {
        if let Some(s) = child.try_wait().expect("wait") {
            return s;
        }
        if t.elapsed() > limit {
            let _ = child.kill();
            panic!("{what} did not exit within {limit:?}");
        }
        thread::sleep(Duration::from_millis(20));
    }
}

/// Figures read directly from the primary (not through the router).
struct Ledger {
    history_rows: i64,
    history_delta: i64,
    accounts: i64,
    branches: i64,
    tellers: i64,
}

fn ledger(db: &str) -> Ledger {
    let pg = &dbs().pg;
    let mut direct =
        pg.config(pg.primary_port, &pg.superuser, "").dbname(db).connect(postgres::NoTls).expect("direct connection");
    let row = direct
        .query_one(
            "SELECT (SELECT count(*) FROM pgbench_history), (SELECT coalesce(sum(delta), 0) FROM pgbench_history)::int8, \
             (SELECT sum(abalance) FROM pgbench_accounts)::int8, (SELECT sum(bbalance) FROM pgbench_branches)::int8, \
             (SELECT sum(tbalance) FROM pgbench_tellers)::int8",
            &[],
        )
        .expect("ledger");
    Ledger {
        history_rows: row.get(0),
        history_delta: row.get(1),
        accounts: row.get(2),
        branches: row.get(3),
        tellers: row.get(4),
    }
}

#[test]
fn sigterm_during_pgbench_loses_no_committed_transaction() {
    let db = Database::create();
    let init = pgbench(dbs().pg.primary_port, &db.0, &["-i", "-q", "-s", "1"]).output().expect("pgbench -i");
    assert!(init.status.success(), "pgbench -i: {}", String::from_utf8_lossy(&init.stderr));
    let before = ledger(&db.0);

    let port = free_port();
    let pools = pg_pool("pgb", dbs().pg.primary_port, "transaction", 4)
        .replace(&format!("database = \"{}\"", dbs().pg.database), &format!("database = \"{}\"", db.0));
    let toml = pg_config(&[0, 1], &pools, "pgb")
        .replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
        .replace("shutdown_drain = \"2s\"", &format!("shutdown_drain = \"{}s\"", DRAIN.as_secs()));
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("querypilot.toml");
    std::fs::write(&path, toml).expect("write config");
    let mut router = Command::new(env!("CARGO_BIN_EXE_querypilot"))
        .arg("-c")
        .arg(&path)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the router");
    crate::support::eventually(Duration::from_secs(20), "the router to accept connections", || {
        std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
    });

    // 8 clients for up to 60 s; the router is told to stop once they are well under way (by
    // progress, not by the clock: on a loaded machine the logins alone can take seconds).
    let bench = pgbench(port, "pgb", &["-n", "-M", "simple", "-c", "8", "-j", "2", "-T", "60"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start pgbench");
    crate::support::eventually(Duration::from_secs(50), "pgbench to commit 100 transactions", || {
        ledger(&db.0).history_rows - before.history_rows >= 100
    });
    let signalled = Instant::now();
    let kill = Command::new("kill").arg("-TERM").arg(router.id().to_string()).status().expect("kill");
    assert!(kill.success());
    let status = wait_at_most(&mut router, DRAIN + SLACK, "the router");
    let exited_after = signalled.elapsed();
    assert!(status.success(), "exit code 0 after SIGTERM, got {status:?}");

    let out = bench.wait_with_output().expect("pgbench output");
    let report = String::from_utf8_lossy(&out.stdout);
    let errors = String::from_utf8_lossy(&out.stderr);
    const PROCESSED: &str = "number of transactions actually processed";
    assert!(report.contains(PROCESSED), "pgbench printed no report:\n{report}\n{errors}");
    let processed = number(&report, PROCESSED);
    let after = ledger(&db.0);
    let committed = after.history_rows - before.history_rows;
    eprintln!(
        "drain: pgbench reported {processed} committed transactions, pgbench_history gained {committed}; \
         router exited {exited_after:?} after SIGTERM (window {DRAIN:?})\npgbench stderr:\n{errors}"
    );
    assert!(processed > 0, "pgbench committed something before the drain:\n{report}\n{errors}");
    assert_eq!(
        committed, processed as i64,
        "every transaction pgbench counted is in pgbench_history, and no other:\n{report}"
    );
    assert_eq!(
        (after.accounts, after.branches, after.tellers),
        (after.history_delta, after.history_delta, after.history_delta),
        "no transaction is half applied: every balance moved by exactly the history's deltas"
    );
    // Clients that were between transactions were told the router is going away (57P01)
    // rather than left hanging; pgbench reports them as aborted.
    assert!(
        errors.contains("terminating connection") || errors.contains("57P01") || errors.contains("server closed"),
        "in-flight clients get an error: {errors}"
    );
}
