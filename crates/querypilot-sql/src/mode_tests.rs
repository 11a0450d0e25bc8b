//! The session lexer mode (#19 case 5): how statements change it and how the lexer reads the
//! issue's hostile statements in each mode.

use super::lexer::{Lexer, StringKind, TokenKind};
use super::mode::{LexMode, SessionModes};
use super::Dialect;

fn kinds(sql: &str, dialect: Dialect, mode: LexMode) -> Vec<TokenKind> {
    Lexer::new(sql, dialect).mode(mode).map(|t| t.kind).collect()
}

const PG_OFF: LexMode =
    LexMode { backslash_strings: true, no_backslash_escapes: false, ansi_quotes: false, unknown: false };
const MY_NBE: LexMode =
    LexMode { backslash_strings: false, no_backslash_escapes: true, ansi_quotes: false, unknown: false };
const MY_ANSI: LexMode =
    LexMode { backslash_strings: false, no_backslash_escapes: false, ansi_quotes: true, unknown: false };

#[test]
fn the_lexer_reads_strings_as_the_session_server_does() {
    use TokenKind::{Comment, Semicolon};
    let lock = r"SELECT 'a\' , 1 FROM t FOR UPDATE -- '";
    // PostgreSQL default: one string up to the second quote, then a comment: FOR UPDATE is real.
    assert!(kinds(lock, Dialect::Postgres, LexMode::default()).contains(&Comment));
    // standard_conforming_strings = off: the backslash escapes the quote, and everything up to
    // the last quote is one string.
    assert!(!kinds(lock, Dialect::Postgres, PG_OFF).contains(&Comment));
    let write = r"SELECT 'x\' -- '; UPDATE t SET a = 1";
    assert!(!kinds(write, Dialect::Postgres, LexMode::default()).contains(&Semicolon), "one statement");
    assert!(kinds(write, Dialect::Postgres, PG_OFF).contains(&Semicolon), "a read and a write");
    // MySQL is the other way round: backslash escapes by default, plain under NO_BACKSLASH_ESCAPES,
    // where the first statement hides a row lock.
    assert!(!kinds(lock, Dialect::MySql, LexMode::default()).contains(&Comment));
    assert!(kinds(lock, Dialect::MySql, MY_NBE).contains(&Comment));
    assert!(kinds(write, Dialect::MySql, LexMode::default()).contains(&Semicolon));
    assert!(!kinds(write, Dialect::MySql, MY_NBE).contains(&Semicolon));
    assert_eq!(kinds("'a'", Dialect::MySql, MY_NBE), vec![TokenKind::String(StringKind::Standard)]);
    // ANSI_QUOTES: "..." is an identifier.
    assert_eq!(kinds("\"x\"", Dialect::MySql, MY_ANSI), vec![TokenKind::QuotedIdent]);
    assert_eq!(kinds("\"x\"", Dialect::MySql, LexMode::default()), vec![TokenKind::String(StringKind::Escaped)]);
}

#[test]
fn statements_change_the_mode_or_make_it_unknown() {
    let pg = Dialect::Postgres;
    let my = Dialect::MySql;
    // (dialect, statements run in order, in a transaction, expected mode)
    let cases: Vec<(Dialect, Vec<&str>, bool, LexMode)> = vec![
        (pg, vec!["SET standard_conforming_strings = off"], false, PG_OFF),
        (pg, vec!["set session STANDARD_CONFORMING_STRINGS to 'off'"], false, PG_OFF),
        (pg, vec!["SET LOCAL standard_conforming_strings = false"], false, PG_OFF),
        (
            pg,
            vec!["SET standard_conforming_strings = off", "SET standard_conforming_strings = on"],
            false,
            LexMode::default(),
        ),
        (pg, vec!["SET standard_conforming_strings = off", "RESET ALL"], false, LexMode::default()),
        (pg, vec!["SET standard_conforming_strings = off", "DISCARD ALL"], false, LexMode::default()),
        (
            pg,
            vec!["SET standard_conforming_strings = off", "SET standard_conforming_strings TO DEFAULT"],
            false,
            LexMode::default(),
        ),
        // Inside a transaction a change back to the default may still be rolled back: kept.
        (pg, vec!["SET standard_conforming_strings = off", "SET standard_conforming_strings = on"], true, PG_OFF),
        (
            pg,
            vec!["SHOW standard_conforming_strings", "SELECT current_setting('standard_conforming_strings')"],
            false,
            LexMode::default(),
        ),
        (
            pg,
            vec!["SELECT set_config('standard_conforming_strings', 'off', false)"],
            false,
            LexMode { unknown: true, ..LexMode::default() },
        ),
        (pg, vec!["SET standard_conforming_strings = maybe"], false, LexMode { unknown: true, ..LexMode::default() }),
        (my, vec!["SET sql_mode = 'NO_BACKSLASH_ESCAPES'"], false, MY_NBE),
        (my, vec!["SET SESSION sql_mode = 'STRICT_TRANS_TABLES,ANSI_QUOTES'"], false, MY_ANSI),
        (my, vec!["SET @@sql_mode = 'ANSI'"], false, MY_ANSI),
        (my, vec!["SET @@session.sql_mode = 'ORACLE'"], false, MY_ANSI),
        (my, vec!["SET autocommit = 1, sql_mode = 'NO_BACKSLASH_ESCAPES'"], false, MY_NBE),
        (my, vec!["SET GLOBAL sql_mode = 'NO_BACKSLASH_ESCAPES'"], false, LexMode::default()),
        (my, vec!["SET sql_mode = 'NO_BACKSLASH_ESCAPES'", "SET sql_mode = ''"], false, LexMode::default()),
        (my, vec!["SET sql_mode = 'NO_BACKSLASH_ESCAPES'", "SET sql_mode = ''"], true, LexMode::default()),
        (my, vec!["SET sql_mode = CONCAT(@@sql_mode, ',STRICT_TRANS_TABLES')"], false, LexMode::default()),
        (my, vec!["SET sql_mode = concat(@@sql_mode, ',NO_BACKSLASH_ESCAPES')"], false, MY_NBE),
        (my, vec!["SELECT @@sql_mode", "SHOW VARIABLES LIKE 'sql_mode'"], false, LexMode::default()),
        (my, vec!["SET sql_mode = @saved"], false, LexMode { unknown: true, ..LexMode::default() }),
        (my, vec!["SET @@sql_mode = CONCAT(@a, 'x')"], false, LexMode { unknown: true, ..LexMode::default() }),
        (my, vec!["SET sql_mode = DEFAULT"], false, LexMode { unknown: true, ..LexMode::default() }),
        (
            my,
            vec!["SET STATEMENT sql_mode = 'ANSI_QUOTES' FOR SELECT \"a\""],
            false,
            LexMode { unknown: true, ..LexMode::default() },
        ),
        (my, vec!["SET sql_mode = @saved", "SET sql_mode = 'TRADITIONAL'"], false, LexMode::default()),
    ];
    for (dialect, statements, in_tx, expected) in cases {
        let mut t = SessionModes::default();
        for sql in &statements {
            t.observe(sql, dialect, in_tx);
        }
        assert_eq!(t.mode, expected, "{dialect:?} {statements:?} (in transaction: {in_tx})");
    }
}

#[test]
fn startup_parameters_and_server_reports_give_the_start_mode() {
    let off =
        SessionModes::pg_startup([("standard_conforming_strings", "off")], [("standard_conforming_strings", "on")]);
    assert_eq!(off.mode, PG_OFF);
    let server_off = SessionModes::pg_startup([("application_name", "x")], [("standard_conforming_strings", "off")]);
    assert_eq!(server_off.mode, PG_OFF);
    let mut t = server_off;
    t.observe("SET standard_conforming_strings = on", Dialect::Postgres, false);
    t.observe("RESET standard_conforming_strings", Dialect::Postgres, false);
    assert_eq!(t.mode, PG_OFF, "RESET returns to the startup value");
}

#[test]
fn a_mysql_servers_report_sets_the_mode() {
    // MariaDB reports both bits.
    let mut m = LexMode::default();
    m.follow_mysql_server(false, Some(true));
    assert_eq!(m, MY_ANSI);
    m.follow_mysql_server(true, Some(false));
    assert_eq!(m, MY_NBE);
    // One connection's report does not settle a mode set from an expression, which replayed
    // on another connection may come out otherwise.
    let mut m = LexMode { unknown: true, ..LexMode::default() };
    m.follow_mysql_server(false, Some(false));
    assert!(m.unknown);
    // MySQL has no ANSI_QUOTES flag: it may be on unseen, so `"` is distrusted.
    let mut m = LexMode::default();
    m.follow_mysql_server(false, None);
    assert!(m.may_misread("SELECT \"a\"", Dialect::MySql) && !m.may_misread("SELECT 'a'", Dialect::MySql));
}

#[test]
fn only_text_the_mode_could_change_is_distrusted() {
    assert!(!LexMode::default().may_misread(r"SELECT 'a\'", Dialect::Postgres));
    assert!(PG_OFF.may_misread(r"SELECT 'a\'", Dialect::Postgres));
    assert!(!PG_OFF.may_misread("SELECT 'a'", Dialect::Postgres));
    assert!(MY_NBE.may_misread(r"SELECT 'a\'", Dialect::MySql));
    assert!(MY_ANSI.may_misread("SELECT \"a\"", Dialect::MySql));
    assert!(!MY_ANSI.may_misread("SELECT 'a'", Dialect::MySql));
    assert!(LexMode { unknown: true, ..LexMode::default() }.may_misread("SELECT 1", Dialect::MySql));
    assert_eq!(PG_OFF.describe(), "standard_conforming_strings=off");
    assert_eq!(LexMode::default().describe(), "default");
}

#[test]
fn serializable_session_defaults_are_followed() {
    let pg = Dialect::Postgres;
    let my = Dialect::MySql;
    // (dialect, statements, in transaction, serializable afterwards)
    let cases: Vec<(Dialect, Vec<&str>, bool, bool)> = vec![
        (pg, vec!["SET default_transaction_isolation = 'serializable'"], false, true),
        (pg, vec!["set default_transaction_isolation to serializable"], false, true),
        (pg, vec!["SET SESSION default_transaction_isolation = 'SERIALIZABLE'"], false, true),
        (pg, vec!["SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE"], false, true),
        (
            pg,
            vec![
                "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL SERIALIZABLE",
                "SET SESSION CHARACTERISTICS AS TRANSACTION ISOLATION LEVEL READ COMMITTED",
            ],
            false,
            false,
        ),
        (
            pg,
            vec!["SET default_transaction_isolation = 'serializable'", "RESET default_transaction_isolation"],
            false,
            false,
        ),
        (pg, vec!["SET default_transaction_isolation = 'serializable'", "RESET ALL"], false, false),
        (
            pg,
            vec![
                "SET default_transaction_isolation = 'serializable'",
                "SET default_transaction_isolation = 'read committed'",
            ],
            true,
            true,
        ),
        (pg, vec!["SET default_transaction_isolation = 'repeatable read'"], false, false),
        (pg, vec!["SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"], true, false),
        (pg, vec!["SELECT set_config('default_transaction_isolation', 'serializable', false)"], false, true),
        (pg, vec!["SHOW default_transaction_isolation"], false, false),
        (my, vec!["SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE"], false, true),
        (my, vec!["SET SESSION transaction_isolation = 'SERIALIZABLE'"], false, true),
        (my, vec!["SET @@session.tx_isolation = 'SERIALIZABLE'"], false, true),
        (
            my,
            vec![
                "SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE",
                "SET SESSION TRANSACTION ISOLATION LEVEL REPEATABLE READ",
            ],
            false,
            false,
        ),
        (my, vec!["SET GLOBAL TRANSACTION ISOLATION LEVEL SERIALIZABLE"], false, false),
        (my, vec!["SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"], false, false),
        (my, vec!["SET SESSION transaction_isolation = @v"], false, true),
    ];
    for (dialect, statements, in_tx, expected) in cases {
        let mut t = SessionModes::default();
        for sql in &statements {
            t.observe(sql, dialect, in_tx);
        }
        assert_eq!(t.serializable, expected, "{dialect:?} {statements:?} (in transaction: {in_tx})");
        assert_eq!(t.primary_only().is_some(), expected);
    }
    let startup = SessionModes::pg_startup([("default_transaction_isolation", "serializable")], []);
    assert_eq!(startup.primary_only(), Some("serializable_session"));
}

#[test]
fn session_modes_survive_their_bits() {
    let mut modes = SessionModes::pg_startup(
        [("standard_conforming_strings", "off"), ("default_transaction_isolation", "serializable")],
        [],
    );
    modes.observe("SET standard_conforming_strings = on", Dialect::Postgres, false);
    modes.observe("SET default_transaction_isolation = 'read committed'", Dialect::Postgres, false);
    let back = SessionModes::from_bits(modes.to_bits());
    assert_eq!(back, modes);
    assert!(!back.mode.backslash_strings && back.primary_only().is_none());
    let mut reset = back;
    reset.observe("RESET ALL", Dialect::Postgres, false);
    let mut original = modes;
    original.observe("RESET ALL", Dialect::Postgres, false);
    assert_eq!(reset, original, "RESET returns to the startup modes the bits carried");
    assert!(reset.mode.backslash_strings && reset.primary_only().is_some());
    for bits in 0..16u8 {
        assert_eq!(LexMode::from_bits(bits).bits(), bits);
    }
}
