//! Sans-IO wire codecs for the two client/server protocols the router speaks.
//!
//! Nothing here performs I/O, reads a clock, logs or allocates before a length has been checked
//! against its limit. Must not depend on any other module of the crate.

pub mod mysql;
pub mod pg;
