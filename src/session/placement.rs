//! Where a routed statement runs, the same for both wires: the session leaves its pool only
//! when nothing holds it there (giving its idle connection back first, as transaction pooling
//! does between transactions), a causal read waits for a replica that caught up with the
//! session's last write (#22), and a read whose replica pool lost its last backend falls back as
//! `routing.replica_fallback` says. How a connection is attached, given back and worded in an
//! error is the wire's, behind [`Placed`].

use std::rc::Rc;
use std::time::Duration;

use super::commit_io;
use super::context::CoreContext;
use super::engine::hold::Hold;
use super::engine::route;
use super::give_back::moving_to;
use crate::config::Protocol;
use crate::id::Position;
use crate::pool::{Conn, CorePool, PassThrough, PoolError};
use crate::routing::RywState;

/// A session's side of [`move_to`]: its pool, its connection and its wire's ways.
pub(super) trait Placed {
    /// The client's error type, which every pool error can be worded as.
    type Error: for<'e> From<&'e PoolError>;
    /// The protocol the session's backend connections speak.
    const PROTOCOL: Protocol;
    fn core(&self) -> Rc<CoreContext>;
    /// What holds the session on its connection now.
    fn hold(&self) -> Hold;
    fn ryw(&self) -> &RywState;
    /// Whether a backend connection is attached.
    fn attached(&self) -> bool;
    /// The session's pool, and the client's own credentials when the pool passes them through.
    fn seat(&mut self) -> (&mut Rc<CorePool>, Option<&PassThrough>);
    /// The error a client gets when no pool can take its statement.
    fn unplaced(message: String) -> Self::Error;
    /// The error a causal read gets when no replica caught up and none may fall back.
    fn behind(message: String) -> Self::Error;
    /// Gives the connection back (not at session end), as the wire's release rules say.
    async fn release_backend(&mut self);
    /// Borrows a connection of the session's pool unless one is attached.
    async fn ensure_backend(&mut self) -> Result<(), Self::Error>;
    /// Makes `conn`, just borrowed from the session's pool, the session's connection.
    async fn attach(&mut self, conn: Conn) -> Result<(), Self::Error>;
}

/// Moves `session` to pool `target` unless something holds it where it is, and attaches the
/// connection a statement for it needs: on a caught-up replica for a causal read, or any of the
/// read pool's (`to_replica`), falling back when it has none. `count`: the fallback is counted.
pub(super) async fn move_to<S: Placed>(
    session: &mut S,
    target: &str,
    to_replica: bool,
    count: bool,
) -> Result<(), S::Error> {
    let ctx = session.core();
    let moving = moving_to(&ctx, session.hold(), &session.seat().0.config.name, target);
    if let Some(pool) = moving.map_err(S::unplaced)? {
        session.release_backend().await;
        *session.seat().0 = pool;
    }
    let role = session.seat().0.config.role;
    let causal = route::causal_position(session.ryw(), to_replica, session.hold(), role).cloned();
    if let Some(position) = causal {
        connect_causal(session, &ctx, position).await?;
    }
    if to_replica && !session.attached() {
        connect_split(session, &ctx, count).await?;
    }
    Ok(())
}

/// The read pool may have lost its last backend since the decision: the connect that finds
/// out marks it down (passive health), and the read falls back instead of failing.
async fn connect_split<S: Placed>(session: &mut S, ctx: &CoreContext, count: bool) -> Result<(), S::Error> {
    let Err(e) = session.ensure_backend().await else { return Ok(()) };
    let Some(pool) = ctx.split_fallback(S::PROTOCOL, session.seat().0.name(), count) else { return Err(e) };
    *session.seat().0 = pool;
    session.ensure_backend().await
}

/// A causal read runs on a replica that has applied the session's last commit `position`,
/// waiting up to `routing.causal_wait` for one; else on the primary (or fails, with
/// `replica_fallback = "error"`). A connection the session kept (session pooling) is given
/// back first: it may be on a replica that is behind.
async fn connect_causal<S: Placed>(session: &mut S, ctx: &CoreContext, position: Position) -> Result<(), S::Error> {
    session.release_backend().await;
    let wait = ctx.config().routing.causal_wait;
    let (pool, who) = session.seat();
    let caught_up = commit_io::checkout_caught_up(ctx, pool, S::PROTOCOL, who, &position, wait).await;
    if let Some(conn) = caught_up.map_err(|e| S::Error::from(&e))? {
        return session.attach(conn).await;
    }
    let pool = session.seat().0;
    let Some(fallback) = ctx.causal_fallback(pool, S::PROTOCOL, None) else {
        return Err(S::behind(behind(pool, wait)));
    };
    *pool = fallback;
    session.ensure_backend().await
}

/// What a causal read is told when no backend of `pool` caught up within `wait` and
/// `replica_fallback = "error"`.
pub(super) fn behind(pool: &CorePool, wait: Duration) -> String {
    format!(
        "no backend of pool \"{}\" caught up with this session's last write within routing.causal_wait ({wait:?}) \
         and routing.replica_fallback = \"error\"",
        pool.name()
    )
}
