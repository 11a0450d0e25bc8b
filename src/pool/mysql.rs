//! Opening and authenticating MySQL/MariaDB backend connections: HandshakeV10 →
//! HandshakeResponse41 with the capabilities the router relays faithfully,
//! `mysql_native_password`, `caching_sha2_password` (fast path, and full authentication with
//! the password RSA-encrypted under the public key the server sends on request),
//! `mysql_clear_password` and auth-switch requests.
//!
//! TLS (#38): with the pool's `tls` on, the connection is upgraded right after the server's
//! greeting (Protocol::SSLRequest: the first 32 bytes of a handshake response with
//! `CLIENT_SSL`, then the TLS handshake on the same connection, then the handshake response
//! encrypted). Over TLS, `caching_sha2_password`'s full authentication sends the password
//! itself, as MySQL's own clients do, instead of the RSA exchange.
//!
//! The capability set is the same for every backend connection, so any pooled connection can
//! serve any client: no `CLIENT_DEPRECATE_EOF` and no MariaDB extended capabilities (the router
//! offers none of them to clients either), so result sets are byte-for-byte what clients expect.
//! `CLIENT_SESSION_TRACK` is asked for and MariaDB connections track `last_gtid` (#34): a
//! commit's own OK then carries its GTID for causal reads; the session turns each OK back into
//! the plain one its client expects (`protocol::mysql::tracking`). The one per-pool bit is `CLIENT_LOCAL_FILES`, asked
//! for on pools with `local_infile` (#4): it only lets the server ask for a file, which the
//! session relays to clients that allowed it and refuses otherwise.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use super::conn::BudgetUnit;
use super::login::{BackendSecret, Login, PassThrough};
use super::{Conn, ConnInfo, MyInfo, PoolError};
use crate::config::{Backend, Pool as PoolConfig, Protocol, TlsMode};
use crate::protocol::mysql::auth::{
    caching_sha2_token, native_password_token, native_password_token_from_stage1, rsa_encrypted_password,
    rsa_public_key, CACHING_SHA2_PASSWORD, MYSQL_CLEAR_PASSWORD, MYSQL_NATIVE_PASSWORD,
};
use crate::protocol::mysql::capability::*;
use crate::protocol::mysql::errcode::ER_SERVER_SHUTDOWN;
use crate::protocol::mysql::handshake::{
    CACHING_SHA2_FAST_AUTH_SUCCESS, CACHING_SHA2_PERFORM_FULL_AUTH, CACHING_SHA2_REQUEST_PUBLIC_KEY, SSL_REQUEST_LEN,
};
use crate::protocol::mysql::{
    decode_payload, encode_packets, AuthReply, HandshakeResponse41, HandshakeV10, SslRequest,
};
use crate::rt::{self, Stream};

/// Capabilities the router asks of every backend. `CLIENT_LONG_PASSWORD` (MariaDB's
/// `CLIENT_MYSQL`) is always set so MariaDB sends no extended-capability formats.
pub const BACKEND_CAPABILITIES: u64 = CLIENT_LONG_PASSWORD
    | CLIENT_LONG_FLAG
    | CLIENT_CONNECT_WITH_DB
    | CLIENT_PROTOCOL_41
    | CLIENT_TRANSACTIONS
    | CLIENT_SECURE_CONNECTION
    | CLIENT_MULTI_STATEMENTS
    | CLIENT_MULTI_RESULTS
    | CLIENT_PS_MULTI_RESULTS
    | CLIENT_PLUGIN_AUTH
    | CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA
    | CLIENT_SESSION_TRACK;

/// MariaDB (#34): the server's own tracked variables plus `last_gtid`, whose change each
/// commit's OK then reports, so causal reads learn a commit's GTID without a query that would
/// disturb `ROW_COUNT()` or the warnings. Sent at connect and after each `COM_RESET_CONNECTION`
/// (which restores the global value).
pub const TRACK_LAST_GTID: &str = "SET SESSION session_track_system_variables = \
    IF(@@global.session_track_system_variables = '', 'last_gtid', \
    CONCAT(@@global.session_track_system_variables, ',last_gtid'))";

/// Largest packet accepted from a backend during login.
const LOGIN_MAX: usize = 1 << 20;
/// `max_packet_size` announced to backends (the server's own `max_allowed_packet` still rules).
const MAX_PACKET: u32 = 1 << 30;
/// The end of the connect window kept for asking a backend that never greeted whether it is a
/// PostgreSQL server (which waits for the client to speak first).
const SILENCE_PROBE: Duration = Duration::from_millis(250);
/// A PostgreSQL SSLRequest: any PostgreSQL server answers it at once with one byte.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// Connects to `addr`, logs in as the pool's user into the pool's database and returns an idle
/// connection.
pub(super) async fn connect(
    cfg: &PoolConfig,
    addr: SocketAddr,
    label: &str,
    backend: usize,
    unit: BudgetUnit,
    who: Option<&PassThrough>,
    deadline: Instant,
) -> Result<Conn, PoolError> {
    let login = Login { cfg, label, who };
    let work = async {
        let mut stream = login.dial(addr, deadline).await?;
        let mut rbuf = Vec::with_capacity(4096);
        let info = handshake(&login, (cfg.backends.get(backend), addr.ip()), &mut stream, &mut rbuf, deadline).await?;
        if tracks_gtid(&info) {
            track_last_gtid(&login, &mut stream, &mut rbuf).await?;
        }
        Ok::<_, PoolError>((stream, rbuf, ConnInfo::MySql(info)))
    };
    login.assemble(rt::with_deadline(deadline, work).await, addr, backend, unit)
}

/// Whether `info`'s connection reports `last_gtid` changes in its OK packets once
/// [`TRACK_LAST_GTID`] ran on it: a MariaDB server that agreed on `CLIENT_SESSION_TRACK`.
pub fn tracks_gtid(info: &MyInfo) -> bool {
    info.capabilities & CLIENT_SESSION_TRACK != 0 && info.server_version.contains("MariaDB")
}

/// Runs [`TRACK_LAST_GTID`] on a connection just logged in. A server that refuses it (too old
/// for `last_gtid` tracking) is still usable: its commits report no GTID, so causal reads keep
/// a writing session on the primary.
async fn track_last_gtid(login: &Login<'_>, stream: &mut Stream, rbuf: &mut Vec<u8>) -> Result<(), PoolError> {
    let payload = [&[0x03u8][..], TRACK_LAST_GTID.as_bytes()].concat();
    send(login, stream, &payload, 0).await?;
    let (reply, _) = read(login, stream, rbuf).await?;
    match reply.first() {
        Some(0x00) | Some(0xFF) => Ok(()),
        _ => Err(login.connect_err("unexpected answer to the session tracking setup")),
    }
}

/// Reads `addr`'s greeting and hangs up: the server version and collation a pass-through pool
/// (#23) greets clients with before any client named itself to log in as.
pub(super) async fn peek_greeting(
    cfg: &PoolConfig,
    addr: SocketAddr,
    label: &str,
    deadline: Instant,
) -> Result<(String, u8), PoolError> {
    let login = Login { cfg, label, who: None };
    let work = async {
        let mut stream = login.dial(addr, deadline).await?;
        let mut rbuf = Vec::with_capacity(1024);
        let (greeting, _) = greeting(&login, &mut stream, &mut rbuf, deadline).await?;
        let hs = HandshakeV10::decode(&greeting).map_err(|e| login.connect_err(e))?;
        Ok((String::from_utf8_lossy(hs.server_version).into_owned(), hs.charset))
    };
    rt::with_deadline(deadline, work).await.unwrap_or_else(|_| Err(login.connect_err("connect_timeout elapsed")))
}

/// Reads one logical payload; returns it with its last sequence id.
async fn read(login: &Login<'_>, stream: &mut Stream, rbuf: &mut Vec<u8>) -> Result<(Vec<u8>, u8), PoolError> {
    loop {
        match decode_payload(rbuf, LOGIN_MAX) {
            Ok(Some(f)) => {
                let out = (f.payload.to_vec(), f.last_seq);
                let n = f.consumed;
                rbuf.drain(..n);
                return Ok(out);
            }
            Ok(None) => {}
            Err(e) => return Err(login.connect_err(e)),
        }
        let n = rt::read_some(stream, rbuf, 4096).await.map_err(|e| login.connect_err(e))?;
        if n == 0 {
            return Err(login.connect_err("backend closed the connection during login"));
        }
    }
}

async fn send(login: &Login<'_>, stream: &mut Stream, payload: &[u8], seq: u8) -> Result<(), PoolError> {
    let mut out = Vec::with_capacity(payload.len() + 4);
    encode_packets(payload, seq, &mut out);
    rt::write_all(stream, &out).await.map_err(|e| login.connect_err(e))
}

/// What the router proves a MySQL login with.
#[derive(Clone, Copy)]
enum Proof<'a> {
    /// The password (the pool's, or a passed-through client's from the auth file).
    Password(&'a [u8]),
    /// A passed-through client's `SHA1(password)` (#23): answers `mysql_native_password` only.
    Stage1(&'a [u8; 20]),
}

impl<'a> Proof<'a> {
    fn of(login: &Login<'a>) -> Result<Self, PoolError> {
        match login.passed_secret() {
            None => Ok(Proof::Password(login.cfg.password.as_deref().unwrap_or("").as_bytes())),
            Some(BackendSecret::Nothing) => Ok(Proof::Password(b"")),
            Some(BackendSecret::Password(p)) => Ok(Proof::Password(p.as_bytes())),
            Some(BackendSecret::NativeStage1(stage1)) => Ok(Proof::Stage1(stage1)),
            Some(BackendSecret::Md5(_) | BackendSecret::Scram(_)) => {
                Err(login.auth_err("a PostgreSQL secret cannot log in to a MySQL backend"))
            }
        }
    }

    /// The plaintext password, for the methods that send it (RSA-sealed or in clear).
    fn password(self, login: &Login<'_>) -> Result<&'a [u8], PoolError> {
        match self {
            Proof::Password(p) => Ok(p),
            Proof::Stage1(_) => Err(login.auth_err(
                "the backend asks for a method other than mysql_native_password, which a passed-through \
                 client's stored hash cannot answer (caching_sha2_password accounts need their password in the auth file)",
            )),
        }
    }
}

/// The auth response `plugin` expects for `proof` and `scramble`.
fn token(login: &Login<'_>, plugin: &[u8], proof: Proof<'_>, scramble: &[u8]) -> Result<Vec<u8>, PoolError> {
    if let Proof::Stage1(stage1) = proof {
        if plugin == MYSQL_NATIVE_PASSWORD {
            return Ok(native_password_token_from_stage1(stage1, scramble).to_vec());
        }
    }
    let password = proof.password(login)?;
    if password.is_empty() && plugin != MYSQL_CLEAR_PASSWORD {
        return Ok(Vec::new());
    }
    match plugin {
        p if p == MYSQL_NATIVE_PASSWORD => Ok(native_password_token(password, scramble).to_vec()),
        p if p == CACHING_SHA2_PASSWORD => Ok(caching_sha2_token(password, scramble).to_vec()),
        p if p == MYSQL_CLEAR_PASSWORD => Ok([password, b"\0"].concat()),
        other => {
            Err(login.auth_err(format!("unsupported authentication plugin \"{}\"", String::from_utf8_lossy(other))))
        }
    }
}

/// Reads the server's greeting. A backend still silent near the end of the connect window is
/// asked whether it is a PostgreSQL server (#25), so a pool without `protocol` whose backend is
/// PostgreSQL fails with that explanation, within the same `connect_timeout` as before.
async fn greeting(
    login: &Login<'_>,
    stream: &mut Stream,
    rbuf: &mut Vec<u8>,
    deadline: Instant,
) -> Result<(Vec<u8>, u8), PoolError> {
    let left = deadline.saturating_duration_since(rt::now());
    let probe = SILENCE_PROBE.min(left / 4);
    match rt::within(Some(left - probe), read(login, stream, rbuf)).await {
        Ok(read) => read,
        Err(_) if rbuf.is_empty() => {
            send_raw(login, stream, &SSL_REQUEST).await?;
            let n = rt::read_some(stream, rbuf, 64).await.map_err(|e| login.connect_err(e))?;
            match rbuf.first() {
                Some(b'N' | b'S' | b'E') if n > 0 => Err(login.wrong_protocol(Protocol::Postgres)),
                _ => Err(login.connect_err("the backend sent no greeting")),
            }
        }
        Err(_) => Err(login.connect_err("the backend's greeting did not arrive in time")),
    }
}

async fn send_raw(login: &Login<'_>, stream: &mut Stream, bytes: &[u8]) -> Result<(), PoolError> {
    rt::write_all(stream, bytes).await.map_err(|e| login.connect_err(e))
}

/// Upgrades the connection to TLS as the pool's `tls` says (#38), after the greeting `hs` that
/// came as packet `seq`: Protocol::SSLRequest with `caps | CLIENT_SSL` as packet `seq + 1`, then
/// the TLS handshake. `prefer` stays in plaintext only when the server does not offer
/// `CLIENT_SSL`; the other modes never do. Returns the sequence id of the handshake response
/// and whether the connection is now encrypted.
async fn upgrade(
    login: &Login<'_>,
    (backend, peer): (Option<&Backend>, IpAddr),
    stream: &mut Stream,
    rbuf: &[u8],
    (hs, caps, seq): (&HandshakeV10<'_>, u64, u8),
) -> Result<(u8, bool), PoolError> {
    let tls = &login.cfg.tls;
    match tls.mode {
        TlsMode::Disable => return Ok((seq.wrapping_add(1), false)),
        _ if hs.capabilities & CLIENT_SSL != 0 => {}
        TlsMode::Prefer => return Ok((seq.wrapping_add(1), false)),
        mode => {
            return Err(login.connect_err(format!(
                "the server does not offer TLS (no CLIENT_SSL in its greeting) and tls = \"{mode}\" never falls back to plaintext"
            )))
        }
    }
    if !rbuf.is_empty() {
        // Bytes the server sent before the TLS handshake would be read as if they were protected.
        return Err(login.connect_err("the server sent more than its greeting before the TLS handshake"));
    }
    let mut payload = Vec::with_capacity(SSL_REQUEST_LEN);
    SslRequest { capabilities: caps | CLIENT_SSL, max_packet_size: MAX_PACKET, charset: hs.charset }
        .encode(&mut payload);
    send(login, stream, &payload, seq.wrapping_add(1)).await?;
    super::tls::encrypt(tls, backend, peer, stream).await.map_err(|e| login.connect_err(e))?;
    Ok((seq.wrapping_add(2), true))
}

async fn handshake(
    login: &Login<'_>,
    backend: (Option<&Backend>, IpAddr),
    stream: &mut Stream,
    rbuf: &mut Vec<u8>,
    deadline: Instant,
) -> Result<MyInfo, PoolError> {
    let cfg = login.cfg;
    let user = login.user()?;
    let proof = Proof::of(login)?;
    let (greeting, seq) = greeting(login, stream, rbuf, deadline).await?;
    if greeting.first() == Some(&0xFF) {
        let msg = crate::protocol::mysql::ErrPacket::decode(&greeting)
            .map(|e| String::from_utf8_lossy(e.message).into_owned());
        return Err(login.connect_err(msg.unwrap_or_else(|_| "backend refused the connection".into())));
    }
    let hs = HandshakeV10::decode(&greeting).map_err(|e| login.connect_err(e))?;
    if hs.capabilities & CLIENT_PROTOCOL_41 == 0 {
        return Err(login.connect_err("backend does not speak protocol 4.1"));
    }
    let wanted = if cfg.local_infile { BACKEND_CAPABILITIES | CLIENT_LOCAL_FILES } else { BACKEND_CAPABILITIES };
    let caps = wanted & (hs.capabilities | CLIENT_LONG_PASSWORD);
    let (seq, encrypted) = upgrade(login, backend, stream, rbuf, (&hs, caps, seq)).await?;
    let mut plugin: Vec<u8> =
        if hs.auth_plugin.is_empty() { MYSQL_NATIVE_PASSWORD.to_vec() } else { hs.auth_plugin.to_vec() };
    let mut scramble = hs.scramble.to_vec();
    let auth = token(login, &plugin, proof, &scramble).or_else(|_| {
        // Start with native password; the server answers with an auth switch if it must.
        plugin = MYSQL_NATIVE_PASSWORD.to_vec();
        token(login, &plugin, proof, &scramble)
    })?;
    let resp = HandshakeResponse41 {
        // The server checks that the response repeats the SSLRequest's CLIENT_SSL.
        capabilities: if encrypted { caps | CLIENT_SSL } else { caps },
        max_packet_size: MAX_PACKET,
        charset: hs.charset,
        username: user.as_bytes(),
        auth_response: &auth,
        database: Some(cfg.database.as_bytes()),
        auth_plugin: Some(&plugin),
        connect_attrs: None,
        zstd_level: None,
    };
    let mut payload = Vec::with_capacity(128);
    resp.encode(&mut payload);
    send(login, stream, &payload, seq).await?;
    // Set once the router asked for the server's RSA key: the next AuthMoreData carries it.
    let mut awaiting_key = false;
    loop {
        let (reply, seq) = read(login, stream, rbuf).await?;
        match AuthReply::decode(&reply, caps).map_err(|e| login.connect_err(e))? {
            AuthReply::Ok(ok) => {
                return Ok(MyInfo {
                    thread_id: hs.connection_id,
                    server_version: String::from_utf8_lossy(hs.server_version).into_owned(),
                    capabilities: caps,
                    status: ok.status,
                    charset: hs.charset,
                    prepared: Vec::new(),
                    last_gtid: String::new(),
                    owes_gtid: false,
                });
            }
            AuthReply::Err(e) => {
                let state = e.sql_state.map(|s| String::from_utf8_lossy(&s).into_owned()).unwrap_or_default();
                let reason = format!("{} ({state}): {}", e.code, String::from_utf8_lossy(e.message));
                // A server shutting down refuses every login, as PostgreSQL's class 57 does: the
                // backend is down, not the credentials wrong, so the pool may fail over and the
                // client is not told "access denied" (#40).
                return Err(if e.code == ER_SERVER_SHUTDOWN.code {
                    login.connect_err(reason)
                } else {
                    login.auth_err(reason)
                });
            }
            AuthReply::Switch(sw) => {
                awaiting_key = false;
                plugin = sw.plugin.to_vec();
                scramble = sw.scramble().to_vec();
                let answer = token(login, &plugin, proof, &scramble)?;
                send(login, stream, &answer, seq.wrapping_add(1)).await?;
            }
            AuthReply::MoreData(pem) if awaiting_key => {
                // Without TLS the password may travel only encrypted with the server's key.
                awaiting_key = false;
                let password = proof.password(login)?;
                let sealed = rsa_public_key(pem)
                    .and_then(|key| rsa_encrypted_password(password, &scramble, &key, &mut rand::thread_rng()))
                    .map_err(|e| login.auth_err(e))?;
                send(login, stream, &sealed, seq.wrapping_add(1)).await?;
            }
            AuthReply::MoreData(data) => match data.first().copied() {
                Some(CACHING_SHA2_FAST_AUTH_SUCCESS) => {}
                Some(CACHING_SHA2_PERFORM_FULL_AUTH) if plugin == CACHING_SHA2_PASSWORD && encrypted => {
                    // Over TLS the server takes the password itself, NUL-terminated, and checks
                    // it against its stored hash; no RSA key is asked for.
                    let password = proof.password(login)?;
                    send(login, stream, &[password, b"\0"].concat(), seq.wrapping_add(1)).await?;
                }
                Some(CACHING_SHA2_PERFORM_FULL_AUTH) if plugin == CACHING_SHA2_PASSWORD => {
                    awaiting_key = true;
                    send(login, stream, &[CACHING_SHA2_REQUEST_PUBLIC_KEY], seq.wrapping_add(1)).await?;
                }
                _ => return Err(login.connect_err("unexpected authentication data from the backend")),
            },
        }
    }
}

/// Sends `KILL QUERY thread_id` on a fresh connection to `addr` logged in as the pool's user
/// (on a pass-through pool as `who`, the connection's own user, who may kill its own queries),
/// and waits for the server's answer, so the caller knows the kill was processed.
pub async fn deliver_kill(
    cfg: &PoolConfig,
    who: Option<&PassThrough>,
    addr: SocketAddr,
    thread_id: u32,
    deadline: Instant,
) -> Result<(), PoolError> {
    let label = addr.to_string();
    let login = Login { cfg, label: &label, who };
    let work = async {
        let mut stream = login.dial(addr, deadline).await?;
        let mut rbuf = Vec::with_capacity(1024);
        handshake(&login, (backend_at(cfg, addr), addr.ip()), &mut stream, &mut rbuf, deadline).await?;
        let sql = format!("\x03KILL QUERY {thread_id}");
        send(&login, &mut stream, sql.as_bytes(), 0).await?;
        let (reply, _) = read(&login, &mut stream, &mut rbuf).await?;
        let _ = send(&login, &mut stream, &[0x01], 0).await;
        match reply.first() {
            Some(0x00) => Ok(()),
            _ => {
                let msg = crate::protocol::mysql::ErrPacket::decode(&reply)
                    .map(|e| String::from_utf8_lossy(e.message).into_owned())
                    .unwrap_or_default();
                Err(login.auth_err(format!("KILL QUERY failed: {msg}")))
            }
        }
    };
    rt::with_deadline(deadline, work).await.unwrap_or_else(|_| Err(login.connect_err("kill delivery timed out")))
}

/// The configuration entry of the backend at `addr`, for the name its TLS certificate is
/// verified as: the one whose host is `addr`'s IP and whose port is its port, else the only one
/// with that port (a backend listed by host name). `None` leaves the pool's `tls_server_name`,
/// else the IP address.
fn backend_at(cfg: &PoolConfig, addr: SocketAddr) -> Option<&Backend> {
    let same_port = || cfg.backends.iter().filter(|b| b.port == addr.port());
    same_port().find(|b| b.host.parse() == Ok(addr.ip())).or_else(|| {
        let mut named = same_port();
        named.next().filter(|_| named.next().is_none())
    })
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;

    use super::backend_at;
    use crate::config::Config;

    /// The configuration entry a `KILL QUERY` connection to an address is verified as.
    #[test]
    fn the_backend_at_an_address_is_the_one_listed_by_that_ip_else_the_only_one_on_that_port() {
        let text = "[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:1\"\n\
            [pools.main]\nbackends = [{ host = \"127.0.0.1\", port = 3306 }, { host = \"db2.internal\", port = 3306 }, \
            { host = \"db3.internal\", port = 3307 }, { host = \"db4.internal\", port = 3308 }, \
            { host = \"db5.internal\", port = 3308 }]\n[routing]\nmysql_default_pool = \"main\"\n";
        let cfg = Config::parse(text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
        let pool = &cfg.pools[0];
        let host = |addr: &str| backend_at(pool, addr.parse().expect("addr")).map(|b| b.host.as_str());
        assert_eq!(host("127.0.0.1:3306"), Some("127.0.0.1"));
        assert_eq!(host("10.0.0.3:3307"), Some("db3.internal"));
        // Two named backends on the port: neither is guessed.
        assert_eq!(host("10.0.0.4:3308"), None);
        assert_eq!(host("10.0.0.9:3309"), None);
    }

    use crate::protocol::mysql::auth::rsa_public_key;

    /// A DER length field.
    fn der_len(n: usize) -> Vec<u8> {
        match n {
            0..=0x7f => vec![n as u8],
            0x80..=0xff => vec![0x81, n as u8],
            _ => vec![0x82, (n >> 8) as u8, n as u8],
        }
    }

    /// A PKCS#1 `RSA PUBLIC KEY` PEM with a modulus of `n_bytes` 0xff bytes and exponent `e`.
    fn pkcs1_pem(n_bytes: usize, e: &[u8]) -> Vec<u8> {
        let int = |v: Vec<u8>| [vec![0x02], der_len(v.len()), v].concat();
        let body = [int([vec![0], vec![0xff; n_bytes]].concat()), int(e.to_vec())].concat();
        let der = [vec![0x30], der_len(body.len()), body].concat();
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap_or("")).collect();
        format!("-----BEGIN RSA PUBLIC KEY-----\n{}\n-----END RSA PUBLIC KEY-----\n", lines.join("\n")).into_bytes()
    }

    /// A hostile MySQL backend's `caching_sha2_password` key cannot make the RSA encryption of the
    /// password expensive: an oversized modulus or exponent is refused when the key is read.
    #[test]
    fn a_backends_rsa_key_is_bounded_before_any_encryption() {
        assert!(rsa_public_key(&pkcs1_pem(256, &[1, 0, 1])).is_ok(), "a 2048-bit key with e = 65537");
        assert!(rsa_public_key(&pkcs1_pem(1024, &[1, 0, 1])).is_err(), "an 8192-bit modulus");
        assert!(rsa_public_key(&pkcs1_pem(256, &[0x7f; 64])).is_err(), "a 512-bit exponent");
    }
}
