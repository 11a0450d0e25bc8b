//! Process-wide connection budgets: `max_connections` is an exact cap per pool and backend for
//! the whole process, while the connections themselves stay core-local.
//!
//! A core draws one unit from the shared atomic to open a connection and returns it when the
//! connection closes; only connection open/close touches it, never a statement. The registry
//! also holds each pool's line of waiting checkouts across cores (`pool::line`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Instant;

use parking_lot::Mutex;

use super::health::BackendHealth;
use super::line::Line;
use super::moving::Handed;
use super::schema::SchemaGeneration;
use crate::config::Pool as PoolConfig;

/// One (pool, backend) budget shared by every core. Its counts are sequentially consistent with
/// the heads of the pool's line (`line::Seat`): a core that frees a unit and then reads who
/// waits, and one that says it waits and then looks for a unit, cannot both miss the other.
#[derive(Debug)]
pub struct Budget {
    max: AtomicU32,
    used: AtomicU32,
    /// Cores currently waiting for a unit: while non-zero, other cores close connections they
    /// would otherwise keep idle, so a busy core is never starved by an idle one.
    wanted: AtomicU32,
    /// Connections given up for another core and still open (#39), each beside the unit it
    /// freed: the core taking a unit next uses one instead of logging in. Touched only when a
    /// connection moves or opens, never per statement.
    handed: Mutex<Vec<Handed>>,
}

impl Budget {
    fn new(max: u32) -> Arc<Self> {
        Arc::new(Budget {
            max: AtomicU32::new(max),
            used: AtomicU32::new(0),
            wanted: AtomicU32::new(0),
            handed: Mutex::default(),
        })
    }

    /// Leaves `conn` open for the core that takes a unit of this budget next (see [`Handed`]);
    /// called before the unit it held is given back, so no core takes that unit unaware of it.
    pub(crate) fn hand(&self, conn: Handed) {
        self.handed.lock().push(conn);
    }

    /// A connection handed over that a core of a pool configured as `config` at RECONNECT
    /// `epoch` may use, newest first. Those no core of this configuration and epoch may use are
    /// closed (their units are free, so leaving them open would let the connections to the
    /// server outnumber the budget); other fitting ones stay for the next unit taken. Cheap when
    /// nothing was handed: one uncontended lock per connection opened.
    pub(crate) fn take_handed(&self, config: &PoolConfig, epoch: u64) -> Option<Handed> {
        let mut handed = self.handed.lock();
        let found = handed.iter().rposition(|h| h.fits(config, epoch)).map(|i| handed.swap_remove(i));
        let unfit = take_out(&mut handed, |h| !h.fits(config, epoch));
        drop(handed);
        drop(unfit); // closed outside the lock
        found
    }

    /// Closes the connections handed over before `before` that no core took (the checkout they
    /// were given up for went away, or found another): they hold no unit.
    pub(crate) fn close_handed_before(&self, before: Instant) {
        let stale = take_out(&mut self.handed.lock(), |h| !h.since(before));
        drop(stale); // closed outside the lock
    }
    /// Takes one unit if any is left.
    pub fn try_acquire(&self) -> bool {
        let max = self.max.load(Ordering::Relaxed);
        self.used.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |u| (u < max).then_some(u + 1)).is_ok()
    }

    /// Gives one unit back (a connection closed).
    /// Takes a unit whatever the limit: for a connection that exists already (one a former
    /// process handed over, #40), which the server counts either way.
    pub fn take(&self) {
        self.used.fetch_add(1, Ordering::AcqRel);
    }

    pub fn release(&self) {
        let _ = self.used.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |u| u.checked_sub(1));
    }

    /// A core starts waiting for a unit.
    pub fn want(&self) {
        self.wanted.fetch_add(1, Ordering::SeqCst);
    }

    /// A core stopped waiting.
    pub fn unwant(&self) {
        let _ = self.wanted.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |w| w.checked_sub(1));
    }

    /// How many checkouts, on all cores, are waiting for a unit of this budget.
    pub fn wanted(&self) -> u32 {
        self.wanted.load(Ordering::SeqCst)
    }

    /// Whether every unit is taken now, read as a failing [`Budget::try_acquire`] reads it
    /// (sequentially consistent with the line's heads) without attempting to take one.
    pub(crate) fn full(&self) -> bool {
        self.used.load(Ordering::SeqCst) >= self.max.load(Ordering::Relaxed)
    }

    /// Whether a unit is left now.
    pub fn has_room(&self) -> bool {
        self.used.load(Ordering::Acquire) < self.max.load(Ordering::Relaxed)
    }

    /// Connections currently open against this budget, process-wide.
    pub fn used(&self) -> u32 {
        self.used.load(Ordering::Acquire)
    }

    /// A budget that caps nothing, for connections outside every pool's budget (health probes).
    pub(crate) fn unlimited() -> Arc<Budget> {
        Budget::new(u32::MAX)
    }
}

/// The connections of `handed` that `out` picks, taken out of it (without a new list when there
/// are none).
fn take_out(handed: &mut Vec<Handed>, out: impl Fn(&Handed) -> bool) -> Vec<Handed> {
    if !handed.iter().any(&out) {
        return Vec::new();
    }
    let (taken, kept) = std::mem::take(handed).into_iter().partition(|h| out(h));
    *handed = kept;
    taken
}

/// Budgets by (pool name, backend `host:port`).
type BudgetMap = HashMap<(String, String), Arc<Budget>>;

/// Per-user budgets of pass-through pools by (pool name, backend `host:port`, user).
type UserBudgetMap = HashMap<(String, String, String), Arc<Budget>>;

/// Health entries by (pool name, backend `host:port`).
type HealthMap = HashMap<(String, String), Arc<BackendHealth>>;

/// Registry of budgets by (pool, backend address); a reload that changes `max_connections`
/// updates the cap in place so open connections stay counted. It also holds each backend's
/// shared health entry (see `pool::health`), created once and kept across reloads, and the
/// process-wide schema generation (see `pool::schema`).
#[derive(Debug, Clone, Default)]
pub struct BudgetRegistry {
    inner: Arc<Mutex<BudgetMap>>,
    users: Arc<Mutex<UserBudgetMap>>,
    health: Arc<Mutex<HealthMap>>,
    schema: Arc<SchemaGeneration>,
    /// Pools made from `[pool_template]` (#36), by name: how many core-local pool objects of
    /// each exist now, on every core and across reloads (see `pool::on_demand`).
    pub(super) on_demand: Arc<Mutex<HashMap<String, u32>>>,
    /// Each pool's line of waiting checkouts across cores (see `pool::line`), by pool name.
    lines: Arc<Mutex<HashMap<String, Arc<Line>>>>,
}

impl BudgetRegistry {
    /// The budget for `pool` on `backend` with cap `max` (created on first use). Called only
    /// when pools are (re)built, never per statement.
    pub fn get(&self, pool: &str, backend: &str, max: u32) -> Arc<Budget> {
        let mut map = self.inner.lock();
        let b = map.entry((pool.to_owned(), backend.to_owned())).or_insert_with(|| Budget::new(max)).clone();
        b.max.store(max, Ordering::Relaxed);
        b
    }

    /// The budget of `user` on `backend` of pass-through `pool` with cap `max` (created on
    /// first use). Called when a connection is about to open, never per statement.
    pub fn user_budget(&self, pool: &str, backend: &str, user: &str, max: u32) -> Arc<Budget> {
        let mut map = self.users.lock();
        let b = map
            .entry((pool.to_owned(), backend.to_owned(), user.to_owned()))
            .or_insert_with(|| Budget::new(max))
            .clone();
        b.max.store(max, Ordering::Relaxed);
        b
    }

    /// Connections open process-wide per user of pass-through `pool`, all backends together,
    /// sorted by user; users without any are left out. Called per metrics scrape.
    pub fn user_connections(&self, pool: &str) -> Vec<(String, u64)> {
        let mut out: Vec<(String, u64)> = Vec::new();
        for ((_, _, user), b) in self.users.lock().iter().filter(|((p, _, _), _)| p == pool) {
            match out.iter_mut().find(|(u, _)| u == user) {
                Some(entry) => entry.1 += u64::from(b.used()),
                None => out.push((user.clone(), u64::from(b.used()))),
            }
        }
        out.retain(|e| e.1 > 0);
        out.sort();
        out
    }

    /// The line of `pool`'s waiting checkouts across cores (created on first use). Called only
    /// when pools are (re)built.
    pub(super) fn line(&self, pool: &str) -> Arc<Line> {
        self.lines.lock().entry(pool.to_owned()).or_default().clone()
    }

    /// The health entry of `pool` on `backend` (created on first use; see
    /// [`BackendHealth::new`] for the initial state). Called only when pools are (re)built.
    pub fn health(&self, pool: &str, backend: &str, has_lag_threshold: bool) -> Arc<BackendHealth> {
        self.health
            .lock()
            .entry((pool.to_owned(), backend.to_owned()))
            .or_insert_with(|| Arc::new(BackendHealth::new(has_lag_threshold)))
            .clone()
    }

    /// The process-wide schema generation every pool shares. Called only when pools are built.
    pub fn schema(&self) -> Arc<SchemaGeneration> {
        self.schema.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_is_an_exact_cap_shared_by_all_holders() {
        let reg = BudgetRegistry::default();
        let a = reg.get("p", "h:1", 2);
        let b = reg.get("p", "h:1", 2);
        assert!(a.try_acquire());
        assert!(b.try_acquire());
        assert!(!a.try_acquire(), "third connection exceeds max_connections");
        b.release();
        assert!(a.try_acquire());
        assert_eq!(a.used(), 2);
        let other = reg.get("p", "h:2", 2);
        assert_eq!(other.used(), 0, "budgets are per backend");
    }

    #[test]
    fn user_budgets_cap_each_user_and_are_counted_per_pool_and_user() {
        let reg = BudgetRegistry::default();
        let alice = reg.user_budget("p", "h:1", "alice", 1);
        assert!(alice.try_acquire());
        assert!(!reg.user_budget("p", "h:1", "alice", 1).try_acquire(), "alice is at her cap");
        let bob = reg.user_budget("p", "h:1", "bob", 1);
        assert!(bob.try_acquire(), "bob has his own");
        assert!(reg.user_budget("p", "h:2", "bob", 1).try_acquire(), "per backend");
        assert!(reg.user_budget("q", "h:1", "bob", 1).try_acquire(), "per pool");
        assert_eq!(reg.user_connections("p"), vec![("alice".to_owned(), 1), ("bob".to_owned(), 2)]);
        alice.release();
        assert_eq!(reg.user_connections("p"), vec![("bob".to_owned(), 2)], "users without connections are left out");
    }

    #[test]
    fn concurrent_acquire_never_exceeds_cap() {
        let reg = BudgetRegistry::default();
        let b = reg.get("p", "h", 5);
        let wins: u32 = std::thread::scope(|s| {
            let hs: Vec<_> = (0..8).map(|_| s.spawn(|| (0..100).filter(|_| b.try_acquire()).count() as u32)).collect();
            hs.into_iter().map(|h| h.join().unwrap_or(0)).sum()
        });
        assert_eq!(wins, 5);
        b.release();
        b.release();
        assert_eq!(b.used(), 3);
    }
}
