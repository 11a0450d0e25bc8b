//! Replica lag from what a probe read, as pure functions (the clocks are the server's, passed
//! in as values), and the verdict against a backend's thresholds.

use std::time::Duration;

/// A replica's lag; `None` means unknown (replication stopped, not configured, NULL readings).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Lag {
    /// Behind by this much replay time, in seconds.
    pub seconds: Option<f64>,
    /// Behind by this many WAL bytes (PostgreSQL only).
    pub bytes: Option<u64>,
}

impl Lag {
    /// Nothing known.
    pub const UNKNOWN: Lag = Lag { seconds: None, bytes: None };
}

/// What one PostgreSQL probe read (LSNs as byte offsets, times as Unix epoch seconds).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PgSample {
    /// `pg_is_in_recovery()`.
    pub in_recovery: bool,
    /// `pg_current_wal_flush_lsn()` when not in recovery (a primary).
    pub flush_lsn: Option<u64>,
    /// `pg_last_wal_receive_lsn()` (NULL when streaming never started).
    pub receive_lsn: Option<u64>,
    /// `pg_last_wal_replay_lsn()`.
    pub replay_lsn: Option<u64>,
    /// `pg_last_xact_replay_timestamp()` (NULL before the first replayed transaction).
    pub replay_time: Option<f64>,
    /// The standby's `clock_timestamp()` when it answered.
    pub now: f64,
}

/// Lag of a PostgreSQL standby.
///
/// - Bytes: the primary's flushed WAL position minus the standby's replay position. When no
///   recent primary reading exists (no write pool, primary unreachable) the standby's own
///   receive position stands in, which still shows a paused or slow replay.
/// - Time: `now − last replayed commit time`, but only while the standby has received WAL it has
///   not replayed (receive ≠ replay): on an idle primary the last commit is old without the
///   standby being behind at all.
///
/// A server not in recovery is not a replica: its lag is unknown (a backend configured with a
/// lag threshold is expected to be one).
pub fn pg_lag(s: &PgSample, primary_lsn: Option<u64>) -> Lag {
    let Some(replay) = s.replay_lsn.filter(|_| s.in_recovery) else {
        return Lag::UNKNOWN;
    };
    let reference = match (primary_lsn, s.receive_lsn) {
        (Some(p), Some(r)) => Some(p.max(r)),
        (p, r) => p.or(r),
    };
    let bytes = reference.map(|r| r.saturating_sub(replay));
    let seconds = match s.receive_lsn {
        Some(received) if received <= replay => Some(0.0),
        Some(_) => s.replay_time.map(|t| (s.now - t).max(0.0)),
        // Not streaming: only a primary reading can tell whether the standby is behind.
        None => match bytes {
            Some(0) if primary_lsn.is_some() => Some(0.0),
            _ => None,
        },
    };
    Lag { seconds, bytes }
}

/// What a MySQL/MariaDB `SHOW SLAVE STATUS` (or `SHOW REPLICA STATUS`) row said.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MySample {
    /// Whether a replication row came back at all (an empty result: not a replica).
    pub configured: bool,
    /// `Slave_IO_Running` / `Replica_IO_Running` is `Yes`.
    pub io_running: bool,
    /// `Slave_SQL_Running` / `Replica_SQL_Running` is `Yes`.
    pub sql_running: bool,
    /// `Seconds_Behind_Master` / `Seconds_Behind_Source` (NULL while a thread is stopped or
    /// reconnecting).
    pub seconds_behind: Option<u64>,
}

/// Lag of a MySQL/MariaDB replica: `Seconds_Behind_Master` while both replication threads run;
/// unknown otherwise (a stopped thread means the replica no longer follows the primary).
/// Byte lag is not measured on MySQL.
pub fn my_lag(s: &MySample) -> Lag {
    let seconds = if s.configured && s.io_running && s.sql_running { s.seconds_behind.map(|v| v as f64) } else { None };
    Lag { seconds, bytes: None }
}

/// Whether `lag` is acceptable for a backend with these thresholds. With no threshold every
/// lag is; with any threshold an unknown replay lag is not, and each threshold set must be met
/// by a known value.
pub fn lag_ok(lag: &Lag, max_time: Option<Duration>, max_bytes: Option<u64>) -> bool {
    if max_time.is_none() && max_bytes.is_none() {
        return true;
    }
    let Some(seconds) = lag.seconds else {
        return false;
    };
    let time_ok = max_time.is_none_or(|m| seconds <= m.as_secs_f64());
    let bytes_ok = max_bytes.is_none_or(|m| lag.bytes.is_some_and(|b| b <= m));
    time_ok && bytes_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standby(receive: u64, replay: u64, replay_time: Option<f64>, now: f64) -> PgSample {
        PgSample {
            in_recovery: true,
            flush_lsn: None,
            receive_lsn: Some(receive),
            replay_lsn: Some(replay),
            replay_time,
            now,
        }
    }

    #[test]
    fn an_idle_primary_is_not_lag() {
        // Last commit an hour ago, everything received was replayed.
        let s = standby(5000, 5000, Some(1000.0), 4600.0);
        assert_eq!(pg_lag(&s, Some(5000)), Lag { seconds: Some(0.0), bytes: Some(0) });
    }

    #[test]
    fn paused_replay_shows_time_and_bytes() {
        let s = standby(9000, 5000, Some(100.0), 102.5);
        assert_eq!(pg_lag(&s, Some(12_000)), Lag { seconds: Some(2.5), bytes: Some(7000) });
        // Without a primary reading the receive position stands in.
        assert_eq!(pg_lag(&s, None).bytes, Some(4000));
        // A stale primary reading behind what the standby received does not hide lag.
        assert_eq!(pg_lag(&s, Some(6000)).bytes, Some(4000));
    }

    #[test]
    fn null_readings_are_unknown() {
        let s = standby(9000, 5000, None, 102.5);
        assert_eq!(pg_lag(&s, Some(9000)).seconds, None, "behind, but no replay timestamp");
        let not_streaming = PgSample { receive_lsn: None, ..standby(0, 5000, Some(1.0), 2.0) };
        assert_eq!(pg_lag(&not_streaming, None), Lag::UNKNOWN);
        assert_eq!(pg_lag(&not_streaming, Some(5000)), Lag { seconds: Some(0.0), bytes: Some(0) });
        assert_eq!(pg_lag(&not_streaming, Some(7000)), Lag { seconds: None, bytes: Some(2000) });
        let primary = PgSample { in_recovery: false, flush_lsn: Some(10), ..PgSample::default() };
        assert_eq!(pg_lag(&primary, Some(10)), Lag::UNKNOWN, "not a replica");
    }

    #[test]
    fn clock_skew_never_gives_negative_lag() {
        let s = standby(9000, 5000, Some(200.0), 199.0);
        assert_eq!(pg_lag(&s, None).seconds, Some(0.0));
    }

    #[test]
    fn mysql_lag_needs_both_threads_running() {
        let ok = MySample { configured: true, io_running: true, sql_running: true, seconds_behind: Some(3) };
        assert_eq!(my_lag(&ok), Lag { seconds: Some(3.0), bytes: None });
        let sql_stopped = MySample { sql_running: false, seconds_behind: None, ..ok.clone() };
        assert_eq!(my_lag(&sql_stopped), Lag::UNKNOWN);
        let io_stopped = MySample { io_running: false, ..ok.clone() };
        assert_eq!(my_lag(&io_stopped), Lag::UNKNOWN, "a stale Seconds_Behind_Master is not trusted");
        assert_eq!(my_lag(&MySample::default()), Lag::UNKNOWN, "not a replica");
    }

    #[test]
    fn thresholds() {
        let one_s = Some(Duration::from_secs(1));
        let lag = |s: Option<f64>, b: Option<u64>| Lag { seconds: s, bytes: b };
        assert!(lag_ok(&Lag::UNKNOWN, None, None), "no threshold: lag is irrelevant");
        assert!(!lag_ok(&Lag::UNKNOWN, one_s, None), "unknown counts as unhealthy");
        assert!(lag_ok(&lag(Some(1.0), None), one_s, None));
        assert!(!lag_ok(&lag(Some(1.01), None), one_s, None));
        assert!(lag_ok(&lag(Some(0.0), Some(100)), None, Some(100)));
        assert!(!lag_ok(&lag(Some(0.0), Some(101)), None, Some(100)));
        assert!(!lag_ok(&lag(Some(0.0), None), None, Some(100)), "bytes unknown");
        assert!(!lag_ok(&lag(Some(5.0), Some(0)), one_s, Some(100)), "both thresholds apply");
    }
}
