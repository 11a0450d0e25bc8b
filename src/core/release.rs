//! #36: letting go of a database a client is about to drop, rename or copy. PostgreSQL refuses
//! `DROP DATABASE x` (and `ALTER DATABASE x RENAME`, `CREATE DATABASE .. TEMPLATE x`) while any
//! other connection is on `x`, and the router's idle pool connections and health probes are
//! such connections. Each core closes its idle ones; the core running the prober moves its
//! probes off `x` and answers once none is left on it, or at the deadline.

use std::rc::Rc;
use std::time::{Duration, Instant};

use futures_channel::mpsc::UnboundedSender;

use crate::id::CoreId;
use crate::pool::health::Prober;
use crate::rt;
use crate::session::CoreContext;

/// How often a core waiting for an in-flight probe looks again.
const POLL: Duration = Duration::from_millis(5);

/// Handles [`crate::control::msg::CoreCommand::ReleaseDatabase`] on this core.
pub(super) fn release(
    ctx: &Rc<CoreContext>,
    prober: Option<&Rc<Prober>>,
    database: String,
    deadline: Instant,
    reply: UnboundedSender<CoreId>,
) {
    let closed = ctx.close_idle_on_database(&database);
    tracing::debug!(core = ctx.core.0, database, closed, "closed idle connections to a database a client needs free");
    let core = ctx.core;
    let Some(prober) = prober.cloned() else {
        let _ = reply.unbounded_send(core);
        return;
    };
    prober.release(&database);
    rt::spawn_guarded(
        ctx.queues.background,
        async move {
            while prober.holds(&database) && rt::now() < deadline {
                rt::sleep(POLL).await;
            }
            let _ = reply.unbounded_send(core);
        },
        |msg| tracing::error!(panic = %msg, "releasing a database panicked"),
    );
}
