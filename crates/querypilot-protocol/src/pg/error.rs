//! Error types of the PostgreSQL codec: what was wrong with bytes we decoded, and why a message
//! could not be encoded.
//!
//! Every decode failure is a protocol violation from the peer's side, so [`DecodeError::sqlstate`]
//! lets the session answer a client with the right SQLSTATE without knowing codec details.
//! Must not depend on any other module of the crate.

use super::sqlstate;

/// Why bytes received from a peer could not be decoded (PostgreSQL docs 55.7 "Message Formats").
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// The declared message length exceeds the configured limit; refused before any allocation.
    #[error("message length {len} exceeds the limit of {max} bytes")]
    TooLarge {
        /// Declared length, including the length field itself.
        len: usize,
        /// The configured maximum.
        max: usize,
    },
    /// The declared message length is smaller than the fixed part of the message.
    #[error("invalid message length {len}")]
    BadLength {
        /// The declared length.
        len: i32,
    },
    /// The message body ended before a field was complete.
    #[error("message truncated while reading {what}")]
    Truncated {
        /// The field being read.
        what: &'static str,
    },
    /// The message body continues after its last field.
    #[error("unexpected trailing bytes after {what}")]
    TrailingBytes {
        /// The last field read.
        what: &'static str,
    },
    /// A text field is not valid UTF-8.
    #[error("{what} is not valid UTF-8")]
    InvalidUtf8 {
        /// The offending field.
        what: &'static str,
    },
    /// A string field has no terminating NUL byte.
    #[error("{what} is missing its terminating NUL")]
    MissingNul {
        /// The offending field.
        what: &'static str,
    },
    /// The message type byte is not one this direction of the protocol defines.
    #[error("unknown message type {:?}", char::from(*.0))]
    UnknownTag(u8),
    /// A field holds a value outside its defined range (a negative length, an unknown kind byte).
    #[error("invalid {what}: {value}")]
    InvalidValue {
        /// The offending field.
        what: &'static str,
        /// The value found.
        value: i64,
    },
    /// The first message carries a request code this codec does not know.
    #[error("unknown startup request code {0}")]
    UnknownRequestCode(i32),
    /// The client asked for a protocol major version other than 3.
    #[error("unsupported frontend protocol {major}.{minor}")]
    UnsupportedProtocol {
        /// Requested major version.
        major: u16,
        /// Requested minor version.
        minor: u16,
    },
    /// The peer sent another message type than the only one allowed at this point (during
    /// authentication: a password message; a second StartupMessage shows as type 0).
    #[error("expected message type {:?}, got message type {got}", char::from(*.expected))]
    UnexpectedTag {
        /// The type byte allowed here.
        expected: u8,
        /// The type byte received.
        got: u8,
    },
    /// The startup packet carries more parameters than allowed.
    #[error("startup packet has more than {max} parameters")]
    TooManyParams {
        /// The limit.
        max: usize,
    },
}

impl DecodeError {
    /// The SQLSTATE a PostgreSQL server would report for this violation.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            Self::UnsupportedProtocol { .. } => sqlstate::FEATURE_NOT_SUPPORTED,
            _ => sqlstate::PROTOCOL_VIOLATION,
        }
    }
}

/// Why a message could not be encoded. The output buffer is left as it was before the call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EncodeError {
    /// A string destined for a NUL-terminated field contains a NUL byte.
    #[error("{what} contains a NUL byte")]
    InteriorNul {
        /// The offending field.
        what: &'static str,
    },
    /// A value cannot be represented on the wire (e.g. an empty startup parameter name).
    #[error("{what} cannot be encoded")]
    Invalid {
        /// The offending field.
        what: &'static str,
    },
    /// A count or length does not fit its wire field (Int16 counts, Int32 lengths).
    #[error("{what} is too long for its wire field")]
    TooLong {
        /// The offending field.
        what: &'static str,
    },
}

/// Failure of a rewrite that decodes part of a message and re-encodes it (statement renaming).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    /// The original message body was malformed.
    #[error(transparent)]
    Decode(#[from] DecodeError),
    /// The replacement could not be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
}
