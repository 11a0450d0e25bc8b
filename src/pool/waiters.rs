//! The checkouts of one core waiting for a pool's connections: a FIFO of signals, set by a
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
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use super::budget::Budget;
use super::limit::Over;
use super::line::{Line, Seat, Ticket};
use crate::rt;
use signal::{Signal, Spares};

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
            let decay = decay(gap / PACE_HORIZON);
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

/// e^(-x), x ≥ 0: three terms of its series below 1/128, within 1e-7 of it there, where the
/// gaps between units freed under load lie (tens to hundreds of microseconds against a horizon
/// of a second); the library's `exp` otherwise (#39: ~40 instructions per unit freed).
fn decay(x: f64) -> f64 {
    if x < 1.0 / 128.0 {
        1.0 - x * (1.0 - x * 0.5)
    } else {
        (-x).exp()
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
/// another core's, and a wake or call its waiter leaves unused goes on to the next
/// ([`Waiters::left`]), so this is only a safety net: for a unit this core gave up to another
/// that did not take it within [`YIELD_FOR`] (on a loaded host a core's thread is descheduled
/// longer than that), a backend becoming usable again, a unit freed in the instant between its
/// release and its call. A unit found by it is counted (`sqp_pool_recheck_finds_total`); the
/// model below (`tests::model`) runs without it.
pub(super) const RECHECK_SHARED: Duration = Duration::from_millis(25);

/// The recheck of the waiter answering calls: one timer for the core's waiters, not one per
/// wait. It is due `every` after the waiter answering calls last started to wait (a wake or a
/// call ended its last wait, or the role passed to it), as a timer armed per wait would be; the
/// armed timer is moved later only when it fires before that. Under load, where that waiter is
/// woken far more often than every `every`, it is armed about once per `every`, not at every
/// wait (#39: an insert and a removal in the core's timers per waiting checkout).
///
/// The same timer watches the deadlines of the waiters queued: it is never armed later than
/// the nearest of them, and when it fires it wakes those whose deadline passed, so a wait it
/// covers (see [`Recheck::covers`]) arms no timer of its own (#39: ~240 instructions of each
/// waiting checkout, for a timer that under load never fires).
struct Recheck {
    every: Duration,
    /// When the waiter answering calls last started to wait.
    from: Cell<Instant>,
    timer: RefCell<Option<rt::Sleep>>,
    /// When the armed timer fires, while one is armed.
    armed: Cell<Option<Instant>>,
}

/// A core's queue of waiting checkouts: each one's signal, ticket of the pool's line and
/// deadline, in arrival order.
type Queue = VecDeque<(Signal, Ticket, Option<Instant>)>;

impl Recheck {
    fn new(every: Duration) -> Self {
        Self { every, from: Cell::new(rt::now()), timer: RefCell::default(), armed: Cell::new(None) }
    }

    /// The waiter answering calls starts to wait now.
    fn restart(&self) {
        self.from.set(rt::now());
    }

    /// Whether a wait whose deadline is `deadline` may leave it to this timer: it is armed no
    /// later, and its firing wakes the waiters queued then whose deadline passed.
    fn covers(&self, deadline: Instant) -> bool {
        self.armed.get().is_some_and(|at| at <= deadline)
    }

    /// A timer for the recheck due `every` after `from`, or the nearest deadline of `queue` if
    /// sooner: at once for one that passed while no timer was armed, but for those up to
    /// `swept`, whose waiters were just woken.
    fn arm(&self, queue: &Queue, swept: Option<Instant>) -> rt::Sleep {
        let due = self.from.get() + self.every;
        let left = |d: &Instant| swept.is_none_or(|s| *d > s);
        let at = queue.iter().filter_map(|(_, _, d)| d.filter(left)).fold(due, Instant::min);
        self.armed.set(Some(at));
        rt::sleep_until(at)
    }

    /// Whether the recheck is due, polled by the waiter answering calls; else the timer wakes
    /// that waiter's task (`cx`) when it may be, or when a deadline of `queue` passes. A firing
    /// wakes the waiters of `queue` whose deadline passed.
    fn poll(&self, cx: &mut Context<'_>, queue: &Queue) -> bool {
        let mut timer = self.timer.borrow_mut();
        let sleep = timer.get_or_insert_with(|| self.arm(queue, None));
        if Pin::new(&mut *sleep).poll(cx).is_pending() {
            return false;
        }
        let now = rt::now();
        queue.iter().filter(|(_, _, d)| d.is_some_and(|d| d <= now)).for_each(|(ev, _, _)| ev.nudge());
        if now < self.from.get() + self.every {
            // Armed for a wait that restarted since, or for a deadline: armed again for what
            // comes next.
            *sleep = self.arm(queue, Some(now));
            if Pin::new(&mut *sleep).poll(cx).is_pending() {
                return false;
            }
        }
        *timer = None;
        self.armed.set(None);
        true
    }

    /// The role passed, without a wake, to the waiter whose task `waker` wakes: its wait starts
    /// now, and the timer wakes it from now on (at once if it fired meanwhile).
    fn passed(&self, waker: &Waker, queue: &Queue) {
        self.restart();
        let mut timer = self.timer.borrow_mut();
        let sleep = timer.get_or_insert_with(|| self.arm(queue, None));
        if Pin::new(sleep).poll(&mut Context::from_waker(waker)).is_ready() {
            waker.wake_by_ref();
        }
    }

    /// Nobody answers calls: nothing for the timer to wake. The waiter the calls go to next
    /// arms it again when it waits (a waiter that waits meanwhile arms its own).
    fn stop(&self) {
        self.armed.set(None);
        let timer = self.timer.borrow_mut().take();
        drop(timer);
    }
}

/// State shared between a pool and the connections it lent out, so a closing connection can
/// wake a waiter (its budget unit is free again).
pub(crate) struct Waiters {
    /// One signal per waiting checkout with its ticket of the pool's line, in arrival order; a
    /// signal is set only once popped.
    queue: RefCell<Queue>,
    /// Signals of ended waits, for the next.
    spares: Spares,
    /// The ticket number of the waiting checkout of this core that answers calls from other
    /// cores, if one does: a unit freed elsewhere serves one waiter.
    caller: Cell<Option<u64>>,
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
    /// How the waiter answering calls looks again unwoken ([`RECHECK_PER_USER`],
    /// [`RECHECK_SHARED`]); never where nobody waits (a health probe's).
    recheck: Option<Recheck>,
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
            spares: Spares::default(),
            caller: Cell::new(None),
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
            recheck: recheck.map(Recheck::new),
        }
    }

    /// Wakes the checkout first in line: a unit was freed on this core.
    pub(crate) fn wake_one(&self) {
        self.wake(Some(&rt::now));
    }

    /// [`Waiters::wake_one`] for a caller that reads the clock anyway: `now` is read only if a
    /// waiter is woken (the pace measures it), and a checkin's overtaking check shares it (#39).
    pub(super) fn wake_one_at(&self, now: &dyn Fn() -> Instant) {
        self.wake(Some(now));
    }

    /// Whether a checkout of this core is queued. A checkin that finds none has no waiter to
    /// wake, and no waiter here that overtakes another core's: it skips both and only ends the
    /// pace's stretch of waiting ([`Waiters::freed_unqueued`]) (#39: the two looks at the empty
    /// queue cost a transaction at one client ~50 instructions).
    #[inline]
    pub(super) fn queued(&self) -> bool {
        !self.queue.borrow().is_empty()
    }

    /// A unit freed on this core while no checkout is queued: the next interval between units
    /// freed starts with the next stretch of waiting, as in [`Waiters::wake_one_at`].
    pub(super) fn freed_unqueued(&self) {
        self.pace.borrow_mut().idle();
    }

    /// A unit of `budget` was freed on this core (a connection closed): this core's first
    /// waiter is woken, unless the connection was closed for another core; and other cores
    /// waiting for the budget are called, as they cannot see the unit otherwise.
    pub(crate) fn unit_freed(&self, budget: &Budget) {
        let delivered = self.call_others(budget);
        if self.giving.get() && !delivered {
            // Nobody waits on another core any more: the unit is this core's again.
            self.yield_until.set(None);
        }
        if !self.giving.get() || !delivered {
            self.wake_one();
        }
    }

    /// Calls the other cores waiting for `budget`: a unit of it is free again. Alone (this
    /// core's waiters not woken) for a unit taken and given back at once, as by a checkout whose
    /// user is at its own cap: a waiter here woken for it would be the very checkout that gave
    /// it back, and would wake itself again without end.
    /// Whether a call reached a core that still waits (see [`Seat::call`]).
    pub(crate) fn call_others(&self, budget: &Budget) -> bool {
        let here = u32::from(!self.queue.borrow().is_empty() || self.owed());
        budget.wanted() > here && self.call_heads()
    }

    /// Calls every other core where a checkout waits; whether one of the calls reached one.
    fn call_heads(&self) -> bool {
        self.refresh();
        let mut delivered = false;
        for seat in self.others.borrow().iter().filter(|s| s.head().is_some()) {
            delivered |= seat.call();
        }
        delivered
    }

    /// A waiter left (`woken`: woken for a unit or to answer calls, and gone before it ran;
    /// `answered`: it answered calls). What it was woken for goes to the next in line, who is
    /// woken to look. The calls it answered, or that nobody here answered, go to the next in
    /// line without a wake (#39: a wake only to pass the role on cost each waiting checkout a
    /// second poll of another's task, which then waited again); it answers them from then on.
    /// So while checkouts wait here, one of them answers calls or is woken to. The last waiter
    /// of the core to leave calls the cores still waiting: a unit one of them left to this core
    /// ([`Waiters::giving`]), or a call nobody here answered, is theirs again.
    fn left(&self, woken: bool, answered: bool) {
        if self.caller.get().is_some() {
            if woken {
                self.wake(None);
            }
            return;
        }
        let next = !self.queue.borrow().is_empty();
        if next && !woken {
            return self.pass_calls();
        }
        if answered {
            self.seat.hang_up();
            self.recheck.iter().for_each(Recheck::stop);
        }
        if next {
            // It takes the calls once it waits again (see [`Waiting::wait`]).
            self.wake(None);
        } else if self.owed.get() == 0 {
            self.seat.take_calls();
            self.call_heads();
        }
    }

    /// The first in line answers calls from now on, woken only by a call (one left unanswered,
    /// at once) or its recheck. A waiter with no wait pending is running, and takes them up
    /// when it waits next.
    fn pass_calls(&self) {
        let (number, waker) = match self.queue.borrow().front() {
            Some((ev, t, _)) => (t.number, ev.waker()),
            None => return,
        };
        self.caller.set(Some(number));
        match waker {
            Some(w) => {
                self.seat.listen(&w);
                let queue = self.queue.borrow();
                self.recheck.iter().for_each(|r| r.passed(&w, &queue));
            }
            None => {
                self.seat.hang_up();
                self.recheck.iter().for_each(Recheck::stop);
            }
        }
    }

    /// Runs `close`, which closes a connection given up for another core (see
    /// [`Waiters::unit_freed`]), and leaves the unit to that core for [`YIELD_FOR`]: this
    /// core's checkouts open no connection meanwhile (see [`Waiters::yielding`]).
    pub(super) fn giving(&self, now: Instant, close: impl FnOnce()) {
        self.yield_until.set(Some(now + YIELD_FOR));
        self.giving.set(true);
        close();
        self.giving.set(false);
    }

    /// Whether this core gave a connection up for another core so recently that it leaves the
    /// unit to that core: its own waiters would otherwise take it back first. Only while a
    /// checkout of another core waits: one whose last waiter left calls this core
    /// ([`Waiters::left`]) if this core's head was published by then, and else this core's
    /// waiter, published first and looking after, sees that no one waits there.
    /// The clock (`now`) is read only while a yield is set.
    pub(super) fn yielding(&self, now: impl FnOnce() -> Instant) -> bool {
        self.yield_until.get().is_some_and(|until| now() < until) && {
            self.refresh();
            self.others.borrow().iter().any(|s| s.head().is_some())
        }
    }

    /// Whether a connection checked in at `now` should go to another core: one whose oldest waiter
    /// has waited [`MOVE_AFTER`] and is older than this core's by more than its slack (see
    /// [`OVERTAKEN_SHARE`]), and that has no unit handed to it yet (claimed here). False at once
    /// while no checkout of this core waits, without reading the clock (`now`).
    pub(super) fn overtaken(&self, now: impl FnOnce() -> Instant) -> bool {
        let Some(mine) = self.queue.borrow().front().map(|(_, t, _)| t.number) else {
            return false;
        };
        let now = now();
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
        self.seat.publish(queue.len() as u64 + u64::from(self.owed.get()), queue.front().map(|(_, t, _)| *t));
    }

    /// This core's checkouts waiting (queued or woken) and those of every core, while both are
    /// some: the demand a core's part of the budget is weighed by (`CorePool::over_share`).
    pub(super) fn demand(&self) -> Option<(u64, u64)> {
        let mine = self.queue.borrow().len() as u64 + u64::from(self.owed.get());
        self.refresh();
        let others: u64 = self.others.borrow().iter().map(|s| s.waiting()).sum();
        (mine > 0 && others > 0).then_some((mine, mine + others))
    }

    /// Wakes the checkout first in line, for a unit freed (`freed`: the clock, read for the
    /// pace) or to hand it the calls.
    fn wake(&self, freed: Option<&dyn Fn() -> Instant>) {
        let next = self.queue.borrow_mut().pop_front();
        match next {
            Some((ev, _, _)) => {
                if let Some(now) = freed {
                    self.pace.borrow_mut().freed(now());
                }
                ev.set();
                self.owed.set(self.owed.get() + 1);
                self.publish();
            }
            None => self.freed_unqueued(),
        }
    }

    /// Whether a waiter was woken for a unit freed here and has yet to take it.
    pub(super) fn owed(&self) -> bool {
        self.owed.get() > 0
    }

    /// Whether `idle` connections are more than the waiters woken and yet to take one: a
    /// checkout arriving now takes one only then, and else queues behind them. Not merely
    /// whether any waiter is woken: with three idle and one woken, the arrival queued and no
    /// checkin followed to wake it for the other two.
    pub(super) fn unclaimed(&self, idle: usize) -> bool {
        idle > self.owed.get() as usize
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

    /// Whether the pace measures a stretch of waiting: a unit was freed while a checkout waited,
    /// and none has been freed since with nobody queued.
    #[cfg(test)]
    pub(super) fn pacing(&self) -> bool {
        self.pace.borrow().last.is_some()
    }

    /// Tickets of the pool's line taken so far: one per checkout that waited, on any core.
    #[cfg(test)]
    pub(super) fn tickets_issued(&self) -> u64 {
        self.line.issued()
    }

    /// A woken waiter ran (or left): the unit it was woken for is anyone's again.
    fn paid(&self) {
        self.owed.set(self.owed.get().saturating_sub(1));
    }
}

/// What ended a [`Waiting::wait`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Wake {
    /// A unit freed on this core, or the calls handed on.
    Woken,
    /// Another core freed a unit or handed one over.
    Called,
    /// Nobody woke it: the recheck of the waiter answering calls was due. A unit it finds then
    /// was freed without a wake reaching it (see [`RECHECK_SHARED`]).
    Rechecked,
}

/// A checkout's place in its pool's wait queue. Dropping it (served, timed out, or abandoned
/// mid-wait) leaves no signal behind, and hands on the calls it answered and a wake it had not
/// run for yet (see [`Waiters::left`]).
pub(super) struct Waiting<'a> {
    waiters: &'a Waiters,
    ev: Signal,
    ticket: Ticket,
    /// When its waits end unwoken, if ever.
    deadline: Option<Instant>,
    /// The last wait ended on a call from another core: its unit was looked for since.
    was_called: bool,
}

impl<'a> Waiting<'a> {
    /// A checkout starting to wait at `now` (read by the caller, in the same turn), until
    /// `deadline` if it has one (see [`Waiting::wait`]).
    pub(super) fn new(waiters: &'a Waiters, now: Instant, deadline: Option<Instant>) -> Self {
        let ev = waiters.spares.take();
        let ticket = waiters.line.ticket(now);
        waiters.queue.borrow_mut().push_back((ev.clone(), ticket, deadline));
        waiters.publish();
        Self { waiters, ev, ticket, deadline, was_called: false }
    }

    /// Whether this checkout answers calls from other cores.
    fn calls(&self) -> bool {
        self.waiters.caller.get() == Some(self.ticket.number)
    }

    /// Waits until a unit is freed on this core, or, for the waiter answering calls, until
    /// another core freed one or handed one over, or its recheck is due; `None` once its
    /// deadline passed. `timer`, a timer for that deadline, is armed only when the core's
    /// recheck does not cover it (see [`Recheck::covers`]).
    pub(super) async fn wait(&mut self, mut timer: Option<&mut rt::Sleep>) -> Option<Wake> {
        let seat = &self.waiters.seat;
        if self.waiters.caller.get().is_none() {
            self.waiters.caller.set(Some(self.ticket.number));
        }
        if self.was_called {
            // It looked for the unit handed over: another may be handed now.
            seat.ungrant();
        }
        self.was_called = false;
        let wake = loop {
            if self.calls() {
                self.waiters.recheck.iter().for_each(Recheck::restart);
            }
            let wake = Woken { waiting: self, ev: self.ev.wait(), timer: timer.as_deref_mut() }.await?;
            if wake != Wake::Called {
                break wake;
            }
            // Another core freed a unit for this one: whatever this core gave up before is
            // taken, or the two cores handed units to each other and each would leave its own.
            self.waiters.yield_until.set(None);
            if self.waiters.queue.borrow().front().is_some_and(|(e, _, _)| e.same(&self.ev)) {
                self.was_called = true;
                break wake;
            }
            // The first in line looks for it, not this later waiter: first come, first served
            // across the cores' calls too.
            seat.ungrant();
            self.waiters.wake(None);
        };
        if self.ev.is_set() {
            self.waiters.paid();
            // In line again by its ticket until served (then dropped), or for the next unit if
            // another core's checkout took this one first: first, unless a waiter woken with it
            // and not served either is back already.
            self.ev.rearm();
            let mut queue = self.waiters.queue.borrow_mut();
            let at = queue.partition_point(|(_, t, _)| t.number < self.ticket.number);
            // Nearly always first again: `insert`'s general shifting cost more than the rest of
            // the requeue (#39).
            if at == 0 {
                queue.push_front((self.ev.clone(), self.ticket, self.deadline));
            } else {
                queue.insert(at, (self.ev.clone(), self.ticket, self.deadline));
            }
            drop(queue);
            self.waiters.publish();
        }
        Some(wake)
    }
}

/// One wait of a [`Waiting`]: its wake, and for the waiter answering calls a call or its
/// recheck, then the deadline, polled in that order. One future rather than a race of three
/// (#39: two nested races cost ~300 instructions a poll): and whether the waiter answers calls
/// is read at each poll, so the role can pass to it while it waits, without a wake.
struct Woken<'w, 'a> {
    waiting: &'w Waiting<'a>,
    ev: signal::Wait<'w>,
    timer: Option<&'w mut rt::Sleep>,
}

impl Future for Woken<'_, '_> {
    type Output = Option<Wake>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Wake>> {
        let this = &mut *self;
        if Pin::new(&mut this.ev).poll(cx).is_ready() {
            return Poll::Ready(Some(Wake::Woken));
        }
        let waiters = this.waiting.waiters;
        if this.waiting.calls() {
            if Pin::new(&mut waiters.seat.called()).poll(cx).is_ready() {
                return Poll::Ready(Some(Wake::Called));
            }
            if waiters.recheck.as_ref().is_some_and(|r| r.poll(cx, &waiters.queue.borrow())) {
                return Poll::Ready(Some(Wake::Rechecked));
            }
        }
        match (this.waiting.deadline, this.timer.as_deref_mut()) {
            (Some(deadline), _) if rt::now() >= deadline => Poll::Ready(None),
            // The core's one timer fires by then and wakes this wait (#39).
            (Some(deadline), _) if waiters.recheck.as_ref().is_some_and(|r| r.covers(deadline)) => Poll::Pending,
            (_, Some(timer)) => Pin::new(timer).poll(cx).map(|()| None),
            (_, None) => Poll::Pending,
        }
    }
}

impl Drop for Waiting<'_> {
    fn drop(&mut self) {
        // A signal is set only once popped, and unset again once the waiter ran.
        let woken = self.ev.is_set();
        let mut queue = self.waiters.queue.borrow_mut();
        if queue.front().is_some_and(|(e, _, _)| e.same(&self.ev)) {
            // The usual case: woken, put first in line again, then served.
            queue.pop_front();
        } else if !self.ev.is_set() {
            queue.retain(|(e, _, _)| !e.same(&self.ev));
        } else {
            // Woken, and gone before it ran (its deadline, or its client left).
            self.waiters.paid();
        }
        drop(queue);
        self.waiters.publish();
        let answered = self.calls();
        if answered {
            if self.was_called {
                self.waiters.seat.ungrant();
            }
            self.waiters.caller.set(None);
        }
        self.waiters.left(woken, answered);
        // Out of the queue: this clone is the last once the field drops.
        self.waiters.spares.keep(&self.ev);
    }
}

mod signal;
#[cfg(test)]
mod tests;
