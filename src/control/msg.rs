//! Plain `Send` messages between the control plane and the cores.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::time::Instant;

use crate::config::{Config, ConsoleRole, PatternRule, Protocol, TranslationRule};
pub use crate::id::{CancelKey, CoreId, KillRequest, KillTarget, RulesVersion};
use crate::metrics::{CounterSnapshot, DigestSnapshot};
use crate::routing::{Catalogs, RuleErrors, RuleSet};

/// An immutable view of everything a core needs to serve traffic.
#[derive(Debug)]
pub struct Snapshot {
    /// Version of this snapshot; cores acknowledge it.
    pub version: RulesVersion,
    /// The validated configuration.
    pub config: Arc<Config>,
    /// The compiled routing rules: the configuration's, plus the pattern rules and translations
    /// added through the admin API since the last reload.
    pub rules: Arc<RuleSet>,
}

impl Snapshot {
    /// Compiles the rules of `config` plus the runtime-added `dynamic` pattern rules and
    /// `translations`; fails with every rule error when any rule does not compile.
    pub fn build(
        version: RulesVersion,
        config: Arc<Config>,
        dynamic: &[PatternRule],
        translations: &[TranslationRule],
    ) -> Result<Snapshot, RuleErrors> {
        let rules = Arc::new(RuleSet::build(&config, dynamic, translations)?);
        Ok(Snapshot { version, config, rules })
    }
}

/// A core's command inbox: the channel plus a wake-up of the core's event loop, so a command
/// (a cancel forwarded from another core, a reload) is handled at once rather than at the core's
/// next maintenance tick. The wake-up is a plain function so the control plane names no runtime.
#[derive(Clone)]
pub struct CoreInbox {
    tx: crossbeam_channel::Sender<CoreCommand>,
    wake: Arc<dyn Fn() + Send + Sync>,
}

impl CoreInbox {
    /// An inbox sending on `tx` and calling `wake` after each command.
    pub fn new(tx: crossbeam_channel::Sender<CoreCommand>, wake: impl Fn() + Send + Sync + 'static) -> Self {
        CoreInbox { tx, wake: Arc::new(wake) }
    }

    /// Queues `cmd` for the core and wakes it; fails when the core has stopped.
    pub fn send(&self, cmd: CoreCommand) -> Result<(), crossbeam_channel::SendError<CoreCommand>> {
        self.tx.send(cmd)?;
        (self.wake)();
        Ok(())
    }
}

impl std::fmt::Debug for CoreInbox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreInbox").finish_non_exhaustive()
    }
}

/// What the control plane asks of a core.
#[derive(Debug)]
pub enum CoreCommand {
    /// Swap to this snapshot between statements and acknowledge.
    Apply(Arc<Snapshot>),
    /// Analyze with these function catalogs from now on (loaded from the backends).
    SetCatalogs(Catalogs),
    /// Report counters (and the digest table when `digests` is set) on `reply`.
    Collect {
        /// Where the report goes.
        reply: crossbeam_channel::Sender<CoreReport>,
        /// Include the per-digest statistics (large; only the digest API asks).
        digests: bool,
    },
    /// Forget the digest statistics, then answer with the core's id.
    ResetDigests(crossbeam_channel::Sender<CoreId>),
    /// Cancel the statement of (or end) a session this core may own, then say on the channel
    /// whether it was found, once a cancel was delivered.
    Cancel(KillRequest, futures_channel::mpsc::UnboundedSender<bool>),
    /// PAUSE: hold new checkouts of `pool` (every pool when `None`), wait until the connections
    /// lent out come back or `deadline` passes, close the idle ones, then report.
    Pause {
        /// The pool, or every pool.
        pool: Option<String>,
        /// When to stop waiting for transactions in flight.
        deadline: Instant,
        /// Where the report goes.
        reply: crossbeam_channel::Sender<PauseReport>,
    },
    /// RESUME: let the held checkouts of `pool` (every pool when `None`) go on, then answer.
    Resume {
        /// The pool, or every pool.
        pool: Option<String>,
        /// Acknowledgement.
        reply: crossbeam_channel::Sender<CoreId>,
    },
    /// RECONNECT: close the idle server connections of `pool` (every pool when `None`) now and
    /// the lent ones when they come back, then answer.
    Reconnect {
        /// The pool, or every pool.
        pool: Option<String>,
        /// Acknowledgement.
        reply: crossbeam_channel::Sender<CoreId>,
    },
    /// KILL: end every session on `pool` at once and pause the pool (RESUME lets new
    /// statements in), closing its idle server connections; then answer.
    Kill {
        /// The pool.
        pool: String,
        /// Acknowledgement.
        reply: crossbeam_channel::Sender<CoreId>,
    },
    /// #36: close this core's idle server connections to `database` (and, on the core running
    /// the health prober, move its probes off it), then answer, by `deadline` at the latest: a
    /// client is about to drop, rename or copy that database, which needs it free.
    ReleaseDatabase {
        /// The database, as the server names it.
        database: String,
        /// When to answer even if a probe still holds the database.
        deadline: Instant,
        /// Where the core says it is done.
        reply: futures_channel::mpsc::UnboundedSender<CoreId>,
    },
    /// Stop accepting; let sessions finish until the deadline, then close them and stop.
    Drain {
        /// When remaining sessions are closed.
        deadline: Instant,
    },
    /// #40: hand this core's listeners and sessions to a new binary (see [`HandOver`]).
    HandOver(HandOver),
    /// #40: serve a client the former process handed over.
    Adopt(MovingClient),
}

/// #40: what a core does when the router hands over to a new binary: it answers `reply` with
/// duplicates of its listening sockets and its cancel-key sequence, stops accepting, sends each
/// session that moves to `sink` (busy ones once idle, until `deadline`), then ends like a drain
/// and says [`Moving::Stopped`] on `sink`.
#[derive(Debug)]
pub struct HandOver {
    /// Where the sessions go.
    pub sink: crossbeam_channel::Sender<Moving>,
    /// When the sessions still busy are closed.
    pub deadline: Instant,
    /// Where the listeners go.
    pub reply: crossbeam_channel::Sender<CoreListeners>,
}

/// A core's listening sockets, duplicated for the new binary.
#[derive(Debug)]
pub struct CoreListeners {
    /// Which core.
    pub core: CoreId,
    /// The first cancel-key sequence number this core will not issue (with room for the
    /// sessions still logging in).
    pub next_seq: u32,
    /// Per listener (config index) the socket; a listener the core no longer accepts on is
    /// missing.
    pub listeners: Vec<(usize, OwnedFd)>,
}

/// #40: what a core of a new binary takes from the old process.
#[derive(Debug, Default)]
pub struct Inherited {
    /// Per listener (config index) the sockets of the old process's cores this core accepts on;
    /// a listener with none is bound by the core itself.
    pub listeners: Vec<Vec<OwnedFd>>,
    /// The first cancel-key sequence number this core may issue.
    pub next_seq: Option<u32>,
}

/// What the cores of a router handing over send to the hand-over thread.
#[derive(Debug)]
pub enum Moving {
    /// A session moving to the new binary.
    Client(MovingClient),
    /// The core has stopped: no more sessions come from it.
    Stopped(CoreId),
}

/// A client connection between two processes, as plain data (the session's `HandedSession`).
#[derive(Debug)]
pub struct MovingClient {
    /// Its listener's protocol.
    pub protocol: Protocol,
    /// Its listener, by config index.
    pub listener: usize,
    /// The cancel key the client holds.
    pub key: CancelKey,
    /// The session's own encoding of its state.
    pub state: Vec<u8>,
    /// The client's socket.
    pub client: OwnedFd,
    /// The server connection the session owns, if it moves with one.
    pub backend: Option<OwnedFd>,
}

/// What a core tells the control plane.
#[derive(Debug)]
pub enum CoreEvent {
    /// The core swapped to this version.
    Applied {
        /// Which core.
        core: CoreId,
        /// The version now in use.
        version: RulesVersion,
    },
    /// Function catalogs loaded from the backends (core 0, after start and each reload), for
    /// every core and the dry-run.
    Catalogs(Catalogs),
    /// A cancel or KILL arrived on this core for a session of another core (or, for a MySQL
    /// server thread id, of any core); each core that looks answers on the channel.
    ForwardCancel(KillRequest, futures_channel::mpsc::UnboundedSender<bool>),
    /// #36: a session asks every core to let go of a database (see
    /// [`CoreCommand::ReleaseDatabase`]); each answers on the channel.
    ReleaseDatabase {
        /// The database.
        database: String,
        /// When the cores stop waiting for their probes.
        deadline: Instant,
        /// Where each core answers.
        reply: futures_channel::mpsc::UnboundedSender<CoreId>,
    },
    /// The core's executor finished draining.
    Stopped(CoreId),
}

/// A client of the admin console, logged in on a core and handed to the console thread.
#[derive(Debug)]
pub struct ConsoleClient {
    /// The client's connection, blocking.
    pub stream: std::net::TcpStream,
    /// Bytes the client sent after its password message, not yet read.
    pub leftover: Vec<u8>,
    /// The console user.
    pub user: String,
    /// What the user may do.
    pub role: ConsoleRole,
}

/// A core's answer to [`CoreCommand::Pause`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PauseReport {
    /// Which core.
    pub core: CoreId,
    /// Connections still lent out when the core stopped waiting (0: the pause is complete).
    pub in_use: u64,
}

/// A core's answer to [`CoreCommand::Collect`].
#[derive(Debug, Clone)]
pub struct CoreReport {
    /// Which core.
    pub core: CoreId,
    /// The snapshot version the core is serving.
    pub version: RulesVersion,
    /// Its counters.
    pub counters: CounterSnapshot,
    /// Its digest statistics (empty unless asked for).
    pub digests: DigestSnapshot,
}
