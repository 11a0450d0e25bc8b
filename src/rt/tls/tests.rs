//! The record layer of a moved session against rustls itself: a real handshake in memory, the
//! server's keys extracted as a hand-over extracts them, then rustls' client and the record
//! layer talk on, for every suite the router's provider offers.

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{
    ClientConfig, ClientConnection, Connection, RootCertStore, ServerConfig, ServerConnection, SupportedCipherSuite,
};

use super::records::{Opened, RecordCursor, RecordError, Records};
use super::{extract, FrozenTls};

/// A fresh self-signed P-256 certificate for `localhost` (made by the openssl CLI, which the
/// integration tests' certificates come from too): its chain and key.
fn certificate(dir: &Path) -> (CertificateDer<'static>, PrivateKeyDer<'static>) {
    let out = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"])
        .args(["-keyout", "key.pem", "-out", "cert.pem", "-days", "2", "-subj", "/CN=localhost"])
        .args(["-addext", "subjectAltName=DNS:localhost", "-addext", "basicConstraints=critical,CA:FALSE"])
        .current_dir(dir)
        .output()
        .expect("run openssl (installed by .ci/deps.sh)");
    assert!(out.status.success(), "openssl: {}", String::from_utf8_lossy(&out.stderr));
    let cert = CertificateDer::from_pem_file(dir.join("cert.pem")).expect("the certificate");
    let key = PrivateKeyDer::from_pem_file(dir.join("key.pem")).expect("the key");
    (cert, key)
}

/// A client and a server that completed a handshake with `suite` only, and said a word each.
fn established(suite: SupportedCipherSuite) -> (ClientConnection, ServerConnection) {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let (cert, key) = certificate(dir.path());
    #[allow(deprecated)] // see `control::tls::client_config`
    let mut provider = rustls::crypto::ring::default_provider();
    provider.cipher_suites = vec![suite];
    let provider = Arc::new(provider);
    let versions = [suite.version()];
    let mut server = ServerConfig::builder_with_provider(provider.clone())
        .with_protocol_versions(&versions)
        .expect("the version")
        .with_no_client_auth()
        .with_single_cert(vec![cert.clone()], key)
        .expect("the certificate");
    server.enable_secret_extraction = true;
    let mut roots = RootCertStore::empty();
    roots.add(cert).expect("a root");
    let mut client = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&versions)
        .expect("the version")
        .with_root_certificates(roots)
        .with_no_client_auth();
    client.enable_secret_extraction = true;
    let name = ServerName::try_from("localhost").expect("a name");
    let mut client = ClientConnection::new(Arc::new(client), name).expect("a client");
    let mut server = ServerConnection::new(Arc::new(server)).expect("a server");
    while client.is_handshaking() || server.is_handshaking() {
        pump(&mut client, &mut server);
        pump(&mut server, &mut client);
    }
    client.writer().write_all(b"hello").unwrap();
    pump(&mut client, &mut server);
    assert_eq!(read_all(&mut server), b"hello");
    server.writer().write_all(b"welcome").unwrap();
    pump(&mut server, &mut client);
    assert_eq!(read_all(&mut client), b"welcome");
    (client, server)
}

/// Moves what `from` has to send into `to`.
fn pump(
    from: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
    to: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>,
) {
    let mut wire = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut wire).unwrap();
    }
    let mut raw = &wire[..];
    while !raw.is_empty() {
        to.read_tls(&mut raw).unwrap();
        to.process_new_packets().expect("records that verify");
    }
}

fn ciphertext(from: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>) -> Vec<u8> {
    let mut wire = Vec::new();
    while from.wants_write() {
        from.write_tls(&mut wire).unwrap();
    }
    wire
}

fn read_all(conn: &mut impl std::ops::DerefMut<Target = rustls::ConnectionCommon<impl Sized>>) -> Vec<u8> {
    let mut got = Vec::new();
    match conn.reader().read_to_end(&mut got) {
        Ok(_) => {}
        Err(e) => assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock, "{e}"),
    }
    got
}

/// Feeds `client`'s ciphertext `raw` to `tls` in pieces of `step` bytes; the plaintext.
fn open_in_steps(tls: &mut Records, raw: &[u8], step: usize) -> Vec<u8> {
    let mut plain = Vec::new();
    for piece in raw.chunks(step) {
        assert_eq!(tls.open(piece, &mut plain), Ok(Opened::Data));
    }
    plain
}

/// A message that takes several records either way.
fn long_message() -> Vec<u8> {
    (0..40_000u32).map(|i| (i % 251) as u8).collect()
}

/// The provider's suites a P-256 certificate can serve (TLS 1.2's ECDHE_RSA ones need an RSA key;
/// their records are the same as their ECDSA twins').
fn suites() -> Vec<SupportedCipherSuite> {
    #[allow(deprecated)] // see `control::tls::client_config`
    let all = rustls::crypto::ring::default_provider().cipher_suites;
    all.into_iter().filter(|s| !format!("{:?}", s.suite()).contains("_RSA_")).collect()
}

fn moved_server(server: ServerConnection, pending: &[u8]) -> Records {
    let frozen = extract(Connection::Server(server), pending).expect("the keys");
    Records::thaw(frozen).expect("a record layer")
}

#[test]
fn every_suite_continues_after_the_keys_move_and_again_after_a_second_move() {
    let all = suites();
    let tls12 = all.iter().filter(|s| s.version() == &rustls::version::TLS12).count();
    assert_eq!((all.len(), tls12), (6, 3), "AES-128-GCM, AES-256-GCM and ChaCha20 in TLS 1.3 and 1.2: {all:?}");
    for suite in all {
        let (mut client, server) = established(suite);
        let mut moved = moved_server(server, &[]);
        let message = long_message();
        client.writer().write_all(&message).unwrap();
        let raw = ciphertext(&mut client);
        // Half of the client's records, then a second hand-over carrying the rest unread.
        let half = raw.len() / 2;
        let mut plain = open_in_steps(&mut moved, &raw[..half], 997);
        let frozen: FrozenTls =
            serde_json::from_slice(&serde_json::to_vec(&moved.freeze(&raw[half..])).unwrap()).unwrap();
        let mut again = Records::thaw(frozen).expect("a record layer again");
        assert_eq!(again.open(&[], &mut plain), Ok(Opened::Data));
        assert!(plain == message, "{suite:?}: the client's records, {} bytes of {}", plain.len(), message.len());
        let mut sealed = Vec::new();
        again.seal(&message, &mut sealed).expect("sealed");
        again.seal(b"and more", &mut sealed).expect("sealed");
        let (mut raw, mut read) = (&sealed[..], Vec::new());
        while !raw.is_empty() {
            client.read_tls(&mut raw).unwrap();
            client.process_new_packets().unwrap_or_else(|e| panic!("{suite:?}: {e}"));
            read.extend(read_all(&mut client));
        }
        let mut expected = message.clone();
        expected.extend_from_slice(b"and more");
        assert!(read == expected, "{suite:?}: the records sent after the move");
    }
}

#[test]
fn a_record_changed_on_the_way_is_refused() {
    let (mut client, server) = established(suites()[0]);
    let mut moved = moved_server(server, &[]);
    client.writer().write_all(b"SELECT 1").unwrap();
    let mut raw = ciphertext(&mut client);
    let last = raw.len() - 1;
    raw[last] ^= 1;
    assert_eq!(moved.open(&raw, &mut Vec::new()), Err(RecordError::Decrypt));
}

#[test]
fn close_notify_ends_the_stream_and_other_alerts_are_errors() {
    for suite in suites() {
        let (mut client, server) = established(suite);
        let mut moved = moved_server(server, &[]);
        client.writer().write_all(b"bye").unwrap();
        client.send_close_notify();
        let mut plain = Vec::new();
        assert_eq!(moved.open(&ciphertext(&mut client), &mut plain), Ok(Opened::Closed), "{suite:?}");
        assert_eq!(plain, b"bye");
    }
}

#[test]
fn a_key_update_is_refused_rather_than_misread() {
    let tls13 = suites().into_iter().find(|s| s.version() == &rustls::version::TLS13).expect("a TLS 1.3 suite");
    let (mut client, server) = established(tls13);
    let mut moved = moved_server(server, &[]);
    client.refresh_traffic_keys().expect("a key update");
    client.writer().write_all(b"under new keys").unwrap();
    assert_eq!(moved.open(&ciphertext(&mut client), &mut Vec::new()), Err(RecordError::Handshake));
}

#[test]
fn ciphertext_received_before_the_move_is_read_first() {
    let (mut client, server) = established(suites()[0]);
    client.writer().write_all(b"already on its way").unwrap();
    let raw = ciphertext(&mut client);
    let mut moved = moved_server(server, &raw);
    let mut plain = Vec::new();
    assert_eq!(moved.open(&[], &mut plain), Ok(Opened::Data));
    assert_eq!(plain, b"already on its way");
}

#[test]
fn a_client_session_moves_too() {
    let (client, mut server) = established(suites()[0]);
    let frozen = extract(Connection::Client(client), &[]).expect("the client's keys");
    assert!(frozen.client);
    let mut moved = Records::thaw(frozen).expect("a record layer");
    server.writer().write_all(b"DataRow").unwrap();
    let mut plain = Vec::new();
    assert_eq!(moved.open(&ciphertext(&mut server), &mut plain), Ok(Opened::Data));
    assert_eq!(plain, b"DataRow");
}

#[test]
fn the_cursor_knows_when_a_record_is_cut() {
    let (mut client, _server) = established(suites()[0]);
    client.writer().write_all(&long_message()).unwrap();
    let raw = ciphertext(&mut client);
    let mut cursor = RecordCursor::default();
    let mut cuts = 0;
    for piece in raw.chunks(1000) {
        cursor.advance(piece);
        cuts += usize::from(!cursor.between_records());
    }
    assert!(cuts > 0, "some pieces end inside a record");
    assert!(cursor.between_records(), "the last piece ends the last record");
    let mut one_by_one = RecordCursor::default();
    for b in &raw[..raw.len() - 1] {
        one_by_one.advance(std::slice::from_ref(b));
    }
    assert!(!one_by_one.between_records());
}

mod hostile {
    //! What a peer sends after its session moved is read by code of ours, not rustls': whatever
    //! the bytes, opening them ends in data or an error, never a panic, and records this layer
    //! seals open again however the stream is cut.

    use proptest::prelude::*;

    use super::super::records::{Cipher, FrozenKeys, FrozenTls, Opened, Records, Version};

    fn layer(version: Version, cipher: Cipher, tx: u8, rx: u8) -> Records {
        let len = if cipher == Cipher::Aes128Gcm { 16 } else { 32 };
        let keys = |b: u8, seq| FrozenKeys { key: vec![b; len], iv: [b ^ 0x5a; 12], seq };
        let frozen =
            FrozenTls { version, cipher, tx: keys(tx, 3), rx: keys(rx, 3), client: false, pending: Vec::new() };
        Records::thaw(frozen).expect("a record layer")
    }

    fn kinds() -> impl Strategy<Value = (Version, Cipher)> {
        let versions = prop_oneof![Just(Version::Tls12), Just(Version::Tls13)];
        let ciphers = prop_oneof![Just(Cipher::Aes128Gcm), Just(Cipher::Aes256Gcm), Just(Cipher::Chacha20Poly1305)];
        (versions, ciphers)
    }

    proptest! {
        #[test]
        fn any_bytes_end_in_data_or_an_error(
            (version, cipher) in kinds(),
            pieces in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 0..20),
        ) {
            let mut tls = layer(version, cipher, 1, 2);
            let mut plain = Vec::new();
            for piece in pieces {
                if tls.open(&piece, &mut plain).is_err() {
                    break;
                }
            }
            prop_assert!(plain.is_empty(), "nothing forged decrypts");
        }

        #[test]
        fn sealed_records_open_however_the_stream_is_cut(
            (version, cipher) in kinds(),
            messages in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..40_000), 1..4),
            cut in 1usize..5_000,
        ) {
            let (mut ours, mut theirs) = (layer(version, cipher, 1, 2), layer(version, cipher, 2, 1));
            let mut wire = Vec::new();
            for m in &messages {
                ours.seal(m, &mut wire).expect("sealed");
            }
            let mut plain = Vec::new();
            for piece in wire.chunks(cut) {
                prop_assert_eq!(theirs.open(piece, &mut plain), Ok(Opened::Data));
            }
            prop_assert_eq!(plain, messages.concat());
        }
    }
}
