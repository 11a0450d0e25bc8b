//! Loads every pool's backend TLS files (#38) into an immutable rustls client configuration,
//! and every listener's certificate, key and client CA into an immutable server configuration,
//! at start and on every reload, on the control thread: the cores only ever see the finished
//! `Arc<ClientConfig>` / `Arc<ServerConfig>`, and a file that is missing, unreadable or not PEM
//! fails the load with the pool or listener, the key and the reason, before any connection is
//! tried (on reload the old configuration keeps serving).

use std::path::Path;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::{Resumption, WebPkiServerVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::server::{NoServerSessionStorage, WebPkiClientVerifier};
use rustls::{CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig, SignatureScheme};

use sha2::{Digest as _, Sha256};

use super::ControlError;
use crate::config::{BackendTls, ClientTls, Config, ListenerTls, Protocol, TlsClient, TlsMode, TlsServer};

/// ALPN protocol of PostgreSQL over TLS (protocol 55.2.10; what direct TLS requires). The
/// session checks it as `protocol::pg::startup::ALPN`, which this layer may not use.
const PG_ALPN: &[u8] = b"postgresql";

/// Loads every TLS file the configuration names: the pools' ([`load_backend_tls`]) and the
/// listeners' ([`load_listener_tls`]).
pub fn load_tls(config: &mut Config) -> Result<(), ControlError> {
    load_backend_tls(config)?;
    load_listener_tls(config)
}

/// Fills `tls.server` of every listener whose `tls` is not `disable`.
pub fn load_listener_tls(config: &mut Config) -> Result<(), ControlError> {
    for listener in &mut config.listeners {
        if listener.tls.mode == ClientTls::Disable {
            continue;
        }
        let mut digest = Sha256::new();
        let (built, end_point) = server_config(&listener.tls, listener.protocol, &mut digest)
            .map_err(|reason| ControlError::ListenerTls { listener: listener.name.clone(), reason })?;
        let files = digest.finalize().into();
        listener.tls.server = Some(TlsServer { config: Arc::new(built), files, end_point: end_point.map(Into::into) });
    }
    Ok(())
}

/// The server configuration `tls` describes for a `protocol` listener: TLS 1.2 at least, the
/// certificate chain and key of the files, client certificates demanded and verified when there
/// is a client CA, and ALPN `postgresql` on PostgreSQL listeners; with the channel binding data
/// of its certificate (`None`: it can be bound to by no hash).
fn server_config(
    tls: &ListenerTls,
    protocol: Protocol,
    digest: &mut Sha256,
) -> Result<(ServerConfig, Option<Vec<u8>>), String> {
    // See `client_config` for the provider.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = match &tls.client_ca_file {
        Some(file) => {
            let mut roots = RootCertStore::empty();
            for cert in certificates(file, "tls_client_ca_file", digest)? {
                roots.add(cert).map_err(|e| format!("tls_client_ca_file {}: {e}", file.display()))?;
            }
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("tls_client_ca_file {}: {e}", file.display()))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let (Some(cert), Some(key)) = (&tls.cert_file, &tls.key_file) else {
        return Err("tls_cert_file and tls_key_file are required unless tls = \"disable\"".into());
    };
    let chain = certificates(cert, "tls_cert_file", digest)?;
    let end_point = chain.first().and_then(|leaf| crate::auth::certificate::end_point(leaf));
    let key = PrivateKeyDer::from_pem_slice(&read(key, "tls_key_file", digest)?)
        .map_err(|e| format!("tls_key_file {}: no PEM private key in it ({e})", key.display()))?;
    let mut config =
        builder.with_single_cert(chain, key).map_err(|e| format!("tls_cert_file and tls_key_file: {e}"))?;
    if protocol == Protocol::Postgres {
        config.alpn_protocols = vec![PG_ALPN.to_vec()];
    }
    // No session store: TLS state stays in the connection and its core (DESIGN.md). With
    // `tls_resumption` the one shared state is the ticket key: clients keep their sessions,
    // sealed under it, and any core opens them (a lock read per ticket, rustls' rotation every
    // 6 h the only writer). A key per load: a reload forgets the tickets issued before it, so no
    // session resumes under a certificate, client CA or mode the listener no longer has.
    config.session_storage = Arc::new(NoServerSessionStorage {});
    // A binary upgrade takes established sessions to the new process (#40, `rt::hand_off`).
    config.enable_secret_extraction = true;
    if tls.resumption {
        config.ticketer = rustls::crypto::ring::Ticketer::new().map_err(|e| format!("tls_resumption: {e}"))?;
    } else {
        config.send_tls13_tickets = 0;
    }
    Ok((config, end_point))
}

/// Fills `tls.client` of every pool whose `tls` is not `disable`.
pub fn load_backend_tls(config: &mut Config) -> Result<(), ControlError> {
    for pool in &mut config.pools {
        if pool.tls.mode == TlsMode::Disable {
            continue;
        }
        let mut digest = Sha256::new();
        let built = client_config(&pool.tls, &mut digest)
            .map_err(|reason| ControlError::BackendTls { pool: pool.name.clone(), reason })?;
        pool.tls.client = Some(TlsClient { config: Arc::new(built), files: digest.finalize().into() });
    }
    Ok(())
}

/// The client configuration `tls` describes; `digest` takes in every file read, so that a reload
/// that changed none of them keeps the pool (and its connections).
fn client_config(tls: &BackendTls, digest: &mut Sha256) -> Result<ClientConfig, String> {
    // ring, as chosen for the build (Cargo.toml); rustls 0.23.48 deprecates it for lacking
    // post-quantum key exchange, which the servers it talks to (OpenSSL before 3.5) do not
    // offer either. TODO(#38): revisit with the provider choice for client TLS.
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let verifier: Arc<dyn ServerCertVerifier> = if tls.mode.verifies() {
        let roots = Arc::new(roots(tls.ca_file.as_deref(), digest)?);
        let webpki =
            WebPkiServerVerifier::builder_with_provider(roots, provider.clone()).build().map_err(|e| e.to_string())?;
        Arc::new(Verify { webpki, check_name: tls.mode == TlsMode::VerifyFull })
    } else {
        Arc::new(Unverified(provider))
    };
    let builder = builder.dangerous().with_custom_certificate_verifier(verifier);
    let mut config = match (&tls.cert_file, &tls.key_file) {
        (Some(cert), Some(key)) => {
            let chain = certificates(cert, "tls_cert_file", digest)?;
            let key = PrivateKeyDer::from_pem_slice(&read(key, "tls_key_file", digest)?)
                .map_err(|e| format!("tls_key_file {}: no PEM private key in it ({e})", key.display()))?;
            builder.with_client_auth_cert(chain, key).map_err(|e| format!("tls_cert_file and tls_key_file: {e}"))?
        }
        _ => builder.with_no_client_auth(),
    };
    // A server connection owned by a session moves with it in a binary upgrade (#40).
    config.enable_secret_extraction = true;
    // No session cache: PostgreSQL servers resume nothing (no tickets, no session cache), and
    // rustls' cache is one locked store per configuration that every core would write at each
    // handshake, where TLS state stays in the connection and its core (DESIGN.md). A full
    // handshake per backend connection, which pooling amortises. TODO(#38): resumption towards
    // MySQL 8 servers, with a cache per core and pool.
    config.resumption = Resumption::disabled();
    Ok(config)
}

/// The roots the server's chain must lead to: `tls_ca_file`'s certificates, else Mozilla's.
fn roots(ca_file: Option<&Path>, digest: &mut Sha256) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    let Some(file) = ca_file else {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        return Ok(roots);
    };
    for cert in certificates(file, "tls_ca_file", digest)? {
        roots.add(cert).map_err(|e| format!("tls_ca_file {}: {e}", file.display()))?;
    }
    Ok(roots)
}

fn read(path: &Path, key: &str, digest: &mut Sha256) -> Result<Vec<u8>, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{key} {}: {e}", path.display()))?;
    // Length-prefixed, so that no two sets of files digest alike by shifting bytes between them.
    digest.update(key.as_bytes());
    digest.update((bytes.len() as u64).to_le_bytes());
    digest.update(&bytes);
    Ok(bytes)
}

/// Every PEM certificate of `path`; at least one.
fn certificates(path: &Path, key: &str, digest: &mut Sha256) -> Result<Vec<CertificateDer<'static>>, String> {
    let bytes = read(path, key, digest)?;
    let certs: Vec<_> = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<_, _>>()
        .map_err(|e| format!("{key} {}: not PEM ({e})", path.display()))?;
    if certs.is_empty() {
        return Err(format!("{key} {}: no PEM certificate in it", path.display()));
    }
    Ok(certs)
}

/// `verify-full` and `verify-ca`: the chain as webpki checks it; `verify-ca` forgives only a
/// name the certificate is not valid for, which webpki checks after the chain, so the chain
/// was found good when that is the error.
#[derive(Debug)]
struct Verify {
    webpki: Arc<WebPkiServerVerifier>,
    check_name: bool,
}

impl ServerCertVerifier for Verify {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self.webpki.verify_server_cert(end_entity, intermediates, server_name, ocsp, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) if !self.check_name => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }
}

/// `prefer` and `require`: encrypted, whoever the server is (libpq's `require` without a root
/// file). The handshake's own signatures are still checked, so the session keys are the ones
/// the certificate's holder agreed.
#[derive(Debug)]
struct Unverified(Arc<CryptoProvider>);

impl ServerCertVerifier for Unverified {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(message, cert, dss, &self.0.signature_verification_algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(pool_keys: &str) -> Config {
        let text = format!(
            "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:6432\"\n\n[pools.main]\n\
             backends = [{{ host = \"db\", port = 5432 }}]\n{pool_keys}\n\n[routing]\ndefault_pool = \"main\"\n"
        );
        Config::parse(&text, "test.toml").unwrap_or_else(|e| panic!("{e}"))
    }

    fn load(pool_keys: &str) -> Result<Config, String> {
        let mut c = config(pool_keys);
        load_backend_tls(&mut c).map(|()| c).map_err(|e| e.to_string())
    }

    #[test]
    fn modes_without_files_build_a_client_and_disable_builds_none() {
        for mode in ["prefer", "require", "verify-ca", "verify-full"] {
            let c = load(&format!("tls = \"{mode}\"")).unwrap_or_else(|e| panic!("{mode}: {e}"));
            assert!(c.pools[0].tls.client.is_some(), "{mode}");
        }
        assert!(load("").expect("disable").pools[0].tls.client.is_none());
    }

    /// The digest over `tls`'s files as they are now (whether or not they make a configuration).
    fn files_digest(tls: &BackendTls) -> [u8; 32] {
        let mut digest = Sha256::new();
        let _ = client_config(tls, &mut digest);
        digest.finalize().into()
    }

    #[test]
    fn a_reload_with_the_same_files_keeps_the_pool_and_a_changed_file_does_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let ca = dir.path().join("ca.pem");
        let tls = config(&format!("tls = \"verify-ca\"\ntls_ca_file = \"{}\"", ca.display())).pools[0].tls.clone();
        // The digest is over the file's bytes: they need not be a usable certificate.
        let pem = |body: &str| format!("-----BEGIN CERTIFICATE-----\n{body}\n-----END CERTIFICATE-----\n");
        std::fs::write(&ca, pem("MAMCAQA=")).expect("write");
        let one = files_digest(&tls);
        assert_eq!(files_digest(&tls), one, "same files, same digest");
        std::fs::write(&ca, pem("MAMCAQE=")).expect("rewrite");
        assert_ne!(files_digest(&tls), one, "a changed file, another digest");
    }

    #[test]
    fn a_missing_file_names_pool_key_and_path() {
        let e = load("tls = \"verify-full\"\ntls_ca_file = \"/nonexistent/qp-ca.pem\"").expect_err("missing");
        assert!(e.starts_with("pool \"main\": tls_ca_file /nonexistent/qp-ca.pem: "), "{e}");
    }

    #[test]
    fn a_file_without_pem_certificates_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").expect("write");
        let e = load(&format!("tls = \"verify-ca\"\ntls_ca_file = \"{}\"", junk.display())).expect_err("junk");
        assert_eq!(e, format!("pool \"main\": tls_ca_file {}: no PEM certificate in it", junk.display()));
        let keys = format!("tls = \"require\"\ntls_cert_file = \"{0}\"\ntls_key_file = \"{0}\"", junk.display());
        let e = load(&keys).expect_err("junk client certificate");
        assert_eq!(e, format!("pool \"main\": tls_cert_file {}: no PEM certificate in it", junk.display()));
    }

    #[test]
    fn a_malformed_pem_block_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let bad = dir.path().join("bad.pem");
        std::fs::write(&bad, "-----BEGIN CERTIFICATE-----\n@@@@\n-----END CERTIFICATE-----\n").expect("write");
        let e = load(&format!("tls = \"verify-ca\"\ntls_ca_file = \"{}\"", bad.display())).expect_err("bad");
        assert!(e.starts_with(&format!("pool \"main\": tls_ca_file {}: not PEM", bad.display())), "{e}");
    }

    fn load_listener(keys: &str) -> Result<Config, String> {
        let text = format!(
            "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:6432\"\n{keys}\n\n[pools.main]\n\
             backends = [{{ host = \"db\", port = 5432 }}]\n\n[routing]\ndefault_pool = \"main\"\n"
        );
        let mut c = Config::parse(&text, "test.toml").unwrap_or_else(|e| panic!("{e}"));
        load_tls(&mut c).map(|()| c).map_err(|e| e.to_string())
    }

    #[test]
    fn a_listener_without_tls_builds_no_server() {
        assert!(load_listener("").expect("disable").listeners[0].tls.server.is_none());
    }

    #[test]
    fn a_missing_listener_file_names_listener_key_and_path() {
        let keys =
            "tls = \"require\"\ntls_cert_file = \"/nonexistent/qp-s.pem\"\ntls_key_file = \"/nonexistent/qp-k.pem\"";
        let e = load_listener(keys).expect_err("missing");
        assert!(e.starts_with("listener \"postgres-0\": tls_cert_file /nonexistent/qp-s.pem: "), "{e}");
    }

    #[test]
    fn a_listener_file_without_pem_is_refused() {
        let dir = tempfile::tempdir().expect("tempdir");
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate\n").expect("write");
        let keys = format!("tls = \"allow\"\ntls_cert_file = \"{0}\"\ntls_key_file = \"{0}\"", junk.display());
        let e = load_listener(&keys).expect_err("junk");
        assert_eq!(e, format!("listener \"postgres-0\": tls_cert_file {}: no PEM certificate in it", junk.display()));
        let keys = format!("{keys}\ntls_client_ca_file = \"{}\"", junk.display());
        let e = load_listener(&keys).expect_err("junk CA");
        assert_eq!(
            e,
            format!("listener \"postgres-0\": tls_client_ca_file {}: no PEM certificate in it", junk.display())
        );
    }
}
