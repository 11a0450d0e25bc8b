//! PostgreSQL's grammar of session effects: `SET` / `RESET` / `DISCARD ALL`, `LISTEN`, SQL
//! `PREPARE`, `DECLARE ... WITH HOLD`, temporary objects (`TEMP`, `pg_temp`), `DO` blocks,
//! session advisory locks and `set_config`.

use super::{calls, creates_temp, pin, unquote, word, Effect, PinReason};
use crate::lexer::{Token, TokenKind};

/// The effects of one statement.
pub(super) fn classify(sql: &str, stmt: &[Token<'_>], out: &mut Vec<Effect>) {
    let (Some(first), Some(last)) = (stmt.first(), stmt.last()) else { return };
    let text = sql.get(first.start..last.end()).unwrap_or("").trim();
    let second = stmt.get(1);
    let rest = stmt.get(1..).unwrap_or_default();
    if first.is_word("SET") {
        classify_set(text, rest, out);
    } else if first.is_word("RESET") {
        classify_reset(rest, out);
    } else if first.is_word("DISCARD") && word(second, "ALL") {
        out.push(Effect::ResetAll);
    } else if first.is_word("LISTEN") {
        out.push(Effect::Pin(PinReason::Listen));
    } else if first.is_word("PREPARE") && !word(second, "TRANSACTION") {
        out.push(Effect::Pin(PinReason::SqlPrepare));
    } else if first.is_word("DECLARE") && has_seq(stmt, &["WITH", "HOLD"]) {
        out.push(Effect::Pin(PinReason::HoldCursor));
    } else if creates_temp(stmt, &["TEMP", "TEMPORARY"], 5) {
        // CREATE [OR REPLACE] [GLOBAL|LOCAL] {TEMP|TEMPORARY} {TABLE|VIEW|SEQUENCE}.
        out.push(Effect::Pin(PinReason::TempObject));
    } else if first.is_word("DO") {
        // An anonymous block can run any statement through dynamic SQL (`EXECUTE 'SET RO' ||
        // 'LE x'`), which no reading of its text can rule out.
        out.push(Effect::Pin(PinReason::DoBlock));
    }
    if selects_into_temp(stmt) || names_temp_schema(stmt, false) {
        pin(out, PinReason::TempObject);
    }
    for (i, f) in calls(stmt, true) {
        let is = |name: &str| f.eq_ignore_ascii_case(name);
        if is("pg_advisory_lock")
            || is("pg_advisory_lock_shared")
            || is("pg_try_advisory_lock")
            || is("pg_try_advisory_lock_shared")
        {
            pin(out, PinReason::AdvisoryLock);
        } else if is("set_config") {
            let reason = match stmt.get(i + 2) {
                Some(arg) if matches!(arg.kind, TokenKind::String(_)) && !is_role_name(&literal(arg.text)) => {
                    PinReason::UntrackedSetting
                }
                // `role` / `session_authorization`, or a name not known from the text.
                _ => PinReason::Role,
            };
            pin(out, reason);
        }
    }
}

/// `role` and `session_authorization` decide whose privileges a statement runs with.
fn is_role_name(name: &str) -> bool {
    name.eq_ignore_ascii_case("role") || name.eq_ignore_ascii_case("session_authorization")
}

fn has_seq(stmt: &[Token<'_>], seq: &[&str]) -> bool {
    stmt.windows(seq.len()).any(|w| w.iter().zip(seq).all(|(t, k)| t.is_word(k)))
}

/// `SELECT ... INTO [LOCAL|GLOBAL] {TEMP|TEMPORARY} [TABLE] t` (not `INSERT INTO temp`, a
/// table that happens to be named `temp`).
fn selects_into_temp(stmt: &[Token<'_>]) -> bool {
    let temp = |t: Option<&Token<'_>>| t.is_some_and(|t| t.is_word("TEMP") || t.is_word("TEMPORARY"));
    stmt.iter().enumerate().any(|(i, t)| {
        if !t.is_word("INTO")
            || i.checked_sub(1).and_then(|p| stmt.get(p)).is_some_and(|p| p.is_word("INSERT") || p.is_word("MERGE"))
        {
            return false;
        }
        let next = stmt.get(i + 1);
        temp(next) || ((word(next, "LOCAL") || word(next, "GLOBAL")) && temp(stmt.get(i + 2)))
    })
}

/// Whether the statement names the session's temporary schema (`pg_temp`, `pg_temp_3`), where
/// anything created is temporary: `CREATE TABLE pg_temp.t`, `CREATE FUNCTION pg_temp.f()`,
/// `ALTER TABLE t SET SCHEMA pg_temp`, or a `search_path` that starts with it.
/// `strings`: also look inside string literals (a `search_path` value).
fn names_temp_schema(stmt: &[Token<'_>], strings: bool) -> bool {
    // Runs on every statement: no allocation but for string literals, looked at only in a
    // search_path.
    stmt.iter().any(|t| match t.kind {
        TokenKind::Word => is_temp_schema(t.text),
        TokenKind::QuotedIdent => is_temp_schema(t.text.trim_matches('"')),
        TokenKind::String(_) if strings => {
            literal(t.text).split(|c: char| c == ',' || c.is_whitespace()).any(|n| is_temp_schema(n.trim_matches('"')))
        }
        _ => false,
    })
}

/// `pg_temp` or `pg_temp_<digits>`, in any case.
fn is_temp_schema(name: &str) -> bool {
    let Some(head) = name.get(..7) else { return false };
    if !head.eq_ignore_ascii_case("pg_temp") {
        return false;
    }
    match name.get(7..) {
        Some("") => true,
        Some(rest) => rest.strip_prefix('_').is_some_and(|d| !d.is_empty() && d.bytes().all(|b| b.is_ascii_digit())),
        None => false,
    }
}

/// The text of a plain string literal (`'a''b'` -> `a'b`); other forms are returned bare of
/// their prefix and quotes, which is enough for the names compared here.
fn literal(s: &str) -> String {
    let s = s.trim_start_matches(|c: char| c.is_ascii_alphabetic() || c == '&');
    match s.strip_prefix('\'').and_then(|s| s.strip_suffix('\'')) {
        Some(inner) => inner.replace("''", "'"),
        None => s.to_owned(),
    }
}

fn classify_reset(rest: &[Token<'_>], out: &mut Vec<Effect>) {
    match (rest.first(), rest.get(1)) {
        (Some(a), _) if a.is_word("ALL") => out.push(Effect::ResetAll),
        (Some(a), Some(b)) if a.is_word("TIME") && b.is_word("ZONE") => out.push(Effect::Reset("timezone".into())),
        // The role in effect is never tracked (changing it pins); returning to the session's
        // own role or isolation level leaves nothing to undo.
        (Some(a), _) if a.is_word("SESSION") || a.is_word("TRANSACTION") => {}
        (Some(_), _) => {
            let name = setting_name(rest).0;
            if !is_role_name(&name) {
                out.push(Effect::Reset(name));
            }
        }
        (None, _) => {}
    }
}

/// The lower-cased name of a (possibly dotted, possibly quoted) setting at the start of
/// `rest`, and the tokens after it.
fn setting_name<'t, 'a>(rest: &'t [Token<'a>]) -> (String, &'t [Token<'a>]) {
    let part = |t: &Token<'_>| unquote(t.text, '"').to_ascii_lowercase();
    match (rest.first(), rest.get(1), rest.get(2)) {
        (Some(a), Some(dot), Some(b)) if dot.kind == TokenKind::Dot => {
            (format!("{}.{}", part(a), part(b)), rest.get(3..).unwrap_or_default())
        }
        (Some(a), _, _) => (part(a), rest.get(1..).unwrap_or_default()),
        (None, _, _) => (String::new(), rest),
    }
}

fn classify_set(text: &str, rest: &[Token<'_>], out: &mut Vec<Effect>) {
    let mut rest = rest;
    match rest.first() {
        Some(t) if t.is_word("LOCAL") => return, // transaction-scoped: dies with the transaction
        Some(t) if t.is_word("SESSION") => {
            rest = rest.get(1..).unwrap_or_default();
            if word(rest.first(), "AUTHORIZATION") {
                return set_role(rest.get(1..).unwrap_or_default(), out);
            }
            if word(rest.first(), "CHARACTERISTICS") {
                match session_characteristics(rest.get(1..).unwrap_or_default()) {
                    Some(sets) => out.extend(sets),
                    None => out.push(Effect::Pin(PinReason::UntrackedSetting)),
                }
                return;
            }
        }
        Some(t) if t.is_word("TRANSACTION") || t.is_word("CONSTRAINTS") => return,
        _ => {}
    }
    if word(rest.first(), "ROLE") {
        return set_role(rest.get(1..).unwrap_or_default(), out);
    }
    let (name, value) = match (rest.first(), rest.get(1)) {
        (Some(a), Some(b)) if a.is_word("TIME") && b.is_word("ZONE") => {
            let value = rest.get(2..).unwrap_or_default();
            // `SET TIME ZONE LOCAL` is `SET TIME ZONE DEFAULT`.
            if word(value.first(), "LOCAL") && value.len() == 1 {
                out.push(Effect::Reset("timezone".into()));
                return;
            }
            ("timezone".to_owned(), value)
        }
        (Some(a), _) if a.is_word("SCHEMA") => ("search_path".to_owned(), rest.get(1..).unwrap_or_default()),
        (Some(a), _) if a.is_word("NAMES") => ("client_encoding".to_owned(), rest.get(1..).unwrap_or_default()),
        (Some(_), _) => {
            let (name, after) = setting_name(rest);
            let after = match after.first() {
                Some(t) if t.is_word("TO") || (t.kind == TokenKind::Operator && t.text == "=") => {
                    after.get(1..).unwrap_or_default()
                }
                _ => after,
            };
            (name, after)
        }
        (None, _) => return,
    };
    if is_role_name(&name) {
        return set_role(value, out);
    }
    if value.len() == 1 && word(value.first(), "DEFAULT") {
        out.push(Effect::Reset(name));
        return;
    }
    if name == "search_path" && names_temp_schema(value, true) {
        // Objects created without a schema now land in the temporary schema.
        out.push(Effect::Pin(PinReason::TempObject));
    }
    out.push(Effect::Set { name, stmt: text.to_owned() });
}

/// `SET SESSION CHARACTERISTICS AS TRANSACTION <modes>` as the settings it changes
/// (`default_transaction_isolation`, `_read_only`, `_deferrable`), so that it is replayed like
/// them rather than pinning (#34: PgJDBC's `setReadOnly(true)` sends it). `None` for a form
/// not read here.
fn session_characteristics(rest: &[Token<'_>]) -> Option<Vec<Effect>> {
    let (Some(a), Some(t)) = (rest.first(), rest.get(1)) else { return None };
    if !a.is_word("AS") || !t.is_word("TRANSACTION") {
        return None;
    }
    let words: Vec<&Token<'_>> = rest.get(2..)?.iter().filter(|t| t.kind != TokenKind::Comma).collect();
    let set = |name: &str, value: &str| Effect::Set { name: name.to_owned(), stmt: format!("SET {name} TO '{value}'") };
    let is = |i: usize, w: &str| words.get(i).is_some_and(|t| t.is_word(w));
    let (mut sets, mut i) = (Vec::new(), 0);
    while i < words.len() {
        let (effect, used) = if is(i, "ISOLATION") && is(i + 1, "LEVEL") {
            let level = match () {
                _ if is(i + 2, "SERIALIZABLE") => ("serializable", 3),
                _ if is(i + 2, "REPEATABLE") && is(i + 3, "READ") => ("repeatable read", 4),
                _ if is(i + 2, "READ") && is(i + 3, "COMMITTED") => ("read committed", 4),
                _ if is(i + 2, "READ") && is(i + 3, "UNCOMMITTED") => ("read uncommitted", 4),
                _ => return None,
            };
            (set("default_transaction_isolation", level.0), level.1)
        } else if is(i, "READ") && is(i + 1, "ONLY") {
            (set("default_transaction_read_only", "on"), 2)
        } else if is(i, "READ") && is(i + 1, "WRITE") {
            (set("default_transaction_read_only", "off"), 2)
        } else if is(i, "DEFERRABLE") {
            (set("default_transaction_deferrable", "on"), 1)
        } else if is(i, "NOT") && is(i + 1, "DEFERRABLE") {
            (set("default_transaction_deferrable", "off"), 2)
        } else {
            return None;
        };
        sets.push(effect);
        i += used;
    }
    (!sets.is_empty()).then_some(sets)
}

/// `SET [SESSION] ROLE x`, `SET SESSION AUTHORIZATION x`, `SET role = x`, ...: anything but a
/// return to the session's own identity pins.
fn set_role(value: &[Token<'_>], out: &mut Vec<Effect>) {
    let value = match value.first() {
        Some(t) if t.is_word("TO") || (t.kind == TokenKind::Operator && t.text == "=") => {
            value.get(1..).unwrap_or_default()
        }
        _ => value,
    };
    let back_to_own = value.len() == 1
        && value.first().is_some_and(|t| {
            t.is_word("NONE")
                || t.is_word("DEFAULT")
                || (matches!(t.kind, TokenKind::String(_)) && literal(t.text) == "none")
        });
    if !back_to_own {
        out.push(Effect::Pin(PinReason::Role));
    }
}
