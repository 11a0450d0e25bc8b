//! The checkouts of one core waiting for a pool's connections: a FIFO of events, set by a
//! checkin or a closing connection, and one waiter at a time looking periodically for budget
//! another core freed.
//!
//! First come, first served (#41): a unit freed goes to the waiter first in line, and until that
//! waiter has run and taken it (`owed`), a checkout arriving meanwhile queues behind it rather
//! than taking the idle connection on the way in. And a checkout is told at once when the line
//! ahead of it would outlast its deadline: the core measures how often a unit frees while
//! checkouts wait (`Pace`), so the expected wait of the next in line is its place times that
//! interval. Both are core-local and touched only when a checkout waits or a unit frees with
//! waiters queued: the uncontended checkout reads two cells.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

use super::limit::Over;
use crate::rt::{self, Event};

/// How far back the pace looks: an interval weighs e^(-age / PACE_HORIZON). Long enough that a
/// stall of the core (a busy host deschedules it for tens of milliseconds) moves the estimate of
/// a pool freeing a unit every millisecond by about a tenth, not tenfold; short enough to follow
/// a change of load within a second or two.
const PACE_HORIZON: f64 = 1.0;
/// Intervals measured before the expected wait is trusted to turn a checkout away.
const PACE_SAMPLES: u32 = 8;
/// How long after a checkout of this core waited out its whole deadline the expected wait may
/// turn checkouts away. Only then: the pace is the past second's, and a core slowed for a while
/// (10,000 clients logging in while others queued) read 111 s for waits that then took 1 to 8 s;
/// refusing on it alone turned away thousands that would have been served (perf/RESULTS.md).
const REFUSE_AFTER_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a unit frees on this core while checkouts wait: the time between consecutive frees
/// within one stretch of waiting over their number, both decayed with age (an interval spanning a
/// time with nobody waiting measures the clients' think time, not the pool's, and is not taken).
/// A ratio of sums rather than an average of intervals: one long interval among thousands of
/// short ones weighs its length, not its count.
#[derive(Debug, Default)]
struct Pace {
    last: Option<Instant>,
    /// Decayed sum of the intervals, seconds.
    time: f64,
    /// Decayed count of the intervals.
    frees: f64,
    samples: u32,
}

impl Pace {
    /// A unit freed at `now` while a checkout waited.
    fn freed(&mut self, now: Instant) {
        if let Some(last) = self.last {
            let gap = now.saturating_duration_since(last).as_secs_f64();
            let decay = (-gap / PACE_HORIZON).exp();
            self.time = self.time * decay + gap;
            self.frees = self.frees * decay + 1.0;
            self.samples = self.samples.saturating_add(1);
        }
        self.last = Some(now);
    }

    /// Nobody waits any more: the next interval starts with the next stretch of waiting.
    fn idle(&mut self) {
        self.last = None;
    }

    /// The expected wait of the checkout `place`-th in line (1: first), once measured.
    fn expected(&self, place: usize) -> Option<Duration> {
        (self.samples >= PACE_SAMPLES && self.frees > 0.0)
            .then(|| Duration::from_secs_f64(self.time / self.frees * place as f64))
    }
}

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
    /// Waiters woken for a unit that have not run yet: the unit is theirs.
    owed: Cell<u32>,
    pace: RefCell<Pace>,
    /// When a checkout of this core last waited out its whole deadline.
    deadline_hit: Cell<Option<Instant>>,
}

impl Waiters {
    /// Wakes the checkout first in line: a unit was freed on this core.
    pub(crate) fn wake_one(&self) {
        self.wake(true);
    }

    /// Wakes the checkout first in line, for a unit freed (`freed`: measured by the pace) or to
    /// hand it the recheck.
    fn wake(&self, freed: bool) {
        let next = self.queue.borrow_mut().pop_front();
        match next {
            Some(ev) => {
                if freed {
                    self.pace.borrow_mut().freed(rt::now());
                }
                ev.set();
                self.owed.set(self.owed.get() + 1);
            }
            None => self.pace.borrow_mut().idle(),
        }
    }

    /// Whether a waiter was woken for a unit freed here and has yet to take it: a checkout
    /// arriving now must not take it first (it queues behind instead).
    pub(super) fn owed(&self) -> bool {
        self.owed.get() > 0
    }

    /// How long a checkout starting to wait now is expected to wait: its place in line (behind
    /// every waiter queued or woken) times the measured interval between units freed; `None`
    /// until measured.
    fn expected_wait(&self) -> Option<Duration> {
        let place = self.queue.borrow().len() + self.owed.get() as usize + 1;
        self.pace.borrow().expected(place)
    }

    /// A checkout waited out its whole deadline at `now`: the line is known to outlast deadlines.
    pub(super) fn deadline_hit(&self, now: Instant) {
        self.deadline_hit.set(Some(now));
    }

    /// Why a checkout starting to wait at `now` should be turned away at once: the line ahead
    /// of it is expected to outlast its `deadline` (it would wait all of it and fail anyway),
    /// and a checkout here did wait out its deadline lately ([`REFUSE_AFTER_TIMEOUT`]).
    pub(super) fn beyond(&self, deadline: Instant, now: Instant) -> Option<Over> {
        let hit = self.deadline_hit.get()?;
        if now.saturating_duration_since(hit) > REFUSE_AFTER_TIMEOUT {
            return None;
        }
        let expected = self.expected_wait()?;
        let left = deadline.saturating_duration_since(now);
        (expected > left).then_some(Over::Queue { expected_ms: expected.as_millis(), left_ms: left.as_millis() })
    }

    /// A woken waiter ran (or left): the unit it was woken for is anyone's again.
    fn paid(&self) {
        self.owed.set(self.owed.get().saturating_sub(1));
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
            self.waiters.paid();
            // First in line again until served (then dropped), or for the next unit if another
            // core's checkout took this one first.
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
        } else {
            // Woken, and gone before it ran (its deadline, or its client left).
            self.waiters.paid();
        }
        drop(queue);
        if self.rechecks {
            self.waiters.rechecking.set(false);
            // The next waiter wakes, finds nothing and takes the recheck over.
            self.waiters.wake(false);
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

    #[test]
    fn a_woken_waiter_is_owed_its_unit_until_it_runs_or_leaves() {
        let waiters = Waiters::default();
        let (mut a, b) = (Waiting::new(&waiters), Waiting::new(&waiters));
        assert!(!waiters.owed());
        waiters.wake_one();
        assert!(waiters.owed(), "a checkout arriving now queues behind `a`");
        assert!(poll_wait(&mut a).is_ready());
        assert!(!waiters.owed(), "`a` ran: first in line again, nothing owed");
        waiters.wake_one();
        drop(a);
        // `a` left before running; what it was owed is anyone's, and `b`, woken to take the
        // recheck over, is owed until it runs.
        assert!(waiters.owed() && b.ev.is_set());
        drop(b);
        assert!(!waiters.owed());
        assert_eq!(queued(&waiters), 0);
    }

    #[test]
    fn the_expected_wait_is_the_place_in_line_times_the_interval_between_units_freed() {
        let t0 = Instant::now();
        let mut pace = Pace::default();
        assert_eq!(pace.expected(1), None, "nothing measured");
        for i in 0..=PACE_SAMPLES {
            pace.freed(t0 + Duration::from_millis(10 * u64::from(i)));
        }
        let ten = pace.expected(1).expect("measured");
        assert!(ten.abs_diff(Duration::from_millis(10)) < Duration::from_micros(10), "{ten:?}");
        assert!(pace.expected(30).expect("measured").abs_diff(Duration::from_millis(300)) < Duration::from_micros(300));
        // One stall among many short intervals weighs its length, not its count.
        let mut t = t0;
        for _ in 0..1000 {
            t += Duration::from_millis(1);
            pace.freed(t);
        }
        t += Duration::from_millis(50);
        pace.freed(t);
        let after = pace.expected(1).expect("measured");
        assert!(after < Duration::from_micros(1250), "{after:?}");
        // A stretch with nobody waiting is not an interval of the pool's.
        pace.idle();
        pace.freed(t + Duration::from_secs(60));
        assert_eq!(pace.expected(1), Some(after));
    }

    #[test]
    fn a_checkout_is_turned_away_only_when_the_line_outlasts_its_deadline() {
        let waiters = Waiters::default();
        let t0 = Instant::now();
        for i in 0..=PACE_SAMPLES {
            waiters.pace.borrow_mut().freed(t0 + Duration::from_millis(10 * u64::from(i)));
        }
        let queued: Vec<Waiting<'_>> = (0..9).map(|_| Waiting::new(&waiters)).collect();
        assert_eq!(waiters.beyond(t0 + Duration::from_millis(50), t0), None, "no deadline hit yet");
        waiters.deadline_hit(t0);
        // Tenth in line: about 100 ms.
        assert_eq!(waiters.beyond(t0 + Duration::from_millis(150), t0), None);
        let over = waiters.beyond(t0 + Duration::from_millis(50), t0).expect("turned away");
        assert!(matches!(over, Over::Queue { expected_ms: 99..=101, left_ms: 50 }), "{over:?}");
        let later = t0 + REFUSE_AFTER_TIMEOUT + Duration::from_secs(1);
        assert_eq!(waiters.beyond(later + Duration::from_millis(50), later), None, "the hit is old");
        drop(queued);
    }
}
