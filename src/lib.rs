//! QueryPilot Router: a thread-per-core SQL proxy for PostgreSQL and MySQL/MariaDB.
//!
//! Layering (enforced by `tests/architecture.rs`; see `../shared/DESIGN.md`):
//!
//! ```text
//! L4  admin                         REST API and /metrics on its own thread
//! L3  core        control  handover per-core assembly | control-plane thread | binary upgrade
//! L2  session  bridge  pool  rt     data plane on rt's per-core io_uring event loops
//! L1  routing                       pure decision engine
//! L0  protocol  sql  config  metrics  auth   pure: no runtime, sockets, clocks or globals
//! ```
//!
//! A module may use only modules of a lower layer, and only those DESIGN.md allows. `protocol` and
//! `sql` are workspace crates (`crates/querypilot-{protocol,sql}`) re-exported under those names,
//! so Cargo, beyond the test, keeps every crate but those their manifests list out of them.

// Bad input must become an error, never a panic: no unwrap/expect outside tests.
#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
// An eager argument to `ok_or`/`unwrap_or` (a String built on every call) cost the relay an
// allocation per backend frame once: such arguments must be lazy.
#![deny(clippy::or_fun_call)]

/// Fails to compile when any listed type is `Send`: a core-local type stays on its core by type,
/// not by convention (DESIGN.md, thread-per-core rules). Written out rather than taken from
/// `static_assertions`: for a `Send` type both impls below apply, so the path to `some_item` is
/// ambiguous, and an ambiguous path is an error.
macro_rules! assert_not_send {
    ($($t:ty),+ $(,)?) => {
        const _: fn() = || {
            trait AmbiguousIfSend<A> {
                fn some_item() {}
            }
            impl<T: ?Sized> AmbiguousIfSend<()> for T {}
            struct Invalid;
            impl<T: ?Sized + Send> AmbiguousIfSend<Invalid> for T {}
            $(let _ = <$t as AmbiguousIfSend<_>>::some_item;)+
        };
    };
}

pub mod admin;
pub mod app;
pub mod auth;
pub mod bridge;
pub mod config;
pub mod control;
pub mod core;
pub mod error;
pub mod handover;
pub mod id;
pub mod metrics;
pub mod pool;
pub use querypilot_protocol as protocol;
pub mod routing;
pub mod rt;
pub mod session;
pub use querypilot_sql as sql;
