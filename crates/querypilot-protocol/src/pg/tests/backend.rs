use super::msg;
use crate::pg::backend::{
    encode_auth_sasl_scram, encode_authentication, encode_data_row, encode_ready_for_query, encode_row_description,
    is_after_startup, peek, FieldDescription,
};
use crate::pg::notice::peek_sqlstate;
use crate::pg::{
    decode_frame, encode_error, Authentication, BackendMessage, BackendPeek, DecodeError, ErrorFields, Frame, Severity,
    TransactionStatus,
};

fn frame(bytes: &[u8]) -> Frame<'_> {
    let f = decode_frame(bytes, 1 << 20).unwrap().unwrap();
    assert_eq!(f.total_len, bytes.len());
    f
}

/// Decodes `bytes`, checks the variant, and checks re-encoding reproduces the bytes exactly.
fn round_trip(bytes: &[u8], check: impl FnOnce(&BackendMessage<'_>)) {
    let f = frame(bytes);
    let m = BackendMessage::decode(&f).unwrap();
    check(&m);
    assert_eq!(m.tag(), f.tag);
    let mut out = Vec::new();
    m.encode(&mut out).unwrap();
    assert_eq!(out, bytes);
}

const ERROR_BODY: &[u8] =
    b"SERROR\0VERROR\0C42P01\0Mrelation \"nope\" does not exist\0P15\0Fparse_relation.c\0L1452\0Rparser\0\0";

#[test]
fn authentication_requests() {
    round_trip(&msg(b'R', b"\0\0\0\0"), |m| assert_eq!(*m, BackendMessage::Authentication(Authentication::Ok)));
    round_trip(&msg(b'R', b"\0\0\0\x03"), |m| {
        assert_eq!(*m, BackendMessage::Authentication(Authentication::CleartextPassword));
    });
    round_trip(&msg(b'R', b"\0\0\0\x05\x01\x02\x03\x04"), |m| {
        assert_eq!(*m, BackendMessage::Authentication(Authentication::Md5Password { salt: [1, 2, 3, 4] }));
    });
    round_trip(&msg(b'R', b"\0\0\0\x0aSCRAM-SHA-256-PLUS\0SCRAM-SHA-256\0\0"), |m| {
        let BackendMessage::Authentication(Authentication::Sasl { mechanisms }) = m else { panic!("{m:?}") };
        assert_eq!(mechanisms.iter().collect::<Vec<_>>(), ["SCRAM-SHA-256-PLUS", "SCRAM-SHA-256"]);
    });
    round_trip(&msg(b'R', b"\0\0\0\x0br=abc"), |m| {
        assert_eq!(*m, BackendMessage::Authentication(Authentication::SaslContinue(b"r=abc")));
    });
    round_trip(&msg(b'R', b"\0\0\0\x0cv=xyz"), |m| {
        assert_eq!(*m, BackendMessage::Authentication(Authentication::SaslFinal(b"v=xyz")));
    });
    round_trip(&msg(b'R', b"\0\0\0\x07"), |m| {
        assert_eq!(*m, BackendMessage::Authentication(Authentication::Other { code: 7, data: b"" }));
    });
    let mut out = Vec::new();
    encode_auth_sasl_scram(&mut out);
    assert_eq!(out, msg(b'R', b"\0\0\0\x0aSCRAM-SHA-256\0\0"));
    out.clear();
    encode_authentication(&Authentication::Ok, &mut out).unwrap();
    assert_eq!(out, msg(b'R', b"\0\0\0\0"));
}

#[test]
fn session_messages() {
    round_trip(&msg(b'S', b"client_encoding\0UTF8\0"), |m| {
        assert_eq!(*m, BackendMessage::ParameterStatus { name: "client_encoding", value: "UTF8" });
    });
    round_trip(&msg(b'K', b"\0\0\x30\x39\x80\0\0\0"), |m| {
        assert_eq!(*m, BackendMessage::BackendKeyData { pid: 12345, key: i32::MIN });
    });
    for (byte, status) in
        [(b'I', TransactionStatus::Idle), (b'T', TransactionStatus::InBlock), (b'E', TransactionStatus::Failed)]
    {
        let bytes = msg(b'Z', &[byte]);
        round_trip(&bytes, |m| assert_eq!(*m, BackendMessage::ReadyForQuery(status)));
        let mut out = Vec::new();
        encode_ready_for_query(status, &mut out);
        assert_eq!(out, bytes);
        assert_eq!(peek(&frame(&bytes)), Ok(BackendPeek::ReadyForQuery(status)));
    }
    round_trip(&msg(b'A', b"\0\0\0\x01chan\0hello\0"), |m| {
        assert_eq!(*m, BackendMessage::NotificationResponse { pid: 1, channel: "chan", payload: "hello" });
    });
    round_trip(&msg(b'v', b"\0\0\0\0\0\0\0\x02_pq_.a\0_pq_.b\0"), |m| {
        let BackendMessage::NegotiateProtocolVersion { newest_minor, unrecognized } = m else { panic!("{m:?}") };
        assert_eq!(*newest_minor, 0);
        assert_eq!(unrecognized.iter().collect::<Vec<_>>(), ["_pq_.a", "_pq_.b"]);
    });
}

#[test]
fn results_and_extended_query_replies() {
    let rd_body = b"\0\x02id\0\0\0\x40\x01\0\x01\0\0\0\x17\0\x04\xff\xff\xff\xff\0\0name\0\0\0\0\0\0\0\0\0\0\x19\xff\xff\xff\xff\xff\xff\0\x01";
    let fields = [
        FieldDescription {
            name: "id",
            table_oid: 16385,
            column_attr: 1,
            type_oid: 23,
            type_size: 4,
            type_modifier: -1,
            format: 0,
        },
        FieldDescription {
            name: "name",
            table_oid: 0,
            column_attr: 0,
            type_oid: 25,
            type_size: -1,
            type_modifier: -1,
            format: 1,
        },
    ];
    round_trip(&msg(b'T', rd_body), |m| {
        let BackendMessage::RowDescription(rd) = m else { panic!("{m:?}") };
        assert_eq!(rd.len(), 2);
        assert_eq!(rd.iter().collect::<Vec<_>>(), fields);
    });
    let mut out = Vec::new();
    encode_row_description(&fields, &mut out).unwrap();
    assert_eq!(out, msg(b'T', rd_body));

    let dr = msg(b'D', b"\0\x03\0\0\0\x011\xff\xff\xff\xff\0\0\0\0");
    round_trip(&dr, |m| {
        let BackendMessage::DataRow(cols) = m else { panic!("{m:?}") };
        assert_eq!(cols.iter().collect::<Vec<_>>(), [Some(&b"1"[..]), None, Some(&b""[..])]);
    });
    out.clear();
    encode_data_row(&[Some(b"1"), None, Some(b"")], &mut out).unwrap();
    assert_eq!(out, dr);

    round_trip(&msg(b'C', b"SELECT 3\0"), |m| assert_eq!(*m, BackendMessage::CommandComplete("SELECT 3")));
    round_trip(&msg(b't', b"\0\x02\0\0\0\x17\0\0\0\x19"), |m| {
        let BackendMessage::ParameterDescription(oids) = m else { panic!("{m:?}") };
        assert_eq!(oids.iter().collect::<Vec<_>>(), [23, 25]);
    });
    round_trip(&msg(b'V', b"\xff\xff\xff\xff"), |m| assert_eq!(*m, BackendMessage::FunctionCallResponse(None)));
    round_trip(&msg(b'V', b"\0\0\0\x02ok"), |m| assert_eq!(*m, BackendMessage::FunctionCallResponse(Some(b"ok"))));
    let empty: [(u8, BackendMessage<'_>); 8] = [
        (b'I', BackendMessage::EmptyQueryResponse),
        (b'1', BackendMessage::ParseComplete),
        (b'2', BackendMessage::BindComplete),
        (b'3', BackendMessage::CloseComplete),
        (b'n', BackendMessage::NoData),
        (b's', BackendMessage::PortalSuspended),
        (b'c', BackendMessage::CopyDone),
        (b'd', BackendMessage::CopyData(b"")),
    ];
    for (tag, want) in empty {
        round_trip(&msg(tag, b""), |m| assert_eq!(*m, want));
    }
}

#[test]
fn copy_responses() {
    for tag in [b'G', b'H', b'W'] {
        round_trip(&msg(tag, b"\x01\0\x02\0\x01\0\x01"), |m| {
            let (BackendMessage::CopyInResponse(c)
            | BackendMessage::CopyOutResponse(c)
            | BackendMessage::CopyBothResponse(c)) = m
            else {
                panic!("{m:?}")
            };
            assert_eq!(c.format, 1);
            assert_eq!(c.column_formats.iter().collect::<Vec<_>>(), [1, 1]);
        });
    }
}

#[test]
fn error_response_fields() {
    let bytes = msg(b'E', ERROR_BODY);
    round_trip(&bytes, |m| {
        let BackendMessage::ErrorResponse(fields) = m else { panic!("{m:?}") };
        assert_eq!(fields.code(), Some("42P01"));
        let f = fields.to_fields();
        assert_eq!(f.severity, Some("ERROR"));
        assert_eq!(f.message, Some("relation \"nope\" does not exist"));
        assert_eq!(f.position, Some("15"));
        assert_eq!(f.source.file, Some("parse_relation.c"));
        assert_eq!(f.source.line, Some("1452"));
        assert_eq!(f.detail, None);
        // Re-encoding the typed view yields the same fields (same order here).
        let mut out = Vec::new();
        f.encode_error(&mut out).unwrap();
        assert_eq!(out, bytes);
    });
    assert_eq!(peek(&frame(&bytes)), Ok(BackendPeek::Error { sqlstate: Some("42P01") }));
    assert_eq!(peek_sqlstate(b"SERROR\0\0"), None);
    round_trip(&msg(b'N', b"SNOTICE\0Mhi\0\0"), |m| {
        let BackendMessage::NoticeResponse(f) = m else { panic!("{m:?}") };
        assert_eq!(f.iter().collect::<Vec<_>>(), [(b'S', "NOTICE"), (b'M', "hi")]);
    });
}

#[test]
fn router_errors() {
    let mut out = Vec::new();
    encode_error(Severity::Fatal, "53300", "too many connections", &mut out);
    assert_eq!(out, msg(b'E', b"SFATAL\0VFATAL\0C53300\0Mtoo many connections\0\0"));
    out.clear();
    encode_error(Severity::Error, "QP001", "bad\0tail", &mut out);
    assert_eq!(out, msg(b'E', b"SERROR\0VERROR\0CQP001\0Mbad\0\0"));
    out.clear();
    let mut f = ErrorFields::new(Severity::Warning, "01000", "careful");
    f.hint = Some("use a replica");
    f.encode_notice(&mut out).unwrap();
    assert_eq!(out, msg(b'N', b"SWARNING\0VWARNING\0C01000\0Mcareful\0Huse a replica\0\0"));
}

#[test]
fn peek_other_and_malformed() {
    assert_eq!(peek(&Frame::new(b'D', b"garbage")), Ok(BackendPeek::Other(b'D')));
    assert!(matches!(peek(&Frame::new(b'Z', b"X")), Err(DecodeError::InvalidValue { .. })));
    assert!(matches!(peek(&Frame::new(b'Z', b"")), Err(DecodeError::Truncated { .. })));
    assert_eq!(peek(&Frame::new(b'E', b"SERROR\0C4")), Ok(BackendPeek::Error { sqlstate: None }));
}

#[test]
fn malformed_backend_messages() {
    let bad: &[(u8, &[u8])] = &[
        (b'R', b"\0\0"),
        (b'R', b"\0\0\0\x05\x01\x02"),
        (b'R', b"\0\0\0\x0aSCRAM"),
        (b'R', b"\0\0\0\0x"),
        (b'Z', b"IT"),
        (b'T', b"\0\x01id\0\0\0"),
        (b'D', b"\0\x01\0\0\0\x05ab"),
        (b'D', b"\0\x01\xff\xff\xff\xfe"),
        (b'E', b"SERROR\0"),
        (b'E', b"S\xff\0\0"),
        (b'v', b"\0\0\0\0\xff\xff\xff\xff"),
        (b'v', b"\0\0\0\0\0\0\0\x03a\0"),
        (b'K', b"\0\0\0\x01"),
    ];
    for &(tag, body) in bad {
        assert!(BackendMessage::decode(&Frame::new(tag, body)).is_err(), "{:?} {body:?}", char::from(tag));
    }
    assert_eq!(BackendMessage::decode(&Frame::new(b'x', b"")), Err(DecodeError::UnknownTag(b'x')));
}

#[test]
fn startup_only_and_unknown_types_are_not_session_messages() {
    for tag in *b"123ACDEGHINSTVWZcdnst" {
        assert!(is_after_startup(tag), "{}", tag as char);
    }
    for tag in [b'R', b'K', b'v', b'X', b'Q', 0, 0xFF] {
        assert!(!is_after_startup(tag), "{}", tag as char);
    }
}
