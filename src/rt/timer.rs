//! Core-local timers: a binary heap of deadlines over a slab of wakers. The loop fires what is
//! due and then waits in `io_uring_enter` no longer than the nearest deadline, so no timer is
//! ever armed in the kernel.
//!
//! A lazy timer (`sleep_lazy_until`) sits in a heap of its own that the wait ignores: it fires
//! at the first turn at or after its deadline that something else caused. Periodic looks that
//! need no precision (a core's upkeep following the pool trade under load, #39) then cost no
//! turn of their own on a loaded core, where turns come anyway.
//!
//! Most timers never fire: a checkout's or a read's deadline is dropped when the work finishes
//! first. So arming is a slab slot and a heap push, a re-poll looks its slot up by index, and a
//! cancel only frees the slot; the heap entry it leaves is skipped when it comes up, and the
//! heap is compacted once such entries outnumber the live ones. (An ordered map cost a tree
//! insert, a search per re-poll and a rebalancing removal per timer: #39 measured it among what
//! a waiting checkout cost.)

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

use super::executor::with_core;

/// A timer's place: its slab slot and the sequence number it was armed with (a slot is reused,
/// a sequence number never).
#[derive(Clone, Copy, PartialEq, Eq)]
struct Key {
    slot: usize,
    seq: u64,
}

/// One heap entry: deadline, then sequence number, so equal deadlines fire in the order they
/// were armed.
type Entry = Reverse<(Instant, u64, usize)>;

/// A slab slot: the waker of the timer armed with `seq`, `None` when free.
#[derive(Default)]
struct Slot {
    seq: u64,
    waker: Option<Waker>,
}

/// Heap entries tolerated beyond the live timers before a compaction, on top of as many again.
const SLACK: usize = 64;

/// The pending timers of one core.
#[derive(Default)]
pub(super) struct Timers {
    /// Timers that bound the loop's wait.
    heap: BinaryHeap<Entry>,
    /// Lazy timers: fired by turns that happen anyway, never waited for.
    lazy: BinaryHeap<Entry>,
    slots: Vec<Slot>,
    free: Vec<usize>,
    live: usize,
    seq: u64,
}

impl Timers {
    fn insert(&mut self, deadline: Instant, lazy: bool, waker: Waker) -> Key {
        self.seq += 1;
        let seq = self.seq;
        let slot = self.free.pop().unwrap_or_else(|| {
            self.slots.push(Slot::default());
            self.slots.len() - 1
        });
        if let Some(s) = self.slots.get_mut(slot) {
            *s = Slot { seq, waker: Some(waker) };
        }
        self.live += 1;
        if self.heap.len() + self.lazy.len() >= 2 * self.live + SLACK {
            self.compact();
        }
        let heap = if lazy { &mut self.lazy } else { &mut self.heap };
        heap.push(Reverse((deadline, seq, slot)));
        Key { slot, seq }
    }

    /// The waker of a live timer, to refresh at a re-poll.
    fn waker_mut(&mut self, key: Key) -> Option<&mut Waker> {
        self.slots.get_mut(key.slot).filter(|s| s.seq == key.seq)?.waker.as_mut()
    }

    /// Cancels the timer `key` if it is still pending; returns its waker.
    fn remove(&mut self, key: Key) -> Option<Waker> {
        let slot = self.slots.get_mut(key.slot).filter(|s| s.seq == key.seq)?;
        let waker = slot.waker.take()?;
        self.free.push(key.slot);
        self.live -= 1;
        Some(waker)
    }

    /// Drops the heap entries of cancelled timers.
    fn compact(&mut self) {
        let slots = &self.slots;
        let live =
            |Reverse((_, seq, slot)): &Entry| slots.get(*slot).is_some_and(|s| s.seq == *seq && s.waker.is_some());
        self.heap.retain(live);
        self.lazy.retain(live);
    }

    /// Removes and returns the waker of one timer due at `now` (strict ones first, each heap in
    /// deadline order), `None` once none is. One at a time, so the loop wakes them with the
    /// timers released and without collecting them anywhere (#39: a vector per turn).
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<Waker> {
        for lazy in [false, true] {
            loop {
                let heap = if lazy { &mut self.lazy } else { &mut self.heap };
                let Some(Reverse((deadline, seq, slot))) = heap.peek().copied() else { break };
                if deadline > now {
                    break;
                }
                heap.pop();
                if let Some(waker) = self.remove(Key { slot, seq }) {
                    return Some(waker);
                }
            }
        }
        None
    }

    /// The nearest deadline still pending (cancelled timers at the top are dropped first, so
    /// the loop does not wake for them).
    pub(super) fn next(&mut self) -> Option<Instant> {
        while let Some(Reverse((deadline, seq, slot))) = self.heap.peek().copied() {
            if self.slots.get(slot).is_some_and(|s| s.seq == seq && s.waker.is_some()) {
                return Some(deadline);
            }
            self.heap.pop();
        }
        None
    }

    /// Takes every pending waker out (when the core ends), to be dropped by the caller.
    pub(super) fn clear(&mut self) -> Vec<Waker> {
        let wakers = self.slots.iter_mut().filter_map(|s| s.waker.take()).collect();
        *self = Self { seq: self.seq, ..Self::default() };
        wakers
    }
}

/// Completes at `deadline` (a lazy one: at the first turn of the loop from then on); removes
/// its timer when dropped early.
pub struct Sleep {
    deadline: Instant,
    lazy: bool,
    key: Option<Key>,
    /// `!Send` and `!Sync` by type: `key` names a timer in the slab of the core that armed it,
    /// and on another thread `with_core` would find another core's (or none).
    _core: PhantomData<*const ()>,
}

impl Sleep {
    /// A timer for `deadline`, armed at its first poll.
    pub(super) fn new(deadline: Instant) -> Self {
        Self { deadline, lazy: false, key: None, _core: PhantomData }
    }

    /// A lazy timer for `deadline` (see the module's header).
    pub(super) fn lazy(deadline: Instant) -> Self {
        Self { deadline, lazy: true, key: None, _core: PhantomData }
    }

    fn disarm(&mut self) -> Option<Waker> {
        let key = self.key.take()?;
        with_core(|core| core.timers.borrow_mut().remove(key)).flatten()
    }
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let (deadline, lazy, key) = (self.deadline, self.lazy, self.key);
        // Only the first poll looks at the clock: later, the timer's slot says whether it fired
        // (it fires only once due), so a re-poll costs nothing (#39). The turn's clock, which
        // the loop fires timers by: by the real one, a sleep could end in the very turn whose
        // clock says it is not due yet, and a task that sleeps until its own check of the time
        // passes would spin in that turn.
        if key.is_none() && super::time::now() >= deadline {
            return Poll::Ready(());
        }
        let armed = with_core(|core| {
            let mut timers = core.timers.borrow_mut();
            match key {
                Some(k) => timers.waker_mut(k).map(|w| {
                    if !w.will_wake(cx.waker()) {
                        *w = cx.waker().clone();
                    }
                    k
                }),
                None => Some(timers.insert(deadline, lazy, cx.waker().clone())),
            }
        });
        match armed {
            Some(Some(k)) => {
                self.key = Some(k);
                Poll::Pending
            }
            // Fired (or taken out as the core ends).
            Some(None) => {
                self.key = None;
                Poll::Ready(())
            }
            // Not on a core: nothing could ever wake this timer, so it does not wait.
            None => Poll::Ready(()),
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        // The waker is dropped after the timer slab is released.
        drop(self.disarm());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// Fires every timer due at `now`; how many fired.
    fn fire(t: &mut Timers, now: Instant) -> usize {
        std::iter::from_fn(|| t.pop_due(now)).count()
    }

    #[test]
    fn lazy_timers_fire_when_due_but_never_bound_the_wait() {
        let mut t = Timers::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let lazy = t.insert(at(5), true, Waker::noop().clone());
        assert_eq!(t.next(), None, "nothing the loop must wake for");
        let strict = t.insert(at(50), false, Waker::noop().clone());
        assert_eq!(t.next(), Some(at(50)));
        assert_eq!(fire(&mut t, at(4)), 0);
        assert_eq!(fire(&mut t, at(6)), 1, "the lazy one, at a turn past its deadline");
        assert!(t.waker_mut(lazy).is_none() && t.waker_mut(strict).is_some());
        let cancelled = t.insert(at(7), true, Waker::noop().clone());
        assert!(t.remove(cancelled).is_some());
        assert_eq!(fire(&mut t, at(60)), 1, "the strict one; the cancelled lazy one never");
        assert_eq!(t.lazy.len() + t.heap.len(), 0);
    }

    #[test]
    fn timers_fire_in_deadline_then_arming_order_and_cancelled_ones_never() {
        let mut t = Timers::default();
        let t0 = Instant::now();
        let at = |ms| t0 + Duration::from_millis(ms);
        let a = t.insert(at(30), false, Waker::noop().clone());
        let b = t.insert(at(10), false, Waker::noop().clone());
        let c = t.insert(at(20), false, Waker::noop().clone());
        let d = t.insert(at(10), false, Waker::noop().clone());
        assert_eq!(t.next(), Some(at(10)));
        assert!(t.remove(b).is_some());
        assert!(t.remove(b).is_none(), "a timer is cancelled once");
        assert_eq!(t.next(), Some(at(10)), "d is still due at 10");
        assert_eq!(fire(&mut t, at(20)), 2, "d and c");
        assert!(t.remove(d).is_none() && t.remove(c).is_none(), "fired timers are gone");
        // Slots are reused, and a stale key never reaches the new timer in its slot.
        let e = t.insert(at(40), false, Waker::noop().clone());
        assert!(t.waker_mut(b).is_none() && t.waker_mut(d).is_none() && t.waker_mut(e).is_some());
        assert!(t.remove(a).is_some());
        assert_eq!(t.next(), Some(at(40)));
        assert_eq!(fire(&mut t, at(100)), 1);
        assert_eq!(t.next(), None);
    }

    #[test]
    fn cancelled_timers_do_not_pile_up_in_the_heap() {
        let mut t = Timers::default();
        let far = Instant::now() + Duration::from_secs(3600);
        let kept = t.insert(far, false, Waker::noop().clone());
        for _ in 0..10_000 {
            let k = t.insert(far, false, Waker::noop().clone());
            t.remove(k);
        }
        assert!(t.heap.len() <= 2 * t.live + SLACK + 1, "{} entries for {} timers", t.heap.len(), t.live);
        assert_eq!(t.slots.len(), 2, "a cancelled timer's slot is reused");
        assert!(t.waker_mut(kept).is_some());
        assert_eq!(t.clear().len(), 1);
        assert_eq!(t.next(), None);
    }
}
