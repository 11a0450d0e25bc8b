use super::*;
use crate::routing::DecisionError;

fn number(e: &MyClientError) -> (u16, [u8; 5]) {
    let mut out = Vec::new();
    e.encode(1, &mut out);
    // header(4) 0xFF code(2) '#' state(5)
    let code = u16::from_le_bytes([out[5], out[6]]);
    let mut state = [0u8; 5];
    state.copy_from_slice(&out[8..13]);
    (code, state)
}

#[test]
fn hint_errors_are_9001_qp001_and_missing_pools_a_connection_error() {
    let hint = refusal(Refusal::of(&DecisionError::HintNotHonored { reason: "row_lock".into() }));
    assert_eq!(number(&hint), (9001, *b"QP001"));
    assert_eq!(number(&refusal(Refusal::of(&DecisionError::InvalidHint))), (9001, *b"QP001"));
    let none = refusal(Refusal::of(&DecisionError::NoPool { protocol: Protocol::MySql }));
    assert_eq!(number(&none), (1105, *b"HY000"));
    let replica = DecisionError::ReplicaUnsafe { pool: "r".into(), chosen_by: "rule `x`".into(), reason: "write" };
    assert_eq!(number(&refusal(Refusal::of(&replica))), (1792, *b"25006"));
}
