//! Issue #25, logs never kill or wedge the router: the built binary runs with stdout and
//! stderr pipes whose readers are gone (a `| tee` that was stopped, a log shipper restart).
//! It must keep serving, still reload on SIGHUP (whose handler logs) and still stop on SIGTERM
//! within its drain window with exit code 0.

// Blocking test code driving a child process, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::process::{Child, Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use crate::router::{pg_config, pg_pool};
use crate::support::{dbs, eventually, free_port};

const DRAIN: Duration = Duration::from_secs(2);
/// Scheduling slack on top of the drain window on a loaded machine.
const SLACK: Duration = Duration::from_secs(8);

fn signal(child: &Child, sig: &str) {
    let status = Command::new("kill").arg(format!("-{sig}")).arg(child.id().to_string()).status().expect("kill");
    assert!(status.success(), "kill -{sig}");
}

fn query(port: u16) -> Result<i32, postgres::Error> {
    let pg = &dbs().pg;
    let mut c = postgres::Config::new()
        .host("127.0.0.1")
        .port(port)
        .user(&pg.user)
        .password(&pg.password)
        .dbname("main")
        .connect_timeout(Duration::from_secs(10))
        .connect(postgres::NoTls)?;
    c.query_one("SELECT 41 + 1", &[]).map(|r| r.get(0))
}

#[test]
fn a_router_whose_log_readers_are_gone_keeps_serving_and_obeys_signals() {
    let port = free_port();
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
    // Debug level: every session writes several lines into the dead pipes.
    let toml = pg_config(&[0], &pools, "main")
        .replace("127.0.0.1:0", &format!("127.0.0.1:{port}"))
        .replace("[general]\n", "[general]\nlog_level = \"debug\"\n");
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("querypilot.toml");
    std::fs::write(&path, toml).expect("write config");
    let mut router = Command::new(env!("CARGO_BIN_EXE_querypilot"))
        .arg("-c")
        .arg(&path)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the router");
    // Close the read ends before the router writes its first line ("listening").
    drop(router.stdout.take());
    drop(router.stderr.take());

    eventually(Duration::from_secs(20), "the router to serve a query", || query(port).is_ok());
    for _ in 0..5 {
        assert_eq!(query(port).expect("query with dead log pipes"), 42);
    }
    assert!(router.try_wait().expect("try_wait").is_none(), "the router is still running");

    // SIGHUP reloads and logs from the signal thread: that thread must survive its failed write.
    signal(&router, "HUP");
    thread::sleep(Duration::from_millis(300));
    assert_eq!(query(port).expect("query after SIGHUP"), 42);

    let signalled = Instant::now();
    signal(&router, "TERM");
    loop {
        if let Some(status) = router.try_wait().expect("try_wait") {
            assert!(status.success(), "exit code 0 after SIGTERM, got {status:?}");
            break;
        }
        if signalled.elapsed() > DRAIN + SLACK {
            let _ = router.kill();
            panic!("the router ignored SIGTERM for {:?} (drain window {DRAIN:?})", signalled.elapsed());
        }
        thread::sleep(Duration::from_millis(20));
    }
}
