//! Backend authentication with `caching_sha2_password`, which the harness's MariaDB lacks: a
//! scripted fake MySQL 8 server built from the router's own codecs greets with that plugin and
//! either takes the fast path (AuthMoreData 0x03) or demands full authentication (0x04), serves
//! its RSA public key when asked (0x02), decrypts the RSA-OAEP password it receives and checks it
//! against the password it knows. A client logs in through the router and runs a query that
//! only the fake can answer. Over TLS (#38) the fake offers `CLIENT_SSL`, takes the router's
//! SSLRequest, encrypts the connection with the harness's server certificate and then expects
//! the password itself, as MySQL 8 does over a secure transport.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mysql::prelude::Queryable;
use querypilot::protocol::mysql::auth::{caching_sha2_token, CACHING_SHA2_PASSWORD};
use querypilot::protocol::mysql::capability::*;
use querypilot::protocol::mysql::column::ColumnType;
use querypilot::protocol::mysql::handshake::{
    encode_auth_more_data, CACHING_SHA2_FAST_AUTH_SUCCESS, CACHING_SHA2_PERFORM_FULL_AUTH,
    CACHING_SHA2_REQUEST_PUBLIC_KEY,
};
use querypilot::protocol::mysql::{
    decode_payload, encode_packets, encode_text_row, ColumnDefinition41, EofPacket, ErrPacket, HandshakeResponse41,
    HandshakeV10, OkPacket, SslRequest,
};
use rsa::pkcs8::{DecodePrivateKey, EncodePublicKey, LineEnding};
use rsa::{Oaep, RsaPrivateKey};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

use crate::router::Router;

/// The fake's private key (a test-only key made with `openssl genpkey`).
const TEST_KEY: &str = include_str!("../support/mysql_rsa_test_key.pem");
/// What the fake answers every query with: proof a query reached it.
const MARKER: &str = "answered by the fake caching_sha2 server";
/// The account the fake knows.
const PASSWORD: &str = "sha2-Secret-password-longer-than-the-scramble";

/// How the fake treats the router's first token.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Accept a correct fast-path token (the server has the account cached).
    Fast,
    /// Ignore the token and demand full authentication (cold cache).
    Full,
    /// As `Full`, on a connection the router upgraded to TLS: the password comes in clear.
    FullTls,
}

/// What the fake saw, per outcome.
#[derive(Default)]
struct Seen {
    fast_ok: AtomicUsize,
    full_ok: AtomicUsize,
    rejected: AtomicUsize,
    queries: AtomicUsize,
}

/// Starts the fake on an ephemeral port; it serves connections until the process ends.
fn fake_server(mode: Mode) -> (u16, Arc<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake");
    let port = listener.local_addr().expect("addr").port();
    let seen = Arc::new(Seen::default());
    let key = Arc::new(RsaPrivateKey::from_pkcs8_pem(TEST_KEY).expect("test key"));
    let tls = (mode == Mode::FullTls).then(server_tls);
    let s = seen.clone();
    std::thread::spawn(move || {
        for (id, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { continue };
            let (s, key, tls) = (s.clone(), key.clone(), tls.clone());
            std::thread::spawn(move || {
                let conn = Conn { stream: Wire::Plain(stream), buf: Vec::new() };
                let _ = conn.serve(mode, (id as u32 + 1, tls), &key, &s);
            });
        }
    });
    (port, seen)
}

/// The fake's TLS configuration: the harness's server certificate (for 127.0.0.1).
fn server_tls() -> Arc<ServerConfig> {
    let certs = &crate::support::dbs().my_tls().certs;
    let chain = CertificateDer::pem_file_iter(certs.join("server.crt"))
        .and_then(|c| c.collect::<Result<Vec<_>, _>>())
        .expect("server.crt");
    let key = PrivateKeyDer::from_pem_file(certs.join("server.key")).expect("server.key");
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server certificate");
    Arc::new(config)
}

/// The fake's side of a connection, before and after TLS.
enum Wire {
    Plain(TcpStream),
    Tls(Box<StreamOwned<ServerConnection, TcpStream>>),
}

impl Read for Wire {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        match self {
            Wire::Plain(s) => s.read(buf),
            Wire::Tls(s) => s.read(buf),
        }
    }
}

impl Write for Wire {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        match self {
            Wire::Plain(s) => s.write(buf),
            Wire::Tls(s) => s.write(buf),
        }
    }

    fn flush(&mut self) -> std::io::Result<()> {
        match self {
            Wire::Plain(s) => s.flush(),
            Wire::Tls(s) => s.flush(),
        }
    }
}

/// One connection to the fake.
struct Conn {
    stream: Wire,
    buf: Vec<u8>,
}

impl Conn {
    /// Takes the router's SSLRequest (packet 1, with `CLIENT_SSL`) and runs the TLS handshake;
    /// returns the handshake response that follows it encrypted, with its sequence id, which
    /// must be 2 and repeat `CLIENT_SSL`. `None` when the router did anything else.
    fn encrypt(&mut self, config: Arc<ServerConfig>) -> std::io::Result<Option<(Vec<u8>, u8)>> {
        let (request, seq) = self.read()?;
        let Wire::Plain(tcp) = &self.stream else { return Ok(None) };
        if seq != 1 || SslRequest::detect(&request).is_none() {
            return Ok(None);
        }
        let mut tls = ServerConnection::new(config).map_err(std::io::Error::other)?;
        // The router starts its handshake right after the request: what came with it is TLS.
        let early = std::mem::take(&mut self.buf);
        let mut rest = early.as_slice();
        while !rest.is_empty() {
            tls.read_tls(&mut rest)?;
            tls.process_new_packets().map_err(std::io::Error::other)?;
        }
        self.stream = Wire::Tls(Box::new(StreamOwned::new(tls, tcp.try_clone()?)));
        let (resp, seq) = self.read()?;
        let caps = HandshakeResponse41::decode(&resp).map_err(std::io::Error::other)?.capabilities;
        Ok((seq == 2 && caps & CLIENT_SSL != 0).then_some((resp, seq)))
    }

    /// Reads one payload; returns it with its sequence id.
    fn read(&mut self) -> std::io::Result<(Vec<u8>, u8)> {
        loop {
            if let Some(f) = decode_payload(&self.buf, 1 << 24).map_err(std::io::Error::other)? {
                let out = (f.payload.to_vec(), f.last_seq);
                let n = f.consumed;
                self.buf.drain(..n);
                return Ok(out);
            }
            let mut chunk = [0u8; 4096];
            let n = self.stream.read(&mut chunk)?;
            if n == 0 {
                return Err(std::io::ErrorKind::UnexpectedEof.into());
            }
            self.buf.extend_from_slice(&chunk[..n]);
        }
    }

    /// Sends payloads with consecutive sequence ids from `seq`.
    fn send(&mut self, payloads: &[Vec<u8>], seq: u8) -> std::io::Result<()> {
        let mut out = Vec::new();
        let mut seq = seq;
        for p in payloads {
            seq = encode_packets(p, seq, &mut out);
        }
        self.stream.write_all(&out)
    }

    fn serve(
        mut self,
        mode: Mode,
        (id, tls): (u32, Option<Arc<ServerConfig>>),
        key: &RsaPrivateKey,
        seen: &Seen,
    ) -> std::io::Result<()> {
        let scramble: [u8; 20] = std::array::from_fn(|_| rand::random::<u8>() % 94 + 33);
        // A server offering exactly what the router asks for (and TLS, when it has it).
        let ssl = if tls.is_some() { CLIENT_SSL } else { 0 };
        let caps = querypilot::pool::MYSQL_BACKEND_CAPABILITIES | ssl;
        let greeting = HandshakeV10 {
            server_version: b"8.0.36-fake",
            connection_id: id,
            scramble,
            capabilities: caps,
            charset: 45,
            status: 2,
            auth_plugin: CACHING_SHA2_PASSWORD,
        };
        let mut p = Vec::new();
        greeting.encode(&mut p);
        self.send(&[p], 0)?;
        let (resp, seq) = match tls {
            None => self.read()?,
            Some(config) => match self.encrypt(config)? {
                Some(encrypted) => encrypted,
                None => {
                    seen.rejected.fetch_add(1, Ordering::Relaxed);
                    return Ok(());
                }
            },
        };
        let resp = HandshakeResponse41::decode(&resp).map_err(std::io::Error::other)?;
        let plugin_ok = resp.auth_plugin == Some(CACHING_SHA2_PASSWORD);
        let token_ok = plugin_ok && resp.auth_response == caching_sha2_token(PASSWORD.as_bytes(), &scramble);
        let granted = match mode {
            Mode::Fast => {
                if token_ok {
                    seen.fast_ok.fetch_add(1, Ordering::Relaxed);
                }
                self.finish(token_ok, vec![more(CACHING_SHA2_FAST_AUTH_SUCCESS)], seq.wrapping_add(1))?
            }
            Mode::Full => {
                self.send(&[more(CACHING_SHA2_PERFORM_FULL_AUTH)], seq.wrapping_add(1))?;
                let (ask, seq) = self.read()?;
                assert_eq!(ask, [CACHING_SHA2_REQUEST_PUBLIC_KEY], "the router must ask for the public key");
                let pem = key.to_public_key().to_public_key_pem(LineEnding::LF).expect("pem");
                let mut p = Vec::new();
                encode_auth_more_data(pem.as_bytes(), &mut p);
                self.send(&[p], seq.wrapping_add(1))?;
                let (sealed, seq) = self.read()?;
                let plain = key.decrypt(Oaep::new::<sha1::Sha1>(), &sealed).unwrap_or_default();
                let unmasked: Vec<u8> = plain.iter().zip(scramble.iter().cycle()).map(|(p, s)| p ^ s).collect();
                let ok = plugin_ok && unmasked == [PASSWORD.as_bytes(), b"\0"].concat();
                if ok {
                    seen.full_ok.fetch_add(1, Ordering::Relaxed);
                }
                self.finish(ok, Vec::new(), seq.wrapping_add(1))?
            }
            Mode::FullTls => {
                self.send(&[more(CACHING_SHA2_PERFORM_FULL_AUTH)], seq.wrapping_add(1))?;
                // Over TLS: the password, NUL-terminated (a request for the key is refused).
                let (clear, seq) = self.read()?;
                let ok = plugin_ok && clear == [PASSWORD.as_bytes(), b"\0"].concat();
                if ok {
                    seen.full_ok.fetch_add(1, Ordering::Relaxed);
                }
                self.finish(ok, Vec::new(), seq.wrapping_add(1))?
            }
        };
        if !granted {
            seen.rejected.fetch_add(1, Ordering::Relaxed);
            return Ok(());
        }
        self.commands(seen)
    }

    /// Sends `before` then OK, or ERR 1045 when `ok` is false; returns `ok`.
    fn finish(&mut self, ok: bool, mut before: Vec<Vec<u8>>, seq: u8) -> std::io::Result<bool> {
        let mut p = Vec::new();
        if ok {
            OkPacket { status: 2, ..OkPacket::default() }.encode(CLIENT_PROTOCOL_41, &mut p);
            before.push(p);
        } else {
            let e = ErrPacket {
                code: 1045,
                sql_state: Some(*b"28000"),
                message: b"Access denied (fake caching_sha2 server)",
            };
            e.encode(&mut p);
            before = vec![p];
        }
        self.send(&before, seq)?;
        Ok(ok)
    }

    /// Answers every query with one row holding [`MARKER`], anything else with OK.
    fn commands(mut self, seen: &Seen) -> std::io::Result<()> {
        loop {
            let (cmd, _) = self.read()?;
            match cmd.first() {
                Some(0x01) | None => return Ok(()),
                Some(0x03) => {
                    seen.queries.fetch_add(1, Ordering::Relaxed);
                    let col = ColumnDefinition41 {
                        catalog: b"def",
                        schema: b"",
                        table: b"",
                        org_table: b"",
                        name: b"v",
                        org_name: b"",
                        charset: 45,
                        column_length: 400,
                        column_type: ColumnType(0xFD),
                        flags: 0,
                        decimals: 0x1F,
                    };
                    let (mut c, mut row, mut eof) = (Vec::new(), Vec::new(), Vec::new());
                    col.encode(&mut c);
                    encode_text_row(&[Some(MARKER.as_bytes())], &mut row);
                    EofPacket { warnings: 0, status: 2 }.encode(&mut eof);
                    self.send(&[vec![1], c, eof.clone(), row, eof], 1)?;
                }
                Some(_) => {
                    let mut p = Vec::new();
                    OkPacket { status: 2, ..OkPacket::default() }.encode(CLIENT_PROTOCOL_41, &mut p);
                    self.send(&[p], 1)?;
                }
            }
        }
    }
}

fn more(byte: u8) -> Vec<u8> {
    let mut p = Vec::new();
    encode_auth_more_data(&[byte], &mut p);
    p
}

/// A router whose only MySQL pool is the fake, with pool password `password`.
fn router_for(port: u16, password: &str) -> Router {
    router_with(port, password, "")
}

/// [`router_for`] with more pool keys (`extra`).
fn router_with(port: u16, password: &str, extra: &str) -> Router {
    let pool = format!(
        "[pools.sha2]\nmode = \"transaction\"\nusername = \"sha2user\"\npassword = \"{password}\"\ndatabase = \"app\"\n\
         max_connections = 2\nacquire_timeout = \"5s\"\n{extra}\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n"
    );
    Router::start(&crate::mysql_session::my_config(&[0], &pool, "sha2"))
}

fn connect(router: &Router, password: &str) -> mysql::Result<mysql::Conn> {
    let opts = mysql::OptsBuilder::new()
        .ip_or_hostname(Some("127.0.0.1"))
        .tcp_port(router.port())
        .user(Some("sha2user"))
        .pass(Some(password))
        .db_name(Some("app"))
        .prefer_socket(false)
        // Otherwise the client asks for @@max_allowed_packet, which the fake does not know.
        .max_allowed_packet(Some(16 << 20))
        .tcp_connect_timeout(Some(Duration::from_secs(10)));
    mysql::Conn::new(opts)
}

fn marker(c: &mut mysql::Conn) -> Option<String> {
    c.query_first("SELECT 'anything'").expect("query through the router")
}

#[test]
fn full_authentication_with_the_servers_rsa_key() {
    let (port, seen) = fake_server(Mode::Full);
    let router = router_for(port, PASSWORD);
    let mut c = connect(&router, PASSWORD).expect("client logs in through the router");
    assert_eq!(marker(&mut c).as_deref(), Some(MARKER));
    assert!(seen.full_ok.load(Ordering::Relaxed) >= 1, "the fake accepted an RSA-encrypted password");
    assert_eq!(seen.rejected.load(Ordering::Relaxed), 0);
    assert!(seen.queries.load(Ordering::Relaxed) >= 1);
}

#[test]
fn full_authentication_with_a_wrong_password_is_refused_by_the_backend() {
    let (port, seen) = fake_server(Mode::Full);
    let router = router_for(port, "not-the-password");
    // The client's credentials are the pool's, so the router accepts them; the backend refuses
    // the router's and the client hears about it instead of getting a connection.
    let r = connect(&router, "not-the-password").and_then(|mut c| c.query_first::<String, _>("SELECT 'anything'"));
    assert!(r.is_err(), "a backend login refusal must reach the client: {r:?}");
    assert!(seen.rejected.load(Ordering::Relaxed) >= 1, "the fake checked the decrypted password and refused it");
    assert_eq!(seen.full_ok.load(Ordering::Relaxed), 0);
    assert_eq!(seen.queries.load(Ordering::Relaxed), 0);
}

#[test]
fn fast_path_with_a_cached_account() {
    let (port, seen) = fake_server(Mode::Fast);
    let router = router_for(port, PASSWORD);
    let mut c = connect(&router, PASSWORD).expect("client logs in through the router");
    assert_eq!(marker(&mut c).as_deref(), Some(MARKER));
    assert!(seen.fast_ok.load(Ordering::Relaxed) >= 1, "the fast-path token matched");
    assert_eq!(seen.rejected.load(Ordering::Relaxed), 0);
}

#[test]
fn full_authentication_over_tls_sends_the_password_itself() {
    let (port, seen) = fake_server(Mode::FullTls);
    let ca = crate::support::dbs().my_tls().certs.join("ca.crt");
    let extra = format!("tls = \"verify-full\"\ntls_ca_file = \"{}\"", ca.display());
    let router = router_with(port, PASSWORD, &extra);
    let mut c = connect(&router, PASSWORD).expect("client logs in through the router");
    assert_eq!(marker(&mut c).as_deref(), Some(MARKER));
    assert!(seen.full_ok.load(Ordering::Relaxed) >= 1, "the fake took the password over TLS");
    assert_eq!(seen.rejected.load(Ordering::Relaxed), 0);
}
