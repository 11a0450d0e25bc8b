//! Building a rule set: every error names its rule, all are reported at once; the pools each
//! protocol defaults to.

use super::*;
use crate::error::ErrorCode;

fn errors(dynamic: &[PatternRule], translations: &[TranslationRule]) -> Vec<RuleError> {
    match RuleSet::build(&config(SPLIT, ""), dynamic, translations) {
        Ok(_) => panic!("expected rule errors"),
        Err(e) => e.0,
    }
}

#[test]
fn rule_set_is_shareable_across_threads() {
    fn shareable<T: Send + Sync>() {}
    shareable::<RuleSet>();
    shareable::<Decision>();
    shareable::<Explanation>();
}

#[test]
fn each_bad_rule_is_reported_with_its_name() {
    let table: [(PatternRule, &str); 4] = [
        (pattern_rule("bad-re", PatternKind::Regex, "(unclosed", to_pool("primary"), 0), "bad-re"),
        (pattern_rule("bad-hash", PatternKind::Hash, "0xff", to_pool("primary"), 0), "bad-hash"),
        (pattern_rule("empty", PatternKind::Template, "  ", to_pool("primary"), 0), "empty"),
        (pattern_rule("nowhere", PatternKind::Regex, "x", to_pool("missing"), 0), "nowhere"),
    ];
    for (rule, name) in &table {
        let errs = errors(std::slice::from_ref(rule), &[]);
        assert_eq!(errs.len(), 1, "{errs:?}");
        let text = errs[0].to_string();
        assert!(text.contains(&format!("`{name}`")), "{text}");
        assert_eq!(errs[0].code(), "routing.invalid_rule");
    }
    let all: Vec<PatternRule> = table.into_iter().map(|(r, _)| r).collect();
    assert_eq!(errors(&all, &[]).len(), 4, "every error at once");
    assert!(matches!(&errors(&all[..1], &[])[0], RuleError::InvalidRegex { rule, .. } if rule == "bad-re"));
    assert!(matches!(&errors(&all[3..], &[])[0], RuleError::UnknownPool { pool, .. } if pool == "missing"));
}

#[test]
fn bad_translations_name_the_rule_and_protocol() {
    let ambiguous = TranslationRule {
        original_sql: "SELECT * FROM t WHERE a = 1 AND b = 1".into(),
        translated_sql: "SELECT * FROM v WHERE a = 1".into(),
        target_pool: "analytics".into(),
    };
    let errs = errors(&[], &[ambiguous]);
    // Compiled for both client protocols (there is a listener of each).
    assert_eq!(errs.len(), 2, "{errs:?}");
    for e in &errs {
        assert!(matches!(e, RuleError::Translation { rule, .. } if rule == "api.translations[0]"), "{e}");
    }
    let nowhere = TranslationRule {
        original_sql: "SELECT 1".into(),
        translated_sql: "SELECT 2".into(),
        target_pool: "missing".into(),
    };
    assert!(
        matches!(&errors(&[], &[nowhere])[..], [RuleError::UnknownPool { rule, .. }] if rule == "api.translations[0]")
    );
}

#[test]
fn default_pools_per_protocol() {
    let split = rules_with(&config(SPLIT, ""), &[], &[]);
    assert!(split.read_write_split());
    for p in [Protocol::Postgres, Protocol::MySql] {
        assert_eq!(split.primary_pool(p).map(|s| &**s), Some("primary"));
        assert_eq!(split.read_pool(p).map(|s| &**s), Some("replicas"));
    }
    let mysql_own = rules_with(&config(&format!("{SPLIT}\nmysql_default_pool = \"my_primary\""), ""), &[], &[]);
    assert_eq!(mysql_own.primary_pool(Protocol::MySql).map(|s| &**s), Some("my_primary"));
    assert_eq!(mysql_own.read_pool(Protocol::MySql), None);
    assert_eq!(mysql_own.read_pool(Protocol::Postgres).map(|s| &**s), Some("replicas"));
    let plain = rules_with(&config(NO_SPLIT, ""), &[], &[]);
    assert_eq!(plain.primary_pool(Protocol::Postgres).map(|s| &**s), Some("primary"));
    assert_eq!((plain.read_pool(Protocol::Postgres), plain.read_write_split()), (None, false));
}

#[test]
fn a_core_copy_routes_alike_and_shares_no_name() {
    let rules = [
        pattern_rule("re", PatternKind::Regex, "^SELECT .* FROM audit", to_pool("primary"), 0),
        pattern_rule("shape", PatternKind::Template, "SELECT * FROM hot WHERE id = 1", to_pool("replicas"), 1),
    ];
    let shared = rules_with(&config(SPLIT, ""), &rules, &[]);
    let local = shared.for_core();
    let (mut a, mut b) = (Router::new(shared.clone(), Catalogs::builtin()), Router::new(local, Catalogs::builtin()));
    let statements =
        ["SELECT * FROM audit WHERE x = 2", "SELECT * FROM hot WHERE id = 9", "UPDATE t SET a = 1", "SELECT 1"];
    for sql in statements {
        let (da, db) = (pg(&mut a, sql), pg(&mut b, sql));
        assert_eq!((pool(&da), da.kind, &da.rule), (pool(&db), db.kind, &db.rule), "{sql}");
        match (&da.outcome, &db.outcome) {
            (Outcome::Route(x), Outcome::Route(y)) => assert!(!Arc::ptr_eq(x, y), "{sql}: pool name shared"),
            other => panic!("{sql}: {other:?}"),
        }
    }
}
