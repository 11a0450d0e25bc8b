//! Issue #6 (the parts without the routing engine): `/metrics` per core summing to the totals
//! and accepted by promtool, reload through the API, `/health` on drain, the bearer token, and
//! the plugin mount points — all over real HTTP against an in-process router.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::router::{pg_config, pg_pool, Router};
use crate::support::dbs;

/// A response: status, headers (lower-cased names) and body.
pub(crate) struct Reply {
    pub status: u16,
    pub head: String,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))
    }
}

pub(crate) fn http(addr: SocketAddr, method: &str, path: &str, headers: &[(&str, &str)]) -> Reply {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect to admin");
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: test\r\nContent-Length: 0\r\n");
    for (n, v) in headers {
        req.push_str(&format!("{n}: {v}\r\n"));
    }
    req.push_str("\r\n");
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read reply");
    let (head, body) = raw.split_once("\r\n\r\n").expect("reply has a head");
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("status code");
    Reply { status, head: head.to_ascii_lowercase(), body: body.to_owned() }
}

pub(crate) fn with_metrics(toml: &str, token: Option<&str>) -> String {
    let token = token.map(|t| format!("admin_token = \"{t}\"\n")).unwrap_or_default();
    format!("{toml}\n[metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n{token}")
}

pub(crate) fn addrs(router: &Router) -> (SocketAddr, SocketAddr) {
    let e = router.control().endpoints();
    (e.metrics.expect("metrics endpoint"), e.admin.expect("admin endpoint"))
}

/// Sum of the samples of `name` whose labels contain every `filters` pair, and how many series.
pub(crate) fn sum(text: &str, name: &str, filters: &[&str]) -> (f64, usize) {
    let mut total = 0.0;
    let mut n = 0;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((series, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let base = series.split('{').next().unwrap_or_default();
        if base == name && filters.iter().all(|f| series.contains(f)) {
            total += value.parse::<f64>().expect("numeric sample");
            n += 1;
        }
    }
    (total, n)
}

#[test]
fn metrics_per_core_sum_to_the_totals_and_promtool_accepts_them() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 4);
    let router = Router::start(&with_metrics(&pg_config(&[0, 1], &pools, "main"), None));
    let (metrics, _) = addrs(&router);
    let clients_n = 16;
    let mut clients: Vec<postgres::Client> = (0..clients_n).map(|_| router.pg("main")).collect();
    for c in clients.iter_mut() {
        for _ in 0..3 {
            c.simple_query("SELECT 1").expect("query through router");
        }
    }
    let reply = http(metrics, "GET", "/metrics", &[]);
    assert_eq!(reply.status, 200);
    assert!(reply.head.contains("content-type: text/plain; version=0.0.4"), "{}", reply.head);
    let text = &reply.body;
    let (accepted, cores) = sum(text, "sqp_sessions_accepted_total", &[]);
    assert_eq!((accepted, cores), (clients_n as f64, 2), "one series per core, summing to the clients");
    assert_eq!(sum(text, "sqp_sessions_active", &[]).0, clients_n as f64);
    assert_eq!(sum(text, "sqp_client_connections", &["state=\"idle\""]).0, clients_n as f64);
    let (acquires, series) = sum(text, "sqp_pool_acquire_total", &["pool=\"main\""]);
    assert_eq!(series, 2);
    let queries = (clients_n * 3) as f64;
    assert!(acquires >= queries && acquires <= queries + 2.0 + clients_n as f64, "acquires {acquires}");
    // Every finished acquisition is observed once in the wait histogram. Core 0 also borrows a
    // connection in the background (it loads user-defined functions after start), so compare
    // once no acquisition is in flight.
    crate::support::eventually(std::time::Duration::from_secs(10), "acquisitions settle", || {
        let text = http(metrics, "GET", "/metrics", &[]).body;
        let acquires = sum(&text, "sqp_pool_acquire_total", &["pool=\"main\""]).0;
        sum(&text, "sqp_pool_wait_duration_seconds_count", &["pool=\"main\""]).0 == acquires
    });
    assert_eq!(sum(text, "sqp_pool_connections", &["state=\"active\""]).0, 0.0, "all returned between statements");
    let idle = sum(text, "sqp_pool_connections", &["state=\"idle\""]).0;
    assert!((1.0..=4.0).contains(&idle), "idle connections {idle} within max_connections");

    // The per-core series sum to the control plane's merged totals (traffic is quiet now).
    let mut total = querypilot::metrics::CounterSnapshot::default();
    for r in router.control().collect().expect("collect") {
        total.merge(&r.counters);
    }
    assert_eq!(total.pool("main").expect("main").acquires_total as f64, acquires);
    assert_eq!(total.sessions_accepted_total as f64, accepted);

    let open = http(metrics, "GET", "/metrics", &[("Accept", "application/openmetrics-text; version=1.0.0")]);
    assert!(open.head.contains("application/openmetrics-text") && open.body.ends_with("# EOF\n"));
    promtool_accepts(text);
    drop(clients);
}

fn promtool_accepts(text: &str) {
    let promtool = std::path::Path::new("/usr/bin/promtool");
    if !promtool.exists() {
        println!("NOTE: /usr/bin/promtool is absent; `promtool check metrics` was not run");
        return;
    }
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run promtool");
    child.stdin.take().expect("stdin").write_all(text.as_bytes()).expect("feed promtool");
    let out = child.wait_with_output().expect("promtool result");
    assert!(
        out.status.success(),
        "promtool rejects the exposition:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn reload_through_the_api_rejects_a_broken_file_and_keeps_the_old_config() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
    let toml = with_metrics(&pg_config(&[0], &pools, "main"), None);
    let router = Router::start(&toml);
    let (metrics, api) = addrs(&router);
    assert!(router.reload_with("[general]\npool_mod = \"session\"\n").is_err(), "the file is broken now");
    let reply = http(api, "POST", "/api/reload", &[]);
    assert_eq!(reply.status, 400, "{}", reply.body);
    let err = reply.json();
    assert!(err["error"].as_str().expect("error").contains("pool_mod"), "names the bad key: {err}");
    assert_eq!(err["code"], "control.invalid_config");
    assert_eq!(http(api, "GET", "/api/config", &[]).json()["version"], 1, "old config still in force");
    router.pg("main").simple_query("SELECT 1").expect("old config still serves");

    router.reload_with(&toml.replace("max_connections = 2", "max_connections = 3")).expect("valid reload");
    let reply = http(api, "POST", "/api/reload", &[]);
    assert_eq!((reply.status, reply.json()["version"].as_u64()), (200, Some(3)), "{}", reply.body);
    let config = http(api, "GET", "/api/config", &[]).json();
    assert!(config["toml"].as_str().expect("toml").contains("max_connections = 3"), "{config}");
    let leaked = format!("password = \"{}\"", dbs().pg.password);
    assert!(!config["toml"].as_str().unwrap_or_default().contains(&leaked), "password redacted: {config}");
    let text = http(metrics, "GET", "/metrics", &[]).body;
    assert_eq!(sum(&text, "sqp_config_reloads_total", &["outcome=\"rejected\""]).0, 2.0);
    assert_eq!(sum(&text, "sqp_config_reloads_total", &["outcome=\"applied\""]).0, 2.0);
    assert_eq!(sum(&text, "sqp_config_version", &[]).0, 3.0);
}

#[test]
fn health_turns_503_as_soon_as_a_drain_starts_while_metrics_keep_answering() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
    let router = Router::start(&with_metrics(&pg_config(&[0], &pools, "main"), None));
    let (metrics, api) = addrs(&router);
    for addr in [metrics, api] {
        let reply = http(addr, "GET", "/health", &[]);
        assert_eq!((reply.status, reply.json()["status"].as_str()), (200, Some("serving")));
    }
    // A statement in flight keeps the core draining for a while.
    let mut busy = router.pg("main");
    let worker = std::thread::spawn(move || busy.simple_query("SELECT pg_sleep(1)").map(|_| ()));
    std::thread::sleep(Duration::from_millis(200));
    router.control().drain();
    for addr in [metrics, api] {
        let reply = http(addr, "GET", "/health", &[]);
        assert_eq!((reply.status, reply.json()["status"].as_str()), (503, Some("draining")));
    }
    let reply = http(metrics, "GET", "/metrics", &[]);
    assert_eq!(reply.status, 200, "metrics answer during the drain: {}", reply.body);
    assert_eq!(sum(&reply.body, "sqp_sessions_active", &[]).0, 1.0);
    assert_eq!(http(api, "GET", "/api/pools", &[]).status, 200, "the API answers during the drain");
    // How the busy session ends (result, then 57P01 at its next read) is the session's business.
    let _ = worker.join().expect("worker");
}

#[test]
fn a_configured_token_guards_every_api_request_and_plugins_answer_404() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
    let router = Router::start(&with_metrics(&pg_config(&[0], &pools, "main"), Some("t0ken")));
    let (metrics, api) = addrs(&router);
    let bearer = [("Authorization", "Bearer t0ken")];
    for (method, path) in [("GET", "/api/pools"), ("GET", "/api/config"), ("POST", "/api/reload"), ("GET", "/health")] {
        for headers in [&[][..], &[("Authorization", "Bearer nope")][..]] {
            let reply = http(api, method, path, headers);
            assert_eq!(reply.status, 401, "{method} {path} {headers:?}");
            assert!(reply.json()["error"].as_str().is_some());
            assert!(reply.head.contains("www-authenticate: bearer"));
        }
    }
    assert_eq!(http(api, "GET", "/api/config", &bearer).json()["version"], 1, "the refused reload changed nothing");
    let pools = http(api, "GET", "/api/pools", &bearer);
    assert_eq!(pools.status, 200);
    let pools = pools.json();
    assert_eq!(pools["pools"][0]["name"], "main");
    assert_eq!(pools["pools"][0]["max_connections"], 2);
    assert!(pools["pools"][0]["backends"][0]["address"].as_str().is_some());
    assert_eq!(http(metrics, "GET", "/metrics", &[]).status, 200, "metrics stay read-only and open");
    assert!(!http(metrics, "GET", "/metrics", &[]).body.contains("t0ken"));
    for path in ["/api/v1/plugins/accelerator", "/api/v1/plugins/guard/x"] {
        let reply = http(api, "GET", path, &bearer);
        assert_eq!(reply.status, 404);
        assert!(reply.json()["error"].as_str().expect("message").contains("plugin is registered"));
    }
    assert_eq!(http(api, "GET", "/api/stats/digests", &bearer).status, 200, "routing endpoints answer with the token");
    assert_eq!(http(api, "GET", "/api/stats/digests", &[]).status, 401);
}
