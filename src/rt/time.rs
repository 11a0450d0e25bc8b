//! The clock and timers of the data plane.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use super::timer::Sleep;

/// A deadline passed before the awaited work finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("deadline elapsed")]
pub struct Elapsed;

/// The current instant; the single clock source above this module. On a core, the instant of
/// its loop's current turn (see `Core::clock`); elsewhere, the clock's.
pub fn now() -> Instant {
    super::executor::with_core(super::executor::Core::clock).unwrap_or_else(Instant::now)
}

/// How long ago `then`, an instant [`now`] gave, was by the same clock: `Instant::elapsed` reads
/// the real clock, which against a turn's would also count how late in its turn `then` was
/// taken, and a sum of such spans would run ahead of the time that passed.
pub fn since(then: Instant) -> Duration {
    now().saturating_duration_since(then)
}

/// Sleeps for `d` without blocking the core.
pub fn sleep(d: Duration) -> Sleep {
    Sleep::new(now() + d)
}

/// Sleeps until `deadline` (returns at once if it has passed).
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::new(deadline)
}

/// Completes at the first turn of the core's loop at or after `deadline` that something else
/// caused (a completion, a wake-up, another timer): it never makes the loop wake or wait less
/// itself. For periodic looks that need no precision and should cost nothing extra on a
/// loaded core. An idle loop still turns every few tens of milliseconds, so it completes at
/// most that late.
pub fn sleep_lazy_until(deadline: Instant) -> Sleep {
    Sleep::lazy(deadline)
}

pin_project_lite::pin_project! {
    /// Future of [`with_deadline`] and [`within`]: the work, polled first, raced against a
    /// timer. A hand-written future rather than an `async fn`: an `async fn` wrapper holds its
    /// argument and the future it awaits as two copies, and the session's per-statement future
    /// went through several such layers (#21: most user-space instructions were that memcpy).
    pub struct Deadline<F> {
        #[pin]
        work: F,
        timer: Option<Sleep>,
    }
}

impl<F: Future> Future for Deadline<F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.work.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match this.timer {
            Some(timer) => Pin::new(timer).poll(cx).map(|()| Err(Elapsed)),
            None => Poll::Pending,
        }
    }
}

/// Runs `fut` until it completes or `deadline` passes, whichever is first.
pub fn with_deadline<F: Future>(deadline: Instant, fut: F) -> Deadline<F> {
    Deadline { work: fut, timer: Some(sleep_until(deadline)) }
}

/// Runs `fut` for at most `limit` from now; without a limit, until it completes.
pub fn within<F: Future>(limit: Option<Duration>, fut: F) -> Deadline<F> {
    Deadline { work: fut, timer: limit.map(|l| sleep_until(now() + l)) }
}

/// Polls both futures and returns the output of whichever completes first (the first on a tie).
pub fn race<T>(a: impl Future<Output = T>, b: impl Future<Output = T>) -> impl Future<Output = T> {
    futures_lite::future::or(a, b)
}
