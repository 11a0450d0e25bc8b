//! MySQL connection phase: the server greeting (`HandshakeV10`), the client's
//! `HandshakeResponse41` / `SslRequest`, and the server's authentication replies
//! (`AuthReply`, `AuthSwitchRequest`, connection attributes).
//!
//! The first byte picks the capability flags the decoders see; the rest is the payload.
//! Properties: no panic; decode → encode → decode is stable (the second encoding equals the
//! first, and the two decodes agree).
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::protocol::mysql::capability::*;
use querypilot::protocol::mysql::{
    AuthReply, AuthSwitchRequest, ConnectAttrs, HandshakeResponse41, HandshakeV10, SslRequest,
};

/// Capability bits that change how connection-phase payloads are laid out, one per input bit.
fn caps(byte: u8) -> u64 {
    const FLAGS: [u64; 8] = [
        CLIENT_PROTOCOL_41,
        CLIENT_TRANSACTIONS,
        CLIENT_SESSION_TRACK,
        CLIENT_SECURE_CONNECTION,
        CLIENT_PLUGIN_AUTH,
        CLIENT_CONNECT_ATTRS,
        CLIENT_DEPRECATE_EOF,
        CLIENT_PLUGIN_AUTH_LENENC_CLIENT_DATA,
    ];
    FLAGS.iter().enumerate().filter(|(i, _)| byte & (1 << i) != 0).fold(0, |acc, (_, f)| acc | f)
}

fuzz_target!(|data: &[u8]| {
    let Some((&sel, payload)) = data.split_first() else { return };
    let caps = caps(sel);

    if let Ok(greeting) = HandshakeV10::decode(payload) {
        let mut e1 = Vec::new();
        greeting.encode(&mut e1);
        let again = HandshakeV10::decode(&e1).expect("own greeting decodes");
        assert_eq!(again.scramble, greeting.scramble);
        assert_eq!(again.server_version, greeting.server_version);
        let mut e2 = Vec::new();
        again.encode(&mut e2);
        assert_eq!(e1, e2);
    }

    if let Some(ssl) = SslRequest::detect(payload) {
        let mut out = Vec::new();
        ssl.encode(&mut out);
        assert_eq!(SslRequest::detect(&out), Some(ssl));
    }

    if let Ok(resp) = HandshakeResponse41::decode(payload) {
        if let Some(attrs) = resp.connect_attrs {
            let _ = attrs.iter().count();
        }
        let mut e1 = Vec::new();
        resp.encode(&mut e1);
        let again = HandshakeResponse41::decode(&e1).expect("own response decodes");
        assert_eq!(again.username, resp.username);
        assert_eq!(again.capabilities, resp.capabilities);
        let mut e2 = Vec::new();
        again.encode(&mut e2);
        assert_eq!(e1, e2);
        assert_eq!(HandshakeResponse41::decode(&e2).expect("stable"), again);
    }

    if let Ok(AuthReply::Switch(switch)) = AuthReply::decode(payload, caps) {
        let _ = switch.scramble();
        let mut out = Vec::new();
        switch.encode(&mut out);
        assert_eq!(AuthSwitchRequest::decode(&out).expect("own switch decodes"), switch);
    }

    if let Ok(attrs) = ConnectAttrs::new(payload) {
        let pairs: Vec<(&[u8], &[u8])> = attrs.iter().collect();
        let mut out = Vec::new();
        ConnectAttrs::build(&pairs, &mut out);
        let again = ConnectAttrs::new(&out).expect("built attributes validate");
        assert!(again.iter().eq(pairs.iter().copied()));
    }
});
