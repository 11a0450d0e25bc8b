//! MySQL client/server protocol (MySQL "Client/Server Protocol" internals manual): packet framing,
//! the v10 handshake, commands, result sets and authentication math.

pub mod codec;
pub mod error;
pub mod framer;
pub mod column;
pub mod value;
pub mod capability;
pub mod response;
pub mod row;
pub mod handshake;
pub mod command;
pub mod execute;
pub mod auth;
pub mod errcode;
