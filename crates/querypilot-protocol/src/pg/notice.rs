//! The field lists of ErrorResponse and NoticeResponse (PostgreSQL docs 55.8 "Error and Notice
//! Message Fields"): a borrowed, validated [`FieldList`], the typed [`ErrorFields`] view, and the
//! encoders the router uses to report its own errors to clients.

use super::error::{DecodeError, EncodeError};
use super::wire::{MessageWriter, Reader};

/// Severity of an error or notice, as sent in both the `S` and `V` fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Severity {
    /// The statement failed; the session continues.
    Error,
    /// The session ends.
    Fatal,
    /// All sessions end.
    Panic,
    /// A warning notice.
    Warning,
    /// A notice.
    Notice,
    /// A debug notice.
    Debug,
    /// An informational notice.
    Info,
    /// A log notice.
    Log,
}

impl Severity {
    /// The non-localized wire text.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Error => "ERROR",
            Self::Fatal => "FATAL",
            Self::Panic => "PANIC",
            Self::Warning => "WARNING",
            Self::Notice => "NOTICE",
            Self::Debug => "DEBUG",
            Self::Info => "INFO",
            Self::Log => "LOG",
        }
    }
}

/// A validated list of `(field type, value)` pairs, borrowed from the message body.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FieldList<'a> {
    raw: &'a [u8],
}

impl<'a> FieldList<'a> {
    /// Reads fields up to and including the terminating zero byte; values must be UTF-8.
    pub(crate) fn read(r: &mut Reader<'a>) -> Result<Self, DecodeError> {
        let before = r.clone();
        while r.u8("error field type")? != 0 {
            r.cstr("error field value")?;
        }
        let used = before.remaining().saturating_sub(r.remaining()).saturating_sub(1);
        Ok(Self { raw: before.clone().bytes(used, "error fields")? })
    }

    /// The wire bytes of the fields, without the terminating zero byte.
    pub fn raw(&self) -> &'a [u8] {
        self.raw
    }

    /// Iterates `(field type byte, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (u8, &'a str)> + 'a {
        let mut r = Reader::new(self.raw);
        std::iter::from_fn(move || {
            let kind = r.u8("error field type").ok()?;
            r.cstr("error field value").ok().map(|v| (kind, v))
        })
    }

    /// The value of the first field of type `kind`.
    pub fn get(&self, kind: u8) -> Option<&'a str> {
        self.iter().find(|&(k, _)| k == kind).map(|(_, v)| v)
    }

    /// The SQLSTATE (`C` field).
    pub fn code(&self) -> Option<&'a str> {
        self.get(b'C')
    }

    /// Collects the fields into the typed view; unknown field types are ignored, as the
    /// protocol requires of frontends.
    pub fn to_fields(&self) -> ErrorFields<'a> {
        let mut f = ErrorFields::default();
        for (kind, v) in self.iter() {
            if let Some(slot) = f.slot(kind) {
                *slot = Some(v);
            }
        }
        f
    }
}

/// The object an error refers to (`s`, `t`, `c`, `d`, `n` fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ErrorObject<'a> {
    /// Schema name (`s`).
    pub schema: Option<&'a str>,
    /// Table name (`t`).
    pub table: Option<&'a str>,
    /// Column name (`c`).
    pub column: Option<&'a str>,
    /// Data type name (`d`).
    pub data_type: Option<&'a str>,
    /// Constraint name (`n`).
    pub constraint: Option<&'a str>,
}

/// Where in the server's source the error was raised (`F`, `L`, `R` fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SourceLocation<'a> {
    /// Source file (`F`).
    pub file: Option<&'a str>,
    /// Source line (`L`).
    pub line: Option<&'a str>,
    /// Routine (`R`).
    pub routine: Option<&'a str>,
}

/// An internally generated query the error refers to (`p`, `q` fields).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct InternalQuery<'a> {
    /// Cursor position in the internal query (`p`).
    pub position: Option<&'a str>,
    /// The internal query (`q`).
    pub query: Option<&'a str>,
}

/// Typed view of the fields of an ErrorResponse or NoticeResponse.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ErrorFields<'a> {
    /// Localized severity (`S`).
    pub severity: Option<&'a str>,
    /// Non-localized severity (`V`).
    pub severity_nonlocalized: Option<&'a str>,
    /// SQLSTATE (`C`).
    pub code: Option<&'a str>,
    /// Primary message (`M`).
    pub message: Option<&'a str>,
    /// Detail (`D`).
    pub detail: Option<&'a str>,
    /// Hint (`H`).
    pub hint: Option<&'a str>,
    /// 1-based character position in the query string (`P`).
    pub position: Option<&'a str>,
    /// Context / call stack (`W`).
    pub context: Option<&'a str>,
    /// Internal query fields.
    pub internal: InternalQuery<'a>,
    /// Referenced database object.
    pub object: ErrorObject<'a>,
    /// Server source location.
    pub source: SourceLocation<'a>,
}

impl<'a> ErrorFields<'a> {
    /// Every field type byte with a slot, in the order they are encoded.
    const KINDS: &'static [u8] = b"SVCMDHPWpqstcdnFLR";

    fn slot(&mut self, kind: u8) -> Option<&mut Option<&'a str>> {
        Some(match kind {
            b'S' => &mut self.severity,
            b'V' => &mut self.severity_nonlocalized,
            b'C' => &mut self.code,
            b'M' => &mut self.message,
            b'D' => &mut self.detail,
            b'H' => &mut self.hint,
            b'P' => &mut self.position,
            b'W' => &mut self.context,
            b'p' => &mut self.internal.position,
            b'q' => &mut self.internal.query,
            b's' => &mut self.object.schema,
            b't' => &mut self.object.table,
            b'c' => &mut self.object.column,
            b'd' => &mut self.object.data_type,
            b'n' => &mut self.object.constraint,
            b'F' => &mut self.source.file,
            b'L' => &mut self.source.line,
            b'R' => &mut self.source.routine,
            _ => return None,
        })
    }

    /// Builds the minimal set of fields a server always sends: severity (both forms), code and
    /// message.
    pub fn new(severity: Severity, code: &'a str, message: &'a str) -> Self {
        Self {
            severity: Some(severity.as_str()),
            severity_nonlocalized: Some(severity.as_str()),
            code: Some(code),
            message: Some(message),
            ..Self::default()
        }
    }

    /// Appends an ErrorResponse (`'E'`) carrying these fields.
    pub fn encode_error(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.encode_as(b'E', out)
    }

    /// Appends a NoticeResponse (`'N'`) carrying these fields.
    pub fn encode_notice(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        self.encode_as(b'N', out)
    }

    fn encode_as(&self, tag: u8, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let mut copy = *self;
        let mut w = MessageWriter::tagged(out, tag);
        for &kind in Self::KINDS {
            if let Some(Some(v)) = copy.slot(kind).map(|s| *s) {
                w.u8(kind).cstr(v, "error field value");
            }
        }
        w.u8(0);
        w.finish()
    }
}

/// Appends an ErrorResponse with severity, SQLSTATE and message: the router's own errors.
///
/// Never fails: a message containing a NUL byte is cut at the NUL, since error text is best
/// effort while the error itself must reach the client.
pub fn encode_error(severity: Severity, code: &str, message: &str, out: &mut Vec<u8>) {
    fn before_nul(s: &str) -> &str {
        s.split('\0').next().unwrap_or_default()
    }
    let fields = ErrorFields::new(severity, before_nul(code), before_nul(message));
    // Cannot fail: NUL bytes were removed and the lengths come from short strings.
    let _ = fields.encode_error(out);
}

/// Scans an ErrorResponse/NoticeResponse body for its SQLSTATE without validating the other
/// fields, for the relay's hot path.
pub fn peek_sqlstate(body: &[u8]) -> Option<&str> {
    let mut r = Reader::new(body);
    loop {
        match r.u8("error field type").ok()? {
            0 => return None,
            b'C' => return r.cstr("error code").ok(),
            _ => {
                r.cstr_bytes("error field value").ok()?;
            }
        }
    }
}
