//! SWITCHOVER (#40): moves a primary-role pool's writes to another of its backends without a
//! client error. It pauses the pool (new transactions wait, those in flight finish), waits
//! until the named backend has replayed everything the current primary wrote, then until the
//! named backend is the pool's only writable one (the operator stops or demotes the old primary
//! and promotes the new one meanwhile: the promotion stays the operator's or their tool's job),
//! and resumes: the held transactions run on the new primary. The positions and roles come from
//! the health probes (`pool::health`), read here through the cores' metric snapshots, so this
//! runs on the caller's thread (the admin API or console), never on the control thread or a core.
//!
//! A switchover that cannot finish in time leaves the pool paused and says why: the operator
//! resumes (`RESUME`) or retries, knowing that nothing was written anywhere meanwhile.

use std::time::{Duration, Instant};

use super::{ControlError, ControlHandle};
use crate::config::PoolRole;
use crate::error::{ErrorCode, Origin};
use crate::id::Position;
use crate::metrics::{CounterSnapshot, HealthFigures};

/// How long a SWITCHOVER may take unless the caller says otherwise: the operator stops or
/// demotes the old primary and promotes the new one within it.
pub const DEFAULT_SWITCHOVER_TIMEOUT: Duration = Duration::from_secs(60);

/// How often the probes' figures are looked at while waiting.
const POLL: Duration = Duration::from_millis(20);

/// Health probes that must have run after the pause before the old primary's position counts
/// as its last: the first may have started before the last transaction committed.
const SETTLING_PROBES: u32 = 2;

/// How a switchover ended well.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Switched {
    /// The old primary's last position, which the new one had replayed.
    pub position: String,
    /// How long the pool was paused (the longest a held transaction waited).
    pub paused: Duration,
}

/// Why a switchover did not finish; every case after the pause leaves the pool paused.
#[derive(Debug, thiserror::Error)]
pub enum SwitchoverError {
    /// The request names no such pool or backend, or the control plane refused it.
    #[error(transparent)]
    Control(#[from] ControlError),
    /// Transactions were still running when the time ran out.
    #[error("{in_use} transactions of pool \"{pool}\" still running; the pool stays paused until RESUME")]
    Busy {
        /// The pool.
        pool: String,
        /// Connections still lent out.
        in_use: u64,
    },
    /// The named backend had not replayed the old primary's last position in time.
    #[error(
        "backend {backend} replayed {replayed} but the primary wrote up to {needed}; pool \"{pool}\" stays paused \
         until RESUME"
    )]
    Behind {
        /// The pool.
        pool: String,
        /// The named backend.
        backend: String,
        /// What it had replayed (`unknown` when unread).
        replayed: String,
        /// The old primary's last position (`unknown` when never read).
        needed: String,
    },
    /// The named backend was not the pool's only writable backend in time (not promoted, or
    /// the old primary still writable).
    #[error(
        "backend {backend} caught up but is not the only writable backend of pool \"{pool}\" (promote it, stop or \
         demote the old primary); the pool stays paused until RESUME"
    )]
    NotPromoted {
        /// The pool.
        pool: String,
        /// The named backend.
        backend: String,
    },
}

impl ErrorCode for SwitchoverError {
    fn code(&self) -> &'static str {
        match self {
            Self::Control(e) => e.code(),
            Self::Busy { .. } => "switchover.busy",
            Self::Behind { .. } => "switchover.behind",
            Self::NotPromoted { .. } => "switchover.not_promoted",
        }
    }
    fn origin(&self) -> Origin {
        match self {
            Self::Control(e) => e.origin(),
            _ => Origin::Backend,
        }
    }
}

/// Where a switchover stands, decided from one reading of the probes' figures.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Stage {
    /// The named backend has not replayed `needed` (or it is not known yet).
    Behind { replayed: Option<String> },
    /// Caught up, but not yet the only writable backend.
    NotPromoted,
    /// Caught up and the only writable backend: resume.
    Ready,
}

/// A backend found writable by its last role reading (and up).
fn writable(h: &HealthFigures) -> bool {
    h.healthy && h.role_mismatch == Some(false)
}

/// Pure: the stage of a switchover to `target` given each backend's figures, the old primary's
/// last position `needed`, and whether enough probes ran since the pause for `needed` to be
/// its last (`settled`).
fn stage(backends: &[(&str, &HealthFigures)], target: &str, needed: Option<&Position>, settled: bool) -> Stage {
    let theirs = backends.iter().find(|(label, _)| *label == target).map(|(_, h)| *h);
    let replayed = theirs.and_then(|h| h.replayed_position.clone());
    let done = replayed.as_deref().and_then(Position::parse_token);
    let caught_up = settled && matches!((needed, &done), (Some(need), Some(done)) if need.applied_by(done));
    if !caught_up {
        return Stage::Behind { replayed };
    }
    let only = theirs.is_some_and(writable) && backends.iter().all(|(l, h)| *l == target || !writable(h));
    if only {
        Stage::Ready
    } else {
        Stage::NotPromoted
    }
}

/// Raises `needed` to the written positions of every backend but `target` (the old primary's,
/// kept after it stopped).
fn raise_needed(needed: &mut Option<Position>, backends: &[(&str, &HealthFigures)], target: &str) {
    let others = backends.iter().filter(|(l, _)| *l != target);
    for p in others.filter_map(|(_, h)| h.written_position.as_deref().and_then(Position::parse_token)) {
        match needed {
            Some(n) => n.raise(&p),
            None => *needed = Some(p),
        }
    }
}

/// Switches pool `pool` over to its backend `backend` (`host:port` as configured), within
/// `timeout` (see the module docs).
pub fn switchover(
    control: &ControlHandle,
    pool: &str,
    backend: &str,
    timeout: Duration,
) -> Result<Switched, SwitchoverError> {
    let deadline = Instant::now() + timeout;
    let snapshot = control.current()?;
    let config =
        snapshot.config.pool(pool).ok_or_else(|| ControlError::NotFound(format!("no pool named \"{pool}\"")))?;
    if config.role != PoolRole::Primary {
        return Err(ControlError::BadRequest(format!("pool \"{pool}\" is not a primary-role pool")).into());
    }
    if !config.backends.iter().any(|b| format!("{}:{}", b.host, b.port) == backend) {
        return Err(ControlError::NotFound(format!("pool \"{pool}\" has no backend {backend}")).into());
    }
    let started = Instant::now();
    let paused = control.pause(Some(pool.to_owned()), timeout)?;
    if paused.in_use > 0 {
        return Err(SwitchoverError::Busy { pool: pool.to_owned(), in_use: paused.in_use });
    }
    let settled_at = Instant::now() + config.health.interval * SETTLING_PROBES;
    let mut needed = None;
    loop {
        let mut total = CounterSnapshot::default();
        for r in control.collect()? {
            total.merge(&r.counters);
        }
        let figures = total.pool(pool).map(|p| p.backends.as_slice()).unwrap_or_default();
        let backends: Vec<(&str, &HealthFigures)> =
            figures.iter().filter_map(|b| Some((b.label.as_str(), b.health.as_ref()?))).collect();
        raise_needed(&mut needed, &backends, backend);
        let now = Instant::now();
        let stage = stage(&backends, backend, needed.as_ref(), now >= settled_at);
        match stage {
            Stage::Ready => {
                control.resume(Some(pool.to_owned()))?;
                let position = needed.map(|p| p.to_string()).unwrap_or_default();
                return Ok(Switched { position, paused: started.elapsed() });
            }
            _ if now < deadline => {
                // The caller's own thread (admin API or console), never a core or the control
                // plane, which go on serving meanwhile.
                #[allow(clippy::disallowed_methods)]
                std::thread::sleep(POLL);
            }
            Stage::Behind { replayed } => {
                let unknown = || "unknown".to_owned();
                return Err(SwitchoverError::Behind {
                    pool: pool.to_owned(),
                    backend: backend.to_owned(),
                    replayed: replayed.unwrap_or_else(unknown),
                    needed: needed.map_or_else(unknown, |p| p.to_string()),
                });
            }
            Stage::NotPromoted => {
                return Err(SwitchoverError::NotPromoted { pool: pool.to_owned(), backend: backend.to_owned() })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures(healthy: bool, writable: Option<bool>, written: Option<&str>, replayed: Option<&str>) -> HealthFigures {
        HealthFigures {
            healthy,
            cause: if healthy { "none" } else { "connect" },
            lag_micros: None,
            lag_bytes: None,
            check_failures_total: [("connect", 0), ("query", 0), ("lag", 0)],
            role_mismatch: writable.map(|w| !w),
            applied_position: None,
            written_position: written.map(str::to_owned),
            replayed_position: replayed.map(str::to_owned),
        }
    }

    const A: &str = "10.0.0.1:5432";
    const B: &str = "10.0.0.2:5432";

    fn run(a: &HealthFigures, b: &HealthFigures, settled: bool) -> Stage {
        let backends = [(A, a), (B, b)];
        let mut needed = None;
        raise_needed(&mut needed, &backends, B);
        stage(&backends, B, needed.as_ref(), settled)
    }

    #[test]
    fn a_standby_behind_the_primary_is_not_switched_to() {
        let a = figures(true, Some(true), Some("pg:0/3000100"), None);
        let b = figures(true, Some(false), None, Some("pg:0/3000000"));
        assert_eq!(run(&a, &b, true), Stage::Behind { replayed: Some("pg:0/3000000".into()) });
    }

    #[test]
    fn caught_up_waits_for_the_promotion_and_for_the_old_primary_to_stop_writing() {
        let a = figures(true, Some(true), Some("pg:0/3000100"), None);
        let b = figures(true, Some(false), None, Some("pg:0/3000100"));
        assert_eq!(run(&a, &b, false), Stage::Behind { replayed: Some("pg:0/3000100".into()) }, "not settled");
        assert_eq!(run(&a, &b, true), Stage::NotPromoted);
        let promoted = figures(true, Some(true), Some("pg:0/3000200"), Some("pg:0/3000100"));
        assert_eq!(run(&a, &promoted, true), Stage::NotPromoted, "two writable servers: no resume");
        let stopped = figures(false, Some(true), Some("pg:0/3000100"), None);
        assert_eq!(run(&stopped, &promoted, true), Stage::Ready);
        let demoted = figures(true, Some(false), Some("pg:0/3000100"), None);
        assert_eq!(run(&demoted, &promoted, true), Stage::Ready);
    }

    #[test]
    fn gtid_positions_compare_per_domain() {
        let a = figures(false, Some(true), Some("gtid:0-1-500"), Some("gtid:0-2-10"));
        let behind = figures(true, Some(true), Some("gtid:0-2-11"), Some("gtid:0-1-499"));
        assert!(matches!(run(&a, &behind, true), Stage::Behind { .. }));
        let b = figures(true, Some(true), Some("gtid:0-2-501"), Some("gtid:0-1-500"));
        assert_eq!(run(&a, &b, true), Stage::Ready);
    }

    #[test]
    fn an_unknown_primary_position_never_counts_as_caught_up() {
        let a = figures(false, None, None, None);
        let b = figures(true, Some(true), None, Some("pg:0/3000100"));
        assert!(matches!(run(&a, &b, true), Stage::Behind { .. }));
    }
}
