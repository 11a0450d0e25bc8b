use super::*;

#[test]
fn causes_read_as_the_sessions_said_them_before() {
    let fatal = RelayError::BackendFatal { code: "57P01".into(), message: "terminating".into() };
    assert_eq!(fatal.cause().as_deref(), Some("57P01: terminating"));
    let tag = crate::protocol::pg::tag::backend::ROW_DESCRIPTION;
    let out_of_step = RelayError::OutOfStep { tag }.cause();
    assert_eq!(out_of_step.as_deref(), Some("protocol violation: the backend sent message type 'T'"));
    assert_eq!(RelayError::BackendClosed(None).cause(), None);
    assert_eq!(RelayError::CancelIgnored { timeout_ms: 50 }.code(), "relay.cancel_ignored");
    assert_eq!(RelayError::ClientClosed(None).origin(), Origin::Client);
}

/// The label each cause feeds `sqp_relay_errors_total{code}`: stable, since dashboards and
/// alerts key on it, and distinct per variant.
#[test]
fn each_cause_has_its_own_stable_code() {
    let reset = || Some(std::io::Error::from(std::io::ErrorKind::ConnectionReset));
    let table = [
        (RelayError::BackendClosed(None), "relay.backend_closed"),
        (RelayError::BackendClosed(reset()), "relay.backend_closed"),
        (RelayError::ClientClosed(reset()), "relay.client_closed"),
        (RelayError::OutOfStep { tag: 0 }, "relay.out_of_step"),
        (RelayError::OutOfSequence { expected: 1, got: 3 }, "relay.out_of_sequence"),
        (RelayError::Malformed("x".into()), "relay.malformed"),
        (RelayError::Unsendable("x".into()), "relay.unsendable"),
        (RelayError::BackendFatal { code: "57P01".into(), message: "x".into() }, "relay.backend_fatal"),
        (RelayError::TimedOut { timeout_ms: 1 }, "relay.timed_out"),
        (RelayError::CancelIgnored { timeout_ms: 1 }, "relay.cancel_ignored"),
    ];
    for (error, code) in &table {
        assert_eq!(error.code(), *code, "{error:?}");
    }
    let distinct: std::collections::HashSet<_> = table.iter().map(|(e, _)| e.code()).collect();
    assert_eq!(distinct.len(), table.len() - 1, "one code per variant");
}
