//! Opt-in retry of a MySQL/MariaDB statement that failed with a deadlock (1213, or SQLSTATE
//! `40001`) (issue #11; classifier and backoff in `session::retry`). A lock-wait timeout
//! (1205) is never retried.
//!
//! Armed for a text command (`COM_QUERY`) or a prepared execute (`COM_STMT_EXECUTE`) sent in
//! autocommit mode outside a transaction, not on the split's read pool, under the policy of the routing rule that decided it
//! or else of its pool. Only an ERR that is the first payload of its response qualifies:
//! nothing of the response has reached the client then. InnoDB has already rolled the
//! statement's implicit transaction back, so after the backoff the same command goes again on
//! the same connection. Otherwise, when attempts or the deadline run out, when the client
//! cancels (`KILL QUERY` with the router-issued id, or the query timeout) and when the router
//! drains, the ERR is relayed unchanged. A statement that succeeded after a retry under
//! `notify_client` gets a warning (see `warning`).

use super::exchange::Exchange;
use super::relay::{packet_at, Grammar, Outcome as Relayed};
use super::warning::Retried;
use super::Session;
use crate::config::{Protocol, RetryPolicy};
use crate::protocol::mysql::encode_packets;
use crate::protocol::mysql::response::{SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_IN_TRANS};
use crate::rt;
use crate::session::backoff;
use crate::session::error::RelayError;
use crate::session::retry::{Attempts, Outcome};

/// Largest command (with the long data before an execute) kept for a retry.
const RETRY_MAX: usize = 1 << 20;

/// How the attempts at a retryable command ended.
struct Settled {
    /// The last attempt's response is not one to retry (as opposed to: attempts, the deadline
    /// or the client's patience ran out, and the last deadlock is relayed).
    settled: bool,
    /// The last error retried, kept for the client's warning.
    retried: Option<Vec<u8>>,
}

impl Session {
    /// Sends a client command and relays its response, retrying it after a deadlock when its
    /// rule or pool says so.
    pub(super) async fn send_and_relay(&mut self, payload: &[u8], grammar: Grammar) -> Result<Relayed, RelayError> {
        self.link.out.clear();
        self.link.seq = Some(encode_packets(payload, 0, &mut self.link.out));
        self.flush_and_relay(grammar, true).await
    }

    /// Writes the queued command (`self.link.out`) and relays its response, retrying it after a
    /// deadlock when `retryable` and its rule or pool says so.
    pub(super) async fn flush_and_relay(&mut self, grammar: Grammar, retryable: bool) -> Result<Relayed, RelayError> {
        let policy = self.retry.rule.take().unwrap_or(self.pool.config.retry);
        if !retryable || !self.retry_armed(grammar, &policy) || self.link.out.len() > RETRY_MAX {
            self.flush_backend().await?;
            return self.relay_response(grammar).await;
        }
        let mut attempts = Attempts::new(policy, rt::now());
        let mut ex = self.exchange(grammar);
        let Settled { settled, retried } = self.attempt(&ex, &mut attempts).await?;
        let notify = retried.as_deref().filter(|_| settled && policy.notify_client);
        let retried = notify.and_then(|err| Retried::new(err, attempts.made(), policy.maximum_attempts.get()));
        self.retry.notice.bump = retried.is_some();
        self.retry.notice.bumped = false;
        let relayed = self.relay_exchange(&mut ex).await;
        self.retry.notice.bump = false;
        let relayed = relayed?;
        if settled && attempts.made() > 1 {
            self.count_retry(Outcome::Settled);
        }
        if let Some(r) = retried.filter(|_| self.retry.notice.bumped && !relayed.error) {
            self.keep_retry_warnings(r).await;
        }
        Ok(relayed)
    }

    /// Sends the queued command and again after each deadlock `ex` may retry, as `attempts`
    /// allow, until the first packet of a response is one to relay (it stays unread).
    async fn attempt(&mut self, ex: &Exchange, attempts: &mut Attempts) -> Result<Settled, RelayError> {
        let resend = self.link.out.clone();
        // The sequence id the response to `resend` starts at, for every attempt.
        let bseq = self.link.seq;
        let interrupt = self.cancel.slot.watch();
        self.flush_backend().await?;
        let mut retried = None;
        loop {
            self.next_backend_packet().await?;
            let Some((first, wire_len)) = self.retryable_first(ex)? else {
                return Ok(Settled { settled: true, retried });
            };
            let wait = match attempts.next(rt::now(), rand::random::<f64>()) {
                Ok(wait) => wait,
                Err(why) => return Ok(self.gave_up(why, retried)),
            };
            // Nothing runs for the session while it waits: a cancel now is for the wait alone.
            self.cancel.slot.set_running(None);
            if let Err(why) = backoff::wait(wait, &interrupt, &self.ctx.drain).await {
                return Ok(self.gave_up(why, retried));
            }
            self.count_retry(Outcome::Retried);
            retried = Some(first);
            self.link.pos += wire_len;
            self.compact();
            self.link.out.clear();
            self.link.out.extend_from_slice(&resend);
            self.link.seq = bseq;
            self.flush_backend().await?;
        }
    }

    /// The first packet of the response, unread, with its wire length, when `ex` may retry it.
    fn retryable_first(&self, ex: &Exchange) -> Result<Option<(Vec<u8>, usize)>, RelayError> {
        let conn = self.link.conn.as_ref().ok_or(RelayError::BackendClosed(None))?;
        let first = packet_at(&conn.rbuf, self.link.pos)?;
        Ok(ex.may_retry(&first.packet).then(|| (first.packet.payload.to_vec(), first.wire.len())))
    }

    /// Counts why retrying stopped short; the last deadlock is relayed.
    fn gave_up(&self, why: Outcome, retried: Option<Vec<u8>>) -> Settled {
        self.count_retry(why);
        Settled { settled: false, retried }
    }

    /// Whether a command of `grammar` may be retried now under `policy`: it retries, the
    /// command is text SQL or a prepared execute, the server said autocommit with no open
    /// transaction, and the session is not on the read pool of the split (a retry is a new
    /// attempt on a primary connection, #11; InnoDB reads on a replica do not deadlock, so
    /// those statements are simply not retried).
    fn retry_armed(&self, grammar: Grammar, policy: &RetryPolicy) -> bool {
        let status = self.tx.status;
        let on_read_pool = self.ctx.rules().read_pool(Protocol::MySql).is_some_and(|r| **r == *self.pool.config.name);
        policy.maximum_attempts.get() > 1
            && !on_read_pool
            && matches!(grammar, Grammar::Query | Grammar::Execute)
            && status & SERVER_STATUS_AUTOCOMMIT != 0
            && status & SERVER_STATUS_IN_TRANS == 0
            && self.tx.cursor.is_none()
    }

    /// Counts one retry event of this pool.
    fn count_retry(&self, outcome: Outcome) {
        tracing::debug!(pool = %self.pool.config.name, outcome = outcome.as_str(), "statement retry");
        if let Some(o) = crate::metrics::RetryOutcome::from_name(outcome.as_str()) {
            self.pool.counters.retried(o);
        }
    }
}
