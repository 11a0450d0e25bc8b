//! The checkouts of one core waiting for a pool's connections: a FIFO of events, set by a
//! checkin or a closing connection, and one waiter at a time answering calls from other cores
//! that freed a unit of the budget or handed one over.
//!
//! First come, first served (#41): a unit freed goes to the waiter first in line, and until that
//! waiter has run and taken it (`owed`), a checkout arriving meanwhile queues behind it rather
//! than taking the idle connection on the way in. Across cores, each waiter holds a ticket of
//! the pool's line (`pool::line`): the cores split the budget by their numbers of waiters
//! (`CorePool::over_share`), and a connection checked in here while a waiter of another core
//! has been overtaken by this core's first beyond a bound ([`OVERTAKEN_SHARE`],
//! [`MOVE_AFTER`]) goes to that core instead (closed here, opened there). And a checkout is told at once when the line ahead of it would
//! outlast its deadline: the core measures how often a unit frees while checkouts wait
//! (`Pace`), so the expected wait of the next in line is its place times that interval. The
//! uncontended checkout reads two core-local cells; only a waiting checkout, a checkin while
//! one waits, and a close while another core waits touch the line.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::budget::Budget;
use super::limit::Over;
use super::line::{Line, Seat, Ticket};
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

/// How long a core leaves a budget unit it gave up to another core: longer than the other core
/// takes to wake on the close's call ([`Waiters::unit_freed`]) and take the unit. A call to
/// this core ends it sooner.
const YIELD_FOR: Duration = Duration::from_millis(10);

/// A waiter of another core may be overtaken by this share of the tickets taken since it
/// started waiting (or by the pool's size, if that is more) before a connection checked in here
/// goes to it: its wait is then at most about 1 + 1/8 of what one line across cores would give
/// it, whatever the line's length. A fixed slack of the pool's size moved a connection between
/// the cores every 23 ms with 10,000 clients queued (perf/RESULTS.md): the clients split unevenly
/// between the cores, by tens, and an even split of 8 connections cannot follow a fraction of one
/// but by moving one back and forth, a backend login each time.
const OVERTAKEN_SHARE: u64 = 8;

/// How long a waiter of another core must have waited before a connection is moved to it: a
/// move costs a backend login (milliseconds, tens on a busy host) during which the unit serves
/// nobody, more than a short wait loses to being overtaken. Without it, 10,000 clients at
/// 2,000 transactions/s, queueing now and then for a moment on either core, moved connections
/// back and forth 60 times a second and the logins made the queues they were moved for
/// (perf/RESULTS.md).
const MOVE_AFTER: Duration = Duration::from_millis(50);

/// How often the waiter answering calls looks again without being woken, on a pool whose
/// connections serve one user each (pass-through, #23): a connection checked in or closed there
/// wakes the first waiter, which may be of another user or at its user's own cap, and an idle
/// connection of another user (closed for a waiter after it waited a round) frees nothing until
/// someone looks.
pub(super) const RECHECK_PER_USER: Duration = Duration::from_millis(2);

/// The same on a pool whose connections serve anyone: every unit freed wakes a waiter or calls
/// another core's, so this is only the bound on a wake missed by design: a unit this core left
/// to another core whose waiter went away meanwhile ([`YIELD_FOR`]), a backend becoming usable
/// again, a unit taken and given back by another core in the instant this core looked.
pub(super) const RECHECK_SHARED: Duration = Duration::from_millis(25);

/// State shared between a pool and the connections it lent out, so a closing connection can
/// wake a waiter (its budget unit is free again).
pub(crate) struct Waiters {
    /// One event per waiting checkout with its ticket of the pool's line, in arrival order; an
    /// event is set only once popped.
    queue: RefCell<VecDeque<(Event, Ticket)>>,
    /// Whether a waiting checkout of this core answers calls from other cores. One does: a
    /// unit freed elsewhere serves one waiter.
    calling: Cell<bool>,
    /// Waiters woken for a unit that have not run yet: the unit is theirs.
    owed: Cell<u32>,
    pace: RefCell<Pace>,
    /// When a checkout of this core last waited out its whole deadline.
    deadline_hit: Cell<Option<Instant>>,
    line: Arc<Line>,
    seat: Arc<Seat>,
    /// The other cores' seats, as of the line's generation `seen`.
    others: RefCell<Vec<Arc<Seat>>>,
    seen: Cell<Option<u64>>,
    /// How many tickets a waiter of another core may be overtaken by at least before a
    /// connection checked in here goes to it (see [`OVERTAKEN_SHARE`]): the pool's size, so a
    /// move (a close here and a backend login there) corrects an order that is off by more than
    /// a whole turn of the pool.
    slack: u64,
    /// A connection is being closed for another core: this core's waiters are not woken for it.
    giving: Cell<bool>,
    /// Until when this core leaves a unit it gave up to the core it gave it up for.
    yield_until: Cell<Option<Instant>>,
    /// How long the waiter answering calls waits before it looks again unwoken
    /// ([`RECHECK_PER_USER`], [`RECHECK_SHARED`]); never where nobody waits (a health probe's).
    recheck: Option<Duration>,
}

impl Default for Waiters {
    fn default() -> Self {
        Self::new(Arc::default(), 1, None)
    }
}

impl Drop for Waiters {
    fn drop(&mut self) {
        self.line.leave(&self.seat);
    }
}

impl Waiters {
    /// The waiters of one core's pool object of `capacity` connections, seated in `line`, the
    /// one answering calls looking again every `recheck`.
    pub(crate) fn new(line: Arc<Line>, capacity: u32, recheck: Option<Duration>) -> Self {
        let seat = line.join();
        Self {
            queue: RefCell::default(),
            calling: Cell::new(false),
            owed: Cell::new(0),
            pace: RefCell::default(),
            deadline_hit: Cell::new(None),
            line,
            seat,
            others: RefCell::default(),
            seen: Cell::new(None),
            slack: u64::from(capacity.max(1)),
            giving: Cell::new(false),
            yield_until: Cell::new(None),
            recheck,
        }
    }

    /// Wakes the checkout first in line: a unit was freed on this core.
    pub(crate) fn wake_one(&self) {
        self.wake(true);
    }

    /// A unit of `budget` was freed on this core (a connection closed): this core's first
    /// waiter is woken, unless the connection was closed for another core; and other cores
    /// waiting for the budget are called, as they cannot see the unit otherwise.
    pub(crate) fn unit_freed(&self, budget: &Budget) {
        if !self.giving.get() {
            self.wake_one();
        }
        self.call_others(budget);
    }

    /// Calls the other cores waiting for `budget`: a unit of it is free again. Alone (this
    /// core's waiters not woken) for a unit taken and given back at once, as by a checkout whose
    /// user is at its own cap: a waiter here woken for it would be the very checkout that gave
    /// it back, and would wake itself again without end.
    pub(crate) fn call_others(&self, budget: &Budget) {
        let here = u32::from(!self.queue.borrow().is_empty() || self.owed());
        if budget.wanted() > here {
            self.refresh();
            for seat in self.others.borrow().iter().filter(|s| s.head().is_some()) {
                seat.call();
            }
        }
    }

    /// Runs `close`, which closes a connection given up for another core (see
    /// [`Waiters::unit_freed`]), and leaves the unit to that core for [`YIELD_FOR`]: this
    /// core's checkouts open no connection meanwhile (see [`Waiters::yielding`]).
    pub(super) fn giving(&self, close: impl FnOnce()) {
        self.yield_until.set(Some(rt::now() + YIELD_FOR));
        self.giving.set(true);
        close();
        self.giving.set(false);
    }

    /// Whether this core gave a connection up for another core so recently that it leaves the
    /// unit to that core: its own waiters would otherwise take it back first.
    pub(super) fn yielding(&self) -> bool {
        self.yield_until.get().is_some_and(|until| rt::now() < until)
    }

    /// Whether a connection checked in at `now` should go to another core: one whose oldest waiter
    /// has waited [`MOVE_AFTER`] and is older than this core's by more than its slack (see
    /// [`OVERTAKEN_SHARE`]), and that has no unit handed to it yet (claimed here). False at once
    /// while no checkout of this core waits.
    pub(super) fn overtaken(&self, now: Instant) -> bool {
        let Some(mine) = self.queue.borrow().front().map(|(_, t)| t.number) else {
            return false;
        };
        self.refresh();
        let others = self.others.borrow();
        let oldest = others.iter().filter_map(|s| Some((s.head()?, s))).min_by_key(|(h, _)| h.number);
        let Some((oldest, seat)) = oldest.filter(|(h, _)| self.line.waited(*h, now) >= MOVE_AFTER) else {
            return false;
        };
        let slack = self.slack.max(self.line.issued().saturating_sub(oldest.number) / OVERTAKEN_SHARE);
        oldest.number.saturating_add(slack) < mine && seat.grant()
    }

    /// Copies the other cores' seats if one joined or left since the last look.
    fn refresh(&self) {
        let generation = self.line.generation();
        if self.seen.get() != Some(generation) {
            *self.others.borrow_mut() = self.line.others(&self.seat);
            self.seen.set(Some(generation));
        }
    }

    /// Publishes how many wait here and the ticket of the first in line (see [`Seat::publish`]).
    fn publish(&self) {
        let queue = self.queue.borrow();
        self.seat.publish(queue.len() as u64 + u64::from(self.owed.get()), queue.front().map(|(_, t)| *t));
    }

    /// This core's checkouts waiting (queued or woken) and those of every core, while both are
    /// some: the demand a core's part of the budget is weighed by (`CorePool::over_share`).
    pub(super) fn demand(&self) -> Option<(u64, u64)> {
        let mine = self.queue.borrow().len() as u64 + u64::from(self.owed.get());
        self.refresh();
        let others: u64 = self.others.borrow().iter().map(|s| s.waiting()).sum();
        (mine > 0 && others > 0).then_some((mine, mine + others))
    }

    /// Wakes the checkout first in line, for a unit freed (`freed`: measured by the pace) or to
    /// hand it the calls.
    fn wake(&self, freed: bool) {
        let next = self.queue.borrow_mut().pop_front();
        match next {
            Some((ev, _)) => {
                if freed {
                    self.pace.borrow_mut().freed(rt::now());
                }
                ev.set();
                self.owed.set(self.owed.get() + 1);
                self.publish();
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
/// mid-wait) leaves no event behind, and a waiter that answered calls hands that on.
pub(super) struct Waiting<'a> {
    waiters: &'a Waiters,
    ev: Event,
    ticket: Ticket,
    calls: bool,
    /// The last wait ended on a call from another core: its unit was looked for since.
    was_called: bool,
}

impl<'a> Waiting<'a> {
    pub(super) fn new(waiters: &'a Waiters) -> Self {
        let ev = Event::new();
        let ticket = waiters.line.ticket(rt::now());
        waiters.queue.borrow_mut().push_back((ev.clone(), ticket));
        waiters.publish();
        Self { waiters, ev, ticket, calls: false, was_called: false }
    }

    /// Waits until a unit is freed on this core, or, for the waiter answering calls, until
    /// another core freed one or handed one over.
    pub(super) async fn wait(&mut self) {
        let seat = &self.waiters.seat;
        if !self.calls && !self.waiters.calling.get() {
            self.waiters.calling.set(true);
            self.calls = true;
        }
        if self.was_called {
            // It looked for the unit handed over: another may be handed now.
            seat.ungrant();
        }
        self.was_called = false;
        if self.calls {
            let called = async {
                seat.called().await;
                true
            };
            let woken = async {
                self.ev.wait().await;
                false
            };
            let rechecked = async {
                match self.waiters.recheck {
                    Some(every) => rt::sleep(every).await,
                    None => std::future::pending().await,
                }
                false
            };
            self.was_called = rt::race(woken, rt::race(called, rechecked)).await;
            if self.was_called {
                // Another core freed a unit for this one: whatever this core gave up before is
                // taken, or the two cores handed units to each other and each would leave its own.
                self.waiters.yield_until.set(None);
            }
        } else {
            self.ev.wait().await;
        }
        if self.ev.is_set() {
            self.waiters.paid();
            // First in line again until served (then dropped), or for the next unit if another
            // core's checkout took this one first.
            self.ev = Event::new();
            self.waiters.queue.borrow_mut().push_front((self.ev.clone(), self.ticket));
            self.waiters.publish();
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        let mut queue = self.waiters.queue.borrow_mut();
        if queue.front().is_some_and(|(e, _)| e.same(&self.ev)) {
            // The usual case: woken, put first in line again, then served.
            queue.pop_front();
        } else if !self.ev.is_set() {
            queue.retain(|(e, _)| !e.same(&self.ev));
        } else {
            // Woken, and gone before it ran (its deadline, or its client left).
            self.waiters.paid();
        }
        drop(queue);
        self.waiters.publish();
        if self.calls {
            self.waiters.seat.hang_up();
            if self.was_called {
                self.waiters.seat.ungrant();
            }
            self.waiters.calling.set(false);
            // The next waiter wakes, finds nothing and answers calls from then on.
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

    /// Polls one wait once: pending until woken or, for the waiter answering calls, called.
    fn poll_wait(w: &mut Waiting<'_>) -> Poll<()> {
        let fut = pin!(w.wait());
        fut.poll(&mut Context::from_waker(Waker::noop()))
    }

    fn queued(waiters: &Waiters) -> usize {
        waiters.queue.borrow().len()
    }

    #[test]
    fn one_waiter_answers_calls_from_other_cores_and_the_others_wait_to_be_woken() {
        let waiters = Waiters::default();
        let (mut a, mut b) = (Waiting::new(&waiters), Waiting::new(&waiters));
        assert!(poll_wait(&mut a).is_pending());
        assert!(poll_wait(&mut b).is_pending());
        assert!(a.calls && !b.calls && waiters.calling.get());
        waiters.seat.call();
        assert!(poll_wait(&mut a).is_ready() && a.was_called);
        assert_eq!(queued(&waiters), 2);
    }

    #[test]
    fn the_waiter_answering_calls_looks_again_unwoken_on_a_pool_that_rechecks() {
        let waiters = Waiters::new(Arc::default(), 1, Some(RECHECK_PER_USER));
        let (mut a, mut b) = (Waiting::new(&waiters), Waiting::new(&waiters));
        // Off a core a timer completes at once: the recheck returns at the first poll.
        assert!(poll_wait(&mut a).is_ready() && !a.was_called);
        assert!(poll_wait(&mut b).is_pending(), "only the waiter answering calls rechecks");
        assert_eq!(queued(&waiters), 2, "neither left its place");
    }

    #[test]
    fn wake_one_serves_in_arrival_order_and_a_woken_waiter_missing_out_is_first_again() {
        let waiters = Waiters::default();
        let (a, b) = (Waiting::new(&waiters), Waiting::new(&waiters));
        waiters.wake_one();
        assert!(a.ev.is_set() && !b.ev.is_set());
        let mut a = a;
        assert!(poll_wait(&mut a).is_ready());
        // Woken for a unit it did not get: back in the queue, ahead of `b`, with its ticket.
        assert!(!a.ev.is_set());
        assert!(waiters.queue.borrow().front().is_some_and(|(e, t)| e.same(&a.ev) && *t == a.ticket));
        assert_eq!(waiters.seat.head(), Some(a.ticket));
        waiters.wake_one();
        assert!(a.ev.is_set() && !b.ev.is_set());
        assert_eq!(waiters.seat.head(), Some(b.ticket), "the oldest still waiting");
    }

    #[test]
    fn a_dropped_waiter_leaves_nothing_queued_and_hands_the_calls_on() {
        let waiters = Waiters::default();
        let mut a = Waiting::new(&waiters);
        let (mut b, c) = (Waiting::new(&waiters), Waiting::new(&waiters));
        assert!(poll_wait(&mut a).is_pending());
        assert!(poll_wait(&mut b).is_pending());
        drop(a);
        // The next in line is woken to answer calls from then on.
        assert!(b.ev.is_set() && !c.ev.is_set());
        assert!(!waiters.calling.get());
        assert!(poll_wait(&mut b).is_ready());
        assert!(poll_wait(&mut b).is_pending());
        assert!(b.calls);
        drop(c);
        drop(b);
        assert_eq!(queued(&waiters), 0);
        assert!(!waiters.calling.get());
        assert_eq!(waiters.seat.head(), None);
    }

    #[test]
    fn a_checkin_goes_to_the_core_whose_waiter_is_overtaken_by_more_than_the_pool() {
        let line = Arc::new(Line::default());
        let (here, there) = (Waiters::new(line.clone(), 2, None), Waiters::new(line.clone(), 2, None));
        // Looked at once every waiter below has waited long enough for a move to pay.
        let later = rt::now() + MOVE_AFTER + Duration::from_secs(1);
        assert!(!here.overtaken(later), "nobody waits here: nothing read");
        let mut old = Waiting::new(&there);
        let (first, second, _third) = (Waiting::new(&here), Waiting::new(&here), Waiting::new(&here));
        // `old` took ticket 0; here's oldest took 1: within the pool's two.
        assert!(!here.overtaken(later));
        drop(first);
        assert!(!here.overtaken(later), "2 is within two of 0");
        drop(second);
        // Here's oldest is ticket 3: `old` (0) is overtaken by three, more than the pool's two.
        assert!(here.overtaken(later), "handed to the other core");
        assert!(!here.overtaken(later), "one move at a time");
        // The other core's calling waiter looks, then waits again: another may be handed.
        there.seat.call();
        assert!(poll_wait(&mut old).is_ready());
        assert!(poll_wait(&mut old).is_pending());
        assert!(here.overtaken(later));
    }

    #[test]
    fn a_waiter_may_be_overtaken_by_a_share_of_the_tickets_taken_since_it_started_waiting() {
        let line = Arc::new(Line::default());
        let (here, there) = (Waiters::new(line.clone(), 2, None), Waiters::new(line.clone(), 2, None));
        let _old = Waiting::new(&there);
        // Four tickets taken by checkouts served since `old` took 0.
        (0..4).for_each(|_| {
            line.ticket(rt::now());
        });
        let _mine = Waiting::new(&here);
        assert!(!here.overtaken(rt::now()), "`old` has not waited long enough for a move to pay");
        let later = rt::now() + MOVE_AFTER;
        assert!(here.overtaken(later), "5 is past 0 + the pool's 2 (6 tickets taken, an eighth is 0)");
        there.seat.ungrant();
        // A long line forms behind both: 81 tickets taken since `old`'s, so it may be overtaken
        // by 10, and this core's first (5) is within that.
        (0..75).for_each(|_| {
            line.ticket(rt::now());
        });
        assert!(!here.overtaken(later));
    }

    #[test]
    fn the_demand_counts_the_waiters_here_and_on_every_core_while_both_wait() {
        let line = Arc::new(Line::default());
        let (here, there) = (Waiters::new(line.clone(), 8, None), Waiters::new(line.clone(), 8, None));
        let mine: Vec<Waiting<'_>> = (0..2).map(|_| Waiting::new(&here)).collect();
        assert_eq!(here.demand(), None, "nobody waits elsewhere");
        let theirs: Vec<Waiting<'_>> = (0..3).map(|_| Waiting::new(&there)).collect();
        assert_eq!(here.demand(), Some((2, 5)));
        there.wake_one();
        assert_eq!(here.demand(), Some((2, 5)), "a waiter woken is waiting until it ran");
        drop(mine);
        assert_eq!(here.demand(), None);
        drop(theirs);
        assert_eq!(there.seat.waiting(), 0);
    }

    #[test]
    fn a_unit_freed_calls_the_other_cores_waiting_for_the_budget_and_a_give_up_wakes_nobody_here() {
        let line = Arc::new(Line::default());
        let (here, there) = (Waiters::new(line.clone(), 1, None), Waiters::new(line.clone(), 1, None));
        let budget = crate::pool::BudgetRegistry::default().get("p", "h:1", 1);
        let mut theirs = Waiting::new(&there);
        assert!(poll_wait(&mut theirs).is_pending());
        let mine = Waiting::new(&here);
        // Both cores wait for the budget.
        budget.want();
        budget.want();
        here.giving(|| here.unit_freed(&budget));
        assert!(!mine.ev.is_set(), "closed for another core: not woken here");
        assert!(poll_wait(&mut theirs).is_ready() && theirs.was_called, "the other core is called");
        assert!(poll_wait(&mut theirs).is_pending());
        here.unit_freed(&budget);
        assert!(mine.ev.is_set(), "a unit freed here wakes this core's first");
        assert!(poll_wait(&mut theirs).is_ready(), "and calls the other core too");
        assert!(poll_wait(&mut theirs).is_pending());
        drop(mine);
        budget.unwant();
        here.unit_freed(&budget);
        assert!(poll_wait(&mut theirs).is_ready(), "called while it wants the budget");
        assert!(poll_wait(&mut theirs).is_pending());
        budget.unwant();
        here.unit_freed(&budget);
        assert!(poll_wait(&mut theirs).is_pending(), "nobody wants the budget: no call");
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
        // `a` left before running; what it was owed is anyone's, and `b`, woken to answer
        // calls from then on, is owed until it runs.
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
