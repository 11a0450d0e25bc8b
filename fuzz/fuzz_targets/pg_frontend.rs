//! PostgreSQL frontend messages: the `Frames` iterator over a client's byte stream,
//! `FrontendMessage::decode` of every tag, the password/SASL body readers and the statement
//! rename rewrites the router applies to Parse/Bind/Describe/Close.
//!
//! Properties: no panic; frames stay inside the input; a decoded message re-encodes to the same
//! tag and body bytes and decodes back equal; a rename of a decodable message yields a frame that decodes.
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::protocol::pg::frontend::{
    decode_sasl_initial_response, encode_bind_renamed, encode_close_renamed, encode_describe_renamed,
    encode_parse_renamed, password_text,
};
use querypilot::protocol::pg::{decode_frame, Frame, Frames, FrontendMessage};

/// Limit used while framing: small enough that the fuzzer also meets `TooLarge`.
const MAX_LEN: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let mut frames = Frames::new(data, MAX_LEN);
    for frame in frames.by_ref() {
        let Ok(frame) = frame else { break };
        assert!(frame.total_len == frame.body.len() + 5);
        check(&frame);
    }
    assert!(frames.consumed() <= data.len());
    // First byte as the tag, the rest as the body: reaches every decoder without valid framing.
    if let Some((&tag, body)) = data.split_first() {
        check(&Frame::new(tag, body));
    }
});

fn check(frame: &Frame<'_>) {
    rewrites(frame);
    let Ok(msg) = FrontendMessage::decode(frame) else { return };
    assert_eq!(msg.tag(), frame.tag);
    walk(&msg);
    let mut out = Vec::new();
    msg.encode(&mut out).expect("a decoded message re-encodes");
    let again = decode_frame(&out, usize::MAX).expect("own frame").expect("complete");
    assert_eq!(again.total_len, out.len());
    assert_eq!(again.tag, frame.tag);
    assert_eq!(again.body, frame.body, "re-encoding is byte-exact");
    assert_eq!(FrontendMessage::decode(&again).expect("re-decodes"), msg);
}

/// Touches every borrowed list so their lazy iterators run over fuzzed bytes too.
fn walk(msg: &FrontendMessage<'_>) {
    match msg {
        FrontendMessage::Parse { param_types, .. } => {
            assert_eq!(param_types.iter().count(), param_types.len());
        }
        FrontendMessage::Bind { param_formats, params, result_formats, .. } => {
            assert_eq!(param_formats.iter().count(), param_formats.len());
            assert_eq!(params.iter().count(), params.len());
            assert_eq!(result_formats.iter().count(), result_formats.len());
        }
        FrontendMessage::Password(body) => {
            let _ = password_text(body);
            let _ = decode_sasl_initial_response(body);
        }
        _ => {}
    }
}

/// The rename rewrites read bodies the router has not fully decoded; their output must frame.
fn rewrites(frame: &Frame<'_>) {
    let rewrite = match frame.tag {
        b'P' => encode_parse_renamed,
        b'B' => encode_bind_renamed,
        b'D' => encode_describe_renamed,
        b'C' => encode_close_renamed,
        _ => return,
    };
    let mut out = Vec::new();
    if rewrite(frame.body, "qp_s1", &mut out).is_ok() {
        let renamed = decode_frame(&out, usize::MAX).expect("own frame").expect("complete");
        assert_eq!(renamed.total_len, out.len());
        // The rewrite copies the rest untouched, so a message that decodes still decodes under
        // its new name (the reverse need not hold: the old name may be invalid UTF-8).
        if let Ok(original) = FrontendMessage::decode(frame) {
            let renamed_msg = FrontendMessage::decode(&renamed).expect("renamed message decodes");
            assert_eq!(renamed_msg.tag(), original.tag());
        }
    } else {
        assert!(out.is_empty() || decode_frame(&out, usize::MAX).is_ok());
    }
}
