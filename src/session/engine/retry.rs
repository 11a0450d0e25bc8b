//! Opt-in retry of transient failures (#11), decided once for both wires (#37): [`arm`] before
//! sending, [`Attempts::after_error`] after an error; the wires keep only the I/O. Only errors
//! saying "nothing took effect, another attempt may succeed" qualify: PostgreSQL `40001`/`40P01`,
//! MySQL deadlock (1213, or SQLSTATE `40001`); not a lock-wait timeout (1205: MySQL rolls back
//! only the statement, and the same wait again is unlikely to end otherwise). Codes come from
//! the native fields, never the localized message. Time and jitter's random number are inputs.

use std::time::{Duration, Instant};

use crate::config::{Protocol, RetryPolicy};

/// SQLSTATE serialization_failure (both servers); PostgreSQL deadlock_detected.
const SERIALIZATION_FAILURE: [u8; 5] = *b"40001";
const PG_DEADLOCK_DETECTED: [u8; 5] = *b"40P01";
/// MySQL `ER_LOCK_DEADLOCK`.
const MY_LOCK_DEADLOCK: u16 = 1213;

/// The largest statement, in wire bytes, kept for a retry: a PostgreSQL batch with large
/// parameters is not retried; a MySQL command keeps an execute's long data too.
pub fn kept_max(protocol: Protocol) -> usize {
    match protocol {
        Protocol::Postgres => 64 * 1024,
        Protocol::MySql => 1 << 20,
    }
}

/// A server error as the wire decoded it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ServerError {
    /// Its SQLSTATE, when the server sent one.
    pub sqlstate: Option<[u8; 5]>,
    /// Its native error number (MySQL; PostgreSQL has none).
    pub code: Option<u16>,
}

/// Whether `e`, from a `protocol` server, is a failure another attempt may get past.
pub fn retryable(protocol: Protocol, e: ServerError) -> bool {
    match protocol {
        Protocol::Postgres => e.sqlstate == Some(SERIALIZATION_FAILURE) || e.sqlstate == Some(PG_DEADLOCK_DETECTED),
        Protocol::MySql => e.code == Some(MY_LOCK_DEADLOCK) || e.sqlstate == Some(SERIALIZATION_FAILURE),
    }
}

/// What the rules that routed a statement (or a batch of them) said about retrying it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub enum RulePolicy {
    /// No statement was routed yet: the pool's policy.
    #[default]
    Unrouted,
    /// Every statement had this rule policy (`None`: no rule policy, the pool's applies).
    Same(Option<RetryPolicy>),
    /// Statements disagreed: no retry.
    Mixed,
}

impl RulePolicy {
    /// Adds a routed statement's rule policy.
    pub fn note(&mut self, rule: Option<RetryPolicy>) {
        *self = match *self {
            Self::Unrouted => Self::Same(rule),
            Self::Same(p) if p == rule => Self::Same(p),
            Self::Same(_) | Self::Mixed => Self::Mixed,
        };
    }

    /// The policy for the statements given their pool's; `None` if none speaks for them all.
    pub fn resolve(self, pool: RetryPolicy) -> Option<RetryPolicy> {
        match self {
            Self::Unrouted | Self::Same(None) => Some(pool),
            Self::Same(Some(rule)) => Some(rule),
            Self::Mixed => None,
        }
    }
}

/// What the wire knows of a statement it is about to send, for [`arm`].
#[derive(Debug, Clone, Copy)]
pub struct Arming {
    /// The client's protocol.
    pub protocol: Protocol,
    /// A transaction or a cursor is open: the server would roll back more than the statement.
    pub in_transaction: bool,
    /// The server commits the statement on its own (always, for PostgreSQL outside a block).
    pub autocommit: bool,
    /// On the split's read pool: a retry goes to a primary connection (on a standby, `40001`
    /// and `40P01` mean a recovery conflict, which tends to strike it again).
    pub on_read_pool: bool,
    /// The wire can resend it on a primary connection: it depends on nothing prepared on the
    /// replica one (PostgreSQL: a simple Query or FunctionCall; MySQL never moves).
    pub movable: bool,
    /// Part of the response may reach the client before the end (PostgreSQL: Flush before Sync).
    pub relayed: bool,
    /// Its wire bytes, as they would be sent again.
    pub size: usize,
}

/// Why a statement is not armed for retry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotArmed {
    /// The rules that decided the batch's statements have different policies.
    RulesDisagree,
    /// The policy allows one attempt.
    SingleAttempt,
    /// [`Arming::in_transaction`].
    InTransaction,
    /// Not [`Arming::autocommit`]: the statement opens a transaction that outlives it.
    NoAutocommit,
    /// [`Arming::on_read_pool`] and not [`Arming::movable`].
    ReadPool,
    /// [`Arming::relayed`].
    Relayed,
    /// Larger than [`kept_max`].
    TooLarge,
    /// The wire cannot send it again as it was sent.
    NotResendable,
}

/// The policy under which the statement `f` describes is armed, or why it is not: the rules'
/// if they agree, else the `pool`'s. The wire's `resendable` is asked last (it may scan).
pub fn arm(
    f: &Arming,
    rules: RulePolicy,
    pool: RetryPolicy,
    resendable: impl FnOnce() -> bool,
) -> Result<RetryPolicy, NotArmed> {
    let policy = rules.resolve(pool).ok_or(NotArmed::RulesDisagree)?;
    let refusals = [
        (policy.maximum_attempts.get() < 2, NotArmed::SingleAttempt),
        (f.in_transaction, NotArmed::InTransaction),
        (!f.autocommit, NotArmed::NoAutocommit),
        (f.on_read_pool && !f.movable, NotArmed::ReadPool),
        (f.relayed, NotArmed::Relayed),
        (f.size > kept_max(f.protocol), NotArmed::TooLarge),
    ];
    match refusals.into_iter().find(|(refused, _)| *refused) {
        Some((_, why)) => Err(why),
        None if !resendable() => Err(NotArmed::NotResendable),
        None => Ok(policy),
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
    /// A cancel (CancelRequest, `KILL QUERY`, query timeout): the client got the last error.
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

/// Why no new attempt may start: the client cancelled, or the router drains. A cancel wins a
/// tie: the client asked for it explicitly.
pub fn interrupted(cancelled: bool, draining: bool) -> Option<Outcome> {
    match (cancelled, draining) {
        (true, _) => Some(Outcome::Cancelled),
        (false, drain) => drain.then_some(Outcome::Shutdown),
    }
}

/// What the wire knows when a statement armed for retry fails.
#[derive(Debug, Clone, Copy)]
pub struct Failure {
    /// The client's protocol (the server's error codes differ).
    pub protocol: Protocol,
    /// Something of the response the client must not see twice has reached it (or will).
    pub relayed: bool,
    /// The server's error.
    pub error: ServerError,
}

/// What to do after an armed statement failed: send it again after a wait, or relay the error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Wait this long, then send the statement again.
    RetryAfter(Duration),
    /// Part of the response reached the client: a new attempt would repeat it.
    Reached,
    /// Not an error another attempt may get past.
    NotRetryable,
    /// Attempts or the deadline ran out: counted under this outcome.
    GaveUp(Outcome),
}

/// The attempts of one statement under its [`RetryPolicy`]: the first sent at `started`.
#[derive(Debug, Clone, Copy)]
pub struct Attempts {
    policy: RetryPolicy,
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

    /// The outcome to count when the last attempt did not fail retryably, if it was a retry.
    pub fn settled(&self) -> Option<Outcome> {
        (self.made > 1).then_some(Outcome::Settled)
    }

    /// After the attempt failed as `f` says at `now`: the backoff before the next attempt, or
    /// why the client gets the error; a backoff ending past the deadline is not started.
    /// `unit`: a uniform random number in `[0, 1)`, for jitter.
    pub fn after_error(&mut self, f: &Failure, now: Instant, unit: f64) -> Verdict {
        let wait = backoff(&self.policy, self.made, unit);
        if f.relayed {
            Verdict::Reached
        } else if !retryable(f.protocol, f.error) {
            Verdict::NotRetryable
        } else if self.made >= self.policy.maximum_attempts.get() {
            Verdict::GaveUp(Outcome::Exhausted)
        } else if now.saturating_duration_since(self.started) + wait > self.policy.deadline {
            Verdict::GaveUp(Outcome::Deadline)
        } else {
            self.made += 1;
            Verdict::RetryAfter(wait)
        }
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
mod tests;
