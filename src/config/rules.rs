//! Raw → typed conversion of `[routing]` (defaults, cache, pattern and regex rules) and
//! `[[translation.rules]]`. Whether the pools they name exist is checked in `validate`.

use std::collections::HashMap;
use std::num::NonZeroUsize;
use std::time::Duration;

use super::check::{Checker, Zero};
use super::model::{
    CacheConfig, MysqlRouting, PatternRule, RegexRule, RetryPolicy, Routing, RuleTarget, TranslationRule,
};
use super::raw::{RawCache, RawPatternRule, RawRegexRule, RawRetry, RawRouting, RawTranslation, Sp};
use super::value::{NormalizationStrategy, PatternKind, ReadYourWrites, ReplicaFallback, UnknownDatabase};

/// Default plan-cache entries per core.
const DEFAULT_CACHE_SIZE: NonZeroUsize = match NonZeroUsize::new(10_000) {
    Some(n) => n,
    None => NonZeroUsize::MIN,
};

/// Converts `[routing]`.
pub(crate) fn routing(ck: &mut Checker<'_>, raw: &RawRouting) -> Routing {
    let name = |v: &Option<Sp<String>>| v.as_ref().map(|s| s.get_ref().clone());
    let mut names = HashMap::new();
    let pattern_rules = raw
        .pattern_rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let path = format!("routing.pattern_rules[{i}]");
            unique_name(ck, &mut names, &rule.get_ref().name, &path);
            pattern_rule(ck, &path, rule)
        })
        .collect();
    let rules = raw
        .rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let path = format!("routing.rules[{i}]");
            unique_name(ck, &mut names, &rule.get_ref().name, &path);
            regex_rule(ck, &path, rule)
        })
        .collect();
    let no_cache = RawCache::default();
    Routing {
        default_pool: name(&raw.default_pool),
        read_write_split: raw.read_write_split.as_ref().is_some_and(|v| *v.get_ref()),
        read_pool: name(&raw.read_pool),
        write_pool: name(&raw.write_pool),
        mysql: mysql(ck, raw),
        read_your_writes: ck.keyword(&raw.read_your_writes, "routing.read_your_writes", ReadYourWrites::Causal),
        replica_fallback: ck.keyword(&raw.replica_fallback, "routing.replica_fallback", ReplicaFallback::Primary),
        causal_wait: ck.duration(&raw.causal_wait, "routing.causal_wait", Duration::from_millis(20), Zero::Allowed),
        unknown_database: ck.keyword(&raw.unknown_database, "routing.unknown_database", UnknownDatabase::Error),
        replica_safe_functions: replica_safe_functions(ck, &raw.replica_safe_functions),
        cache: cache(ck, raw.cache.as_ref().unwrap_or(&no_cache)),
        pattern_rules,
        rules,
    }
}

/// `[routing.mysql]`, with `routing.mysql_default_pool` as an alias of its `default_pool`.
fn mysql(ck: &mut Checker<'_>, raw: &RawRouting) -> Option<MysqlRouting> {
    let name = |v: &Option<Sp<String>>| v.as_ref().map(|s| s.get_ref().clone());
    if let (Some(alias), Some(_)) = (&raw.mysql_default_pool, raw.mysql.as_ref().and_then(|m| m.default_pool.as_ref()))
    {
        let message = "routing.mysql_default_pool is an alias of routing.mysql.default_pool: set only one of them";
        ck.report_at(alias, "routing.mysql_default_pool", message);
    }
    match &raw.mysql {
        Some(m) => Some(MysqlRouting {
            read_write_split: m.read_write_split.as_ref().is_some_and(|v| *v.get_ref()),
            read_pool: name(&m.read_pool),
            write_pool: name(&m.write_pool),
            default_pool: name(&m.default_pool).or_else(|| name(&raw.mysql_default_pool)),
        }),
        None => raw
            .mysql_default_pool
            .as_ref()
            .map(|d| MysqlRouting { default_pool: Some(d.get_ref().clone()), ..MysqlRouting::default() }),
    }
}

/// `routing.replica_safe_functions`: each entry `schema.name` (a stored function is created in a
/// database, and an unqualified name could mean another database's function), lower-cased.
fn replica_safe_functions(ck: &mut Checker<'_>, raw: &[Sp<String>]) -> Vec<String> {
    let mut out = Vec::with_capacity(raw.len());
    for (i, entry) in raw.iter().enumerate() {
        let text = entry.get_ref().trim();
        let valid = text.split_once('.').is_some_and(|(schema, name)| {
            let part = |s: &str| !s.is_empty() && !s.contains(|c: char| c.is_whitespace() || c == '.' || c == '`');
            part(schema) && part(name)
        });
        if valid {
            out.push(text.to_ascii_lowercase());
        } else {
            let path = format!("routing.replica_safe_functions[{i}]");
            ck.report_at(
                entry,
                &path,
                format!("`{text}` is not `schema.function` (a MySQL stored function named with its database)"),
            );
        }
    }
    out
}

fn cache(ck: &mut Checker<'_>, raw: &RawCache) -> CacheConfig {
    let size = ck
        .int_in(&raw.size, "routing.cache.size", 1, i64::MAX)
        .and_then(|n| usize::try_from(n).ok())
        .and_then(NonZeroUsize::new)
        .unwrap_or(DEFAULT_CACHE_SIZE);
    CacheConfig {
        enabled: raw.enabled.unwrap_or(true),
        normalization_strategy: ck.keyword(
            &raw.normalization_strategy,
            "routing.cache.normalization_strategy",
            NormalizationStrategy::String,
        ),
        size,
    }
}

/// Rule names share one namespace across both rule lists: they are the decision reason shown
/// in logs and the admin API, so two rules with one name would be indistinguishable.
fn unique_name(ck: &mut Checker<'_>, names: &mut HashMap<String, String>, name: &Sp<String>, path: &str) {
    let name_path = format!("{path}.name");
    if name.get_ref().trim().is_empty() {
        ck.report_at(name, &name_path, "name must not be empty");
    } else if let Some(first) = names.get(name.get_ref()) {
        ck.report_at(name, &name_path, format!("duplicate rule name `{}` (first used by {first})", name.get_ref()));
    } else {
        names.insert(name.get_ref().clone(), path.to_string());
    }
}

fn pattern_rule(ck: &mut Checker<'_>, path: &str, rule: &Sp<RawPatternRule>) -> PatternRule {
    let raw = rule.get_ref();
    let kind = ck.parse_keyword(&raw.kind, &format!("{path}.type"));
    let pattern_path = format!("{path}.pattern");
    let pattern = raw.pattern.get_ref();
    match kind {
        Some(PatternKind::Template) if pattern.trim().is_empty() => {
            ck.report_at(&raw.pattern, &pattern_path, "a template pattern must not be empty");
        }
        Some(PatternKind::Regex) => check_regex(ck, &raw.pattern, &pattern_path),
        Some(PatternKind::Hash) if pattern.trim().parse::<u64>().is_err() => {
            ck.report_at(&raw.pattern, &pattern_path, "a hash pattern must be a decimal u64 fingerprint");
        }
        _ => {}
    }
    PatternRule {
        name: raw.name.get_ref().clone(),
        kind: kind.unwrap_or(PatternKind::Template),
        pattern: pattern.clone(),
        target: target(ck, path, rule, &raw.pool, &raw.reject),
        priority: priority(ck, path, &raw.priority),
        retry: rule_retry(ck, path, &raw.retry, &raw.reject),
        allow_writes: raw.allow_writes.unwrap_or(false),
    }
}

fn regex_rule(ck: &mut Checker<'_>, path: &str, rule: &Sp<RawRegexRule>) -> RegexRule {
    let raw = rule.get_ref();
    if let Some(pattern) = &raw.pattern {
        check_regex(ck, pattern, &format!("{path}.pattern"));
    }
    if raw.pattern.is_none() && raw.user.is_none() && raw.database.is_none() && raw.protocol.is_none() {
        ck.report_at(rule, path, "a rule needs at least one matcher: pattern, user, database or protocol");
    }
    let text = |v: &Option<Sp<String>>| v.as_ref().map(|s| s.get_ref().clone());
    RegexRule {
        name: raw.name.get_ref().clone(),
        pattern: text(&raw.pattern),
        user: text(&raw.user),
        database: text(&raw.database),
        protocol: ck.opt_keyword(&raw.protocol, &format!("{path}.protocol")),
        target: target(ck, path, rule, &raw.pool, &raw.reject),
        priority: priority(ck, path, &raw.priority),
        retry: rule_retry(ck, path, &raw.retry, &raw.reject),
        allow_writes: raw.allow_writes.unwrap_or(false),
    }
}

fn check_regex(ck: &mut Checker<'_>, pattern: &Sp<String>, path: &str) {
    if let Err(err) = regex::Regex::new(pattern.get_ref()) {
        // regex errors draw a multi-line caret diagram; its last line is the actual reason.
        let text = err.to_string();
        let reason = text.lines().last().unwrap_or(&text).trim().trim_start_matches("error: ");
        ck.report_at(pattern, path, format!("invalid regex: {reason}"));
    }
}

fn target<T>(
    ck: &mut Checker<'_>,
    path: &str,
    rule: &Sp<T>,
    pool: &Option<Sp<String>>,
    reject: &Option<Sp<String>>,
) -> RuleTarget {
    match (pool, reject) {
        (Some(pool), None) => RuleTarget::Pool(pool.get_ref().clone()),
        (None, Some(reject)) => RuleTarget::Reject(reject.get_ref().clone()),
        (Some(pool), Some(_)) => {
            ck.report_at(rule, path, "set exactly one of pool or reject, not both");
            RuleTarget::Pool(pool.get_ref().clone())
        }
        (None, None) => {
            ck.report_at(rule, path, "set exactly one of pool or reject");
            RuleTarget::Reject(String::new())
        }
    }
}

/// A rule's own retry policy (#11): the keys of `[pools.<name>.retry]` with the same defaults,
/// except that `maximum_attempts` must be given (a rule that says `retry` means it).
fn rule_retry(
    ck: &mut Checker<'_>,
    path: &str,
    raw: &Option<Sp<RawRetry>>,
    reject: &Option<Sp<String>>,
) -> Option<RetryPolicy> {
    let raw = raw.as_ref()?;
    let base = format!("{path}.retry");
    if reject.is_some() {
        ck.report_at(raw, &base, "retry needs a rule with a pool: a rejected statement runs nowhere");
    }
    if raw.get_ref().maximum_attempts.is_none() {
        ck.report_at(
            raw,
            &format!("{base}.maximum_attempts"),
            "required in a rule's retry (2 or more retries, 1 turns the pool's retry off for this rule)",
        );
    }
    Some(super::pool::retry(ck, &base, raw.get_ref()))
}

fn priority(ck: &mut Checker<'_>, path: &str, raw: &Option<Sp<i64>>) -> i32 {
    ck.int_in(raw, &format!("{path}.priority"), i64::from(i32::MIN), i64::from(i32::MAX))
        .and_then(|n| i32::try_from(n).ok())
        .unwrap_or(0)
}

/// Converts `[[translation.rules]]`, in file order.
pub(crate) fn translations(ck: &mut Checker<'_>, raw: &RawTranslation) -> Vec<TranslationRule> {
    raw.rules
        .iter()
        .enumerate()
        .map(|(i, rule)| {
            let path = format!("translation.rules[{i}]");
            let rule = rule.get_ref();
            TranslationRule {
                original_sql: ck.non_empty(&rule.original_sql, &format!("{path}.original_sql")),
                translated_sql: ck.non_empty(&rule.translated_sql, &format!("{path}.translated_sql")),
                target_pool: rule.target_pool.get_ref().clone(),
            }
        })
        .collect()
}
