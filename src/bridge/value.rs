//! Value conversion between PostgreSQL's text format and MySQL's text and binary protocols:
//! result values from PostgreSQL (always requested in text format) to what a MySQL client
//! expects for the mapped column type, and `COM_STMT_EXECUTE` parameters to Bind parameters.
//!
//! Every result value is read as its column's type before it is sent, in text rows as in binary
//! ones (#35): a value that is not one (a PostgreSQL-wire server that labels a column `int4`
//! and sends 4294967295) fails the statement with 1105, and a value MySQL's type cannot hold
//! (NaN or ±Infinity in a float or numeric, `infinity`, BC or five-digit-year dates) with 1690
//! (22003), which is what a MySQL server answers for a result it cannot represent. Nothing is
//! sent as a guessed 0, NULL, zero date or truncated value. Numerics in exponent form (DuckDB
//! behind buenavista sends `1E-7`) are written out in plain decimal notation, as MySQL sends
//! DECIMAL values.

use super::types::{oid, Column, ValueKind};
use crate::protocol::mysql::errcode::ErrorNumber;
use crate::protocol::mysql::value::{BinaryValue, DateTime, Time};
use crate::sql::template::ParamValue;

/// A result value the bridge will not send to a MySQL client: an error for the statement, never
/// a guessed value (#35).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    /// The value is not of its column's type.
    #[error("the server sent `{text}` for a {kind} column, which is not a {kind} value")]
    Unreadable {
        /// The column's type, as PostgreSQL names it.
        kind: &'static str,
        /// The value as sent (shortened).
        text: String,
    },
    /// The value is of its column's type, but the MySQL type it is sent as cannot hold it.
    #[error("the server sent `{text}` for a {kind} column, which MySQL's {mysql} cannot hold")]
    OutOfRange {
        /// The column's type, as PostgreSQL names it.
        kind: &'static str,
        /// The MySQL type the column is sent as.
        mysql: &'static str,
        /// The value as sent (shortened).
        text: String,
    },
}

impl ValueError {
    /// The MySQL server error the statement fails with: `ER_UNKNOWN_ERROR` (1105) for a value of
    /// the wrong type, `ER_DATA_OUT_OF_RANGE` (1690, 22003) for one MySQL cannot hold.
    #[must_use]
    pub fn number(&self) -> ErrorNumber {
        match self {
            Self::Unreadable { .. } => ErrorNumber { code: 1105, sql_state: *b"HY000" },
            Self::OutOfRange { .. } => ErrorNumber { code: 1690, sql_state: *b"22003" },
        }
    }
}

fn shown(pg: &[u8]) -> String {
    String::from_utf8_lossy(pg).chars().take(64).collect()
}

fn unreadable(kind: &'static str, pg: &[u8]) -> ValueError {
    ValueError::Unreadable { kind, text: shown(pg) }
}

fn out_of_range(kind: &'static str, mysql: &'static str, pg: &[u8]) -> ValueError {
    ValueError::OutOfRange { kind, mysql, text: shown(pg) }
}

/// A MySQL text-protocol value for PostgreSQL text `pg` of column `col`; `scratch` holds it
/// when it had to be rewritten.
pub fn text_value<'a>(col: &Column, pg: &'a [u8], scratch: &'a mut Vec<u8>) -> Result<&'a [u8], ValueError> {
    Ok(match col.kind {
        ValueKind::Int2 | ValueKind::Int4 | ValueKind::Int8 => {
            read_integer(col.kind, pg)?;
            pg
        }
        ValueKind::Float4 => {
            read_float4(pg)?;
            pg
        }
        ValueKind::Float8 => {
            read_float8(pg)?;
            pg
        }
        ValueKind::Numeric => read_decimal(pg, scratch)?,
        ValueKind::Bool => {
            if read_bool(pg)? {
                b"1"
            } else {
                b"0"
            }
        }
        ValueKind::Bytea => {
            read_bytea(pg, scratch)?;
            scratch
        }
        ValueKind::Date => {
            read_date(pg)?;
            pg
        }
        ValueKind::Time => {
            format_time(&read_time(pg)?, col.decimals, scratch);
            scratch
        }
        ValueKind::Timestamp | ValueKind::TimestampTz => {
            format_datetime(&read_timestamp(col.kind, pg)?, col.decimals, scratch);
            scratch
        }
        ValueKind::Json | ValueKind::Text => pg,
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

fn read_bool(pg: &[u8]) -> Result<bool, ValueError> {
    parse_bool(pg).ok_or_else(|| unreadable("boolean", pg))
}

fn parse<T: std::str::FromStr>(pg: &[u8]) -> Option<T> {
    std::str::from_utf8(pg).ok()?.parse().ok()
}

/// An integer of the column's width; a wider value is the server mislabelling its column
/// (buenavista labels DuckDB's UINTEGER and UBIGINT `int4`), never truncated.
fn read_integer(kind: ValueKind, pg: &[u8]) -> Result<BinaryValue<'static>, ValueError> {
    let value = match kind {
        ValueKind::Int2 => parse(pg).map(BinaryValue::I16).ok_or("smallint"),
        ValueKind::Int4 => parse(pg).map(BinaryValue::I32).ok_or("integer"),
        _ => parse(pg).map(BinaryValue::I64).ok_or("bigint"),
    };
    value.map_err(|name| unreadable(name, pg))
}

/// Floats in any spelling Rust reads (`NaN`, `nan`, `Infinity`, `inf`, `1e+100`); MySQL's
/// FLOAT and DOUBLE hold no NaN or infinity, and a MySQL server never sends one.
fn read_float4(pg: &[u8]) -> Result<f32, ValueError> {
    let v: f32 = parse(pg).ok_or_else(|| unreadable("real", pg))?;
    v.is_finite().then_some(v).ok_or_else(|| out_of_range("real", "FLOAT", pg))
}

fn read_float8(pg: &[u8]) -> Result<f64, ValueError> {
    let v: f64 = parse(pg).ok_or_else(|| unreadable("double precision", pg))?;
    v.is_finite().then_some(v).ok_or_else(|| out_of_range("double precision", "DOUBLE", pg))
}

/// Largest exponent written out in plain notation: keeps the rewritten value bounded.
const MAX_DECIMAL_EXPONENT: i64 = 16_384;

/// A numeric as MySQL sends DECIMAL: `[-]digits[.digits]`. PostgreSQL's own text is that
/// already; an exponent form (`1E-7`, `1.5e+3`) is written out; NaN and ±Infinity (which
/// PostgreSQL's numeric holds and no DECIMAL does) fail the statement.
fn read_decimal<'a>(pg: &'a [u8], scratch: &'a mut Vec<u8>) -> Result<&'a [u8], ValueError> {
    let bad = || unreadable("numeric", pg);
    let text = std::str::from_utf8(pg).map_err(|_| bad())?;
    let lower = text.to_ascii_lowercase();
    if ["nan", "infinity", "+infinity", "-infinity", "inf", "+inf", "-inf"].contains(&lower.as_str()) {
        return Err(out_of_range("numeric", "DECIMAL", pg));
    }
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (mantissa, exponent) = match body.split_once(['e', 'E']) {
        Some((m, e)) => (m, Some(e)),
        None => (body, None),
    };
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits_only = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !digits_only(int) || !digits_only(frac) {
        return Err(bad());
    }
    let Some(exponent) = exponent else {
        return Ok(pg);
    };
    let e: i64 = exponent.parse().map_err(|_| bad())?;
    if e.abs() > MAX_DECIMAL_EXPONENT {
        return Err(out_of_range("numeric", "DECIMAL", pg));
    }
    let digits = format!("{int}{frac}");
    let point = i64::try_from(int.len()).unwrap_or(0) + e;
    let zeros = |n: i64| "0".repeat(usize::try_from(n).unwrap_or(0));
    let (whole, fraction) = if point <= 0 {
        (String::new(), format!("{}{digits}", zeros(-point)))
    } else if point >= i64::try_from(digits.len()).unwrap_or(0) {
        (format!("{digits}{}", zeros(point - i64::try_from(digits.len()).unwrap_or(0))), String::new())
    } else {
        let (w, f) = digits.split_at(usize::try_from(point).unwrap_or(0));
        (w.to_owned(), f.to_owned())
    };
    let whole = whole.trim_start_matches('0');
    scratch.clear();
    if negative {
        scratch.push(b'-');
    }
    scratch.extend_from_slice(if whole.is_empty() { b"0" } else { whole.as_bytes() });
    if !fraction.is_empty() {
        scratch.push(b'.');
        scratch.extend_from_slice(fraction.as_bytes());
    }
    Ok(scratch)
}

fn read_bytea(pg: &[u8], scratch: &mut Vec<u8>) -> Result<(), ValueError> {
    decode_bytea(pg, scratch).map_err(|_| unreadable("bytea", pg))
}

/// Why a date/time text was not sent: values PostgreSQL holds and MySQL's types cannot
/// (`infinity`, BC, a year past 9999) are out of range, anything else is not of the type.
fn temporal_error(kind: &'static str, mysql: &'static str, pg: &[u8]) -> ValueError {
    let year_digits = pg.iter().take_while(|c| c.is_ascii_digit()).count();
    let infinite = matches!(pg.to_ascii_lowercase().as_slice(), b"infinity" | b"-infinity" | b"+infinity");
    if infinite || pg.ends_with(b" BC") || (year_digits > 4 && pg.get(year_digits) == Some(&b'-')) {
        out_of_range(kind, mysql, pg)
    } else {
        unreadable(kind, pg)
    }
}

fn read_date(pg: &[u8]) -> Result<DateTime, ValueError> {
    parse_date(pg).filter(|(_, rest)| rest.is_empty()).map(|(d, _)| d).ok_or_else(|| temporal_error("date", "DATE", pg))
}

fn read_time(pg: &[u8]) -> Result<Time, ValueError> {
    parse_time(pg).filter(|(_, rest)| rest.is_empty()).map(|(t, _)| t).ok_or_else(|| unreadable("time", pg))
}

fn read_timestamp(kind: ValueKind, pg: &[u8]) -> Result<DateTime, ValueError> {
    let name = if kind == ValueKind::TimestampTz { "timestamp with time zone" } else { "timestamp" };
    parse_timestamp(pg).ok_or_else(|| temporal_error(name, "DATETIME", pg))
}

/// A MySQL binary-protocol value of the column's type for PostgreSQL text `pg`.
pub fn binary_value<'a>(col: &Column, pg: &'a [u8], scratch: &'a mut Vec<u8>) -> Result<BinaryValue<'a>, ValueError> {
    Ok(match col.kind {
        ValueKind::Int2 | ValueKind::Int4 | ValueKind::Int8 => read_integer(col.kind, pg)?,
        ValueKind::Float4 => BinaryValue::Float(read_float4(pg)?),
        ValueKind::Float8 => BinaryValue::Double(read_float8(pg)?),
        ValueKind::Bool => BinaryValue::I8(i8::from(read_bool(pg)?)),
        ValueKind::Bytea => {
            read_bytea(pg, scratch)?;
            BinaryValue::Bytes(scratch)
        }
        ValueKind::Date => BinaryValue::DateTime(read_date(pg)?),
        ValueKind::Time => BinaryValue::Time(read_time(pg)?),
        ValueKind::Timestamp | ValueKind::TimestampTz => BinaryValue::DateTime(read_timestamp(col.kind, pg)?),
        ValueKind::Numeric => BinaryValue::Bytes(read_decimal(pg, scratch)?),
        ValueKind::Json | ValueKind::Text => BinaryValue::Bytes(pg),
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

/// Bytea text that is neither of PostgreSQL's two output formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BadBytea;

/// Decodes bytea text output: the hex format `\x0a1b…` (the default) or the escape format
/// (`bytea_output = escape`: `\\` and `\ooo` octal escapes, other bytes as themselves).
/// Anything else (an odd or non-hex digit, a backslash starting neither escape) is refused,
/// not skipped.
pub fn decode_bytea(pg: &[u8], out: &mut Vec<u8>) -> Result<(), BadBytea> {
    out.clear();
    if let Some(hex) = pg.strip_prefix(b"\\x") {
        if hex.len() % 2 != 0 {
            return Err(BadBytea);
        }
        out.reserve(hex.len() / 2);
        for pair in hex.chunks_exact(2) {
            let (Some(hi), Some(lo)) =
                (pair.first().and_then(|c| hex_digit(*c)), pair.get(1).and_then(|c| hex_digit(*c)))
            else {
                return Err(BadBytea);
            };
            out.push(hi << 4 | lo);
        }
        return Ok(());
    }
    let mut i = 0;
    while let Some(&c) = pg.get(i) {
        if c != b'\\' {
            out.push(c);
            i += 1;
            continue;
        }
        match pg.get(i + 1..i + 4) {
            Some([a @ b'0'..=b'3', b @ b'0'..=b'7', d @ b'0'..=b'7']) => {
                out.push(((a - b'0') << 6) | ((b - b'0') << 3) | (d - b'0'));
                i += 4;
            }
            _ if pg.get(i + 1) == Some(&b'\\') => {
                out.push(b'\\');
                i += 2;
            }
            _ => return Err(BadBytea),
        }
    }
    Ok(())
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

/// A `COM_STMT_EXECUTE` parameter as a translation that waits for values writes it in (#35):
/// strings, dates and times as text, any other value as a number, NULL as NULL.
#[must_use]
pub fn template_value(value: &BinaryValue<'_>) -> ParamValue {
    let text = |b: Vec<u8>| String::from_utf8_lossy(&b).into_owned();
    match (value, bind_param(value, oid::TEXT).value) {
        (_, None) => ParamValue::Null,
        (BinaryValue::Bytes(_) | BinaryValue::DateTime(_) | BinaryValue::Time(_), Some(b)) => ParamValue::Text(text(b)),
        (_, Some(b)) => ParamValue::Number(text(b)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::types::map_type;

    #[test]
    fn values_are_written_into_a_template_as_text_or_numbers() {
        assert_eq!(template_value(&BinaryValue::Null), ParamValue::Null);
        assert_eq!(template_value(&BinaryValue::I64(-5)), ParamValue::Number("-5".into()));
        assert_eq!(template_value(&BinaryValue::Double(1.5)), ParamValue::Number("1.5".into()));
        assert_eq!(template_value(&BinaryValue::Bytes(b"it's")), ParamValue::Text("it's".into()));
        let day = DateTime { year: 2024, month: 2, day: 29, hour: 0, minute: 0, second: 0, micros: 0 };
        assert_eq!(template_value(&BinaryValue::DateTime(day)), ParamValue::Text("2024-02-29 00:00:00.000000".into()));
    }

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
        assert_eq!(err, Err(ValueError::Unreadable { kind: "boolean", text: "maybe".into() }));
        assert!(binary_value(&col, b"2", &mut Vec::new()).is_err());
        assert!(binary_value(&map_type(oid::INT4, -1), b"12x", &mut Vec::new()).is_err());
        assert!(binary_value(&map_type(oid::INT2, -1), b"70000", &mut Vec::new()).is_err(), "no truncation");
    }

    fn error_of(oid: u32, typmod: i32, pg: &[u8]) -> (Option<ValueError>, Option<ValueError>) {
        let col = map_type(oid, typmod);
        (text_value(&col, pg, &mut Vec::new()).err(), binary_value(&col, pg, &mut Vec::new()).err())
    }

    /// A value that is not of its column's type fails the statement with 1105 in text rows as
    /// in binary ones (text rows passed it through before); one MySQL's type cannot hold with
    /// 1690/22003 (binary rows sent NaN and a zero date for `infinity` before).
    #[test]
    fn values_not_of_their_type_or_beyond_mysql_fail_in_both_formats() {
        for (oid, pg) in [
            (oid::INT4, &b"4294967295"[..]),
            (oid::INT2, b"70000"),
            (oid::INT8, b"18446744073709551615"),
            (oid::INT4, b"12x"),
            (oid::FLOAT8, b"one"),
            (oid::NUMERIC, b"1.2.3"),
            (oid::NUMERIC, b"1e"),
            (oid::BYTEA, b"\\x0g"),
            (oid::BYTEA, b"\\x012"),
            (oid::BYTEA, b"a\\9"),
            (oid::DATE, b"2024-02-29 extra"),
            (oid::TIME, b"25h"),
            (oid::TIMESTAMP, b"2024-01-02T03:04:05"),
        ] {
            let (text, binary) = error_of(oid, -1, pg);
            let code = |e: Option<ValueError>| e.map(|e| e.number().code);
            assert_eq!((code(text), code(binary)), (Some(1105), Some(1105)), "{}", String::from_utf8_lossy(pg));
        }
        for (oid, pg) in [
            (oid::FLOAT8, &b"NaN"[..]),
            (oid::FLOAT8, b"nan"),
            (oid::FLOAT8, b"Infinity"),
            (oid::FLOAT8, b"-inf"),
            (oid::FLOAT4, b"1e39"),
            (oid::NUMERIC, b"NaN"),
            (oid::NUMERIC, b"-Infinity"),
            (oid::NUMERIC, b"1e99999"),
            (oid::DATE, b"infinity"),
            (oid::DATE, b"0044-03-15 BC"),
            (oid::DATE, b"10000-01-01"),
            (oid::TIMESTAMP, b"-infinity"),
            (oid::TIMESTAMPTZ, b"12000-01-01 00:00:00+00"),
        ] {
            let (text, binary) = error_of(oid, -1, pg);
            let number = |e: &Option<ValueError>| e.as_ref().map(|e| (e.number().code, e.number().sql_state));
            let want = Some((1690, *b"22003"));
            assert_eq!((number(&text), number(&binary)), (want, want), "{}", String::from_utf8_lossy(pg));
        }
        let (text, _) = error_of(oid::FLOAT8, -1, b"NaN");
        assert_eq!(
            text.map(|e| e.to_string()).as_deref(),
            Some("the server sent `NaN` for a double precision column, which MySQL's DOUBLE cannot hold")
        );
    }

    /// Numerics reach MySQL clients as DECIMAL text, exponent forms written out.
    #[test]
    fn numerics_in_plain_notation() {
        for (pg, want) in [
            (&b"-12345678901234567890.0123456789"[..], &b"-12345678901234567890.0123456789"[..]),
            (b"1E-7", b"0.0000001"),
            (b"-1.5e+3", b"-1500"),
            (b"1.25E1", b"12.5"),
            (b"12.5E-1", b"1.25"),
            (b"0E-10", b"0.0000000000"),
            (b"+7", b"+7"),
        ] {
            assert_eq!(text_of(oid::NUMERIC, -1, pg), want, "{}", String::from_utf8_lossy(pg));
            assert_eq!(bin_of(oid::NUMERIC, pg), BinaryValue::Bytes(want));
        }
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
        assert_eq!(bin_of(oid::FLOAT8, b"1e+100"), BinaryValue::Double(1e100));
        assert_eq!(bin_of(oid::BOOL, b"t"), BinaryValue::I8(1));
        assert_eq!(bin_of(oid::BYTEA, b"\\xdead"), BinaryValue::Bytes(&[0xDE, 0xAD]));
        assert_eq!(bin_of(oid::NUMERIC, b"-1.50"), BinaryValue::Bytes(b"-1.50"));
        let dt = DateTime { year: 2024, month: 1, day: 2, hour: 3, minute: 4, second: 5, micros: 120_000 };
        assert_eq!(bin_of(oid::TIMESTAMPTZ, b"2024-01-02 03:04:05.12+00"), BinaryValue::DateTime(dt));
        let d = DateTime { year: 1000, month: 1, day: 1, ..DateTime::default() };
        assert_eq!(bin_of(oid::DATE, b"1000-01-01"), BinaryValue::DateTime(d));
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
