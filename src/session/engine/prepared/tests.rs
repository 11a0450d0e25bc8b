use std::num::NonZeroU32;

use super::{admission, admit, forget, make_room, next_id, statement_key, touch, Refusal};
use crate::config::Limits;

fn limits(count: u32, bytes: usize, budget: u64) -> Limits {
    Limits {
        session_prepared_statements: NonZeroU32::new(count).expect("non-zero"),
        session_prepared_bytes: bytes,
        client_buffer_budget: budget,
        ..Limits::default()
    }
}

#[test]
fn touch_makes_the_statement_the_most_recently_used() {
    let mut on_conn: Vec<(u64, u32)> = vec![(1, 10), (2, 20), (3, 30)];
    assert_eq!(touch(&mut on_conn, 1), Some((1, 10)));
    assert_eq!(on_conn, [(2, 20), (3, 30), (1, 10)]);
    assert_eq!(touch(&mut on_conn, 9), None, "another key is not this statement");
    assert_eq!(on_conn, [(2, 20), (3, 30), (1, 10)], "a miss changes nothing");
}

#[test]
fn admit_evicts_the_coldest_at_the_limit() {
    let mut on_conn: Vec<u64> = vec![1, 2, 3];
    assert_eq!(admit(&mut on_conn, 4, 3), [1]);
    assert_eq!(on_conn, [2, 3, 4]);
    assert_eq!(admit(&mut on_conn, 5, 4), Vec::<u64>::new(), "below the limit nothing goes");
    assert_eq!(on_conn, [2, 3, 4, 5]);
}

#[test]
fn admit_after_a_lowered_limit_evicts_down_to_it() {
    let mut on_conn: Vec<u64> = vec![1, 2, 3, 4, 5];
    assert_eq!(admit(&mut on_conn, 6, 2), [1, 2, 3, 4]);
    assert_eq!(on_conn, [5, 6]);
}

#[test]
fn admit_replaces_an_older_entry_of_the_same_key_first() {
    // MySQL: the same text prepared again gets a new server id; the old one is closed.
    let mut on_conn: Vec<(u64, u32)> = vec![(1, 10), (2, 20)];
    assert_eq!(admit(&mut on_conn, (1, 11), 2), [(1, 10)], "its own old id makes the room");
    assert_eq!(on_conn, [(2, 20), (1, 11)]);
    assert_eq!(admit(&mut on_conn, (2, 21), 1), [(2, 20), (1, 11)], "then the coldest down to the limit");
    assert_eq!(on_conn, [(2, 21)]);
}

#[test]
fn forget_takes_the_one_statement_off() {
    let mut on_conn: Vec<(u64, u32)> = vec![(1, 10), (2, 20)];
    assert_eq!(forget(&mut on_conn, 1), Some((1, 10)));
    assert_eq!(forget(&mut on_conn, 1), None, "gone already");
    assert_eq!(on_conn, [(2, 20)]);
}

#[test]
fn a_zero_limit_still_keeps_the_statement_being_prepared() {
    let mut on_conn: Vec<u64> = vec![1];
    assert_eq!(make_room(&mut on_conn, 0), [1]);
    assert!(on_conn.is_empty());
    assert_eq!(admit(&mut on_conn, 2, 0), Vec::<u64>::new());
    assert_eq!(on_conn, [2]);
}

#[test]
fn make_room_on_an_empty_connection_takes_nothing() {
    let mut on_conn: Vec<u64> = Vec::new();
    assert!(make_room(&mut on_conn, 1).is_empty());
}

#[test]
fn admission_counts_statements_first() {
    let l = limits(2, 100, 1000);
    let mut drawn = None;
    assert_eq!(admission(&l, 2, 0, 1, |_, _| true), Err(Refusal::Count(2)));
    assert_eq!(
        admission(&l, 1, 10, 5, |total, budget| {
            drawn = Some((total, budget));
            true
        }),
        Ok(())
    );
    assert_eq!(drawn, Some((15, 1000)), "the session's new total is drawn against the process's budget");
}

#[test]
fn admission_refuses_past_the_session_bytes_without_drawing() {
    let l = limits(10, 100, 1000);
    let mut asked = false;
    let verdict = admission(&l, 0, 90, 11, |_, _| {
        asked = true;
        true
    });
    assert_eq!(verdict, Err(Refusal::Bytes(100)));
    assert!(!asked, "nothing is drawn for a statement refused by the session's own limit");
    assert_eq!(admission(&l, 0, 90, 10, |_, _| true), Ok(()), "exactly the limit fits");
}

#[test]
fn admission_refuses_when_the_budget_is_spent() {
    let l = limits(10, 100, 1000);
    assert_eq!(admission(&l, 0, 0, 10, |_, _| false), Err(Refusal::Budget));
}

#[test]
fn admission_saturates_instead_of_wrapping() {
    let l = limits(10, usize::MAX, u64::MAX);
    assert_eq!(admission(&l, 0, u64::MAX, u64::MAX, |total, _| total == u64::MAX), Ok(()));
}

#[test]
fn statement_keys_are_stable_and_tell_statements_apart() {
    use std::hash::{BuildHasher, Hash, Hasher};
    // The key the wires used before it moved here: keys name statements on backend
    // connections that outlive a handover to a new binary (#40), so they must not change.
    let mut h = ahash::RandomState::with_seeds(0x5150, 0x9e37_79b9, 0x7f4a_7c15, 0x2545_f491).build_hasher();
    "SELECT $1".hash(&mut h);
    [23u32][..].hash(&mut h);
    7u64.hash(&mut h);
    let before = h.finish();
    let types: &[u32] = &[23];
    assert_eq!(statement_key(0x5150, ("SELECT $1", types, 7u64)), before);
    assert_ne!(statement_key(0x5150, ("SELECT $1", types, 8u64)), before, "another schema generation");
    assert_ne!(statement_key(0x6d79, ("SELECT $1", types, 7u64)), before, "another wire's seed");
}

#[test]
fn ids_skip_zero_and_those_in_use() {
    assert_eq!(next_id(0, |_| false), 1);
    assert_eq!(next_id(4, |id| id == 5 || id == 6), 7, "a statement still holding an id keeps it");
    assert_eq!(next_id(u32::MAX, |_| false), 1, "after wrapping, never 0: it names no statement");
}

#[test]
fn ids_never_take_the_last_statement_marker() {
    // MariaDB clients send 0xFFFFFFFF to mean "the statement prepared last" (COM_STMT_EXECUTE
    // after a pipelined COM_STMT_PREPARE): a statement holding it could never be named itself.
    assert_eq!(next_id(u32::MAX - 1, |_| false), 1, "0xFFFFFFFF is skipped, and 0 after it");
    assert_eq!(next_id(u32::MAX - 2, |_| false), u32::MAX - 1);
    assert_eq!(next_id(u32::MAX - 2, |id| id == u32::MAX - 1 || id == 1), 2, "wrapping past taken ids");
}
