//! `failover_wait` (#40): a checkout of a primary-role pool that finds no writable backend (the
//! primary stopped, its successor not promoted yet) waits for one instead of failing at once,
//! up to the pool's bound, looking at the shared health every [`POLL`]. The probes (one task on
//! core 0) are what see the promotion; a waiting checkout on any core sees it at its next look,
//! with no message between cores. Like a PAUSE, the wait does not count against
//! `acquire_timeout`. Owns only the per-checkout budget of that wait and the error that ends it.

use std::time::Duration;

use super::PoolError;
use crate::rt;

/// How often a waiting checkout looks at the backends' health again. The probe interval
/// decides when a promotion is seen; this only adds up to one poll to it.
const POLL: Duration = Duration::from_millis(5);

/// One checkout's share of `failover_wait`, spent across however many waits it needs (a
/// backend may be promoted, then lost again before the checkout got a connection to it).
pub(super) struct FailoverWait {
    bound: Duration,
    waited: Duration,
}

impl FailoverWait {
    /// Nothing waited yet of `bound`.
    pub(super) fn new(bound: Duration) -> Self {
        Self { bound, waited: Duration::ZERO }
    }

    /// Waits one poll (less when the bound is nearer); returns how long, or `None` when the
    /// bound is used up.
    pub(super) async fn pause(&mut self) -> Option<Duration> {
        let left = self.bound.saturating_sub(self.waited);
        if left.is_zero() {
            return None;
        }
        let started = rt::now();
        rt::sleep(POLL.min(left)).await;
        // Both ends by the turn's clock (see `rt::since`): the pauses add up to the bound.
        let slept = rt::since(started);
        self.waited += slept;
        Some(slept)
    }

    /// Whether some of the bound is left.
    pub(super) fn has_time(&self) -> bool {
        self.waited < self.bound
    }

    /// The error a checkout ends with when no backend of pool `pool` (listed as `backends`)
    /// became writable: a connection failure (PostgreSQL clients get SQLSTATE 08001, MySQL
    /// clients error 1105 with SQLSTATE 08S01), since no statement was sent anywhere and the
    /// client may reconnect and try again; not a read-only error (25006, 1290), which would
    /// claim a server refused the statement.
    pub(super) fn exhausted(&self, pool: &str, backends: String) -> PoolError {
        let reason = format!("none became writable within failover_wait ({} ms)", self.waited.as_millis());
        PoolError::Connect { pool: pool.to_owned(), addr: backends, reason }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_error_names_the_pool_its_backends_and_the_wait() {
        let mut w = FailoverWait::new(Duration::from_secs(5));
        w.waited = Duration::from_millis(5004);
        let e = w.exhausted("main", "127.0.0.1:5432, 127.0.0.1:5433".into());
        let text = e.to_string();
        assert!(text.contains("127.0.0.1:5432, 127.0.0.1:5433 of pool \"main\""), "{text}");
        assert!(text.contains("within failover_wait (5004 ms)"), "{text}");
        assert!(matches!(e, PoolError::Connect { .. }), "worded as a connection failure");
        assert!(!w.has_time());
    }
}
