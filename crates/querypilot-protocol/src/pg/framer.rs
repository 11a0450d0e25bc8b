//! Message framing (PostgreSQL docs 55.2.1 and 55.7): after startup every message is a type byte
//! followed by an Int32 length that counts itself and the body; the very first message of a
//! connection (startup, SSL/GSS request, cancel) has no type byte.
//!
//! The declared length is checked against the caller's limit as soon as the header is readable,
//! before the caller buffers (and so allocates for) the rest of the message. "Need more bytes" is
//! `Ok(None)`. Frames borrow from the input buffer.

use super::error::DecodeError;

/// PostgreSQL's own limit for the untagged first message (`MAX_STARTUP_PACKET_LENGTH`).
pub const MAX_STARTUP_PACKET_LEN: usize = 10_000;

/// One complete tagged message borrowed from the input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// Message type byte, e.g. `b'Q'`.
    pub tag: u8,
    /// Message contents after the length field.
    pub body: &'a [u8],
    /// Bytes the whole message occupies in the buffer (type byte + length + body).
    pub total_len: usize,
}

impl<'a> Frame<'a> {
    /// Builds a frame from its parts, e.g. to decode a message a caller framed itself.
    pub fn new(tag: u8, body: &'a [u8]) -> Self {
        Self { tag, body, total_len: body.len().saturating_add(5) }
    }
}

/// The untagged first message of a connection, borrowed from the input buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StartupFrame<'a> {
    /// Contents after the length field, starting with the Int32 protocol/request code.
    pub body: &'a [u8],
    /// Bytes the whole message occupies in the buffer (length + body).
    pub total_len: usize,
}

fn read_len(buf: &[u8], at: usize) -> Option<i32> {
    let bytes = buf.get(at..at.checked_add(4)?)?;
    <[u8; 4]>::try_from(bytes).ok().map(i32::from_be_bytes)
}

/// Checks a declared length against its minimum and the caller's limit.
fn checked_len(len: i32, min: i32, max_len: usize) -> Result<usize, DecodeError> {
    if len < min {
        return Err(DecodeError::BadLength { len });
    }
    let len = usize::try_from(len).map_err(|_| DecodeError::BadLength { len })?;
    if len > max_len {
        return Err(DecodeError::TooLarge { len, max: max_len });
    }
    Ok(len)
}

/// Decodes one tagged message from the start of `buf`.
///
/// `max_len` bounds the declared length field (which counts itself but not the type byte).
/// Returns `Ok(None)` while the message is incomplete; an oversized or impossible length is an
/// error as soon as the 5-byte header is present.
pub fn decode_frame(buf: &[u8], max_len: usize) -> Result<Option<Frame<'_>>, DecodeError> {
    let (Some(&tag), Some(len)) = (buf.first(), read_len(buf, 1)) else {
        return Ok(None);
    };
    let len = checked_len(len, 4, max_len)?;
    let total_len = len.saturating_add(1);
    Ok(buf.get(5..total_len).map(|body| Frame { tag, body, total_len }))
}

/// The type byte and total length (type byte included) of the message at the start of `buf`
/// once its 5-byte header is there, whole or not: a relay that passes a large message on in
/// pieces needs no more. Lengths are checked as in [`decode_frame`].
pub fn decode_header(buf: &[u8], max_len: usize) -> Result<Option<(u8, usize)>, DecodeError> {
    let (Some(&tag), Some(len)) = (buf.first(), read_len(buf, 1)) else {
        return Ok(None);
    };
    Ok(Some((tag, checked_len(len, 4, max_len)?.saturating_add(1))))
}

/// Decodes one message that must be of type `tag`, as [`decode_frame`] does, refusing any other
/// type as soon as its first byte arrives: PostgreSQL reads the type byte of a password message
/// first and fails there, so a peer that sends something else (a second StartupMessage during
/// SCRAM, whose "length" reads as anything) is told at once instead of waiting for its bytes.
pub fn decode_expected_frame(buf: &[u8], tag: u8, max_len: usize) -> Result<Option<Frame<'_>>, DecodeError> {
    match buf.first() {
        Some(&got) if got != tag => Err(DecodeError::UnexpectedTag { expected: tag, got }),
        _ => decode_frame(buf, max_len),
    }
}

/// One complete tagged message with the exact bytes it occupies, so that a relay forwards,
/// holds or inspects the message it decoded and never recomputes an offset into its buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RawFrame<'a> {
    tag: u8,
    body: &'a [u8],
    bytes: &'a [u8],
}

impl<'a> RawFrame<'a> {
    /// Message type byte.
    pub fn tag(&self) -> u8 {
        self.tag
    }

    /// Message contents after the length field.
    pub fn body(&self) -> &'a [u8] {
        self.body
    }

    /// The whole message: type byte, length and body.
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// Bytes the whole message occupies.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// Never: a message holds at least its type byte and length.
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// Decodes one tagged message from the start of `buf` as [`decode_frame`] does, keeping its
/// whole bytes.
pub fn decode_raw_frame(buf: &[u8], max_len: usize) -> Result<Option<RawFrame<'_>>, DecodeError> {
    let Some(f) = decode_frame(buf, max_len)? else { return Ok(None) };
    Ok(buf.get(..f.total_len).map(|bytes| RawFrame { tag: f.tag, body: f.body, bytes }))
}

/// The complete tagged messages at the start of a buffer, each with its bytes; stops at the
/// first incomplete or malformed one, which [`RawFrames::rest`] then starts with.
#[derive(Debug, Clone)]
pub struct RawFrames<'a> {
    rest: &'a [u8],
    max_len: usize,
}

impl<'a> RawFrames<'a> {
    /// Starts iterating `buf` with the given length limit (see [`decode_frame`]).
    pub fn new(buf: &'a [u8], max_len: usize) -> Self {
        Self { rest: buf, max_len }
    }

    /// The bytes after the messages yielded so far.
    pub fn rest(&self) -> &'a [u8] {
        self.rest
    }
}

impl<'a> Iterator for RawFrames<'a> {
    type Item = RawFrame<'a>;

    fn next(&mut self) -> Option<RawFrame<'a>> {
        let frame = decode_raw_frame(self.rest, self.max_len).ok()??;
        self.rest = self.rest.get(frame.len()..)?;
        Some(frame)
    }
}

/// Bytes at the start of `buf` taken by consecutive complete DataRow (`D`, 55.7) messages, read
/// from their 5-byte headers alone (bodies are not looked at). Stops before the first message
/// of another type, the first incomplete one, or one whose length [`decode_frame`] would
/// refuse under `max_len`, so that message is left for the caller's full decoder.
pub fn data_row_run(buf: &[u8], max_len: usize) -> usize {
    let mut end = 0usize;
    while buf.get(end) == Some(&b'D') {
        let Some(len) = read_len(buf, end.saturating_add(1)) else {
            break;
        };
        let Ok(len) = checked_len(len, 4, max_len) else {
            break;
        };
        let next = end.saturating_add(len).saturating_add(1);
        if next > buf.len() {
            break;
        }
        end = next;
    }
    end
}

/// Decodes the untagged first message from the start of `buf`.
///
/// The length must cover at least itself and the Int32 request code; `max_len` is usually
/// [`MAX_STARTUP_PACKET_LEN`]. Returns `Ok(None)` while the message is incomplete.
pub fn decode_startup_frame(buf: &[u8], max_len: usize) -> Result<Option<StartupFrame<'_>>, DecodeError> {
    let Some(len) = read_len(buf, 0) else {
        return Ok(None);
    };
    let total_len = checked_len(len, 8, max_len)?;
    Ok(buf.get(4..total_len).map(|body| StartupFrame { body, total_len }))
}

/// Iterates the complete tagged messages at the start of a buffer, e.g. everything one socket
/// read delivered. Stops at the first incomplete message; [`Frames::consumed`] then tells how many
/// bytes the yielded frames occupied. After an error the iterator yields nothing more.
#[derive(Debug, Clone)]
pub struct Frames<'a> {
    buf: &'a [u8],
    max_len: usize,
    consumed: usize,
    failed: bool,
}

impl<'a> Frames<'a> {
    /// Starts iterating `buf` with the given length limit (see [`decode_frame`]).
    pub fn new(buf: &'a [u8], max_len: usize) -> Self {
        Self { buf, max_len, consumed: 0, failed: false }
    }

    /// Bytes occupied by the frames yielded so far.
    pub fn consumed(&self) -> usize {
        self.consumed
    }
}

impl<'a> Iterator for Frames<'a> {
    type Item = Result<Frame<'a>, DecodeError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let rest = self.buf.get(self.consumed..)?;
        match decode_frame(rest, self.max_len) {
            Ok(Some(frame)) => {
                self.consumed = self.consumed.saturating_add(frame.total_len);
                Some(Ok(frame))
            }
            Ok(None) => None,
            Err(e) => {
                self.failed = true;
                Some(Err(e))
            }
        }
    }
}
