//! Binary upgrade without dropping a client (#40): the running router hands its listening
//! sockets and its client connections to a new binary over a Unix socket (SCM_RIGHTS).
//!
//! - [`wire`]: the frames, sans-IO (no sockets, no threads, no clock).
//! - [`unix`]: frames with descriptors over a Unix stream socket.
//! - [`give`]: the old process's side, on `general.handover_socket`.
//! - [`take`]: the new process's side (`querypilot --take-over PATH`).
//!
//! The cores do their part through `control` commands (`CoreCommand::HandOver`,
//! `CoreCommand::Adopt`); what a session carries is the session's business (`session::handover`).
//! Depends on `control`, `config`, `id` and `error` only: never on a core, a session or `rt`.

pub mod give;
pub mod take;
pub mod unix;
pub mod wire;
