//! Table-driven tests of the routing engine: every chain step and rule type, hints,
//! read-your-writes, the plan cache, and the dangerous direction (nothing unsafe reaches a replica).

mod cache;
mod chain;
mod danger;
mod hints;
mod lexmode;
mod protocol_split;
mod roles;
mod rules;
mod ryw;

use std::rc::Rc;
use std::sync::Arc;

use super::*;
use crate::config::{Config, PatternKind, PatternRule, Protocol, RuleTarget, TranslationRule};

/// Postgres and MySQL listeners, five pools, read/write split. `{routing}` adds `[routing]` keys,
/// `{tail}` adds tables after it (rules, translations).
fn config_text(routing: &str, tail: &str) -> String {
    format!(
        r#"
[[listeners]]
protocol = "postgres"
bind = "127.0.0.1:6432"

[[listeners]]
protocol = "mysql"
bind = "127.0.0.1:3307"

[pools.primary]
backends = [{{ host = "db1", port = 5432 }}]

[pools.replicas]
backends = [{{ host = "db2", port = 5432 }}]

[pools.analytics]
backends = [{{ host = "db3", port = 5432 }}]

[pools.my_primary]
backends = [{{ host = "my1", port = 3306 }}]

[pools.my_replicas]
backends = [{{ host = "my2", port = 3306 }}]

[routing]
{routing}

{tail}
"#
    )
}

const SPLIT: &str = "read_write_split = true\nread_pool = \"replicas\"\nwrite_pool = \"primary\"";
const NO_SPLIT: &str = "default_pool = \"primary\"";

fn config(routing: &str, tail: &str) -> Config {
    let text = config_text(routing, tail);
    match Config::parse(&text, "test.toml") {
        Ok(c) => c,
        Err(e) => panic!("invalid test config:\n{e}\n{text}"),
    }
}

fn rules_with(config: &Config, dynamic: &[PatternRule], translations: &[TranslationRule]) -> Rc<RuleSet> {
    match RuleSet::build(config, dynamic, translations) {
        Ok(r) => Rc::new(r),
        Err(e) => panic!("rules do not build: {e}"),
    }
}

fn router_for(config: &Config) -> Router {
    Router::new(rules_with(config, &[], &[]), Catalogs::builtin())
}

/// A router over the split config plus `tail`.
fn split_router(tail: &str) -> Router {
    router_for(&config(SPLIT, tail))
}

/// Routes `sql` for a fresh postgres session (user `app`, database `app`).
fn pg(router: &mut Router, sql: &str) -> Decision {
    router.route(&RouteInput::new(sql, Protocol::Postgres, "app", "app"))
}

/// Routes `sql` for a fresh mysql session (user `app`, database `app`).
fn my(router: &mut Router, sql: &str) -> Decision {
    router.route(&RouteInput::new(sql, Protocol::MySql, "app", "app"))
}

/// The pool a decision routes to; panics with the decision otherwise.
fn pool(d: &Decision) -> &str {
    match &d.outcome {
        Outcome::Route(p) => p,
        other => panic!("expected a route, got {other:?} in {d:#?}"),
    }
}

/// The reject message of a decision; panics otherwise.
fn rejected(d: &Decision) -> &str {
    match &d.outcome {
        Outcome::Reject(m) => m,
        other => panic!("expected a reject, got {other:?}"),
    }
}

/// The hint error's reason; panics unless the decision is a `HintNotHonored` error.
fn not_honored(d: &Decision) -> &str {
    match &d.outcome {
        Outcome::Error(DecisionError::HintNotHonored { reason }) => reason,
        other => panic!("expected HintNotHonored, got {other:?}"),
    }
}

fn pattern_rule(name: &str, kind: PatternKind, pattern: &str, target: RuleTarget, priority: i32) -> PatternRule {
    PatternRule { name: name.into(), kind, pattern: pattern.into(), target, priority, retry: None, allow_writes: false }
}

fn to_pool(p: &str) -> RuleTarget {
    RuleTarget::Pool(p.into())
}
