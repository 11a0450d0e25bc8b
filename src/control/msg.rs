//! Plain `Send` messages between the control plane and the cores.

use std::sync::Arc;
use std::time::Instant;

use crate::config::Config;
use crate::metrics::CounterSnapshot;
pub use crate::id::{CancelKey, CoreId, RulesVersion};

/// An immutable view of everything a core needs to serve traffic.
#[derive(Debug)]
pub struct Snapshot {
    /// Version of this snapshot; cores acknowledge it.
    pub version: RulesVersion,
    /// The validated configuration.
    pub config: Arc<Config>,
}

/// What the control plane asks of a core.
#[derive(Debug)]
pub enum CoreCommand {
    /// Swap to this snapshot between statements and acknowledge.
    Apply(Arc<Snapshot>),
    /// Report counters on the given channel.
    Collect(crossbeam_channel::Sender<CoreReport>),
    /// Cancel the statement of a session this core owns.
    Cancel(CancelKey),
    /// Stop accepting; let sessions finish until the deadline, then close them and stop.
    Drain {
        /// When remaining sessions are closed.
        deadline: Instant,
    },
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
    /// A cancel arrived on this core for a session of another core.
    ForwardCancel(CancelKey),
    /// The core's executor finished draining.
    Stopped(CoreId),
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
}
