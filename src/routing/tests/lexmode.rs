//! The session's lexer mode in routing (#19 case 5): the issue's hostile statements go to the
//! primary in the modes where the server reads them as locks or writes, and the plan cache never
//! serves one mode's answer to another.

use super::*;
use crate::sql::mode::LexMode;

const PG_OFF: LexMode =
    LexMode { backslash_strings: true, no_backslash_escapes: false, ansi_quotes: false, unknown: false };
const MY_NBE: LexMode =
    LexMode { backslash_strings: false, no_backslash_escapes: true, ansi_quotes: false, unknown: false };
const MY_ANSI: LexMode =
    LexMode { backslash_strings: false, no_backslash_escapes: false, ansi_quotes: true, unknown: false };
const UNKNOWN: LexMode =
    LexMode { backslash_strings: false, no_backslash_escapes: false, ansi_quotes: false, unknown: true };

fn route_in(r: &mut Router, sql: &str, protocol: Protocol, mode: LexMode) -> Decision {
    let mut input = RouteInput::new(sql, protocol, "app", "app");
    input.session.lex_mode = mode;
    r.route(&input)
}

#[test]
fn hostile_statements_follow_the_session_mode() {
    let mut r = split_router("");
    // (sql, protocol, mode, expected pool, expected reason)
    let cases = [
        (
            r"SELECT 'x\' -- '; UPDATE t SET a = 1",
            Protocol::Postgres,
            LexMode::default(),
            "replicas",
            "replica_eligible",
        ),
        (r"SELECT 'x\' -- '; UPDATE t SET a = 1", Protocol::Postgres, PG_OFF, "primary", "lexer_mode"),
        (r"SELECT 'a\' , 1 FROM t FOR UPDATE -- '", Protocol::Postgres, PG_OFF, "primary", "lexer_mode"),
        ("SELECT 'plain' FROM t", Protocol::Postgres, PG_OFF, "replicas", "replica_eligible"),
        ("SELECT 1", Protocol::Postgres, UNKNOWN, "primary", "lexer_mode"),
        (r"SELECT 'a\' , 1 FROM t FOR UPDATE -- '", Protocol::MySql, MY_NBE, "primary", "lexer_mode"),
        ("SELECT \"a\" FROM t", Protocol::MySql, MY_ANSI, "primary", "lexer_mode"),
        ("SELECT 1", Protocol::MySql, UNKNOWN, "primary", "lexer_mode"),
    ];
    for (sql, protocol, mode, pool_name, reason) in cases {
        let d = route_in(&mut r, sql, protocol, mode);
        assert_eq!((pool(&d), d.reason), (pool_name, reason), "{sql} in {mode:?}");
        if reason == "lexer_mode" {
            assert!(d.writes, "a misread statement may write: read-your-writes pins");
        }
    }
}

#[test]
fn the_plan_cache_keys_on_the_mode() {
    let mut r = split_router("");
    let sql = r"SELECT 'x\' -- '; UPDATE t SET a = 1";
    let first = route_in(&mut r, sql, Protocol::Postgres, LexMode::default());
    assert_eq!(pool(&first), "replicas");
    let again = route_in(&mut r, sql, Protocol::Postgres, LexMode::default());
    assert!(again.cached);
    // Same text, another mode: another shape, never the cached read.
    let off = route_in(&mut r, sql, Protocol::Postgres, PG_OFF);
    assert!(!off.cached);
    assert_eq!(pool(&off), "primary");
    let shape = route_in(&mut r, "SELECT 'a' FROM t WHERE b = 'c'", Protocol::Postgres, PG_OFF);
    assert_ne!(shape.fingerprint, off.fingerprint);
    let explained = r.explain(&{
        let mut input = RouteInput::new(sql, Protocol::Postgres, "app", "app");
        input.session.lex_mode = PG_OFF;
        input
    });
    assert!(explained.decision.facts.evidence.iter().any(|e| e.fact == "lexer_mode"), "{explained:?}");
    assert_eq!(explained.key.mode, PG_OFF);
}

#[test]
fn sessions_a_standby_cannot_serve_read_from_the_primary() {
    let tail = "[[routing.rules]]\nname = \"reports\"\npattern = \"FROM reports\"\npool = \"replicas\"\n";
    let mut r = split_router(tail);
    let mut input = RouteInput::new("SELECT a FROM t", Protocol::Postgres, "app", "app");
    input.session.primary_only = Some("serializable_session");
    let d = r.route(&input);
    assert_eq!((pool(&d), d.reason), ("primary", "serializable_session"));
    input.sql = "/* querypilot: route=replica */ SELECT a FROM t";
    assert!(not_honored(&r.route(&input)).contains("serializable_session"));
    input.sql = "SELECT a FROM reports";
    let d = r.route(&input);
    match &d.outcome {
        Outcome::Error(DecisionError::ReplicaUnsafe { reason, .. }) => assert_eq!(*reason, "serializable_session"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    // The same statements of an ordinary session still use the replica.
    input.session.primary_only = None;
    assert_eq!(pool(&r.route(&input)), "replicas");
}
