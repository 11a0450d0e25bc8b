//! One user's stored secret, as PostgreSQL and MariaDB store them and PgBouncer's auth file
//! holds them: a SCRAM-SHA-256 verifier, an MD5 secret, MySQL's `SHA1(SHA1(password))` or, for
//! those who accept it, the plaintext password.

use crate::protocol::mysql::auth::NATIVE_TOKEN_LEN;
use crate::protocol::pg::ScramSecret;

/// A stored secret, by kind.
#[derive(Clone, PartialEq, Eq)]
pub enum Verifier {
    /// `SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>` (PostgreSQL's `rolpassword`).
    Scram(ScramSecret),
    /// `md5` + 32 hex digits: `md5(password || user)`, PostgreSQL's MD5 secret.
    Md5(String),
    /// `*` + 40 hex digits: MySQL's `mysql_native_password` hash `SHA1(SHA1(password))`.
    Native([u8; NATIVE_TOKEN_LEN]),
    /// `sha1:` + 40 hex digits: `SHA1(password)`, which answers a `mysql_native_password`
    /// scramble without the password (for the auth query's user, which the router logs in
    /// itself; password-equivalent for that method, but not the password).
    NativeStage1([u8; NATIVE_TOKEN_LEN]),
    /// Anything else: the password itself.
    Plain(String),
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The kind only: a secret never reaches a log.
        f.write_str(self.kind())
    }
}

/// A secret that looks like a verifier of some kind but is not a valid one.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum VerifierError {
    /// Starts with `SCRAM-SHA-256$` but does not parse.
    #[error("malformed SCRAM-SHA-256 verifier")]
    Scram,
    /// `*` or `sha1:` followed by something other than 40 hex digits.
    #[error("malformed mysql_native_password hash (want '*' or 'sha1:' and 40 hex digits)")]
    Native,
}

impl Verifier {
    /// Classifies and parses a stored secret. An `md5` prefix without 32 hex digits after it
    /// is taken as a plaintext password, as PostgreSQL itself does.
    pub fn parse(text: &str) -> Result<Self, VerifierError> {
        if text.starts_with("SCRAM-SHA-256$") {
            return ScramSecret::parse(text).map(Verifier::Scram).map_err(|_| VerifierError::Scram);
        }
        if let Some(hash) = text.strip_prefix("md5") {
            if hash.len() == 32 && hash.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Ok(Verifier::Md5(text.to_ascii_lowercase()));
            }
        }
        if let Some(hash) = text.strip_prefix('*') {
            return native_hash(hash).map(Verifier::Native).ok_or(VerifierError::Native);
        }
        if let Some(hash) = text.strip_prefix("sha1:") {
            return native_hash(hash).map(Verifier::NativeStage1).ok_or(VerifierError::Native);
        }
        Ok(Verifier::Plain(text.to_owned()))
    }

    /// The kind's name, for logs and errors.
    pub fn kind(&self) -> &'static str {
        match self {
            Verifier::Scram(_) => "SCRAM-SHA-256 verifier",
            Verifier::Md5(_) => "MD5 secret",
            Verifier::Native(_) => "mysql_native_password hash",
            Verifier::NativeStage1(_) => "SHA1(password)",
            Verifier::Plain(_) => "plaintext password",
        }
    }
}

fn native_hash(hex: &str) -> Option<[u8; NATIVE_TOKEN_LEN]> {
    if hex.len() != NATIVE_TOKEN_LEN * 2 {
        return None;
    }
    let mut out = [0u8; NATIVE_TOKEN_LEN];
    for (o, pair) in out.iter_mut().zip(hex.as_bytes().chunks(2)) {
        *o = u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::mysql::auth::native_password_hash;
    use crate::protocol::pg::auth::md5_secret;

    fn hex(b: &[u8]) -> String {
        b.iter().map(|x| format!("{x:02X}")).collect()
    }

    fn sha1_of(b: &[u8]) -> [u8; 20] {
        use sha1::Digest;
        sha1::Sha1::digest(b).into()
    }

    #[test]
    fn each_kind_is_recognised() {
        let scram = "SCRAM-SHA-256$4096:W22ZaJ0SNY7soEsUEjb6gQ==$WG5d8oPm3OtcPnkdi4Uo7BkeZkBFzpcXkuLmtbsT4qY=:wfPLwcE6nTWhTAmQ7tl2KeoiWGPlZqQxSrmfPwDl2dU=";
        assert!(matches!(Verifier::parse(scram), Ok(Verifier::Scram(s)) if s.iterations == 4096));
        let md5 = md5_secret("alice", "secret");
        assert_eq!(Verifier::parse(&md5), Ok(Verifier::Md5(md5.clone())));
        // SELECT PASSWORD('secret') on MariaDB.
        let native = "*14E65567ABDB5135D0CFD9A70B3032C179A49EE7";
        assert_eq!(Verifier::parse(native), Ok(Verifier::Native(native_password_hash(b"secret"))));
        // SELECT SHA1('secret'): its SHA1 is the hash above.
        let stage1 = Verifier::parse("sha1:e5e9fa1ba31ecd1ae84f75caaa474f3a663f05f4");
        let Ok(Verifier::NativeStage1(s1)) = stage1 else { panic!("{stage1:?}") };
        assert_eq!(Verifier::parse(&format!("*{}", hex(&sha1_of(&s1)))), Verifier::parse(native));
        assert_eq!(Verifier::parse("hunter2"), Ok(Verifier::Plain("hunter2".into())));
        assert_eq!(Verifier::parse("md5short"), Ok(Verifier::Plain("md5short".into())), "as PostgreSQL reads it");
    }

    #[test]
    fn malformed_verifiers_are_errors_not_passwords() {
        assert_eq!(Verifier::parse("SCRAM-SHA-256$4096:salt$x"), Err(VerifierError::Scram));
        assert_eq!(Verifier::parse("*12AB"), Err(VerifierError::Native));
        assert_eq!(Verifier::parse("sha1:12AB"), Err(VerifierError::Native));
        assert_eq!(Verifier::parse(&format!("*{}", "G".repeat(40))), Err(VerifierError::Native));
    }

    #[test]
    fn debug_shows_the_kind_only() {
        assert_eq!(format!("{:?}", Verifier::parse("hunter2")), "Ok(plaintext password)");
    }
}
