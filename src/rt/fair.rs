//! Fairness between the tasks of one core (#33). The loop polls each ready task once per turn,
//! but one poll may do any amount of work: a session whose client pipelined thousands of small
//! messages handles every one it has buffered before it waits for I/O, and every other session
//! of the core waits behind it. A [`Share`] counts what a task did in the current turn; once it
//! has had its share, [`yield_now`] puts it at the back of its queue, so the others run (and
//! the ring is entered, reaping their completions) before it goes on.
//!
//! [`Share`] is pure (the turn and the time are parameters); [`take_share`] is its one use on a
//! core.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::executor;

/// Units of work (messages) a task may do in one turn of its loop.
pub const SHARE_MESSAGES: u32 = 64;

/// Time a task may work in one turn of its loop: a few well-behaved statements' worth, so that
/// a core with one flooding session still turns often enough for the others' latency.
pub const SHARE_TIME: Duration = Duration::from_micros(100);

/// Units of work between two looks at the clock within a task's turn: the time is read as its
/// first unit of a turn starts and before every this many more, not before each unit (a
/// reading per client message was ~130 instructions, four a prepared statement's batch, #39).
/// A share so runs past [`SHARE_TIME`] by at most this many units' time.
pub const CLOCK_EVERY: u32 = 8;

/// What a task did in its loop's current turn.
#[derive(Debug, Default, Clone)]
pub struct Share {
    /// The turn counted, and when its first unit of work started.
    turn: Option<(u64, Instant)>,
    /// Units started in that turn.
    units: u32,
}

impl Share {
    /// Counts a unit of work about to start in turn `turn`; `false` when the task has had its
    /// share of that turn (the unit should wait for the next turn, where it starts a new
    /// share). `clock` is the time, read only as a turn's first unit starts and every
    /// [`CLOCK_EVERY`] units after.
    pub fn start(&mut self, turn: u64, clock: impl FnOnce() -> Instant) -> bool {
        let started = match self.turn {
            Some((t, started)) if t == turn => started,
            _ => {
                self.turn = Some((turn, clock()));
                self.units = 1;
                return true;
            }
        };
        let spent = self.units >= SHARE_MESSAGES
            || (self.units % CLOCK_EVERY == 0 && clock().saturating_duration_since(started) >= SHARE_TIME);
        if spent {
            self.turn = None;
            return false;
        }
        self.units += 1;
        true
    }
}

/// The number of the current turn of this thread's core loop (0 off a core).
pub fn turn() -> u64 {
    executor::with_core(executor::Core::turn).unwrap_or(0)
}

/// Counts the unit of work about to start in `share` and, when the task has had its share of
/// this turn, first yields to the other ready tasks of its core. A clock reading it takes also
/// brings the core's turn clock forward, so a turn that serves many sessions sets each one's
/// deadlines from when that session's work started, not from when the turn did.
pub async fn take_share(share: &mut Share) {
    let now = || executor::with_core(executor::Core::read_now).unwrap_or_else(Instant::now);
    if !share.start(turn(), now) {
        yield_now().await;
        share.start(turn(), now);
    }
}

/// Puts the current task at the back of its queue: it runs again in the loop's next turn,
/// after every task that was ready and every completion the ring had.
pub fn yield_now() -> YieldNow {
    YieldNow { yielded: false }
}

/// Future of [`yield_now`].
pub struct YieldNow {
    yielded: bool,
}

impl Future for YieldNow {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.yielded {
            return Poll::Ready(());
        }
        self.yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_spent_by_count_or_by_time_and_renewed_by_a_new_turn() {
        let t0 = Instant::now();
        let mut share = Share::default();
        let started: Vec<bool> = (0..=SHARE_MESSAGES).map(|_| share.start(7, || t0)).collect();
        assert!(started.iter().take(SHARE_MESSAGES as usize).all(|&s| s), "a share is this many units");
        assert_eq!(started.last(), Some(&false), "the unit past a share waits for the next turn");
        assert!(share.start(7, || t0), "and starts a new share there (off a core, the same turn number)");
        assert!(share.start(8, || t0), "a new turn brings a new share");
        let late = t0 + SHARE_TIME;
        let in_time: Vec<bool> = (1..=CLOCK_EVERY).map(|_| share.start(8, || late)).collect();
        assert!(in_time.iter().take(CLOCK_EVERY as usize - 1).all(|&s| s), "the clock is not looked at meanwhile");
        assert_eq!(in_time.last(), Some(&false), "a share is also spent by time");
        assert!(share.start(9, || late));
    }

    #[test]
    fn the_clock_is_read_as_a_turn_starts_and_every_few_units_after() {
        let t0 = Instant::now();
        let mut share = Share::default();
        let (mut reads, units) = (0, 4 * CLOCK_EVERY);
        for _ in 0..units {
            share.start(1, || {
                reads += 1;
                t0
            });
        }
        assert!(reads < units, "not a reading per unit: {reads} for {units}");
        assert_eq!(reads, 4, "one reading as the turn's first unit starts, then one every {CLOCK_EVERY} units");
        share.start(2, || {
            reads += 1;
            t0
        });
        assert_eq!(reads, 5, "a new turn reads it again");
    }
}
