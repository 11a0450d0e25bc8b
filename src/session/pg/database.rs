//! Databases in a PostgreSQL session (#36). Before a client's `DROP DATABASE x`, `ALTER
//! DATABASE x RENAME` or `CREATE DATABASE .. TEMPLATE x` reaches the server, which refuses them
//! while anyone else is connected to `x`, every core lets go of `x` (idle pool connections,
//! health probes); connections lent to other clients stay, they are the other users the server
//! is right to name. At login, a database no pool serves gets a pool made from
//! `[pool_template]`, and the server's refusal of that database reaches the client as its own.

use super::Session;
use crate::pool::{CorePool, PoolError};
use crate::protocol::pg::sqlstate;
use crate::protocol::pg::FrontendMessage;
use crate::session::client_error::PgClientError;
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
    /// statement (a few byte comparisons otherwise).
    pub(super) async fn release_blocked_database(&self, msg: &FrontendMessage<'_>) {
        let (FrontendMessage::Query(sql) | FrontendMessage::Parse { query: sql, .. }) = msg else { return };
        if let Some(database) = blocked_database(sql) {
            self.ctx.release_database(&database).await;
        }
    }
}
