//! JSON shapes of the admin API's responses.

use serde::Serialize;

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
}
