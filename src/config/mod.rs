//! Configuration: raw serde structs (`raw`, `deny_unknown_fields`) → checks → typed [`Config`].
//!
//! L0: pure. It parses text it is given; reading the file, watching it and applying a reload
//! belong to the control plane. It depends on no other module of the crate. Every problem in a
//! file is reported at once with its line, column and dotted key path ([`ConfigErrors`]).

mod build;
mod check;
mod console;
mod error;
mod limits;
mod model;
mod pool;
mod raw;
mod render;
mod rules;
mod shape;
mod span;
mod template;
mod validate;
mod value;
mod warnings;

pub use console::{Console, ConsoleRole, CONSOLE_DATABASES};
pub use error::{ConfigErrors, ConfigIssue};
pub use limits::Limits;
pub use model::{
    Auth, AuthQuery, Backend, BackendTls, CacheConfig, General, HealthCheck, Listener, ListenerTls, Metrics,
    MysqlRouting, PatternRule, Pool, PoolLimits, PoolTimeouts, QuerySpec, RegexRule, RetryPolicy, Routing, RuleTarget,
    ShapeLimits, TlsClient, TlsServer, TranslationRule, DEFAULT_CHECK_QUERY,
};
pub use template::PoolTemplate;
pub use value::{
    parse_duration, parse_size, Balance, ClientAuth, ClientTls, Engine, LogFormat, NormalizationStrategy, PatternKind,
    PoolMode, PoolRole, Protocol, ReadYourWrites, ReplicaFallback, TlsMode, UnknownDatabase,
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
    /// `[console]`.
    pub console: Console,
    /// `[auth]`.
    pub auth: Auth,
    /// `[limits]`.
    pub limits: Limits,
    /// `[pool_template]`.
    pub pool_template: PoolTemplate,
}

impl Config {
    /// Parses and validates a configuration text. `file` only labels the reported issues.
    pub fn parse(text: &str, file: &str) -> Result<Config, ConfigErrors> {
        let raw: RawConfig = toml::from_str(text).map_err(|err| syntax_error(text, file, &err))?;
        let mut ck = Checker::new(text);
        let general = build::general(&mut ck, &raw.general);
        let pools = pool::pools(&mut ck, &raw.pools, general.pool_mode, &raw.routing);
        let pool_template = template::template(&mut ck, &raw.pool_template, &pools);
        let config = Config {
            listeners: build::listeners(&mut ck, &raw.listeners),
            console: console::console(&mut ck, &raw.console, &pools),
            pools,
            routing: rules::routing(&mut ck, &raw.routing),
            translations: rules::translations(&mut ck, &raw.translation),
            metrics: build::metrics(&mut ck, &raw.metrics),
            auth: build::auth(&mut ck, &raw.auth),
            limits: limits::limits(&mut ck, &raw.limits),
            pool_template,
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

    /// The pool a `protocol` client that asks for `database` at login starts on: the pool of that
    /// name; else the protocol's primary pool if it serves that database, else the first pool
    /// (by name) serving it; else, only with `routing.unknown_database = "default_pool"`, the
    /// primary pool. `None`: the database does not exist here (3D000 / 1049).
    pub fn login_pool(&self, database: &str, protocol: Protocol) -> Option<&Pool> {
        if let Some(p) = self.pool(database) {
            return Some(p);
        }
        let primary = self.routing.primary_pool(protocol).and_then(|p| self.pool(p));
        if let Some(p) = primary.filter(|p| p.database == database) {
            return Some(p);
        }
        if let Some(p) = self.pools.iter().find(|p| p.database == database) {
            return Some(p);
        }
        primary.filter(|_| self.routing.unknown_database == UnknownDatabase::DefaultPool)
    }

    /// The pool a `protocol` client naming a database no pool serves is given (#36):
    /// `[pool_template]`'s pool for that protocol, if any.
    pub fn template_pool(&self, protocol: Protocol) -> Option<&Pool> {
        let name = match protocol {
            Protocol::Postgres => self.pool_template.postgres.as_deref(),
            Protocol::MySql => self.pool_template.mysql.as_deref(),
        };
        name.and_then(|n| self.pool(n))
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
