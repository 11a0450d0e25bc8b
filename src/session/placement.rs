//! Where a routed statement runs, the same for both wires: the session leaves its pool only
//! when nothing holds it there (giving its idle connection back first, as transaction pooling
//! does between transactions), a causal read waits for a replica that caught up with the
//! session's last write (#22), and a read whose replica pool lost its last backend falls back as
//! `routing.replica_fallback` says. How a connection is attached, given back and worded in an
//! error is the wire's, behind [`Placed`].

use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::cancel::CancelSlot;
use super::commit_io;
use super::context::{Chosen, CoreContext};
use super::driver::ClientIo;
use super::engine::after::{self, AfterStatement, StatementEnd};
use super::engine::digest::Timing;
use super::engine::hold::{Exchange, Hold, HoldFacts};
use super::engine::release::{self, Gone, LossFacts};
use super::engine::route;
use super::give_back::{close, moving_to};
use super::lend::Lent;
use super::loss::Farewell;
use crate::config::{PoolMode, Protocol};
use crate::id::{CancelKey, Position, Token};
use crate::pool::{Conn, ConnInfo, CorePool, Looked, PassThrough, PoolError, Shape};
use crate::routing::RywState;
use crate::sql::analyze::PinReason;

/// What a session holds on the backend side, the same for both wires: where it runs, on what
/// connection, as whom, and what its reads must see.
pub(super) struct Seat {
    pub ctx: Rc<CoreContext>,
    /// The pool the session's statements run on now.
    pub pool: Rc<CorePool>,
    /// The backend connection, while the session holds one; an idle session holds no box
    /// for it (#39).
    pub conn: Lent<Option<Conn>>,
    /// Read-your-writes: whether reads must stay on the primary after a write, or wait for a
    /// replica that caught up with the session's last commit.
    pub ryw: RywState,
    /// On a pass-through pool, who the session's backend connections log in as (#23).
    pub pass: Option<Rc<PassThrough>>,
    /// The statement timed for per-shape statistics.
    pub digest: Timing,
    /// How a cancel or a KILL finds the statement the session runs.
    pub cancel: CancelHandle,
}

/// How a cancel or a KILL reaches the session's running statement.
pub(super) struct CancelHandle {
    /// Where the session publishes what runs.
    pub slot: Rc<CancelSlot>,
    /// The key the router issued to the client (PostgreSQL's BackendKeyData, MySQL's
    /// connection id).
    pub key: CancelKey,
}

impl Seat {
    /// A session's seat on `pool`, with no connection yet, found by cancels under `key`;
    /// `causal`: a token the client handed over at login (#22, #34).
    pub fn new(
        ctx: Rc<CoreContext>,
        pool: Rc<CorePool>,
        key: CancelKey,
        pass: Option<Rc<PassThrough>>,
        causal: Option<Token>,
    ) -> Self {
        let mut ryw = RywState::new(ctx.read_your_writes());
        if let Some(token) = causal {
            ryw.adopt_token(token);
        }
        let cancel = CancelHandle { slot: ctx.cancels.register(key), key };
        Self { ctx, pool, conn: Lent::default(), ryw, pass, digest: Timing::default(), cancel }
    }

    /// Borrows a connection of the seat's pool whose backend speaks `protocol`, for the statement
    /// being timed: its shape is what the pool's limiter may hold back (#41), `user` the client's
    /// for the fair share. `as_client`: log in as the client where the pool passes identities
    /// through (a bridged checkout never does).
    pub async fn checkout<E: for<'e> From<&'e PoolError>>(
        &mut self,
        protocol: Protocol,
        as_client: bool,
        user: &str,
    ) -> Result<Conn, E> {
        self.checkout_looked(None, protocol, as_client, user).await
    }

    /// [`Seat::checkout`] without building its future when a connection is idle (#39: the
    /// layers of the checkout's futures, polled once to lend it, cost more than the look): the
    /// connection, else what the look found for [`Seat::checkout_looked`] to go on from.
    pub fn lend_now(&self, protocol: Protocol, as_client: bool) -> Result<Conn, Looked> {
        self.pool.lend_now(protocol, self.pass.as_deref().filter(|_| as_client))
    }

    /// [`Seat::checkout`] going on from `looked`, the look [`Seat::lend_now`] took in this turn.
    pub async fn checkout_looked<E: for<'e> From<&'e PoolError>>(
        &mut self,
        looked: Option<Looked>,
        protocol: Protocol,
        as_client: bool,
        user: &str,
    ) -> Result<Conn, E> {
        let shape = Shape::new(self.digest.statement(), user);
        let who = self.pass.as_deref().filter(|_| as_client);
        self.ctx.checkout_for::<E>(&mut self.pool, protocol, who, &shape, looked).await
    }

    /// Ends the statement being timed and records it on the session's pool (see
    /// [`CoreContext::record_digest`]).
    pub fn record_digest(&mut self, protocol: Protocol) {
        self.ctx.record_digest(&mut self.digest, protocol, &self.pool);
    }

    /// Closes the connection, if the session has one: whatever was open on it rolls back.
    pub fn close_conn(&mut self) {
        let conn = self.take_conn();
        close(&self.pool, conn);
    }

    /// Gives the connection back to the pool, kept for reuse when `clean` and not broken, else
    /// closed (whatever was open on it rolls back).
    pub fn check_in(&mut self, clean: bool) {
        let Some(mut conn) = self.take_conn() else { return };
        let clean = clean && !conn.broken;
        if clean {
            conn.last_used = crate::rt::now();
        }
        self.pool.checkin(conn, clean);
    }

    /// Makes `conn`, ready for the session's statements (its settings applied), the session's
    /// connection.
    pub fn hold(&mut self, conn: Conn) {
        if let (PoolMode::Session, ConnInfo::MySql(info)) = (self.pool.config.mode, conn.info()) {
            // The connection is this client's for good: a KILL of its server id finds the session.
            self.cancel.slot.set_server(Some((conn.addr(), info.thread_id)));
        }
        *self.conn = Some(conn);
    }

    /// Takes the connection off the session, which runs nothing on it any more.
    pub fn take_conn(&mut self) -> Option<Conn> {
        self.cancel.slot.set_running(None);
        self.conn.take()
    }
}

/// A session's side of [`move_to`] and of a lost connection: its seat, and the ways of its wire.
pub(super) trait Placed {
    /// The client's error type, which every pool error can be worded as.
    type Error: for<'e> From<&'e PoolError>;
    /// The protocol the session's backend connections speak.
    const PROTOCOL: Protocol;
    /// What the wire knows of what holds the session on its connection now; `counted`: the
    /// part of an unfinished exchange that holds it for the rule asking.
    fn hold_facts(&self, counted: Exchange) -> HoldFacts;
    /// What holds the session on its connection now, as routing sees it.
    fn holding(&self) -> Hold {
        Hold::of(&self.hold_facts(Exchange::Queued))
    }
    /// A pin taken since the last call and not counted in the metrics yet.
    fn take_uncounted_pin(&mut self) -> Option<PinReason>;
    /// Gives the connection back when the end of a statement leaves nothing holding it that the
    /// pool's mode keeps it for ([`release::gives_back`]). A pin taken since the last call is
    /// counted here, where it starts to keep the connection.
    async fn maybe_release(&mut self) {
        let (pin, hold) = (self.take_uncounted_pin(), Hold::of(&self.hold_facts(Exchange::Due)));
        let seat = self.seat();
        seat.ctx.count_pin(pin); // metrics
        let move_off = seat.conn.as_ref().is_some_and(|c| seat.pool.should_move_off(c.backend()));
        if release::gives_back(seat.pool.config.mode, hold, move_off) {
            self.release_backend(false).await;
        }
    }
    /// The client's socket and buffers, and the session's seat.
    fn parts(&mut self) -> (&mut ClientIo, &mut Seat);
    /// What the session holds on the backend side.
    fn seat(&mut self) -> &mut Seat {
        self.parts().1
    }
    /// The error a client gets when no pool can take its statement.
    fn unplaced(message: String) -> Self::Error;
    /// The error a causal read gets when no replica caught up and none may fall back.
    fn behind(message: String) -> Self::Error {
        Self::unplaced(message)
    }
    /// Gives the connection back as the wire's release rules say; `session_end`: the client is
    /// gone, so state on the connection must not reach the next one.
    async fn release_backend(&mut self, session_end: bool);
    /// The session's seat, and the client's user name for the pool's fair share (#41).
    fn seat_and_user(&mut self) -> (&mut Seat, &str);
    /// Names the session's settings, as a connection records those it carries.
    fn signature(&self) -> u64;
    /// Sends the session's settings to `conn`, just borrowed, which does not carry them.
    async fn replay(&mut self, conn: &mut Conn) -> Result<(), Self::Error>;
    /// Forgets where the session read its last connection: the next one starts afresh.
    fn attaching(&mut self);
    /// Whether the attached connection needs readying ([`Placed::ready`]) for the next
    /// statement: asked first, so a wire with nothing to ready never builds that future (#39).
    fn needs_ready(&self) -> bool {
        false
    }
    /// Readies the attached connection for the statement that needed it, beyond its settings;
    /// called only when [`Placed::needs_ready`] says so.
    async fn ready(&mut self) -> Result<(), Self::Error> {
        Ok(())
    }
    /// Borrows a connection of the session's pool unless one is attached.
    async fn ensure_backend(&mut self) -> Result<(), Self::Error> {
        if self.seat().conn.is_none() {
            let conn = match self.seat().lend_now(Self::PROTOCOL, true) {
                Ok(conn) => conn,
                Err(looked) => {
                    let (seat, user) = self.seat_and_user();
                    seat.checkout_looked::<Self::Error>(Some(looked), Self::PROTOCOL, true, user).await?
                }
            };
            // #39: a connection carrying the session's settings (nearly every one) is seated
            // here, without building the replay's future.
            if let Some(conn) = self.attach_now(conn) {
                self.attach_replayed(conn).await?;
            }
        }
        if self.needs_ready() {
            self.ready().await?;
        }
        Ok(())
    }
    /// Makes `conn`, just borrowed from the session's pool, the session's connection, with
    /// the session's settings; a connection the replay failed on is closed.
    async fn attach(&mut self, conn: Conn) -> Result<(), Self::Error> {
        match self.attach_now(conn) {
            Some(conn) => self.attach_replayed(conn).await,
            None => Ok(()),
        }
    }
    /// [`Placed::attach`]'s synchronous part (#39): `conn` is seated if it carries the
    /// session's settings, else handed back for [`Placed::attach_replayed`].
    fn attach_now(&mut self, conn: Conn) -> Option<Conn> {
        self.attaching();
        if conn.settings != self.signature() {
            return Some(conn);
        }
        self.seat().hold(conn);
        None
    }
    /// Sends the session's settings to `conn`, which [`Placed::attach_now`] handed back, and
    /// seats it; a connection the replay failed on is closed.
    async fn attach_replayed(&mut self, mut conn: Conn) -> Result<(), Self::Error> {
        let signature = self.signature();
        if let Err(e) = self.replay(&mut conn).await {
            self.seat().pool.checkin(conn, false);
            return Err(e);
        }
        conn.settings = signature;
        self.seat().hold(conn);
        Ok(())
    }
    /// What the session loses with its connection, judged on its state now ([`super::loss`]).
    fn loss_facts(&self) -> LossFacts;
    /// Forgets what was in flight on a lost connection and what the server held for the session
    /// (a transaction, staged settings, a cursor).
    fn forget_lost(&mut self) -> Farewell;
    /// Queues what the client is told of a lost connection: `gone`, the session ends for it.
    fn tell_lost(&mut self, gone: Option<Gone>, farewell: Farewell);
}

/// Moves `session` to pool `target` unless something holds it where it is, and attaches the
/// connection a statement for it needs: on a caught-up replica for a causal read, or any of the
/// read pool's (`to_replica`), falling back when it has none. `count`: the fallback is counted.
pub(super) async fn move_to<S: Placed>(
    session: &mut S,
    target: Chosen,
    to_replica: bool,
    count: bool,
) -> Result<(), S::Error> {
    let ctx = session.seat().ctx.clone();
    let moving = moving_to(session.holding(), &session.seat().pool.config.name, &target);
    if let Some(pool) = moving.map_err(S::unplaced)? {
        session.release_backend(false).await;
        session.seat().pool = pool;
    }
    let role = session.seat().pool.config.role;
    let hold = session.holding();
    let causal = route::causal_position(&session.seat().ryw, to_replica, hold, role).cloned();
    if let Some(position) = causal {
        connect_causal(session, &ctx, position).await?;
    }
    if to_replica && session.seat().conn.is_none() {
        connect_split(session, &ctx, count).await?;
    }
    Ok(())
}

impl Seat {
    /// Gives up a connection left idle inside a transaction past `idle_transaction_timeout`:
    /// marked broken, so releasing it closes it, which rolls its transaction back. Returns the
    /// limit in milliseconds, for the client's error.
    pub fn drop_idle_transaction(&mut self) -> u128 {
        if let Some(c) = self.conn.as_mut() {
            c.broken = true;
        }
        self.pool.counters.idle_transaction_timed_out();
        self.pool.config.timeouts.idle_transaction.unwrap_or_default().as_millis()
    }

    /// Whether the session's pool is a replica for `protocol` clients.
    pub fn on_replica(&self, protocol: Protocol) -> bool {
        self.ctx.on_replica(self.pool.config.role, self.pool.name(), protocol)
    }

    /// A client statement's answer ended as `end` says ([`after::statement`]): nothing runs
    /// for cancels to find, and a connection a transaction escaped statement pooling on is
    /// marked to close; the rest of what to do is the wire's.
    pub fn statement_ended(&mut self, end: &StatementEnd) -> AfterStatement {
        self.cancel.slot.set_running(None);
        let ctx = &self.ctx;
        let after = after::statement(&mut self.ryw, end, crate::rt::now(), || ctx.has_replica_reads());
        if let Some(c) = self.conn.as_mut().filter(|_| after.break_connection) {
            c.broken = true;
        }
        after
    }
}

/// The pool a rule- or hint-routed read to `target` runs on: it skips unhealthy or lagging
/// replicas as split reads do (#19). `count`: a fallback is counted.
pub(super) fn replica_target<S: Placed>(seat: &Seat, target: Arc<str>, count: bool) -> Result<Arc<str>, S::Error> {
    seat.ctx.replica_fallback(S::PROTOCOL, target, count).map_err(S::unplaced)
}

/// The read pool may have lost its last backend since the decision: the connect that finds
/// out marks it down (passive health), and the read falls back instead of failing.
async fn connect_split<S: Placed>(session: &mut S, ctx: &CoreContext, count: bool) -> Result<(), S::Error> {
    let Err(e) = session.ensure_backend().await else { return Ok(()) };
    let Some(pool) = ctx.split_fallback(S::PROTOCOL, session.seat().pool.name(), count) else { return Err(e) };
    session.seat().pool = pool;
    session.ensure_backend().await
}

/// A causal read runs on a replica that has applied the session's last commit `position`,
/// waiting up to `routing.causal_wait` for one; else on the primary (or fails, with
/// `replica_fallback = "error"`). A connection the session kept (session pooling) is given
/// back first: it may be on a replica that is behind.
async fn connect_causal<S: Placed>(session: &mut S, ctx: &CoreContext, position: Position) -> Result<(), S::Error> {
    session.release_backend(false).await;
    let wait = ctx.config().routing.causal_wait;
    let seat = session.seat();
    let who = seat.pass.as_deref();
    let caught_up = commit_io::checkout_caught_up(ctx, &mut seat.pool, S::PROTOCOL, who, &position, wait).await;
    if let Some(conn) = caught_up.map_err(|e| S::Error::from(&e))? {
        return session.attach(conn).await;
    }
    let pool = &mut session.seat().pool;
    let Some(fallback) = ctx.causal_fallback(pool, S::PROTOCOL, None) else {
        return Err(S::behind(behind(pool, wait)));
    };
    *pool = fallback;
    session.ensure_backend().await
}

/// The server parameters `pool` learned from its backends, from a connection borrowed (as the
/// pool's own user) and given back for it when it learned none yet: both wires greet clients
/// with them.
pub(super) async fn learned_params(
    pool: &Rc<CorePool>,
    protocol: Protocol,
) -> Result<Rc<Vec<(String, String)>>, PoolError> {
    if let Some(p) = pool.server_params() {
        return Ok(p);
    }
    let deadline = crate::rt::now() + pool.config.timeouts.acquire;
    let conn = pool.checkout(protocol, None, deadline).await?;
    pool.checkin(conn, true);
    pool.server_params().ok_or_else(|| PoolError::NoBackend(pool.config.name.clone()))
}

/// What a causal read is told when no backend of `pool` caught up within `wait` and
/// `replica_fallback = "error"`.
pub(super) fn behind(pool: &CorePool, wait: Duration) -> String {
    format!(
        "no backend of pool \"{}\" applied this session's last write within routing.causal_wait ({wait:?}) \
         and routing.replica_fallback = \"error\"",
        pool.name()
    )
}
