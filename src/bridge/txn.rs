//! What the bridge reads of a statement's transaction control, both ways: whether it controls
//! a transaction itself (no emulated `BEGIN` before it; it cannot run on a connection borrowed
//! for one statement), opens one, or ends one without committing; and the MySQL-only
//! statements a PostgreSQL backend cannot carry.

use crate::protocol::pg::TransactionStatus;
use crate::sql::analyze::{transaction_statement, TxKind};
use crate::sql::lexer::{Lexer, TokenKind};
use crate::sql::Dialect;

/// Whether `sql`, read in `dialect`, starts (after comments) with one of `words`.
fn starts_with_word(sql: &str, dialect: Dialect, words: &[&str]) -> bool {
    let first = Lexer::new(sql, dialect).find(|t| t.kind != TokenKind::Comment);
    first.is_some_and(|t| words.iter().any(|w| t.is_word(w)))
}

/// Whether PostgreSQL text `sql` controls a transaction.
#[must_use]
pub fn pg_controls_transaction(sql: &str) -> bool {
    let words = ["BEGIN", "START", "COMMIT", "ROLLBACK", "END", "ABORT", "SAVEPOINT", "RELEASE", "PREPARE"];
    starts_with_word(sql, Dialect::Postgres, &words)
}

/// Whether a MySQL client's statement `sql` controls a transaction.
#[must_use]
pub fn my_controls_transaction(sql: &str) -> bool {
    starts_with_word(sql, Dialect::MySql, &["BEGIN", "START", "COMMIT", "ROLLBACK", "END", "ABORT"])
}

/// A statement of `sql` (a MySQL client's text, one statement or several) opens a
/// transaction: it starts with `BEGIN` or `START` (`START TRANSACTION`; any other `START` too:
/// counting one more transaction unproven is only cautious).
#[must_use]
pub fn opens_transaction(sql: &str) -> bool {
    let mut at_start = true;
    for t in Lexer::new(sql, Dialect::MySql).filter(|t| t.kind != TokenKind::Comment) {
        if at_start && (t.is_word("BEGIN") || t.is_word("START")) {
            return true;
        }
        at_start = t.kind == TokenKind::Semicolon;
    }
    false
}

/// `sql` (PostgreSQL text) ends the transaction, whose state is `tx`, without committing: a
/// lone `ROLLBACK`/`ABORT` (not `ROLLBACK TO SAVEPOINT`, nor `ROLLBACK PREPARED`, nor `AND
/// CHAIN`), or a lone COMMIT of a failed transaction.
#[must_use]
pub fn ends_uncommitted(sql: &str, tx: TransactionStatus) -> bool {
    match transaction_statement(sql, Dialect::Postgres) {
        Some(t) if t.plain => {
            t.kind == TxKind::Rollback || (t.kind == TxKind::Commit && tx == TransactionStatus::Failed)
        }
        _ => false,
    }
}

/// Why a PostgreSQL backend cannot carry a MySQL client's `sql`, which it would answer with a
/// syntax error that names neither the statement nor what to use instead: `LOAD DATA` (the
/// bridge carries no files) and XA (PostgreSQL's two-phase commit is `PREPARE TRANSACTION`,
/// which passes through as written). `None` for anything else.
#[must_use]
pub fn uncarried(sql: &str) -> Option<&'static str> {
    if starts_with_word(sql, Dialect::MySql, &["LOAD"]) {
        return Some(
            "LOAD DATA is not supported through a PostgreSQL pool (the bridge carries no files); \
             insert the rows with INSERT instead",
        );
    }
    starts_with_word(sql, Dialect::MySql, &["XA"]).then_some(
        "XA transactions are not supported through a PostgreSQL pool; use PostgreSQL's two-phase commit \
         (BEGIN; ...; PREPARE TRANSACTION 'gid', then COMMIT PREPARED 'gid'), which passes through as written",
    )
}

#[cfg(test)]
mod tests;
