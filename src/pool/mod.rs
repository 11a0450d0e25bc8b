//! Per-core backend pools: checkout with a deadline, checkin, waiters, the process-wide budget,
//! backend connect + authentication, idle reaping.
//!
//! A core owns its `PoolSet`; connections never leave the core that opened them. Must not depend
//! on routing, session, core or control.

mod budget;
mod conn;
mod pg;

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

pub use budget::{Budget, BudgetRegistry};
pub use conn::{Conn, ConnInfo, PgInfo};
pub use pg::deliver_cancel as deliver_pg_cancel;

use crate::config::{Config, Pool as PoolConfig, Protocol};
use crate::error::{ErrorCode, Origin};
use crate::rt::{self, Event};

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
    /// No backend of the pool resolves to an address.
    #[error("pool \"{0}\" has no reachable backend address")]
    NoBackend(String),
}

impl ErrorCode for PoolError {
    fn code(&self) -> &'static str {
        match self {
            Self::Timeout { .. } => "pool.exhausted",
            Self::Connect { .. } => "pool.connect",
            Self::Auth { .. } => "pool.auth",
            Self::NoBackend(_) => "pool.no_backend",
        }
    }
    fn origin(&self) -> Origin {
        match self {
            Self::Timeout { .. } => Origin::Internal,
            _ => Origin::Backend,
        }
    }
    fn retryable(&self) -> bool {
        matches!(self, Self::Connect { .. })
    }
}

/// How often a waiting checkout looks for budget freed by another core.
const CROSS_CORE_RECHECK: std::time::Duration = std::time::Duration::from_millis(2);

/// Marks every backend budget of a pool as wanted while a checkout waits.
struct Wanting<'a> {
    backends: &'a [BackendSlot],
}

impl<'a> Wanting<'a> {
    fn new(backends: &'a [BackendSlot]) -> Self {
        for b in backends {
            b.budget.want();
        }
        Self { backends }
    }
}

impl Drop for Wanting<'_> {
    fn drop(&mut self) {
        for b in self.backends {
            b.budget.unwant();
        }
    }
}

/// One backend of a pool as this core sees it.
struct BackendSlot {
    addr: SocketAddr,
    label: String,
    budget: Arc<Budget>,
    weight: i64,
    current: Cell<i64>,
}

/// State shared between a pool and the connections it lent out, so a closing connection can
/// wake a waiter (its budget unit is free again).
#[derive(Default)]
pub(crate) struct Waiters {
    queue: RefCell<VecDeque<Event>>,
}

impl Waiters {
    fn wake_one(&self) {
        if let Some(ev) = self.queue.borrow_mut().pop_front() {
            ev.set();
        }
    }
}

/// A pool's core-local slice.
pub struct CorePool {
    /// The pool's configuration.
    pub config: PoolConfig,
    backends: Vec<BackendSlot>,
    idle: RefCell<Vec<Conn>>,
    waiters: Rc<Waiters>,
    /// What the servers reported at startup (PostgreSQL ParameterStatus), from the first
    /// connection opened: clients are greeted with it without borrowing a connection.
    server_params: RefCell<Option<Rc<Vec<(String, String)>>>>,
    /// This core's share of `min_connections` per backend, kept open by `maintain`.
    min_share: Cell<u32>,
}

impl CorePool {
    fn build(config: &PoolConfig, budgets: &BudgetRegistry) -> Self {
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
                    label,
                    weight: i64::from(b.weight.get()),
                    current: Cell::new(0),
                })
            })
            .collect();
        Self { config: config.clone(), backends, idle: RefCell::new(Vec::new()), waiters: Rc::default(), server_params: RefCell::new(None), min_share: Cell::new(0) }
    }

    /// Startup parameters reported by this pool's servers, once a connection was opened.
    pub fn server_params(&self) -> Option<Rc<Vec<(String, String)>>> {
        self.server_params.borrow().clone()
    }

    /// Idle connections held by this core.
    pub fn idle_count(&self) -> usize {
        self.idle.borrow().len()
    }

    /// Smooth weighted round-robin over the backends that still have budget: each backend gets
    /// connections in proportion to its weight, interleaved rather than in bursts.
    fn pick_backend(&self) -> Option<usize> {
        let total: i64 = self.backends.iter().map(|b| b.weight).sum();
        for b in &self.backends {
            b.current.set(b.current.get() + b.weight);
        }
        let order: Vec<usize> = {
            let mut v: Vec<usize> = (0..self.backends.len()).collect();
            v.sort_by_key(|i| std::cmp::Reverse(self.backends.get(*i).map_or(0, |b| b.current.get())));
            v
        };
        for i in order {
            let b = self.backends.get(i)?;
            if b.budget.try_acquire() {
                b.current.set(b.current.get() - total);
                return Some(i);
            }
        }
        None
    }

    /// Borrows a connection speaking `protocol`, opening one if the budget allows, else waiting
    /// for a checkin until `deadline`.
    pub async fn checkout(self: &Rc<Self>, protocol: Protocol, deadline: Instant) -> Result<Conn, PoolError> {
        if let Some(c) = self.take_idle(protocol) {
            return Ok(c);
        }
        if let Some(i) = self.pick_backend() {
            return self.open(i, protocol, deadline).await;
        }
        if self.backends.is_empty() {
            return Err(PoolError::NoBackend(self.config.name.clone()));
        }
        let started = rt::now();
        let _wanting = Wanting::new(&self.backends);
        loop {
            let ev = Event::new();
            self.waiters.queue.borrow_mut().push_back(ev.clone());
            // A unit freed on another core wakes nobody here, so also look again shortly.
            let wake = rt::race(ev.wait(), rt::sleep(CROSS_CORE_RECHECK));
            let timed_out = rt::with_deadline(deadline, wake).await.is_err();
            self.waiters.queue.borrow_mut().retain(|e| !e.same(&ev));
            if let Some(c) = self.take_idle(protocol) {
                return Ok(c);
            }
            if let Some(i) = self.pick_backend() {
                return self.open(i, protocol, deadline).await;
            }
            if timed_out {
                return Err(PoolError::Timeout {
                    pool: self.config.name.clone(),
                    waited_ms: started.elapsed().as_millis(),
                });
            }
        }
    }

    fn take_idle(&self, protocol: Protocol) -> Option<Conn> {
        let mut idle = self.idle.borrow_mut();
        let pos = idle.iter().rposition(|c| c.protocol() == protocol)?;
        Some(idle.swap_remove(pos))
    }

    async fn open(&self, index: usize, protocol: Protocol, deadline: Instant) -> Result<Conn, PoolError> {
        let Some(slot) = self.backends.get(index) else {
            return Err(PoolError::NoBackend(self.config.name.clone()));
        };
        let connect_deadline = deadline.min(rt::now() + self.config.timeouts.connect);
        let guard = conn::BudgetUnit::new(slot.budget.clone(), self.waiters.clone());
        match protocol {
            Protocol::Postgres => {
                let conn = pg::connect(&self.config, slot.addr, &slot.label, index, guard, connect_deadline).await?;
                if self.server_params.borrow().is_none() {
                    let ConnInfo::Pg(info) = &conn.info;
                    *self.server_params.borrow_mut() = Some(Rc::new(info.params.clone()));
                }
                Ok(conn)
            }
            Protocol::MySql => Err(PoolError::Connect {
                pool: self.config.name.clone(),
                addr: slot.label.clone(),
                reason: "MySQL backends are not supported yet".into(),
            }),
        }
    }

    /// Returns a connection; a connection that is not `reusable` is closed instead, and so is
    /// one that another core is waiting for while nobody here is.
    pub fn checkin(&self, conn: Conn, reusable: bool) {
        let local_waiters = !self.waiters.queue.borrow().is_empty();
        let elsewhere = self.backends.get(conn.backend).is_some_and(|b| b.budget.is_wanted());
        if reusable && !conn.broken && (local_waiters || !elsewhere) {
            self.idle.borrow_mut().push(conn);
            self.waiters.wake_one();
        } else {
            drop(conn); // its budget unit wakes a waiter
        }
    }

    /// Periodic upkeep: closes connections idle since before `cutoff` (beyond this core's
    /// share of `min_connections`), and idle connections that another core is waiting for.
    pub fn maintain(&self, cutoff: Instant) {
        let share = self.min_share.get() as usize;
        let mut kept = vec![0usize; self.backends.len()];
        let mut idle = self.idle.borrow_mut();
        // Most recently used last: walking backwards keeps the warmest as the minimum.
        let keep: Vec<bool> = idle
            .iter()
            .rev()
            .map(|c| {
                let wanted = self.backends.get(c.backend).is_some_and(|b| b.budget.is_wanted());
                let Some(k) = kept.get_mut(c.backend) else { return false };
                let keep = !wanted && (c.last_used >= cutoff || *k < share);
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
        let mut opened = 0;
        for (index, slot) in self.backends.iter().enumerate() {
            let held = || self.idle.borrow().iter().filter(|c| c.backend == index).count();
            while held() < share as usize {
                if !slot.budget.try_acquire() {
                    break;
                }
                let before = held();
                let conn = self.open(index, protocol, rt::now() + self.config.timeouts.connect).await?;
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

/// All pools of one core, by name.
#[derive(Default)]
pub struct PoolSet {
    pools: HashMap<String, Rc<CorePool>>,
}

impl PoolSet {
    /// Builds the core's pools for `config`, keeping the live pool (and its idle connections) of
    /// every pool whose configuration did not change.
    pub fn build(config: &Config, budgets: &BudgetRegistry, previous: Option<&PoolSet>) -> Self {
        let pools = config
            .pools
            .iter()
            .map(|p| {
                let kept = previous.and_then(|prev| prev.pools.get(&p.name)).filter(|old| old.config == *p).cloned();
                (p.name.clone(), kept.unwrap_or_else(|| Rc::new(CorePool::build(p, budgets))))
            })
            .collect();
        Self { pools }
    }

    /// The pool called `name`.
    pub fn get(&self, name: &str) -> Option<&Rc<CorePool>> {
        self.pools.get(name)
    }

    /// Every pool.
    pub fn iter(&self) -> impl Iterator<Item = &Rc<CorePool>> {
        self.pools.values()
    }

    /// Periodic upkeep of every pool (see [`CorePool::maintain`]).
    pub fn maintain(&self, now: Instant) {
        for p in self.pools.values() {
            p.maintain(now.checked_sub(p.config.timeouts.idle).unwrap_or(now));
        }
    }
}
