//! What a session may use of the core it runs on: configuration, pools, counters, signals.
//!
//! One `CoreContext` per core, shared by that core's sessions through `Rc`; it never crosses
//! threads. The core assembly (`crate::core`) builds it and swaps snapshots into it.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;

use crate::config::Config;
use crate::id::{CancelKey, CoreId};
use crate::metrics::CoreCounters;
use crate::pool::PoolSet;
use crate::rt::{CoreQueues, Event};
use crate::session::cancel::CancelRegistry;

/// Core-local state shared by the sessions of one core.
pub struct CoreContext {
    /// The core this context belongs to.
    pub core: CoreId,
    /// Task queues of this core.
    pub queues: CoreQueues,
    /// Counters owned by this core.
    pub counters: CoreCounters,
    /// Set when the router starts draining: idle sessions close, busy ones finish first.
    pub drain: Event,
    /// Sessions of this core that can be cancelled, by router-issued key.
    pub cancels: CancelRegistry,
    config: RefCell<Arc<Config>>,
    pools: RefCell<Rc<PoolSet>>,
    next_session: Cell<u32>,
    forward_cancel: Box<dyn Fn(CancelKey)>,
}

impl CoreContext {
    /// Builds the context of `core`; `forward_cancel` hands cancels for other cores to the
    /// control plane.
    pub fn new(
        core: CoreId,
        queues: CoreQueues,
        config: Arc<Config>,
        pools: PoolSet,
        forward_cancel: Box<dyn Fn(CancelKey)>,
    ) -> Self {
        Self {
            core,
            queues,
            counters: CoreCounters::default(),
            drain: Event::new(),
            cancels: CancelRegistry::default(),
            config: RefCell::new(config),
            pools: RefCell::new(Rc::new(pools)),
            next_session: Cell::new(1),
            forward_cancel,
        }
    }

    /// The configuration in force now (cheap clone of an `Arc`; hold it for one statement).
    pub fn config(&self) -> Arc<Config> {
        self.config.borrow().clone()
    }

    /// The pools in force now.
    pub fn pools(&self) -> Rc<PoolSet> {
        self.pools.borrow().clone()
    }

    /// Swaps in a new configuration and pool set (between statements: sessions re-read them
    /// per statement, in-flight statements keep the `Rc`s they hold).
    pub fn apply(&self, config: Arc<Config>, pools: PoolSet) {
        *self.config.borrow_mut() = config;
        *self.pools.borrow_mut() = Rc::new(pools);
    }

    /// A fresh cancel key for a new session of this core.
    pub fn new_cancel_key(&self) -> CancelKey {
        let seq = self.next_session.get();
        self.next_session.set(seq.wrapping_add(1));
        CancelKey { pid: CancelKey::make_pid(self.core, seq), secret: rand::random::<i32>() }
    }

    /// Cancels the statement of the session owning `key`, on whichever core owns it.
    pub fn cancel(&self, key: CancelKey) {
        if key.core() == self.core {
            self.cancels.cancel(key);
        } else {
            (self.forward_cancel)(key);
        }
    }
}
