//! What an idle PostgreSQL session gives back (#39): the exchange, the bridge's state, the
//! token statements and the backend connection's slot are lent to the session while it works
//! (`session::lend`) and parked when it waits for its client with nothing in them, so an idle
//! session's task does not carry them.

use super::bridged::Bridge;
use super::exchange::Exchange;
use super::token::TokenStatements;
use super::Session;
use crate::session::lend::lendable;

lendable!(Exchange, Exchange::is_fresh);
lendable!(TokenStatements, TokenStatements::is_empty);
lendable!(Bridge, Bridge::is_empty);

/// Parks what the session holds nothing in, before it waits idle for its client; the
/// exchange's queue goes to the core's spares when it is empty.
pub(super) fn park(s: &mut Session) {
    if let Some(buf) = s.ex.held_mut().and_then(Exchange::idle_buffer) {
        crate::rt::recycle(buf);
    }
    s.ex.park();
    s.bridge.park();
    s.progress.tokens.park();
}
