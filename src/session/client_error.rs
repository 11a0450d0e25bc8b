//! The one place where errors become what a client sees on the wire: SQLSTATEs for PostgreSQL,
//! error numbers with SQLSTATEs for MySQL.

use crate::pool::PoolError;
use crate::protocol::mysql::errcode::{self, ErrorNumber};
use crate::protocol::mysql::{encode_packets, ErrPacket};
use crate::protocol::pg::{encode_error, sqlstate, Severity};
use crate::session::error::RelayError;
use crate::sql::requote::RequoteError;

/// What a statement whose literals cannot be carried to the other protocol's server is refused
/// as, in a wire's codes: a text that breaks off is a `syntax` error, a value the target cannot
/// hold an `encoding` one, a form the router does not carry `unsupported`.
pub(super) fn requote_code<C>(e: &RequoteError, syntax: C, encoding: C, unsupported: C) -> C {
    match e {
        RequoteError::Unterminated(_) => syntax,
        RequoteError::Nul(_) | RequoteError::Encoding(_) => encoding,
        RequoteError::Unsupported(..) | RequoteError::Misread(_) => unsupported,
    }
}

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
            PoolError::Connect { .. } | PoolError::NoBackend(_) | PoolError::Replaced(_) => {
                sqlstate::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION
            }
            PoolError::Auth { .. } => sqlstate::CONNECTION_FAILURE,
            // The router turns the connection down by configuration, not for a transient
            // failure a retry could overcome (08001 would invite one).
            PoolError::WrongProtocol { .. } => sqlstate::SQLSERVER_REJECTED_ESTABLISHMENT_OF_SQLCONNECTION,
            PoolError::Limited { .. } => sqlstate::INSUFFICIENT_RESOURCES,
        };
        Self::new(code, e.to_string())
    }
}

/// A client-facing MySQL error: error number with SQLSTATE, plus message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MyClientError {
    /// Error number and SQLSTATE.
    pub number: ErrorNumber,
    /// Human-readable message.
    pub message: String,
}

impl MyClientError {
    /// Builds an error with `number` and `message`.
    pub fn new(number: ErrorNumber, message: impl Into<String>) -> Self {
        Self { number, message: message.into() }
    }

    /// Appends this error as an ERR packet with sequence id `seq`.
    pub fn encode(&self, seq: u8, out: &mut Vec<u8>) {
        self.number.encode(self.message.as_bytes(), seq, out);
    }

    /// Appends this error as the first packet of a connection, where the greeting would be
    /// (sequence id 0). No capabilities are agreed yet, so, as MySQL does there, the packet has
    /// no SQLSTATE marker: a client parsing it without `CLIENT_PROTOCOL_41` would otherwise
    /// show `#08004` as part of the message.
    pub fn encode_before_greeting(&self, out: &mut Vec<u8>) {
        let mut payload = Vec::with_capacity(self.message.len() + 3);
        ErrPacket { code: self.number.code, sql_state: None, message: self.message.as_bytes() }.encode(&mut payload);
        encode_packets(&payload, 0, out);
    }
}

/// A backend the router could not reach or lost: `ER_UNKNOWN_ERROR` with SQLSTATE 08S01
/// (communication link failure). A server's number, so every client shows the router's text:
/// the client-range 2003/2013 made libmariadb-based clients (the mariadb CLI) report
/// `ERROR 2027 Received malformed packet` instead (#35).
pub const ER_BACKEND_UNAVAILABLE: ErrorNumber = ErrorNumber { code: 1105, sql_state: *b"08S01" };

impl From<&PoolError> for MyClientError {
    fn from(e: &PoolError) -> Self {
        let number = match e {
            PoolError::Timeout { .. } => errcode::ER_QP_POOL_TIMEOUT,
            PoolError::Connect { .. } | PoolError::NoBackend(_) | PoolError::Replaced(_) => ER_BACKEND_UNAVAILABLE,
            PoolError::Auth { .. } => errcode::ER_ACCESS_DENIED_ERROR,
            // No server error number means "wrong protocol": 1049 would claim the database does
            // not exist, and libmariadb reads a client-range number (2003) sent at login as a
            // malformed packet, hiding the message.
            PoolError::WrongProtocol { .. } => errcode::ER_QP_POOL_PROTOCOL,
            PoolError::Limited { .. } => errcode::ER_QP_LIMITED,
        };
        Self::new(number, e.to_string())
    }
}

impl From<&RelayError> for PgClientError {
    /// Every relay failure loses the backend connection, and with it the session's server
    /// state: 08006 with the cause, as PostgreSQL's libpq reports a lost server.
    fn from(e: &RelayError) -> Self {
        let why = e.cause().map(|c| format!(" ({c})")).unwrap_or_default();
        Self::new(sqlstate::CONNECTION_FAILURE, format!("the backend connection was lost{why}"))
    }
}

impl From<&RelayError> for MyClientError {
    /// [`ER_BACKEND_UNAVAILABLE`] with the cause.
    fn from(e: &RelayError) -> Self {
        let why = e.cause().map(|c| format!(" ({c})")).unwrap_or_default();
        Self::new(
            ER_BACKEND_UNAVAILABLE,
            format!("Lost connection to the backend server during query; the statement may not have completed{why}"),
        )
    }
}
