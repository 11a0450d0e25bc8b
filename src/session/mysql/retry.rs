//! The I/O of retrying a MySQL/MariaDB text command or prepared execute after a deadlock
//! (#11); the decisions are `engine::retry`'s. Only an ERR that is the first payload of its
//! response can be retried: nothing reached the client then, and InnoDB has rolled the
//! statement back, so after the backoff the command goes again on the same connection.
//! Otherwise (and after `KILL QUERY`, the query timeout or a drain) the ERR is relayed
//! unchanged. A statement that succeeded after a retry under `notify_client` gets a warning.

use super::exchange::Exchange;
use super::relay::{packet_at, Grammar, Outcome as Relayed};
use super::warning::Retried;
use super::Session;
use crate::config::Protocol;
use crate::protocol::mysql::encode_packets;
use crate::protocol::mysql::response::{SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_IN_TRANS};
use crate::rt;
use crate::session::backoff;
use crate::session::engine::retry::{self, Arming, Attempts, Failure, Outcome, ServerError, Verdict};
use crate::session::error::RelayError;

/// How the attempts at a retryable command ended.
struct Settled {
    /// The last response is not one to retry (not: retrying stopped short on the last deadlock).
    settled: bool,
    /// The last error retried, kept for the client's warning.
    retried: Option<ServerError>,
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
        let status = self.tx.status;
        let facts = Arming {
            protocol: Protocol::MySql,
            in_transaction: status & SERVER_STATUS_IN_TRANS != 0 || self.tx.cursor.is_some(),
            autocommit: status & SERVER_STATUS_AUTOCOMMIT != 0,
            on_read_pool: self.seat.ctx.is_read_pool(Protocol::MySql, &self.seat.pool.config.name),
            movable: false,
            relayed: false,
            size: self.link.out.len(),
        };
        let resendable = || retryable && matches!(grammar, Grammar::Query | Grammar::Execute);
        let rules = std::mem::take(&mut self.retry.rule);
        let Ok(policy) = retry::arm(&facts, rules, self.seat.pool.config.retry, resendable) else {
            self.flush_backend().await?;
            return self.relay_response(grammar).await;
        };
        let mut attempts = Attempts::new(policy, rt::now());
        let mut ex = self.exchange(grammar);
        let Settled { settled, retried } = self.attempt(&ex, &mut attempts).await?;
        let notify = retried.filter(|_| settled && policy.notify_client);
        let retried = notify.and_then(|err| Retried::new(err, attempts.made(), policy.maximum_attempts.get()));
        self.retry.notice.bump = retried.is_some();
        self.retry.notice.bumped = false;
        let relayed = self.relay_exchange(&mut ex).await;
        self.retry.notice.bump = false;
        let relayed = relayed?;
        if let Some(outcome) = attempts.settled().filter(|_| settled) {
            backoff::count(&self.seat.pool, outcome);
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
        let interrupt = self.seat.cancel.slot.watch();
        self.flush_backend().await?;
        let mut retried = None;
        loop {
            self.next_backend_packet().await?;
            let Some((failure, wire_len)) = self.first_failure(ex)? else {
                return Ok(Settled { settled: true, retried });
            };
            let stopped = match attempts.after_error(&failure, rt::now(), rand::random::<f64>()) {
                Verdict::RetryAfter(wait) => {
                    // Nothing runs for the session while it waits: a cancel now is for the wait alone.
                    self.seat.cancel.slot.set_running(None);
                    backoff::wait(wait, &interrupt, &self.seat.ctx.drain).await.err()
                }
                Verdict::GaveUp(why) => Some(why),
                Verdict::Reached | Verdict::NotRetryable => return Ok(Settled { settled: true, retried }),
            };
            if let Some(why) = stopped {
                // The last deadlock is relayed.
                backoff::count(&self.seat.pool, why);
                return Ok(Settled { settled: false, retried });
            }
            backoff::count(&self.seat.pool, Outcome::Retried);
            retried = Some(failure.error);
            self.link.pos += wire_len;
            self.compact();
            self.link.out.clear();
            self.link.out.extend_from_slice(&resend);
            self.link.seq = bseq;
            self.flush_backend().await?;
        }
    }

    /// When the first packet of the response (unread) is an ERR: the failure and its wire length.
    fn first_failure(&self, ex: &Exchange) -> Result<Option<(Failure, usize)>, RelayError> {
        let conn = self.seat.conn.as_ref().ok_or_else(super::relay::no_backend)?;
        let first = packet_at(&conn.rbuf, self.link.pos)?;
        Ok(ex.failure(&first.packet).map(|f| (f, first.wire.len())))
    }
}
