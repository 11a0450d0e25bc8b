//! A backend connection lost under a session, one sequence for both wires (#37): what died with
//! it is judged on the session's state before it goes ([`release::after_loss`]), the connection
//! is closed and the loss counted, the session forgets what ran on it, and the client is told —
//! a session that goes on hears that its statement may not have completed, one that cannot ends
//! with its error as a direct connection would. Only the words and the bytes are the wire's,
//! behind [`Placed`](super::placement::Placed).

use super::driver::{End, Wire};
use super::engine::release::{self, Gone, Resends};
use super::error::RelayError;
use crate::error::ErrorCode;
use crate::rt;

/// What the wire learned of the loss from the lost connection itself.
#[derive(Default)]
pub(super) struct Farewell {
    /// What broke, when the wire saw more than the relay did (PostgreSQL: the server's FATAL
    /// before the close): counted instead of the relay's error.
    pub cause: Option<RelayError>,
    /// The server's own last words, to relay to a client whose session ends with them.
    pub said: Option<Vec<u8>>,
}

/// Closes the lost connection and forgets what ran on it; what died with it, if the session
/// cannot go on without it, and what the connection said last.
pub(super) fn drop_lost<S: Wire>(session: &mut S, seen: &RelayError) -> (Option<Gone>, Farewell) {
    let gone = release::after_loss(&session.loss_facts());
    let farewell = session.forget_lost();
    let seat = session.seat();
    seat.ctx.counters.relay_failed(farewell.cause.as_ref().unwrap_or(seen).code()); // metrics
    seat.cancel.slot.set_server(None);
    seat.close_conn();
    (gone, farewell)
}

/// The connection a resendable statement was sent on broke (#40): a lone BEGIN or one without
/// effect ([`release::without_effect`]), `unanswered`: none of its answer reached the client.
/// When it goes again ([`Resends::lost`]) the lost connection is dropped unseen; otherwise why
/// not, with the loss's facts, goes to the debug log, and the caller tells the client as for any
/// loss ([`backend_lost`]).
pub(super) fn resendable_lost<S: Wire>(
    session: &mut S,
    losses: &mut Resends,
    cause: &RelayError,
    unanswered: bool,
) -> bool {
    let facts = session.loss_facts();
    let idle_since = session.seat().conn.as_ref().map(|c| c.last_used);
    match losses.lost(&facts, unanswered, idle_since, rt::now()) {
        Ok(()) => {
            tracing::debug!(error = %cause, ?losses, "a statement without effect lost its connection unanswered; it goes again");
            drop_lost(session, cause);
            true
        }
        Err(kept) => {
            tracing::debug!(error = %cause, ?kept, ?facts, unanswered, ?losses, "a statement without effect lost its connection; it is not sent again");
            false
        }
    }
}

/// The backend connection broke mid-statement: the client is told, and the session goes on
/// unless [`release::after_loss`] ends it (an open transaction rolled back, pinned state, a
/// session-mode client's own server session, a client left mid-result). `cause` is counted,
/// never worded.
pub(super) async fn backend_lost<S: Wire>(session: &mut S, cause: RelayError) -> Result<(), End> {
    tracing::debug!(error = %cause, "backend connection lost");
    let (gone, farewell) = drop_lost(session, &cause);
    if let Some(g) = gone {
        tracing::warn!("backend lost{}", g.wording());
    }
    session.tell_lost(gone, farewell);
    let (io, _) = session.parts();
    match gone {
        Some(_) => Err(io.fatal().await),
        None => io.flush().await,
    }
}

/// The connection the session holds between statements went away while the client was idle
/// (a server restart, a KILL, the server's idle timeout). When nothing the client relies on
/// died with it, it is dropped unseen and the next statement takes a new one (`None`);
/// otherwise the client is told and the session ends once that is sent.
pub(super) fn lost_while_idle<S: Wire>(session: &mut S, cause: RelayError) -> Option<End> {
    let (gone, farewell) = drop_lost(session, &cause);
    if gone.is_none() {
        tracing::debug!("an idle backend connection of pool {} went away", session.seat().pool.name());
        return None;
    }
    session.tell_lost(gone, farewell);
    Some(End::Fatal)
}
