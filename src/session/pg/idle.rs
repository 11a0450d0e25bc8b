//! What an idle PostgreSQL session gives back (#39): the exchange, the bridge's state, the
//! token statements and the backend connection's slot are lent to the session while it works
//! (`session::lend`) and parked when it waits for its client with nothing in them, so an idle
//! session's task does not carry them.

use std::thread::LocalKey;

use super::bridged::Bridge;
use super::exchange::Exchange;
use super::token::TokenStatements;
use super::Session;
use crate::session::lend::{Lend, Shelf};

impl Lend for Exchange {
    fn is_fresh(&self) -> bool {
        Exchange::is_fresh(self)
    }

    fn shelf() -> &'static LocalKey<Shelf<Self>> {
        thread_local!(static SHELF: Shelf<Exchange> = Shelf::new());
        &SHELF
    }
}

impl Lend for TokenStatements {
    fn is_fresh(&self) -> bool {
        self.is_empty()
    }

    fn shelf() -> &'static LocalKey<Shelf<Self>> {
        thread_local!(static SHELF: Shelf<TokenStatements> = Shelf::new());
        &SHELF
    }
}

impl Lend for Bridge {
    fn is_fresh(&self) -> bool {
        self.is_empty()
    }

    fn shelf() -> &'static LocalKey<Shelf<Self>> {
        thread_local!(static SHELF: Shelf<Bridge> = Shelf::new());
        &SHELF
    }
}

/// Parks what the session holds nothing in, before it waits idle for its client.
pub(super) fn park(s: &mut Session) {
    s.ex.park();
    s.bridge.park();
    s.progress.tokens.park();
    s.seat.conn.park();
}
