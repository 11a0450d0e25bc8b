//! The one place where errors become what a client sees on the wire: SQLSTATEs for PostgreSQL.

use crate::pool::PoolError;
use crate::protocol::pg::{encode_error, sqlstate, Severity};

/// A client-facing PostgreSQL error: SQLSTATE plus message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PgClientError {
    /// Five-character SQLSTATE.
    pub code: &'static str,
    /// Human-readable message.
    pub message: String,
}

impl PgClientError {
    /// Builds an error with `code` and `message`.
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self { code, message: message.into() }
    }

    /// Appends this error as an `ERROR` ErrorResponse.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_error(Severity::Error, self.code, &self.message, out);
    }

    /// Appends this error as a `FATAL` ErrorResponse (the connection closes after it).
    pub fn encode_fatal(&self, out: &mut Vec<u8>) {
        encode_error(Severity::Fatal, self.code, &self.message, out);
    }
}

impl From<&PoolError> for PgClientError {
    fn from(e: &PoolError) -> Self {
        let code = match e {
            PoolError::Timeout { .. } => sqlstate::TOO_MANY_CONNECTIONS,
            PoolError::Connect { .. } | PoolError::NoBackend(_) => sqlstate::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION,
            PoolError::Auth { .. } => sqlstate::CONNECTION_FAILURE,
        };
        Self::new(code, e.to_string())
    }
}
