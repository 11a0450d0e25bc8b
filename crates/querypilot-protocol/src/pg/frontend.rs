//! Messages a client sends after startup (PostgreSQL docs 55.7 "Message Formats", frontend
//! side; flows in 55.2.2 "Simple Query", 55.2.3 "Extended Query", 55.2.6 "COPY").
//!
//! [`FrontendMessage`] borrows every field from the frame. Besides decode/encode this module has
//! builders from parts and cheap rewrites that swap only the statement name in Parse, Bind,
//! Describe and Close while copying the rest of the body untouched, because the router prepares
//! statements on backends under its own names.

use super::error::{DecodeError, EncodeError, RewriteError};
use super::framer::Frame;
use super::list::{Int16List, OidList, ValueList};
use super::wire::{MessageWriter, Reader};

/// What a Describe or Close message refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Target {
    /// A prepared statement (`'S'`).
    Statement,
    /// A portal (`'P'`).
    Portal,
}

impl Target {
    /// The wire byte.
    pub fn byte(self) -> u8 {
        match self {
            Self::Statement => b'S',
            Self::Portal => b'P',
        }
    }

    fn from_byte(b: u8) -> Result<Self, DecodeError> {
        match b {
            b'S' => Ok(Self::Statement),
            b'P' => Ok(Self::Portal),
            _ => Err(DecodeError::InvalidValue { what: "describe/close kind", value: i64::from(b) }),
        }
    }
}

/// A message from client to server, borrowed from its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrontendMessage<'a> {
    /// Simple query `'Q'`: one string that may hold several statements.
    Query(&'a str),
    /// Parse `'P'`: prepare `query` as statement `name` (empty = unnamed).
    Parse {
        /// Statement name.
        name: &'a str,
        /// Query text.
        query: &'a str,
        /// Parameter type OIDs the client fixed (0 = unspecified).
        param_types: OidList<'a>,
    },
    /// Bind `'B'`: create portal `portal` from statement `statement` with parameter values.
    Bind {
        /// Destination portal name.
        portal: &'a str,
        /// Source statement name.
        statement: &'a str,
        /// Parameter format codes (none = all text, one = applies to all).
        param_formats: Int16List<'a>,
        /// Parameter values; `None` is SQL NULL.
        params: ValueList<'a>,
        /// Result column format codes.
        result_formats: Int16List<'a>,
    },
    /// Describe `'D'` a statement or portal.
    Describe {
        /// Statement or portal.
        kind: Target,
        /// Its name.
        name: &'a str,
    },
    /// Execute `'E'` a portal.
    Execute {
        /// Portal name.
        portal: &'a str,
        /// Row limit; 0 = no limit.
        max_rows: i32,
    },
    /// Sync `'S'`: end of an extended-query batch.
    Sync,
    /// Flush `'H'`: ask the server to send what it has.
    Flush,
    /// Close `'C'` a statement or portal.
    Close {
        /// Statement or portal.
        kind: Target,
        /// Its name.
        name: &'a str,
    },
    /// Terminate `'X'`.
    Terminate,
    /// CopyData `'d'`.
    CopyData(&'a [u8]),
    /// CopyDone `'c'`.
    CopyDone,
    /// CopyFail `'f'` with the reason.
    CopyFail(&'a str),
    /// `'p'`: PasswordMessage, SASLInitialResponse or SASLResponse; which one depends on the
    /// authentication request that preceded it, so the body is raw (see [`password_text`],
    /// [`decode_sasl_initial_response`]).
    Password(&'a [u8]),
    /// FunctionCall `'F'`, passed through raw.
    FunctionCall(&'a [u8]),
}

impl<'a> FrontendMessage<'a> {
    /// Decodes a frame received from a client.
    pub fn decode(frame: &Frame<'a>) -> Result<Self, DecodeError> {
        let mut r = Reader::new(frame.body);
        let msg = match frame.tag {
            b'Q' => Self::Query(r.text("query")?),
            b'P' => decode_parse(&mut r)?,
            b'B' => decode_bind(&mut r)?,
            b'D' => {
                let kind = Target::from_byte(r.u8("describe kind")?)?;
                Self::Describe { kind, name: r.cstr("describe name")? }
            }
            b'E' => Self::Execute { portal: r.cstr("portal name")?, max_rows: r.i32("max rows")? },
            b'S' => Self::Sync,
            b'H' => Self::Flush,
            b'C' => {
                let kind = Target::from_byte(r.u8("close kind")?)?;
                Self::Close { kind, name: r.cstr("close name")? }
            }
            b'X' => Self::Terminate,
            b'd' => Self::CopyData(r.rest()),
            b'c' => Self::CopyDone,
            b'f' => Self::CopyFail(r.cstr("copy failure reason")?),
            b'p' => Self::Password(r.rest()),
            b'F' => Self::FunctionCall(r.rest()),
            other => return Err(DecodeError::UnknownTag(other)),
        };
        r.finish("frontend message")?;
        Ok(msg)
    }

    /// Whether `tag` is the type of a message a client may send (one [`Self::decode`] knows).
    /// A server skipping a failed batch's messages up to its Sync reads no more of them than
    /// this: PostgreSQL rejects an unknown type there, and discards a known one's body unparsed.
    pub fn known_tag(tag: u8) -> bool {
        matches!(tag, b'Q' | b'P' | b'B' | b'D' | b'E' | b'S' | b'H' | b'C' | b'X' | b'd' | b'c' | b'f' | b'p' | b'F')
    }

    /// The message type byte.
    pub fn tag(&self) -> u8 {
        match self {
            Self::Query(_) => b'Q',
            Self::Parse { .. } => b'P',
            Self::Bind { .. } => b'B',
            Self::Describe { .. } => b'D',
            Self::Execute { .. } => b'E',
            Self::Sync => b'S',
            Self::Flush => b'H',
            Self::Close { .. } => b'C',
            Self::Terminate => b'X',
            Self::CopyData(_) => b'd',
            Self::CopyDone => b'c',
            Self::CopyFail(_) => b'f',
            Self::Password(_) => b'p',
            Self::FunctionCall(_) => b'F',
        }
    }

    /// Appends the complete message to `out`; on error `out` is unchanged.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let mut w = MessageWriter::tagged(out, self.tag());
        match self {
            Self::Query(q) => {
                w.cstr(q, "query");
            }
            Self::Parse { name, query, param_types } => {
                w.cstr(name, "statement name").cstr(query, "query");
                w.count16(param_types.len(), "parameter types").bytes(param_types.raw());
            }
            Self::Bind { portal, statement, param_formats, params, result_formats } => {
                w.cstr(portal, "portal name").cstr(statement, "statement name");
                w.count16(param_formats.len(), "parameter formats").bytes(param_formats.raw());
                w.count16(params.len(), "parameters").bytes(params.raw());
                w.count16(result_formats.len(), "result formats").bytes(result_formats.raw());
            }
            Self::Describe { kind, name } | Self::Close { kind, name } => {
                w.u8(kind.byte()).cstr(name, "name");
            }
            Self::Execute { portal, max_rows } => {
                w.cstr(portal, "portal name").i32(*max_rows);
            }
            Self::Sync | Self::Flush | Self::Terminate | Self::CopyDone => {}
            Self::CopyFail(reason) => {
                w.cstr(reason, "copy failure reason");
            }
            Self::CopyData(data) | Self::Password(data) | Self::FunctionCall(data) => {
                w.bytes(data);
            }
        }
        w.finish()
    }
}

fn decode_parse<'a>(r: &mut Reader<'a>) -> Result<FrontendMessage<'a>, DecodeError> {
    let name = r.cstr("statement name")?;
    let query = r.text("query")?;
    let param_types = OidList::read(r, "parameter types")?;
    Ok(FrontendMessage::Parse { name, query, param_types })
}

fn decode_bind<'a>(r: &mut Reader<'a>) -> Result<FrontendMessage<'a>, DecodeError> {
    let portal = r.cstr("portal name")?;
    let statement = r.cstr("statement name")?;
    let param_formats = Int16List::read(r, "parameter formats")?;
    let params = ValueList::read(r, "parameters")?;
    let result_formats = Int16List::read(r, "result formats")?;
    Ok(FrontendMessage::Bind { portal, statement, param_formats, params, result_formats })
}

/// Appends a simple Query message.
pub fn encode_query(sql: &str, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let mut w = MessageWriter::tagged(out, b'Q');
    w.cstr(sql, "query");
    w.finish()
}

/// Appends a Parse message from parts.
pub fn encode_parse(name: &str, query: &str, param_types: &[u32], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let mut w = MessageWriter::tagged(out, b'P');
    w.cstr(name, "statement name").cstr(query, "query");
    w.count16(param_types.len(), "parameter types");
    for &oid in param_types {
        w.u32(oid);
    }
    w.finish()
}

/// Appends a Bind message from parts; `None` parameters are sent as SQL NULL.
pub fn encode_bind(
    portal: &str,
    statement: &str,
    param_formats: &[i16],
    params: &[Option<&[u8]>],
    result_formats: &[i16],
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut w = MessageWriter::tagged(out, b'B');
    w.cstr(portal, "portal name").cstr(statement, "statement name");
    w.count16(param_formats.len(), "parameter formats");
    for &f in param_formats {
        w.i16(f);
    }
    w.count16(params.len(), "parameters");
    for &p in params {
        w.value(p, "parameter");
    }
    w.count16(result_formats.len(), "result formats");
    for &f in result_formats {
        w.i16(f);
    }
    w.finish()
}

/// Appends a Describe message.
pub fn encode_describe(kind: Target, name: &str, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    FrontendMessage::Describe { kind, name }.encode(out)
}

/// Appends a Close message.
pub fn encode_close(kind: Target, name: &str, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    FrontendMessage::Close { kind, name }.encode(out)
}

/// Appends an Execute message.
pub fn encode_execute(portal: &str, max_rows: i32, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    FrontendMessage::Execute { portal, max_rows }.encode(out)
}

/// Appends a Sync message (infallible: it has no body).
pub fn encode_sync(out: &mut Vec<u8>) {
    out.extend_from_slice(&[b'S', 0, 0, 0, 4]);
}

/// Appends a Flush message (infallible: it has no body).
pub fn encode_flush(out: &mut Vec<u8>) {
    out.extend_from_slice(&[b'H', 0, 0, 0, 4]);
}

/// Appends a Terminate message (infallible: it has no body).
pub fn encode_terminate(out: &mut Vec<u8>) {
    out.extend_from_slice(&[b'X', 0, 0, 0, 4]);
}

/// Re-encodes a Parse body under statement name `new_name`, copying query and types untouched.
pub fn encode_parse_renamed(body: &[u8], new_name: &str, out: &mut Vec<u8>) -> Result<(), RewriteError> {
    let mut r = Reader::new(body);
    r.cstr_bytes("statement name")?;
    let rest = r.rest();
    let mut w = MessageWriter::tagged(out, b'P');
    w.cstr(new_name, "statement name").bytes(rest);
    Ok(w.finish()?)
}

/// Re-encodes a Bind body with source statement `new_statement`, copying the portal name,
/// formats and parameter values untouched.
pub fn encode_bind_renamed(body: &[u8], new_statement: &str, out: &mut Vec<u8>) -> Result<(), RewriteError> {
    let mut r = Reader::new(body);
    let portal = r.cstr_bytes("portal name")?;
    r.cstr_bytes("statement name")?;
    let rest = r.rest();
    let mut w = MessageWriter::tagged(out, b'B');
    w.cstr(portal, "portal name").cstr(new_statement, "statement name").bytes(rest);
    Ok(w.finish()?)
}

/// Re-encodes a Describe body with name `new_name`, keeping its kind byte.
pub fn encode_describe_renamed(body: &[u8], new_name: &str, out: &mut Vec<u8>) -> Result<(), RewriteError> {
    encode_target_renamed(b'D', body, new_name, out)
}

/// Re-encodes a Close body with name `new_name`, keeping its kind byte.
pub fn encode_close_renamed(body: &[u8], new_name: &str, out: &mut Vec<u8>) -> Result<(), RewriteError> {
    encode_target_renamed(b'C', body, new_name, out)
}

fn encode_target_renamed(tag: u8, body: &[u8], new_name: &str, out: &mut Vec<u8>) -> Result<(), RewriteError> {
    let mut r = Reader::new(body);
    let kind = Target::from_byte(r.u8("describe/close kind")?)?;
    r.cstr_bytes("name")?;
    r.finish("describe/close")?;
    let mut w = MessageWriter::tagged(out, tag);
    w.u8(kind.byte()).cstr(new_name, "name");
    Ok(w.finish()?)
}

/// Reads a PasswordMessage body (cleartext or `md5...` hash) as text.
pub fn password_text(body: &[u8]) -> Result<&str, DecodeError> {
    let mut r = Reader::new(body);
    let text = r.cstr("password")?;
    r.finish("password")?;
    Ok(text)
}

/// Reads a SASLInitialResponse body: the chosen mechanism and the optional initial data
/// (Int32 length -1 means none).
pub fn decode_sasl_initial_response(body: &[u8]) -> Result<(&str, Option<&[u8]>), DecodeError> {
    let mut r = Reader::new(body);
    let mechanism = r.cstr("SASL mechanism")?;
    let data = r.value("SASL initial response")?;
    r.finish("SASL initial response")?;
    Ok((mechanism, data))
}

/// Appends a PasswordMessage carrying `password` (cleartext or an `md5...` hash).
pub fn encode_password(password: &str, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let mut w = MessageWriter::tagged(out, b'p');
    w.cstr(password, "password");
    w.finish()
}

/// Appends a SASLInitialResponse choosing `mechanism` with initial client data.
pub fn encode_sasl_initial_response(
    mechanism: &str,
    data: Option<&[u8]>,
    out: &mut Vec<u8>,
) -> Result<(), EncodeError> {
    let mut w = MessageWriter::tagged(out, b'p');
    w.cstr(mechanism, "SASL mechanism").value(data, "SASL initial response");
    w.finish()
}

/// Appends a SASLResponse carrying `data` verbatim.
pub fn encode_sasl_response(data: &[u8], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let mut w = MessageWriter::tagged(out, b'p');
    w.bytes(data);
    w.finish()
}
