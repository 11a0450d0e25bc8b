//! Per-core counters and their mergeable snapshots.
//!
//! A core owns its [`CoreCounters`] alone (`Cell`s, no atomics, no locks); the control plane asks
//! each core for a [`CounterSnapshot`] and sums them. Must not depend on other crate modules.

use std::cell::Cell;

/// Live counters of one core. `!Sync` on purpose: only the owning core touches them.
#[derive(Debug, Default)]
pub struct CoreCounters {
    sessions_active: Cell<u64>,
    sessions_accepted: Cell<u64>,
    session_panics: Cell<u64>,
}

impl CoreCounters {
    /// A session started on this core.
    pub fn session_opened(&self) {
        self.sessions_active.set(self.sessions_active.get() + 1);
        self.sessions_accepted.set(self.sessions_accepted.get() + 1);
    }

    /// A session ended (normally or not).
    pub fn session_closed(&self) {
        self.sessions_active.set(self.sessions_active.get().saturating_sub(1));
    }

    /// A session task panicked and was contained.
    pub fn session_panicked(&self) {
        self.session_panics.set(self.session_panics.get() + 1);
    }

    /// Sessions currently open on this core.
    pub fn sessions_active(&self) -> u64 {
        self.sessions_active.get()
    }

    /// A plain copy that can cross threads.
    pub fn snapshot(&self) -> CounterSnapshot {
        CounterSnapshot {
            sessions_active: self.sessions_active.get(),
            sessions_accepted_total: self.sessions_accepted.get(),
            session_panics_total: self.session_panics.get(),
        }
    }
}

/// A point-in-time copy of one core's counters (or, after [`CounterSnapshot::merge`], of several).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CounterSnapshot {
    /// Sessions open at the time of the snapshot.
    pub sessions_active: u64,
    /// Sessions accepted since start.
    pub sessions_accepted_total: u64,
    /// Session tasks that panicked and were closed.
    pub session_panics_total: u64,
}

impl CounterSnapshot {
    /// Adds another core's figures to these.
    pub fn merge(&mut self, other: &CounterSnapshot) {
        self.sessions_active += other.sessions_active;
        self.sessions_accepted_total += other.sessions_accepted_total;
        self.session_panics_total += other.session_panics_total;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counters_track_open_close_and_merge() {
        let c = CoreCounters::default();
        c.session_opened();
        c.session_opened();
        c.session_closed();
        c.session_panicked();
        let a = c.snapshot();
        assert_eq!(a, CounterSnapshot { sessions_active: 1, sessions_accepted_total: 2, session_panics_total: 1 });
        let mut total = a;
        total.merge(&a);
        assert_eq!(total.sessions_accepted_total, 4);
        c.session_closed();
        c.session_closed();
        assert_eq!(c.sessions_active(), 0, "never underflows");
    }
}
