//! Client sessions: one task per client connection, owned by the core that accepted it.
//!
//! `driver` is the one client loop both wires run (read a unit, hand it to the wire, end the
//! session wherever it waits); `pg` and `mysql` are the wires it drives, each implementing
//! `driver::Wire`; `placement` is the backend side both hold (`Seat`: pool, connection, cancel
//! handle, read-your-writes) and the pool moves written once over it; `loss` is the one
//! sequence of a backend connection lost under either wire; `engine` is the
//! protocol-neutral policy both use; `state` is the sans-IO session state
//! (settings to replay, pins); `client_error` is the one place errors become wire errors;
//! `cancel` tracks which statements a cancel may reach; `admission` caps client connections
//! per listener; `backoff` is the I/O of the opt-in retry of transient failures (issue #11; the
//! policy is `engine::retry`).
//! May use protocol, sql, routing, pool, metrics, config, rt and error; never control, admin or
//! crossbeam.

pub mod admission;
mod backoff;
pub mod cancel;
pub mod client_error;
mod commit_io;
mod context;
mod cross;
mod derive;
pub mod digest;
mod driver;
mod engine;
pub mod error;
mod give_back;
pub mod handover;
mod lend;
mod loss;
mod mysql;
mod names;
mod pg;
mod placement;
mod secret;
pub mod state;

use std::rc::Rc;
use std::time::Duration;

pub use admission::{ClientSlot, ClientSlots};
pub use context::{CoreContext, CoreLinks, KillReply};
pub use handover::{adopt, hand_over, AdoptError, HandOverSink, HandedSession};
/// The sans-IO exchanges and the types they are fed, public only for their fuzz targets
/// (`fuzz/fuzz_targets/{pg,mysql}_exchange.rs`).
pub use mysql::exchange as mysql_exchange;
/// The MySQL session's settling of a routing decision, for the dry-run (#19).
pub use mysql::settle::settle as settle_mysql;
pub use pg::exchange as pg_exchange;
pub use pg::flight::Replay;
pub use pg::prepared::{Expect, Stmt};

use crate::config::Protocol;
use crate::id::{KillRequest, KillTarget};
use crate::rt::{self, Stream};
use cancel::{Acted, CancelTarget, TargetKind};

/// How long a session that refused a client's message keeps reading (and discarding) what the
/// client still sends, so the error it was sent is not destroyed by a connection reset.
const FATAL_LINGER: Duration = Duration::from_secs(2);

/// Starts serving a freshly accepted client of listener `listener` on this core. Without a
/// `slot` (the listener's `max_client_connections` are in use) the client is told so in its
/// protocol (PostgreSQL `53300` after its startup packet, MySQL error 1040 instead of the
/// greeting) and closed.
pub fn spawn(ctx: &Rc<CoreContext>, stream: Stream, listener: usize, slot: Option<ClientSlot>) {
    let protocol = ctx.config().listeners.get(listener).map(|l| l.protocol);
    ctx.counters.session_opened();
    let Some(slot) = slot else {
        ctx.counters.client_refused(listener); // metrics
        let open = OpenSession(ctx.clone(), None);
        let ctx2 = ctx.clone();
        spawn_session(ctx, async move {
            let _open = open;
            match protocol {
                Some(Protocol::Postgres) => pg::refuse(ctx2, stream, listener).await,
                Some(Protocol::MySql) => mysql::refuse(stream).await,
                None => drop(stream),
            }
        });
        return;
    };
    ctx.counters.client_connected(listener); // metrics
    let open = OpenSession(ctx.clone(), Some((listener, slot)));
    // One task per wire, each sized by its own `serve`: in one task the larger (MySQL's) would
    // size every PostgreSQL session too, and the client's stream and slot, moved on at the
    // start, would stay in the task's every state (#39). The login, boxed, owns what it needs.
    let ctx2 = ctx.clone();
    match protocol {
        Some(Protocol::Postgres) => {
            let login = Box::pin(async move { pg::login(&ctx2, stream, listener).await });
            spawn_session(ctx, async move {
                driver::serve(login).await;
                drop(open); // not rebound: a local would be a second copy beside the capture
            });
        }
        Some(Protocol::MySql) => {
            let login = Box::pin(async move { mysql::login(&ctx2, stream, listener).await });
            spawn_session(ctx, async move {
                driver::serve(login).await;
                drop(open);
            });
        }
        None => drop((open, stream)),
    }
}

/// Runs a session's task on this core's latency queue; a panic closes only its connection.
fn spawn_session(ctx: &Rc<CoreContext>, fut: impl std::future::Future<Output = ()> + 'static) {
    let ctx2 = ctx.clone();
    rt::spawn_guarded(ctx.queues.latency, fut, move |msg| {
        ctx2.counters.session_panicked();
        tracing::error!(panic = %msg, "session panicked; its connection was closed");
    });
}

/// Decrements the active-session and client-connection gauges and frees the listener slot
/// however the session ends (also on panic). A refused client holds no slot.
struct OpenSession(Rc<CoreContext>, Option<(usize, ClientSlot)>);

impl Drop for OpenSession {
    fn drop(&mut self) {
        self.0.counters.session_closed();
        if let Some((listener, _slot)) = &self.1 {
            self.0.counters.client_disconnected(*listener); // metrics
        }
    }
}

/// Wires the core's cancel registry to the backends' cancel mechanisms.
///
/// MySQL statements are cancelled with `KILL QUERY <thread id>` on a fresh connection logged in
/// with the credentials of a pool that serves the backend.
pub fn install_cancel_delivery(ctx: &Rc<CoreContext>) {
    // Weak: the registry lives inside the context, so a strong reference would be a cycle.
    let weak = Rc::downgrade(ctx);
    ctx.cancels.set_deliver(Rc::new(move |target: CancelTarget, done: rt::Event| {
        let weak = weak.clone();
        rt::spawn_local(async move {
            let deadline = rt::now() + Duration::from_secs(5);
            let res = match target.kind {
                TargetKind::Pg { pid, secret } => deliver_pg(weak, target, pid, secret, deadline).await,
                TargetKind::MySql { thread_id } => deliver_mysql(weak, target, thread_id, deadline).await,
            };
            if let Err(e) = res {
                tracing::warn!(backend = %target.addr, error = %e, "cancel delivery failed");
            }
            done.set();
        });
    }));
}

/// Handles a cancel or KILL another core forwarded for a session this core may own: finds the
/// session (a MySQL server thread id is read on the servers of the killer's pool) and answers
/// on `reply` once done.
pub fn handle_kill(ctx: &CoreContext, req: KillRequest, reply: KillReply) {
    let key = match &req.target {
        KillTarget::Session(key) => Some(*key),
        KillTarget::Thread { id, pool } => {
            let pools = ctx.pools();
            let pool = pools.get(pool);
            ctx.cancels.thread_owner(*id, |addr| pool.is_some_and(|p| p.serves(addr)))
        }
    };
    let acted = key.map_or(Acted::Unknown, |key| ctx.cancels.act(key, req.connection));
    answer_kill(acted, reply);
}

/// Answers whoever asked for a cancel or KILL: at once, or once the cancel was delivered, so
/// that the asking client cannot go on before its cancel reached the backend.
pub(crate) fn answer_kill(acted: Acted, reply: KillReply) {
    match acted {
        Acted::Unknown => drop(reply.unbounded_send(false)),
        Acted::Done => drop(reply.unbounded_send(true)),
        Acted::Delivering(done) => rt::spawn_local(async move {
            let _ = rt::with_deadline(rt::now() + cancel::DELIVERY_TIMEOUT, done.wait()).await;
            let _ = reply.unbounded_send(true);
        }),
    }
}

/// A PostgreSQL cancel goes over TLS when the pool serving the backend says so (#38).
async fn deliver_pg(
    ctx: std::rc::Weak<CoreContext>,
    target: CancelTarget,
    pid: i32,
    secret: i32,
    deadline: std::time::Instant,
) -> Result<(), String> {
    let pools = ctx.upgrade().ok_or("core is shutting down")?.pools();
    let pool = pools.iter().find(|p| p.serves(target.addr)).cloned();
    let sent = match pool {
        Some(pool) => pool.deliver_pg_cancel(target.addr, pid, secret, deadline).await,
        None => crate::pool::deliver_pg_cancel(target.addr, pid, secret, deadline).await,
    };
    sent.map_err(|e| e.to_string())
}

async fn deliver_mysql(
    ctx: std::rc::Weak<CoreContext>,
    target: CancelTarget,
    thread_id: u32,
    deadline: std::time::Instant,
) -> Result<(), String> {
    let pools = ctx.upgrade().ok_or("core is shutting down")?.pools();
    let pool = pools
        .iter()
        .find(|p| p.serves(target.addr) && p.config.has_credentials())
        .cloned()
        .ok_or("no pool with credentials serves this backend")?;
    crate::pool::deliver_mysql_kill(&pool.config, None, target.addr, thread_id, deadline)
        .await
        .map_err(|e| e.to_string())
}
