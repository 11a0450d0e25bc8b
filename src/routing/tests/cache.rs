//! The plan cache through the router: hits, bounds, invalidation by a new rule set, what is never
//! cached, and that one cached entry still honors each session's state.

use super::*;
use crate::config::NormalizationStrategy;

const READ: &str = "SELECT a FROM t WHERE id = 1";

#[test]
fn repeated_shapes_hit_the_cache() {
    let mut r = split_router("");
    let first = pg(&mut r, READ);
    assert_eq!((first.kind, first.cached), (DecisionKind::ReadWriteSplit, false));
    for id in 2..6 {
        let d = pg(&mut r, &format!("SELECT a FROM t WHERE id = {id}"));
        assert_eq!(
            (pool(&d), d.kind, d.step, d.cached),
            ("replicas", DecisionKind::Cache, DecisionKind::ReadWriteSplit, true)
        );
        assert_eq!(d.fingerprint, first.fingerprint);
        assert!(Arc::ptr_eq(&d.facts, &first.facts), "the cached facts are shared, not copied");
    }
    let s = r.cache_stats();
    assert_eq!((s.hits, s.misses, s.inserts), (4, 1, 1));
    assert_eq!(r.cache_len(), 1);
}

#[test]
fn cached_pattern_rule_keeps_its_name() {
    let tail = "[[routing.pattern_rules]]\nname = \"tpl\"\ntype = \"template\"\npattern = \"SELECT a FROM t WHERE id = 1\"\npool = \"analytics\"\n";
    let mut r = split_router(tail);
    pg(&mut r, READ);
    let d = pg(&mut r, "SELECT a FROM t WHERE id = 2");
    assert_eq!(
        (pool(&d), d.kind, d.step, d.rule.as_deref()),
        ("analytics", DecisionKind::Cache, DecisionKind::PatternRule, Some("tpl"))
    );
}

#[test]
fn the_cache_is_bounded() {
    let mut r = router_for(&config(&format!("{SPLIT}\n[routing.cache]\nsize = 3"), ""));
    for n in 0..50 {
        let d = pg(&mut r, &format!("SELECT c{n} FROM t"));
        assert_eq!(pool(&d), "replicas");
        assert!(r.cache_len() <= 3);
    }
    let s = r.cache_stats();
    assert_eq!((s.inserts, s.evictions, s.misses), (50, 47, 50));
}

#[test]
fn disabled_cache_is_never_used() {
    let mut r = router_for(&config(&format!("{SPLIT}\n[routing.cache]\nenabled = false"), ""));
    for _ in 0..3 {
        let d = pg(&mut r, READ);
        assert_eq!((pool(&d), d.kind, d.cached), ("replicas", DecisionKind::ReadWriteSplit, false));
    }
    assert_eq!((r.cache_len(), r.cache_stats()), (0, CacheStats::default()));
}

#[test]
fn a_new_rule_set_invalidates_the_cache() {
    let mut r = split_router("");
    assert_eq!(pool(&pg(&mut r, READ)), "replicas");
    assert_eq!(pool(&pg(&mut r, READ)), "replicas");
    let tail = "[[routing.pattern_rules]]\nname = \"now-analytics\"\ntype = \"template\"\npattern = \"SELECT a FROM t WHERE id = 9\"\npool = \"analytics\"\n";
    r.set_rules(rules_with(&config(SPLIT, tail), &[], &[]));
    assert_eq!(r.cache_len(), 0);
    let s = r.cache_stats();
    assert_eq!((s.invalidations, s.invalidated_entries), (1, 1));
    let d = pg(&mut r, READ);
    assert_eq!((pool(&d), d.cached), ("analytics", false));
    // A dynamic rule added at runtime is a new rule set too.
    let dynamic = [pattern_rule("dyn", PatternKind::Regex, "^SELECT a", to_pool("primary"), 0)];
    r.set_rules(rules_with(&config(SPLIT, tail), &dynamic, &[]));
    assert_eq!(pool(&pg(&mut r, READ)), "primary");
    assert_eq!(r.cache_stats().invalidations, 2);
}

#[test]
fn translation_and_dynamic_hits_are_not_cached() {
    let translations = [TranslationRule {
        original_sql: "SELECT a FROM t WHERE id = 1".into(),
        translated_sql: "SELECT a FROM t_v WHERE id = 1".into(),
        target_pool: "analytics".into(),
    }];
    let dynamic = [pattern_rule("dyn", PatternKind::Template, "UPDATE t SET a = 1", to_pool("analytics"), 0)];
    let mut r = Router::new(rules_with(&config(SPLIT, ""), &dynamic, &translations), Catalogs::builtin());
    for id in 0..3 {
        let d = pg(&mut r, &format!("SELECT a FROM t WHERE id = {id}"));
        assert_eq!((d.kind, d.cached), (DecisionKind::Translation, false));
        let d = pg(&mut r, &format!("UPDATE t SET a = {id}"));
        assert_eq!((d.kind, d.cached), (DecisionKind::DynamicRule, false));
        assert!(d.writes, "facts are still analyzed for read-your-writes");
    }
    assert_eq!((r.cache_len(), r.cache_stats()), (0, CacheStats::default()));
}

#[test]
fn one_cached_entry_serves_every_session_correctly() {
    let tail = "[[routing.rules]]\nname = \"reporting\"\nuser = \"reporting\"\npool = \"analytics\"\n";
    let mut r = split_router(tail);
    assert_eq!(pool(&pg(&mut r, READ)), "replicas");
    // Pinned by read-your-writes.
    let mut pinned = RouteInput::new(READ, Protocol::Postgres, "app", "app");
    pinned.session.pinned_to_primary = true;
    let d = r.route(&pinned);
    assert_eq!((pool(&d), d.kind, d.reason), ("primary", DecisionKind::Cache, "read_your_writes"));
    // Inside a transaction.
    let tx: Arc<str> = Arc::from("primary");
    let mut in_tx = RouteInput::new(READ, Protocol::Postgres, "app", "app");
    in_tx.session.transaction_pool = Some(&tx);
    assert_eq!(r.route(&in_tx).kind, DecisionKind::TransactionPin);
    // Another user matched by a session rule.
    let d = r.route(&RouteInput::new(READ, Protocol::Postgres, "reporting", "app"));
    assert_eq!((pool(&d), d.kind, d.cached), ("analytics", DecisionKind::RegexRule, true));
    // And the first session again.
    assert_eq!(pool(&pg(&mut r, READ)), "replicas");
    assert_eq!(r.cache_stats().misses, 1);
}

#[test]
fn a_memoized_key_is_used_only_when_it_fits() {
    let mut r = split_router("");
    let key = r.key(READ, Protocol::Postgres);
    let mut input = RouteInput::new(READ, Protocol::Postgres, "app", "app");
    input.key = Some(key);
    assert_eq!(r.route(&input).fingerprint, key.fingerprint);
    // A key computed for the other protocol is recomputed.
    let other = r.key(READ, Protocol::MySql);
    input.key = Some(StatementKey { fingerprint: crate::sql::fingerprint::Fingerprint(1), ..other });
    assert_eq!(r.route(&input).fingerprint, key.fingerprint);
}

#[test]
fn a_text_sent_again_is_keyed_as_the_first_time_in_its_own_mode() {
    // Both texts are without literal values, so the router remembers their keys by their bytes.
    let mut r = split_router("");
    let sql = "SELECT a FROM t WHERE b = $1 AND c = '\\' || $2";
    let mut input = RouteInput::new(sql, Protocol::Postgres, "app", "app");
    let first = r.route(&input);
    let again = r.route(&input);
    assert_eq!(again.fingerprint, r.key(sql, Protocol::Postgres).fingerprint);
    assert_eq!((again.fingerprint, again.kind, pool(&again)), (first.fingerprint, DecisionKind::Cache, "replicas"));
    // The same bytes in another lexer mode are another shape, remembered or not.
    input.session.lex_mode.backslash_strings = true;
    let moded = r.route(&input);
    assert_ne!(moded.fingerprint, first.fingerprint);
    assert_eq!(r.route(&input).fingerprint, moded.fingerprint);
    input.session.lex_mode.backslash_strings = false;
    assert_eq!(r.route(&input).fingerprint, first.fingerprint);
    // And for the other protocol's clients.
    let mysql = RouteInput::new(sql, Protocol::MySql, "app", "app");
    assert_eq!(r.route(&mysql).fingerprint, r.key(sql, Protocol::MySql).fingerprint);
}

#[test]
fn ast_strategy_keys_selects_and_templates_by_their_syntax_tree() {
    let routing = format!("{SPLIT}\n[routing.cache]\nnormalization_strategy = \"ast\"");
    let tail = "[[routing.pattern_rules]]\nname = \"tpl\"\ntype = \"template\"\npattern = \"SELECT a FROM t WHERE id = 1\"\npool = \"analytics\"\n";
    let mut r = router_for(&config(&routing, tail));
    assert_eq!(r.rules().strategy(), NormalizationStrategy::Ast);
    let key = r.key(READ, Protocol::Postgres);
    assert_eq!(key.space, KeySpace::Ast);
    assert_ne!(key.fingerprint, key.lexer);
    assert_eq!(r.key("UPDATE t SET a = 1", Protocol::Postgres).space, KeySpace::Lexer);
    // Other literal values share the AST fingerprint; the template was keyed in the same space.
    let variant = "select a   from t where id = 7";
    assert_eq!(r.key(variant, Protocol::Postgres).fingerprint, key.fingerprint);
    assert_eq!(pg(&mut r, variant).rule.as_deref(), Some("tpl"));
    assert_eq!(pool(&pg(&mut r, "UPDATE t SET a = 1")), "primary");
}

#[test]
fn a_key_asked_for_again_is_a_fresh_computation_under_the_current_strategy() {
    // `key` serves parameterized texts from the memo `route` fills, and the other way round.
    let mut r = split_router("");
    let texts = ["SELECT a FROM t WHERE id = $1", "SELECT a FROM t WHERE id = ?", READ, "BEGIN"];
    for sql in texts {
        for protocol in [Protocol::Postgres, Protocol::MySql] {
            let fresh = StatementKey::compute(sql, protocol, r.rules().strategy());
            assert_eq!(r.key(sql, protocol), fresh, "{sql}");
            assert_eq!(r.key(sql, protocol), fresh, "{sql} again");
            assert_eq!(r.route(&RouteInput::new(sql, protocol, "app", "app")).fingerprint, fresh.fingerprint);
        }
    }
    let routing = format!("{SPLIT}\n[routing.cache]\nnormalization_strategy = \"ast\"");
    r.set_rules(router_for(&config(&routing, "")).rules().clone());
    for sql in texts {
        let fresh = StatementKey::compute(sql, Protocol::Postgres, NormalizationStrategy::Ast);
        assert_eq!(r.key(sql, Protocol::Postgres), fresh, "{sql} under ast");
    }
    assert_eq!(r.key(texts[0], Protocol::Postgres).space, KeySpace::Ast);
}
