//! MySQL packet framing: `decode_packet` / `decode_payload` over a byte stream,
//! `encode_packets` → `decode_payload` round trips, and the LOCAL INFILE `FileStream`.
//!
//! Properties: no panic; a frame never consumes more than the input; the declared-size limit is
//! honoured; any payload framed by `encode_packets` reassembles to itself with consecutive
//! sequence ids; `FileStream` never claims more bytes than it was given and answers the same
//! whether the stream comes in one piece or two. (Payloads of 16 MiB and more, which need continuation packets, are beyond
//! libFuzzer's input sizes; the unit tests cover them.)
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::protocol::mysql::infile::FileStream;
use querypilot::protocol::mysql::{decode_packet, decode_payload, encode_packets, MAX_PACKET_PAYLOAD};

fuzz_target!(|data: &[u8]| {
    let Some((&limit_byte, stream)) = data.split_first() else { return };
    // A small limit sometimes, so the too-large path is reached with short inputs too.
    let max_len = if limit_byte & 0x80 != 0 { usize::from(limit_byte & 0x7F) } else { MAX_PACKET_PAYLOAD * 4 };
    let mut rest = stream;
    while let Ok(Some(frame)) = decode_payload(rest, max_len) {
        assert!(frame.consumed >= 4 && frame.consumed <= rest.len());
        assert!(frame.payload.len() <= max_len);
        let packet = decode_packet(rest, max_len).expect("packet of a decoded payload").expect("complete");
        assert_eq!(packet.seq, frame.first_seq);
        round_trip(&frame.payload, frame.first_seq);
        rest = &rest[frame.consumed..];
    }
    round_trip(stream, limit_byte);
    file_stream(stream, limit_byte, max_len);
});

fn file_stream(stream: &[u8], seq: u8, max_len: usize) {
    let mut whole = FileStream::new(seq, max_len);
    let at_once = whole.advance(stream);
    if let Ok(n) = at_once {
        assert!(n <= stream.len());
    }
    let cut = usize::from(seq) % (stream.len() + 1);
    let mut split = FileStream::new(seq, max_len);
    let pieces = split.advance(&stream[..cut]).and_then(|first| split.advance(&stream[first..]).map(|n| first + n));
    assert_eq!(pieces, at_once);
}

fn round_trip(payload: &[u8], seq: u8) {
    let mut out = Vec::new();
    let next = encode_packets(payload, seq, &mut out);
    let frame = decode_payload(&out, usize::MAX).expect("own packets").expect("complete");
    assert_eq!(frame.consumed, out.len());
    assert_eq!(&*frame.payload, payload);
    assert_eq!(frame.first_seq, seq);
    assert_eq!(frame.last_seq.wrapping_add(1), next);
}
