//! The checkouts of one core waiting for a pool's connections: a FIFO of events, set by a
//! checkin or a closing connection, and one waiter at a time looking periodically for budget
//! another core freed.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;

use crate::rt::{self, Event};

/// How often a waiting checkout looks for budget freed by another core.
const CROSS_CORE_RECHECK: std::time::Duration = std::time::Duration::from_millis(2);

/// State shared between a pool and the connections it lent out, so a closing connection can
/// wake a waiter (its budget unit is free again).
#[derive(Default)]
pub(crate) struct Waiters {
    /// One event per waiting checkout, in arrival order; an event is set only once popped.
    queue: RefCell<VecDeque<Event>>,
    /// Whether a waiting checkout of this core looks periodically for budget freed by another
    /// core. One does: a unit freed elsewhere serves one waiter, and hundreds of waiters each
    /// waking every few milliseconds cost more than the statements they wait for.
    rechecking: Cell<bool>,
}

impl Waiters {
    /// Wakes the checkout first in line: a unit was freed on this core.
    pub(crate) fn wake_one(&self) {
        let next = self.queue.borrow_mut().pop_front();
        if let Some(ev) = next {
            ev.set();
        }
    }
}

/// A checkout's place in its pool's wait queue. Dropping it (served, timed out, or abandoned
/// mid-wait) leaves no event behind, and a waiter that held the recheck hands it on.
pub(super) struct Waiting<'a> {
    waiters: &'a Waiters,
    ev: Event,
    rechecks: bool,
}

impl<'a> Waiting<'a> {
    pub(super) fn new(waiters: &'a Waiters) -> Self {
        let ev = Event::new();
        waiters.queue.borrow_mut().push_back(ev.clone());
        Self { waiters, ev, rechecks: false }
    }

    /// Waits until a unit is freed on this core, or, for the waiter holding the recheck, at
    /// most [`CROSS_CORE_RECHECK`].
    pub(super) async fn wait(&mut self) {
        if !self.rechecks && !self.waiters.rechecking.get() {
            self.waiters.rechecking.set(true);
            self.rechecks = true;
        }
        if self.rechecks {
            rt::race(self.ev.wait(), rt::sleep(CROSS_CORE_RECHECK)).await;
        } else {
            self.ev.wait().await;
        }
        if self.ev.is_set() {
            // Woken for a unit someone else took first: first in line again.
            self.ev = Event::new();
            self.waiters.queue.borrow_mut().push_front(self.ev.clone());
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut queue = self.waiters.queue.borrow_mut();
        if queue.front().is_some_and(|e| e.same(&self.ev)) {
            // The usual case: woken, put first in line again, then served.
            queue.pop_front();
        } else if !self.ev.is_set() {
            queue.retain(|e| !e.same(&self.ev));
        }
        drop(queue);
        if self.rechecks {
            self.waiters.rechecking.set(false);
            // The next waiter wakes, finds nothing and takes the recheck over.
            self.waiters.wake_one();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::future::Future;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// Polls one wait once. Off a core a timer completes at once, so the waiter holding the
    /// recheck returns at its first poll and the others stay pending until woken.
    fn poll_wait(w: &mut Waiting<'_>) -> Poll<()> {
        let fut = pin!(w.wait());
        fut.poll(&mut Context::from_waker(Waker::noop()))
    }

    fn queued(waiters: &Waiters) -> usize {
        waiters.queue.borrow().len()
    }

    #[test]
    fn one_waiter_rechecks_and_the_others_wait_to_be_woken() {
        let waiters = Waiters::default();
        let (mut a, mut b) = (Waiting::new(&waiters), Waiting::new(&waiters));
        assert!(poll_wait(&mut a).is_ready());
        assert!(poll_wait(&mut b).is_pending());
        assert!(a.rechecks && !b.rechecks && waiters.rechecking.get());
        assert_eq!(queued(&waiters), 2);
    }

    #[test]
    fn wake_one_serves_in_arrival_order_and_a_woken_waiter_missing_out_is_first_again() {
        let waiters = Waiters::default();
        let (a, b) = (Waiting::new(&waiters), Waiting::new(&waiters));
        waiters.wake_one();
        assert!(a.ev.is_set() && !b.ev.is_set());
        let mut a = a;
        assert!(poll_wait(&mut a).is_ready());
        // Woken for a unit it did not get: back in the queue, ahead of `b`.
        assert!(!a.ev.is_set());
        assert!(waiters.queue.borrow().front().is_some_and(|e| e.same(&a.ev)));
        waiters.wake_one();
        assert!(a.ev.is_set() && !b.ev.is_set());
    }

    #[test]
    fn a_dropped_waiter_leaves_nothing_queued_and_hands_the_recheck_on() {
        let waiters = Waiters::default();
        let mut a = Waiting::new(&waiters);
        let (mut b, c) = (Waiting::new(&waiters), Waiting::new(&waiters));
        assert!(poll_wait(&mut a).is_ready());
        assert!(poll_wait(&mut b).is_pending());
        drop(a);
        // The next in line is woken to take the recheck over.
        assert!(b.ev.is_set() && !c.ev.is_set());
        assert!(!waiters.rechecking.get());
        assert!(poll_wait(&mut b).is_ready());
        assert!(b.rechecks);
        drop(c);
        drop(b);
        assert_eq!(queued(&waiters), 0);
        assert!(!waiters.rechecking.get());
    }
}
