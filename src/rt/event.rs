//! A core-local, set-once event: drain and shutdown signals that many tasks of one core await.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Cheap to clone; all clones observe the same flag. `!Send`: it never leaves its core.
#[derive(Clone, Default)]
pub struct Event {
    inner: Rc<EventInner>,
}

#[derive(Default)]
struct EventInner {
    set: Cell<bool>,
    waiters: RefCell<Vec<Waker>>,
}

impl Event {
    /// A new, unset event.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the event and wakes every waiter; later waits complete at once.
    pub fn set(&self) {
        self.inner.set.set(true);
        let waiters = std::mem::take(&mut *self.inner.waiters.borrow_mut());
        for w in waiters {
            w.wake();
        }
    }

    /// Whether `set` has been called.
    pub fn is_set(&self) -> bool {
        self.inner.set.get()
    }

    /// Whether `other` is a clone of this very event.
    pub fn same(&self, other: &Event) -> bool {
        Rc::ptr_eq(&self.inner, &other.inner)
    }

    /// Completes once the event is set.
    pub fn wait(&self) -> EventWait {
        EventWait { event: self.clone() }
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Event").field("set", &self.is_set()).finish()
    }
}

/// Future returned by [`Event::wait`].
pub struct EventWait {
    event: Event,
}

impl Future for EventWait {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.event.is_set() {
            return Poll::Ready(());
        }
        let mut waiters = self.event.inner.waiters.borrow_mut();
        // A task re-polled many times must not grow the list without bound.
        if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
            waiters.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

pin_project_lite::pin_project! {
    /// Future of [`unless_set`].
    pub struct UnlessSet<F> {
        #[pin]
        work: F,
        event: EventWait,
    }
}

impl<F: Future> Future for UnlessSet<F> {
    type Output = Option<F::Output>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.work.poll(cx) {
            return Poll::Ready(Some(v));
        }
        Pin::new(this.event).poll(cx).map(|()| None)
    }
}

/// Runs `fut` unless `event` is set first (`None` then); `fut` is polled first. Hand-written
/// for the same reason as `time::Deadline`: no second copy of `fut`.
pub fn unless_set<F: Future>(event: &Event, fut: F) -> UnlessSet<F> {
    UnlessSet { work: fut, event: event.wait() }
}
