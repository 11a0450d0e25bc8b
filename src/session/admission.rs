//! Per-listener admission: how many client connections each listener holds, process-wide,
//! against its `max_client_connections`; and what its TLS settings demand of a client, for
//! both wires to word.
//!
//! Like the pools' connection budgets this is one atomic per listener shared by every core:
//! the cap is for the whole process while sessions stay on the core that accepted them, and
//! only accepting and closing a connection touch it, never a statement. Listeners (and their
//! caps) change only on restart, so the table is built once at start.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::config::{ClientTls, Config, Listener, TlsServer};
use crate::rt::Accepted;
use crate::session::CoreContext;

/// The server configuration new handshakes on `listener` use: the current snapshot's, so a
/// reloaded certificate serves the next handshake (#38). `None` when it terminates no TLS.
pub(super) fn server_tls(ctx: &CoreContext, listener: usize) -> Option<TlsServer> {
    ctx.config().listeners.get(listener).and_then(|l| l.tls.server.clone())
}

/// Why a listener's TLS settings (#38) turn a client away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TlsRefusal {
    /// `tls = "require"`, and the connection is not encrypted.
    Unencrypted,
    /// `tls_client_cert_user`, and no client certificate has the user as its CN or a DNS SAN.
    NoCertificate,
}

/// What `listener`'s TLS settings say of a client logging in as `user` over `tls` (`None`:
/// unencrypted).
pub(super) fn tls_refusal(config: &Config, listener: usize, tls: Option<&Accepted>, user: &str) -> Option<TlsRefusal> {
    let settings = &config.listeners.get(listener)?.tls;
    if settings.mode == ClientTls::Require && tls.is_none() {
        return Some(TlsRefusal::Unencrypted);
    }
    let certificate = tls.and_then(|t| t.client_certificate.as_ref());
    if settings.client_cert_user && !certificate.is_some_and(|c| crate::auth::certificate::names_user(c, user)) {
        tracing::info!(user, "login refused: no client certificate naming the user");
        return Some(TlsRefusal::NoCertificate);
    }
    None
}

/// The open-connection count and cap of every listener, in config order.
#[derive(Debug)]
pub struct ClientSlots {
    listeners: Vec<Slots>,
}

#[derive(Debug)]
struct Slots {
    /// `None`: no cap.
    max: Option<u32>,
    used: AtomicU32,
}

impl ClientSlots {
    /// The table for `listeners` (config order), every count at zero.
    pub fn new(listeners: &[Listener]) -> Arc<Self> {
        let listeners = listeners
            .iter()
            .map(|l| Slots { max: l.max_client_connections.map(|n| n.get()), used: AtomicU32::new(0) })
            .collect();
        Arc::new(Self { listeners })
    }

    /// Takes a slot of listener `listener` if it has one free; the slot is given back when the
    /// returned guard drops. `None` means the client must be turned away.
    pub fn try_admit(self: &Arc<Self>, listener: usize) -> Option<ClientSlot> {
        let slots = self.listeners.get(listener)?;
        let taken = match slots.max {
            None => {
                slots.used.fetch_add(1, Ordering::AcqRel);
                true
            }
            Some(max) => {
                slots.used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| (u < max).then_some(u + 1)).is_ok()
            }
        };
        taken.then(|| ClientSlot { table: self.clone(), listener })
    }

    /// Connections listener `listener` holds now, process-wide.
    pub fn used(&self, listener: usize) -> u32 {
        self.listeners.get(listener).map_or(0, |s| s.used.load(Ordering::Acquire))
    }
}

/// One admitted client connection; frees its slot on drop (however the session ends).
#[derive(Debug)]
pub struct ClientSlot {
    table: Arc<ClientSlots>,
    listener: usize,
}

impl Drop for ClientSlot {
    fn drop(&mut self) {
        if let Some(s) = self.table.listeners.get(self.listener) {
            let _ = s.used.fetch_update(Ordering::AcqRel, Ordering::Acquire, |u| u.checked_sub(1));
        }
    }
}

#[cfg(test)]
mod tests;
