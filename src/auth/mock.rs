//! Mock authentication (#33): what an unknown user (or one the router refuses whatever it
//! proves) is challenged with, so the challenge tells nothing. PostgreSQL does the same: its
//! mock SCRAM salt is derived from a per-cluster secret and the user name, so the same name
//! gets the same salt on every try, like a real role's stored one. Here the secret is
//! `[auth] mock_salt_key` when set — persistent, and the same on every router instance behind
//! one address — else a random key per process start (a restart changes unknown users'
//! salts, which one watching the salts across the restart could notice).

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

/// SCRAM salt length (PostgreSQL's `SCRAM_DEFAULT_SALT_LEN`).
pub const SALT_LEN: usize = 16;

/// The key of `[auth] mock_salt_key`: SHA-256 of the configured text, so any length works.
pub fn seed_from_key(key: &str) -> [u8; 32] {
    Sha256::new_with_prefix(b"querypilot mock salt key\0").chain_update(key.as_bytes()).finalize().into()
}

/// The mock SCRAM salt of `user` under `seed`: HMAC-SHA-256(seed, user), truncated.
pub fn scram_salt(seed: &[u8; 32], user: &str) -> [u8; SALT_LEN] {
    let Ok(mut mac) = Hmac::<Sha256>::new_from_slice(seed) else { return [0; SALT_LEN] };
    mac.update(b"scram-salt\0");
    mac.update(user.as_bytes());
    let full: [u8; 32] = mac.finalize().into_bytes().into();
    let mut salt = [0; SALT_LEN];
    salt.copy_from_slice(full.get(..SALT_LEN).unwrap_or(&[0; SALT_LEN]));
    salt
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_same_name_gets_the_same_salt_and_names_and_keys_differ() {
        let seed = seed_from_key("operator's key");
        assert_eq!(scram_salt(&seed, "nobody"), scram_salt(&seed, "nobody"));
        assert_ne!(scram_salt(&seed, "nobody"), scram_salt(&seed, "nobody2"));
        assert_ne!(scram_salt(&seed, "nobody"), scram_salt(&seed_from_key("another key"), "nobody"));
        assert_eq!(seed, seed_from_key("operator's key"), "a configured key is stable across restarts");
    }
}
