//! Pool roles (#19): whatever chose a replica-role pool (rule, pattern rule, dynamic rule,
//! translation, hint, open transaction, plan cache), a statement that is not replica-safe is
//! refused there unless the rule says `allow_writes = true`.

use super::*;
use crate::config::PoolRole;

/// A replica-role pool for MySQL clients and two rules aimed at replicas, one allowing writes.
const TAIL: &str = r#"
[pools.my_standby]
role = "replica"
backends = [{ host = "my3", port = 3306 }]

[[routing.pattern_rules]]
name = "analytics-reads"
type = "regex"
pattern = "(?i)FROM analytics_"
pool = "replicas"

[[routing.pattern_rules]]
name = "etl-anywhere"
type = "regex"
pattern = "(?i)etl_"
pool = "replicas"
allow_writes = true

[[routing.rules]]
name = "my-analytics"
pattern = "(?i)FROM my_analytics"
protocol = "mysql"
pool = "my_standby"

[[translation.rules]]
original_sql = "DELETE FROM old_rows WHERE id = 1"
translated_sql = "DELETE FROM old_rows_v2 WHERE id = 1"
target_pool = "replicas"
"#;

fn refusal(d: &Decision) -> (&str, &str, &str) {
    match &d.outcome {
        Outcome::Error(DecisionError::ReplicaUnsafe { pool, chosen_by, reason }) => (pool, chosen_by, reason),
        other => panic!("expected ReplicaUnsafe, got {other:?} in {d:#?}"),
    }
}

#[test]
fn default_roles_follow_the_read_pool_and_explicit_roles_win() {
    let c = config(SPLIT, TAIL);
    let role = |name: &str| c.pool(name).map(|p| p.role);
    assert_eq!(role("replicas"), Some(PoolRole::Replica), "the read pool defaults to replica");
    assert_eq!(role("primary"), Some(PoolRole::Primary));
    assert_eq!(role("analytics"), Some(PoolRole::Primary), "unnamed pools default to primary");
    assert_eq!(role("my_standby"), Some(PoolRole::Replica));
    // A read pool that is also the default pool takes writes: primary.
    let both = config("default_pool = \"replicas\"\nread_pool = \"replicas\"", "");
    assert_eq!(both.pool("replicas").map(|p| p.role), Some(PoolRole::Primary));
    // The rendered configuration keeps the roles and the rule's allow_writes.
    let again = Config::parse(&c.redacted_toml(), "rendered.toml").expect("rendered config parses");
    assert_eq!(again.pool("replicas").map(|p| p.role), Some(PoolRole::Replica));
    assert!(again.routing.pattern_rules.iter().any(|r| r.name == "etl-anywhere" && r.allow_writes));
}

#[test]
fn a_replica_role_pool_cannot_take_writes_by_configuration() {
    let text = config_text("default_pool = \"primary\"", "")
        .replace("[pools.primary]\n", "[pools.primary]\nrole = \"replica\"\n");
    let err = Config::parse(&text, "t.toml").expect_err("a replica-role default pool is refused");
    let message = err.to_string();
    assert!(message.contains("routing.default_pool") && message.contains("role = \"replica\""), "{message}");
    let bad = config_text(SPLIT, "").replace("[pools.primary]\n", "[pools.primary]\nrole = \"standby\"\n");
    assert!(Config::parse(&bad, "t.toml").is_err(), "unknown role keyword");
}

#[test]
fn rules_never_send_unsafe_statements_to_a_replica() {
    let mut r = split_router(TAIL);
    // (sql, expected reason) for statements the regex rule would send to the replica pool.
    let refused = [
        ("DELETE FROM analytics_x WHERE id = 1", "write"),
        ("UPDATE t SET a = 1 FROM analytics_y WHERE t.id = analytics_y.id", "write"),
        ("SELECT * FROM analytics_x FOR UPDATE", "row_lock"),
        ("SELECT nextval('s') FROM analytics_x", "write"),
        ("SELECT random() FROM analytics_x", "volatile_function"),
        ("SELECT pg_advisory_lock(1) FROM analytics_x", "volatile_function"),
        ("SELECT \"Now\"() FROM analytics_x", "volatile_function"),
    ];
    for (sql, reason) in refused {
        let d = pg(&mut r, sql);
        assert_eq!(refusal(&d), ("replicas", "rule `analytics-reads`", reason), "{sql}");
        assert_eq!((d.replica_check, d.reason), (ReplicaCheck::Refused, "replica_unsafe"), "{sql}");
        let Outcome::Error(e) = &d.outcome else { unreachable!() };
        assert!(e.to_string().contains("rule `analytics-reads`") && e.to_string().contains("allow_writes"), "{e}");
    }
    let d = pg(&mut r, "SELECT count(*) FROM analytics_x WHERE day = now()");
    assert_eq!((pool(&d), d.replica_check), ("replicas", ReplicaCheck::Safe));
    assert!(d.on_replica());
    // The same shape again comes from the plan cache and is refused the same way.
    let again = pg(&mut r, "DELETE FROM analytics_x WHERE id = 2");
    assert!(again.cached);
    assert_eq!(refusal(&again).1, "rule `analytics-reads`");
}

#[test]
fn allow_writes_lets_the_rule_through_and_says_so() {
    let mut r = split_router(TAIL);
    let d = pg(&mut r, "UPDATE etl_runs SET done = true");
    assert_eq!(
        (pool(&d), d.replica_check, d.rule.as_deref()),
        ("replicas", ReplicaCheck::AllowedByRule, Some("etl-anywhere"))
    );
    let d = pg(&mut r, "SELECT a FROM etl_runs");
    assert_eq!((pool(&d), d.replica_check), ("replicas", ReplicaCheck::Safe));
}

#[test]
fn session_rules_translations_and_dynamic_rules_are_checked_too() {
    let c = config(SPLIT, TAIL);
    let dynamic = [pattern_rule("dyn-reports", PatternKind::Regex, "(?i)reports", to_pool("replicas"), 0)];
    let mut r = Router::new(rules_with(&c, &dynamic, &[]), Catalogs::builtin());
    let d = pg(&mut r, "INSERT INTO reports VALUES (1)");
    assert_eq!(refusal(&d), ("replicas", "rule `dyn-reports`", "write"));
    assert_eq!(d.step, DecisionKind::DynamicRule);
    let d = pg(&mut r, "DELETE FROM old_rows WHERE id = 7");
    assert_eq!(refusal(&d), ("replicas", "translation `translation.rules[0]`", "write"));
    assert_eq!(d.rewritten, None, "a refused statement is not rewritten");
    let d = my(&mut r, "SELECT * FROM my_analytics FOR UPDATE");
    assert_eq!(refusal(&d), ("my_standby", "rule `my-analytics`", "row_lock"));
    let d = my(&mut r, "SELECT * FROM my_analytics LOCK IN SHARE MODE");
    assert_eq!(refusal(&d).2, "row_lock");
    let d = my(&mut r, "SELECT GET_LOCK('a', 1) FROM my_analytics");
    assert_eq!(refusal(&d).0, "my_standby");
    let d = my(&mut r, "SELECT id FROM my_analytics WHERE id = 1");
    assert_eq!((pool(&d), d.replica_check), ("my_standby", ReplicaCheck::Safe));
}

#[test]
fn a_connection_held_on_a_replica_takes_only_replica_safe_statements() {
    let mut r = split_router(TAIL);
    let tx: Arc<str> = Arc::from("replicas");
    let mut input = RouteInput::new("", Protocol::Postgres, "app", "app");
    input.session.transaction_pool = Some(&tx);
    for sql in ["SELECT a FROM t", "COMMIT", "ROLLBACK", "SAVEPOINT s", "SET statement_timeout = 5", "SHOW search_path"]
    {
        input.sql = sql;
        let d = r.route(&input);
        assert_eq!((pool(&d), d.replica_check), ("replicas", ReplicaCheck::Safe), "{sql}");
    }
    let refused = [
        "UPDATE t SET a = 1",
        "SELECT a FROM t FOR SHARE",
        "SELECT nextval('s')",
        "PREPARE TRANSACTION 'x'",
        "CREATE TEMP TABLE x (a int)",
        "LISTEN ch",
        "DO $$ BEGIN END $$",
    ];
    for sql in refused {
        input.sql = sql;
        let d = r.route(&input);
        let (pool, by, _) = refusal(&d);
        assert_eq!(pool, "replicas", "{sql}");
        assert!(by.contains("holds"), "{sql}: {by}");
    }
    // On the primary nothing changes.
    let primary: Arc<str> = Arc::from("primary");
    input.session.transaction_pool = Some(&primary);
    input.sql = "UPDATE t SET a = 1";
    assert_eq!(r.route(&input).replica_check, ReplicaCheck::NotReplica);
}

#[test]
fn the_database_named_pool_is_checked_by_the_session_hook() {
    let r = split_router(TAIL);
    let mut router = Router::new(r.rules().clone(), Catalogs::builtin());
    let d = pg(&mut router, "UPDATE t SET a = 1");
    let replicas: Arc<str> = Arc::from("replicas");
    let e = router.rules().replica_refusal(&d, &replicas).expect("refused");
    assert!(e.to_string().contains("database name"), "{e}");
    let read = pg(&mut router, "SELECT 1");
    assert_eq!(router.rules().replica_refusal(&read, &replicas), None);
    let primary: Arc<str> = Arc::from("primary");
    assert_eq!(router.rules().replica_refusal(&d, &primary), None);
}
