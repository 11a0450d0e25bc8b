//! #36: before a client's `DROP DATABASE x`, `ALTER DATABASE x RENAME` or `CREATE DATABASE ..
//! TEMPLATE x` reaches the server, which refuses them while anyone else is connected to `x`,
//! every core lets go of `x` (idle pool connections, health probes). Connections lent to other
//! clients stay: they are the other users the server is right to name.

use super::Session;
use crate::pool::{CorePool, PoolError};
use crate::protocol::pg::sqlstate;
use crate::session::client_error::PgClientError;
use crate::sql::database_ddl::blocked_database;

/// The server's own refusal of a database a template pool was made for (#36): the client is
/// told what connecting directly would tell it (`3D000 database "x" does not exist`), not that
/// the router could not log in.
pub(super) fn refused_database(pool: &CorePool, e: &PoolError) -> Option<PgClientError> {
    let PoolError::Auth { message, .. } = e else { return None };
    let text = message.strip_prefix(sqlstate::INVALID_CATALOG_NAME)?.strip_prefix(' ')?;
    pool.is_on_demand().then(|| PgClientError::new(sqlstate::INVALID_CATALOG_NAME, text))
}

impl Session {
    /// Lets go of the database `sql` needs free, if it is such a statement (a few byte
    /// comparisons otherwise).
    pub(super) async fn release_blocked_database(&self, sql: &str) {
        if let Some(database) = blocked_database(sql) {
            self.ctx.release_database(&database).await;
        }
    }
}
