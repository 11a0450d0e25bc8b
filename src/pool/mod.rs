//! Per-core backend pools: checkout with a deadline, checkin, waiters, the process-wide budget,
//! backend connect + authentication, idle reaping.
//!
//! A core owns its `PoolSet`; connections never leave the core that opened them. Must not depend
//! on routing, session, core or control.

mod admit;
mod auth_query;
mod balance;
mod budget;
mod causal;
mod conn;
mod failover;
pub mod health;
mod limit;
mod line;
mod login;
mod moving;
mod mysql;
mod on_demand;
mod pause;
mod pg;
mod schema;
mod tls;
mod waiters;
mod writable;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use budget::{Budget, BudgetRegistry};
pub use conn::{Conn, ConnInfo, MyInfo, PgInfo};
pub use health::{BackendHealth, Cause};
pub use limit::{Over, Shape};
pub use login::{BackendSecret, FrozenPass, PassThrough};
pub use moving::{freeze as freeze_conn, FrozenConn};
pub use mysql::{
    deliver_kill as deliver_mysql_kill, tracks_gtid, BACKEND_CAPABILITIES as MYSQL_BACKEND_CAPABILITIES,
    TRACK_LAST_GTID,
};
pub use on_demand::OnDemandError;
pub use pause::PauseGate;
pub use schema::SchemaGeneration;
pub(crate) use waiters::Waiters;
use waiters::{Waiting, Wake};
use writable::{Floor, Standing};

use crate::config::{Config, Pool as PoolConfig, PoolRole, Protocol};
use crate::error::{ErrorCode, Origin};
use crate::metrics::{BackendCounters, PoolCounters, PoolSnapshot};
use crate::rt;

/// Sends a PostgreSQL CancelRequest to `addr`, a backend no pool of this core serves (any
/// more): in plaintext, as nothing says how else to reach it.
pub async fn deliver_pg_cancel(addr: SocketAddr, pid: i32, secret: i32, deadline: Instant) -> std::io::Result<()> {
    pg::deliver_cancel(None, addr, pid, secret, deadline).await
}

/// Why a connection could not be had.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// No connection became free within `acquire_timeout`.
    #[error("no connection to pool \"{pool}\" became available within {waited_ms} ms")]
    Timeout {
        /// The pool.
        pool: String,
        /// How long the client waited.
        waited_ms: u128,
    },
    /// The backend could not be reached or refused the connection.
    #[error("cannot connect to backend {addr} of pool \"{pool}\": {reason}")]
    Connect {
        /// The pool.
        pool: String,
        /// The backend.
        addr: String,
        /// What failed.
        reason: String,
    },
    /// The backend rejected the pool's credentials or sent an error during startup.
    #[error("backend {addr} refused login for pool \"{pool}\": {message}")]
    Auth {
        /// The pool.
        pool: String,
        /// The backend.
        addr: String,
        /// The server's message (SQLSTATE first).
        message: String,
    },
    /// A backend speaks the other protocol than the one the router spoke to it (a pool without
    /// `protocol` serves each client with the client's own protocol).
    #[error(
        "backend {addr} of pool \"{pool}\" speaks the {speaks} protocol, not this client's: set protocol = \
         \"{speaks}\" on [pools.{pool}] to bridge clients to it, or connect through a {speaks} listener"
    )]
    WrongProtocol {
        /// The pool.
        pool: String,
        /// The backend.
        addr: String,
        /// The protocol the backend answered with.
        speaks: crate::config::Protocol,
    },
    /// No backend of the pool resolves to an address.
    #[error("pool \"{0}\" has no reachable backend address")]
    NoBackend(String),
    /// A reload replaced the pool while the checkout waited (e.g. between PAUSE and RESUME):
    /// the caller borrows from the pool's successor instead.
    #[error("pool \"{0}\" was replaced by a reload")]
    Replaced(String),
    /// The statement's shape was over its limit, or its user over its share of the pool, for
    /// all of `limit_wait`; or the pool's queue would have kept it past its deadline (#41).
    #[error("{over} on pool \"{pool}\"; waited {waited_ms} ms for a turn")]
    Limited {
        /// The pool.
        pool: String,
        /// What held the statement back.
        over: Over,
        /// How long it waited.
        waited_ms: u128,
    },
}

impl ErrorCode for PoolError {
    fn code(&self) -> &'static str {
        match self {
            Self::Timeout { .. } => "pool.exhausted",
            Self::Connect { .. } => "pool.connect",
            Self::Auth { .. } => "pool.auth",
            Self::WrongProtocol { .. } => "pool.wrong_protocol",
            Self::NoBackend(_) => "pool.no_backend",
            Self::Replaced(_) => "pool.replaced",
            Self::Limited { .. } => "pool.limited",
        }
    }
    fn origin(&self) -> Origin {
        match self {
            Self::Timeout { .. } | Self::Replaced(_) | Self::Limited { .. } => Origin::Internal,
            _ => Origin::Backend,
        }
    }
    fn retryable(&self) -> bool {
        matches!(self, Self::Connect { .. })
    }
}

/// Startup parameters a server reported, shared by the sessions greeted with them.
pub type ServerParams = Rc<Vec<(String, String)>>;

/// Upkeep ticks in a row another core must have waited while this one held more than an even
/// split of the budget (by less than one connection) before one is given up for it.
const STARVED_TICKS: u32 = 4;

/// How long an idle connection must have gone unlent before this core gives it up for another
/// core that waits for budget (#39), whatever the split: idle connections are lent warmest
/// first, so one left this long is more than this core's own checkouts need. Long enough that
/// a core's connections between two bursts are not traded away (each trade is a backend login,
/// and the burst wants it back): at 20 ms, two cores under callgrind's slow pace still traded
/// 24 connections in 3,200 transactions.
const SPARE_AFTER: Duration = Duration::from_millis(500);

/// How long a connection given up for another core stays open for a core to take it (see
/// [`moving::Handed`]): the core it was given up for is called at once and takes it within a
/// loop turn or two; one that is not taken by then is closed at the next upkeep (the waiter went
/// away, or found another connection). Long enough for a core slowed by a profiler.
const HANDED_FOR: Duration = Duration::from_secs(5);

/// Marks every backend budget of a pool as wanted by this core while any of its checkouts
/// waits, and counts those checkouts. Only the first waiter and the last to leave touch the
/// shared budgets (#39): a write to memory every core reads, once per wait, was the one shared
/// write on the statement path under contention.
struct Wanting<'a> {
    backends: &'a [BackendSlot],
    local: &'a Cell<u32>,
}

impl<'a> Wanting<'a> {
    fn new(backends: &'a [BackendSlot], local: &'a Cell<u32>) -> Self {
        if local.get() == 0 {
            for b in backends {
                b.budget.want();
            }
        }
        local.set(local.get() + 1);
        Self { backends, local }
    }
}

impl Drop for Wanting<'_> {
    fn drop(&mut self) {
        let left = self.local.get().saturating_sub(1);
        self.local.set(left);
        if left == 0 {
            for b in self.backends {
                b.budget.unwant();
            }
        }
    }
}

/// Counts a connection being opened as outstanding on its backend until the open ends (#22):
/// `least_outstanding` must see the checkouts that chose a backend and wait for its connect,
/// or many arriving at once (session-pooled logins, a cold pool) all see the same stale counts
/// and pile onto one backend.
struct Opening<'a>(&'a Cell<u32>);

impl<'a> Opening<'a> {
    fn new(outstanding: &'a Cell<u32>) -> Self {
        outstanding.set(outstanding.get() + 1);
        Opening(outstanding)
    }
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

/// One backend of a pool as this core sees it.
struct BackendSlot {
    addr: SocketAddr,
    label: String,
    budget: Arc<Budget>,
    weight: i64,
    current: Cell<i64>,
    /// Per-statement choice (#22): this core's smooth round-robin credit of the backend.
    credit: Cell<i64>,
    /// Connections of this core lent out on the backend now, or being opened for a checkout
    /// (least-outstanding's load, weighted's tie-breaker).
    outstanding: Cell<u32>,
    /// metrics: this core's counters of the backend, resolved when the pool is built.
    counters: Rc<BackendCounters>,
    /// health: shared by every core, read with one atomic load (see `health`).
    health: Arc<BackendHealth>,
}

impl BackendSlot {
    /// failover (#40): what the shared health says of the backend for a primary-role pool.
    fn standing(&self, strict: bool) -> Standing {
        Standing::of(self.health.is_healthy(), self.health.role_matches(), strict)
    }

    /// A connection attempt failed: counted, and a backend that refused it before `deadline`
    /// is marked down for every core at once. A refused login (perhaps the client's own
    /// credentials) or a slow one that hit the deadline (a busy server) is left to the probes.
    fn connect_failed(&self, e: &PoolError, deadline: Instant) {
        self.counters.connect_failed();
        if matches!(e, PoolError::Connect { .. }) && rt::now() < deadline {
            self.health.connect_failed();
        }
    }
}

/// Which backends new work may go to, read once from the shared health (a few relaxed loads).
#[derive(Clone, Copy)]
struct Usable {
    /// Some backend is healthy (else the pool fails open: see [`CorePool::usable`]).
    any_healthy: bool,
    /// failover (#40): the standing a backend of a primary-role pool needs.
    floor: Floor,
    /// failover: an unread role counts as unfit (see [`Standing::of`]).
    strict: bool,
    /// Every backend is usable, as the rest says (#39: known once per health change, not read
    /// again for each connection looked at).
    every: bool,
}

/// The backends a checkout may be lent a connection of: any (nearly every checkout, known
/// without a call per backend or connection, #39), or those a predicate accepts (a causal
/// read's, caught up with the session's last write; the balance policy's choice).
#[derive(Clone, Copy)]
struct Eligible<'a>(Option<&'a dyn Fn(usize) -> bool>);

impl Eligible<'_> {
    /// Any backend.
    const ANY: Self = Eligible(None);

    /// Whether backend `i` is eligible.
    fn admits(self, i: usize) -> bool {
        self.0.is_none_or(|f| f(i))
    }
}

/// A pool's core-local slice.
pub struct CorePool {
    /// The pool's configuration.
    pub config: PoolConfig,
    backends: Vec<BackendSlot>,
    /// What [`CorePool::usable_now`] read last, and the backends' health changes it read it at.
    usable_read: Cell<Option<(u64, Usable)>>,
    idle: RefCell<Vec<Conn>>,
    waiters: Rc<Waiters>,
    /// Checkouts of this core currently waiting for budget.
    wanting_here: Cell<u32>,
    /// Upkeep found this core over its part of a backend's budget while another core waits,
    /// with no idle connection to give up: the next connection checked in on such a backend
    /// is closed instead (#39).
    owes: Cell<bool>,
    /// Consecutive upkeep ticks during which another core waited while this one held more than
    /// an even split of the budget.
    starved_ticks: Cell<u32>,
    /// What the servers reported at startup (PostgreSQL ParameterStatus), from the first
    /// connection opened: clients are greeted with it without borrowing a connection.
    server_params: RefCell<Option<ServerParams>>,
    /// The parameter list the last client of this pool was shown, shared with the next client
    /// shown the same (see [`CorePool::share_params`]).
    shown_last: RefCell<ServerParams>,
    /// metrics: this core's counters of the pool; handed from a rebuilt pool to its successor
    /// so they stay monotonic. Sessions record statements, decisions and errors here.
    pub counters: Rc<PoolCounters>,
    /// This core's share of `min_connections` per backend, kept open by `maintain`.
    min_share: Cell<u32>,
    /// The pool's name, shared: routing compares it on every statement of a transaction.
    name: Arc<str>,
    /// PAUSE/RESUME, shared with the pool's predecessor and successor across reloads.
    gate: Rc<PauseGate>,
    /// A reload built a successor: nothing new is lent from this one.
    replaced: Cell<bool>,
    /// Until when connections given back are closed, not kept: a client is dropping, renaming
    /// or copying the pool's database (#36), and the server waits a few seconds for other
    /// connections to leave it, so one still lent when the idle ones were closed must leave
    /// too once its client is done with it.
    letting_go_until: Cell<Option<Instant>>,
    /// The process-wide schema generation (#18): names the server statements of PostgreSQL
    /// clients, so a statement prepared after a schema change never reuses one parsed before.
    schema: Arc<SchemaGeneration>,
    /// Where a pass-through pool's per-user budgets live (#23), created when a user first opens.
    budgets: BudgetRegistry,
    /// A pool made from `[pool_template]` for one database (#36): its place among the
    /// template's `max_pools`, given back when the pool is dropped.
    on_demand: Option<on_demand::Claim>,
    /// The shape limiter and fair share (#41); `None` when the pool limits nothing, or lends
    /// connections for whole sessions.
    limiter: Option<Rc<admit::Gate>>,
}

impl CorePool {
    fn build(config: &PoolConfig, budgets: &BudgetRegistry, counters: Rc<PoolCounters>, gate: Rc<PauseGate>) -> Self {
        Self::build_sharing_health(config, &config.name, budgets, counters, gate)
    }

    /// Builds a pool whose backends' health is that of pool `health_of` (a pool made from a
    /// template shares its template's, which the prober keeps up to date).
    fn build_sharing_health(
        config: &PoolConfig,
        health_of: &str,
        budgets: &BudgetRegistry,
        counters: Rc<PoolCounters>,
        gate: Rc<PauseGate>,
    ) -> Self {
        let max = config.limits.max_connections.get();
        let backends = config
            .backends
            .iter()
            .filter_map(|b| {
                let label = format!("{}:{}", b.host, b.port);
                // Resolution happens only when pools are (re)built, not per connection.
                let addr = (b.host.as_str(), b.port).to_socket_addrs().ok()?.next()?;
                Some(BackendSlot {
                    addr,
                    budget: budgets.get(&config.name, &label, max),
                    weight: i64::from(b.weight.get()),
                    current: Cell::new(0),
                    credit: Cell::new(0),
                    outstanding: Cell::new(0),
                    counters: counters.backend(&label),
                    health: budgets.health(
                        health_of,
                        &label,
                        b.max_replica_lag.is_some() || b.max_replica_lag_bytes.is_some(),
                    ),
                    label,
                })
            })
            .collect();
        Self {
            config: config.clone(),
            backends,
            usable_read: Cell::new(None),
            idle: RefCell::new(Vec::new()),
            waiters: Rc::new(Waiters::new(
                budgets.line(&config.name),
                max.saturating_mul(config.backends.len() as u32),
                Some(if config.username.is_none() { waiters::RECHECK_PER_USER } else { waiters::RECHECK_SHARED }),
            )),
            wanting_here: Cell::new(0),
            owes: Cell::new(false),
            starved_ticks: Cell::new(0),
            server_params: RefCell::new(None),
            shown_last: RefCell::default(),
            counters,
            min_share: Cell::new(0),
            name: Arc::from(config.name.as_str()),
            gate,
            replaced: Cell::new(false),
            letting_go_until: Cell::new(None),
            schema: budgets.schema(),
            budgets: budgets.clone(),
            on_demand: None,
            limiter: limiter(config),
        }
    }

    /// Whether the pool passes clients' own identities through (#23): it has no `username`.
    pub fn passes_through(&self) -> bool {
        self.config.username.is_none()
    }

    /// The user a checkout for `who` must be lent a connection of: the client's on a
    /// pass-through pool, nobody's (every connection is the pool user's) otherwise.
    fn key_of<'w>(&self, who: Option<&'w PassThrough>) -> Option<&'w str> {
        who.filter(|_| self.passes_through()).map(|w| &*w.user)
    }

    /// The (pool, backend, user) budget of a pass-through pool: `max_user_connections`
    /// (default `max_connections`) per user, under the pool-wide `max_connections`.
    fn user_budget(&self, backend: usize, user: &str) -> Option<Arc<Budget>> {
        let slot = self.backends.get(backend)?;
        let max = self.config.limits.max_user_connections.unwrap_or(self.config.limits.max_connections).get();
        Some(self.budgets.user_budget(&self.config.name, &slot.label, user, max))
    }

    /// The schema generation in force now (see [`SchemaGeneration`]).
    pub fn schema_generation(&self) -> u64 {
        self.schema.current()
    }

    /// A schema change passed through the router or made a prepared plan stale: every
    /// statement prepared from now on, on every core, gets a new server name.
    pub fn schema_changed(&self) {
        self.schema.advance();
    }

    /// PAUSE/RESUME of this pool on this core.
    pub fn gate(&self) -> &PauseGate {
        &self.gate
    }

    /// Whether a reload replaced this pool (sessions then borrow from the successor).
    pub fn is_replaced(&self) -> bool {
        self.replaced.get()
    }

    /// Connections of the pool (this object and its predecessors) lent out on this core now.
    pub fn lent(&self) -> u64 {
        self.counters.lent()
    }

    /// Closes every idle connection (PAUSE gives the servers back once nothing is in flight).
    pub fn close_idle(&self) {
        let idle = std::mem::take(&mut *self.idle.borrow_mut());
        drop(idle); // each frees its budget unit
    }

    /// Closes the idle connections, and every connection given back until `until` (#36).
    pub fn let_go(&self, until: Instant) {
        self.letting_go_until.set(Some(until));
        self.close_idle();
    }

    /// The pool's name (as routing decisions name pools).
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// metrics: this core's figures for the pool (idle connections counted now, per backend).
    pub fn metrics_snapshot(&self) -> PoolSnapshot {
        let idle = self.idle.borrow();
        let capacity = u64::from(self.config.limits.max_connections.get()) * self.backends.len() as u64;
        let count = |label: &str| {
            let index = self.backends.iter().position(|b| b.label == label);
            idle.iter().filter(|c| Some(c.backend()) == index).count() as u64
        };
        let mut snap = self.counters.snapshot(capacity, &count);
        if self.passes_through() {
            snap.users = self.budgets.user_connections(&self.config.name);
        }
        if let Some(gate) = &self.limiter {
            (snap.limits, snap.limit_queue_depth) = gate.figures();
        }
        // health: process-wide figures, shown for the backends configured now.
        for b in &mut snap.backends {
            b.health = self.backends.iter().find(|s| s.label == b.label).map(|s| s.health.figures());
        }
        snap
    }

    // ---- health (pool::health): selection skips unhealthy backends ----

    /// Whether any backend of the pool is healthy now: a few relaxed atomic loads, no lock, so
    /// the router may ask it for every statement (`routing.replica_fallback`).
    pub fn has_healthy_backend(&self) -> bool {
        self.backends.iter().any(|b| b.health.is_healthy())
    }

    /// What new work may use now (see [`Usable`]). A primary-role pool lends only its
    /// writable backends while it has any (#40); a replica-role pool any healthy one.
    fn usable_now(&self) -> Usable {
        // #39: read at every checkout, checkin and transaction's end, and it seldom moves: what
        // was worked out stands while no backend's health changed (counts that only grow).
        let changes = self.backends.iter().fold(0u64, |n, b| n.wrapping_add(b.health.changes()));
        if let Some((_, u)) = self.usable_read.get().filter(|(at, _)| *at == changes) {
            return u;
        }
        let u = self.read_usable();
        self.usable_read.set(Some((changes, u)));
        u
    }

    /// [`CorePool::usable_now`], read from the shared health.
    fn read_usable(&self) -> Usable {
        let any_healthy = self.has_healthy_backend();
        let (floor, strict) = if self.config.role == PoolRole::Primary {
            let waits = !self.config.timeouts.failover_wait.is_zero();
            // Only probes that log in read roles: a pass-through or generic pool's never will.
            let reads_roles = self.config.username.is_some() && self.config.engine != crate::config::Engine::Generic;
            let strict = waits && reads_roles;
            (Floor::of(self.backends.iter().map(|b| b.standing(strict)), waits), strict)
        } else {
            (Floor::Any, false)
        };
        let mut u = Usable { any_healthy, floor, strict, every: false };
        u.every = (0..self.backends.len()).all(|i| self.usable(i, u));
        u
    }

    /// Whether backend `i` may get (or keep lending) connections under `u`: healthy, or every
    /// backend is unhealthy — then the pool fails open rather than refusing everything on the
    /// word of a probe (the router decides about fallbacks with
    /// [`CorePool::has_healthy_backend`]) — and, on a primary-role pool, of the standing its
    /// floor asks for.
    fn usable(&self, i: usize, u: Usable) -> bool {
        self.backends.get(i).is_some_and(|b| {
            u.every || ((!u.any_healthy || b.health.is_healthy()) && u.floor.admits(b.standing(u.strict)))
        })
    }

    fn marked_down(&self, i: usize) -> bool {
        self.backends.get(i).is_some_and(|b| !b.health.is_healthy())
    }

    /// Whether a session holding a connection to `backend` should leave it at its next
    /// transaction boundary: the backend is no longer usable (marked down, or a primary-role
    /// pool's server found read-only) and another one is.
    pub fn should_move_off(&self, backend: usize) -> bool {
        let u = self.usable_now();
        !self.usable(backend, u) && (0..self.backends.len()).any(|i| self.usable(i, u))
    }

    /// failover (#40): a primary-role pool with `failover_wait` has no writable backend now.
    fn awaits_failover(&self) -> bool {
        self.usable_now().floor == Floor::Nothing
    }

    /// The backends' labels, for an error that concerns them all.
    fn backend_list(&self) -> String {
        self.backends.iter().map(|b| b.label.as_str()).collect::<Vec<_>>().join(", ")
    }
    // ---- end health ----

    /// A MySQL pass-through pool's greeting parameters (#23), read from a backend's handshake
    /// without logging in (nobody to log in as before a client names itself), and cached.
    pub async fn peek_mysql_params(&self, deadline: Instant) -> Result<ServerParams, PoolError> {
        if let Some(p) = self.server_params() {
            return Ok(p);
        }
        let slot = self.backends.first().ok_or_else(|| PoolError::NoBackend(self.config.name.clone()))?;
        let deadline = deadline.min(rt::now() + self.config.timeouts.connect);
        let (version, charset) = mysql::peek_greeting(&self.config, slot.addr, &slot.label, deadline).await?;
        let params = Rc::new(vec![("server_version".to_owned(), version), ("charset".to_owned(), charset.to_string())]);
        *self.server_params.borrow_mut() = Some(params.clone());
        Ok(params)
    }

    /// `params` as a list shared with every other client of this core shown the same ones
    /// (clients of one application start alike): idle sessions keep one copy, not one each.
    pub fn share_params(&self, params: Vec<(String, String)>) -> ServerParams {
        let mut last = self.shown_last.borrow_mut();
        if **last != params {
            *last = Rc::new(params);
        }
        last.clone()
    }

    /// Startup parameters reported by this pool's servers, once a connection was opened.
    pub fn server_params(&self) -> Option<ServerParams> {
        self.server_params.borrow().clone()
    }

    /// Whether another core waits for budget of `backend` (this core's own waiters take idle
    /// connections directly, so their demand must not close them).
    fn wanted_elsewhere(&self, backend: usize) -> bool {
        self.cores_wanting_elsewhere(backend) > 0
    }

    /// How many other cores wait for budget of `backend`.
    fn cores_wanting_elsewhere(&self, backend: usize) -> u32 {
        let here = u32::from(self.wanting_here.get() > 0);
        self.backends.get(backend).map_or(0, |b| b.budget.wanted().saturating_sub(here))
    }

    /// Gives `conn` up for another core: this core leaves the unit to the core it was given up
    /// for a while (see [`Waiters::giving`]). A connection that may move is handed over open
    /// (see [`moving::Handed`]) before its unit is freed, so the core taking the unit uses it
    /// rather than logging in (#39: a move was a close and a login, 150,000 instructions); the
    /// others are closed. Its receive is stopped first, so it moves on the next loop turn.
    fn give_up(&self, conn: Conn) {
        let Some(budget) =
            self.backends.get(conn.backend()).map(|b| b.budget.clone()).filter(|_| conn.lease.user.is_none())
        else {
            return self.waiters.giving(rt::now(), || drop(conn));
        };
        let (waiters, config, epoch) = (self.waiters.clone(), self.config.clone(), conn.lease.epoch);
        rt::spawn_local(async move {
            let mut conn = conn;
            match moving::freeze(&mut conn, 0).await {
                // Bytes the server sent while it sat idle (an error before it hung up, a notice):
                // the next client must not read them, and an idle connection never keeps them.
                Some((fd, frozen)) if frozen.unread.is_empty() => {
                    budget.hand(moving::Handed::new(fd, frozen, config, epoch, rt::now()));
                }
                _ => {}
            }
            waiters.giving(rt::now(), || drop(conn));
        });
    }

    /// A connection another core gave up for this pool's backend `index` (see
    /// [`CorePool::give_up`]), joined to this core under `unit`; the unit back when there is
    /// none to use (a login is due).
    fn take_handed(&self, index: usize, unit: conn::BudgetUnit) -> Result<Conn, conn::BudgetUnit> {
        let Some(slot) = self.backends.get(index) else { return Err(unit) };
        let Some(handed) = slot.budget.take_handed(&self.config, self.gate.epoch()) else { return Err(unit) };
        let (fd, mut frozen) = handed.into_parts();
        match frozen.join(fd) {
            Ok(stream) => {
                let (addr, info, rest) = frozen.into_parts();
                let mut conn = Conn::new(stream, addr, index, info, unit);
                rest.apply(&mut conn);
                self.counters.connection_moved_in(); // metrics
                Ok(self.stamped(conn))
            }
            Err(e) => {
                tracing::debug!(error = %e, "a server connection another core gave up could not join this one");
                Err(unit)
            }
        }
    }

    /// Whether this core holds more than `slack` beyond its part of `backend`'s budget in use
    /// while other cores wait for it; the part is an even split between this core and the
    /// waiting ones. Without it a core whose clients kept every connection busy kept them all,
    /// and the other core's clients waited out their `acquire_timeout` (#39). While checkouts of
    /// this core wait too, the part is in proportion to its share of all the waiting checkouts
    /// (#41), by more than one connection: 10,000 clients split unevenly between two cores then
    /// wait about as long on either, where an even split of the connections made the core with
    /// more clients slower; without the connection of hysteresis they moved 40 times a second.
    fn over_share(&self, backend: usize, slack: u32) -> bool {
        let elsewhere = self.cores_wanting_elsewhere(backend);
        let Some(b) = self.backends.get(backend).filter(|_| elsewhere > 0) else {
            return false;
        };
        let idle = self.idle.borrow().iter().filter(|c| c.backend() == backend).count();
        let held = u64::try_from(idle).unwrap_or(u64::MAX) + u64::from(b.outstanding.get());
        let (used, slack) = (u64::from(b.budget.used()), u64::from(slack));
        match self.waiters.demand() {
            // One connection more of hysteresis: the waiting counts move all the time, and a
            // part that is a fraction of a connection is not worth a backend login per tick.
            Some((mine, all)) => held.saturating_mul(all) > used.saturating_mul(mine) + (slack + 1).saturating_mul(all),
            None => held.saturating_mul(u64::from(elsewhere) + 1) > used + slack,
        }
    }

    /// Whether `addr` is one of this pool's backends.
    pub fn serves(&self, addr: SocketAddr) -> bool {
        self.backends.iter().any(|b| b.addr == addr)
    }

    /// Sends a PostgreSQL CancelRequest for backend process `pid`/`secret` to `addr`, one of
    /// this pool's backends, with the pool's TLS settings; returns once the server processed it.
    pub async fn deliver_pg_cancel(
        &self,
        addr: SocketAddr,
        pid: i32,
        secret: i32,
        deadline: Instant,
    ) -> std::io::Result<()> {
        let index = self.backends.iter().position(|b| b.addr == addr);
        let backend = index.and_then(|i| self.config.backends.get(i));
        pg::deliver_cancel(Some((&self.config.tls, backend)), addr, pid, secret, deadline).await
    }

    /// Idle connections held by this core.
    pub fn idle_count(&self) -> usize {
        self.idle.borrow().len()
    }

    /// The backend the next statement should use (#22): the pool's `balance` policy over the
    /// usable backends `eligible` accepts. One backend: no choice to make.
    fn choose(&self, u: Usable, eligible: Eligible<'_>) -> Option<usize> {
        if self.backends.len() < 2 {
            return None;
        }
        let mut candidates: Vec<balance::Candidate> = self
            .backends
            .iter()
            .enumerate()
            .filter(|(i, _)| self.usable(*i, u) && eligible.admits(*i))
            .map(|(index, b)| balance::Candidate {
                index,
                weight: b.weight,
                credit: b.credit.get(),
                outstanding: b.outstanding.get(),
            })
            .collect();
        let chosen = balance::choose(self.config.balance, &mut candidates);
        for c in &candidates {
            if let Some(b) = self.backends.get(c.index) {
                b.credit.set(c.credit);
            }
        }
        chosen
    }

    /// Closes the oldest idle connection logged in as another user than `user`, freeing its
    /// units of the pool-wide budget.
    fn close_idle_of_others(&self, user: &str) {
        // Only the pool-wide cap is helped by it, not the user's own.
        let room = (0..self.backends.len()).any(|i| self.user_budget(i, user).is_some_and(|b| b.has_room()));
        if !room {
            return;
        }
        let mut idle = self.idle.borrow_mut();
        if let Some(pos) = idle.iter().position(|c| c.lease.user.as_deref() != Some(user)) {
            let conn = idle.remove(pos);
            drop(idle);
            drop(conn); // its budget units wake a waiter
        }
    }

    /// A backend `eligible` accepts with budget for `user` (see [`CorePool::pick_backend_any`]):
    /// on a pass-through pool the user's own budget must have a unit too, which the pick then holds.
    fn pick_backend(&self, u: Usable, user: Option<&str>, eligible: Eligible<'_>) -> Option<Picked> {
        let index = self.pick_backend_any(u, eligible)?;
        self.with_user_unit(index, user)
    }

    /// Adds `user`'s unit to backend `index`, whose pool-wide unit the caller holds.
    fn with_user_unit(&self, index: usize, user: Option<&str>) -> Option<Picked> {
        let slot = self.backends.get(index)?;
        let Some(user) = user else {
            return Some(Picked::new(index, slot, None, &self.waiters));
        };
        match self.user_budget(index, user) {
            Some(b) if b.try_acquire() => Some(Picked::new(index, slot, Some(b), &self.waiters)),
            _ => {
                // The user is at its own cap here: give the pool-wide unit back.
                slot.budget.release();
                self.waiters.call_others(&slot.budget);
                None
            }
        }
    }

    /// Smooth weighted round-robin over the healthy backends that still have budget: each
    /// backend gets connections in proportion to its weight, interleaved rather than in bursts;
    /// an unhealthy backend takes no part (its credit is frozen) until it is healthy again.
    fn pick_backend_any(&self, u: Usable, eligible: Eligible<'_>) -> Option<usize> {
        let takes_part = |i: &usize| self.usable(*i, u) && eligible.admits(*i);
        // #39: a busy pool's budget is used up, and each waiting checkout asks at least twice
        // (before it queues, and as it starts to wait): nothing to pick then, and the credits
        // are left as they are rather than raised for a round nobody got (the scans below
        // read every backend's health four times or more).
        if self.backends.iter().enumerate().all(|(i, b)| b.budget.full() || !takes_part(&i)) {
            return None;
        }
        let eligible = || (0..self.backends.len()).filter(takes_part).filter_map(|i| Some((i, self.backends.get(i)?)));
        let total: i64 = eligible().map(|(_, b)| b.weight).sum();
        for (_, b) in eligible() {
            b.current.set(b.current.get() + b.weight);
        }
        // Highest credit first, the lower index first among equals; each next backend is the
        // first after the last one tried in that order. Found by a scan per try rather than a
        // sorted list: a waiting checkout picks at least twice (#39: the list was an
        // allocation and a free each time), and a pool has a handful of backends.
        let rank = |i: usize, b: &BackendSlot| (b.current.get(), std::cmp::Reverse(i));
        let mut tried = None;
        while let Some((i, b)) =
            eligible().filter(|&(i, b)| tried.is_none_or(|t| rank(i, b) < t)).max_by_key(|&(i, b)| rank(i, b))
        {
            // Not a unit just given up for another core.
            if !self.waiters.yielding(rt::now) && b.budget.try_acquire() {
                b.current.set(b.current.get() - total);
                return Some(i);
            }
            tried = Some(rank(i, b));
        }
        None
    }

    /// Borrows a connection speaking `protocol`, opening one if the budget allows, else waiting
    /// for a checkin until `deadline`.
    /// On a pass-through pool the connection is logged in as `who` and only ever lent to `who`.
    pub async fn checkout(
        self: &Rc<Self>,
        protocol: Protocol,
        who: Option<&PassThrough>,
        deadline: Instant,
    ) -> Result<Conn, PoolError> {
        self.checkout_where(protocol, who, deadline, Eligible::ANY, &Shape::default(), None).await
    }

    /// A checkout's first look taken before any future of it is built (#39): a connection idle
    /// on a usable backend is lent here, in the turn it was asked for, and the checkout is
    /// done; else what the look found goes on to [`CorePool::checkout_shaped`].
    pub fn lend_now(&self, protocol: Protocol, who: Option<&PassThrough>) -> Result<Conn, Looked> {
        match self.first_look(protocol, who, Eligible::ANY) {
            Some(Ok(conn)) => Ok(self.lent_at_once(conn)),
            Some(Err(next)) => Err(Looked(Some(next))),
            None => Err(Looked(None)),
        }
    }

    /// [`CorePool::checkout`] for a statement of `shape`, which the pool's limiter may hold
    /// back (#41): the permit it takes rides with the connection until its checkin or close.
    /// `looked`: what [`CorePool::lend_now`] found on this pool, in this same turn.
    pub async fn checkout_shaped(
        self: &Rc<Self>,
        protocol: Protocol,
        who: Option<&PassThrough>,
        deadline: Instant,
        shape: &Shape<'_>,
        looked: Option<Looked>,
    ) -> Result<Conn, PoolError> {
        self.checkout_where(protocol, who, deadline, Eligible::ANY, shape, looked).await
    }

    /// Borrows a connection to a backend `eligible` accepts (see [`CorePool::checkout`]);
    /// `looked`: the checkout's first look, taken with an `eligible` that accepts any backend.
    async fn checkout_where(
        self: &Rc<Self>,
        protocol: Protocol,
        who: Option<&PassThrough>,
        deadline: Instant,
        eligible: Eligible<'_>,
        shape: &Shape<'_>,
        looked: Option<Looked>,
    ) -> Result<Conn, PoolError> {
        // #39: the usual checkout finds a connection idle and is done here, in the turn it was
        // asked in: no pause to pass, no permit to wait for, no queue, no clock read.
        let first = match looked {
            Some(Looked(first)) => first,
            None => match self.first_look(protocol, who, eligible) {
                Some(Ok(conn)) => return Ok(self.lent_at_once(conn)),
                Some(Err(next)) => Some(next),
                None => None,
            },
        };
        // metrics: acquire count, queue depth while waiting, wait time, timeouts, lent connections.
        let slot = self.counters.acquire_started();
        let started = rt::now();
        // A paused pool holds the checkout; the pause does not count against its deadline.
        let held = self.gate.pass().await;
        let deadline = deadline + held;
        if self.replaced.get() {
            self.counters.acquire_finished(rt::since(started));
            return Err(PoolError::Replaced(self.config.name.clone()));
        }
        // #41: the shape's permit first, so a statement held back holds no connection.
        let permit = match &self.limiter {
            Some(gate) => match gate.admit(shape, deadline, &self.config.name).await {
                Ok(p) => Some(p),
                Err(e) => {
                    self.counters.acquire_finished(rt::since(started));
                    self.counters.acquire_limited(); // metrics
                    return Err(e);
                }
            },
            None => None,
        };
        let mut queueing = admit::Queueing::new(slot, self.limiter.as_deref(), shape);
        let mut res = self.acquire_writable(protocol, who, deadline, &mut queueing, eligible, first).await;
        drop(queueing);
        self.counters.acquire_finished(rt::since(started));
        match &mut res {
            Ok(c) => self.lend(c, permit),
            Err(PoolError::Timeout { .. }) => self.counters.acquire_timed_out(),
            Err(PoolError::Limited { .. }) => self.counters.acquire_limited(), // the queue's (#41)
            Err(_) => {}
        }
        res
    }

    /// A checkout's first look, taken before anything of it can wait: `None` when something
    /// may hold it first (a pause, a reload, the shape limiter, a failover); else what it
    /// found, for the slow path to go on from (its choice of a backend advanced the balance
    /// credits, and an `Open` holds a budget unit).
    fn first_look(
        &self,
        protocol: Protocol,
        who: Option<&PassThrough>,
        eligible: Eligible<'_>,
    ) -> Option<Result<Conn, Next>> {
        if self.gate.is_paused() || self.replaced.get() || self.limiter.is_some() {
            return None;
        }
        let u = self.usable_now();
        if u.floor == Floor::Nothing {
            return None;
        }
        Some(self.look(u, protocol, who, eligible))
    }

    /// `conn`, found by a checkout's first look, goes to it (metrics: an acquire that waited
    /// for nothing).
    fn lent_at_once(&self, mut conn: Conn) -> Conn {
        drop(self.counters.acquire_started());
        // Nothing awaited since the request: by the turn's clock, no time passed.
        self.counters.acquire_finished(Duration::ZERO);
        self.lend(&mut conn, None);
        conn
    }

    /// `conn` goes to the checkout, with the shape's `permit` if it took one (metrics).
    fn lend(&self, conn: &mut Conn, permit: Option<admit::Permit>) {
        conn.lease.permit = permit.map(admit::Permit::lent);
        if let Some(b) = self.backends.get(conn.backend()) {
            b.counters.checked_out();
            b.outstanding.set(b.outstanding.get() + 1);
        }
    }

    /// After a look found nothing to take: a new connection if the look holds a unit for one,
    /// else one waited for; and, failover (#40), waiting (up to `failover_wait`, on top of
    /// `deadline`) while the pool has no writable backend, also when the backend it chose was
    /// found down on connecting. Only a checkout waits and moves, never a statement: nothing
    /// was sent anywhere yet. `first`: the checkout's first look, if it took one.
    async fn acquire_writable(
        self: &Rc<Self>,
        protocol: Protocol,
        who: Option<&PassThrough>,
        deadline: Instant,
        slot: &mut admit::Queueing<'_>,
        eligible: Eligible<'_>,
        mut first: Option<Next>,
    ) -> Result<Conn, PoolError> {
        let mut wait = failover::FailoverWait::new(self.config.timeouts.failover_wait);
        let mut deadline = deadline;
        loop {
            if self.replaced.get() {
                return Err(PoolError::Replaced(self.config.name.clone()));
            }
            let next = match first.take() {
                Some(next) => next,
                None => {
                    // health, failover: read once for the whole look (a few atomic loads each time).
                    let u = self.usable_now();
                    if u.floor == Floor::Nothing {
                        match wait.pause().await {
                            Some(waited) => deadline += waited,
                            None => return Err(wait.exhausted(&self.config.name, self.backend_list())),
                        }
                        continue;
                    }
                    match self.look(u, protocol, who, eligible) {
                        Ok(conn) => return Ok(conn),
                        Err(next) => next,
                    }
                }
            };
            // #39: the open and the wait awaited here, not through a layer of their own that
            // every poll of a waiting checkout would pass twice.
            let got = match next {
                Next::Open(picked) => self.open_healthy(picked, protocol, who, deadline).await.map(Some),
                Next::Wait(u) => match self.queue(deadline, slot) {
                    Ok(started) => self.wait_in_line(u, protocol, who, deadline, eligible, started).await,
                    Err(e) => Err(e),
                },
            };
            match got {
                Ok(Some(conn)) => return Ok(conn),
                Ok(None) => {}
                Err(PoolError::Connect { .. }) if self.awaits_failover() && wait.has_time() => {}
                Err(e) => return Err(e),
            }
        }
    }

    /// What a look finds without waiting: an idle connection, taken, else what the checkout does
    /// next. First for the backend the balance policy chooses (an idle connection to it, else a
    /// unit of its budget for a new one), then for any eligible backend. `u`: the backends'
    /// health read in this same turn, with a writable backend to lend.
    fn look(
        &self,
        u: Usable,
        protocol: Protocol,
        who: Option<&PassThrough>,
        eligible: Eligible<'_>,
    ) -> Result<Conn, Next> {
        let user = self.key_of(who);
        // #41: first come, first served: the idle connections woken waiters have yet to take
        // are theirs, the others anyone's (see `Waiters::unclaimed`); while they wait for
        // them, a look takes none.
        let fair = self.waiters.unclaimed(self.idle.borrow().len());
        let take = |eligible: Eligible<'_>| if fair { self.take_idle(u, protocol, user, eligible) } else { None };
        if let Some(i) = self.choose(u, eligible) {
            if let Some(c) = take(Eligible(Some(&|b| b == i))) {
                return Ok(c);
            }
            if !self.waiters.yielding(rt::now) && self.backends.get(i).is_some_and(|b| b.budget.try_acquire()) {
                if let Some(picked) = self.with_user_unit(i, user) {
                    return Err(Next::Open(picked));
                }
            }
        }
        if let Some(c) = take(eligible) {
            return Ok(c);
        }
        match self.pick_backend(u, user, eligible) {
            Some(picked) => Err(Next::Open(picked)),
            None => Err(Next::Wait(u)),
        }
    }

    /// A checkout whose look in this same turn found nothing to take joins the line at the
    /// instant returned, unless nothing can serve it or the line ahead outlasts its `deadline`.
    fn queue(&self, deadline: Instant, slot: &mut admit::Queueing<'_>) -> Result<Instant, PoolError> {
        if self.backends.is_empty() {
            return Err(PoolError::NoBackend(self.config.name.clone()));
        }
        let started = rt::now();
        if let Some(over) = self.waiters.beyond(deadline, started) {
            // #41: the line ahead outlasts the deadline: turned away now, not at the deadline.
            return Err(PoolError::Limited { pool: self.config.name.clone(), over, waited_ms: 0 });
        }
        slot.queue(); // metrics
        Ok(started)
    }

    /// A wait in this core's queue and the pool's line, from `started` (see
    /// [`CorePool::queue`]), until a unit or an idle connection is found, or `deadline`; `u`:
    /// the backends' health as the look that found nothing read it. `None`: the pool awaits a
    /// failover (see [`CorePool::acquire_writable`]).
    async fn wait_in_line(
        &self,
        mut u: Usable,
        protocol: Protocol,
        who: Option<&PassThrough>,
        deadline: Instant,
        eligible: Eligible<'_>,
        started: Instant,
    ) -> Result<Option<Conn>, PoolError> {
        let user = self.key_of(who);
        let _wanting = Wanting::new(&self.backends, &self.wanting_here);
        let mut waiting = Waiting::new(&self.waiters, started, Some(deadline));
        // One timer for the whole wait, not one per wake-up: arming one is an insert into the
        // core's timer map, and a waiter is woken often (a unit another took first, the
        // recheck for budget freed by another core) (#39). Armed only if the core's recheck
        // timer does not watch the deadline (see `waiters::Waiting::wait`).
        let mut timer = rt::sleep_until(deadline);
        // The first look is right after queueing, before any wait: from then on a unit another
        // core frees calls this core (it reads the line's heads after freeing it), and one freed
        // before is found here (#41). Only the budget: nothing of this core changed meanwhile.
        let mut woke = None;
        loop {
            if let Some(wake) = woke {
                u = self.usable_now(); // health, failover: once per look
                if let Some(c) = self.take_idle(u, protocol, user, eligible) {
                    self.found(wake);
                    return Ok(Some(c));
                }
                if u.floor == Floor::Nothing {
                    return Ok(None);
                }
                if let Some(user) = user {
                    // An idle connection of another user holds a unit this user may need: it
                    // goes once this user has waited a round, so users share the pool-wide cap.
                    self.close_idle_of_others(user);
                }
            }
            if let Some(picked) = self.pick_backend(u, user, eligible) {
                woke.into_iter().for_each(|wake| self.found(wake));
                // Out of the queue before the connect: a unit freed meanwhile goes to the next waiter.
                drop(waiting);
                return self.open_healthy(picked, protocol, who, deadline).await.map(Some);
            }
            if woke == Some(None) {
                self.waiters.deadline_hit(rt::now()); // #41: arms the early refusal
                return Err(PoolError::Timeout {
                    pool: self.config.name.clone(),
                    waited_ms: rt::since(started).as_millis(),
                });
            }
            woke = Some(waiting.wait(Some(&mut timer)).await);
        }
    }

    /// A waiting checkout found a connection or a unit after `wake` (`None`: its deadline).
    /// metrics: one found by the recheck alone was freed without a wake reaching it (#41).
    fn found(&self, wake: Option<Wake>) {
        if wake == Some(Wake::Rechecked) {
            self.counters.found_by_recheck();
        }
    }

    /// The warmest idle connection for `protocol` on a usable backend. A connection the server
    /// closed or wrote to while it sat idle (a stopped or restarted backend) is dropped here
    /// rather than lent, so a statement never goes down a dead connection it could have avoided.
    /// The check reads the state of the receive `checkin` posted (no system call); connections
    /// used within `idle_check_interval` skip it. On a pass-through pool only connections logged in as `user` are taken.
    fn take_idle(&self, u: Usable, protocol: Protocol, user: Option<&str>, eligible: Eligible<'_>) -> Option<Conn> {
        loop {
            let conn = {
                let mut idle = self.idle.borrow_mut();
                // #39: with every backend usable and any eligible (nearly every checkout), a
                // connection fits by its protocol and user alone: nothing is called for it.
                let pos = idle.iter().rposition(|c| {
                    c.protocol() == protocol
                        && c.lease.user.as_deref() == user
                        && self.usable(c.backend(), u)
                        && eligible.admits(c.backend())
                })?;
                // The warmest fits nearly always: popped. Another is removed in order, so the
                // list stays warmest last.
                if pos + 1 == idle.len() {
                    idle.pop()?
                } else {
                    idle.remove(pos)
                }
            };
            // The receive's state first: reading it is cheaper than the clock's arithmetic, and
            // it answers for nearly every connection (#39).
            if rt::idle_stream_usable(&conn.stream)
                || rt::now().saturating_duration_since(conn.last_used) < self.config.timeouts.idle_check
            {
                return Some(conn);
            }
            drop(conn); // its budget unit wakes a waiter
        }
    }

    /// health: opens on backend `first`; when it refused the connection (it is then marked
    /// down, see `BackendSlot::connect_failed`) and another backend is healthy, tries that one
    /// instead, so a dead backend costs the client nothing but a refused connect. Each retry
    /// follows a new mark, so there are at most as many attempts as backends.
    async fn open_healthy(
        &self,
        first: Picked,
        protocol: Protocol,
        who: Option<&PassThrough>,
        deadline: Instant,
    ) -> Result<Conn, PoolError> {
        let mut picked = first;
        loop {
            let index = picked.index;
            // Boxed: opening (connect and login) is a future of ~10 KB that every
            // statement's future would otherwise carry and copy on each move, though a checkout
            // rarely opens a connection (#21: it was most of the user-space instructions).
            match Box::pin(self.open(picked, protocol, who, deadline)).await {
                Err(e @ PoolError::Connect { .. }) if self.marked_down(index) && self.has_healthy_backend() => {
                    match self.pick_backend(self.usable_now(), self.key_of(who), Eligible::ANY) {
                        Some(next) => picked = next,
                        None => return Err(e),
                    }
                }
                other => return other,
            }
        }
    }

    /// Marks a new connection with the pool's RECONNECT epoch.
    fn stamped(&self, mut conn: Conn) -> Conn {
        conn.lease.epoch = self.gate.epoch();
        conn
    }

    /// Opens a connection on the picked backend, whose budget units it holds from then on.
    async fn open(
        &self,
        picked: Picked,
        protocol: Protocol,
        who: Option<&PassThrough>,
        deadline: Instant,
    ) -> Result<Conn, PoolError> {
        let Picked { index, unit: guard } = picked;
        let Some(slot) = self.backends.get(index) else {
            return Err(PoolError::NoBackend(self.config.name.clone()));
        };
        let connect_deadline = deadline.min(rt::now() + self.config.timeouts.connect);
        let _opening = Opening::new(&slot.outstanding);
        let who = who.filter(|_| self.passes_through());
        // #39: one another core gave up for this core's waiters, if any, rather than a login.
        let guard = match who {
            None => match self.take_handed(index, guard) {
                Ok(conn) => return Ok(self.learned_from(conn, who)),
                Err(guard) => guard,
            },
            Some(_) => guard,
        };
        let conn = match protocol {
            Protocol::Postgres => {
                pg::connect(&self.config, slot.addr, &slot.label, index, guard, who, connect_deadline).await
            }
            Protocol::MySql => {
                mysql::connect(&self.config, slot.addr, &slot.label, index, guard, who, connect_deadline).await
            }
        };
        let conn = conn.inspect_err(|e| slot.connect_failed(e, connect_deadline))?; // metrics, health
        Ok(self.learned_from(self.stamped(conn), who))
    }

    /// `conn`, the first this core opened or took, its server's startup parameters learned:
    /// what logins to this pool are told (a pass-through login's own are not the pool's).
    fn learned_from(&self, conn: Conn, who: Option<&PassThrough>) -> Conn {
        if self.server_params.borrow().is_some() {
            return conn;
        }
        let params = match conn.info() {
            ConnInfo::Pg(_) if who.is_some() => return conn,
            ConnInfo::Pg(info) => info.params.clone(),
            ConnInfo::MySql(info) => vec![
                ("server_version".to_owned(), info.server_version.clone()),
                ("charset".to_owned(), info.charset.to_string()),
                // The login's status flags: NO_BACKSLASH_ESCAPES (and, on MariaDB, ANSI_QUOTES)
                // there is the server's global sql_mode, which sessions start lexing in (#19).
                ("status".to_owned(), info.status.to_string()),
            ],
        };
        *self.server_params.borrow_mut() = Some(Rc::new(params));
        conn
    }

    /// A server connection a former process of the router handed over with the session that
    /// owns it (#40), lent to that session as if this core had opened it: it holds a unit of
    /// its backend's budget (over the limit if need be: the server has the connection either
    /// way) and is counted as checked out. `None` when no backend of this pool is at `addr`.
    pub fn adopt(&self, stream: rt::Stream, addr: SocketAddr, info: ConnInfo, user: Option<&str>) -> Option<Conn> {
        let index = self.backends.iter().position(|b| b.addr == addr)?;
        let slot = self.backends.get(index)?;
        slot.budget.take();
        let user_budget = user.and_then(|u| self.user_budget(index, u));
        if let Some(b) = &user_budget {
            b.take();
        }
        let unit = conn::BudgetUnit::new(slot.budget.clone(), user_budget, self.waiters.clone());
        let mut conn = self.stamped(Conn::new(stream, addr, index, info, unit));
        conn.lease.user = user.map(Rc::from);
        slot.counters.checked_out();
        slot.outstanding.set(slot.outstanding.get() + 1);
        Some(conn)
    }

    /// Returns a connection; a connection that is not `reusable` is closed instead, and so is
    /// one upkeep found owed to another core (see [`CorePool::maintain`]).
    pub fn checkin(&self, mut conn: Conn, reusable: bool) {
        // #41: the shape's permit is given back, its time learned from.
        conn.lease.permit = None;
        // #39: upkeep found this core over its part of the budget another core waits for
        // (counted with this connection still lent).
        let owed = self.owes.get() && self.over_share(conn.backend(), 0);
        if owed {
            self.owes.set(false);
        }
        if let Some(b) = self.backends.get(conn.backend()) {
            b.counters.checked_in(); // metrics
            b.outstanding.set(b.outstanding.get().saturating_sub(1));
        }
        // health, failover: the next checkout moves off a backend marked down or found read-only.
        let healthy = self.usable(conn.backend(), self.usable_now());
        // A replaced pool lends nothing again, a paused one gives its servers back, and a
        // connection older than a RECONNECT is closed.
        let letting_go = self.letting_go_until.get().is_some_and(|until| rt::now() < until);
        let keep =
            !self.replaced.get() && !self.gate.is_paused() && conn.lease.epoch == self.gate.epoch() && !letting_go;
        let reuse = reusable && !conn.broken && healthy && keep;
        // One clock read, if any, for the overtaking check and the pace of the wake below.
        let now = std::cell::OnceCell::new();
        let now = || *now.get_or_init(rt::now);
        // #41: or another core's waiter was overtaken by this core's by more than its slack
        // (which the split by demand above keeps rare): the connection is closed for it, and
        // the close calls it.
        let queued = self.waiters.queued();
        if owed || (reuse && queued && self.waiters.overtaken(now)) {
            self.give_up(conn);
        } else if reuse {
            // The kernel watches it while it sits idle: a server closing it or writing to it
            // completes this receive, which `take_idle` looks at without a system call.
            rt::watch(&mut conn.stream);
            self.idle.borrow_mut().push(conn);
            if queued {
                self.waiters.wake_one_at(&now);
            } else {
                self.waiters.freed_unqueued();
            }
        } else {
            drop(conn); // its budget unit wakes a waiter
        }
    }

    /// Periodic upkeep: closes connections idle since before `cutoff` (beyond this core's
    /// share of `min_connections`) and those of unhealthy backends, and gives one connection up
    /// for another core that waits for the budget: an idle one unlent for [`SPARE_AFTER`], or,
    /// while this core holds more than its part (see [`CorePool::over_share`]), any idle one or
    /// else the next one checked in. Runs on every upkeep tick, so the usual case (nothing
    /// stale, nobody else waiting) walks the idle list without an allocation (#39).
    pub fn maintain(&self, cutoff: Instant) {
        if let Some(before) = rt::now().checked_sub(HANDED_FOR) {
            self.backends.iter().for_each(|b| b.budget.close_handed_before(before));
        }
        if !self.idle.borrow().is_empty() {
            let u = self.usable_now(); // health: close idle connections of unhealthy backends
            let stale = self.idle.borrow().iter().any(|c| c.last_used < cutoff || !self.usable(c.backend(), u));
            if stale {
                self.close_stale(cutoff, u);
            }
        }
        // Only when the budget is used up: with room, the waiting core opens its own.
        let short = |i: usize| self.backends.get(i).is_some_and(|b| !b.budget.has_room());
        let over = |slack: u32| (0..self.backends.len()).find(|&i| short(i) && self.over_share(i, slack));
        // Past the even split by more than one: given up at once. By less (an odd split, a
        // pool of one): only once the other core waited for STARVED_TICKS ticks in a row, so
        // such a split trades a connection at that pace rather than every tick.
        let uneven = over(0);
        let starved = if uneven.is_some() { self.starved_ticks.get() + 1 } else { 0 };
        self.starved_ticks.set(starved);
        let over = over(1).or_else(|| uneven.filter(|_| starved >= STARVED_TICKS));
        if over.is_some() {
            self.starved_ticks.set(0);
        }
        let spare_before = rt::now().checked_sub(SPARE_AFTER);
        let give = self.idle.borrow().iter().position(|c| {
            let spare = spare_before.is_some_and(|before| c.last_used < before) && self.wanted_elsewhere(c.backend());
            spare || Some(c.backend()) == over
        });
        match give {
            Some(i) => {
                // In order: the idle list stays warmest last for `take_idle`.
                let conn = self.idle.borrow_mut().remove(i);
                self.give_up(conn);
            }
            None => self.owes.set(over.is_some()),
        }
    }

    /// When upkeep must look at this pool again, `maintain` having run at `now` on one of
    /// `cores` cores (#39: upkeep runs when something is due, not on a periodic tick).
    fn next_upkeep(&self, now: Instant, cores: usize) -> NextUpkeep {
        let timeouts = &self.config.timeouts;
        // A connection checked in later is due after this: looking again then finds it.
        let mut by = now + timeouts.idle;
        let mut follow = self.owes.get() || self.starved_ticks.get() > 0;
        {
            let idle = self.idle.borrow();
            if !idle.is_empty() {
                by = by.min(now + self.config.health.interval); // health: idle ones of a backend gone down
            }
            let cutoff = now.checked_sub(timeouts.idle).unwrap_or(now);
            for c in idle.iter() {
                if c.last_used >= cutoff {
                    by = by.min(c.last_used + timeouts.idle);
                }
                // An idle connection becomes spare for a core that waits (see `maintain`): at
                // that moment, then as long as it stays spare, in case one starts waiting.
                match c.last_used.checked_add(SPARE_AFTER) {
                    Some(spare) if spare > now => by = by.min(spare),
                    _ => follow = true,
                }
            }
        }
        // The trade: while another core waits for a backend, or could start to while this
        // core holds more than an even split of a used-up budget, upkeep follows it closely.
        let cores = u32::try_from(cores.max(1)).unwrap_or(u32::MAX);
        let held = |i: usize, b: &BackendSlot| {
            let idle = self.idle.borrow().iter().filter(|c| c.backend() == i).count();
            u32::try_from(idle).unwrap_or(u32::MAX).saturating_add(b.outstanding.get())
        };
        follow = follow
            || self.backends.iter().enumerate().any(|(i, b)| {
                self.wanted_elsewhere(i) || (!b.budget.has_room() && held(i, b).saturating_mul(cores) > b.budget.used())
            });
        NextUpkeep { by: Some(by), follow }
    }

    /// Closes the idle connections of unusable backends, and those idle since before `cutoff`
    /// beyond this core's share of `min_connections`.
    fn close_stale(&self, cutoff: Instant, u: Usable) {
        let share = self.min_share.get() as usize;
        // Kept per (backend, user): on a pass-through pool each user keeps its own minimum.
        let mut kept: HashMap<(usize, Option<Rc<str>>), usize> = HashMap::new();
        let mut idle = self.idle.borrow_mut();
        // Most recently used last: walking backwards keeps the warmest as the minimum.
        let keep: Vec<bool> = idle
            .iter()
            .rev()
            .map(|c| {
                if !self.usable(c.backend(), u) {
                    return false;
                }
                let k = kept.entry((c.backend(), c.lease.user.clone())).or_default();
                let keep = c.last_used >= cutoff || *k < share;
                *k += usize::from(keep);
                keep
            })
            .collect();
        let mut flags = keep.into_iter().rev();
        idle.retain(|_| flags.next().unwrap_or(false));
    }

    /// This core's share of a per-backend `min_connections` spread over `cores` cores: core
    /// `index` gets `min / cores`, plus one for the first `min % cores` cores.
    pub fn min_share(min: u32, cores: usize, index: usize) -> u32 {
        let cores = u32::try_from(cores.max(1)).unwrap_or(u32::MAX);
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        min / cores + u32::from(index < min % cores)
    }

    /// Opens connections speaking `protocol` until this core holds `share` idle connections
    /// per backend (its part of `min_connections`, see [`CorePool::min_share`]); `maintain`
    /// keeps that many open from then on. Meant to run on the core's background queue when
    /// pools are built. Stops early when a backend's budget is used up; returns how many
    /// connections it opened, or the first connect error.
    pub async fn prewarm(self: &Rc<Self>, protocol: Protocol, share: u32) -> Result<usize, PoolError> {
        self.min_share.set(share);
        if self.passes_through() {
            // No client, no identity to open connections as: each user's first login opens
            // its connections, and `maintain` keeps `share` of them per user from then on.
            return Ok(0);
        }
        let mut opened = 0;
        for (index, slot) in self.backends.iter().enumerate() {
            let held = || self.idle.borrow().iter().filter(|c| c.backend() == index).count();
            while held() < share as usize {
                if !slot.budget.try_acquire() {
                    break;
                }
                let before = held();
                let picked = Picked::new(index, slot, None, &self.waiters);
                let conn = self.open(picked, protocol, None, rt::now() + self.config.timeouts.connect).await?;
                self.checkin(conn, true);
                if held() <= before {
                    // Another core is short of this backend's budget: let it have it.
                    break;
                }
                opened += 1;
            }
        }
        Ok(opened)
    }
}

/// The shape limiter of a pool configured with `config`, if it limits anything: not in session
/// mode, where a connection is lent for a whole session and no statement's limit could help.
fn limiter(config: &PoolConfig) -> Option<Rc<admit::Gate>> {
    let limits = &config.shape_limits;
    let capacity = config.limits.max_connections.get().saturating_mul(config.backends.len().max(1) as u32);
    (limits.any() && config.mode != crate::config::PoolMode::Session).then(|| admit::Gate::new(limits, capacity))
}

/// What a checkout's first look ([`CorePool::lend_now`]) found short of a connection, for the
/// rest of the checkout ([`CorePool::checkout_shaped`]) to go on from: a unit held for a new
/// connection (given back if this is dropped), the health read for a wait, or nothing when
/// something may hold the checkout first (a pause, a reload, the shape limiter, a failover).
pub struct Looked(Option<Next>);

/// What a checkout that found no idle connection does next (see [`CorePool::look`]).
enum Next {
    /// Opens one on a backend, a unit of whose budget the look took.
    Open(Picked),
    /// Waits, by the health the look read.
    Wait(Usable),
}

/// A backend chosen for a new connection, with the units taken for it (the pool-wide one in
/// the backend's budget, the user's on a pass-through pool), held as the connection will hold
/// them: a pick dropped unused (a [`Looked`] never finished) gives them back.
struct Picked {
    index: usize,
    unit: conn::BudgetUnit,
}

impl Picked {
    /// Backend `index` (`slot`), whose pool-wide unit the caller took, with `user_budget`'s unit
    /// if any.
    fn new(index: usize, slot: &BackendSlot, user_budget: Option<Arc<Budget>>, waiters: &Rc<Waiters>) -> Self {
        Self { index, unit: conn::BudgetUnit::new(slot.budget.clone(), user_budget, waiters.clone()) }
    }
}

/// All pools of one core, by name.
#[derive(Default)]
pub struct PoolSet {
    /// Looked up per statement (the route's pool, its counters): ahash, not SipHash, as the
    /// digest table (#39). Only the configuration's names are keys, so a client's names cannot
    /// flood it.
    pools: HashMap<String, Rc<CorePool>, ahash::RandomState>,
}

impl PoolSet {
    /// Builds the core's pools for `config`, keeping the live pool (and its idle connections) of
    /// every pool whose configuration did not change.
    pub fn build(config: &Config, budgets: &BudgetRegistry, previous: Option<&PoolSet>) -> Self {
        let pools = config
            .pools
            .iter()
            .map(|p| {
                let old = previous.and_then(|prev| prev.pools.get(&p.name));
                let kept = old.filter(|old| old.config == *p).cloned();
                if let (Some(old), None) = (old, &kept) {
                    old.replaced.set(true);
                }
                // metrics: a rebuilt pool keeps its predecessor's counters, and its pause state.
                let counters = old.map_or_else(|| Rc::new(PoolCounters::new(&p.name)), |o| o.counters.clone());
                let gate = old.map_or_else(Rc::default, |o| o.gate.clone());
                (p.name.clone(), kept.unwrap_or_else(|| Rc::new(CorePool::build(p, budgets, counters, gate))))
            })
            .collect();
        let mut set = Self { pools };
        if let Some(previous) = previous {
            set.carry_on_demand(config, budgets, previous);
        }
        set
    }

    /// The pool called `name`.
    pub fn get(&self, name: &str) -> Option<&Rc<CorePool>> {
        self.pools.get(name)
    }

    /// Every pool.
    pub fn iter(&self) -> impl Iterator<Item = &Rc<CorePool>> {
        self.pools.values()
    }

    /// Upkeep of every pool (see [`CorePool::maintain`]) at `now` on one of `cores` cores;
    /// returns when it must run again.
    pub fn maintain(&self, now: Instant, cores: usize) -> NextUpkeep {
        let mut next = NextUpkeep { by: None, follow: false };
        for p in self.pools.values() {
            p.maintain(now.checked_sub(p.config.timeouts.idle).unwrap_or(now));
            let due = p.next_upkeep(now, cores);
            let by = next.by.into_iter().chain(due.by).min();
            next = NextUpkeep { by, follow: next.follow || due.follow || p.is_on_demand() };
        }
        next
    }
}

/// When a core's pool upkeep must run again.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NextUpkeep {
    /// At the latest: the first idle connection past its timeout, the next look at the health
    /// of idle connections, the next idle connection to become spare (`None`: no pool).
    pub by: Option<Instant>,
    /// Meanwhile, also every [`NextUpkeep::FOLLOW`]: the trade between cores needs following
    /// (another core waits, or could come to wait for a budget this core holds more than an
    /// even split of), or a pool made from the template may be left unused (it is dropped at
    /// the next upkeep).
    pub follow: bool,
}

impl NextUpkeep {
    /// How often upkeep follows what needs following (the former upkeep tick's period:
    /// [`STARVED_TICKS`] counts these looks).
    pub const FOLLOW: Duration = Duration::from_millis(5);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::{pin, Pin};
    use std::sync::mpsc;
    use std::task::{Context, Poll, Waker};

    #[test]
    fn upkeep_is_next_due_at_the_idle_timeout_and_follows_the_trade_only_when_it_may_move() {
        let text = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\nusername = \"u\"\n\
                    password = \"p\"\nmax_connections = 1\nidle_timeout = \"7s\"\n\
                    backends = [{ host = \"127.0.0.1\", port = 5432 }]\n[routing]\ndefault_pool = \"main\"\n";
        let config = Config::parse(text, "test.toml").expect("valid config");
        let set = PoolSet::build(&config, &BudgetRegistry::default(), None);
        let pool = set.get("main").expect("pool");
        let slot = pool.backends.first().expect("a backend");
        let now = rt::now();
        // Nothing idle: a connection checked in later is due after `now + idle_timeout`.
        assert_eq!(set.maintain(now, 2), NextUpkeep { by: Some(now + Duration::from_secs(7)), follow: false });
        slot.budget.take(); // another core holds the only connection
        assert!(!set.maintain(now, 2).follow, "nothing here to give up");
        slot.outstanding.set(1); // this core lends it: another core may come to wait for it
        assert!(set.maintain(now, 2).follow);
        assert!(!set.maintain(now, 1).follow, "no other core");
        slot.outstanding.set(0);
        slot.budget.want(); // another core waits
        assert!(set.maintain(now, 2).follow);
        slot.budget.unwant();
        assert!(!set.maintain(now, 2).follow);
        assert_eq!(PoolSet::default().maintain(now, 2), NextUpkeep { by: None, follow: false });
    }

    /// #39: what a pool worked out of its backends' health stands only until the health moves:
    /// a backend found writable, or every one marked down, is seen at the next read.
    #[test]
    fn the_health_a_pool_read_is_read_again_once_it_moved() {
        let text = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\nusername = \"u\"\n\
                    password = \"p\"\nbackends = [{ host = \"127.0.0.1\", port = 5432 }, { host = \"127.0.0.1\", port = 5433 }]\n\
                    [routing]\ndefault_pool = \"main\"\n";
        let config = Config::parse(text, "test.toml").expect("valid config");
        let set = PoolSet::build(&config, &BudgetRegistry::default(), None);
        let pool = set.get("main").expect("pool");
        let usable = || {
            let u = pool.usable_now();
            [pool.usable(0, u), pool.usable(1, u)]
        };
        let health = |i: usize| pool.backends.get(i).map(|b| b.health.clone()).expect("a backend");
        assert_eq!(usable(), [true, true], "neither role read yet");
        assert!(health(0).set_role_mismatch(false), "the first is the primary");
        assert_eq!(usable(), [true, false], "the unverified one is not lent beside the writable one");
        health(0).connect_failed();
        health(1).connect_failed();
        assert_eq!(usable(), [true, true], "all down: the pool fails open");
    }

    /// Runs `main` with a pool `main` of one backend, `max_connections` 1, on a fresh core,
    /// with a connection to that backend (a loopback socket whose far end stays open), and
    /// returns what it sends.
    fn on_core_with_conn<T, Fut>(main: impl FnOnce(Rc<CorePool>, Conn, mpsc::Sender<T>) -> Fut + Send + 'static) -> T
    where
        T: Send + 'static,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        on_core_with_conns(vec![ConnInfo::Pg(PgInfo::default())], |pool, mut conns, tx| {
            let conn = conns.pop().expect("one connection");
            main(pool, conn, tx)
        })
    }

    /// [`on_core_with_conn`] with a connection per entry of `infos`, in order, and
    /// `max_connections` as many.
    fn on_core_with_conns<T, Fut>(
        infos: Vec<ConnInfo>,
        main: impl FnOnce(Rc<CorePool>, Vec<Conn>, mpsc::Sender<T>) -> Fut + Send + 'static,
    ) -> T
    where
        T: Send + 'static,
        Fut: std::future::Future<Output = ()> + 'static,
    {
        let server = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = server.local_addr().expect("addr");
        let clients: Vec<_> = infos.iter().map(|_| std::net::TcpStream::connect(addr).expect("connect")).collect();
        let far_ends: Vec<_> = clients.iter().map(|_| server.accept().expect("accept")).collect();
        let text = format!(
            "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\nusername = \"u\"\n\
             password = \"p\"\nmax_connections = {}\nbackends = [{{ host = \"127.0.0.1\", port = {} }}]\n\
             [routing]\ndefault_pool = \"main\"\n",
            infos.len(),
            addr.port()
        );
        let config = Config::parse(&text, "test.toml").expect("valid config");
        let (tx, rx) = mpsc::channel();
        let core = rt::spawn_core("pool-test", None, move |_| {
            let set = PoolSet::build(&config, &BudgetRegistry::default(), None);
            let pool = set.get("main").expect("pool").clone();
            let conns = clients
                .into_iter()
                .zip(infos)
                .map(|(client, info)| {
                    let stream = rt::Stream::adopt_backend(std::os::fd::OwnedFd::from(client), None).expect("adopt");
                    pool.adopt(stream, addr, info, None).expect("the pool's backend")
                })
                .collect();
            main(pool, conns, tx)
        })
        .expect("core starts");
        let out = rx.recv_timeout(Duration::from_secs(10)).expect("the core answers in time");
        core.join().expect("the core ends cleanly");
        drop(far_ends);
        out
    }

    fn poll_once<T>(f: Pin<&mut impl std::future::Future<Output = T>>) -> Poll<T> {
        f.poll(&mut Context::from_waker(Waker::noop()))
    }

    /// #39: a checkout that finds a connection idle has it at its first poll, in the turn it
    /// asked in, without joining the wait queue.
    #[test]
    fn an_idle_connection_is_lent_at_the_first_poll_without_queueing() {
        let out = on_core_with_conn(|pool, conn, tx| async move {
            pool.checkin(conn, true);
            let idle_before = pool.idle_count();
            let deadline = rt::now() + Duration::from_secs(5);
            let mut checkout = pin!(pool.checkout(Protocol::Postgres, None, deadline));
            let lent = matches!(poll_once(checkout.as_mut()), Poll::Ready(Ok(_)));
            let queued = pool.waiters.tickets_issued();
            let _ = tx.send((idle_before, lent, queued, pool.idle_count(), pool.lent()));
        });
        assert_eq!(out, (1, true, 0, 0, 1));
    }

    /// #41 and the fast path: a connection checked in while a checkout waits is that
    /// checkout's; one arriving before the woken waiter ran queues behind it, and is served by
    /// the next checkin.
    #[test]
    fn a_waiter_woken_for_a_connection_is_not_overtaken_by_a_later_checkout() {
        let out = on_core_with_conn(|pool, conn, tx| async move {
            let deadline = rt::now() + Duration::from_secs(5);
            let mut first = pin!(pool.checkout(Protocol::Postgres, None, deadline));
            let first_waits = poll_once(first.as_mut()).is_pending();
            pool.checkin(conn, true);
            let mut later = pin!(pool.checkout(Protocol::Postgres, None, deadline));
            let later_waits = poll_once(later.as_mut()).is_pending();
            let Poll::Ready(Ok(conn)) = poll_once(first.as_mut()) else {
                let _ = tx.send((first_waits, later_waits, false, false));
                return;
            };
            let later_still_waits = poll_once(later.as_mut()).is_pending();
            pool.checkin(conn, true);
            let later_served = matches!(poll_once(later.as_mut()), Poll::Ready(Ok(_)));
            let _ = tx.send((first_waits, later_waits, later_still_waits, later_served));
        });
        assert_eq!(out, (true, true, true, true));
    }

    /// #39: the first look taken before the checkout's futures lends an idle connection as the
    /// checkout's first poll did, and lends nothing a pause holds back: the checkout it goes on
    /// to waits for the resume. One acquire is counted per checkout either way.
    #[test]
    fn a_look_before_the_checkout_lends_an_idle_connection_but_not_through_a_pause() {
        let out = on_core_with_conn(|pool, conn, tx| async move {
            let figures = |pool: &CorePool| {
                let snap = pool.metrics_snapshot();
                (pool.idle_count(), pool.lent(), snap.acquires_total, snap.wait.count())
            };
            pool.checkin(conn, true);
            let Ok(conn) = pool.lend_now(Protocol::Postgres, None) else {
                let _ = tx.send(None);
                return;
            };
            let lent = figures(&pool);
            pool.checkin(conn, true);
            pool.gate().pause();
            let Err(looked) = pool.lend_now(Protocol::Postgres, None) else {
                let _ = tx.send(None);
                return;
            };
            let deadline = rt::now() + Duration::from_secs(5);
            let shape = Shape::default();
            let mut checkout = pin!(pool.checkout_shaped(Protocol::Postgres, None, deadline, &shape, Some(looked)));
            let held = poll_once(checkout.as_mut()).is_pending();
            let paused = figures(&pool);
            pool.gate().resume();
            let served = matches!(poll_once(checkout.as_mut()), Poll::Ready(Ok(_)));
            let _ = tx.send(Some((lent, held, paused, served, figures(&pool))));
        });
        assert_eq!(out, Some(((0, 1, 1, 1), true, (1, 0, 2, 1), true, (0, 1, 2, 2))));
    }

    /// #41 and #39: a checkout going on from a look that found the budget used up waits, and
    /// a later look does not take the connection it was woken for: first come, first served.
    #[test]
    fn a_look_before_the_checkout_does_not_overtake_a_woken_waiter() {
        let out = on_core_with_conn(|pool, conn, tx| async move {
            let Err(looked) = pool.lend_now(Protocol::Postgres, None) else {
                let _ = tx.send(None);
                return;
            };
            let (deadline, shape) = (rt::now() + Duration::from_secs(5), Shape::default());
            let mut first = pin!(pool.checkout_shaped(Protocol::Postgres, None, deadline, &shape, Some(looked)));
            let first_waits = poll_once(first.as_mut()).is_pending();
            pool.checkin(conn, true);
            let later_lent = pool.lend_now(Protocol::Postgres, None).is_ok();
            let first_served = matches!(poll_once(first.as_mut()), Poll::Ready(Ok(_)));
            let _ = tx.send(Some((first_waits, later_lent, first_served)));
        });
        assert_eq!(out, Some((true, false, true)));
    }

    /// #39: a checkin that finds nobody queued skips the wake, yet ends the pace's stretch of
    /// waiting as the wake did: the time until a checkout next waits is the clients', not an
    /// interval between units freed.
    #[test]
    fn a_checkin_with_nobody_queued_ends_the_pace_s_stretch_of_waiting() {
        let out = on_core_with_conn(|pool, conn, tx| async move {
            let mut waiting = pin!(pool.checkout(Protocol::Postgres, None, rt::now() + Duration::from_secs(5)));
            let waits = poll_once(waiting.as_mut()).is_pending();
            pool.checkin(conn, true);
            let paced = pool.waiters.pacing();
            let served = match poll_once(waiting.as_mut()) {
                Poll::Ready(Ok(conn)) => {
                    pool.checkin(conn, true);
                    true
                }
                _ => false,
            };
            let _ = tx.send((waits, paced, served, pool.waiters.pacing(), pool.idle_count()));
        });
        assert_eq!(out, (true, true, true, false, 1));
    }

    /// The exact budget (#39): a look that took a unit for a new connection and is dropped
    /// before a checkout goes on from it gives the unit back.
    #[test]
    fn a_look_holding_a_unit_gives_it_back_when_dropped() {
        let out = on_core_with_conn(|pool, conn, tx| async move {
            let budget = pool.backends.first().map(|b| b.budget.clone()).expect("a backend");
            pool.checkin(conn, false); // closed: its unit is free, nothing is idle
            let freed = budget.used();
            let looked = pool.lend_now(Protocol::Postgres, None);
            let held = budget.used();
            let opens = matches!(&looked, Err(Looked(Some(Next::Open(_)))));
            drop(looked);
            let _ = tx.send((freed, held, opens, budget.used()));
        });
        assert_eq!(out, (0, 1, true, 0));
    }

    /// #39: a connection taken from under the warmest (another protocol's) leaves the idle
    /// list warmest last, so each protocol's next checkout still gets its warmest connection.
    #[test]
    fn a_connection_taken_from_under_the_warmest_keeps_the_rest_warmest_last() {
        let pg = |n: u8| ConnInfo::Pg(PgInfo { pid: i32::from(n), ..PgInfo::default() });
        let my = |n: u8| ConnInfo::MySql(MyInfo { thread_id: u32::from(n), ..MyInfo::default() });
        let out = on_core_with_conns(vec![pg(1), pg(2), my(3), my(4)], |pool, conns, tx| async move {
            conns.into_iter().for_each(|c| pool.checkin(c, true)); // warmest last: 1, 2, 3, 4
            let mut order = Vec::new();
            for protocol in [Protocol::Postgres, Protocol::MySql, Protocol::MySql, Protocol::Postgres] {
                let Ok(conn) = pool.lend_now(protocol, None) else { break };
                order.push(match conn.info() {
                    ConnInfo::Pg(i) => i64::from(i.pid),
                    ConnInfo::MySql(i) => i64::from(i.thread_id),
                });
            }
            let _ = tx.send(order);
        });
        assert_eq!(out, [2, 4, 3, 1]);
    }
}
