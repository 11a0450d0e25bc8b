//! Value conversion between PostgreSQL's text format and MySQL's text and binary protocols:
//! result values from PostgreSQL (always requested in text format) to what a MySQL client
//! expects for the mapped column type, and `COM_STMT_EXECUTE` parameters to Bind parameters.
//!
//! Values PostgreSQL can hold but MySQL's binary date/time encoding cannot (`infinity`, BC
//! dates, years past 9999) are sent as a zero date in binary rows and as PostgreSQL's text in
//! text rows.

use super::types::{oid, Column, ValueKind};
use crate::protocol::mysql::value::{BinaryValue, DateTime, Time};

/// A value a PostgreSQL-wire server sent that the bridge cannot read as its column's type: an
/// error for the statement, never a guessed 0 or NULL (#35).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the server sent `{text}` for a {kind} column, which is not a {kind} value")]
pub struct Unreadable {
    /// The column's type, as PostgreSQL names it.
    pub kind: &'static str,
    /// The value as sent (shortened).
    pub text: String,
}

fn unreadable(kind: &'static str, pg: &[u8]) -> Unreadable {
    let text: String = String::from_utf8_lossy(pg).chars().take(64).collect();
    Unreadable { kind, text }
}

/// A MySQL text-protocol value for PostgreSQL text `pg` of column `col`; `scratch` holds it
/// when it had to be rewritten.
pub fn text_value<'a>(col: &Column, pg: &'a [u8], scratch: &'a mut Vec<u8>) -> Result<&'a [u8], Unreadable> {
    Ok(match col.kind {
        ValueKind::Bool => {
            if parse_bool(pg).ok_or_else(|| unreadable("boolean", pg))? {
                b"1"
            } else {
                b"0"
            }
        }
        ValueKind::Bytea => {
            decode_bytea(pg, scratch);
            scratch
        }
        ValueKind::Time => match parse_time(pg) {
            Some((t, _)) => {
                format_time(&t, col.decimals, scratch);
                scratch
            }
            None => pg,
        },
        ValueKind::Timestamp | ValueKind::TimestampTz => match parse_timestamp(pg) {
            Some(dt) => {
                format_datetime(&dt, col.decimals, scratch);
                scratch
            }
            None => pg,
        },
        _ => pg,
    })
}

/// Every text form of a boolean a PostgreSQL-wire server may send: PostgreSQL's `t`/`f`, and
/// the words and digits its `boolin` accepts (DuckDB sends `true`/`false`).
fn parse_bool(pg: &[u8]) -> Option<bool> {
    match pg.trim_ascii().to_ascii_lowercase().as_slice() {
        b"t" | b"true" | b"y" | b"yes" | b"on" | b"1" => Some(true),
        b"f" | b"false" | b"n" | b"no" | b"off" | b"0" => Some(false),
        _ => None,
    }
}

fn parse<T: std::str::FromStr>(pg: &[u8]) -> Option<T> {
    std::str::from_utf8(pg).ok()?.parse().ok()
}

/// A MySQL binary-protocol value of the column's type for PostgreSQL text `pg`.
pub fn binary_value<'a>(col: &Column, pg: &'a [u8], scratch: &'a mut Vec<u8>) -> Result<BinaryValue<'a>, Unreadable> {
    let number = |kind| unreadable(kind, pg);
    Ok(match col.kind {
        ValueKind::Int2 => BinaryValue::I16(parse(pg).ok_or_else(|| number("smallint"))?),
        ValueKind::Int4 => BinaryValue::I32(parse(pg).ok_or_else(|| number("integer"))?),
        ValueKind::Int8 => BinaryValue::I64(parse(pg).ok_or_else(|| number("bigint"))?),
        ValueKind::Float4 => BinaryValue::Float(parse(pg).ok_or_else(|| number("real"))?),
        ValueKind::Float8 => BinaryValue::Double(parse(pg).ok_or_else(|| number("double precision"))?),
        ValueKind::Bool => BinaryValue::I8(i8::from(parse_bool(pg).ok_or_else(|| number("boolean"))?)),
        ValueKind::Bytea => {
            decode_bytea(pg, scratch);
            BinaryValue::Bytes(scratch)
        }
        ValueKind::Date => BinaryValue::DateTime(parse_date(pg).map(|(d, _)| d).unwrap_or_default()),
        ValueKind::Time => BinaryValue::Time(parse_time(pg).map(|(t, _)| t).unwrap_or_default()),
        ValueKind::Timestamp | ValueKind::TimestampTz => BinaryValue::DateTime(parse_timestamp(pg).unwrap_or_default()),
        ValueKind::Numeric | ValueKind::Json | ValueKind::Text => BinaryValue::Bytes(pg),
    })
}

fn hex_digit(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// Decodes bytea text output: the hex format `\x0a1b…` (the default) or the escape format
/// (`bytea_output = escape`: `\\` and `\ooo` octal escapes, other bytes as themselves).
pub fn decode_bytea(pg: &[u8], out: &mut Vec<u8>) {
    out.clear();
    if let Some(hex) = pg.strip_prefix(b"\\x") {
        out.reserve(hex.len() / 2);
        for pair in hex.chunks_exact(2) {
            if let (Some(hi), Some(lo)) =
                (pair.first().and_then(|c| hex_digit(*c)), pair.get(1).and_then(|c| hex_digit(*c)))
            {
                out.push(hi << 4 | lo);
            }
        }
        return;
    }
    let mut i = 0;
    while let Some(&c) = pg.get(i) {
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        match pg.get(i + 1..i + 4) {
            Some([a, b, d]) if [a, b, d].iter().all(|x| (b'0'..=b'7').contains(*x)) => {
                out.push(((a - b'0') << 6) | ((b - b'0') << 3) | (d - b'0'));
                i += 4;
            }
            _ => {
                out.push(b'\\');
                i += if pg.get(i + 1) == Some(&b'\\') { 2 } else { 1 };
            }
        }
    }
}

fn digits(s: &[u8]) -> Option<u32> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    parse(s)
}

/// `YYYY-MM-DD` (ISO DateStyle); the rest of the input after the date. BC and years past 9999
/// are refused: MySQL cannot represent them.
pub(super) fn parse_date(s: &[u8]) -> Option<(DateTime, &[u8])> {
    let y = s.get(..4)?;
    let rest = s.get(4..)?.strip_prefix(b"-")?;
    let m = rest.get(..2)?;
    let rest = rest.get(2..)?.strip_prefix(b"-")?;
    let d = rest.get(..2)?;
    let rest = rest.get(2..)?;
    if rest.ends_with(b" BC") {
        return None;
    }
    let dt = DateTime {
        year: u16::try_from(digits(y)?).ok()?,
        month: u8::try_from(digits(m)?).ok()?,
        day: u8::try_from(digits(d)?).ok()?,
        ..DateTime::default()
    };
    Some((dt, rest))
}

/// `HH:MM:SS[.ffffff]`; the rest of the input after it (a time zone offset, if any).
pub(super) fn parse_time(s: &[u8]) -> Option<(Time, &[u8])> {
    let h = digits(s.get(..2)?)?;
    let rest = s.get(2..)?.strip_prefix(b":")?;
    let m = digits(rest.get(..2)?)?;
    let rest = rest.get(2..)?.strip_prefix(b":")?;
    let sec = digits(rest.get(..2)?)?;
    let mut rest = rest.get(2..)?;
    let mut micros = 0;
    if let Some(frac) = rest.strip_prefix(b".") {
        let n = frac.iter().take_while(|c| c.is_ascii_digit()).count();
        let f = frac.get(..n.min(6))?;
        micros = digits(f)? * 10u32.pow(6 - u32::try_from(f.len()).ok()?);
        rest = frac.get(n..)?;
    }
    let t = Time {
        negative: false,
        days: 0,
        hours: u8::try_from(h).ok()?,
        minutes: u8::try_from(m).ok()?,
        seconds: u8::try_from(sec).ok()?,
        micros,
    };
    Some((t, rest))
}

/// `YYYY-MM-DD HH:MM:SS[.ffffff][±HH[:MM[:SS]]]`: the offset of a timestamptz (already in the
/// session's time zone) is dropped.
pub(super) fn parse_timestamp(s: &[u8]) -> Option<DateTime> {
    let (mut dt, rest) = parse_date(s)?;
    let (t, rest) = parse_time(rest.strip_prefix(b" ")?)?;
    if !(rest.is_empty() || rest.starts_with(b"+") || rest.starts_with(b"-")) {
        return None;
    }
    dt.hour = t.hours;
    dt.minute = t.minutes;
    dt.second = t.seconds;
    dt.micros = t.micros;
    Some(dt)
}

fn push_fraction(micros: u32, decimals: u8, out: &mut Vec<u8>) {
    if decimals == 0 {
        return;
    }
    let all = format!("{micros:06}");
    out.push(b'.');
    out.extend_from_slice(all.as_bytes().get(..usize::from(decimals.min(6))).unwrap_or_default());
}

fn format_datetime(dt: &DateTime, decimals: u8, out: &mut Vec<u8>) {
    out.clear();
    let s = format!("{:04}-{:02}-{:02} {:02}:{:02}:{:02}", dt.year, dt.month, dt.day, dt.hour, dt.minute, dt.second);
    out.extend_from_slice(s.as_bytes());
    push_fraction(dt.micros, decimals, out);
}

fn format_time(t: &Time, decimals: u8, out: &mut Vec<u8>) {
    out.clear();
    let s = format!("{:02}:{:02}:{:02}", t.hours, t.minutes, t.seconds);
    out.extend_from_slice(s.as_bytes());
    push_fraction(t.micros, decimals, out);
}

/// A Bind parameter: format code (0 text, 1 binary) and value (`None` = NULL).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BindParam {
    /// 0 text, 1 binary.
    pub format: i16,
    /// The value bytes; `None` for NULL.
    pub value: Option<Vec<u8>>,
}

fn text(s: String) -> BindParam {
    BindParam { format: 0, value: Some(s.into_bytes()) }
}

fn float_text(v: f64) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else {
        v.to_string()
    }
}

/// The value of any binary integer variant, whatever its width and sign.
pub(super) fn integer(value: &BinaryValue<'_>) -> Option<i128> {
    Some(match *value {
        BinaryValue::I8(v) => v.into(),
        BinaryValue::U8(v) => v.into(),
        BinaryValue::I16(v) => v.into(),
        BinaryValue::U16(v) => v.into(),
        BinaryValue::I32(v) => v.into(),
        BinaryValue::U32(v) => v.into(),
        BinaryValue::I64(v) => v.into(),
        BinaryValue::U64(v) => v.into(),
        _ => return None,
    })
}

/// Converts a `COM_STMT_EXECUTE` parameter for a PostgreSQL parameter of type `target` (the OID
/// PostgreSQL inferred at prepare time): bytea travels in binary format, everything else as text
/// PostgreSQL's input functions accept.
#[must_use]
pub fn bind_param(value: &BinaryValue<'_>, target: u32) -> BindParam {
    let int = |v: i128| {
        if target == oid::BOOL {
            text(if v != 0 { "t" } else { "f" }.into())
        } else {
            text(v.to_string())
        }
    };
    match *value {
        BinaryValue::Null => BindParam { format: 0, value: None },
        BinaryValue::I8(_)
        | BinaryValue::U8(_)
        | BinaryValue::I16(_)
        | BinaryValue::U16(_)
        | BinaryValue::I32(_)
        | BinaryValue::U32(_)
        | BinaryValue::I64(_)
        | BinaryValue::U64(_) => int(integer(value).unwrap_or_default()),
        // f32 → f64 is exact, but printing the f64 would show the widening noise.
        BinaryValue::Float(v) if v.is_finite() => text(v.to_string()),
        BinaryValue::Float(v) => text(float_text(f64::from(v))),
        BinaryValue::Double(v) => text(float_text(v)),
        BinaryValue::Bytes(b) => BindParam { format: i16::from(target == oid::BYTEA), value: Some(b.to_vec()) },
        BinaryValue::DateTime(dt) => {
            let mut s = format!("{:04}-{:02}-{:02}", dt.year, dt.month, dt.day);
            if target != oid::DATE {
                s.push_str(&format!(" {:02}:{:02}:{:02}.{:06}", dt.hour, dt.minute, dt.second, dt.micros));
            }
            text(s)
        }
        BinaryValue::Time(t) => {
            let hours = u64::from(t.days) * 24 + u64::from(t.hours);
            let sign = if t.negative { "-" } else { "" };
            text(format!("{sign}{hours:02}:{:02}:{:02}.{:06}", t.minutes, t.seconds, t.micros))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::types::map_type;

    fn text_of(oid: u32, typmod: i32, pg: &[u8]) -> Vec<u8> {
        let mut scratch = Vec::new();
        text_value(&map_type(oid, typmod), pg, &mut scratch).map(<[u8]>::to_vec).unwrap_or_else(|e| panic!("{e}"))
    }

    fn bin_of(oid: u32, pg: &[u8]) -> BinaryValue<'static> {
        let scratch = Box::leak(Box::new(Vec::new()));
        let pg: &'static [u8] = Box::leak(pg.to_vec().into_boxed_slice());
        binary_value(&map_type(oid, -1), pg, scratch).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Every text form a PostgreSQL-wire server may send for a boolean reads as that boolean
    /// (DuckDB sends `true`, which read as 0 before #35); anything else fails the statement.
    #[test]
    fn booleans_in_every_text_form_and_nothing_else() {
        for (forms, one) in [
            (&["t", "true", "TRUE", "yes", "on", "1", " y "][..], 1),
            (&["f", "false", "False", "no", "off", "0", "n"][..], 0),
        ] {
            for form in forms {
                assert_eq!(text_of(oid::BOOL, -1, form.as_bytes()), one.to_string().as_bytes(), "{form}");
                assert_eq!(bin_of(oid::BOOL, form.as_bytes()), BinaryValue::I8(one), "{form}");
            }
        }
        let col = map_type(oid::BOOL, -1);
        let err = text_value(&col, b"maybe", &mut Vec::new()).map(<[u8]>::to_vec);
        assert_eq!(err, Err(Unreadable { kind: "boolean", text: "maybe".into() }));
        assert!(binary_value(&col, b"2", &mut Vec::new()).is_err());
        assert!(binary_value(&map_type(oid::INT4, -1), b"12x", &mut Vec::new()).is_err());
        assert!(binary_value(&map_type(oid::INT2, -1), b"70000", &mut Vec::new()).is_err(), "no truncation");
        assert_eq!(
            binary_value(&map_type(oid::FLOAT8, -1), b"NaN", &mut Vec::new()).map(|v| format!("{v:?}")),
            Ok("Double(NaN)".into())
        );
    }

    #[test]
    fn bool_and_bytea_text() {
        assert_eq!(text_of(oid::BOOL, -1, b"t"), b"1");
        assert_eq!(text_of(oid::BOOL, -1, b"f"), b"0");
        assert_eq!(text_of(oid::BYTEA, -1, b"\\x00ff41"), [0x00, 0xFF, 0x41]);
        assert_eq!(text_of(oid::BYTEA, -1, b"\\x"), b"");
        assert_eq!(text_of(oid::BYTEA, -1, b"a\\\\b\\001"), b"a\\b\x01");
        assert_eq!(text_of(oid::TEXT, -1, "h\u{e9}llo".as_bytes()), "h\u{e9}llo".as_bytes());
    }

    #[test]
    fn timestamps_pad_fraction_to_column_digits() {
        assert_eq!(text_of(oid::TIMESTAMP, -1, b"2024-01-02 03:04:05.5"), b"2024-01-02 03:04:05.500000");
        assert_eq!(text_of(oid::TIMESTAMP, 3, b"2024-01-02 03:04:05.12"), b"2024-01-02 03:04:05.120");
        assert_eq!(text_of(oid::TIMESTAMP, 0, b"2024-01-02 03:04:05"), b"2024-01-02 03:04:05");
        assert_eq!(text_of(oid::TIMESTAMPTZ, -1, b"2024-01-02 03:04:05.123456+05:30"), b"2024-01-02 03:04:05.123456");
        assert_eq!(text_of(oid::TIMESTAMPTZ, 2, b"1999-12-31 23:59:59-08"), b"1999-12-31 23:59:59.00");
        assert_eq!(text_of(oid::TIMESTAMP, -1, b"infinity"), b"infinity");
        assert_eq!(text_of(oid::TIME, 1, b"13:14:15.25"), b"13:14:15.2");
        assert_eq!(text_of(oid::DATE, -1, b"2024-02-29"), b"2024-02-29");
    }

    #[test]
    fn binary_values() {
        assert_eq!(bin_of(oid::INT2, b"-32768"), BinaryValue::I16(-32768));
        assert_eq!(bin_of(oid::INT4, b"2147483647"), BinaryValue::I32(i32::MAX));
        assert_eq!(bin_of(oid::INT8, b"-9223372036854775808"), BinaryValue::I64(i64::MIN));
        assert_eq!(bin_of(oid::FLOAT4, b"1.5"), BinaryValue::Float(1.5));
        assert_eq!(bin_of(oid::FLOAT8, b"-2.5e-300"), BinaryValue::Double(-2.5e-300));
        assert!(matches!(bin_of(oid::FLOAT8, b"Infinity"), BinaryValue::Double(v) if v == f64::INFINITY));
        assert_eq!(bin_of(oid::BOOL, b"t"), BinaryValue::I8(1));
        assert_eq!(bin_of(oid::BYTEA, b"\\xdead"), BinaryValue::Bytes(&[0xDE, 0xAD]));
        assert_eq!(bin_of(oid::NUMERIC, b"-1.50"), BinaryValue::Bytes(b"-1.50"));
        let dt = DateTime { year: 2024, month: 1, day: 2, hour: 3, minute: 4, second: 5, micros: 120_000 };
        assert_eq!(bin_of(oid::TIMESTAMPTZ, b"2024-01-02 03:04:05.12+00"), BinaryValue::DateTime(dt));
        let d = DateTime { year: 1000, month: 1, day: 1, ..DateTime::default() };
        assert_eq!(bin_of(oid::DATE, b"1000-01-01"), BinaryValue::DateTime(d));
        assert_eq!(bin_of(oid::DATE, b"0044-03-15 BC"), BinaryValue::DateTime(DateTime::default()));
        let t = Time { hours: 23, minutes: 59, seconds: 58, micros: 1, ..Time::default() };
        assert_eq!(bin_of(oid::TIME, b"23:59:58.000001"), BinaryValue::Time(t));
    }

    #[test]
    fn parameters() {
        let t = |v: BinaryValue<'_>, target| bind_param(&v, target);
        assert_eq!(t(BinaryValue::Null, oid::INT4), BindParam { format: 0, value: None });
        assert_eq!(t(BinaryValue::I64(-5), oid::INT8).value.unwrap(), b"-5");
        assert_eq!(t(BinaryValue::U64(u64::MAX), oid::NUMERIC).value.unwrap(), b"18446744073709551615");
        assert_eq!(t(BinaryValue::I64(2), oid::BOOL).value.unwrap(), b"t");
        assert_eq!(t(BinaryValue::I8(0), oid::BOOL).value.unwrap(), b"f");
        assert_eq!(t(BinaryValue::Float(1.1), oid::FLOAT4).value.unwrap(), b"1.1");
        assert_eq!(t(BinaryValue::Double(f64::NEG_INFINITY), 0).value.unwrap(), b"-Infinity");
        assert_eq!(t(BinaryValue::Bytes(&[0, 0xFF]), oid::BYTEA), BindParam { format: 1, value: Some(vec![0, 0xFF]) });
        assert_eq!(t(BinaryValue::Bytes(b"x"), oid::TEXT).format, 0);
        let dt = DateTime { year: 2024, month: 1, day: 2, hour: 3, minute: 4, second: 5, micros: 6 };
        assert_eq!(t(BinaryValue::DateTime(dt), oid::TIMESTAMP).value.unwrap(), b"2024-01-02 03:04:05.000006");
        assert_eq!(t(BinaryValue::DateTime(dt), oid::DATE).value.unwrap(), b"2024-01-02");
        let tm = Time { negative: true, days: 1, hours: 2, minutes: 3, seconds: 4, micros: 5 };
        assert_eq!(t(BinaryValue::Time(tm), oid::TIME).value.unwrap(), b"-26:03:04.000005");
    }
}
