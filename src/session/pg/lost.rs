//! A backend connection that broke under a session: what its client is told (whether the
//! session lives on is [`release::after_loss`]'s to say). A session that ends with its
//! connection relays the server's own FATAL when the server sent one before closing (`57P01`
//! after `pg_terminate_backend`, #36), so the client's driver raises what it raises on a direct
//! connection; otherwise the router words the loss itself (`08006`), naming the cause.

use super::{End, Session};
use crate::session::engine::release::{self, BEGIN_ATTEMPTS};
use crate::session::error::RelayError;
use crate::session::loss;
use crate::session::placement::Placed;

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

    /// The backend connection broke ([`loss::backend_lost`]), unless it cut off a lone BEGIN
    /// that goes again (see `on_lone_begin`).
    pub(super) async fn backend_lost(&mut self, cause: RelayError) -> Result<(), End> {
        if let LoneBegin::Armed { out_mark } = self.progress.begin {
            if release::resends_lone_begin(&self.loss_facts(), self.io.out.len() == out_mark as usize) {
                loss::drop_lost(self, &cause);
                self.progress.begin = LoneBegin::Lost;
                return Ok(());
            }
        }
        loss::backend_lost(self, cause).await
    }

    /// The held backend went away while the client was idle ([`loss::lost_while_idle`]).
    pub(super) fn lost_while_idle(&mut self, cause: RelayError) -> Option<End> {
        loss::lost_while_idle(self, cause)
    }
}
