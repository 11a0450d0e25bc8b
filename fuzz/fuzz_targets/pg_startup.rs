//! PostgreSQL untagged first message: `decode_startup_frame` + `StartupPacket::decode`.
//!
//! Properties: no panic on any bytes; a frame never claims more bytes than the input holds; a
//! decoded packet re-encodes to exactly the bytes it came from (the decoder rejects trailing
//! bytes, so the encoding is canonical) and decodes back equal.
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::protocol::pg::framer::MAX_STARTUP_PACKET_LEN;
use querypilot::protocol::pg::{decode_startup_frame, StartupPacket};

fuzz_target!(|data: &[u8]| {
    // As the login reads it: a length-prefixed frame under PostgreSQL's own limit.
    if let Ok(Some(frame)) = decode_startup_frame(data, MAX_STARTUP_PACKET_LEN) {
        assert!(frame.total_len <= data.len() && frame.total_len == frame.body.len() + 4);
        round_trip(frame.body);
    }
    // The body directly, so the parameter parser is reached without a matching length field.
    round_trip(data);
});

fn round_trip(body: &[u8]) {
    let Ok(packet) = StartupPacket::decode(body) else { return };
    if let StartupPacket::Startup { params, .. } = &packet {
        assert!(params.len() <= querypilot::protocol::pg::startup::MAX_STARTUP_PARAMS);
        for (name, _) in params.iter() {
            assert!(!name.is_empty(), "an empty name terminates the list");
            assert!(params.get(name).is_some());
        }
    }
    let mut out = Vec::new();
    packet.encode(&mut out).expect("a decoded startup packet re-encodes");
    assert_eq!(&out[4..], body, "re-encoding is byte-exact");
    let frame = decode_startup_frame(&out, usize::MAX).expect("own frame").expect("complete");
    assert_eq!(frame.total_len, out.len());
    assert_eq!(StartupPacket::decode(frame.body).expect("re-decodes"), packet);
}
