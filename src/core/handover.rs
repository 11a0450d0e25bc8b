//! A core's part in a binary upgrade (#40). In the old process: duplicate the listening sockets
//! for the new binary, then hand the sessions over (`session::hand_over`) and stop like a drain.
//! In the new process: accept on the sockets the old one handed over, issue cancel keys above
//! every key its clients hold, and adopt the sessions it sends.

use std::rc::{Rc, Weak};
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::Sender;

use crate::control::msg::{CoreListeners, HandOver, Moving, MovingClient};
use crate::rt::Listener;
use crate::session::{self, ClientSlots, CoreContext, HandedSession};

/// Cancel-key sequence numbers a core reserves when it hands over, for the sessions still
/// logging in (each takes its key once logged in) and the accepts still completing: the new
/// binary issues keys above them.
const SEQ_RESERVE: u32 = 4096;

/// Answers a hand-over: the listeners' duplicates and the key sequence go to the hand-over
/// thread, then the sessions follow them through `session::hand_over`. Returns the sender the
/// core says [`Moving::Stopped`] on once it stops.
pub(super) fn start(ctx: &Rc<CoreContext>, listeners: &[(usize, Weak<Listener>)], order: HandOver) -> Sender<Moving> {
    let mut dups = Vec::with_capacity(listeners.len());
    for (index, listener) in listeners {
        let Some(listener) = listener.upgrade() else { continue };
        match listener.dup_fd() {
            Ok(fd) => dups.push((*index, fd)),
            Err(e) => tracing::warn!(core = ctx.core.0, listener = index, error = %e, "cannot duplicate a listener"),
        }
    }
    let active = u32::try_from(ctx.counters.sessions_active()).unwrap_or(u32::MAX);
    let next_seq = ctx.next_session_seq().saturating_add(active).saturating_add(SEQ_RESERVE);
    let _ = order.reply.send(CoreListeners { core: ctx.core, next_seq, listeners: dups });
    let sink = order.sink.clone();
    session::hand_over(
        ctx,
        Box::new(move |h: HandedSession| {
            let moving = MovingClient {
                protocol: h.protocol,
                listener: h.listener,
                key: h.key,
                state: h.state,
                client: h.client,
                backend: h.backend,
            };
            // The hand-over thread outlives the cores; if it is gone the client closes here.
            let _ = sink.send(Moving::Client(moving));
        }),
    );
    order.sink
}

/// Serves a client the former process handed over, on this core.
pub(super) fn adopt(ctx: &Rc<CoreContext>, client: MovingClient, clients: &Arc<ClientSlots>) {
    let slot = clients.try_admit(client.listener);
    let handed = HandedSession {
        protocol: client.protocol,
        listener: client.listener,
        key: client.key,
        state: client.state,
        client: client.client,
        backend: client.backend,
    };
    session::adopt(ctx, handed, slot);
}

/// Tells the hand-over thread this core is done, when it was handing over.
pub(super) fn stopped(ctx: &CoreContext, moving: Option<Sender<Moving>>) {
    if let Some(sink) = moving {
        let _ = sink.send(Moving::Stopped(ctx.core));
    }
}

/// When a core handing over stops: the sooner of the hand-over's deadline and a drain's.
pub(super) fn deadline(current: Option<Instant>, order: Instant) -> Instant {
    current.map_or(order, |d| d.min(order))
}
