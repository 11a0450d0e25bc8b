//! The bridges' literal re-serialisation (`sql::requote`, #33).
//!
//! Input layout: byte 0 picks the client's dialect and string mode (bits 0-2: MySQL, MySQL with
//! NO_BACKSLASH_ESCAPES, MySQL with ANSI_QUOTES, PostgreSQL, PostgreSQL with
//! standard_conforming_strings off) and the backend (bits 3-4: PostgreSQL, MySQL, MySQL with
//! NO_BACKSLASH_ESCAPES); the rest is the statement, and also a value. Properties: no panic; a
//! statement carried across has, lexed as the backend reads it, exactly the source's string
//! literals with the same values (bit and hex strings as written); a value encoded for the
//! backend and lexed there is one literal holding exactly that value (only a NUL bound for
//! PostgreSQL is refused).
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::sql::lexer::{Lexer, StringKind, TokenKind};
use querypilot::sql::mode::LexMode;
use querypilot::sql::requote::{decode, encode, requote, Target};
use querypilot::sql::Dialect;

fn source(bits: u8) -> (Dialect, LexMode) {
    let mut mode = LexMode::default();
    let dialect = match bits % 5 {
        0 => Dialect::MySql,
        1 => {
            mode.no_backslash_escapes = true;
            Dialect::MySql
        }
        2 => {
            mode.ansi_quotes = true;
            Dialect::MySql
        }
        3 => Dialect::Postgres,
        _ => {
            mode.backslash_strings = true;
            Dialect::Postgres
        }
    };
    (dialect, mode)
}

fn target(bits: u8) -> (Target, Dialect, LexMode) {
    match bits % 3 {
        0 => (Target::Postgres, Dialect::Postgres, LexMode::default()),
        n => {
            let nbe = n == 2;
            let mode = LexMode { no_backslash_escapes: nbe, ..LexMode::default() };
            (Target::MySql { no_backslash_escapes: nbe }, Dialect::MySql, mode)
        }
    }
}

/// Each string literal's value (bit and hex strings: their text), `None` where it cannot be decoded.
fn literals(sql: &str, dialect: Dialect, mode: LexMode) -> Vec<Option<String>> {
    Lexer::new(sql, dialect)
        .mode(mode)
        .filter(|t| matches!(t.kind, TokenKind::String(_)))
        .map(|t| match t.kind {
            TokenKind::String(StringKind::Bit | StringKind::Hex) => Some(t.text.to_owned()),
            _ => decode(&t, dialect).ok(),
        })
        .collect()
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let text = String::from_utf8_lossy(rest);
    let (from, mode) = source(selector & 7);
    let (to, to_dialect, to_mode) = target(selector >> 3);

    if let Ok(out) = requote(&text, from, mode, to) {
        assert_eq!(literals(&out, to_dialect, to_mode), literals(&text, from, mode), "{text:?} -> {out:?}");
    }

    let mut sql = "SELECT ".to_owned();
    match encode(&text, to, &mut sql) {
        Ok(()) => {
            let tokens: Vec<_> = Lexer::new(&sql, to_dialect).mode(to_mode).collect();
            assert_eq!(tokens.len(), 2, "{sql:?}");
            assert_eq!(decode(&tokens[1], to_dialect).as_deref(), Ok(&*text), "{sql:?}");
        }
        Err(_) => assert!(to == Target::Postgres && text.contains('\0'), "{text:?} refused"),
    }
});
