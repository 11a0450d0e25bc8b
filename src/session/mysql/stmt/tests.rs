use super::{executed_effects, Effect, PinReason};

#[test]
fn prepared_settings_are_tracked_or_pin() {
    let set = |name: &str, stmt: &str| Effect::Set { name: name.into(), stmt: stmt.into() };
    assert_eq!(executed_effects(b"SET autocommit = 0", 0), [(0, set("autocommit", "SET SESSION autocommit = 0"))]);
    assert_eq!(executed_effects(b"SET autocommit = ?", 1), [(0, Effect::Pin(PinReason::UntrackedSetting))]);
    assert_eq!(executed_effects(b"SELECT ?", 1), []);
}
