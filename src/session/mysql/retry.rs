//! Opt-in retry of a MySQL/MariaDB statement that failed with a deadlock (1213, or SQLSTATE
//! `40001`) (issue #11; classifier and backoff in `session::retry`). A lock-wait timeout
//! (1205) is never retried.
//!
//! Only a text command (`COM_QUERY`) sent in autocommit mode outside a transaction is armed,
//! and only an ERR that is the first payload of its response qualifies: nothing of the
//! response has reached the client then. InnoDB has already rolled the statement's implicit
//! transaction back, so after the backoff the same command goes again on the same connection.
//! Otherwise, and when attempts or the deadline run out, the ERR is relayed unchanged.

use super::relay::{Grammar, Outcome as Relayed};
use super::Session;
use crate::protocol::mysql::framer::HEADER_LEN;
use crate::protocol::mysql::response::{SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_IN_TRANS};
use crate::rt;
use crate::session::retry::{mysql_retryable, Attempts, Outcome};

impl Session {
    /// Sends a client command and relays its response, retrying it after a deadlock when its
    /// pool says so. `Err` means the backend was lost.
    pub(super) async fn send_and_relay(&mut self, payload: &[u8], grammar: Grammar) -> Result<Relayed, ()> {
        self.send_command(payload).await?;
        let mut attempts = self.retry_armed(grammar).then(|| Attempts::new(self.pool.config.retry, rt::now()));
        while let Some(a) = attempts.as_mut() {
            // Peek at the first payload without consuming it: `relay_response` reads it again.
            let (_, plen) = self.next_backend_packet().await?;
            let start = self.bpos + HEADER_LEN;
            let first = self.backend.as_ref().and_then(|c| c.rbuf.get(start..start + plen)).unwrap_or_default();
            if !mysql_retryable(first) {
                break;
            }
            let wait = match a.next(rt::now(), rand::random::<f64>()) {
                Ok(wait) => wait,
                Err(why) => {
                    self.count_retry(why);
                    break;
                }
            };
            if !self.back_off(wait).await {
                self.count_retry(Outcome::Shutdown);
                break;
            }
            self.count_retry(Outcome::Retried);
            self.bpos += HEADER_LEN + plen;
            self.compact();
            self.send_command(payload).await?;
        }
        let relayed = self.relay_response(grammar, true).await?;
        if attempts.is_some_and(|a| a.made() > 1) {
            self.count_retry(Outcome::Settled);
        }
        Ok(relayed)
    }

    /// Whether a command of `grammar` may be retried now: the pool retries, it is text SQL,
    /// and the server said autocommit with no open transaction.
    fn retry_armed(&self, grammar: Grammar) -> bool {
        let status = self.tx.status;
        self.pool.config.retry.maximum_attempts.get() > 1
            && grammar == Grammar::Query
            && status & SERVER_STATUS_AUTOCOMMIT != 0
            && status & SERVER_STATUS_IN_TRANS == 0
            && self.tx.cursor.is_none()
    }

    /// Sleeps `wait`; `false` when the router started draining meanwhile.
    async fn back_off(&self, wait: std::time::Duration) -> bool {
        let drain = self.ctx.drain.clone();
        rt::race(
            async {
                rt::sleep(wait).await;
                true
            },
            async {
                drain.wait().await;
                false
            },
        )
        .await
    }

    /// Counts one retry event of this pool.
    fn count_retry(&self, outcome: Outcome) {
        tracing::debug!(pool = %self.pool.config.name, outcome = outcome.as_str(), "statement retry");
        if let Some(o) = crate::metrics::RetryOutcome::from_name(outcome.as_str()) {
            self.pool.counters.retried(o);
        }
    }
}
