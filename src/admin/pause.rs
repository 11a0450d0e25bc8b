//! `POST /api/pause` and `POST /api/resume`: PAUSE and RESUME of one pool (`?pool=NAME`) or of
//! every pool, for switchovers (see `control::pause`), and `POST /api/switchover`, which does
//! both around a promotion (#40, see `control::switchover`).

use std::time::Duration;

use serde::Serialize;

use super::http::{Request, Response};
use super::route::{control_error, Api};
use crate::config::parse_duration;
use crate::control::{SwitchoverError, DEFAULT_SWITCHOVER_TIMEOUT};
use crate::error::ErrorCode;

/// How long PAUSE waits for transactions in flight unless `?timeout=` says otherwise.
const DEFAULT_PAUSE_TIMEOUT: Duration = Duration::from_secs(30);

/// `POST /api/pause` answer.
#[derive(Debug, Serialize)]
struct Paused {
    /// The pool, or null for every pool.
    pool: Option<String>,
    /// `paused` (nothing in flight any more) or `waiting` (the timeout ended the wait first;
    /// the pool stays paused and the transactions still running keep their connections).
    status: &'static str,
    /// Server connections still lent to clients when the wait ended.
    in_use: u64,
}

/// `POST /api/resume` and `POST /api/reconnect` answer.
#[derive(Debug, Serialize)]
struct Resumed {
    /// The pool, or null for every pool.
    pool: Option<String>,
    /// Cores that resumed it.
    cores: usize,
}

fn pool_param(req: &Request) -> Option<String> {
    req.query_param("pool").filter(|p| !p.is_empty())
}

/// `POST /api/pause?pool=NAME&timeout=30s`: holds new statements of the pool, waits for the
/// transactions in flight, closes its idle server connections.
pub(super) fn pause(api: &Api, req: &Request) -> Response {
    let timeout = match timeout_param(req, DEFAULT_PAUSE_TIMEOUT) {
        Ok(t) => t,
        Err(e) => return e,
    };
    let pool = pool_param(req);
    match api.control().pause(pool.clone(), timeout) {
        Ok(o) => {
            let status = if o.in_use == 0 { "paused" } else { "waiting" };
            Response::json(if o.in_use == 0 { 200 } else { 202 }, &Paused { pool, status, in_use: o.in_use })
        }
        Err(e) => control_error(&e),
    }
}

/// `POST /api/reconnect?pool=NAME`: closes the pool's server connections once each is idle.
pub(super) fn reconnect(api: &Api, req: &Request) -> Response {
    let pool = pool_param(req);
    match api.control().reconnect(pool.clone()) {
        Ok(cores) => Response::json(200, &Resumed { pool, cores }),
        Err(e) => control_error(&e),
    }
}

/// `POST /api/kill?pool=NAME`: ends every session on the pool now and pauses it until RESUME.
pub(super) fn kill(api: &Api, req: &Request) -> Response {
    let Some(pool) = pool_param(req) else { return Response::error(400, "KILL needs ?pool=NAME") };
    match api.control().kill(pool.clone()) {
        Ok(cores) => Response::json(200, &Resumed { pool: Some(pool), cores }),
        Err(e) => control_error(&e),
    }
}

/// `POST /api/resume?pool=NAME`: lets the held statements run.
pub(super) fn resume(api: &Api, req: &Request) -> Response {
    let pool = pool_param(req);
    match api.control().resume(pool.clone()) {
        Ok(cores) => Response::json(200, &Resumed { pool, cores }),
        Err(e) => control_error(&e),
    }
}

/// `?timeout=` as a duration, `default` when absent.
fn timeout_param(req: &Request, default: Duration) -> Result<Duration, Response> {
    match req.query_param("timeout").filter(|t| !t.is_empty()) {
        None => Ok(default),
        Some(t) => parse_duration(&t).map_err(|e| Response::error(400, &format!("timeout: {e}"))),
    }
}

/// `POST /api/switchover` answer.
#[derive(Debug, Serialize)]
struct SwitchedOver {
    /// The pool.
    pool: String,
    /// The backend that is the pool's primary now.
    backend: String,
    /// The old primary's last position, which the new one had replayed.
    position: String,
    /// How long the pool was paused: the longest a held transaction waited.
    paused_ms: u128,
}

/// `POST /api/switchover?pool=NAME&backend=HOST:PORT&timeout=60s` (#40): pauses the pool, waits
/// until the backend has replayed the primary's last position and is the pool's only writable
/// backend (the operator promotes it meanwhile), then resumes. 409 when it could not finish in
/// time: the pool stays paused.
pub(super) fn switchover(api: &Api, req: &Request) -> Response {
    let (Some(pool), Some(backend)) = (pool_param(req), req.query_param("backend").filter(|b| !b.is_empty())) else {
        return Response::error(400, "SWITCHOVER needs ?pool=NAME&backend=HOST:PORT");
    };
    let timeout = match timeout_param(req, DEFAULT_SWITCHOVER_TIMEOUT) {
        Ok(t) => t,
        Err(e) => return e,
    };
    match crate::control::switchover(api.control(), &pool, &backend, timeout) {
        Ok(s) => {
            Response::json(200, &SwitchedOver { pool, backend, position: s.position, paused_ms: s.paused.as_millis() })
        }
        Err(SwitchoverError::Control(e)) => control_error(&e),
        Err(e) => Response::json(409, &super::dto::CodedError { error: e.to_string(), code: e.code() }),
    }
}
