//! Issues #5/#6/#7, the control side of routing, over real HTTP against an in-process router:
//! the dry-run (`/api/routing/test`) for writes, safe reads and locking reads; runtime pattern
//! rules and translations published to every core (visible at once, removed by DELETE, cleared
//! by reload); digest reset; user-defined function volatility loaded from the PostgreSQL
//! primary.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use serde_json::{json, Value};

use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, eventually, unique_name};

/// Status and JSON body of one admin request.
pub(crate) fn http(addr: SocketAddr, method: &str, target: &str, body: Option<&Value>) -> (u16, Value) {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(5)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
    let body = body.map(Value::to_string).unwrap_or_default();
    let req = format!(
        "{method} {target} HTTP/1.1\r\nHost: t\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("send");
    let mut raw = String::new();
    s.read_to_string(&mut raw).expect("read");
    let (head, body) = raw.split_once("\r\n\r\n").expect("head");
    let status = head.split(' ').nth(1).and_then(|c| c.parse().ok()).expect("status");
    let json = serde_json::from_str(body).unwrap_or_else(|e| panic!("not JSON ({e}): {body}"));
    (status, json)
}

/// Form-encodes a query parameter value.
pub(crate) fn enc(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// A PostgreSQL router with pools `primary` and `replica` (the harness's primary and standby),
/// split reads/writes and the admin API on.
fn split_router(cores: &[usize]) -> (Router, SocketAddr) {
    let pg = &dbs().pg;
    let pools =
        pg_pool("primary", pg.primary_port, "transaction", 4) + &pg_pool("replica", pg.replica_port, "transaction", 4);
    let toml = format!(
        "{}read_write_split = true\nread_pool = \"replica\"\nwrite_pool = \"primary\"\n\n\
         [metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n",
        pg_config(cores, &pools, "primary")
    );
    let router = Router::start(&toml);
    let admin = router.control().endpoints().admin.expect("admin endpoint");
    (router, admin)
}

fn dry_run(admin: SocketAddr, sql: &str) -> Value {
    let (status, v) =
        http(admin, "GET", &format!("/api/routing/test?sql={}&user=app&protocol=postgres", enc(sql)), None);
    assert_eq!(status, 200, "{v}");
    v
}

#[test]
fn dry_run_explains_writes_safe_reads_and_locking_reads() {
    let (router, admin) = split_router(&[0]);
    let w = dry_run(admin, "UPDATE accounts SET balance = balance + 1 WHERE id = 7");
    assert_eq!((w["pool"].as_str(), w["decision"].as_str()), (Some("primary"), Some("read_write_split")));
    assert_eq!((w["replica_eligible"].as_bool(), w["writes"].as_bool()), (Some(false), Some(true)));
    assert_eq!(w["analysis"]["operation"], "write");

    let r = dry_run(admin, "SELECT name FROM accounts WHERE id = 7");
    assert_eq!((r["pool"].as_str(), r["reason"].as_str()), (Some("replica"), Some("replica_eligible")));
    assert_eq!(r["replica_eligible"], true);
    let fp: u64 = r["fingerprint"].as_str().expect("decimal").parse().expect("u64");
    assert_eq!(format!("{fp:016x}"), r["fingerprint_hex"].as_str().expect("hex"));
    let other = dry_run(admin, "select name from accounts where id = 99");
    assert_eq!(other["fingerprint"], r["fingerprint"], "literals do not change the shape");

    let l = dry_run(admin, "SELECT * FROM accounts WHERE id = 7 FOR UPDATE");
    assert_eq!(l["pool"], "primary");
    assert_eq!(
        (l["ineligibility"].as_str(), l["analysis"]["locking"].as_str()),
        (Some("row_lock"), Some("FOR UPDATE"))
    );
    assert!(l["analysis"]["evidence"].as_array().is_some_and(|e| !e.is_empty()), "{l}");

    let (status, v) = http(admin, "GET", "/api/routing/test?sql=SELECT+1&protocol=oracle", None);
    assert_eq!(status, 400, "{v}");
    let (status, _) = http(admin, "GET", "/api/routing/test", None);
    assert_eq!(status, 400);
    drop(router);
}

#[test]
fn runtime_pattern_rules_reach_every_core_at_once_and_go_on_delete_and_reload() {
    let (router, admin) = split_router(&[0, 1]);
    let sql = "SELECT name FROM accounts WHERE id = 3";
    assert_eq!(dry_run(admin, sql)["pool"], "replica");
    let rule = json!({"name": "pin_accounts", "type": "template", "pattern": "SELECT name FROM accounts WHERE id = 1", "pool": "primary", "priority": 5});
    let (status, v) = http(admin, "POST", "/api/pattern-rules", Some(&rule));
    assert_eq!(status, 200, "{v}");
    let version = v["version"].as_u64().expect("version");
    let reports = router.control().collect().expect("collect");
    assert_eq!(reports.len(), 2);
    assert!(reports.iter().all(|r| r.version.0 == version), "every core acknowledged before the reply");
    let d = dry_run(admin, sql);
    assert_eq!(
        (d["pool"].as_str(), d["decision"].as_str(), d["rule"].as_str()),
        (Some("primary"), Some("dynamic_rule"), Some("pin_accounts"))
    );

    let (status, v) = http(admin, "POST", "/api/pattern-rules", Some(&rule));
    assert_eq!(status, 400, "duplicate name: {v}");
    let bad = json!({"name": "x", "type": "regex", "pattern": "(", "pool": "primary"});
    let (status, v) = http(admin, "POST", "/api/pattern-rules", Some(&bad));
    assert_eq!((status, v["code"].as_str()), (400, Some("routing.invalid_rule")), "{v}");
    let ghost = json!({"name": "y", "type": "hash", "pattern": "12", "pool": "nowhere"});
    assert_eq!(http(admin, "POST", "/api/pattern-rules", Some(&ghost)).0, 400);
    let (_, list) = http(admin, "GET", "/api/pattern-rules", None);
    assert_eq!(list.as_array().map(Vec::len), Some(1), "refused rules change nothing: {list}");

    let (status, v) = http(admin, "DELETE", "/api/pattern-rules?name=pin_accounts", None);
    assert_eq!((status, v["removed"].as_u64()), (200, Some(1)));
    assert_eq!(dry_run(admin, sql)["pool"], "replica");
    assert_eq!(http(admin, "DELETE", "/api/pattern-rules?name=pin_accounts", None).0, 404);

    let reject = json!({"name": "no_accounts", "type": "regex", "pattern": "accounts", "reject": "not here"});
    assert_eq!(http(admin, "POST", "/api/pattern-rules", Some(&reject)).0, 200);
    let d = dry_run(admin, sql);
    assert_eq!((d["outcome"].as_str(), d["message"].as_str()), (Some("reject"), Some("not here")));
    router.control().reload().expect("reload");
    assert_eq!(dry_run(admin, sql)["pool"], "replica", "a reload clears runtime rules");
    assert_eq!(http(admin, "GET", "/api/pattern-rules", None).1, json!([]));
}

#[test]
fn runtime_translations_describe_their_mapping_and_rewrite_in_the_dry_run() {
    let (router, admin) = split_router(&[0, 1]);
    let t = json!({
        "original_sql": "SELECT name FROM accounts WHERE id = 1 AND kind = 'gold'",
        "translated_sql": "SELECT name FROM accounts_v WHERE kind = 'gold' AND id = 1 LIMIT 10",
        "target_pool": "replica",
    });
    let (status, v) = http(admin, "POST", "/api/translations", Some(&t));
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["rule"], "api.translations[0]");
    let tpl = &v["templates"][0];
    assert_eq!(tpl["protocol"], "postgres");
    assert_eq!(tpl["original_literals"].as_array().map(Vec::len), Some(2), "{tpl}");
    let sources: Vec<Value> =
        tpl["mapping"].as_array().expect("mapping").iter().map(|m| m["from_original"].clone()).collect();
    assert_eq!(sources, vec![json!(1), json!(0), Value::Null], "{tpl}");

    let d = dry_run(admin, "SELECT name FROM accounts WHERE id = 42 AND kind = 'it''s'");
    assert_eq!((d["decision"].as_str(), d["pool"].as_str()), (Some("translation"), Some("replica")));
    assert_eq!(d["rewritten_sql"], "SELECT name FROM accounts_v WHERE kind = 'it''s' AND id = 42 LIMIT 10");

    let ambiguous = json!({"original_sql": "SELECT 1, 1", "translated_sql": "SELECT 1", "target_pool": "replica"});
    let (status, v) = http(admin, "POST", "/api/translations", Some(&ambiguous));
    assert_eq!(status, 400, "{v}");
    assert_eq!(http(admin, "GET", "/api/translations", None).1.as_array().map(Vec::len), Some(1));
    assert_eq!(http(admin, "DELETE", "/api/translations?index=3", None).0, 404);
    let (status, v) = http(admin, "DELETE", "/api/translations?index=0", None);
    assert_eq!((status, v["removed"].as_u64()), (200, Some(1)));
    assert!(dry_run(admin, "SELECT name FROM accounts WHERE id = 42 AND kind = 'x'")["rewritten_sql"].is_null());

    assert_eq!(http(admin, "POST", "/api/translations", Some(&t)).0, 200);
    router.control().reload().expect("reload");
    assert_eq!(http(admin, "GET", "/api/translations", None).1, json!([]), "a reload clears them");

    // Digests: the API answers for every core, and DELETE clears every core.
    let (status, v) = http(admin, "GET", "/api/stats/digests?limit=5", None);
    assert_eq!((status, v["cores_reporting"].as_u64()), (200, Some(2)), "{v}");
    let (status, v) = http(admin, "DELETE", "/api/stats/digests", None);
    assert_eq!((status, v["cores_reset"].as_u64()), (200, Some(2)), "{v}");
    let (_, v) = http(admin, "GET", "/api/stats/digests", None);
    assert_eq!((v["shapes"].as_u64(), v["dropped"].as_u64()), (Some(0), Some(0)), "{v}");
}

#[test]
fn user_defined_function_volatility_is_loaded_from_the_primary() {
    let pg = &dbs().pg;
    let stable = unique_name("qp_stable_fn");
    let volatile = unique_name("qp_volatile_fn");
    let mut c = pg.primary_client();
    c.batch_execute(&format!(
        "CREATE FUNCTION {stable}(x int) RETURNS int LANGUAGE sql STABLE AS 'SELECT x + 1';\n\
         CREATE FUNCTION {volatile}(x int) RETURNS int LANGUAGE sql VOLATILE AS 'SELECT x + 2';"
    ))
    .expect("create functions");
    let (router, admin) = split_router(&[0]);
    let stable_sql = format!("SELECT {stable}(id) FROM accounts");
    eventually(Duration::from_secs(20), "the STABLE function to be known", || {
        dry_run(admin, &stable_sql)["replica_eligible"] == true
    });
    let s = dry_run(admin, &stable_sql);
    assert_eq!((s["pool"].as_str(), s["analysis"]["volatility"].as_str()), (Some("replica"), Some("stable")));
    let v = dry_run(admin, &format!("SELECT {volatile}(id) FROM accounts"));
    assert_eq!((v["pool"].as_str(), v["replica_eligible"].as_bool()), (Some("primary"), Some(false)), "{v}");
    assert_eq!(v["analysis"]["volatility"], "volatile");
    drop(router);
    c.batch_execute(&format!("DROP FUNCTION {stable}(int); DROP FUNCTION {volatile}(int);")).expect("drop functions");
}

/// A runtime rule changes where the very next statement runs, on every core: sessions spread
/// over two cores all move from the standby to the primary right after the POST returns.
#[test]
fn a_runtime_rule_moves_the_next_statement_on_every_core() {
    let (router, admin) = split_router(&[0, 1]);
    let ran_on_standby = |c: &mut postgres::Client| -> bool {
        let rows = c.simple_query("SELECT pg_is_in_recovery(), 5").expect("query");
        rows.iter().any(|m| matches!(m, postgres::SimpleQueryMessage::Row(r) if r.get(0) == Some("t")))
    };
    let mut clients: Vec<postgres::Client> = (0..16).map(|_| router.pg("primary")).collect();
    for c in clients.iter_mut() {
        assert!(ran_on_standby(c), "before the rule, a safe read runs on the standby");
    }
    let reports = router.control().collect().expect("collect");
    assert!(reports.iter().all(|r| r.counters.sessions_accepted_total > 0), "both cores serve sessions: {reports:?}");
    let rule = json!({"name": "recovery_on_primary", "type": "template", "pattern": "SELECT pg_is_in_recovery(), 1", "pool": "primary"});
    let (status, v) = http(admin, "POST", "/api/pattern-rules", Some(&rule));
    assert_eq!(status, 200, "{v}");
    for c in clients.iter_mut() {
        assert!(!ran_on_standby(c), "right after the POST, every core routes to the primary");
    }
    let (status, _) = http(admin, "DELETE", "/api/pattern-rules?name=recovery_on_primary", None);
    assert_eq!(status, 200);
    for c in clients.iter_mut() {
        assert!(ran_on_standby(c), "after DELETE, back to the standby");
    }
}
