//! The runtime boundary: the data plane's own event loop, one per core.
//!
//! Each core runs one thread with one io_uring and a single-threaded executor of `!Send` tasks
//! in two priority queues (latency, background). Socket I/O (accept, connect, recv, send) is
//! submitted as ring operations whose buffers the ring owns until completion; timers live in a
//! core-local heap and bound the loop's one `io_uring_enter` per iteration; other threads wake a
//! core through its eventfd. It also owns SO_REUSEPORT listeners, the clock, and panic
//! containment for session tasks. Everything above it (pool, session, core) sees plain
//! functions and types from here. Must not depend on any other module of the crate.

mod event;
mod executor;
mod fair;
mod guard;
mod io;
mod net;
mod provided;
mod reboxed;
mod ring;
mod spare;
mod time;
mod timer;
mod tls;

#[cfg(test)]
mod tests;

pub use event::{unless_set, Event, EventWait, UnlessSet};
pub use executor::{notified, spawn_core, CoreHandle, CoreQueues, Notified, Notifier, RtError, TaskQueue};
pub use fair::{take_share, turn, yield_now, Share, YieldNow};
pub use guard::{current_queue, spawn_guarded, spawn_local};
pub use io::{hand_off, linger_close, read_some, watch, write_all, write_for_answer, Handed};
pub use net::{bind_reuseport, connect, detach, idle_stream_usable, readable_now, Listener, Stream};
pub use reboxed::{rebox, Reboxed};
pub use spare::{recycle, refill, spare_buffer};
pub use time::{now, race, since, sleep, sleep_lazy_until, sleep_until, with_deadline, within, Deadline, Elapsed};
pub use timer::Sleep;
pub use tls::{accept_tls, peer_certificate, start_tls, Accepted, FrozenTls};

/// Fails the build if a listed type is `Send`: these are core-local (an operation names a slot
/// in its own core's ring, a sleep a timer in its core's map, a notification wait its core's
/// count) and must be `!Send` by type, not by convention. If `T: Send`, both
/// impls below apply and `<T as NotSend<_>>::check` is ambiguous.
macro_rules! assert_not_send {
    ($($t:ty),+) => {
        const _: fn() = || {
            trait NotSend<A> {
                fn check() {}
            }
            impl<T: ?Sized> NotSend<()> for T {}
            impl<T: ?Sized + Send> NotSend<u8> for T {}
            $(<$t as NotSend<_>>::check();)+
        };
    };
}

assert_not_send!(ring::Op, Stream, Listener, Sleep, Notified);
