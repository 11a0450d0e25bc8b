use proptest::prelude::*;

use crate::pg::backend::{encode_data_row, encode_row_description, peek, FieldDescription};
use crate::pg::frontend::{encode_bind, encode_bind_renamed, encode_describe_renamed, encode_parse_renamed};
use crate::pg::{
    decode_frame, decode_startup_frame, BackendMessage, Frame, Frames, FrontendMessage, ScramClient, ScramSecret,
    ScramServer, StartupPacket,
};

/// Mostly tags some decoder knows, so bodies reach the message parsers.
fn tag() -> impl Strategy<Value = u8> {
    prop_oneof![4 => prop::sample::select(b"QPBDESHCXdcfpFRKZTINtsnGHWAvV123".to_vec()), 1 => any::<u8>()]
}

fn name() -> impl Strategy<Value = String> {
    "[a-zA-Z0-9_ ]{0,12}"
}

fn values() -> impl Strategy<Value = Vec<Option<Vec<u8>>>> {
    prop::collection::vec(prop::option::of(prop::collection::vec(any::<u8>(), 0..20)), 0..12)
}

fn field() -> impl Strategy<Value = (String, u32, i16, u32, i16, i32, i16)> {
    (name(), any::<u32>(), any::<i16>(), any::<u32>(), any::<i16>(), any::<i32>(), 0i16..2)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn bind_round_trip(
        portal in name(), stmt in name(),
        formats in prop::collection::vec(0i16..2, 0..5), params in values(),
        results in prop::collection::vec(0i16..2, 0..5),
    ) {
        let refs: Vec<Option<&[u8]>> = params.iter().map(|p| p.as_deref()).collect();
        let mut out = Vec::new();
        encode_bind(&portal, &stmt, &formats, &refs, &results, &mut out).unwrap();
        let frame = decode_frame(&out, 1 << 20).unwrap().unwrap();
        let m = FrontendMessage::decode(&frame).unwrap();
        let FrontendMessage::Bind { portal: p, statement: s, param_formats, params: vals, result_formats } = m else {
            panic!("{m:?}")
        };
        prop_assert_eq!((p, s), (portal.as_str(), stmt.as_str()));
        prop_assert_eq!(param_formats.iter().collect::<Vec<_>>(), formats);
        prop_assert_eq!(&vals.iter().collect::<Vec<_>>(), &refs);
        prop_assert_eq!(result_formats.iter().collect::<Vec<_>>(), results);
        let mut again = Vec::new();
        m.encode(&mut again).unwrap();
        prop_assert_eq!(&again, &out);
        // Renaming changes only the statement name.
        let mut renamed = Vec::new();
        encode_bind_renamed(frame.body, "qp_1", &mut renamed).unwrap();
        let rf = decode_frame(&renamed, 1 << 20).unwrap().unwrap();
        match FrontendMessage::decode(&rf).unwrap() {
            FrontendMessage::Bind { statement, params: v2, .. } => {
                prop_assert_eq!(statement, "qp_1");
                prop_assert_eq!(v2.iter().collect::<Vec<_>>(), refs);
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn data_row_round_trip(cols in values()) {
        let refs: Vec<Option<&[u8]>> = cols.iter().map(|p| p.as_deref()).collect();
        let mut out = Vec::new();
        encode_data_row(&refs, &mut out).unwrap();
        let frame = decode_frame(&out, 1 << 20).unwrap().unwrap();
        let BackendMessage::DataRow(list) = BackendMessage::decode(&frame).unwrap() else { panic!() };
        prop_assert_eq!(list.iter().collect::<Vec<_>>(), refs);
    }

    #[test]
    fn row_description_round_trip(fields in prop::collection::vec(field(), 0..8)) {
        let descs: Vec<FieldDescription<'_>> = fields
            .iter()
            .map(|(n, t, a, ty, sz, m, f)| FieldDescription {
                name: n, table_oid: *t, column_attr: *a, type_oid: *ty, type_size: *sz, type_modifier: *m, format: *f,
            })
            .collect();
        let mut out = Vec::new();
        encode_row_description(&descs, &mut out).unwrap();
        let frame = decode_frame(&out, 1 << 20).unwrap().unwrap();
        let BackendMessage::RowDescription(rd) = BackendMessage::decode(&frame).unwrap() else { panic!() };
        prop_assert_eq!(rd.iter().collect::<Vec<_>>(), descs);
    }

    /// Random bodies never panic any decoder, and whatever decodes re-encodes to the same bytes.
    #[test]
    fn random_bodies_never_panic(tag in tag(), body in prop::collection::vec(any::<u8>(), 0..64)) {
        let frame = Frame::new(tag, &body);
        let mut out = Vec::new();
        if let Ok(m) = FrontendMessage::decode(&frame) {
            m.encode(&mut out).unwrap();
            prop_assert_eq!(out.get(5..), Some(&body[..]));
        }
        out.clear();
        if let Ok(m) = BackendMessage::decode(&frame) {
            m.encode(&mut out).unwrap();
            prop_assert_eq!(out.get(5..), Some(&body[..]));
        }
        let _ = peek(&frame);
        let _ = encode_bind_renamed(&body, "x", &mut out);
        let _ = encode_parse_renamed(&body, "x", &mut out);
        let _ = encode_describe_renamed(&body, "x", &mut out);
        if let Ok(p) = StartupPacket::decode(&body) {
            out.clear();
            p.encode(&mut out).unwrap();
            prop_assert_eq!(out.get(4..), Some(&body[..]));
        }
    }

    /// Random streams never panic the framers, and frames never exceed the buffer or the limit.
    #[test]
    fn random_streams_never_panic(buf in prop::collection::vec(any::<u8>(), 0..256), max in 4usize..300) {
        let mut frames = Frames::new(&buf, max);
        for f in frames.by_ref().flatten() {
            prop_assert!(f.total_len <= max + 1);
        }
        prop_assert!(frames.consumed() <= buf.len());
        if let Ok(Some(f)) = decode_startup_frame(&buf, max) {
            prop_assert!(f.total_len <= max && f.total_len <= buf.len());
        }
    }

    /// SCRAM parsers accept arbitrary bytes without panicking.
    #[test]
    fn scram_parsers_never_panic(a in prop::collection::vec(any::<u8>(), 0..80), b in ".{0,80}") {
        let secret = ScramSecret::from_password("pw", b"salt", 2);
        let _ = ScramServer::start(&secret, &a, "srv");
        if let Ok((server, _)) = ScramServer::start(&secret, b"n,,n=,r=abc", "srv") {
            let _ = server.finish(&a);
            let _ = server.finish(b.as_bytes());
        }
        if let Ok(client) = ScramClient::new("", "pw", "abc") {
            let _ = client.handle_server_first(&a);
            if let Ok((_, v)) = client.handle_server_first(b"r=abcdef,s=c2FsdA==,i=2") {
                let _ = v.verify_server_final(&a);
            }
        }
        let _ = ScramSecret::parse(&b);
    }
}
