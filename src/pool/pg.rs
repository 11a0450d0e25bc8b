//! Opening and authenticating PostgreSQL backend connections (trust, cleartext, MD5,
//! SCRAM-SHA-256, and SCRAM-SHA-256-PLUS bound to the server's certificate over TLS), and
//! delivering cancel requests to backends.

use std::net::SocketAddr;
use std::time::Instant;

use base64::Engine as _;

use super::conn::BudgetUnit;
use super::login::{BackendSecret, Login, PassThrough};
use super::{Conn, ConnInfo, PgInfo, PoolError};
use crate::config::{Backend, BackendTls, Pool as PoolConfig, Protocol};
use crate::protocol::pg::binding::{tls_server_end_point, SCRAM_SHA_256_PLUS};
use crate::protocol::pg::{
    auth, decode_frame, frontend, Authentication, BackendMessage, ChannelBinding, ProtocolVersion, ScramClient,
    StartupPacket, StartupParams,
};
use crate::rt::{self, Stream};

/// Largest message accepted from a backend during startup.
const STARTUP_MAX: usize = 1 << 20;

/// Connects to `addr`, logs in as the pool's user and returns an idle connection.
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
        super::tls::negotiate(&cfg.tls, cfg.backends.get(backend), addr.ip(), &mut stream)
            .await
            .map_err(|e| login.connect_err(e))?;
        let mut rbuf = Vec::with_capacity(4096);
        let info = startup(&login, &mut stream, &mut rbuf).await?;
        Ok::<_, PoolError>((stream, rbuf, ConnInfo::Pg(info)))
    };
    login.assemble(rt::with_deadline(deadline, work).await, addr, backend, unit)
}

async fn send(login: &Login<'_>, stream: &mut Stream, out: &[u8]) -> Result<(), PoolError> {
    rt::write_all(stream, out).await.map_err(|e| login.connect_err(e))
}

async fn startup(login: &Login<'_>, stream: &mut Stream, rbuf: &mut Vec<u8>) -> Result<PgInfo, PoolError> {
    let cfg = login.cfg;
    let user = login.user()?;
    let mut params = StartupParams::new();
    params.push("user", user);
    params.push("database", &cfg.database);
    params.push("application_name", "querypilot");
    let mut out = Vec::with_capacity(128);
    StartupPacket::Startup { protocol: ProtocolVersion { major: 3, minor: 0 }, params }
        .encode(&mut out)
        .map_err(|e| login.connect_err(e))?;
    send(login, stream, &out).await?;
    let channel = Channel::of(stream);
    let mut info = PgInfo::default();
    let mut scram: Option<(ScramClient, Option<auth::ScramClientFinal>)> = None;
    let mut first_read = true;
    loop {
        let frame = loop {
            match decode_frame(rbuf, STARTUP_MAX) {
                Ok(Some(f)) => break (f.tag, f.body.to_vec(), f.total_len),
                Ok(None) => {}
                Err(e) => return Err(login.connect_err(e)),
            }
            let n = rt::read_some(stream, rbuf, 4096).await.map_err(|e| login.connect_err(e))?;
            if std::mem::take(&mut first_read) && super::health::sniff::greeting(rbuf).is_some() {
                // A MySQL server greets on accept; its greeting is what answers our startup
                // message when the pool's backend is MySQL (#25).
                return Err(login.wrong_protocol(Protocol::MySql));
            }
            if n == 0 {
                return Err(login.connect_err("backend closed the connection during startup"));
            }
        };
        let (tag, body, consumed) = frame;
        rbuf.drain(..consumed);
        let f = crate::protocol::pg::Frame::new(tag, &body);
        let msg = BackendMessage::decode(&f).map_err(|e| login.connect_err(e))?;
        out.clear();
        match msg {
            BackendMessage::Authentication(a) => {
                answer_auth(login, (a, &channel), user, &mut scram, &mut out)?;
                if !out.is_empty() {
                    send(login, stream, &out).await?;
                }
            }
            BackendMessage::ParameterStatus { name, value } => info.params.push((name.to_owned(), value.to_owned())),
            BackendMessage::BackendKeyData { pid, key } => {
                info.pid = pid;
                info.secret = key;
            }
            BackendMessage::ReadyForQuery(_) => return Ok(info),
            BackendMessage::ErrorResponse(fields) => {
                let code = fields.code().unwrap_or("?????");
                let text = fields.get(b'M').unwrap_or("");
                // Class 57 (shutting down, starting up, crash recovery): the server is not
                // accepting connections, as if it refused the TCP connect; other refusals may be
                // about the pool's credentials and are left to the health probes.
                if code.starts_with("57P") {
                    return Err(login.connect_err(format!("{code} {text}")));
                }
                return Err(login.auth_err(format!("{code} {text}")));
            }
            BackendMessage::NegotiateProtocolVersion { .. } | BackendMessage::NoticeResponse(_) => {}
            other => {
                return Err(login.connect_err(format!("unexpected message {:?} during startup", other.tag() as char)))
            }
        }
    }
}

/// What a connection's SCRAM exchange can be bound to (#38).
enum Channel {
    /// Plaintext: nothing.
    Plain,
    /// TLS: the server certificate's `tls-server-end-point` data, unless its signature
    /// algorithm names no hash.
    Tls(Option<Vec<u8>>),
}

impl Channel {
    fn of(stream: &Stream) -> Self {
        match rt::peer_certificate(stream) {
            None => Channel::Plain,
            Some(der) => Channel::Tls(tls_server_end_point(&der)),
        }
    }

    /// The mechanism and GS2 binding for a server that offers `SCRAM-SHA-256-PLUS` (`plus`) or
    /// not: `SCRAM-SHA-256-PLUS` whenever it is offered and the certificate can be bound to, so a session on a
    /// `require` pool (which checks no certificate) still proves no interceptor sits between;
    /// over TLS without it offered, `y` (a server that supports binding then refuses, catching a
    /// list stripped in transit).
    fn choose(&self, plus: bool) -> (&'static str, ChannelBinding) {
        match self {
            Channel::Tls(Some(end_point)) if plus => {
                (SCRAM_SHA_256_PLUS, ChannelBinding::TlsServerEndPoint(end_point.clone()))
            }
            Channel::Tls(_) if !plus => (auth::SCRAM_SHA_256, ChannelBinding::NotOffered),
            _ => (auth::SCRAM_SHA_256, ChannelBinding::Unsupported),
        }
    }
}

fn answer_auth(
    login: &Login<'_>,
    (a, channel): (Authentication<'_>, &Channel),
    user: &str,
    scram: &mut Option<(ScramClient, Option<auth::ScramClientFinal>)>,
    out: &mut Vec<u8>,
) -> Result<(), PoolError> {
    let secret = login.passed_secret();
    let password = || {
        match secret {
            None => login.cfg.password.as_deref(),
            Some(BackendSecret::Password(p)) => Some(p.as_str()),
            Some(_) => None,
        }
        .ok_or_else(|| login.auth_err("the backend asks for a password the router does not have"))
    };
    match a {
        // A SCRAM exchange ends with the server's signature, which proves the backend knows the
        // password; a backend that skips it to say Ok is not trusted with the connection.
        Authentication::Ok if scram.is_some() => {
            Err(login.auth_err("the backend ended SCRAM-SHA-256 without proving it knows the password"))
        }
        Authentication::Ok => Ok(()),
        Authentication::CleartextPassword => {
            frontend::encode_password(password()?, out).map_err(|e| login.connect_err(e))
        }
        Authentication::Md5Password { salt } => {
            let response = match secret {
                // A passed-through MD5 secret answers the challenge as the password would.
                Some(BackendSecret::Md5(stored)) => auth::md5_response_from_secret(stored, salt)
                    .ok_or_else(|| login.auth_err("malformed MD5 secret"))?,
                _ => auth::md5_response(user, password()?, salt),
            };
            frontend::encode_password(&response, out).map_err(|e| login.connect_err(e))
        }
        Authentication::Sasl { mechanisms } => {
            if !mechanisms.iter().any(|m| m == auth::SCRAM_SHA_256) {
                // Named briefly: the list is the backend's and as long as its frame allows.
                let offered: Vec<&str> = mechanisms.iter().take(4).map(|m| m.get(..64).unwrap_or(m)).collect();
                return Err(
                    login.auth_err(format!("the backend offers no SASL mechanism the router speaks: {offered:?}"))
                );
            }
            let nonce = base64::engine::general_purpose::STANDARD.encode(rand::random::<[u8; 18]>());
            let (mechanism, binding) = channel.choose(mechanisms.iter().any(|m| m == SCRAM_SHA_256_PLUS));
            let client = match secret {
                // Keys recovered from the client's own proof (#23), no password needed.
                Some(BackendSecret::Scram(keys)) => ScramClient::with_keys("", keys.clone(), &nonce),
                _ => ScramClient::new("", password()?, &nonce),
            }
            .map_err(|e| login.auth_err(e))?
            .bound(binding);
            frontend::encode_sasl_initial_response(mechanism, Some(client.client_first().as_bytes()), out)
                .map_err(|e| login.connect_err(e))?;
            *scram = Some((client, None));
            Ok(())
        }
        Authentication::SaslContinue(data) => {
            let Some((client, fin)) = scram.as_mut() else {
                return Err(login.auth_err("SASL continue without SASL start"));
            };
            let (msg, state) =
                client.handle_server_first_with(data, cached_scram_keys).map_err(|e| login.auth_err(e))?;
            *fin = Some(state);
            frontend::encode_sasl_response(msg.as_bytes(), out).map_err(|e| login.connect_err(e))
        }
        Authentication::SaslFinal(data) => match scram.as_ref().and_then(|(_, f)| f.as_ref()) {
            Some(f) => {
                f.verify_server_final(data).map_err(|e| login.auth_err(e))?;
                *scram = None;
                Ok(())
            }
            None => Err(login.auth_err("SASL final before SASL continue")),
        },
        other => Err(login.auth_err(format!("unsupported authentication request {other:?}"))),
    }
}

/// Derived SCRAM keys most recently used first, at most [`SCRAM_CACHE`] of them.
type ScramCache = Vec<(ScramCacheKey, ([u8; 32], [u8; 32]))>;

/// A cache entry's key: (SHA-256 of the password, salt, iterations); no plaintext is copied.
type ScramCacheKey = ([u8; 32], Vec<u8>, u32);

/// Distinct (password, salt, iterations) whose keys the process keeps: one per pool credential
/// and backend is the common case.
const SCRAM_CACHE: usize = 32;

/// Derived SCRAM keys by (password, salt, iterations). PostgreSQL salts a role's verifier
/// once, so the same triple comes back: the derivation (4096 PBKDF2 rounds by default, 90–200
/// ms of a debug build's core, ~29 million instructions) is done once per process.
struct KeyCache(parking_lot::Mutex<ScramCache>);

impl KeyCache {
    const fn new() -> Self {
        Self(parking_lot::const_mutex(Vec::new()))
    }

    /// [`auth::scram_keys`], derived only on a miss, outside the lock.
    fn keys(&self, password: &str, salt: &[u8], iterations: u32) -> ([u8; 32], [u8; 32]) {
        use sha2::Digest as _;
        let key: ScramCacheKey = (sha2::Sha256::digest(password.as_bytes()).into(), salt.to_vec(), iterations);
        let hit = {
            let mut cache = self.0.lock();
            cache.iter().position(|(k, _)| *k == key).map(|pos| {
                let entry = cache.remove(pos);
                let keys = entry.1;
                cache.insert(0, entry);
                keys
            })
        };
        if let Some(keys) = hit {
            return keys;
        }
        let keys = auth::scram_keys(password, salt, iterations);
        let mut cache = self.0.lock();
        cache.insert(0, (key, keys));
        cache.truncate(SCRAM_CACHE);
        keys
    }
}

/// Process-wide, locked only by backend logins (never by a statement): kept per core, each
/// core's first login derived again what another core had (#39: in `perf/percore.sh`, the
/// second core's first login was most of what a second core added per transaction), and
/// health-probe logins that derive overran their timeout.
static SCRAM_KEYS: KeyCache = KeyCache::new();

/// [`auth::scram_keys`] through the process's cache.
fn cached_scram_keys(password: &str, salt: &[u8], iterations: u32) -> ([u8; 32], [u8; 32]) {
    SCRAM_KEYS.keys(password, salt, iterations)
}

/// Sends a CancelRequest for backend process `pid`/`secret` to `addr` and waits until the
/// server has processed it (it closes the connection), so the caller knows the signal was sent.
/// `tls` is the pool's TLS and the backend's configuration entry, when a pool serves `addr`: a
/// server that accepts only TLS connections wants SSLRequest before the CancelRequest too.
pub(super) async fn deliver_cancel(
    tls: Option<(&BackendTls, Option<&Backend>)>,
    addr: SocketAddr,
    pid: i32,
    secret: i32,
    deadline: Instant,
) -> std::io::Result<()> {
    let work = async {
        let mut s = rt::connect(addr, deadline).await?;
        if let Some((tls, backend)) = tls {
            super::tls::negotiate(tls, backend, addr.ip(), &mut s).await.map_err(std::io::Error::other)?;
        }
        let mut out = Vec::with_capacity(16);
        StartupPacket::Cancel { pid, key: secret }
            .encode(&mut out)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
        rt::write_all(&mut s, &out).await?;
        let mut sink = Vec::with_capacity(16);
        while rt::read_some(&mut s, &mut sink, 16).await? > 0 {
            sink.clear();
        }
        Ok(())
    };
    rt::with_deadline(deadline, work)
        .await
        .unwrap_or_else(|_| Err(std::io::Error::new(std::io::ErrorKind::TimedOut, "cancel delivery timed out")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cached_scram_keys_equal_derived_ones_and_are_derived_once_per_triple() {
        // A cache of the test's own: the process's is shared with every other test's logins.
        let cache = KeyCache::new();
        let cached = || cache.0.lock().len();
        let derived = auth::scram_keys("pw", b"salt", 4096);
        assert_eq!(cache.keys("pw", b"salt", 4096), derived);
        assert_eq!(cache.keys("pw", b"salt", 4096), derived);
        assert_eq!(cached(), 1);
        assert_ne!(cache.keys("pw", b"other salt", 4096), derived);
        assert_ne!(cache.keys("pw", b"salt", 4097), derived);
        assert_ne!(cache.keys("other", b"salt", 4096), derived);
        assert_eq!(cached(), 4);
        for i in 0..2 * SCRAM_CACHE {
            cache.keys("pw", &i.to_le_bytes(), 1);
        }
        assert_eq!(cached(), SCRAM_CACHE);
        // The most recent entries survive, the oldest went.
        assert_eq!(cache.keys("pw", b"salt", 4096), derived);
        assert_eq!(cached(), SCRAM_CACHE);
        assert_eq!(cached_scram_keys("pw", b"salt", 4096), derived, "the process's cache");
    }
}
