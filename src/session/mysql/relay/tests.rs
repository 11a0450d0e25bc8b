use super::*;
use crate::protocol::mysql::capability::CLIENT_SESSION_TRACK;

fn eof(status: u16) -> Vec<u8> {
    [&[0xFE, 0, 0][..], &status.to_le_bytes()].concat()
}

/// An OK (no affected rows, no insert id) with `status`, no warnings, no info.
fn ok(status: u16) -> Vec<u8> {
    [&[0x00, 0, 0][..], &status.to_le_bytes(), &[0, 0, 0]].concat()
}

fn mariadb() -> MyInfo {
    MyInfo { server_version: "10.11.6-MariaDB".into(), capabilities: CLIENT_SESSION_TRACK, ..MyInfo::default() }
}

#[test]
fn an_eof_that_flags_a_state_change_leaves_it_owed_until_an_ok_carries_state() {
    let changed = SERVER_SESSION_STATE_CHANGED | 0x0002;
    let mut info = mariadb();
    note_owed(&mut info, &eof(0x0002), true);
    assert!(!info.owes_gtid, "nothing changed: nothing owed (sql_log_bin = 0)");
    note_owed(&mut info, &eof(changed), true);
    assert!(info.owes_gtid, "the EOF flagged a change it cannot carry");
    note_owed(&mut info, &eof(0x0002), true);
    note_owed(&mut info, &ok(0x0002), false);
    assert!(info.owes_gtid, "a later result set, or an OK without state, leaves it pending");
    note_owed(&mut info, &ok(changed), false);
    assert!(!info.owes_gtid, "an OK with state reported it");
}

#[test]
fn a_server_that_does_not_track_last_gtid_owes_nothing() {
    let changed = SERVER_SESSION_STATE_CHANGED | 0x0002;
    let mut mysql = MyInfo { server_version: "8.0.36".into(), ..mariadb() };
    note_owed(&mut mysql, &eof(changed), true);
    let mut untracked = MyInfo { capabilities: 0, ..mariadb() };
    note_owed(&mut untracked, &eof(changed), true);
    assert!(!mysql.owes_gtid && !untracked.owes_gtid);
}

/// Packets framed as a server frames them: a short one, an empty one, one past a read's usual size.
fn framed_stream() -> Vec<u8> {
    let mut wire = Vec::new();
    for (payload, seq) in [(vec![1u8, 2, 3], 5u8), (vec![], 6), (vec![0xFE; 5000], 7)] {
        encode_packets(&payload, seq, &mut wire);
    }
    wire
}

#[test]
fn a_packet_read_by_its_head_once_is_the_one_the_framer_decodes() {
    let wire = framed_stream();
    let mut pos = 0;
    while pos < wire.len() {
        let rest = wire.get(pos..).expect("within the stream");
        // Every prefix: the head is there exactly when the framer has the whole packet.
        for end in 0..=rest.len() {
            let prefix = rest.get(..end).expect("a prefix");
            let framed = decode_wire_packet(prefix, MAX_PACKET_PAYLOAD).expect("frames");
            let head = head_at(prefix, usize::MAX);
            assert_eq!(head.is_some(), framed.is_some(), "{end} of {} bytes at {pos}", rest.len());
            if let (Some(head), Some(framed)) = (head, framed) {
                assert!(head.whole);
                assert_eq!(packet_of(prefix, 0, head).expect("whole"), framed);
                assert_eq!(packet_of(&wire, pos, head).expect("whole"), framed, "read at its position");
            }
        }
        pos += decode_wire_packet(rest, MAX_PACKET_PAYLOAD).expect("frames").expect("whole").wire.len();
    }
}

#[test]
fn a_long_packet_is_there_once_its_header_and_first_byte_are() {
    let wire = framed_stream();
    let long = wire.get(11..).expect("the third packet"); // 4 + 3, then 4 + 0 bytes before it
    assert!(head_at(long.get(..4).expect("its header"), 5000).is_none(), "no payload byte yet");
    let head = head_at(long.get(..5).expect("its header and first byte"), 5000).expect("there");
    assert_eq!((head.len, head.seq, head.whole), (5000, 7, false));
    assert!(!head_at(long, 5000).expect("there").whole, "passed on in pieces even when buffered whole");
    assert!(head_at(long, 5001).expect("there").whole, "shorter than the piecewise length");
    assert!(head_at(long.get(..5003).expect("one byte short"), 5001).is_none());
    assert!(packet_of(long.get(..5003).expect("one byte short"), 0, head).is_err(), "never a packet cut short");
}

/// A point select's response as MariaDB sends it to a COM_STMT_EXECUTE (sequence ids from 1):
/// column count, one definition, EOF, one row, the EOF that ends it; and the wire offsets
/// after each packet.
fn point_select() -> (Vec<u8>, Vec<usize>) {
    let payloads = [
        vec![1u8],
        b"\x03def\x02db\x01t\x01t\x01c\x01c\x0c\x3f\x00\x0b\x00\x00\x00\x03\x00\x00\x00\x00\x00".to_vec(),
        eof(0x0002),
        vec![0x00, 0x00, 0x07],
        eof(0x0002),
    ];
    let (mut wire, mut ends, mut seq) = (Vec::new(), Vec::new(), 1);
    for p in &payloads {
        seq = encode_packets(p, seq, &mut wire);
        ends.push(wire.len());
    }
    (wire, ends)
}

/// What `take_run` took (its last packet's action and payload), where it left the read
/// position, and the exchange it fed.
type Ran = (Result<(Action, Vec<u8>), RelayError>, usize, Exchange);

/// `take_run` over `wire` from its start, with `room` bytes the client output may take.
fn run(wire: &[u8], room: usize, info: &mut MyInfo) -> Ran {
    let mut ex = Exchange::new(Grammar::Execute, Some(1), false);
    let mut pos = 0;
    let head = head_at(wire, large::PIECEWISE_AT).expect("a first packet");
    let taken = take_run(wire, &mut pos, head, &mut ex, Some(info), room);
    (taken.map(|(action, p)| (action, p.payload.to_vec())), pos, ex)
}

#[test]
fn a_response_read_at_once_is_taken_as_one_run_to_the_eof_that_ends_it() {
    let (wire, _) = point_select();
    let (taken, pos, ex) = run(&wire, usize::MAX, &mut mariadb());
    assert_eq!(taken.expect("in step"), (Action::ForwardEnd, eof(0x0002)));
    assert_eq!(pos, wire.len(), "every packet forwarded");
    assert!(ex.done() && ex.outcome().rows == 1 && ex.next_seq() == Some(6));
}

#[test]
fn a_run_stops_before_a_packet_not_there_whole_and_once_the_output_is_due() {
    let (wire, ends) = point_select();
    for (cut, end) in ends.iter().enumerate() {
        // The next packet cut short: the run ends with the last whole one, which is relayed.
        let short = wire.get(..end + 3).unwrap_or(&wire);
        let (taken, pos, ex) = run(short, usize::MAX, &mut mariadb());
        assert_eq!(taken.expect("in step").0, if cut == 4 { Action::ForwardEnd } else { Action::Forward });
        assert_eq!(pos, *end, "cut after packet {cut}");
        assert_eq!(ex.next_seq(), Some(cut as u8 + 2));
    }
    let (taken, pos, _) = run(&wire, ends[1], &mut mariadb());
    assert_eq!((taken.expect("in step").0, pos), (Action::Forward, ends[1]), "room for two packets");
}

#[test]
fn a_run_stops_before_an_ok_and_keeps_what_came_before_a_broken_packet() {
    let mut wire = Vec::new();
    let seq = encode_packets(&ok(0x0002), 1, &mut wire);
    let (taken, pos, _) = run(&wire, usize::MAX, &mut mariadb());
    assert_eq!(taken.expect("in step"), (Action::ForwardOk, ok(0x0002)));
    assert_eq!((pos, seq), (0, 2), "the OK is left for its own relay");

    let (mut wire, ends) = point_select();
    *wire.get_mut(ends[1] + 3).expect("the EOF's sequence id") = 9;
    let (taken, pos, _) = run(&wire, usize::MAX, &mut mariadb());
    assert!(matches!(taken, Err(RelayError::OutOfSequence { expected: 3, got: 9 })), "{taken:?}");
    assert_eq!(pos, ends[1], "the column count and definition before it were forwarded");
}

#[test]
fn an_eof_in_a_run_that_flags_a_state_change_is_noted_owed() {
    let changed = SERVER_SESSION_STATE_CHANGED | 0x0002;
    let mut wire = Vec::new();
    for (p, seq) in
        [(vec![1u8], 1), (b"\x03def".to_vec(), 2), (eof(0x0002), 3), (vec![0x00, 0x00, 0x07], 4), (eof(changed), 5)]
    {
        encode_packets(&p, seq, &mut wire);
    }
    let mut info = mariadb();
    let (taken, pos, _) = run(&wire, usize::MAX, &mut info);
    assert_eq!((taken.expect("in step").0, pos), (Action::ForwardEnd, wire.len()));
    assert!(info.owes_gtid, "the last EOF flagged a change it cannot carry");
}

#[test]
fn a_run_stops_at_the_end_of_a_result_that_more_results_follow() {
    // Its end is relayed last, so that the session may raise its warning count in place.
    let more = crate::protocol::mysql::response::SERVER_MORE_RESULTS_EXISTS | 0x0002;
    let (mut wire, mut seq) = (Vec::new(), 1);
    for p in [vec![1u8], b"\x03def".to_vec(), eof(0x0002), vec![0x00, 0x00, 0x07], eof(more), vec![1u8]] {
        seq = encode_packets(&p, seq, &mut wire);
    }
    let (taken, pos, ex) = run(&wire, usize::MAX, &mut mariadb());
    assert_eq!(taken.expect("in step"), (Action::ForwardEnd, eof(more)));
    assert_eq!(pos, wire.len() - 5, "the next result's column count is left for the next run");
    assert!(!ex.done() && seq == 7);
}
