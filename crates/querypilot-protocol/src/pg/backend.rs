//! Messages a server sends (PostgreSQL docs 55.7 "Message Formats", backend side; flows in 55.2
//! "Message Flow"; authentication requests in 55.2.1 and 55.3 "SASL Authentication").
//!
//! [`BackendMessage`] borrows every field from the frame. The relay loop rarely needs a full
//! decode: [`peek`] reads only what it needs (the transaction status of ReadyForQuery and the
//! SQLSTATE of ErrorResponse) without validating the rest.

use super::error::{DecodeError, EncodeError};
use super::framer::Frame;
use super::list::{Int16List, OidList, StrList, ValueList};
use super::notice::{peek_sqlstate, FieldList};
use super::wire::{MessageWriter, Reader};

/// The transaction state reported by ReadyForQuery.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TransactionStatus {
    /// Not in a transaction block (`'I'`).
    Idle,
    /// In a transaction block (`'T'`).
    InBlock,
    /// In a failed transaction block; statements are rejected until it ends (`'E'`).
    Failed,
}

impl TransactionStatus {
    /// The wire byte.
    pub fn byte(self) -> u8 {
        match self {
            Self::Idle => b'I',
            Self::InBlock => b'T',
            Self::Failed => b'E',
        }
    }

    /// Parses the wire byte.
    pub fn from_byte(b: u8) -> Result<Self, DecodeError> {
        match b {
            b'I' => Ok(Self::Idle),
            b'T' => Ok(Self::InBlock),
            b'E' => Ok(Self::Failed),
            _ => Err(DecodeError::InvalidValue { what: "transaction status", value: i64::from(b) }),
        }
    }
}

/// An authentication request (`'R'`), distinguished by its Int32 code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Authentication<'a> {
    /// AuthenticationOk (0).
    Ok,
    /// AuthenticationCleartextPassword (3).
    CleartextPassword,
    /// AuthenticationMD5Password (5) with its salt.
    Md5Password {
        /// Random salt for the MD5 hash.
        salt: [u8; 4],
    },
    /// AuthenticationSASL (10) with the mechanisms the server offers.
    Sasl {
        /// Mechanism names, e.g. `SCRAM-SHA-256`.
        mechanisms: StrList<'a>,
    },
    /// AuthenticationSASLContinue (11) with the server's challenge.
    SaslContinue(&'a [u8]),
    /// AuthenticationSASLFinal (12) with the server's outcome data.
    SaslFinal(&'a [u8]),
    /// Any other method (Kerberos, GSSAPI, SSPI), kept raw.
    Other {
        /// The method code.
        code: i32,
        /// The bytes after the code.
        data: &'a [u8],
    },
}

/// A column of a RowDescription.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FieldDescription<'a> {
    /// Column name.
    pub name: &'a str,
    /// OID of the source table, or 0.
    pub table_oid: u32,
    /// Attribute number in the source table, or 0.
    pub column_attr: i16,
    /// Data type OID.
    pub type_oid: u32,
    /// Data type size (negative for variable width).
    pub type_size: i16,
    /// Type modifier.
    pub type_modifier: i32,
    /// Format code: 0 text, 1 binary.
    pub format: i16,
}

impl<'a> FieldDescription<'a> {
    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        Ok(Self {
            name: r.cstr("field name")?,
            table_oid: r.u32("table oid")?,
            column_attr: r.i16("column attribute")?,
            type_oid: r.u32("type oid")?,
            type_size: r.i16("type size")?,
            type_modifier: r.i32("type modifier")?,
            format: r.i16("format code")?,
        })
    }

    fn write(&self, w: &mut MessageWriter<'_>) {
        w.cstr(self.name, "field name").u32(self.table_oid).i16(self.column_attr);
        w.u32(self.type_oid).i16(self.type_size).i32(self.type_modifier).i16(self.format);
    }
}

/// A validated RowDescription field list, borrowed from the message body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RowDescription<'a> {
    count: u16,
    raw: &'a [u8],
}

impl<'a> RowDescription<'a> {
    fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let count = r.u16("field count")?;
        let before = r.clone();
        for _ in 0..count {
            FieldDescription::read(r)?;
        }
        let used = before.remaining().saturating_sub(r.remaining());
        Ok(Self { count, raw: before.clone().bytes(used, "row description")? })
    }

    /// Number of columns.
    pub fn len(&self) -> usize {
        usize::from(self.count)
    }

    /// Whether there are no columns.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The wire bytes of the fields (without the count).
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Iterates the column descriptions.
    pub fn iter(&self) -> impl Iterator<Item = FieldDescription<'a>> + 'a {
        let mut r = Reader::new(self.raw);
        std::iter::from_fn(move || if r.remaining() == 0 { None } else { FieldDescription::read(&mut r).ok() })
    }
}

/// The body shared by CopyInResponse, CopyOutResponse and CopyBothResponse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CopyResponse<'a> {
    /// Overall format: 0 text, 1 binary.
    pub format: u8,
    /// Per-column format codes.
    pub column_formats: Int16List<'a>,
}

/// A message from server to client, borrowed from its frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendMessage<'a> {
    /// `'R'` authentication request or result.
    Authentication(Authentication<'a>),
    /// `'S'` a run-time parameter's current value.
    ParameterStatus {
        /// Parameter name.
        name: &'a str,
        /// Its value.
        value: &'a str,
    },
    /// `'K'` cancellation key data.
    BackendKeyData {
        /// Backend process ID.
        pid: i32,
        /// Secret key.
        key: i32,
    },
    /// `'Z'` ready for a new query.
    ReadyForQuery(TransactionStatus),
    /// `'T'` result column descriptions.
    RowDescription(RowDescription<'a>),
    /// `'D'` one result row; `None` columns are SQL NULL.
    DataRow(ValueList<'a>),
    /// `'C'` command completion tag, e.g. `SELECT 3`.
    CommandComplete(&'a str),
    /// `'I'` response to an empty query string.
    EmptyQueryResponse,
    /// `'E'` error.
    ErrorResponse(FieldList<'a>),
    /// `'N'` notice.
    NoticeResponse(FieldList<'a>),
    /// `'1'` Parse completed.
    ParseComplete,
    /// `'2'` Bind completed.
    BindComplete,
    /// `'3'` Close completed.
    CloseComplete,
    /// `'n'` the statement returns no rows.
    NoData,
    /// `'t'` parameter types of a described statement.
    ParameterDescription(OidList<'a>),
    /// `'s'` Execute stopped at its row limit.
    PortalSuspended,
    /// `'G'` server ready for COPY FROM STDIN.
    CopyInResponse(CopyResponse<'a>),
    /// `'H'` server starting COPY TO STDOUT.
    CopyOutResponse(CopyResponse<'a>),
    /// `'W'` bidirectional copy (replication).
    CopyBothResponse(CopyResponse<'a>),
    /// `'d'` COPY data.
    CopyData(&'a [u8]),
    /// `'c'` end of COPY data.
    CopyDone,
    /// `'A'` asynchronous NOTIFY.
    NotificationResponse {
        /// Notifying backend's process ID.
        pid: i32,
        /// Channel name.
        channel: &'a str,
        /// Payload.
        payload: &'a str,
    },
    /// `'v'` the server supports an older minor version or lacks some protocol options.
    NegotiateProtocolVersion {
        /// Newest minor version the server supports.
        newest_minor: i32,
        /// Protocol options the server did not recognize.
        unrecognized: StrList<'a>,
    },
    /// `'V'` function call result; `None` is SQL NULL.
    FunctionCallResponse(Option<&'a [u8]>),
}

impl<'a> BackendMessage<'a> {
    /// Decodes a frame received from a server.
    pub fn decode(frame: &Frame<'a>) -> Result<Self, DecodeError> {
        let mut r = Reader::new(frame.body);
        let msg = match frame.tag {
            b'R' => Self::Authentication(decode_auth(&mut r)?),
            b'S' => Self::ParameterStatus { name: r.cstr("parameter name")?, value: r.cstr("parameter value")? },
            b'K' => Self::BackendKeyData { pid: r.i32("process id")?, key: r.i32("secret key")? },
            b'Z' => Self::ReadyForQuery(TransactionStatus::from_byte(r.u8("transaction status")?)?),
            b'T' => Self::RowDescription(RowDescription::read(&mut r)?),
            b'D' => Self::DataRow(ValueList::read(&mut r, "column value")?),
            b'C' => Self::CommandComplete(r.cstr("command tag")?),
            b'I' => Self::EmptyQueryResponse,
            b'E' => Self::ErrorResponse(FieldList::read(&mut r)?),
            b'N' => Self::NoticeResponse(FieldList::read(&mut r)?),
            b'1' => Self::ParseComplete,
            b'2' => Self::BindComplete,
            b'3' => Self::CloseComplete,
            b'n' => Self::NoData,
            b't' => Self::ParameterDescription(OidList::read(&mut r, "parameter types")?),
            b's' => Self::PortalSuspended,
            b'G' => Self::CopyInResponse(decode_copy_response(&mut r)?),
            b'H' => Self::CopyOutResponse(decode_copy_response(&mut r)?),
            b'W' => Self::CopyBothResponse(decode_copy_response(&mut r)?),
            b'd' => Self::CopyData(r.rest()),
            b'c' => Self::CopyDone,
            b'A' => Self::NotificationResponse {
                pid: r.i32("process id")?,
                channel: r.cstr("channel")?,
                payload: r.cstr("payload")?,
            },
            b'v' => decode_negotiate(&mut r)?,
            b'V' => Self::FunctionCallResponse(r.value("function result")?),
            other => return Err(DecodeError::UnknownTag(other)),
        };
        r.finish("backend message")?;
        Ok(msg)
    }

    /// The message type byte.
    pub fn tag(&self) -> u8 {
        match self {
            Self::Authentication(_) => b'R',
            Self::ParameterStatus { .. } => b'S',
            Self::BackendKeyData { .. } => b'K',
            Self::ReadyForQuery(_) => b'Z',
            Self::RowDescription(_) => b'T',
            Self::DataRow(_) => b'D',
            Self::CommandComplete(_) => b'C',
            Self::EmptyQueryResponse => b'I',
            Self::ErrorResponse(_) => b'E',
            Self::NoticeResponse(_) => b'N',
            Self::ParseComplete => b'1',
            Self::BindComplete => b'2',
            Self::CloseComplete => b'3',
            Self::NoData => b'n',
            Self::ParameterDescription(_) => b't',
            Self::PortalSuspended => b's',
            Self::CopyInResponse(_) => b'G',
            Self::CopyOutResponse(_) => b'H',
            Self::CopyBothResponse(_) => b'W',
            Self::CopyData(_) => b'd',
            Self::CopyDone => b'c',
            Self::NotificationResponse { .. } => b'A',
            Self::NegotiateProtocolVersion { .. } => b'v',
            Self::FunctionCallResponse(_) => b'V',
        }
    }

    /// Appends the complete message to `out`; on error `out` is unchanged.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let mut w = MessageWriter::tagged(out, self.tag());
        match self {
            Self::Authentication(auth) => encode_auth(auth, &mut w),
            Self::ParameterStatus { name, value } => {
                w.cstr(name, "parameter name").cstr(value, "parameter value");
            }
            Self::BackendKeyData { pid, key } => {
                w.i32(*pid).i32(*key);
            }
            Self::ReadyForQuery(status) => {
                w.u8(status.byte());
            }
            Self::RowDescription(rd) => {
                w.count16(rd.len(), "fields").bytes(rd.raw());
            }
            Self::DataRow(values) => {
                w.count16(values.len(), "columns").bytes(values.raw());
            }
            Self::CommandComplete(tag) => {
                w.cstr(tag, "command tag");
            }
            Self::ErrorResponse(fields) | Self::NoticeResponse(fields) => {
                w.bytes(fields.raw()).u8(0);
            }
            Self::ParameterDescription(oids) => {
                w.count16(oids.len(), "parameter types").bytes(oids.raw());
            }
            Self::CopyInResponse(c) | Self::CopyOutResponse(c) | Self::CopyBothResponse(c) => {
                w.u8(c.format).count16(c.column_formats.len(), "column formats").bytes(c.column_formats.raw());
            }
            Self::CopyData(data) => {
                w.bytes(data);
            }
            Self::NotificationResponse { pid, channel, payload } => {
                w.i32(*pid).cstr(channel, "channel").cstr(payload, "payload");
            }
            Self::NegotiateProtocolVersion { newest_minor, unrecognized } => {
                w.i32(*newest_minor).count32(unrecognized.count(), "options").bytes(unrecognized.raw());
            }
            Self::FunctionCallResponse(value) => {
                w.value(*value, "function result");
            }
            Self::EmptyQueryResponse
            | Self::ParseComplete
            | Self::BindComplete
            | Self::CloseComplete
            | Self::NoData
            | Self::PortalSuspended
            | Self::CopyDone => {}
        }
        w.finish()
    }
}

fn decode_auth<'a>(r: &mut Reader<'a>) -> Result<Authentication<'a>, DecodeError> {
    Ok(match r.i32("authentication code")? {
        0 => Authentication::Ok,
        3 => Authentication::CleartextPassword,
        5 => Authentication::Md5Password { salt: r.array("MD5 salt")? },
        10 => Authentication::Sasl { mechanisms: StrList::read_terminated(r, "SASL mechanism")? },
        11 => Authentication::SaslContinue(r.rest()),
        12 => Authentication::SaslFinal(r.rest()),
        code => Authentication::Other { code, data: r.rest() },
    })
}

fn encode_auth(auth: &Authentication<'_>, w: &mut MessageWriter<'_>) {
    match auth {
        Authentication::Ok => {
            w.i32(0);
        }
        Authentication::CleartextPassword => {
            w.i32(3);
        }
        Authentication::Md5Password { salt } => {
            w.i32(5).bytes(salt);
        }
        Authentication::Sasl { mechanisms } => {
            w.i32(10).bytes(mechanisms.raw()).u8(0);
        }
        Authentication::SaslContinue(data) => {
            w.i32(11).bytes(data);
        }
        Authentication::SaslFinal(data) => {
            w.i32(12).bytes(data);
        }
        Authentication::Other { code, data } => {
            w.i32(*code).bytes(data);
        }
    }
}

fn decode_copy_response<'a>(r: &mut Reader<'a>) -> Result<CopyResponse<'a>, DecodeError> {
    let format = r.u8("copy format")?;
    let column_formats = Int16List::read(r, "copy column formats")?;
    Ok(CopyResponse { format, column_formats })
}

fn decode_negotiate<'a>(r: &mut Reader<'a>) -> Result<BackendMessage<'a>, DecodeError> {
    let newest_minor = r.i32("newest minor version")?;
    let count = r.i32("option count")?;
    let count = usize::try_from(count)
        .map_err(|_| DecodeError::InvalidValue { what: "option count", value: i64::from(count) })?;
    // Each option takes at least its NUL byte, so the loop is bounded by the body length.
    let unrecognized = StrList::read_counted(r, count, "protocol option")?;
    Ok(BackendMessage::NegotiateProtocolVersion { newest_minor, unrecognized })
}

/// Appends ReadyForQuery with the given status.
pub fn encode_ready_for_query(status: TransactionStatus, out: &mut Vec<u8>) {
    out.extend_from_slice(&[b'Z', 0, 0, 0, 5, status.byte()]);
}

/// Appends a RowDescription built from column descriptions (e.g. for translated results).
pub fn encode_row_description(fields: &[FieldDescription<'_>], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let mut w = MessageWriter::tagged(out, b'T');
    w.count16(fields.len(), "fields");
    for f in fields {
        f.write(&mut w);
    }
    w.finish()
}

/// Appends a DataRow built from column values; `None` is SQL NULL.
pub fn encode_data_row(values: &[Option<&[u8]>], out: &mut Vec<u8>) -> Result<(), EncodeError> {
    let mut w = MessageWriter::tagged(out, b'D');
    w.count16(values.len(), "columns");
    for &v in values {
        w.value(v, "column value");
    }
    w.finish()
}

/// Appends an authentication request (e.g. AuthenticationOk to a client the router accepted).
pub fn encode_authentication(auth: &Authentication<'_>, out: &mut Vec<u8>) -> Result<(), EncodeError> {
    BackendMessage::Authentication(*auth).encode(out)
}

/// Appends AuthenticationSASL offering only SCRAM-SHA-256 (the router never offers channel
/// binding).
pub fn encode_auth_sasl_scram(out: &mut Vec<u8>) {
    out.extend_from_slice(b"R\0\0\0\x17\0\0\0\x0aSCRAM-SHA-256\0\0");
}

/// AuthenticationSASL offering SCRAM-SHA-256-PLUS (preferred, listed first) and SCRAM-SHA-256:
/// what a server says to a client connected over TLS.
pub fn encode_auth_sasl_scram_plus(out: &mut Vec<u8>) {
    out.extend_from_slice(b"R\0\0\0\x2a\0\0\0\x0aSCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0");
}

/// What the relay loop usually needs from a backend frame, read without a full decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendPeek<'a> {
    /// ReadyForQuery and its transaction status.
    ReadyForQuery(TransactionStatus),
    /// ErrorResponse and its SQLSTATE, if it carries one.
    Error {
        /// The `C` field.
        sqlstate: Option<&'a str>,
    },
    /// Any other message, by type byte.
    Other(u8),
}

/// Classifies a backend frame cheaply: only ReadyForQuery's status byte is checked and only the
/// SQLSTATE of an ErrorResponse is located; other bodies are not inspected.
pub fn peek<'a>(frame: &Frame<'a>) -> Result<BackendPeek<'a>, DecodeError> {
    match frame.tag {
        b'Z' => {
            let mut r = Reader::new(frame.body);
            let status = TransactionStatus::from_byte(r.u8("transaction status")?)?;
            r.finish("ReadyForQuery")?;
            Ok(BackendPeek::ReadyForQuery(status))
        }
        b'E' => Ok(BackendPeek::Error { sqlstate: peek_sqlstate(frame.body) }),
        tag => Ok(BackendPeek::Other(tag)),
    }
}

/// Whether a server may send a message of type `tag` once startup is over (55.7): everything
/// but the startup-only Authentication (`R`), BackendKeyData (`K`) and NegotiateProtocolVersion
/// (`v`), and the type bytes no message has. Anything else means the connection is out of step.
pub fn is_after_startup(tag: u8) -> bool {
    matches!(
        tag,
        b'1' | b'2'
            | b'3'
            | b'A'
            | b'C'
            | b'D'
            | b'E'
            | b'G'
            | b'H'
            | b'I'
            | b'N'
            | b'S'
            | b'T'
            | b'V'
            | b'W'
            | b'Z'
            | b'c'
            | b'd'
            | b'n'
            | b's'
            | b't'
    )
}
