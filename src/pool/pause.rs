//! PAUSE and RESUME of a pool on one core, for switchovers: while a pool is paused its checkouts
//! wait instead of borrowing or opening a connection, so new transactions queue while the ones
//! in flight keep their connections and finish. The gate is handed from a pool to its successor
//! when a reload rebuilds the pool, so a backend can be repointed between PAUSE and RESUME and
//! the queued statements run on the new one. RECONNECT (also shared) retires every connection
//! open at the time, each once its transaction is over.

use std::cell::{Cell, RefCell};
use std::time::Duration;

use crate::rt::{self, Event};

/// One pool's pause state on one core.
#[derive(Default)]
pub struct PauseGate {
    paused: Cell<bool>,
    /// Set on RESUME: every checkout waiting at the gate goes on.
    resumed: RefCell<Event>,
    /// Bumped by RECONNECT: connections opened before are closed when they come back.
    epoch: Cell<u64>,
    /// Set by KILL: every session on the pool ends wherever it waits.
    killed: RefCell<Event>,
}

impl PauseGate {
    /// Holds new checkouts from now on.
    pub fn pause(&self) {
        if !self.paused.replace(true) {
            *self.resumed.borrow_mut() = Event::new();
        }
    }

    /// Lets every held checkout go on.
    pub fn resume(&self) {
        if self.paused.replace(false) {
            self.resumed.borrow().set();
        }
    }

    /// RECONNECT: every connection open now is closed once it is idle (after its transaction).
    pub fn reconnect(&self) {
        self.epoch.set(self.epoch.get() + 1);
    }

    /// KILL: every session now on the pool ends (the pool is paused too, so new ones wait).
    pub fn kill(&self) {
        let killed = std::mem::take(&mut *self.killed.borrow_mut());
        killed.set();
        self.pause();
    }

    /// The event the next KILL sets: a session races its work against it.
    pub fn killed(&self) -> Event {
        self.killed.borrow().clone()
    }

    /// The RECONNECT epoch new connections are opened in.
    pub fn epoch(&self) -> u64 {
        self.epoch.get()
    }

    /// Whether checkouts are held.
    pub fn is_paused(&self) -> bool {
        self.paused.get()
    }

    /// Waits while the pool is paused; returns how long, so the caller's acquire deadline can
    /// leave the pause out (a switchover must not turn queued statements into timeouts).
    pub async fn pass(&self) -> Duration {
        if !self.paused.get() {
            return Duration::ZERO;
        }
        let started = rt::now();
        while self.paused.get() {
            let resumed = self.resumed.borrow().clone();
            resumed.wait().await;
        }
        rt::since(started)
    }
}
