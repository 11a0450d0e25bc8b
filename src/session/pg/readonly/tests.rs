use super::*;

#[test]
fn boolean_settings_read_as_the_server_does() {
    for on in ["on", "ON", "true", "1", "yes"] {
        assert!(is_on(on), "{on}");
    }
    for off in ["off", "false", "0", "no", ""] {
        assert!(!is_on(off), "{off}");
    }
}
