//! Raw → typed conversion of `[pools.<name>]` tables: backends, limits, timeouts, retry and
//! health. Checks that need routing (pool references, MySQL raw passthrough, LOCAL INFILE on
//! PostgreSQL pools) are in `validate`.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use super::check::{is_identifier, nz, Checker, Zero};
use rustls::pki_types::ServerName;

use super::model::{Backend, BackendTls, HealthCheck, Pool, PoolLimits, PoolTimeouts, RetryPolicy};
use super::raw::{RawBackend, RawHealth, RawMysqlRouting, RawPool, RawRetry, RawRouting, Sp};
use super::value::{parse_duration, Balance, Engine, PoolMode, PoolRole, Protocol, TlsMode};

/// Converts every pool; the map is ordered, so the result is sorted by name. `routing` gives
/// the default roles.
pub(crate) fn pools(
    ck: &mut Checker<'_>,
    raw: &BTreeMap<String, RawPool>,
    default_mode: PoolMode,
    routing: &RawRouting,
) -> Vec<Pool> {
    raw.iter().map(|(name, pool)| convert(ck, name, pool, default_mode, default_role(routing, name))).collect()
}

/// A pool's role when `role` is not set: `replica` for a configured read pool (of either
/// protocol) unless it is also a primary pool (a default or write pool of either protocol),
/// `primary` for everything else, which is how configurations written before roles existed
/// meant them.
fn default_role(routing: &RawRouting, name: &str) -> PoolRole {
    let named = |v: &Option<Sp<String>>| v.as_ref().is_some_and(|n| n.get_ref() == name);
    let mysql = routing.mysql.as_ref();
    let mysql_named = |key: fn(&RawMysqlRouting) -> &Option<Sp<String>>| mysql.is_some_and(|m| named(key(m)));
    let primary = named(&routing.default_pool)
        || named(&routing.write_pool)
        || named(&routing.mysql_default_pool)
        || mysql_named(|m| &m.write_pool)
        || mysql_named(|m| &m.default_pool);
    if (named(&routing.read_pool) || mysql_named(|m| &m.read_pool)) && !primary {
        PoolRole::Replica
    } else {
        PoolRole::Primary
    }
}

fn convert(ck: &mut Checker<'_>, name: &str, raw: &RawPool, default_mode: PoolMode, default_role: PoolRole) -> Pool {
    let base = format!("pools.{name}");
    if !is_identifier(name) {
        ck.report_table(&["pools", name], &base, "pool names may contain only ASCII letters, digits, '_' and '-'");
    }
    let mode = ck.opt_keyword(&raw.mode, &format!("{base}.mode")).unwrap_or(default_mode);
    let protocol: Option<Protocol> = ck.opt_keyword(&raw.protocol, &format!("{base}.protocol"));
    let raw_passthrough = raw.raw_passthrough.as_ref().is_some_and(|v| *v.get_ref());
    if let (Some(flag), Some(_)) = (raw.raw_passthrough.as_ref().filter(|v| *v.get_ref()), &raw.protocol) {
        ck.report_at(
            flag,
            &format!("{base}.raw_passthrough"),
            "raw_passthrough cannot be combined with a protocol override: bytes cannot be relayed untouched across protocols",
        );
    }
    let local_infile = raw.local_infile.as_ref().is_some_and(|v| *v.get_ref());
    if let (Some(flag), Some(_)) = (raw.local_infile.as_ref().filter(|v| *v.get_ref()), &raw.protocol) {
        ck.report_at(
            flag,
            &format!("{base}.local_infile"),
            "local_infile cannot be combined with a protocol override: LOAD DATA LOCAL INFILE exists only between MySQL clients and MySQL servers",
        );
    }
    let engine = engine(ck, &base, raw, protocol);
    let username = raw.username.as_ref().map(|u| ck.non_empty(u, &format!("{base}.username")));
    let database = match &raw.database {
        Some(db) => ck.non_empty(db, &format!("{base}.database")),
        None => name.to_string(),
    };
    let (no_retry, no_health) = (RawRetry::default(), RawHealth::default());
    Pool {
        name: name.to_string(),
        mode,
        role: ck.opt_keyword(&raw.role, &format!("{base}.role")).unwrap_or(default_role),
        protocol,
        engine,
        username,
        password: raw.password.as_ref().map(|p| p.get_ref().clone()),
        database,
        backends: backends(ck, name, &raw.backends),
        limits: limits(ck, &base, raw),
        timeouts: timeouts(ck, &base, raw),
        raw_passthrough,
        local_infile,
        retry: retry(ck, &format!("{base}.retry"), raw.retry.as_ref().unwrap_or(&no_retry)),
        health: health(ck, &format!("{base}.health"), raw.health.as_ref().unwrap_or(&no_health)),
        balance: ck.opt_keyword(&raw.balance, &format!("{base}.balance")).unwrap_or(Balance::LeastOutstanding),
        tls: tls(ck, &base, raw),
        shape_limits: super::shape::shape_limits(ck, &base, raw),
    }
}

/// `tls` and its files (#38). The files are read, and their PEM checked, by whoever loads the
/// configuration (reading files is I/O, which this layer does not do); here: what the keys
/// say together.
fn tls(ck: &mut Checker<'_>, base: &str, raw: &RawPool) -> BackendTls {
    let mode: TlsMode = ck.opt_keyword(&raw.tls, &format!("{base}.tls")).unwrap_or_default();
    let mut path = |key: &str, value: &Option<Sp<String>>| {
        value.as_ref().map(|v| PathBuf::from(ck.non_empty(v, &format!("{base}.{key}"))))
    };
    let out = BackendTls {
        mode,
        ca_file: path("tls_ca_file", &raw.tls_ca_file),
        cert_file: path("tls_cert_file", &raw.tls_cert_file),
        key_file: path("tls_key_file", &raw.tls_key_file),
        server_name: raw.tls_server_name.as_ref().map(|v| ck.non_empty(v, &format!("{base}.tls_server_name"))),
        client: None,
    };
    let unused = |key: &str| {
        match mode {
        TlsMode::Disable => Some(format!("{key} has no effect with tls = \"disable\"")),
        // tls_server_name still names the server for SNI, which routing front ends need.
        TlsMode::Prefer | TlsMode::Require if key == "tls_ca_file" => Some(format!(
            "{key} has no effect with tls = \"{mode}\", which does not verify the certificate; use \"verify-ca\" or \"verify-full\""
        )),
        _ => None,
    }
    };
    let keys = [
        ("tls_ca_file", &raw.tls_ca_file),
        ("tls_cert_file", &raw.tls_cert_file),
        ("tls_key_file", &raw.tls_key_file),
        ("tls_server_name", &raw.tls_server_name),
    ];
    for (key, value) in keys {
        if let (Some(v), Some(message)) = (value, unused(key)) {
            ck.report_at(v, &format!("{base}.{key}"), message);
        }
    }
    match (&raw.tls_cert_file, &raw.tls_key_file) {
        (Some(cert), None) => ck.report_at(cert, &format!("{base}.tls_cert_file"), "tls_cert_file needs tls_key_file"),
        (None, Some(key)) => ck.report_at(key, &format!("{base}.tls_key_file"), "tls_key_file needs tls_cert_file"),
        _ => {}
    }
    server_name_valid(ck, &raw.tls_server_name, &format!("{base}.tls_server_name"));
    out
}

/// Reports a `tls_server_name` (of a pool or a backend) that cannot name a server.
fn server_name_valid(ck: &mut Checker<'_>, name: &Option<Sp<String>>, path: &str) {
    if let Some(name) = name.as_ref().filter(|n| ServerName::try_from(n.get_ref().as_str()).is_err()) {
        ck.report_at(
            name,
            path,
            format!("tls_server_name \"{}\" is neither a DNS name nor an IP address", name.get_ref()),
        );
    }
}

/// `engine` (and `health.check_query`, which only a generic engine runs): a generic engine is
/// reached over the PostgreSQL protocol, so it needs `protocol = "postgres"` or no protocol.
fn engine(ck: &mut Checker<'_>, base: &str, raw: &RawPool, protocol: Option<Protocol>) -> Engine {
    let engine = ck.opt_keyword(&raw.engine, &format!("{base}.engine")).unwrap_or(Engine::Postgres);
    if let (Some(value), Engine::Generic, Some(Protocol::MySql)) = (&raw.engine, engine, protocol) {
        ck.report_at(
            value,
            &format!("{base}.engine"),
            "engine = \"generic\" means a PostgreSQL-wire engine; it cannot be combined with protocol = \"mysql\"",
        );
    }
    let query = raw.health.as_ref().and_then(|h| h.check_query.as_ref());
    if let (Some(q), Engine::Postgres) = (query, engine) {
        ck.report_at(
            q,
            &format!("{base}.health.check_query"),
            "check_query applies to engine = \"generic\" pools; PostgreSQL pools are probed with pg_is_in_recovery()",
        );
    }
    if let Some(q) = query.filter(|q| q.get_ref().trim().is_empty()) {
        ck.report_at(q, &format!("{base}.health.check_query"), "check_query must not be empty");
    }
    engine
}

fn backends(ck: &mut Checker<'_>, pool: &str, raw: &Option<Sp<Vec<Sp<RawBackend>>>>) -> Vec<Backend> {
    let path = format!("pools.{pool}.backends");
    let Some(list) = raw else {
        ck.report_table(&["pools", pool], &path, "a pool needs at least one backend");
        return Vec::new();
    };
    if list.get_ref().is_empty() {
        ck.report_at(list, &path, "a pool needs at least one backend");
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(list.get_ref().len());
    for (i, entry) in list.get_ref().iter().enumerate() {
        let backend = backend(ck, &format!("{path}[{i}]"), entry.get_ref());
        if !seen.insert((backend.host.clone(), backend.port)) {
            ck.report_at(
                entry,
                &format!("{path}[{i}]"),
                format!("backend {}:{} is listed twice in this pool", backend.host, backend.port),
            );
        }
        out.push(backend);
    }
    out
}

fn backend(ck: &mut Checker<'_>, base: &str, raw: &RawBackend) -> Backend {
    let host = ck.non_empty(&raw.host, &format!("{base}.host"));
    let port = ck
        .int_in(&Some(raw.port.clone()), &format!("{base}.port"), 1, i64::from(u16::MAX))
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or(0);
    Backend {
        host,
        port,
        weight: ck.nonzero(&raw.weight, &format!("{base}.weight"), nz(1)),
        max_replica_lag: ck.opt_duration(&raw.max_replica_lag, &format!("{base}.max_replica_lag"), Zero::Allowed),
        max_replica_lag_bytes: ck
            .int_in(&raw.max_replica_lag_bytes, &format!("{base}.max_replica_lag_bytes"), 0, i64::MAX)
            .and_then(|n| u64::try_from(n).ok()),
        tls_server_name: raw.tls_server_name.as_ref().map(|n| {
            let path = format!("{base}.tls_server_name");
            server_name_valid(ck, &Some(n.clone()), &path);
            n.get_ref().clone()
        }),
    }
}

fn limits(ck: &mut Checker<'_>, base: &str, raw: &RawPool) -> PoolLimits {
    let min_connections = ck.count(&raw.min_connections, &format!("{base}.min_connections"), 0, 1);
    let max_connections = ck.nonzero(&raw.max_connections, &format!("{base}.max_connections"), nz(10));
    // Compare only values that came out valid, so one bad number yields one issue.
    let min_ok = raw.min_connections.as_ref().is_none_or(|v| *v.get_ref() >= 0);
    let max_ok = raw.max_connections.as_ref().is_none_or(|v| *v.get_ref() >= 1);
    if min_ok && max_ok && max_connections.get() < min_connections {
        let message =
            format!("max_connections ({max_connections}) must be at least min_connections ({min_connections})");
        match (&raw.max_connections, &raw.min_connections) {
            (Some(max), _) => ck.report_at(max, &format!("{base}.max_connections"), message),
            (None, Some(min)) => ck.report_at(min, &format!("{base}.min_connections"), message),
            (None, None) => {}
        }
    }
    let max_user_connections = raw
        .max_user_connections
        .as_ref()
        .map(|_| ck.nonzero(&raw.max_user_connections, &format!("{base}.max_user_connections"), max_connections));
    PoolLimits {
        min_connections,
        max_connections,
        max_user_connections,
        max_prepared_statements: ck.nonzero(
            &raw.max_prepared_statements,
            &format!("{base}.max_prepared_statements"),
            nz(256),
        ),
    }
}

fn timeouts(ck: &mut Checker<'_>, base: &str, raw: &RawPool) -> PoolTimeouts {
    PoolTimeouts {
        acquire: ck.duration(
            &raw.acquire_timeout,
            &format!("{base}.acquire_timeout"),
            Duration::from_secs(30),
            Zero::Refused,
        ),
        idle: ck.duration(&raw.idle_timeout, &format!("{base}.idle_timeout"), Duration::from_secs(600), Zero::Refused),
        idle_check: ck.duration(
            &raw.idle_check_interval,
            &format!("{base}.idle_check_interval"),
            Duration::ZERO,
            Zero::Allowed,
        ),
        connect: ck.duration(
            &raw.connect_timeout,
            &format!("{base}.connect_timeout"),
            Duration::from_secs(10),
            Zero::Refused,
        ),
        query: ck.opt_duration(&raw.query_timeout, &format!("{base}.query_timeout"), Zero::Refused),
        idle_transaction: ck.opt_duration(
            &raw.idle_transaction_timeout,
            &format!("{base}.idle_transaction_timeout"),
            Zero::Refused,
        ),
        failover_wait: ck.duration(&raw.failover_wait, &format!("{base}.failover_wait"), Duration::ZERO, Zero::Allowed),
    }
}

/// Converts a retry table at `base` (a pool's section or a routing rule's `retry`).
pub(crate) fn retry(ck: &mut Checker<'_>, base: &str, raw: &RawRetry) -> RetryPolicy {
    let default_base = Duration::from_millis(10);
    let default_max = Duration::from_secs(1);
    let backoff_base = ck.duration(&raw.backoff_base, &format!("{base}.backoff_base"), default_base, Zero::Allowed);
    let backoff_max = ck.duration(&raw.backoff_max, &format!("{base}.backoff_max"), default_max, Zero::Allowed);
    let valid = |v: &Option<Sp<String>>| v.as_ref().is_none_or(|s| parse_duration(s.get_ref()).is_ok());
    if valid(&raw.backoff_base) && valid(&raw.backoff_max) && backoff_max < backoff_base {
        let message = "backoff_max must be at least backoff_base";
        match (&raw.backoff_max, &raw.backoff_base) {
            (Some(max), _) => ck.report_at(max, &format!("{base}.backoff_max"), message),
            (None, Some(min)) => ck.report_at(min, &format!("{base}.backoff_base"), message),
            (None, None) => {}
        }
    }
    RetryPolicy {
        maximum_attempts: ck.nonzero(&raw.maximum_attempts, &format!("{base}.maximum_attempts"), nz(1)),
        backoff_base,
        backoff_max,
        jitter: raw.jitter.unwrap_or(true),
        deadline: ck.duration(&raw.deadline, &format!("{base}.deadline"), Duration::from_secs(5), Zero::Refused),
        notify_client: raw.notify_client.unwrap_or(false),
    }
}

fn health(ck: &mut Checker<'_>, base: &str, raw: &RawHealth) -> HealthCheck {
    HealthCheck {
        interval: ck.duration(&raw.interval, &format!("{base}.interval"), Duration::from_secs(2), Zero::Refused),
        timeout: ck.duration(&raw.timeout, &format!("{base}.timeout"), Duration::from_secs(1), Zero::Refused),
        failure_threshold: ck.nonzero(&raw.failure_threshold, &format!("{base}.failure_threshold"), nz(3)),
        success_threshold: ck.nonzero(&raw.success_threshold, &format!("{base}.success_threshold"), nz(2)),
        check_query: raw.check_query.as_ref().map(|q| Arc::from(q.get_ref().as_str())),
    }
}
