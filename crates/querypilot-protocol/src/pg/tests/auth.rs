use crate::pg::auth::{
    md5_response, md5_response_from_secret, md5_secret, md5_verify, DEFAULT_ITERATIONS, MAX_ITERATIONS,
    MAX_SERVER_MESSAGE,
};
use crate::pg::{Derivation, ScramClient, ScramError, ScramKeys, ScramSecret, ScramServer};
use base64::Engine as _;

// RFC 7677 section 3 test vector.
const CLIENT_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const SERVER_NONCE: &str = "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
const CLIENT_FIRST: &str = "n,,n=user,r=rOprNGfwEbeRWgbNEkqO";
const SERVER_FIRST: &str = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
const CLIENT_FINAL: &str =
    "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ=";
const SERVER_FINAL: &str = "v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
// Computed independently with Python's hashlib/hmac for the same password, salt and count.
const PENCIL_SECRET: &str = "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=";

fn rfc_salt() -> Vec<u8> {
    base64::engine::general_purpose::STANDARD.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap()
}

#[test]
fn md5_golden_value() {
    // echo -n secretpostgres | md5sum  -> 53f48b7c...; then md5(hex || 01 02 03 04) -> bb41a296...
    assert_eq!(md5_secret("postgres", "secret"), "md553f48b7c4b76a86ce72276c5755f217d");
    let want = "md5bb41a296aab6baccb36ff243a562abff";
    assert_eq!(md5_response("postgres", "secret", [1, 2, 3, 4]), want);
    assert!(md5_verify("md553f48b7c4b76a86ce72276c5755f217d", [1, 2, 3, 4], want));
    assert!(!md5_verify("md553f48b7c4b76a86ce72276c5755f217d", [1, 2, 3, 5], want));
    assert_eq!(md5_response_from_secret("md5xyz", [0; 4]), None);
}

#[test]
fn scram_client_rfc7677_vector() {
    let client = ScramClient::new("user", "pencil", CLIENT_NONCE).unwrap();
    assert_eq!(client.client_first(), CLIENT_FIRST);
    let (client_final, verifier) = client.handle_server_first(SERVER_FIRST.as_bytes()).unwrap();
    assert_eq!(client_final, CLIENT_FINAL);
    assert_eq!(verifier.verify_server_final(SERVER_FINAL.as_bytes()), Ok(()));
    let forged = "v=AAAATRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4=";
    assert_eq!(verifier.verify_server_final(forged.as_bytes()), Err(ScramError::ServerSignatureMismatch));
    assert_eq!(
        verifier.verify_server_final(b"e=invalid-proof"),
        Err(ScramError::ServerError("invalid-proof".to_owned()))
    );
}

#[test]
fn scram_server_rfc7677_vector() {
    let secret = ScramSecret::from_password("pencil", &rfc_salt(), DEFAULT_ITERATIONS);
    assert_eq!(ScramSecret::parse(PENCIL_SECRET), Ok(secret.clone()));
    let (server, server_first) = ScramServer::start(&secret, CLIENT_FIRST.as_bytes(), SERVER_NONCE).unwrap();
    assert_eq!(server_first, SERVER_FIRST);
    assert_eq!(server.finish(CLIENT_FINAL.as_bytes()), Ok(SERVER_FINAL.to_owned()));
}

#[test]
fn a_derivation_in_slices_gives_the_verifier_whatever_the_slicing() {
    let want = ScramSecret::parse(PENCIL_SECRET).unwrap();
    for slice in [1, 7, 64, 512, 4095, 4096, u32::MAX] {
        let mut d = Derivation::new("pencil", &rfc_salt(), DEFAULT_ITERATIONS).unwrap();
        let mut steps = 1;
        while !d.step(slice) {
            assert_ne!(d.secret(), want, "slice {slice}: the verifier before the last round");
            steps += 1;
        }
        assert_eq!(d.secret(), want, "slice {slice}");
        assert_eq!(steps, DEFAULT_ITERATIONS.saturating_sub(1).div_ceil(slice).max(1), "slice {slice}");
    }
    let mut one = Derivation::new("p,=ss", b"0123456789abcdef", 1).unwrap();
    assert!(one.step(0), "one round is the first block alone");
    assert_eq!(one.secret(), ScramSecret::from_password("p,=ss", b"0123456789abcdef", 1));
}

#[test]
fn scram_server_rejects_wrong_password() {
    let secret = ScramSecret::from_password("pencil", b"salt", DEFAULT_ITERATIONS);
    let client = ScramClient::new("", "crayon", "abc").unwrap();
    let (server, server_first) = ScramServer::start(&secret, client.client_first().as_bytes(), "xyz").unwrap();
    let (client_final, _) = client.handle_server_first(server_first.as_bytes()).unwrap();
    let err = server.finish(client_final.as_bytes()).unwrap_err();
    assert_eq!(err, ScramError::InvalidProof);
    assert_eq!(err.sqlstate(), "28P01");
}

#[test]
fn scram_both_sides_agree() {
    let secret = ScramSecret::from_password("p,=ss", b"0123456789abcdef", 16);
    let client = ScramClient::new("a,b=c", "p,=ss", "cnonce").unwrap();
    assert_eq!(client.client_first(), "n,,n=a=2Cb=3Dc,r=cnonce");
    let (server, server_first) = ScramServer::start(&secret, client.client_first().as_bytes(), "snonce").unwrap();
    let (client_final, verifier) = client.handle_server_first(server_first.as_bytes()).unwrap();
    let server_final = server.finish(client_final.as_bytes()).unwrap();
    assert_eq!(verifier.verify_server_final(server_final.as_bytes()), Ok(()));
}

#[test]
fn scram_server_accepts_y_flag_and_checks_binding_echo() {
    let secret = ScramSecret::from_password("pencil", b"salt", 16);
    let (server, first) = ScramServer::start(&secret, b"y,,n=,r=abc", "def").unwrap();
    assert!(first.starts_with("r=abcdef,"));
    // The client must echo base64("y,,") = "eSws", not "biws".
    assert!(matches!(server.finish(b"c=biws,r=abcdef,p=AAAA"), Err(ScramError::Malformed { .. })));
}

#[test]
fn scram_server_refusals() {
    let secret = ScramSecret::from_password("pencil", b"salt", 16);
    let start = |msg: &[u8]| ScramServer::start(&secret, msg, "srv").map(|_| ());
    assert_eq!(start(b"p=tls-server-end-point,,n=,r=abc"), Err(ScramError::ChannelBindingUnsupported));
    assert_eq!(start(b"n,a=admin,n=,r=abc"), Err(ScramError::AuthzidUnsupported));
    assert_eq!(start(b"n,,m=ext,n=,r=abc"), Err(ScramError::ExtensionUnsupported));
    assert_eq!(start(b"n,,n=,r=a,b"), Ok(()), "extensions after the nonce are ignored");
    assert_eq!(start(b"n,,n=,r="), Err(ScramError::InvalidNonce));
    assert!(matches!(start(b"x,,n=,r=abc"), Err(ScramError::Malformed { .. })));
    assert!(matches!(start(b"n,,r=abc"), Err(ScramError::Malformed { .. })));
    assert!(matches!(start(b"\xff"), Err(ScramError::Malformed { .. })));
    assert_eq!(ScramServer::start(&secret, b"n,,n=,r=abc", "bad,nonce").map(|_| ()), Err(ScramError::InvalidNonce));

    let (server, _) = ScramServer::start(&secret, b"n,,n=,r=abc", "srv").unwrap();
    assert_eq!(server.finish(b"c=biws,r=abcXXX,p=AAAA"), Err(ScramError::NonceMismatch));
    assert!(matches!(server.finish(b"c=biws,r=abcsrv"), Err(ScramError::Malformed { .. })));
    assert!(matches!(server.finish(b"c=biws,r=abcsrv,p=short"), Err(ScramError::Malformed { .. })));
}

#[test]
fn scram_client_refusals() {
    assert_eq!(ScramClient::new("", "pw", "").map(|_| ()), Err(ScramError::InvalidNonce));
    let client = ScramClient::new("", "pw", "abc").unwrap();
    let first = |msg: &str| client.handle_server_first(msg.as_bytes()).map(|_| ());
    assert_eq!(first("r=zzzdef,s=c2FsdA==,i=16"), Err(ScramError::NonceMismatch));
    assert_eq!(first("r=abc,s=c2FsdA==,i=16"), Err(ScramError::NonceMismatch));
    assert_eq!(first("m=x,r=abcdef,s=c2FsdA==,i=16"), Err(ScramError::ExtensionUnsupported));
    assert!(matches!(first("r=abcdef,s=!!,i=16"), Err(ScramError::Malformed { .. })));
    assert!(matches!(first("r=abcdef,s=c2FsdA==,i=0"), Err(ScramError::Malformed { .. })));
    assert!(matches!(first("r=abcdef,s=c2FsdA=="), Err(ScramError::Malformed { .. })));
}

#[test]
fn scram_debug_output_hides_secrets() {
    let client = ScramClient::new("", "hunter2", "abc").unwrap();
    let secret = ScramSecret::from_password("hunter2", b"salt", 2);
    assert_eq!(format!("{client:?} {secret:?}"), "ScramClient { .. } ScramSecret { .. }");
}

#[test]
fn scram_secret_parse_errors() {
    for bad in ["", "md5abc", "SCRAM-SHA-256$x:c2FsdA==$a:b", "SCRAM-SHA-256$16:c2FsdA==$AAAA:AAAA", "SCRAM-SHA-256$16"]
    {
        assert_eq!(ScramSecret::parse(bad), Err(ScramError::InvalidSecret), "{bad}");
    }
}

#[test]
fn scram_round_trip_with_random_salts_and_nonces() {
    use base64::Engine as _;
    let b64 = base64::engine::general_purpose::STANDARD;
    for i in 0..64u32 {
        let salt: [u8; 16] = rand::random();
        let secret = ScramSecret::from_password("app", &salt, 4096);
        let cnonce = b64.encode(rand::random::<[u8; 18]>());
        let snonce = b64.encode(rand::random::<[u8; 18]>());
        let client = ScramClient::new("", "app", &cnonce).expect("client");
        let (server, first) = ScramServer::start(&secret, client.client_first().as_bytes(), &snonce).expect("start");
        let (fin, verify) = client.handle_server_first(first.as_bytes()).expect("server first");
        let last = server.finish(fin.as_bytes()).unwrap_or_else(|e| panic!("round {i}: {e:?} salt={salt:?}"));
        verify.verify_server_final(last.as_bytes()).expect("server final");
    }
}

/// SCRAM pass-through (#23) with the RFC 7677 exchange: the router holds only the verifier,
/// recovers the client's ClientKey from its proof, and with it alone produces the very
/// client-final-message a client knowing "pencil" sends, and accepts the server's signature.
#[test]
fn scram_pass_through_recovers_the_client_key_from_the_rfc7677_proof() {
    let secret = ScramSecret::parse(PENCIL_SECRET).unwrap();
    let (server, _) = ScramServer::start(&secret, CLIENT_FIRST.as_bytes(), SERVER_NONCE).unwrap();
    let (server_final, client_key) = server.finish_with_key(CLIENT_FINAL.as_bytes()).unwrap();
    assert_eq!(server_final, SERVER_FINAL);
    let keys = ScramKeys {
        iterations: secret.iterations,
        salt: secret.salt.clone(),
        client_key,
        server_key: secret.server_key,
    };
    let relay = ScramClient::with_keys("user", keys.clone(), CLIENT_NONCE).unwrap();
    let (client_final, verifier) = relay.handle_server_first(SERVER_FIRST.as_bytes()).unwrap();
    assert_eq!(client_final, CLIENT_FINAL);
    assert_eq!(verifier.verify_server_final(SERVER_FINAL.as_bytes()), Ok(()));
    // Another salt or iteration count on the backend cannot be served from these keys.
    let other_salt = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=QSXCR+Q6sek8bf92,i=4096";
    assert_eq!(relay.handle_server_first(other_salt.as_bytes()).unwrap_err(), ScramError::VerifierMismatch);
    let more_rounds = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=8192";
    assert_eq!(relay.handle_server_first(more_rounds.as_bytes()).unwrap_err(), ScramError::VerifierMismatch);
    assert_eq!(format!("{keys:?}"), "ScramKeys { .. }", "key material never reaches a log");
}

/// A wrong proof yields no key at all.
#[test]
fn scram_pass_through_gives_no_key_for_a_wrong_password() {
    let secret = ScramSecret::from_password("pencil", b"salt", 16);
    let client = ScramClient::new("", "crayon", "abc").unwrap();
    let (server, server_first) = ScramServer::start(&secret, client.client_first().as_bytes(), "xyz").unwrap();
    let (client_final, _) = client.handle_server_first(server_first.as_bytes()).unwrap();
    assert_eq!(server.finish_with_key(client_final.as_bytes()).unwrap_err(), ScramError::InvalidProof);
}

/// A hostile backend's SCRAM messages (PgBouncer CVE-2026-6669 and CVE-2026-6665 classes):
/// refused before any key derivation, with the cap named.
#[test]
fn scram_client_caps_what_a_backend_may_demand() {
    let client = ScramClient::new("", "pw", "abc").unwrap();
    let derived = std::cell::Cell::new(0u32);
    let first = |msg: &[u8]| {
        client
            .handle_server_first_with(msg, |p, s, i| {
                derived.set(i);
                crate::pg::auth::scram_keys(p, s, i)
            })
            .map(|_| ())
    };
    let too_many = |demanded| Err(ScramError::TooManyIterations { demanded, max: MAX_ITERATIONS });
    assert_eq!(first(b"r=abcdef,s=c2FsdA==,i=100001"), too_many(100_001));
    assert_eq!(first(b"r=abcdef,s=c2FsdA==,i=4294967295"), too_many(u64::from(u32::MAX)));
    assert_eq!(first(b"r=abcdef,s=c2FsdA==,i=4294967296"), too_many(1 << 32));
    assert_eq!(first(b"r=abcdef,s=c2FsdA==,i=99999999999999999999999999"), too_many(u64::MAX));
    assert_eq!(derived.get(), 0, "nothing derived for a refused count");
    let message = first(b"r=abcdef,s=c2FsdA==,i=1000000").unwrap_err().to_string();
    assert!(message.contains("1000000") && message.contains("100000 the router accepts"), "{message}");
    for count in ["-1", "+16", "1e3", "", " 16", "0x10", "00"] {
        let msg = format!("r=abcdef,s=c2FsdA==,i={count}");
        assert_eq!(first(msg.as_bytes()), Err(ScramError::Malformed { what: "iteration count" }), "{count:?}");
    }
    // The cap itself is accepted.
    assert_eq!(first(format!("r=abcdef,s=c2FsdA==,i={MAX_ITERATIONS}").as_bytes()), Ok(()));
    assert_eq!(derived.get(), MAX_ITERATIONS);
    // An oversized message (a megabyte of salt) is refused by its length alone.
    let salt = "A".repeat(MAX_SERVER_MESSAGE);
    let long = format!("r=abcdef,s={salt},i=16");
    assert!(matches!(first(long.as_bytes()), Err(ScramError::MessageTooLong { max: MAX_SERVER_MESSAGE, .. })));
    let (_, fin) = client.handle_server_first(b"r=abcdef,s=c2FsdA==,i=16").unwrap();
    let long_final = format!("v={}", "A".repeat(MAX_SERVER_MESSAGE));
    assert!(matches!(fin.verify_server_final(long_final.as_bytes()), Err(ScramError::MessageTooLong { .. })));
    // Malformed server messages of every kind are errors, never panics.
    for msg in [&b"\xff\xfe"[..], b"", b",,,", b"r=", b"r=abc\x00def,s=c2FsdA==,i=16"] {
        assert!(first(msg).is_err(), "{msg:?}");
    }
    for msg in [&b""[..], b"v=", b"v=!!", b"e=", b"\xff", b"v=c2FsdA=="] {
        assert!(fin.verify_server_final(msg).is_err(), "{msg:?}");
    }
}

// ---- channel binding, server side (tls-server-end-point, #38) ----

/// The client-final-message of `password` for the exchange `start` began, with `c=` = `binding`
/// (base64 of the gs2 header and the channel binding data), as a binding client computes it.
fn bound_final(
    password: &str,
    secret: &ScramSecret,
    client_first_bare: &str,
    server_first: &str,
    binding: &[u8],
) -> String {
    use hmac::{Hmac, Mac};
    use sha2::{Digest, Sha256};
    let b64 = base64::engine::general_purpose::STANDARD;
    let (client_key, _) = crate::pg::auth::scram_keys(password, &secret.salt, secret.iterations);
    let nonce = server_first.split(',').next().unwrap().trim_start_matches("r=");
    let without_proof = format!("c={},r={nonce}", b64.encode(binding));
    let mut mac = Hmac::<Sha256>::new_from_slice(&Sha256::digest(client_key)).unwrap();
    mac.update(format!("{client_first_bare},{server_first},{without_proof}").as_bytes());
    let signature = mac.finalize().into_bytes();
    let proof: Vec<u8> = client_key.iter().zip(signature.iter()).map(|(k, s)| k ^ s).collect();
    format!("{without_proof},p={}", b64.encode(proof))
}

#[test]
fn scram_plus_checks_the_binding_data_against_the_servers_certificate_hash() {
    use crate::pg::Binding;
    let secret = ScramSecret::from_password("pencil", b"salt", 16);
    let cert_hash = [7u8; 32];
    let first = "p=tls-server-end-point,,n=,r=abc";
    let (server, server_first) =
        ScramServer::start_bound(&secret, first.as_bytes(), "def", Binding::Required(&cert_hash)).unwrap();
    let header = b"p=tls-server-end-point,,";
    let right = bound_final("pencil", &secret, "n=,r=abc", &server_first, &[&header[..], &cert_hash].concat());
    assert!(server.finish(right.as_bytes()).is_ok(), "the router's own certificate hash");
    // Another certificate's hash (an interceptor's): refused, even with the right password.
    let other = bound_final("pencil", &secret, "n=,r=abc", &server_first, &[&header[..], &[8u8; 32]].concat());
    assert!(matches!(server.finish(other.as_bytes()), Err(ScramError::Malformed { .. })));
}

#[test]
fn scram_binding_negotiation_refusals() {
    use crate::pg::Binding;
    let secret = ScramSecret::from_password("pencil", b"salt", 16);
    let start = |msg: &[u8], b| ScramServer::start_bound(&secret, msg, "srv", b).map(|_| ());
    let data = Binding::Required(&[1, 2, 3]);
    // PLUS chosen, but the flag says no binding.
    assert_eq!(start(b"n,,n=,r=abc", data), Err(ScramError::BindingNegotiation));
    assert_eq!(start(b"y,,n=,r=abc", data), Err(ScramError::BindingNegotiation));
    assert_eq!(start(b"p=tls-unique,,n=,r=abc", data), Err(ScramError::ChannelBindingUnsupported));
    // PLUS offered, plain SCRAM chosen: `y` (a downgrade) and `p=` are refused, `n` is fine.
    assert_eq!(start(b"y,,n=,r=abc", Binding::Declined), Err(ScramError::BindingNegotiation));
    assert_eq!(start(b"p=tls-server-end-point,,n=,r=abc", Binding::Declined), Err(ScramError::BindingNegotiation));
    assert_eq!(start(b"n,,n=,r=abc", Binding::Declined), Ok(()));
    // Nothing offered: `y` is fine.
    assert_eq!(start(b"y,,n=,r=abc", Binding::Unavailable), Ok(()));
}
