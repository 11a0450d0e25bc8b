//! PAUSE and RESUME for switchovers (and RECONNECT, which retires a pool's server connections): every core holds new checkouts of a pool (or of all pools)
//! while the transactions in flight finish, then gives its idle server connections back; the
//! operator repoints the pool (reload), and RESUME lets the held statements run. No client sees
//! an error: held statements wait, their acquire timeout paused too.

use std::time::{Duration, Instant};

use crossbeam_channel::unbounded;

use super::msg::{CoreCommand, PauseReport};
use super::{ControlError, ControlHandle, ControlPlane, CORE_REPLY_TIMEOUT};

/// How a PAUSE ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseOutcome {
    /// Connections still lent out when the wait ended, over all cores (0: fully paused).
    pub in_use: u64,
    /// Cores that answered.
    pub cores: usize,
}

impl ControlHandle {
    /// Pauses `pool` (every pool when `None`) on every core and waits up to `timeout` for the
    /// transactions in flight to finish. The pool stays paused either way until [`Self::resume`].
    pub fn pause(&self, pool: Option<String>, timeout: Duration) -> Result<PauseOutcome, ControlError> {
        self.call(move |cp| cp.pause(pool, timeout))?
    }

    /// Resumes `pool` (every pool when `None`) on every core.
    pub fn resume(&self, pool: Option<String>) -> Result<usize, ControlError> {
        self.call(move |cp| cp.acknowledged(&pool, |reply| CoreCommand::Resume { pool: pool.clone(), reply }))?
    }

    /// Ends every session on `pool` on every core and pauses the pool until RESUME.
    pub fn kill(&self, pool: String) -> Result<usize, ControlError> {
        self.call(move |cp| {
            cp.acknowledged(&Some(pool.clone()), |reply| CoreCommand::Kill { pool: pool.clone(), reply })
        })?
    }

    /// Closes every server connection of `pool` (every pool when `None`) on every core once it
    /// is idle, so the next transactions open new ones (after a backend's settings changed, say).
    pub fn reconnect(&self, pool: Option<String>) -> Result<usize, ControlError> {
        self.call(move |cp| cp.acknowledged(&pool, |reply| CoreCommand::Reconnect { pool: pool.clone(), reply }))?
    }
}

impl ControlPlane {
    fn check_pool(&self, pool: &Option<String>) -> Result<(), ControlError> {
        match pool {
            Some(name) if self.current.config.pool(name).is_none() => {
                Err(ControlError::NotFound(format!("no pool named \"{name}\"")))
            }
            _ => Ok(()),
        }
    }

    fn pause(&mut self, pool: Option<String>, timeout: Duration) -> Result<PauseOutcome, ControlError> {
        self.check_pool(&pool)?;
        let deadline = Instant::now() + timeout;
        let (tx, rx) = unbounded::<PauseReport>();
        let expected = self.send_running(|| CoreCommand::Pause { pool: pool.clone(), deadline, reply: tx.clone() });
        let mut outcome = PauseOutcome { in_use: 0, cores: 0 };
        while outcome.cores < expected {
            match rx.recv_deadline(deadline + CORE_REPLY_TIMEOUT) {
                Ok(report) => {
                    outcome.in_use += report.in_use;
                    outcome.cores += 1;
                }
                Err(_) => break,
            }
        }
        Ok(outcome)
    }

    /// Sends `command` about `pool` to every running core; returns how many acknowledged.
    fn acknowledged(
        &mut self,
        pool: &Option<String>,
        command: impl Fn(crossbeam_channel::Sender<super::msg::CoreId>) -> CoreCommand,
    ) -> Result<usize, ControlError> {
        self.check_pool(pool)?;
        let (tx, rx) = unbounded();
        let expected = self.send_running(|| command(tx.clone()));
        let deadline = Instant::now() + CORE_REPLY_TIMEOUT;
        let mut acked = 0;
        while acked < expected && rx.recv_deadline(deadline).is_ok() {
            acked += 1;
        }
        Ok(acked)
    }
}
