//! The pass-through login's verdicts (#23): why a client was refused, for either wire, and the
//! MySQL check of a `mysql_native_password` response against the user's stored secret. Pure:
//! the caller passes in what is stored and the decoy hash (the randomness is its own), and
//! logs and counts a refusal; the PostgreSQL check runs as an exchange in the session.

use super::{Denial, Verifier};
use crate::protocol::mysql::auth::{native_password_recover, native_password_verify, NATIVE_TOKEN_LEN};

/// Why a pass-through login was refused, for the log and the metric only: the client gets the
/// same error for each.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    WrongPassword,
    /// The user's secret cannot check this listener's exchange (an MD5 secret and a SCRAM
    /// client, or a SCRAM verifier and an MD5 client) or is malformed.
    UnusableSecret(&'static str),
    /// The auth query could not answer (why, for the log).
    QueryFailed(String),
    /// The server would refuse the account whatever the client proves (#33).
    Denied(Denial),
}

impl Refusal {
    /// Whether an `allow_anonymous` listener may let the user in unchecked: the backend has
    /// no account with a password for it (and the backend, trusting the router, decides).
    pub fn lets_anonymous_in(&self) -> bool {
        matches!(self, Refusal::Denied(Denial::Unknown | Denial::NoPassword))
    }
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::QueryFailed(why) => write!(f, "the auth query failed: {why}"),
            Refusal::WrongPassword => f.write_str("wrong password"),
            Refusal::Denied(d) => d.fmt(f),
            Refusal::UnusableSecret(kind) => {
                write!(f, "the stored secret is a {kind}, which cannot check this listener's auth_method")
            }
        }
    }
}

/// What proves a passed-through MySQL client to its backend.
#[derive(Debug, PartialEq, Eq)]
pub enum NativeSecret {
    /// Nothing: the backend must trust the router (`allow_anonymous`).
    Nothing,
    /// The plaintext password, from an entry that holds one.
    Password(String),
    /// `SHA1(password)`, recovered from the client's response.
    Stage1([u8; NATIVE_TOKEN_LEN]),
}

/// Checks `token`, a `mysql_native_password` response to `scramble`, against the user's
/// stored `entry` (or why there is none): a `*HEX` entry, `SHA1(SHA1(password))` as
/// `mysql.user` shows it, recovers `SHA1(password)` to log in to the backend with; a plaintext
/// entry is used as the password. A user the backend has no password for is let through
/// unchecked only when `anonymous`. Every refusal hashes against `decoy`, a hash nobody's
/// password matches, so it costs what a wrong password costs.
pub fn check_native(
    entry: Result<&str, Refusal>,
    (scramble, token): (&[u8], &[u8]),
    anonymous: bool,
    decoy: &[u8; NATIVE_TOKEN_LEN],
) -> Result<NativeSecret, Refusal> {
    let why = match entry.map(Verifier::parse) {
        Err(why) if anonymous && why.lets_anonymous_in() => return Ok(NativeSecret::Nothing),
        Ok(Ok(Verifier::Native(hash))) => {
            return native_password_recover(&hash, scramble, token)
                .map(NativeSecret::Stage1)
                .ok_or(Refusal::WrongPassword)
        }
        Ok(Ok(Verifier::Plain(password))) => {
            let right = native_password_verify(password.as_bytes(), scramble, token);
            return right.then_some(NativeSecret::Password(password)).ok_or(Refusal::WrongPassword);
        }
        Ok(Ok(other)) => Refusal::UnusableSecret(other.kind()),
        Ok(Err(_)) => Refusal::UnusableSecret("malformed secret"),
        Err(why) => why,
    };
    let _ = native_password_recover(decoy, scramble, token);
    Err(why)
}

#[cfg(test)]
mod tests;
