//! Opt-in retry of transient failures (issue #11): which backend errors qualify and how long to
//! wait before each new attempt. Pure: no I/O, no clock, no randomness of its own — the caller
//! passes the time and a uniform random number, so the schedule is tested without a runtime.
//!
//! Only errors that say "nothing of this statement took effect, and running it again may
//! succeed" qualify: PostgreSQL `40001` serialization_failure and `40P01` deadlock_detected;
//! MySQL/MariaDB deadlock (1213 `ER_LOCK_DEADLOCK`, or SQLSTATE `40001`). A lock-wait timeout
//! (1205) does not: MySQL rolls back only the statement, not the transaction, and another wait
//! of the same length is unlikely to end differently. Classification reads the native code
//! fields, never the message text (it is localized). The session drivers (`pg::retry`,
//! `mysql::retry`) decide whether a statement may be retried at all.

use std::time::{Duration, Instant};

use crate::config::RetryPolicy;
use crate::protocol::mysql::ErrPacket;
use crate::protocol::pg::notice::peek_sqlstate;

/// PostgreSQL serialization_failure.
const PG_SERIALIZATION_FAILURE: &str = "40001";
/// PostgreSQL deadlock_detected.
const PG_DEADLOCK_DETECTED: &str = "40P01";
/// MySQL `ER_LOCK_DEADLOCK`.
const MY_LOCK_DEADLOCK: u16 = 1213;
/// SQLSTATE serialization failure, as MySQL/MariaDB report it.
const MY_SERIALIZATION_STATE: &[u8; 5] = b"40001";

/// Whether a PostgreSQL ErrorResponse body (fields after the length) is a retryable
/// serialization failure or deadlock.
pub fn pg_retryable(error_body: &[u8]) -> bool {
    matches!(peek_sqlstate(error_body), Some(PG_SERIALIZATION_FAILURE | PG_DEADLOCK_DETECTED))
}

/// Whether a MySQL ERR payload (starting with 0xFF) is a retryable deadlock.
pub fn mysql_retryable(err_payload: &[u8]) -> bool {
    match ErrPacket::decode(err_payload) {
        Ok(e) => e.code == MY_LOCK_DEADLOCK || e.sql_state.as_ref() == Some(MY_SERIALIZATION_STATE),
        Err(_) => false,
    }
}

/// How a statement's retry ended, for logs and the `outcome` label of `sqp_retries_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// A new attempt is about to start.
    Retried,
    /// A retried statement succeeded (or failed with a non-retryable error).
    Settled,
    /// Every allowed attempt failed: the client got the last error.
    Exhausted,
    /// The next backoff would pass the deadline: the client got the last error.
    Deadline,
    /// The router is shutting down: the client got the last error.
    Shutdown,
    /// The client cancelled the statement (CancelRequest, `KILL QUERY`) or its query timeout
    /// passed: the client got the last error.
    Cancelled,
}

impl Outcome {
    /// The label value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Retried => "retried",
            Self::Settled => "settled",
            Self::Exhausted => "exhausted",
            Self::Deadline => "deadline",
            Self::Shutdown => "shutdown",
            Self::Cancelled => "cancelled",
        }
    }
}

/// The attempts of one statement under a pool's [`RetryPolicy`].
#[derive(Debug, Clone, Copy)]
pub struct Attempts {
    policy: RetryPolicy,
    /// When the first attempt was sent.
    started: Instant,
    /// Attempts made so far (at least 1).
    made: u32,
}

impl Attempts {
    /// The first attempt, sent at `started`.
    pub fn new(policy: RetryPolicy, started: Instant) -> Self {
        Self { policy, started, made: 1 }
    }

    /// The policy these attempts follow.
    pub fn policy(&self) -> &RetryPolicy {
        &self.policy
    }

    /// Attempts made so far, the first included.
    pub fn made(&self) -> u32 {
        self.made
    }

    /// After attempt `made()` failed with a retryable error at `now`: the backoff before the
    /// next attempt, or why there is none. `unit` is a uniform random number in `[0, 1)` used
    /// for jitter. A backoff that would end past the deadline is not started.
    pub fn next(&mut self, now: Instant, unit: f64) -> Result<Duration, Outcome> {
        if self.made >= self.policy.maximum_attempts.get() {
            return Err(Outcome::Exhausted);
        }
        let wait = backoff(&self.policy, self.made, unit);
        if now.saturating_duration_since(self.started) + wait > self.policy.deadline {
            return Err(Outcome::Deadline);
        }
        self.made += 1;
        Ok(wait)
    }
}

/// The wait before retry number `retry` (1 for the first retry): `backoff_base * 2^(retry-1)`,
/// capped at `backoff_max`; with jitter, a uniform share of it ("full jitter"), so clients that
/// failed together do not collide again in lockstep. `unit` is clamped to `[0, 1]`.
pub fn backoff(policy: &RetryPolicy, retry: u32, unit: f64) -> Duration {
    let doublings = retry.saturating_sub(1).min(31);
    let exp = policy.backoff_base.saturating_mul(1u32 << doublings);
    let capped = exp.min(policy.backoff_max);
    if !policy.jitter {
        return capped;
    }
    let unit = if unit.is_finite() { unit.clamp(0.0, 1.0) } else { 0.0 };
    capped.mul_f64(unit)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::pg::{encode_error, Severity};
    use std::num::NonZeroU32;

    fn policy(attempts: u32, jitter: bool) -> RetryPolicy {
        RetryPolicy {
            maximum_attempts: NonZeroU32::new(attempts).unwrap(),
            backoff_base: Duration::from_millis(10),
            backoff_max: Duration::from_millis(50),
            jitter,
            deadline: Duration::from_secs(1),
            notify_client: false,
        }
    }

    fn pg_body(code: &str) -> Vec<u8> {
        let mut out = Vec::new();
        encode_error(Severity::Error, code, "whatever the server's language says", &mut out);
        out.get(5..).unwrap().to_vec()
    }

    fn my_err(code: u16, state: &[u8; 5]) -> Vec<u8> {
        let mut out = Vec::new();
        ErrPacket { code, sql_state: Some(*state), message: b"x" }.encode(&mut out);
        out
    }

    #[test]
    fn pg_classifier_reads_the_code_field_only() {
        assert!(pg_retryable(&pg_body("40001")));
        assert!(pg_retryable(&pg_body("40P01")));
        for code in ["40002", "55P03", "57014", "23505", "0A000", "XX000"] {
            assert!(!pg_retryable(&pg_body(code)), "{code}");
        }
        // The message says deadlock, the code does not.
        let mut out = Vec::new();
        encode_error(Severity::Error, "XX000", "deadlock detected 40P01", &mut out);
        assert!(!pg_retryable(out.get(5..).unwrap()));
        assert!(!pg_retryable(b""));
        assert!(!pg_retryable(b"Mdeadlock\0\0"));
    }

    #[test]
    fn mysql_classifier_takes_deadlock_not_lock_wait_timeout() {
        assert!(mysql_retryable(&my_err(1213, b"40001")));
        assert!(mysql_retryable(&my_err(1213, b"HY000")));
        assert!(mysql_retryable(&my_err(3101, b"40001")));
        assert!(!mysql_retryable(&my_err(1205, b"HY000")));
        assert!(!mysql_retryable(&my_err(1062, b"23000")));
        // Pre-4.1 form without SQLSTATE.
        assert!(mysql_retryable(b"\xFF\xBD\x04x"));
        assert!(!mysql_retryable(b"\xFF\xB5\x04x"));
        assert!(!mysql_retryable(&[0x00, 0, 0]));
        assert!(!mysql_retryable(&[0xFF]));
    }

    #[test]
    fn backoff_doubles_and_caps() {
        let p = policy(10, false);
        let ms: Vec<u128> = (1..=5).map(|r| backoff(&p, r, 0.5).as_millis()).collect();
        assert_eq!(ms, [10, 20, 40, 50, 50]);
        assert_eq!(backoff(&p, u32::MAX, 0.5), Duration::from_millis(50), "no overflow");
    }

    #[test]
    fn jitter_is_a_uniform_share_of_the_capped_wait() {
        let p = policy(10, true);
        assert_eq!(backoff(&p, 2, 0.0), Duration::ZERO);
        assert_eq!(backoff(&p, 2, 0.5), Duration::from_millis(10));
        assert_eq!(backoff(&p, 9, 0.5), Duration::from_millis(25));
        assert_eq!(backoff(&p, 1, 7.0), Duration::from_millis(10), "clamped");
        assert_eq!(backoff(&p, 1, f64::NAN), Duration::ZERO);
    }

    #[test]
    fn attempts_stop_at_the_maximum() {
        let t0 = Instant::now();
        let mut a = Attempts::new(policy(3, false), t0);
        assert_eq!(a.next(t0, 0.0), Ok(Duration::from_millis(10)));
        assert_eq!(a.next(t0, 0.0), Ok(Duration::from_millis(20)));
        assert_eq!(a.made(), 3);
        assert_eq!(a.next(t0, 0.0), Err(Outcome::Exhausted));
        let mut off = Attempts::new(policy(1, false), t0);
        assert_eq!(off.next(t0, 0.0), Err(Outcome::Exhausted), "1 attempt means no retry");
    }

    #[test]
    fn attempts_stop_before_the_deadline() {
        let t0 = Instant::now();
        let mut a = Attempts::new(policy(10, false), t0);
        assert_eq!(a.next(t0 + Duration::from_millis(985), 0.0), Ok(Duration::from_millis(10)));
        assert_eq!(a.next(t0 + Duration::from_millis(985), 0.0), Err(Outcome::Deadline), "985 + 20 > 1000");
        assert_eq!(a.made(), 2);
        assert_eq!(Outcome::Deadline.as_str(), "deadline");
    }
}
