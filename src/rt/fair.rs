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

/// What a task did in its loop's current turn.
#[derive(Debug, Default, Clone)]
pub struct Share {
    /// The turn counted, and when its first unit of work started.
    turn: Option<(u64, Instant)>,
    units: u32,
}

impl Share {
    /// Counts one unit of work started at `now` in turn `turn` of the loop; `true` when the task
    /// has had its share of that turn (its next unit should wait for the next turn). A new turn
    /// starts a new share.
    pub fn spend(&mut self, turn: u64, now: Instant) -> bool {
        let started = match self.turn {
            Some((t, started)) if t == turn => started,
            _ => {
                self.turn = Some((turn, now));
                self.units = 0;
                now
            }
        };
        self.units += 1;
        self.units >= SHARE_MESSAGES || now.saturating_duration_since(started) >= SHARE_TIME
    }
}

/// The number of the current turn of this thread's core loop (0 off a core).
pub fn turn() -> u64 {
    executor::with_core(executor::Core::turn).unwrap_or(0)
}

/// Counts one unit of work in `share` and, when the task has had its share of this turn,
/// yields to the other ready tasks of its core. The clock reading it takes also brings the
/// core's turn clock forward, so a turn that serves many sessions sets each one's deadlines
/// from when that session's unit started, not from when the turn did.
pub async fn take_share(share: &mut Share) {
    let now = Instant::now();
    let turn = executor::with_core(|core| core.turn_at(now)).unwrap_or(0);
    if share.spend(turn, now) {
        yield_now().await;
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
        let spent: Vec<bool> = (0..SHARE_MESSAGES).map(|_| share.spend(7, t0)).collect();
        assert!(spent.iter().take(SHARE_MESSAGES as usize - 1).all(|s| !s));
        assert_eq!(spent.last(), Some(&true), "the last message of a share spends it");
        assert!(!share.spend(8, t0), "a new turn brings a new share");
        assert!(!share.spend(8, t0 + SHARE_TIME / 2));
        assert!(share.spend(8, t0 + SHARE_TIME), "a share is also spent by time");
        assert!(!share.spend(9, t0 + SHARE_TIME * 3));
    }
}
