//! Result-set rows (Client/Server Protocol, "Text Resultset Row" and "Binary Protocol Resultset
//! Row"), and the NULL bitmap shared with `COM_STMT_EXECUTE`. Decoded values borrow the payload.

use smallvec::SmallVec;

use super::codec::{put_lenenc_bytes, Reader, LENENC_NULL};
use super::column::ValueType;
use super::error::DecodeError;
use super::value::BinaryValue;

/// Values of one row; rows of up to 16 columns stay on the stack.
pub type RowValues<T> = SmallVec<[T; 16]>;

/// Bytes of a NULL bitmap for `count` items whose first bit is at position `offset`
/// (2 in binary rows, 0 in `COM_STMT_EXECUTE`).
#[must_use]
pub fn null_bitmap_len(count: usize, offset: usize) -> usize {
    (count + offset).div_ceil(8)
}

/// Whether item `index` is marked NULL in `bitmap`; bits past the end read as not NULL.
#[must_use]
pub fn is_null(bitmap: &[u8], index: usize, offset: usize) -> bool {
    let bit = index + offset;
    bitmap.get(bit / 8).is_some_and(|byte| byte & (1 << (bit % 8)) != 0)
}

/// Sets item `index`'s bit in `bitmap`; an index past the end is ignored.
pub fn set_null(bitmap: &mut [u8], index: usize, offset: usize) {
    let bit = index + offset;
    if let Some(byte) = bitmap.get_mut(bit / 8) {
        *byte |= 1 << (bit % 8);
    }
}

/// Decodes a text row of `column_count` values: `string<lenenc>` each, 0xFB for NULL.
pub fn decode_text_row(payload: &[u8], column_count: usize) -> Result<RowValues<Option<&[u8]>>, DecodeError> {
    // Every value takes at least one byte, which bounds the allocation by the payload size.
    if column_count > payload.len() {
        return Err(DecodeError::Truncated { field: "text row" });
    }
    let mut r = Reader::new(payload);
    let mut values = RowValues::with_capacity(column_count);
    for _ in 0..column_count {
        values.push(r.lenenc_bytes_or_null("text row value")?);
    }
    r.finish("text row")?;
    Ok(values)
}

/// Appends a text row.
pub fn encode_text_row(values: &[Option<&[u8]>], out: &mut Vec<u8>) {
    for value in values {
        match value {
            Some(bytes) => put_lenenc_bytes(out, bytes),
            None => out.push(LENENC_NULL),
        }
    }
}

/// Decodes a binary row: header 0x00, NULL bitmap with offset 2, then each non-NULL value in the
/// form its column type dictates. NULL columns come back as [`BinaryValue::Null`].
pub fn decode_binary_row<'a>(
    payload: &'a [u8],
    columns: &[ValueType],
) -> Result<RowValues<BinaryValue<'a>>, DecodeError> {
    let mut r = Reader::new(payload);
    match r.u8("binary row header")? {
        0x00 => {}
        got => return Err(DecodeError::UnexpectedHeader { packet: "binary row", got }),
    }
    let bitmap = r.bytes(null_bitmap_len(columns.len(), 2), "NULL bitmap")?;
    let mut values = RowValues::with_capacity(columns.len());
    for (i, ty) in columns.iter().enumerate() {
        let value = if is_null(bitmap, i, 2) { BinaryValue::Null } else { BinaryValue::decode(&mut r, *ty)? };
        values.push(value);
    }
    r.finish("binary row")?;
    Ok(values)
}

/// Appends a binary row; [`BinaryValue::Null`] entries become bitmap bits.
pub fn encode_binary_row(values: &[BinaryValue<'_>], out: &mut Vec<u8>) {
    out.push(0x00);
    let start = out.len();
    out.resize(start + null_bitmap_len(values.len(), 2), 0);
    if let Some(bitmap) = out.get_mut(start..) {
        for (i, value) in values.iter().enumerate() {
            if value.is_null() {
                set_null(bitmap, i, 2);
            }
        }
    }
    for value in values {
        value.encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::column::ColumnType;
    use crate::mysql::value::tests::typed_value;
    use proptest::prelude::*;

    #[test]
    fn golden_text_row() {
        let row = [Some(&b"1"[..]), None, Some(b""), Some(&[b'x'; 251][..])];
        let mut out = Vec::new();
        encode_text_row(&row, &mut out);
        let mut want = vec![0x01, b'1', 0xFB, 0x00, 0xFC, 0xFB, 0x00];
        want.extend_from_slice(&[b'x'; 251]);
        assert_eq!(out, want);
        assert_eq!(&decode_text_row(&out, 4).unwrap()[..], &row[..]);
        assert!(matches!(decode_text_row(&out, 3), Err(DecodeError::TrailingBytes { .. })));
        assert!(decode_text_row(&out, 5).is_err());
        assert!(decode_text_row(&[0x01], 1_000_000).is_err());
    }

    #[test]
    fn golden_binary_row() {
        // From the manual's example shape: (NULL, 'abc', 7 as TINY) -> bitmap bit 2 set.
        let values = [BinaryValue::Null, BinaryValue::Bytes(b"abc"), BinaryValue::I8(7)];
        let mut out = Vec::new();
        encode_binary_row(&values, &mut out);
        assert_eq!(out, [0x00, 0x04, 0x03, b'a', b'b', b'c', 0x07]);
        let types = [
            ValueType::new(ColumnType::LONG, false),
            ValueType::new(ColumnType::VAR_STRING, false),
            ValueType::new(ColumnType::TINY, false),
        ];
        assert_eq!(&decode_binary_row(&out, &types).unwrap()[..], &values[..]);
        assert!(decode_binary_row(&[0x01, 0x00], &types[..1]).is_err());
    }

    #[test]
    fn bitmap_sizes() {
        assert_eq!(null_bitmap_len(0, 2), 1);
        assert_eq!(null_bitmap_len(6, 2), 1);
        assert_eq!(null_bitmap_len(7, 2), 2);
        assert_eq!(null_bitmap_len(0, 0), 0);
        assert_eq!(null_bitmap_len(8, 0), 1);
        assert_eq!(null_bitmap_len(9, 0), 2);
    }

    proptest! {
        #[test]
        fn binary_row_round_trip(cols in prop::collection::vec((typed_value(), any::<bool>()), 0..70)) {
            let types: Vec<ValueType> = cols.iter().map(|((t, _), _)| *t).collect();
            let values: Vec<BinaryValue<'static>> = cols.iter().map(|((_, v), null)| if *null { BinaryValue::Null } else { *v }).collect();
            let mut out = Vec::new();
            encode_binary_row(&values, &mut out);
            prop_assert_eq!(&decode_binary_row(&out, &types).unwrap()[..], &values[..]);
        }

        #[test]
        fn text_row_round_trip(row in prop::collection::vec(prop::option::of(prop::collection::vec(any::<u8>(), 0..300)), 0..20)) {
            let borrowed: Vec<Option<&[u8]>> = row.iter().map(|v| v.as_deref()).collect();
            let mut out = Vec::new();
            encode_text_row(&borrowed, &mut out);
            prop_assert_eq!(&decode_text_row(&out, row.len()).unwrap()[..], &borrowed[..]);
        }

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..48), n in 0usize..20, t in any::<u8>()) {
            let _ = decode_text_row(&bytes, n);
            let types = vec![ValueType::new(ColumnType(t), false); n];
            let _ = decode_binary_row(&bytes, &types);
        }
    }
}
