//! Read-your-writes: the small sans-IO state a session keeps so that, once it may have changed
//! data, its later reads go to the primary (for the rest of the session, or for a window).
//! Also remembers a `route=primary` hint, which pins the session whatever the mode.
//! Time is a parameter: the session passes its clock's `now`.

use std::time::{Duration, Instant};

use crate::config::ReadYourWrites;

use super::decision::Decision;

/// A session's read-your-writes state. Call [`RywState::observe`] with every decision that ran,
/// [`RywState::statement_done`] when the backend reports the statement finished, and pass
/// [`RywState::pinned`] into the next [`super::SessionView::pinned_to_primary`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RywState {
    mode: ReadYourWrites,
    /// A `route=primary` hint was honored: pinned for good.
    hinted: bool,
    /// When the session last changed data (or ended a transaction that did).
    last_write: Option<Instant>,
    /// A data change was seen and no transaction end since: the commit refreshes the window,
    /// since that is when the changes become visible to replicas.
    open_write: bool,
    /// A write (or the commit of one) was routed and the backend has not yet said it finished
    /// outside a transaction: [`RywState::statement_done`] then starts the window (#19 case 10).
    awaiting_commit: bool,
}

impl RywState {
    /// A fresh session in `mode` (`RuleSet::read_your_writes()`).
    pub fn new(mode: ReadYourWrites) -> RywState {
        RywState { mode, hinted: false, last_write: None, open_write: false, awaiting_commit: false }
    }

    /// Changes the mode (after a reload); what was observed is kept.
    pub fn set_mode(&mut self, mode: ReadYourWrites) {
        self.mode = mode;
    }

    /// Records a decision the session executed at `now`. Refused statements are ignored.
    pub fn observe(&mut self, decision: &Decision, now: Instant) {
        if decision.pool().is_none() {
            return;
        }
        if decision.pins_primary {
            self.hinted = true;
        }
        if decision.writes {
            self.last_write = Some(now);
            self.open_write = true;
            self.awaiting_commit = true;
        } else if self.open_write && decision.ends_transaction() {
            self.last_write = Some(now);
            self.open_write = false;
            self.awaiting_commit = true;
        }
    }

    /// The backend finished a statement at `now` and reports whether a transaction is still
    /// open. A write is visible to others only once it commits, which for a long UPDATE may be
    /// seconds after it was routed: the window restarts here when the write (or the commit of
    /// a transaction that wrote) has just completed outside a transaction.
    pub fn statement_done(&mut self, now: Instant, in_transaction: bool) {
        if self.awaiting_commit && !in_transaction {
            self.last_write = Some(now);
            self.awaiting_commit = false;
            self.open_write = false;
        }
    }

    /// True while the session's reads must go to the primary.
    pub fn pinned(&self, now: Instant) -> bool {
        if self.hinted {
            return true;
        }
        match (self.mode, self.last_write) {
            (ReadYourWrites::None, _) | (_, None) => false,
            (ReadYourWrites::Session, Some(_)) => true,
            (ReadYourWrites::Window(window), Some(at)) => now.saturating_duration_since(at) < window,
        }
    }

    /// Time left in the window at `now` (`None` when not pinned by a window), for diagnostics.
    pub fn window_left(&self, now: Instant) -> Option<Duration> {
        match (self.mode, self.last_write) {
            (ReadYourWrites::Window(window), Some(at)) => {
                window.checked_sub(now.saturating_duration_since(at)).filter(|d| !d.is_zero())
            }
            _ => None,
        }
    }
}
