//! TLS inside a [`Stream`] (#38): a rustls session, client (the router connecting to a backend)
//! or server (a client connecting to the router), lives in the stream of the connection it
//! encrypts, on that connection's core, and [`super::read_some`] / [`super::write_all`] go
//! through it when it is there. rustls is sans-IO: records are plain bytes moved by the same
//! ring operations as a plaintext stream's, so nothing above this module knows whether a
//! connection is encrypted. Only the immutable `ClientConfig` / `ServerConfig` are shared
//! between cores.
//!
//! A session handed over by a former process of the router (#40) continues here on its
//! records alone ([`records`]).
//!
//! Owns: the handshakes and record (de)framing over the ring. Must not depend on any other
//! module of the crate.

mod records;
#[cfg(test)]
mod tests;

use std::io::{self, Read as _, Write as _};
use std::sync::Arc;

use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, Connection, ServerConfig, ServerConnection};

pub use records::FrozenTls;
use records::{Cipher, Opened, RecordCursor, Records, Version};

use super::Stream;

/// Ciphertext read per receive: one full TLS record (16 KiB plus its overhead) fits.
const RECORD_CHUNK: usize = 17 * 1024;

/// A stream's TLS session.
pub(super) struct Tls {
    session: Session,
    /// The peer closed the TCP connection (or sent close_notify to a moved session): what the
    /// session still holds is all there is.
    eof: bool,
    /// Decrypted bytes were left in the session by the last read (it took at most its chunk).
    pub(super) buffered: bool,
}

enum Session {
    /// Handshaken in this process: rustls runs it. `cursor` follows the ciphertext given to
    /// rustls, which keeps an incomplete record to itself: the session can move to another
    /// process only between records.
    Here { conn: Connection, cursor: RecordCursor },
    /// Handed over by a former process: records only, `plain` holding what was opened and not
    /// yet read.
    Moved { records: Records, plain: Vec<u8> },
}

impl Tls {
    /// The rustls connection of a session handshaken here.
    fn here(&self) -> Option<&Connection> {
        match &self.session {
            Session::Here { conn, .. } => Some(conn),
            Session::Moved { .. } => None,
        }
    }

    /// The session a former process handed over, as it described it (`frozen`); ciphertext it
    /// had received is opened now, so a message already whole is read without waiting.
    pub(super) fn thaw(frozen: FrozenTls) -> io::Result<Self> {
        let mut records = Records::thaw(frozen).map_err(invalid_record)?;
        let mut plain = Vec::new();
        let eof = records.open(&[], &mut plain).map_err(invalid_record)? == Opened::Closed;
        let buffered = !plain.is_empty();
        Ok(Self { session: Session::Moved { records, plain }, eof, buffered })
    }

    /// Whether the session can move to another process now: not in the middle of a record
    /// rustls keeps to itself, and not closed by the peer.
    fn movable(&mut self) -> io::Result<()> {
        if self.eof {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let Session::Here { conn, cursor } = &mut self.session else { return Ok(()) };
        if !cursor.between_records() {
            return Err(io::Error::new(io::ErrorKind::Unsupported, "the TLS session is in the middle of a record"));
        }
        if conn.process_new_packets().map_err(invalid)?.peer_has_closed() {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        Ok(())
    }

    /// rustls holds the start of a record whose rest has not come yet.
    fn mid_record(&self) -> bool {
        matches!(&self.session, Session::Here { cursor, .. } if !cursor.between_records())
    }

    /// The session as it moves to another process, `got` being ciphertext received after what
    /// it holds; with the plaintext it had decrypted and nobody read yet. Fails where
    /// [`Tls::movable`] does.
    pub(super) fn freeze(mut self, got: &[u8]) -> io::Result<(Vec<u8>, FrozenTls)> {
        self.movable()?;
        match self.session {
            Session::Moved { records, plain } => Ok((plain, records.freeze(got))),
            Session::Here { mut conn, .. } => {
                let mut plain = Vec::new();
                loop {
                    let state = conn.process_new_packets().map_err(invalid)?;
                    if state.plaintext_bytes_to_read() == 0 {
                        break;
                    }
                    let at = plain.len();
                    plain.resize(at + state.plaintext_bytes_to_read(), 0);
                    let n = conn.reader().read(&mut plain[at..])?;
                    plain.truncate(at + n);
                }
                Ok((plain, extract(conn, got)?))
            }
        }
    }
}

/// How long a session about to move waits for the rest of a record its peer had begun: a peer
/// that sent part of a record sends the rest within a round trip or two.
const RECORD_REST: std::time::Duration = std::time::Duration::from_secs(1);

/// Makes `stream`'s TLS session ready to move to another process ([`Tls::freeze`]): a record
/// its peer had only begun is read to its end first (its plaintext then moves as unread
/// input), for at most [`RECORD_REST`]. Fails when the session cannot move; the stream is
/// still whole then.
pub(super) async fn ready_to_move(stream: &mut Stream) -> io::Result<()> {
    let until = std::time::Instant::now() + RECORD_REST;
    let mut raw = Vec::new();
    loop {
        let tls = stream.tls.as_deref_mut().ok_or_else(not_encrypted)?;
        if !tls.mid_record() {
            super::recycle(&mut raw);
            return tls.movable();
        }
        super::refill(&mut raw);
        raw.clear();
        let read = super::time::with_deadline(until, super::io::read_plain(stream, &mut raw, RECORD_CHUNK)).await;
        let n = read.map_err(|_| {
            io::Error::new(io::ErrorKind::TimedOut, "the peer did not finish the TLS record it had begun")
        })??;
        let tls = stream.tls.as_deref_mut().ok_or_else(not_encrypted)?;
        let Session::Here { conn, cursor } = &mut tls.session else { continue };
        if n == 0 {
            tls.eof = true;
            continue;
        }
        feed(conn, cursor, &raw)?;
        if conn.wants_write() {
            let out = drain_records(conn)?;
            super::io::send_owned(stream, out).await?;
        }
    }
}

/// Gives up `conn`'s keys for another process, which will take `pending` (ciphertext the
/// router received after what rustls has) first.
fn extract(conn: Connection, pending: &[u8]) -> io::Result<FrozenTls> {
    let version = match conn.protocol_version() {
        Some(rustls::ProtocolVersion::TLSv1_3) => Version::Tls13,
        Some(rustls::ProtocolVersion::TLSv1_2) => Version::Tls12,
        other => return Err(unsupported(format!("TLS version {other:?}"))),
    };
    let client = matches!(conn, Connection::Client(_));
    let secrets = conn.dangerous_extract_secrets().map_err(invalid)?;
    let (cipher, tx) = keys(secrets.tx)?;
    let (_, rx) = keys(secrets.rx)?;
    Ok(FrozenTls { version, cipher, tx, rx, client, pending: pending.to_vec() })
}

fn keys((seq, secrets): (u64, rustls::ConnectionTrafficSecrets)) -> io::Result<(Cipher, records::FrozenKeys)> {
    use rustls::ConnectionTrafficSecrets as S;
    let (cipher, key, iv) = match secrets {
        S::Aes128Gcm { key, iv } => (Cipher::Aes128Gcm, key, iv),
        S::Aes256Gcm { key, iv } => (Cipher::Aes256Gcm, key, iv),
        S::Chacha20Poly1305 { key, iv } => (Cipher::Chacha20Poly1305, key, iv),
        _ => return Err(unsupported("a cipher the record layer here lacks".into())),
    };
    let iv = iv.as_ref().try_into().map_err(|_| unsupported("an IV of another length".into()))?;
    Ok((cipher, records::FrozenKeys { key: key.as_ref().to_vec(), iv, seq }))
}

fn unsupported(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::Unsupported, format!("a TLS session with {what} cannot move to another process"))
}

fn invalid_record(e: records::RecordError) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e)
}

/// Runs a TLS client handshake on `stream`, verifying the server as `config` says for `name`;
/// from then on every read and write on the stream is decrypted / encrypted. Fails with the
/// reason rustls gives (e.g. an untrusted issuer or a certificate not valid for `name`) as an
/// `InvalidData` error. Bounded by the caller's deadline like any read.
pub async fn start_tls(stream: &mut Stream, config: Arc<ClientConfig>, name: ServerName<'static>) -> io::Result<()> {
    let conn = ClientConnection::new(config, name).map_err(invalid)?;
    handshake(stream, conn.into(), &[]).await
}

/// What a server handshake settled with the client.
#[derive(Debug, Default)]
pub struct Accepted {
    /// The application protocol both sides chose (ALPN), if the client offered any.
    pub alpn: Option<Vec<u8>>,
    /// The client's end-entity certificate, when the configuration asked for one (it has been
    /// verified against the configuration's roots).
    pub client_certificate: Option<CertificateDer<'static>>,
}

/// Runs a TLS server handshake on `stream` (a client that asked for TLS) with `config`;
/// `received` is what was read from the socket already and belongs to the handshake (a
/// ClientHello sent right behind a request to encrypt, or a whole one with direct TLS). From
/// then on every read and write on the stream is decrypted / encrypted. A client that sends
/// something else than TLS, or a certificate that does not verify, fails it with rustls' reason
/// as an `InvalidData` error (after the alert that tells the client, best effort). Bounded by
/// the caller's deadline like any read: a client that stalls mid-handshake ends with it.
pub async fn accept_tls(stream: &mut Stream, config: Arc<ServerConfig>, received: &[u8]) -> io::Result<Accepted> {
    let conn = ServerConnection::new(config).map_err(invalid)?;
    handshake(stream, conn.into(), received).await?;
    let conn = stream.tls.as_deref().and_then(Tls::here).ok_or_else(not_encrypted)?;
    Ok(Accepted {
        alpn: conn.alpn_protocol().map(<[u8]>::to_vec),
        client_certificate: conn.peer_certificates().and_then(<[_]>::first).map(|c| c.clone().into_owned()),
    })
}

/// Runs `conn`'s handshake over `stream`, `received` first; then installs the session.
async fn handshake(stream: &mut Stream, mut conn: Connection, received: &[u8]) -> io::Result<()> {
    if stream.tls.is_some() {
        return Err(io::Error::other("the stream is encrypted already"));
    }
    // A whole message is encrypted at once (the caller holds it in memory already), so a write
    // never stops half way for lack of room in rustls' own buffer.
    conn.set_buffer_limit(None);
    let mut cursor = RecordCursor::default();
    if let Err(e) = feed(&mut conn, &mut cursor, received) {
        return Err(alert(stream, &mut conn, e).await);
    }
    // Between reads the handshake holds no receive buffer: an empty `raw` waits without one
    // (the kernel picks a provided buffer when bytes arrive), and what was read goes back to the
    // core's spares once rustls has it. A client stalled mid-handshake costs its session only.
    let mut raw = Vec::new();
    while conn.is_handshaking() {
        if conn.wants_write() {
            let out = drain_records(&mut conn)?;
            super::io::send_owned(stream, out).await?;
            continue;
        }
        let n = super::io::read_plain(stream, &mut raw, RECORD_CHUNK).await?;
        if n == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "the peer closed the connection during the TLS handshake",
            ));
        }
        let fed = feed(&mut conn, &mut cursor, &raw);
        super::recycle(&mut raw);
        if let Err(e) = fed {
            return Err(alert(stream, &mut conn, e).await);
        }
    }
    if conn.wants_write() {
        let out = drain_records(&mut conn)?;
        super::io::send_owned(stream, out).await?;
    }
    // Application data may have come in the handshake's last read (a client's first message).
    let buffered = conn.process_new_packets().map_err(invalid)?.plaintext_bytes_to_read() > 0;
    stream.tls = Some(Box::new(Tls { session: Session::Here { conn, cursor }, eof: false, buffered }));
    Ok(())
}

/// Sends the alert rustls queued for a failed handshake (best effort: the peer may be gone or
/// not speak TLS at all); returns the failure.
async fn alert(stream: &mut Stream, conn: &mut Connection, e: io::Error) -> io::Error {
    if conn.wants_write() {
        if let Ok(out) = drain_records(conn) {
            let _ = super::io::send_owned(stream, out).await;
        }
    }
    e
}

/// The DER of the certificate the server presented on `stream`'s TLS session (the end entity of
/// its chain), for SCRAM channel binding; `None` on a plaintext stream.
pub fn peer_certificate(stream: &Stream) -> Option<Vec<u8>> {
    let certs = stream.tls.as_deref()?.here()?.peer_certificates()?;
    certs.first().map(|c| c.as_ref().to_vec())
}

fn invalid(e: rustls::Error) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, e.to_string())
}

/// Hands ciphertext to rustls and processes it; a record that does not verify or decrypt is an
/// error (and rustls has queued the alert that tells the peer why).
fn feed(conn: &mut Connection, cursor: &mut RecordCursor, mut raw: &[u8]) -> io::Result<()> {
    cursor.advance(raw);
    while !raw.is_empty() {
        // rustls takes at most what its buffer allows; what is left goes in after processing.
        conn.read_tls(&mut raw)?;
        conn.process_new_packets().map_err(invalid)?;
    }
    Ok(())
}

/// The records rustls has queued (handshake messages, encrypted data, alerts), in a spare buffer.
fn drain_records(conn: &mut Connection) -> io::Result<Vec<u8>> {
    let mut out = super::spare_buffer();
    while conn.wants_write() {
        conn.write_tls(&mut out)?;
    }
    Ok(out)
}

/// Moves decrypted bytes the session holds into `buf` (at most `chunk`): `Some(n)` with `n > 0`,
/// or `Some(0)` once the peer has closed and nothing is left; `None` when more ciphertext is
/// needed. Only what is there is made room for, so a small message costs no chunk-sized fill.
fn take_plain(tls: &mut Tls, buf: &mut Vec<u8>, chunk: usize) -> io::Result<Option<usize>> {
    let conn = match &mut tls.session {
        Session::Here { conn, .. } => conn,
        Session::Moved { plain, .. } => {
            if plain.is_empty() {
                tls.buffered = false;
                return Ok(tls.eof.then_some(0));
            }
            let n = plain.len().min(chunk);
            buf.extend(plain.drain(..n));
            tls.buffered = !plain.is_empty();
            return Ok(Some(n));
        }
    };
    // Nothing new to process: this only reports what the session holds.
    let state = conn.process_new_packets().map_err(invalid)?;
    let there = state.plaintext_bytes_to_read();
    if there == 0 {
        // close_notify, or the TCP connection closed without one (PostgreSQL servers do that):
        // an end like any other; a message cut by it is the codec's to notice.
        let closed = tls.eof || state.peer_has_closed();
        tls.buffered = false;
        return Ok(closed.then_some(0));
    }
    let want = there.min(chunk);
    let before = buf.len();
    buf.resize(before + want, 0);
    match conn.reader().read(&mut buf[before..]) {
        Ok(n) => {
            buf.truncate(before + n);
            tls.buffered = n < there;
            Ok(Some(n))
        }
        Err(e) => {
            buf.truncate(before);
            Err(e)
        }
    }
}

/// [`super::read_some`] on an encrypted stream: decrypted bytes, at most `chunk` of them.
/// Abandoning it is as safe as on a plaintext stream: a receive in flight stays parked on the
/// stream, and bytes decrypted but not taken stay in the session.
pub(super) async fn read_some(stream: &mut Stream, buf: &mut Vec<u8>, chunk: usize) -> io::Result<usize> {
    let mut raw = Vec::new();
    loop {
        let tls = stream.tls.as_deref_mut().ok_or_else(not_encrypted)?;
        if let Some(n) = take_plain(tls, buf, chunk.max(1))? {
            super::recycle(&mut raw);
            return Ok(n);
        }
        super::refill(&mut raw);
        raw.clear();
        let n = super::io::read_plain(stream, &mut raw, RECORD_CHUNK).await?;
        let tls = stream.tls.as_deref_mut().ok_or_else(not_encrypted)?;
        if n == 0 {
            tls.eof = true;
            continue;
        }
        let answer = match &mut tls.session {
            Session::Here { conn, cursor } => {
                feed(conn, cursor, &raw)?;
                // Post-handshake messages may want an answer (a key update); alerts are best
                // effort.
                if conn.wants_write() {
                    Some(drain_records(conn)?)
                } else {
                    None
                }
            }
            Session::Moved { records, plain } => {
                tls.eof = records.open(&raw, plain).map_err(invalid_record)? == Opened::Closed;
                None
            }
        };
        if let Some(out) = answer {
            super::io::send_owned(stream, out).await?;
        }
    }
}

/// [`super::write_all`] on an encrypted stream: `data` becomes records, sent as one write.
pub(super) async fn write_all(stream: &mut Stream, data: &[u8]) -> io::Result<()> {
    super::io::settle_if_needed(stream).await?;
    let tls = stream.tls.as_deref_mut().ok_or_else(not_encrypted)?;
    let out = match &mut tls.session {
        Session::Here { conn, .. } => {
            conn.writer().write_all(data)?;
            drain_records(conn)?
        }
        Session::Moved { records, .. } => {
            let mut out = super::spare_buffer();
            records.seal(data, &mut out).map_err(invalid_record)?;
            out
        }
    };
    super::io::send_owned(stream, out).await
}

fn not_encrypted() -> io::Error {
    io::Error::other("the stream is not encrypted")
}
