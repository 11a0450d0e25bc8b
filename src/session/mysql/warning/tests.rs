use super::*;
use crate::protocol::mysql::{decode_payload, decode_text_row};

#[test]
fn questions_about_warnings_are_recognized() {
    assert_eq!(question("SHOW WARNINGS"), Some(Question::List));
    assert_eq!(question("show warnings;"), Some(Question::List));
    assert_eq!(question("/* x */ SHOW  COUNT(*) WARNINGS"), Some(Question::Count("@@session.warning_count")));
    assert_eq!(question("select @@warning_count"), Some(Question::Count("@@warning_count")));
    assert_eq!(question("SHOW WARNINGS LIMIT 1"), None);
    assert_eq!(question("SHOW ERRORS"), None);
    assert_eq!(question("SELECT @@warning_count, 1"), None);
}

/// Splits framed output into (sequence id, payload).
fn frames(mut bytes: &[u8]) -> Vec<(u8, Vec<u8>)> {
    let mut out = Vec::new();
    while let Some(f) = decode_payload(bytes, 1 << 20).expect("valid framing") {
        out.push((f.first_seq, f.payload.to_vec()));
        bytes = bytes.get(f.consumed..).unwrap_or_default();
    }
    assert!(bytes.is_empty());
    out
}

#[test]
fn a_count_is_a_one_row_result_set_with_consecutive_sequence_ids() {
    let mut out = Vec::new();
    encode_count(1, "@@warning_count", 3, 0x0002, &mut out);
    let f = frames(&out);
    let seqs: Vec<u8> = f.iter().map(|(s, _)| *s).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert_eq!(f[0].1, [1]);
    let def = ColumnDefinition41::decode(&f[1].1).expect("column");
    assert_eq!((def.name, def.column_type), (&b"@@warning_count"[..], ColumnType::LONGLONG));
    assert_eq!(decode_text_row(&f[3].1, 1).expect("row")[0], Some(&b"3"[..]));
    assert_eq!(EofPacket::decode(&f[4].1), Ok(EofPacket { warnings: 0, status: 0x0002 }));
}
