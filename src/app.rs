//! Bootstrap and shutdown: binds the admin ports, starts the cores (first one alone, to learn
//! the ports it bound), the control plane and the admin server, and wires signals. Used by `main`
//! and by in-process integration tests.
//!
//! Shutdown order: a drain flips `/health` to 503 at once (the control handle's flag); the admin
//! server keeps answering `/metrics` and the API until the cores and the control plane are done.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, unbounded};
use parking_lot::Mutex;

use crate::admin::{self, AdminError, AdminHandle, Plugins};
use crate::config::{Config, Protocol, TranslationRule};
use crate::control::msg::{CoreInbox, Inherited, Snapshot};
use crate::control::view::{LiteralView, MappingView, TemplateView};
use crate::control::{self, ControlHandle, ControlSetup, Endpoints};
use crate::core::{self, CoreSetup};
use crate::handover::give::{self, GiveError, GiveSetup, Giver};
use crate::handover::take::{self, TakeError, Taken};
use crate::id::{CoreId, RulesVersion};
use crate::metrics::LogDrops;
use crate::pool::BudgetRegistry;
use crate::routing::{dialect, RuleErrors};
use crate::rt::CoreHandle;
use crate::session::ClientSlots;
use crate::sql::template::{LiteralKind, SlotSource, TranslationTemplate};

pub mod log;
pub mod notify;

pub use log::LogSink;
pub use notify::Notifier;

// A session's state and its hand-over frame's other fields fit in one frame (#40).
const _: () = assert!(crate::session::handover::STATE_MAX + 4096 < crate::handover::wire::MAX_FRAME);

/// Why the router could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A core's executor could not be created.
    #[error(transparent)]
    Runtime(#[from] crate::rt::RtError),
    /// A listener could not be bound.
    #[error("cannot listen: {0}")]
    Listen(std::io::Error),
    /// A thread could not be spawned.
    #[error("cannot start thread: {0}")]
    Thread(std::io::Error),
    /// The configured CPU list is empty after intersecting with the allowed CPUs.
    #[error("no usable CPU in general.cores")]
    NoCpu,
    /// The metrics/admin server could not start.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// The routing rules do not compile.
    #[error("invalid routing rules: {0}")]
    Rules(#[from] RuleErrors),
    /// The `[auth] file` cannot be read or parsed (#23).
    #[error(transparent)]
    AuthFile(crate::control::ControlError),
    /// A pool's or listener's TLS files cannot be read or are not PEM (#38).
    #[error(transparent)]
    Tls(crate::control::ControlError),
    /// Taking over from the running router failed (#40).
    #[error(transparent)]
    TakeOver(#[from] TakeError),
    /// `general.handover_socket` cannot be set up (#40).
    #[error(transparent)]
    HandOverSocket(#[from] GiveError),
}

/// A running router.
pub struct Running {
    /// Bound listener addresses, in config order (ports resolved when configured as 0).
    pub listen: Vec<SocketAddr>,
    /// Handle to the control plane.
    pub control: ControlHandle,
    cores: Vec<CoreHandle>,
    control_thread: JoinHandle<()>,
    /// Shared with the hand-over thread, which stops it and hands its sockets over (#40).
    admin: Arc<Mutex<Option<AdminHandle>>>,
    giver: Option<Giver>,
}

impl Running {
    /// Blocks until every core has drained and the control plane stopped, then stops the admin
    /// server (which answers until then).
    pub fn wait(self) {
        for c in self.cores {
            if let Err(e) = c.join() {
                tracing::error!(error = %e, "core ended abnormally");
            }
        }
        let _ = self.control_thread.join();
        // After a hand-over, once the last sessions were sent; then the socket file goes.
        if let Some(g) = self.giver {
            g.stop();
        }
        let admin = self.admin.lock().take();
        if let Some(a) = admin {
            a.stop();
        }
    }
}

/// The CPUs to run on: the configured list, or every CPU this process may use.
fn cpus(config: &Config) -> Result<Vec<Option<usize>>, StartError> {
    match &config.general.cores {
        Some(list) if list.is_empty() => Err(StartError::NoCpu),
        Some(list) => Ok(list.iter().map(|c| Some(*c)).collect()),
        None => {
            let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(1);
            Ok((0..n).map(Some).collect())
        }
    }
}

/// SO_REUSEPORT lets a second process join a port silently and take half its connections;
/// binding once without it first turns that into a clear "address in use" at start.
fn ensure_ports_free(config: &Config) -> Result<(), StartError> {
    for l in config.listeners.iter().filter(|l| l.bind.port() != 0) {
        std::net::TcpListener::bind(l.bind)
            .map_err(|e| StartError::Listen(std::io::Error::new(e.kind(), format!("{} ({}): {e}", l.bind, l.name))))?;
    }
    Ok(())
}

/// Starts cores and the control plane for `config`; `config_path` is what reloads re-read.
/// `log_drops` is the log writer's dropped-lines counter, shown on `/metrics`.
pub fn start(config: Config, config_path: Option<PathBuf>, log_drops: LogDrops) -> Result<Running, StartError> {
    start_taking_over(config, config_path, log_drops, None)
}

/// Like [`start`]; with `take_from`, takes the listening sockets (and then the sessions) over
/// from the router listening on that hand-over socket instead of binding (#40). Everything that
/// can be checked is checked before the running router is asked: once it said yes it stops
/// accepting.
pub fn start_taking_over(
    mut config: Config,
    config_path: Option<PathBuf>,
    log_drops: LogDrops,
    take_from: Option<&Path>,
) -> Result<Running, StartError> {
    crate::control::load_auth_file(&mut config).map_err(StartError::AuthFile)?;
    crate::control::load_tls(&mut config).map_err(StartError::Tls)?;
    crate::control::seed_mock_salts(&mut config, None);
    if config.auth.allow_empty_password {
        tracing::warn!(
            "[auth] allow_empty_password is on: MySQL accounts without a password log in through the router"
        );
    }
    let cpus = cpus(&config)?;
    // Rules first: a bad rule should not cost a bound port.
    let snapshot = Arc::new(Snapshot::build(RulesVersion(1), Arc::new(config), &[], &[])?);
    let config = &snapshot.config;
    for warning in crate::routing::translation_warnings(config) {
        tracing::warn!("{warning}");
    }
    let n_cores = cpus.len();
    let Sockets { taken, mut inherited, admin: admin_bound } = sockets(config, n_cores, take_from)?;
    let admin_addrs = admin_bound.as_ref().map(admin::Bound::addrs).transpose()?;
    let drain_window = config.general.shutdown_drain;
    let handover_socket = config.general.handover_socket.clone();
    let budgets = BudgetRegistry::default();
    let clients = ClientSlots::new(&config.listeners);
    let buffers = crate::metrics::ClientBudget::new();
    let (events_tx, events_rx) = unbounded();
    let (console_tx, console_rx) = unbounded();
    let mut listen: Vec<SocketAddr> = config.listeners.iter().map(|l| l.bind).collect();
    let mut inboxes = Vec::with_capacity(cpus.len());
    let mut cores = Vec::with_capacity(cpus.len());
    for (i, cpu) in cpus.into_iter().enumerate() {
        let (tx, rx) = unbounded();
        // The first core binds alone so that port 0 resolves once and the others join it.
        let (bound_tx, bound_rx) = bounded(1);
        let setup = CoreSetup {
            id: CoreId(i as u16),
            cores: n_cores,
            cpu,
            inbox: rx,
            events: events_tx.clone(),
            snapshot: snapshot.clone(),
            listen: listen.clone(),
            budgets: budgets.clone(),
            clients: clients.clone(),
            buffers: buffers.clone(),
            bound: Some(bound_tx),
            console: console_tx.clone(),
            inherited: inherited.get_mut(i).map(std::mem::take).unwrap_or_default(),
        };
        let handle = core::spawn(setup)?;
        let notifier = handle.notifier();
        inboxes.push(CoreInbox::new(tx, move || notifier.notify()));
        cores.push(handle);
        // The bootstrap thread, not a core, waits for the core to bind.
        #[allow(clippy::disallowed_methods)]
        let bound = bound_rx.recv();
        match bound {
            Ok(Ok(addrs)) => listen = addrs,
            Ok(Err(e)) => return Err(StartError::Listen(e)),
            Err(_) => return Err(StartError::Listen(std::io::Error::other("core exited during start"))),
        }
    }
    let endpoints =
        Endpoints { listen: listen.clone(), metrics: admin_addrs.map(|(m, _)| m), admin: admin_addrs.map(|(_, a)| a) };
    let (control, control_thread) = control::start(ControlSetup {
        config_path,
        initial: snapshot,
        cores: inboxes,
        events: events_rx,
        drain_window,
        endpoints,
        describe: describe_translation,
        settle_mysql: crate::session::settle_mysql,
        log_drops,
    })
    .map_err(StartError::Thread)?;
    drop(console_tx); // the cores hold the only senders: the console thread ends with them
    admin::console::start(console_rx, control.clone()).map_err(StartError::Thread)?;
    let admin = match admin_bound.map(|b| admin::serve(b, control.clone(), Plugins::default())).transpose() {
        Ok(a) => Arc::new(Mutex::new(a)),
        Err(e) => {
            control.drain();
            return Err(e.into());
        }
    };
    let inherited_seq = taken.as_ref().map(Taken::next_seq).unwrap_or_default();
    // The session thread ends when the old process says Done or goes away; nothing waits for
    // it (the process may exit while it still waits for an old process that hangs).
    if let Some(Err(e)) = taken.map(|t| t.adopt_sessions(control.clone(), listen.len())) {
        control.drain();
        return Err(e.into());
    }
    let giver = match handover_socket.map(|path| give_socket(path, &control, &admin, inherited_seq)).transpose() {
        Ok(g) => g,
        Err(e) => {
            control.drain();
            return Err(e.into());
        }
    };
    Ok(Running { listen, control, cores, control_thread, admin, giver })
}

/// The sockets to serve, before any core starts (a taken port or a missing token fails the
/// start cleanly): taken over from the router on `take_from` (#40), which holds the ports with
/// SO_REUSEPORT until it stops, or checked free for the cores to bind; and the admin server's.
fn sockets(config: &Config, cores: usize, take_from: Option<&Path>) -> Result<Sockets, StartError> {
    let mut taken = take_from.map(take::connect).transpose()?;
    let binds: Vec<SocketAddr> = config.listeners.iter().map(|l| l.bind).collect();
    let inherited = match taken.as_mut() {
        Some(t) => t.share(cores, &binds),
        None => {
            ensure_ports_free(config)?;
            Vec::new()
        }
    };
    let inherited_admin = taken.as_mut().and_then(|t| t.admin(config.metrics.bind, config.metrics.admin_bind()));
    let admin = admin::bind(&config.metrics, inherited_admin)?;
    Ok(Sockets { taken, inherited, admin })
}

/// What [`sockets`] found.
struct Sockets {
    /// The hand-over connection, when taking over.
    taken: Option<Taken>,
    /// Per core, what it takes over.
    inherited: Vec<Inherited>,
    /// The admin server's sockets, when `[metrics] enabled`.
    admin: Option<admin::Bound>,
}

/// Listens on `general.handover_socket` (#40): a hand-over stops the admin server and passes
/// its sockets on.
fn give_socket(
    path: PathBuf,
    control: &ControlHandle,
    admin: &Arc<Mutex<Option<AdminHandle>>>,
    inherited_seq: Vec<u32>,
) -> Result<Giver, GiveError> {
    let held = admin.clone();
    let release_admin = Box::new(move || held.lock().take().map(AdminHandle::hand_over).unwrap_or_default());
    give::listen(GiveSetup { path, control: control.clone(), release_admin, inherited_seq })
}

/// Routes SIGTERM/SIGINT to a drain, SIGHUP to a reload and SIGUSR1 to reopening the log file,
/// on a plain thread. SIGHUP reopens the log file too (logrotate's usual `postrotate`). The
/// service manager hears of reloads and the drain through `notifier`.
pub fn watch_signals(control: ControlHandle, log: LogSink, notifier: Notifier) -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM, SIGUSR1};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP, SIGUSR1])?;
    std::thread::Builder::new().name("qp-signals".into()).spawn(move || {
        for sig in signals.forever() {
            if sig == SIGHUP || sig == SIGUSR1 {
                if let Err(e) = log.reopen() {
                    tracing::error!(error = %e, "cannot reopen the log file; logging goes on to the old one");
                }
            }
            if sig == SIGUSR1 {
                continue;
            }
            if sig == SIGHUP {
                notifier.reloading();
                match control.reload() {
                    Ok(v) => tracing::info!(version = v.0, "reloaded on SIGHUP"),
                    Err(e) => tracing::error!(error = %e, "reload rejected; the old configuration keeps serving"),
                }
                notifier.ready();
            } else {
                tracing::info!(signal = sig, "shutdown requested");
                notifier.stopping();
                control.drain();
            }
        }
    })?;
    Ok(())
}

/// The admin API's view of a runtime translation: compiled per client protocol with a listener,
/// as the rule set compiles it (source dialect: the client's; target: the pool's backend).
fn describe_translation(config: &Config, rule: &TranslationRule) -> Vec<TemplateView> {
    let mut protocols: Vec<Protocol> = [Protocol::Postgres, Protocol::MySql]
        .into_iter()
        .filter(|p| config.listeners.iter().any(|l| l.protocol == *p))
        .collect();
    if protocols.is_empty() {
        protocols = vec![Protocol::Postgres, Protocol::MySql];
    }
    let backend = config.pool(&rule.target_pool).and_then(|p| p.protocol);
    protocols
        .into_iter()
        .filter_map(|protocol| {
            let target = dialect(backend.unwrap_or(protocol));
            let t = TranslationTemplate::compile(&rule.original_sql, &rule.translated_sql, dialect(protocol), target)
                .ok()?;
            let d = t.describe();
            let warnings = t.warnings();
            Some(TemplateView {
                warnings,
                protocol: protocol.as_str(),
                original: d.original,
                translated: d.translated,
                original_literals: d
                    .original_slots
                    .into_iter()
                    .enumerate()
                    .map(|(index, l)| LiteralView { index, kind: literal_kind(l.kind), text: l.text })
                    .collect(),
                mapping: d
                    .mapping
                    .into_iter()
                    .map(|m| MappingView {
                        kind: literal_kind(m.kind),
                        text: m.text,
                        from_original: m.source.original(),
                        json_array: matches!(m.source, SlotSource::JsonArray(_)),
                    })
                    .collect(),
            })
        })
        .collect()
}

fn literal_kind(k: LiteralKind) -> &'static str {
    match k {
        LiteralKind::Number => "number",
        LiteralKind::String => "string",
        LiteralKind::Bool => "bool",
        LiteralKind::Null => "null",
        LiteralKind::Bits => "bits",
        LiteralKind::Param => "param",
        LiteralKind::InList(_) => "in_list",
    }
}
