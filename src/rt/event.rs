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
    waiters: RefCell<WakerSlots>,
}

/// The wakers of the pending waits, each in a slot its wait owns until dropped: a poll updates
/// its own slot and a drop frees it, so neither costs more with ten thousand idle sessions
/// waiting on the same drain event, and a finished session leaves no waker (which would keep its
/// task's memory alive) behind.
#[derive(Default)]
struct WakerSlots {
    slots: Vec<Option<Waker>>,
    free: Vec<usize>,
}

impl WakerSlots {
    /// Stores `waker` in a free slot and returns its index.
    fn add(&mut self, waker: Waker) -> usize {
        match self.free.pop() {
            Some(i) => {
                self.slots[i] = Some(waker);
                i
            }
            None => {
                self.slots.push(Some(waker));
                self.slots.len() - 1
            }
        }
    }

    /// Keeps `waker` in slot `i` unless the one there already wakes the same task.
    fn update(&mut self, i: usize, waker: &Waker) {
        let slot = &mut self.slots[i];
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
    }

    /// Frees slot `i`; returns its waker, to be dropped once the list is released.
    fn remove(&mut self, i: usize) -> Option<Waker> {
        self.free.push(i);
        self.slots[i].take()
    }

    /// Takes every stored waker; the slots stay owned by their waits.
    fn take_all(&mut self) -> Vec<Waker> {
        self.slots.iter_mut().filter_map(Option::take).collect()
    }
}

impl Event {
    /// A new, unset event.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets the event and wakes every waiter; later waits complete at once.
    pub fn set(&self) {
        self.inner.set.set(true);
        let waiters = self.inner.waiters.borrow_mut().take_all();
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
        EventWait { event: self.clone(), slot: None }
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
    /// Its slot in the event's waiters once it has waited.
    slot: Option<usize>,
}

impl Future for EventWait {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.event.is_set() {
            return Poll::Ready(());
        }
        let mut waiters = this.event.inner.waiters.borrow_mut();
        match this.slot {
            Some(i) => waiters.update(i, cx.waker()),
            None => this.slot = Some(waiters.add(cx.waker().clone())),
        }
        Poll::Pending
    }
}

impl Drop for EventWait {
    fn drop(&mut self) {
        if let Some(i) = self.slot {
            // The waker is dropped after the list is released.
            let waker = self.event.inner.waiters.borrow_mut().remove(i);
            drop(waker);
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::task::Wake;

    #[derive(Default)]
    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    fn poll(wait: &mut EventWait, count: &Arc<Count>) -> Poll<()> {
        let waker = Waker::from(count.clone());
        Pin::new(wait).poll(&mut Context::from_waker(&waker))
    }

    fn stored(event: &Event) -> usize {
        event.inner.waiters.borrow().slots.iter().filter(|s| s.is_some()).count()
    }

    #[test]
    fn set_wakes_the_pending_waits_and_later_waits_are_ready_at_once() {
        let event = Event::new();
        let (a, b) = (Arc::new(Count::default()), Arc::new(Count::default()));
        let (mut wa, mut wb) = (event.wait(), event.wait());
        assert!(poll(&mut wa, &a).is_pending());
        assert!(poll(&mut wb, &b).is_pending());
        event.set();
        assert_eq!((a.0.load(Ordering::SeqCst), b.0.load(Ordering::SeqCst)), (1, 1));
        assert!(poll(&mut wa, &a).is_ready());
        assert!(poll(&mut event.wait(), &a).is_ready());
        assert_eq!(stored(&event), 0);
    }

    #[test]
    fn a_dropped_wait_leaves_no_waker_and_its_slot_is_reused() {
        let event = Event::new();
        let task = Arc::new(Count::default());
        for _ in 0..1000 {
            let mut wait = event.wait();
            assert!(poll(&mut wait, &task).is_pending());
        }
        assert_eq!(stored(&event), 0);
        assert_eq!(event.inner.waiters.borrow().slots.len(), 1);
        // Nothing but this test holds the task's waker any more.
        assert_eq!(Arc::strong_count(&task), 1);
    }

    #[test]
    fn a_wait_polled_again_keeps_one_slot_with_the_latest_waker() {
        let event = Event::new();
        let (first, second) = (Arc::new(Count::default()), Arc::new(Count::default()));
        let mut wait = event.wait();
        for _ in 0..10 {
            assert!(poll(&mut wait, &first).is_pending());
        }
        assert!(poll(&mut wait, &second).is_pending());
        assert_eq!(stored(&event), 1);
        event.set();
        assert_eq!((first.0.load(Ordering::SeqCst), second.0.load(Ordering::SeqCst)), (0, 1));
    }

    #[test]
    fn waits_dropped_after_the_event_is_set_free_only_their_own_slots() {
        let event = Event::new();
        let task = Arc::new(Count::default());
        let mut early = event.wait();
        assert!(poll(&mut early, &task).is_pending());
        event.set();
        drop(early);
        let waiters = event.inner.waiters.borrow();
        assert_eq!((waiters.slots.len(), waiters.free.as_slice()), (1, &[0][..]));
    }
}
