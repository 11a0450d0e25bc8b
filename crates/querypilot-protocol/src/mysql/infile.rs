//! The LOCAL INFILE exchange (Client/Server Protocol, "COM_QUERY Response" → "LOCAL INFILE
//! Request"): the server answers a `LOAD DATA LOCAL INFILE` with `0xFB` + file name; the client
//! sends the file as packets of raw bytes with the following sequence ids and ends it with an
//! empty packet; the server then answers OK or ERR.
//!
//! [`FileStream`] follows the client's side as bytes arrive, so a relay can pass a file of any
//! size on in pieces without ever holding a whole packet.

use super::framer::{HEADER_LEN, MAX_PACKET_PAYLOAD};
use super::DecodeError;

/// First byte of a LOCAL INFILE request.
pub const LOCAL_INFILE_REQUEST: u8 = 0xFB;

/// The file name a LOCAL INFILE request payload asks for, `None` for any other payload.
#[must_use]
pub fn requested_file(payload: &[u8]) -> Option<&[u8]> {
    match payload.split_first() {
        Some((&LOCAL_INFILE_REQUEST, name)) => Some(name),
        _ => None,
    }
}

/// Follows the file-content packets a client sends after a LOCAL INFILE request.
///
/// The content ends with an empty packet that does not terminate a split payload: a packet of
/// exactly [`MAX_PACKET_PAYLOAD`] bytes is continued by the next one, and an empty packet after
/// it only closes that payload.
#[derive(Debug, Clone)]
pub struct FileStream {
    /// Sequence id the next packet must carry.
    next_seq: u8,
    /// Payload bytes of the current packet not yet seen.
    remaining: usize,
    /// Declared length of the current logical payload (split packets together).
    payload_len: usize,
    /// The last packet was full, so the next one continues its payload.
    continued: bool,
    /// Largest logical payload accepted.
    max_len: usize,
    /// The terminating empty packet was seen.
    done: bool,
}

impl FileStream {
    /// Starts after a request sent with sequence id `request_seq`; logical payloads longer than
    /// `max_len` are refused.
    #[must_use]
    pub fn new(request_seq: u8, max_len: usize) -> Self {
        Self {
            next_seq: request_seq.wrapping_add(1),
            remaining: 0,
            payload_len: 0,
            continued: false,
            max_len,
            done: false,
        }
    }

    /// How many leading bytes of `buf` (the client's unread input) belong to the file and can be
    /// passed on now: whole headers and as much payload as is there, up to and including the
    /// terminating empty packet. A header is taken only whole, so the count may stop short of
    /// `buf`; call again with the rest once more bytes arrived. A packet out of sequence or a
    /// payload over the limit is an error, raised from its header alone.
    pub fn advance(&mut self, buf: &[u8]) -> Result<usize, DecodeError> {
        let mut used = 0usize;
        while !self.done {
            if self.remaining > 0 {
                let take = self.remaining.min(buf.len().saturating_sub(used));
                if take == 0 {
                    break;
                }
                used += take;
                self.remaining -= take;
                continue;
            }
            let Some(&[a, b, c, seq]) = buf.get(used..used + HEADER_LEN) else {
                break;
            };
            let len = u32::from_le_bytes([a, b, c, 0]) as usize;
            if seq != self.next_seq {
                return Err(DecodeError::SequenceMismatch { expected: self.next_seq, got: seq });
            }
            let total = if self.continued { self.payload_len + len } else { len };
            if total > self.max_len {
                return Err(DecodeError::PayloadTooLarge { len: total, max: self.max_len });
            }
            used += HEADER_LEN;
            self.next_seq = seq.wrapping_add(1);
            self.done = len == 0 && !self.continued;
            self.payload_len = total;
            self.continued = len == MAX_PACKET_PAYLOAD;
            self.remaining = len;
        }
        Ok(used)
    }

    /// Whether the terminating empty packet has been passed.
    #[must_use]
    pub fn done(&self) -> bool {
        self.done
    }

    /// The sequence id the server's answer carries (valid once [`FileStream::done`]).
    #[must_use]
    pub fn next_seq(&self) -> u8 {
        self.next_seq
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::encode_packets;

    /// A file of `chunks` as a client sends it after a request with sequence id `seq`.
    fn file(chunks: &[&[u8]], seq: u8) -> (Vec<u8>, u8) {
        let mut out = Vec::new();
        let mut next = seq.wrapping_add(1);
        for c in chunks {
            next = encode_packets(c, next, &mut out);
        }
        next = encode_packets(&[], next, &mut out);
        (out, next)
    }

    #[test]
    fn request_names_the_file() {
        assert_eq!(requested_file(b"\xfb/tmp/x.csv"), Some(&b"/tmp/x.csv"[..]));
        assert_eq!(requested_file(b"\x00\x01\x00"), None);
        assert_eq!(requested_file(b""), None);
    }

    #[test]
    fn whole_file_at_once_stops_after_the_empty_packet() {
        let (mut bytes, reply) = file(&[b"1,a\n", b"2,b\n"], 1);
        let len = bytes.len();
        bytes.extend_from_slice(b"\x05\x00\x00\x00\x03trail");
        let mut s = FileStream::new(1, 1 << 20);
        assert_eq!(s.advance(&bytes), Ok(len));
        assert!(s.done());
        assert_eq!(s.next_seq(), reply);
        assert_eq!(reply, 5);
    }

    #[test]
    fn every_split_point_gives_the_same_total() {
        let (bytes, _) = file(&[b"one,1\n", b"", b"two"], 250);
        // An empty packet mid-file ends it: what follows is not the file's.
        let first_end = HEADER_LEN + 6 + HEADER_LEN;
        for cut in 0..=bytes.len() {
            let mut s = FileStream::new(250, 1 << 20);
            let a = s.advance(&bytes[..cut]).expect("valid");
            assert!(a <= cut);
            let b = s.advance(&bytes[a..]).expect("valid");
            assert_eq!(a + b, first_end, "cut at {cut}");
            assert!(s.done());
            assert_eq!(s.next_seq(), 253);
        }
    }

    #[test]
    fn an_empty_packet_after_a_full_one_continues_the_file() {
        let big = vec![b'x'; MAX_PACKET_PAYLOAD];
        let (bytes, reply) = file(&[&big, b"tail\n"], 1);
        // encode_packets adds the empty continuation packet after the full one.
        let mut s = FileStream::new(1, 2 * MAX_PACKET_PAYLOAD);
        let mut used = 0;
        while !s.done() {
            let end = (used + (1 << 16)).min(bytes.len());
            used += s.advance(&bytes[used..end]).expect("valid");
        }
        assert_eq!(used, bytes.len());
        assert!(s.done());
        assert_eq!(s.next_seq(), reply);
        assert_eq!(reply, 6, "request 1, full 2, continuation 3, tail 4, end 5");
    }

    #[test]
    fn out_of_sequence_and_oversize_packets_are_refused_from_the_header() {
        let (bytes, _) = file(&[b"abc"], 3);
        let mut s = FileStream::new(1, 1 << 20);
        assert_eq!(s.advance(&bytes), Err(DecodeError::SequenceMismatch { expected: 2, got: 4 }));
        let mut s = FileStream::new(3, 2);
        assert_eq!(s.advance(&bytes[..HEADER_LEN]), Err(DecodeError::PayloadTooLarge { len: 3, max: 2 }));
    }

    /// Feeds `bytes` in two pieces cut at `cut`, as a relay would: the second call gets what the
    /// first left over plus the rest.
    fn in_two(bytes: &[u8], cut: usize, max_len: usize) -> (Result<usize, DecodeError>, bool, u8) {
        let mut s = FileStream::new(0, max_len);
        let cut = cut.min(bytes.len());
        let first = match s.advance(&bytes[..cut]) {
            Ok(n) => n,
            Err(e) => return (Err(e), s.done(), s.next_seq()),
        };
        let second = s.advance(&bytes[first..]);
        (second.map(|n| first + n), s.done(), s.next_seq())
    }

    proptest::proptest! {
        #[test]
        fn any_bytes_any_cut_give_the_same_answer_as_one_piece(
            bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64),
            cut in 0usize..64,
            max_len in 0usize..40,
        ) {
            let mut whole = FileStream::new(0, max_len);
            let at_once = whole.advance(&bytes);
            if let Ok(n) = at_once {
                proptest::prop_assert!(n <= bytes.len());
            }
            let (pieces, done, next) = in_two(&bytes, cut, max_len);
            proptest::prop_assert_eq!(pieces, at_once.clone());
            if at_once.is_ok() {
                proptest::prop_assert_eq!((done, next), (whole.done(), whole.next_seq()));
            }
        }
    }

    #[test]
    fn split_payloads_count_against_the_limit_together() {
        let mut header = Vec::new();
        header.extend_from_slice(&[0xFF, 0xFF, 0xFF, 2]);
        let mut s = FileStream::new(1, MAX_PACKET_PAYLOAD + 10);
        assert_eq!(s.advance(&header), Ok(HEADER_LEN));
        let body = vec![0u8; MAX_PACKET_PAYLOAD];
        assert_eq!(s.advance(&body), Ok(MAX_PACKET_PAYLOAD));
        assert_eq!(
            s.advance(&[11, 0, 0, 3]),
            Err(DecodeError::PayloadTooLarge { len: MAX_PACKET_PAYLOAD + 11, max: MAX_PACKET_PAYLOAD + 10 })
        );
    }
}
