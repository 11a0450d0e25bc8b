//! Sans-IO wire codecs for the two client/server protocols the router speaks.
//!
//! Nothing here performs I/O, reads a clock, logs or allocates before a length has been checked
//! against its limit. A crate of its own, so Cargo keeps it off the router and I/O crates.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![deny(clippy::or_fun_call)]

pub mod mysql;
pub mod pg;
