//! Parameters of `COM_STMT_EXECUTE` (Client/Server Protocol, "COM_STMT_EXECUTE"): NULL bitmap
//! (offset 0), the new-params-bound flag with one (type, flags) pair per parameter, then the
//! binary value of each parameter that is neither NULL nor supplied by `COM_STMT_SEND_LONG_DATA`.
//! Types are only sent when they change, so the caller keeps the previous ones per statement.

use smallvec::SmallVec;

use super::codec::Reader;
use super::column::{ColumnType, ValueType};
use super::error::DecodeError;
use super::row::{is_null, null_bitmap_len, set_null};
use super::value::BinaryValue;

/// Flag bit of a parameter's second type byte: the integer is unsigned.
pub const PARAM_UNSIGNED: u8 = 0x80;

/// Decoded parameters of one execution; up to 8 stay on the stack.
#[derive(Debug, Clone, PartialEq)]
pub struct ExecuteParams<'a> {
    /// Whether the client sent types with this execution (they must then be remembered).
    pub new_params_bound: bool,
    /// Type of each parameter: as sent, or the previous ones.
    pub types: SmallVec<[ValueType; 8]>,
    /// Each parameter's value: `Some(BinaryValue::Null)` for NULL, `None` when its data came
    /// through `COM_STMT_SEND_LONG_DATA`.
    pub values: SmallVec<[Option<BinaryValue<'a>>; 8]>,
}

/// Decodes the parameter block (`params` of [`super::command::Command::StmtExecute`]).
///
/// `param_count` comes from the statement's prepare OK; `prev_types` are the types bound by an
/// earlier execution; `long_data[i]` says parameter `i` was sent with `COM_STMT_SEND_LONG_DATA`
/// since the last execution (missing entries mean no).
pub fn decode_execute_params<'a>(
    body: &'a [u8],
    param_count: u16,
    prev_types: &[ValueType],
    long_data: &[bool],
) -> Result<ExecuteParams<'a>, DecodeError> {
    let count = usize::from(param_count);
    if count == 0 {
        return Ok(ExecuteParams { new_params_bound: false, types: SmallVec::new(), values: SmallVec::new() });
    }
    let mut r = Reader::new(body);
    let bitmap = r.bytes(null_bitmap_len(count, 0), "NULL bitmap")?;
    let new_params_bound = match r.u8("new params bound flag")? {
        0 => false,
        1 => true,
        other => return Err(DecodeError::InvalidValue { field: "new params bound flag", value: u64::from(other) }),
    };
    let types: SmallVec<[ValueType; 8]> = if new_params_bound {
        // Two bytes per parameter must be present before anything is allocated for them.
        let raw = r.bytes(2 * count, "parameter types")?;
        raw.chunks_exact(2)
            .map(|pair| match *pair {
                [t, flags] => ValueType::new(ColumnType(t), flags & PARAM_UNSIGNED != 0),
                _ => ValueType::new(ColumnType::NULL, false),
            })
            .collect()
    } else if prev_types.len() == count {
        SmallVec::from_slice(prev_types)
    } else {
        return Err(DecodeError::InvalidValue {
            field: "parameter types (none bound yet)",
            value: prev_types.len() as u64,
        });
    };
    let mut values = SmallVec::with_capacity(count);
    for (i, ty) in types.iter().enumerate() {
        let value = if is_null(bitmap, i, 0) {
            Some(BinaryValue::Null)
        } else if long_data.get(i).copied().unwrap_or(false) {
            None
        } else {
            Some(BinaryValue::decode(&mut r, *ty)?)
        };
        values.push(value);
    }
    r.finish("COM_STMT_EXECUTE parameters")?;
    Ok(ExecuteParams { new_params_bound, types, values })
}

impl<'a> ExecuteParams<'a> {
    /// The parameters of a statement whose `j`-th placeholder takes parameter `order[j]` of this
    /// execution (a rewrite that moves or repeats positional `?`): types, NULL bits, long-data
    /// markers and values follow their parameter. Types are always bound, because the statement
    /// they go to may never have been sent them. `None` if `order` names a parameter beyond the
    /// last.
    pub fn reorder(&self, order: &[u16]) -> Option<ExecuteParams<'a>> {
        let mut types = SmallVec::with_capacity(order.len());
        let mut values = SmallVec::with_capacity(order.len());
        for &i in order {
            types.push(*self.types.get(usize::from(i))?);
            values.push(*self.values.get(usize::from(i))?);
        }
        Some(ExecuteParams { new_params_bound: true, types, values })
    }
}

/// Appends the parameter block. NULL values become bitmap bits, `None` values (long data) take no
/// bytes, and types are written when `new_params_bound` is set.
pub fn encode_execute_params(params: &ExecuteParams<'_>, out: &mut Vec<u8>) {
    let count = params.values.len();
    if count == 0 {
        return;
    }
    let start = out.len();
    out.resize(start + null_bitmap_len(count, 0), 0);
    if let Some(bitmap) = out.get_mut(start..) {
        for (i, value) in params.values.iter().enumerate() {
            if value.is_some_and(|v| v.is_null()) {
                set_null(bitmap, i, 0);
            }
        }
    }
    out.push(u8::from(params.new_params_bound));
    if params.new_params_bound {
        for ty in &params.types {
            out.extend_from_slice(&[ty.column_type.0, if ty.unsigned { PARAM_UNSIGNED } else { 0 }]);
        }
    }
    for value in params.values.iter().flatten() {
        value.encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mysql::value::tests::typed_value;
    use proptest::prelude::*;

    #[test]
    fn golden_params_with_types() {
        // Two parameters: BIGINT 7 and NULL as VAR_STRING.
        let body = [0x02, 0x01, 0x08, 0x00, 0xFD, 0x00, 0x07, 0, 0, 0, 0, 0, 0, 0];
        let p = decode_execute_params(&body, 2, &[], &[]).unwrap();
        assert!(p.new_params_bound);
        assert_eq!(
            &p.types[..],
            &[ValueType::new(ColumnType::LONGLONG, false), ValueType::new(ColumnType::VAR_STRING, false)]
        );
        assert_eq!(&p.values[..], &[Some(BinaryValue::I64(7)), Some(BinaryValue::Null)]);
        let mut out = Vec::new();
        encode_execute_params(&p, &mut out);
        assert_eq!(out, body);
    }

    #[test]
    fn previous_types_and_long_data() {
        let prev = [ValueType::new(ColumnType::TINY, true), ValueType::new(ColumnType::BLOB, false)];
        // Not rebound; parameter 1 came as long data so only the TINY value is present.
        let body = [0x00, 0x00, 0xFF];
        let p = decode_execute_params(&body, 2, &prev, &[false, true]).unwrap();
        assert!(!p.new_params_bound);
        assert_eq!(&p.values[..], &[Some(BinaryValue::U8(255)), None]);
        let mut out = Vec::new();
        encode_execute_params(&p, &mut out);
        assert_eq!(out, body);
        assert!(decode_execute_params(&body, 2, &[], &[false, true]).is_err());
        assert!(decode_execute_params(&[0x00, 0x02], 1, &prev[..1], &[]).is_err());
        assert!(matches!(
            decode_execute_params(&[0x00, 0x00, 1, 2], 1, &prev[..1], &[]),
            Err(DecodeError::TrailingBytes { .. })
        ));
        assert_eq!(decode_execute_params(&[], 0, &[], &[]).unwrap().values.len(), 0);
    }

    #[test]
    fn golden_reorder_with_repeats_nulls_and_strings() {
        // Client: (7 as LONGLONG, NULL as VAR_STRING, "it's ü" as VAR_STRING), types bound.
        let s = "it's ü".as_bytes();
        let body =
            [&[0x02, 0x01, 0x08, 0x00, 0xFD, 0x00, 0xFD, 0x00][..], &[7, 0, 0, 0, 0, 0, 0, 0], &[s.len() as u8], s]
                .concat();
        let p = decode_execute_params(&body, 3, &[], &[]).unwrap();
        // Translated: `? ? ? ? ?` binding parameters 2, 0, 1, 0, 2.
        let mut out = Vec::new();
        encode_execute_params(&p.reorder(&[2, 0, 1, 0, 2]).unwrap(), &mut out);
        let want = [
            &[0b0000_0100, 0x01][..],
            &[0xFD, 0x00, 0x08, 0x00, 0xFD, 0x00, 0x08, 0x00, 0xFD, 0x00],
            &[s.len() as u8],
            s,
            &[7, 0, 0, 0, 0, 0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0],
            &[s.len() as u8],
            s,
        ]
        .concat();
        assert_eq!(out, want);
        // Not rebound by the client: the remembered types still go out with the reordered values.
        let prev = p.types.clone();
        let again = [&[0b100, 0x00][..], &[9, 0, 0, 0, 0, 0, 0, 0], &[1, b'x']].concat();
        let q = decode_execute_params(&again, 3, &prev, &[]).unwrap();
        let mut out = Vec::new();
        encode_execute_params(&q.reorder(&[1, 2, 0]).unwrap(), &mut out);
        assert_eq!(
            out,
            [&[0b010, 0x01, 0xFD, 0x00, 0xFD, 0x00, 0x08, 0x00][..], &[1, b'x'], &[9, 0, 0, 0, 0, 0, 0, 0]].concat()
        );
        assert_eq!(p.reorder(&[3]), None);
        assert_eq!(p.reorder(&[]).map(|r| r.values.len()), Some(0));
    }

    proptest! {
        #[test]
        fn reorder_moves_every_part_of_a_parameter(
            params in prop::collection::vec((typed_value(), 0u8..4), 1..24),
            picks in prop::collection::vec(any::<prop::sample::Index>(), 1..48),
            bound in any::<bool>(),
        ) {
            let n = params.len();
            let types: SmallVec<[ValueType; 8]> = params.iter().map(|((t, _), _)| *t).collect();
            let values: SmallVec<[Option<BinaryValue<'_>>; 8]> = params
                .iter()
                .map(|((_, v), kind)| match kind { 0 => Some(BinaryValue::Null), 1 => None, _ => Some(*v) })
                .collect();
            let long: Vec<bool> = values.iter().map(Option::is_none).collect();
            // Every parameter at least once, then repeats in any order.
            let mut order: Vec<u16> = (0..n as u16).rev().collect();
            order.extend(picks.iter().map(|i| i.index(n) as u16));
            let client = ExecuteParams { new_params_bound: bound, types: types.clone(), values: values.clone() };
            let mut wire = Vec::new();
            encode_execute_params(&client, &mut wire);
            let prev: &[ValueType] = if bound { &[] } else { &types };
            let decoded = decode_execute_params(&wire, n as u16, prev, &long).unwrap();
            let mut out = Vec::new();
            encode_execute_params(&decoded.reorder(&order).unwrap(), &mut out);
            let long_out: Vec<bool> = order.iter().map(|&i| long[usize::from(i)]).collect();
            let back = decode_execute_params(&out, order.len() as u16, &[], &long_out).unwrap();
            prop_assert!(back.new_params_bound);
            for (j, &i) in order.iter().enumerate() {
                prop_assert_eq!(back.types[j], types[usize::from(i)]);
                prop_assert_eq!(back.values[j], values[usize::from(i)]);
            }
            prop_assert_eq!(back.values.len(), order.len());
        }

        #[test]
        fn round_trip_many_params(params in prop::collection::vec((typed_value(), 0u8..4), 1..80)) {
            // Declared first: the decoded params borrow them and must not outlive them.
            let (mut out, mut out2) = (Vec::new(), Vec::new());
            let types: SmallVec<[ValueType; 8]> = params.iter().map(|((t, _), _)| *t).collect();
            let values: SmallVec<[Option<BinaryValue<'_>>; 8]> = params
                .iter()
                .map(|((_, v), kind)| match kind { 0 => Some(BinaryValue::Null), 1 => None, _ => Some(*v) })
                .collect();
            let long_data: Vec<bool> = values.iter().map(Option::is_none).collect();
            let p = ExecuteParams { new_params_bound: true, types: types.clone(), values };
            encode_execute_params(&p, &mut out);
            let back = decode_execute_params(&out, params.len() as u16, &[], &long_data).unwrap();
            prop_assert_eq!(&back, &p);
            let rebound = ExecuteParams { new_params_bound: false, ..p };
            encode_execute_params(&rebound, &mut out2);
            prop_assert_eq!(decode_execute_params(&out2, params.len() as u16, &types, &long_data).unwrap(), rebound);
        }

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..64), n in any::<u16>(), t in any::<u8>()) {
            let prev = vec![ValueType::new(ColumnType(t), false); usize::from(n % 40)];
            let _ = decode_execute_params(&bytes, n, &prev, &[true, false]);
            let _ = decode_execute_params(&bytes, n % 40, &prev, &[]);
        }
    }
}
