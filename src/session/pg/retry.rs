//! The I/O of retrying a PostgreSQL batch (#11); the decisions are `engine::retry`'s. As in
//! stale-plan healing (`flight`), the batch is kept when sent. Responses stay in the client
//! buffer while relaying; when a retried error comes before any result-bearing message (rows,
//! CommandComplete, COPY, notifications, parameter changes) was buffered, it and its
//! ReadyForQuery are held back, the buffer is cut back to where the batch began, and after the
//! backoff the batch goes again on the same connection (a primary one, from the read pool),
//! without the router's Parses the failed attempt already made. Otherwise the error is relayed
//! unchanged, as after a CancelRequest or a drain during the backoff.

use crate::protocol::pg::tag::backend as server;
use std::rc::Rc;
use std::time::Duration;

use super::exchange::ready_for_query;
use super::prepared::Expect;
use super::relay::frame_at;
use super::{End, Session, CLIENT_FLUSH_AT};
use crate::config::Protocol;
use crate::pool::CorePool;
use crate::protocol::pg::notice::peek_sqlstate;
use crate::protocol::pg::{ErrorFields, RawFrames, Severity, TransactionStatus};
use crate::rt::{self, Event};
use crate::session::backoff;
use crate::session::client_error::PgClientError;
use crate::session::engine::retry::{self, Arming, Attempts, Failure, Outcome, ServerError, Verdict};
use crate::session::placement::Placed;

/// Messages that may precede the failure without ruling out a retry: they carry no result and
/// come again on the next attempt (ParseComplete, BindComplete, CloseComplete,
/// ParameterDescription, RowDescription, NoData, NoticeResponse).
const BEFORE_RESULT: &[u8] = b"123tTnN";

/// A sent batch kept so it can be sent again.
#[derive(Debug)]
pub struct RetryBatch {
    /// The batch as sent (first attempt).
    bytes: Vec<u8>,
    /// Its expectations, synthesized ones included.
    expects: Vec<Expect>,
    /// Length of the client buffer before the batch's first response.
    out_mark: usize,
    /// Something the client must not see twice was buffered (or written) for this attempt.
    relayed: bool,
    /// Attempts so far; set when the first attempt is sent.
    attempts: Attempts,
    /// The held error (ParameterDescription held by healing first, if any), while a retry is
    /// pending; delivered unchanged if the retry is abandoned.
    held: Option<Vec<u8>>,
    /// SQLSTATE of the held error, for the notice.
    code: String,
    /// Backoff before the pending attempt.
    wait: Duration,
    /// Set by a cancel for this session: no further attempt.
    interrupt: Event,
}

impl RetryBatch {
    /// An error is held back until the batch runs again.
    pub(super) fn is_holding(&self) -> bool {
        self.held.is_some()
    }
}

#[cfg(test)]
impl RetryBatch {
    /// A batch kept for up to `attempts` attempts that holds `error` back, as `retry_hold`
    /// leaves it (for the exchange's recorded-frame tests).
    pub(super) fn holding(attempts: u32, error: &[u8]) -> Self {
        let policy = crate::config::RetryPolicy {
            maximum_attempts: std::num::NonZeroU32::new(attempts).expect("at least one"),
            backoff_base: Duration::from_millis(1),
            backoff_max: Duration::from_millis(1),
            jitter: false,
            deadline: Duration::from_secs(1),
            notify_client: false,
        };
        Self {
            bytes: Vec::new(),
            expects: Vec::new(),
            out_mark: 0,
            relayed: false,
            attempts: Attempts::new(policy, rt::now()),
            held: Some(error.to_vec()),
            code: "40001".into(),
            wait: Duration::ZERO,
            interrupt: Event::new(),
        }
    }
}

impl Session {
    /// Hook before a batch is sent: records it when its rule or pool retries and it may be
    /// retried.
    pub(super) fn arm_retry(&mut self) {
        let (rules, relayed) = self.ex.arming();
        let facts = Arming {
            protocol: Protocol::Postgres,
            in_transaction: self.progress.tx != TransactionStatus::Idle,
            autocommit: true,
            on_read_pool: self.primary_for_retry().is_some(),
            // Statements prepared on the replica connection do not exist on the primary one.
            movable: self.ex.expects().is_empty(),
            relayed,
            size: self.ex.queued().len(),
        };
        let resendable = || aligned(self.ex.queued(), self.ex.expects());
        let Ok(policy) = retry::arm(&facts, rules, self.seat.pool.config.retry, resendable) else { return };
        let ex = &mut *self.ex;
        ex.keep_for_retry(Box::new(RetryBatch {
            bytes: ex.queued().to_vec(),
            expects: ex.expects().iter().copied().collect(),
            out_mark: self.io.out.len(),
            relayed: false,
            attempts: Attempts::new(policy, rt::now()),
            held: None,
            code: String::new(),
            wait: Duration::ZERO,
            interrupt: self.seat.cancel.slot.watch(),
        }));
    }

    /// Hook for every backend message of an armed batch, before it is buffered.
    pub(super) fn retry_note(&mut self, tag: u8, len: usize) {
        let buffered = self.io.out.len();
        let Some(r) = self.ex.retry_batch() else { return };
        // A buffer about to be flushed has reached the client.
        // ErrorResponse and ReadyForQuery are judged by `retry_hold` and `retry_at_ready`.
        let result = !BEFORE_RESULT.contains(&tag) && tag != server::ERROR_RESPONSE && tag != server::READY_FOR_QUERY;
        if result || buffered + len >= CLIENT_FLUSH_AT || buffered < r.out_mark {
            r.relayed = true;
        }
    }

    /// Hook for an ErrorResponse relayed normally otherwise: holds it back when the batch will
    /// be retried.
    pub(super) fn retry_hold(&mut self, pos: usize) -> bool {
        let Some(frame) = self.seat.conn.as_ref().and_then(|c| frame_at(&c.rbuf, pos)) else { return false };
        let (body, frame) = (frame.body(), frame.bytes());
        let Some(r) = self.ex.retry_batch() else { return false };
        let failure = Failure { protocol: Protocol::Postgres, relayed: r.relayed, error: server_error(body) };
        match r.attempts.after_error(&failure, rt::now(), rand::random::<f64>()) {
            Verdict::RetryAfter(wait) => {
                let mut held = self.ex.take_held();
                held.extend_from_slice(frame);
                let Some(r) = self.ex.retry_batch() else { return false };
                r.held = Some(held);
                r.code = peek_sqlstate(body).unwrap_or_default().to_owned();
                r.wait = wait;
                true
            }
            why => {
                self.ex.no_retry();
                if let Verdict::GaveUp(outcome) = why {
                    backoff::count(&self.seat.pool, outcome);
                }
                false
            }
        }
    }

    /// Whether an error is held back for a retry (its ReadyForQuery is held back too).
    pub(super) fn retry_pending(&self) -> bool {
        self.ex.retry_pending()
    }

    /// Hook at ReadyForQuery: after the backoff sends the batch again (`Ok(true)`: keep
    /// relaying), or, when the client cancelled or the router is shutting down, delivers the
    /// held error and its ReadyForQuery as the server sent them (`Ok(false)`).
    pub(super) async fn retry_at_ready(&mut self, status: Option<u8>) -> Result<bool, End> {
        let Some(mut r) = self.ex.take_retry() else { return Ok(false) };
        let Some(held) = r.held.take() else {
            if let Some(settled) = r.attempts.settled() {
                backoff::count(&self.seat.pool, settled);
            }
            return Ok(false);
        };
        // Nothing runs for the session while it waits: a cancel now is for the wait alone.
        self.seat.cancel.slot.set_running(None);
        let mut stopped = backoff::wait(r.wait, &r.interrupt, &self.seat.ctx.drain).await.err();
        if let Some(primary) = self.primary_for_retry().filter(|_| stopped.is_none()) {
            if let Err(e) = self.move_to(primary).await {
                tracing::debug!(error = ?e, "no primary connection for a retry");
                stopped = Some(Outcome::Exhausted);
            } else if self.progress.tx == TransactionStatus::Idle {
                // causal (#34): the read now runs on the primary, unasked whether it writes
                // there (a view, a policy): its commit learns a position as after a write.
                self.seat.ryw.autocommit_unproven();
            }
        }
        if let Some(why) = stopped {
            backoff::count(&self.seat.pool, why);
            self.io.out.extend_from_slice(&held);
            self.io.out.extend_from_slice(&ready_for_query(status));
            return Ok(false);
        }
        backoff::count(&self.seat.pool, Outcome::Retried);
        self.io.out.truncate(r.out_mark);
        if r.attempts.policy().notify_client {
            let text = format!(
                "querypilot: statement failed with SQLSTATE {} before any result; retrying (attempt {} of {})",
                r.code,
                r.attempts.made(),
                r.attempts.policy().maximum_attempts
            );
            let _ = ErrorFields::new(Severity::Notice, "00000", &text).encode_notice(&mut self.io.out);
        }
        self.rebuild_batch(&r);
        self.ex.drop_held();
        r.relayed = false;
        r.out_mark = self.io.out.len();
        self.ex.keep_for_retry(r);
        self.send_backend().await?;
        Ok(true)
    }

    /// The write pool of the read/write split when the session runs on its read pool: a retry
    /// is a new attempt on a primary connection (#11). On a standby, `40001`/`40P01` mean a
    /// recovery conflict, which tends to strike the same replica again.
    fn primary_for_retry(&self) -> Option<Rc<CorePool>> {
        if !self.seat.ctx.is_read_pool(Protocol::Postgres, &self.seat.pool.config.name) {
            return None;
        }
        self.seat.ctx.rules().primary_pool(Protocol::Postgres).and_then(|p| self.seat.ctx.pools().get(p).cloned())
    }

    /// Gives the failed attempt's connection back (its ReadyForQuery arrived: it is idle) and
    /// attaches one of `pool`, with the session's settings replayed.
    async fn move_to(&mut self, pool: Rc<CorePool>) -> Result<(), PgClientError> {
        self.ex.settled();
        self.release_backend(false).await;
        self.seat.pool = pool;
        self.ensure_backend().await
    }

    /// Queues the batch again for the attached connection, leaving out the router's Parses of
    /// statements the failed attempt already prepared there (they outlive the transaction).
    fn rebuild_batch(&mut self, r: &RetryBatch) {
        self.ex.start_over();
        let Some(conn) = self.seat.conn.as_mut() else { return };
        let mut frames = RawFrames::new(&r.bytes, retry::kept_max(Protocol::Postgres));
        for e in &r.expects {
            if let Expect::Synth(tag) = *e {
                self.ex.answer_here(tag);
                continue;
            }
            let Some(raw) = frames.next().map(|f| f.bytes()) else { break };
            match *e {
                Expect::Parse { swallow, key: Some(k) } if conn.prepared.contains(&k) => {
                    if !swallow {
                        self.ex.answer_here(server::PARSE_COMPLETE);
                    }
                    continue;
                }
                Expect::Parse { key: Some(k), .. } => conn.prepared.push(k),
                _ => {}
            }
            self.ex.forward(raw, *e);
        }
        // A simple Query or FunctionCall has no expectations: the bytes are the whole batch.
        self.ex.forward_unanswered(frames.rest());
    }
}

/// The error an ErrorResponse body reports, from its code field (the message is localized).
fn server_error(body: &[u8]) -> ServerError {
    ServerError { sqlstate: peek_sqlstate(body).and_then(|s| s.as_bytes().try_into().ok()), code: None }
}

/// Whether every message of the batch has one expectation (synthesized ones aside), so the
/// batch can be rebuilt message by message; a simple Query has none.
fn aligned(bytes: &[u8], expects: &std::collections::VecDeque<Expect>) -> bool {
    let wanted = expects.iter().filter(|e| !matches!(e, Expect::Synth(_))).count();
    let mut frames = RawFrames::new(bytes, retry::kept_max(Protocol::Postgres));
    let count = frames.by_ref().count();
    frames.rest().is_empty() && (count == wanted || (wanted == 0 && count == 1))
}

#[cfg(test)]
mod tests;
