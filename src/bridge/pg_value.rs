//! Values of the reverse bridge (PostgreSQL client, MySQL backend): MySQL result values (text
//! rows of `COM_QUERY`, binary rows of `COM_STMT_EXECUTE`) in PostgreSQL's text or binary format
//! (PostgreSQL docs, "Binary Format" of each type's send function), and Bind parameters as
//! `COM_STMT_EXECUTE` parameters.
//!
//! MySQL dates that name no calendar day — zero dates (`0000-00-00`, `0000-00-00 00:00:00`),
//! zero-in-part dates (`2020-00-00`, `2020-05-00`), year 0 and, under `ALLOW_INVALID_DATES`,
//! days past the month's end — have no PostgreSQL value and are sent as NULL in both formats
//! ([`names_no_day_text`], [`names_no_day_binary`]); the result carries one WARNING notice
//! saying how many (tuning.md "Zero dates for PostgreSQL clients" says why NULL).

use super::pg_column::{PgColumn, PgKind};
use super::types::oid;
use super::value::{decode_bytea, integer, parse_date, parse_time, parse_timestamp};
use crate::protocol::mysql::column::{ColumnType, ValueType};
use crate::protocol::mysql::value::{BinaryValue, DateTime, Time};

/// Days from 1970-01-01 to PostgreSQL's epoch 2000-01-01.
const PG_EPOCH_DAYS: i64 = 10_957;
const MICROS_PER_DAY: i64 = 86_400_000_000;
/// `numeric` sign word of NaN (`NUMERIC_NAN`).
const NUMERIC_NAN: u16 = 0xC000;
/// `numeric` sign word of a negative value (`NUMERIC_NEG`).
const NUMERIC_NEG: u16 = 0x4000;

/// A MySQL value that has no PostgreSQL binary form of its column's type: an error for the
/// statement, never a stand-in value (0, NaN, -infinity) in its place.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("MySQL value {value:?} cannot be sent as PostgreSQL {kind} in binary format: {reason}")]
pub struct ValueError {
    /// The SQLSTATE: `22003` out of the type's range, `22P02` not a value of the type.
    pub sqlstate: &'static str,
    /// The PostgreSQL type.
    pub kind: &'static str,
    /// The value as MySQL sent it (its text, or a description of a binary value).
    pub value: String,
    /// What is wrong with it.
    pub reason: &'static str,
}

/// `numeric_value_out_of_range`.
const OUT_OF_RANGE: &str = "22003";
/// `invalid_text_representation`.
const INVALID_TEXT: &str = "22P02";

/// Appends a text-row value (MySQL's text form `raw`) for `col` in PostgreSQL `format`
/// (0 text, 1 binary); the caller writes the length. On error `out` may hold part of the value.
pub fn text_row_value(col: &PgColumn, raw: &[u8], format: i16, out: &mut Vec<u8>) -> Result<(), ValueError> {
    if format != 0 {
        return encode_binary(col.kind, &parse_text(col.kind, raw), out);
    }
    match col.kind {
        PgKind::Bytea => push_hex(raw, out),
        // PostgreSQL prints no trailing fractional zeros; MySQL pads to the column's digits.
        PgKind::Timestamp | PgKind::Interval => out.extend_from_slice(trim_fraction(raw)),
        _ => out.extend_from_slice(raw),
    }
    Ok(())
}

/// Appends a binary-row value for `col` in PostgreSQL `format`.
pub fn binary_row_value(col: &PgColumn, v: &BinaryValue<'_>, format: i16, out: &mut Vec<u8>) -> Result<(), ValueError> {
    if format == 0 {
        encode_text(col.kind, v, out);
        Ok(())
    } else {
        encode_binary(col.kind, v, out)
    }
}

fn trim_fraction(raw: &[u8]) -> &[u8] {
    if !raw.contains(&b'.') {
        return raw;
    }
    let mut end = raw.len();
    while end > 0 && raw.get(end - 1) == Some(&b'0') {
        end -= 1;
    }
    if end > 0 && raw.get(end - 1) == Some(&b'.') {
        end -= 1;
    }
    raw.get(..end).unwrap_or(raw)
}

fn push_hex(bytes: &[u8], out: &mut Vec<u8>) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    out.extend_from_slice(b"\\x");
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)]);
        out.push(HEX[usize::from(b & 0xF)]);
    }
}

fn parse<T: std::str::FromStr>(raw: &[u8]) -> Option<T> {
    std::str::from_utf8(raw).ok()?.parse().ok()
}

/// `[-]H…H:MM:SS[.ffffff]`, MySQL's TIME text (hours up to 838).
fn parse_duration(raw: &[u8]) -> Option<Time> {
    let (negative, body) = match raw.strip_prefix(b"-") {
        Some(rest) => (true, rest),
        None => (false, raw),
    };
    let colon = body.iter().position(|c| *c == b':')?;
    let hours: u32 = parse(body.get(..colon)?)?;
    // Reuse the fixed-width clock parser for the rest, with the hours swapped for "00".
    let mut clock = b"00".to_vec();
    clock.extend_from_slice(body.get(colon..)?);
    let (t, rest) = parse_time(&clock)?;
    if !rest.is_empty() {
        return None;
    }
    Some(Time { negative, days: hours / 24, hours: u8::try_from(hours % 24).ok()?, ..t })
}

/// A MySQL text value as the binary value of its mapped kind; unparsable text stays bytes.
fn parse_text(kind: PgKind, raw: &[u8]) -> BinaryValue<'_> {
    let parsed = match kind {
        PgKind::Int2 | PgKind::Int4 | PgKind::Int8 => parse(raw).map(BinaryValue::I64),
        PgKind::Float4 => parse(raw).map(BinaryValue::Float),
        PgKind::Float8 => parse(raw).map(BinaryValue::Double),
        PgKind::Date => parse_date(raw).filter(|(_, rest)| rest.is_empty()).map(|(d, _)| BinaryValue::DateTime(d)),
        PgKind::Timestamp => parse_timestamp(raw).map(BinaryValue::DateTime),
        PgKind::Interval => parse_duration(raw).map(BinaryValue::Time),
        PgKind::Numeric | PgKind::Text | PgKind::Bytea | PgKind::Json => None,
    };
    parsed.unwrap_or(BinaryValue::Bytes(raw))
}

fn as_i64(v: &BinaryValue<'_>) -> Option<i64> {
    match *v {
        BinaryValue::Bytes(b) => parse(b),
        _ => integer(v).and_then(|x| i64::try_from(x).ok()),
    }
}

fn float_text(v: f64, shortest: String) -> String {
    if v.is_nan() {
        "NaN".into()
    } else if v.is_infinite() {
        if v > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else {
        shortest
    }
}

fn push_fraction(micros: u32, out: &mut Vec<u8>) {
    if micros == 0 {
        return;
    }
    let digits = format!(".{micros:06}");
    out.extend_from_slice(digits.trim_end_matches('0').as_bytes());
}

/// Appends the PostgreSQL text form of `v` for `kind`.
fn encode_text(kind: PgKind, v: &BinaryValue<'_>, out: &mut Vec<u8>) {
    let s = match *v {
        BinaryValue::Null => return,
        BinaryValue::I8(x) => x.to_string(),
        BinaryValue::U8(x) => x.to_string(),
        BinaryValue::I16(x) => x.to_string(),
        BinaryValue::U16(x) => x.to_string(),
        BinaryValue::I32(x) => x.to_string(),
        BinaryValue::U32(x) => x.to_string(),
        BinaryValue::I64(x) => x.to_string(),
        BinaryValue::U64(x) => x.to_string(),
        BinaryValue::Float(x) => float_text(f64::from(x), x.to_string()),
        BinaryValue::Double(x) => float_text(x, x.to_string()),
        BinaryValue::Bytes(b) if kind == PgKind::Bytea => return push_hex(b, out),
        BinaryValue::Bytes(b) => return out.extend_from_slice(b),
        BinaryValue::DateTime(d) if kind == PgKind::Date => format!("{:04}-{:02}-{:02}", d.year, d.month, d.day),
        BinaryValue::DateTime(d) => {
            let s = format!("{:04}-{:02}-{:02} {:02}:{:02}:{:02}", d.year, d.month, d.day, d.hour, d.minute, d.second);
            out.extend_from_slice(s.as_bytes());
            return push_fraction(d.micros, out);
        }
        BinaryValue::Time(t) => {
            let hours = u64::from(t.days) * 24 + u64::from(t.hours);
            let sign = if t.negative { "-" } else { "" };
            out.extend_from_slice(format!("{sign}{hours:02}:{:02}:{:02}", t.minutes, t.seconds).as_bytes());
            return push_fraction(t.micros, out);
        }
    };
    out.extend_from_slice(s.as_bytes());
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's `days_from_civil`).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// The date of `days` since 1970-01-01 (`civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u8, u8) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, u8::try_from(m).unwrap_or(1), u8::try_from(d).unwrap_or(1))
}

fn days_in_month(year: u16, month: u8) -> u8 {
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

/// Whether a MySQL date names no calendar day PostgreSQL has (see the module header).
fn names_no_day(d: &DateTime) -> bool {
    d.year == 0 || !(1..=12).contains(&d.month) || d.day == 0 || d.day > days_in_month(d.year, d.month)
}

/// Whether MySQL text value `raw` of a date or datetime column names no calendar day: such a
/// value is sent to a PostgreSQL client as NULL.
#[must_use]
pub fn names_no_day_text(kind: PgKind, raw: &[u8]) -> bool {
    match kind {
        PgKind::Date | PgKind::Timestamp => parse_date(raw).is_some_and(|(d, _)| names_no_day(&d)),
        _ => false,
    }
}

/// [`names_no_day_text`] for a binary-row value (a zero date arrives with no bytes, as zeros).
#[must_use]
pub fn names_no_day_binary(kind: PgKind, v: &BinaryValue<'_>) -> bool {
    match (kind, v) {
        (PgKind::Date | PgKind::Timestamp, BinaryValue::DateTime(d)) => names_no_day(d),
        _ => false,
    }
}

/// Days since 2000-01-01; `None` for MySQL's zero dates.
fn pg_days(d: &DateTime) -> Option<i64> {
    if d.month == 0 || d.day == 0 {
        return None;
    }
    Some(days_from_civil(d.year.into(), d.month.into(), d.day.into()) - PG_EPOCH_DAYS)
}

fn time_micros(t: &Time) -> i64 {
    let secs =
        i64::from(t.days) * 86_400 + i64::from(t.hours) * 3600 + i64::from(t.minutes) * 60 + i64::from(t.seconds);
    let micros = secs * 1_000_000 + i64::from(t.micros);
    if t.negative {
        -micros
    } else {
        micros
    }
}

/// Appends the PostgreSQL binary form of `v` for `kind`; a value that has none is an error.
fn encode_binary(kind: PgKind, v: &BinaryValue<'_>, out: &mut Vec<u8>) -> Result<(), ValueError> {
    let err = |name: &'static str, sqlstate, reason| ValueError { sqlstate, kind: name, value: shown(v), reason };
    let int = |name| as_i64(v).ok_or_else(|| err(name, INVALID_TEXT, "not an integer"));
    let range = |name| move |_| err(name, OUT_OF_RANGE, "out of range");
    match kind {
        PgKind::Int2 => {
            out.extend_from_slice(&i16::try_from(int("smallint")?).map_err(range("smallint"))?.to_be_bytes())
        }
        PgKind::Int4 => out.extend_from_slice(&i32::try_from(int("integer")?).map_err(range("integer"))?.to_be_bytes()),
        PgKind::Int8 => out.extend_from_slice(&int("bigint")?.to_be_bytes()),
        PgKind::Float4 => {
            let x = match *v {
                BinaryValue::Float(x) => Some(x),
                BinaryValue::Bytes(b) => parse(b),
                _ => None,
            };
            out.extend_from_slice(&x.ok_or_else(|| err("real", INVALID_TEXT, "not a number"))?.to_be_bytes());
        }
        PgKind::Float8 => {
            let x = match *v {
                BinaryValue::Double(x) => Some(x),
                BinaryValue::Float(x) => Some(f64::from(x)),
                BinaryValue::Bytes(b) => parse(b),
                _ => None,
            };
            out.extend_from_slice(
                &x.ok_or_else(|| err("double precision", INVALID_TEXT, "not a number"))?.to_be_bytes(),
            );
        }
        PgKind::Numeric => {
            let mut text = Vec::new();
            encode_text(kind, v, &mut text);
            let encoded = std::str::from_utf8(&text).map_err(|_| NotDecimal).and_then(|t| encode_numeric(t, out));
            encoded.map_err(|_| err("numeric", INVALID_TEXT, "not a decimal number"))?;
        }
        PgKind::Text | PgKind::Bytea | PgKind::Json => encode_text(PgKind::Text, v, out),
        PgKind::Date => {
            let days = match v {
                BinaryValue::DateTime(d) => pg_days(d),
                _ => None,
            };
            let days = days.ok_or_else(|| err("date", INVALID_TEXT, "not a date"))?;
            out.extend_from_slice(&i32::try_from(days).map_err(range("date"))?.to_be_bytes());
        }
        PgKind::Timestamp => {
            let micros = match v {
                BinaryValue::DateTime(d) => pg_days(d).map(|days| {
                    let secs = i64::from(d.hour) * 3600 + i64::from(d.minute) * 60 + i64::from(d.second);
                    days * MICROS_PER_DAY + secs * 1_000_000 + i64::from(d.micros)
                }),
                _ => None,
            };
            out.extend_from_slice(
                &micros.ok_or_else(|| err("timestamp", INVALID_TEXT, "not a timestamp"))?.to_be_bytes(),
            );
        }
        PgKind::Interval => {
            let micros = match v {
                BinaryValue::Time(t) => time_micros(t),
                _ => return Err(err("interval", INVALID_TEXT, "not a MySQL TIME value")),
            };
            out.extend_from_slice(&micros.to_be_bytes());
            out.extend_from_slice(&[0; 8]); // days, months
        }
    }
    Ok(())
}

/// A value as an error message shows it: its text, or what MySQL's binary row held.
fn shown(v: &BinaryValue<'_>) -> String {
    match v {
        BinaryValue::Bytes(b) => String::from_utf8_lossy(b).into_owned(),
        other => format!("{other:?}"),
    }
}

/// Text that [`encode_numeric`] cannot write: not `[-+]digits[.digits]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a decimal number")]
pub struct NotDecimal;

/// Appends the binary `numeric` form of decimal text (`[-+]digits[.digits]`). Anything else
/// (including `NaN`, which a bridged value must never silently become) is an error and
/// appends nothing.
pub fn encode_numeric(text: &str, out: &mut Vec<u8>) -> Result<(), NotDecimal> {
    let (negative, body) = match text.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, text.strip_prefix('+').unwrap_or(text)),
    };
    let (int, frac) = body.split_once('.').unwrap_or((body, ""));
    let valid = !(int.is_empty() && frac.is_empty()) && int.bytes().chain(frac.bytes()).all(|c| c.is_ascii_digit());
    if !valid {
        return Err(NotDecimal);
    }
    let int = int.trim_start_matches('0');
    let pad_left = (4 - int.len() % 4) % 4;
    let pad_right = (4 - frac.len() % 4) % 4;
    let all: Vec<u8> = std::iter::repeat_n(b'0', pad_left)
        .chain(int.bytes())
        .chain(frac.bytes())
        .chain(std::iter::repeat_n(b'0', pad_right))
        .collect();
    let mut groups: Vec<i16> =
        all.chunks(4).map(|c| c.iter().fold(0i16, |acc, d| acc * 10 + i16::from(d - b'0'))).collect();
    let mut weight = i64::try_from((pad_left + int.len()) / 4).unwrap_or(0) - 1;
    let leading = groups.iter().take_while(|g| **g == 0).count();
    groups.drain(..leading);
    weight -= i64::try_from(leading).unwrap_or(0);
    while groups.last() == Some(&0) {
        groups.pop();
    }
    let sign = if negative && !groups.is_empty() { NUMERIC_NEG } else { 0 };
    if groups.is_empty() {
        weight = 0;
    }
    let count = i16::try_from(groups.len()).unwrap_or(i16::MAX);
    out.extend_from_slice(&count.to_be_bytes());
    out.extend_from_slice(&i16::try_from(weight).unwrap_or_default().to_be_bytes());
    out.extend_from_slice(&sign.to_be_bytes());
    out.extend_from_slice(&u16::try_from(frac.len()).unwrap_or(u16::MAX).to_be_bytes());
    for g in groups {
        out.extend_from_slice(&g.to_be_bytes());
    }
    Ok(())
}

/// The decimal text of a binary `numeric`; `None` when malformed.
pub fn decode_numeric(b: &[u8]) -> Option<String> {
    let word = |i: usize| b.get(i..i + 2).and_then(|w| <[u8; 2]>::try_from(w).ok()).map(i16::from_be_bytes);
    let count = usize::try_from(word(0)?).ok()?;
    let weight = i64::from(word(2)?);
    let sign = u16::from_be_bytes(word(4)?.to_be_bytes());
    let dscale = usize::try_from(word(6)?).ok()?;
    if sign == NUMERIC_NAN {
        return Some("NaN".into());
    }
    let digits: Vec<i16> = (0..count).map(|i| word(8 + 2 * i)).collect::<Option<_>>()?;
    let digit = |i: i64| usize::try_from(i).ok().and_then(|i| digits.get(i)).copied().unwrap_or(0);
    let mut s = String::new();
    if sign == NUMERIC_NEG {
        s.push('-');
    }
    if weight < 0 {
        s.push('0');
    } else {
        s.push_str(&digit(0).to_string());
        for i in 1..=weight {
            s.push_str(&format!("{:04}", digit(i)));
        }
    }
    if dscale > 0 {
        let mut frac = String::new();
        let mut i = weight + 1;
        while frac.len() < dscale {
            frac.push_str(&format!("{:04}", digit(i)));
            i += 1;
        }
        frac.truncate(dscale);
        s.push('.');
        s.push_str(&frac);
    }
    Some(s)
}

/// A Bind parameter the bridge cannot convert (PostgreSQL's `22P03`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("parameter of type {type_oid} in {format} format: {reason}")]
pub struct ParamError {
    /// The parameter's type OID.
    pub type_oid: u32,
    /// "text" or "binary".
    pub format: &'static str,
    /// What was wrong.
    pub reason: &'static str,
}

/// An owned `COM_STMT_EXECUTE` parameter.
#[derive(Debug, Clone, PartialEq)]
pub struct MyParam {
    /// The type sent in the parameter block.
    pub ty: ValueType,
    value: Owned,
}

#[derive(Debug, Clone, PartialEq)]
enum Owned {
    Null,
    Int(i64),
    Float(f32),
    Double(f64),
    Bytes(Vec<u8>),
    DateTime(DateTime),
    Time(Time),
}

impl MyParam {
    /// Integers of every width travel as LONGLONG (`value` holds an i64): MySQL converts them
    /// to the column's type, and the declared type must match the 8 bytes sent.
    fn new(t: ColumnType, value: Owned) -> Self {
        let t = if matches!(value, Owned::Int(_)) { ColumnType::LONGLONG } else { t };
        Self { ty: ValueType::new(t, false), value }
    }

    /// The value to encode.
    #[must_use]
    pub fn value(&self) -> BinaryValue<'_> {
        match &self.value {
            Owned::Null => BinaryValue::Null,
            Owned::Int(v) => BinaryValue::I64(*v),
            Owned::Float(v) => BinaryValue::Float(*v),
            Owned::Double(v) => BinaryValue::Double(*v),
            Owned::Bytes(b) => BinaryValue::Bytes(b),
            Owned::DateTime(d) => BinaryValue::DateTime(*d),
            Owned::Time(t) => BinaryValue::Time(*t),
        }
    }
}

/// Converts a Bind's parameters (`values` in `formats`, of the statement's parameter `types`)
/// into MySQL's `?` order: `order` names the parameter each `?` takes.
pub fn my_params(
    types: &[u32],
    formats: &[i16],
    values: &[Option<&[u8]>],
    order: &[u16],
) -> Result<Vec<MyParam>, ParamError> {
    let converted = values
        .iter()
        .zip(types)
        .enumerate()
        .map(|(i, (v, ty))| my_param(*ty, super::pg_result::format_of(formats, i), *v))
        .collect::<Result<Vec<_>, _>>()?;
    Ok(order.iter().filter_map(|i| converted.get(usize::from(*i)).cloned()).collect())
}

/// Converts one Bind parameter of type `type_oid` (as declared by Parse or described by the
/// bridge; 0 = unspecified) in `format` (0 text, 1 binary). Text travels as a string MySQL
/// converts itself, except bytea (hex decoded) and bool (0/1); binary values are decoded per type.
pub fn my_param(type_oid: u32, format: i16, value: Option<&[u8]>) -> Result<MyParam, ParamError> {
    let Some(raw) = value else { return Ok(MyParam::new(ColumnType::NULL, Owned::Null)) };
    if format == 0 {
        return Ok(match type_oid {
            oid::BYTEA => {
                let mut bytes = Vec::new();
                decode_bytea(raw, &mut bytes).map_err(|_| ParamError {
                    type_oid,
                    format: "text",
                    reason: "not bytea text (hex or escape format)",
                })?;
                MyParam::new(ColumnType::BLOB, Owned::Bytes(bytes))
            }
            oid::BOOL => {
                let on = matches!(raw.to_ascii_lowercase().as_slice(), b"t" | b"true" | b"y" | b"yes" | b"on" | b"1");
                MyParam::new(ColumnType::TINY, Owned::Int(i64::from(on)))
            }
            _ => MyParam::new(ColumnType::VAR_STRING, Owned::Bytes(raw.to_vec())),
        });
    }
    let err = |reason| ParamError { type_oid, format: "binary", reason };
    let fixed = |n: usize| raw.get(..n).filter(|_| raw.len() == n).ok_or_else(|| err("wrong length"));
    let be_i64 = |b: &[u8]| <[u8; 8]>::try_from(b).map(i64::from_be_bytes).map_err(|_| err("wrong length"));
    Ok(match type_oid {
        oid::BOOL => MyParam::new(ColumnType::TINY, Owned::Int(i64::from(fixed(1)? != [0]))),
        oid::INT2 => MyParam::new(
            ColumnType::SHORT,
            Owned::Int(i16::from_be_bytes(arr(raw).ok_or_else(|| err("wrong length"))?).into()),
        ),
        oid::INT4 => MyParam::new(
            ColumnType::LONG,
            Owned::Int(i32::from_be_bytes(arr(raw).ok_or_else(|| err("wrong length"))?).into()),
        ),
        oid::INT8 => MyParam::new(ColumnType::LONGLONG, Owned::Int(be_i64(fixed(8)?)?)),
        oid::FLOAT4 => MyParam::new(
            ColumnType::FLOAT,
            Owned::Float(f32::from_be_bytes(arr(raw).ok_or_else(|| err("wrong length"))?)),
        ),
        oid::FLOAT8 => MyParam::new(
            ColumnType::DOUBLE,
            Owned::Double(f64::from_be_bytes(arr(raw).ok_or_else(|| err("wrong length"))?)),
        ),
        oid::BYTEA => MyParam::new(ColumnType::BLOB, Owned::Bytes(raw.to_vec())),
        oid::TEXT | oid::VARCHAR | oid::BPCHAR | oid::JSON | oid::UNKNOWN | NAME | 0 => {
            MyParam::new(ColumnType::VAR_STRING, Owned::Bytes(raw.to_vec()))
        }
        // jsonb's binary form is a version byte (1) and the text.
        oid::JSONB => match raw.split_first() {
            Some((1, text)) => MyParam::new(ColumnType::VAR_STRING, Owned::Bytes(text.to_vec())),
            _ => return Err(err("not jsonb's binary form (version 1, then the text)")),
        },
        oid::NUMERIC => {
            let text = decode_numeric(raw).ok_or_else(|| err("malformed numeric"))?;
            MyParam::new(ColumnType::NEWDECIMAL, Owned::Bytes(text.into_bytes()))
        }
        oid::DATE => {
            let days = i32::from_be_bytes(arr(raw).ok_or_else(|| err("wrong length"))?);
            if days == i32::MIN || days == i32::MAX {
                return Err(err("infinite dates have no MySQL value"));
            }
            let (y, month, day) = civil_from_days(i64::from(days) + PG_EPOCH_DAYS);
            let year = u16::try_from(y).map_err(|_| err("year out of MySQL's range"))?;
            MyParam::new(ColumnType::DATE, Owned::DateTime(DateTime { year, month, day, ..DateTime::default() }))
        }
        oid::TIMESTAMP | oid::TIMESTAMPTZ => {
            let micros = be_i64(fixed(8)?)?;
            if micros == i64::MIN || micros == i64::MAX {
                return Err(err("infinite timestamps have no MySQL value"));
            }
            MyParam::new(
                ColumnType::DATETIME,
                Owned::DateTime(datetime_from_micros(micros).ok_or_else(|| err("year out of MySQL's range"))?),
            )
        }
        oid::TIME => MyParam::new(ColumnType::TIME, Owned::Time(time_from_micros(be_i64(fixed(8)?)?))),
        oid::INTERVAL => {
            let b = fixed(16)?;
            let micros = be_i64(b.get(..8).unwrap_or_default())?;
            let days = i32::from_be_bytes(b.get(8..12).and_then(|x| x.try_into().ok()).unwrap_or_default());
            let months = i32::from_be_bytes(b.get(12..16).and_then(|x| x.try_into().ok()).unwrap_or_default());
            if months != 0 {
                return Err(err("intervals with months have no MySQL TIME value"));
            }
            MyParam::new(ColumnType::TIME, Owned::Time(time_from_micros(micros + i64::from(days) * MICROS_PER_DAY)))
        }
        oid::UUID => {
            let b = fixed(16)?;
            let mut s = String::with_capacity(36);
            for (i, x) in b.iter().enumerate() {
                if matches!(i, 4 | 6 | 8 | 10) {
                    s.push('-');
                }
                s.push_str(&format!("{x:02x}"));
            }
            MyParam::new(ColumnType::VAR_STRING, Owned::Bytes(s.into_bytes()))
        }
        _ => return Err(err("unsupported type in binary format (send it as text)")),
    })
}

/// The whole of `raw` as a fixed-size array.
fn arr<const N: usize>(raw: &[u8]) -> Option<[u8; N]> {
    <[u8; N]>::try_from(raw).ok()
}

/// `name` (not otherwise mapped by the bridge).
const NAME: u32 = 19;

fn datetime_from_micros(micros: i64) -> Option<DateTime> {
    let days = micros.div_euclid(MICROS_PER_DAY);
    let rest = micros.rem_euclid(MICROS_PER_DAY);
    let (y, month, day) = civil_from_days(days + PG_EPOCH_DAYS);
    let secs = rest / 1_000_000;
    Some(DateTime {
        year: u16::try_from(y).ok().filter(|y| *y <= 9999)?,
        month,
        day,
        hour: u8::try_from(secs / 3600).ok()?,
        minute: u8::try_from(secs / 60 % 60).ok()?,
        second: u8::try_from(secs % 60).ok()?,
        micros: u32::try_from(rest % 1_000_000).ok()?,
    })
}

fn time_from_micros(micros: i64) -> Time {
    let abs = micros.unsigned_abs();
    let secs = abs / 1_000_000;
    Time {
        negative: micros < 0,
        days: u32::try_from(secs / 86_400).unwrap_or(u32::MAX),
        hours: u8::try_from(secs / 3600 % 24).unwrap_or_default(),
        minutes: u8::try_from(secs / 60 % 60).unwrap_or_default(),
        seconds: u8::try_from(secs % 60).unwrap_or_default(),
        micros: u32::try_from(abs % 1_000_000).unwrap_or_default(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::mysql::column::ColumnType as T;

    fn col(kind: PgKind) -> PgColumn {
        PgColumn { name: "c".into(), kind, typmod: -1, value_type: ValueType::new(T::VAR_STRING, false) }
    }

    fn text_row(kind: PgKind, raw: &[u8], format: i16) -> Vec<u8> {
        let mut out = Vec::new();
        text_row_value(&col(kind), raw, format, &mut out).expect("value");
        out
    }

    fn bin_row(kind: PgKind, v: BinaryValue<'_>, format: i16) -> Vec<u8> {
        let mut out = Vec::new();
        binary_row_value(&col(kind), &v, format, &mut out).expect("value");
        out
    }

    /// A value with no binary form of its column's type is an error naming it, where the
    /// bridge used to send 0, NaN or -infinity in its place.
    #[test]
    fn values_with_no_binary_form_are_errors() {
        let text =
            |kind, raw: &[u8]| text_row_value(&col(kind), raw, 1, &mut Vec::new()).map_err(|e| (e.sqlstate, e.reason));
        assert_eq!(text(PgKind::Int4, b"x7"), Err(("22P02", "not an integer")));
        assert_eq!(text(PgKind::Int4, b"4294967296"), Err(("22003", "out of range")));
        assert_eq!(text(PgKind::Int2, b"40000"), Err(("22003", "out of range")));
        assert_eq!(text(PgKind::Int8, b"18446744073709551615"), Err(("22P02", "not an integer")));
        assert_eq!(text(PgKind::Float8, b"1.2.3"), Err(("22P02", "not a number")));
        assert_eq!(text(PgKind::Float4, b""), Err(("22P02", "not a number")));
        assert_eq!(text(PgKind::Numeric, b"1e5"), Err(("22P02", "not a decimal number")));
        assert_eq!(text(PgKind::Date, b"2020-13-45x"), Err(("22P02", "not a date")));
        assert_eq!(text(PgKind::Timestamp, b"yesterday"), Err(("22P02", "not a timestamp")));
        assert_eq!(text(PgKind::Interval, b"1 day"), Err(("22P02", "not a MySQL TIME value")));
        let e = text_row_value(&col(PgKind::Int4), b"x7", 1, &mut Vec::new()).expect_err("refused");
        assert_eq!(
            e.to_string(),
            "MySQL value \"x7\" cannot be sent as PostgreSQL integer in binary format: not an integer"
        );
        // The same values in text format are MySQL's own text.
        assert_eq!(text_row(PgKind::Int4, b"x7", 0), b"x7");
    }

    /// jsonb in binary is its version byte and the text; anything else is refused, not cut.
    #[test]
    fn binary_jsonb_parameters_need_their_version_byte() {
        assert_eq!(
            my_param(oid::JSONB, 1, Some(b"\x01[1]")).map(|p| p.value() == BinaryValue::Bytes(b"[1]")),
            Ok(true)
        );
        for raw in [&b""[..], b"[1]"] {
            assert_eq!(my_param(oid::JSONB, 1, Some(raw)).map_err(|e| e.format), Err("binary"), "{raw:?}");
        }
    }

    /// Zero, zero-in-part, year-0 and invalid dates are recognised in text and binary rows;
    /// real dates (29 February of a leap year included) are not.
    #[test]
    fn dates_that_name_no_day() {
        for raw in [&b"0000-00-00"[..], b"2020-00-00", b"2020-05-00", b"0000-01-01", b"2021-02-29", b"2020-04-31"] {
            assert!(names_no_day_text(PgKind::Date, raw), "{}", String::from_utf8_lossy(raw));
            let (d, _) = parse_date(raw).expect("date");
            assert!(names_no_day_binary(PgKind::Timestamp, &BinaryValue::DateTime(d)));
        }
        assert!(names_no_day_text(PgKind::Timestamp, b"0000-00-00 00:00:00"));
        assert!(names_no_day_binary(PgKind::Date, &BinaryValue::DateTime(DateTime::default())));
        for raw in [&b"2024-02-29"[..], b"1000-01-01", b"9999-12-31", b"2000-02-29 00:00:00"] {
            assert!(!names_no_day_text(PgKind::Timestamp, raw), "{}", String::from_utf8_lossy(raw));
        }
        assert!(!names_no_day_text(PgKind::Text, b"0000-00-00"), "only date columns");
    }

    #[test]
    fn text_rows_in_text_format() {
        assert_eq!(text_row(PgKind::Int8, b"-5", 0), b"-5");
        assert_eq!(text_row(PgKind::Bytea, &[0x00, 0xFF, 0x41], 0), b"\\x00ff41");
        assert_eq!(text_row(PgKind::Timestamp, b"2024-01-02 03:04:05.120000", 0), b"2024-01-02 03:04:05.12");
        assert_eq!(text_row(PgKind::Timestamp, b"2024-01-02 03:04:05.000", 0), b"2024-01-02 03:04:05");
        assert_eq!(text_row(PgKind::Timestamp, b"2024-01-02 03:04:00", 0), b"2024-01-02 03:04:00");
        assert_eq!(text_row(PgKind::Interval, b"-838:59:58.500", 0), b"-838:59:58.5");
        assert_eq!(text_row(PgKind::Numeric, b"100.00", 0), b"100.00");
        assert_eq!(text_row(PgKind::Text, "日本".as_bytes(), 0), "日本".as_bytes());
    }

    #[test]
    fn text_rows_in_binary_format() {
        assert_eq!(text_row(PgKind::Int2, b"-128", 1), (-128i16).to_be_bytes());
        assert_eq!(text_row(PgKind::Int4, b"65535", 1), 65535i32.to_be_bytes());
        assert_eq!(text_row(PgKind::Int8, b"4294967295", 1), 4_294_967_295i64.to_be_bytes());
        assert_eq!(text_row(PgKind::Float4, b"-1.5", 1), (-1.5f32).to_be_bytes());
        assert_eq!(text_row(PgKind::Float8, b"1e300", 1), 1e300f64.to_be_bytes());
        assert_eq!(text_row(PgKind::Date, b"2000-01-01", 1), 0i32.to_be_bytes());
        assert_eq!(text_row(PgKind::Date, b"2024-02-29", 1), 8825i32.to_be_bytes());
        assert_eq!(text_row(PgKind::Date, b"1999-12-31", 1), (-1i32).to_be_bytes());
        let micros = 8825 * MICROS_PER_DAY + 3_723_000_001;
        assert_eq!(text_row(PgKind::Timestamp, b"2024-02-29 01:02:03.000001", 1), micros.to_be_bytes());
        let mut interval = (-(26 * 3600 + 3 * 60 + 4) * 1_000_000i64 - 5).to_be_bytes().to_vec();
        interval.extend_from_slice(&[0; 8]);
        assert_eq!(text_row(PgKind::Interval, b"-26:03:04.000005", 1), interval);
        assert_eq!(text_row(PgKind::Bytea, &[1, 2], 1), [1, 2]);
        assert_eq!(text_row(PgKind::Json, b"{\"a\": 1}", 1), b"{\"a\": 1}");
    }

    #[test]
    fn binary_rows_both_formats() {
        assert_eq!(bin_row(PgKind::Int2, BinaryValue::U8(255), 1), 255i16.to_be_bytes());
        assert_eq!(bin_row(PgKind::Int8, BinaryValue::U32(u32::MAX), 0), b"4294967295");
        assert_eq!(bin_row(PgKind::Numeric, BinaryValue::U64(u64::MAX), 0), b"18446744073709551615");
        assert_eq!(bin_row(PgKind::Float4, BinaryValue::Float(0.1), 0), b"0.1");
        assert_eq!(bin_row(PgKind::Float8, BinaryValue::Double(f64::NEG_INFINITY), 0), b"-Infinity");
        let dt = DateTime { year: 2024, month: 1, day: 2, hour: 3, minute: 4, second: 5, micros: 500_000 };
        assert_eq!(bin_row(PgKind::Timestamp, BinaryValue::DateTime(dt), 0), b"2024-01-02 03:04:05.5");
        assert_eq!(bin_row(PgKind::Date, BinaryValue::DateTime(dt), 0), b"2024-01-02");
        let t = Time { negative: true, days: 1, hours: 2, minutes: 3, seconds: 4, micros: 0 };
        assert_eq!(bin_row(PgKind::Interval, BinaryValue::Time(t), 0), b"-26:03:04");
        assert_eq!(bin_row(PgKind::Bytea, BinaryValue::Bytes(&[0xAB]), 0), b"\\xab");
        // A zero date reaches the encoder never (rows send it as NULL): it has no binary date.
        let zero =
            binary_row_value(&col(PgKind::Date), &BinaryValue::DateTime(DateTime::default()), 1, &mut Vec::new());
        assert_eq!(zero.map_err(|e| e.reason), Err("not a date"));
    }

    fn numeric(text: &str) -> Vec<u8> {
        let mut out = Vec::new();
        encode_numeric(text, &mut out).expect("a decimal");
        out
    }

    fn words(w: &[i16]) -> Vec<u8> {
        w.iter().flat_map(|x| x.to_be_bytes()).collect()
    }

    #[test]
    fn numeric_binary_form() {
        // ndigits, weight, sign, dscale, digits.
        assert_eq!(numeric("0"), words(&[0, 0, 0, 0]));
        assert_eq!(numeric("0.00"), words(&[0, 0, 0, 2]));
        assert_eq!(numeric("12345.678"), words(&[3, 1, 0, 3, 1, 2345, 6780]));
        assert_eq!(numeric("-0.5"), words(&[1, -1, 0x4000, 1, 5000]));
        assert_eq!(numeric("10000"), words(&[1, 1, 0, 0, 1]));
        assert_eq!(numeric("0.0001"), words(&[1, -1, 0, 4, 1]));
        assert_eq!(numeric("0.00000001"), words(&[1, -2, 0, 8, 1]));
        for bad in ["NaN", "", "-", ".", "1e5", "1.2.3", "+-1", " 1", "Infinity"] {
            let mut out = vec![7];
            assert_eq!((encode_numeric(bad, &mut out), out), (Err(NotDecimal), vec![7]), "{bad:?}");
        }
        for text in [
            "0",
            "12345.678",
            "-0.5",
            "10000",
            "0.0001",
            "0.00000001",
            "-12345678901234567890.0123456789",
            "18446744073709551615",
            "1.10",
        ] {
            assert_eq!(decode_numeric(&numeric(text)).as_deref(), Some(text), "round trip {text}");
        }
        assert_eq!(decode_numeric(&words(&[0, 0, -0x4000, 0])).as_deref(), Some("NaN"));
        assert_eq!(decode_numeric(&[0, 1]), None);
    }

    #[test]
    fn parameters_text_and_binary() {
        let p = |oid, format, v: Option<&[u8]>| {
            my_param(oid, format, v).map(|p| (p.ty.column_type, format!("{:?}", p.value())))
        };
        assert_eq!(p(oid::INT4, 0, None), Ok((T::NULL, "Null".into())));
        assert_eq!(p(oid::INT4, 0, Some(b"42")), Ok((T::VAR_STRING, "Bytes([52, 50])".into())));
        assert_eq!(p(oid::BOOL, 0, Some(b"true")), Ok((T::LONGLONG, "I64(1)".into())));
        assert_eq!(p(oid::BYTEA, 0, Some(b"\\x00ff")), Ok((T::BLOB, "Bytes([0, 255])".into())));
        assert_eq!(p(oid::INT2, 1, Some(&(-2i16).to_be_bytes())), Ok((T::LONGLONG, "I64(-2)".into())));
        assert_eq!(p(oid::INT4, 1, Some(&7i32.to_be_bytes())), Ok((T::LONGLONG, "I64(7)".into())));
        assert_eq!(p(oid::INT8, 1, Some(&i64::MIN.to_be_bytes())), Ok((T::LONGLONG, format!("I64({})", i64::MIN))));
        assert_eq!(p(oid::FLOAT8, 1, Some(&0.5f64.to_be_bytes())), Ok((T::DOUBLE, "Double(0.5)".into())));
        assert_eq!(p(oid::TEXT, 1, Some("é".as_bytes())), Ok((T::VAR_STRING, "Bytes([195, 169])".into())));
        assert_eq!(p(oid::JSONB, 1, Some(b"\x01{}")), Ok((T::VAR_STRING, "Bytes([123, 125])".into())));
        let mut num = Vec::new();
        encode_numeric("-1.50", &mut num).expect("a decimal");
        assert_eq!(p(oid::NUMERIC, 1, Some(&num)), Ok((T::NEWDECIMAL, "Bytes([45, 49, 46, 53, 48])".into())));
        let dt = my_param(oid::TIMESTAMP, 1, Some(&(8825 * MICROS_PER_DAY + 1).to_be_bytes())).unwrap();
        let want = DateTime { year: 2024, month: 2, day: 29, hour: 0, minute: 0, second: 0, micros: 1 };
        assert_eq!((dt.ty.column_type, dt.value()), (T::DATETIME, BinaryValue::DateTime(want)));
        let d = my_param(oid::DATE, 1, Some(&(-1i32).to_be_bytes())).unwrap();
        assert_eq!(
            d.value(),
            BinaryValue::DateTime(DateTime { year: 1999, month: 12, day: 31, ..DateTime::default() })
        );
        let mut iv = (-90_000_000_001i64).to_be_bytes().to_vec();
        iv.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0]);
        let t = my_param(oid::INTERVAL, 1, Some(&iv)).unwrap();
        // 1 day - 25h 0.000001s = -1h 0.000001s.
        assert_eq!(
            t.value(),
            BinaryValue::Time(Time { negative: true, days: 0, hours: 1, minutes: 0, seconds: 0, micros: 1 })
        );
        let uuid = my_param(oid::UUID, 1, Some(&[0x12; 16])).unwrap();
        assert_eq!(uuid.value(), BinaryValue::Bytes(b"12121212-1212-1212-1212-121212121212"));
        assert!(my_param(oid::INT4, 1, Some(&[0, 1])).is_err());
        assert!(my_param(oid::DATE, 1, Some(&i32::MAX.to_be_bytes())).is_err());
        assert!(my_param(1007, 1, Some(&[0; 12])).is_err(), "int4[] in binary");
    }

    #[test]
    fn bind_parameters_follow_the_question_marks() {
        let types = [oid::INT8, 0];
        let values: [Option<&[u8]>; 2] = [Some(b"7"), Some(b"x")];
        let params = my_params(&types, &[0], &values, &[1, 0, 1]).unwrap();
        let want = [my_param(0, 0, Some(b"x")), my_param(oid::INT8, 0, Some(b"7")), my_param(0, 0, Some(b"x"))];
        assert_eq!(params, want.map(Result::unwrap), "reordered and repeated as MySQL needs them");
        let short: [Option<&[u8]>; 1] = [Some(b"abc")];
        assert!(my_params(&[oid::INT8], &[1], &short, &[0]).is_err(), "a binary int8 of three bytes");
    }
}
