//! Per-pool and per-backend counters of one core, and their snapshots.
//!
//! A core's pool holds an `Rc<PoolCounters>` that survives pool rebuilds on reload (the pool
//! layer hands it from the old pool to the new one), so counters stay monotonic; backends are
//! resolved to their `Rc<BackendCounters>` once, when the pool is built, never per statement.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use smallvec::SmallVec;

use super::histogram::{Histogram, HistogramSnapshot};
use super::label::{CausalOutcome, Decision, FallbackOutcome, RetryOutcome, BACKEND_ERROR};

/// Adds one to a counter cell.
pub(crate) fn bump(c: &Cell<u64>) {
    c.set(c.get().wrapping_add(1));
}

/// Adds one to the entry for `key` in a short list keyed by static strings (error codes, pin
/// reasons: rare events from a small fixed set, so a linear scan beats hashing).
pub(crate) fn bump_keyed(list: &RefCell<SmallVec<[(&'static str, u64); 4]>>, key: &'static str) {
    let mut list = list.borrow_mut();
    match list.iter_mut().find(|(k, _)| *k == key) {
        Some((_, n)) => *n += 1,
        None => list.push((key, 1)),
    }
}

/// Merges `(key, count)` lists by key.
pub(crate) fn merge_keyed(into: &mut Vec<(&'static str, u64)>, from: &[(&'static str, u64)]) {
    for (k, n) in from {
        match into.iter_mut().find(|(key, _)| key == k) {
            Some((_, total)) => *total += n,
            None => into.push((k, *n)),
        }
    }
}

/// Counters of one backend of one pool on one core.
#[derive(Debug)]
pub struct BackendCounters {
    label: String,
    active: Cell<u64>,
    connect_failures: Cell<u64>,
    /// Checkouts (statements or transactions, by pool mode) this core lent on the backend.
    checkouts: Cell<u64>,
}

impl BackendCounters {
    /// The backend's label (`host:port`).
    pub fn label(&self) -> &str {
        &self.label
    }

    /// A connection to this backend was lent to a session.
    pub fn checked_out(&self) {
        bump(&self.active);
        bump(&self.checkouts);
    }

    /// A lent connection came back (kept idle or closed).
    pub fn checked_in(&self) {
        self.active.set(self.active.get().saturating_sub(1));
    }

    /// Opening a connection to this backend failed (connect or login).
    pub fn connect_failed(&self) {
        bump(&self.connect_failures);
    }
}

/// Counters of one pool on one core.
#[derive(Debug)]
pub struct PoolCounters {
    name: String,
    acquires: Cell<u64>,
    timeouts: Cell<u64>,
    statements: Cell<u64>,
    /// How long statements took, routing to the end of the response (as sessions time them).
    statement_time: Histogram,
    reprepares: Cell<u64>,
    idle_transaction_timeouts: Cell<u64>,
    passthrough_bytes: Cell<u64>,
    waiting: Cell<u64>,
    wait: Histogram,
    /// Checkouts refused by the shape limiter or the fair share (#41).
    limited: Cell<u64>,
    /// Checkouts that found a connection or a unit only when their recheck looked (#41).
    recheck_finds: Cell<u64>,
    /// Server connections another core gave up open and this one took, with no login (#39).
    moved_in: Cell<u64>,
    decisions: [Cell<u64>; Decision::COUNT],
    retries: [Cell<u64>; RetryOutcome::COUNT],
    fallbacks: [Cell<u64>; FallbackOutcome::COUNT],
    /// causal reads (#22) by outcome, and how long their replay-position checks took.
    causal: [Cell<u64>; CausalOutcome::COUNT],
    causal_wait: Histogram,
    errors: RefCell<SmallVec<[(&'static str, u64); 4]>>,
    backends: RefCell<Vec<Rc<BackendCounters>>>,
}

impl PoolCounters {
    /// Fresh counters for pool `name`.
    pub fn new(name: &str) -> Self {
        Self {
            name: name.to_owned(),
            acquires: Cell::default(),
            timeouts: Cell::default(),
            statements: Cell::default(),
            statement_time: Histogram::default(),
            reprepares: Cell::default(),
            idle_transaction_timeouts: Cell::default(),
            passthrough_bytes: Cell::default(),
            waiting: Cell::default(),
            wait: Histogram::default(),
            limited: Cell::default(),
            recheck_finds: Cell::default(),
            moved_in: Cell::default(),
            decisions: Default::default(),
            retries: Default::default(),
            fallbacks: Default::default(),
            causal: Default::default(),
            causal_wait: Histogram::default(),
            errors: RefCell::default(),
            backends: RefCell::default(),
        }
    }

    /// Connections of the pool lent out on this core now (every backend).
    pub fn lent(&self) -> u64 {
        self.backends.borrow().iter().map(|b| b.active.get()).sum()
    }

    /// The counters of backend `label`, created on first use. Called when pools are built.
    pub fn backend(&self, label: &str) -> Rc<BackendCounters> {
        let mut list = self.backends.borrow_mut();
        if let Some(b) = list.iter().find(|b| b.label == label) {
            return b.clone();
        }
        let b = Rc::new(BackendCounters {
            label: label.to_owned(),
            active: Cell::default(),
            connect_failures: Cell::default(),
            checkouts: Cell::default(),
        });
        list.push(b.clone());
        b
    }

    /// A session asked for a connection.
    pub fn acquire_started(&self) -> QueueSlot<'_> {
        bump(&self.acquires);
        QueueSlot { counters: self, queued: false }
    }

    /// No connection became free before the deadline.
    pub fn acquire_timed_out(&self) {
        bump(&self.timeouts);
    }

    /// The shape limiter or the fair share refused a checkout after `limit_wait` (#41).
    pub fn acquire_limited(&self) {
        bump(&self.limited);
    }

    /// A waiting checkout found a connection or a unit only when its periodic recheck looked:
    /// nothing woke it for it (#41).
    pub fn found_by_recheck(&self) {
        bump(&self.recheck_finds);
    }

    /// A server connection another core gave up was taken here open, with no login (#39).
    pub fn connection_moved_in(&self) {
        bump(&self.moved_in);
    }

    /// How long one checkout took, whatever its outcome.
    pub fn acquire_finished(&self, waited: Duration) {
        self.wait.observe(waited);
    }

    /// A statement was sent to this pool.
    pub fn statement(&self) {
        bump(&self.statements);
    }

    /// A statement sent here took `elapsed`, from routing to the end of its response.
    pub fn statement_finished(&self, elapsed: Duration) {
        self.statement_time.observe(elapsed);
    }

    /// A prepared statement was prepared again on another backend connection.
    pub fn reprepared(&self) {
        bump(&self.reprepares);
    }

    /// A client silent past `idle_transaction_timeout` was disconnected.
    pub fn idle_transaction_timed_out(&self) {
        bump(&self.idle_transaction_timeouts);
    }

    /// `n` bytes of result rows were relayed without decoding (`raw_passthrough`, #10).
    pub fn passed_through(&self, n: u64) {
        self.passthrough_bytes.set(self.passthrough_bytes.get().wrapping_add(n));
    }

    /// The routing engine sent a statement here because of `decision`.
    pub fn decided(&self, decision: Decision) {
        if let Some(c) = self.decisions.get(decision.index()) {
            bump(c);
        }
    }

    /// A retry attempt of a statement on this pool ended with `outcome` (issue #11).
    pub fn retried(&self, outcome: RetryOutcome) {
        if let Some(c) = self.retries.get(outcome.index()) {
            bump(c);
        }
    }

    /// A replica-eligible read found no healthy backend in this (read) pool and went the
    /// way `routing.replica_fallback` says.
    pub fn fell_back(&self, outcome: FallbackOutcome) {
        if let Some(c) = self.fallbacks.get(outcome.index()) {
            bump(c);
        }
    }

    /// A causal read of a session that wrote went the way `outcome` says (#22).
    pub fn causal_read(&self, outcome: CausalOutcome) {
        if let Some(c) = self.causal.get(outcome.index()) {
            bump(c);
        }
    }

    /// A causal read checked replay positions on demand for `waited` (#22).
    pub fn causal_waited(&self, waited: Duration) {
        self.causal_wait.observe(waited);
    }

    /// A statement on this pool failed with router error code `code` (an
    /// `ErrorCode::code()`, a static string from a fixed set).
    pub fn error(&self, code: &'static str) {
        bump_keyed(&self.errors, code);
    }

    /// A statement on this pool failed with the backend server's own error, relayed to its
    /// client (code [`BACKEND_ERROR`]).
    pub fn backend_error(&self) {
        self.error(BACKEND_ERROR);
    }

    /// A plain copy. `capacity` is the pool's process-wide connection cap (`max_connections`
    /// times its backends); `idle` gives this core's idle connections per backend label.
    pub fn snapshot(&self, capacity: u64, idle: &dyn Fn(&str) -> u64) -> PoolSnapshot {
        PoolSnapshot {
            name: self.name.clone(),
            capacity,
            acquires_total: self.acquires.get(),
            timeouts_total: self.timeouts.get(),
            statements_total: self.statements.get(),
            statement_duration: self.statement_time.snapshot(),
            reprepares_total: self.reprepares.get(),
            idle_transaction_timeouts_total: self.idle_transaction_timeouts.get(),
            passthrough_bytes_total: self.passthrough_bytes.get(),
            queue_depth: self.waiting.get(),
            wait: self.wait.snapshot(),
            decisions_total: self.decisions.each_ref().map(Cell::get),
            retries_total: self.retries.each_ref().map(Cell::get),
            fallbacks_total: self.fallbacks.each_ref().map(Cell::get),
            causal_total: self.causal.each_ref().map(Cell::get),
            causal_wait: self.causal_wait.snapshot(),
            errors_total: self.errors.borrow().to_vec(),
            backends: self
                .backends
                .borrow()
                .iter()
                .map(|b| BackendSnapshot {
                    label: b.label.clone(),
                    idle: idle(&b.label),
                    active: b.active.get(),
                    connect_failures_total: b.connect_failures.get(),
                    checkouts_total: b.checkouts.get(),
                    health: None,
                })
                .collect(),
            users: Vec::new(),
            limits: Vec::new(),
            limit_rejections_total: self.limited.get(),
            recheck_finds_total: self.recheck_finds.get(),
            connections_moved_total: self.moved_in.get(),
            limit_queue_depth: 0,
        }
    }
}

/// One checkout in progress; counts in the queue depth while [`QueueSlot::queue`] was called,
/// until dropped (however the checkout ends).
#[derive(Debug)]
pub struct QueueSlot<'a> {
    counters: &'a PoolCounters,
    queued: bool,
}

impl QueueSlot<'_> {
    /// The checkout found nothing free and waits.
    pub fn queue(&mut self) {
        if !self.queued {
            self.queued = true;
            bump(&self.counters.waiting);
        }
    }
}

impl Drop for QueueSlot<'_> {
    fn drop(&mut self) {
        if self.queued {
            let w = &self.counters.waiting;
            w.set(w.get().saturating_sub(1));
        }
    }
}

/// A backend's figures on one core (or summed over cores).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackendSnapshot {
    /// `host:port`.
    pub label: String,
    /// Open connections not lent to a session.
    pub idle: u64,
    /// Connections lent to sessions.
    pub active: u64,
    /// Failed connection attempts since start.
    pub connect_failures_total: u64,
    /// Checkouts lent on the backend since start (its share of the pool's statements).
    pub checkouts_total: u64,
    /// Health and replica lag: process-wide (the same on every core), filled in by the pool
    /// layer for the backends configured now; `None` for a backend no longer configured.
    pub health: Option<HealthFigures>,
}

/// Health of one backend, process-wide (not per core).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HealthFigures {
    /// Whether new connections may go to the backend.
    pub healthy: bool,
    /// Why it is unhealthy (`none` when healthy): `connect`, `query`, `lag` or `unknown`.
    pub cause: &'static str,
    /// Last measured replica lag in microseconds; `None` when unknown or not a replica.
    pub lag_micros: Option<u64>,
    /// Last measured replica lag in WAL bytes; `None` when unknown or not measured.
    pub lag_bytes: Option<u64>,
    /// Failed health checks by reason (`connect`, `query`, `lag`).
    pub check_failures_total: [(&'static str, u64); 3],
    /// Whether the server contradicts the pool's configured role (#19); `None` until a probe
    /// has logged in and read it.
    pub role_mismatch: Option<bool>,
    /// causal (#22): the commit position the replica is known to have applied, in causal
    /// token form (`pg:0/3000148`, `gtid:0-1-42`); `None` when unknown or not a replica.
    pub applied_position: Option<String>,
    /// switchover (#40): where the server's own writes reached when last read while it was
    /// writable, in the same form; kept after it stopped.
    pub written_position: Option<String>,
    /// switchover: what the server has replayed of another's writes, in the same form, also
    /// after a promotion (a PostgreSQL server's replay position then stays where recovery ended).
    pub replayed_position: Option<String>,
}

impl HealthFigures {
    /// Replica lag in seconds, when known.
    pub fn lag_seconds(&self) -> Option<f64> {
        self.lag_micros.map(|m| m as f64 / 1e6)
    }

    /// Failed health checks, all reasons together.
    pub fn check_failures(&self) -> u64 {
        self.check_failures_total.iter().map(|(_, n)| n).sum()
    }
}

/// A pool's figures on one core (or summed over cores).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PoolSnapshot {
    /// Pool name.
    pub name: String,
    /// Process-wide connection cap of the pool (all backends).
    pub capacity: u64,
    /// Checkouts requested.
    pub acquires_total: u64,
    /// Checkouts that gave up at `acquire_timeout`.
    pub timeouts_total: u64,
    /// Statements sent.
    pub statements_total: u64,
    /// Statement times, routing to the end of the response.
    pub statement_duration: HistogramSnapshot,
    /// Prepared statements prepared again on another connection.
    pub reprepares_total: u64,
    /// Clients disconnected by `idle_transaction_timeout`.
    pub idle_transaction_timeouts_total: u64,
    /// Result-row bytes relayed without decoding (`raw_passthrough`).
    pub passthrough_bytes_total: u64,
    /// Sessions waiting for a connection now.
    pub queue_depth: u64,
    /// Checkout durations.
    pub wait: HistogramSnapshot,
    /// Routing decisions that chose this pool, indexed like [`Decision::ALL`].
    pub decisions_total: [u64; Decision::COUNT],
    /// Retry attempts by outcome.
    pub retries_total: [u64; RetryOutcome::COUNT],
    /// Reads that found no healthy backend here, by what happened to them.
    pub fallbacks_total: [u64; FallbackOutcome::COUNT],
    /// Causal reads of sessions that wrote, by outcome (#22).
    pub causal_total: [u64; CausalOutcome::COUNT],
    /// Time causal reads spent checking replay positions on demand.
    pub causal_wait: HistogramSnapshot,
    /// Errors by router error code.
    pub errors_total: Vec<(&'static str, u64)>,
    /// Per backend.
    pub backends: Vec<BackendSnapshot>,
    /// A pass-through pool's open connections per user, process-wide (every core reports the
    /// same figures), sorted by user (#23).
    pub users: Vec<(String, u64)>,
    /// The shapes the pool's limiter follows (#41), busiest first; empty when it limits none.
    pub limits: Vec<super::LimitRow>,
    /// Checkouts the limiter or the fair share refused (#41).
    pub limit_rejections_total: u64,
    /// Checkouts that found a connection or a unit only when their recheck looked (#41).
    pub recheck_finds_total: u64,
    /// Server connections taken open from another core (#39).
    pub connections_moved_total: u64,
    /// Checkouts waiting for their shape's limit or their user's share now (#41).
    pub limit_queue_depth: u64,
}

impl PoolSnapshot {
    /// Connections lent out across backends.
    pub fn active(&self) -> u64 {
        self.backends.iter().map(|b| b.active).sum()
    }

    /// Share of the pool's process-wide cap lent out by these figures' core(s); per-core values
    /// sum to the process-wide utilization.
    pub fn utilization(&self) -> f64 {
        if self.capacity == 0 {
            0.0
        } else {
            self.active() as f64 / self.capacity as f64
        }
    }

    /// Adds another core's figures for the same pool. Gauges add (each core holds its own
    /// connections and waiters); the capacity is process-wide and stays as is.
    pub fn merge(&mut self, other: &PoolSnapshot) {
        self.capacity = self.capacity.max(other.capacity);
        self.acquires_total += other.acquires_total;
        self.timeouts_total += other.timeouts_total;
        self.limit_rejections_total += other.limit_rejections_total;
        self.recheck_finds_total += other.recheck_finds_total;
        self.connections_moved_total += other.connections_moved_total;
        self.limit_queue_depth += other.limit_queue_depth;
        self.statements_total += other.statements_total;
        self.statement_duration.merge(&other.statement_duration);
        self.reprepares_total += other.reprepares_total;
        self.idle_transaction_timeouts_total += other.idle_transaction_timeouts_total;
        self.passthrough_bytes_total += other.passthrough_bytes_total;
        self.queue_depth += other.queue_depth;
        self.wait.merge(&other.wait);
        for (a, b) in self.decisions_total.iter_mut().zip(other.decisions_total.iter()) {
            *a += b;
        }
        for (a, b) in self.retries_total.iter_mut().zip(other.retries_total.iter()) {
            *a += b;
        }
        for (a, b) in self.fallbacks_total.iter_mut().zip(other.fallbacks_total.iter()) {
            *a += b;
        }
        for (a, b) in self.causal_total.iter_mut().zip(other.causal_total.iter()) {
            *a += b;
        }
        self.causal_wait.merge(&other.causal_wait);
        merge_keyed(&mut self.errors_total, &other.errors_total);
        super::merge_limit_rows(&mut self.limits, &other.limits);
        if self.users.is_empty() {
            // Process-wide already: every core reports the same figures.
            self.users.clone_from(&other.users);
        }
        for b in &other.backends {
            match self.backends.iter_mut().find(|mine| mine.label == b.label) {
                Some(mine) => {
                    mine.idle += b.idle;
                    mine.active += b.active;
                    mine.connect_failures_total += b.connect_failures_total;
                    mine.checkouts_total += b.checkouts_total;
                    // Process-wide already: every core reports the same figures.
                    if mine.health.is_none() {
                        mine.health.clone_from(&b.health);
                    }
                }
                None => self.backends.push(b.clone()),
            }
        }
    }
}
