//! The single integration-test binary: one module per area, all sharing `support`
//! (real PostgreSQL and MariaDB servers, started once for the whole binary).

#[path = "../support/mod.rs"]
mod support;

mod harness;
mod abuse;
mod foundation;
mod router;
