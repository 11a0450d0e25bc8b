//! The control plane: a plain thread that owns the configuration, publishes immutable snapshots
//! to every core over crossbeam channels and waits for their acknowledgements, forwards cross-core
//! requests, and gathers per-core metrics on demand.
//!
//! It never runs on a data core and never touches a session; it must not depend on `rt`,
//! `session`, `pool` or the event loop.

mod api;
pub mod limits;
pub mod msg;
mod pause;
mod switchover;
mod tls;
pub mod view;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{bounded, select, unbounded, Receiver, Sender};

use crate::config::{Config, ConfigErrors, PatternRule, TranslationRule};
use crate::error::{ErrorCode, Origin};
use crate::metrics::{LogDrops, Scrape};
use crate::routing::{Catalogs, Router, RuleErrors};
/// What holds a session's connection, and what a MySQL session made of a decision, as the
/// dry-run names them.
pub use crate::routing::{Hold, Settled};
pub use api::{MySqlQuery, RouteQuery, SessionQuery};
use msg::{CoreCommand, CoreEvent, CoreId, CoreInbox, CoreReport, KillTarget, RulesVersion, Snapshot};
pub use pause::PauseOutcome;
pub use switchover::{switchover, Switched, SwitchoverError, DEFAULT_SWITCHOVER_TIMEOUT};
use view::TemplateView;

/// How long the control plane waits for every core to acknowledge a snapshot or report metrics.
const CORE_REPLY_TIMEOUT: Duration = Duration::from_secs(5);

/// Failures of control-plane requests.
#[derive(Debug, thiserror::Error)]
pub enum ControlError {
    /// The configuration file could not be read.
    #[error("cannot read {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The new configuration is invalid; the old one keeps serving.
    #[error("{0}")]
    Invalid(#[from] ConfigErrors),
    /// The routing rules (configured or added through the API) do not compile; the old ones
    /// keep serving.
    #[error("{0}")]
    Rules(#[from] RuleErrors),
    /// A request the control plane refuses as given (duplicate rule name, bad value).
    #[error("{0}")]
    BadRequest(String),
    /// The request names something that does not exist (a rule, a translation).
    #[error("{0}")]
    NotFound(String),
    /// The `[auth] file` could not be read or parsed (#23); the old secrets keep serving.
    #[error("auth file {path}: {reason}")]
    AuthFile {
        /// The file.
        path: String,
        /// What failed (an OS error or the first bad line, never a secret).
        reason: String,
    },
    /// A pool's backend TLS files could not be loaded (#38); on reload the old settings stay.
    #[error("pool \"{pool}\": {reason}")]
    BackendTls {
        /// The pool.
        pool: String,
        /// The key, the file and what is wrong with it.
        reason: String,
    },
    /// A listener's TLS files could not be loaded (#38); on reload the old settings stay.
    #[error("listener \"{listener}\": {reason}")]
    ListenerTls {
        /// The listener.
        listener: String,
        /// The key, the file and what is wrong with it.
        reason: String,
    },
    /// No file to reload from (the router was started from an in-memory config).
    #[error("no configuration file to reload from")]
    NoFile,
    /// Some cores did not acknowledge in time.
    #[error("cores {0:?} did not acknowledge in time")]
    CoresSilent(Vec<CoreId>),
    /// The control thread is gone (the router is shutting down).
    #[error("the control plane has stopped")]
    Stopped,
}

pub use tls::{load_backend_tls, load_listener_tls, load_tls};

/// Reads `[auth] file` into `config.auth.users` (#23): at start and on every reload, so a
/// reload picks up changed secrets. Without an auth file the users stay empty.
pub fn load_auth_file(config: &mut Config) -> Result<(), ControlError> {
    let Some(path) = config.auth.file.clone() else { return Ok(()) };
    let shown = path.display().to_string();
    let text = std::fs::read_to_string(&path)
        .map_err(|e| ControlError::AuthFile { path: shown.clone(), reason: e.to_string() })?;
    let users = crate::auth::parse_userlist(&text)
        .map_err(|e| ControlError::AuthFile { path: shown, reason: e.to_string() })?;
    config.auth.users = Arc::new(users);
    Ok(())
}

/// Fills `config.auth.mock_seed` (#33): from `[auth] mock_salt_key` when set, else the running
/// router's own random one (`previous`), else a new random one — so an unknown user's mock
/// salt stays the same across reloads, as a real user's stored one does.
pub fn seed_mock_salts(config: &mut Config, previous: Option<&Config>) {
    config.auth.mock_seed = match (&config.auth.mock_salt_key, previous) {
        (Some(key), _) => crate::auth::mock::seed_from_key(key),
        (None, Some(prev)) if prev.auth.mock_salt_key.is_none() => prev.auth.mock_seed,
        _ => rand::random(),
    };
}

impl ErrorCode for ControlError {
    fn code(&self) -> &'static str {
        match self {
            Self::Read { .. } => "control.read",
            Self::AuthFile { .. } => "control.auth_file",
            Self::BackendTls { .. } => "control.backend_tls",
            Self::ListenerTls { .. } => "control.listener_tls",
            Self::Invalid(_) => "control.invalid_config",
            Self::Rules(_) => "routing.invalid_rule",
            Self::BadRequest(_) => "control.bad_request",
            Self::NotFound(_) => "control.not_found",
            Self::NoFile => "control.no_file",
            Self::CoresSilent(_) => "control.cores_silent",
            Self::Stopped => "control.stopped",
        }
    }
    fn origin(&self) -> Origin {
        match self {
            Self::Invalid(_)
            | Self::Read { .. }
            | Self::AuthFile { .. }
            | Self::BackendTls { .. }
            | Self::ListenerTls { .. }
            | Self::NoFile
            | Self::Rules(_)
            | Self::BadRequest(_)
            | Self::NotFound(_) => Origin::Client,
            _ => Origin::Internal,
        }
    }
}

enum Request {
    Reload(Sender<Result<RulesVersion, ControlError>>),
    Drain,
    Collect(Sender<Vec<CoreReport>>),
    Scrape(Sender<Scrape>),
    Current(Sender<Arc<Snapshot>>),
    /// Anything else: runs on the control thread, which owns the state; the closure replies.
    Run(Box<dyn FnOnce(&mut ControlPlane) + Send>),
}

/// Compiles a runtime translation for the admin API's description (the parameterized forms and
/// the literal mapping, per client protocol). Supplied by `app`, which may use the SQL layer;
/// called only after the rule set built, so the rule is known to compile.
pub type DescribeTranslation = fn(&Config, &TranslationRule) -> Vec<TemplateView>;

/// A MySQL session's last word on a decision (#19): the same function the session uses,
/// supplied by `app` (the session owns what statements do to its state), so the dry-run
/// explains MySQL session-level decisions as the session makes them.
pub type SettleMySql =
    fn(&mut crate::routing::Decision, &str, &crate::routing::MySqlSession<'_>) -> crate::routing::Settled;

/// Where the router serves, fixed at start (ports resolved when configured as 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Endpoints {
    /// Client listeners, in config order.
    pub listen: Vec<SocketAddr>,
    /// `/metrics`, when `[metrics] enabled`.
    pub metrics: Option<SocketAddr>,
    /// The admin API, when `[metrics] enabled`.
    pub admin: Option<SocketAddr>,
}

/// A cloneable, `Send` handle to the control plane, for the signal thread, the admin API and tests.
#[derive(Clone)]
pub struct ControlHandle {
    requests: Sender<Request>,
    /// Set by [`ControlHandle::drain`] in the caller's thread, so health checks fail from the
    /// moment a drain is asked for, before any core has heard of it.
    draining: Arc<AtomicBool>,
    endpoints: Arc<Endpoints>,
}

// Callers are the admin, signal and test threads, never a core: blocking on the reply is the point.
#[allow(clippy::disallowed_methods)]
impl ControlHandle {
    /// Re-reads the config file, publishes it to every core, and returns once all acknowledged.
    /// An invalid file is rejected and the old configuration keeps serving.
    pub fn reload(&self) -> Result<RulesVersion, ControlError> {
        let (tx, rx) = bounded(1);
        self.requests.send(Request::Reload(tx)).map_err(|_| ControlError::Stopped)?;
        rx.recv().map_err(|_| ControlError::Stopped)?
    }

    /// Starts a graceful drain: cores stop accepting, finish or close their sessions, then stop.
    pub fn drain(&self) {
        self.draining.store(true, Ordering::Release);
        // A stopped control plane has nothing left to drain.
        let _ = self.requests.send(Request::Drain);
    }

    /// Whether a drain was requested (the router is shutting down).
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::Acquire)
    }

    /// Where the router serves.
    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// Every core's counters plus the control plane's own figures, for `/metrics`.
    pub fn scrape(&self) -> Result<Scrape, ControlError> {
        let (tx, rx) = bounded(1);
        self.requests.send(Request::Scrape(tx)).map_err(|_| ControlError::Stopped)?;
        rx.recv().map_err(|_| ControlError::Stopped)
    }

    /// Per-core counters, gathered now.
    pub fn collect(&self) -> Result<Vec<CoreReport>, ControlError> {
        let (tx, rx) = bounded(1);
        self.requests.send(Request::Collect(tx)).map_err(|_| ControlError::Stopped)?;
        rx.recv().map_err(|_| ControlError::Stopped)
    }

    /// The snapshot currently published.
    pub fn current(&self) -> Result<Arc<Snapshot>, ControlError> {
        let (tx, rx) = bounded(1);
        self.requests.send(Request::Current(tx)).map_err(|_| ControlError::Stopped)?;
        rx.recv().map_err(|_| ControlError::Stopped)
    }

    /// #40: asks every running core to hand over (see [`msg::HandOver`]): returns each core's
    /// duplicated listeners once all answered (or the reply timeout passed); their sessions then
    /// arrive on `sink`, each core's last message being [`msg::Moving::Stopped`].
    pub fn hand_over(
        &self,
        sink: Sender<msg::Moving>,
        wait: Duration,
    ) -> Result<Vec<msg::CoreListeners>, ControlError> {
        self.call(move |cp| cp.hand_over(sink, wait))
    }

    /// #40: gives a client a former process handed over to the core its key names (modulo the
    /// core count: the former process may have had more).
    pub fn adopt(&self, client: msg::MovingClient) -> Result<(), ControlError> {
        self.call(move |cp| match cp.core_of(client.key) {
            Some(core) => core.send(CoreCommand::Adopt(client)).map_err(|_| ControlError::Stopped),
            None => Err(ControlError::Stopped),
        })?
    }

    /// Runs `f` on the control thread and returns its answer.
    fn call<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut ControlPlane) -> T + Send + 'static,
    ) -> Result<T, ControlError> {
        let (tx, rx) = bounded(1);
        let job = Box::new(move |cp: &mut ControlPlane| {
            let _ = tx.send(f(cp));
        });
        self.requests.send(Request::Run(job)).map_err(|_| ControlError::Stopped)?;
        rx.recv().map_err(|_| ControlError::Stopped)
    }
}

/// Everything the control thread needs at start.
pub struct ControlSetup {
    /// Where reloads read from; `None` for an in-memory configuration.
    pub config_path: Option<PathBuf>,
    /// The snapshot the cores were started with.
    pub initial: Arc<Snapshot>,
    /// One command channel per core, indexed by core id.
    pub cores: Vec<CoreInbox>,
    /// Events from all cores.
    pub events: Receiver<CoreEvent>,
    /// How long sessions may drain after SIGTERM.
    pub drain_window: Duration,
    /// Where the router serves, for handles to report.
    pub endpoints: Endpoints,
    /// Describes runtime translations for the admin API.
    pub describe: DescribeTranslation,
    /// Settles dry-run decisions for MySQL session states.
    pub settle_mysql: SettleMySql,
    /// Log lines dropped by the log writer, for the scrape.
    pub log_drops: LogDrops,
}

/// Starts the control thread; it exits once every core has stopped.
pub fn start(mut setup: ControlSetup) -> std::io::Result<(ControlHandle, JoinHandle<()>)> {
    let (tx, rx) = unbounded();
    let endpoints = Arc::new(std::mem::take(&mut setup.endpoints));
    let join = std::thread::Builder::new().name("qp-control".into()).spawn(move || ControlPlane::new(setup).run(rx))?;
    Ok((ControlHandle { requests: tx, draining: Arc::default(), endpoints }, join))
}

/// The control thread's state.
struct ControlPlane {
    setup: ControlSetup,
    current: Arc<Snapshot>,
    stopped: Vec<bool>,
    reloads_applied: u64,
    reloads_rejected: u64,
    /// Pattern rules added through the API since the last reload.
    dynamic: Vec<PatternRule>,
    /// Translations added through the API since the last reload.
    translations: Vec<TranslationRule>,
    /// A router over the current rules and the latest loaded catalogs, for dry-runs (`explain`
    /// leaves its cache unused).
    explainer: Router,
}

impl ControlPlane {
    fn new(setup: ControlSetup) -> Self {
        let n = setup.cores.len();
        let explainer = Router::new(setup.initial.rules.for_core(), Catalogs::builtin());
        Self {
            current: setup.initial.clone(),
            setup,
            stopped: vec![false; n],
            reloads_applied: 0,
            reloads_rejected: 0,
            dynamic: Vec::new(),
            translations: Vec::new(),
            explainer,
        }
    }

    fn run(mut self, requests: Receiver<Request>) {
        let events = self.setup.events.clone();
        while !self.stopped.iter().all(|s| *s) {
            select! {
                recv(requests) -> req => match req {
                    Ok(r) => self.handle(r),
                    // Every handle dropped: nobody can ask for a drain any more, so start one.
                    Err(_) => { self.drain(); break; }
                },
                recv(events) -> ev => match ev {
                    Ok(e) => self.on_event(e),
                    Err(_) => break,
                },
            }
        }
        self.wait_all_stopped(&events);
    }

    fn handle(&mut self, req: Request) {
        match req {
            Request::Reload(reply) => {
                let res = self.reload();
                match res {
                    Ok(_) => self.reloads_applied += 1,
                    Err(_) => self.reloads_rejected += 1,
                }
                let _ = reply.send(res);
            }
            Request::Drain => self.drain(),
            Request::Collect(reply) => {
                let _ = reply.send(self.collect());
            }
            Request::Scrape(reply) => {
                let cores = self.collect().into_iter().map(|r| (r.core.0, r.counters)).collect();
                let _ = reply.send(Scrape {
                    cores,
                    config_version: self.current.version.0,
                    reloads_applied: self.reloads_applied,
                    reloads_rejected: self.reloads_rejected,
                    log_lines_dropped: self.setup.log_drops.count(),
                });
            }
            Request::Current(reply) => {
                let _ = reply.send(self.current.clone());
            }
            Request::Run(job) => job(self),
        }
    }

    fn on_event(&mut self, ev: CoreEvent) {
        match ev {
            CoreEvent::Applied { .. } => {} // late acknowledgement of an older publish
            CoreEvent::Catalogs(catalogs) => self.set_catalogs(catalogs),
            CoreEvent::ForwardCancel(req, reply) => match &req.target {
                // A client handed over by a process with more cores (#40) holds a key naming
                // a core this one may not have: it lives on the core the key's number maps to.
                KillTarget::Session(key) => {
                    if let Some(core) = self.core_of(*key) {
                        let _ = core.send(CoreCommand::Cancel(req, reply));
                    }
                }
                // A server's thread id does not say which core holds it: every core looks.
                KillTarget::Thread { .. } => {
                    for core in &self.setup.cores {
                        let _ = core.send(CoreCommand::Cancel(req.clone(), reply.clone()));
                    }
                }
            },
            CoreEvent::ReleaseDatabase { database, deadline, reply } => {
                for core in &self.setup.cores {
                    let (database, reply) = (database.clone(), reply.clone());
                    let _ = core.send(CoreCommand::ReleaseDatabase { database, deadline, reply });
                }
            }
            CoreEvent::Stopped(id) => {
                if let Some(s) = self.stopped.get_mut(usize::from(id.0)) {
                    *s = true;
                }
            }
        }
    }

    fn reload(&mut self) -> Result<RulesVersion, ControlError> {
        let path = self.setup.config_path.clone().ok_or(ControlError::NoFile)?;
        let text = std::fs::read_to_string(&path)
            .map_err(|source| ControlError::Read { path: path.display().to_string(), source })?;
        let mut config = Config::parse(&text, &path.display().to_string())?;
        load_auth_file(&mut config)?;
        load_tls(&mut config)?;
        seed_mock_salts(&mut config, Some(&self.current.config));
        self.warn_restart_only(&config);
        // Runtime rules and translations are ephemeral: a reload starts from the file alone.
        let snap = Snapshot::build(self.next_version(), Arc::new(config), &[], &[])?;
        self.dynamic.clear();
        self.translations.clear();
        self.publish(Arc::new(snap))
    }

    fn next_version(&self) -> RulesVersion {
        RulesVersion(self.current.version.0 + 1)
    }

    /// New catalogs from a core: used by the dry-run and sent to every core.
    fn set_catalogs(&mut self, catalogs: Catalogs) {
        for (i, core) in self.setup.cores.iter().enumerate() {
            if !self.stopped.get(i).copied().unwrap_or(true) {
                let _ = core.send(CoreCommand::SetCatalogs(catalogs.clone()));
            }
        }
        self.explainer.set_catalogs(catalogs);
    }

    /// Listener addresses and core placement are fixed at start; say so instead of pretending.
    /// A listener's TLS settings are not: each new handshake reads the current ones (#38).
    fn warn_restart_only(&self, new: &Config) {
        let old = &self.current.config;
        let fixed = |c: &Config| -> Vec<crate::config::Listener> {
            c.listeners.iter().map(|l| crate::config::Listener { tls: Default::default(), ..l.clone() }).collect()
        };
        if fixed(old) != fixed(new) || old.general.cores != new.general.cores {
            tracing::warn!("listener and core changes take effect only after a restart");
        }
    }

    fn publish(&mut self, snap: Arc<Snapshot>) -> Result<RulesVersion, ControlError> {
        let version = snap.version;
        self.current = snap.clone();
        self.explainer.set_rules(snap.rules.for_core());
        for (i, core) in self.setup.cores.iter().enumerate() {
            if !self.stopped.get(i).copied().unwrap_or(true) {
                let _ = core.send(CoreCommand::Apply(snap.clone()));
            }
        }
        let mut pending: Vec<bool> = self.stopped.iter().map(|s| !s).collect();
        let deadline = Instant::now() + CORE_REPLY_TIMEOUT;
        while pending.iter().any(|p| *p) {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.setup.events.recv_timeout(left) {
                Ok(CoreEvent::Applied { core, version: v }) if v == version => {
                    if let Some(p) = pending.get_mut(usize::from(core.0)) {
                        *p = false;
                    }
                }
                Ok(other) => self.on_event(other),
                Err(_) => break,
            }
        }
        let silent: Vec<CoreId> = pending
            .iter()
            .enumerate()
            .filter(|(i, p)| **p && !self.stopped.get(*i).copied().unwrap_or(true))
            .map(|(i, _)| CoreId(i as u16))
            .collect();
        if silent.is_empty() {
            tracing::info!(version = version.0, "configuration published to every core");
            Ok(version)
        } else {
            Err(ControlError::CoresSilent(silent))
        }
    }

    /// The inbox of the core that serves sessions with `key`.
    fn core_of(&self, key: msg::CancelKey) -> Option<&CoreInbox> {
        let n = self.setup.cores.len().max(1);
        self.setup.cores.get(usize::from(key.core().0) % n)
    }

    fn hand_over(&mut self, sink: Sender<msg::Moving>, wait: Duration) -> Vec<msg::CoreListeners> {
        let (tx, rx) = unbounded();
        let deadline = Instant::now() + wait;
        let expected = self
            .send_running(|| CoreCommand::HandOver(msg::HandOver { sink: sink.clone(), deadline, reply: tx.clone() }));
        let until = Instant::now() + CORE_REPLY_TIMEOUT;
        let mut replies = Vec::with_capacity(expected);
        while replies.len() < expected {
            match rx.recv_deadline(until) {
                Ok(r) => replies.push(r),
                Err(_) => break,
            }
        }
        replies.sort_by_key(|r| r.core);
        replies
    }

    fn drain(&mut self) {
        let deadline = Instant::now() + self.setup.drain_window;
        tracing::info!(window = ?self.setup.drain_window, "draining");
        for core in &self.setup.cores {
            let _ = core.send(CoreCommand::Drain { deadline });
        }
    }

    fn collect(&mut self) -> Vec<CoreReport> {
        self.collect_with(false)
    }

    /// Sends `command()` to every running core; returns how many took it.
    fn send_running(&self, command: impl Fn() -> CoreCommand) -> usize {
        let mut sent = 0;
        for (i, core) in self.setup.cores.iter().enumerate() {
            if !self.stopped.get(i).copied().unwrap_or(true) && core.send(command()).is_ok() {
                sent += 1;
            }
        }
        sent
    }

    /// Every running core's report; with `digests`, their digest tables too.
    fn collect_with(&mut self, digests: bool) -> Vec<CoreReport> {
        let (tx, rx) = unbounded();
        let expected = self.send_running(|| CoreCommand::Collect { reply: tx.clone(), digests });
        let deadline = Instant::now() + CORE_REPLY_TIMEOUT;
        let mut reports = Vec::with_capacity(expected);
        while reports.len() < expected {
            match rx.recv_deadline(deadline) {
                Ok(r) => reports.push(r),
                Err(_) => break,
            }
        }
        reports.sort_by_key(|r| r.core);
        reports
    }

    fn wait_all_stopped(&mut self, events: &Receiver<CoreEvent>) {
        let deadline = Instant::now() + self.setup.drain_window + CORE_REPLY_TIMEOUT;
        while !self.stopped.iter().all(|s| *s) {
            match events.recv_deadline(deadline) {
                Ok(e) => self.on_event(e),
                Err(_) => break,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(auth: &str) -> Config {
        let text = format!(
            "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\n\
             backends = [{{ host = \"h\", port = 1 }}]\n\n[routing]\ndefault_pool = \"main\"\n\n[auth]\n{auth}"
        );
        Config::parse(&text, "t.toml").expect("valid config")
    }

    #[test]
    fn mock_salts_come_from_the_key_else_stay_the_same_across_reloads() {
        let (mut first, mut reloaded, mut other_start) = (config(""), config(""), config(""));
        seed_mock_salts(&mut first, None);
        seed_mock_salts(&mut reloaded, Some(&first));
        seed_mock_salts(&mut other_start, None);
        assert_eq!(reloaded.auth.mock_seed, first.auth.mock_seed, "a reload keeps the random key");
        assert_ne!(other_start.auth.mock_seed, first.auth.mock_seed, "a start draws a new one");
        let (mut keyed, mut keyed_again) = (config("mock_salt_key = \"k\"\n"), config("mock_salt_key = \"k\"\n"));
        seed_mock_salts(&mut keyed, Some(&first));
        seed_mock_salts(&mut keyed_again, None);
        assert_eq!(keyed.auth.mock_seed, keyed_again.auth.mock_seed, "a configured key wins, at every start");
        assert_eq!(keyed.auth.mock_seed, crate::auth::mock::seed_from_key("k"));
        let mut unkeyed = config("");
        seed_mock_salts(&mut unkeyed, Some(&keyed));
        assert_ne!(unkeyed.auth.mock_seed, keyed.auth.mock_seed, "dropping the key draws a random one");
    }
}
