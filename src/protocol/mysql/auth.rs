//! Authentication math (Client/Server Protocol, "Authentication Methods"):
//! `mysql_native_password` (SHA-1) for both sides, and the `caching_sha2_password` fast-path token
//! (SHA-256) a client — the router towards a backend — sends. Full `caching_sha2_password`
//! authentication (RSA key exchange or cleartext over TLS) is not implemented here.

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
    let Ok(response) = <[u8; NATIVE_TOKEN_LEN]>::try_from(response) else { return false };
    let candidate = xor(response, sha1(&[scramble, stored]));
    constant_time_eq(&sha1(&[&candidate]), stored)
}

/// `SHA256(password) XOR SHA256(SHA256(SHA256(password)) + scramble)`: the client's
/// `caching_sha2_password` token. It succeeds only when the server has the account cached
/// (`AuthMoreData` 0x03); otherwise the server asks for full authentication (0x04), which needs TLS
/// or RSA and is out of scope here.
#[must_use]
pub fn caching_sha2_token(password: &[u8], scramble: &[u8]) -> [u8; SHA2_TOKEN_LEN] {
    let stage1 = sha256(&[password]);
    let stage2 = sha256(&[&stage1]);
    xor(stage1, sha256(&[&stage2, scramble]))
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
        assert_eq!(hex(&caching_sha2_token(b"secret", &SCRAMBLE)), "746ebe205d56a0707acb3e796e834e0dd7b1d61743b26bd5202c7a623230c7c9");
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

    #[test]
    fn constant_time_eq_semantics() {
        assert!(constant_time_eq(b"", b""));
        assert!(constant_time_eq(b"abc", b"abc"));
        assert!(!constant_time_eq(b"abc", b"abd"));
        assert!(!constant_time_eq(b"abc", b"ab"));
    }
}
