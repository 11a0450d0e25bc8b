//! A pool's line across cores (#41): the order in which checkouts of every core started to
//! wait, so that a connection checked in on one core goes to another core whose waiters have
//! been overtaken.
//!
//! A checkout that must wait takes a ticket from the pool's process-wide counter; each core's
//! pool object has a [`Seat`] where it publishes the ticket of its oldest waiter and where other
//! cores call it (a waker) when they free a unit of the budget or hand one over. Nothing here is
//! touched by a checkout that finds a connection: only by one that waits, by a checkin while
//! this core's checkouts wait, and by a connection closing while another core waits.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use parking_lot::Mutex;

use crate::rt;

/// A seat's head while none of its core's checkouts waits.
const NOBODY: u64 = u64::MAX;

/// A waiting checkout's place in its pool's line: its number, in arrival order across cores,
/// and when it arrived (nanoseconds since the line's epoch, so another core can read it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Ticket {
    pub(super) number: u64,
    at: u64,
}

/// One pool's line, shared by the pool objects of every core (and kept across reloads).
#[derive(Debug)]
pub struct Line {
    /// The next ticket's number.
    next: AtomicU64,
    seats: Mutex<Vec<Arc<Seat>>>,
    /// Bumped when a seat joins or leaves: a core copies the others' seats once per change,
    /// not once per look.
    generation: AtomicU64,
    epoch: Instant,
}

impl Default for Line {
    fn default() -> Self {
        Self { next: AtomicU64::new(0), seats: Mutex::default(), generation: AtomicU64::new(0), epoch: rt::now() }
    }
}

impl Line {
    /// A ticket for a checkout starting to wait at `at`.
    pub(super) fn ticket(&self, at: Instant) -> Ticket {
        let at = u64::try_from(at.saturating_duration_since(self.epoch).as_nanos()).unwrap_or(u64::MAX);
        Ticket { number: self.next.fetch_add(1, Ordering::Relaxed), at }
    }

    /// How long the checkout holding `ticket` has waited at `now`.
    pub(super) fn waited(&self, ticket: Ticket, now: Instant) -> Duration {
        now.saturating_duration_since(self.epoch).saturating_sub(Duration::from_nanos(ticket.at))
    }

    /// How many tickets were taken so far.
    pub(super) fn issued(&self) -> u64 {
        self.next.load(Ordering::Relaxed)
    }

    /// A seat for a new pool object of one core.
    pub(super) fn join(&self) -> Arc<Seat> {
        let seat = Arc::new(Seat::default());
        self.seats.lock().push(seat.clone());
        self.generation.fetch_add(1, Ordering::AcqRel);
        seat
    }

    /// A pool object is gone: its seat leaves the line.
    pub(super) fn leave(&self, seat: &Arc<Seat>) {
        self.seats.lock().retain(|s| !Arc::ptr_eq(s, seat));
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    /// The current generation of the seats' list.
    pub(super) fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Every seat but `mine`.
    pub(super) fn others(&self, mine: &Arc<Seat>) -> Vec<Arc<Seat>> {
        self.seats.lock().iter().filter(|s| !Arc::ptr_eq(s, mine)).cloned().collect()
    }
}

/// One core's place in a pool's line. Aligned to its own cache lines: its head is written each
/// time the core serves a waiter, and must not share a line with another core's.
#[derive(Debug)]
#[repr(align(128))]
pub(super) struct Seat {
    /// The number of this core's oldest waiting checkout's ticket, [`NOBODY`] when none waits.
    head: AtomicU64,
    /// When that checkout arrived (see [`Ticket`]).
    since: AtomicU64,
    /// How many checkouts of this core wait.
    waiting: AtomicU64,
    /// Another core closed a connection for this one and has not seen it take a unit since:
    /// one move at a time per seat.
    granted: AtomicBool,
    /// Calls ([`Seat::call`]) this core's waiters have not answered yet: one per unit freed or
    /// handed over elsewhere, so that each is looked for once (a flag would merge two, and the
    /// second unit be looked for by nobody).
    called: AtomicU32,
    waker: Mutex<Option<Waker>>,
}

impl Default for Seat {
    fn default() -> Self {
        Self {
            head: AtomicU64::new(NOBODY),
            since: AtomicU64::new(0),
            waiting: AtomicU64::new(0),
            granted: AtomicBool::new(false),
            called: AtomicU32::new(0),
            waker: Mutex::new(None),
        }
    }
}

impl Seat {
    /// Publishes how many checkouts of this core wait, and the ticket of the oldest (`None`:
    /// nobody waits).
    /// The head is sequentially consistent with the budget's counts (`Budget`) and the calls:
    /// a core publishing its head and then looking at the budget, and a core freeing a unit and
    /// then reading the heads, cannot both miss the other's write (as acquire/release allows).
    pub(super) fn publish(&self, waiting: u64, head: Option<Ticket>) {
        if self.waiting.load(Ordering::Relaxed) != waiting {
            self.waiting.store(waiting, Ordering::Relaxed);
        }
        let number = head.map_or(NOBODY, |t| t.number);
        if self.head.load(Ordering::Relaxed) != number {
            if let Some(t) = head {
                self.since.store(t.at, Ordering::Relaxed);
            }
            self.head.store(number, Ordering::SeqCst);
        }
    }

    /// How many checkouts of this core wait.
    pub(super) fn waiting(&self) -> u64 {
        self.waiting.load(Ordering::Relaxed)
    }

    /// The ticket of this core's oldest waiter, if one waits.
    pub(super) fn head(&self) -> Option<Ticket> {
        let number = self.head.load(Ordering::SeqCst);
        (number != NOBODY).then(|| Ticket { number, at: self.since.load(Ordering::Relaxed) })
    }

    /// Marks a unit handed to this seat; false if one is handed already and not taken yet.
    pub(super) fn grant(&self) -> bool {
        self.granted.compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }

    /// This core looked for the unit handed to it (took it, or found another core had).
    pub(super) fn ungrant(&self) {
        if self.granted.load(Ordering::Relaxed) {
            self.granted.store(false, Ordering::Release);
        }
    }

    /// Wakes this core's calling waiter (from any core): a unit of the budget is free. False
    /// when nobody waits here any more and the call was taken back: the caller must offer the
    /// unit elsewhere. Either this sees the head gone, or the core's last waiter, leaving, sees
    /// the call and passes it on ([`Seat::take_call`]); the swap gives the call to one of them.
    pub(super) fn call(&self) -> bool {
        self.called.fetch_add(1, Ordering::SeqCst);
        if self.head.load(Ordering::SeqCst) == NOBODY && self.answer() {
            // Nobody here will look for a unit handed over: a grant kept would stop every
            // later move to this core (#39).
            self.ungrant();
            return false;
        }
        let waker = self.waker.lock().take();
        if let Some(w) = waker {
            w.wake();
        }
        true
    }

    /// Takes the calls nobody answered, once this core's last waiter left (its head published
    /// gone): whether there were any, for the leaving waiter to pass on. A unit handed over and
    /// not looked for is no longer this core's either: its grant ends (see [`Seat::call`]).
    pub(super) fn take_calls(&self) -> bool {
        self.ungrant();
        self.called.swap(0, Ordering::SeqCst) > 0
    }

    /// Takes one call, if one is left.
    fn answer(&self) -> bool {
        self.called.fetch_update(Ordering::SeqCst, Ordering::SeqCst, |c| c.checked_sub(1)).is_ok()
    }

    /// Completes once [`Seat::call`] was called since the last completion.
    pub(super) fn called(&self) -> Called<'_> {
        Called(self)
    }

    /// The role of answering calls passed to the waiting checkout `waker` wakes, without a wake:
    /// a call from now on wakes it, and so does, at once, one nobody answered yet.
    pub(super) fn listen(&self, waker: &Waker) {
        let (before, unanswered) = {
            let mut slot = self.waker.lock();
            let before = match slot.as_ref() {
                Some(w) if w.will_wake(waker) => None,
                _ => slot.replace(waker.clone()),
            };
            // Read under the lock: a call before it finds the waker replaced, or leaves its
            // count to be seen here.
            (before, self.called.load(Ordering::SeqCst) > 0)
        };
        drop(before);
        if unanswered {
            waker.wake_by_ref();
        }
    }

    /// The calling waiter left: nothing to wake any more.
    pub(super) fn hang_up(&self) {
        let waker = self.waker.lock().take();
        drop(waker);
    }
}

/// Future of [`Seat::called`].
pub(super) struct Called<'a>(&'a Seat);

impl Future for Called<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        // Checked under the waker's lock: a call between the check and the store finds the
        // waker stored.
        let mut slot = self.0.waker.lock();
        if self.0.answer() {
            return Poll::Ready(());
        }
        if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            *slot = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::pin::pin;

    #[test]
    fn tickets_follow_arrival_and_heads_show_each_core_s_oldest() {
        let line = Line::default();
        let (a, b) = (line.join(), line.join());
        assert_eq!(line.others(&a).len(), 1);
        let now = rt::now();
        let (t0, t1) = (line.ticket(now), line.ticket(now + Duration::from_millis(5)));
        assert!(t0.number < t1.number);
        assert_eq!(line.waited(t1, now + Duration::from_millis(8)), Duration::from_millis(3));
        assert_eq!(a.head(), None);
        a.publish(2, Some(t1));
        assert_eq!((a.waiting(), a.head()), (2, Some(t1)));
        a.publish(0, None);
        assert_eq!((a.waiting(), a.head()), (0, None));
        let before = line.generation();
        line.leave(&b);
        assert!(line.generation() > before);
        assert!(line.others(&a).is_empty());
    }

    #[test]
    fn one_grant_at_a_time_until_the_core_looked() {
        let seat = Seat::default();
        assert!(seat.grant());
        assert!(!seat.grant(), "a unit handed over and not yet looked at");
        seat.ungrant();
        assert!(seat.grant());
    }

    #[test]
    fn a_call_completes_the_wait_once_whether_it_came_before_or_during_it() {
        let line = Line::default();
        let seat = Seat::default();
        seat.publish(1, Some(line.ticket(rt::now())));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(pin!(seat.called()).poll(&mut cx).is_pending());
        assert!(seat.call());
        assert!(pin!(seat.called()).poll(&mut cx).is_ready());
        assert!(pin!(seat.called()).poll(&mut cx).is_pending(), "one call, one completion");
        seat.hang_up();
        assert!(seat.call());
        assert!(pin!(seat.called()).poll(&mut cx).is_ready(), "a call while the waiter answering is away is kept");
    }

    #[test]
    fn the_waiter_the_calls_pass_to_is_woken_by_the_next_call_or_at_once_for_one_unanswered() {
        struct Count(AtomicU32);
        impl std::task::Wake for Count {
            fn wake(self: Arc<Self>) {
                self.0.fetch_add(1, Ordering::Relaxed);
            }
        }
        let line = Line::default();
        let seat = Seat::default();
        seat.publish(1, Some(line.ticket(rt::now())));
        let count = Arc::new(Count(AtomicU32::new(0)));
        let waker = Waker::from(count.clone());
        seat.listen(&waker);
        assert_eq!(count.0.load(Ordering::Relaxed), 0, "no call yet");
        assert!(seat.call());
        assert_eq!(count.0.load(Ordering::Relaxed), 1);
        // The call is still unanswered when the role passes on again.
        seat.listen(&waker);
        assert_eq!(count.0.load(Ordering::Relaxed), 2);
        assert!(pin!(seat.called()).poll(&mut Context::from_waker(&waker)).is_ready());
    }

    #[test]
    fn a_call_nobody_waits_for_goes_back_to_the_caller_or_to_the_last_waiter_leaving() {
        let line = Line::default();
        let seat = Seat::default();
        let mut cx = Context::from_waker(Waker::noop());
        assert!(!seat.call(), "nobody waits: taken back");
        assert!(!seat.take_calls());
        seat.publish(1, Some(line.ticket(rt::now())));
        assert!(seat.call() && seat.call());
        assert!(pin!(seat.called()).poll(&mut cx).is_ready(), "one call answered, one left");
        // The core's last waiter leaves before it answered: it takes the call to pass it on.
        seat.publish(0, None);
        assert!(seat.take_calls());
        assert!(!seat.take_calls(), "once");
        assert!(pin!(seat.called()).poll(&mut cx).is_pending());
    }
}
