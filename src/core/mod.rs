//! Per-core assembly: binds this core's listeners (SO_REUSEPORT), accepts connections and hands
//! them to sessions, owns the core's only crossbeam receiver (drained with `try_recv` on the
//! background queue), applies snapshots (config, pools, rules) and acknowledges them, reports
//! counters and digests, and drains on request. In a binary upgrade (#40, `handover.rs`) it hands
//! its listeners and sessions to the new process, or accepts on the sockets and adopts the
//! sessions the old one handed over. Core 0 also loads the backends' function
//! catalogs after start and after each reload and hands them to the control plane, which sends
//! them to every core.
//!
//! Never blocks on a channel, never touches `admin`.

mod handover;
mod pause;
mod release;
mod upkeep;

use std::cell::Cell;
use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::{Receiver, Sender, TryRecvError};

use crate::control::msg::{ConsoleClient, CoreCommand, CoreEvent, CoreReport, Inherited, Snapshot};
use crate::id::{CoreId, RulesVersion};
use crate::metrics::{CacheOp, DigestSnapshot};
use crate::pool::health::Prober;
use crate::pool::{BudgetRegistry, CorePool, PoolSet};
use crate::routing::CacheStats;
use crate::rt::{self, CoreHandle, CoreQueues, Listener, RtError};
use crate::session::{self, ClientSlots, CoreContext, CoreLinks};

/// Everything a core needs to start.
pub struct CoreSetup {
    /// This core's id.
    pub id: CoreId,
    /// How many cores the process runs (for each core's share of `min_connections`).
    pub cores: usize,
    /// CPU to pin to, or `None` to let the OS schedule.
    pub cpu: Option<usize>,
    /// Commands from the control plane.
    pub inbox: Receiver<CoreCommand>,
    /// Events to the control plane.
    pub events: Sender<CoreEvent>,
    /// The snapshot to start with.
    pub snapshot: Arc<Snapshot>,
    /// Resolved listener addresses, in config order.
    pub listen: Vec<SocketAddr>,
    /// Process-wide connection budgets shared by every core's pools.
    pub budgets: BudgetRegistry,
    /// Process-wide client-connection counts per listener (`max_client_connections`).
    pub clients: Arc<ClientSlots>,
    /// Where to report the addresses actually bound (the first core, when ports are 0).
    pub bound: Option<Sender<io::Result<Vec<SocketAddr>>>>,
    /// The admin console thread's inbox.
    pub console: Sender<ConsoleClient>,
    /// What every session of the process holds for its client (#33).
    pub buffers: Arc<crate::metrics::ClientBudget>,
    /// What this core takes over from a former process (#40); empty otherwise.
    pub inherited: Inherited,
}

/// Starts the core on its own pinned executor thread.
pub fn spawn(setup: CoreSetup) -> Result<CoreHandle, RtError> {
    let name = format!("qp-core-{}", setup.id.0);
    rt::spawn_core(&name, setup.cpu, move |queues| run(setup, queues))
}

async fn run(setup: CoreSetup, queues: CoreQueues) {
    let CoreSetup {
        id,
        cores,
        inbox,
        events,
        snapshot,
        listen,
        budgets,
        clients,
        bound,
        console,
        buffers,
        inherited,
        ..
    } = setup;
    let listeners = match bind_all(&listen, inherited.listeners) {
        Ok(l) => l,
        Err(e) => {
            tracing::error!(core = id.0, error = %e, "cannot bind listeners");
            if let Some(b) = bound {
                let _ = b.send(Err(e));
            }
            let _ = events.send(CoreEvent::Stopped(id));
            return;
        }
    };
    if let Some(b) = bound {
        // The first socket of each listener (inherited ones may be several).
        let mut addrs = Vec::with_capacity(listen.len());
        for (index, l) in &listeners {
            if addrs.len() == *index {
                addrs.extend(l.local_addr().ok());
            }
        }
        let _ = b.send(Ok(addrs));
    }
    let pools = PoolSet::build(&snapshot.config, &budgets, None);
    let fwd = events.clone();
    let release = events.clone();
    let ctx = Rc::new(CoreContext::new(
        id,
        queues,
        snapshot.config.clone(),
        snapshot.rules.clone(),
        pools,
        CoreLinks {
            forward_cancel: Box::new(move |req, reply| {
                let _ = fwd.send(CoreEvent::ForwardCancel(req, reply));
            }),
            console: Box::new(move |stream, leftover, user, role| {
                // The console thread lives as long as the process; a failed send drops the client.
                let _ = console.send(ConsoleClient { stream, leftover, user, role });
            }),
            buffers,
            release_database: Box::new(move |database, deadline, reply| {
                let _ = release.send(CoreEvent::ReleaseDatabase { database, deadline, reply });
            }),
            cores,
            budgets: budgets.clone(),
        },
    ));
    session::install_cancel_delivery(&ctx);
    prewarm(&ctx, cores);
    if let Some(seq) = inherited.next_seq {
        ctx.continue_sessions_from(seq); // before the first accept: no key a moved client holds
    }
    // The accept loops own their listeners; the core keeps a look at them for a hand-over,
    // and does not stop while one still finishes (its last connection is not yet a session).
    let mut watched = Vec::with_capacity(listeners.len());
    let accepting = Rc::new(Cell::new(0usize));
    for (index, listener) in listeners {
        let listener = Rc::new(listener);
        watched.push((index, Rc::downgrade(&listener)));
        let task = accept_loop(ctx.clone(), listener, index, clients.clone(), Accepting::enter(&accepting));
        rt::spawn_guarded(queues.latency, task, |msg| {
            tracing::error!(panic = %msg, "accept loop panicked");
        });
    }
    // One prober for the process, on core 0: health lands in the shared table every core reads.
    let prober = (id.0 == 0).then(|| Prober::new(budgets.clone()));
    if let Some(prober) = &prober {
        // It ends with the drain: a task still pending when the core's loop returns keeps the
        // context (pools, idle server connections, the console thread's sender) alive for ever.
        let probe_ctx = ctx.clone();
        let drain = ctx.drain.clone();
        let probe = crate::pool::health::run(prober.clone(), move || probe_ctx.config());
        rt::spawn_guarded(queues.background, rt::race(probe, drain.wait()), |msg| {
            tracing::error!(panic = %msg, "health prober panicked; backend health is no longer updated");
        });
    }
    let mut version = snapshot.version;
    let _ = events.send(CoreEvent::Applied { core: id, version });
    load_catalogs(&ctx, &events);
    let mut drain_deadline: Option<Instant> = None;
    let mut handing_over = None;
    let mut upkeep = upkeep::Upkeep::start(rt::now());
    loop {
        let mut commanded = false;
        loop {
            let received = inbox.try_recv();
            commanded |= received.is_ok();
            match received {
                Ok(CoreCommand::ReleaseDatabase { database, deadline, reply }) => {
                    release::release(&ctx, prober.as_ref(), database, deadline, reply);
                }
                Ok(CoreCommand::HandOver(order)) => {
                    drain_deadline = Some(handover::deadline(drain_deadline, order.deadline));
                    handing_over = Some(handover::start(&ctx, &watched, order));
                }
                Ok(CoreCommand::Adopt(client)) => handover::adopt(&ctx, client, &clients),
                Ok(cmd) => handle(&ctx, cmd, &events, &budgets, cores, &mut version, &mut drain_deadline),
                Err(TryRecvError::Empty) => break,
                Err(TryRecvError::Disconnected) => {
                    drain_deadline.get_or_insert_with(rt::now);
                    ctx.drain.set();
                    break;
                }
            }
        }
        let now = rt::now();
        if commanded || upkeep.due(now) {
            let pools = ctx.pools();
            let next = pools.maintain(now, cores);
            if pools.iter().any(|p| p.is_on_demand()) {
                ctx.drop_unused_pools(); // #36: template pools nobody uses
            }
            upkeep.ran(now, next, drain_deadline.is_some());
        }
        if let Some(deadline) = drain_deadline {
            if (ctx.counters.sessions_active() == 0 && accepting.get() == 0) || now >= deadline {
                break;
            }
        }
        // A command wakes the core at once (its sender notifies).
        upkeep.wait().await;
    }
    tracing::info!(core = id.0, left = ctx.counters.sessions_active(), "core stopped");
    handover::stopped(&ctx, handing_over);
    let _ = events.send(CoreEvent::Stopped(id));
}

/// Opens this core's share of every pool's `min_connections` on the background queue. A pool
/// without an explicit `protocol` is warmed only when every listener speaks one protocol
/// (otherwise which kind of connection to open is unknown until a client arrives).
fn prewarm(ctx: &Rc<CoreContext>, cores: usize) {
    let config = ctx.config();
    let mut protocols = config.listeners.iter().map(|l| l.protocol);
    let first = protocols.next();
    let only = first.filter(|p| protocols.all(|q| q == *p));
    for pool in ctx.pools().iter() {
        let min = pool.config.limits.min_connections;
        let Some(protocol) = pool.config.protocol.or(only) else { continue };
        // A paused pool keeps no server connection (the backend may be repointed meanwhile).
        if pool.gate().is_paused() {
            continue;
        }
        let share = CorePool::min_share(min, cores, usize::from(ctx.core.0));
        if share == 0 {
            continue;
        }
        let pool = pool.clone();
        rt::spawn_guarded(
            ctx.queues.background,
            async move {
                if let Err(e) = pool.prewarm(protocol, share).await {
                    tracing::warn!(pool = %pool.config.name, error = %e, "could not open min_connections");
                }
            },
            |msg| tracing::error!(panic = %msg, "prewarm panicked"),
        );
    }
}

fn handle(
    ctx: &Rc<CoreContext>,
    cmd: CoreCommand,
    events: &Sender<CoreEvent>,
    budgets: &BudgetRegistry,
    cores: usize,
    version: &mut RulesVersion,
    drain_deadline: &mut Option<Instant>,
) {
    match cmd {
        CoreCommand::Apply(snap) => {
            // A new file means new pools and maybe other functions; a rule change through the
            // API keeps the configuration (the same `Arc`) and its pools.
            let reloaded = !ctx.serves(&snap.config);
            if reloaded {
                let pools = PoolSet::build(&snap.config, budgets, Some(&ctx.pools()));
                ctx.apply(snap.config.clone(), pools, snap.rules.clone());
                prewarm(ctx, cores);
            } else {
                ctx.set_rules(snap.rules.clone());
            }
            *version = snap.version;
            let _ = events.send(CoreEvent::Applied { core: ctx.core, version: snap.version });
            if reloaded {
                load_catalogs(ctx, events);
            }
        }
        CoreCommand::SetCatalogs(catalogs) => ctx.set_catalogs(catalogs),
        CoreCommand::Collect { reply, digests } => {
            let _ = reply.send(report(ctx, *version, digests));
        }
        CoreCommand::ResetDigests(reply) => {
            ctx.reset_digests();
            let _ = reply.send(ctx.core);
        }
        CoreCommand::Cancel(req, reply) => session::handle_kill(ctx, req, reply),
        CoreCommand::Pause { pool, deadline, reply } => pause::pause(ctx, pool.as_deref(), deadline, reply),
        CoreCommand::Resume { pool, reply } => pause::resume(ctx, pool.as_deref(), reply),
        CoreCommand::Reconnect { pool, reply } => pause::reconnect(ctx, pool.as_deref(), reply),
        CoreCommand::Kill { pool, reply } => pause::kill(ctx, &pool, reply),
        // Handled by the loop, which holds the prober.
        CoreCommand::ReleaseDatabase { reply, .. } => {
            let _ = reply.unbounded_send(ctx.core);
        }
        // Handled by the loop, which holds the listeners and the client slots.
        CoreCommand::HandOver(_) | CoreCommand::Adopt(_) => {}
        CoreCommand::Drain { deadline } => {
            *drain_deadline = Some(deadline);
            ctx.drain.set();
        }
    }
}

/// This core's counters, with its pools' figures (sorted by name for a stable exposition), the
/// router's plan-cache figures and, when asked, the digest table.
fn report(ctx: &CoreContext, version: RulesVersion, digests: bool) -> CoreReport {
    let config = ctx.config();
    let listeners: Vec<&str> = config.listeners.iter().map(|l| l.name.as_str()).collect();
    let mut pools: Vec<_> = ctx.pools().iter().map(|p| p.metrics_snapshot()).collect();
    pools.sort_by(|a, b| a.name.cmp(&b.name));
    let mut counters = ctx.counters.snapshot(&listeners, pools);
    counters.cache_ops_total = cache_ops(ctx.cache_stats());
    counters.client_buffer_bytes = ctx.client_budget().held();
    let digests = if digests { ctx.digests() } else { DigestSnapshot::default() };
    CoreReport { core: ctx.core, version, counters, digests }
}

/// The plan cache's counters by `CacheOp` index (`sqp_routing_cache_operations_total{op}`).
fn cache_ops(s: CacheStats) -> [u64; CacheOp::COUNT] {
    let mut ops = [0; CacheOp::COUNT];
    for (op, n) in [
        (CacheOp::Hit, s.hits),
        (CacheOp::Miss, s.misses),
        (CacheOp::Insert, s.inserts),
        (CacheOp::Evict, s.evictions),
        (CacheOp::Invalidate, s.invalidations),
    ] {
        if let Some(slot) = ops.get_mut(op.index()) {
            *slot = n;
        }
    }
    ops
}

/// On core 0 only: loads the function catalogs in the background and sends them to the control
/// plane (which sends them to every core, this one included).
fn load_catalogs(ctx: &Rc<CoreContext>, events: &Sender<CoreEvent>) {
    if ctx.core != CoreId(0) {
        return;
    }
    let (ctx, events) = (ctx.clone(), events.clone());
    rt::spawn_guarded(
        ctx.queues.background,
        async move {
            let catalogs = ctx.load_catalogs().await;
            let _ = events.send(CoreEvent::Catalogs(catalogs));
        },
        |msg| tracing::error!(panic = %msg, "loading function catalogs panicked"),
    );
}

/// This core's listeners, by config index: the inherited sockets, else one bound here with
/// SO_REUSEPORT.
fn bind_all(addrs: &[SocketAddr], mut inherited: Vec<Vec<OwnedFd>>) -> io::Result<Vec<(usize, Listener)>> {
    let mut out = Vec::with_capacity(addrs.len());
    for (index, addr) in addrs.iter().enumerate() {
        let fds = inherited.get_mut(index).map(std::mem::take).unwrap_or_default();
        if fds.is_empty() {
            let l = rt::bind_reuseport(*addr).map_err(|e| io::Error::new(e.kind(), format!("bind {addr}: {e}")))?;
            out.push((index, l));
        }
        for fd in fds {
            let l = Listener::from_fd(fd)
                .map_err(|e| io::Error::new(e.kind(), format!("listener {addr} handed over: {e}")))?;
            out.push((index, l));
        }
    }
    Ok(out)
}

/// Accepts on `listener` until the core drains, then takes an accept the kernel completed
/// meanwhile instead of losing its connection.
/// Counts an accept loop as running until dropped (see `run`).
struct Accepting(Rc<Cell<usize>>);

impl Accepting {
    fn enter(count: &Rc<Cell<usize>>) -> Accepting {
        count.set(count.get() + 1);
        Accepting(count.clone())
    }
}

impl Drop for Accepting {
    fn drop(&mut self) {
        self.0.set(self.0.get().saturating_sub(1));
    }
}

async fn accept_loop(
    ctx: Rc<CoreContext>,
    listener: Rc<Listener>,
    index: usize,
    clients: Arc<ClientSlots>,
    _running: Accepting,
) {
    loop {
        let accepted = rt::race(async { Some(listener.accept().await) }, async {
            ctx.drain.wait().await;
            None
        })
        .await;
        match accepted {
            None => break,
            Some(Ok(stream)) => session::spawn(&ctx, stream, index, clients.try_admit(index)),
            Some(Err(e)) => {
                // EMFILE and friends: back off instead of spinning on a failing accept.
                tracing::warn!(error = %e, "accept failed");
                rt::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
    // Draining or handing over: a connection accepted at this moment is served like the
    // others (it moves or is told the router is going away) rather than reset; the listener
    // closes when the last `Rc` drops here.
    if let Some(Ok(stream)) = listener.stop().await {
        session::spawn(&ctx, stream, index, clients.try_admit(index));
        // The session counts as active from its first poll, which comes before this task's
        // next one: only then may the core see no session left and stop.
        rt::yield_now().await;
    }
}
