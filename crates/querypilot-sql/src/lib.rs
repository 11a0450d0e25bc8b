//! Pure SQL understanding: tokenizing, fingerprinting, semantic facts for routing.
//!
//! Depends on `sqlparser` only; never on the router, a runtime or a clock. A crate of its own, so
//! Cargo keeps it off the router and I/O crates.

#![cfg_attr(not(test), deny(clippy::unwrap_used, clippy::expect_used))]
#![deny(clippy::or_fun_call)]

pub mod database_ddl;
pub mod fingerprint;
pub mod hint;
pub mod isolation;
pub mod lexer;
pub mod mode;
pub mod parse;
pub mod requote;
pub mod split;
pub mod template;

/// The SQL dialect a statement is written in, decided by the listener protocol it arrived on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Dialect {
    /// PostgreSQL: `E''` and dollar-quoted strings, `"` identifiers, nested block comments.
    Postgres,
    /// MySQL/MariaDB: backtick identifiers, backslash escapes, `#` comments.
    MySql,
}

pub mod analyze;
pub mod volatility;

#[cfg(test)]
mod mode_tests;
