//! TLS to backends (#38). PostgreSQL: the SSLRequest exchange every connection the router opens
//! to a pool's backends starts with when the pool's `tls` is not `disable` (sessions, health
//! probes, auth queries and causal reads, which all open through `pg::connect`, and cancel
//! requests). PostgreSQL protocol 55.2.10 "SSL Session Encryption": the client sends
//! SSLRequest, the server answers one byte, `S` (a TLS handshake follows) or `N` (plaintext).
//! MySQL's upgrade happens inside its handshake (`mysql::handshake`, after the greeting) and
//! shares [`encrypt`] with it: which name the server is verified as, and the handshake itself.
//!
//! The handshake and records are `rt::start_tls`'s; the client configuration (roots, client
//! certificate, how much is verified) is built once per load by the control plane.

use std::net::IpAddr;

use rustls::pki_types::ServerName;

use crate::config::{Backend, BackendTls, TlsMode};
use crate::protocol::pg::StartupPacket;
use crate::rt::{self, Stream};

/// The server's answer to SSLRequest: TLS follows.
const WILL_TLS: u8 = b'S';
/// The server's answer to SSLRequest: no TLS on this server.
const NO_TLS: u8 = b'N';
/// A server too old to know SSLRequest answers with an ErrorResponse.
const ERROR_RESPONSE: u8 = b'E';

/// Encrypts `stream`, freshly connected to `backend` (its configuration entry, when known; else
/// the server at `peer`), as
/// `tls` says: nothing with `disable`; with `prefer`, TLS when the server agrees; with the
/// other modes TLS or an error. The error text says why (the server's refusal, or the
/// certificate check that failed, in rustls' words).
pub(super) async fn negotiate(
    tls: &BackendTls,
    backend: Option<&Backend>,
    peer: IpAddr,
    stream: &mut Stream,
) -> Result<(), String> {
    if tls.mode == TlsMode::Disable {
        return Ok(());
    }
    let mut out = Vec::with_capacity(8);
    StartupPacket::SslRequest.encode(&mut out).map_err(|e| e.to_string())?;
    rt::write_all(stream, &out).await.map_err(|e| format!("sending SSLRequest: {e}"))?;
    // One byte exactly: anything the server sent after `S` belongs to the TLS handshake, so
    // plaintext an attacker slipped in before it fails the handshake instead of being read as
    // a protected answer (CVE-2021-23222).
    let mut answer = Vec::with_capacity(1);
    let n = rt::read_some(stream, &mut answer, 1).await.map_err(|e| format!("reading the SSLRequest answer: {e}"))?;
    match (n, answer.first().copied()) {
        (0, _) | (_, None) => Err("the server closed the connection after SSLRequest".into()),
        (_, Some(WILL_TLS)) => encrypt(tls, backend, peer, stream).await,
        (_, Some(NO_TLS)) if tls.mode == TlsMode::Prefer => Ok(()),
        (_, Some(NO_TLS)) => Err(format!(
            "the server does not accept TLS (it answered SSLRequest with N) and tls = \"{}\" never falls back to plaintext",
            tls.mode
        )),
        (_, Some(ERROR_RESPONSE)) => Err("the server answered SSLRequest with an error (it predates TLS support)".into()),
        (_, Some(other)) => Err(format!("the server answered SSLRequest with byte {other:#04x}, neither S nor N")),
    }
}

/// Runs the TLS handshake on `stream`, whose server (`backend`'s configuration entry, when
/// known; else the one at `peer`) has agreed to it, verifying it as the pool's `tls` says. The
/// error says why it failed (the certificate check, in rustls' words).
pub(super) async fn encrypt(
    tls: &BackendTls,
    backend: Option<&Backend>,
    peer: IpAddr,
    stream: &mut Stream,
) -> Result<(), String> {
    let client = tls.client.as_ref().ok_or("the pool's TLS settings were not loaded")?;
    // The backend's own name, else the pool's, else the host it is reached at.
    let name = backend
        .and_then(|b| b.tls_server_name.as_deref())
        .or(tls.server_name.as_deref())
        .or_else(|| backend.map(|b| b.host.as_str()));
    let name = match name {
        Some(name) => ServerName::try_from(name.to_owned())
            .map_err(|_| format!("\"{name}\" is neither a DNS name nor an IP address to verify the server as"))?,
        None => ServerName::IpAddress(peer.into()),
    };
    rt::start_tls(stream, client.config.clone(), name)
        .await
        .map_err(|e| format!("TLS handshake failed ({} mode): {e}", tls.mode))
}
