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
//!
//! Whoever asked for a cancel is answered only once it was delivered (the cancel connection of
//! a PostgreSQL client is closed then, as the server does), so the client cannot send its next
//! statement while its cancel is still on the way and have that statement cancelled instead.
//! Not every client waits for that answer (tokio-postgres does not), so a session also sends
//! nothing to a backend while a cancel is still on its way: the PostgreSQL server signals a
//! cancelled backend twice, and the second signal may come late.
//! A MySQL `KILL CONNECTION` of another session sets that session's *end* event.

use std::cell::{Cell, OnceCell, RefCell};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

use crate::config::Protocol;
use crate::id::CancelKey;
use crate::pool::{Conn, ConnInfo};
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
    /// Counts the statements that started running, so a delivery is known to be for this one.
    statement: Cell<u64>,
    /// Cancels on their way to the backend, with the statement each was sent for.
    delivering: RefCell<Vec<(u64, Event)>>,
    interrupt: RefCell<Option<Event>>,
    /// Set by a `KILL CONNECTION` of this session. Made when first asked for: only a MySQL
    /// session waits on it, and a PostgreSQL one would carry two events' allocations it never
    /// uses while idle (#39).
    end: OnceCell<Event>,
    /// Set by the session once a `KILL CONNECTION` closed its client's socket.
    closed: OnceCell<Event>,
    /// The MySQL server connection a session-mode session holds (backend, thread id), so that a
    /// `KILL` of the id its `CONNECTION_ID()` shows finds it. Boxed: only MySQL session mode
    /// holds one, and every session, idle ones too, carries a slot (#39: 28 bytes less each).
    server: Cell<Option<Box<(SocketAddr, u32)>>>,
}

impl CancelSlot {
    /// Marks `target` as running a statement of this session (or nothing, with `None`).
    pub fn set_running(&self, target: Option<CancelTarget>) {
        if target.is_some() && self.running.get().is_none() {
            self.statement.set(self.statement.get() + 1);
        }
        self.running.set(target);
    }

    /// Marks the statement about to be sent on `conn` as running there, when `conn` speaks
    /// `protocol` (the one the bytes being sent are in): each protocol is cancelled its own way.
    pub fn running_on(&self, conn: &Conn, protocol: Protocol) {
        let kind = match (conn.info(), protocol) {
            (ConnInfo::Pg(info), Protocol::Postgres) => TargetKind::Pg { pid: info.pid, secret: info.secret },
            (ConnInfo::MySql(info), Protocol::MySql) => TargetKind::MySql { thread_id: info.thread_id },
            _ => return,
        };
        self.set_running(Some(CancelTarget { addr: conn.addr(), kind }));
    }

    /// Records the MySQL server connection this session holds for good (session mode), or none.
    pub fn set_server(&self, server: Option<(SocketAddr, u32)>) {
        self.server.set(server.map(Box::new));
    }

    /// The MySQL server connection this session holds for good, if any.
    fn server(&self) -> Option<(SocketAddr, u32)> {
        let held = self.server.take();
        let server = held.as_deref().copied();
        self.server.set(held);
        server
    }

    /// The event a `KILL CONNECTION` of this session sets.
    pub fn end(&self) -> Event {
        self.end.get_or_init(Event::new).clone()
    }

    /// Tells the KILL CONNECTION that ended this session that its client's socket is closed.
    pub fn mark_closed(&self) {
        self.closed.get_or_init(Event::new).set();
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
    /// connection can be handed to another client safely, and so that the session's next
    /// statement on a connection it holds is not the one a late cancel reaches.
    pub async fn settle(&self) {
        let pending = std::mem::take(&mut *self.delivering.borrow_mut());
        if pending.is_empty() {
            return; // every release asks, and seldom with a cancel on its way: no clock read
        }
        // A backend that never answers the cancel connection must not hold the session.
        let deadline = crate::rt::now() + DELIVERY_TIMEOUT;
        for (_, ev) in pending {
            let _ = crate::rt::with_deadline(deadline, ev.wait()).await;
        }
    }
}

/// What a cancel or KILL did to the session it named.
#[derive(Debug)]
pub enum Acted {
    /// No session has that key.
    Unknown,
    /// Done at once (nothing was running).
    Done,
    /// A cancel is on its way to the backend, or the session was told to end; the event is set
    /// once the cancel was delivered or the session's client socket closed.
    Delivering(Event),
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

    /// Cancels the running statement of the session owning `key` if the secret matches and a
    /// statement is running, and sets the event the session watches (see
    /// [`CancelSlot::watch`]); with `connection` the session is told to end instead. A key
    /// nobody owns does nothing (as PostgreSQL does, silently).
    pub fn act(&self, key: CancelKey, connection: bool) -> Acted {
        // Keyed by pid and secret: a server pid given to a session-mode client may equal a
        // router-issued pid of another session on this core.
        let slot = match self.slots.borrow().get(&key) {
            Some(s) => s.clone(),
            None => return Acted::Unknown,
        };
        if connection {
            // Answered once the client's socket is closed, as the server closes a killed
            // connection before it answers the KILL: the client's next command finds it gone.
            slot.end().set();
            return Acted::Delivering(slot.closed.get_or_init(Event::new).clone());
        }
        if let Some(ev) = slot.interrupt.borrow().as_ref() {
            ev.set();
        }
        let Some(target) = slot.running.get() else { return Acted::Done };
        let Some(deliver) = self.deliver.borrow().clone() else { return Acted::Done };
        let statement = slot.statement.get();
        // One delivery per statement is enough: a second cancel for it adds nothing. A delivery
        // still on its way for an earlier statement does not stand in for this one.
        // Every delivery still on its way is kept: the connection is handed on only after all.
        let mut delivering = slot.delivering.borrow_mut();
        delivering.retain(|(_, ev)| !ev.is_set());
        if let Some((_, ev)) = delivering.iter().find(|(n, _)| *n == statement) {
            return Acted::Delivering(ev.clone());
        }
        let done = Event::new();
        delivering.push((statement, done.clone()));
        drop(delivering);
        deliver(target, done.clone());
        Acted::Delivering(done)
    }

    /// The session-mode session holding MySQL server thread `id` on a backend `serves` accepts.
    pub fn thread_owner(&self, id: u32, serves: impl Fn(SocketAddr) -> bool) -> Option<CancelKey> {
        self.slots
            .borrow()
            .iter()
            .find(|(_, slot)| slot.server().is_some_and(|(addr, t)| t == id && serves(addr)))
            .map(|(key, _)| *key)
    }
}

#[cfg(test)]
mod tests;
