//! Every chain step and rule type, priorities, rejects and session matchers.

use super::*;

#[test]
fn default_pool_without_split() {
    let mut r = router_for(&config(NO_SPLIT, ""));
    for sql in ["SELECT 1", "UPDATE t SET a = 1", "BEGIN", "not sql at all"] {
        let d = pg(&mut r, sql);
        assert_eq!(pool(&d), "primary", "{sql}");
        assert_eq!((d.step, d.reason), (DecisionKind::Default, "default"), "{sql}");
    }
}

#[test]
fn read_write_split_by_eligibility() {
    let mut r = split_router("");
    let table = [
        ("SELECT a FROM t WHERE id = 1", "replicas", "replica_eligible"),
        ("UPDATE t SET a = 1 WHERE id = 1", "primary", "write"),
        ("CREATE TABLE x (a int)", "primary", "ddl"),
        ("SELECT a FROM t FOR UPDATE", "primary", "row_lock"),
        ("SELECT random()", "primary", "volatile_function"),
        ("SHOW search_path", "primary", "server_state"),
    ];
    for (sql, want, reason) in table {
        let d = pg(&mut r, sql);
        assert_eq!((pool(&d), d.reason, d.step), (want, reason, DecisionKind::ReadWriteSplit), "{sql}");
        assert_eq!(d.facts.replica_eligible(), want == "replicas", "{sql}");
    }
}

#[test]
fn mysql_default_pool_takes_mysql_clients_without_split() {
    let mut r = router_for(&config(&format!("{SPLIT}\nmysql_default_pool = \"my_primary\""), ""));
    let d = my(&mut r, "SELECT c FROM sbtest1 WHERE id = 1");
    assert_eq!((pool(&d), d.step), ("my_primary", DecisionKind::Default));
    let d = pg(&mut r, "SELECT 1");
    assert_eq!(pool(&d), "replicas");
    // Without mysql_default_pool, MySQL clients are split like everyone else.
    let mut r = split_router("");
    assert_eq!(pool(&my(&mut r, "SELECT c FROM sbtest1 WHERE id = 1")), "replicas");
    assert_eq!(pool(&my(&mut r, "DELETE FROM sbtest1 WHERE id = 1")), "primary");
}

#[test]
fn template_rule_matches_any_literals_and_only_that_shape() {
    let tail = r#"
[[routing.pattern_rules]]
name = "counts"
type = "template"
pattern = "SELECT count(*) FROM orders WHERE created_at > '2020-01-01'"
pool = "analytics"
"#;
    let mut r = split_router(tail);
    for sql in [
        "SELECT count(*) FROM orders WHERE created_at > '2024-05-01'",
        "select COUNT(*)   from orders where created_at > '1999-12-31' ;",
        "/* app */ SELECT count(*) FROM orders WHERE created_at > 'x'",
    ] {
        let d = pg(&mut r, sql);
        assert_eq!((pool(&d), d.step, d.rule.as_deref()), ("analytics", DecisionKind::PatternRule, Some("counts")));
    }
    for sql in ["SELECT count(*) FROM orders WHERE created_at < '2024-05-01'", "SELECT count(*) FROM orderz"] {
        assert_eq!(pg(&mut r, sql).rule, None, "{sql}");
    }
    // Templates apply to both dialects.
    assert_eq!(pool(&my(&mut r, "SELECT count(*) FROM orders WHERE created_at > '2024-05-01'")), "analytics");
}

#[test]
fn regex_pattern_rule_matches_raw_text_even_when_the_shape_is_cached() {
    let tail = r#"
[[routing.pattern_rules]]
name = "tenant-42"
type = "regex"
pattern = "tenant_id = 42\\b"
pool = "analytics"
"#;
    let mut r = split_router(tail);
    // Same fingerprint, different literals: the regex sees the raw text every time.
    for _ in 0..2 {
        assert_eq!(pool(&pg(&mut r, "SELECT * FROM t WHERE tenant_id = 42")), "analytics");
        assert_eq!(pool(&pg(&mut r, "SELECT * FROM t WHERE tenant_id = 7")), "replicas");
    }
    assert!(r.cache_stats().hits >= 2);
}

#[test]
fn hash_rule_matches_the_decimal_fingerprint() {
    let sql = "SELECT abalance FROM pgbench_accounts WHERE aid = 1";
    let fp = StatementKey::compute(sql, Protocol::Postgres, crate::config::NormalizationStrategy::String).fingerprint;
    let tail = format!(
        "[[routing.pattern_rules]]\nname = \"hot\"\ntype = \"hash\"\npattern = \"{}\"\npool = \"analytics\"\n",
        fp.0
    );
    let mut r = split_router(&tail);
    let d = pg(&mut r, "SELECT abalance FROM pgbench_accounts WHERE aid = 99");
    assert_eq!((pool(&d), d.fingerprint), ("analytics", fp));
    assert_eq!(pool(&pg(&mut r, "SELECT bbalance FROM pgbench_branches WHERE bid = 1")), "replicas");
}

/// Rules in file order a, b, c over one statement: which name decides for given priorities
/// (ascending: the lowest priority number is tried first).
#[test]
fn pattern_priority_lower_first_ties_in_file_order() {
    let sql = "SELECT * FROM orders WHERE id = 1";
    let table: [([i32; 3], &str); 4] = [([0, 0, 0], "a"), ([5, 1, 3], "b"), ([3, 3, -1], "c"), ([2, 9, 9], "a")];
    for (prio, want) in table {
        let tail = format!(
            r#"
[[routing.pattern_rules]]
name = "a"
type = "template"
pattern = "SELECT * FROM orders WHERE id = 5"
pool = "analytics"
priority = {}

[[routing.pattern_rules]]
name = "b"
type = "regex"
pattern = "orders"
pool = "primary"
priority = {}

[[routing.pattern_rules]]
name = "c"
type = "regex"
pattern = "(?i)^select"
reject = "no"
priority = {}
"#,
            prio[0], prio[1], prio[2]
        );
        let mut r = split_router(&tail);
        // Twice: the second answer uses the cached template match and must agree.
        for _ in 0..2 {
            assert_eq!(pg(&mut r, sql).rule.as_deref(), Some(want), "{prio:?}");
        }
    }
}

#[test]
fn reject_rules_refuse_with_their_message() {
    let tail = r#"
[[routing.pattern_rules]]
name = "no-full-deletes"
type = "regex"
pattern = "(?i)^\\s*delete\\s+from\\s+\\w+\\s*;?\\s*$"
reject = "DELETE without WHERE is not allowed"

[[routing.rules]]
name = "no-batch"
user = "batch"
reject = "batch user is disabled"
"#;
    let mut r = split_router(tail);
    let d = pg(&mut r, "DELETE FROM orders");
    assert_eq!(
        (rejected(&d), d.kind, d.rule.as_deref()),
        ("DELETE without WHERE is not allowed", DecisionKind::Reject, Some("no-full-deletes"))
    );
    assert_eq!(pool(&pg(&mut r, "DELETE FROM orders WHERE id = 1")), "primary");
    let d = r.route(&RouteInput::new("SELECT 1", Protocol::Postgres, "batch", "app"));
    assert_eq!((rejected(&d), d.step), ("batch user is disabled", DecisionKind::RegexRule));
}

#[test]
fn session_rules_need_every_given_matcher() {
    let tail = r#"
[[routing.rules]]
name = "reporting-mysql"
user = "reporting"
protocol = "mysql"
pool = "my_replicas"
priority = 5

[[routing.rules]]
name = "shop-db"
database = "shop"
pattern = "(?i)^select"
pool = "analytics"
"#;
    let mut r = split_router(tail);
    let table = [
        (Protocol::MySql, "reporting", "app", "UPDATE t SET a = 1", Some("reporting-mysql")),
        (Protocol::Postgres, "reporting", "app", "SELECT 1", None),
        (Protocol::MySql, "other", "app", "SELECT 1", None),
        (Protocol::Postgres, "x", "shop", "SELECT 1", Some("shop-db")),
        (Protocol::Postgres, "x", "shop", "UPDATE t SET a = 1", None),
        (Protocol::Postgres, "x", "shopx", "SELECT 1", None),
        // Both match; "shop-db" has the lower priority number, so it is tried first.
        (Protocol::MySql, "reporting", "shop", "SELECT 1", Some("shop-db")),
    ];
    for (protocol, user, db, sql, want) in table {
        let d = r.route(&RouteInput::new(sql, protocol, user, db));
        assert_eq!(d.rule.as_deref(), want, "{protocol} {user} {db} {sql}");
        if want.is_some() {
            assert_eq!(d.step, DecisionKind::RegexRule);
        }
    }
}

#[test]
fn pattern_rules_come_before_session_rules_whatever_the_priority() {
    let tail = r#"
[[routing.pattern_rules]]
name = "pattern"
type = "regex"
pattern = "orders"
pool = "analytics"
priority = -100

[[routing.rules]]
name = "session"
user = "app"
pool = "primary"
priority = 100
"#;
    let mut r = split_router(tail);
    assert_eq!(pg(&mut r, "SELECT * FROM orders").rule.as_deref(), Some("pattern"));
    assert_eq!(pg(&mut r, "SELECT * FROM items").rule.as_deref(), Some("session"));
}

const TRANSLATION: &str = r#"
[[translation.rules]]
original_sql = "SELECT * FROM orders WHERE id = 5"
translated_sql = "SELECT * FROM orders_v WHERE id = 5"
target_pool = "analytics"

[[routing.pattern_rules]]
name = "orders"
type = "regex"
pattern = "orders"
pool = "primary"
priority = 100
"#;

#[test]
fn translation_rewrites_and_wins_over_rules() {
    let mut r = split_router(TRANSLATION);
    let d = pg(&mut r, "SELECT * FROM orders WHERE id = 77");
    assert_eq!((pool(&d), d.kind, d.reason), ("analytics", DecisionKind::Translation, "translation"));
    assert_eq!(d.rewritten_sql(), Some("SELECT * FROM orders_v WHERE id = 77"));
    assert_eq!(d.rule.as_deref(), Some("translation.rules[0]"));
    // Another shape is not translated and falls to the pattern rule.
    let d = pg(&mut r, "SELECT * FROM orders WHERE id > 77");
    assert_eq!((pool(&d), d.rewritten_sql()), ("primary", None));
}

#[test]
fn positional_parameters_may_move_for_mysql_clients_only() {
    let mut r = split_router(
        r#"
[[translation.rules]]
original_sql = "SELECT v FROM a WHERE id = 1 AND k = 'x'"
translated_sql = "SELECT v FROM b WHERE k = 'x' AND (id = 1 OR parent = 1)"
target_pool = "my_primary"
"#,
    );
    let d = my(&mut r, "SELECT v FROM a WHERE id = ? AND k = ?");
    assert_eq!((pool(&d), d.kind), ("my_primary", DecisionKind::Translation));
    assert_eq!(
        (d.rewritten_sql(), d.param_order()),
        (Some("SELECT v FROM b WHERE k = ? AND (id = ? OR parent = ?)"), Some(&[1, 0, 0][..]))
    );
    let d = my(&mut r, "SELECT v FROM a WHERE id = 3 AND k = ?");
    assert_eq!(
        (d.rewritten_sql(), d.param_order()),
        (Some("SELECT v FROM b WHERE k = ? AND (id = 3 OR parent = 3)"), None),
        "one parameter cannot be misplaced"
    );
    // PostgreSQL clients bind `$n` by number; a `?` is not theirs to move.
    let d = pg(&mut r, "SELECT v FROM a WHERE id = ? AND k = ?");
    assert_ne!(d.kind, DecisionKind::Translation);
    assert_eq!((d.rewritten_sql(), d.param_order()), (None, None));
}

#[test]
fn runtime_translations_and_dynamic_rules() {
    let config = config(SPLIT, TRANSLATION);
    let runtime = [TranslationRule {
        original_sql: "SELECT name FROM users WHERE id = 1".into(),
        translated_sql: "SELECT name FROM users_archive WHERE id = 1".into(),
        target_pool: "analytics".into(),
    }];
    // The UPDATE below reaches the replica-role pool only because the rule allows writes (#19).
    let orders = PatternRule {
        allow_writes: true,
        ..pattern_rule("dyn-orders", PatternKind::Regex, "orders", to_pool("replicas"), 0)
    };
    let dynamic = [
        orders,
        pattern_rule(
            "dyn-block",
            PatternKind::Template,
            "DELETE FROM items WHERE id = 1",
            RuleTarget::Reject("blocked".into()),
            0,
        ),
    ];
    let mut r = Router::new(rules_with(&config, &dynamic, &runtime), Catalogs::builtin());
    let d = pg(&mut r, "SELECT name FROM users WHERE id = 9");
    assert_eq!(d.rewritten_sql(), Some("SELECT name FROM users_archive WHERE id = 9"));
    assert_eq!(d.rule.as_deref(), Some("api.translations[0]"));
    // Translation (step 2) beats dynamic rules (step 3), which beat config pattern rules (step 5).
    assert_eq!(pg(&mut r, "SELECT * FROM orders WHERE id = 1").kind, DecisionKind::Translation);
    let d = pg(&mut r, "UPDATE orders SET a = 1");
    assert_eq!((pool(&d), d.kind, d.rule.as_deref()), ("replicas", DecisionKind::DynamicRule, Some("dyn-orders")));
    let d = pg(&mut r, "DELETE FROM items WHERE id = 42");
    assert_eq!((rejected(&d), d.step), ("blocked", DecisionKind::DynamicRule));
}

#[test]
fn transaction_pins_the_pool_but_rejects_still_apply() {
    let tail = format!("{TRANSLATION}\n[[routing.rules]]\nname = \"nope\"\npattern = \"forbidden\"\nreject = \"no\"\n");
    let mut r = split_router(&tail);
    let tx: Arc<str> = Arc::from("primary");
    let mut input = RouteInput::new("SELECT a FROM t", Protocol::Postgres, "app", "app");
    input.session.transaction_pool = Some(&tx);
    for sql in ["SELECT a FROM t", "SELECT * FROM orders WHERE id = 3", "COMMIT"] {
        input.sql = sql;
        let d = r.route(&input);
        assert_eq!((pool(&d), d.kind, d.reason), ("primary", DecisionKind::TransactionPin, "transaction"), "{sql}");
        assert_eq!(d.rewritten, None, "no translation inside a transaction: {sql}");
    }
    input.sql = "SELECT forbidden FROM t";
    assert_eq!(rejected(&r.route(&input)), "no");
    // A transaction on another pool stays there too.
    let other: Arc<str> = Arc::from("analytics");
    input.session.transaction_pool = Some(&other);
    input.sql = "UPDATE t SET a = 1";
    assert_eq!(pool(&r.route(&input)), "analytics");
}

#[test]
fn explain_matches_route_and_leaves_the_cache_alone() {
    let mut r = split_router(TRANSLATION);
    let cases =
        ["SELECT a FROM t WHERE id = 1", "UPDATE t SET a = 2", "SELECT * FROM orders WHERE id = 5", "garbage ((("];
    for sql in cases {
        let (len, stats) = (r.cache_len(), r.cache_stats());
        let e = r.explain(&RouteInput::new(sql, Protocol::Postgres, "app", "app"));
        assert_eq!((r.cache_len(), r.cache_stats()), (len, stats), "explain must not touch the cache: {sql}");
        assert!(!e.in_cache);
        assert_eq!(e.key.fingerprint, e.decision.fingerprint);
        let d = pg(&mut r, sql);
        assert_eq!(
            (&d.outcome, d.step, d.rule.clone(), d.rewritten.clone()),
            (&e.decision.outcome, e.decision.step, e.decision.rule.clone(), e.decision.rewritten.clone()),
            "{sql}"
        );
    }
    assert_eq!(r.cache_stats().hits, 0);
    let e = r.explain(&RouteInput::new("SELECT a FROM t WHERE id = 9", Protocol::Postgres, "app", "app"));
    assert!(e.in_cache, "route cached the shape; explain reports it");
    assert_eq!(e.decision.kind, DecisionKind::ReadWriteSplit, "explain decides from fresh facts");
    assert_eq!(e.normalized, "select a from t where id = ?");
    let e = r.explain(&RouteInput::new("SELECT * FROM orders WHERE id = 6", Protocol::Postgres, "app", "app"));
    assert_eq!(e.decision.rewritten_sql(), Some("SELECT * FROM orders_v WHERE id = 6"));
    let e = r.explain(&RouteInput::new("SELECT a FROM t FOR UPDATE", Protocol::Postgres, "app", "app"));
    assert!(e.analysis.evidence.iter().any(|ev| ev.fact == "row_lock"), "{:?}", e.analysis.evidence);
    assert_eq!(e.decision.facts.ineligibility, Some("row_lock"));
}

#[test]
fn a_rule_retry_policy_travels_with_the_decision_that_rule_made() {
    let tail = r#"
[[routing.pattern_rules]]
name = "upd"
type = "regex"
pattern = "^UPDATE"
pool = "analytics"
retry = { maximum_attempts = 4 }

[[routing.rules]]
name = "bob"
user = "bob"
pool = "primary"
retry = { maximum_attempts = 2 }

[[routing.pattern_rules]]
name = "plain"
type = "template"
pattern = "DELETE FROM t WHERE id = ?"
pool = "primary"
"#;
    let mut r = split_router(tail);
    let attempts = |d: &Decision| d.retry.map(|p| p.maximum_attempts.get());
    for _ in 0..2 {
        // The second round is answered from the plan cache.
        assert_eq!(attempts(&pg(&mut r, "UPDATE t SET a = 1")), Some(4));
    }
    let bob = r.route(&RouteInput::new("DELETE FROM t WHERE id = 9", Protocol::Postgres, "bob", "app"));
    assert_eq!((bob.kind, attempts(&bob)), (DecisionKind::PatternRule, None), "the rule that decided has none");
    let bob = r.route(&RouteInput::new("INSERT INTO t VALUES (1)", Protocol::Postgres, "bob", "app"));
    assert_eq!(attempts(&bob), Some(2));
    assert_eq!(attempts(&pg(&mut r, "INSERT INTO t VALUES (1)")), None, "the split decided");
    // A hint or an open transaction overrides the rule, and with it its retry.
    assert_eq!(attempts(&pg(&mut r, "/* querypilot: route=primary */ UPDATE t SET a = 1")), None);
    let tx: Arc<str> = Arc::from("primary");
    let mut input = RouteInput::new("UPDATE t SET a = 1", Protocol::Postgres, "app", "app");
    input.session.transaction_pool = Some(&tx);
    assert_eq!(attempts(&r.route(&input)), None);
}
