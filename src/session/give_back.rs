//! The I/O half of giving a backend connection up, the same for both wires: the verdict is
//! `engine::release`'s and the reset the wire's own; this checks the connection in as they
//! say, and finds the pool a session moves to once it gave its connection back.

use std::rc::Rc;

use super::context::Chosen;
use super::engine::hold::Hold;
use super::engine::release::Release;
use super::engine::route::{self, Plan};
use crate::pool::{Conn, CorePool};
use crate::rt;

/// Checks `conn` in to `pool` as `verdict` says. `reset` is whether the wire's reset ran and
/// succeeded (asked only for [`Release::Reset`]); `signature` names the session's settings.
pub(super) fn give_back(pool: &CorePool, mut conn: Conn, verdict: Release, reset: bool, signature: u64) {
    conn.settings = match verdict {
        Release::Close(why) => {
            tracing::debug!(?why, "closing a backend connection rather than giving it back");
            return pool.checkin(conn, false);
        }
        Release::Reset if !reset => return pool.checkin(conn, false),
        Release::Reset | Release::Return { stale: true } => 0,
        Release::Return { stale: false } => signature,
    };
    conn.last_used = rt::now();
    pool.checkin(conn, true);
}

/// The pool a session gives its idle connection back for, when [`route::plan`] moves it to
/// `target` (found for the statement already, #39); `Err` with what the client is told when
/// routing named a pool that does not exist.
pub(super) fn moving_to(hold: Hold, current: &str, target: &Chosen) -> Result<Option<Rc<CorePool>>, String> {
    if route::plan(hold, current, &target.name) == Plan::Stay {
        return Ok(None);
    }
    let pool = target.pool.clone();
    pool.map(Some).ok_or_else(|| format!("routing chose pool \"{}\", which does not exist", target.name))
}

/// Closes `conn`, if the session has one: a connection checked in as not reusable is dropped,
/// which rolls back whatever was open on it.
pub(super) fn close(pool: &CorePool, conn: Option<Conn>) {
    if let Some(c) = conn {
        pool.checkin(c, false);
    }
}
