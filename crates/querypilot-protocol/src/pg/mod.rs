//! PostgreSQL frontend/backend protocol version 3.0 (PostgreSQL docs, chapter 55 "Frontend/Backend
//! Protocol"): framing, startup, the messages of both directions and authentication math.
//!
//! Sans-IO and zero-copy: decoders borrow from the caller's buffer, encoders append to a
//! caller-provided `Vec<u8>`, nothing here does I/O, logs, reads a clock or depends on another
//! module of the crate. Lengths are checked against limits before anything is allocated, and no
//! input can make the codec panic.

// The no-panic contract, checked by clippy rather than by review.
#![deny(clippy::indexing_slicing, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod auth;
pub mod backend;
pub mod binding;
pub mod challenge;
pub mod error;
pub mod framer;
pub mod frontend;
pub mod list;
pub mod notice;
pub mod sqlstate;
pub mod startup;
pub mod tag;
mod wire;

#[cfg(test)]
mod tests;

pub use auth::{Binding, Derivation, ScramClient, ScramError, ScramKeys, ScramSecret, ScramServer};
pub use backend::{Authentication, BackendMessage, BackendPeek, TransactionStatus};
pub use binding::ChannelBinding;
pub use error::{DecodeError, EncodeError, RewriteError};
pub use framer::{
    data_row_run, decode_expected_frame, decode_frame, decode_header, decode_raw_frame, decode_startup_frame, Frame,
    Frames, RawFrame, RawFrames, StartupFrame,
};
pub use frontend::{FrontendMessage, Target};
pub use notice::{encode_error, ErrorFields, FieldList, Severity};
pub use startup::{Negotiation, ProtocolVersion, StartupPacket, StartupParams};
