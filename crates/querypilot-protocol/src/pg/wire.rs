//! Checked reads and length-patched writes of the protocol's primitive types (PostgreSQL docs
//! 55.6 "Message Data Types": Int8/16/32 big-endian, String = NUL-terminated, Byten).
//!
//! Every read is bounds-checked and returns a [`DecodeError`] naming the field instead of
//! panicking; every write goes through [`MessageWriter`], which patches the length field at the
//! end and rolls the output back on failure so callers never see half a message.

use super::error::{DecodeError, EncodeError};

/// A cursor over a message body that borrows every field from the input (zero-copy).
#[derive(Debug, Clone)]
pub(crate) struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// Bytes not consumed yet.
    pub(crate) fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Takes exactly `n` bytes.
    pub(crate) fn bytes(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        let (head, tail) = self.buf.split_at_checked(n).ok_or(DecodeError::Truncated { what })?;
        self.buf = tail;
        Ok(head)
    }

    /// Takes `N` bytes as an array.
    pub(crate) fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], DecodeError> {
        let head = self.bytes(N, what)?;
        <[u8; N]>::try_from(head).map_err(|_| DecodeError::Truncated { what })
    }

    /// Reads an Int8 as an unsigned byte.
    pub(crate) fn u8(&mut self, what: &'static str) -> Result<u8, DecodeError> {
        self.array::<1>(what).map(|[b]| b)
    }

    /// Reads a big-endian Int16.
    pub(crate) fn i16(&mut self, what: &'static str) -> Result<i16, DecodeError> {
        self.array(what).map(i16::from_be_bytes)
    }

    /// Reads a big-endian Int16 that the server treats as unsigned (counts).
    pub(crate) fn u16(&mut self, what: &'static str) -> Result<u16, DecodeError> {
        self.array(what).map(u16::from_be_bytes)
    }

    /// Reads a big-endian Int32.
    pub(crate) fn i32(&mut self, what: &'static str) -> Result<i32, DecodeError> {
        self.array(what).map(i32::from_be_bytes)
    }

    /// Reads a big-endian Int32 holding an OID.
    pub(crate) fn u32(&mut self, what: &'static str) -> Result<u32, DecodeError> {
        self.array(what).map(u32::from_be_bytes)
    }

    /// Bytes of a string searched for its NUL one by one before a vectorised search takes over.
    const SHORT: usize = 16;

    /// Reads a NUL-terminated string as raw bytes (without the NUL).
    pub(crate) fn cstr_bytes(&mut self, what: &'static str) -> Result<&'a [u8], DecodeError> {
        // Names are short: a plain look at their first bytes spares memchr's setup for them.
        self.cstr_bytes_after(Self::SHORT, what)
    }

    /// [`Reader::cstr_bytes`] with the first `short` bytes looked at one by one.
    fn cstr_bytes_after(&mut self, short: usize, what: &'static str) -> Result<&'a [u8], DecodeError> {
        // A vectorised search: the byte loop `position` compiles to took a cycle per byte, and
        // std's word-at-a-time memchr still an instruction per byte, most of the cost of
        // decoding a client's 1 KiB Parse messages under a flood of them (#33).
        let head = self.buf.len().min(short);
        let nul = (self.buf.iter().take(head).position(|&b| b == 0))
            .or_else(|| self.buf.get(head..).and_then(|rest| memchr::memchr(0, rest)).map(|n| head + n))
            .ok_or(DecodeError::MissingNul { what })?;
        let text = self.bytes(nul, what)?;
        self.bytes(1, what)?;
        Ok(text)
    }

    /// Reads a NUL-terminated UTF-8 string.
    pub(crate) fn cstr(&mut self, what: &'static str) -> Result<&'a str, DecodeError> {
        let raw = self.cstr_bytes(what)?;
        std::str::from_utf8(raw).map_err(|_| DecodeError::InvalidUtf8 { what })
    }

    /// Reads a NUL-terminated UTF-8 statement text. Texts are rarely short, so the search is
    /// vectorised from the first byte: a name's byte-by-byte look at its first bytes cost a
    /// Query or Parse ~100 instructions before memchr took over (#39).
    pub(crate) fn text(&mut self, what: &'static str) -> Result<&'a str, DecodeError> {
        let raw = self.cstr_bytes_after(0, what)?;
        std::str::from_utf8(raw).map_err(|_| DecodeError::InvalidUtf8 { what })
    }

    /// Reads an Int32 length followed by that many bytes; length -1 is SQL NULL.
    pub(crate) fn value(&mut self, what: &'static str) -> Result<Option<&'a [u8]>, DecodeError> {
        let len = self.i32(what)?;
        if len == -1 {
            return Ok(None);
        }
        let n = usize::try_from(len).map_err(|_| DecodeError::InvalidValue { what, value: i64::from(len) })?;
        self.bytes(n, what).map(Some)
    }

    /// Takes everything left.
    pub(crate) fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    /// Fails unless the whole body was consumed.
    pub(crate) fn finish(&self, what: &'static str) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes { what })
        }
    }
}

/// Appends one message to a caller-provided buffer and patches its Int32 length on
/// [`MessageWriter::finish`]. The first failing write is remembered; `finish` then truncates the
/// buffer back to where the message started and reports it.
#[must_use = "a message is only complete after finish()"]
pub(crate) struct MessageWriter<'o> {
    out: &'o mut Vec<u8>,
    start: usize,
    len_at: usize,
    err: Option<EncodeError>,
}

impl<'o> MessageWriter<'o> {
    /// Starts a tagged message: type byte, then a length placeholder.
    pub(crate) fn tagged(out: &'o mut Vec<u8>, tag: u8) -> Self {
        let start = out.len();
        out.push(tag);
        Self::with_length(out, start)
    }

    /// Starts an untagged message (startup packets): only the length placeholder.
    pub(crate) fn untagged(out: &'o mut Vec<u8>) -> Self {
        let start = out.len();
        Self::with_length(out, start)
    }

    fn with_length(out: &'o mut Vec<u8>, start: usize) -> Self {
        let len_at = out.len();
        out.extend_from_slice(&[0; 4]);
        Self { out, start, len_at, err: None }
    }

    /// Records a failure found by the caller; `finish` will report the first one.
    pub(crate) fn fail(&mut self, err: EncodeError) {
        if self.err.is_none() {
            self.err = Some(err);
        }
    }

    /// Appends one byte.
    pub(crate) fn u8(&mut self, v: u8) -> &mut Self {
        self.out.push(v);
        self
    }

    /// Appends a big-endian Int16.
    pub(crate) fn i16(&mut self, v: i16) -> &mut Self {
        self.out.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// Appends a big-endian Int32.
    pub(crate) fn i32(&mut self, v: i32) -> &mut Self {
        self.out.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// Appends a big-endian Int32 holding an OID.
    pub(crate) fn u32(&mut self, v: u32) -> &mut Self {
        self.out.extend_from_slice(&v.to_be_bytes());
        self
    }

    /// Appends an Int16 count, failing if it exceeds the 65535 the server accepts.
    pub(crate) fn count16(&mut self, n: usize, what: &'static str) -> &mut Self {
        match u16::try_from(n) {
            Ok(v) => self.out.extend_from_slice(&v.to_be_bytes()),
            Err(_) => self.fail(EncodeError::TooLong { what }),
        }
        self
    }

    /// Appends an Int32 count or length, failing if it exceeds `i32::MAX`.
    pub(crate) fn count32(&mut self, n: usize, what: &'static str) -> &mut Self {
        match i32::try_from(n) {
            Ok(v) => self.out.extend_from_slice(&v.to_be_bytes()),
            Err(_) => self.fail(EncodeError::TooLong { what }),
        }
        self
    }

    /// Appends raw bytes.
    pub(crate) fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.out.extend_from_slice(v);
        self
    }

    /// Appends a NUL-terminated string, failing if it contains a NUL itself.
    pub(crate) fn cstr(&mut self, v: impl AsRef<[u8]>, what: &'static str) -> &mut Self {
        let v = v.as_ref();
        if v.contains(&0) {
            self.fail(EncodeError::InteriorNul { what });
        }
        self.out.extend_from_slice(v);
        self.out.push(0);
        self
    }

    /// Appends an Int32 length and the bytes, or length -1 for SQL NULL.
    pub(crate) fn value(&mut self, v: Option<&[u8]>, what: &'static str) -> &mut Self {
        match v {
            None => self.i32(-1),
            Some(b) => self.count32(b.len(), what).bytes(b),
        }
    }

    /// Patches the length field; on any earlier failure removes the partial message instead.
    pub(crate) fn finish(self) -> Result<(), EncodeError> {
        let total = self.out.len().saturating_sub(self.len_at);
        let len = i32::try_from(total).map_err(|_| EncodeError::TooLong { what: "message" });
        match (self.err, len) {
            (None, Ok(len)) => {
                if let Some(slot) = self.out.get_mut(self.len_at..self.len_at.saturating_add(4)) {
                    slot.copy_from_slice(&len.to_be_bytes());
                }
                Ok(())
            }
            (Some(e), _) | (None, Err(e)) => {
                self.out.truncate(self.start);
                Err(e)
            }
        }
    }
}
