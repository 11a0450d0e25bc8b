//! Why relaying between a client and a backend connection stopped, with the cause inside: the
//! one error type of the session layer's relays (#20). `client_error` turns each into what the
//! client sees.

use crate::error::{ErrorCode, Origin};

/// A relay step that could not go on.
#[derive(Debug, thiserror::Error)]
pub enum RelayError {
    /// The backend closed its socket or a read or write on it failed.
    #[error("the backend connection was lost")]
    BackendClosed(#[source] Option<std::io::Error>),
    /// The client closed its socket or a write to it failed.
    #[error("the client connection was lost")]
    ClientClosed(#[source] Option<std::io::Error>),
    /// The backend sent a message type that has no place at this point of the exchange.
    #[error("protocol violation: the backend sent message type {:?}", char::from(*.tag))]
    OutOfStep {
        /// The message's type byte (PostgreSQL) or first payload byte (MySQL).
        tag: u8,
    },
    /// A backend packet carried another sequence id than the one due (MySQL).
    #[error("protocol violation: the backend sent packet {got} where {expected} was due")]
    OutOfSequence {
        /// The sequence id due.
        expected: u8,
        /// The one the packet carried.
        got: u8,
    },
    /// A backend message could not be decoded.
    #[error("protocol violation: {0}")]
    Malformed(String),
    /// A command could not be encoded for the backend (a NUL byte in a PostgreSQL query, or a
    /// message over the protocol's size limit).
    #[error("the command cannot be sent to the backend: {0}")]
    Unsendable(String),
    /// The backend reported a FATAL error and is going away.
    #[error("{code}: {message}")]
    BackendFatal {
        /// Its SQLSTATE (PostgreSQL) or error number (MySQL).
        code: String,
        /// Its message.
        message: String,
    },
    /// The backend did not answer an exchange the router ran on its own within `query_timeout`.
    #[error("no answer within query_timeout ({timeout_ms} ms)")]
    TimedOut {
        /// The pool's `query_timeout` in milliseconds.
        timeout_ms: u128,
    },
    /// The backend left a cancel sent at `query_timeout` unanswered for another timeout.
    #[error("no answer to the cancel sent at query_timeout ({timeout_ms} ms)")]
    CancelIgnored {
        /// The pool's `query_timeout` in milliseconds.
        timeout_ms: u128,
    },
}

impl RelayError {
    /// The cause as a short text to put in parentheses after "the backend connection was
    /// lost", or `None` when the loss itself is all there is to say.
    pub fn cause(&self) -> Option<String> {
        match self {
            Self::BackendClosed(None) => None,
            Self::BackendClosed(Some(e)) | Self::ClientClosed(Some(e)) => Some(e.to_string()),
            Self::ClientClosed(None) => None,
            other => Some(other.to_string()),
        }
    }
}

impl ErrorCode for RelayError {
    fn code(&self) -> &'static str {
        match self {
            Self::BackendClosed(_) => "relay.backend_closed",
            Self::ClientClosed(_) => "relay.client_closed",
            Self::OutOfStep { .. } => "relay.out_of_step",
            Self::OutOfSequence { .. } => "relay.out_of_sequence",
            Self::Malformed(_) => "relay.malformed",
            Self::Unsendable(_) => "relay.unsendable",
            Self::BackendFatal { .. } => "relay.backend_fatal",
            Self::TimedOut { .. } => "relay.timed_out",
            Self::CancelIgnored { .. } => "relay.cancel_ignored",
        }
    }

    fn origin(&self) -> Origin {
        match self {
            Self::ClientClosed(_) | Self::Unsendable(_) => Origin::Client,
            _ => Origin::Backend,
        }
    }
}

#[cfg(test)]
mod tests;
