//! The wait between two attempts of a retried statement (issue #11). It ends early when the
//! client cancels the statement (the session's watched interrupt, see `cancel::CancelSlot::watch`)
//! or when the router starts draining; either way the caller hands the client the last error
//! instead of starting a new attempt. Which errors qualify and how long to wait is `retry`'s job.

use std::time::Duration;

use super::retry::Outcome;
use crate::rt::{self, Event};

/// Waits `wait` unless `interrupt` (a client cancel) or `drain` (shutdown) is set first, or
/// already was. `Err` says why no new attempt may start.
pub async fn wait(wait: Duration, interrupt: &Event, drain: &Event) -> Result<(), Outcome> {
    if interrupt.is_set() {
        return Err(Outcome::Cancelled);
    }
    if drain.is_set() {
        return Err(Outcome::Shutdown);
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
