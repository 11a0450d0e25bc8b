//! Parity tests: every case of the two classifiers this one replaced (`session::state::classify`
//! for PostgreSQL, `session::mysql::state` for MySQL), each with its expected result, plus the
//! cases where the dialects differ on the same text.

use super::*;

fn set(name: &str, stmt: &str) -> Effect {
    Effect::Set { name: name.into(), stmt: stmt.into() }
}

const ROLE: Effect = Effect::Pin(PinReason::Role);
const TEMP: Effect = Effect::Pin(PinReason::TempObject);

fn pg(sql: &str) -> Effects {
    session_effects(sql, Dialect::Postgres)
}

fn my(sql: &str) -> Effects {
    session_effects(sql, Dialect::MySql)
}

/// PostgreSQL effects without their statement indexes.
fn pg_effects(sql: &str) -> Vec<Effect> {
    pg(sql).effects().cloned().collect()
}

/// MySQL effects without their statement indexes.
fn only(sql: &str) -> Vec<Effect> {
    my(sql).effects().cloned().collect()
}

fn may_have_effects_pg(sql: &str) -> bool {
    may_have_effects(sql, Dialect::Postgres)
}

// PostgreSQL (from session::state::classify).

#[test]
fn session_characteristics_are_the_settings_they_change() {
    assert_eq!(
        pg_effects("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY"),
        vec![set("default_transaction_read_only", "SET default_transaction_read_only TO 'on'")]
    );
    assert_eq!(
        pg_effects(
            "set session characteristics as transaction isolation level repeatable read, read write, not deferrable"
        ),
        vec![
            set("default_transaction_isolation", "SET default_transaction_isolation TO 'repeatable read'"),
            set("default_transaction_read_only", "SET default_transaction_read_only TO 'off'"),
            set("default_transaction_deferrable", "SET default_transaction_deferrable TO 'off'"),
        ]
    );
    for unread in ["SET SESSION CHARACTERISTICS AS TRANSACTION", "SET SESSION CHARACTERISTICS AS TRANSACTION READ"] {
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
        assert!(!scan(sql, Dialect::Postgres).list.is_empty(), "{sql}");
        assert!(may_have_effects(sql, Dialect::Postgres), "{sql}");
        assert_eq!(pg(sql), scan(sql, Dialect::Postgres), "{sql}");
    }
    let plain = [
        "SELECT abalance FROM pgbench_accounts WHERE aid = 42",
        "UPDATE pgbench_tellers SET tbalance = tbalance + 1 WHERE tid = 3",
        "select * from orders order by id limit 10 offset 20",
        "INSERT INTO temp_log VALUES (1)",
        "BEGIN",
    ];
    for sql in plain {
        assert!(scan(sql, Dialect::Postgres).list.is_empty(), "{sql}");
        assert!(pg_effects(sql).is_empty(), "{sql}");
    }
    // No needle: skipped without lexing.
    assert!(!may_have_effects_pg("SELECT abalance FROM pgbench_accounts WHERE aid = 42"));
    assert!(!may_have_effects_pg("INSERT INTO orders VALUES (1, 'x')"));
    assert!(!may_have_effects_pg(""));
}

#[test]
fn recognizes_set_forms() {
    assert_eq!(pg_effects("SET search_path = app, public"), vec![set("search_path", "SET search_path = app, public")]);
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

// MySQL (from session::mysql::state).

#[test]
fn mysql_recognizes_set_forms() {
    assert_eq!(only("SET time_zone = '+01:00'"), vec![set("time_zone", "SET SESSION time_zone = '+01:00'")]);
    assert_eq!(only("set session sql_mode='ANSI'"), vec![set("sql_mode", "SET SESSION sql_mode = 'ANSI'")]);
    assert_eq!(only("SET @@session.autocommit = 0"), vec![set("autocommit", "SET SESSION autocommit = 0")]);
    assert_eq!(only("SET @@wait_timeout=5"), vec![set("wait_timeout", "SET SESSION wait_timeout = 5")]);
    assert_eq!(
        only("SET a = CONCAT('x', 'y'), b = 2"),
        vec![set("a", "SET SESSION a = CONCAT('x', 'y')"), set("b", "SET SESSION b = 2")]
    );
    assert_eq!(only("SET NAMES latin1"), vec![set("names", "SET NAMES latin1")]);
    assert_eq!(only("SET CHARACTER SET utf8mb4"), vec![set("names", "SET CHARACTER SET utf8mb4")]);
    assert!(only("SET GLOBAL max_connections = 5").is_empty());
    assert!(only("SET @@global.max_connections = 5").is_empty());
    assert!(only("SET STATEMENT max_statement_time=1 FOR SELECT 1").is_empty());
    assert_eq!(only("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"), vec![Effect::Pin(PinReason::UntrackedSetting)]);
    assert_eq!(
        only("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"),
        vec![set("transaction", "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")]
    );
}

#[test]
fn mysql_recognizes_use_and_pins() {
    assert_eq!(only("USE `my``db`"), vec![Effect::Use("my`db".into())]);
    assert_eq!(only("use app"), vec![Effect::Use("app".into())]);
    assert_eq!(only("SET @x = 1"), vec![Effect::Pin(PinReason::UserVariable)]);
    assert_eq!(only("SELECT @x"), vec![Effect::Pin(PinReason::UserVariable)]);
    assert!(only("SELECT @@version").is_empty());
    assert_eq!(only("SELECT GET_LOCK('a', 1)"), vec![Effect::Pin(PinReason::AdvisoryLock)]);
    assert_eq!(only("CREATE TEMPORARY TABLE t (x int)"), vec![Effect::Pin(PinReason::TempObject)]);
    assert_eq!(only("LOCK TABLES t READ"), vec![Effect::Pin(PinReason::LockTables)]);
    assert_eq!(only("PREPARE s FROM 'SELECT 1'"), vec![Effect::Pin(PinReason::SqlPrepare)]);
    assert_eq!(only("SELECT LAST_INSERT_ID()"), vec![Effect::Pin(PinReason::LastInsertId)]);
    assert!(only("SELECT 'SET @x = 1', 'GET_LOCK(' -- LOCK TABLES").is_empty());
}

#[test]
fn mysql_multi_statements_are_indexed() {
    let Effects { list: e, statements: n } = my("SET a = 1; SELECT 1; USE b;");
    assert_eq!(n, 3);
    assert_eq!(e, vec![(0, set("a", "SET SESSION a = 1")), (2, Effect::Use("b".into()))]);
    assert_eq!(my("").statements, 1);
    let body = "CREATE PROCEDURE p() BEGIN SET @x = 1; SELECT LAST_INSERT_ID(); END";
    assert_eq!(my(body), Effects { list: Vec::new(), statements: 1 }, "a definition is one statement with no effect");
    assert_eq!(my(&format!("{body}; SET @y = 2")).statements, 2);
}

// Added with the one classifier.

#[test]
fn mysql_text_prefilter_passes_every_statement_with_an_effect() {
    let with_effects = [
        "SET time_zone = '+01:00'",
        "set names latin1",
        "USE app",
        "PREPARE s FROM 'SELECT 1'",
        "LOCK TABLES t READ",
        "SELECT GET_LOCK('a', 1)",
        "CREATE TEMPORARY TABLE t (x int)",
        "SELECT @x",
        "SELECT @@IDENTITY",
        "SELECT LAST_INSERT_ID()",
        "/* x */ SET @u = 1",
        "SELECT 1; SET sql_mode = ''",
    ];
    for sql in with_effects {
        assert!(!scan(sql, Dialect::MySql).list.is_empty(), "{sql}");
        assert!(may_have_effects(sql, Dialect::MySql), "{sql}");
        assert_eq!(my(sql), scan(sql, Dialect::MySql), "{sql}");
    }
    for sql in ["SELECT * FROM orders WHERE id = 7", "INSERT INTO t VALUES (1, 'x')", "COMMIT"] {
        assert!(!may_have_effects(sql, Dialect::MySql), "{sql}");
        assert_eq!(my(sql), Effects { list: Vec::new(), statements: 1 }, "{sql}");
    }
}

#[test]
fn statements_are_counted_in_both_dialects() {
    for dialect in [Dialect::Postgres, Dialect::MySql] {
        for (sql, n) in [
            ("SELECT 1", 1),
            ("SELECT 1;", 1),
            ("SELECT 1 ; \n", 1),
            ("", 1),
            ("SELECT ';'", 1),
            ("SELECT 1 -- ;", 1),
            ("SELECT 1; SELECT 2", 2),
            ("SELECT 1;; SELECT 2;", 2),
        ] {
            assert_eq!(session_effects(sql, dialect).statements, n, "{dialect:?}: {sql}");
            assert_eq!(session_effects(sql, dialect), scan(sql, dialect), "{dialect:?}: {sql}");
        }
    }
}

#[test]
fn mysql_default_is_a_reset() {
    assert_eq!(only("SET sql_select_limit = DEFAULT"), vec![Effect::Reset("sql_select_limit".into())]);
    assert_eq!(only("SET SESSION sql_select_limit=default;"), vec![Effect::Reset("sql_select_limit".into())]);
    assert_eq!(only("SET @@session.tx_read_only = Default"), vec![Effect::Reset(MYSQL_ACCESS_MODE.into())]);
    assert_eq!(only("SET a = DEFAULT, b = 2"), vec![Effect::Reset("a".into()), set("b", "SET SESSION b = 2")]);
    assert_eq!(only("SET a = DEFAULT + 1"), vec![set("a", "SET SESSION a = DEFAULT + 1")]);
}

#[test]
fn the_dialects_differ_where_the_languages_do() {
    // (text, PostgreSQL, MySQL)
    let cases: [(&str, Vec<Effect>, Vec<Effect>); 8] = [
        // PostgreSQL's LOCK ends with the transaction; MySQL's LOCK TABLES holds the session.
        ("LOCK TABLE t", vec![], vec![Effect::Pin(PinReason::LockTables)]),
        // PostgreSQL SET LOCAL dies with the transaction; MySQL's LOCAL is SESSION.
        ("SET LOCAL wait_timeout = 5", vec![], vec![set("wait_timeout", "SET SESSION wait_timeout = 5")]),
        ("SET x = DEFAULT", vec![Effect::Reset("x".into())], vec![Effect::Reset("x".into())]),
        // SET ROLE: a pin in both, for a different reason (PostgreSQL's is an identity).
        ("SET ROLE r", vec![ROLE], vec![Effect::Pin(PinReason::UntrackedSetting)]),
        ("SET TRANSACTION READ ONLY", vec![], vec![Effect::Pin(PinReason::UntrackedSetting)]),
        ("CREATE TEMPORARY TABLE t (x int)", vec![TEMP], vec![TEMP]),
        // MySQL's DO evaluates expressions; PostgreSQL's runs a block.
        ("DO 1", vec![Effect::Pin(PinReason::DoBlock)], vec![]),
        // A stored program's body runs when called (MySQL); `pg_temp` names a temporary schema.
        ("CREATE FUNCTION pg_temp.f() RETURNS int BEGIN SET @x = 1; RETURN 1; END", vec![TEMP], vec![]),
    ];
    for (sql, on_pg, on_my) in cases {
        assert_eq!(pg_effects(sql), on_pg, "PostgreSQL: {sql}");
        assert_eq!(only(sql), on_my, "MySQL: {sql}");
    }
}

#[test]
fn transaction_openers_in_any_position_on_both_dialects() {
    for dialect in [Dialect::Postgres, Dialect::MySql] {
        let opens = |sql| opens_transaction(sql, dialect);
        assert_eq!(opens("BEGIN"), Some("BEGIN"), "{dialect:?}");
        assert_eq!(opens("SELECT 1; BEGIN"), Some("BEGIN"), "{dialect:?}");
        assert_eq!(opens("select 1; /* c */ start transaction read only"), Some("START TRANSACTION"), "{dialect:?}");
        assert_eq!(opens("SELECT 1; START TRANSACTION; BEGIN"), Some("START TRANSACTION"), "{dialect:?}");
        for none in ["SELECT 1", "SELECT 'BEGIN'", "SELECT 1; SELECT 2", "START", "COMMIT; SELECT start FROM t", ""] {
            assert_eq!(opens(none), None, "{dialect:?} {none}");
        }
    }
    assert_eq!(opens_transaction("XA START 'x'", Dialect::MySql), Some("XA START"));
    assert_eq!(opens_transaction("SELECT 1; XA BEGIN 'x'", Dialect::MySql), Some("XA START"));
    // A MySQL stored program's body and MariaDB's anonymous block open nothing now.
    for body in ["CREATE PROCEDURE p() BEGIN START TRANSACTION; SELECT 1; END", "BEGIN NOT ATOMIC SELECT 1; END"] {
        assert_eq!(opens_transaction(body, Dialect::MySql), None, "{body}");
    }
}

/// That [`mentions`] answers for `sql` what comparing every word at every offset does, for each
/// list, and [`mentioned`] the same for each word of the list.
fn agree(sql: &str) {
    assert_eq!(mentions(sql, PG_WORDS, &PG_INITIALS), mentions_anywhere(sql, PG_WORDS), "{sql:?}");
    assert_eq!(mentions(sql, MYSQL_WORDS, &MYSQL_INITIALS), mentions_anywhere(sql, MYSQL_WORDS), "{sql:?}");
    assert_eq!(mentions(sql, &OPENER_WORDS, &OPENER_INITIALS), mentions_anywhere(sql, &OPENER_WORDS), "{sql:?}");
    assert_eq!(mentioned(sql, PG_WORDS, &PG_INITIALS), each_anywhere(sql, PG_WORDS), "{sql:?}");
    assert_eq!(mentioned(sql, MYSQL_WORDS, &MYSQL_INITIALS), each_anywhere(sql, MYSQL_WORDS), "{sql:?}");
    assert_eq!(mentioned(sql, &OPENER_WORDS, &OPENER_INITIALS), each_anywhere(sql, &OPENER_WORDS), "{sql:?}");
}

/// What [`mentioned`] answers: bit `i` when `words[i]` is anywhere, by [`mentions_anywhere`].
fn each_anywhere(sql: &str, words: &[&str]) -> u16 {
    words.iter().enumerate().filter(|(_, w)| mentions_anywhere(sql, &[w])).fold(0, |bits, (i, _)| bits | 1 << i)
}

/// What [`mentions`] answers, by comparing every word at every offset.
fn mentions_anywhere(sql: &str, words: &[&str]) -> bool {
    let bytes = sql.as_bytes();
    (0..bytes.len())
        .any(|i| words.iter().any(|w| bytes.get(i..i + w.len()).is_some_and(|h| h.eq_ignore_ascii_case(w.as_bytes()))))
}

proptest::proptest! {
    #[test]
    fn the_prefilter_finds_what_a_full_comparison_finds(
        sql in "([sSeEtTdDoOaAlLuU@_ ;]|lock|Temporary|last_insert_ID|advisory|discard|x){0,24}|\\PC{0,40}"
    ) {
        agree(&sql);
    }

    /// Texts across the scan's sixteen-byte windows (and the overlap of the last one): pieces of
    /// the words, whole ones in any case, quotes, comments, dollar quotes and non-ASCII bytes.
    #[test]
    fn the_prefilter_agrees_across_windows(
        sql in "([sSeEtTdDoOaAlLuUbBgGiInNpPrRcC@_ ;'\\\"`$]|lock|Temporary|last_insert_ID|advisory|discard|BEGIN|sTaRt|set|/\\*|\\*/|--|\\$\\$|\\$tag\\$|é|中|\u{80}|\\PC){0,90}"
    ) {
        agree(&sql);
    }
}

#[test]
fn the_prefilter_finds_each_word_at_every_offset() {
    for word in PG_WORDS.iter().chain(MYSQL_WORDS).chain(&OPENER_WORDS) {
        for len in 0..70 {
            for at in 0..=len {
                let mut sql = "x".repeat(len);
                sql.insert_str(at, &word.to_uppercase());
                agree(&sql);
                // Without its last byte it is no longer there (the filler names no word).
                agree(&format!("{}{}", &sql[..at + word.len() - 1], &sql[at + word.len()..]));
            }
        }
    }
}
