use super::*;
use proptest::prelude::*;

const PG: Target = Target::Postgres;
const MY: Target = Target::MySql { no_backslash_escapes: false };
const MY_NBE: Target = Target::MySql { no_backslash_escapes: true };
const NBE: LexMode =
    LexMode { no_backslash_escapes: true, backslash_strings: false, ansi_quotes: false, unknown: false };
const SCS_OFF: LexMode =
    LexMode { no_backslash_escapes: false, backslash_strings: true, ansi_quotes: false, unknown: false };

fn my_to_pg(sql: &str) -> Result<String, RequoteError> {
    requote(sql, Dialect::MySql, LexMode::default(), PG)
}

/// The values of the string literals of `sql` as `to` reads them.
fn values(sql: &str, to: Target) -> Vec<String> {
    Lexer::new(sql, to.dialect())
        .mode(to.mode())
        .filter(|t| matches!(t.kind, TokenKind::String(_)))
        .map(|t| decode(&t, to.dialect()).unwrap_or_else(|e| panic!("{e} in {sql}")))
        .collect()
}

#[test]
fn the_injection_of_issue_33_stays_a_value() {
    // PyMySQL's quoting of "nomatch\' OR id = 22 --" for a server with backslash escapes.
    let sql = r"UPDATE t SET v = 'X' WHERE v = 'nomatch\\\' OR id = 22 --'";
    let out = my_to_pg(sql).expect("carried");
    assert_eq!(out, r"UPDATE t SET v = 'X' WHERE v = E'nomatch\\'' OR id = 22 --'");
    assert_eq!(values(&out, PG), ["X", r"nomatch\' OR id = 22 --"]);
    // The same value quoted for NO_BACKSLASH_ESCAPES.
    let nbe = requote(r"SELECT 'nomatch\'' OR id = 22 --'", Dialect::MySql, NBE, PG).expect("carried");
    assert_eq!(values(&nbe, PG), [r"nomatch\' OR id = 22 --"]);
}

#[test]
fn mysql_literals_become_postgres_literals() {
    let cases = [
        (r"'it''s'", "'it''s'"),
        (r#""say \"hi\"""#, r#"'say "hi"'"#),
        (r"'a\nb'", "'a\nb'"),
        (r"'a\%b\_c'", r"E'a\\%b\\_c'"),
        (r"'tab\there'", "'tab\there'"),
        (r"'ü\é'", "'üé'"),
        ("_utf8mb4'x'", "'x'"),
        ("N'x'", "'x'"),
        ("X'4a'", "X'4a'"),
        ("b'01'", "b'01'"),
        ("`col``x`", "\"col`x\""),
        ("`a\"b`", "\"a\"\"b\""),
        ("1 # it's\n", "1 -- it's\n"),
        ("'a'\"b\"", "'a' 'b'"),
        ("e'x'", "e 'x'"),
    ];
    for (from, want) in cases {
        assert_eq!(my_to_pg(&format!("SELECT {from}")).as_deref(), Ok(format!("SELECT {want}").as_str()), "{from}");
    }
}

#[test]
fn postgres_literals_become_mysql_literals() {
    let pg_to = |sql: &str, mode, to| requote(sql, Dialect::Postgres, mode, to);
    let cases = [
        (r"'a\b'", LexMode::default(), r"'a\b'", r"'a\\b'"),
        (r"E'it\'s\n\x41\101\u00e9'", LexMode::default(), "'it''s\nAAé'", "'it''s\nAAé'"),
        (r"'a\'b'", SCS_OFF, "'a''b'", "'a''b'"),
        ("$$a'b\\$$", LexMode::default(), r"'a''b\'", r"'a''b\\'"),
        ("$q$ $$ $q$", LexMode::default(), "' $$ '", "' $$ '"),
        (r"U&'d\0061t\+01F418'", LexMode::default(), "'dat🐘'", "'dat🐘'"),
        ("\"My\"\"Col\"", LexMode::default(), "`My\"Col`", "`My\"Col`"),
        ("1 --x\n", LexMode::default(), "1 -- x\n", "1 -- x\n"),
        ("/* a /* 'b */ c */ 1", LexMode::default(), "  1", "  1"),
    ];
    for (from, mode, nbe, escaping) in cases {
        let sql = format!("SELECT {from}");
        assert_eq!(pg_to(&sql, mode, MY_NBE).as_deref(), Ok(format!("SELECT {nbe}").as_str()), "{from} (NBE)");
        assert_eq!(pg_to(&sql, mode, MY).as_deref(), Ok(format!("SELECT {escaping}").as_str()), "{from}");
    }
}

#[test]
fn what_cannot_be_carried_is_refused() {
    assert_eq!(my_to_pg(r"SELECT 'a\0b'"), Err(RequoteError::Nul(7)));
    assert_eq!(my_to_pg("SELECT 'open"), Err(RequoteError::Unterminated(7)));
    assert_eq!(my_to_pg(r"SELECT 'a\'"), Err(RequoteError::Unterminated(7)));
    assert_eq!(my_to_pg("SELECT _latin1'x'"), Err(RequoteError::Unsupported(7, "character set introducer")));
    assert_eq!(my_to_pg("SELECT X'4g'"), Err(RequoteError::Unsupported(7, "bit or hex string")));
    // A backtick identifier PostgreSQL does not know, holding a quote, would start a string there.
    assert!(matches!(my_to_pg("SELECT 1 /*! , 'x' */"), Err(RequoteError::Misread(_))));
    assert!(matches!(my_to_pg("SELECT $a$ 'x' $a$"), Err(RequoteError::Misread(_))));
    let pg = |sql| requote(sql, Dialect::Postgres, LexMode::default(), MY_NBE);
    assert_eq!(pg(r"SELECT E'\000'"), Err(RequoteError::Nul(7)));
    assert_eq!(pg(r"SELECT E'\xff'"), Err(RequoteError::Encoding(7)));
    assert_eq!(pg(r"SELECT E'\ud800'"), Err(RequoteError::Encoding(7)));
    assert_eq!(pg(r"SELECT U&'!0041' UESCAPE '!'"), Err(RequoteError::Unsupported(7, "UESCAPE clause")));
    // PostgreSQL's `#` operator is a comment to MySQL: the literal after it would vanish.
    assert!(matches!(pg("SELECT 1 # 2, 'x'"), Err(RequoteError::Misread(_))));
}

#[test]
fn encoded_forms() {
    let enc = |v: &str, to| {
        let mut s = String::new();
        encode(v, to, &mut s).map(|()| s)
    };
    assert_eq!(enc(r"a'\b", PG), Ok(r"E'a''\\b'".to_owned()));
    assert_eq!(enc("a'b", PG), Ok("'a''b'".to_owned()));
    assert_eq!(enc("a\0", PG), Err(NulInText));
    assert_eq!(enc("a\0\\'", MY), Ok(r"'a\0\\'''".to_owned()));
    assert_eq!(enc("a\0\\'", MY_NBE), Ok("'a\0\\'''".to_owned()));
}

/// Characters that matter to some lexer, plus ordinary and multibyte ones.
fn value() -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            Just('\''),
            Just('\\'),
            Just('"'),
            Just('`'),
            Just('$'),
            Just('%'),
            Just('_'),
            Just('\0'),
            Just('\n'),
            Just('#'),
            Just('-'),
            Just('/'),
            Just('*'),
            Just('é'),
            Just('🐘'),
            any::<char>(),
            "[a-zA-Z0-9 ]".prop_map(|s| s.chars().next().unwrap_or('a')),
        ],
        0..24,
    )
    .prop_map(|v| v.into_iter().collect())
}

const TARGETS: [Target; 3] = [PG, MY, MY_NBE];

fn literal(v: &str, to: Target) -> Option<String> {
    let mut s = String::new();
    encode(v, to, &mut s).ok().map(|()| s)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(4000))]

    /// Any value, encoded for a target and lexed there, is one literal with exactly that value.
    #[test]
    fn encode_round_trips(v in value()) {
        for to in TARGETS {
            let mut sql = "SELECT ".to_owned();
            if encode(&v, to, &mut sql).is_err() {
                prop_assert!(to == PG && v.contains('\0'));
                continue;
            }
            sql.push_str(" AS x");
            let tokens: Vec<_> = Lexer::new(&sql, to.dialect()).mode(to.mode()).collect();
            prop_assert_eq!(tokens.len(), 4, "{}", sql);
            prop_assert_eq!(decode(&tokens[1], to.dialect()), Ok(v.clone()));
        }
    }

    /// A value written by a client in its dialect and mode reaches the backend's lexer unchanged.
    #[test]
    fn requote_carries_client_values(v in value(), w in value()) {
        let sources = [
            (Dialect::MySql, LexMode::default(), MY),
            (Dialect::MySql, NBE, MY_NBE),
            (Dialect::Postgres, LexMode::default(), PG),
        ];
        for (from, mode, client) in sources {
            let (Some(a), Some(b)) = (literal(&v, client), literal(&w, client)) else { continue };
            let sql = format!("UPDATE t SET v = {a} WHERE k = {b}");
            for to in TARGETS.into_iter().filter(|t| t.dialect() != from) {
                match requote(&sql, from, mode, to) {
                    Ok(out) => prop_assert_eq!(values(&out, to), vec![v.clone(), w.clone()], "{} -> {}", sql, out),
                    Err(e) => prop_assert!(
                        matches!(e, RequoteError::Nul(_)) && (v.contains('\0') || w.contains('\0')),
                        "{} refused: {}", sql, e
                    ),
                }
            }
        }
    }

    /// Arbitrary text is either refused or carried with the same literal values.
    #[test]
    fn requote_never_changes_a_value(s in "[-'\"`$/*#!?:@_a-zA-Z0-9 \\\\\n.eEuUxXnN&|;%]{0,48}") {
        for (from, mode) in [(Dialect::MySql, LexMode::default()), (Dialect::MySql, NBE), (Dialect::Postgres, LexMode::default()), (Dialect::Postgres, SCS_OFF)] {
            let source: Vec<Option<String>> = Lexer::new(&s, from)
                .mode(mode)
                .filter(|t| matches!(t.kind, TokenKind::String(_)))
                .map(|t| decode(&t, from).ok())
                .collect();
            for to in TARGETS.into_iter().filter(|t| t.dialect() != from) {
                let Ok(out) = requote(&s, from, mode, to) else { continue };
                let carried: Vec<Option<String>> = Lexer::new(&out, to.dialect())
                    .mode(to.mode())
                    .filter(|t| matches!(t.kind, TokenKind::String(_)))
                    .map(|t| match t.kind {
                        TokenKind::String(StringKind::Bit | StringKind::Hex) => None,
                        _ => decode(&t, to.dialect()).ok(),
                    })
                    .collect();
                let source: Vec<Option<String>> = Lexer::new(&s, from)
                    .mode(mode)
                    .filter(|t| matches!(t.kind, TokenKind::String(_)))
                    .zip(&source)
                    .map(|(t, v)| if matches!(t.kind, TokenKind::String(StringKind::Bit | StringKind::Hex)) { None } else { v.clone() })
                    .collect();
                prop_assert_eq!(carried, source, "{:?} -> {:?}", s, out);
            }
        }
    }
}
