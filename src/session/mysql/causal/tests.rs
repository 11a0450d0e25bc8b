use super::*;

/// Texts whose first word a commit's expectation reads, with whether it is an [`ATOMIC`] one:
/// each word in several cases and followed by each kind of byte, comments and whitespace
/// before it, words that only begin like one, and texts that are no word at all.
const FIRST_WORDS: &[(&str, bool)] = &[
    ("SELECT c FROM sbtest1 WHERE id=5017", true),
    ("select 1", true),
    ("SeLeCt\t1", true),
    ("SELECT", true),
    ("  \n\r\tINSERT INTO t VALUES (1)", true),
    ("REPLACE INTO t VALUES (1)", true),
    ("UPDATE t SET a = 1", true),
    ("DELETE FROM t", true),
    ("WITH x AS (SELECT 1) SELECT * FROM x", true),
    ("VALUES (1), (2)", true),
    ("TABLE t", true),
    ("SELECT(1)", true),
    ("SELECT*FROM t", true),
    ("SELECT;", true),
    ("SELECT\u{b}1", true),
    ("\u{b}SELECT 1", true),
    ("\u{c}SELECT 1", true),
    ("/* a comment */ SELECT 1", true),
    ("# a comment\nINSERT INTO t VALUES (1)", true),
    ("-- a comment\nUPDATE t SET a = 1", true),
    ("/*!40001 SELECT */ 1", true),
    ("/*!SELECT 1*/", true),
    ("SELECT_x FROM t", false),
    ("SELECT1", false),
    ("SELECT$ FROM t", false),
    ("SELECTé", false),
    ("SELECTS 1", false),
    ("SELEC 1", false),
    ("INSERTED", false),
    ("CALL p()", false),
    ("CREATE TABLE t (a int)", false),
    ("TRUNCATE t", false),
    ("LOCK TABLES t WRITE", false),
    ("SET @a = 1", false),
    ("BEGIN", false),
    ("DO 1", false),
    ("--x\nSELECT 1", false),
    ("`SELECT`", false),
    ("'SELECT'", false),
    ("(SELECT 1)", false),
    (";SELECT 1", false),
    ("_utf8 'SELECT'", false),
    ("N'x'", false),
    ("", false),
    ("   ", false),
    ("/* only a comment */", false),
    ("/* unterminated SELECT", false),
];

#[test]
fn the_first_word_read_from_bytes_is_the_lexers() {
    for &(sql, atomic) in FIRST_WORDS {
        assert_eq!(first_word_lexed_atomic(sql), atomic, "lexed: {sql:?}");
        assert_eq!(opens_with_atomic_word(sql), atomic, "{sql:?}");
    }
}

/// A commit's expectation: the first word, read or kept by the caller, of a text of one
/// statement; never for several.
#[test]
fn only_one_statement_is_expected_atomic() {
    for &(sql, atomic) in FIRST_WORDS {
        assert_eq!(CommitGtid::expecting(sql, 1, None).atomic, atomic, "{sql:?}");
        assert_eq!(CommitGtid::expecting(sql, 1, Some(atomic)).atomic, atomic, "{sql:?} kept");
        for kept in [None, Some(atomic)] {
            assert!(!CommitGtid::expecting(sql, 2, kept).atomic, "{sql:?}");
            assert!(!CommitGtid::expecting(sql, 0, kept).atomic, "{sql:?}");
        }
    }
}

/// The underscores' windows find the tracking setting's name wherever every window finds it:
/// at either end, in any case, after underscores too close to the start for a window, beside
/// near misses.
#[test]
fn the_tracking_setting_is_found_by_its_underscores() {
    let every_window =
        |b: &[u8]| b.windows(TRACKING_SETTING.len()).any(|w| w.eq_ignore_ascii_case(TRACKING_SETTING.as_bytes()));
    let texts = [
        "SET session_track_system_variables = ''",
        "session_track_system_variables",
        "SET @@SESSION.Session_Track_System_Variables = DEFAULT",
        "a_b SET SESSION_TRACK_SYSTEM_VARIABLES='x'",
        "_session_track_system_variables_",
        "__session_track_system_variables",
        "SET x = 1; SET session_track_system_variables = 'last_gtid'",
        "SELECT 'session_track_system_variables'",
        "SELECT c FROM sbtest1 WHERE id=5017",
        "SET session_track_system_variable = ''",
        "SET sessions_track_system_variables = ''",
        "SET session_track_state_change = 1",
        "session_",
        "_",
        "",
    ];
    let mut found = 0;
    for sql in texts {
        let named = names_tracking_setting(sql.as_bytes());
        assert_eq!(named, every_window(sql.as_bytes()), "{sql:?}");
        found += usize::from(named);
    }
    assert_eq!(found, 8, "the name is in the first eight texts");
}
