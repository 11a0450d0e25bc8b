//! A statement's text with its reading as one transaction statement, made at most once per
//! statement for both wires (#37, #39): routing it, holding back a read-only start, resending a
//! lone `BEGIN` and what follows ask up to four times.

use std::cell::OnceCell;

use crate::sql::analyze::{transaction_statement, AccessMode, TxKind, TxStatement};
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

    /// Its reading as one transaction statement ([`transaction_statement`]).
    pub fn transaction(&self) -> Option<TxStatement> {
        *self.tx.get_or_init(|| transaction_statement(self.sql, self.dialect))
    }

    /// Whether it is one `BEGIN` or `START TRANSACTION` and nothing else. MySQL's `BEGIN` takes
    /// no options: one with some is MariaDB's `BEGIN NOT ATOMIC` block, which opens none.
    pub fn is_lone_begin(&self) -> bool {
        self.transaction().is_some_and(|t| t.kind == TxKind::Begin && (t.plain || self.dialect == Dialect::Postgres))
    }

    /// Whether it opens or sets a `READ ONLY` transaction: nothing run in it changes data.
    pub fn declares_read_only(&self) -> bool {
        self.transaction().is_some_and(|t| t.access == Some(AccessMode::ReadOnly))
    }

    /// The access mode it declares when it is a lone `SET TRANSACTION` that declares one.
    pub fn set_transaction_access(&self) -> Option<AccessMode> {
        self.transaction().filter(|t| t.kind == TxKind::SetTransaction).and_then(|t| t.access)
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

    #[test]
    fn access_modes_are_read_from_the_one_reading() {
        let text = Text::mysql("SET TRANSACTION READ ONLY");
        assert_eq!(text.set_transaction_access(), Some(AccessMode::ReadOnly));
        assert!(text.declares_read_only() && !text.is_lone_begin());
        assert_eq!(Text::pg("BEGIN READ WRITE").set_transaction_access(), None, "a BEGIN, not a SET");
        assert!(!Text::pg("START TRANSACTION READ WRITE").declares_read_only());
    }
}
