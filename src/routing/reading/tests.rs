use super::*;
use crate::routing::causal::token_use;
use crate::sql::analyze::{opens_transaction, session_effects};

/// Texts in both dialects that name the words or not, in every form a server reads: comments,
/// quoted strings and identifiers holding the words, dollar quotes, MySQL `#` comments and
/// `/*! */` bodies, several statements, the words at either end, shorter and longer than the
/// scan's sixteen-byte window, in any case.
const TEXTS: &[&str] = &[
    "SELECT abalance FROM pgbench_accounts WHERE aid = 12345;",
    "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
    "SELECT c FROM sbtest1 WHERE id=?",
    "select 1",
    "",
    ";",
    "x",
    "@",
    "set",
    "BEGIN",
    "begin;",
    "START TRANSACTION READ ONLY",
    "SELECT 1; BEGIN; SELECT 2",
    "SELECT 1; start transaction",
    "XA START 'x'",
    "BEGIN NOT ATOMIC SELECT 1; END",
    "select 'begin' as started",
    "SELECT 1 /* BEGIN */",
    "SELECT 1 -- start transaction\n",
    "SELECT $$BEGIN$$",
    "SELECT 1 # BEGIN\n; SELECT 2",
    "/*! START TRANSACTION */",
    "SET application_name TO 'x'",
    "set search_path to pg_temp, public",
    "SELECT 'set' FROM t",
    "SELECT \"listen\" FROM t",
    "SELECT $q$ DISCARD ALL $q$",
    "LISTEN jobs",
    "SELECT pg_advisory_lock(1)",
    "SELECT set_config('role', 'x', false)",
    "CREATE TEMPORARY TABLE t (a int)",
    "SELECT a INTO TEMP t FROM u",
    "DO $$ BEGIN PERFORM 1; END $$",
    "DECLARE c CURSOR WITH HOLD FOR SELECT 1",
    "PREPARE p AS SELECT 1",
    "USE app",
    "SELECT @x := 1",
    "SELECT `use` FROM t",
    "LOCK TABLES t WRITE",
    "SELECT GET_LOCK('a', 1)",
    "SELECT LAST_INSERT_ID()",
    "SELECT 1; SELECT 2",
    "SELECT 1;;  ",
    "SHOW querypilot.causal_token",
    "show QueryPilot.Causal_Token;",
    "SET querypilot.causal_token = 'pg:1/2'",
    "SET SESSION querypilot.causal_token TO DEFAULT",
    "RESET querypilot.causal_token",
    "SET LOCAL querypilot.causal_token = 'x'",
    "SHOW querypilot.causal_token; SELECT 1",
    "select set_config('querypilot.causal_token', 'x', false)",
    "select current_setting($$QUERYPILOT.CAUSAL_TOKEN$$)",
    "select 1 /* querypilot.causal_token */",
    "select 1 -- querypilot.causal_token",
    "SELECT 1 # querypilot.causal_token\n",
    "select 1 /*! , @@querypilot.causal_token */",
    "SET `querypilot`.`causal_token` = 'x'",
    "select causal_token from t",
    "causal_token",
    "SELECT current_setting('querypilot.causal_token",
];

/// Whether `sql` contains one of `words` anywhere, in any ASCII case: every offset compared.
fn names(sql: &str, words: &[&str]) -> bool {
    let lower = sql.to_ascii_lowercase();
    words.iter().any(|w| lower.contains(w))
}

#[test]
fn one_pass_finds_each_prefilters_words() {
    for protocol in [Protocol::Postgres, Protocol::MySql] {
        let effects: &[&str] = match protocol {
            Protocol::Postgres => &PG_EFFECT_WORDS,
            Protocol::MySql => &MYSQL_EFFECT_WORDS,
        };
        for sql in TEXTS {
            let expected = Words {
                effects: names(sql, effects),
                opener: names(sql, &OPENER_WORDS),
                token: names(sql, &[TOKEN_WORD]),
            };
            assert_eq!(Words::of(sql, protocol), expected, "{sql:?} {protocol:?}");
        }
    }
}

#[test]
fn the_reading_in_one_pass_is_the_separate_scans() {
    for protocol in [Protocol::Postgres, Protocol::MySql] {
        let d = dialect(protocol);
        for sql in TEXTS {
            let r = Reading::of(sql, protocol);
            assert_eq!(r.effects, session_effects(sql, d), "{sql:?} {protocol:?}");
            assert_eq!(r.opens, opens_transaction(sql, d), "{sql:?} {protocol:?}");
            assert_eq!(r.token, token_use(sql, d), "{sql:?} {protocol:?}");
        }
    }
}

#[test]
fn the_last_text_answers_only_for_itself() {
    // Texts of one length that differ in a byte, in both protocols, one after another; and a
    // text past the bound, which is read but not kept.
    let long = format!("SELECT 1 /* {} */; BEGIN", "x".repeat(64));
    let texts = ["SET a = 1", "SEL a = 1", "BEGIN; x", "BEGAN; x", &long, "SET a = 1"];
    let mut last = Last::default();
    for protocol in [Protocol::Postgres, Protocol::MySql, Protocol::Postgres] {
        for sql in texts {
            for _ in 0..2 {
                assert_eq!(last.words(sql, protocol, 32), Words::of(sql, protocol), "{sql:?} {protocol:?}");
            }
        }
    }
    assert!(last.text.len() <= 32);
}
