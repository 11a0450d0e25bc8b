//! This core's side of PAUSE, RESUME and RECONNECT: close the gate of the chosen pools, wait (on the
//! background queue, never blocking the core) until their lent connections come back or the
//! deadline passes, give the idle connections back to the servers, and report.

use std::rc::Rc;
use std::time::{Duration, Instant};

use crossbeam_channel::Sender;

use crate::control::msg::{CoreId, PauseReport};
use crate::pool::CorePool;
use crate::rt;
use crate::session::CoreContext;

/// How often a pausing core looks whether the transactions in flight finished.
const PAUSE_POLL: Duration = Duration::from_millis(5);

fn chosen(ctx: &CoreContext, pool: Option<&str>) -> Vec<Rc<CorePool>> {
    ctx.pools().iter().filter(|p| pool.is_none_or(|name| p.config.name == name)).cloned().collect()
}

/// Pauses the chosen pools now; reports on `reply` once they are idle or at `deadline`.
pub(super) fn pause(ctx: &Rc<CoreContext>, pool: Option<&str>, deadline: Instant, reply: Sender<PauseReport>) {
    let pools = chosen(ctx, pool);
    for p in &pools {
        p.gate().pause();
    }
    let core = ctx.core;
    rt::spawn_guarded(
        ctx.queues.background,
        async move {
            let in_use = wait_idle(&pools, deadline).await;
            for p in &pools {
                p.close_idle();
            }
            let _ = reply.send(PauseReport { core, in_use });
        },
        |msg| tracing::error!(panic = %msg, "pause task panicked"),
    );
}

async fn wait_idle(pools: &[Rc<CorePool>], deadline: Instant) -> u64 {
    loop {
        let lent: u64 = pools.iter().map(|p| p.lent()).sum();
        if lent == 0 || rt::now() >= deadline {
            return lent;
        }
        rt::sleep(PAUSE_POLL).await;
    }
}

/// RECONNECT of the chosen pools: idle server connections close now, lent ones at checkin.
pub(super) fn reconnect(ctx: &CoreContext, pool: Option<&str>, reply: Sender<CoreId>) {
    for p in chosen(ctx, pool) {
        p.gate().reconnect();
        p.close_idle();
    }
    let _ = reply.send(ctx.core);
}

/// KILL of `pool`: its sessions end, new statements wait for RESUME, idle servers close.
pub(super) fn kill(ctx: &CoreContext, pool: &str, reply: Sender<CoreId>) {
    for p in chosen(ctx, Some(pool)) {
        p.gate().kill();
        p.close_idle();
    }
    let _ = reply.send(ctx.core);
}

/// Resumes the chosen pools and acknowledges.
pub(super) fn resume(ctx: &CoreContext, pool: Option<&str>, reply: Sender<CoreId>) {
    for p in chosen(ctx, pool) {
        p.gate().resume();
    }
    let _ = reply.send(ctx.core);
}
