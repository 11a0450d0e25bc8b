//! The settings both dialects keep, fed by the one effect classifier for either dialect.

use super::*;
use crate::sql::analyze::session_effects;
use crate::sql::Dialect;

const BOTH: [Dialect; 2] = [Dialect::Postgres, Dialect::MySql];

/// Settings after every effect of `sql` applied, as a statement that succeeded (and committed).
fn after(dialect: Dialect, sql: &str) -> Settings {
    let mut s = Settings::default();
    for e in session_effects(sql, dialect).into_effects() {
        s.apply(e);
    }
    s
}

#[test]
fn a_set_is_kept_by_name_as_the_statement_that_restores_it() {
    for dialect in BOTH {
        let s = after(dialect, "SET sql_select_limit = 10");
        assert_eq!(s.iter().count(), 1, "{dialect:?}");
        let (name, stmt) = s.iter().next().expect("one setting");
        assert_eq!(s.get(name), Some(stmt), "{dialect:?}");
        assert!(stmt.contains("10"), "{dialect:?}: {stmt}");
    }
}

#[test]
fn only_a_setting_changes_the_signature() {
    let mut s = Settings::new(());
    s.apply(Effect::Set { name: "a".into(), stmt: "SET a = 1".into() });
    let set = s.signature();
    assert_ne!(set, 0);
    s.apply(Effect::Pin(PinReason::TempObject));
    assert_eq!(s.signature(), set, "a pin is no setting");
    s.apply(Effect::Use("db".into()));
    assert_eq!(s.signature(), set, "the default database is the wire's");
    s.apply(Effect::Reset("a".into()));
    assert_eq!(s.signature(), 0, "a reset changes them, back to the connection's defaults");
    assert!(s.is_empty() && s.pin() == Some(PinReason::TempObject));
}

#[test]
fn reset_all_forgets_every_setting_but_not_the_pin() {
    let mut s = Settings::new(());
    s.apply(Effect::Set { name: "a".into(), stmt: "SET a = 1".into() });
    s.apply(Effect::Set { name: "b".into(), stmt: "SET b = 1".into() });
    s.apply(Effect::Pin(PinReason::AdvisoryLock));
    s.apply(Effect::ResetAll);
    assert!(s.is_empty() && s.signature() == 0);
    assert_eq!(s.pin(), Some(PinReason::AdvisoryLock), "a pin is never lifted by a reset");
}

#[test]
fn the_first_pin_names_the_session_and_is_counted_once() {
    let mut s = Settings::new(());
    assert_eq!(s.take_uncounted_pin(), None, "nothing to count");
    s.pin_for(PinReason::Listen);
    s.pin_for(PinReason::TempObject);
    assert_eq!(s.pin(), Some(PinReason::Listen));
    assert_eq!(s.take_uncounted_pin(), Some(PinReason::Listen));
    assert_eq!(s.take_uncounted_pin(), None, "counted already");
}

#[test]
fn state_pinning_statements_pin_in_both_dialects() {
    let rows = [
        (Dialect::Postgres, "CREATE TEMP TABLE t (a int)"),
        (Dialect::Postgres, "SELECT pg_advisory_lock(1)"),
        (Dialect::Postgres, "LISTEN chan"),
        (Dialect::MySql, "CREATE TEMPORARY TABLE t (a int)"),
        (Dialect::MySql, "SELECT GET_LOCK('x', 1)"),
        (Dialect::MySql, "SET @v = 1"),
    ];
    for (dialect, sql) in rows {
        let s = after(dialect, sql);
        assert!(s.pin().is_some(), "{dialect:?}: {sql}");
        assert!(s.is_empty(), "{dialect:?}: {sql} is no replayable setting");
    }
}

#[test]
fn the_signature_is_zero_only_for_connection_defaults() {
    let mut db = Settings::new(None::<String>);
    assert_eq!(db.signature(), 0);
    db.set_own(Some("db".into()));
    assert_ne!(db.signature(), 0, "the wire's own part counts");
    for dialect in BOTH {
        let s = after(dialect, "SET sql_select_limit = 10");
        let sig = s.signature();
        assert_ne!(sig, 0, "{dialect:?}");
        assert_eq!(sig, after(dialect, "SET sql_select_limit = 10").signature(), "{dialect:?}");
        assert_ne!(sig, after(dialect, "SET sql_select_limit = 11").signature(), "{dialect:?}");
        let with_db = Settings::thaw(s.freeze(false).expect("not pinned"), Some("db"));
        assert_ne!(sig, with_db.signature(), "{dialect:?}: the wire's part tells them apart");
    }
}

#[test]
fn settings_move_to_a_new_binary_and_a_pin_only_with_its_connection() {
    for dialect in BOTH {
        let s = after(dialect, "SET sql_select_limit = 10");
        let moved = Settings::thaw(s.freeze(false).expect("nothing pins it"), ());
        assert_eq!(moved.iter().collect::<Vec<_>>(), s.iter().collect::<Vec<_>>(), "{dialect:?}");
        assert_eq!(moved.signature(), s.signature(), "{dialect:?}");
        let mut pinned = s.clone();
        pinned.pin_for(PinReason::TempObject);
        assert!(pinned.freeze(false).is_none(), "{dialect:?}: the pinned state is on its connection");
        let mut moved = Settings::thaw(pinned.freeze(true).expect("with its connection"), ());
        assert_eq!(moved.pin(), Some(PinReason::TempObject), "{dialect:?}");
        assert_eq!(moved.take_uncounted_pin(), None, "{dialect:?}: counted by the process it began in");
    }
}

#[test]
fn the_frozen_form_is_the_one_older_binaries_wrote() {
    let mut s = Settings::new(());
    s.apply(Effect::Set { name: "a".into(), stmt: "SET a = 1".into() });
    s.pin_for(PinReason::TempObject);
    let json = serde_json::to_string(&s.freeze(true).expect("with its connection")).expect("json");
    assert_eq!(json, r#"{"settings":[["a","SET a = 1"]],"pin":"temp_object"}"#);
}
