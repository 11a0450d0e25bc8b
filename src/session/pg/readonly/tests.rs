use super::*;

#[test]
fn a_transaction_block_is_seen_in_any_statement_of_a_text() {
    for sql in [
        "BEGIN",
        "begin isolation level serializable",
        "START TRANSACTION READ ONLY",
        "/* app */ start transaction",
        "SELECT 1; BEGIN",
        "SELECT 1;BEGIN READ ONLY;",
        "SELECT 1; -- x\n START TRANSACTION; SELECT 2",
    ] {
        assert!(begins_transaction(sql), "{sql}");
    }
    for sql in [
        "SELECT 1",
        "SELECT 'BEGIN'",
        "SELECT 1; SELECT 'START TRANSACTION'",
        "SELECT begin FROM t",
        "COMMIT; SELECT 1",
        "START",
        "SET x = 'BEGIN'; -- BEGIN",
    ] {
        assert!(!begins_transaction(sql), "{sql}");
    }
}

#[test]
fn boolean_settings_read_as_the_server_does() {
    for on in ["on", "ON", "true", "1", "yes"] {
        assert!(is_on(on), "{on}");
    }
    for off in ["off", "false", "0", "no", ""] {
        assert!(!is_on(off), "{off}");
    }
}
