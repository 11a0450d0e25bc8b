//! SCRAM-SHA-256 server side (what a client sends the router during login) and the stored
//! secret parser (`SCRAM-SHA-256$iter:salt$stored:server`, from config or `pg_authid`).
//!
//! The input is split at the first `\n`: client-first-message before, client-final-message
//! after. Properties: no panic; `ScramServer::finish` never accepts a proof for a password the
//! fuzzer cannot know (the secret is built from a random-looking password at start-up).
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use querypilot::protocol::pg::{ScramSecret, ScramServer};

/// PBKDF2 runs once per process, not per input; 4096 is the iteration count the router uses.
fn secret() -> &'static ScramSecret {
    static SECRET: OnceLock<ScramSecret> = OnceLock::new();
    SECRET.get_or_init(|| ScramSecret::from_password("fz-9c1e7b2a-secret", b"0123456789abcdef", 4096))
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = ScramSecret::parse(text);
    }
    let (first, last) = match data.iter().position(|&b| b == b'\n') {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    let Ok((server, server_first)) = ScramServer::start(secret(), first, "3rfu9VZQ8SJ3kqZd") else { return };
    assert!(server_first.starts_with("r="));
    assert!(server.finish(last).is_err(), "accepted a proof without the password");
});
