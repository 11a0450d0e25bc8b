use super::msg;
use crate::pg::framer::{
    data_row_run, decode_expected_frame, decode_frame, decode_startup_frame, Frame, Frames, MAX_STARTUP_PACKET_LEN,
};
use crate::pg::DecodeError;

#[test]
fn decodes_complete_frame_and_reports_total_len() {
    let mut buf = msg(b'Q', b"SELECT 1\0");
    buf.extend_from_slice(b"Z\0"); // start of the next message
    let frame = decode_frame(&buf, 1 << 20).unwrap().unwrap();
    assert_eq!(frame.tag, b'Q');
    assert_eq!(frame.body, b"SELECT 1\0");
    assert_eq!(frame.total_len, 14);
}

#[test]
fn partial_frames_need_more_bytes() {
    let buf = msg(b'Q', b"SELECT 1\0");
    for cut in 0..buf.len() {
        assert_eq!(decode_frame(&buf[..cut], 1 << 20), Ok(None), "cut at {cut}");
    }
}

#[test]
fn empty_body_frame() {
    let frame = decode_frame(b"S\0\0\0\x04", 100).unwrap().unwrap();
    assert_eq!(frame, Frame { tag: b'S', body: b"", total_len: 5 });
}

#[test]
fn length_below_four_is_rejected() {
    assert_eq!(decode_frame(b"Q\0\0\0\x03", 100), Err(DecodeError::BadLength { len: 3 }));
    assert_eq!(decode_frame(b"Q\xff\xff\xff\xff", 100), Err(DecodeError::BadLength { len: -1 }));
}

#[test]
fn oversized_length_is_refused_from_the_header_alone() {
    // Only the 5-byte header is present: the limit must be enforced before buffering the body.
    let header = [b'D', 0x7f, 0xff, 0xff, 0xff];
    assert_eq!(decode_frame(&header, 1 << 20), Err(DecodeError::TooLarge { len: i32::MAX as usize, max: 1 << 20 }));
    assert_eq!(decode_frame(b"Q\0\0\0\x0b", 10), Err(DecodeError::TooLarge { len: 11, max: 10 }));
    assert!(decode_frame(b"Q\0\0\0\x0a", 10).unwrap().is_none());
}

#[test]
fn startup_frame_limits() {
    let buf = [0, 0, 0, 8, 4, 0xd2, 0x16, 0x2f];
    let f = decode_startup_frame(&buf, MAX_STARTUP_PACKET_LEN).unwrap().unwrap();
    assert_eq!((f.body, f.total_len), (&buf[4..], 8));
    assert_eq!(decode_startup_frame(&buf[..7], MAX_STARTUP_PACKET_LEN), Ok(None));
    assert_eq!(decode_startup_frame(&[0, 0, 0, 7], 100), Err(DecodeError::BadLength { len: 7 }));
    assert_eq!(
        decode_startup_frame(&[0, 0, 0x27, 0x11], MAX_STARTUP_PACKET_LEN),
        Err(DecodeError::TooLarge { len: 10_001, max: MAX_STARTUP_PACKET_LEN })
    );
}

fn stream() -> Vec<u8> {
    let mut s = Vec::new();
    for i in 0..40u8 {
        let body: Vec<u8> = (0..i).collect();
        s.extend(msg(b'A' + (i % 26), &body));
    }
    s
}

fn collect(buf: &[u8]) -> Vec<(u8, Vec<u8>)> {
    Frames::new(buf, 1 << 16).map(|f| f.map(|f| (f.tag, f.body.to_vec()))).collect::<Result<_, _>>().unwrap()
}

#[test]
fn chunking_invariance_at_every_offset() {
    let s = stream();
    let whole = collect(&s);
    assert_eq!(whole.len(), 40);
    for split in 0..=s.len() {
        // Deliver the stream as two reads; decode whatever is complete after each one.
        let mut pending = Vec::new();
        let mut got = Vec::new();
        for chunk in [&s[..split], &s[split..]] {
            pending.extend_from_slice(chunk);
            let mut frames = Frames::new(&pending, 1 << 16);
            got.extend(
                frames.by_ref().map(|f| f.map(|f| (f.tag, f.body.to_vec()))).collect::<Result<Vec<_>, _>>().unwrap(),
            );
            let used = frames.consumed();
            pending.drain(..used);
        }
        assert!(pending.is_empty());
        assert_eq!(got, whole, "split at {split}");
    }
}

#[test]
fn byte_by_byte_delivery_matches() {
    let s = stream();
    let mut pending = Vec::new();
    let mut got = Vec::new();
    for &b in &s {
        pending.push(b);
        while let Some(f) = decode_frame(&pending, 1 << 16).unwrap() {
            got.push((f.tag, f.body.to_vec()));
            let n = f.total_len;
            pending.drain(..n);
        }
    }
    assert_eq!(got, collect(&s));
}

#[test]
fn frames_iterator_stops_after_error() {
    let mut buf = msg(b'Q', b"x\0");
    buf.extend_from_slice(b"Q\0\0\0\x01");
    buf.extend(msg(b'S', b""));
    let mut it = Frames::new(&buf, 100);
    assert!(it.next().unwrap().is_ok());
    assert_eq!(it.next(), Some(Err(DecodeError::BadLength { len: 1 })));
    assert_eq!(it.next(), None);
    assert_eq!(it.consumed(), 7);
}

#[test]
fn decode_errors_map_to_sqlstates() {
    assert_eq!(DecodeError::BadLength { len: 1 }.sqlstate(), "08P01");
    assert_eq!(DecodeError::UnsupportedProtocol { major: 2, minor: 0 }.sqlstate(), "0A000");
}

/// DataRows of growing width (the first with 0 columns), then CommandComplete and ReadyForQuery.
fn rows_then_complete() -> (Vec<u8>, usize) {
    let mut s = Vec::new();
    for i in 0..30u16 {
        let mut body = 1u16.to_be_bytes().to_vec();
        body.extend_from_slice(&i32::from(i).to_be_bytes());
        body.extend((0..i).map(|b| b as u8));
        s.extend(msg(b'D', if i == 0 { &[0, 0] } else { &body }));
    }
    let rows = s.len();
    s.extend(msg(b'C', b"SELECT 30\0"));
    s.extend(msg(b'Z', b"I"));
    (s, rows)
}

/// The reference: complete leading `D` frames counted by the full decoder.
fn leading_rows(buf: &[u8], max: usize) -> usize {
    let mut it = Frames::new(buf, max);
    let mut end = 0;
    while let Some(Ok(f)) = it.next() {
        if f.tag != b'D' {
            break;
        }
        end += f.total_len;
    }
    end
}

#[test]
fn data_row_run_ends_at_the_first_other_message() {
    let (s, rows) = rows_then_complete();
    assert_eq!(data_row_run(&s, 1 << 16), rows);
    assert_eq!(data_row_run(&s[rows..], 1 << 16), 0, "CommandComplete is not a row");
    assert_eq!(data_row_run(b"", 1 << 16), 0);
    let mut mixed = msg(b'D', b"\0\0");
    mixed.extend(msg(b'N', b"\0"));
    mixed.extend(msg(b'D', b"\0\0"));
    assert_eq!(data_row_run(&mixed, 100), 7, "a notice between rows ends the run");
}

#[test]
fn data_row_run_counts_only_complete_rows_at_every_cut() {
    let (s, _) = rows_then_complete();
    for cut in 0..=s.len() {
        assert_eq!(data_row_run(&s[..cut], 1 << 16), leading_rows(&s[..cut], 1 << 16), "cut at {cut}");
    }
}

#[test]
fn data_row_run_leaves_bad_lengths_to_the_decoder() {
    let row = msg(b'D', b"\0\0");
    for bad in [&b"D\0\0\0\x03"[..], &b"D\xff\xff\xff\xff"[..], &[b'D', 0, 2, 0, 0][..]] {
        let mut buf = row.clone();
        buf.extend_from_slice(bad);
        buf.extend_from_slice(&[0; 70_000]);
        assert_eq!(data_row_run(&buf, 1 << 16), row.len(), "{bad:?}");
        assert!(decode_frame(&buf[row.len()..], 1 << 16).is_err(), "the decoder refuses {bad:?}");
    }
}

#[test]
fn raw_frames_carry_their_bytes_and_stop_at_a_cut_message() {
    use crate::pg::{decode_raw_frame, tag, RawFrames};
    let mut buf = vec![tag::frontend::SYNC, 0, 0, 0, 4];
    buf.extend_from_slice(&[tag::frontend::QUERY, 0, 0, 0, 6, b'x', 0]);
    let whole = buf.len();
    buf.extend_from_slice(&[tag::frontend::SYNC, 0, 0]);
    let mut frames = RawFrames::new(&buf, 1 << 16);
    let first = frames.next().expect("a Sync");
    assert_eq!((first.tag(), first.bytes(), first.body(), first.len()), (tag::frontend::SYNC, &buf[..5], &[][..], 5));
    let second = frames.next().expect("a Query");
    assert_eq!((second.tag(), second.body(), second.bytes()), (tag::frontend::QUERY, &b"x\0"[..], &buf[5..whole]));
    assert_eq!(frames.next(), None, "the cut Sync is not yielded");
    assert_eq!(frames.rest(), &buf[whole..]);
    assert_eq!(decode_raw_frame(&buf[whole..], 1 << 16), Ok(None));
    assert!(decode_raw_frame(&[tag::frontend::SYNC, 0, 0, 0, 1], 1 << 16).is_err(), "a length below 4");
}

#[test]
fn an_unexpected_message_type_is_refused_from_its_first_byte() {
    let password = msg(b'p', b"secret\0");
    let f = decode_expected_frame(&password, b'p', 100).unwrap().unwrap();
    assert_eq!((f.tag, f.body, f.total_len), (b'p', &b"secret\0"[..], password.len()));
    assert_eq!(decode_expected_frame(&password[..3], b'p', 100), Ok(None));
    assert_eq!(decode_expected_frame(&[], b'p', 100), Ok(None));
    // A second StartupMessage: its first length byte reads as type 0, whatever follows.
    let e = decode_expected_frame(&[0], b'p', 100).unwrap_err();
    assert_eq!(e, DecodeError::UnexpectedTag { expected: b'p', got: 0 });
    assert_eq!(e.to_string(), "expected message type 'p', got message type 0");
    assert_eq!(e.sqlstate(), "08P01");
    // The length is still checked for the right type.
    assert!(matches!(decode_expected_frame(b"p\x7f\xff\xff\xff", b'p', 100), Err(DecodeError::TooLarge { .. })));
}

#[test]
fn a_header_is_read_before_its_body_arrives_and_checked_like_a_frame() {
    use crate::pg::decode_header;
    let row = [b'D', 0, 0, 0x10, 4, 0, 1];
    assert_eq!(decode_header(&row[..4], 1 << 20), Ok(None), "the length is not all there");
    assert_eq!(decode_header(&row, 1 << 20), Ok(Some((b'D', 0x1005))), "the body need not be");
    assert!(matches!(decode_header(&row, 0x100), Err(DecodeError::TooLarge { .. })));
    assert!(matches!(decode_header(&[b'D', 0, 0, 0, 3], 1 << 20), Err(DecodeError::BadLength { len: 3 })));
}
