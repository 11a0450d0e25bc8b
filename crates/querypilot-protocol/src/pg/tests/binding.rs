//! SCRAM channel binding (#38): `tls-server-end-point` data of real certificates, checked
//! against `openssl x509 -outform der | sha256sum` / `sha384sum`, and a bound client exchange on
//! RFC 7677's vector whose proof is recomputed here from RFC 5802's definitions.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use hmac::{Hmac, Mac};
use sha2::{Digest as _, Sha256};

use crate::pg::auth::scram_keys;
use crate::pg::binding::{tls_server_end_point, ChannelBinding};
use crate::pg::ScramClient;

// Made with `openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -sha256`,
// `-newkey rsa:1024 -sha384` and `-newkey ed25519`, as base64 DER.
const EC_SHA256_CERT: &str = concat!(
    "MIIBbjCCAROgAwIBAgIUXbE9PiqPrk7IQtJuH0cO1XZdIPgwCgYIKoZIzj0EAwIwDDEKMAgGA1UEAwwBYTAeFw0yNjEyMDYw",
    "MTI2NTRaFw0yNjEyMDcwMTI2NTRaMAwxCjAIBgNVBAMMAWEwWTATBgcqhkjOPQIBBggqhkjOPQMBBwNCAAQy8Q4MvDi1ck40",
    "04iENktiFIi6HbZ7qqFsfMtlnJIyy4BS5BJ42xhwdB0qBBc68XyR3XSvfKSrMLFzEVusTxsvo1MwUTAdBgNVHQ4EFgQU/4TE",
    "Kmza0r9sVDBEFHiCXA2LlM0wHwYDVR0jBBgwFoAU/4TEKmza0r9sVDBEFHiCXA2LlM0wDwYDVR0TAQH/BAUwAwEB/zAKBggq",
    "hkjOPQQDAgNJADBGAiEAyEGOwc9QeQtG5BXeJ0EpMOhW55Up+z2vmB7kYyR4e9QCIQD6xqsotmgUZrnh+89BSvK0DZB71+e0",
    "MV1rNiLMjWOssw==",
);
const RSA_SHA384_CERT: &str = concat!(
    "MIIB9DCCAV2gAwIBAgIUC1l6AixHIf3dNYr83HVs62P40k8wDQYJKoZIhvcNAQEMBQAwDDEKMAgGA1UEAwwBYjAeFw0yNjEy",
    "MDYwMTI2NTRaFw0yNjEyMDcwMTI2NTRaMAwxCjAIBgNVBAMMAWIwgZ8wDQYJKoZIhvcNAQEBBQADgY0AMIGJAoGBANve5c76",
    "e/3vLtB6lIu2eQM+XrOFDURXTYSFpqmb2o+cuzhOE/Qw4FMMFTCkN20dmGVgA/Crs+sMr7C8qzJcwYW8/uHzq4D/2l95XYR6",
    "9SUVEO4m7kQUtSQjbOD0r9yYm1zmKd3enwcLqVCh88T7UmeTOzF8/mXZGuRGb1dj6GlBAgMBAAGjUzBRMB0GA1UdDgQWBBRX",
    "m89w/6Qn/Kt6mKlTPMQJOkwAJjAfBgNVHSMEGDAWgBRXm89w/6Qn/Kt6mKlTPMQJOkwAJjAPBgNVHRMBAf8EBTADAQH/MA0G",
    "CSqGSIb3DQEBDAUAA4GBAFhOwNyRgevSx6vJM5iwXw9/uLaGL0li8My/Js9W0Kavp4JOT5oX2g59xPxA5jeWbjzrUsCWl/iC",
    "x6j8+UC9wUW1OdFtmaOOZ+Rttm8CD9vfwmUtrEclugcAI8ULHriRWVB8bobupYgZmUBVV/wAVm4gkl7nF3j9AjPwVV5Ug9He",
);
const ED25519_CERT: &str = concat!(
    "MIIBLDCB36ADAgECAhRgUoxmUcBkzHFG6wJXjrLZKQktbDAFBgMrZXAwDDEKMAgGA1UEAwwBYzAeFw0yNjEyMDYwMTI2NTRa",
    "Fw0yNjEyMDcwMTI2NTRaMAwxCjAIBgNVBAMMAWMwKjAFBgMrZXADIQCgO94cGigwAzHud9sCfllVAvHyqb+MtEYaku10bkJC",
    "baNTMFEwHQYDVR0OBBYEFBBtUDlFt0pxnQw/Rj76If7LOq1EMB8GA1UdIwQYMBaAFBBtUDlFt0pxnQw/Rj76If7LOq1EMA8G",
    "A1UdEwEB/wQFMAMBAf8wBQYDK2VwA0EA7dbRZiwbWnwos2NODW9McUlZVFSRhviWWVT13ugAZEWvWIXv/5FcE4MxpLZ9PyBK",
    "SfkT37lqfjjzZJrKLd+IBQ==",
);

/// `sha256sum` of the EC certificate's DER.
const EC_SHA256: &str = "8be9963f7b5bf7ccec35277cdca6c62545a43b64736a6f111187076c851513dc";
/// `sha384sum` of the RSA certificate's DER.
const RSA_SHA384: &str =
    "04fe85360c95702c618e36fb378c5e1f50a707256dbe34df851d2b416cac2ebf99dd80d1ec2debb8fc30b1e995d639c7";

const CLIENT_NONCE: &str = "rOprNGfwEbeRWgbNEkqO";
const SERVER_FIRST: &str = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";

fn der(b64: &str) -> Vec<u8> {
    B64.decode(b64).unwrap()
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn the_end_point_hash_follows_the_certificates_signature_algorithm() {
    let ec = tls_server_end_point(&der(EC_SHA256_CERT)).expect("ecdsa-with-SHA256");
    assert_eq!(hex(&ec), EC_SHA256);
    let rsa = tls_server_end_point(&der(RSA_SHA384_CERT)).expect("sha384WithRSAEncryption");
    assert_eq!(hex(&rsa), RSA_SHA384);
    // Ed25519 names no hash: nothing to bind to, as for PostgreSQL.
    assert_eq!(tls_server_end_point(&der(ED25519_CERT)), None);
}

#[test]
fn what_is_no_certificate_has_no_end_point() {
    let cert = der(EC_SHA256_CERT);
    assert_eq!(tls_server_end_point(&[]), None);
    assert_eq!(tls_server_end_point(b"not a certificate"), None);
    for cut in [1, 2, 4, 100, cert.len() - 80] {
        assert_eq!(tls_server_end_point(&cert[..cut]), None, "cut at {cut}");
    }
    // A length field of more than four bytes is refused before any arithmetic on it.
    assert_eq!(tls_server_end_point(&[0x30, 0x85, 1, 0, 0, 0, 0]), None);
}

#[test]
fn gs2_headers_and_c_attributes() {
    assert_eq!(ChannelBinding::Unsupported.gs2_header(), "n,,");
    assert_eq!(ChannelBinding::Unsupported.c_attribute(), "biws");
    assert_eq!(ChannelBinding::NotOffered.gs2_header(), "y,,");
    assert_eq!(ChannelBinding::NotOffered.c_attribute(), "eSws");
    let bound = ChannelBinding::TlsServerEndPoint(vec![1, 2, 3]);
    assert_eq!(bound.gs2_header(), "p=tls-server-end-point,,");
    assert_eq!(B64.decode(bound.c_attribute()).unwrap(), b"p=tls-server-end-point,,\x01\x02\x03");
}

/// RFC 5802 section 3: (ClientProof, ServerSignature) for `auth_message`, as base64.
fn expected_proof_and_signature(auth_message: &str) -> (String, String) {
    let salt = B64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
    let (client_key, server_key) = scram_keys("pencil", &salt, 4096);
    let stored_key = Sha256::digest(client_key);
    let sign = |key: &[u8]| {
        let mut mac = Hmac::<Sha256>::new_from_slice(key).unwrap();
        mac.update(auth_message.as_bytes());
        mac.finalize().into_bytes()
    };
    let signature = sign(&stored_key);
    let proof: Vec<u8> = client_key.iter().zip(signature.iter()).map(|(k, s)| k ^ s).collect();
    (B64.encode(proof), B64.encode(sign(&server_key)))
}

#[test]
fn a_bound_exchange_puts_the_binding_in_its_header_c_attribute_and_proof() {
    let hash = tls_server_end_point(&der(EC_SHA256_CERT)).unwrap();
    let binding = ChannelBinding::TlsServerEndPoint(hash.clone());
    let client = ScramClient::new("user", "pencil", CLIENT_NONCE).unwrap().bound(binding);
    assert_eq!(client.client_first(), "p=tls-server-end-point,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    let (client_final, verifier) = client.handle_server_first(SERVER_FIRST.as_bytes()).unwrap();
    let c = B64.encode([&b"p=tls-server-end-point,,"[..], &hash].concat());
    let without_proof = format!("c={c},r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0");
    let auth_message = format!("n=user,r={CLIENT_NONCE},{SERVER_FIRST},{without_proof}");
    let (proof, signature) = expected_proof_and_signature(&auth_message);
    assert_eq!(client_final, format!("{without_proof},p={proof}"));
    assert_eq!(verifier.verify_server_final(format!("v={signature}").as_bytes()), Ok(()));
}

#[test]
fn another_certificate_makes_another_proof() {
    // What a server with another certificate (an interceptor's) checks the proof against.
    let final_for = |cert: &str| {
        let binding = ChannelBinding::TlsServerEndPoint(tls_server_end_point(&der(cert)).unwrap());
        let client = ScramClient::new("user", "pencil", CLIENT_NONCE).unwrap().bound(binding);
        client.handle_server_first(SERVER_FIRST.as_bytes()).unwrap().0
    };
    let (ec, rsa) = (final_for(EC_SHA256_CERT), final_for(RSA_SHA384_CERT));
    let proof = |f: &str| f.rsplit_once(",p=").unwrap().1.to_owned();
    assert_ne!(proof(&ec), proof(&rsa));
    // `y`: no binding data, but the flag is part of what the proof covers.
    let y = ScramClient::new("user", "pencil", CLIENT_NONCE).unwrap().bound(ChannelBinding::NotOffered);
    assert_eq!(y.client_first(), "y,,n=user,r=rOprNGfwEbeRWgbNEkqO");
    let (y_final, _) = y.handle_server_first(SERVER_FIRST.as_bytes()).unwrap();
    assert!(y_final.starts_with("c=eSws,r="), "{y_final}");
    let plain = ScramClient::new("user", "pencil", CLIENT_NONCE).unwrap();
    assert_ne!(proof(&y_final), proof(&plain.handle_server_first(SERVER_FIRST.as_bytes()).unwrap().0));
}
