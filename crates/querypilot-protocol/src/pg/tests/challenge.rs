use proptest::prelude::*;

use crate::pg::auth::{md5_response, md5_secret};
use crate::pg::challenge::{Challenge, ChallengeError, Progress, Proof};
use crate::pg::frontend::{encode_sasl_initial_response, encode_sasl_response};
use crate::pg::{decode_frame, BackendMessage, ScramClient, ScramSecret};

const SALT: &[u8] = b"0123456789abcdef";

/// The body of the one message in `out`, which must be an Authentication request.
fn request(out: &[u8]) -> Vec<u8> {
    let frame = decode_frame(out, 1 << 16).unwrap().unwrap();
    assert_eq!(frame.total_len, out.len(), "one message");
    assert!(matches!(BackendMessage::decode(&frame).unwrap(), BackendMessage::Authentication(_)));
    frame.body.to_vec()
}

fn body(message: &[u8]) -> &[u8] {
    &message[5..]
}

fn secret(password: &str) -> ScramSecret {
    ScramSecret::from_password(password, SALT, 4096)
}

/// The client's two SCRAM messages for `password`, driven through `c`.
fn scram_login(c: &mut Challenge, password: &str, out: &mut Vec<u8>) -> Result<Progress, ChallengeError> {
    let client = ScramClient::new("", password, "fyko+d2lbbFgONRv9qkxdawL").unwrap();
    let mut msg = Vec::new();
    encode_sasl_initial_response("SCRAM-SHA-256", Some(client.client_first().as_bytes()), &mut msg).unwrap();
    out.clear();
    assert_eq!(c.on_message(b'p', body(&msg), out)?, Progress::Continue);
    let server_first = request(out)[4..].to_vec();
    let (client_final, verifier) = client.handle_server_first(&server_first).unwrap();
    msg.clear();
    encode_sasl_response(client_final.as_bytes(), &mut msg).unwrap();
    out.clear();
    let progress = c.on_message(b'p', body(&msg), out)?;
    if let Progress::Done(Some(Proof { server_final: Some(f), .. })) = &progress {
        assert_eq!(verifier.verify_server_final(f.as_bytes()), Ok(()), "the server final proves the secret");
    }
    Ok(progress)
}

#[test]
fn scram_right_and_wrong_passwords() {
    let mut out = Vec::new();
    let mut c = Challenge::scram(secret("pencil"), "srvnonce", &mut out);
    assert_eq!(&request(&out)[..4], &10i32.to_be_bytes());
    let Progress::Done(Some(proof)) = scram_login(&mut c, "pencil", &mut out).unwrap() else { panic!("not proven") };
    assert!(proof.client_key.is_some() && proof.server_final.is_some());
    assert!(c.on_message(b'p', b"", &mut out).is_err(), "nothing after the end");

    let mut c = Challenge::scram(secret("pencil"), "srvnonce", &mut out);
    assert_eq!(scram_login(&mut c, "crayon", &mut out), Ok(Progress::Done(None)));
}

#[test]
fn md5_right_and_wrong_passwords() {
    let stored = md5_secret("alice", "pw");
    for (password, proven) in [("pw", true), ("wrong", false)] {
        let mut out = Vec::new();
        let mut c = Challenge::md5(&stored, [1, 2, 3, 4], &mut out);
        assert_eq!(request(&out), [0, 0, 0, 5, 1, 2, 3, 4]);
        let response = format!("{}\0", md5_response("alice", password, [1, 2, 3, 4]));
        let done = c.on_message(b'p', response.as_bytes(), &mut out).unwrap();
        let want = proven.then_some(Proof { server_final: None, client_key: None });
        assert_eq!(done, Progress::Done(want), "{password}");
        assert!(c.on_message(b'p', response.as_bytes(), &mut out).is_err(), "a replay after the end");
    }
}

#[test]
fn protocol_violations_end_the_exchange() {
    let mut out = Vec::new();
    let mut c = Challenge::scram(secret("pencil"), "srvnonce", &mut out);
    assert_eq!(
        c.on_message(0, b"\0\x03\0\0user\0postgres\0\0", &mut out),
        Err(ChallengeError::Unexpected("a password message"))
    );
    // The right login after a violation is refused too: the exchange is over.
    assert!(scram_login(&mut c, "pencil", &mut out).is_err());
    let mut c = Challenge::scram(secret("pencil"), "srvnonce", &mut out);
    let mut msg = Vec::new();
    encode_sasl_initial_response("PLAIN", Some(b"x"), &mut msg).unwrap();
    assert_eq!(c.on_message(b'p', body(&msg), &mut out), Err(ChallengeError::Mechanism));
    let mut c = Challenge::scram(secret("pencil"), "srvnonce", &mut out);
    assert!(matches!(
        c.on_message(b'p', b"SCRAM-SHA-256\0\xff\xff\xff\xfe", &mut out),
        Err(ChallengeError::Malformed(_))
    ));
}

/// A client message during authentication: mostly password messages with bodies shaped like
/// the ones the exchange parses, so sequences reach every state.
fn message() -> impl Strategy<Value = (u8, Vec<u8>)> {
    let bytes = prop::collection::vec(any::<u8>(), 0..64);
    let initial = ("[ -~]{0,40}", prop::bool::ANY).prop_map(|(first, none)| {
        let mut m = Vec::new();
        encode_sasl_initial_response("SCRAM-SHA-256", (!none).then_some(first.as_bytes()), &mut m).unwrap();
        m[5..].to_vec()
    });
    // Often the nonce the proof below echoes, so a proof reaches the check.
    let nonce = prop_oneof![Just("abc".to_owned()), "[a-z0-9+/]{1,24}"];
    let client_first = nonce.prop_map(|nonce| {
        let mut m = Vec::new();
        encode_sasl_initial_response("SCRAM-SHA-256", Some(format!("n,,n=,r={nonce}").as_bytes()), &mut m).unwrap();
        m[5..].to_vec()
    });
    let echoed = prop_oneof![Just("abcsrvnonce".to_owned()), "[a-zA-Z0-9+/]{1,40}"];
    let client_final = (echoed, prop::collection::vec(any::<u8>(), 32)).prop_map(|(nonce, proof)| {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD;
        format!("c=biws,r={nonce},p={}", b64.encode(proof)).into_bytes()
    });
    let md5 = "md5[0-9a-f]{32}".prop_map(|s| format!("{s}\0").into_bytes());
    let tag = prop_oneof![8 => Just(b'p'), 1 => Just(0u8), 1 => any::<u8>()];
    (tag, prop_oneof![bytes, initial, client_first, client_final, md5])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// No sequence of client messages proves a password the client does not know, and nothing
    /// is accepted after the exchange ended (by a verdict or a violation).
    #[test]
    fn no_message_sequence_authenticates_without_the_password(
        scram in prop::bool::ANY,
        messages in prop::collection::vec(message(), 1..6),
    ) {
        let mut out = Vec::new();
        let mut c = if scram {
            Challenge::scram(secret("a password no generator produces"), "srvnonce", &mut out)
        } else {
            Challenge::md5(&md5_secret("app", "a password no generator produces"), [9, 8, 7, 6], &mut out)
        };
        let mut over = false;
        for (tag, body) in messages {
            out.clear();
            let step = c.on_message(tag, &body, &mut out);
            prop_assert!(!over || step.is_err(), "a message accepted after the end");
            match step {
                Ok(Progress::Done(proof)) => {
                    prop_assert_eq!(proof, None);
                    over = true;
                }
                Ok(Progress::Continue) => prop_assert!(scram && !out.is_empty(), "only SCRAM continues, with an answer"),
                Err(_) => over = true,
            }
        }
    }
}
