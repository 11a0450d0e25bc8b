//! MySQL's grammar of session effects: `SET` (session variables, `NAMES`, the session's
//! transaction characteristics; `GLOBAL` and `STATEMENT` change no session), `USE`, user
//! variables, `GET_LOCK`, `LOCK TABLES`, `CREATE TEMPORARY TABLE`, SQL `PREPARE` and
//! `LAST_INSERT_ID()`.
//!
//! MySQL `SET` is not transactional, and `LOCAL` is a synonym of `SESSION`.

use super::{calls, creates_temp, pin, unquote, word, Effect, PinReason, MYSQL_ACCESS_MODE, MYSQL_ISOLATION};
use crate::lexer::{Token, TokenKind};
use crate::split;

/// The effects of one statement (not a stored program's definition).
pub(super) fn classify(sql: &str, stmt: &[Token<'_>], out: &mut Vec<Effect>) {
    let Some(first) = stmt.first() else { return };
    let second = stmt.get(1);
    if first.is_word("SET") {
        classify_set(sql, stmt.get(1..).unwrap_or_default(), out);
    } else if first.is_word("USE") {
        if let Some(db) = second {
            out.push(Effect::Use(unquote(db.text, '`')));
        }
    } else if first.is_word("PREPARE") {
        out.push(Effect::Pin(PinReason::SqlPrepare));
    } else if first.is_word("LOCK") && (word(second, "TABLES") || word(second, "TABLE")) {
        out.push(Effect::Pin(PinReason::LockTables));
    } else if creates_temp(stmt, &["TEMPORARY"], 4) {
        out.push(Effect::Pin(PinReason::TempObject));
    }
    // One pass in token order, so the first pin named is the first one written.
    let mut calls = calls(stmt, false).peekable();
    for (i, t) in stmt.iter().enumerate() {
        if t.kind == TokenKind::Variable {
            if !t.text.starts_with("@@") {
                pin(out, PinReason::UserVariable);
            }
            let v = t.text.to_ascii_lowercase();
            if v.ends_with("identity") || v.ends_with("last_insert_id") {
                pin(out, PinReason::LastInsertId);
            }
        }
        let Some((_, f)) = calls.next_if(|(at, _)| *at == i) else { continue };
        if f.eq_ignore_ascii_case("GET_LOCK") {
            pin(out, PinReason::AdvisoryLock);
        } else if f.eq_ignore_ascii_case("LAST_INSERT_ID") {
            pin(out, PinReason::LastInsertId);
        }
    }
}

/// `SET` forms: `SET [SESSION|LOCAL|@@session.|@@] var = expr [, ...]`, `SET NAMES`, `SET
/// CHARACTER SET`, `SET TRANSACTION`, `SET GLOBAL`, `SET @user = ...`.
fn classify_set(sql: &str, rest: &[Token<'_>], out: &mut Vec<Effect>) {
    let Some(first) = rest.first() else { return };
    if first.is_word("NAMES") || first.is_word("CHARSET") || (first.is_word("CHARACTER") && word(rest.get(1), "SET")) {
        let (Some(a), Some(b)) = (rest.first(), rest.last()) else { return };
        let text = sql.get(a.start..b.end()).unwrap_or("");
        out.push(Effect::Set { name: "names".into(), stmt: format!("SET {text}") });
        return;
    }
    if first.is_word("TRANSACTION") || first.is_word("ROLE") || first.is_word("DEFAULT") || first.is_word("PASSWORD") {
        if !first.is_word("PASSWORD") {
            out.push(Effect::Pin(PinReason::UntrackedSetting));
        }
        return;
    }
    if first.is_word("SESSION") && word(rest.get(1), "TRANSACTION") {
        // Isolation level and access mode are separate settings: setting one keeps the other.
        for part in split::top_level(rest.get(2..).unwrap_or_default()) {
            let (Some(a), Some(b)) = (part.first(), part.last()) else { continue };
            let text = sql.get(a.start..b.end()).unwrap_or("");
            let name = if a.is_word("ISOLATION") { MYSQL_ISOLATION } else { MYSQL_ACCESS_MODE };
            out.push(Effect::Set { name: name.into(), stmt: format!("SET SESSION TRANSACTION {text}") });
        }
        return;
    }
    if first.is_word("STATEMENT") || first.is_word("GLOBAL") || first.text.to_ascii_lowercase().starts_with("@@global.")
    {
        return; // per-statement or server-wide: no session state
    }
    for assignment in split::top_level(rest) {
        classify_assignment(sql, assignment, out);
    }
}

fn classify_assignment(sql: &str, tokens: &[Token<'_>], out: &mut Vec<Effect>) {
    let mut toks = tokens;
    if toks.first().is_some_and(|t| t.is_word("SESSION") || t.is_word("LOCAL")) {
        toks = toks.get(1..).unwrap_or_default();
    }
    let Some(var) = toks.first() else { return };
    if var.is_word("GLOBAL") {
        return;
    }
    let lower = var.text.to_ascii_lowercase();
    let name = match var.kind {
        TokenKind::Variable if lower.starts_with("@@global.") => return,
        TokenKind::Variable if lower.starts_with("@@") => {
            lower.trim_start_matches("@@").trim_start_matches("session.").trim_start_matches("local.").to_owned()
        }
        TokenKind::Variable => {
            pin(out, PinReason::UserVariable);
            return;
        }
        TokenKind::Word | TokenKind::QuotedIdent => unquote(&lower, '`'),
        _ => return,
    };
    let Some(value_from) = toks.iter().position(|t| t.kind == TokenKind::Operator).map(|p| p + 1) else { return };
    let (Some(a), Some(b)) = (toks.get(value_from), toks.last()) else { return };
    // Spellings of one setting share its key, so the last one set is the one replayed.
    let key = match name.as_str() {
        "tx_isolation" | "transaction_isolation" => MYSQL_ISOLATION.to_owned(),
        "tx_read_only" | "transaction_read_only" => MYSQL_ACCESS_MODE.to_owned(),
        _ => name.clone(),
    };
    if value_from + 1 == toks.len() && a.is_word("DEFAULT") {
        // Back to the server's default: nothing of the client's is left to carry (#35: `SET
        // sql_select_limit = DEFAULT` must lift what the setting refused).
        out.push(Effect::Reset(key));
        return;
    }
    let value = sql.get(a.start..b.end()).unwrap_or("");
    out.push(Effect::Set { name: key, stmt: format!("SET SESSION {name} = {value}") });
}
