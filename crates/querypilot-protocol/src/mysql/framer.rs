//! Packet framing (Client/Server Protocol, "MySQL Packets"): every packet is a 3-byte little-endian
//! payload length, a 1-byte sequence id and the payload. A payload of 2^24-1 bytes or more is split
//! into packets of exactly 0xFFFFFF bytes followed by a shorter one (possibly empty), with
//! consecutive sequence ids. [`decode_payload`] reassembles such a logical payload: it borrows when
//! the payload fits one packet and checks the declared total against the caller's limit before
//! buffering or allocating anything.

use std::borrow::Cow;

use super::codec::put_u24;
use super::error::DecodeError;

/// Size of the packet header: 3-byte length plus sequence id.
pub const HEADER_LEN: usize = 4;
/// Largest payload one physical packet carries; a packet this full continues in the next one.
pub const MAX_PACKET_PAYLOAD: usize = 0xFF_FFFF;

/// One physical packet borrowed from the input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Sequence id: 0 for the first packet of a command, incremented by each packet of either side.
    pub seq: u8,
    /// The packet's payload (at most [`MAX_PACKET_PAYLOAD`] bytes).
    pub payload: &'a [u8],
}

impl Packet<'_> {
    /// Bytes this packet occupies on the wire, header included.
    #[must_use]
    pub fn wire_len(&self) -> usize {
        HEADER_LEN + self.payload.len()
    }

    /// Whether the logical payload continues in the next packet.
    #[must_use]
    pub fn is_continued(&self) -> bool {
        self.payload.len() == MAX_PACKET_PAYLOAD
    }
}

/// A logical payload: borrowed from the input when it came in one packet, assembled otherwise.
pub type Payload<'a> = Cow<'a, [u8]>;

/// A reassembled logical payload and where it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The payload bytes, without headers.
    pub payload: Payload<'a>,
    /// Input bytes consumed (all headers and payload pieces).
    pub consumed: usize,
    /// Sequence id of the first packet.
    pub first_seq: u8,
    /// Sequence id of the last packet; the reply starts at `last_seq.wrapping_add(1)`.
    pub last_seq: u8,
}

/// Reads the header at the start of `buf`: (payload length, sequence id).
fn header(buf: &[u8]) -> Option<(usize, u8)> {
    match buf.get(..HEADER_LEN)? {
        &[a, b, c, seq] => Some((u32::from_le_bytes([a, b, c, 0]) as usize, seq)),
        _ => None,
    }
}

/// The header of the packet at the start of `buf` once its 4 bytes are there, whole or not:
/// (payload length, sequence id). A relay that passes a large packet on in pieces needs no
/// more; the length is never over [`MAX_PACKET_PAYLOAD`] (3 bytes).
pub fn decode_packet_header(buf: &[u8]) -> Option<(usize, u8)> {
    header(buf)
}

/// Decodes one physical packet from the start of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed, and refuses a packet whose declared length exceeds
/// `max_len` from its header alone, so a relay never buffers an oversized packet.
pub fn decode_packet(buf: &[u8], max_len: usize) -> Result<Option<Packet<'_>>, DecodeError> {
    let Some((len, seq)) = header(buf) else { return Ok(None) };
    if len > max_len {
        return Err(DecodeError::PayloadTooLarge { len, max: max_len });
    }
    Ok(buf.get(HEADER_LEN..HEADER_LEN + len).map(|payload| Packet { seq, payload }))
}

/// One physical packet with the wire bytes it came in (header included), so a relay can pass
/// it on untouched without computing offsets into its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WirePacket<'a> {
    /// The decoded packet.
    pub packet: Packet<'a>,
    /// Its header and payload as they arrived.
    pub wire: &'a [u8],
}

/// [`decode_packet`], keeping the packet's wire bytes: `Ok(None)` when more bytes are needed.
pub fn decode_wire_packet(buf: &[u8], max_len: usize) -> Result<Option<WirePacket<'_>>, DecodeError> {
    let Some(packet) = decode_packet(buf, max_len)? else { return Ok(None) };
    Ok(buf.get(..packet.wire_len()).map(|wire| WirePacket { packet, wire }))
}

/// Decodes one logical payload (one or more packets) from the start of `buf`.
///
/// Returns `Ok(None)` when more bytes are needed. Continuation packets must carry consecutive
/// sequence ids. The running total of declared lengths is checked against `max_len` as each header
/// is seen, before waiting for or copying its bytes.
pub fn decode_payload(buf: &[u8], max_len: usize) -> Result<Option<Frame<'_>>, DecodeError> {
    let Some(first) = decode_packet(buf, max_len)? else { return Ok(None) };
    if !first.is_continued() {
        let frame = Frame {
            payload: Cow::Borrowed(first.payload),
            consumed: first.wire_len(),
            first_seq: first.seq,
            last_seq: first.seq,
        };
        return Ok(Some(frame));
    }
    // Pass 1: walk headers only, so nothing is copied until the whole payload is present.
    let (mut offset, mut total, mut seq) = (first.wire_len(), first.payload.len(), first.seq);
    loop {
        let rest = buf.get(offset..).unwrap_or_default();
        let Some((len, next_seq)) = header(rest) else { return Ok(None) };
        let expected = seq.wrapping_add(1);
        if next_seq != expected {
            return Err(DecodeError::SequenceMismatch { expected, got: next_seq });
        }
        total = total.saturating_add(len);
        if total > max_len {
            return Err(DecodeError::PayloadTooLarge { len: total, max: max_len });
        }
        if rest.len() < HEADER_LEN + len {
            return Ok(None);
        }
        offset += HEADER_LEN + len;
        seq = next_seq;
        if len < MAX_PACKET_PAYLOAD {
            break;
        }
    }
    // Pass 2: `total` is within the limit and every byte is present.
    let mut payload = Vec::with_capacity(total);
    let mut pos = 0;
    while pos < offset {
        let Some(packet) = decode_packet(buf.get(pos..offset).unwrap_or_default(), MAX_PACKET_PAYLOAD)? else {
            break;
        };
        payload.extend_from_slice(packet.payload);
        pos += packet.wire_len();
    }
    Ok(Some(Frame { payload: Cow::Owned(payload), consumed: offset, first_seq: first.seq, last_seq: seq }))
}

/// Appends `payload` as packets starting at sequence id `first_seq`, splitting at 0xFFFFFF bytes and
/// ending with an empty packet when the length is an exact multiple of it (including zero).
/// Returns the next sequence id to use.
pub fn encode_packets(payload: &[u8], first_seq: u8, out: &mut Vec<u8>) -> u8 {
    let mut seq = first_seq;
    let mut rest = payload;
    loop {
        let take = rest.len().min(MAX_PACKET_PAYLOAD);
        let (chunk, tail) = rest.split_at(take);
        out.reserve(HEADER_LEN + take);
        put_u24(out, take as u32);
        out.push(seq);
        out.extend_from_slice(chunk);
        seq = seq.wrapping_add(1);
        rest = tail;
        if take < MAX_PACKET_PAYLOAD {
            return seq;
        }
    }
}

/// Appends one framed payload written in place by `write`, avoiding a separate payload buffer on
/// the common path. Returns the next sequence id. A payload that turns out larger than one packet
/// is moved out and re-framed with [`encode_packets`].
pub fn encode_framed(seq: u8, out: &mut Vec<u8>, write: impl FnOnce(&mut Vec<u8>)) -> u8 {
    let start = out.len();
    out.extend_from_slice(&[0, 0, 0, seq]);
    write(out);
    let len = out.len() - start - HEADER_LEN;
    if len < MAX_PACKET_PAYLOAD {
        let [a, b, c, _] = (len as u32).to_le_bytes();
        if let Some(h) = out.get_mut(start..start + 3) {
            h.copy_from_slice(&[a, b, c]);
        }
        return seq.wrapping_add(1);
    }
    let payload = out.split_off(start + HEADER_LEN);
    out.truncate(start);
    encode_packets(&payload, seq, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAX: usize = 64 << 20;

    fn framed(payload: &[u8], seq: u8) -> Vec<u8> {
        let mut out = Vec::new();
        encode_packets(payload, seq, &mut out);
        out
    }

    #[test]
    fn golden_single_packet() {
        // COM_QUERY "SELECT 1" as sent by a client: length 9, seq 0.
        let wire = framed(b"\x03SELECT 1", 0);
        assert_eq!(wire, b"\x09\x00\x00\x00\x03SELECT 1");
        let p = decode_packet(&wire, MAX).unwrap().unwrap();
        assert_eq!((p.seq, p.payload), (0, &b"\x03SELECT 1"[..]));
        let f = decode_payload(&wire, MAX).unwrap().unwrap();
        assert!(matches!(f.payload, Cow::Borrowed(_)));
        assert_eq!((f.consumed, f.first_seq, f.last_seq), (13, 0, 0));
    }

    #[test]
    fn empty_payload_is_one_empty_packet() {
        assert_eq!(framed(b"", 7), [0, 0, 0, 7]);
        let f = decode_payload(&[0, 0, 0, 7], MAX).unwrap().unwrap();
        assert_eq!((&f.payload[..], f.consumed, f.last_seq), (&b""[..], 4, 7));
    }

    #[test]
    fn need_more_bytes_is_none() {
        let wire = framed(b"abc", 1);
        for cut in 0..wire.len() {
            assert_eq!(decode_packet(&wire[..cut], MAX), Ok(None));
            assert_eq!(decode_payload(&wire[..cut], MAX), Ok(None));
        }
    }

    #[test]
    fn over_limit_refused_from_header() {
        assert_eq!(decode_packet(&[5, 0, 0, 0], 4), Err(DecodeError::PayloadTooLarge { len: 5, max: 4 }));
        assert_eq!(
            decode_payload(&[0xFF, 0xFF, 0xFF, 0], 1000),
            Err(DecodeError::PayloadTooLarge { len: 0xFF_FFFF, max: 1000 })
        );
        // The limit applies to the running total of a split payload, checked at each header.
        let mut wire = vec![0xFF, 0xFF, 0xFF, 0];
        wire.resize(HEADER_LEN + MAX_PACKET_PAYLOAD, b'x');
        wire.extend_from_slice(&[2, 0, 0, 1]);
        let err = decode_payload(&wire, MAX_PACKET_PAYLOAD + 1);
        assert_eq!(err, Err(DecodeError::PayloadTooLarge { len: MAX_PACKET_PAYLOAD + 2, max: MAX_PACKET_PAYLOAD + 1 }));
    }

    #[test]
    fn continuation_sequence_checked() {
        let mut wire = framed(&vec![1u8; MAX_PACKET_PAYLOAD + 3], 4);
        let second = HEADER_LEN + MAX_PACKET_PAYLOAD + 3;
        wire[second] = 9;
        assert_eq!(decode_payload(&wire, MAX), Err(DecodeError::SequenceMismatch { expected: 5, got: 9 }));
    }

    fn split_case(len: usize, packets: usize) {
        let payload: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let mut wire = Vec::new();
        let next = encode_packets(&payload, 255, &mut wire);
        assert_eq!(next, 255u8.wrapping_add(packets as u8));
        assert_eq!(wire.len(), len + packets * HEADER_LEN);
        wire.extend_from_slice(b"\x01\x00\x00\x00\x0e");
        let f = decode_payload(&wire, MAX).unwrap().unwrap();
        assert!(f.payload[..] == payload[..]);
        assert_eq!((f.first_seq, f.last_seq), (255, 255u8.wrapping_add(packets as u8 - 1)));
        assert_eq!(f.consumed, wire.len() - 5);
        let tail = decode_payload(&wire[f.consumed..], MAX).unwrap().unwrap();
        assert_eq!(&tail.payload[..], b"\x0e");
        // Everything short of the full split payload is "need more", never a partial payload.
        for cut in [HEADER_LEN, HEADER_LEN + MAX_PACKET_PAYLOAD, f.consumed - 1] {
            assert_eq!(decode_payload(&wire[..cut], MAX), Ok(None));
        }
    }

    #[test]
    fn split_exactly_max() {
        split_case(MAX_PACKET_PAYLOAD, 2);
    }

    #[test]
    fn split_max_plus_one() {
        split_case(MAX_PACKET_PAYLOAD + 1, 2);
    }

    #[test]
    fn split_twice_max() {
        split_case(2 * MAX_PACKET_PAYLOAD, 3);
    }

    #[test]
    fn encode_framed_matches_encode_packets() {
        for len in [0, 1, 300, MAX_PACKET_PAYLOAD - 1, MAX_PACKET_PAYLOAD, MAX_PACKET_PAYLOAD + 5] {
            let payload = vec![0xA5u8; len];
            let mut a = b"prefix".to_vec();
            let mut b = a.clone();
            let na = encode_packets(&payload, 3, &mut a);
            let nb = encode_framed(3, &mut b, |out| out.extend_from_slice(&payload));
            assert_eq!(na, nb);
            assert!(a == b, "len {len}");
        }
    }

    /// Feeds `wire` to the decoder in two pieces split at every offset and checks the same frames
    /// come out as from the whole buffer.
    #[test]
    fn chunking_invariance() {
        let mut wire = Vec::new();
        for (i, p) in [&b"\x03SELECT 1"[..], b"", b"\x0e", &[0xFE; 40][..]].iter().enumerate() {
            encode_packets(p, i as u8, &mut wire);
        }
        let whole = drain(&wire);
        assert_eq!(whole.len(), 4);
        for split in 0..=wire.len() {
            let mut buf = wire[..split].to_vec();
            let mut got = Vec::new();
            consume(&mut buf, &mut got);
            buf.extend_from_slice(&wire[split..]);
            consume(&mut buf, &mut got);
            assert!(buf.is_empty());
            assert_eq!(got, whole, "split at {split}");
        }
    }

    fn drain(wire: &[u8]) -> Vec<(u8, Vec<u8>)> {
        let mut buf = wire.to_vec();
        let mut got = Vec::new();
        consume(&mut buf, &mut got);
        got
    }

    fn consume(buf: &mut Vec<u8>, got: &mut Vec<(u8, Vec<u8>)>) {
        while let Some(f) = decode_payload(buf, MAX).unwrap() {
            got.push((f.last_seq, f.payload.to_vec()));
            let n = f.consumed;
            buf.drain(..n);
        }
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64), max in 0usize..100) {
            let _ = decode_packet(&bytes, max);
            let _ = decode_payload(&bytes, max);
        }

        #[test]
        fn round_trip(payload in proptest::collection::vec(proptest::num::u8::ANY, 0..600), seq in proptest::num::u8::ANY) {
            let wire = framed(&payload, seq);
            let f = decode_payload(&wire, MAX).unwrap().unwrap();
            proptest::prop_assert_eq!(&f.payload[..], &payload[..]);
            proptest::prop_assert_eq!(f.consumed, wire.len());
        }
    }

    #[test]
    fn a_wire_packet_keeps_its_header_and_stops_at_its_end() {
        let buf = [2, 0, 0, 5, b'h', b'i', 1, 0];
        let p = decode_wire_packet(&buf, 16).expect("frames").expect("whole");
        assert_eq!((p.packet.seq, p.packet.payload, p.wire), (5, &b"hi"[..], &buf[..6]));
        assert_eq!(decode_wire_packet(&buf[..5], 16), Ok(None));
    }
}
