//! A backend connection that broke under a session: what its client is told (whether the
//! session lives on is [`release::after_loss`]'s to say). A session that ends with its
//! connection relays the server's own FATAL when the server sent one before closing (`57P01`
//! after `pg_terminate_backend`, #36), so the client's driver raises what it raises on a direct
//! connection; otherwise the router words the loss itself (`08006`), naming the cause.
//!
//! [`release::after_loss`]: crate::session::engine::release::after_loss

use super::{End, Session};
use crate::session::engine::release::BeginLosses;
use crate::session::error::RelayError;
use crate::session::loss;

/// A lone `BEGIN` outside a transaction, which may go again on a new connection when its own
/// is lost before any of its answer reached the client (#40): whatever it started on the lost
/// connection ended with it, so nothing ran. A primary stopping for a switchover or failover
/// cuts such a BEGIN off, and the client, which had no transaction open, is owed none of that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LoneBegin {
    /// Not such a statement.
    Off,
    /// Sent; the client's buffer held `out_mark` bytes before its answer; `losses` so far.
    Armed { out_mark: u32, losses: BeginLosses },
    /// Its connection was lost unanswered: send it again.
    Lost(BeginLosses),
}

impl Session {
    /// Runs a lone BEGIN (see [`LoneBegin`]): on a new connection again while its connection
    /// is lost before it was answered, as [`BeginLosses`] allows; the new checkout waits for a
    /// writable primary as any checkout does (`failover_wait`).
    pub(super) async fn on_lone_begin(&mut self, raw: &[u8]) -> Result<(), End> {
        let mut losses = BeginLosses::default();
        loop {
            self.progress.begin = match u32::try_from(self.io.out.len()) {
                Ok(out_mark) => LoneBegin::Armed { out_mark, losses },
                Err(_) => LoneBegin::Off,
            };
            let ran = self.on_simple(raw).await;
            match std::mem::replace(&mut self.progress.begin, LoneBegin::Off) {
                LoneBegin::Lost(so_far) => losses = so_far,
                LoneBegin::Off | LoneBegin::Armed { .. } => return ran,
            }
        }
    }

    /// The backend connection broke ([`loss::backend_lost`]), unless it cut off a lone BEGIN
    /// that goes again (see `on_lone_begin`).
    pub(super) async fn backend_lost(&mut self, cause: RelayError) -> Result<(), End> {
        if let LoneBegin::Armed { out_mark, mut losses } = self.progress.begin {
            let unanswered = self.io.out.len() == out_mark as usize;
            if loss::lone_begin_lost(self, &mut losses, &cause, unanswered) {
                self.progress.begin = LoneBegin::Lost(losses);
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
