//! When a core runs its pool upkeep (#39): when something is due — an idle connection's
//! timeout, a look at the health of idle connections, a connection becoming spare for another
//! core — or a command changed the pools, rather than on a 5 ms tick; and lazily in between
//! (at a turn of the loop that happens anyway, so a loaded core pays no turn of its own for
//! it and an idle one no more than its loop's idle wake-ups): every [`NextUpkeep::FOLLOW`]
//! while the trade between cores or a template pool needs following, else every [`NOTICE`],
//! to notice that it starts to (this core's checkouts used up a budget another core may come
//! to wait for; nothing tells the core). A draining core looks at its sessions every
//! [`DRAIN_LOOK`].

use std::time::{Duration, Instant};

use crate::pool::NextUpkeep;
use crate::rt;

/// How often a draining core looks whether its last session ended.
const DRAIN_LOOK: Duration = Duration::from_millis(5);

/// How often upkeep looks whether something now needs following, while nothing does.
const NOTICE: Duration = Duration::from_millis(50);

/// The core's upkeep schedule.
pub(super) struct Upkeep {
    /// When upkeep must run at the latest (`None`: only when asked, or when `look` passes).
    by: Option<Instant>,
    /// When a lazy look is due, if one is to follow something.
    look: Option<Instant>,
}

impl Upkeep {
    /// A schedule due at once.
    pub(super) fn start(now: Instant) -> Self {
        Self { by: Some(now), look: None }
    }

    /// Whether upkeep is due at `now`.
    pub(super) fn due(&self, now: Instant) -> bool {
        [self.by, self.look].into_iter().flatten().any(|t| t <= now)
    }

    /// Upkeep ran at `now` and found `next`; `draining`: the core waits for its sessions to end.
    pub(super) fn ran(&mut self, now: Instant, next: NextUpkeep, draining: bool) {
        let drain = draining.then(|| now + DRAIN_LOOK);
        self.by = next.by.into_iter().chain(drain).min();
        let every = if next.follow { NextUpkeep::FOLLOW } else { NOTICE };
        // No pool: nothing changes without a command.
        self.look = next.by.map(|_| now + every);
    }

    /// Waits until upkeep is due, or a command notifies the core.
    pub(super) async fn wait(&self) {
        let (by, look) = (self.by, self.look);
        let strict = async move {
            match by {
                Some(t) => rt::sleep_until(t).await,
                None => std::future::pending().await,
            }
        };
        let lazy = async move {
            match look {
                Some(t) => rt::sleep_lazy_until(t).await,
                None => std::future::pending().await,
            }
        };
        rt::race(rt::notified(), rt::race(strict, lazy)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(t0: Instant, ms: u64) -> Instant {
        t0 + Duration::from_millis(ms)
    }

    #[test]
    fn upkeep_is_due_at_start_then_at_the_next_deadline_or_look() {
        let t0 = Instant::now();
        let mut u = Upkeep::start(t0);
        assert!(u.due(t0));
        u.ran(t0, NextUpkeep { by: Some(at(t0, 40)), follow: false }, false);
        assert!(!u.due(at(t0, 39)) && u.due(at(t0, 40)), "the deadline first");
        u.ran(t0, NextUpkeep { by: Some(at(t0, 1000)), follow: false }, false);
        assert!(!u.due(t0 + NextUpkeep::FOLLOW), "nothing to follow");
        assert!(u.due(t0 + NOTICE), "but a look whether something is, lazily");
        u.ran(t0, NextUpkeep { by: None, follow: false }, false);
        assert!(!u.due(at(t0, 3_600_000)), "no pool: only a command wakes it");
    }

    #[test]
    fn following_looks_at_the_former_tick_and_a_drain_bounds_the_wait() {
        let t0 = Instant::now();
        let mut u = Upkeep::start(t0);
        u.ran(t0, NextUpkeep { by: Some(at(t0, 1000)), follow: true }, false);
        assert!(!u.due(at(t0, 4)) && u.due(t0 + NextUpkeep::FOLLOW));
        u.ran(t0, NextUpkeep { by: Some(at(t0, 1000)), follow: false }, true);
        assert!(!u.due(at(t0, 4)) && u.due(t0 + DRAIN_LOOK), "a draining core looks at its sessions");
        assert_eq!(u.by, Some(t0 + DRAIN_LOOK), "strictly: an idle core must stop in time");
    }
}
