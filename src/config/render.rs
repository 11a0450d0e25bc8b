//! Writes a [`Config`] back as TOML in the file's own schema, defaults made explicit, secrets
//! replaced by `"***"`. The output parses again with `Config::parse`, so an operator can
//! copy it into a file.

use std::time::Duration;

use toml::{Table, Value};

use super::model::{Backend, BackendTls, Listener, Pool, RegexRule, RetryPolicy, Routing, RuleTarget, ShapeLimits};
use super::value::{format_duration, format_size, Protocol};
use super::{Config, Console};

/// What replaces every secret.
const REDACTED: &str = "***";

/// Renders `config` with passwords and the admin token redacted.
pub(crate) fn redacted_toml(config: &Config) -> String {
    let mut root = Table::new();
    root.insert("general".into(), Value::Table(general(config)));
    root.insert("listeners".into(), Value::Array(config.listeners.iter().map(listener).collect()));
    let pools: Table = config.pools.iter().map(|p| (p.name.clone(), pool(p))).collect();
    root.insert("pools".into(), Value::Table(pools));
    root.insert("routing".into(), Value::Table(routing(&config.routing)));
    let translations = config.translations.iter().map(|t| {
        let mut table = Table::new();
        put_str(&mut table, "original_sql", &t.original_sql);
        put_str(&mut table, "translated_sql", &t.translated_sql);
        put_str(&mut table, "target_pool", &t.target_pool);
        Value::Table(table)
    });
    let mut translation = Table::new();
    translation.insert("rules".into(), Value::Array(translations.collect()));
    root.insert("translation".into(), Value::Table(translation));
    let mut metrics = Table::new();
    metrics.insert("enabled".into(), Value::Boolean(config.metrics.enabled));
    put_str(&mut metrics, "bind", &config.metrics.bind.to_string());
    if config.metrics.admin_token.is_some() {
        put_str(&mut metrics, "admin_token", REDACTED);
    }
    root.insert("metrics".into(), Value::Table(metrics));
    root.insert("console".into(), Value::Table(console(&config.console)));
    let mut auth = Table::new();
    if let Some(file) = &config.auth.file {
        // The path only: the file's secrets are never rendered.
        put_str(&mut auth, "file", &file.display().to_string());
    }
    auth.insert("max_failed_logins".into(), Value::Integer(i64::from(config.auth.max_failed_logins)));
    if let Some(q) = &config.auth.query {
        for (proto, spec) in [("pg", &q.pg), ("mysql", &q.mysql)] {
            if let Some(spec) = spec {
                put_str(&mut auth, &format!("{proto}_query_user"), &spec.user);
                put_str(&mut auth, &format!("{proto}_query"), &spec.sql);
            }
        }
        put_duration(&mut auth, "cache_ttl", q.cache_ttl);
    }
    auth.insert("allow_empty_password".into(), Value::Boolean(config.auth.allow_empty_password));
    if config.auth.mock_salt_key.is_some() {
        put_str(&mut auth, "mock_salt_key", REDACTED);
    }
    root.insert("auth".into(), Value::Table(auth));
    root.insert("limits".into(), Value::Table(limits(&config.limits)));
    root.insert("pool_template".into(), Value::Table(pool_template(&config.pool_template)));
    // A table of strings, numbers, booleans and arrays of tables always serializes; the
    // fallback only keeps this path free of panics.
    toml::to_string(&root).unwrap_or_default()
}

fn limits(limits: &crate::config::Limits) -> Table {
    let mut table = Table::new();
    table.insert("session_prepared_statements".into(), Value::Integer(int(limits.session_prepared_statements.get())));
    put_str(
        &mut table,
        "session_prepared_bytes",
        &format_size(u64::try_from(limits.session_prepared_bytes).unwrap_or(u64::MAX)),
    );
    put_str(&mut table, "long_data", &format_size(u64::try_from(limits.long_data).unwrap_or(u64::MAX)));
    put_str(&mut table, "client_buffer_budget", &format_size(limits.client_buffer_budget));
    table
}

fn pool_template(template: &crate::config::PoolTemplate) -> Table {
    let mut table = Table::new();
    for (key, pool) in [("postgres", &template.postgres), ("mysql", &template.mysql)] {
        if let Some(pool) = pool {
            put_str(&mut table, key, pool);
        }
    }
    table.insert("max_pools".into(), Value::Integer(int(template.max_pools.get())));
    table
}

fn console(console: &Console) -> Table {
    let mut table = Table::new();
    let names = |users: &[String]| Value::Array(users.iter().map(|u| Value::String(u.clone())).collect());
    table.insert("admin_users".into(), names(&console.admin_users));
    table.insert("stats_users".into(), names(&console.stats_users));
    let passwords: Table = console.passwords.keys().map(|u| (u.clone(), Value::String(REDACTED.into()))).collect();
    table.insert("passwords".into(), Value::Table(passwords));
    put_duration(&mut table, "pause_timeout", console.pause_timeout);
    table
}

fn general(config: &Config) -> Table {
    let general = &config.general;
    let mut table = Table::new();
    put_str(&mut table, "pool_mode", general.pool_mode.as_str());
    if let Some(cores) = &general.cores {
        let ids = cores.iter().map(|&id| Value::Integer(int(id))).collect();
        table.insert("cores".into(), Value::Array(ids));
    }
    put_duration(&mut table, "shutdown_drain", general.shutdown_drain);
    put_str(&mut table, "log_level", &general.log_level);
    if let Some(path) = &general.log_file {
        put_str(&mut table, "log_file", &path.display().to_string());
    }
    put_str(&mut table, "log_format", general.log_format.as_str());
    if let Some(path) = &general.handover_socket {
        put_str(&mut table, "handover_socket", &path.display().to_string());
    }
    put_duration(&mut table, "handover_wait", general.handover_wait);
    table
}

fn listener(listener: &Listener) -> Value {
    let mut table = Table::new();
    put_str(&mut table, "name", &listener.name);
    put_str(&mut table, "protocol", listener.protocol.as_str());
    put_str(&mut table, "bind", &listener.bind.to_string());
    table.insert("allow_anonymous".into(), Value::Boolean(listener.allow_anonymous));
    if listener.protocol == Protocol::Postgres {
        put_str(&mut table, "auth_method", listener.auth_method.as_str());
    }
    if let Some(max) = listener.max_client_connections {
        table.insert("max_client_connections".into(), Value::Integer(i64::from(max.get())));
    }
    put_str(&mut table, "max_message_size", &format_size(u64::try_from(listener.max_message_size).unwrap_or(u64::MAX)));
    let tls = &listener.tls;
    put_str(&mut table, "tls", tls.mode.as_str());
    let files = [
        ("tls_cert_file", &tls.cert_file),
        ("tls_key_file", &tls.key_file),
        ("tls_client_ca_file", &tls.client_ca_file),
    ];
    for (key, file) in files {
        if let Some(file) = file {
            put_str(&mut table, key, &file.display().to_string());
        }
    }
    if tls.client_cert_user {
        table.insert("tls_client_cert_user".into(), Value::Boolean(true));
    }
    if tls.resumption {
        table.insert("tls_resumption".into(), Value::Boolean(true));
    }
    Value::Table(table)
}

fn pool(pool: &Pool) -> Value {
    let mut table = Table::new();
    put_str(&mut table, "mode", pool.mode.as_str());
    put_str(&mut table, "role", pool.role.as_str());
    if let Some(protocol) = pool.protocol {
        put_str(&mut table, "protocol", protocol.as_str());
    }
    put_str(&mut table, "engine", pool.engine.as_str());
    if let Some(username) = &pool.username {
        put_str(&mut table, "username", username);
    }
    if pool.password.is_some() {
        put_str(&mut table, "password", REDACTED);
    }
    put_str(&mut table, "database", &pool.database);
    table.insert("backends".into(), Value::Array(pool.backends.iter().map(backend).collect()));
    table.insert("min_connections".into(), Value::Integer(i64::from(pool.limits.min_connections)));
    table.insert("max_connections".into(), Value::Integer(i64::from(pool.limits.max_connections.get())));
    if let Some(max) = pool.limits.max_user_connections {
        table.insert("max_user_connections".into(), Value::Integer(i64::from(max.get())));
    }
    let max_prepared = i64::from(pool.limits.max_prepared_statements.get());
    table.insert("max_prepared_statements".into(), Value::Integer(max_prepared));
    put_duration(&mut table, "acquire_timeout", pool.timeouts.acquire);
    put_duration(&mut table, "idle_timeout", pool.timeouts.idle);
    put_duration(&mut table, "idle_check_interval", pool.timeouts.idle_check);
    put_duration(&mut table, "connect_timeout", pool.timeouts.connect);
    if let Some(query) = pool.timeouts.query {
        put_duration(&mut table, "query_timeout", query);
    }
    if let Some(idle) = pool.timeouts.idle_transaction {
        put_duration(&mut table, "idle_transaction_timeout", idle);
    }
    if !pool.timeouts.failover_wait.is_zero() {
        put_duration(&mut table, "failover_wait", pool.timeouts.failover_wait);
    }
    table.insert("raw_passthrough".into(), Value::Boolean(pool.raw_passthrough));
    table.insert("local_infile".into(), Value::Boolean(pool.local_infile));
    put_str(&mut table, "balance", pool.balance.as_str());
    table.insert("retry".into(), Value::Table(retry(&pool.retry)));
    shape_limits(&mut table, &pool.shape_limits);
    tls(&mut table, &pool.tls);
    let health = &pool.health;
    let mut h = Table::new();
    put_duration(&mut h, "interval", health.interval);
    put_duration(&mut h, "timeout", health.timeout);
    h.insert("failure_threshold".into(), Value::Integer(i64::from(health.failure_threshold.get())));
    h.insert("success_threshold".into(), Value::Integer(i64::from(health.success_threshold.get())));
    if let Some(q) = &health.check_query {
        put_str(&mut h, "check_query", q);
    }
    table.insert("health".into(), Value::Table(h));
    Value::Table(table)
}

/// The shape limiter's keys (#41).
fn shape_limits(table: &mut Table, limits: &ShapeLimits) {
    table.insert("adaptive_limit".into(), Value::Boolean(limits.adaptive));
    put_duration(table, "limit_wait", limits.wait);
    table.insert("fair_share".into(), Value::Boolean(limits.fair_share));
    if !limits.max_concurrent.is_empty() {
        let fixed = limits
            .max_concurrent
            .iter()
            .map(|(digest, n)| (format!("{digest:016x}"), Value::Integer(i64::from(n.get()))))
            .collect();
        table.insert("max_concurrent".into(), Value::Table(fixed));
    }
    if !limits.share_weights.is_empty() {
        let weights =
            limits.share_weights.iter().map(|(user, w)| (user.clone(), Value::Integer(i64::from(w.get())))).collect();
        table.insert("share_weights".into(), Value::Table(weights));
    }
}

/// The TLS keys as written; the loaded client configuration is not configuration text.
fn tls(table: &mut Table, tls: &BackendTls) {
    put_str(table, "tls", tls.mode.as_str());
    let files = [("tls_ca_file", &tls.ca_file), ("tls_cert_file", &tls.cert_file), ("tls_key_file", &tls.key_file)];
    for (key, file) in files {
        if let Some(file) = file {
            put_str(table, key, &file.display().to_string());
        }
    }
    if let Some(name) = &tls.server_name {
        put_str(table, "tls_server_name", name);
    }
}

fn backend(backend: &Backend) -> Value {
    let mut table = Table::new();
    put_str(&mut table, "host", &backend.host);
    table.insert("port".into(), Value::Integer(i64::from(backend.port)));
    table.insert("weight".into(), Value::Integer(i64::from(backend.weight.get())));
    if let Some(lag) = backend.max_replica_lag {
        put_duration(&mut table, "max_replica_lag", lag);
    }
    if let Some(bytes) = backend.max_replica_lag_bytes {
        table.insert("max_replica_lag_bytes".into(), Value::Integer(int(bytes)));
    }
    if let Some(name) = &backend.tls_server_name {
        put_str(&mut table, "tls_server_name", name);
    }
    Value::Table(table)
}

fn routing(routing: &Routing) -> Table {
    let mut table = Table::new();
    for (key, value) in [
        ("default_pool", &routing.default_pool),
        ("read_pool", &routing.read_pool),
        ("write_pool", &routing.write_pool),
    ] {
        if let Some(value) = value {
            put_str(&mut table, key, value);
        }
    }
    table.insert("read_write_split".into(), Value::Boolean(routing.read_write_split));
    if let Some(m) = &routing.mysql {
        let mut mysql = Table::new();
        for (key, value) in
            [("read_pool", &m.read_pool), ("write_pool", &m.write_pool), ("default_pool", &m.default_pool)]
        {
            if let Some(value) = value {
                put_str(&mut mysql, key, value);
            }
        }
        mysql.insert("read_write_split".into(), Value::Boolean(m.read_write_split));
        table.insert("mysql".into(), Value::Table(mysql));
    }
    put_str(&mut table, "read_your_writes", &routing.read_your_writes.to_string());
    put_str(&mut table, "replica_fallback", routing.replica_fallback.as_str());
    put_duration(&mut table, "causal_wait", routing.causal_wait);
    put_str(&mut table, "unknown_database", routing.unknown_database.as_str());
    let safe = routing.replica_safe_functions.iter().map(|f| Value::String(f.clone())).collect();
    table.insert("replica_safe_functions".into(), Value::Array(safe));
    let mut cache = Table::new();
    cache.insert("enabled".into(), Value::Boolean(routing.cache.enabled));
    put_str(&mut cache, "normalization_strategy", routing.cache.normalization_strategy.as_str());
    cache.insert("size".into(), Value::Integer(int(routing.cache.size.get())));
    table.insert("cache".into(), Value::Table(cache));
    let patterns = routing.pattern_rules.iter().map(|rule| {
        let mut t = Table::new();
        put_str(&mut t, "name", &rule.name);
        put_str(&mut t, "type", rule.kind.as_str());
        put_str(&mut t, "pattern", &rule.pattern);
        put_target(&mut t, &rule.target);
        t.insert("priority".into(), Value::Integer(i64::from(rule.priority)));
        if let Some(r) = &rule.retry {
            t.insert("retry".into(), Value::Table(retry(r)));
        }
        if rule.allow_writes {
            t.insert("allow_writes".into(), Value::Boolean(true));
        }
        Value::Table(t)
    });
    table.insert("pattern_rules".into(), Value::Array(patterns.collect()));
    table.insert("rules".into(), Value::Array(routing.rules.iter().map(regex_rule).collect()));
    table
}

fn regex_rule(rule: &RegexRule) -> Value {
    let mut t = Table::new();
    put_str(&mut t, "name", &rule.name);
    for (key, value) in [("pattern", &rule.pattern), ("user", &rule.user), ("database", &rule.database)] {
        if let Some(value) = value {
            put_str(&mut t, key, value);
        }
    }
    if let Some(protocol) = rule.protocol {
        put_str(&mut t, "protocol", protocol.as_str());
    }
    put_target(&mut t, &rule.target);
    t.insert("priority".into(), Value::Integer(i64::from(rule.priority)));
    if let Some(r) = &rule.retry {
        t.insert("retry".into(), Value::Table(retry(r)));
    }
    if rule.allow_writes {
        t.insert("allow_writes".into(), Value::Boolean(true));
    }
    Value::Table(t)
}

/// A pool's `[pools.<name>.retry]` or a rule's `retry = { ... }`.
fn retry(retry: &RetryPolicy) -> Table {
    let mut r = Table::new();
    r.insert("maximum_attempts".into(), Value::Integer(i64::from(retry.maximum_attempts.get())));
    put_duration(&mut r, "backoff_base", retry.backoff_base);
    put_duration(&mut r, "backoff_max", retry.backoff_max);
    r.insert("jitter".into(), Value::Boolean(retry.jitter));
    put_duration(&mut r, "deadline", retry.deadline);
    r.insert("notify_client".into(), Value::Boolean(retry.notify_client));
    r
}

fn put_target(table: &mut Table, target: &RuleTarget) {
    match target {
        RuleTarget::Pool(pool) => put_str(table, "pool", pool),
        RuleTarget::Reject(message) => put_str(table, "reject", message),
    }
}

fn put_str(table: &mut Table, key: &str, value: &str) {
    table.insert(key.into(), Value::String(value.to_string()));
}

fn put_duration(table: &mut Table, key: &str, value: Duration) {
    put_str(table, key, &format_duration(value));
}

/// TOML integers are i64; values beyond (impossible after validation) saturate.
fn int<T: TryInto<i64>>(n: T) -> i64 {
    n.try_into().unwrap_or(i64::MAX)
}
