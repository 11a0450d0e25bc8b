//! Sessions moving to a new binary (#40): while the router hands over, an idle session gives its
//! client connection and what it knows of the client to the hand-over sink instead of saying
//! goodbye; the new process adopts each one as a session that is already logged in.
//!
//! The state is opaque outside the session: the hand-over transport (`crate::handover`) carries
//! its bytes and the client's descriptor, and the format version it checks covers both.

use std::os::fd::OwnedFd;
use std::rc::Rc;

use crate::config::Protocol;
use crate::id::CancelKey;
use crate::session::{ClientSlot, CoreContext};

/// One client connection on its way to the new process.
pub struct HandedSession {
    /// The protocol its listener speaks.
    pub protocol: Protocol,
    /// Its listener, by config index.
    pub listener: usize,
    /// The cancel key (PostgreSQL BackendKeyData, MySQL connection id) the client was given: the
    /// new process keeps honouring it.
    pub key: CancelKey,
    /// What the session knows of its client, as the session encodes it.
    pub state: Vec<u8>,
    /// The client's socket.
    pub client: OwnedFd,
}

/// Where a core's sessions go while the router hands over: called once per session that moves.
pub type HandOverSink = Box<dyn Fn(HandedSession)>;

/// Starts handing this core's sessions over: every idle session moves to `sink` (a busy one
/// moves once its transaction ended); a session that cannot move (TLS, a session-mode backend
/// it owns) ends as a drain ends it. Sets the core's drain: new clients are no longer accepted
/// here.
pub fn hand_over(ctx: &Rc<CoreContext>, sink: HandOverSink) {
    ctx.set_hand_over(sink);
    ctx.drain.set();
}

/// Serves a client a former process handed over, as the session it was, on this core; without
/// a `slot` (the listener is full here) the client is closed.
pub fn adopt(ctx: &Rc<CoreContext>, handed: HandedSession, slot: Option<ClientSlot>) {
    let _ = (ctx, slot);
    tracing::warn!(key = ?handed.key, "adopting a handed-over session is not built yet; its client is closed");
    drop(handed.client);
}
