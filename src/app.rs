//! Bootstrap and shutdown: binds the admin ports, starts the cores (first one alone, to learn
//! the ports it bound), the control plane and the admin server, and wires signals. Used by `main`
//! and by in-process integration tests.
//!
//! Shutdown order: a drain flips `/health` to 503 at once (the control handle's flag); the admin
//! server keeps answering `/metrics` and the API until the cores and the control plane are done.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::thread::JoinHandle;

use crossbeam_channel::{bounded, unbounded};

use crate::admin::{self, AdminError, AdminHandle, Plugins};
use crate::config::Config;
use crate::control::msg::Snapshot;
use crate::control::{self, ControlHandle, ControlSetup, Endpoints};
use crate::core::{self, CoreSetup};
use crate::id::{CoreId, RulesVersion};
use crate::pool::BudgetRegistry;
use crate::rt::CoreHandle;

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
}

/// A running router.
pub struct Running {
    /// Bound listener addresses, in config order (ports resolved when configured as 0).
    pub listen: Vec<SocketAddr>,
    /// Handle to the control plane.
    pub control: ControlHandle,
    cores: Vec<CoreHandle>,
    control_thread: JoinHandle<()>,
    admin: Option<AdminHandle>,
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
        if let Some(a) = self.admin {
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
        std::net::TcpListener::bind(l.bind).map_err(|e| {
            StartError::Listen(std::io::Error::new(e.kind(), format!("{} ({}): {e}", l.bind, l.name)))
        })?;
    }
    Ok(())
}

/// Starts cores and the control plane for `config`; `config_path` is what reloads re-read.
pub fn start(config: Config, config_path: Option<PathBuf>) -> Result<Running, StartError> {
    let cpus = cpus(&config)?;
    ensure_ports_free(&config)?;
    // Bound before any core starts: a taken port or a missing token fails the start cleanly.
    let admin_bound = admin::bind(&config.metrics)?;
    let admin_addrs = admin_bound.as_ref().map(admin::Bound::addrs).transpose()?;
    let drain_window = config.general.shutdown_drain;
    let snapshot = Arc::new(Snapshot { version: RulesVersion(1), config: Arc::new(config) });
    let budgets = BudgetRegistry::default();
    let (events_tx, events_rx) = unbounded();
    let mut listen: Vec<SocketAddr> = snapshot.config.listeners.iter().map(|l| l.bind).collect();
    let mut inboxes = Vec::with_capacity(cpus.len());
    let mut cores = Vec::with_capacity(cpus.len());
    let n_cores = cpus.len();
    for (i, cpu) in cpus.into_iter().enumerate() {
        let (tx, rx) = unbounded();
        inboxes.push(tx);
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
            bound: Some(bound_tx),
        };
        cores.push(core::spawn(setup)?);
        match bound_rx.recv() {
            Ok(Ok(addrs)) => listen = addrs,
            Ok(Err(e)) => return Err(StartError::Listen(e)),
            Err(_) => return Err(StartError::Listen(std::io::Error::other("core exited during start"))),
        }
    }
    let endpoints = Endpoints {
        listen: listen.clone(),
        metrics: admin_addrs.map(|(m, _)| m),
        admin: admin_addrs.map(|(_, a)| a),
    };
    let (control, control_thread) = control::start(ControlSetup {
        config_path,
        initial: snapshot,
        cores: inboxes,
        events: events_rx,
        drain_window,
        endpoints,
    })
    .map_err(StartError::Thread)?;
    let admin = match admin_bound.map(|b| admin::serve(b, control.clone(), Plugins::default())).transpose() {
        Ok(a) => a,
        Err(e) => {
            control.drain();
            return Err(e.into());
        }
    };
    Ok(Running { listen, control, cores, control_thread, admin })
}

/// Routes SIGTERM/SIGINT to a drain and SIGHUP to a reload, on a plain thread.
pub fn watch_signals(control: ControlHandle) -> std::io::Result<()> {
    use signal_hook::consts::{SIGHUP, SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT, SIGHUP])?;
    std::thread::Builder::new().name("qp-signals".into()).spawn(move || {
        for sig in signals.forever() {
            if sig == SIGHUP {
                match control.reload() {
                    Ok(v) => tracing::info!(version = v.0, "reloaded on SIGHUP"),
                    Err(e) => tracing::error!(error = %e, "reload rejected; the old configuration keeps serving"),
                }
            } else {
                tracing::info!(signal = sig, "shutdown requested");
                control.drain();
            }
        }
    })?;
    Ok(())
}
