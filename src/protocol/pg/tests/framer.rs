use super::msg;
use crate::protocol::pg::framer::{
    decode_frame, decode_startup_frame, Frame, Frames, MAX_STARTUP_PACKET_LEN,
};
use crate::protocol::pg::DecodeError;

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
    assert_eq!(
        frame,
        Frame {
            tag: b'S',
            body: b"",
            total_len: 5
        }
    );
}

#[test]
fn length_below_four_is_rejected() {
    assert_eq!(
        decode_frame(b"Q\0\0\0\x03", 100),
        Err(DecodeError::BadLength { len: 3 })
    );
    assert_eq!(
        decode_frame(b"Q\xff\xff\xff\xff", 100),
        Err(DecodeError::BadLength { len: -1 })
    );
}

#[test]
fn oversized_length_is_refused_from_the_header_alone() {
    // Only the 5-byte header is present: the limit must be enforced before buffering the body.
    let header = [b'D', 0x7f, 0xff, 0xff, 0xff];
    assert_eq!(
        decode_frame(&header, 1 << 20),
        Err(DecodeError::TooLarge {
            len: i32::MAX as usize,
            max: 1 << 20
        })
    );
    assert_eq!(
        decode_frame(b"Q\0\0\0\x0b", 10),
        Err(DecodeError::TooLarge { len: 11, max: 10 })
    );
    assert!(decode_frame(b"Q\0\0\0\x0a", 10).unwrap().is_none());
}

#[test]
fn startup_frame_limits() {
    let buf = [0, 0, 0, 8, 4, 0xd2, 0x16, 0x2f];
    let f = decode_startup_frame(&buf, MAX_STARTUP_PACKET_LEN)
        .unwrap()
        .unwrap();
    assert_eq!((f.body, f.total_len), (&buf[4..], 8));
    assert_eq!(
        decode_startup_frame(&buf[..7], MAX_STARTUP_PACKET_LEN),
        Ok(None)
    );
    assert_eq!(
        decode_startup_frame(&[0, 0, 0, 7], 100),
        Err(DecodeError::BadLength { len: 7 })
    );
    assert_eq!(
        decode_startup_frame(&[0, 0, 0x27, 0x11], MAX_STARTUP_PACKET_LEN),
        Err(DecodeError::TooLarge {
            len: 10_001,
            max: MAX_STARTUP_PACKET_LEN
        })
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
    Frames::new(buf, 1 << 16)
        .map(|f| f.map(|f| (f.tag, f.body.to_vec())))
        .collect::<Result<_, _>>()
        .unwrap()
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
                frames
                    .by_ref()
                    .map(|f| f.map(|f| (f.tag, f.body.to_vec())))
                    .collect::<Result<Vec<_>, _>>()
                    .unwrap(),
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
    assert_eq!(
        DecodeError::UnsupportedProtocol { major: 2, minor: 0 }.sqlstate(),
        "0A000"
    );
}
