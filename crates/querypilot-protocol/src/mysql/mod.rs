//! MySQL client/server protocol (MySQL "Client/Server Protocol" internals manual; MariaDB's
//! "Clients & Connectors / Client/Server Protocol" pages for its extensions): packet framing, the
//! v10 handshake, commands, result sets and authentication math.
//!
//! Sans-IO and L0: no runtime, I/O, logging or clock, and no dependency on other crate modules.
//! Decoders borrow from their input and never panic on any bytes; encoders append to a caller's
//! `Vec<u8>`. Payload encoders write unframed payloads: frame them with [`encode_packets`] or
//! [`framer::encode_framed`].
//!
//! Not supported (the router must not offer these capabilities): compression,
//! `CLIENT_QUERY_ATTRIBUTES`, `CLIENT_OPTIONAL_RESULTSET_METADATA`, MariaDB progress reports and
//! extended type info. `caching_sha2_password` cleartext over TLS is not here (the router speaks no TLS).

pub mod auth;
pub mod capability;
pub mod codec;
pub mod column;
pub mod command;
pub mod errcode;
pub mod error;
pub mod execute;
pub mod framer;
pub mod handshake;
pub mod infile;
pub mod response;
pub mod row;
pub mod tracking;
pub mod value;

pub use codec::Reader;
pub use column::{ColumnDefinition41, ColumnType, ValueType};
pub use command::{rewrite_stmt_id, stmt_id, ChangeUser, Command};
pub use errcode::{encode_err, ErrorNumber};
pub use error::DecodeError;
pub use execute::{decode_execute_params, encode_execute_params, ExecuteParams};
pub use framer::{
    decode_packet, decode_packet_header, decode_payload, decode_wire_packet, encode_packets, Frame, Packet, Payload,
    WirePacket, MAX_PACKET_PAYLOAD,
};
pub use handshake::{AuthReply, AuthSwitchRequest, ConnectAttrs, HandshakeResponse41, HandshakeV10, SslRequest};
pub use response::{
    add_warning, classify_response, classify_row, EofPacket, ErrPacket, OkPacket, ResponseKind, RowKind, StmtPrepareOk,
};
pub use row::{decode_binary_row, decode_text_row, encode_binary_row, encode_text_row};
pub use value::{BinaryValue, DateTime, Time};
