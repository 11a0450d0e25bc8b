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
