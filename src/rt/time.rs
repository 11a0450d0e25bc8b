//! The clock and timers of the data plane.

use std::future::Future;
use std::time::{Duration, Instant};

use super::timer::Sleep;

/// A deadline passed before the awaited work finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("deadline elapsed")]
pub struct Elapsed;

/// The current instant; the single clock source above this module.
pub fn now() -> Instant {
    Instant::now()
}

/// Sleeps for `d` without blocking the core.
pub fn sleep(d: Duration) -> Sleep {
    Sleep::new(Instant::now() + d)
}

/// Sleeps until `deadline` (returns at once if it has passed).
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep::new(deadline)
}

/// Runs `fut` until it completes or `deadline` passes, whichever is first.
pub async fn with_deadline<T>(deadline: Instant, fut: impl Future<Output = T>) -> Result<T, Elapsed> {
    let work = async { Ok(fut.await) };
    let timer = async {
        sleep_until(deadline).await;
        Err(Elapsed)
    };
    race(work, timer).await
}

/// Runs `fut` for at most `limit` from now; without a limit, until it completes.
pub async fn within<T>(limit: Option<Duration>, fut: impl Future<Output = T>) -> Result<T, Elapsed> {
    match limit {
        Some(limit) => with_deadline(Instant::now() + limit, fut).await,
        None => Ok(fut.await),
    }
}

/// Polls both futures and returns the output of whichever completes first (the first on a tie).
pub async fn race<T>(a: impl Future<Output = T>, b: impl Future<Output = T>) -> T {
    futures_lite::future::or(a, b).await
}
