use super::*;
use crate::protocol::pg::backend::{encode_row_description, FieldDescription};

fn described(fields: &[(&str, u32, u32)]) -> Vec<u8> {
    let fields: Vec<FieldDescription<'_>> = fields
        .iter()
        .map(|(name, table_oid, type_oid)| FieldDescription {
            name,
            table_oid: *table_oid,
            column_attr: 1,
            type_oid: *type_oid,
            type_size: -1,
            type_modifier: -1,
            format: 0,
        })
        .collect();
    let mut out = Vec::new();
    encode_row_description(&fields, &mut out).expect("encodable");
    out.get(5..).unwrap_or_default().to_vec()
}

#[test]
fn row_types_compare_names_and_types_not_tables() {
    let ints = row_type(server::ROW_DESCRIPTION, &described(&[("a", 100, 23), ("b", 100, 23)]));
    let recreated = row_type(server::ROW_DESCRIPTION, &described(&[("a", 200, 23), ("b", 200, 23)]));
    let text = row_type(server::ROW_DESCRIPTION, &described(&[("a", 100, 23), ("b", 100, 25)]));
    let renamed = row_type(server::ROW_DESCRIPTION, &described(&[("a", 100, 23), ("c", 100, 23)]));
    assert!(ints.is_some());
    assert_eq!(ints, recreated, "a re-created table with the same columns is the same row type");
    assert_ne!(ints, text);
    assert_ne!(ints, renamed);
    assert_ne!(row_type(server::NO_DATA, b""), ints);
    assert_eq!(row_type(server::NO_DATA, b""), row_type(server::NO_DATA, b""));
    assert_eq!(row_type(server::COMMAND_COMPLETE, b"SELECT 1\0"), None);
}
