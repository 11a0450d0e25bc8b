//! MySQL result rows: text rows (`string<lenenc>` / 0xFB NULL) and binary rows (NULL bitmap with
//! offset 2 and per-type values), with column count and types taken from the input's head:
//! byte 0 = column count (0..=16), then one type byte per column, then one byte of
//! unsigned flags; the rest is the row payload.
//!
//! Properties: no panic; a decoded row has exactly one value per column; decode → encode →
//! decode → encode is stable (floats are compared by their encoding, so NaN is fine).
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::protocol::mysql::{
    decode_binary_row, decode_text_row, encode_binary_row, encode_text_row, ColumnType, ValueType,
};

fuzz_target!(|data: &[u8]| {
    let Some((&n, rest)) = data.split_first() else { return };
    let n = usize::from(n % 17);
    let Some((head, payload)) = rest.split_at_checked(n + 1) else { return };
    let unsigned = head[n];
    let columns: Vec<ValueType> = head[..n]
        .iter()
        .enumerate()
        .map(|(i, &t)| ValueType::new(ColumnType(t), unsigned & (1 << (i % 8)) != 0))
        .collect();

    let mut e1 = Vec::new();
    if let Ok(values) = decode_text_row(payload, n) {
        assert_eq!(values.len(), n);
        encode_text_row(&values, &mut e1);
        let again = decode_text_row(&e1, n).expect("own text row decodes");
        assert_eq!(again, values);
    }

    if let Ok(values) = decode_binary_row(payload, &columns) {
        assert_eq!(values.len(), n);
        e1.clear();
        encode_binary_row(&values, &mut e1);
        let again = decode_binary_row(&e1, &columns).expect("own binary row decodes");
        let mut e2 = Vec::new();
        encode_binary_row(&again, &mut e2);
        assert_eq!(e1, e2, "binary row encoding is stable");
    }
});
