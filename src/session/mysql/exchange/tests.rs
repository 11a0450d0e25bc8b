//! Recorded backend (and client) packet sequences replayed through an [`Exchange`], without
//! sockets: each test frames the payloads a server sends as wire bytes, decodes them packet by
//! packet as the session does and checks the actions and the outcome.

use super::*;
use crate::protocol::mysql::response::{SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_LAST_ROW_SENT};
use crate::protocol::mysql::{decode_packet, encode_packets};

const AUTOCOMMIT: u16 = SERVER_STATUS_AUTOCOMMIT;

/// An OK payload: affected rows, last insert id, status, no warnings.
fn ok(affected: u8, insert_id: u8, status: u16) -> Vec<u8> {
    let [lo, hi] = status.to_le_bytes();
    vec![OK_HEADER, affected, insert_id, lo, hi, 0, 0]
}

/// An EOF payload with `status`.
fn eof(status: u16) -> Vec<u8> {
    let [lo, hi] = status.to_le_bytes();
    vec![EOF_HEADER, 0, 0, lo, hi]
}

/// An ERR payload with error number `code` and SQLSTATE `state`.
fn err(code: u16, state: &[u8; 5]) -> Vec<u8> {
    let mut p = vec![ERR_HEADER];
    p.extend_from_slice(&code.to_le_bytes());
    p.extend_from_slice(b"#");
    p.extend_from_slice(state);
    p.extend_from_slice(b"Deadlock found when trying to get lock");
    p
}

/// A column definition payload (its contents do not matter to the exchange).
fn column(name: &str) -> Vec<u8> {
    let mut p = b"\x03def\x04test\x01t\x01t".to_vec();
    p.push(name.len() as u8);
    p.extend_from_slice(name.as_bytes());
    p.extend_from_slice(b"\x00\x0c\x3f\x00\x0b\x00\x00\x00\x03\x00\x00\x00\x00\x00");
    p
}

/// A text row of one value.
fn row(value: &str) -> Vec<u8> {
    let mut p = vec![value.len() as u8];
    p.extend_from_slice(value.as_bytes());
    p
}

/// Frames `payloads` as the server sends them, sequence ids from `first_seq` on.
fn recorded(first_seq: u8, payloads: &[Vec<u8>]) -> Vec<u8> {
    let mut wire = Vec::new();
    let mut seq = first_seq;
    for p in payloads {
        seq = encode_packets(p, seq, &mut wire);
    }
    wire
}

/// Feeds every packet of `wire` to `ex`, as the session reads them off the socket.
fn replay(ex: &mut Exchange, mut wire: &[u8]) -> Result<Vec<Action>, RelayError> {
    let mut actions = Vec::new();
    while let Some(p) = decode_packet(wire, MAX_PACKET_PAYLOAD).expect("recorded packets frame") {
        actions.push(ex.on_backend(&p)?);
        wire = wire.get(p.wire_len()..).expect("within the recording");
    }
    Ok(actions)
}

use Action::{Forward, ForwardEnd, ForwardOk};

#[test]
fn a_plain_ok_ends_the_response_with_its_status_and_affected_rows() {
    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    let actions = replay(&mut ex, &recorded(1, &[ok(3, 7, AUTOCOMMIT)])).expect("in step");
    assert_eq!(actions, [ForwardOk]);
    assert!(ex.done());
    let o = ex.outcome();
    assert_eq!((o.succeeded, o.error, o.status, o.last_insert_id, o.rows), (1, false, Some(AUTOCOMMIT), 7, 3));
    assert_eq!(ex.next_seq(), Some(2));
}

#[test]
fn an_err_ends_the_response_as_an_error() {
    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    let actions = replay(&mut ex, &recorded(1, &[err(1146, b"42S02")])).expect("in step");
    assert_eq!(actions, [Forward]);
    assert!(ex.done());
    assert!(ex.outcome().error);
    assert_eq!(ex.outcome().succeeded, 0);
}

#[test]
fn a_server_shutting_down_is_the_connections_loss_wherever_it_answers() {
    use crate::protocol::mysql::response::SERVER_MORE_RESULTS_EXISTS as MORE;
    let at_once = recorded(1, &[err(1053, b"08S01")]);
    let mid_rows = recorded(1, &[vec![1], column("a"), eof(AUTOCOMMIT), row("1"), err(1053, b"08S01")]);
    let later_result = recorded(1, &[ok(0, 0, MORE), err(1053, b"08S01")]);
    for wire in [at_once, mid_rows, later_result] {
        let mut ex = Exchange::new(Grammar::Query, Some(1), false);
        let e = replay(&mut ex, &wire).expect_err("a loss, not an answer");
        assert!(matches!(e, RelayError::BackendFatal { ref code, .. } if code == "1053"), "{e:?}");
    }
    // An operator's KILL of the connection is the statement's error, relayed as it came.
    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    assert_eq!(replay(&mut ex, &recorded(1, &[err(1927, b"70100")])).expect("in step"), [Forward]);
}

#[test]
fn a_result_set_with_eof_packets_is_followed_to_its_last_eof() {
    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    let payloads = [vec![2], column("a"), column("b"), eof(AUTOCOMMIT), row("1"), row("2"), eof(AUTOCOMMIT)];
    let wire = recorded(1, &payloads);
    let actions = replay(&mut ex, &wire).expect("in step");
    assert_eq!(actions, [Forward, Forward, Forward, Forward, Forward, Forward, ForwardEnd]);
    assert!(ex.done());
    let o = ex.outcome();
    assert_eq!((o.succeeded, o.rows, o.error, o.status), (1, 2, false, Some(AUTOCOMMIT)));
}

#[test]
fn a_result_set_under_deprecate_eof_ends_with_an_ok_headed_0xfe() {
    let mut ex = Exchange::new(Grammar::Query, Some(1), true);
    let mut end = ok(0, 0, AUTOCOMMIT);
    end[0] = EOF_HEADER;
    let payloads = [vec![1], column("a"), row("1"), row("2"), end];
    let actions = replay(&mut ex, &recorded(1, &payloads)).expect("in step");
    assert_eq!(actions, [Forward, Forward, Forward, Forward, ForwardEnd]);
    assert!(ex.done());
    assert_eq!((ex.outcome().rows, ex.outcome().status), (2, Some(AUTOCOMMIT)));
}

#[test]
fn a_result_set_without_deprecate_eof_needs_the_eof_after_its_columns() {
    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    let wire = recorded(1, &[vec![1], column("a"), row("1")]);
    assert!(matches!(replay(&mut ex, &wire), Err(RelayError::OutOfStep { tag: 1 })));
}

#[test]
fn results_chained_by_more_results_end_with_the_final_ok() {
    use crate::protocol::mysql::response::SERVER_MORE_RESULTS_EXISTS as MORE;
    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    // CALL p(): an OK, a result set, then the procedure's own final OK.
    let payloads =
        [ok(1, 0, AUTOCOMMIT | MORE), vec![1], column("a"), eof(AUTOCOMMIT | MORE), row("x"), eof(AUTOCOMMIT | MORE)];
    let actions = replay(&mut ex, &recorded(1, &payloads)).expect("in step");
    assert_eq!(actions, [ForwardOk, Forward, Forward, Forward, Forward, ForwardEnd]);
    assert!(!ex.done(), "more results are announced");
    let actions = replay(&mut ex, &recorded(7, &[ok(0, 0, AUTOCOMMIT)])).expect("in step");
    assert_eq!(actions, [ForwardOk]);
    assert!(ex.done());
    let o = ex.outcome();
    assert_eq!((o.succeeded, o.rows, o.status), (3, 2, Some(AUTOCOMMIT)));
}

#[test]
fn an_error_in_a_later_result_keeps_the_earlier_ones_succeeded() {
    use crate::protocol::mysql::response::SERVER_MORE_RESULTS_EXISTS as MORE;
    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    let actions = replay(&mut ex, &recorded(1, &[ok(0, 0, MORE), err(1064, b"42000")])).expect("in step");
    assert_eq!(actions, [ForwardOk, Forward]);
    assert!(ex.done());
    assert_eq!((ex.outcome().succeeded, ex.outcome().error), (1, true));
}

#[test]
fn a_cursor_opens_on_execute_and_fetches_end_with_last_row_sent() {
    use crate::protocol::mysql::response::SERVER_STATUS_CURSOR_EXISTS as CURSOR;
    let mut ex = Exchange::new(Grammar::Execute, Some(1), false);
    let actions = replay(&mut ex, &recorded(1, &[vec![1], column("a"), eof(AUTOCOMMIT | CURSOR)])).expect("in step");
    assert_eq!(actions, [Forward, Forward, Forward]);
    assert!(ex.done(), "no rows follow an opened cursor");
    assert!(ex.outcome().cursor);
    assert_eq!(ex.outcome().succeeded, 1);

    let binary_row = |v: u8| vec![0x00, 0x00, v];
    let mut fetch = Exchange::new(Grammar::UntilEof, Some(1), false);
    let actions = replay(&mut fetch, &recorded(1, &[binary_row(1), binary_row(2)])).expect("in step");
    assert_eq!(actions, [Forward, Forward]);
    assert!(!fetch.done());
    let last = eof(AUTOCOMMIT | CURSOR | SERVER_STATUS_LAST_ROW_SENT);
    assert_eq!(replay(&mut fetch, &recorded(3, &[last])).expect("in step"), [ForwardEnd]);
    assert!(fetch.done());
    let o = fetch.outcome();
    assert_eq!(o.rows, 2);
    assert!(o.status.is_some_and(|s| s & SERVER_STATUS_LAST_ROW_SENT != 0));
}

#[test]
fn a_local_infile_request_streams_the_clients_file_then_the_answer_follows() {
    let mut ex = Exchange::new(Grammar::LoadLocal, Some(1), false).limit_file_packets(1024);
    let request = [&[LOCAL_INFILE_REQUEST][..], b"/tmp/rows.csv"].concat();
    assert_eq!(replay(&mut ex, &recorded(1, &[request])).expect("in step"), [Action::SendFile]);
    assert!(!ex.file_done());
    // The client's file: two pieces of data and the empty packet that ends it.
    let file = recorded(2, &[b"1,a\n".to_vec(), b"2,b\n".to_vec(), Vec::new()]);
    let (first, rest) = file.split_at(6);
    assert_eq!(ex.on_client_file(first).expect("in sequence"), 6);
    assert_eq!(ex.file_seq(), Some(3));
    assert_eq!(ex.on_client_file(rest).expect("in sequence"), rest.len());
    assert!(ex.file_done());
    assert_eq!(ex.next_seq(), Some(5));
    assert_eq!(replay(&mut ex, &recorded(5, &[ok(2, 0, AUTOCOMMIT)])).expect("in step"), [ForwardOk]);
    assert!(ex.done());
    assert_eq!((ex.outcome().rows, ex.outcome().error), (2, false));
}

#[test]
fn a_clients_file_out_of_sequence_or_too_large_is_refused() {
    let request = [&[LOCAL_INFILE_REQUEST][..], b"f"].concat();
    let mut ex = Exchange::new(Grammar::LoadLocal, Some(1), false).limit_file_packets(8);
    replay(&mut ex, &recorded(1, std::slice::from_ref(&request))).expect("in step");
    let skipped = recorded(3, &[b"1,a\n".to_vec()]);
    assert!(matches!(ex.on_client_file(&skipped), Err(DecodeError::SequenceMismatch { .. })));
    let mut ex = Exchange::new(Grammar::LoadLocal, Some(1), false).limit_file_packets(8);
    replay(&mut ex, &recorded(1, &[request])).expect("in step");
    let big = recorded(2, &[b"x".repeat(9)]);
    assert!(matches!(ex.on_client_file(&big), Err(DecodeError::PayloadTooLarge { .. })));
    ex.abandon();
    assert!(ex.done());
    assert!(ex.outcome().abandoned && ex.outcome().error);
}

#[test]
fn a_local_infile_request_of_another_statement_is_refused() {
    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    let request = [&[LOCAL_INFILE_REQUEST][..], b"/etc/passwd"].concat();
    assert_eq!(replay(&mut ex, &recorded(1, &[request])).expect("in step"), [Action::RefuseFile { reply_seq: 2 }]);
    assert_eq!(ex.on_client_file(&recorded(2, &[Vec::new()])), Ok(0), "no file goes to the server");
    // The server answers the empty file it was sent with sequence id 2.
    let answer = replay(&mut ex, &recorded(3, &[ok(0, 0, AUTOCOMMIT)])).expect("in step");
    assert_eq!(answer, [Action::Refused { seq: 1, unusable: false }]);
    assert!(ex.done());
    assert!(ex.outcome().error);
}

#[test]
fn an_err_is_judged_by_its_number_and_state_fields() {
    use crate::session::engine::retry::ServerError;
    let ex = Exchange::new(Grammar::Query, Some(1), false);
    let failure = |payload: &[u8]| {
        let wire = recorded(1, &[payload.to_vec()]);
        ex.failure(&decode_packet(&wire, MAX_PACKET_PAYLOAD).expect("frames").expect("whole")).map(|f| f.error)
    };
    let pre41 = failure(b"\xFF\xBD\x04x").expect("an ERR");
    assert_eq!(pre41, ServerError { sqlstate: None, code: Some(1213) }, "pre-4.1: no SQLSTATE");
    assert_eq!(failure(&err(1205, b"HY000")), Some(ServerError { sqlstate: Some(*b"HY000"), code: Some(1205) }));
    assert_eq!(failure(&[0xFF]), Some(ServerError::default()), "undecodable: nothing to retry");
    assert_eq!(failure(&[0x00, 0, 0]), None, "an OK is no failure");
}

#[test]
fn a_deadlock_is_retryable_only_before_anything_was_forwarded() {
    use crate::session::engine::retry::retryable;
    let may_retry =
        |ex: &Exchange, p: &Packet<'_>| ex.failure(p).is_some_and(|f| !f.relayed && retryable(f.protocol, f.error));
    let deadlock = recorded(1, &[err(1213, b"40001")]);
    let first = decode_packet(&deadlock, MAX_PACKET_PAYLOAD).expect("frames").expect("whole");
    let ex = Exchange::new(Grammar::Query, Some(1), false);
    assert!(may_retry(&ex, &first));
    let lock_wait = recorded(1, &[err(1205, b"HY000")]);
    let wait = decode_packet(&lock_wait, MAX_PACKET_PAYLOAD).expect("frames").expect("whole");
    assert!(!may_retry(&ex, &wait), "a lock-wait timeout is never retried");

    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    replay(&mut ex, &recorded(1, &[vec![1], column("a"), eof(AUTOCOMMIT), row("1")])).expect("in step");
    let late = recorded(5, &[err(1213, b"40001")]);
    let late = decode_packet(&late, MAX_PACKET_PAYLOAD).expect("frames").expect("whole");
    assert!(!may_retry(&ex, &late), "rows reached the client");
    assert!(ex.failure(&late).is_some_and(|f| f.relayed));
    assert_eq!(ex.on_backend(&late).expect("in step"), Forward);
    assert!(ex.done() && ex.outcome().error);
}

#[test]
fn a_packet_out_of_sequence_loses_the_connection() {
    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    let wire = recorded(2, &[ok(0, 0, AUTOCOMMIT)]);
    assert!(matches!(replay(&mut ex, &wire), Err(RelayError::OutOfSequence { expected: 1, got: 2 })));
}

#[test]
fn a_malformed_column_count_or_a_packet_after_the_end_is_an_error() {
    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    // 0xFC announces a two-byte integer; one byte follows.
    assert!(matches!(replay(&mut ex, &recorded(1, &[vec![0xFC, 1]])), Err(RelayError::Malformed(_))));
    let mut ex = Exchange::new(Grammar::Single, Some(1), false);
    let wire = recorded(1, &[ok(0, 0, AUTOCOMMIT), ok(0, 0, AUTOCOMMIT)]);
    assert!(matches!(replay(&mut ex, &wire), Err(RelayError::OutOfStep { tag: 0 })));
}

#[test]
fn a_row_over_16_mib_continues_in_the_next_packet_with_the_same_action() {
    let mut ex = Exchange::new(Grammar::UntilEof, Some(1), false);
    let big = b"x".repeat(MAX_PACKET_PAYLOAD + 3);
    let actions = replay(&mut ex, &recorded(1, &[big, eof(AUTOCOMMIT)])).expect("in step");
    assert_eq!(actions, [Forward, Forward, ForwardEnd]);
    assert!(ex.done());
    assert_eq!(ex.outcome().rows, 1);
}

/// A byte in the middle of a value (what a continuation packet starts with).
const VALUE_BYTE: u8 = 0x78;

#[test]
fn a_long_row_and_its_continuation_are_taken_from_their_headers_alone() {
    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    let head = replay(&mut ex, &recorded(1, &[vec![1], column("a"), eof(AUTOCOMMIT)])).expect("in step");
    assert_eq!(head, [Forward, Forward, Forward]);
    // A 20 MiB value: one full packet (its first byte 0xFE, an 8-byte length) and the rest.
    assert!(matches!(ex.on_large(4, EOF_HEADER, MAX_PACKET_PAYLOAD), Ok(Some(Forward))));
    assert!(matches!(ex.on_large(5, VALUE_BYTE, 4 << 20), Ok(Some(Forward))), "the continuation");
    assert!(matches!(ex.on_large(7, VALUE_BYTE, 1 << 20), Err(RelayError::OutOfSequence { expected: 6, got: 7 })));
    assert!(matches!(ex.on_large(6, ERR_HEADER, 1 << 20), Ok(None)), "an error is read whole");
    let end = replay(&mut ex, &recorded(6, &[row("1"), eof(AUTOCOMMIT)])).expect("in step");
    assert_eq!(end, [Forward, ForwardEnd]);
    assert_eq!((ex.outcome().rows, ex.done()), (2, true));

    let mut columns = Exchange::new(Grammar::Query, Some(1), false);
    assert!(matches!(columns.on_large(1, 1, 1 << 20), Ok(None)), "only rows are passed on in pieces");
}

#[test]
fn affected_row_counts_past_u64_saturate() {
    // Found by the `mysql_exchange` fuzz target (#37): two chained OKs each claiming 2^64-1
    // affected rows (lenenc 0xFE + 8 bytes) overflowed the outcome's row count.
    use crate::protocol::mysql::response::SERVER_MORE_RESULTS_EXISTS as MORE;
    let huge = |status: u16| [&[OK_HEADER, 0xFE][..], &[0xFF; 8], &[0], &status.to_le_bytes(), &[0, 0]].concat();
    let mut ex = Exchange::new(Grammar::Query, Some(1), false);
    let actions = replay(&mut ex, &recorded(1, &[huge(MORE), huge(0)])).expect("in step");
    assert_eq!(actions, [ForwardOk, ForwardOk]);
    assert!(ex.done());
    assert_eq!(ex.outcome().rows, u64::MAX);
}

/// `status_of` as a `Reader` reads it field by field: what the positional EOF read must equal.
fn status_by_fields(payload: &[u8]) -> (Option<u16>, u64) {
    let mut r = Reader::new(payload);
    match r.u8("header") {
        Ok(EOF_HEADER) if payload.len() < EOF_MAX_LEN => {
            let _ = r.u16("warnings");
            (r.u16("status").ok(), 0)
        }
        Ok(OK_HEADER | EOF_HEADER) => ok_fields(&mut r),
        _ => (None, 0),
    }
}

#[test]
fn a_status_read_by_position_is_the_one_read_field_by_field() {
    // Every length an EOF can have and past it (a 0xFE row or OK), cut short or whole, and
    // OKs, ERRs, rows and the empty payload.
    let full = [0x11u8, 0x22, 0x33, 0x44, 0x05, 0x66, 0x77, 0x88, 0x99, 0xAA];
    let mut payloads: Vec<Vec<u8>> = (0..=full.len()).map(|n| [&[EOF_HEADER][..], &full[..n]].concat()).collect();
    payloads.extend([vec![], ok(3, 7, AUTOCOMMIT), ok(0, 0, 0x4002), vec![OK_HEADER], err(1213, b"40001"), row("x")]);
    payloads.extend([eof(AUTOCOMMIT), eof(0x4000 | AUTOCOMMIT), vec![EOF_HEADER, 0xFC, 1, 0, 2, 0, 0x22, 0]]);
    let mut statuses = std::collections::HashSet::new();
    for p in &payloads {
        let read = status_of(p);
        assert_eq!(read, status_by_fields(p), "{p:02x?}");
        statuses.insert(read.0.is_some());
    }
    assert_eq!(statuses.len(), 2, "some payloads carry a status, some do not");
}
