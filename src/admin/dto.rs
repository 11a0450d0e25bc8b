//! JSON shapes of the admin API's responses.

use serde::{Deserialize, Serialize};

use crate::control::view::PatternRuleView;

/// `GET /health`.
#[derive(Debug, Serialize)]
pub struct Health {
    /// `serving` or `draining`.
    pub status: &'static str,
}

/// `GET /api/config`.
#[derive(Debug, Serialize)]
pub struct ConfigView {
    /// Version of the configuration being served.
    pub version: u64,
    /// The configuration as TOML, secrets redacted.
    pub toml: String,
}

/// `POST /api/reload` when it succeeded.
#[derive(Debug, Serialize)]
pub struct Reloaded {
    /// The version every core acknowledged.
    pub version: u64,
}

/// An error with the router's stable error code.
#[derive(Debug, Serialize)]
pub struct CodedError {
    /// What went wrong, for a person.
    pub error: String,
    /// Stable code, e.g. `control.invalid_config`.
    pub code: &'static str,
}

/// `GET /api/pools`: one entry per configured pool.
#[derive(Debug, Serialize)]
pub struct PoolsView {
    /// Cores whose figures are included.
    pub cores_reporting: usize,
    /// Per pool.
    pub pools: Vec<PoolView>,
}

/// One pool, summed over cores.
#[derive(Debug, Serialize)]
pub struct PoolView {
    /// Pool name.
    pub name: String,
    /// `session`, `transaction` or `statement`.
    pub mode: &'static str,
    /// `primary` or `replica` (#19).
    pub role: &'static str,
    /// Cap per backend, whole process.
    pub max_connections: u32,
    /// Sessions waiting for a connection now.
    pub waiting_clients: u64,
    /// Checkouts requested since start.
    pub acquires_total: u64,
    /// Checkouts that timed out since start.
    pub timeouts_total: u64,
    /// Per backend.
    pub backends: Vec<BackendView>,
}

/// One backend of a pool, summed over cores.
#[derive(Debug, Serialize)]
pub struct BackendView {
    /// `host:port`.
    pub address: String,
    /// Open connections not lent out.
    pub idle: u64,
    /// Connections lent to sessions.
    pub active: u64,
    /// Failed connection attempts since start.
    pub connect_failures_total: u64,
    /// Whether new connections go to this backend (health checks and failed connects).
    pub healthy: bool,
    /// Why it is unhealthy: `none`, `connect`, `query`, `lag` or `unknown` (not checked yet).
    pub health_cause: &'static str,
    /// Replica lag measured by the last health check, in seconds (`null`: unknown or not a replica).
    pub replica_lag_seconds: Option<f64>,
    /// PostgreSQL standby WAL bytes not yet replayed (`null`: unknown or not measured).
    pub replica_lag_bytes: Option<u64>,
    /// Failed health checks since start.
    pub health_check_failures_total: u64,
    /// The server contradicts the pool's role (`null`: not verified yet).
    pub role_mismatch: Option<bool>,
    /// #40: where the server's own writes reached when last read while it was writable
    /// (`pg:0/3000148`, `gtid:0-1-42`; `null`: never read).
    pub written_position: Option<String>,
    /// #40: what the server has replayed of another's writes, also once promoted (`null`: unknown).
    pub replayed_position: Option<String>,
}

/// `POST /api/pattern-rules` body: a pattern rule like `[[routing.pattern_rules]]`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewPatternRule {
    /// Unique among all routing rules.
    pub name: String,
    /// `template`, `regex` or `hash`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The template, regex or decimal fingerprint.
    pub pattern: String,
    /// Target pool (exactly one of `pool` and `reject`).
    pub pool: Option<String>,
    /// Reject message (exactly one of `pool` and `reject`).
    pub reject: Option<String>,
    /// Lower numbers are tried first; default 0.
    #[serde(default)]
    pub priority: i32,
    /// Let the rule send statements that are not replica-safe to a replica-role pool
    /// (dangerous; default false).
    #[serde(default)]
    pub allow_writes: bool,
}

/// `POST /api/translations` body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NewTranslation {
    /// A concrete example of the statements to rewrite.
    pub original_sql: String,
    /// What runs instead, reusing the example's literal values.
    pub translated_sql: String,
    /// The pool the rewritten statement runs on.
    pub target_pool: String,
}

/// `POST /api/pattern-rules` when every core has the rule.
#[derive(Debug, Serialize)]
pub struct RuleAdded {
    /// The rules version now served by every core.
    pub version: u64,
    /// The rule as stored.
    pub rule: PatternRuleView,
}

/// A `DELETE` of runtime rules or translations that every core acknowledged.
#[derive(Debug, Serialize)]
pub struct RulesRemoved {
    /// The rules version now served by every core.
    pub version: u64,
    /// Entries removed.
    pub removed: usize,
}

/// `DELETE /api/stats/digests`.
#[derive(Debug, Serialize)]
pub struct DigestsReset {
    /// Cores that cleared their statistics.
    pub cores_reset: usize,
}

/// `GET /api/routing/test`, for a read the decision sends to a replica-role pool: the causal view
/// (#22) — the session's position assumed and which of the pool's replicas may serve it now.
#[derive(Debug, Serialize)]
pub struct CausalView {
    /// `routing.read_your_writes` in force (`causal`, `session`, `none` or a window).
    pub read_your_writes: String,
    /// The session's high-water commit position assumed (the `causal_token` parameter, as
    /// `SHOW querypilot.causal_token` returns it); `null`: the session wrote nothing, or the
    /// mode is not `causal` (which keeps no position).
    pub position: Option<String>,
    /// How long a read waits for a replica the cache shows behind (`routing.causal_wait`).
    pub causal_wait_ms: u64,
    /// Where the read goes when no replica qualifies within that wait: `primary` or `error`.
    pub fallback: &'static str,
    /// The pool's replicas.
    pub replicas: Vec<CausalReplica>,
}

/// One replica of the causal view.
#[derive(Debug, Serialize)]
pub struct CausalReplica {
    /// `host:port`.
    pub address: String,
    /// The position the health probe last saw it apply, in token form (`null`: unknown).
    pub applied: Option<String>,
    /// Whether it may serve the read now, from the cached position.
    pub qualifies: bool,
    /// Why: `no_write` (the session needs no position), `caught_up`, `behind` (a read would
    /// check it again on demand, waiting up to `causal_wait_ms`), `unknown_position` (likewise)
    /// or `unhealthy`.
    pub why: &'static str,
}
