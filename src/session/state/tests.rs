use super::*;

#[test]
fn effects_apply_only_on_commit() {
    let mut s = SessionState::default();
    assert_eq!(s.signature(), 0);
    s.stage_sql("SET search_path = a");
    assert_eq!(s.signature(), 0, "staged, not applied");
    s.rollback();
    s.commit();
    assert_eq!(s.signature(), 0, "rolled back SET leaves nothing");
    s.stage_sql("SET search_path = a");
    s.commit();
    let sig = s.signature();
    assert_ne!(sig, 0);
    assert_eq!(s.replay_sql(), format!("{REPLAY_PREFIX}; SET search_path = a"));
    s.stage_sql("RESET ALL");
    s.commit();
    assert_eq!(s.signature(), 0);
    assert_eq!(s.take_restore(), None, "no startup values to put back");
}

#[test]
fn settings_move_to_a_new_binary_as_they_are_and_a_pinned_or_mid_transaction_state_stays() {
    let mut s = SessionState::from_startup([("application_name", "app"), ("search_path", "s1")].into_iter());
    s.greeted(Rc::new(vec![("DateStyle".into(), "ISO, MDY".into())]));
    s.stage_sql("SET work_mem = '8MB'");
    assert!(s.freeze(false).is_none(), "a staged SET is the open transaction's");
    s.commit();
    s.report("DateStyle", "ISO, DMY");
    s.stage_sql("RESET search_path");
    s.commit();
    let shared = Rc::new(Vec::new());
    let moved = SessionState::thaw(s.freeze(false).expect("idle"), |g| {
        assert_eq!(g, vec![("DateStyle".to_string(), "ISO, MDY".to_string())]);
        shared.clone()
    });
    assert_eq!(moved.replay_sql(), s.replay_sql());
    assert_eq!(moved.signature(), s.signature());
    assert_eq!(moved.reported_value("datestyle"), Some("ISO, DMY"));
    assert_eq!(moved.restore_pending(), s.restore_pending());
    assert!(Rc::ptr_eq(&moved.greeting, &shared), "the greeting is the shared copy");
    s.stage_sql("LISTEN chan");
    assert!(s.pin().is_some() && s.freeze(false).is_none(), "a pinned session's state is on its connection");
    s.commit();
    let mut moved = SessionState::thaw(s.freeze(true).expect("with its connection"), Rc::new);
    assert_eq!(moved.pin(), s.pin(), "the pin moves with the connection");
    assert_eq!(moved.take_uncounted_pin(), None, "counted where it was taken");
}

#[test]
fn a_startup_value_with_a_backslash_reads_the_same_under_either_string_mode() {
    let s = SessionState::from_startup([("application_name", "a\\b")].into_iter());
    assert_eq!(s.replay_sql(), format!("{REPLAY_PREFIX}; SET \"application_name\" TO E'a\\\\b'"));
}

#[test]
fn startup_params_become_replayable_settings() {
    let s = SessionState::from_startup([("application_name", "it's"), ("TimeZone", "UTC")].into_iter());
    assert_eq!(
        s.replay_sql(),
        format!("{REPLAY_PREFIX}; SET \"application_name\" TO 'it''s'; SET \"TimeZone\" TO 'UTC'")
    );
    let same = SessionState::from_startup([("TimeZone", "UTC"), ("application_name", "it's")].into_iter());
    assert_eq!(s.signature(), same.signature(), "order does not matter");
}

#[test]
fn a_startup_identity_pins() {
    let s = SessionState::from_startup([("role", "other")].into_iter());
    assert_eq!(s.pin(), Some(PinReason::Role));
}

#[test]
fn session_settings_override_startup_values_until_reset() {
    let mut s = SessionState::from_startup([("DateStyle", "SQL, DMY"), ("work_mem", "8MB")].into_iter());
    s.stage_sql("SET work_mem = '1MB'");
    s.commit();
    assert_eq!(
        s.replay_sql(),
        format!("{REPLAY_PREFIX}; SET \"DateStyle\" TO 'SQL, DMY'; SET work_mem = '1MB'"),
        "the client's SET replaces its startup value"
    );
    assert_eq!(s.take_restore(), None, "nothing was reset");
    s.stage_sql("RESET work_mem");
    s.commit();
    assert!(s.restore_pending());
    assert_eq!(s.take_restore().as_deref(), Some("SET \"DateStyle\" TO 'SQL, DMY'; SET \"work_mem\" TO '8MB'"));
    assert!(!s.restore_pending());
    assert_eq!(s.take_restore(), None, "taken once");
    s.stage_sql("SET work_mem = '2MB'; RESET timezone");
    s.commit();
    assert_eq!(s.take_restore(), None, "timezone has no startup value to return to");
    s.stage_sql("RESET ALL");
    s.commit();
    assert_eq!(s.take_restore().as_deref(), Some("SET \"DateStyle\" TO 'SQL, DMY'; SET \"work_mem\" TO '8MB'"));
    assert_eq!(s.replay_sql(), format!("{REPLAY_PREFIX}; SET \"DateStyle\" TO 'SQL, DMY'; SET \"work_mem\" TO '8MB'"));
}

fn greeting(params: &[(&str, &str)]) -> Rc<Vec<(String, String)>> {
    Rc::new(params.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect())
}

#[test]
fn reported_parameters_replay_as_the_full_reported_value() {
    let mut s = SessionState::default();
    s.greeted(greeting(&[("DateStyle", "ISO, MDY"), ("TimeZone", "UTC")]));
    s.stage_sql("SET datestyle TO 'SQL'");
    assert!(s.report("DateStyle", "SQL, MDY"));
    s.commit();
    s.stage_sql("SET datestyle TO dmy");
    assert!(s.report("DateStyle", "SQL, DMY"));
    s.commit();
    assert_eq!(s.replay_sql(), format!("{REPLAY_PREFIX}; SET \"DateStyle\" TO 'SQL, DMY'"));
    // A SET that changes nothing gets no ParameterStatus: the last reported value stands.
    s.stage_sql("SET datestyle TO dmy");
    s.commit();
    assert_eq!(s.replay_sql(), format!("{REPLAY_PREFIX}; SET \"DateStyle\" TO 'SQL, DMY'"));
    assert!(!s.report("DateStyle", "SQL, DMY"), "unchanged");
}

#[test]
fn a_reported_change_of_identity_pins() {
    let mut s = SessionState::default();
    s.greeted(greeting(&[("is_superuser", "on"), ("session_authorization", "app")]));
    s.report("is_superuser", "on");
    assert_eq!(s.pin(), None, "same value");
    s.report("is_superuser", "off");
    assert_eq!(s.pin(), Some(PinReason::Role));
    let mut s = SessionState::default();
    s.greeted(greeting(&[("session_authorization", "app")]));
    s.report("session_authorization", "other");
    assert_eq!(s.pin(), Some(PinReason::Role));
}

#[test]
fn an_ascii_unsafe_client_encoding_pins() {
    let mut s = SessionState::default();
    s.report("client_encoding", "LATIN9");
    assert_eq!(s.pin(), None);
    s.report("client_encoding", "SJIS");
    assert_eq!(s.pin(), Some(PinReason::ClientEncoding));
    let mut s = SessionState::default();
    s.greeted(greeting(&[("client_encoding", "UTF8")]));
    assert_eq!(s.pin(), None);
    s.greeted(greeting(&[("client_encoding", "BIG5")]));
    assert_eq!(s.pin(), Some(PinReason::ClientEncoding), "a startup encoding counts too");
}

#[test]
fn pins_survive_rollback() {
    let mut s = SessionState::default();
    s.stage_sql("CREATE TEMP TABLE t(x int)");
    s.rollback();
    assert_eq!(s.pin(), Some(PinReason::TempObject));
}

#[test]
fn a_pin_is_counted_once_by_its_first_reason() {
    let mut s = SessionState::default();
    s.stage_sql("SELECT 1");
    assert_eq!(s.take_uncounted_pin(), None, "nothing pinned");
    s.stage_sql("CREATE TEMP TABLE t(x int)");
    s.stage_sql("LISTEN jobs");
    assert_eq!(s.take_uncounted_pin(), Some(PinReason::TempObject));
    s.stage_sql("SELECT pg_advisory_lock(1)");
    assert_eq!(s.take_uncounted_pin(), None, "counted already");
    assert_eq!(s.pin(), Some(PinReason::TempObject));
}
