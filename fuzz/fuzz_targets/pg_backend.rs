//! PostgreSQL backend messages (what a server, or something posing as one, sends the router):
//! `BackendMessage::decode` of every tag, the cheap `peek` the relay uses, and the lazy field
//! lists (RowDescription, DataRow, Error/Notice fields, SASL mechanisms).
//!
//! Properties: no panic; decode → encode gives the same tag and body bytes and decodes back
//! equal; `peek` agrees with the full decode on ReadyForQuery and ErrorResponse;
//! `data_row_run` (raw_passthrough's header scan) spans exactly the leading complete DataRows
//! the full framer finds.
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::protocol::pg::backend::peek;
use querypilot::protocol::pg::{
    data_row_run, decode_frame, Authentication, BackendMessage, BackendPeek, Frame, Frames,
};

const MAX_LEN: usize = 1 << 16;

fuzz_target!(|data: &[u8]| {
    let mut frames = Frames::new(data, MAX_LEN);
    for frame in frames.by_ref() {
        let Ok(frame) = frame else { break };
        check(&frame);
    }
    assert!(frames.consumed() <= data.len());
    let mut rows = 0;
    for frame in Frames::new(data, MAX_LEN) {
        match frame {
            Ok(f) if f.tag == b'D' => rows += f.total_len,
            _ => break,
        }
    }
    assert_eq!(data_row_run(data, MAX_LEN), rows, "the header scan and the framer disagree");
    if let Some((&tag, body)) = data.split_first() {
        check(&Frame::new(tag, body));
    }
});

fn check(frame: &Frame<'_>) {
    let peeked = peek(frame);
    let Ok(msg) = BackendMessage::decode(frame) else { return };
    assert_eq!(msg.tag(), frame.tag);
    match (&msg, peeked) {
        (BackendMessage::ReadyForQuery(s), Ok(BackendPeek::ReadyForQuery(p))) => assert_eq!(*s, p),
        (BackendMessage::ReadyForQuery(_), other) => panic!("peek disagrees on ReadyForQuery: {other:?}"),
        (BackendMessage::ErrorResponse(fields), Ok(BackendPeek::Error { sqlstate })) => {
            assert_eq!(fields.code(), sqlstate, "peek and decode find different SQLSTATEs");
        }
        (BackendMessage::ErrorResponse(_), other) => panic!("peek disagrees on ErrorResponse: {other:?}"),
        _ => {}
    }
    walk(&msg);
    let mut out = Vec::new();
    msg.encode(&mut out).expect("a decoded message re-encodes");
    let again = decode_frame(&out, usize::MAX).expect("own frame").expect("complete");
    assert_eq!(again.total_len, out.len());
    assert_eq!(again.tag, frame.tag);
    assert_eq!(again.body, frame.body, "re-encoding is byte-exact");
    assert_eq!(BackendMessage::decode(&again).expect("re-decodes"), msg);
}

fn walk(msg: &BackendMessage<'_>) {
    match msg {
        BackendMessage::RowDescription(rd) => assert_eq!(rd.iter().count(), rd.len()),
        BackendMessage::DataRow(values) => assert_eq!(values.iter().count(), values.len()),
        BackendMessage::ErrorResponse(f) | BackendMessage::NoticeResponse(f) => {
            let _ = f.iter().count();
            let _ = f.to_fields();
        }
        BackendMessage::ParameterDescription(oids) => assert_eq!(oids.iter().count(), oids.len()),
        BackendMessage::Authentication(Authentication::Sasl { mechanisms }) => {
            let _ = mechanisms.count();
        }
        BackendMessage::NegotiateProtocolVersion { unrecognized, .. } => {
            let _ = unrecognized.count();
        }
        BackendMessage::CopyInResponse(c)
        | BackendMessage::CopyOutResponse(c)
        | BackendMessage::CopyBothResponse(c) => {
            assert_eq!(c.column_formats.iter().count(), c.column_formats.len());
        }
        _ => {}
    }
}
