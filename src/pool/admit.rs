//! The waiting side of the shape limiter (#41): a checkout over its shape's limit or its user's
//! share waits here, first come first served, until a permit is given back or `limit_wait`
//! passes; the permit it gets rides with the connection lent to it and is given back with it
//! (checkin or close), so no session has to remember it. The policy is `pool::limit`'s.

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::time::Instant;

use super::limit::{Admit, Grant, Over, Sample, Shape, Table, Ticket};
use super::PoolError;
use crate::config::ShapeLimits;
use crate::metrics::{LimitRow, QueueSlot};
use crate::rt::{self, Event};

/// A pool's limiter on one core: its table and the events of the checkouts waiting in it.
pub(super) struct Gate {
    table: RefCell<Table>,
    events: RefCell<HashMap<Ticket, Event>>,
    wait: std::time::Duration,
}

impl Gate {
    /// The limiter of a pool of `capacity` connections with `policy`.
    pub(super) fn new(policy: &ShapeLimits, capacity: u32) -> Rc<Self> {
        Rc::new(Self {
            table: RefCell::new(Table::new(policy, capacity)),
            events: RefCell::default(),
            wait: policy.wait,
        })
    }

    /// A permit for a checkout of `shape` from pool `pool`: at once, or after waiting its turn
    /// until `limit_wait` (at most `deadline`); refused with what held it back otherwise.
    pub(super) async fn admit(
        self: &Rc<Self>,
        shape: &Shape<'_>,
        deadline: Instant,
        pool: &str,
    ) -> Result<Permit, PoolError> {
        let ticket = match self.table.borrow_mut().admit(shape) {
            Admit::Go(grant) => return Ok(Permit::new(self.clone(), grant)),
            Admit::Wait(ticket) => ticket,
        };
        let started = rt::now();
        let ev = Event::new();
        self.events.borrow_mut().insert(ticket, ev.clone());
        let mut queued = Queued { gate: self, ticket, left: false };
        let _ = rt::with_deadline(deadline.min(started + self.wait), ev.wait()).await;
        queued.left = true;
        self.events.borrow_mut().remove(&ticket);
        let claimed = self.table.borrow_mut().claim(ticket);
        if let Some(grant) = claimed {
            return Ok(Permit::new(self.clone(), grant));
        }
        let (over, woken) = self.table.borrow_mut().abandon(ticket, true, rt::now());
        self.wake(woken);
        Err(PoolError::Limited {
            pool: pool.to_owned(),
            // Always named: the ticket was queued (not granted, as the claim above found).
            over: over.unwrap_or_else(|| Over::Share { user: shape.user.to_owned(), share: 0 }),
            waited_ms: rt::since(started).as_millis(),
        })
    }

    /// The shapes followed and the checkouts waiting, for metrics and the views.
    pub(super) fn figures(&self) -> (Vec<LimitRow>, u64) {
        let table = self.table.borrow();
        (table.rows(), table.queued() as u64)
    }

    /// Sets the events of the tickets granted.
    fn wake(&self, tickets: Vec<Ticket>) {
        let mut events = self.events.borrow_mut();
        for t in tickets {
            if let Some(ev) = events.remove(&t) {
                ev.set();
            }
        }
    }
}

/// A place in the gate's queue; leaving it unserved (the client went away mid-wait) gives up
/// the ticket without counting a refusal.
struct Queued<'a> {
    gate: &'a Gate,
    ticket: Ticket,
    left: bool,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        if self.left {
            return;
        }
        self.gate.events.borrow_mut().remove(&self.ticket);
        let (_, woken) = self.gate.table.borrow_mut().abandon(self.ticket, false, rt::now());
        self.gate.wake(woken);
    }
}

/// A checkout's admission, held by the connection lent for it and given back with it: the
/// time the connection was held is the shape's latency sample (not the wait for it, which
/// other shapes cause: a lookup queued behind a report must not look slow itself).
pub(crate) struct Permit {
    gate: Rc<Gate>,
    grant: Grant,
    since: Instant,
    /// Whether the checkout got its connection (a failed one teaches nothing about the shape).
    lent: bool,
}

impl Permit {
    fn new(gate: Rc<Gate>, grant: Grant) -> Self {
        Self { gate, grant, since: rt::now(), lent: false }
    }

    /// The checkout got its connection: its hold time starts.
    pub(super) fn lent(mut self) -> Self {
        self.lent = true;
        self.since = rt::now();
        self
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if !self.grant.is_tracked() {
            return;
        }
        let now = rt::now();
        let latency = now.saturating_duration_since(self.since);
        // The table fills in the rest (congestion, load) as it takes the sample.
        let sample = self.lent.then_some(Sample { latency, queued: false, in_use: 0 });
        let woken = self.gate.table.borrow_mut().release(&self.grant, sample, now);
        self.gate.wake(woken);
    }
}

/// A checkout's place in the pool's own queue: the queue-depth metric, the shape that waits
/// (shapes slower than it are then congested), and for the fair share the user it counts as
/// waiting for a connection (while one does, other users are held to their shares).
pub(super) struct Queueing<'a> {
    slot: QueueSlot<'a>,
    gate: Option<&'a Gate>,
    shape: &'a Shape<'a>,
    queued: bool,
}

impl<'a> Queueing<'a> {
    pub(super) fn new(slot: QueueSlot<'a>, gate: Option<&'a Gate>, shape: &'a Shape<'a>) -> Self {
        Self { slot, gate, shape, queued: false }
    }

    /// The checkout found nothing free and waits.
    pub(super) fn queue(&mut self) {
        self.slot.queue();
        if !self.queued {
            self.queued = true;
            if let Some(g) = self.gate {
                let woken = g.table.borrow_mut().pool_waiting(self.shape, true);
                g.wake(woken);
            }
        }
    }
}

impl Drop for Queueing<'_> {
    fn drop(&mut self) {
        if let (true, Some(g)) = (self.queued, self.gate) {
            let woken = g.table.borrow_mut().pool_waiting(self.shape, false);
            g.wake(woken);
        }
    }
}
