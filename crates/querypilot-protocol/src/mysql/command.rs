//! Command phase requests (Client/Server Protocol, "Text Protocol", "Prepared Statements" and
//! "Utility Commands"): the first payload of every client request, decoded borrowed. Commands are
//! decoded without `CLIENT_QUERY_ATTRIBUTES` (the router must not offer it). Parameters of
//! `COM_STMT_EXECUTE` are kept raw here and decoded on demand by [`super::execute`].

use super::capability::{CLIENT_CONNECT_ATTRS, CLIENT_PLUGIN_AUTH, CLIENT_SECURE_CONNECTION};
use super::codec::{put_lenenc_bytes, put_nul_bytes, put_u16, put_u32, Reader};
use super::error::DecodeError;
use super::handshake::{put_auth_u8, ConnectAttrs};

/// `COM_SLEEP` (server-internal).
pub const COM_SLEEP: u8 = 0x00;
/// `COM_QUIT`.
pub const COM_QUIT: u8 = 0x01;
/// `COM_INIT_DB`.
pub const COM_INIT_DB: u8 = 0x02;
/// `COM_QUERY`.
pub const COM_QUERY: u8 = 0x03;
/// `COM_FIELD_LIST`.
pub const COM_FIELD_LIST: u8 = 0x04;
/// `COM_CREATE_DB`.
pub const COM_CREATE_DB: u8 = 0x05;
/// `COM_DROP_DB`.
pub const COM_DROP_DB: u8 = 0x06;
/// `COM_REFRESH`.
pub const COM_REFRESH: u8 = 0x07;
/// `COM_SHUTDOWN`.
pub const COM_SHUTDOWN: u8 = 0x08;
/// `COM_STATISTICS`.
pub const COM_STATISTICS: u8 = 0x09;
/// `COM_PROCESS_INFO`.
pub const COM_PROCESS_INFO: u8 = 0x0A;
/// `COM_CONNECT` (server-internal).
pub const COM_CONNECT: u8 = 0x0B;
/// `COM_PROCESS_KILL`.
pub const COM_PROCESS_KILL: u8 = 0x0C;
/// `COM_DEBUG`.
pub const COM_DEBUG: u8 = 0x0D;
/// `COM_PING`.
pub const COM_PING: u8 = 0x0E;
/// `COM_TIME` (server-internal).
pub const COM_TIME: u8 = 0x0F;
/// `COM_DELAYED_INSERT` (server-internal).
pub const COM_DELAYED_INSERT: u8 = 0x10;
/// `COM_CHANGE_USER`.
pub const COM_CHANGE_USER: u8 = 0x11;
/// `COM_BINLOG_DUMP`.
pub const COM_BINLOG_DUMP: u8 = 0x12;
/// `COM_TABLE_DUMP`.
pub const COM_TABLE_DUMP: u8 = 0x13;
/// `COM_CONNECT_OUT` (server-internal).
pub const COM_CONNECT_OUT: u8 = 0x14;
/// `COM_REGISTER_SLAVE`.
pub const COM_REGISTER_SLAVE: u8 = 0x15;
/// `COM_STMT_PREPARE`.
pub const COM_STMT_PREPARE: u8 = 0x16;
/// `COM_STMT_EXECUTE`.
pub const COM_STMT_EXECUTE: u8 = 0x17;
/// `COM_STMT_SEND_LONG_DATA`.
pub const COM_STMT_SEND_LONG_DATA: u8 = 0x18;
/// `COM_STMT_CLOSE`.
pub const COM_STMT_CLOSE: u8 = 0x19;
/// `COM_STMT_RESET`.
pub const COM_STMT_RESET: u8 = 0x1A;
/// `COM_SET_OPTION`.
pub const COM_SET_OPTION: u8 = 0x1B;
/// `COM_STMT_FETCH`.
pub const COM_STMT_FETCH: u8 = 0x1C;
/// `COM_DAEMON` (server-internal).
pub const COM_DAEMON: u8 = 0x1D;
/// `COM_BINLOG_DUMP_GTID`.
pub const COM_BINLOG_DUMP_GTID: u8 = 0x1E;
/// `COM_RESET_CONNECTION`.
pub const COM_RESET_CONNECTION: u8 = 0x1F;
/// MariaDB `COM_STMT_BULK_EXECUTE`.
pub const COM_STMT_BULK_EXECUTE: u8 = 0xFA;

/// `COM_STMT_EXECUTE` flag: no cursor.
pub const CURSOR_TYPE_NO_CURSOR: u8 = 0x00;
/// `COM_STMT_EXECUTE` flag: read-only cursor (rows then come through `COM_STMT_FETCH`).
pub const CURSOR_TYPE_READ_ONLY: u8 = 0x01;
/// `COM_STMT_EXECUTE` flag: cursor for update.
pub const CURSOR_TYPE_FOR_UPDATE: u8 = 0x02;
/// `COM_STMT_EXECUTE` flag: scrollable cursor.
pub const CURSOR_TYPE_SCROLLABLE: u8 = 0x04;

/// MariaDB: statement id meaning "the statement most recently prepared on this connection".
pub const LAST_PREPARED_STMT_ID: u32 = 0xFFFF_FFFF;

/// `COM_CHANGE_USER` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChangeUser<'a> {
    /// New user name.
    pub username: &'a [u8],
    /// Auth response computed against the connection's current nonce.
    pub auth_response: &'a [u8],
    /// New default database (empty for none).
    pub database: &'a [u8],
    /// New collation id, if the client sent one. Later fields are only encoded when this is set.
    pub charset: Option<u16>,
    /// Plugin that produced `auth_response` (with `CLIENT_PLUGIN_AUTH`).
    pub auth_plugin: Option<&'a [u8]>,
    /// Connection attributes (with `CLIENT_CONNECT_ATTRS`).
    pub connect_attrs: Option<ConnectAttrs<'a>>,
}

/// One client request, borrowed from its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Command<'a> {
    /// `COM_QUIT`: close the connection.
    Quit,
    /// `COM_INIT_DB`: change the default database.
    InitDb(&'a [u8]),
    /// `COM_QUERY`: SQL text.
    Query(&'a [u8]),
    /// `COM_FIELD_LIST` (deprecated): columns of `table` matching `wildcard`.
    FieldList {
        /// Table name.
        table: &'a [u8],
        /// Column name pattern.
        wildcard: &'a [u8],
    },
    /// `COM_STATISTICS`.
    Statistics,
    /// `COM_PROCESS_KILL` (deprecated form of `KILL`).
    ProcessKill(u32),
    /// `COM_PING`.
    Ping,
    /// `COM_CHANGE_USER`.
    ChangeUser(ChangeUser<'a>),
    /// `COM_RESET_CONNECTION`.
    ResetConnection,
    /// `COM_STMT_PREPARE`: SQL text.
    StmtPrepare(&'a [u8]),
    /// `COM_STMT_EXECUTE`.
    StmtExecute {
        /// Statement id.
        stmt_id: u32,
        /// `CURSOR_TYPE_*` flags.
        flags: u8,
        /// Always 1.
        iteration_count: u32,
        /// NULL bitmap, types and values; see [`super::execute::decode_execute_params`].
        params: &'a [u8],
    },
    /// `COM_STMT_SEND_LONG_DATA`: a piece of one parameter's value (no response).
    StmtSendLongData {
        /// Statement id.
        stmt_id: u32,
        /// Parameter index.
        param: u16,
        /// The data piece.
        data: &'a [u8],
    },
    /// `COM_STMT_CLOSE` (no response).
    StmtClose(u32),
    /// `COM_STMT_RESET`.
    StmtReset(u32),
    /// `COM_STMT_FETCH`: rows from an open cursor.
    StmtFetch {
        /// Statement id.
        stmt_id: u32,
        /// Number of rows wanted.
        rows: u32,
    },
    /// `COM_SET_OPTION`: 0 enables, 1 disables multi-statements.
    SetOption(u16),
    /// Any other command, kept raw.
    Other {
        /// Command byte.
        code: u8,
        /// Bytes after the command byte.
        body: &'a [u8],
    },
}

impl<'a> Command<'a> {
    /// Decodes a request payload under the connection's capabilities (they shape `COM_CHANGE_USER`).
    /// Commands without arguments ignore trailing bytes, as servers do.
    pub fn decode(payload: &'a [u8], caps: u64) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let code = r.u8("command")?;
        Ok(match code {
            COM_QUIT => Self::Quit,
            COM_INIT_DB => Self::InitDb(r.rest()),
            COM_QUERY => Self::Query(r.rest()),
            COM_FIELD_LIST => Self::FieldList { table: r.nul_bytes("table")?, wildcard: r.rest() },
            COM_STATISTICS => Self::Statistics,
            COM_PROCESS_KILL => Self::ProcessKill(r.u32("connection id")?),
            COM_PING => Self::Ping,
            COM_CHANGE_USER => Self::ChangeUser(decode_change_user(&mut r, caps)?),
            COM_RESET_CONNECTION => Self::ResetConnection,
            COM_STMT_PREPARE => Self::StmtPrepare(r.rest()),
            COM_STMT_EXECUTE => Self::StmtExecute {
                stmt_id: r.u32("statement id")?,
                flags: r.u8("flags")?,
                iteration_count: r.u32("iteration count")?,
                params: r.rest(),
            },
            COM_STMT_SEND_LONG_DATA => Self::StmtSendLongData {
                stmt_id: r.u32("statement id")?,
                param: r.u16("parameter id")?,
                data: r.rest(),
            },
            COM_STMT_CLOSE => Self::StmtClose(r.u32("statement id")?),
            COM_STMT_RESET => Self::StmtReset(r.u32("statement id")?),
            COM_STMT_FETCH => Self::StmtFetch { stmt_id: r.u32("statement id")?, rows: r.u32("row count")? },
            COM_SET_OPTION => Self::SetOption(r.u16("option")?),
            code => Self::Other { code, body: r.rest() },
        })
    }

    /// The command byte.
    #[must_use]
    pub fn code(&self) -> u8 {
        match self {
            Self::Quit => COM_QUIT,
            Self::InitDb(_) => COM_INIT_DB,
            Self::Query(_) => COM_QUERY,
            Self::FieldList { .. } => COM_FIELD_LIST,
            Self::Statistics => COM_STATISTICS,
            Self::ProcessKill(_) => COM_PROCESS_KILL,
            Self::Ping => COM_PING,
            Self::ChangeUser(_) => COM_CHANGE_USER,
            Self::ResetConnection => COM_RESET_CONNECTION,
            Self::StmtPrepare(_) => COM_STMT_PREPARE,
            Self::StmtExecute { .. } => COM_STMT_EXECUTE,
            Self::StmtSendLongData { .. } => COM_STMT_SEND_LONG_DATA,
            Self::StmtClose(_) => COM_STMT_CLOSE,
            Self::StmtReset(_) => COM_STMT_RESET,
            Self::StmtFetch { .. } => COM_STMT_FETCH,
            Self::SetOption(_) => COM_SET_OPTION,
            Self::Other { code, .. } => *code,
        }
    }

    /// Appends the request payload (unframed).
    pub fn encode(&self, caps: u64, out: &mut Vec<u8>) {
        out.push(self.code());
        match *self {
            Self::Quit | Self::Statistics | Self::Ping | Self::ResetConnection => {}
            Self::InitDb(b) | Self::Query(b) | Self::StmtPrepare(b) => out.extend_from_slice(b),
            Self::FieldList { table, wildcard } => {
                put_nul_bytes(out, table);
                out.extend_from_slice(wildcard);
            }
            Self::ProcessKill(id) | Self::StmtClose(id) | Self::StmtReset(id) => put_u32(out, id),
            Self::ChangeUser(cu) => encode_change_user(&cu, caps, out),
            Self::StmtExecute { stmt_id, flags, iteration_count, params } => {
                put_u32(out, stmt_id);
                out.push(flags);
                put_u32(out, iteration_count);
                out.extend_from_slice(params);
            }
            Self::StmtSendLongData { stmt_id, param, data } => {
                put_u32(out, stmt_id);
                put_u16(out, param);
                out.extend_from_slice(data);
            }
            Self::StmtFetch { stmt_id, rows } => {
                put_u32(out, stmt_id);
                put_u32(out, rows);
            }
            Self::SetOption(option) => put_u16(out, option),
            Self::Other { body, .. } => out.extend_from_slice(body),
        }
    }
}

fn decode_change_user<'a>(r: &mut Reader<'a>, caps: u64) -> Result<ChangeUser<'a>, DecodeError> {
    let username = r.nul_bytes("username")?;
    let auth_response = if caps & CLIENT_SECURE_CONNECTION != 0 {
        let len = r.u8("auth response length")?;
        r.bytes(usize::from(len), "auth response")?
    } else {
        r.nul_bytes("auth response")?
    };
    let database = r.nul_bytes("database")?;
    let charset = if r.is_empty() { None } else { Some(r.u16("character set")?) };
    let auth_plugin = if caps & CLIENT_PLUGIN_AUTH != 0 && !r.is_empty() { Some(r.nul_or_eof_bytes()) } else { None };
    let connect_attrs = if caps & CLIENT_CONNECT_ATTRS != 0 && !r.is_empty() {
        Some(ConnectAttrs::new(r.lenenc_bytes("connection attributes")?)?)
    } else {
        None
    };
    Ok(ChangeUser { username, auth_response, database, charset, auth_plugin, connect_attrs })
}

fn encode_change_user(cu: &ChangeUser<'_>, caps: u64, out: &mut Vec<u8>) {
    put_nul_bytes(out, cu.username);
    if caps & CLIENT_SECURE_CONNECTION != 0 {
        put_auth_u8(out, cu.auth_response);
    } else {
        put_nul_bytes(out, cu.auth_response);
    }
    put_nul_bytes(out, cu.database);
    let Some(charset) = cu.charset else { return };
    put_u16(out, charset);
    if caps & CLIENT_PLUGIN_AUTH != 0 {
        put_nul_bytes(out, cu.auth_plugin.unwrap_or_default());
    }
    if caps & CLIENT_CONNECT_ATTRS != 0 {
        put_lenenc_bytes(out, cu.connect_attrs.map(|a| a.raw()).unwrap_or_default());
    }
}

/// Whether `code` is a command whose bytes 1..5 are a statement id.
fn carries_stmt_id(code: u8) -> bool {
    matches!(
        code,
        COM_STMT_EXECUTE
            | COM_STMT_SEND_LONG_DATA
            | COM_STMT_CLOSE
            | COM_STMT_RESET
            | COM_STMT_FETCH
            | COM_STMT_BULK_EXECUTE
    )
}

/// The statement id of a statement command payload, without decoding the rest.
#[must_use]
pub fn stmt_id(payload: &[u8]) -> Option<u32> {
    match payload.get(..5)? {
        &[code, a, b, c, d] if carries_stmt_id(code) => Some(u32::from_le_bytes([a, b, c, d])),
        _ => None,
    }
}

/// Appends `payload` with its statement id replaced by `new_id`: the client's id for a statement
/// and the backend's id differ, and everything else is relayed untouched.
pub fn rewrite_stmt_id(payload: &[u8], new_id: u32, out: &mut Vec<u8>) -> Result<(), DecodeError> {
    let (head, rest) = payload.split_at_checked(5).ok_or(DecodeError::Truncated { field: "statement id" })?;
    let code = head.first().copied().unwrap_or_default();
    if !carries_stmt_id(code) {
        return Err(DecodeError::UnexpectedHeader { packet: "statement command", got: code });
    }
    out.reserve(payload.len());
    out.push(code);
    put_u32(out, new_id);
    out.extend_from_slice(rest);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::capability::{CLIENT_PROTOCOL_41, CLIENT_SECURE_CONNECTION};
    use proptest::prelude::*;

    const CAPS: u64 = CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION | CLIENT_PLUGIN_AUTH | CLIENT_CONNECT_ATTRS;

    fn round_trip(bytes: &[u8], want: Command<'_>) {
        let cmd = Command::decode(bytes, CAPS).unwrap();
        assert_eq!(cmd, want);
        let mut out = Vec::new();
        cmd.encode(CAPS, &mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn golden_simple_commands() {
        round_trip(b"\x01", Command::Quit);
        round_trip(b"\x02shop", Command::InitDb(b"shop"));
        round_trip(b"\x03SELECT 1", Command::Query(b"SELECT 1"));
        round_trip(b"\x04orders\x00id%", Command::FieldList { table: b"orders", wildcard: b"id%" });
        round_trip(b"\x09", Command::Statistics);
        round_trip(b"\x0c\x2a\x00\x00\x00", Command::ProcessKill(42));
        round_trip(b"\x0e", Command::Ping);
        round_trip(b"\x1f", Command::ResetConnection);
        round_trip(b"\x16SELECT ?", Command::StmtPrepare(b"SELECT ?"));
        round_trip(b"\x19\x05\x00\x00\x00", Command::StmtClose(5));
        round_trip(b"\x1a\x05\x00\x00\x00", Command::StmtReset(5));
        round_trip(b"\x1c\x05\x00\x00\x00\x64\x00\x00\x00", Command::StmtFetch { stmt_id: 5, rows: 100 });
        round_trip(b"\x1b\x01\x00", Command::SetOption(1));
        round_trip(
            b"\x18\x05\x00\x00\x00\x01\x00blob",
            Command::StmtSendLongData { stmt_id: 5, param: 1, data: b"blob" },
        );
        round_trip(b"\x12\x01\x02", Command::Other { code: COM_BINLOG_DUMP, body: b"\x01\x02" });
        round_trip(
            b"\x17\x05\x00\x00\x00\x00\x01\x00\x00\x00\x00\x01\x08\x00\x07\x00\x00\x00\x00\x00\x00\x00",
            Command::StmtExecute {
                stmt_id: 5,
                flags: 0,
                iteration_count: 1,
                params: b"\x00\x01\x08\x00\x07\x00\x00\x00\x00\x00\x00\x00",
            },
        );
        assert!(Command::decode(b"", CAPS).is_err());
        assert!(Command::decode(b"\x19\x05\x00", CAPS).is_err());
    }

    #[test]
    fn golden_change_user() {
        let mut bytes = b"\x11bob\x00\x03abc\x00\x21\x00mysql_native_password\x00\x05".to_vec();
        bytes.extend_from_slice(b"\x01k\x02vv");
        let cmd = Command::decode(&bytes, CAPS).unwrap();
        let Command::ChangeUser(cu) = cmd else { panic!("not change user: {cmd:?}") };
        assert_eq!((cu.username, cu.auth_response, cu.database), (&b"bob"[..], &b"abc"[..], &b""[..]));
        assert_eq!(cu.charset, Some(33));
        assert_eq!(cu.auth_plugin, Some(&b"mysql_native_password"[..]));
        assert_eq!(cu.connect_attrs.unwrap().iter().collect::<Vec<_>>(), [(&b"k"[..], &b"vv"[..])]);
        let mut out = Vec::new();
        cmd.encode(CAPS, &mut out);
        assert_eq!(out, bytes);
        // Old clients stop after the database.
        round_trip(
            b"\x11bob\x00\x00db\x00",
            Command::ChangeUser(ChangeUser {
                username: b"bob",
                auth_response: b"",
                database: b"db",
                charset: None,
                auth_plugin: None,
                connect_attrs: None,
            }),
        );
    }

    #[test]
    fn statement_id_rewrite() {
        let exec = b"\x17\x05\x00\x00\x00\x00\x01\x00\x00\x00";
        assert_eq!(stmt_id(exec), Some(5));
        let mut out = b"keep".to_vec();
        rewrite_stmt_id(exec, 0x0102_0304, &mut out).unwrap();
        assert_eq!(out, b"keep\x17\x04\x03\x02\x01\x00\x01\x00\x00\x00");
        assert_eq!(stmt_id(&out[4..]), Some(0x0102_0304));
        let mut out = Vec::new();
        rewrite_stmt_id(b"\x19\x05\x00\x00\x00", 9, &mut out).unwrap();
        assert_eq!(out, b"\x19\x09\x00\x00\x00");
        assert_eq!(stmt_id(b"\x03SELECT 1"), None);
        assert!(rewrite_stmt_id(b"\x03SELECT 1", 9, &mut out).is_err());
        assert!(rewrite_stmt_id(b"\x17\x05", 9, &mut out).is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64), caps in any::<u64>()) {
            if let Ok(cmd) = Command::decode(&bytes, caps) {
                let mut out = Vec::new();
                cmd.encode(caps, &mut out);
            }
            let _ = stmt_id(&bytes);
            let _ = rewrite_stmt_id(&bytes, 1, &mut Vec::new());
        }

        #[test]
        fn stmt_commands_round_trip(id in any::<u32>(), n in any::<u32>(), param in any::<u16>(), data in prop::collection::vec(any::<u8>(), 0..40)) {
            for cmd in [
                Command::StmtClose(id),
                Command::StmtFetch { stmt_id: id, rows: n },
                Command::StmtSendLongData { stmt_id: id, param, data: &data },
                Command::StmtExecute { stmt_id: id, flags: 1, iteration_count: n, params: &data },
            ] {
                let mut out = Vec::new();
                cmd.encode(CAPS, &mut out);
                prop_assert_eq!(Command::decode(&out, CAPS).unwrap(), cmd);
                prop_assert_eq!(stmt_id(&out), Some(id));
            }
        }
    }
}
