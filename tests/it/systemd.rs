//! Issue #25, systemd integration: the repository's unit file passes `systemd-analyze verify`,
//! and the built binary speaks the readiness protocol it declares (`Type=notify`): READY=1 only
//! once its listener accepts, RELOADING=1 then READY=1 around a SIGHUP, STOPPING=1 on SIGTERM.

// Blocking test code driving a child process, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::os::unix::net::UnixDatagram;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::router::{pg_config, pg_pool};
use crate::support::{dbs, free_port};

#[test]
fn the_unit_file_passes_systemd_analyze_verify() {
    let root = env!("CARGO_MANIFEST_DIR");
    let unit = std::fs::read_to_string(format!("{root}/querypilot.service")).expect("read querypilot.service");
    // verify checks that ExecStart's binary exists: point it at the one cargo built.
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("querypilot.service");
    std::fs::write(&path, unit.replace("/usr/local/bin/querypilot", env!("CARGO_BIN_EXE_querypilot")))
        .expect("write unit");
    let out = Command::new("systemd-analyze").arg("verify").arg(&path).output().expect("run systemd-analyze");
    let report = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "systemd-analyze verify failed:\n{report}");
    // Unknown keys and bad values are only warnings (exit 0): none may be printed for our unit.
    let ours: Vec<&str> = report.lines().filter(|l| l.contains("querypilot.service")).collect();
    assert!(ours.is_empty(), "systemd-analyze complains about the unit:\n{report}");
}

fn next_state(manager: &UnixDatagram) -> String {
    let mut buf = [0u8; 512];
    let len = manager.recv(&mut buf).expect("a notification within the timeout");
    String::from_utf8_lossy(&buf[..len]).into_owned()
}

fn signal(pid: u32, sig: &str) {
    assert!(Command::new("kill").arg(format!("-{sig}")).arg(pid.to_string()).status().expect("kill").success());
}

#[test]
fn readiness_reload_and_stop_reach_the_service_manager() {
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = dir.path().join("notify.sock");
    let manager = UnixDatagram::bind(&socket).expect("bind the notify socket");
    manager.set_read_timeout(Some(Duration::from_secs(30))).expect("timeout");
    let port = free_port();
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
    let config = dir.path().join("querypilot.toml");
    std::fs::write(&config, pg_config(&[0], &pools, "main").replace("127.0.0.1:0", &format!("127.0.0.1:{port}")))
        .expect("write config");
    let mut router = Command::new(env!("CARGO_BIN_EXE_querypilot"))
        .arg("-c")
        .arg(&config)
        .env("NOTIFY_SOCKET", &socket)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the router");

    let ready = next_state(&manager);
    assert!(ready.starts_with("READY=1\n"), "first notification: {ready:?}");
    assert!(ready.contains(&format!("MAINPID={}", router.id())), "{ready:?}");
    std::net::TcpStream::connect(("127.0.0.1", port)).expect("READY=1 comes after the listener is bound");

    signal(router.id(), "HUP");
    assert!(next_state(&manager).starts_with("RELOADING=1\n"));
    assert!(next_state(&manager).starts_with("READY=1\n"), "READY=1 again once the reload is over");

    signal(router.id(), "TERM");
    assert!(next_state(&manager).starts_with("STOPPING=1"));
    let t = Instant::now();
    let status = loop {
        if let Some(s) = router.try_wait().expect("try_wait") {
            break s;
        }
        assert!(t.elapsed() < Duration::from_secs(15), "the router did not exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit code 0 after SIGTERM: {status:?}");
}
