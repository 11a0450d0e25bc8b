//! Metrics: per-core counters, their mergeable snapshots, the catalog of every exported metric
//! and its Prometheus/OpenMetrics exposition.
//!
//! A core owns its [`CoreCounters`] and the [`PoolCounters`] of its pools alone (`Cell`s: no
//! atomics or locks on the data path); on scrape the control plane asks each core for a plain
//! [`CounterSnapshot`] and [`render`] writes them with a `core` label, so a total is the sum over
//! cores. Labels come only from bounded sets ([`label`], config names); never SQL, users or
//! parameters. Must not depend on other crate modules, sockets, clocks or threads.

mod budget;
pub mod catalog;
pub mod digest;
mod histogram;
pub mod label;
mod limit;
mod pool;
mod render;
pub mod sketch;

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use smallvec::SmallVec;

pub use budget::{Charge, ClientBudget};
pub use digest::{DigestRow, DigestSnapshot, MAX_DIGEST_POOLS};
pub use histogram::{Histogram, HistogramSnapshot, BOUNDS_MICROS, BUCKETS};
pub use label::{
    AuthFailure, BufferKind, CacheOp, CausalOutcome, ClientState, Decision, Direction, FallbackOutcome, Operation,
    RetryOutcome,
};
pub use limit::{merge_rows as merge_limit_rows, LimitRow};
pub use pool::{BackendCounters, BackendSnapshot, HealthFigures, PoolCounters, PoolSnapshot, QueueSlot};
pub use render::{render, Format, Scrape};
pub use sketch::LatencySketch;

use pool::{bump, bump_keyed, merge_keyed};

/// Log lines that could not be written: shared by the log writer (any thread) and the scrape.
/// Only a failed write touches it, never the per-statement path.
#[derive(Debug, Default, Clone)]
pub struct LogDrops(Arc<AtomicU64>);

impl LogDrops {
    /// Lines dropped since start.
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// Counts one dropped line.
    pub fn add(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

/// Client connections of one listener on one core.
#[derive(Debug, Clone, Copy, Default)]
struct ClientCounts {
    open: u64,
    active: u64,
    refused: u64,
    auth_failures: [u64; AuthFailure::COUNT],
}

/// Core-wide live counters. `!Sync` on purpose: only the owning core touches them.
#[derive(Debug, Default)]
pub struct CoreCounters {
    sessions_active: Cell<u64>,
    sessions_accepted: Cell<u64>,
    session_panics: Cell<u64>,
    rejects: Cell<u64>,
    bytes: [Cell<u64>; Direction::COUNT],
    operations: [Cell<u64>; Operation::COUNT],
    pins: RefCell<SmallVec<[(&'static str, u64); 4]>>,
    relay_errors: RefCell<SmallVec<[(&'static str, u64); 4]>>,
    /// By listener index; grown on first use (listeners are fixed at start).
    clients: RefCell<Vec<ClientCounts>>,
}

impl CoreCounters {
    /// A session started on this core.
    pub fn session_opened(&self) {
        bump(&self.sessions_active);
        bump(&self.sessions_accepted);
    }

    /// A session ended (normally or not).
    pub fn session_closed(&self) {
        self.sessions_active.set(self.sessions_active.get().saturating_sub(1));
    }

    /// A session task panicked and was contained.
    pub fn session_panicked(&self) {
        bump(&self.session_panics);
    }

    /// Sessions currently open on this core.
    pub fn sessions_active(&self) -> u64 {
        self.sessions_active.get()
    }

    /// `n` bytes moved in `direction`.
    pub fn bytes(&self, direction: Direction, n: usize) {
        if let Some(c) = self.bytes.get(direction.index()) {
            c.set(c.get().wrapping_add(n as u64));
        }
    }

    /// A routed statement had semantic operation `op`.
    pub fn operation(&self, op: Operation) {
        if let Some(c) = self.operations.get(op.index()) {
            bump(c);
        }
    }

    /// A rule rejected a statement (no pool was chosen, so it is not a pool's decision).
    pub fn rejected(&self) {
        bump(&self.rejects);
    }

    /// A session was pinned to its backend for `reason` (a static label such as
    /// `PinReason::as_str()`).
    pub fn pinned(&self, reason: &'static str) {
        bump_keyed(&self.pins, reason);
    }

    /// A relay between a client and its backend connection broke, for cause `code` (a
    /// `RelayError`'s `ErrorCode::code()`, a static string from a fixed set).
    pub fn relay_failed(&self, code: &'static str) {
        bump_keyed(&self.relay_errors, code);
    }

    fn with_client(&self, listener: usize, f: impl FnOnce(&mut ClientCounts)) {
        let mut clients = self.clients.borrow_mut();
        if clients.len() <= listener {
            clients.resize(listener + 1, ClientCounts::default());
        }
        if let Some(c) = clients.get_mut(listener) {
            f(c);
        }
    }

    /// A client connected on listener `listener` (config order).
    pub fn client_connected(&self, listener: usize) {
        self.with_client(listener, |c| c.open += 1);
    }

    /// A client of listener `listener` disconnected.
    pub fn client_disconnected(&self, listener: usize) {
        self.with_client(listener, |c| c.open = c.open.saturating_sub(1));
    }

    /// A client of `listener` was turned away because the listener's `max_client_connections`
    /// were all in use.
    pub fn client_refused(&self, listener: usize) {
        self.with_client(listener, |c| c.refused += 1);
    }

    /// A client of `listener` was refused at login, for `reason` (#23).
    pub fn auth_failed(&self, listener: usize, reason: AuthFailure) {
        self.with_client(listener, |c| {
            if let Some(n) = c.auth_failures.get_mut(reason.index()) {
                *n += 1;
            }
        });
    }

    /// A client of `listener` took a backend connection (`true`) or gave it back (`false`).
    pub fn client_active(&self, listener: usize, active: bool) {
        self.with_client(listener, |c| {
            c.active = if active { c.active + 1 } else { c.active.saturating_sub(1) };
        });
    }

    /// A plain copy that can cross threads. `listeners` names the listeners in config order;
    /// `pools` are this core's pool snapshots (taken by the pool layer, which knows idle counts).
    pub fn snapshot(&self, listeners: &[&str], pools: Vec<PoolSnapshot>) -> CounterSnapshot {
        let clients = self.clients.borrow();
        CounterSnapshot {
            sessions_active: self.sessions_active.get(),
            sessions_accepted_total: self.sessions_accepted.get(),
            session_panics_total: self.session_panics.get(),
            rejects_total: self.rejects.get(),
            bytes_total: self.bytes.each_ref().map(Cell::get),
            cache_ops_total: [0; CacheOp::COUNT],
            operations_total: self.operations.each_ref().map(Cell::get),
            pins_total: self.pins.borrow().to_vec(),
            relay_errors_total: self.relay_errors.borrow().to_vec(),
            clients: listeners
                .iter()
                .enumerate()
                .map(|(i, name)| {
                    let c = clients.get(i).copied().unwrap_or_default();
                    ClientSnapshot {
                        listener: (*name).to_owned(),
                        active: c.active.min(c.open),
                        idle: c.open.saturating_sub(c.active),
                        refused_total: c.refused,
                        auth_failures_total: c.auth_failures,
                    }
                })
                .collect(),
            pools,
            client_buffer_bytes: [0; BufferKind::COUNT],
        }
    }
}

/// Client connections of one listener.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClientSnapshot {
    /// Listener name.
    pub listener: String,
    /// Connected clients holding no backend connection.
    pub idle: u64,
    /// Connected clients holding a backend connection.
    pub active: u64,
    /// Clients refused at the listener's `max_client_connections` since start.
    pub refused_total: u64,
    /// Failed logins since start, by [`AuthFailure`] index.
    pub auth_failures_total: [u64; AuthFailure::COUNT],
}

/// A point-in-time copy of one core's counters (or, after [`CounterSnapshot::merge`], of several).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CounterSnapshot {
    /// Sessions open at the time of the snapshot.
    pub sessions_active: u64,
    /// Sessions accepted since start.
    pub sessions_accepted_total: u64,
    /// Session tasks that panicked and were closed.
    pub session_panics_total: u64,
    /// Statements a rule rejected.
    pub rejects_total: u64,
    /// Bytes by [`Direction`] index.
    pub bytes_total: [u64; Direction::COUNT],
    /// Plan-cache operations by [`CacheOp`] index. The plan cache counts these itself; the core
    /// copies its router's monotonic figures here when it reports (zero from
    /// [`CoreCounters::snapshot`]).
    pub cache_ops_total: [u64; CacheOp::COUNT],
    /// Routed statements by [`Operation`] index.
    pub operations_total: [u64; Operation::COUNT],
    /// Session pins by reason.
    pub pins_total: Vec<(&'static str, u64)>,
    /// Broken relays by cause code.
    pub relay_errors_total: Vec<(&'static str, u64)>,
    /// Client connections per listener.
    pub clients: Vec<ClientSnapshot>,
    /// Per pool.
    pub pools: Vec<PoolSnapshot>,
    /// Bytes client sessions hold, by [`BufferKind`] index: process-wide (every core reads the
    /// same [`ClientBudget`]), so merging keeps the latest reading rather than adding.
    pub client_buffer_bytes: [u64; BufferKind::COUNT],
}

fn add_arrays<const N: usize>(into: &mut [u64; N], from: &[u64; N]) {
    for (a, b) in into.iter_mut().zip(from.iter()) {
        *a += b;
    }
}

impl CounterSnapshot {
    /// Adds another core's figures to these (pools by name, backends by label, clients by
    /// listener), giving process-wide totals.
    pub fn merge(&mut self, other: &CounterSnapshot) {
        self.sessions_active += other.sessions_active;
        self.sessions_accepted_total += other.sessions_accepted_total;
        self.session_panics_total += other.session_panics_total;
        self.rejects_total += other.rejects_total;
        add_arrays(&mut self.bytes_total, &other.bytes_total);
        add_arrays(&mut self.cache_ops_total, &other.cache_ops_total);
        add_arrays(&mut self.operations_total, &other.operations_total);
        merge_keyed(&mut self.pins_total, &other.pins_total);
        merge_keyed(&mut self.relay_errors_total, &other.relay_errors_total);
        for (mine, theirs) in self.client_buffer_bytes.iter_mut().zip(other.client_buffer_bytes) {
            *mine = (*mine).max(theirs);
        }
        for c in &other.clients {
            match self.clients.iter_mut().find(|mine| mine.listener == c.listener) {
                Some(mine) => {
                    mine.idle += c.idle;
                    mine.active += c.active;
                    mine.refused_total += c.refused_total;
                    for (m, n) in mine.auth_failures_total.iter_mut().zip(c.auth_failures_total) {
                        *m += n;
                    }
                }
                None => self.clients.push(c.clone()),
            }
        }
        for p in &other.pools {
            match self.pools.iter_mut().find(|mine| mine.name == p.name) {
                Some(mine) => mine.merge(p),
                None => self.pools.push(p.clone()),
            }
        }
    }

    /// The figures of `pool`, if this snapshot has them.
    pub fn pool(&self, name: &str) -> Option<&PoolSnapshot> {
        self.pools.iter().find(|p| p.name == name)
    }
}

#[cfg(test)]
mod tests;
