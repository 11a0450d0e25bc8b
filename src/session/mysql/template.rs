//! #36: a MySQL client naming a database no pool serves is given `[pool_template]`'s pool with
//! that database selected (a MySQL connection changes schema with `COM_INIT_DB`, so one pool
//! serves them all). The server checks the database when a client connects to it directly;
//! so does the router, at login, on one of the pool's connections.

use std::rc::Rc;

use super::state::MyState;
use super::stmt::replay;
use crate::config::Protocol;
use crate::pool::{CorePool, PassThrough};
use crate::rt;
use crate::session::client_error::MyClientError;

/// Selects `db` on a connection of `pool`: the server's own error (1049 for a database it
/// does not have, 1044 for one the user may not use) refuses the login. The connection goes
/// back marked with the schema it now has, so the next client's replay resets it.
pub(super) async fn check_schema(
    pool: &Rc<CorePool>,
    db: &str,
    who: Option<&PassThrough>,
) -> Result<(), MyClientError> {
    if pool.config.backend_protocol(Protocol::MySql) != Protocol::MySql {
        return Ok(()); // a bridged pool: the bridge maps schemas itself
    }
    let deadline = rt::now() + pool.config.timeouts.acquire;
    let mut conn = pool.checkout(Protocol::MySql, who, deadline).await.map_err(|e| MyClientError::from(&e))?;
    let state = MyState::new(Some(db.to_owned()), None);
    let checked = replay(&mut conn, &state, &pool.config.database).await;
    if checked.is_ok() {
        conn.settings = state.signature();
    }
    // A refused one may have been reset halfway: it is closed rather than guessed at.
    let reusable = checked.is_ok();
    pool.checkin(conn, reusable);
    checked
}
