//! Raw → typed conversion of the process-level sections: `[general]`, `[[listeners]]` and
//! `[metrics]`. Checks here concern one value or one entry; checks across sections are in
//! `validate`.

use std::collections::HashSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::num::NonZeroU32;
use std::path::PathBuf;
use std::time::Duration;

use super::check::{is_identifier, Checker, Zero};
use super::model::{
    Auth, AuthQuery, General, Listener, ListenerTls, Metrics, QuerySpec, DEFAULT_AUTH_CACHE_TTL,
    DEFAULT_MYSQL_AUTH_QUERY, DEFAULT_PG_AUTH_QUERY,
};
use super::raw::{RawAuth, RawGeneral, RawListener, RawMetrics, Sp};
use super::value::{parse_size, ClientAuth, ClientTls, LogFormat, PoolMode, Protocol};

/// Highest CPU id a `cpu_set_t` (CPU_SETSIZE = 1024) can hold, hence the highest one can pin to.
const MAX_CPU_ID: i64 = 1023;
/// Smallest and largest accepted `max_message_size`.
const MIN_MESSAGE_SIZE: u64 = 1 << 10;
const MAX_MESSAGE_SIZE: u64 = 1 << 30;
/// Default `max_message_size`: 64 MiB.
const DEFAULT_MESSAGE_SIZE: u64 = 64 << 20;
/// Default `metrics.bind`.
const DEFAULT_METRICS_BIND: SocketAddr = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 9090);

/// Converts `[auth]` (the file's entries are read later, by whoever loads the configuration).
pub(crate) fn auth(ck: &mut Checker<'_>, raw: &RawAuth) -> Auth {
    Auth {
        file: raw.file.as_ref().map(|f| PathBuf::from(ck.non_empty(f, "auth.file"))),
        users: std::sync::Arc::default(),
        max_failed_logins: ck.count(&raw.max_failed_logins, "auth.max_failed_logins", 0, 0),
        query: auth_query(ck, raw),
        allow_empty_password: raw.allow_empty_password.as_ref().is_some_and(|v| *v.get_ref()),
        mock_salt_key: raw.mock_salt_key.as_ref().map(|k| ck.non_empty(k, "auth.mock_salt_key")),
        mock_seed: [0; 32],
    }
}

/// The auth query keys: each query needs its user and its placeholder; `cache_ttl` a query.
fn auth_query(ck: &mut Checker<'_>, raw: &RawAuth) -> Option<AuthQuery> {
    let pg = query_spec(ck, (&raw.pg_query_user, &raw.pg_query), "pg", "$1", DEFAULT_PG_AUTH_QUERY);
    let mysql = query_spec(ck, (&raw.mysql_query_user, &raw.mysql_query), "mysql", "?", DEFAULT_MYSQL_AUTH_QUERY);
    let cache_ttl = ck.duration(&raw.cache_ttl, "auth.cache_ttl", DEFAULT_AUTH_CACHE_TTL, Zero::Allowed);
    if pg.is_none() && mysql.is_none() {
        if let Some(v) = &raw.cache_ttl {
            ck.report_at(v, "auth.cache_ttl", "cache_ttl needs pg_query_user or mysql_query_user");
        }
        return None;
    }
    Some(AuthQuery { pg, mysql, cache_ttl })
}

/// `<proto>_query_user` and `<proto>_query` (`default` unless set, which must hold `placeholder`).
fn query_spec(
    ck: &mut Checker<'_>,
    (user, sql): (&Option<Sp<String>>, &Option<Sp<String>>),
    proto: &str,
    placeholder: &str,
    default: &str,
) -> Option<QuerySpec> {
    let path = format!("auth.{proto}_query");
    if let Some(v) = sql {
        if !v.get_ref().contains(placeholder) {
            ck.report_at(v, &path, format!("{proto}_query must contain {placeholder}, which stands for the user name"));
        }
        if user.is_none() {
            ck.report_at(v, &path, format!("{proto}_query needs {proto}_query_user"));
        }
    }
    let user = ck.non_empty(user.as_ref()?, &format!("auth.{proto}_query_user"));
    Some(QuerySpec { user, sql: sql.as_ref().map_or(default, |v| v.get_ref()).to_owned() })
}

/// Converts `[general]`.
pub(crate) fn general(ck: &mut Checker<'_>, raw: &RawGeneral) -> General {
    General {
        pool_mode: ck.keyword(&raw.pool_mode, "general.pool_mode", PoolMode::Session),
        cores: raw.cores.as_ref().and_then(|list| cores(ck, list)),
        shutdown_drain: ck.duration(
            &raw.shutdown_drain,
            "general.shutdown_drain",
            Duration::from_secs(30),
            Zero::Allowed,
        ),
        log_level: raw
            .log_level
            .as_ref()
            .map_or_else(|| "info".to_string(), |level| ck.non_empty(level, "general.log_level")),
        log_file: raw.log_file.as_ref().map(|path| PathBuf::from(ck.non_empty(path, "general.log_file"))),
        log_format: ck.keyword(&raw.log_format, "general.log_format", LogFormat::Text),
        handover_socket: raw
            .handover_socket
            .as_ref()
            .map(|path| PathBuf::from(ck.non_empty(path, "general.handover_socket"))),
        handover_wait: ck.duration(&raw.handover_wait, "general.handover_wait", Duration::from_secs(60), Zero::Allowed),
    }
}

fn cores(ck: &mut Checker<'_>, list: &Sp<Vec<Sp<i64>>>) -> Option<Vec<usize>> {
    if list.get_ref().is_empty() {
        ck.report_at(list, "general.cores", "cores must list at least one CPU id; omit the key to use every CPU");
        return None;
    }
    let mut seen = HashSet::new();
    let mut ids = Vec::with_capacity(list.get_ref().len());
    for (i, id) in list.get_ref().iter().enumerate() {
        let path = format!("general.cores[{i}]");
        let Some(cpu) = ck.int_in(&Some(id.clone()), &path, 0, MAX_CPU_ID).and_then(|n| usize::try_from(n).ok()) else {
            continue;
        };
        if !seen.insert(cpu) {
            ck.report_at(id, &path, format!("CPU {cpu} is listed twice"));
        }
        ids.push(cpu);
    }
    Some(ids)
}

/// Converts every `[[listeners]]` entry, in file order.
pub(crate) fn listeners(ck: &mut Checker<'_>, raw: &[Sp<RawListener>]) -> Vec<Listener> {
    raw.iter().enumerate().map(|(i, l)| listener(ck, i, l.get_ref())).collect()
}

fn listener(ck: &mut Checker<'_>, index: usize, raw: &RawListener) -> Listener {
    let base = format!("listeners[{index}]");
    let protocol = ck.parse_keyword(&raw.protocol, &format!("{base}.protocol")).unwrap_or(Protocol::Postgres);
    let name = match &raw.name {
        Some(name) => {
            if !is_identifier(name.get_ref()) {
                ck.report_at(
                    name,
                    &format!("{base}.name"),
                    "listener names may contain only ASCII letters, digits, '_' and '-'",
                );
            }
            name.get_ref().clone()
        }
        None => format!("{protocol}-{index}"),
    };
    let bind = socket_addr(ck, &raw.bind, &format!("{base}.bind"))
        .unwrap_or(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0));
    let auth_path = format!("{base}.auth_method");
    let auth_method = match (&raw.auth_method, protocol) {
        (Some(method), Protocol::MySql) => {
            ck.report_at(method, &auth_path, "auth_method applies only to postgres listeners");
            ClientAuth::ScramSha256
        }
        (method, _) => ck.keyword(method, &auth_path, ClientAuth::ScramSha256),
    };
    let max_client_connections = ck
        .int_in(&raw.max_client_connections, &format!("{base}.max_client_connections"), 1, i64::from(u32::MAX))
        .and_then(|n| u32::try_from(n).ok())
        .and_then(NonZeroU32::new);
    Listener {
        name,
        protocol,
        bind,
        allow_anonymous: raw.allow_anonymous.unwrap_or(false),
        auth_method,
        max_client_connections,
        max_message_size: message_size(ck, &raw.max_message_size, &format!("{base}.max_message_size")),
        tls: listener_tls(ck, &base, raw),
    }
}

/// A listener's `tls` and its files (#38). The files are read, and their PEM checked, by whoever
/// loads the configuration; here: what the keys say together.
fn listener_tls(ck: &mut Checker<'_>, base: &str, raw: &RawListener) -> ListenerTls {
    let mode: ClientTls = ck.opt_keyword(&raw.tls, &format!("{base}.tls")).unwrap_or_default();
    let mut path = |key: &str, value: &Option<Sp<String>>| {
        value.as_ref().map(|v| PathBuf::from(ck.non_empty(v, &format!("{base}.{key}"))))
    };
    let out = ListenerTls {
        mode,
        cert_file: path("tls_cert_file", &raw.tls_cert_file),
        key_file: path("tls_key_file", &raw.tls_key_file),
        client_ca_file: path("tls_client_ca_file", &raw.tls_client_ca_file),
        client_cert_user: raw.tls_client_cert_user.as_ref().is_some_and(|v| *v.get_ref()),
        resumption: raw.tls_resumption.as_ref().is_some_and(|v| *v.get_ref()),
        server: None,
    };
    if mode == ClientTls::Disable {
        let files = [
            ("tls_cert_file", &raw.tls_cert_file),
            ("tls_key_file", &raw.tls_key_file),
            ("tls_client_ca_file", &raw.tls_client_ca_file),
        ];
        for (key, value) in files {
            if let Some(v) = value {
                ck.report_at(v, &format!("{base}.{key}"), format!("{key} has no effect with tls = \"disable\""));
            }
        }
        for (key, value) in
            [("tls_client_cert_user", &raw.tls_client_cert_user), ("tls_resumption", &raw.tls_resumption)]
        {
            if let Some(v) = value.as_ref().filter(|v| *v.get_ref()) {
                ck.report_at(v, &format!("{base}.{key}"), format!("{key} has no effect with tls = \"disable\""));
            }
        }
        return out;
    }
    if let Some(tls) = &raw.tls {
        for (key, value) in [("tls_cert_file", &raw.tls_cert_file), ("tls_key_file", &raw.tls_key_file)] {
            if value.is_none() {
                let message =
                    format!("tls = \"{mode}\" needs {key}: the certificate (chain) and key the router presents");
                ck.report_at(tls, &format!("{base}.{key}"), message);
            }
        }
    }
    if let (Some(v), None) = (raw.tls_client_cert_user.as_ref().filter(|v| *v.get_ref()), &raw.tls_client_ca_file) {
        let message = "tls_client_cert_user needs tls_client_ca_file: only a verified client certificate names a user";
        ck.report_at(v, &format!("{base}.tls_client_cert_user"), message);
    }
    out
}

fn message_size(ck: &mut Checker<'_>, raw: &Option<Sp<String>>, path: &str) -> usize {
    let bytes = match raw {
        None => DEFAULT_MESSAGE_SIZE,
        Some(value) => match parse_size(value.get_ref()) {
            Ok(n) if (MIN_MESSAGE_SIZE..=MAX_MESSAGE_SIZE).contains(&n) => n,
            Ok(_) => {
                ck.report_at(value, path, "max_message_size must be between 1KiB and 1GiB");
                DEFAULT_MESSAGE_SIZE
            }
            Err(message) => {
                ck.report_at(value, path, message);
                DEFAULT_MESSAGE_SIZE
            }
        },
    };
    // At most 1 GiB, which fits usize on every supported target.
    usize::try_from(bytes).unwrap_or(usize::MAX)
}

/// Parses an `IP:port` string; host names are refused because binding must not depend on DNS.
pub(crate) fn socket_addr(ck: &mut Checker<'_>, raw: &Sp<String>, path: &str) -> Option<SocketAddr> {
    match raw.get_ref().trim().parse() {
        Ok(addr) => Some(addr),
        Err(_) => {
            ck.report_at(
                raw,
                path,
                format!("invalid address \"{}\": expected IP:port such as 127.0.0.1:6432 or [::1]:6432", raw.get_ref()),
            );
            None
        }
    }
}

/// Whether an address only accepts connections from this host.
pub(crate) fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

/// Converts `[metrics]`, including its local rules: the admin port must exist and a
/// non-loopback admin API needs a token.
pub(crate) fn metrics(ck: &mut Checker<'_>, raw: &RawMetrics) -> Metrics {
    let enabled = raw.enabled.unwrap_or(false);
    let bind = match &raw.bind {
        None => DEFAULT_METRICS_BIND,
        Some(value) => match socket_addr(ck, value, "metrics.bind") {
            Some(addr) if addr.port() == u16::MAX => {
                ck.report_at(
                    value,
                    "metrics.bind",
                    "port 65535 leaves no port for the admin API, which listens on port + 1",
                );
                addr
            }
            Some(addr) => {
                if enabled && !is_loopback(&addr) && raw.admin_token.is_none() {
                    ck.report_at(
                        value,
                        "metrics.bind",
                        "a non-loopback metrics bind exposes the admin API: set metrics.admin_token",
                    );
                }
                addr
            }
            None => DEFAULT_METRICS_BIND,
        },
    };
    let admin_token = raw.admin_token.as_ref().map(|token| ck.non_empty(token, "metrics.admin_token"));
    Metrics { enabled, bind, admin_token }
}
