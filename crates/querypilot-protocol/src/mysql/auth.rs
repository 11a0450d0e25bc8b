//! Authentication math (Client/Server Protocol, "Authentication Methods"):
//! `mysql_native_password` (SHA-1) for both sides, and what a `caching_sha2_password` client — the
//! router towards a backend — sends: the fast-path token (SHA-256) and, for full authentication
//! without TLS, the password encrypted with the server's RSA public key. Cleartext over TLS is not
//! here (the router speaks no TLS).

use rsa::pkcs1::DecodeRsaPublicKey;
use rsa::pkcs8::DecodePublicKey;
use rsa::rand_core::CryptoRngCore;
use rsa::{Oaep, RsaPublicKey};
use sha1::{Digest, Sha1};
use sha2::Sha256;

/// Plugin name of the SHA-1 challenge/response method.
pub const MYSQL_NATIVE_PASSWORD: &[u8] = b"mysql_native_password";
/// Plugin name of MySQL 8's default method.
pub const CACHING_SHA2_PASSWORD: &[u8] = b"caching_sha2_password";
/// Plugin name of the cleartext method (only ever over TLS).
pub const MYSQL_CLEAR_PASSWORD: &[u8] = b"mysql_clear_password";

/// Length of a `mysql_native_password` token (a SHA-1 digest).
pub const NATIVE_TOKEN_LEN: usize = 20;
/// Length of a `caching_sha2_password` fast-path token (a SHA-256 digest).
pub const SHA2_TOKEN_LEN: usize = 32;

fn xor<const N: usize>(a: [u8; N], b: [u8; N]) -> [u8; N] {
    let mut out = a;
    for (o, k) in out.iter_mut().zip(b) {
        *o ^= k;
    }
    out
}

fn sha1(parts: &[&[u8]]) -> [u8; NATIVE_TOKEN_LEN] {
    let mut h = Sha1::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

fn sha256(parts: &[&[u8]]) -> [u8; SHA2_TOKEN_LEN] {
    let mut h = Sha256::new();
    for p in parts {
        h.update(p);
    }
    h.finalize().into()
}

/// `SHA1(password) XOR SHA1(scramble + SHA1(SHA1(password)))`: the client's answer to a
/// `mysql_native_password` challenge. An empty password is answered with an empty response, not
/// with this token; callers check that first.
#[must_use]
pub fn native_password_token(password: &[u8], scramble: &[u8]) -> [u8; NATIVE_TOKEN_LEN] {
    let stage1 = sha1(&[password]);
    let stage2 = sha1(&[&stage1]);
    xor(stage1, sha1(&[scramble, &stage2]))
}

/// The stored form of a native password, `SHA1(SHA1(password))` (`mysql.user` shows it as `*HEX`).
#[must_use]
pub fn native_password_hash(password: &[u8]) -> [u8; NATIVE_TOKEN_LEN] {
    sha1(&[&sha1(&[password])])
}

/// Server side: whether `response` proves knowledge of `password` for `scramble`. An empty
/// password matches only an empty response. Constant time in the response contents.
#[must_use]
pub fn native_password_verify(password: &[u8], scramble: &[u8], response: &[u8]) -> bool {
    if password.is_empty() {
        return response.is_empty();
    }
    constant_time_eq(&native_password_token(password, scramble), response)
}

/// Server side with only the stored hash `SHA1(SHA1(password))`: recover the candidate
/// `SHA1(password)` from the response and check that hashing it gives the stored value.
#[must_use]
pub fn native_password_verify_hash(stored: &[u8; NATIVE_TOKEN_LEN], scramble: &[u8], response: &[u8]) -> bool {
    native_password_recover(stored, scramble, response).is_some()
}

/// Server side with only the stored hash, for pass-through (#23): the client's `SHA1(password)`
/// recovered from its response when the response is right (`None` otherwise). With it the router
/// answers a backend's challenge as the client would, see [`native_password_token_from_stage1`].
#[must_use]
pub fn native_password_recover(
    stored: &[u8; NATIVE_TOKEN_LEN],
    scramble: &[u8],
    response: &[u8],
) -> Option<[u8; NATIVE_TOKEN_LEN]> {
    let response = <[u8; NATIVE_TOKEN_LEN]>::try_from(response).ok()?;
    let candidate = xor(response, sha1(&[scramble, stored]));
    constant_time_eq(&sha1(&[&candidate]), stored).then_some(candidate)
}

/// The `mysql_native_password` token from `SHA1(password)` instead of the password itself.
#[must_use]
pub fn native_password_token_from_stage1(stage1: &[u8; NATIVE_TOKEN_LEN], scramble: &[u8]) -> [u8; NATIVE_TOKEN_LEN] {
    xor(*stage1, sha1(&[scramble, &sha1(&[stage1])]))
}

/// `SHA256(password) XOR SHA256(SHA256(SHA256(password)) + scramble)`: the client's
/// `caching_sha2_password` token. It succeeds only when the server has the account cached
/// (`AuthMoreData` 0x03); otherwise the server asks for full authentication (0x04), answered
/// with [`rsa_encrypted_password`].
#[must_use]
pub fn caching_sha2_token(password: &[u8], scramble: &[u8]) -> [u8; SHA2_TOKEN_LEN] {
    let stage1 = sha256(&[password]);
    let stage2 = sha256(&[&stage1]);
    xor(stage1, sha256(&[&stage2, scramble]))
}

/// Why the password could not be encrypted for `caching_sha2_password` full authentication.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RsaAuthError {
    /// The server's key is neither a PEM `PUBLIC KEY` (SubjectPublicKeyInfo) nor `RSA PUBLIC KEY`
    /// (PKCS#1).
    #[error("the server's RSA public key cannot be read: {0}")]
    BadKey(String),
    /// The key is too small for the password (OAEP with SHA-1 needs 42 bytes of room).
    #[error("the server's RSA key cannot encrypt the password: {0}")]
    Encrypt(String),
}

/// The server's RSA public key from the PEM text it sent (trailing NULs and whitespace allowed).
pub fn rsa_public_key(pem: &[u8]) -> Result<RsaPublicKey, RsaAuthError> {
    let text = std::str::from_utf8(pem).map_err(|e| RsaAuthError::BadKey(e.to_string()))?;
    let text = text.trim_end_matches('\0').trim();
    RsaPublicKey::from_public_key_pem(text)
        .or_else(|spki| RsaPublicKey::from_pkcs1_pem(text).map_err(|_| RsaAuthError::BadKey(spki.to_string())))
}

/// `caching_sha2_password` (and `sha256_password`) full authentication without TLS: the password
/// with its NUL terminator, XORed with the scramble repeated over its length, encrypted with
/// RSA-OAEP (SHA-1 and MGF1-SHA-1, OpenSSL's `RSA_PKCS1_OAEP_PADDING`) under the server's key.
pub fn rsa_encrypted_password<R: CryptoRngCore>(
    password: &[u8],
    scramble: &[u8],
    key: &RsaPublicKey,
    rng: &mut R,
) -> Result<Vec<u8>, RsaAuthError> {
    let mut plain = Vec::with_capacity(password.len() + 1);
    plain.extend_from_slice(password);
    plain.push(0);
    if !scramble.is_empty() {
        for (p, s) in plain.iter_mut().zip(scramble.iter().cycle()) {
            *p ^= s;
        }
    }
    key.encrypt(rng, Oaep::new::<Sha1>(), &plain).map_err(|e| RsaAuthError::Encrypt(e.to_string()))
}

/// Compares two byte strings in time independent of where they differ (length is not secret).
#[must_use]
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    let diff = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(diff) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAMBLE: [u8; 20] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20];

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Expected values computed independently with Python's hashlib.
    #[test]
    fn native_token_known_value() {
        assert_eq!(hex(&native_password_token(b"secret", &SCRAMBLE)), "b32bb3a583e1340c0a1108d58b1be49781ad8c2f");
        // MySQL's PASSWORD('secret') is *14E65567ABDB5135D0CFD9A70B3032C179A49EE7.
        assert_eq!(hex(&native_password_hash(b"secret")), "14e65567abdb5135d0cfd9a70b3032c179a49ee7");
    }

    #[test]
    fn caching_sha2_known_value() {
        assert_eq!(
            hex(&caching_sha2_token(b"secret", &SCRAMBLE)),
            "746ebe205d56a0707acb3e796e834e0dd7b1d61743b26bd5202c7a623230c7c9"
        );
    }

    /// Pass-through (#23): from the stored hash and a right response the router recovers
    /// SHA1(password) and answers another scramble exactly as the client would.
    #[test]
    fn native_pass_through_recovers_stage1() {
        let stored = native_password_hash(b"secret");
        let response = native_password_token(b"secret", &SCRAMBLE);
        let stage1 = native_password_recover(&stored, &SCRAMBLE, &response).expect("right response");
        let other: [u8; 20] = [9; 20];
        assert_eq!(native_password_token_from_stage1(&stage1, &other), native_password_token(b"secret", &other));
        let wrong = native_password_token(b"secreT", &SCRAMBLE);
        assert_eq!(native_password_recover(&stored, &SCRAMBLE, &wrong), None);
        assert_eq!(native_password_recover(&stored, &SCRAMBLE, &response[..19]), None);
    }

    #[test]
    fn native_verification() {
        let token = native_password_token(b"secret", &SCRAMBLE);
        assert!(native_password_verify(b"secret", &SCRAMBLE, &token));
        assert!(!native_password_verify(b"Secret", &SCRAMBLE, &token));
        assert!(!native_password_verify(b"secret", &SCRAMBLE, &token[..19]));
        assert!(!native_password_verify(b"secret", &[0; 20], &token));
        assert!(native_password_verify(b"", &SCRAMBLE, b""));
        assert!(!native_password_verify(b"", &SCRAMBLE, &token));
        assert!(!native_password_verify(b"secret", &SCRAMBLE, b""));
        let stored = native_password_hash(b"secret");
        assert!(native_password_verify_hash(&stored, &SCRAMBLE, &token));
        assert!(!native_password_verify_hash(&stored, &SCRAMBLE, &native_password_token(b"other", &SCRAMBLE)));
        assert!(!native_password_verify_hash(&stored, &SCRAMBLE, b"short"));
    }

    /// A 2048-bit key made with `openssl genpkey` for tests only.
    const TEST_KEY: &str = include_str!("../../../../tests/support/mysql_rsa_test_key.pem");

    fn test_key() -> rsa::RsaPrivateKey {
        use rsa::pkcs8::DecodePrivateKey;
        rsa::RsaPrivateKey::from_pkcs8_pem(TEST_KEY).expect("test key")
    }

    fn unmask(plain: &[u8]) -> Vec<u8> {
        plain.iter().zip(SCRAMBLE.iter().cycle()).map(|(p, s)| p ^ s).collect()
    }

    #[test]
    fn rsa_password_decrypts_to_the_masked_password() {
        use rsa::pkcs1::EncodeRsaPublicKey;
        use rsa::pkcs8::{EncodePublicKey, LineEnding};
        let private = test_key();
        let public = private.to_public_key();
        // Servers send SubjectPublicKeyInfo PEM, sometimes NUL-terminated; PKCS#1 is accepted too.
        let spki = public.to_public_key_pem(LineEnding::LF).expect("spki pem") + "\0";
        let pkcs1 = public.to_pkcs1_pem(LineEnding::LF).expect("pkcs1 pem");
        for pem in [spki.as_bytes(), pkcs1.as_bytes()] {
            let key = rsa_public_key(pem).expect("key parses");
            let sealed = rsa_encrypted_password(b"secret", &SCRAMBLE, &key, &mut rand::thread_rng()).expect("encrypt");
            assert_eq!(sealed.len(), 256);
            let plain = private.decrypt(Oaep::new::<Sha1>(), &sealed).expect("decrypt");
            assert_eq!(unmask(&plain), b"secret\0");
        }
        // A password longer than the scramble wraps around it.
        let key = rsa_public_key(spki.as_bytes()).expect("key");
        let long = b"a password of more than twenty bytes";
        let sealed = rsa_encrypted_password(long, &SCRAMBLE, &key, &mut rand::thread_rng()).expect("encrypt");
        assert_eq!(
            unmask(&private.decrypt(Oaep::new::<Sha1>(), &sealed).expect("decrypt")),
            [&long[..], b"\0"].concat()
        );
    }

    /// `openssl pkeyutl -encrypt -pkeyopt rsa_padding_mode:oaep` (what MySQL's OpenSSL-based server
    /// and clients use) of `"secret\0"` masked with SCRAMBLE: the padding the router uses is the same.
    #[test]
    fn oaep_matches_openssl() {
        use base64::Engine;
        let sealed = base64::engine::general_purpose::STANDARD.decode("D7sTc1KxhPXpaA4z91CylCeAKdoWibNefVhga3wWhdJudcpKIpoQh9smGTYw18DaECj4xnV5828L/6EGkErjiWdW+nHf5w1gY8cfkK/Tak+ZpxcS2jtxjAPhQmnABY3OAJlhYQxsmxceLROd7AhwgvdKBfZLdB1sbqRHusbD06mr6TicZYS9T0gkkHKlxF7CUto35U4dk/XXgb6N51lsgm6ddP2tLM22JESBl0jeLzJXmgDF/Tb432C+trPujAbJTGYFGZfPfPQD9aiSBzjFuMqmz64H7JLIg5fIdgewXTQGv1jsle6cjPnAFK1meZ20x09FrkRTZ5cyQ7r8UBTsiQ==").expect("base64");
        let plain = test_key().decrypt(Oaep::new::<Sha1>(), &sealed).expect("openssl ciphertext decrypts");
        assert_eq!(unmask(&plain), b"secret\0");
    }

    #[test]
    fn bad_keys_are_reported() {
        assert!(matches!(rsa_public_key(b"not a key"), Err(RsaAuthError::BadKey(_))));
        assert!(matches!(rsa_public_key(&[0xFF, 0xFE]), Err(RsaAuthError::BadKey(_))));
        // A 512-bit key leaves OAEP-SHA-1 22 bytes: a long password does not fit.
        let small = rsa::RsaPublicKey::new(rsa::BigUint::from_bytes_be(&[0xC5; 64]), rsa::BigUint::from(65_537u32))
            .expect("small key");
        let err = rsa_encrypted_password(&[b'x'; 40], &SCRAMBLE, &small, &mut rand::thread_rng());
        assert!(matches!(err, Err(RsaAuthError::Encrypt(_))), "{err:?}");
    }

    #[test]
    fn constant_time_eq_semantics() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
