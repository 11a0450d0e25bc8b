//! What a PostgreSQL statement does to its session, read from its tokens alone: settings it
//! changes or resets, and state that pins the client to its backend connection (temporary
//! objects, a changed role, ...). Sans-IO and pure.
//!
//! The classification errs on the side of pinning: a pin costs a dedicated connection, a
//! missed one leaks a role or a temporary table to the next client of that connection.

use super::{Effect, PinReason};
use crate::sql::lexer::{Lexer, Token, TokenKind};
use crate::sql::Dialect;

/// Lists the session effects of a (possibly multi-statement) PostgreSQL query string.
pub fn pg_effects(sql: &str) -> Vec<Effect> {
    // Most statements have no session effect and their text shows it: no second lexer pass
    // (the fingerprint made the first) for them.
    if may_have_effects(sql) {
        scan_effects(sql)
    } else {
        Vec::new()
    }
}

/// [`pg_effects`] read from the tokens.
fn scan_effects(sql: &str) -> Vec<Effect> {
    let mut effects = Vec::new();
    let mut tokens: Vec<Token<'_>> = Vec::with_capacity(sql.len() / 4 + 4);
    tokens.extend(Lexer::new(sql, Dialect::Postgres).filter(|t| t.kind != TokenKind::Comment));
    for stmt in tokens.split(|t| t.kind == TokenKind::Semicolon) {
        classify(sql, stmt, &mut effects);
    }
    effects
}

/// The words every session effect needs one of (in any ASCII case): a statement's first word
/// (`SET`, `RESET`, `DISCARD`, `LISTEN`, `PREPARE`, `DECLARE`, `CREATE`, `DO`), `TEMP` /
/// `TEMPORARY` / `pg_temp`, or part of a function's name (`pg_advisory_lock`..., `set_config`).
const EFFECT_WORDS: [&str; 9] = ["set", "discard", "listen", "prepare", "declare", "create", "do", "temp", "advisory"];

/// Per byte: whether an effect word starts with it (either case).
const EFFECT_STARTS: [bool; 256] = {
    let mut table = [false; 256];
    let mut i = 0;
    while i < EFFECT_WORDS.len() {
        let first = EFFECT_WORDS[i].as_bytes()[0];
        table[first as usize] = true;
        table[first.to_ascii_uppercase() as usize] = true;
        i += 1;
    }
    table
};

/// False only when `sql` contains none of [`EFFECT_WORDS`], so it has no session effect.
fn may_have_effects(sql: &str) -> bool {
    let bytes = sql.as_bytes();
    bytes.iter().enumerate().any(|(i, &b)| {
        EFFECT_STARTS[usize::from(b)]
            && EFFECT_WORDS
                .iter()
                .any(|w| bytes.get(i..i + w.len()).is_some_and(|h| h.eq_ignore_ascii_case(w.as_bytes())))
    })
}

fn word(t: Option<&Token<'_>>, kw: &str) -> bool {
    t.is_some_and(|t| t.is_word(kw))
}

/// Adds a pin unless the statement already produced the same one.
fn pin(out: &mut Vec<Effect>, from: usize, reason: PinReason) {
    let e = Effect::Pin(reason);
    if !out.get(from..).unwrap_or_default().contains(&e) {
        out.push(e);
    }
}

fn classify(sql: &str, stmt: &[Token<'_>], out: &mut Vec<Effect>) {
    let (Some(first), Some(last)) = (stmt.first(), stmt.last()) else { return };
    let from = out.len();
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
    } else if first.is_word("CREATE") && creates_temp(stmt) {
        out.push(Effect::Pin(PinReason::TempObject));
    } else if first.is_word("DO") {
        // An anonymous block can run any statement through dynamic SQL (`EXECUTE 'SET RO' ||
        // 'LE x'`), which no reading of its text can rule out.
        out.push(Effect::Pin(PinReason::DoBlock));
    }
    if selects_into_temp(stmt) || names_temp_schema(stmt, false) {
        pin(out, from, PinReason::TempObject);
    }
    for (i, t) in stmt.iter().enumerate() {
        if !matches!(t.kind, TokenKind::Word | TokenKind::QuotedIdent)
            || stmt.get(i + 1).is_none_or(|n| n.kind != TokenKind::LParen)
        {
            continue;
        }
        let f = t.text.trim_matches('"');
        let is = |name: &str| f.eq_ignore_ascii_case(name);
        if is("pg_advisory_lock")
            || is("pg_advisory_lock_shared")
            || is("pg_try_advisory_lock")
            || is("pg_try_advisory_lock_shared")
        {
            pin(out, from, PinReason::AdvisoryLock);
        } else if is("set_config") {
            let reason = match stmt.get(i + 2) {
                Some(arg) if matches!(arg.kind, TokenKind::String(_)) && !is_role_name(&literal(arg.text)) => {
                    PinReason::UntrackedSetting
                }
                // `role` / `session_authorization`, or a name not known from the text.
                _ => PinReason::Role,
            };
            pin(out, from, reason);
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

fn creates_temp(stmt: &[Token<'_>]) -> bool {
    // CREATE [OR REPLACE] [GLOBAL|LOCAL] {TEMP|TEMPORARY} {TABLE|VIEW|SEQUENCE}: the keyword
    // sits before the object kind.
    stmt.iter().take(5).any(|t| t.is_word("TEMP") || t.is_word("TEMPORARY"))
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

fn unquote(s: &str) -> String {
    match s.strip_prefix('"').and_then(|s| s.strip_suffix('"')) {
        Some(inner) => inner.replace("\"\"", "\""),
        None => s.to_owned(),
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
    let part = |t: &Token<'_>| unquote(t.text).to_ascii_lowercase();
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

/// `SET [SESSION] ROLE x`, `SET SESSION AUTHORIZATION x`, `SET role = x`, ...: anything but a
/// return to the session's own identity pins.
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

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, stmt: &str) -> Effect {
        Effect::Set { name: name.into(), stmt: stmt.into() }
    }

    const ROLE: Effect = Effect::Pin(PinReason::Role);
    const TEMP: Effect = Effect::Pin(PinReason::TempObject);

    #[test]
    fn session_characteristics_are_the_settings_they_change() {
        assert_eq!(
            pg_effects("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"),
            vec![set("default_transaction_read_only", "SET default_transaction_read_only TO 'on'")]
        );
        assert_eq!(
            pg_effects("set session characteristics as transaction isolation level repeatable read, read write, not deferrable"),
            vec![
                set("default_transaction_isolation", "SET default_transaction_isolation TO 'repeatable read'"),
                set("default_transaction_read_only", "SET default_transaction_read_only TO 'off'"),
                set("default_transaction_deferrable", "SET default_transaction_deferrable TO 'off'"),
            ]
        );
        for unread in ["SET SESSION CHARACTERISTICS AS TRANSACTION", "SET SESSION CHARACTERISTICS AS TRANSACTION READ"]
        {
            assert_eq!(pg_effects(unread), vec![Effect::Pin(PinReason::UntrackedSetting)], "{unread}");
        }
    }

    #[test]
    fn the_text_prefilter_passes_every_statement_with_an_effect() {
        let with_effects = [
            "SET search_path = app",
            "reset ALL",
            "DISCARD ALL",
            "LISTEN chan",
            "PREPARE p AS SELECT 1",
            "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
            "CREATE TEMP TABLE t (a int)",
            "create temporary view v as select 1",
            "DO $$ BEGIN END $$",
            "SELECT 1 INTO TEMP t",
            "CREATE TABLE pg_temp.t (a int)",
            "SELECT pg_advisory_lock(1)",
            "select PG_TRY_ADVISORY_LOCK_SHARED(1)",
            "SELECT set_config('a.b', 'c', false)",
            "/* x */ SET ROLE admin",
            "SELECT 1; SET work_mem = '1MB'",
        ];
        for sql in with_effects {
            assert!(!scan_effects(sql).is_empty(), "{sql}");
            assert!(may_have_effects(sql), "{sql}");
            assert_eq!(pg_effects(sql), scan_effects(sql), "{sql}");
        }
        let plain = [
            "SELECT abalance FROM pgbench_accounts WHERE aid = 42",
            "UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = 3",
            "select * from orders order by id limit 10 offset 20",
            "INSERT INTO temp_log VALUES (1)",
            "BEGIN",
        ];
        for sql in plain {
            assert!(scan_effects(sql).is_empty(), "{sql}");
            assert!(pg_effects(sql).is_empty(), "{sql}");
        }
        // No needle: skipped without lexing.
        assert!(!may_have_effects("SELECT abalance FROM pgbench_accounts WHERE aid = 42"));
        assert!(!may_have_effects("INSERT INTO orders VALUES (1, 'x')"));
        assert!(!may_have_effects(""));
    }

    #[test]
    fn recognizes_set_forms() {
        assert_eq!(
            pg_effects("SET search_path = app, public"),
            vec![set("search_path", "SET search_path = app, public")]
        );
        assert_eq!(pg_effects("set TimeZone to 'UTC';"), vec![set("timezone", "set TimeZone to 'UTC'")]);
        assert_eq!(pg_effects("SET TIME ZONE 'Europe/Paris'"), vec![set("timezone", "SET TIME ZONE 'Europe/Paris'")]);
        assert_eq!(
            pg_effects("SET SESSION statement_timeout = 5"),
            vec![set("statement_timeout", "SET SESSION statement_timeout = 5")]
        );
        assert_eq!(pg_effects("SET myapp.tenant = '7'"), vec![set("myapp.tenant", "SET myapp.tenant = '7'")]);
        assert_eq!(pg_effects("SET \"DateStyle\" TO dmy"), vec![set("datestyle", "SET \"DateStyle\" TO dmy")]);
        assert!(pg_effects("SET LOCAL work_mem = '1MB'").is_empty());
        assert!(pg_effects("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE").is_empty());
    }

    #[test]
    fn set_to_default_is_a_reset() {
        assert_eq!(pg_effects("SET datestyle TO DEFAULT"), vec![Effect::Reset("datestyle".into())]);
        assert_eq!(pg_effects("set session work_mem = default"), vec![Effect::Reset("work_mem".into())]);
        assert_eq!(pg_effects("SET TIME ZONE DEFAULT"), vec![Effect::Reset("timezone".into())]);
        assert_eq!(pg_effects("SET TIME ZONE LOCAL"), vec![Effect::Reset("timezone".into())]);
        assert_eq!(pg_effects("SET a.b TO DEFAULT"), vec![Effect::Reset("a.b".into())]);
    }

    #[test]
    fn every_reset_spelling_is_tracked() {
        assert_eq!(pg_effects("RESET search_path"), vec![Effect::Reset("search_path".into())]);
        assert_eq!(pg_effects("reset time zone"), vec![Effect::Reset("timezone".into())]);
        assert_eq!(pg_effects("RESET \"TimeZone\""), vec![Effect::Reset("timezone".into())]);
        assert_eq!(pg_effects("RESET myapp.Tenant"), vec![Effect::Reset("myapp.tenant".into())]);
        assert_eq!(pg_effects("RESET ALL"), vec![Effect::ResetAll]);
        assert_eq!(pg_effects("DISCARD ALL"), vec![Effect::ResetAll]);
        assert!(pg_effects("RESET TRANSACTION ISOLATION LEVEL").is_empty());
    }

    #[test]
    fn every_role_change_pins() {
        for sql in [
            "SET ROLE other",
            "SET SESSION ROLE other",
            "set session role 'other'",
            "SET role = other",
            "SET role TO 'other'",
            "SET \"role\" = other",
            "SET SESSION role TO other",
            "SET SESSION AUTHORIZATION other",
            "set session authorization 'other'",
            "SET session_authorization = 'other'",
            "SET SESSION_AUTHORIZATION TO other",
            "SELECT set_config('role', 'other', false)",
            "select pg_catalog.set_config('Session_Authorization', 'other', false)",
            "SELECT set_config($1, $2, false)",
            "SELECT 1; SET ROLE other",
        ] {
            assert_eq!(pg_effects(sql), vec![ROLE], "{sql}");
        }
    }

    #[test]
    fn returning_to_the_own_role_changes_nothing() {
        for sql in [
            "RESET ROLE",
            "SET ROLE NONE",
            "SET role = 'none'",
            "SET role TO DEFAULT",
            "SET SESSION AUTHORIZATION DEFAULT",
            "RESET SESSION AUTHORIZATION",
            "SET session_authorization TO DEFAULT",
            "RESET session_authorization",
            "SET LOCAL ROLE other",
        ] {
            assert!(pg_effects(sql).is_empty(), "{sql}");
        }
    }

    #[test]
    fn every_temporary_object_pins() {
        for sql in [
            "CREATE TEMP TABLE t(x int)",
            "create global temporary table t(x int)",
            "CREATE LOCAL TEMP TABLE t(x int)",
            "CREATE TEMP TABLE t AS SELECT 1",
            "CREATE TEMPORARY VIEW v AS SELECT 1",
            "CREATE OR REPLACE TEMP VIEW v AS SELECT 1",
            "CREATE TEMP SEQUENCE s",
            "CREATE TABLE pg_temp.x(a int)",
            "CREATE TABLE \"pg_temp\".x(a int)",
            "CREATE VIEW pg_temp.v AS SELECT 1",
            "CREATE FUNCTION pg_temp.f() RETURNS int LANGUAGE sql AS 'select 1'",
            "CREATE TABLE pg_temp_3.x(a int)",
            "ALTER TABLE t SET SCHEMA pg_temp",
            "SELECT 'x' AS s INTO TEMP t",
            "select 1 as a into temporary table t",
            "SELECT 1 INTO LOCAL TEMP t",
            "SELECT 1 INTO GLOBAL TEMPORARY TABLE t",
            "WITH q AS (SELECT 1) SELECT * INTO TEMP t FROM q",
            "SELECT 1 INTO pg_temp.t",
            "SELECT 1; SELECT 2 INTO TEMP t; SELECT 3",
        ] {
            assert_eq!(pg_effects(sql), vec![TEMP], "{sql}");
        }
        let e = pg_effects("SET search_path = pg_temp, public");
        assert_eq!(e.first(), Some(&TEMP));
        let e = pg_effects("SET search_path TO 'pg_temp,public'");
        assert_eq!(e.first(), Some(&TEMP));
    }

    #[test]
    fn look_alikes_of_temporary_objects_do_not_pin() {
        for sql in [
            "CREATE UNLOGGED TABLE t(x int)",
            "CREATE TABLE temp_stats(x int)",
            "INSERT INTO temp VALUES (1)",
            "SELECT 'CREATE TEMP TABLE x' -- INTO TEMP t",
            "SELECT * FROM pg_temporary_things",
            "SELECT * FROM pg_temp_x.t",
            "SELECT 'pg_temp' AS s",
            "SELECT 1 INTO UNLOGGED t",
        ] {
            assert!(pg_effects(sql).is_empty(), "{sql}");
        }
    }

    #[test]
    fn recognizes_other_pins() {
        assert_eq!(pg_effects("LISTEN jobs"), vec![Effect::Pin(PinReason::Listen)]);
        assert_eq!(pg_effects("PREPARE q AS SELECT 1"), vec![Effect::Pin(PinReason::SqlPrepare)]);
        assert!(pg_effects("PREPARE TRANSACTION 'x'").is_empty());
        assert_eq!(pg_effects("DECLARE c CURSOR WITH HOLD FOR SELECT 1"), vec![Effect::Pin(PinReason::HoldCursor)]);
        assert!(pg_effects("DECLARE c CURSOR FOR SELECT 1").is_empty());
        assert_eq!(pg_effects("SELECT pg_advisory_lock(1)"), vec![Effect::Pin(PinReason::AdvisoryLock)]);
        assert!(pg_effects("SELECT pg_advisory_xact_lock(1)").is_empty());
        assert_eq!(pg_effects("select set_config('a.b', '1', false)"), vec![Effect::Pin(PinReason::UntrackedSetting)]);
        assert_eq!(pg_effects("DO $$BEGIN EXECUTE 'SET RO' || 'LE x'; END$$"), vec![Effect::Pin(PinReason::DoBlock)]);
        assert!(pg_effects("SELECT 'SET x = 1', 'LISTEN y' -- CREATE TEMP TABLE").is_empty());
    }

    #[test]
    fn multi_statement_strings_yield_every_effect() {
        let e = pg_effects("SET a = 1; SELECT 1; LISTEN x; RESET b");
        assert_eq!(e, vec![set("a", "SET a = 1"), Effect::Pin(PinReason::Listen), Effect::Reset("b".into())]);
    }
}
