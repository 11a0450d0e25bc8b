use super::msg;
use crate::pg::frontend::{
    decode_sasl_initial_response, encode_bind, encode_bind_renamed, encode_close, encode_close_renamed,
    encode_describe, encode_describe_renamed, encode_execute, encode_flush, encode_parse, encode_parse_renamed,
    encode_password, encode_query, encode_sasl_initial_response, encode_sasl_response, encode_sync, encode_terminate,
    password_text,
};
use crate::pg::{decode_frame, DecodeError, EncodeError, Frame, FrontendMessage, RewriteError, Target};

fn frame(bytes: &[u8]) -> Frame<'_> {
    let f = decode_frame(bytes, 1 << 20).unwrap().unwrap();
    assert_eq!(f.total_len, bytes.len());
    f
}

/// Decodes `bytes`, checks the variant, and checks re-encoding reproduces the bytes exactly.
fn round_trip(bytes: &[u8], check: impl FnOnce(&FrontendMessage<'_>)) {
    let f = frame(bytes);
    let m = FrontendMessage::decode(&f).unwrap();
    check(&m);
    assert_eq!(m.tag(), f.tag);
    let mut out = Vec::new();
    m.encode(&mut out).unwrap();
    assert_eq!(out, bytes);
}

const BIND_BODY: &[u8] = b"p1\0s1\0\0\x01\0\x01\0\x02\0\0\0\x0242\xff\xff\xff\xff\0\x01\0\x01";

#[test]
fn query_and_simple_messages() {
    round_trip(&msg(b'Q', b"SELECT 1\0"), |m| assert_eq!(*m, FrontendMessage::Query("SELECT 1")));
    round_trip(&msg(b'S', b""), |m| assert_eq!(*m, FrontendMessage::Sync));
    round_trip(&msg(b'H', b""), |m| assert_eq!(*m, FrontendMessage::Flush));
    round_trip(&msg(b'X', b""), |m| assert_eq!(*m, FrontendMessage::Terminate));
    round_trip(&msg(b'c', b""), |m| assert_eq!(*m, FrontendMessage::CopyDone));
    round_trip(&msg(b'd', b"1\t2\n"), |m| assert_eq!(*m, FrontendMessage::CopyData(b"1\t2\n")));
    round_trip(&msg(b'f', b"oops\0"), |m| assert_eq!(*m, FrontendMessage::CopyFail("oops")));
    round_trip(&msg(b'p', b"md5abc\0"), |m| assert_eq!(*m, FrontendMessage::Password(b"md5abc\0")));
    round_trip(&msg(b'F', b"\0\0\0\x01\0\0"), |m| assert_eq!(*m, FrontendMessage::FunctionCall(b"\0\0\0\x01\0\0")));
    round_trip(&msg(b'E', b"portal\0\0\0\0\x0a"), |m| {
        assert_eq!(*m, FrontendMessage::Execute { portal: "portal", max_rows: 10 });
    });
    round_trip(&msg(b'D', b"Sstmt\0"), |m| {
        assert_eq!(*m, FrontendMessage::Describe { kind: Target::Statement, name: "stmt" });
    });
    round_trip(&msg(b'C', b"P\0"), |m| assert_eq!(*m, FrontendMessage::Close { kind: Target::Portal, name: "" }));
}

#[test]
fn parse_golden() {
    let bytes = msg(b'P', b"s1\0SELECT $1::int\0\0\x01\0\0\0\x17");
    round_trip(&bytes, |m| {
        let FrontendMessage::Parse { name, query, param_types } = m else { panic!("{m:?}") };
        assert_eq!((*name, *query), ("s1", "SELECT $1::int"));
        assert_eq!(param_types.iter().collect::<Vec<_>>(), [23]);
    });
    let mut out = Vec::new();
    encode_parse("s1", "SELECT $1::int", &[23], &mut out).unwrap();
    assert_eq!(out, bytes);
}

#[test]
fn bind_golden() {
    let bytes = msg(b'B', BIND_BODY);
    round_trip(&bytes, |m| {
        let FrontendMessage::Bind { portal, statement, param_formats, params, result_formats } = m else {
            panic!("{m:?}")
        };
        assert_eq!((*portal, *statement), ("p1", "s1"));
        assert_eq!(param_formats.iter().collect::<Vec<_>>(), [1]);
        assert_eq!(params.iter().collect::<Vec<_>>(), [Some(&b"42"[..]), None]);
        assert_eq!(result_formats.iter().collect::<Vec<_>>(), [1]);
    });
    let mut out = Vec::new();
    encode_bind("p1", "s1", &[1], &[Some(b"42"), None], &[1], &mut out).unwrap();
    assert_eq!(out, bytes);
}

#[test]
fn builders_match_hand_encoded_bytes() {
    let mut out = Vec::new();
    encode_query("SELECT 1", &mut out).unwrap();
    encode_describe(Target::Portal, "", &mut out).unwrap();
    encode_execute("", 0, &mut out).unwrap();
    encode_close(Target::Statement, "s", &mut out).unwrap();
    encode_sync(&mut out);
    encode_flush(&mut out);
    encode_terminate(&mut out);
    let mut want = msg(b'Q', b"SELECT 1\0");
    for (tag, body) in
        [(b'D', &b"P\0"[..]), (b'E', b"\0\0\0\0\0"), (b'C', b"Ss\0"), (b'S', b""), (b'H', b""), (b'X', b"")]
    {
        want.extend(msg(tag, body));
    }
    assert_eq!(out, want);
}

#[test]
fn renaming_copies_the_rest_untouched() {
    let mut out = Vec::new();
    encode_bind_renamed(BIND_BODY, "qp_7", &mut out).unwrap();
    let mut want_body = b"p1\0qp_7\0".to_vec();
    want_body.extend_from_slice(&BIND_BODY[6..]);
    assert_eq!(out, msg(b'B', &want_body));

    out.clear();
    encode_parse_renamed(b"\0SELECT 1\0\0\0", "qp_1", &mut out).unwrap();
    assert_eq!(out, msg(b'P', b"qp_1\0SELECT 1\0\0\0"));

    out.clear();
    encode_describe_renamed(b"Sold\0", "new", &mut out).unwrap();
    encode_close_renamed(b"Sold\0", "new", &mut out).unwrap();
    let mut want = msg(b'D', b"Snew\0");
    want.extend(msg(b'C', b"Snew\0"));
    assert_eq!(out, want);
}

#[test]
fn renaming_rejects_malformed_bodies_and_names() {
    let mut out = vec![9];
    assert!(matches!(
        encode_bind_renamed(b"p1\0s1", "x", &mut out),
        Err(RewriteError::Decode(DecodeError::MissingNul { .. }))
    ));
    assert!(matches!(
        encode_describe_renamed(b"Xs\0", "x", &mut out),
        Err(RewriteError::Decode(DecodeError::InvalidValue { .. }))
    ));
    assert!(matches!(encode_close_renamed(b"Ss\0junk", "x", &mut out), Err(RewriteError::Decode(_))));
    assert!(matches!(encode_parse_renamed(b"s\0q\0\0\0", "a\0b", &mut out), Err(RewriteError::Encode(_))));
    assert_eq!(out, [9]);
}

#[test]
fn password_and_sasl_bodies() {
    assert_eq!(password_text(b"secret\0"), Ok("secret"));
    assert!(password_text(b"secret").is_err());
    let mut out = Vec::new();
    encode_password("secret", &mut out).unwrap();
    assert_eq!(out, msg(b'p', b"secret\0"));

    out.clear();
    encode_sasl_initial_response("SCRAM-SHA-256", Some(b"n,,n=,r=abc"), &mut out).unwrap();
    assert_eq!(out, msg(b'p', b"SCRAM-SHA-256\0\0\0\0\x0bn,,n=,r=abc"));
    let f = frame(&out);
    assert_eq!(decode_sasl_initial_response(f.body), Ok(("SCRAM-SHA-256", Some(&b"n,,n=,r=abc"[..]))));
    assert_eq!(decode_sasl_initial_response(b"X\0\xff\xff\xff\xff"), Ok(("X", None)));
    assert!(decode_sasl_initial_response(b"X\0\0\0\0\x05ab").is_err());

    out.clear();
    encode_sasl_response(b"c=biws", &mut out).unwrap();
    assert_eq!(out, msg(b'p', b"c=biws"));
}

#[test]
fn malformed_frontend_messages() {
    let bad: &[(u8, &[u8])] = &[
        (b'Q', b"no nul"),
        (b'Q', b"a\0b\0"),
        (b'Q', b"\xff\0"),
        (b'S', b"x"),
        (b'D', b"Zx\0"),
        (b'E', b"p\0\0\0"),
        (b'P', b"s\0q\0\0\x02\0\0\0\x17"),
        (b'B', b"\0\0\0\0\0\x01\xff\xff\xff\xfe\0\0"),
        (b'B', b"\0\0\0\0\0\x01\0\0\0\x09ab\0\0"),
    ];
    for &(tag, body) in bad {
        let m = msg(tag, body);
        assert!(FrontendMessage::decode(&frame(&m)).is_err(), "{:?} {body:?}", char::from(tag));
    }
    assert_eq!(FrontendMessage::decode(&Frame::new(b'?', b"")), Err(DecodeError::UnknownTag(b'?')));
}

#[test]
fn strings_of_every_length_around_the_short_search_decode() {
    for len in 0..80 {
        let text = "a".repeat(len);
        let mut out = Vec::new();
        encode_query(&text, &mut out).expect("encode");
        assert_eq!(FrontendMessage::decode(&frame(&out)), Ok(FrontendMessage::Query(&text)), "{len}");
        let unterminated = msg(b'Q', text.as_bytes());
        assert!(FrontendMessage::decode(&frame(&unterminated)).is_err(), "{len}: no NUL");
    }
}

#[test]
fn known_tags_are_the_ones_decode_knows() {
    for tag in 0..=u8::MAX {
        let unknown = FrontendMessage::decode(&Frame::new(tag, b"")) == Err(DecodeError::UnknownTag(tag));
        assert_eq!(FrontendMessage::known_tag(tag), !unknown, "{:?}", char::from(tag));
    }
}

#[test]
fn encode_errors_roll_back() {
    let mut out = vec![7];
    assert_eq!(encode_query("a\0b", &mut out), Err(EncodeError::InteriorNul { what: "query" }));
    let too_many: Vec<i16> = vec![0; 70_000];
    assert_eq!(
        encode_bind("", "", &too_many, &[], &[], &mut out),
        Err(EncodeError::TooLong { what: "parameter formats" })
    );
    assert_eq!(out, [7]);
}
