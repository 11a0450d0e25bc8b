//! Client route hints: `route=primary` always wins and pins; `route=replica` only when it is safe;
//! invalid hints are errors; none of it bypasses a reject rule.

use super::*;

const READ: &str = "SELECT a FROM t WHERE id = 1";
const PRIMARY: &str = "/* querypilot: route=primary */ ";
const REPLICA: &str = "/* querypilot: route=replica */ ";

fn hinted(hint: &str, sql: &str) -> String {
    format!("{hint}{sql}")
}

#[test]
fn primary_hint_wins_and_pins() {
    let tail = r#"
[[routing.pattern_rules]]
name = "to-analytics"
type = "regex"
pattern = "analytics_table"
pool = "analytics"

[[translation.rules]]
original_sql = "SELECT * FROM orders WHERE id = 5"
translated_sql = "SELECT * FROM orders_v WHERE id = 5"
target_pool = "analytics"
"#;
    let mut r = split_router(tail);
    for sql in [READ, "UPDATE t SET a = 1", "SELECT * FROM analytics_table", "SELECT * FROM orders WHERE id = 9"] {
        let d = pg(&mut r, &hinted(PRIMARY, sql));
        assert_eq!((pool(&d), d.kind, d.reason), ("primary", DecisionKind::Hint, "hint_primary"), "{sql}");
        assert!(d.pins_primary, "{sql}");
        assert_eq!(d.rewritten, None, "the hint sends the original SQL: {sql}");
    }
    // Line comments work too; the MySQL primary is the MySQL client's primary pool.
    let mut r = router_for(&config(&format!("{SPLIT}\nmysql_default_pool = \"my_primary\""), ""));
    assert_eq!(pool(&my(&mut r, &format!("-- querypilot: route=primary\n{READ}"))), "my_primary");
}

#[test]
fn replica_hint_honored_only_when_safe() {
    let mut r = split_router("");
    let d = pg(&mut r, &hinted(REPLICA, READ));
    assert_eq!((pool(&d), d.kind, d.reason, d.pins_primary), ("replicas", DecisionKind::Hint, "hint_replica", false));
    let refused = [
        ("UPDATE t SET a = 1", "write"),
        ("SELECT a FROM t FOR UPDATE", "row_lock"),
        ("SELECT nextval('s')", "not replica-eligible"),
        ("SELECT random()", "volatile_function"),
        ("SELEKT nonsense", "unanalyzable"),
        ("BEGIN", "transaction"),
    ];
    for (sql, why) in refused {
        let d = pg(&mut r, &hinted(REPLICA, sql));
        assert!(not_honored(&d).contains(why), "{sql}: {}", not_honored(&d));
        assert_eq!((d.kind, d.pool()), (DecisionKind::Hint, None), "{sql}");
    }
    // A pinned session (read-your-writes or an earlier route=primary) cannot read from a replica.
    let mut input = RouteInput::new("", Protocol::Postgres, "app", "app");
    let text = hinted(REPLICA, READ);
    input.sql = &text;
    input.session.pinned_to_primary = true;
    assert!(not_honored(&r.route(&input)).contains("pinned"));
}

#[test]
fn replica_hint_without_read_pool_fails() {
    let mut r = router_for(&config(NO_SPLIT, ""));
    assert!(not_honored(&pg(&mut r, &hinted(REPLICA, READ))).contains("no read pool"));
    let mut r = router_for(&config(&format!("{SPLIT}\nmysql_default_pool = \"my_primary\""), ""));
    assert!(not_honored(&my(&mut r, &hinted(REPLICA, READ))).contains("no read pool"));
    assert_eq!(pool(&pg(&mut r, &hinted(REPLICA, READ))), "replicas");
}

#[test]
fn invalid_hints_are_errors() {
    let mut r = split_router("");
    for hint in ["/* querypilot: route=banana */ ", "/* querypilot: color=red */ ", "/* QueryPilot */ "] {
        let d = pg(&mut r, &hinted(hint, READ));
        assert_eq!((&d.outcome, d.kind), (&Outcome::Error(DecisionError::InvalidHint), DecisionKind::Hint), "{hint}");
    }
    // Not a leading comment, or inside a string: not a hint at all.
    for sql in ["SELECT /* querypilot: route=banana */ 1", "SELECT '/* querypilot: route=primary */'"] {
        let d = pg(&mut r, sql);
        assert_eq!((pool(&d), d.step), ("replicas", DecisionKind::ReadWriteSplit), "{sql}");
    }
}

#[test]
fn hints_never_bypass_a_reject() {
    let tail = "[[routing.rules]]\nname = \"deny\"\npattern = \"secret\"\nreject = \"denied\"\n";
    let mut r = split_router(tail);
    for hint in [PRIMARY, REPLICA, "/* querypilot: route=nope */ "] {
        assert_eq!(rejected(&pg(&mut r, &hinted(hint, "SELECT secret FROM t"))), "denied", "{hint}");
    }
}

#[test]
fn hints_inside_a_transaction() {
    let mut r = split_router("");
    let (primary, replicas, analytics): (Arc<str>, Arc<str>, Arc<str>) =
        ("primary".into(), "replicas".into(), "analytics".into());
    let table: [(&Arc<str>, &str, &str, Option<&str>); 6] = [
        (&primary, PRIMARY, READ, Some("primary")),
        (&primary, REPLICA, READ, None),
        (&replicas, REPLICA, READ, Some("replicas")),
        (&replicas, REPLICA, "UPDATE t SET a = 1", None),
        (&analytics, PRIMARY, READ, None),
        (&replicas, PRIMARY, READ, None),
    ];
    for (tx, hint, sql, want) in table {
        let text = hinted(hint, sql);
        let mut input = RouteInput::new(&text, Protocol::Postgres, "app", "app");
        input.session.transaction_pool = Some(tx);
        let d = r.route(&input);
        match want {
            Some(p) => {
                assert_eq!((pool(&d), d.kind), (p, DecisionKind::TransactionPin), "{tx} {text}");
                assert_eq!(d.pins_primary, hint == PRIMARY);
            }
            None => assert!(!not_honored(&d).is_empty(), "{tx} {text}"),
        }
    }
}

#[test]
fn cached_shape_serves_hinted_and_unhinted_statements() {
    let mut r = split_router("");
    assert_eq!(pool(&pg(&mut r, READ)), "replicas");
    let d = pg(&mut r, &hinted(PRIMARY, "SELECT a FROM t WHERE id = 2"));
    assert_eq!((pool(&d), d.cached), ("primary", true));
    let d = pg(&mut r, &hinted(REPLICA, "SELECT a FROM t WHERE id = 3"));
    assert_eq!((pool(&d), d.cached), ("replicas", true));
    let d = pg(&mut r, "SELECT a FROM t WHERE id = 4");
    assert_eq!((pool(&d), d.kind), ("replicas", DecisionKind::Cache));
}
