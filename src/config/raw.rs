//! The file format as serde sees it: every key of `querypilot.toml`, nothing more
//! (`deny_unknown_fields` everywhere, so a typo is an error, not a silently ignored setting).
//!
//! Values that are validated later are kept as strings or `i64` inside `toml::Spanned`, so a bad
//! value becomes one reported issue with its position instead of stopping deserialization, and so
//! every later issue can name its line. Tables are never wrapped in `Spanned`: toml 0.8 cannot
//! span a table implied by a dotted header (`[pools.x.retry]` without `[pools.x]`).
//!
//! These structs mirror the file layout, so some exceed the usual 12-field budget: grouping them
//! would need `#[serde(flatten)]`, which serde cannot combine with `deny_unknown_fields`.

use std::collections::BTreeMap;

use serde::Deserialize;
use toml::Spanned;

/// A value together with its byte span in the file.
pub(crate) type Sp<T> = Spanned<T>;

/// The whole file.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConfig {
    #[serde(default)]
    pub general: RawGeneral,
    #[serde(default)]
    pub listeners: Vec<Sp<RawListener>>,
    #[serde(default)]
    pub pools: BTreeMap<String, RawPool>,
    #[serde(default)]
    pub routing: RawRouting,
    #[serde(default)]
    pub translation: RawTranslation,
    #[serde(default)]
    pub metrics: RawMetrics,
    #[serde(default)]
    pub console: RawConsole,
    #[serde(default)]
    pub auth: RawAuth,
    #[serde(default)]
    pub limits: RawLimits,
    #[serde(default)]
    pub pool_template: RawPoolTemplate,
}

/// `[pool_template]`: pools for databases no pool serves (#36).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPoolTemplate {
    pub postgres: Option<Sp<String>>,
    pub mysql: Option<Sp<String>>,
    pub max_pools: Option<Sp<i64>>,
}

/// `[limits]`: what the router holds on a client's behalf (#33).
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawLimits {
    pub session_prepared_statements: Option<Sp<i64>>,
    pub session_prepared_bytes: Option<Sp<String>>,
    pub long_data: Option<Sp<String>>,
    pub client_buffer_budget: Option<Sp<String>>,
}

/// `[auth]`: where the router finds the secrets clients of pass-through pools are checked with.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawAuth {
    pub file: Option<Sp<String>>,
    pub max_failed_logins: Option<Sp<i64>>,
    pub pg_query_user: Option<Sp<String>>,
    pub pg_query: Option<Sp<String>>,
    pub mysql_query_user: Option<Sp<String>>,
    pub mysql_query: Option<Sp<String>>,
    pub cache_ttl: Option<Sp<String>>,
    pub allow_empty_password: Option<Sp<bool>>,
    pub mock_salt_key: Option<Sp<String>>,
}

/// `[console]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawConsole {
    #[serde(default)]
    pub admin_users: Vec<Sp<String>>,
    #[serde(default)]
    pub stats_users: Vec<Sp<String>>,
    #[serde(default)]
    pub passwords: BTreeMap<String, Sp<String>>,
    pub pause_timeout: Option<Sp<String>>,
}

/// `[general]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawGeneral {
    pub pool_mode: Option<Sp<String>>,
    pub cores: Option<Sp<Vec<Sp<i64>>>>,
    pub shutdown_drain: Option<Sp<String>>,
    pub log_level: Option<Sp<String>>,
    pub log_file: Option<Sp<String>>,
    pub log_format: Option<Sp<String>>,
    pub handover_socket: Option<Sp<String>>,
    pub handover_wait: Option<Sp<String>>,
}

/// One `[[listeners]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawListener {
    pub name: Option<Sp<String>>,
    pub protocol: Sp<String>,
    pub bind: Sp<String>,
    pub allow_anonymous: Option<bool>,
    pub auth_method: Option<Sp<String>>,
    pub max_client_connections: Option<Sp<i64>>,
    pub max_message_size: Option<Sp<String>>,
    pub tls: Option<Sp<String>>,
    pub tls_cert_file: Option<Sp<String>>,
    pub tls_key_file: Option<Sp<String>>,
    pub tls_client_ca_file: Option<Sp<String>>,
    pub tls_client_cert_user: Option<Sp<bool>>,
    pub tls_resumption: Option<Sp<bool>>,
}

/// One `[pools.<name>]` table.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPool {
    pub mode: Option<Sp<String>>,
    pub role: Option<Sp<String>>,
    pub protocol: Option<Sp<String>>,
    pub engine: Option<Sp<String>>,
    pub username: Option<Sp<String>>,
    pub password: Option<Sp<String>>,
    pub database: Option<Sp<String>>,
    pub backends: Option<Sp<Vec<Sp<RawBackend>>>>,
    pub min_connections: Option<Sp<i64>>,
    pub max_connections: Option<Sp<i64>>,
    pub max_user_connections: Option<Sp<i64>>,
    pub max_prepared_statements: Option<Sp<i64>>,
    pub acquire_timeout: Option<Sp<String>>,
    pub idle_timeout: Option<Sp<String>>,
    pub idle_check_interval: Option<Sp<String>>,
    pub connect_timeout: Option<Sp<String>>,
    pub query_timeout: Option<Sp<String>>,
    pub idle_transaction_timeout: Option<Sp<String>>,
    pub failover_wait: Option<Sp<String>>,
    pub raw_passthrough: Option<Sp<bool>>,
    pub local_infile: Option<Sp<bool>>,
    pub balance: Option<Sp<String>>,
    pub retry: Option<RawRetry>,
    pub health: Option<RawHealth>,
    pub tls: Option<Sp<String>>,
    pub tls_ca_file: Option<Sp<String>>,
    pub tls_cert_file: Option<Sp<String>>,
    pub tls_key_file: Option<Sp<String>>,
    pub tls_server_name: Option<Sp<String>>,
    pub adaptive_limit: Option<Sp<bool>>,
    pub limit_wait: Option<Sp<String>>,
    pub max_concurrent: Option<BTreeMap<String, Sp<i64>>>,
    pub fair_share: Option<Sp<bool>>,
    pub share_weights: Option<BTreeMap<String, Sp<i64>>>,
}

/// One entry of a pool's `backends` array.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawBackend {
    pub host: Sp<String>,
    pub port: Sp<i64>,
    pub weight: Option<Sp<i64>>,
    pub max_replica_lag: Option<Sp<String>>,
    pub max_replica_lag_bytes: Option<Sp<i64>>,
    pub tls_server_name: Option<Sp<String>>,
}

/// `[pools.<name>.retry]`, and a routing rule's `retry = { ... }`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRetry {
    pub maximum_attempts: Option<Sp<i64>>,
    pub backoff_base: Option<Sp<String>>,
    pub backoff_max: Option<Sp<String>>,
    pub jitter: Option<bool>,
    pub deadline: Option<Sp<String>>,
    pub notify_client: Option<bool>,
}

/// `[pools.<name>.health]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawHealth {
    pub interval: Option<Sp<String>>,
    pub timeout: Option<Sp<String>>,
    pub failure_threshold: Option<Sp<i64>>,
    pub success_threshold: Option<Sp<i64>>,
    pub check_query: Option<Sp<String>>,
}

/// `[routing]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRouting {
    pub default_pool: Option<Sp<String>>,
    pub read_write_split: Option<Sp<bool>>,
    pub read_pool: Option<Sp<String>>,
    pub write_pool: Option<Sp<String>>,
    pub mysql_default_pool: Option<Sp<String>>,
    pub mysql: Option<RawMysqlRouting>,
    pub read_your_writes: Option<Sp<String>>,
    pub replica_fallback: Option<Sp<String>>,
    pub causal_wait: Option<Sp<String>>,
    pub unknown_database: Option<Sp<String>>,
    #[serde(default)]
    pub replica_safe_functions: Vec<Sp<String>>,
    pub cache: Option<RawCache>,
    #[serde(default)]
    pub pattern_rules: Vec<Sp<RawPatternRule>>,
    #[serde(default)]
    pub rules: Vec<Sp<RawRegexRule>>,
}

/// `[routing.mysql]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMysqlRouting {
    pub read_write_split: Option<Sp<bool>>,
    pub read_pool: Option<Sp<String>>,
    pub write_pool: Option<Sp<String>>,
    pub default_pool: Option<Sp<String>>,
}

/// `[routing.cache]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawCache {
    pub enabled: Option<bool>,
    pub normalization_strategy: Option<Sp<String>>,
    pub size: Option<Sp<i64>>,
}

/// One `[[routing.pattern_rules]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawPatternRule {
    pub name: Sp<String>,
    #[serde(rename = "type")]
    pub kind: Sp<String>,
    pub pattern: Sp<String>,
    pub pool: Option<Sp<String>>,
    pub reject: Option<Sp<String>>,
    pub priority: Option<Sp<i64>>,
    pub retry: Option<Sp<RawRetry>>,
    pub allow_writes: Option<bool>,
}

/// One `[[routing.rules]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawRegexRule {
    pub name: Sp<String>,
    pub pattern: Option<Sp<String>>,
    pub user: Option<Sp<String>>,
    pub database: Option<Sp<String>>,
    pub protocol: Option<Sp<String>>,
    pub pool: Option<Sp<String>>,
    pub reject: Option<Sp<String>>,
    pub priority: Option<Sp<i64>>,
    pub retry: Option<Sp<RawRetry>>,
    pub allow_writes: Option<bool>,
}

/// `[translation]`, which only holds `[[translation.rules]]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTranslation {
    #[serde(default)]
    pub rules: Vec<Sp<RawTranslationRule>>,
}

/// One `[[translation.rules]]` entry.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawTranslationRule {
    pub original_sql: Sp<String>,
    pub translated_sql: Sp<String>,
    pub target_pool: Sp<String>,
}

/// `[metrics]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawMetrics {
    pub enabled: Option<bool>,
    pub bind: Option<Sp<String>>,
    pub admin_token: Option<Sp<String>>,
}
