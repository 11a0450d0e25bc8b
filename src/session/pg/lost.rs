//! A backend connection that broke under a session: what its client is told (whether the
//! session lives on is [`release::after_loss`]'s to say). A session that ends with its
//! connection relays the server's own FATAL when the server sent one before closing (`57P01`
//! after `pg_terminate_backend`, #36), so the client's driver raises what it raises on a direct
//! connection; otherwise the router words the loss itself (`08006`), naming the cause.
//!
//! [`release::after_loss`]: crate::session::engine::release::after_loss

use super::{End, Session};
use crate::session::driver::OutMark;
use crate::session::engine::release::Resends;
use crate::session::error::RelayError;
use crate::session::loss;

/// A statement outside a transaction that may go again on a new connection when its own is lost
/// before any of its answer reached the client (#40): a lone `BEGIN`, or a read routing proved
/// without effect ([`release::without_effect`]). Whatever it started on the lost connection ended
/// with it, and running it again changes nothing. A primary stopping for a switchover or failover
/// cuts such a statement off, and the client, which had no transaction open, is owed none of that.
///
/// [`release::without_effect`]: crate::session::engine::release::without_effect
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Resend {
    /// Not such a statement.
    Off,
    /// Sent when the client's output stood at `mark`; `losses` so far.
    Armed { mark: OutMark, losses: Resends },
    /// Its connection was lost unanswered: send it again.
    Lost(Resends),
}

impl Session {
    /// Runs a resendable statement (see [`Resend`]): on a new connection again while its
    /// connection is lost before it was answered, as [`Resends`] allows; the new checkout waits
    /// for a writable primary as any checkout does (`failover_wait`).
    pub(super) async fn on_resendable(&mut self, raw: &[u8]) -> Result<(), End> {
        let mut losses = Resends::default();
        loop {
            self.progress.resend = Resend::Armed { mark: self.io.mark(), losses };
            let ran = self.on_simple(raw).await;
            match std::mem::replace(&mut self.progress.resend, Resend::Off) {
                Resend::Lost(so_far) => losses = so_far,
                Resend::Off | Resend::Armed { .. } => return ran,
            }
        }
    }

    /// The backend connection broke ([`loss::backend_lost`]), unless it cut off a lone BEGIN
    /// that goes again (see `on_resendable`).
    pub(super) async fn backend_lost(&mut self, cause: RelayError) -> Result<(), End> {
        if let Resend::Armed { mark, mut losses } = self.progress.resend {
            let unanswered = self.io.unanswered_since(mark);
            if loss::resendable_lost(self, &mut losses, &cause, unanswered) {
                self.progress.resend = Resend::Lost(losses);
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
