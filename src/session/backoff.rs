//! The wait between two attempts of a retried statement (issue #11). It ends early when the
//! client cancels the statement (the session's watched interrupt, see `cancel::CancelSlot::watch`)
//! or when the router starts draining; either way the caller hands the client the last error
//! instead of starting a new attempt. Which errors qualify and how long to wait is
//! `engine::retry`'s job.

use std::time::Duration;

use super::engine::retry::{interrupted, Outcome};
use crate::pool::CorePool;
use crate::rt::{self, Event};

/// Waits `wait` unless `interrupt` (a client cancel) or `drain` (shutdown) is set first, or
/// already was. `Err` says why no new attempt may start.
pub async fn wait(wait: Duration, interrupt: &Event, drain: &Event) -> Result<(), Outcome> {
    if let Some(why) = interrupted(interrupt.is_set(), drain.is_set()) {
        return Err(why);
    }
    let cancelled = async {
        interrupt.wait().await;
        Err(Outcome::Cancelled)
    };
    let drained = async {
        drain.wait().await;
        Err(Outcome::Shutdown)
    };
    let slept = async {
        rt::sleep(wait).await;
        Ok(())
    };
    // A cancel wins a tie: the client asked for it explicitly.
    rt::race(cancelled, rt::race(drained, slept)).await
}

/// Counts one retry event of `pool`.
pub fn count(pool: &CorePool, outcome: Outcome) {
    tracing::debug!(pool = %pool.config.name, outcome = outcome.as_str(), "statement retry");
    if let Some(o) = crate::metrics::RetryOutcome::from_name(outcome.as_str()) {
        pool.counters.retried(o);
    }
}

#[cfg(test)]
mod tests {
    use super::Outcome::*;

    #[test]
    fn every_outcome_is_a_label_the_metric_counts() {
        for o in [Retried, Settled, Exhausted, Deadline, Shutdown, Cancelled] {
            assert!(crate::metrics::RetryOutcome::from_name(o.as_str()).is_some(), "{}", o.as_str());
        }
    }
}
