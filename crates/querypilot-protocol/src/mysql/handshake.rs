//! Connection phase (Client/Server Protocol, "Connection Phase"): the server's `HandshakeV10`, the
//! client's `SSLRequest` and `HandshakeResponse41`, connection attributes, and the authentication
//! exchange packets (`AuthSwitchRequest`, `AuthMoreData`). An auth switch response is just the raw
//! auth data as the whole payload, so it needs no type.
//!
//! Pre-4.1 forms (no `CLIENT_PROTOCOL_41` or `CLIENT_SECURE_CONNECTION`) are refused: no server the
//! router supports sends them.

use super::capability::{
    extended, lower, uses_extended, CLIENT_CONNECT_ATTRS, CLIENT_CONNECT_WITH_DB, CLIENT_PLUGIN_AUTH,
    CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA, CLIENT_PROTOCOL_41, CLIENT_SECURE_CONNECTION, CLIENT_SSL,
    CLIENT_ZSTD_COMPRESSION_ALGORITHM,
};
use super::codec::{put_lenenc_bytes, put_nul_bytes, put_u16, put_u32, Reader};
use super::error::DecodeError;
use super::response::{ErrPacket, OkPacket};

/// Protocol version byte of `HandshakeV10`.
pub const PROTOCOL_VERSION: u8 = 10;
/// Length of the authentication scramble (nonce) in `HandshakeV10`.
pub const SCRAMBLE_LEN: usize = 20;
/// Length of an `SSLRequest` payload.
pub const SSL_REQUEST_LEN: usize = 32;
/// `AuthMoreData` byte from `caching_sha2_password`: the cached fast path succeeded.
pub const CACHING_SHA2_FAST_AUTH_SUCCESS: u8 = 0x03;
/// `AuthMoreData` byte from `caching_sha2_password`: full authentication (TLS or RSA) is needed.
pub const CACHING_SHA2_PERFORM_FULL_AUTH: u8 = 0x04;
/// Client payload of `caching_sha2_password` full authentication without TLS: "send me your RSA
/// public key" (the server answers with `AuthMoreData` carrying the key as PEM).
pub const CACHING_SHA2_REQUEST_PUBLIC_KEY: u8 = 0x02;

/// The server's initial `Protocol::HandshakeV10`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeV10<'a> {
    /// Human-readable server version, e.g. `8.0.36` or `5.5.5-10.11.6-MariaDB`.
    pub server_version: &'a [u8],
    /// Connection (thread) id.
    pub connection_id: u32,
    /// The 20-byte nonce (sent as 8 + 12 bytes).
    pub scramble: [u8; SCRAMBLE_LEN],
    /// Server capabilities; MariaDB extended capabilities in the high 32 bits.
    pub capabilities: u64,
    /// Default collation id.
    pub charset: u8,
    /// `SERVER_*` status flags.
    pub status: u16,
    /// Default authentication plugin (empty without `CLIENT_PLUGIN_AUTH`).
    pub auth_plugin: &'a [u8],
}

impl<'a> HandshakeV10<'a> {
    /// Decodes the server greeting. A server that refuses the connection sends an ERR (0xFF)
    /// instead; that surfaces as [`DecodeError::UnexpectedHeader`], so check the first byte first.
    pub fn decode(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        match r.u8("protocol version")? {
            PROTOCOL_VERSION => {}
            got => return Err(DecodeError::UnexpectedHeader { packet: "HandshakeV10", got }),
        }
        let server_version = r.nul_bytes("server version")?;
        let connection_id = r.u32("connection id")?;
        let part1: [u8; 8] = r.array("auth plugin data part 1")?;
        r.u8("filler")?;
        let caps_low = u64::from(r.u16("capability flags")?);
        let charset = r.u8("character set")?;
        let status = r.u16("status flags")?;
        let caps_high = u64::from(r.u16("capability flags (upper)")?);
        let auth_data_len = r.u8("auth plugin data length")?;
        let [_, _, _, _, _, _, e0, e1, e2, e3] = r.array::<10>("reserved")?;
        let mut capabilities = caps_low | caps_high << 16;
        if uses_extended(capabilities) {
            capabilities |= u64::from(u32::from_le_bytes([e0, e1, e2, e3])) << 32;
        }
        if capabilities & CLIENT_SECURE_CONNECTION == 0 {
            return Err(DecodeError::Unsupported("handshake without CLIENT_SECURE_CONNECTION"));
        }
        // Part 2 is max(13, len - 8) bytes: 12 bytes of nonce and a NUL.
        let part2_len = usize::from(auth_data_len.saturating_sub(8)).max(13);
        let part2 = r.bytes(part2_len, "auth plugin data part 2")?;
        let mut scramble = [0u8; SCRAMBLE_LEN];
        let (s1, s2) = scramble.split_at_mut(8);
        s1.copy_from_slice(&part1);
        s2.copy_from_slice(part2.get(..12).ok_or(DecodeError::Truncated { field: "auth plugin data part 2" })?);
        let auth_plugin = if capabilities & CLIENT_PLUGIN_AUTH != 0 { r.nul_or_eof_bytes() } else { b"" };
        Ok(Self { server_version, connection_id, scramble, capabilities, charset, status, auth_plugin })
    }

    /// Appends the greeting. The auth data length is 21 (20-byte nonce and its NUL).
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(PROTOCOL_VERSION);
        put_nul_bytes(out, self.server_version);
        put_u32(out, self.connection_id);
        let (part1, part2) = self.scramble.split_at(8);
        out.extend_from_slice(part1);
        out.push(0);
        let caps = lower(self.capabilities);
        put_u16(out, caps as u16);
        out.push(self.charset);
        put_u16(out, self.status);
        put_u16(out, (caps >> 16) as u16);
        let plugin_auth = self.capabilities & CLIENT_PLUGIN_AUTH != 0;
        out.push(if plugin_auth { SCRAMBLE_LEN as u8 + 1 } else { 0 });
        out.extend_from_slice(&[0; 6]);
        let ext = if uses_extended(self.capabilities) { extended(self.capabilities) } else { 0 };
        put_u32(out, ext);
        out.extend_from_slice(part2);
        out.push(0);
        if plugin_auth {
            put_nul_bytes(out, self.auth_plugin);
        }
    }
}

/// The fixed 32-byte prefix shared by `SSLRequest` and `HandshakeResponse41`.
fn decode_prefix(r: &mut Reader<'_>) -> Result<(u64, u32, u8), DecodeError> {
    let mut caps = u64::from(r.u32("capability flags")?);
    let max_packet = r.u32("max packet size")?;
    let charset = r.u8("character set")?;
    let filler: [u8; 23] = r.array("filler")?;
    if uses_extended(caps) {
        let [.., e0, e1, e2, e3] = filler;
        caps |= u64::from(u32::from_le_bytes([e0, e1, e2, e3])) << 32;
    }
    Ok((caps, max_packet, charset))
}

fn encode_prefix(caps: u64, max_packet: u32, charset: u8, out: &mut Vec<u8>) {
    put_u32(out, lower(caps));
    put_u32(out, max_packet);
    out.push(charset);
    out.extend_from_slice(&[0; 19]);
    put_u32(out, if uses_extended(caps) { extended(caps) } else { 0 });
}

/// `Protocol::SSLRequest`: the truncated handshake response a client sends before starting TLS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SslRequest {
    /// Client capabilities (with `CLIENT_SSL`).
    pub capabilities: u64,
    /// Maximum packet size the client accepts.
    pub max_packet_size: u32,
    /// Requested collation id.
    pub charset: u8,
}

impl SslRequest {
    /// Recognizes an SSL request: exactly 32 bytes with `CLIENT_SSL` set. Any other payload is
    /// `None` (decode it as a [`HandshakeResponse41`]).
    #[must_use]
    pub fn detect(payload: &[u8]) -> Option<Self> {
        if payload.len() != SSL_REQUEST_LEN {
            return None;
        }
        let (capabilities, max_packet_size, charset) = decode_prefix(&mut Reader::new(payload)).ok()?;
        (capabilities & CLIENT_SSL != 0).then_some(Self { capabilities, max_packet_size, charset })
    }

    /// Appends the 32-byte request.
    pub fn encode(&self, out: &mut Vec<u8>) {
        encode_prefix(self.capabilities, self.max_packet_size, self.charset, out);
    }
}

/// A validated connection attribute block: `string<lenenc>` key/value pairs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnectAttrs<'a>(&'a [u8]);

impl<'a> ConnectAttrs<'a> {
    /// Checks that `raw` is a whole number of key/value pairs.
    pub fn new(raw: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(raw);
        while !r.is_empty() {
            r.lenenc_bytes("attribute key")?;
            r.lenenc_bytes("attribute value")?;
        }
        Ok(Self(raw))
    }

    /// The block as sent, without its length prefix.
    #[must_use]
    pub fn raw(&self) -> &'a [u8] {
        self.0
    }

    /// The `(key, value)` pairs in order.
    pub fn iter(&self) -> impl Iterator<Item = (&'a [u8], &'a [u8])> {
        let mut r = Reader::new(self.0);
        std::iter::from_fn(move || {
            Some((r.lenenc_bytes("attribute key").ok()?, r.lenenc_bytes("attribute value").ok()?))
        })
    }

    /// Appends a block (without its length prefix) built from `pairs`; wrap it with [`Self::new`].
    pub fn build(pairs: &[(&[u8], &[u8])], out: &mut Vec<u8>) {
        for (key, value) in pairs {
            put_lenenc_bytes(out, key);
            put_lenenc_bytes(out, value);
        }
    }
}

/// `Protocol::HandshakeResponse41`, borrowed from its payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HandshakeResponse41<'a> {
    /// Client capabilities; MariaDB extended capabilities in the high 32 bits.
    pub capabilities: u64,
    /// Maximum packet size the client accepts.
    pub max_packet_size: u32,
    /// Requested collation id.
    pub charset: u8,
    /// Login user name.
    pub username: &'a [u8],
    /// Auth plugin response (e.g. the 20-byte native password token; empty for no password).
    pub auth_response: &'a [u8],
    /// Initial database (with `CLIENT_CONNECT_WITH_DB`).
    pub database: Option<&'a [u8]>,
    /// Plugin that produced `auth_response` (with `CLIENT_PLUGIN_AUTH`).
    pub auth_plugin: Option<&'a [u8]>,
    /// Connection attributes (with `CLIENT_CONNECT_ATTRS`).
    pub connect_attrs: Option<ConnectAttrs<'a>>,
    /// zstd compression level (with `CLIENT_ZSTD_COMPRESSION_ALGORITHM`).
    pub zstd_level: Option<u8>,
}

impl<'a> HandshakeResponse41<'a> {
    /// Decodes the response. Optional trailing fields the capabilities announce but the client
    /// left out are read as absent, as servers do.
    pub fn decode(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let (capabilities, max_packet_size, charset) = decode_prefix(&mut r)?;
        if capabilities & CLIENT_PROTOCOL_41 == 0 {
            return Err(DecodeError::Unsupported("handshake response without CLIENT_PROTOCOL_41"));
        }
        let has = |flag: u64| capabilities & flag != 0;
        let username = r.nul_bytes("username")?;
        let auth_response = if has(CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA) {
            r.lenenc_bytes("auth response")?
        } else if has(CLIENT_SECURE_CONNECTION) {
            let len = r.u8("auth response length")?;
            r.bytes(usize::from(len), "auth response")?
        } else {
            r.nul_bytes("auth response")?
        };
        let database = if has(CLIENT_CONNECT_WITH_DB) && !r.is_empty() { Some(r.nul_bytes("database")?) } else { None };
        let auth_plugin = if has(CLIENT_PLUGIN_AUTH) && !r.is_empty() { Some(r.nul_or_eof_bytes()) } else { None };
        let connect_attrs = if has(CLIENT_CONNECT_ATTRS) && !r.is_empty() {
            Some(ConnectAttrs::new(r.lenenc_bytes("connection attributes")?)?)
        } else {
            None
        };
        let zstd_level =
            if has(CLIENT_ZSTD_COMPRESSION_ALGORITHM) && !r.is_empty() { Some(r.u8("zstd level")?) } else { None };
        Ok(Self {
            capabilities,
            max_packet_size,
            charset,
            username,
            auth_response,
            database,
            auth_plugin,
            connect_attrs,
            zstd_level,
        })
    }

    /// Appends the response. Optional fields are written when their capability is set, as empty
    /// values if absent. Without `CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA` the auth response field
    /// holds at most 255 bytes (every supported plugin sends 32 or fewer); longer data is cut.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let has = |flag: u64| self.capabilities & flag != 0;
        encode_prefix(self.capabilities, self.max_packet_size, self.charset, out);
        put_nul_bytes(out, self.username);
        if has(CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA) {
            put_lenenc_bytes(out, self.auth_response);
        } else if has(CLIENT_SECURE_CONNECTION) {
            put_auth_u8(out, self.auth_response);
        } else {
            put_nul_bytes(out, self.auth_response);
        }
        if has(CLIENT_CONNECT_WITH_DB) {
            put_nul_bytes(out, self.database.unwrap_or_default());
        }
        if has(CLIENT_PLUGIN_AUTH) {
            put_nul_bytes(out, self.auth_plugin.unwrap_or_default());
        }
        if has(CLIENT_CONNECT_ATTRS) {
            put_lenenc_bytes(out, self.connect_attrs.map(|a| a.raw()).unwrap_or_default());
        }
        if has(CLIENT_ZSTD_COMPRESSION_ALGORITHM) {
            out.push(self.zstd_level.unwrap_or(3));
        }
    }
}

/// Writes auth data with a 1-byte length, cutting it at 255 bytes (the field cannot say more).
pub(crate) fn put_auth_u8(out: &mut Vec<u8>, data: &[u8]) {
    let data = data.get(..data.len().min(255)).unwrap_or_default();
    out.push(data.len() as u8);
    out.extend_from_slice(data);
}

/// `Protocol::AuthSwitchRequest` (header 0xFE): continue with another plugin and nonce.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AuthSwitchRequest<'a> {
    /// Plugin to switch to.
    pub plugin: &'a [u8],
    /// Plugin data as sent; for the native and caching_sha2 plugins a 20-byte nonce and a NUL.
    pub data: &'a [u8],
}

impl<'a> AuthSwitchRequest<'a> {
    /// Decodes the request.
    pub fn decode(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        match r.u8("auth switch header")? {
            0xFE => {}
            got => return Err(DecodeError::UnexpectedHeader { packet: "AuthSwitchRequest", got }),
        }
        let plugin = r.nul_bytes("auth plugin name")?;
        Ok(Self { plugin, data: r.rest() })
    }

    /// The nonce: `data` without its trailing NUL.
    #[must_use]
    pub fn scramble(&self) -> &'a [u8] {
        self.data.strip_suffix(&[0]).unwrap_or(self.data)
    }

    /// Appends the request.
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.push(0xFE);
        put_nul_bytes(out, self.plugin);
        out.extend_from_slice(self.data);
    }
}

/// Appends `Protocol::AuthMoreData` (header 0x01) carrying `data`.
pub fn encode_auth_more_data(data: &[u8], out: &mut Vec<u8>) {
    out.push(0x01);
    out.extend_from_slice(data);
}

/// What the server answered during authentication.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AuthReply<'a> {
    /// Authenticated.
    Ok(OkPacket<'a>),
    /// Refused.
    Err(ErrPacket<'a>),
    /// Continue with another plugin.
    Switch(AuthSwitchRequest<'a>),
    /// `AuthMoreData` (0x01) for the current plugin, e.g. [`CACHING_SHA2_FAST_AUTH_SUCCESS`].
    MoreData(&'a [u8]),
}

impl<'a> AuthReply<'a> {
    /// Decodes a server payload of the authentication phase under capabilities `caps`.
    pub fn decode(payload: &'a [u8], caps: u64) -> Result<Self, DecodeError> {
        match payload.first() {
            Some(0x00) => Ok(Self::Ok(OkPacket::decode(payload, caps)?)),
            Some(0xFF) => Ok(Self::Err(ErrPacket::decode(payload)?)),
            Some(0xFE) => Ok(Self::Switch(AuthSwitchRequest::decode(payload)?)),
            Some(0x01) => Ok(Self::MoreData(payload.get(1..).unwrap_or_default())),
            Some(&got) => Err(DecodeError::UnexpectedHeader { packet: "authentication reply", got }),
            None => Err(DecodeError::Truncated { field: "authentication reply" }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::capability::*;
    use proptest::prelude::*;

    fn mysql8_greeting() -> Vec<u8> {
        let mut b = vec![0x0A];
        b.extend_from_slice(b"8.0.36\0");
        b.extend_from_slice(&[0x0B, 0, 0, 0]);
        b.extend_from_slice(b"abcdefgh\0");
        b.extend_from_slice(&[0xFF, 0xFF, 0xFF, 0x02, 0x00, 0xFF, 0xDF, 0x15]);
        b.extend_from_slice(&[0; 10]);
        b.extend_from_slice(b"ijklmnopqrst\0caching_sha2_password\0");
        b
    }

    #[test]
    fn golden_mysql_handshake_v10() {
        let bytes = mysql8_greeting();
        let hs = HandshakeV10::decode(&bytes).unwrap();
        assert_eq!(hs.server_version, b"8.0.36");
        assert_eq!(hs.connection_id, 11);
        assert_eq!(&hs.scramble, b"abcdefghijklmnopqrst");
        assert_eq!(hs.capabilities, 0xDFFF_FFFF);
        assert_eq!((hs.charset, hs.status), (0xFF, 2));
        assert_eq!(hs.auth_plugin, b"caching_sha2_password");
        let mut out = Vec::new();
        hs.encode(&mut out);
        assert_eq!(out, bytes);
    }

    #[test]
    fn golden_mariadb_extended_capabilities() {
        let mut b = vec![0x0A];
        b.extend_from_slice(b"5.5.5-10.11.6-MariaDB\0");
        b.extend_from_slice(&[0x03, 0, 0, 0]);
        b.extend_from_slice(b"ABCDEFGH\0");
        b.extend_from_slice(&[0xFE, 0xF7, 0x2D, 0x02, 0x00, 0xFF, 0x81, 0x15]);
        b.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0x1F, 0, 0, 0]);
        b.extend_from_slice(b"IJKLMNOPQRST\0mysql_native_password\0");
        let hs = HandshakeV10::decode(&b).unwrap();
        assert_eq!(hs.capabilities, 0x1F_81FF_F7FE);
        assert!(hs.capabilities & MARIADB_CLIENT_STMT_BULK_OPERATIONS != 0);
        assert!(hs.capabilities & CLIENT_SSL == 0);
        let mut out = Vec::new();
        hs.encode(&mut out);
        assert_eq!(out, b);
    }

    #[test]
    fn greeting_without_trailing_nul_on_plugin_name() {
        let mut bytes = mysql8_greeting();
        bytes.pop();
        assert_eq!(HandshakeV10::decode(&bytes).unwrap().auth_plugin, b"caching_sha2_password");
        assert!(matches!(
            HandshakeV10::decode(b"\xff\x10\x04Too many"),
            Err(DecodeError::UnexpectedHeader { got: 0xFF, .. })
        ));
    }

    fn response_bytes() -> Vec<u8> {
        let mut b = vec![0x09, 0x82, 0x38, 0x00, 0x00, 0x00, 0x00, 0x01, 0x2D];
        b.extend_from_slice(&[0; 23]);
        b.extend_from_slice(b"app\0\x14");
        b.extend(1..=20u8);
        b.extend_from_slice(b"shop\0mysql_native_password\0\x0a\x03_os\x05Linux");
        b
    }

    #[test]
    fn golden_handshake_response41() {
        let bytes = response_bytes();
        let resp = HandshakeResponse41::decode(&bytes).unwrap();
        assert_eq!(resp.capabilities, 0x0038_8209);
        assert_eq!((resp.max_packet_size, resp.charset), (1 << 24, 45));
        assert_eq!(resp.username, b"app");
        assert_eq!(resp.auth_response, (1..=20u8).collect::<Vec<_>>());
        assert_eq!(resp.database, Some(&b"shop"[..]));
        assert_eq!(resp.auth_plugin, Some(&b"mysql_native_password"[..]));
        let attrs: Vec<_> = resp.connect_attrs.unwrap().iter().collect();
        assert_eq!(attrs, [(&b"_os"[..], &b"Linux"[..])]);
        assert_eq!(resp.zstd_level, None);
        let mut out = Vec::new();
        resp.encode(&mut out);
        assert_eq!(out, bytes);
        assert_eq!(SslRequest::detect(&bytes), None);
    }

    #[test]
    fn response_auth_forms_by_capability() {
        let base = HandshakeResponse41 {
            capabilities: CLIENT_PROTOCOL_41 | CLIENT_SECURE_CONNECTION,
            max_packet_size: 0,
            charset: 33,
            username: b"root",
            auth_response: b"\x01\x02\x03",
            database: None,
            auth_plugin: None,
            connect_attrs: None,
            zstd_level: None,
        };
        let mut out = Vec::new();
        base.encode(&mut out);
        assert_eq!(&out[32..], b"root\0\x03\x01\x02\x03");
        assert_eq!(HandshakeResponse41::decode(&out).unwrap(), base);
        // Without secure connection: NUL-terminated.
        let nul = HandshakeResponse41 { capabilities: CLIENT_PROTOCOL_41, auth_response: b"pw", ..base };
        let mut out = Vec::new();
        nul.encode(&mut out);
        assert_eq!(&out[32..], b"root\0pw\0");
        assert_eq!(HandshakeResponse41::decode(&out).unwrap(), nul);
        // MariaDB client with extended capabilities in the filler.
        let ext = HandshakeResponse41 { capabilities: base.capabilities | MARIADB_CLIENT_STMT_BULK_OPERATIONS, ..base };
        let mut out = Vec::new();
        ext.encode(&mut out);
        assert_eq!(&out[28..32], &[0x04, 0, 0, 0]);
        assert_eq!(HandshakeResponse41::decode(&out).unwrap(), ext);
    }

    #[test]
    fn golden_ssl_request() {
        let req = SslRequest {
            capabilities: CLIENT_PROTOCOL_41 | CLIENT_SSL | CLIENT_LONG_PASSWORD,
            max_packet_size: 0x0100_0000,
            charset: 0xFF,
        };
        let mut out = Vec::new();
        req.encode(&mut out);
        let mut want = vec![0x01, 0x0A, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0xFF];
        want.extend_from_slice(&[0; 23]);
        assert_eq!(out, want);
        assert_eq!(SslRequest::detect(&out), Some(req));
        out[1] = 0x02;
        assert_eq!(SslRequest::detect(&out), None);
    }

    /// What the router sends a backend before its TLS handshake (#38): the first 32 bytes of the
    /// handshake response it sends once encrypted, with the same capabilities, as packet 1.
    #[test]
    fn a_clients_ssl_request_is_the_start_of_its_handshake_response() {
        let caps = CLIENT_PROTOCOL_41
            | CLIENT_SSL
            | CLIENT_LONG_PASSWORD
            | CLIENT_SECURE_CONNECTION
            | CLIENT_PLUGIN_AUTH
            | CLIENT_CONNECT_WITH_DB;
        let mut ssl = Vec::new();
        SslRequest { capabilities: caps, max_packet_size: 1 << 30, charset: 45 }.encode(&mut ssl);
        let resp = HandshakeResponse41 {
            capabilities: caps,
            max_packet_size: 1 << 30,
            charset: 45,
            username: b"app",
            auth_response: &[7; 20],
            database: Some(b"app"),
            auth_plugin: Some(b"mysql_native_password"),
            connect_attrs: None,
            zstd_level: None,
        };
        let mut full = Vec::new();
        resp.encode(&mut full);
        assert_eq!(ssl.len(), SSL_REQUEST_LEN);
        assert_eq!(&full[..SSL_REQUEST_LEN], &ssl[..]);
        assert_eq!(&ssl[..4], &[0x09, 0x8A, 0x08, 0x00], "CLIENT_SSL is bit 11");
        let mut framed = Vec::new();
        crate::mysql::encode_packets(&ssl, 1, &mut framed);
        assert_eq!(&framed[..4], &[32, 0, 0, 1], "32 bytes, sequence id 1");
        assert_eq!(SslRequest::detect(&ssl).map(|r| r.capabilities), Some(caps));
    }

    #[test]
    fn golden_auth_switch_and_more_data() {
        let bytes = b"\xfemysql_native_password\x00ABCDEFGHIJKLMNOPQRST\x00";
        let sw = AuthSwitchRequest::decode(bytes).unwrap();
        assert_eq!(sw.plugin, b"mysql_native_password");
        assert_eq!(sw.scramble(), b"ABCDEFGHIJKLMNOPQRST");
        let mut out = Vec::new();
        sw.encode(&mut out);
        assert_eq!(&out[..], &bytes[..]);
        assert_eq!(AuthReply::decode(bytes, CLIENT_PROTOCOL_41), Ok(AuthReply::Switch(sw)));
        let mut more = Vec::new();
        encode_auth_more_data(&[CACHING_SHA2_FAST_AUTH_SUCCESS], &mut more);
        assert_eq!(more, [0x01, 0x03]);
        assert_eq!(AuthReply::decode(&more, CLIENT_PROTOCOL_41), Ok(AuthReply::MoreData(&[0x03])));
        assert!(matches!(AuthReply::decode(&[0, 0, 0, 2, 0, 0, 0], CLIENT_PROTOCOL_41), Ok(AuthReply::Ok(_))));
        assert!(matches!(AuthReply::decode(b"\xff\x15\x04#28000denied", CLIENT_PROTOCOL_41), Ok(AuthReply::Err(_))));
        assert!(AuthReply::decode(&[0x07], 0).is_err());
    }

    #[test]
    fn connect_attrs_validation() {
        let mut raw = Vec::new();
        ConnectAttrs::build(&[(b"_client_name", b"libmariadb"), (b"k", b"")], &mut raw);
        let attrs = ConnectAttrs::new(&raw).unwrap();
        assert_eq!(attrs.iter().count(), 2);
        assert!(ConnectAttrs::new(&raw[..raw.len() - 1]).is_err());
        assert!(ConnectAttrs::new(b"\x01k").is_err());
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..120), caps in any::<u64>()) {
            let _ = HandshakeV10::decode(&bytes);
            let _ = HandshakeResponse41::decode(&bytes);
            let _ = SslRequest::detect(&bytes);
            let _ = AuthSwitchRequest::decode(&bytes);
            let _ = AuthReply::decode(&bytes, caps);
            if let Ok(a) = ConnectAttrs::new(&bytes) { let _ = a.iter().count(); }
        }

        #[test]
        fn random_prefixed_greeting_never_panics(tail in prop::collection::vec(any::<u8>(), 0..80)) {
            let mut b = mysql8_greeting();
            b.truncate(20);
            b.extend_from_slice(&tail);
            let _ = HandshakeV10::decode(&b);
        }
    }
}
