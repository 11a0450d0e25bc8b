use crate::pg::framer::{decode_startup_frame, MAX_STARTUP_PACKET_LEN};
use crate::pg::startup::{
    is_protocol_option, Negotiation, ProtocolVersion, StartupPacket, StartupParams, MAX_STARTUP_PARAMS,
};
use crate::pg::{BackendMessage, DecodeError, EncodeError};

const STARTUP_GOLDEN: &[u8] = b"\0\0\0\x29\0\x03\0\0user\0alice\0database\0shop\0application_name\0\0\0";

/// Prefixes a startup body with its length.
fn packet(body: &[u8]) -> Vec<u8> {
    let mut buf = u32::try_from(body.len() + 4).unwrap().to_be_bytes().to_vec();
    buf.extend_from_slice(body);
    buf
}

fn decode(buf: &[u8]) -> Result<StartupPacket<'_>, DecodeError> {
    let frame = decode_startup_frame(buf, 1 << 20)?.ok_or(DecodeError::Truncated { what: "test" })?;
    assert_eq!(frame.total_len, buf.len());
    StartupPacket::decode(frame.body)
}

#[test]
fn startup_message_golden() {
    let mut buf = STARTUP_GOLDEN.to_vec();
    let len = u8::try_from(buf.len()).unwrap();
    buf[3] = len;
    let packet = decode(&buf).unwrap();
    let StartupPacket::Startup { protocol, params } = &packet else { panic!("not a startup: {packet:?}") };
    assert_eq!(*protocol, ProtocolVersion::V3_0);
    assert_eq!(params.get("user"), Some("alice"));
    assert_eq!(params.get("database"), Some("shop"));
    assert_eq!(params.get("application_name"), Some(""));
    assert_eq!(params.get("options"), None);
    assert_eq!(params.len(), 3);
    let mut out = vec![0xee];
    packet.encode(&mut out).unwrap();
    assert_eq!(&out[1..], &buf[..]);
}

#[test]
fn ssl_gss_and_cancel_requests() {
    assert_eq!(decode(&[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]), Ok(StartupPacket::SslRequest));
    assert_eq!(decode(&[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x30]), Ok(StartupPacket::GssEncRequest));
    let cancel = [0, 0, 0, 16, 0x04, 0xd2, 0x16, 0x2e, 0, 0, 0x30, 0x39, 0xff, 0xff, 0xff, 0xfe];
    assert_eq!(decode(&cancel), Ok(StartupPacket::Cancel { pid: 12345, key: -2 }));
    let packets =
        [StartupPacket::SslRequest, StartupPacket::GssEncRequest, StartupPacket::Cancel { pid: 12345, key: -2 }];
    for p in &packets {
        let mut out = Vec::new();
        p.encode(&mut out).unwrap();
        assert_eq!(decode(&out).as_ref(), Ok(p));
    }
    let mut out = Vec::new();
    StartupPacket::Cancel { pid: 12345, key: -2 }.encode(&mut out).unwrap();
    assert_eq!(out, cancel);
}

#[test]
fn rejects_bad_startup_packets() {
    // Unknown 1234.xxxx request code.
    assert_eq!(decode(&[0, 0, 0, 8, 0x04, 0xd2, 0, 1]), Err(DecodeError::UnknownRequestCode(0x04d2_0001)));
    // Protocol 2.0.
    assert_eq!(decode(&[0, 0, 0, 9, 0, 2, 0, 0, 0]), Err(DecodeError::UnsupportedProtocol { major: 2, minor: 0 }));
    // Missing list terminator.
    assert!(matches!(decode(&packet(b"\0\x03\0\0user\0a\0")), Err(DecodeError::MissingNul { .. })));
    // Cancel with trailing bytes (a protocol 3.2 long key).
    let long = [0, 0, 0, 17, 0x04, 0xd2, 0x16, 0x2e, 0, 0, 0, 1, 0, 0, 0, 2, 3];
    assert!(matches!(decode(&long), Err(DecodeError::TrailingBytes { .. })));
    // Data after the terminator.
    assert!(matches!(decode(&packet(b"\0\x03\0\0\0xx")), Err(DecodeError::TrailingBytes { .. })));
    // Invalid UTF-8 parameter.
    assert!(matches!(decode(&packet(b"\0\x03\0\0\xff\0\0\0")), Err(DecodeError::InvalidUtf8 { .. })));
}

#[test]
fn newer_minor_version_is_decoded_for_negotiation() {
    let packet = decode(b"\0\0\0\x09\0\x03\0\x02\0").unwrap();
    assert!(matches!(packet, StartupPacket::Startup { protocol: ProtocolVersion { major: 3, minor: 2 }, .. }));
}

fn startup_with(n: usize) -> Vec<u8> {
    let mut body = vec![0, 3, 0, 0];
    for i in 0..n {
        body.extend_from_slice(format!("p{i}\0v\0").as_bytes());
    }
    body.push(0);
    packet(&body)
}

#[test]
fn param_count_limit() {
    let ok = startup_with(MAX_STARTUP_PARAMS);
    assert!(matches!(decode(&ok), Ok(StartupPacket::Startup { params, .. }) if params.len() == MAX_STARTUP_PARAMS));
    let too_many = startup_with(MAX_STARTUP_PARAMS + 1);
    assert_eq!(decode(&too_many), Err(DecodeError::TooManyParams { max: 1000 }));
    // The packet fits PostgreSQL's startup length limit, so the count limit is what refuses it.
    assert!(too_many.len() < MAX_STARTUP_PACKET_LEN);
}

#[test]
fn encode_rejects_unrepresentable_params() {
    let mut params = StartupParams::new();
    params.push("", "x");
    let mut out = vec![1, 2];
    let err = StartupPacket::Startup { protocol: ProtocolVersion::V3_0, params }.encode(&mut out);
    assert!(matches!(err, Err(EncodeError::Invalid { .. })));
    assert_eq!(out, [1, 2], "partial output must be rolled back");
    let mut params = StartupParams::new();
    params.push("user", "a\0b");
    let err = StartupPacket::Startup { protocol: ProtocolVersion::V3_0, params }.encode(&mut out);
    assert_eq!(err, Err(EncodeError::InteriorNul { what: "startup parameter value" }));
    assert_eq!(out, [1, 2]);
}

/// The NegotiateProtocolVersion the router answers `packet` with, decoded as a client would.
fn negotiation(packet: &[u8]) -> Option<(i32, Vec<String>, usize)> {
    let StartupPacket::Startup { protocol, params } = decode(packet).unwrap() else { panic!("not a startup") };
    let n = Negotiation::of(protocol, &params)?;
    let mut out = Vec::new();
    n.encode(&mut out).unwrap();
    let frame = crate::pg::decode_frame(&out, 1 << 20).unwrap().expect("one whole message");
    let BackendMessage::NegotiateProtocolVersion { newest_minor, unrecognized } =
        BackendMessage::decode(&frame).unwrap()
    else {
        panic!("not a NegotiateProtocolVersion")
    };
    Some((newest_minor, unrecognized.iter().map(str::to_owned).collect(), out.len() - frame.total_len))
}

#[test]
fn newer_minor_versions_and_protocol_options_are_negotiated_down_to_3_0() {
    // 3.0 without options: nothing to negotiate.
    assert_eq!(negotiation(&packet(b"\0\x03\0\0user\0a\0\0")), None);
    // A newer minor (PostgreSQL 18's 3.2, and any later one): the newest version the router
    // speaks, whole, as PostgreSQL sends it; no options.
    for minor in [1u8, 2, 0xff] {
        let body = [&[0, 3, 0, minor][..], b"user\0a\0\0"].concat();
        assert_eq!(negotiation(&packet(&body)), Some((0x0003_0000, vec![], 0)), "3.{minor}");
    }
    // Every `_pq_.` option, in the client's order, whatever the version; other parameters not.
    let body = b"\0\x03\0\0user\0a\0_pq_.b\0on\0application_name\0x\0_pq_.\0\0_pq_.a\0z\0\0";
    let want = vec!["_pq_.b".to_owned(), "_pq_.".to_owned(), "_pq_.a".to_owned()];
    assert_eq!(negotiation(&packet(body)), Some((0x0003_0000, want.clone(), 0)));
    let body = b"\0\x03\0\x02_pq_.b\0on\0_pq_.\0\0_pq_.a\0z\0\0";
    assert_eq!(negotiation(&packet(body)), Some((0x0003_0000, want, 0)));
    // A name that merely contains the prefix is a setting.
    assert_eq!(negotiation(&packet(b"\0\x03\0\0x_pq_.a\0on\0\0")), None);
    assert!(is_protocol_option("_pq_.x") && !is_protocol_option("_pq_x") && !is_protocol_option("x._pq_."));
}

#[test]
fn a_full_startup_packet_of_options_gives_one_bounded_message() {
    let mut body = vec![0, 3, 0, 2];
    for i in 0..MAX_STARTUP_PARAMS {
        body.extend_from_slice(format!("_pq_.{i}\0v\0").as_bytes());
    }
    body.push(0);
    let (version, names, _) = negotiation(&packet(&body)).expect("negotiated");
    assert_eq!(version, ProtocolVersion::NEWEST.code());
    assert_eq!(names.len(), MAX_STARTUP_PARAMS);
    assert_eq!(names.last().map(String::as_str), Some("_pq_.999"));
}
