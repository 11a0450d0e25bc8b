//! Configuration: raw serde structs (`raw`, `deny_unknown_fields`) → checks → typed [`Config`].
//!
//! L0: pure. It parses text it is given; reading the file, watching it and applying a reload
//! belong to the control plane. It depends on no other module of the crate. Every problem in a
//! file is reported at once with its line, column and dotted key path ([`ConfigErrors`]).

mod build;
mod check;
mod error;
mod model;
mod pool;
mod raw;
mod render;
mod rules;
mod span;
mod validate;
mod value;

pub use error::{ConfigErrors, ConfigIssue};
pub use model::{
    Backend, CacheConfig, General, HealthCheck, Listener, Metrics, PatternRule, Pool, PoolLimits, PoolTimeouts,
    RegexRule, RetryPolicy, Routing, RuleTarget, TranslationRule,
};
pub use value::{
    parse_duration, parse_size, ClientAuth, NormalizationStrategy, PatternKind, PoolMode, PoolRole, Protocol,
    ReadYourWrites, ReplicaFallback,
};

use check::Checker;
use raw::RawConfig;

#[cfg(test)]
mod tests;

/// The validated configuration of the whole router.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// `[general]`.
    pub general: General,
    /// `[[listeners]]`, in file order; at least one.
    pub listeners: Vec<Listener>,
    /// `[pools.*]`, sorted by name.
    pub pools: Vec<Pool>,
    /// `[routing]`.
    pub routing: Routing,
    /// `[[translation.rules]]`, in file order.
    pub translations: Vec<TranslationRule>,
    /// `[metrics]`.
    pub metrics: Metrics,
}

impl Config {
    /// Parses and validates a configuration text. `file` only labels the reported issues.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigErrors> {
        let raw: RawConfig = toml::from_str(text).map_err(|err| syntax_error(text, file, &err))?;
        let mut ck = Checker::new(text);
        let general = build::general(&mut ck, &raw.general);
        let config = Config {
            listeners: build::listeners(&mut ck, &raw.listeners),
            pools: pool::pools(&mut ck, &raw.pools, general.pool_mode, &raw.routing),
            routing: rules::routing(&mut ck, &raw.routing),
            translations: rules::translations(&mut ck, &raw.translation),
            metrics: build::metrics(&mut ck, &raw.metrics),
            general,
        };
        validate::cross_check(&mut ck, &raw, &config);
        if ck.is_clean() {
            Ok(config)
        } else {
            Err(ConfigErrors { file: file.to_string(), issues: ck.into_issues() })
        }
    }

    /// The pool with this name.
    pub fn pool(&self, name: &str) -> Option<&Pool> {
        self.pools.binary_search_by(|p| p.name.as_str().cmp(name)).ok().and_then(|i| self.pools.get(i))
    }

    /// The whole configuration, defaults filled in, as TOML that [`Config::parse`] accepts, with
    /// every password and the admin token replaced by `"***"` (for `GET /api/config`).
    pub fn redacted_toml(&self) -> String {
        render::redacted_toml(self)
    }
}

/// A TOML syntax or shape error (unknown key, wrong type, missing key). Serde stops at the
/// first one, so this is always a single issue.
fn syntax_error(text: &str, file: &str, err: &toml::de::Error) -> ConfigErrors {
    let offset = err.span().map_or(0, |span| span.start);
    let (line, column) = span::LineIndex::new(text).position(offset);
    ConfigErrors {
        file: file.to_string(),
        issues: vec![ConfigIssue {
            line,
            column,
            path: span::path_at(text, offset),
            message: err.message().trim().to_string(),
        }],
    }
}
