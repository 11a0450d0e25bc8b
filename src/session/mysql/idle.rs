//! What an idle MySQL session gives back (#39): a native session's cross-protocol part is lent
//! while it has anything on another protocol's pool (`session::lend`), and the backend
//! connection's box while it holds one; both are parked when it waits for its client.

use super::bridged::cross::Cross;
use super::Session;
use crate::session::lend::lendable;

lendable!(Cross, Cross::is_empty);

/// Parks what the session holds nothing in, before it waits idle for its client.
pub(super) fn park(s: &mut Session) {
    s.foreign.cross.park();
    s.seat.conn.park();
}
