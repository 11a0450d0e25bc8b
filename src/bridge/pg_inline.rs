//! PostgreSQL Bind parameters that the router writes into SQL text as literals (#35: a
//! statement whose translation is written at Bind, `session::pg::late`). Two things live here:
//! the type such a parameter is described with before any value is bound ([`literal_type`]:
//! the type PostgreSQL gives the rule's own example literal at that place), and a binary-format
//! value decoded to the text its type's output function prints ([`binary_text`], PostgreSQL
//! docs "Binary Format" of each type's send function) — exactly, or refused: raw client bytes
//! never become SQL text.
//!
//! May use protocol and sql; must not depend on session, routing, control or admin.

use super::pg_value::decode_numeric;
use super::types::oid;
use crate::sql::template::{Literal, LiteralKind};

/// `name`.
const NAME: u32 = 19;

/// Why a binary-format parameter has no text form here.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BinaryTextError {
    /// The bytes are not that type's binary form (`22P03`).
    #[error("is not a valid binary {0} value")]
    Malformed(&'static str),
    /// Text whose bytes are not UTF-8 (`22021`).
    #[error("is not valid UTF-8")]
    NotUtf8,
    /// A type whose binary form is not decoded here (`0A000`): the client can send it as text.
    #[error("has type OID {0} in binary format, which a statement whose translation is written at Bind does not take (send it in text format)")]
    Unsupported(u32),
}

/// The type PostgreSQL gives `example` as a literal (docs 4.1.2): an integer constant is
/// `int4` when it fits, `int8` when that fits, otherwise `numeric`, as is any constant with a
/// point or exponent; `TRUE`/`FALSE` are `bool`; a string constant (and NULL) is resolved as
/// `text`, the type a client's value takes there verbatim.
#[must_use]
pub fn literal_type(example: &Literal) -> u32 {
    match example.kind {
        LiteralKind::Bool => oid::BOOL,
        LiteralKind::Number => {
            let v = example.value.as_deref().unwrap_or(&example.text);
            if v.parse::<i32>().is_ok() {
                oid::INT4
            } else if v.parse::<i64>().is_ok() {
                oid::INT8
            } else {
                oid::NUMERIC
            }
        }
        _ => oid::TEXT,
    }
}

/// The text form of binary-format value `raw` of type `type_oid`.
pub fn binary_text(type_oid: u32, raw: &[u8]) -> Result<String, BinaryTextError> {
    let bad = BinaryTextError::Malformed;
    Ok(match type_oid {
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::JSON | oid::UNKNOWN | NAME => utf8(raw)?,
        // jsonb's binary form is a version byte (1) and the text.
        oid::JSONB => match raw.split_first() {
            Some((1, text)) => utf8(text)?,
            _ => return Err(bad("jsonb")),
        },
        oid::BOOL => match raw {
            [0] => "false".into(),
            [1] => "true".into(),
            _ => return Err(bad("boolean")),
        },
        oid::INT2 => i16::from_be_bytes(exact(raw).ok_or_else(|| bad("smallint"))?).to_string(),
        oid::INT4 => i32::from_be_bytes(exact(raw).ok_or_else(|| bad("integer"))?).to_string(),
        oid::INT8 => i64::from_be_bytes(exact(raw).ok_or_else(|| bad("bigint"))?).to_string(),
        oid::FLOAT4 => float_text(f64::from(f32::from_be_bytes(exact(raw).ok_or_else(|| bad("real"))?)), |x| {
            // f32's own shortest form: widening first would print its binary expansion.
            #[allow(clippy::cast_possible_truncation)]
            (x as f32).to_string()
        }),
        oid::FLOAT8 => {
            float_text(f64::from_be_bytes(exact(raw).ok_or_else(|| bad("double precision"))?), |x| x.to_string())
        }
        oid::NUMERIC => decode_numeric(raw).filter(|_| numeric_complete(raw)).ok_or_else(|| bad("numeric"))?,
        other => return Err(BinaryTextError::Unsupported(other)),
    })
}

fn utf8(raw: &[u8]) -> Result<String, BinaryTextError> {
    String::from_utf8(raw.to_vec()).map_err(|_| BinaryTextError::NotUtf8)
}

/// The whole of `raw` as a fixed-size array.
fn exact<const N: usize>(raw: &[u8]) -> Option<[u8; N]> {
    <[u8; N]>::try_from(raw).ok()
}

/// PostgreSQL's text for a float: its special values by their names, finite ones in the
/// shortest form that reads back as the same value (`shortest`).
fn float_text(x: f64, shortest: impl Fn(f64) -> String) -> String {
    if x.is_nan() {
        "NaN".into()
    } else if x.is_infinite() {
        if x > 0.0 { "Infinity" } else { "-Infinity" }.into()
    } else {
        shortest(x)
    }
}

/// Whether a binary `numeric` holds exactly the digit words its header counts.
fn numeric_complete(raw: &[u8]) -> bool {
    let count = raw.get(..2).and_then(|w| <[u8; 2]>::try_from(w).ok()).map(i16::from_be_bytes);
    count.and_then(|c| usize::try_from(c).ok()).is_some_and(|c| raw.len() == 8 + 2 * c)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::pg_value::encode_numeric;
    use crate::sql::template::parameterize;
    use crate::sql::Dialect;

    fn example(sql: &str) -> Literal {
        parameterize(sql, Dialect::Postgres).literals.remove(0)
    }

    #[test]
    fn examples_have_the_type_postgres_gives_their_literal() {
        for (sql, want) in [
            ("SELECT 1", oid::INT4),
            ("SELECT -2147483648", oid::INT4),
            ("SELECT 2147483648", oid::INT8),
            ("SELECT 99999999999999999999", oid::NUMERIC),
            ("SELECT 1.5", oid::NUMERIC),
            ("SELECT 1e3", oid::NUMERIC),
            ("SELECT '[1,2]'", oid::TEXT),
            ("SELECT TRUE", oid::BOOL),
            ("SELECT NULL", oid::TEXT),
        ] {
            assert_eq!(literal_type(&example(sql)), want, "{sql}");
        }
    }

    #[test]
    fn binary_values_decode_to_their_text() {
        assert_eq!(binary_text(oid::TEXT, b"[1,2]").as_deref(), Ok("[1,2]"));
        assert_eq!(binary_text(oid::VARCHAR, "[\"ü\"]".as_bytes()).as_deref(), Ok("[\"ü\"]"));
        assert_eq!(binary_text(oid::JSONB, b"\x01[7]").as_deref(), Ok("[7]"));
        assert_eq!(binary_text(oid::BOOL, &[1]).as_deref(), Ok("true"));
        assert_eq!(binary_text(oid::INT2, &(-3i16).to_be_bytes()).as_deref(), Ok("-3"));
        assert_eq!(binary_text(oid::INT4, &7i32.to_be_bytes()).as_deref(), Ok("7"));
        assert_eq!(binary_text(oid::INT8, &i64::MIN.to_be_bytes()).as_deref(), Ok("-9223372036854775808"));
        assert_eq!(binary_text(oid::FLOAT4, &0.1f32.to_be_bytes()).as_deref(), Ok("0.1"));
        assert_eq!(binary_text(oid::FLOAT8, &1.5e300f64.to_be_bytes()).map(|t| t.parse::<f64>()), Ok(Ok(1.5e300)));
        assert_eq!(binary_text(oid::FLOAT8, &f64::NEG_INFINITY.to_be_bytes()).as_deref(), Ok("-Infinity"));
        let mut n = Vec::new();
        encode_numeric("-12.0500", &mut n).expect("a decimal");
        assert_eq!(binary_text(oid::NUMERIC, &n).as_deref(), Ok("-12.0500"));
    }

    #[test]
    fn bytes_that_are_not_the_type_are_refused() {
        assert_eq!(binary_text(oid::INT4, &[0, 0, 1]), Err(BinaryTextError::Malformed("integer")));
        assert_eq!(binary_text(oid::INT8, &7i32.to_be_bytes()), Err(BinaryTextError::Malformed("bigint")));
        assert_eq!(binary_text(oid::BOOL, &[2]), Err(BinaryTextError::Malformed("boolean")));
        assert_eq!(binary_text(oid::JSONB, b"[7]"), Err(BinaryTextError::Malformed("jsonb")));
        assert_eq!(binary_text(oid::TEXT, &[0xff, 0xfe]), Err(BinaryTextError::NotUtf8));
        assert_eq!(
            binary_text(oid::NUMERIC, &[0, 2, 0, 0, 0, 0, 0, 0, 0, 1]),
            Err(BinaryTextError::Malformed("numeric"))
        );
        // An int4[] in binary: not a JSON array's text, and never passed on as bytes.
        let array = [0u8, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 23, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 4, 0, 0, 0, 1];
        assert_eq!(binary_text(1007, &array), Err(BinaryTextError::Unsupported(1007)));
    }
}
