//! Backend health: the process-wide health table every core reads, the hysteresis that keeps
//! a backend from flapping, replica-lag measurement, and the prober that feeds them.
//!
//! Owns one [`BackendHealth`] per (pool, backend), created once in the shared
//! [`super::BudgetRegistry`] next to the connection budget, so every core's `CorePool` holds the
//! same `Arc` and reads it with one relaxed atomic load when it opens or reuses a connection —
//! never a lock, never a message on the statement path. Writers are the prober (one task on
//! core 0's background queue, see [`run`]) and any core whose connect attempt failed (passive
//! health: the backend is marked down at once).
//!
//! Must not depend on routing, session, core or control: the router asks
//! `CorePool::has_healthy_backend()`.

mod lag;
mod position;
mod probe;
pub(crate) mod query;
pub(super) mod sniff;

use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};

use parking_lot::Mutex;

use crate::id::{GtidPosition, Position};

pub use lag::{lag_ok, my_lag, pg_lag, Lag, MySample, PgSample};
pub use position::{
    my_failure_rolled_back, my_wait_for_gtid, pg_commit_position, pg_read_commit_position, pg_read_xact_probe,
    pg_replay_position, pg_xact_probe_row, PositionError, PG_COMMIT_POSITION, PG_XACT_PROBE,
};
pub use probe::{run, Prober};

use crate::metrics::HealthFigures;

/// Why a backend is (or was last) marked unhealthy; exported with its health.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Healthy.
    None = 0,
    /// A probe could not connect or log in (or a session's connect attempt failed).
    Connect = 1,
    /// Probe queries failed or timed out.
    Query = 2,
    /// Replica lag over its threshold, or unknown (replication stopped or not configured).
    Lag = 3,
    /// Not probed yet and the backend has a lag threshold: lag is unknown until measured.
    Unknown = 4,
}

impl Cause {
    fn from_u8(v: u8) -> Cause {
        match v {
            1 => Cause::Connect,
            2 => Cause::Query,
            3 => Cause::Lag,
            4 => Cause::Unknown,
            _ => Cause::None,
        }
    }

    /// Stable lower-case name (`/api/pools`, metric `reason` label).
    pub fn as_str(self) -> &'static str {
        match self {
            Cause::None => "none",
            Cause::Connect => "connect",
            Cause::Query => "query",
            Cause::Lag => "lag",
            Cause::Unknown => "unknown",
        }
    }
}

/// Sentinel of the lag atomics: nothing measured (or the measurement was unknown).
const UNKNOWN: u64 = u64::MAX;

/// Health of one (pool, backend), shared by every core.
#[derive(Debug)]
pub struct BackendHealth {
    /// 1 healthy, 0 unhealthy: the one value read on the connection path.
    up: AtomicU8,
    /// [`Cause`] of the current (or last) unhealthy state.
    cause: AtomicU8,
    /// Last measured replica lag in microseconds, or [`UNKNOWN`].
    lag_micros: AtomicU64,
    /// Last measured replica lag in WAL bytes, or [`UNKNOWN`].
    lag_bytes: AtomicU64,
    /// Failed checks by [`Cause`] index (connect, query, lag).
    failures: [AtomicU64; 3],
    /// The configured pool role against the server's own word (#19): [`ROLE_UNVERIFIED`],
    /// [`ROLE_MATCHES`] or [`ROLE_MISMATCH`].
    role: AtomicU8,
    /// causal (#22): the WAL position a standby has replayed (byte offset), or [`UNKNOWN`]; set
    /// by every probe, raised by a session's on-demand reading.
    replayed: AtomicU64,
    /// causal (#22): a MariaDB replica's `@@gtid_slave_pos` (`None`: unknown). A lock, since a
    /// GTID position has one entry per domain; taken only by causal reads of sessions that
    /// wrote and by the prober, for a copy or a store, never across an await.
    applied_gtid: Mutex<Option<GtidPosition>>,
    /// switchover (#40): where the server's own writes have reached while it was writable
    /// (PostgreSQL `pg_current_wal_flush_lsn()`, MariaDB `@@gtid_binlog_pos`); kept when the
    /// server stops, so a SWITCHOVER knows what its successor must have replayed.
    written: Mutex<Option<Position>>,
    /// switchover: a PostgreSQL server's `pg_last_wal_replay_lsn()`, also once promoted (it
    /// then stays where recovery ended), or [`UNKNOWN`].
    recovered: AtomicU64,
    /// Raised after each change of `up` or `role`: a core keeps what it worked out of them
    /// while this stays where it was (#39: read at every checkout, checkin and transaction end).
    changes: AtomicU64,
}

/// `BackendHealth::role`: no probe has read the server's role yet.
const ROLE_UNVERIFIED: u8 = 0;
/// `BackendHealth::role`: the server is what the pool's role says.
const ROLE_MATCHES: u8 = 1;
/// `BackendHealth::role`: the server is not what the pool's role says.
const ROLE_MISMATCH: u8 = 2;

impl BackendHealth {
    /// A fresh entry: a backend with a lag threshold starts unhealthy (its lag is unknown until
    /// the first probe, which follows within milliseconds); any other starts healthy.
    pub fn new(has_lag_threshold: bool) -> Self {
        Self {
            up: AtomicU8::new(u8::from(!has_lag_threshold)),
            cause: AtomicU8::new(if has_lag_threshold { Cause::Unknown as u8 } else { Cause::None as u8 }),
            lag_micros: AtomicU64::new(UNKNOWN),
            lag_bytes: AtomicU64::new(UNKNOWN),
            failures: Default::default(),
            role: AtomicU8::new(ROLE_UNVERIFIED),
            replayed: AtomicU64::new(UNKNOWN),
            applied_gtid: Mutex::new(None),
            written: Mutex::new(None),
            recovered: AtomicU64::new(UNKNOWN),
            changes: AtomicU64::new(0),
        }
    }

    /// How many times the health or the role changed so far: equal at two reads, what was
    /// read of them at the first still holds (all but for a change still being made, as if
    /// read just before it).
    pub(crate) fn changes(&self) -> u64 {
        self.changes.load(Ordering::Acquire)
    }

    /// The health or the role changed: published after the change, so a core that sees the
    /// count move reads the new state.
    fn changed(&self) {
        self.changes.fetch_add(1, Ordering::Release);
    }

    /// switchover: a probe read the position of the server's own writes (`None`: not
    /// writable, or not read); the last one known is kept.
    fn record_written(&self, position: Option<Position>) {
        if let Some(p) = position {
            *self.written.lock() = Some(p);
        }
    }

    /// switchover: a probe read a PostgreSQL server's replay position (`None`: it never
    /// recovered, or it was not read).
    fn record_recovered(&self, position: Option<u64>) {
        self.recovered.store(position.map_or(UNKNOWN, |p| p.min(UNKNOWN - 1)), Ordering::Relaxed);
    }

    /// switchover: what the server has replayed of another's writes, also after a promotion
    /// (PostgreSQL: its replay position; MariaDB: `@@gtid_slave_pos`).
    fn replayed_any(&self) -> Option<Position> {
        let recovered = Some(self.recovered.load(Ordering::Relaxed)).filter(|v| *v != UNKNOWN);
        recovered.map(Position::Wal).or_else(|| self.applied_gtid.lock().clone().map(Position::Gtid))
    }

    /// Records the last role verification; returns whether the result changed (so a mismatch
    /// is logged once when it appears, not every probe).
    pub fn set_role_mismatch(&self, mismatch: bool) -> bool {
        let next = if mismatch { ROLE_MISMATCH } else { ROLE_MATCHES };
        let changed = self.role.swap(next, Ordering::Relaxed) != next;
        if changed {
            self.changed();
        }
        changed
    }

    /// Whether the last probe that read the server's role found what the pool's role says
    /// (`None`: not read yet, or never readable: a pass-through or generic-engine pool). On a
    /// primary-role pool `Some(true)` means writable, `Some(false)` read-only (#40).
    pub fn role_matches(&self) -> Option<bool> {
        match self.role.load(Ordering::Relaxed) {
            ROLE_MATCHES => Some(true),
            ROLE_MISMATCH => Some(false),
            _ => None,
        }
    }

    /// causal: the replay position last read from this standby (`None`: unknown, or a primary).
    pub fn replayed(&self) -> Option<u64> {
        Some(self.replayed.load(Ordering::Relaxed)).filter(|v| *v != UNKNOWN)
    }

    /// causal: a probe read the replay position (`None` when it was not a standby); replaces
    /// the cached one, which a restored or re-cloned standby may have moved backwards.
    fn record_replayed(&self, position: Option<u64>) {
        self.replayed.store(position.map_or(UNKNOWN, |p| p.min(UNKNOWN - 1)), Ordering::Relaxed);
    }

    /// causal: a session read a newer replay position on demand; raises the cached one.
    pub fn note_replayed(&self, position: u64) {
        let p = position.min(UNKNOWN - 1);
        let _ = self
            .replayed
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |old| (old == UNKNOWN || old < p).then_some(p));
    }

    /// causal: a probe read a MariaDB replica's `@@gtid_slave_pos` (`None`: unreadable);
    /// replaces the cached one.
    fn record_applied_gtid(&self, position: Option<GtidPosition>) {
        *self.applied_gtid.lock() = position;
    }

    /// causal: the backend has applied at least `position` (on-demand reading); raises the
    /// cached position.
    pub fn note_applied(&self, position: &Position) {
        match position {
            Position::Wal(p) => self.note_replayed(*p),
            Position::Gtid(g) => self.applied_gtid.lock().get_or_insert_with(GtidPosition::default).include(g),
        }
    }

    /// causal: whether the backend is known (from the cache) to have applied `position`.
    pub fn has_applied(&self, position: &Position) -> bool {
        match position {
            Position::Wal(p) => self.replayed().is_some_and(|r| r >= *p),
            Position::Gtid(g) => self.applied_gtid.lock().as_ref().is_some_and(|a| g.applied_by(a)),
        }
    }

    /// causal: the position the backend is known to have applied (a standby's replay
    /// position, else a MariaDB replica's GTID position), for the dry-run.
    fn applied(&self) -> Option<Position> {
        self.replayed().map(Position::Wal).or_else(|| self.applied_gtid.lock().clone().map(Position::Gtid))
    }

    /// Whether new connections may go to this backend (one relaxed load).
    #[inline]
    pub fn is_healthy(&self) -> bool {
        self.up.load(Ordering::Relaxed) == 1
    }

    /// Why the backend is unhealthy ([`Cause::None`] when healthy).
    pub fn cause(&self) -> Cause {
        if self.is_healthy() {
            Cause::None
        } else {
            Cause::from_u8(self.cause.load(Ordering::Relaxed))
        }
    }

    /// Passive health: a session's connect attempt failed, so new connections skip the backend
    /// now rather than after the next probe; only probes bring it back.
    pub fn connect_failed(&self) {
        self.cause.store(Cause::Connect as u8, Ordering::Relaxed);
        if self.up.swap(0, Ordering::AcqRel) != 0 {
            self.changed();
        }
    }

    /// Moves from `from` to `to` unless someone else changed the state meanwhile (a passive
    /// mark wins over a probe that started before it). Returns whether the change happened.
    fn transition(&self, from: bool, to: bool, cause: Cause) -> bool {
        let moved = to == from
            || self.up.compare_exchange(u8::from(from), u8::from(to), Ordering::AcqRel, Ordering::Acquire).is_ok();
        if moved && to != from {
            self.changed();
        }
        // While down, the cause follows the latest failure (a passing check keeps the last one).
        if moved && !to && cause != Cause::None {
            self.cause.store(cause as u8, Ordering::Relaxed);
        }
        moved
    }

    fn record_lag(&self, lag: Lag) {
        let micros = lag.seconds.map_or(UNKNOWN, |s| (s * 1e6).min(UNKNOWN as f64 - 1.0) as u64);
        self.lag_micros.store(micros, Ordering::Relaxed);
        self.lag_bytes.store(lag.bytes.map_or(UNKNOWN, |b| b.min(UNKNOWN - 1)), Ordering::Relaxed);
    }

    fn count_failure(&self, cause: Cause) {
        let i = match cause {
            Cause::Connect => 0,
            Cause::Query => 1,
            Cause::Lag => 2,
            Cause::None | Cause::Unknown => return,
        };
        if let Some(c) = self.failures.get(i) {
            c.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// metrics: the figures `/metrics` and `/api/pools` show.
    pub fn figures(&self) -> HealthFigures {
        let known = |v: u64| (v != UNKNOWN).then_some(v);
        HealthFigures {
            healthy: self.is_healthy(),
            cause: self.cause().as_str(),
            lag_micros: known(self.lag_micros.load(Ordering::Relaxed)),
            lag_bytes: known(self.lag_bytes.load(Ordering::Relaxed)),
            check_failures_total: [
                ("connect", self.failures[0].load(Ordering::Relaxed)),
                ("query", self.failures[1].load(Ordering::Relaxed)),
                ("lag", self.failures[2].load(Ordering::Relaxed)),
            ],
            applied_position: self.applied().map(|p| p.to_string()),
            role_mismatch: self.role_matches().map(|m| !m),
            written_position: self.written.lock().as_ref().map(ToString::to_string),
            replayed_position: self.replayed_any().map(|p| p.to_string()),
        }
    }
}

/// One probe's result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Reachable, answering, and (for a replica with a threshold) lag within bounds.
    Pass,
    /// Failed for this cause; counts towards `failure_threshold`.
    Fail(Cause),
    /// The backend refused the connection (or login): unhealthy at once, no threshold.
    Refused,
}

/// The hysteresis of one backend: a state changes only after `failure_threshold` failures or
/// `success_threshold` successes in a row; a refused connection marks it down at once. A
/// backend that starts unhealthy because its lag is not known yet is decided by its first
/// result, so a replica is neither trusted nor shunned for several intervals at start; one that
/// starts healthy (assumed) needs the usual failures, so one slow first check under load does
/// not take it out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Hysteresis {
    /// The state this tracker believes in.
    pub healthy: bool,
    /// Consecutive results disagreeing with `healthy`.
    pub streak: u32,
    /// Whether `healthy` follows the thresholds; `false` only for the assumed-unhealthy start.
    pub decided: bool,
}

impl Hysteresis {
    /// A tracker starting from the shared state `healthy` (see the type's docs).
    pub fn new(healthy: bool) -> Self {
        Self { healthy, streak: 0, decided: healthy }
    }

    /// The state after `verdict`, with thresholds `failures` (to go down) and `successes`
    /// (to come back). Pure: the caller publishes `healthy` when it changed.
    #[must_use]
    pub fn step(self, verdict: Verdict, failures: u32, successes: u32) -> Self {
        let pass = verdict == Verdict::Pass;
        if !self.decided || verdict == Verdict::Refused {
            return Self { healthy: pass, streak: 0, decided: true };
        }
        if pass == self.healthy {
            return Self { streak: 0, ..self };
        }
        let streak = self.streak.saturating_add(1);
        let needed = if pass { successes } else { failures };
        if streak >= needed.max(1) {
            Self { healthy: pass, streak: 0, decided: true }
        } else {
            Self { streak, ..self }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(start: Hysteresis, verdicts: &[Verdict]) -> Vec<bool> {
        let mut h = start;
        verdicts
            .iter()
            .map(|v| {
                h = h.step(*v, 3, 2);
                h.healthy
            })
            .collect()
    }

    const P: Verdict = Verdict::Pass;
    const F: Verdict = Verdict::Fail(Cause::Query);

    #[test]
    fn an_unknown_start_is_decided_by_the_first_result_an_assumed_healthy_one_is_not() {
        assert_eq!(run(Hysteresis::new(false), &[P]), vec![true]);
        assert_eq!(run(Hysteresis::new(false), &[F, P, P]), vec![false, false, true]);
        assert_eq!(run(Hysteresis::new(true), &[F, F, F]), vec![true, true, false]);
    }

    #[test]
    fn going_down_needs_failure_threshold_failures_in_a_row() {
        let decided = Hysteresis { healthy: true, streak: 0, decided: true };
        assert_eq!(run(decided, &[F, F, P, F, F, F]), vec![true, true, true, true, true, false]);
    }

    #[test]
    fn coming_back_needs_success_threshold_successes_in_a_row() {
        let down = Hysteresis { healthy: false, streak: 0, decided: true };
        assert_eq!(run(down, &[P, F, P, P, F]), vec![false, false, false, true, true]);
    }

    #[test]
    fn a_refused_connection_marks_down_at_once() {
        let decided = Hysteresis { healthy: true, streak: 2, decided: true };
        assert_eq!(run(decided, &[Verdict::Refused, P, P]), vec![false, false, true]);
    }

    #[test]
    fn threshold_one_follows_every_result() {
        let mut h = Hysteresis { healthy: true, streak: 0, decided: true };
        for (v, want) in [(F, false), (P, true), (F, false)] {
            h = h.step(v, 1, 1);
            assert_eq!(h.healthy, want);
        }
    }

    #[test]
    fn shared_state_transitions_lose_to_a_concurrent_passive_mark() {
        let h = BackendHealth::new(false);
        assert!(h.is_healthy());
        h.connect_failed();
        assert_eq!(h.cause(), Cause::Connect);
        assert!(!h.transition(true, false, Cause::Query), "state moved under the prober");
        assert_eq!(h.cause(), Cause::Connect, "a lost transition changes nothing");
        assert!(h.transition(false, true, Cause::None));
        assert!(h.is_healthy());
        assert_eq!(h.cause(), Cause::None);
        let lagging = BackendHealth::new(true);
        assert_eq!((lagging.is_healthy(), lagging.cause()), (false, Cause::Unknown));
    }

    /// A core's pool over `weights` (backends 127.0.0.1:1.., nothing is connected).
    fn pool(weights: &[u32]) -> (crate::pool::CorePool, crate::pool::BudgetRegistry) {
        let backends: Vec<String> = weights
            .iter()
            .enumerate()
            .map(|(i, w)| format!("{{ host = \"127.0.0.1\", port = {}, weight = {w} }}", i + 1))
            .collect();
        let toml = format!(
            "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.p]\nusername = \"u\"\npassword = \"x\"\n\
             max_connections = 1000\nbackends = [{}]\n\n[routing]\ndefault_pool = \"p\"\n",
            backends.join(", ")
        );
        let config = crate::config::Config::parse(&toml, "t.toml").expect("config");
        let budgets = crate::pool::BudgetRegistry::default();
        let pool = config.pools.first().expect("pool");
        let counters = std::rc::Rc::new(crate::metrics::PoolCounters::new("p"));
        (crate::pool::CorePool::build(pool, &budgets, counters, Default::default()), budgets)
    }

    fn picks(p: &crate::pool::CorePool, n: usize) -> Vec<usize> {
        let mut counts = vec![0; p.backends.len()];
        for _ in 0..n {
            if let Some(c) =
                p.pick_backend_any(p.usable_now(), crate::pool::Eligible::ANY).and_then(|i| counts.get_mut(i))
            {
                *c += 1;
            }
        }
        counts
    }

    #[test]
    fn weighted_round_robin_skips_unhealthy_backends_and_fails_open() {
        let (p, budgets) = pool(&[2, 1, 1]);
        assert_eq!(picks(&p, 40), vec![20, 10, 10]);
        let second = budgets.health("p", "127.0.0.1:2", false);
        second.connect_failed();
        assert!(p.has_healthy_backend());
        assert_eq!(picks(&p, 30), vec![20, 0, 10], "the unhealthy backend gets nothing");
        assert!(second.transition(false, true, Cause::None));
        assert_eq!(picks(&p, 40), vec![20, 10, 10], "back in rotation with its weight");
        for port in 1..=3 {
            budgets.health("p", &format!("127.0.0.1:{port}"), false).connect_failed();
        }
        assert!(!p.has_healthy_backend());
        assert_eq!(picks(&p, 4).iter().sum::<usize>(), 4, "no healthy backend: the pool fails open");
    }

    #[test]
    fn figures_report_lag_and_failures() {
        let h = BackendHealth::new(true);
        assert_eq!(h.figures().lag_micros, None);
        h.record_lag(Lag { seconds: Some(1.5), bytes: Some(4096) });
        h.count_failure(Cause::Lag);
        h.count_failure(Cause::Lag);
        h.count_failure(Cause::Connect);
        let f = h.figures();
        assert_eq!((f.lag_micros, f.lag_bytes), (Some(1_500_000), Some(4096)));
        assert_eq!(f.check_failures_total, [("connect", 1), ("query", 0), ("lag", 2)]);
        h.record_lag(Lag::UNKNOWN);
        assert_eq!(h.figures().lag_bytes, None);
    }
}
