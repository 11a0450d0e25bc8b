//! The one reading of transaction statements for both dialects (#37): whether a text is one
//! `BEGIN` / `START TRANSACTION`, `SET TRANSACTION`, `COMMIT` or `ROLLBACK` alone (comments and
//! a final `;` allowed), the access mode it declares, and whether it says anything more than the
//! router can repeat (an isolation level, `AND CHAIN`, `PREPARED`...). A text of several
//! statements is none of them: what follows could end the transaction.
//!
//! The grammar differs where the languages do: PostgreSQL's `BEGIN` takes the transaction modes
//! and `TRANSACTION` as a noise word, `END` commits and `ABORT` rolls back; MySQL's `BEGIN` takes only `WORK`, its
//! modes follow `START TRANSACTION` (with `WITH CONSISTENT SNAPSHOT`). Which statements open a
//! transaction anywhere in a text is [`super::opens_transaction`]'s.

use std::iter::Peekable;

use crate::lexer::{may_start_with, Lexer, Token, TokenKind};
use crate::Dialect;

#[cfg(test)]
mod tests;

/// What a transaction statement does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxKind {
    /// `BEGIN` / `START TRANSACTION`.
    Begin,
    /// `SET TRANSACTION`: the current (PostgreSQL) or next (MySQL) transaction's modes.
    SetTransaction,
    /// `COMMIT` (PostgreSQL's `END` too).
    Commit,
    /// `ROLLBACK` (PostgreSQL's `ABORT` too).
    Rollback,
}

/// The access mode a transaction statement declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessMode {
    /// `READ ONLY`.
    ReadOnly,
    /// `READ WRITE`.
    ReadWrite,
}

/// One transaction statement, read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TxStatement {
    /// What it does.
    pub kind: TxKind,
    /// The access mode among its modes; the last of `READ ONLY` / `READ WRITE` wins, as on the
    /// server.
    pub access: Option<AccessMode>,
    /// MySQL's `WITH CONSISTENT SNAPSHOT`.
    pub snapshot: bool,
    /// It says nothing but its kind, the dialect's noise word, an access mode and a snapshot: the
    /// router could say the same in its own words.
    pub plain: bool,
}

/// The words a transaction statement begins with (in any ASCII case).
const FIRST_WORDS: &[&str] = &["begin", "start", "set", "commit", "rollback", "end", "abort"];

/// Reads `sql` as one transaction statement in `dialect`, or `None` when it is not one alone.
pub fn transaction_statement(sql: &str, dialect: Dialect) -> Option<TxStatement> {
    // Asked several times for every statement: most begin with none of the words.
    if !may_start_with(sql, FIRST_WORDS) {
        return None;
    }
    let mut words = Lexer::new(sql, dialect).filter(|t| t.kind != TokenKind::Comment).peekable();
    let first = words.next()?;
    let pg = dialect == Dialect::Postgres;
    let (kind, modes) = if first.is_word("BEGIN") {
        (TxKind::Begin, pg)
    } else if first.is_word("START") && words.next()?.is_word("TRANSACTION") {
        (TxKind::Begin, true)
    } else if first.is_word("SET") && words.next()?.is_word("TRANSACTION") {
        (TxKind::SetTransaction, true)
    } else if first.is_word("COMMIT") || (pg && first.is_word("END")) {
        (TxKind::Commit, false)
    } else if first.is_word("ROLLBACK") || (pg && first.is_word("ABORT")) {
        (TxKind::Rollback, false)
    } else {
        return None;
    };
    let mut stmt = TxStatement { kind, access: None, snapshot: false, plain: true };
    // `BEGIN WORK`, `COMMIT TRANSACTION`...: `START` and `SET` took theirs above.
    let noise = |t: &Token<'_>| t.is_word("WORK") || (pg && t.is_word("TRANSACTION"));
    if !first.is_word("START") && !first.is_word("SET") && words.peek().is_some_and(noise) {
        words.next();
    }
    while let Some(t) = words.next() {
        match t.kind {
            TokenKind::Semicolon => return words.next().is_none().then_some(stmt),
            TokenKind::Comma if modes => {}
            _ if modes && t.is_word("READ") => match follows(&mut words, &["ONLY"], &["WRITE"]) {
                Some(true) => stmt.access = Some(AccessMode::ReadOnly),
                Some(false) => stmt.access = Some(AccessMode::ReadWrite),
                None => stmt.plain = false,
            },
            _ if modes && t.is_word("WITH") => match follows(&mut words, &["CONSISTENT", "SNAPSHOT"], &[]) {
                Some(_) => stmt.snapshot = true,
                None => stmt.plain = false,
            },
            _ => stmt.plain = false,
        }
    }
    Some(stmt)
}

/// Whether the next words are `yes` (`Some(true)`) or `no` (`Some(false)`), which are then
/// consumed; `None` (nothing consumed past the first word that differs) when they are neither.
fn follows<'a>(words: &mut Peekable<impl Iterator<Item = Token<'a>>>, yes: &[&str], no: &[&str]) -> Option<bool> {
    for (list, answer) in [(yes, true), (no, false)] {
        if list.first().is_some_and(|w| words.peek().is_some_and(|t| t.is_word(w))) {
            for w in list {
                words.next_if(|t| t.is_word(w))?;
            }
            return Some(answer);
        }
    }
    None
}
