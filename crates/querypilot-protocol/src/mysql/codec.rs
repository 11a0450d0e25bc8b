//! Checked primitives of the MySQL wire format ("Basic Data Types" of the Client/Server Protocol):
//! fixed-width little-endian integers, length-encoded integers and strings, NUL-terminated and
//! rest-of-packet strings. The [`Reader`] never panics: every read is bounds-checked and borrows from
//! the input. The `put_*` writers append to a caller-owned `Vec<u8>`.

use super::error::DecodeError;

/// First byte of a length-encoded value that stands for SQL NULL in text rows.
pub const LENENC_NULL: u8 = 0xFB;

/// A cursor over one complete payload. Reads advance it; a failed read leaves it unchanged.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    #[must_use]
    pub fn new(buf: &'a [u8]) -> Self {
        Self { buf }
    }

    /// Bytes not read yet.
    #[must_use]
    pub fn remaining(&self) -> usize {
        self.buf.len()
    }

    /// Whether everything has been read.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// The next byte without consuming it.
    #[must_use]
    pub fn peek(&self) -> Option<u8> {
        self.buf.first().copied()
    }

    /// Takes exactly `n` bytes.
    pub fn bytes(&mut self, n: usize, field: &'static str) -> Result<&'a [u8], DecodeError> {
        if n > self.buf.len() {
            return Err(DecodeError::Truncated { field });
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    /// Takes exactly `N` bytes as an array.
    pub fn array<const N: usize>(&mut self, field: &'static str) -> Result<[u8; N], DecodeError> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.bytes(N, field)?);
        Ok(out)
    }

    /// Reads one byte.
    pub fn u8(&mut self, field: &'static str) -> Result<u8, DecodeError> {
        let [b] = self.array::<1>(field)?;
        Ok(b)
    }

    /// Reads a `int<2>`.
    pub fn u16(&mut self, field: &'static str) -> Result<u16, DecodeError> {
        Ok(u16::from_le_bytes(self.array(field)?))
    }

    /// Reads a `int<3>`.
    pub fn u24(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        let [a, b, c] = self.array(field)?;
        Ok(u32::from_le_bytes([a, b, c, 0]))
    }

    /// Reads a `int<4>`.
    pub fn u32(&mut self, field: &'static str) -> Result<u32, DecodeError> {
        Ok(u32::from_le_bytes(self.array(field)?))
    }

    /// Reads a `int<8>`.
    pub fn u64(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        Ok(u64::from_le_bytes(self.array(field)?))
    }

    /// Reads a `int<lenenc>`, or `None` for the 0xFB NULL marker (text rows only).
    pub fn lenenc_int_or_null(&mut self, field: &'static str) -> Result<Option<u64>, DecodeError> {
        let mut probe = self.clone();
        let value = match probe.u8(field)? {
            LENENC_NULL => None,
            0xFC => Some(u64::from(probe.u16(field)?)),
            0xFD => Some(u64::from(probe.u24(field)?)),
            0xFE => Some(probe.u64(field)?),
            0xFF => return Err(DecodeError::InvalidLenenc { prefix: 0xFF, field }),
            small => Some(u64::from(small)),
        };
        *self = probe;
        Ok(value)
    }

    /// Reads a `int<lenenc>` where NULL is not allowed.
    pub fn lenenc_int(&mut self, field: &'static str) -> Result<u64, DecodeError> {
        let mut probe = self.clone();
        match probe.lenenc_int_or_null(field)? {
            Some(v) => {
                *self = probe;
                Ok(v)
            }
            None => Err(DecodeError::InvalidLenenc { prefix: LENENC_NULL, field }),
        }
    }

    /// Reads a `string<lenenc>`; the length is checked against what is left before use.
    pub fn lenenc_bytes(&mut self, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let mut probe = self.clone();
        let len = probe.lenenc_int(field)?;
        let n = usize::try_from(len).map_err(|_| DecodeError::Truncated { field })?;
        let out = probe.bytes(n, field)?;
        *self = probe;
        Ok(out)
    }

    /// Reads a `string<lenenc>` or the 0xFB NULL marker.
    pub fn lenenc_bytes_or_null(&mut self, field: &'static str) -> Result<Option<&'a [u8]>, DecodeError> {
        if self.peek() == Some(LENENC_NULL) {
            self.buf = self.buf.get(1..).unwrap_or_default();
            return Ok(None);
        }
        self.lenenc_bytes(field).map(Some)
    }

    /// Reads a `string<NUL>` and consumes its terminator.
    pub fn nul_bytes(&mut self, field: &'static str) -> Result<&'a [u8], DecodeError> {
        let pos = self.buf.iter().position(|&b| b == 0).ok_or(DecodeError::MissingNul { field })?;
        let (head, tail) = self.buf.split_at(pos);
        self.buf = tail.get(1..).unwrap_or_default();
        Ok(head)
    }

    /// Reads a `string<NUL>`, accepting the end of the payload as terminator (some servers omit the
    /// final NUL of the auth plugin name, MySQL bug #59453).
    pub fn nul_or_eof_bytes(&mut self) -> &'a [u8] {
        match self.buf.iter().position(|&b| b == 0) {
            Some(pos) => {
                let (head, tail) = self.buf.split_at(pos);
                self.buf = tail.get(1..).unwrap_or_default();
                head
            }
            None => self.rest(),
        }
    }

    /// Takes everything left (`string<EOF>`).
    pub fn rest(&mut self) -> &'a [u8] {
        std::mem::take(&mut self.buf)
    }

    /// Fails with [`DecodeError::TrailingBytes`] unless everything was read.
    pub fn finish(&self, packet: &'static str) -> Result<(), DecodeError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(DecodeError::TrailingBytes { packet, remaining: self.buf.len() })
        }
    }
}

/// Appends a `int<2>`.
pub fn put_u16(out: &mut Vec<u8>, v: u16) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a `int<3>`; the top byte of `v` is dropped, callers pass values below 2^24.
pub fn put_u24(out: &mut Vec<u8>, v: u32) {
    let [a, b, c, _] = v.to_le_bytes();
    out.extend_from_slice(&[a, b, c]);
}

/// Appends a `int<4>`.
pub fn put_u32(out: &mut Vec<u8>, v: u32) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a `int<8>`.
pub fn put_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_le_bytes());
}

/// Appends a `int<lenenc>` in its shortest form.
pub fn put_lenenc_int(out: &mut Vec<u8>, v: u64) {
    match v {
        0..=0xFA => out.push(v as u8),
        0xFB..=0xFFFF => {
            out.push(0xFC);
            put_u16(out, v as u16);
        }
        0x1_0000..=0xFF_FFFF => {
            out.push(0xFD);
            put_u24(out, v as u32);
        }
        _ => {
            out.push(0xFE);
            put_u64(out, v);
        }
    }
}

/// Appends a `string<lenenc>`.
pub fn put_lenenc_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_lenenc_int(out, bytes.len() as u64);
    out.extend_from_slice(bytes);
}

/// Appends a `string<NUL>`. The caller guarantees `bytes` holds no NUL (names on the wire never do).
pub fn put_nul_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(bytes);
    out.push(0);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lenenc(v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        put_lenenc_int(&mut out, v);
        out
    }

    #[test]
    fn lenenc_golden_boundaries() {
        assert_eq!(lenenc(0), [0x00]);
        assert_eq!(lenenc(250), [0xFA]);
        assert_eq!(lenenc(251), [0xFC, 0xFB, 0x00]);
        assert_eq!(lenenc(0xFFFF), [0xFC, 0xFF, 0xFF]);
        assert_eq!(lenenc(0x1_0000), [0xFD, 0x00, 0x00, 0x01]);
        assert_eq!(lenenc(0xFF_FFFF), [0xFD, 0xFF, 0xFF, 0xFF]);
        assert_eq!(lenenc(0x100_0000), [0xFE, 0, 0, 0, 1, 0, 0, 0, 0]);
        assert_eq!(lenenc(u64::MAX), [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]);
    }

    #[test]
    fn lenenc_round_trip_and_null() {
        for v in [0, 1, 250, 251, 252, 0xFFFF, 0x1_0000, 0xFF_FFFF, 0x100_0000, u64::MAX] {
            let bytes = lenenc(v);
            let mut r = Reader::new(&bytes);
            assert_eq!(r.lenenc_int("v"), Ok(v));
            assert!(r.is_empty());
        }
        let mut r = Reader::new(&[0xFB]);
        assert_eq!(r.lenenc_int_or_null("v"), Ok(None));
        let mut r = Reader::new(&[0xFB]);
        assert_eq!(r.lenenc_int("v"), Err(DecodeError::InvalidLenenc { prefix: 0xFB, field: "v" }));
        let mut r = Reader::new(&[0xFF]);
        assert!(matches!(r.lenenc_int("v"), Err(DecodeError::InvalidLenenc { prefix: 0xFF, .. })));
    }

    #[test]
    fn failed_reads_do_not_advance() {
        let mut r = Reader::new(&[0xFC, 0x01]);
        assert_eq!(r.lenenc_int("v"), Err(DecodeError::Truncated { field: "v" }));
        assert_eq!(r.remaining(), 2);
        let mut r = Reader::new(&[0x05, b'a', b'b']);
        assert!(r.lenenc_bytes("s").is_err());
        assert_eq!(r.remaining(), 3);
    }

    #[test]
    fn strings_and_integers() {
        let bytes = [b'h', b'i', 0, 3, b'a', b'b', b'c', 0x01, 0x02, 0x03, 0x04, 0xAA];
        let mut r = Reader::new(&bytes);
        assert_eq!(r.nul_bytes("n"), Ok(&b"hi"[..]));
        assert_eq!(r.lenenc_bytes("l"), Ok(&b"abc"[..]));
        assert_eq!(r.u24("u"), Ok(0x03_0201));
        assert_eq!(r.u8("b"), Ok(0x04));
        assert_eq!(r.finish("p"), Err(DecodeError::TrailingBytes { packet: "p", remaining: 1 }));
        assert_eq!(r.rest(), &[0xAA]);
        assert!(r.nul_bytes("n").is_err());
        assert_eq!(r.nul_or_eof_bytes(), b"");
    }

    #[test]
    fn huge_lenenc_length_is_truncated_not_allocated() {
        let bytes = [0xFE, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x7F, b'x'];
        assert_eq!(Reader::new(&bytes).lenenc_bytes("s"), Err(DecodeError::Truncated { field: "s" }));
    }
}
