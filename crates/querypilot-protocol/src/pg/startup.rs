//! The untagged first message of a connection (PostgreSQL docs 55.2.1 "Start-up", 55.2.10
//! "SSL Session Encryption", 55.2.11 "GSSAPI Session Encryption", 55.2.8 "Canceling Requests in
//! Progress"; formats in 55.7: StartupMessage, SSLRequest, GSSENCRequest, CancelRequest).
//!
//! Parameters are borrowed from the input; their number is capped so a hostile client cannot
//! make us grow a vector without bound. [`Negotiation`] decides, from a decoded StartupMessage,
//! whether the client must be told with NegotiateProtocolVersion (55.2.1; format in 55.7) that
//! the router speaks an older minor version or none of its `_pq_.` protocol options.

use super::error::{DecodeError, EncodeError};
use super::wire::{MessageWriter, Reader};

/// Most startup parameters accepted from a client.
pub const MAX_STARTUP_PARAMS: usize = 1000;

/// Request code of CancelRequest: 1234 in the high 16 bits, 5678 in the low 16 bits.
pub const CANCEL_REQUEST_CODE: i32 = (1234 << 16) | 5678;
/// Request code of SSLRequest: 1234 in the high 16 bits, 5679 in the low 16 bits.
pub const SSL_REQUEST_CODE: i32 = (1234 << 16) | 5679;
/// Request code of GSSENCRequest: 1234 in the high 16 bits, 5680 in the low 16 bits.
pub const GSSENC_REQUEST_CODE: i32 = (1234 << 16) | 5680;
/// The server's one-byte answer refusing an SSLRequest or GSSENCRequest (55.2.10, 55.2.11).
pub const ENCRYPTION_REFUSED: &[u8] = b"N";
/// The server's one-byte answer accepting an SSLRequest: the client's TLS handshake follows
/// (55.2.10).
pub const ENCRYPTION_ACCEPTED: &[u8] = b"S";
/// First byte of a connection that starts with a TLS record (content type 22, handshake; RFC
/// 8446 5.1) instead of a startup packet: PostgreSQL 17's direct TLS (`sslnegotiation=direct`,
/// 55.2.10), which no startup packet can begin with (its length would be over 369 MB).
pub const DIRECT_TLS_FIRST_BYTE: u8 = 0x16;
/// The ALPN protocol of PostgreSQL over TLS (55.2.10), which direct TLS requires.
pub const ALPN: &[u8] = b"postgresql";

/// A protocol version as sent in StartupMessage: major in the high 16 bits, minor in the low.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProtocolVersion {
    /// Major version; only 3 is supported.
    pub major: u16,
    /// Minor version; the server answers newer minors with NegotiateProtocolVersion.
    pub minor: u16,
}

impl ProtocolVersion {
    /// Protocol 3.0, the version every supported server and client speaks.
    pub const V3_0: Self = Self { major: 3, minor: 0 };
    /// The newest version the router speaks to clients. Protocol 3.2 (PostgreSQL 18) differs
    /// only in longer cancel keys, which the router does not issue yet, so a client asking for
    /// it is negotiated down, as PostgreSQL 17 does.
    pub const NEWEST: Self = Self::V3_0;

    /// The Int32 wire form.
    pub fn code(self) -> i32 {
        i32::from(self.major) << 16 | i32::from(self.minor)
    }

    fn from_code(code: i32) -> Self {
        let [a, b, c, d] = code.to_be_bytes();
        Self { major: u16::from_be_bytes([a, b]), minor: u16::from_be_bytes([c, d]) }
    }
}

/// Startup parameters in the order the client sent them (`user`, `database`, `options`, ...).
///
/// A plain `Vec` (one allocation per connection) rather than a `SmallVec`, because `SmallVec`'s
/// union layout makes the borrow lifetime invariant, which would leak into every caller.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct StartupParams<'a>(Vec<(&'a str, &'a str)>);

impl<'a> StartupParams<'a> {
    /// An empty parameter list.
    pub fn new() -> Self {
        Self::default()
    }

    /// Appends a parameter.
    pub fn push(&mut self, name: &'a str, value: &'a str) {
        self.0.push((name, value));
    }

    /// The value of the first parameter named `name`.
    pub fn get(&self, name: &str) -> Option<&'a str> {
        self.0.iter().find(|(n, _)| *n == name).map(|&(_, v)| v)
    }

    /// Iterates `(name, value)` pairs.
    pub fn iter(&self) -> impl Iterator<Item = (&'a str, &'a str)> + '_ {
        self.0.iter().copied()
    }

    /// Number of parameters.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are no parameters.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The first message a client sends.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StartupPacket<'a> {
    /// StartupMessage: the protocol version and the session parameters.
    Startup {
        /// Requested protocol version (major is always 3 after decoding).
        protocol: ProtocolVersion,
        /// Session parameters.
        params: StartupParams<'a>,
    },
    /// SSLRequest: the client asks to switch to TLS first.
    SslRequest,
    /// GSSENCRequest: the client asks for GSSAPI encryption first.
    GssEncRequest,
    /// CancelRequest for the session identified by the key data the server handed out.
    Cancel {
        /// Process ID from BackendKeyData.
        pid: i32,
        /// Secret key from BackendKeyData (4 bytes in protocol 3.0).
        key: i32,
    },
}

impl<'a> StartupPacket<'a> {
    /// Decodes the body of a startup frame (everything after the length field).
    pub fn decode(body: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(body);
        let code = r.i32("request code")?;
        let packet = match code {
            SSL_REQUEST_CODE => Self::SslRequest,
            GSSENC_REQUEST_CODE => Self::GssEncRequest,
            CANCEL_REQUEST_CODE => {
                let pid = r.i32("cancel process id")?;
                let key = r.i32("cancel secret key")?;
                Self::Cancel { pid, key }
            }
            _ => {
                let protocol = ProtocolVersion::from_code(code);
                if protocol.major == 1234 {
                    return Err(DecodeError::UnknownRequestCode(code));
                }
                if protocol.major != 3 {
                    return Err(DecodeError::UnsupportedProtocol { major: protocol.major, minor: protocol.minor });
                }
                let params = decode_params(&mut r)?;
                Self::Startup { protocol, params }
            }
        };
        r.finish("startup packet")?;
        Ok(packet)
    }

    /// Appends the complete message (length included) to `out`.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let mut w = MessageWriter::untagged(out);
        match self {
            Self::SslRequest => {
                w.i32(SSL_REQUEST_CODE);
            }
            Self::GssEncRequest => {
                w.i32(GSSENC_REQUEST_CODE);
            }
            Self::Cancel { pid, key } => {
                w.i32(CANCEL_REQUEST_CODE).i32(*pid).i32(*key);
            }
            Self::Startup { protocol, params } => {
                w.i32(protocol.code());
                for (name, value) in params.iter() {
                    if name.is_empty() {
                        // An empty name is the list terminator: it cannot be sent as a parameter.
                        w.fail(EncodeError::Invalid { what: "empty startup parameter name" });
                    }
                    w.cstr(name, "startup parameter name").cstr(value, "startup parameter value");
                }
                w.u8(0);
            }
        }
        w.finish()
    }
}

/// Prefix of a protocol option (`_pq_.name`): a request about the protocol, never a setting.
pub const PROTOCOL_OPTION_PREFIX: &str = "_pq_.";

/// Whether a startup parameter is a protocol option rather than a session setting.
pub fn is_protocol_option(name: &str) -> bool {
    name.starts_with(PROTOCOL_OPTION_PREFIX)
}

/// The NegotiateProtocolVersion a StartupMessage calls for: the server sends exactly one, right
/// after the StartupMessage and before authentication, when the client asked for a newer minor
/// version than it speaks or for protocol options (PostgreSQL docs 55.2.1; libpq 18 aborts on a
/// second one). The router knows no protocol option, so every `_pq_.` parameter is named.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Negotiation<'a> {
    unrecognized: Vec<&'a str>,
}

impl<'a> Negotiation<'a> {
    /// What to tell a client that sent `protocol` and `params`; `None` when the router speaks
    /// everything it asked for. Bounded by [`MAX_STARTUP_PARAMS`], as the parameters are.
    pub fn of(protocol: ProtocolVersion, params: &StartupParams<'a>) -> Option<Self> {
        let unrecognized: Vec<&'a str> =
            params.iter().map(|(name, _)| name).filter(|n| is_protocol_option(n)).collect();
        (protocol > ProtocolVersion::NEWEST || !unrecognized.is_empty()).then_some(Self { unrecognized })
    }

    /// Appends the NegotiateProtocolVersion message (`'v'`). Its version field carries the whole
    /// version code (`3 << 16 | minor`), as PostgreSQL sends it and libpq reads it.
    pub fn encode(&self, out: &mut Vec<u8>) -> Result<(), EncodeError> {
        let mut w = MessageWriter::tagged(out, b'v');
        w.i32(ProtocolVersion::NEWEST.code()).count32(self.unrecognized.len(), "protocol options");
        for name in &self.unrecognized {
            w.cstr(name, "protocol option");
        }
        w.finish()
    }
}

/// Reads `name\0value\0` pairs up to the terminating empty name.
fn decode_params<'a>(r: &mut Reader<'a>) -> Result<StartupParams<'a>, DecodeError> {
    let mut params = StartupParams::new();
    loop {
        let name = r.cstr("startup parameter name")?;
        if name.is_empty() {
            return Ok(params);
        }
        if params.len() >= MAX_STARTUP_PARAMS {
            return Err(DecodeError::TooManyParams { max: MAX_STARTUP_PARAMS });
        }
        let value = r.cstr("startup parameter value")?;
        params.push(name, value);
    }
}
