//! Cross-protocol bridge: serves a MySQL client from a PostgreSQL backend (a pool whose
//! `protocol = "postgres"` is reached from a MySQL listener), and a PostgreSQL client from a
//! MySQL backend (`protocol = "mysql"` reached from a PostgreSQL listener).
//!
//! Everything here is sans-IO: the session drivers (`session::mysql::bridged`,
//! `session::pg::bridged`) own the sockets and feed backend messages through
//! [`response::ResultWriter`] or [`pg_result::PgResultWriter`]. What it owns: the type mappings
//! ([`types`] PostgreSQL → MySQL, [`pg_column`] MySQL → PostgreSQL), value conversion
//! ([`value`], [`pg_value`]), placeholders both ways ([`placeholder`]), CommandComplete tags both
//! ways ([`tag`]), error mapping both ways ([`errmap`]), the table of emulated MySQL session
//! commands ([`emulated`]), the parameters a PostgreSQL client is greeted with ([`pg_params`])
//! the MySQL session settings carried to PostgreSQL for one statement ([`session_map`]), and
//! PostgreSQL Bind values written into SQL text as literals ([`pg_inline`]).
//!
//! May use protocol, sql, config; must not depend on session, routing, control or admin.

pub mod emulated;
pub mod errmap;
pub mod pg_column;
pub mod pg_inline;
pub mod pg_params;
pub mod pg_portal;
pub mod pg_result;
pub mod pg_value;
pub mod placeholder;
pub mod response;
pub mod session_map;
pub mod tag;
pub mod txn;
pub mod types;
pub mod value;

#[cfg(test)]
mod tests;

pub use response::{encode_local_result, session_flags, status_flags, ResultWriter, RowFormat, Step, Warning};
pub use types::{map_type, Column, ValueKind};
