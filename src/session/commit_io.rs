//! What both protocol sessions do with a PostgreSQL backend's answers about a commit, for
//! read-your-writes (#22, #34): a native PostgreSQL session and a MySQL session bridged to a
//! PostgreSQL pool read the same probes and record the same facts.

use crate::config::Protocol;
use crate::id::Position;
use crate::pool::health::{pg_read_xact_probe, PositionError};
use crate::pool::{Conn, CorePool, PassThrough, PoolError};
use crate::routing::RywState;
use crate::rt;
use crate::session::context::CoreContext;
use std::rc::Rc;
use std::time::Duration;

/// causal reads (#22): a connection of the session's read pool (`pool`, first taken to its
/// successor if a reload replaced it) whose server has applied `position`, waiting up to `wait`
/// for one to catch up; `None` when none did. `who`: the client's own credentials, when the
/// pool passes them through.
pub(super) async fn checkout_caught_up(
    ctx: &CoreContext,
    pool: &mut Rc<CorePool>,
    protocol: Protocol,
    who: Option<&PassThrough>,
    position: &Position,
    wait: Duration,
) -> Result<Option<Conn>, PoolError> {
    *pool = ctx.current(pool);
    let deadline = rt::now() + pool.config.timeouts.acquire;
    pool.checkout_caught_up(protocol, who, deadline, position, wait).await
}

/// Reads the answer to the transaction probe sent on `conn` ahead of a COMMIT: a transaction
/// without a transaction id wrote nothing, so its commit leaves no position. A probe that failed
/// leaves the position due. `what` names the transaction in the log.
pub(super) async fn read_xact_probe(conn: &mut Conn, ryw: &mut RywState, what: &str) {
    match pg_read_xact_probe(conn).await {
        Ok(true) => {}
        Ok(false) => ryw.wrote_nothing(),
        Err(e) => {
            tracing::debug!("causal reads: cannot tell whether the {what} wrote: {e}");
            conn.broken |= e.breaks_connection();
        }
    }
}

/// Records that the commit position could not be read on `conn` (given up when out of step):
/// the session's reads stay on the primary until a later commit's position is learned. `what`
/// names the position in the log.
pub(super) fn position_unknown(conn: &mut Conn, ryw: &mut RywState, e: &PositionError, what: &str) {
    tracing::debug!("causal reads: cannot read the {what}: {e}");
    conn.broken |= e.breaks_connection();
    ryw.learned(None);
}
