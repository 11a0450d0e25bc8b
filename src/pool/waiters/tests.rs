use super::*;
use std::future::Future;
use std::pin::pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

/// Polls one wait once: pending until woken or, for the waiter answering calls, called.
fn poll_wait(w: &mut Waiting<'_>) -> Poll<Wake> {
    let fut = pin!(w.wait(None));
    fut.poll(&mut Context::from_waker(Waker::noop())).map(|wake| wake.expect("no deadline"))
}

fn queued(waiters: &Waiters) -> usize {
    waiters.queue.borrow().len()
}

#[test]
fn one_waiter_answers_calls_from_other_cores_and_the_others_wait_to_be_woken() {
    let waiters = Waiters::default();
    let (mut a, mut b) = (Waiting::new(&waiters, rt::now(), None), Waiting::new(&waiters, rt::now(), None));
    assert!(poll_wait(&mut a).is_pending());
    assert!(poll_wait(&mut b).is_pending());
    assert!(a.calls() && !b.calls());
    waiters.seat.call();
    assert!(poll_wait(&mut a).is_ready() && a.was_called);
    assert_eq!(queued(&waiters), 2);
}

#[test]
fn the_waiter_answering_calls_looks_again_unwoken_on_a_pool_that_rechecks() {
    let waiters = Waiters::new(Arc::default(), 1, Some(RECHECK_PER_USER));
    let (mut a, mut b) = (Waiting::new(&waiters, rt::now(), None), Waiting::new(&waiters, rt::now(), None));
    // Off a core a timer completes at once: the recheck returns at the first poll.
    assert!(poll_wait(&mut a).is_ready() && !a.was_called);
    assert!(poll_wait(&mut b).is_pending(), "only the waiter answering calls rechecks");
    assert_eq!(queued(&waiters), 2, "neither left its place");
}

#[test]
fn wake_one_serves_in_arrival_order_and_a_woken_waiter_missing_out_is_first_again() {
    let waiters = Waiters::default();
    let (a, b) = (Waiting::new(&waiters, rt::now(), None), Waiting::new(&waiters, rt::now(), None));
    waiters.wake_one();
    assert!(a.ev.is_set() && !b.ev.is_set());
    let mut a = a;
    assert!(poll_wait(&mut a).is_ready());
    // Woken for a unit it did not get: back in the queue, ahead of `b`, with its ticket.
    assert!(!a.ev.is_set());
    assert!(waiters.queue.borrow().front().is_some_and(|(e, t, _)| e.same(&a.ev) && *t == a.ticket));
    assert_eq!(waiters.seat.head(), Some(a.ticket));
    waiters.wake_one();
    assert!(a.ev.is_set() && !b.ev.is_set());
    assert_eq!(waiters.seat.head(), Some(b.ticket), "the oldest still waiting");
}

/// Counts the wakes of a task.
struct Count(std::sync::atomic::AtomicUsize);

impl std::task::Wake for Count {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A waker counting its wakes, and the count so far.
fn counting() -> (Waker, impl Fn() -> usize) {
    let count = Arc::new(Count(Default::default()));
    (Waker::from(count.clone()), move || count.0.load(std::sync::atomic::Ordering::Relaxed))
}

#[test]
fn a_dropped_waiter_leaves_nothing_queued_and_hands_the_calls_on_without_a_wake() {
    let waiters = Waiters::default();
    let (waker, wakes) = counting();
    let mut cx = Context::from_waker(&waker);
    let mut a = Waiting::new(&waiters, rt::now(), None);
    let (mut b, c) = (Waiting::new(&waiters, rt::now(), None), Waiting::new(&waiters, rt::now(), None));
    assert!(poll_wait(&mut a).is_pending());
    {
        let mut wait = pin!(b.wait(None));
        assert!(wait.as_mut().poll(&mut cx).is_pending());
        drop(a);
        // The next in line answers calls from then on, without being woken to take them (#39).
        assert_eq!(wakes(), 0);
        assert!(!waiters.owed());
        assert!(waiters.seat.call());
        assert_eq!(wakes(), 1, "a call wakes the waiter the calls passed to");
        assert_eq!(wait.as_mut().poll(&mut cx), Poll::Ready(Some(Wake::Called)));
    }
    assert!(b.calls() && b.was_called);
    drop(c);
    drop(b);
    assert_eq!(queued(&waiters), 0);
    assert_eq!(waiters.caller.get(), None);
    assert_eq!(waiters.seat.head(), None);
}

#[test]
fn a_call_left_unanswered_by_a_waiter_leaving_wakes_the_next_at_once() {
    let waiters = Waiters::default();
    let (waker, wakes) = counting();
    let mut a = Waiting::new(&waiters, rt::now(), None);
    let mut b = Waiting::new(&waiters, rt::now(), None);
    assert!(poll_wait(&mut a).is_pending());
    let mut wait = pin!(b.wait(None));
    assert!(wait.as_mut().poll(&mut Context::from_waker(&waker)).is_pending());
    // Called, and gone (its deadline) before it answered.
    assert!(waiters.seat.call());
    drop(a);
    assert_eq!(wakes(), 1);
    assert_eq!(wait.as_mut().poll(&mut Context::from_waker(&waker)), Poll::Ready(Some(Wake::Called)));
}

/// Runs `main` on a fresh core (where timers wait) and returns its output.
fn on_core<T: Send + 'static, Fut: Future<Output = T> + 'static>(main: impl FnOnce() -> Fut + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    let core = rt::spawn_core("waiters-test", None, move |_| async move {
        let _ = tx.send(main().await);
    })
    .expect("core starts");
    let out = rx.recv_timeout(Duration::from_secs(10)).expect("the core answers in time");
    core.join().expect("the core ends cleanly");
    out
}

#[test]
fn the_recheck_is_due_its_interval_after_the_waiter_answering_calls_last_started_to_wait() {
    let every = Duration::from_millis(40);
    let (first, wake, waited) = on_core(move || async move {
        let waiters = Waiters::new(Arc::default(), 1, Some(every));
        let (mut a, _b) = (Waiting::new(&waiters, rt::now(), None), Waiting::new(&waiters, rt::now(), None));
        let first = {
            let mut wait = pin!(a.wait(None));
            let _ = wait.as_mut().poll(&mut Context::from_waker(Waker::noop()));
            rt::sleep(every / 2).await;
            waiters.wake_one();
            wait.as_mut().poll(&mut Context::from_waker(Waker::noop()))
        };
        // Its next wait starts the interval again: the timer armed for the first is not due
        // for it (the core's one timer, armed again when it fires early).
        let restarted = rt::now();
        let wake = a.wait(None).await;
        (first, wake, rt::since(restarted))
    });
    assert_eq!(first, Poll::Ready(Some(Wake::Woken)));
    assert_eq!(wake, Some(Wake::Rechecked));
    assert!(waited >= every, "rechecked {waited:?} into a wait, before {every:?}");
}

#[test]
fn the_recheck_wakes_the_waiter_the_calls_passed_to() {
    let every = Duration::from_millis(20);
    let (at_pass, later, wake) = on_core(move || async move {
        let waiters = Waiters::new(Arc::default(), 1, Some(every));
        let (mut a, mut b) = (Waiting::new(&waiters, rt::now(), None), Waiting::new(&waiters, rt::now(), None));
        assert!(poll_wait(&mut a).is_pending(), "answering calls, its recheck armed");
        let (waker, wakes) = counting();
        let mut cx = Context::from_waker(&waker);
        let mut wait = pin!(b.wait(None));
        let _ = wait.as_mut().poll(&mut cx);
        drop(a);
        let at_pass = wakes();
        rt::sleep(every * 2).await;
        (at_pass, wakes(), wait.as_mut().poll(&mut cx))
    });
    assert_eq!(at_pass, 0, "the calls passed on without a wake");
    assert!(later >= 1, "the core's recheck timer wakes the waiter answering calls now");
    assert_eq!(wake, Poll::Ready(Some(Wake::Rechecked)));
}

/// A waiter's wait in a task of its own on the current core, with no timer of its own; how
/// it ended, once it did.
fn waiting_alone(waiters: &'static Waiters, deadline: Instant) -> Rc<Cell<Option<Option<Wake>>>> {
    let out = Rc::new(Cell::new(None));
    let mut w = Waiting::new(waiters, rt::now(), Some(deadline));
    let set = out.clone();
    rt::spawn_local(async move { set.set(Some(w.wait(None).await)) });
    out
}

/// Polls `first`'s wait in this task (so its timer wakes this task) until `done` has ended,
/// for at most two seconds; whether it did.
async fn answering_until(first: &mut Waiting<'_>, done: &Cell<Option<Option<Wake>>>) -> Option<Option<Wake>> {
    let ended = async {
        for _ in 0..400 {
            if let Some(end) = done.get() {
                return Some(end);
            }
            rt::sleep(Duration::from_millis(5)).await;
        }
        None
    };
    let answering = async {
        loop {
            let _ = first.wait(None).await;
        }
    };
    rt::race(answering, ended).await
}

#[test]
fn the_core_s_recheck_timer_ends_the_waits_whose_deadline_passed_without_timers_of_their_own() {
    let end = on_core(|| async {
        let waiters: &'static Waiters =
            Box::leak(Box::new(Waiters::new(Arc::default(), 1, Some(Duration::from_secs(3600)))));
        let mut first = Waiting::new(waiters, rt::now(), None);
        // Queued before the waiter answering calls arms the core's timer: it is armed for
        // this deadline, not the recheck an hour away.
        let done = waiting_alone(waiters, rt::now() + Duration::from_millis(30));
        answering_until(&mut first, &done).await
    });
    assert_eq!(end, Some(None), "the wait ended on its deadline");
}

#[test]
fn a_deadline_that_passed_while_nobody_answered_calls_ends_its_wait_when_the_timer_is_armed_again() {
    let end = on_core(|| async {
        let waiters: &'static Waiters =
            Box::leak(Box::new(Waiters::new(Arc::default(), 1, Some(Duration::from_secs(3600)))));
        let (mut first, mut next) = (Waiting::new(waiters, rt::now(), None), Waiting::new(waiters, rt::now(), None));
        let done = waiting_alone(waiters, rt::now() + Duration::from_millis(30));
        assert!(poll_wait(&mut first).is_pending(), "answering calls, the core's timer armed for the third's deadline");
        rt::yield_now().await; // the third waits, its deadline covered by that timer
                               // Woken and gone before it ran: nobody answers calls, the timer goes, the next is woken.
        waiters.wake_one();
        drop(first);
        rt::sleep(Duration::from_millis(60)).await;
        assert_eq!(done.get(), None, "nothing watched the third's deadline meanwhile");
        answering_until(&mut next, &done).await
    });
    assert_eq!(end, Some(None), "the wait ended on its deadline once the timer was armed again");
}

#[test]
fn a_wait_whose_deadline_comes_before_the_core_s_timer_arms_its_own() {
    let end = on_core(|| async {
        let waiters = Waiters::new(Arc::default(), 1, Some(Duration::from_secs(3600)));
        let mut first = Waiting::new(&waiters, rt::now(), None);
        assert!(poll_wait(&mut first).is_pending(), "answering calls, the core's timer armed for an hour");
        let deadline = rt::now() + Duration::from_millis(30);
        let mut late = Waiting::new(&waiters, rt::now(), Some(deadline));
        let mut timer = rt::sleep_until(deadline);
        late.wait(Some(&mut timer)).await
    });
    assert_eq!(end, None, "its own timer ended it");
}

#[test]
fn a_checkin_goes_to_the_core_whose_waiter_is_overtaken_by_more_than_the_pool() {
    let line = Arc::new(Line::default());
    let (here, there) = (Waiters::new(line.clone(), 2, None), Waiters::new(line.clone(), 2, None));
    // Looked at once every waiter below has waited long enough for a move to pay.
    let later = rt::now() + MOVE_AFTER + Duration::from_secs(1);
    assert!(!here.overtaken(|| later), "nobody waits here: nothing read");
    let mut old = Waiting::new(&there, rt::now(), None);
    let (first, second, mut third) = (
        Waiting::new(&here, rt::now(), None),
        Waiting::new(&here, rt::now(), None),
        Waiting::new(&here, rt::now(), None),
    );
    // The last answers calls here: the first two leave as served waiters do, waking nobody.
    assert!(poll_wait(&mut third).is_pending());
    // `old` took ticket 0; here's oldest took 1: within the pool's two.
    assert!(!here.overtaken(|| later));
    drop(first);
    assert!(!here.overtaken(|| later), "2 is within two of 0");
    drop(second);
    // Here's oldest is ticket 3: `old` (0) is overtaken by three, more than the pool's two.
    assert!(here.overtaken(|| later), "handed to the other core");
    assert!(!here.overtaken(|| later), "one move at a time");
    // The other core's calling waiter looks, then waits again: another may be handed.
    there.seat.call();
    assert!(poll_wait(&mut old).is_ready());
    assert!(poll_wait(&mut old).is_pending());
    assert!(here.overtaken(|| later));
}

#[test]
fn a_waiter_may_be_overtaken_by_a_share_of_the_tickets_taken_since_it_started_waiting() {
    let line = Arc::new(Line::default());
    let (here, there) = (Waiters::new(line.clone(), 2, None), Waiters::new(line.clone(), 2, None));
    let _old = Waiting::new(&there, rt::now(), None);
    // Four tickets taken by checkouts served since `old` took 0.
    (0..4).for_each(|_| {
        line.ticket(rt::now());
    });
    let _mine = Waiting::new(&here, rt::now(), None);
    assert!(!here.overtaken(rt::now), "`old` has not waited long enough for a move to pay");
    let later = rt::now() + MOVE_AFTER;
    assert!(here.overtaken(|| later), "5 is past 0 + the pool's 2 (6 tickets taken, an eighth is 0)");
    there.seat.ungrant();
    // A long line forms behind both: 81 tickets taken since `old`'s, so it may be overtaken
    // by 10, and this core's first (5) is within that.
    (0..75).for_each(|_| {
        line.ticket(rt::now());
    });
    assert!(!here.overtaken(|| later));
}

#[test]
fn the_demand_counts_the_waiters_here_and_on_every_core_while_both_wait() {
    let line = Arc::new(Line::default());
    let (here, there) = (Waiters::new(line.clone(), 8, None), Waiters::new(line.clone(), 8, None));
    let mine: Vec<Waiting<'_>> = (0..2).map(|_| Waiting::new(&here, rt::now(), None)).collect();
    assert_eq!(here.demand(), None, "nobody waits elsewhere");
    let theirs: Vec<Waiting<'_>> = (0..3).map(|_| Waiting::new(&there, rt::now(), None)).collect();
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
    let mut theirs = Waiting::new(&there, rt::now(), None);
    assert!(poll_wait(&mut theirs).is_pending());
    let mine = Waiting::new(&here, rt::now(), None);
    // Both cores wait for the budget.
    budget.want();
    budget.want();
    here.giving(rt::now(), || here.unit_freed(&budget));
    assert!(!mine.ev.is_set(), "closed for another core: not woken here");
    assert!(poll_wait(&mut theirs).is_ready() && theirs.was_called, "the other core is called");
    assert!(poll_wait(&mut theirs).is_pending());
    here.unit_freed(&budget);
    assert!(mine.ev.is_set(), "a unit freed here wakes this core's first");
    assert!(poll_wait(&mut theirs).is_ready(), "and calls the other core too");
    assert!(poll_wait(&mut theirs).is_pending());
    drop(mine);
    assert!(poll_wait(&mut theirs).is_ready(), "the last waiter here leaving calls the cores still waiting");
    assert!(poll_wait(&mut theirs).is_pending());
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
    let (mut a, b) = (Waiting::new(&waiters, rt::now(), None), Waiting::new(&waiters, rt::now(), None));
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
fn the_pace_s_decay_follows_the_exponential_on_both_sides_of_its_series() {
    for i in 0..=4096 {
        let x = f64::from(i) / 65536.0 * 4.0; // 0 to 1/4, across 1/128
        let (got, want) = (decay(x), (-x).exp());
        assert!((got - want).abs() < 1e-7, "e^-{x}: {got} against {want}");
    }
    assert!((decay(3.0) - (-3.0f64).exp()).abs() < 1e-12);
}

#[test]
fn a_waiter_s_signal_serves_the_next_waiter_of_the_core_once_it_left_and_starts_unset() {
    let waiters = Waiters::default();
    let first = Waiting::new(&waiters, rt::now(), None);
    let mut second = Waiting::new(&waiters, rt::now(), None);
    waiters.wake_one();
    let used = first.ev.id();
    // Woken and gone before it ran: its wake goes on to the second.
    drop(first);
    // Were the first's signal freed, this would take its memory: the third's is then another.
    let decoy = Signal::default();
    let third = Waiting::new(&waiters, rt::now(), None);
    assert_eq!(third.ev.id(), used, "the first's signal, reused");
    assert!(!third.ev.is_set(), "unset for its new wait, though the first's was set");
    assert_eq!(poll_wait(&mut second), Poll::Ready(Wake::Woken));
    drop((second, third, decoy));
    assert_eq!(queued(&waiters), 0);
}

#[test]
fn a_checkout_is_turned_away_only_when_the_line_outlasts_its_deadline() {
    let waiters = Waiters::default();
    let t0 = Instant::now();
    for i in 0..=PACE_SAMPLES {
        waiters.pace.borrow_mut().freed(t0 + Duration::from_millis(10 * u64::from(i)));
    }
    let queued: Vec<Waiting<'_>> = (0..9).map(|_| Waiting::new(&waiters, rt::now(), None)).collect();
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

/// A model of the line across cores (#41): seeded random interleavings of checkouts,
/// checkins, closes, moves and waiters leaving, on 2 to 4 cores sharing one budget. It
/// drives the real queues, seats and budget, and its checkouts look as `CorePool`'s do (an
/// idle connection of their core, else a unit of the budget), right after queueing and after
/// each wake. Nothing rechecks: a wake lost leaves a waiter asleep for good.
mod model {
    use super::*;
    use crate::pool::budget::{Budget, BudgetRegistry};

    /// xorshift64*: the same interleavings for a seed on every run.
    struct Rng(u64);

    impl Rng {
        fn below(&mut self, n: usize) -> usize {
            self.0 ^= self.0 >> 12;
            self.0 ^= self.0 << 25;
            self.0 ^= self.0 >> 27;
            (self.0.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 33) as usize % n.max(1)
        }
    }

    struct Core {
        waiters: Waiters,
        idle: Cell<u32>,
        /// Checkouts of the core waiting (`CorePool`'s `Wanting`).
        wanting: Cell<u32>,
    }

    enum Client<'a> {
        Waiting { core: usize, w: Waiting<'a> },
        Holding { core: usize },
        Gone,
    }

    struct World<'a> {
        cores: &'a [Core],
        budget: Arc<Budget>,
        clients: Vec<Client<'a>>,
        /// The most waiters of its core still queued ahead of a waiter when it was served.
        overtook: usize,
        /// When moves are looked at: every waiter has waited long enough for one.
        later: Instant,
        /// The model's clock for yields: it stands still, so a unit given up to another core
        /// is left to it until a call or that core's last waiter ends the yield, never by
        /// time (the same interleavings on every run, and no rescue by expiry).
        now: Instant,
    }

    impl<'a> World<'a> {
        fn unit(&self, core: usize) -> bool {
            !self.cores[core].waiters.yielding(|| self.now) && self.budget.try_acquire()
        }

        fn want(&self, core: usize) {
            let c = &self.cores[core];
            if c.wanting.get() == 0 {
                self.budget.want();
            }
            c.wanting.set(c.wanting.get() + 1);
        }

        fn unwant(&self, core: usize) {
            let c = &self.cores[core];
            c.wanting.set(c.wanting.get() - 1);
            if c.wanting.get() == 0 {
                self.budget.unwant();
            }
        }

        fn arrive(&mut self, core: usize) {
            let c = &self.cores[core];
            if c.waiters.unclaimed(c.idle.get() as usize) {
                c.idle.set(c.idle.get() - 1);
                return self.clients.push(Client::Holding { core });
            }
            if self.unit(core) {
                return self.clients.push(Client::Holding { core });
            }
            self.want(core);
            let w = Waiting::new(&c.waiters, self.now, None);
            if self.unit(core) {
                return self.serve(core, w);
            }
            self.clients.push(Client::Waiting { core, w });
            self.run(self.clients.len() - 1);
        }

        fn serve(&mut self, core: usize, w: Waiting<'a>) {
            let queue = self.cores[core].waiters.queue.borrow();
            let ahead = queue.iter().filter(|(_, t, _)| t.number < w.ticket.number).count();
            drop(queue);
            self.overtook = self.overtook.max(ahead);
            drop(w);
            self.unwant(core);
            self.clients.push(Client::Holding { core });
        }

        /// Runs waiter `i` while it is woken: it looks, and waits again if it found nothing.
        /// Whether it was woken.
        fn run(&mut self, i: usize) -> bool {
            let mut woken = false;
            loop {
                let Client::Waiting { core, w } = &mut self.clients[i] else { return woken };
                let core = *core;
                if poll_wait(w).is_pending() {
                    return woken;
                }
                woken = true;
                let c = &self.cores[core];
                let found = c.idle.get() > 0 || self.unit(core);
                if found {
                    if c.idle.get() > 0 {
                        c.idle.set(c.idle.get() - 1);
                    }
                    if let Client::Waiting { w, .. } = std::mem::replace(&mut self.clients[i], Client::Gone) {
                        self.serve(core, w);
                    }
                    return true;
                }
            }
        }

        fn close(&self, core: usize) {
            self.budget.release();
            self.cores[core].waiters.unit_freed(&self.budget);
        }

        /// Holder `i` is done: checks its connection in (or closes it for another core whose
        /// waiter this core's overtook, as `CorePool::checkin` does), or closes it.
        fn finish(&mut self, i: usize, checkin: bool) {
            let Client::Holding { core } = self.clients[i] else { return };
            self.clients[i] = Client::Gone;
            let c = &self.cores[core];
            if !checkin {
                self.close(core);
            } else if c.waiters.overtaken(|| self.later) {
                c.waiters.giving(self.now, || self.close(core));
            } else {
                c.idle.set(c.idle.get() + 1);
                c.waiters.wake_one();
            }
        }

        fn close_idle(&self, core: usize) {
            let c = &self.cores[core];
            if c.idle.get() > 0 {
                c.idle.set(c.idle.get() - 1);
                self.close(core);
            }
        }

        /// Waiter `i` leaves (its deadline, or its client went away).
        fn leave(&mut self, i: usize) {
            if let Client::Waiting { core, w } = std::mem::replace(&mut self.clients[i], Client::Gone) {
                drop(w);
                self.unwant(core);
            }
        }

        fn indices(&self, waiting: bool) -> Vec<usize> {
            let pick = |c: &Client<'_>| match c {
                Client::Waiting { .. } => waiting,
                Client::Holding { .. } => !waiting,
                Client::Gone => false,
            };
            (0..self.clients.len()).filter(|&i| pick(&self.clients[i])).collect()
        }

        /// Runs every waiter woken until none is; then no waiter may be asleep while its
        /// core has an idle connection or the budget a unit.
        fn settle(&mut self, seed: u64) {
            // Until no waiter is woken and yet to run (a call answered by a later waiter
            // wakes the first in line while that waiter's poll stays pending).
            for pass in 0.. {
                let ran = self.indices(true).into_iter().fold(false, |any, i| self.run(i) | any);
                if !ran && self.cores.iter().all(|c| !c.waiters.owed()) {
                    break;
                }
                assert!(pass < 10_000, "seed {seed}: waiters woken without end");
            }
            for i in self.indices(true) {
                let Client::Waiting { core, w } = &self.clients[i] else { continue };
                let (idle, room) = (self.cores[*core].idle.get(), self.budget.has_room());
                assert!(
                    idle == 0 && !room,
                    "seed {seed}: ticket {} of core {core} asleep with {idle} idle here, room in the budget: {room}",
                    w.ticket.number
                );
            }
        }
    }

    fn play(seed: u64) {
        let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
        let n = 2 + rng.below(3);
        let cap = 1 + rng.below(4) as u32;
        let line = Arc::new(Line::default());
        let cores: Vec<Core> = (0..n)
            .map(|_| Core { waiters: Waiters::new(line.clone(), cap, None), idle: Cell::new(0), wanting: Cell::new(0) })
            .collect();
        let budget = BudgetRegistry::default().get("p", "h:1", cap);
        let later = rt::now() + MOVE_AFTER + Duration::from_secs(1);
        let mut world = World { cores: &cores, budget, clients: Vec::new(), overtook: 0, later, now: rt::now() };
        for _ in 0..600 {
            let (waiting, holding) = (world.indices(true), world.indices(false));
            match rng.below(20) {
                0..=5 => world.arrive(rng.below(n)),
                6..=10 if !waiting.is_empty() => {
                    world.run(waiting[rng.below(waiting.len())]);
                }
                11..=14 if !holding.is_empty() => world.finish(holding[rng.below(holding.len())], true),
                15 if !holding.is_empty() => world.finish(holding[rng.below(holding.len())], false),
                16 => world.close_idle(rng.below(n)),
                17 if !waiting.is_empty() => world.leave(waiting[rng.below(waiting.len())]),
                18 => world.settle(seed),
                _ => {}
            }
        }
        // Load stops: every connection comes back and closes (upkeep's idle timeout), and
        // every waiter must be served.
        loop {
            world.settle(seed);
            let holding = world.indices(false);
            if holding.is_empty() && cores.iter().all(|c| c.idle.get() == 0) {
                break;
            }
            for i in holding {
                world.finish(i, true);
            }
            (0..n).for_each(|c| (0..cap).for_each(|_| world.close_idle(c)));
        }
        assert!(world.indices(true).is_empty(), "seed {seed}: waiters left unserved");
        assert_eq!(world.budget.wanted(), 0, "seed {seed}");
        // First come, first served on each core, but for waiters woken together running in
        // another order (the model runs woken waiters in any order): at most one per unit
        // of the pool, and one woken to answer calls.
        assert!(world.overtook <= cap as usize + 1, "seed {seed}: served with {} older waiters queued", world.overtook);
    }

    #[test]
    fn no_wake_is_lost_across_cores_and_each_core_serves_its_waiters_in_order() {
        (0..400).for_each(play);
    }
}

/// A waiter of `there` that `here`'s next checkin overtakes (a move granted to it), and the
/// waiter of `here` that overtook it.
fn overtaken_there<'a>(here: &'a Waiters, there: &'a Waiters, later: Instant) -> (Waiting<'a>, Waiting<'a>) {
    let old = Waiting::new(there, rt::now(), None);
    (0..4).for_each(|_| {
        here.line.ticket(rt::now());
    });
    let mine = Waiting::new(here, rt::now(), None);
    assert!(here.overtaken(|| later), "handed to the other core");
    assert!(!here.overtaken(|| later), "one move at a time");
    (old, mine)
}

#[test]
fn a_move_granted_to_a_core_whose_waiters_all_left_does_not_stop_the_next() {
    let line = Arc::new(Line::default());
    let (here, there) = (Waiters::new(line.clone(), 1, None), Waiters::new(line.clone(), 1, None));
    let budget = crate::pool::BudgetRegistry::default().get("p", "h:1", 1);
    let later = rt::now() + MOVE_AFTER + Duration::from_secs(1);
    // The waiter there leaves (its client went away, its deadline passed) before the
    // connection closed for it frees its unit: the call finds nobody.
    let (old, mine) = overtaken_there(&here, &there, later);
    drop(old);
    budget.want();
    budget.want();
    here.giving(rt::now(), || here.unit_freed(&budget));
    drop(mine);
    // Kept, that grant stopped every later move there: a pool of one connection whose cores
    // both had waiters then never moved it again, and the waiters there timed out (#39).
    let (old, mine) = overtaken_there(&here, &there, later);
    // Or the call reached it, and it left before looking: as the last waiter there, it takes
    // the grant back with the calls.
    there.seat.call();
    drop((old, mine));
    drop(overtaken_there(&here, &there, later));
}
