//! A statement's text with its reading as one transaction statement, made at most once per
//! statement for both wires (#37, #39): routing it, holding back a read-only start, resending a
//! lone `BEGIN` and what follows ask up to four times.

use std::cell::OnceCell;

use crate::sql::analyze::{transaction_statement, TxKind, TxStatement};
use crate::sql::Dialect;

/// A statement's text in its client's dialect, read as a transaction statement on first ask.
pub struct Text<'a> {
    pub sql: &'a str,
    dialect: Dialect,
    tx: OnceCell<Option<TxStatement>>,
}

impl<'a> Text<'a> {
    /// A PostgreSQL client's statement.
    pub fn pg(sql: &'a str) -> Self {
        Self { sql, dialect: Dialect::Postgres, tx: OnceCell::new() }
    }

    /// A MySQL client's statement.
    pub fn mysql(sql: &'a str) -> Self {
        Self { sql, dialect: Dialect::MySql, tx: OnceCell::new() }
    }

    /// The dialect it is written in.
    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Its reading as one transaction statement ([`transaction_statement`]).
    pub fn transaction(&self) -> Option<TxStatement> {
        *self.tx.get_or_init(|| transaction_statement(self.sql, self.dialect))
    }

    /// Whether it is one `BEGIN` or `START TRANSACTION` and nothing else. MySQL's `BEGIN` takes
    /// no options: one with some is MariaDB's `BEGIN NOT ATOMIC` block, which opens none.
    pub fn is_lone_begin(&self) -> bool {
        self.transaction().is_some_and(|t| t.kind == TxKind::Begin && (t.plain || self.dialect == Dialect::Postgres))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lone_begin_is_one_transaction_start_in_either_dialect() {
        for sql in ["BEGIN", "begin work;", "START TRANSACTION READ ONLY", "/* app */ START TRANSACTION"] {
            assert!(Text::pg(sql).is_lone_begin(), "{sql}");
            assert!(Text::mysql(sql).is_lone_begin(), "{sql}");
        }
        assert!(Text::pg("BEGIN ISOLATION LEVEL SERIALIZABLE").is_lone_begin());
        for sql in ["BEGIN; SELECT 1", "SELECT 1", "XA START 'x'", "COMMIT", "SET TRANSACTION READ ONLY"] {
            assert!(!Text::pg(sql).is_lone_begin(), "{sql}");
            assert!(!Text::mysql(sql).is_lone_begin(), "{sql}");
        }
        assert!(!Text::mysql("BEGIN NOT ATOMIC END").is_lone_begin(), "a compound block");
    }
}
