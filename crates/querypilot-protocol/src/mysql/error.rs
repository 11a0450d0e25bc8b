//! The one error type of the MySQL codec. "Need more bytes" is never an error: decoders that work on
//! a stream return `Ok(None)` for that; everything here means the bytes are invalid or refused.

use thiserror::Error;

/// Why a MySQL packet or payload could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DecodeError {
    /// A logical payload (or one physical packet) declares more bytes than the configured limit;
    /// raised from the headers alone, before anything is buffered or allocated.
    #[error("payload of {len} bytes exceeds the limit of {max} bytes")]
    PayloadTooLarge {
        /// Declared length seen so far.
        len: usize,
        /// The caller's limit.
        max: usize,
    },
    /// A continuation packet of a split payload carries the wrong sequence id.
    #[error("packet sequence id {got}, expected {expected}")]
    SequenceMismatch {
        /// The id the previous packet implies.
        expected: u8,
        /// The id found on the wire.
        got: u8,
    },
    /// A complete payload ended inside a field.
    #[error("payload ends inside {field}")]
    Truncated {
        /// The field being read.
        field: &'static str,
    },
    /// A NUL-terminated string has no terminator before the end of the payload.
    #[error("{field} is missing its NUL terminator")]
    MissingNul {
        /// The field being read.
        field: &'static str,
    },
    /// A length-encoded integer starts with a byte that is not a valid prefix there
    /// (0xFF always; 0xFB where NULL is not allowed).
    #[error("invalid length-encoded integer prefix {prefix:#04x} in {field}")]
    InvalidLenenc {
        /// The offending first byte.
        prefix: u8,
        /// The field being read.
        field: &'static str,
    },
    /// The payload's first byte is not the header this decoder expects.
    #[error("unexpected header byte {got:#04x} for {packet}")]
    UnexpectedHeader {
        /// The packet kind being decoded.
        packet: &'static str,
        /// The byte found.
        got: u8,
    },
    /// A field holds a value the protocol does not allow there.
    #[error("invalid value {value} for {field}")]
    InvalidValue {
        /// The field being read.
        field: &'static str,
        /// The value found (widened).
        value: u64,
    },
    /// A payload has bytes left over after its last field.
    #[error("{remaining} unexpected trailing bytes after {packet}")]
    TrailingBytes {
        /// The packet kind being decoded.
        packet: &'static str,
        /// How many bytes were left.
        remaining: usize,
    },
    /// The column or parameter type byte has no binary-protocol encoding this codec knows.
    #[error("unsupported column type {0:#04x} in the binary protocol")]
    UnsupportedType(u8),
    /// The peer uses a protocol variant this codec does not implement.
    #[error("unsupported protocol feature: {0}")]
    Unsupported(&'static str),
}

impl DecodeError {
    /// Stable dotted identifier for logs and metric labels, in the crate's `ErrorCode` style.
    #[must_use]
    pub fn code(&self) -> &'static str {
        match self {
            Self::PayloadTooLarge { .. } => "mysql.payload_too_large",
            Self::SequenceMismatch { .. } => "mysql.sequence_mismatch",
            Self::Truncated { .. } => "mysql.truncated",
            Self::MissingNul { .. } => "mysql.missing_nul",
            Self::InvalidLenenc { .. } => "mysql.invalid_lenenc",
            Self::UnexpectedHeader { .. } => "mysql.unexpected_header",
            Self::InvalidValue { .. } => "mysql.invalid_value",
            Self::TrailingBytes { .. } => "mysql.trailing_bytes",
            Self::UnsupportedType(_) => "mysql.unsupported_type",
            Self::Unsupported(_) => "mysql.unsupported",
        }
    }
}
