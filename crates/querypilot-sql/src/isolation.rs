//! Session settings a standby cannot serve (#19 case 9): a session whose transactions default to
//! SERIALIZABLE. A PostgreSQL hot standby refuses serializable transactions ("cannot use
//! serializable mode in a hot standby"), so replaying the setting there fails every read; on a
//! MySQL replica a serializable read locks rows on the replica instead of the primary the
//! writers use. Such a session reads from the primary.

use super::lexer::{Lexer, Token, TokenKind};
use super::Dialect;

/// Whether the session's default isolation is SERIALIZABLE after `sql` ran, given `current`
/// and the `startup` value RESET returns to. Over-estimating only costs replica reads, so a
/// change towards SERIALIZABLE is always believed, one away from it only outside a
/// transaction (PostgreSQL rolls SETs back with theirs), and forms this cannot read count as
/// SERIALIZABLE.
pub fn serializable_after(sql: &str, dialect: Dialect, in_transaction: bool, current: bool, startup: bool) -> bool {
    let relevant = contains_ignore_case(sql, "isolation") || (dialect == Dialect::Postgres && resets(sql));
    if !relevant {
        return current;
    }
    let tokens: Vec<Token<'_>> = Lexer::new(sql, dialect).filter(|t| t.kind != TokenKind::Comment).collect();
    let mut next = current;
    for st in tokens.split(|t| t.kind == TokenKind::Semicolon) {
        if let Some(v) = statement(st, dialect, startup) {
            next = v;
        }
    }
    if next || !in_transaction || dialect == Dialect::MySql {
        next
    } else {
        current
    }
}

fn contains_ignore_case(haystack: &str, needle: &str) -> bool {
    let n = needle.as_bytes();
    haystack.as_bytes().windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

fn resets(sql: &str) -> bool {
    contains_ignore_case(sql, "reset") || contains_ignore_case(sql, "discard")
}

/// The session default a statement sets: `Some(serializable?)`, `None` when it sets none.
fn statement(st: &[Token<'_>], dialect: Dialect, startup: bool) -> Option<bool> {
    let first = st.first()?;
    let word = |i: usize, w: &str| st.get(i).is_some_and(|t| t.is_word(w));
    let mentions = st.iter().any(|t| contains_ignore_case(t.text, "isolation"));
    if dialect == Dialect::Postgres && (first.is_word("RESET") || first.is_word("DISCARD")) {
        let all = word(1, "ALL");
        return (all || word(1, "default_transaction_isolation")).then_some(startup);
    }
    if !first.is_word("SET") {
        // set_config('default_transaction_isolation', ...) and the like: not followed.
        let sets = st.iter().any(|t| t.is_word("set_config"));
        return (mentions && sets).then_some(true);
    }
    // SET SESSION CHARACTERISTICS AS TRANSACTION ... (PostgreSQL) / SET SESSION TRANSACTION ...
    // (MySQL): the session default. SET TRANSACTION alone is one transaction's.
    let session_tx =
        (word(1, "SESSION") && word(2, "CHARACTERISTICS")) || (word(1, "SESSION") && word(2, "TRANSACTION"));
    if session_tx {
        return level(st);
    }
    if word(1, "TRANSACTION") || word(1, "GLOBAL") {
        return None;
    }
    let names = ["default_transaction_isolation", "transaction_isolation", "tx_isolation"];
    let target = st.iter().position(|t| {
        let bare = t.text.to_ascii_lowercase();
        let bare = bare.trim_start_matches("@@").trim_start_matches("session.").trim_matches('"').trim_matches('`');
        names.contains(&bare)
    })?;
    let name = st.get(target)?.text.to_ascii_lowercase();
    if name.contains("global.") {
        return None;
    }
    // PostgreSQL `transaction_isolation` is the current transaction's only.
    if dialect == Dialect::Postgres && !name.contains("default_transaction_isolation") {
        return None;
    }
    let value = st.get(target + 1..)?.iter().find(|t| !(t.is_word("TO") || t.text == "="))?;
    if value.is_word("DEFAULT") {
        return Some(startup);
    }
    match value.kind {
        TokenKind::String(_) | TokenKind::Word | TokenKind::QuotedIdent => {
            let text = value.text.trim_matches(|c| c == '\'' || c == '"' || c == '`').to_ascii_lowercase();
            Some(!matches!(
                text.as_str(),
                "read committed"
                    | "read uncommitted"
                    | "repeatable read"
                    | "read-committed"
                    | "read-uncommitted"
                    | "repeatable-read"
            ))
        }
        // `SET sql_var = @v` and other expressions: unknown, so serializable.
        _ => Some(true),
    }
}

/// `ISOLATION LEVEL <level>` in a SET SESSION ... TRANSACTION statement: serializable or not.
fn level(st: &[Token<'_>]) -> Option<bool> {
    let at = st.windows(2).position(|w| {
        w.first().is_some_and(|t| t.is_word("ISOLATION")) && w.get(1).is_some_and(|t| t.is_word("LEVEL"))
    })?;
    Some(st.get(at + 2).is_some_and(|t| t.is_word("SERIALIZABLE")))
}
