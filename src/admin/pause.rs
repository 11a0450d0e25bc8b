//! `POST /api/pause` and `POST /api/resume`: PAUSE and RESUME of one pool (`?pool=NAME`) or of
//! every pool, for switchovers (see `control::pause`).

use std::time::Duration;

use serde::Serialize;

use super::http::{Request, Response};
use super::route::{control_error, Api};
use crate::config::parse_duration;

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
    let timeout = match req.query_param("timeout").filter(|t| !t.is_empty()) {
        None => DEFAULT_PAUSE_TIMEOUT,
        Some(t) => match parse_duration(&t) {
            Ok(d) => d,
            Err(e) => return Response::error(400, &format!("timeout: {e}")),
        },
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
