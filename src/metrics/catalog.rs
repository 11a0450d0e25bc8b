//! The catalog of every exported metric: name, help, type and label names. The renderer takes
//! label names from here, so a series can only carry the labels its entry declares, and the
//! tests check every entry against the naming rules and the bounded label set.

/// The metric's Prometheus type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Monotonic; the name ends in `_total`.
    Counter,
    /// Goes up and down.
    Gauge,
    /// Fixed-bucket histogram.
    Histogram,
}

/// One exported metric.
#[derive(Debug)]
pub struct MetricDef {
    /// Full exported name (`sqp_` prefix; counters end in `_total`).
    pub name: &'static str,
    /// One-line help text.
    pub help: &'static str,
    /// Type.
    pub kind: Kind,
    /// Label names, in the order the renderer passes values.
    pub labels: &'static [&'static str],
}

/// Every label name a metric may use: each one's values come from a bounded set (config names,
/// core ids, or the enums in [`super::label`]).
pub const LABELS: &[&str] = &[
    "core",
    "listener",
    "protocol",
    "pool",
    "backend",
    "decision",
    "reason",
    "code",
    "state",
    "op",
    "outcome",
    "direction",
    "operation",
    // Users of pass-through pools with a connection open only: at most `max_connections` per
    // pool and backend, whatever names clients try (#23).
    "user",
    "kind",
];

macro_rules! metric {
    ($(#[$why:meta])* $id:ident, $name:literal, $kind:ident, [$($label:literal),*], $help:literal) => {
        #[doc = $help]
        $(#[$why])*
        pub const $id: MetricDef = MetricDef { name: $name, help: $help, kind: Kind::$kind, labels: &[$($label),*] };
    };
}

metric!(SESSIONS_ACTIVE, "sqp_sessions_active", Gauge, ["core"], "Client sessions open on each core.");
metric!(SESSIONS_ACCEPTED, "sqp_sessions_accepted_total", Counter, ["core"], "Client sessions accepted.");
metric!(SESSION_PANICS, "sqp_session_panics_total", Counter, ["core"], "Session tasks that panicked and were closed.");
metric!(
    CLIENT_CONNECTIONS,
    "sqp_client_connections",
    Gauge,
    ["core", "listener", "state"],
    "Client connections by listener and state (active: holding a backend connection)."
);
metric!(
    CLIENT_REFUSED,
    "sqp_client_connections_refused_total",
    Counter,
    ["core", "listener"],
    "Client connections refused because the listener's max_client_connections were in use."
);
metric!(
    AUTH_FAILURES,
    "sqp_auth_failures_total",
    Counter,
    ["core", "listener", "reason"],
    "Client logins refused, by listener and reason (never by user)."
);
metric!(BYTES, "sqp_bytes_total", Counter, ["core", "direction"], "Bytes relayed, by direction.");
metric!(
    ROUTING_DECISIONS,
    "sqp_routing_decisions_total",
    Counter,
    ["core", "decision", "pool"],
    "Routing decisions by what decided and the chosen pool (empty pool: rejected)."
);
metric!(ROUTING_CACHE, "sqp_routing_cache_operations_total", Counter, ["core", "op"], "Plan-cache operations.");
metric!(
    STATEMENT_OPERATIONS,
    "sqp_statement_operations_total",
    Counter,
    ["core", "operation"],
    "Routed statements by semantic operation."
);
metric!(
    SESSION_PINS,
    "sqp_session_pins_total",
    Counter,
    ["core", "reason"],
    "Sessions that became pinned to their backend connection, once each, by the first reason."
);
metric!(
    RELAY_ERRORS,
    "sqp_relay_errors_total",
    Counter,
    ["core", "code"],
    "Relays between a client and its backend connection that broke, by cause (relay.backend_closed, ...)."
);
metric!(STATEMENTS, "sqp_statements_total", Counter, ["core", "pool"], "Statements sent to each pool.");
metric!(
    ///
    /// Buckets are those of every histogram here (`BOUNDS_MICROS`): 100 µs, 500 µs and 1 ms
    /// resolve a pooled statement on a local network, 5 ms to 500 ms the ordinary OLTP range,
    /// 1 s to 30 s reports and stuck statements (`+Inf` beyond). Sharing the bounds with
    /// `sqp_pool_wait_duration_seconds` lets the two be compared bucket by bucket (how much of a
    /// statement's time was the wait for a connection). Only the pool is a label (and the core,
    /// as for every per-core series); never the SQL or its digest: per-shape times are in
    /// `GET /api/stats/digests`.
    STATEMENT_DURATION,
    "sqp_statement_duration_seconds",
    Histogram,
    ["core", "pool"],
    "Time from routing a statement to the end of its response (PostgreSQL: ReadyForQuery), by the pool it ran on."
);
metric!(
    ERRORS,
    "sqp_errors_total",
    Counter,
    ["core", "pool", "code"],
    "Statements that failed with an error their client got, by pool and code (backend.error: the server's error)."
);
metric!(
    RETRIES,
    "sqp_retries_total",
    Counter,
    ["core", "pool", "outcome"],
    "Opt-in statement retries of serialization failures and deadlocks, by outcome."
);
metric!(
    REPLICA_FALLBACKS,
    "sqp_replica_fallbacks_total",
    Counter,
    ["core", "pool", "outcome"],
    "Replica-eligible reads whose read pool had no healthy backend, by read pool and outcome (primary: sent to the write pool; error: refused)."
);
metric!(
    CAUSAL_READS,
    "sqp_causal_reads_total",
    Counter,
    ["core", "pool", "outcome"],
    "Causal reads (read_your_writes = causal) of sessions that wrote, by read pool and outcome (served_by_replica, waited, fell_back_to_primary, error)."
);
metric!(
    CAUSAL_WAIT,
    "sqp_causal_wait_seconds",
    Histogram,
    ["core", "pool"],
    "Time causal reads spent reading replica replay positions on demand, waiting for routing.causal_wait at most."
);
metric!(
    BACKEND_CHECKOUTS,
    "sqp_backend_checkouts_total",
    Counter,
    ["core", "pool", "backend"],
    "Connections lent on each backend: its share of the pool's statements (transaction pooling) or clients (session pooling)."
);
metric!(
    REPREPARES,
    "sqp_prepared_reprepares_total",
    Counter,
    ["core", "pool"],
    "Prepared statements prepared again on another backend connection."
);
metric!(
    IDLE_TRANSACTION_TIMEOUTS,
    "sqp_idle_transaction_timeouts_total",
    Counter,
    ["core", "pool"],
    "Clients disconnected because they stayed silent past idle_transaction_timeout while holding a backend connection."
);
metric!(
    PASSTHROUGH_BYTES,
    "sqp_passthrough_bytes_total",
    Counter,
    ["core", "pool"],
    "Result-row bytes a raw_passthrough pool relayed without decoding them, by pool."
);
metric!(
    POOL_USER_CONNECTIONS,
    "sqp_pool_user_connections",
    Gauge,
    ["pool", "user"],
    "Open backend connections per user of a pool without username (clients log in as themselves); process-wide."
);
metric!(
    POOL_CONNECTIONS,
    "sqp_pool_connections",
    Gauge,
    ["core", "pool", "backend", "state"],
    "Backend connections held by each core, idle or lent to a session (active)."
);
metric!(POOL_ACQUIRE, "sqp_pool_acquire_total", Counter, ["core", "pool"], "Connection checkouts requested.");
metric!(POOL_QUEUE_DEPTH, "sqp_pool_queue_depth", Gauge, ["core", "pool"], "Sessions waiting for a connection.");
metric!(
    POOL_WAIT,
    "sqp_pool_wait_duration_seconds",
    Histogram,
    ["core", "pool"],
    "Time from checkout request to a connection or failure."
);
metric!(
    POOL_TIMEOUTS,
    "sqp_pool_timeouts_total",
    Counter,
    ["core", "pool"],
    "Checkouts that gave up at acquire_timeout."
);
metric!(
    POOL_RECHECK_FINDS,
    "sqp_pool_recheck_finds_total",
    Counter,
    ["core", "pool"],
    "Waiting checkouts that found a connection or a budget unit only when their periodic recheck looked, with no wake for it: on a pool with a username, each is a wake lost between cores; on a pass-through pool a user at its own cap also counts here."
);
metric!(
    POOL_CONNECTIONS_MOVED,
    "sqp_pool_connections_moved_total",
    Counter,
    ["core", "pool"],
    "Server connections another core gave up for this core's waiting checkouts and this core took open, with no new login."
);
metric!(
    LIMIT_SHAPES,
    "sqp_limit_shapes_limited",
    Gauge,
    ["core", "pool"],
    "Statement shapes whose concurrency limit (max_concurrent or learned, #41) is below the pool's capacity."
);
metric!(
    LIMIT_IN_USE,
    "sqp_limit_permits_in_use",
    Gauge,
    ["core", "pool"],
    "Checkouts of limited shapes holding a permit (waiting for or holding a connection)."
);
metric!(
    LIMIT_QUEUED,
    "sqp_limit_queue_depth",
    Gauge,
    ["core", "pool"],
    "Checkouts waiting for their shape's limit or their user's fair share."
);
metric!(
    LIMIT_REJECTIONS,
    "sqp_limit_rejections_total",
    Counter,
    ["core", "pool"],
    "Statements refused (53000 / MySQL 1040) after waiting limit_wait for their shape's limit or their user's fair share."
);
metric!(
    POOL_UTILIZATION,
    "sqp_pool_utilization",
    Gauge,
    ["core", "pool"],
    "Share of the pool's process-wide max_connections lent to sessions by each core; sums to the pool's utilization."
);
metric!(
    CONNECT_FAILURES,
    "sqp_backend_connect_failures_total",
    Counter,
    ["core", "pool", "backend"],
    "Failed backend connection attempts (connect or login)."
);
metric!(
    BACKEND_HEALTHY,
    "sqp_backend_healthy",
    Gauge,
    ["pool", "backend"],
    "Whether the backend gets new connections (1) or is skipped as unhealthy (0); process-wide."
);
metric!(
    BACKEND_LAG_SECONDS,
    "sqp_backend_replica_lag_seconds",
    Gauge,
    ["pool", "backend"],
    "Replica replay lag measured by the last health check (absent when unknown or not a replica)."
);
metric!(
    BACKEND_LAG_BYTES,
    "sqp_backend_replica_lag_bytes",
    Gauge,
    ["pool", "backend"],
    "PostgreSQL standby WAL bytes not yet replayed, by the last health check (absent when unknown)."
);
metric!(
    BACKEND_ROLE_MISMATCH,
    "sqp_backend_role_mismatch",
    Gauge,
    ["pool", "backend"],
    "1 when the server contradicts the pool's role (pg_is_in_recovery() / @@read_only), else 0; absent until probed."
);
metric!(
    HEALTH_CHECK_FAILURES,
    "sqp_backend_health_check_failures_total",
    Counter,
    ["pool", "backend", "reason"],
    "Failed backend health checks by reason (connect, query, lag); process-wide."
);
metric!(
    CONFIG_RELOADS,
    "sqp_config_reloads_total",
    Counter,
    ["outcome"],
    "Configuration reloads by outcome (applied or rejected)."
);
metric!(
    CONFIG_VERSION,
    "sqp_config_version",
    Gauge,
    [],
    "Version of the configuration being served (1 at start, +1 per applied reload)."
);
metric!(
    LOG_LINES_DROPPED,
    "sqp_log_lines_dropped_total",
    Counter,
    [],
    "Log lines that could not be written (closed pipe, full disk) and were dropped."
);

metric!(
    CLIENT_BUFFER_BYTES,
    "sqp_client_buffer_bytes",
    Gauge,
    ["kind"],
    "Bytes the router holds for client sessions (statement text, long data, COPY data and rows in flight, large client messages), process-wide, against limits.client_buffer_budget."
);

/// Every metric, in exposition order.
pub const ALL: &[&MetricDef] = &[
    &SESSIONS_ACTIVE,
    &SESSIONS_ACCEPTED,
    &SESSION_PANICS,
    &CLIENT_CONNECTIONS,
    &CLIENT_REFUSED,
    &AUTH_FAILURES,
    &BYTES,
    &ROUTING_DECISIONS,
    &ROUTING_CACHE,
    &STATEMENT_OPERATIONS,
    &SESSION_PINS,
    &RELAY_ERRORS,
    &STATEMENTS,
    &STATEMENT_DURATION,
    &ERRORS,
    &RETRIES,
    &REPLICA_FALLBACKS,
    &CAUSAL_READS,
    &CAUSAL_WAIT,
    &REPREPARES,
    &IDLE_TRANSACTION_TIMEOUTS,
    &PASSTHROUGH_BYTES,
    &POOL_CONNECTIONS,
    &POOL_USER_CONNECTIONS,
    &POOL_ACQUIRE,
    &POOL_QUEUE_DEPTH,
    &POOL_WAIT,
    &POOL_TIMEOUTS,
    &POOL_RECHECK_FINDS,
    &POOL_CONNECTIONS_MOVED,
    &POOL_UTILIZATION,
    &LIMIT_SHAPES,
    &LIMIT_IN_USE,
    &LIMIT_QUEUED,
    &LIMIT_REJECTIONS,
    &CONNECT_FAILURES,
    &BACKEND_CHECKOUTS,
    &BACKEND_HEALTHY,
    &BACKEND_LAG_SECONDS,
    &BACKEND_LAG_BYTES,
    &BACKEND_ROLE_MISMATCH,
    &HEALTH_CHECK_FAILURES,
    &CONFIG_RELOADS,
    &LOG_LINES_DROPPED,
    &CONFIG_VERSION,
    &CLIENT_BUFFER_BYTES,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_follows_the_naming_rules() {
        let mut names = std::collections::HashSet::new();
        for m in ALL {
            assert!(names.insert(m.name), "{} listed twice", m.name);
            assert!(m.name.starts_with("sqp_"), "{}", m.name);
            assert!(m.name.bytes().all(|b| b.is_ascii_lowercase() || b == b'_'), "{}", m.name);
            assert_eq!(m.kind == Kind::Counter, m.name.ends_with("_total"), "{}: only counters end in _total", m.name);
            assert!(!m.help.is_empty() && !m.help.contains('\n'), "{}", m.name);
            for l in m.labels {
                assert!(LABELS.contains(l), "{}: label {l} is not in the bounded set", m.name);
            }
        }
    }
}
