//! A backend connection that broke under a session: what its client is told (whether the
//! session lives on is [`release::after_loss`]'s to say). A session that ends with its
//! connection relays the server's own FATAL when the server sent one before closing (`57P01`
//! after `pg_terminate_backend`, #36), so the client's driver raises what it raises on a direct
//! connection; otherwise the router words the loss itself (`08006`), naming the cause.

use super::{End, Session};
use crate::error::ErrorCode;
use crate::protocol::pg::{backend, sqlstate, TransactionStatus};
use crate::rt;
use crate::session::client_error::PgClientError;
use crate::session::engine::release::{self, LossFacts};
use crate::session::error::RelayError;
use crate::session::give_back::close;

/// How many times a lone BEGIN is sent before its lost connection is the client's error.
const BEGIN_ATTEMPTS: u8 = 3;

/// A lone `BEGIN` outside a transaction, which may go again on a new connection when its own
/// is lost before any of its answer reached the client (#40): whatever it started on the lost
/// connection ended with it, so nothing ran. A primary stopping for a switchover or failover
/// cuts such a BEGIN off, and the client, which had no transaction open, is owed none of that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LoneBegin {
    /// Not such a statement, or the last attempt.
    Off,
    /// Sent; the client's buffer held `out_mark` bytes before its answer.
    Armed { out_mark: u32 },
    /// Its connection was lost unanswered: send it again.
    Lost,
}

impl Session {
    /// Runs a lone BEGIN (see [`LoneBegin`]): on a new connection again, up to
    /// [`BEGIN_ATTEMPTS`] times, when its connection is lost before it was answered; the new
    /// checkout waits for a writable primary as any checkout does (`failover_wait`).
    pub(super) async fn on_lone_begin(&mut self, raw: &[u8]) -> Result<(), End> {
        for attempt in 1..=BEGIN_ATTEMPTS {
            self.progress.begin = match u32::try_from(self.io.out.len()) {
                Ok(out_mark) if attempt < BEGIN_ATTEMPTS => LoneBegin::Armed { out_mark },
                _ => LoneBegin::Off,
            };
            let ran = self.on_simple(raw).await;
            let lost = std::mem::replace(&mut self.progress.begin, LoneBegin::Off) == LoneBegin::Lost;
            if !lost {
                return ran;
            }
            tracing::debug!(attempt, "a lone BEGIN lost its connection unanswered; it goes again");
        }
        Ok(())
    }

    /// The backend connection broke: tell the client, drop the connection, stay alive — unless
    /// [`release::after_loss`] ends the session for what died with the connection (an open
    /// transaction, pinned state, a session-mode client's own server session); it then ends
    /// with a FATAL error as a direct connection would. `cause` is what the relay saw; it is
    /// counted, never worded (the client hears what it always heard).
    pub(super) async fn backend_lost(&mut self, cause: RelayError) -> Result<(), End> {
        if let LoneBegin::Armed { out_mark } = self.progress.begin {
            if release::resends_lone_begin(&self.loss_facts(), self.io.out.len() == out_mark as usize) {
                // It goes again (see `on_lone_begin`).
                self.drop_lost_backend(&cause);
                self.progress.begin = LoneBegin::Lost;
                return Ok(());
            }
        }
        let after = release::after_loss(&self.loss_facts());
        let (why, said) = self.drop_lost_backend(&cause);
        self.progress.tx = TransactionStatus::Idle;
        self.state.rollback();
        if let Some(gone) = after {
            let lost = gone.wording();
            tracing::warn!("backend lost{why}{lost}");
            self.tell_fatal(said, &format!("the backend connection was lost{why}{lost}"));
            if self.io.flush().await.is_ok() {
                // The client may have sent more already: closing on it would reset the
                // connection and could destroy the error before the client read it.
                rt::linger_close(&mut self.io.stream, rt::now() + super::super::FATAL_LINGER).await;
            }
            return Err(End::Fatal);
        }
        PgClientError::new(
            sqlstate::CONNECTION_FAILURE,
            format!("the backend connection was lost{why}; the statement may not have completed"),
        )
        .encode(&mut self.io.out);
        backend::encode_ready_for_query(TransactionStatus::Idle, &mut self.io.out);
        self.io.flush().await
    }

    /// The held backend went away while the client was idle. When [`release::after_loss`] says
    /// the session cannot go on without what it held, the client is told and closed, as
    /// PostgreSQL itself would (`Some`). Otherwise (a pooled connection held between
    /// statements) the connection is dropped and the session goes on: its next statement
    /// takes a new one.
    pub(super) fn lost_while_idle(&mut self, cause: RelayError) -> Option<End> {
        let after = release::after_loss(&self.loss_facts());
        let (why, said) = self.drop_lost_backend(&cause);
        if after.is_none() {
            tracing::debug!("an idle backend connection of pool {} went away", self.seat.pool.name());
            return None;
        }
        self.tell_fatal(said, &format!("the backend connection was lost{why}"));
        Some(End::Fatal)
    }

    /// What the session loses with its backend connection, judged on its state before.
    fn loss_facts(&self) -> LossFacts {
        LossFacts {
            mode: self.seat.pool.config.mode,
            home_pool: **self.seat.pool.name() == *self.identity.home,
            in_transaction: self.progress.tx != TransactionStatus::Idle,
            pin: self.state.pin(),
            // An ErrorResponse ends any response: the client reads on to ReadyForQuery.
            out_of_step: false,
        }
    }

    /// Gives the broken connection up and forgets what was in flight on it; counts the loss
    /// under the server's FATAL if it sent one (the relay then only saw the close that followed
    /// it), else under `seen`; returns the cause as the router words it (" (…)", or empty) and
    /// the server's FATAL.
    fn drop_lost_backend(&mut self, seen: &RelayError) -> (String, Option<Vec<u8>>) {
        close(&self.seat.pool, self.seat.conn.take());
        self.ex.lost();
        self.seat.cancel.slot.set_running(None);
        let gone = self.ex.forget_flight();
        self.seat.ctx.counters.relay_failed(gone.as_ref().map_or(seen, |g| &g.cause).code()); // metrics
        let Some(gone) = gone else { return (String::new(), None) };
        let why = gone.cause.cause().map(|m| format!(" ({m})")).unwrap_or_default();
        (why, gone.said)
    }

    /// Queues the FATAL a closing session ends with: the server's own when it sent one.
    fn tell_fatal(&mut self, said: Option<Vec<u8>>, router_text: &str) {
        match said {
            Some(frame) => self.io.out.extend_from_slice(&frame),
            None => PgClientError::new(sqlstate::CONNECTION_FAILURE, router_text).encode_fatal(&mut self.io.out),
        }
    }
}
