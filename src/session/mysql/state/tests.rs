use super::*;
use crate::sql::analyze::{session_effects, PinReason};
use crate::sql::Dialect;

/// The effects of `sql`, as the session applies them.
fn effects(sql: &str) -> Vec<(usize, Effect)> {
    session_effects(sql, Dialect::MySql).list
}

#[test]
fn settings_and_database_move_to_a_new_binary_unless_pinned() {
    let mut s = MyState::new(Some("shop".into()), Some("SET NAMES utf8mb4".into()));
    s.apply(&effects("SET SESSION sql_mode = 'ANSI_QUOTES'; SET autocommit = 0"), 2);
    let moved = MyState::thaw(s.freeze(false).expect("not pinned"));
    assert_eq!(moved.replay_sql(), s.replay_sql());
    assert_eq!((moved.db(), moved.signature()), (Some("shop"), s.signature()));
    assert!(moved.autocommit_off());
    s.apply(&effects("LOCK TABLES t READ"), 1);
    assert!(s.pin().is_some() && s.freeze(false).is_none(), "a pinned session's state is on its connection");
    let mut moved = MyState::thaw(s.freeze(true).expect("with its connection"));
    assert_eq!(moved.pin(), s.pin(), "the pin moves with the connection");
    assert_eq!(moved.take_uncounted_pin(), None, "counted where it was taken");
}

#[test]
fn a_setting_set_back_to_default_is_forgotten() {
    let mut s = MyState::default();
    s.apply(&effects("SET sql_select_limit = 1"), 1);
    assert_eq!(s.iter().count(), 1);
    for back in [
        "SET sql_select_limit = DEFAULT",
        "SET SESSION sql_select_limit=default;",
        "SET @@session.sql_select_limit = Default",
    ] {
        s.apply(&effects("SET sql_select_limit = 1"), 1);
        s.apply(&effects(back), 1);
        assert_eq!(s.iter().count(), 0, "{back}");
        assert_eq!(s.signature(), 0, "{back}");
    }
}

#[test]
fn only_succeeded_statements_apply() {
    let mut s = MyState::default();
    assert_eq!(s.signature(), 0);
    let e = effects("SET a = 1; SET b = 2; SET @u = 3");
    s.apply(&e, 1);
    assert_eq!(s.replay_sql().as_deref(), Some("SET SESSION a = 1"));
    assert_eq!(s.pin(), Some(PinReason::UserVariable), "pins hold even when the statement failed");
    let sig = s.signature();
    assert_ne!(sig, 0);
    s.apply(&effects("USE x"), 1);
    assert_eq!(s.db(), Some("x"));
    assert_ne!(s.signature(), sig);
    s.reset(None, None);
    assert_eq!((s.signature(), s.pin()), (0, None));
}

#[test]
fn a_reset_lifts_the_pin_so_the_next_one_counts_again() {
    let mut s = MyState::default();
    s.apply(&effects("SELECT GET_LOCK('a', 1)"), 1);
    assert_eq!(s.take_uncounted_pin(), Some(PinReason::AdvisoryLock));
    s.apply(&effects("CREATE TEMPORARY TABLE t (x int)"), 1);
    assert_eq!(s.take_uncounted_pin(), None, "one pin per session");
    s.reset(None, None);
    assert_eq!(s.take_uncounted_pin(), None);
    s.apply(&effects("CREATE TEMPORARY TABLE t (x int)"), 1);
    assert_eq!(s.take_uncounted_pin(), Some(PinReason::TempObject));
}

#[test]
fn read_only_transactions_are_tracked() {
    let mut s = MyState::default();
    assert!(!s.read_only_transactions());
    s.apply(&effects("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED, READ ONLY"), 1);
    assert!(s.read_only_transactions());
    s.apply(&effects("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE"), 1);
    assert!(s.read_only_transactions(), "the isolation level leaves the access mode");
    assert_eq!(
        s.replay_sql().as_deref(),
        Some("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE; SET SESSION TRANSACTION READ ONLY")
    );
    s.apply(&effects("SET SESSION TRANSACTION READ WRITE"), 1);
    assert!(!s.read_only_transactions());
    s.apply(&effects("SET @@session.tx_read_only = ON"), 1);
    assert!(s.read_only_transactions());
    s.apply(&effects("SET tx_read_only = 0"), 1);
    assert!(!s.read_only_transactions());
    s.apply(&effects("SET transaction_read_only = 1"), 1);
    assert!(s.read_only_transactions());
}

#[test]
fn collation_names() {
    assert_eq!(names_for_collation(8).as_deref(), Some("SET NAMES latin1 COLLATE latin1_swedish_ci"));
    assert_eq!(names_for_collation(200), None);
}
