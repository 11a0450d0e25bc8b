//! Core-local timers: an ordered map of deadlines. The loop fires what is due and then waits in
//! `io_uring_enter` no longer than the nearest deadline, so no timer is ever armed in the kernel.

use std::collections::BTreeMap;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use super::executor::with_core;

/// Deadline plus a sequence number: equal deadlines fire in the order they were armed.
type Key = (Instant, u64);

/// The pending timers of one core.
#[derive(Default)]
pub(super) struct Timers {
    map: BTreeMap<Key, Waker>,
    seq: u64,
}

impl Timers {
    fn insert(&mut self, deadline: Instant, waker: Waker) -> Key {
        self.seq += 1;
        let key = (deadline, self.seq);
        self.map.insert(key, waker);
        key
    }

    /// Removes and returns the wakers of every timer due at `now`, in deadline order.
    pub(super) fn due(&mut self, now: Instant) -> Vec<Waker> {
        let mut fired = Vec::new();
        while let Some(entry) = self.map.first_entry() {
            if entry.key().0 > now {
                break;
            }
            fired.push(entry.remove());
        }
        fired
    }

    /// The nearest deadline still pending.
    pub(super) fn next(&self) -> Option<Instant> {
        self.map.keys().next().map(|k| k.0)
    }

    /// Drops every waker (when the core ends).
    pub(super) fn clear(&mut self) -> BTreeMap<Key, Waker> {
        std::mem::take(&mut self.map)
    }
}

/// Completes at `deadline`; removes its timer when dropped early.
pub struct Sleep {
    deadline: Instant,
    key: Option<Key>,
    /// `!Send` and `!Sync` by type: `key` names a timer in the map of the core that armed it,
    /// and on another thread `with_core` would find another core's map (or none).
    _core: PhantomData<*const ()>,
}

impl Sleep {
    /// A timer for `deadline`, armed at its first poll.
    pub(super) fn new(deadline: Instant) -> Self {
        Self { deadline, key: None, _core: PhantomData }
    }

    fn disarm(&mut self) -> Option<Waker> {
        let key = self.key.take()?;
        with_core(|core| core.timers.borrow_mut().map.remove(&key)).flatten()
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            drop(self.disarm());
            return Poll::Ready(());
        }
        let deadline = self.deadline;
        let key = self.key;
        let armed = with_core(|core| {
            let mut timers = core.timers.borrow_mut();
            match key.and_then(|k| timers.map.get_mut(&k).map(|w| (k, w))) {
                Some((k, w)) => {
                    if !w.will_wake(cx.waker()) {
                        *w = cx.waker().clone();
                    }
                    k
                }
                // First poll, or fired already (a spurious early wake-up): arm again.
                None => timers.insert(deadline, cx.waker().clone()),
            }
        });
        match armed {
            Some(k) => {
                self.key = Some(k);
                Poll::Pending
            }
            // Not on a core: nothing could ever wake this timer, so it does not wait.
            None => Poll::Ready(()),
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // The waker is dropped after the timer map is released.
        drop(self.disarm());
    }
}
