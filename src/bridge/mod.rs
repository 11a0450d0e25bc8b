//! Cross-protocol bridge: serves a MySQL client from a PostgreSQL backend (a pool whose
//! `protocol = "postgres"` is reached from a MySQL listener).
//!
//! Everything here is sans-IO: the MySQL session driver (`session::mysql::bridged`) owns the
//! sockets and feeds backend messages through [`response::ResultWriter`]. What it owns: the type
//! mapping ([`types`]), value conversion both ways ([`value`]), `?` → `$n` ([`placeholder`]),
//! CommandComplete tags ([`tag`]), SQLSTATE → MySQL error numbers ([`errmap`]) and the table of
//! emulated session commands ([`emulated`]).
//!
//! May use protocol, sql, config; must not depend on session, routing, control or admin.
//! PostgreSQL client → MySQL backend is not implemented (see README.md "Cross-protocol pools").

pub mod emulated;
pub mod errmap;
pub mod placeholder;
pub mod response;
pub mod tag;
pub mod types;
pub mod value;

#[cfg(test)]
mod tests;

pub use response::{encode_local_result, status_flags, ResultWriter, RowFormat, Step, Warning};
pub use types::{map_type, Column, ValueKind};
