//! The runtime boundary: the only module that names `glommio`.
//!
//! It owns executors pinned to CPUs, task queues, SO_REUSEPORT listeners, connects with a deadline,
//! the clock, and panic containment for session tasks. Everything above it (pool, session, core)
//! sees plain functions and types from here, so the data plane could move to another
//! thread-per-core runtime by rewriting this module alone. Must not depend on any other module of
//! the crate.

mod event;
mod executor;
mod guard;
mod io;
mod net;
mod time;

pub use event::{Event, EventWait};
pub use executor::{spawn_core, CoreHandle, CoreQueues, RtError};
pub use guard::{current_queue, spawn_guarded, spawn_local, Task};
pub use io::{linger_close, read_some, write_all};
pub use net::{bind_reuseport, connect, detach, idle_stream_usable, readable_now, Listener, Stream};
pub use time::{now, race, sleep, sleep_until, with_deadline, within, Elapsed};
