//! Databases in a PostgreSQL session (#36). Before a client's `DROP DATABASE x`, `ALTER
//! DATABASE x RENAME` or `CREATE DATABASE .. TEMPLATE x` reaches the server, which refuses them
//! while anyone else is connected to `x`, every core lets go of `x` (idle pool connections,
//! health probes); connections lent to other clients stay, they are the other users the server
//! is right to name. At login, a database no pool serves gets a pool made from
//! `[pool_template]`, and the server's refusal of that database reaches the client as its own.

use super::Session;
use crate::pool::health::query::{pg_query, ProbeError};
use crate::pool::{CorePool, PoolError};
use crate::protocol::pg::sqlstate;
use crate::protocol::pg::FrontendMessage;
use crate::session::client_error::PgClientError;
use crate::session::placement::Placed;
use crate::session::CoreContext;
use crate::sql::database_ddl::blocked_database;

/// This core's pool for `database` made from `[pool_template]`; whether the server has the
/// database, the pool's first connection (at the greeting) finds out.
pub(super) fn on_demand_pool(ctx: &CoreContext, database: &str) -> Result<String, PgClientError> {
    match ctx.pool_for_database(database) {
        Some(Ok(pool)) => Ok(pool.config.name.clone()),
        Some(Err(e)) => Err(PgClientError::new(sqlstate::TOO_MANY_CONNECTIONS, e.to_string())),
        None => Err(PgClientError::new(sqlstate::INVALID_CATALOG_NAME, "the pool template was removed by a reload")),
    }
}

/// The server's own refusal of a database a template pool was made for (#36): the client is
/// told what connecting directly would tell it (`3D000 database "x" does not exist`), not that
/// the router could not log in.
pub(super) fn refused_database(pool: &CorePool, e: &PoolError) -> Option<PgClientError> {
    let PoolError::Auth { message, .. } = e else { return None };
    let text = message.strip_prefix(sqlstate::INVALID_CATALOG_NAME)?.strip_prefix(' ')?;
    pool.is_on_demand().then(|| PgClientError::new(sqlstate::INVALID_CATALOG_NAME, text))
}

impl Session {
    /// Lets go of the database the statement of a Query or Parse needs free, if it is such a
    /// statement (a few byte comparisons otherwise) and the server would let this session's
    /// user run it: a client that may not drop `x` must not make every core close its
    /// connections to `x` (the other clients of `x` would pay a login per transaction).
    pub(super) async fn release_blocked_database(&mut self, msg: &FrontendMessage<'_>) {
        let (FrontendMessage::Query(sql) | FrontendMessage::Parse { query: sql, .. }) = msg else { return };
        let Some(database) = blocked_database(sql) else { return };
        if self.may_free(&database).await {
            self.seat.ctx.release_database(&database).await;
        }
    }

    /// Whether the server would let the session's user drop, rename or copy `database`:
    /// asked on the session's own connection, only between exchanges (nothing of the client's
    /// in flight there), so the answer cannot interleave with the client's. Any doubt is a no:
    /// the statement then meets the server's own checks, as it would directly.
    async fn may_free(&mut self, database: &str) -> bool {
        let Some(question) = may_free_question(database) else { return false };
        if !self.ex.expects().is_empty() || !self.ex.queued().is_empty() || self.ensure_backend().await.is_err() {
            return false;
        }
        let Some(conn) = self.seat.conn.as_mut() else { return false };
        let answer = pg_query(conn, &question).await;
        self.progress.unnamed.elsewhere(); // a simple query of the router's drops it
        match answer {
            Ok(rows) => rows.rows.first().and_then(|r| r.first()).is_some_and(|v| v.as_deref() == Some("t")),
            Err(e) => {
                tracing::debug!(database, "cannot tell whether the session may free the database: {e}");
                conn.broken |= !matches!(e, ProbeError::Server(_));
                false
            }
        }
    }
}

/// The catalog question behind [`Session::may_free`]: the owner (or a superuser, for whom
/// `pg_has_role` is always true) may drop or rename a database; a role with CREATEDB may copy
/// a template database. `None` when the name cannot be quoted safely (never asked, never
/// released). Dollar quoting reads the same whatever the connection's string settings.
fn may_free_question(database: &str) -> Option<String> {
    if database.contains("$qp$") || database.contains('\0') {
        return None;
    }
    Some(format!(
        "SELECT pg_catalog.pg_has_role(d.datdba, 'MEMBER') OR (d.datistemplate AND r.rolcreatedb) \
         FROM pg_catalog.pg_database d, pg_catalog.pg_roles r \
         WHERE d.datname = $qp${database}$qp$ AND r.rolname = current_user"
    ))
}
