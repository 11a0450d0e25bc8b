//! A waiting checkout's wake-up: set by whoever pops it off its core's queue, awaited by that
//! checkout alone.
//!
//! Not `rt::Event`, which serves any number of waits on one flag: its list of wakers allocates
//! at the first wait and at each free, and each set collects the wakers into a new list. A
//! checkout that waited made about eight allocations and frees that way, and one in two
//! checkouts waits at 16 clients on 8 connections (#39). One waker slot does here, and the
//! signal is unset again for the same checkout's next wait instead of being replaced, and a
//! checkout's signal serves the core's later checkouts once it is done ([`Spares`]).

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Cheap to clone; all clones observe the same flag.
#[derive(Clone, Default)]
pub(super) struct Signal(Rc<Inner>);

#[derive(Default)]
struct Inner {
    set: Cell<bool>,
    /// The waker of the checkout's pending wait, if one is pending.
    waker: Cell<Option<Waker>>,
}

impl Signal {
    /// Sets the signal and wakes the pending wait; later waits complete at once.
    pub(super) fn set(&self) {
        self.0.set.set(true);
        if let Some(w) = self.0.waker.take() {
            w.wake();
        }
    }

    /// Wakes the pending wait's task without setting the signal: to look at its deadline.
    pub(super) fn nudge(&self) {
        if let Some(w) = self.0.waker.take() {
            w.wake();
        }
    }

    /// Whether `set` has been called since the signal was made or rearmed.
    pub(super) fn is_set(&self) -> bool {
        self.0.set.get()
    }

    /// Whether `other` is a clone of this very signal.
    pub(super) fn same(&self, other: &Signal) -> bool {
        Rc::ptr_eq(&self.0, &other.0)
    }

    /// Which allocation this is: a test sees a signal reused through it.
    #[cfg(test)]
    pub(super) fn id(&self) -> *const () {
        Rc::as_ptr(&self.0).cast()
    }

    /// The waker of the pending wait, if one is pending: the checkout's task, to wake for it
    /// by other means than a set (see `Waiters::pass_calls`).
    pub(super) fn waker(&self) -> Option<Waker> {
        let waker = self.0.waker.take();
        let copy = waker.clone();
        self.0.waker.set(waker);
        copy
    }

    /// Unset for the next wait: in place when no clone is left (the one queued was popped to
    /// set it), else a new signal, so a clone still held never sees it unset.
    pub(super) fn rearm(&mut self) {
        match Rc::get_mut(&mut self.0) {
            Some(inner) => {
                inner.set.set(false);
                inner.waker.set(None);
            }
            None => *self = Self::default(),
        }
    }

    /// Completes once the signal is set. One wait at a time: a second would take the first's
    /// waker slot.
    pub(super) fn wait(&self) -> Wait<'_> {
        Wait(&self.0)
    }
}

/// How many signals of ended waits a core keeps: more than wait at once on one core under a
/// pgbench-like load, few enough that a burst of thousands leaves a few kilobytes behind.
const SPARES: usize = 64;

/// The signals of a core's waits that ended, for its next waits: a waiting checkout otherwise
/// allocates its signal and frees it again (#39: ~190 instructions of a waiting checkout's
/// ~2,200).
#[derive(Default)]
pub(super) struct Spares(RefCell<Vec<Signal>>);

impl Spares {
    /// An unset signal for a new wait: one kept, if any.
    pub(super) fn take(&self) -> Signal {
        match self.0.borrow_mut().pop() {
            Some(mut signal) => {
                signal.rearm();
                signal
            }
            None => Signal::default(),
        }
    }

    /// `signal`'s wait ended: kept for another, once the caller dropped its own clone (a clone
    /// still held elsewhere then makes [`Spares::take`] allocate anew, never share it).
    pub(super) fn keep(&self, signal: &Signal) {
        let mut spares = self.0.borrow_mut();
        if spares.len() < SPARES {
            spares.push(signal.clone());
        }
    }
}

/// Future of [`Signal::wait`].
pub(super) struct Wait<'a>(&'a Inner);

impl Future for Wait<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0.set.get() {
            return Poll::Ready(());
        }
        let waker = match self.0.waker.take() {
            Some(w) if w.will_wake(cx.waker()) => w,
            _ => cx.waker().clone(),
        };
        self.0.waker.set(Some(waker));
        Poll::Pending
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        // A wait given up (another future of a race won) leaves no waker behind to wake its task.
        drop(self.0.waker.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    #[test]
    fn a_set_wakes_the_pending_wait_once_and_a_rearmed_signal_waits_again() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut signal = Signal::default();
        let queued = signal.clone();
        {
            let mut wait = std::pin::pin!(signal.wait());
            assert!(wait.as_mut().poll(&mut cx).is_pending());
            queued.set();
            assert_eq!(count.0.load(Ordering::Relaxed), 1);
            assert!(wait.as_mut().poll(&mut cx).is_ready());
        }
        queued.set();
        assert_eq!(count.0.load(Ordering::Relaxed), 1, "no wait pending, nobody woken");
        drop(queued);
        let before = Rc::as_ptr(&signal.0);
        signal.rearm();
        assert!(!signal.is_set());
        assert_eq!(Rc::as_ptr(&signal.0), before, "rearmed in place: no clone left");
        let mut wait = std::pin::pin!(signal.wait());
        assert!(wait.as_mut().poll(&mut cx).is_pending());
    }

    #[test]
    fn a_signal_still_cloned_is_replaced_when_rearmed_and_a_dropped_wait_is_not_woken() {
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(count.clone());
        let mut cx = Context::from_waker(&waker);
        let mut signal = Signal::default();
        let held = signal.clone();
        held.set();
        signal.rearm();
        assert!(!signal.is_set() && held.is_set() && !signal.same(&held));
        {
            let mut wait = std::pin::pin!(signal.wait());
            assert!(wait.as_mut().poll(&mut cx).is_pending());
        }
        signal.set();
        assert_eq!(count.0.load(Ordering::Relaxed), 0);
    }

    #[test]
    fn a_kept_signal_serves_the_next_wait_unset_and_one_still_cloned_is_never_shared() {
        let spares = Spares::default();
        let done = spares.take();
        done.set();
        spares.keep(&done);
        let before = Rc::as_ptr(&done.0);
        drop(done);
        let next = spares.take();
        assert_eq!(Rc::as_ptr(&next.0), before, "the same allocation, reused");
        assert!(!next.is_set(), "unset for its new wait");
        let held = next.clone();
        spares.keep(&next);
        drop(next);
        let other = spares.take();
        assert!(!other.same(&held), "a signal still cloned goes to nobody else");
        for _ in 0..2 * SPARES {
            spares.keep(&Signal::default());
        }
        assert_eq!(spares.0.borrow().len(), SPARES, "a burst leaves a bounded few");
    }
}
