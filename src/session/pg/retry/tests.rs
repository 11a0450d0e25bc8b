use super::*;
use crate::protocol::pg::tag::frontend as client;

#[test]
fn the_code_field_decides_not_the_message() {
    use crate::protocol::pg::encode_error;
    use crate::session::engine::retry::retryable;
    let classify = |code: &str, message: &str| {
        let mut out = Vec::new();
        encode_error(Severity::Error, code, message, &mut out);
        retryable(Protocol::Postgres, server_error(out.get(5..).unwrap()))
    };
    assert!(classify("40P01", "whatever the server's language says"));
    assert!(!classify("XX000", "deadlock detected 40P01"));
    assert!(!retryable(Protocol::Postgres, server_error(b"")));
    assert!(!retryable(Protocol::Postgres, server_error(b"Mdeadlock\0\0")));
}

#[test]
fn alignment_of_batches() {
    let q = [client::QUERY, 0, 0, 0, 5, 0];
    assert!(aligned(&q, &Default::default()), "a simple query");
    let s = [client::SYNC, 0, 0, 0, 4];
    let mut two = q.to_vec();
    two.extend_from_slice(&s);
    assert!(!aligned(&two, &Default::default()));
    let e: std::collections::VecDeque<Expect> = [Expect::Synth(server::PARSE_COMPLETE), Expect::Sync].into();
    assert!(aligned(&s, &e));
    assert!(!aligned(&s[..3], &e), "a cut message");
    assert!(!aligned(&two, &e));
}
