use super::*;
use crate::protocol::mysql::{decode_payload, encode_packets};

#[test]
fn a_command_is_measured_by_the_headers_that_arrived() {
    let mut wire = Vec::new();
    encode_packets(&vec![3u8; MAX_PACKET_PAYLOAD + 10], 0, &mut wire);
    assert_eq!(declared(&wire[..3]), 0, "no header yet");
    assert_eq!(declared(&wire[..100]), HEADER_LEN + MAX_PACKET_PAYLOAD, "the first packet's");
    assert_eq!(declared(&wire), wire.len(), "both packets, once the second header is there");
    let f = decode_payload(&wire, usize::MAX).unwrap().unwrap();
    assert!(!alone(&f, &wire), "two packets are joined, not taken");
}

#[test]
fn a_large_command_alone_in_the_buffer_is_taken_whole() {
    let payload: Vec<u8> = (0..PIECEWISE_AT + 7).map(|i| i as u8).collect();
    let mut wire = Vec::new();
    encode_packets(&payload, 0, &mut wire);
    let f = decode_payload(&wire, usize::MAX).unwrap().unwrap();
    assert!(alone(&f, &wire));
    let mut more = wire.clone();
    more.push(0);
    let g = decode_payload(&more, usize::MAX).unwrap().unwrap();
    assert!(!alone(&g, &more), "something follows it");
    assert_eq!(take_alone(&mut wire), payload);
    assert!(wire.is_empty());
}
