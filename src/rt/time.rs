//! The clock and timers of the data plane.

use std::future::Future;
use std::time::{Duration, Instant};

/// A deadline passed before the awaited work finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("deadline elapsed")]
pub struct Elapsed;

/// The current instant; the single clock source above this module.
pub fn now() -> Instant {
    Instant::now()
}

/// Sleeps for `d` without blocking the core.
pub async fn sleep(d: Duration) {
    glommio::timer::sleep(d).await
}

/// Sleeps until `deadline` (returns at once if it has passed).
pub async fn sleep_until(deadline: Instant) {
    let left = deadline.saturating_duration_since(Instant::now());
    if !left.is_zero() {
        glommio::timer::sleep(left).await
    }
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
