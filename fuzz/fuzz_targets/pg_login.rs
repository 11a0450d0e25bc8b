//! The login's password exchange (`protocol::pg::challenge::Challenge`, the state machine the
//! PostgreSQL session drives over its socket) fed any sequence of client messages.
//!
//! Input: the first byte picks SCRAM-SHA-256 (odd; bit 1 set: over TLS, SCRAM-SHA-256-PLUS
//! offered too, with channel binding data) or MD5 (even); the rest is a sequence of
//! messages, each a type byte, a big-endian u16 length and that many body bytes (a short last
//! one takes what is left). Properties: no panic; no sequence proves a password the fuzzer
//! cannot know (the secrets come from a random-looking password fixed at start-up); only SCRAM
//! continues, always with an answer; after a verdict or an error nothing more is accepted.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use querypilot::protocol::pg::auth::md5_secret;
use querypilot::protocol::pg::challenge::{Challenge, Progress};
use querypilot::protocol::pg::ScramSecret;

const PASSWORD: &str = "fz-5d03a1c7-login";

/// PBKDF2 runs once per process, not per input; 4096 is the iteration count the router uses.
fn secret() -> &'static ScramSecret {
    static SECRET: OnceLock<ScramSecret> = OnceLock::new();
    SECRET.get_or_init(|| ScramSecret::from_password(PASSWORD, b"0123456789abcdef", 4096))
}

fuzz_target!(|data: &[u8]| {
    let Some((&mode, mut rest)) = data.split_first() else { return };
    let scram = mode & 1 == 1;
    let mut out = Vec::new();
    let binding = (mode & 2 == 2).then(|| vec![0x5a; 32]);
    let mut challenge = if scram {
        Challenge::scram_bound(secret().clone(), "3rfu9VZQ8SJ3kqZd", binding, &mut out)
    } else {
        Challenge::md5(&md5_secret("app", PASSWORD), [7, 1, 9, 3], &mut out)
    };
    let mut over = false;
    while let [tag, hi, lo, tail @ ..] = rest {
        let len = usize::from(u16::from_be_bytes([*hi, *lo])).min(tail.len());
        let (body, next) = tail.split_at(len);
        rest = next;
        out.clear();
        let step = challenge.on_message(*tag, body, &mut out);
        assert!(!over || step.is_err(), "a message accepted after the exchange ended");
        match step {
            Ok(Progress::Done(proof)) => {
                assert!(proof.is_none(), "authenticated without the password");
                over = true;
            }
            Ok(Progress::Continue) => assert!(scram && !out.is_empty(), "only SCRAM continues, with an answer"),
            Err(_) => over = true,
        }
    }
});
