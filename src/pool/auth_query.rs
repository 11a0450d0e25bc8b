//! The auth query (#23): a pass-through pool fetches a user's stored secret from its backend,
//! on a connection logged in as the dedicated query user. That connection is an ordinary
//! pooled one of that user (it counts against `max_connections`, idles and is reused like any
//! other), and the query runs on the core's executor without blocking it, at login only —
//! never on the per-statement path.
//!
//! On PostgreSQL the query runs with `search_path = pg_catalog, pg_temp` (#33): the query
//! user's connection may carry another session's settings, and a `search_path` naming a
//! schema someone else can write would let them put their own `pg_authid` or `now()` in front
//! of the catalog's (the class of PgBouncer's CVE-2025-12819). `SET LOCAL` lasts for the one
//! implicit transaction of the query string, so nothing stays on the connection.

use std::rc::Rc;
use std::time::Instant;

use super::health::query::{my_query, pg_query, ProbeError};
use super::{CorePool, PassThrough, PoolError};
use crate::config::Protocol;

/// Prefixed to the PostgreSQL auth query: one simple Query message is one implicit
/// transaction, which `SET LOCAL` lasts for.
const SAFE_SEARCH_PATH: &str = "SET LOCAL search_path TO pg_catalog, pg_temp; ";

impl CorePool {
    /// Runs `sql` (the auth query, its user already bound) as `auth_user` and returns its
    /// column names and rows. A connection the query failed on is closed, not reused.
    pub async fn auth_query(
        self: &Rc<Self>,
        protocol: Protocol,
        auth_user: &PassThrough,
        sql: &str,
        deadline: Instant,
    ) -> Result<(Vec<String>, Vec<Vec<Option<String>>>), PoolError> {
        let mut conn = self.checkout(protocol, Some(auth_user), deadline).await?;
        let result = match conn.protocol() {
            Protocol::Postgres => pg_query(&mut conn, &format!("{SAFE_SEARCH_PATH}{sql}")).await,
            Protocol::MySql => my_query(&mut conn, sql).await,
        };
        // A server error (say, no privilege) leaves the connection in step; anything else not.
        let reusable = !matches!(result, Err(ProbeError::Io(_) | ProbeError::Protocol(_)));
        conn.broken = !reusable;
        let addr = conn.addr().to_string();
        self.checkin(conn, reusable);
        result.map(|r| (r.columns, r.rows)).map_err(|e| PoolError::Auth {
            pool: self.config.name.clone(),
            addr,
            message: format!("auth query failed: {e}"),
        })
    }
}
