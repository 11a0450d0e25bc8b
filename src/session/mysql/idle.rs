//! What an idle MySQL session gives back (#39): a native session's cross-protocol part is lent
//! while it has anything on another protocol's pool (`session::lend`), and the backend
//! connection's box while it holds one; both are parked when it waits for its client.

use super::bridged::cross::Cross;
use super::Session;
use crate::session::lend::lendable;

lendable!(Cross, Cross::is_empty);

/// Parks what the session holds nothing in, before it waits idle for its client; the backend
/// link's output goes to the core's spares when it is empty.
pub(super) fn park(s: &mut Session) {
    if s.link.out.is_empty() {
        crate::rt::recycle(&mut s.link.out);
    }
    s.foreign.cross.park();
}
