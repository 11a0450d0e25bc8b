//! Issue #2: several cores accept on one port, a config change reaches all of them, the CLI
//! validates configs, and SIGTERM drains within the window.

use std::io::Write;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::router::{pg_config, pg_pool, Router};
use crate::support::dbs;

#[test]
fn every_core_accepts_and_every_core_applies_a_reload() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 4);
    let toml = pg_config(&[0, 1], &pools, "main");
    let router = Router::start(&toml);
    // SO_REUSEPORT spreads connections by source port: with enough of them both cores get some.
    let mut clients: Vec<postgres::Client> = (0..24).map(|_| router.pg("main")).collect();
    for c in clients.iter_mut() {
        let row = c.query_one("SELECT 1::int", &[]).expect("query through router");
        assert_eq!(row.get::<_, i32>(0), 1);
    }
    let reports = router.control().collect().expect("collect");
    assert_eq!(reports.len(), 2);
    for r in &reports {
        assert!(r.counters.sessions_accepted_total > 0, "core {:?} accepted no connection: {reports:?}", r.core);
    }
    let v = router.reload_with(&toml.replace("max_connections = 4", "max_connections = 5")).expect("reload");
    let reports = router.control().collect().expect("collect");
    assert!(reports.iter().all(|r| r.version == v), "every core acknowledged {v:?}: {reports:?}");
    // Sessions keep working on the new snapshot.
    for c in clients.iter_mut() {
        c.simple_query("SELECT 2").expect("query after reload");
    }
}

#[test]
fn reload_with_a_broken_file_keeps_the_old_config() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
    let toml = pg_config(&[0], &pools, "main");
    let router = Router::start(&toml);
    let before = router.control().current().expect("current").version;
    let err = router.reload_with("[general]\npool_mod = \"session\"\n").expect_err("invalid config must be rejected");
    assert!(err.to_string().contains("pool_mod"), "names the bad key: {err}");
    assert_eq!(router.control().current().expect("current").version, before);
    router.pg("main").simple_query("SELECT 1").expect("old config still serves");
}

fn querypilot() -> Command {
    Command::new(env!("CARGO_BIN_EXE_querypilot"))
}

fn check(text: &str) -> (bool, String) {
    let mut f = tempfile::NamedTempFile::new().expect("tempfile");
    f.write_all(text.as_bytes()).expect("write");
    let out = querypilot().arg("--check").arg("-c").arg(f.path()).output().expect("run querypilot");
    (out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn check_accepts_the_example_and_rejects_each_broken_config_with_its_line() {
    let example = concat!(env!("CARGO_MANIFEST_DIR"), "/querypilot.toml.example");
    let out = querypilot().args(["--check", "-c", example]).output().expect("run");
    assert!(out.status.success(), "example must validate: {}", String::from_utf8_lossy(&out.stderr));

    let base = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:6432\"\n\n[pools.main]\nusername = \"u\"\npassword = \"p\"\nbackends = [{ host = \"127.0.0.1\", port = 5432 }]\n\n[routing]\ndefault_pool = \"main\"\n";
    let cases = [
        (base.replace("bind =", "bnid ="), "bnid", 3),
        (base.replace("port = 5432 }", "port = 5432, weight = 0 }"), "weight", 8),
        (base.replace("default_pool = \"main\"", "default_pool = \"nope\""), "nope", 11),
        (
            base.replace("127.0.0.1:6432", "0.0.0.0:6432").replace("username = \"u\"\npassword = \"p\"\n", ""),
            "anonymous",
            3,
        ),
    ];
    for (text, needle, line) in cases {
        let (ok, err) = check(&text);
        assert!(!ok, "must be rejected:\n{text}");
        assert!(err.contains(needle), "message names {needle:?}: {err}");
        assert!(err.contains(&format!(":{line}:")), "message names line {line}: {err}");
    }
}

#[test]
fn sigterm_with_idle_clients_exits_zero_within_the_drain_window() {
    let dir = tempfile::tempdir().expect("tempdir");
    let port = crate::support::free_port();
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
    let toml = pg_config(&[0, 1], &pools, "main").replace("127.0.0.1:0", &format!("127.0.0.1:{port}"));
    let path = dir.path().join("q.toml");
    std::fs::write(&path, toml).expect("write");
    let mut child =
        querypilot().arg("-c").arg(&path).stdout(Stdio::null()).stderr(Stdio::piped()).spawn().expect("spawn");
    let mut clients = Vec::new();
    let started = Instant::now();
    while clients.len() < 3 {
        let mut c = postgres::Config::new();
        c.host("127.0.0.1").port(port).user("app").password("app").dbname("main");
        match c.connect(postgres::NoTls) {
            Ok(c) => clients.push(c),
            Err(_) if started.elapsed() < Duration::from_secs(20) => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("router did not come up: {e}"),
        }
    }
    let t0 = Instant::now();
    // SAFETY-free: kill(1) from the shell is the same signal a service manager sends.
    let status = Command::new("kill").arg("-TERM").arg(child.id().to_string()).status().expect("kill");
    assert!(status.success());
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        assert!(t0.elapsed() < Duration::from_secs(10), "router did not exit within the drain window");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit code 0 after SIGTERM, got {status:?}");
    assert!(t0.elapsed() < Duration::from_secs(2) + Duration::from_secs(3), "drain window is 2s");
    drop(clients);
}
