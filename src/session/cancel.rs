//! Router-issued cancel keys and the statements they may cancel.
//!
//! A cancel is forwarded to a backend only while the owning session has a statement running on
//! that backend connection, and the session does not give the connection back to its pool until
//! every cancel it forwarded has been delivered. So a late or stale cancel can never hit a
//! statement of another client that later borrows the same connection.
//!
//! A cancel also sets the session's *interrupt* event, when it watches one: a statement the
//! router is about to run again (issue #11) is waiting in a backoff, not on a backend, and
//! learns of the cancel there.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::id::CancelKey;
use crate::rt::Event;

/// The backend-side identity of a running statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CancelTarget {
    /// Backend address to open the cancel connection to.
    pub addr: SocketAddr,
    /// What the backend needs to find the statement.
    pub kind: TargetKind,
}

/// Per-protocol cancel identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TargetKind {
    /// PostgreSQL BackendKeyData of the backend connection.
    Pg {
        /// Backend process id.
        pid: i32,
        /// Backend secret key.
        secret: i32,
    },
    /// MySQL connection id of the backend connection (`KILL QUERY id`).
    MySql {
        /// Backend thread id.
        thread_id: u32,
    },
}

/// One session's cancel slot.
#[derive(Default)]
pub struct CancelSlot {
    running: Cell<Option<CancelTarget>>,
    delivering: RefCell<Option<Event>>,
    interrupt: RefCell<Option<Event>>,
}

impl CancelSlot {
    /// Marks `target` as running a statement of this session (or nothing, with `None`).
    pub fn set_running(&self, target: Option<CancelTarget>) {
        self.running.set(target);
    }

    /// A fresh event that the next cancel for this session sets (replacing any earlier one):
    /// a statement that may be retried watches it from its first attempt on, so a cancel that
    /// arrives while it runs or while it waits for its next attempt stops the retries.
    pub fn watch(&self) -> Event {
        let ev = Event::new();
        *self.interrupt.borrow_mut() = Some(ev.clone());
        ev
    }

    /// Waits until every cancel forwarded for this session has been delivered, so the backend
    /// connection can be handed to another client safely.
    pub async fn settle(&self) {
        let pending = self.delivering.borrow_mut().take();
        if let Some(ev) = pending {
            // A backend that never answers the cancel connection must not hold the session.
            let _ = crate::rt::with_deadline(crate::rt::now() + DELIVERY_TIMEOUT, ev.wait()).await;
        }
    }
}

/// Sends a cancel to a backend; implemented by the pool layer per protocol.
pub type Deliver = Rc<dyn Fn(CancelTarget, Event)>;

/// The core's table of cancellable sessions.
#[derive(Default)]
pub struct CancelRegistry {
    slots: RefCell<HashMap<CancelKey, Rc<CancelSlot>>>,
    deliver: RefCell<Option<Deliver>>,
}

/// How long a cancel delivery may take before the session stops waiting for it.
pub const DELIVERY_TIMEOUT: Duration = Duration::from_secs(5);

impl CancelRegistry {
    /// Installs the function that delivers cancels to backends.
    pub fn set_deliver(&self, deliver: Deliver) {
        *self.deliver.borrow_mut() = Some(deliver);
    }

    /// Registers a session; the slot is removed by [`CancelRegistry::remove`] when it ends.
    pub fn register(&self, key: CancelKey) -> Rc<CancelSlot> {
        let slot = Rc::new(CancelSlot::default());
        self.slots.borrow_mut().insert(key, slot.clone());
        slot
    }

    /// Forgets a finished session.
    pub fn remove(&self, key: CancelKey) {
        self.slots.borrow_mut().remove(&key);
    }

    /// Cancels the running statement of the session owning `key`, if the secret matches and a
    /// statement is running, and sets the event the session watches (see
    /// [`CancelSlot::watch`]); otherwise does nothing (as PostgreSQL does, silently).
    pub fn cancel(&self, key: CancelKey) {
        // Keyed by pid and secret: a server pid given to a session-mode client may equal a
        // router-issued pid of another session on this core.
        let slot = match self.slots.borrow().get(&key) {
            Some(s) => s.clone(),
            None => return,
        };
        if let Some(ev) = slot.interrupt.borrow().as_ref() {
            ev.set();
        }
        let Some(target) = slot.running.get() else { return };
        let Some(deliver) = self.deliver.borrow().clone() else { return };
        // One delivery at a time is enough: a second cancel for the same statement adds nothing.
        if slot.delivering.borrow().as_ref().is_some_and(|e| !e.is_set()) {
            return;
        }
        let done = Event::new();
        *slot.delivering.borrow_mut() = Some(done.clone());
        deliver(target, done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(pid: i32, secret: i32) -> CancelKey {
        CancelKey { pid, secret }
    }

    #[test]
    fn a_cancel_sets_the_watched_interrupt_even_with_nothing_running() {
        let registry = CancelRegistry::default();
        let slot = registry.register(key(7, 42));
        let first = slot.watch();
        registry.cancel(key(7, 1));
        assert!(!first.is_set(), "a wrong secret does nothing");
        registry.cancel(key(7, 42));
        assert!(first.is_set());
        let second = slot.watch();
        assert!(!second.is_set(), "a new watch starts clear");
        registry.remove(key(7, 42));
        registry.cancel(key(7, 42));
        assert!(!second.is_set(), "a finished session is not found");
    }
}
