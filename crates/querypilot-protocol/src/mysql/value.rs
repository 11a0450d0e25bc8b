//! Binary-protocol values (Client/Server Protocol, "Binary Protocol Value"): how one parameter of
//! `COM_STMT_EXECUTE` or one column of a binary result row is laid out for each column type.
//! Decoding borrows string-like values from the payload.

use super::codec::{put_lenenc_bytes, put_u16, put_u32, put_u64, Reader};
use super::column::{ColumnType, ValueType};
use super::error::DecodeError;

/// A calendar date and time of day (`DATE`, `DATETIME`, `TIMESTAMP`). Fields are carried as sent;
/// range checking is the server's job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DateTime {
    /// Year.
    pub year: u16,
    /// Month, 1–12 (0 in zero dates).
    pub month: u8,
    /// Day, 1–31 (0 in zero dates).
    pub day: u8,
    /// Hour.
    pub hour: u8,
    /// Minute.
    pub minute: u8,
    /// Second.
    pub second: u8,
    /// Microseconds.
    pub micros: u32,
}

/// A duration (`TIME`), which may be negative and span days.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Time {
    /// Whether the duration is negative.
    pub negative: bool,
    /// Whole days.
    pub days: u32,
    /// Hours, 0–23.
    pub hours: u8,
    /// Minutes.
    pub minutes: u8,
    /// Seconds.
    pub seconds: u8,
    /// Microseconds.
    pub micros: u32,
}

/// One value in the binary protocol. The integer variant records the width it travels in, so
/// encoding reproduces the wire form its column type requires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BinaryValue<'a> {
    /// SQL NULL (from the NULL bitmap, or a parameter of type `NULL`); no value bytes.
    Null,
    /// Signed `TINY`.
    I8(i8),
    /// Unsigned `TINY`.
    U8(u8),
    /// Signed `SHORT`/`YEAR`.
    I16(i16),
    /// Unsigned `SHORT`/`YEAR`.
    U16(u16),
    /// Signed `LONG`/`INT24`.
    I32(i32),
    /// Unsigned `LONG`/`INT24`.
    U32(u32),
    /// Signed `LONGLONG`.
    I64(i64),
    /// Unsigned `LONGLONG`.
    U64(u64),
    /// `FLOAT`.
    Float(f32),
    /// `DOUBLE`.
    Double(f64),
    /// A `string<lenenc>`: strings, blobs, decimals, JSON, BIT, ENUM, SET, geometry.
    Bytes(&'a [u8]),
    /// `DATE`, `DATETIME` or `TIMESTAMP` (same encoding; the column type tells which).
    DateTime(DateTime),
    /// `TIME`.
    Time(Time),
}

impl<'a> BinaryValue<'a> {
    /// Reads one non-NULL value of type `ty`. NULLs never reach this: they are in the bitmap.
    pub fn decode(r: &mut Reader<'a>, ty: ValueType) -> Result<Self, DecodeError> {
        let u = ty.unsigned;
        Ok(match ty.column_type {
            ColumnType::NULL => Self::Null,
            ColumnType::TINY if u => Self::U8(r.u8("tiny")?),
            ColumnType::TINY => Self::I8(i8::from_le_bytes(r.array("tiny")?)),
            ColumnType::SHORT | ColumnType::YEAR if u => Self::U16(r.u16("short")?),
            ColumnType::SHORT | ColumnType::YEAR => Self::I16(i16::from_le_bytes(r.array("short")?)),
            ColumnType::LONG | ColumnType::INT24 if u => Self::U32(r.u32("long")?),
            ColumnType::LONG | ColumnType::INT24 => Self::I32(i32::from_le_bytes(r.array("long")?)),
            ColumnType::LONGLONG if u => Self::U64(r.u64("longlong")?),
            ColumnType::LONGLONG => Self::I64(i64::from_le_bytes(r.array("longlong")?)),
            ColumnType::FLOAT => Self::Float(f32::from_le_bytes(r.array("float")?)),
            ColumnType::DOUBLE => Self::Double(f64::from_le_bytes(r.array("double")?)),
            ColumnType::DATE | ColumnType::DATETIME | ColumnType::TIMESTAMP | ColumnType::NEWDATE => {
                Self::DateTime(decode_datetime(r)?)
            }
            ColumnType::TIME => Self::Time(decode_time(r)?),
            ColumnType::DECIMAL
            | ColumnType::NEWDECIMAL
            | ColumnType::VARCHAR
            | ColumnType::BIT
            | ColumnType::VECTOR
            | ColumnType::JSON
            | ColumnType::ENUM
            | ColumnType::SET
            | ColumnType::TINY_BLOB
            | ColumnType::MEDIUM_BLOB
            | ColumnType::LONG_BLOB
            | ColumnType::BLOB
            | ColumnType::VAR_STRING
            | ColumnType::STRING
            | ColumnType::GEOMETRY => Self::Bytes(r.lenenc_bytes("string value")?),
            ColumnType(other) => return Err(DecodeError::UnsupportedType(other)),
        })
    }

    /// Appends the value's wire form (nothing for NULL).
    pub fn encode(&self, out: &mut Vec<u8>) {
        match *self {
            Self::Null => {}
            Self::I8(v) => out.extend_from_slice(&v.to_le_bytes()),
            Self::U8(v) => out.push(v),
            Self::I16(v) => out.extend_from_slice(&v.to_le_bytes()),
            Self::U16(v) => put_u16(out, v),
            Self::I32(v) => out.extend_from_slice(&v.to_le_bytes()),
            Self::U32(v) => put_u32(out, v),
            Self::I64(v) => out.extend_from_slice(&v.to_le_bytes()),
            Self::U64(v) => put_u64(out, v),
            Self::Float(v) => out.extend_from_slice(&v.to_le_bytes()),
            Self::Double(v) => out.extend_from_slice(&v.to_le_bytes()),
            Self::Bytes(b) => put_lenenc_bytes(out, b),
            Self::DateTime(dt) => encode_datetime(&dt, out),
            Self::Time(t) => encode_time(&t, out),
        }
    }

    /// Whether this is SQL NULL.
    #[must_use]
    pub fn is_null(&self) -> bool {
        matches!(self, Self::Null)
    }
}

/// `DATE`/`DATETIME`/`TIMESTAMP`: a length byte of 0, 4, 7 or 11, then that many bytes.
fn decode_datetime(r: &mut Reader<'_>) -> Result<DateTime, DecodeError> {
    let len = r.u8("datetime length")?;
    if !matches!(len, 0 | 4 | 7 | 11) {
        return Err(DecodeError::InvalidValue { field: "datetime length", value: u64::from(len) });
    }
    let mut dt = DateTime::default();
    if len >= 4 {
        dt.year = r.u16("year")?;
        dt.month = r.u8("month")?;
        dt.day = r.u8("day")?;
    }
    if len >= 7 {
        dt.hour = r.u8("hour")?;
        dt.minute = r.u8("minute")?;
        dt.second = r.u8("second")?;
    }
    if len == 11 {
        dt.micros = r.u32("microseconds")?;
    }
    Ok(dt)
}

/// Writes the shortest length form that holds every non-zero field, as servers do.
fn encode_datetime(dt: &DateTime, out: &mut Vec<u8>) {
    let len: u8 = if dt.micros != 0 {
        11
    } else if dt.hour != 0 || dt.minute != 0 || dt.second != 0 {
        7
    } else if dt.year != 0 || dt.month != 0 || dt.day != 0 {
        4
    } else {
        0
    };
    out.push(len);
    if len >= 4 {
        put_u16(out, dt.year);
        out.extend_from_slice(&[dt.month, dt.day]);
    }
    if len >= 7 {
        out.extend_from_slice(&[dt.hour, dt.minute, dt.second]);
    }
    if len == 11 {
        put_u32(out, dt.micros);
    }
}

/// `TIME`: a length byte of 0, 8 or 12, then sign, days, hours, minutes, seconds, microseconds.
fn decode_time(r: &mut Reader<'_>) -> Result<Time, DecodeError> {
    let len = r.u8("time length")?;
    if !matches!(len, 0 | 8 | 12) {
        return Err(DecodeError::InvalidValue { field: "time length", value: u64::from(len) });
    }
    let mut t = Time::default();
    if len >= 8 {
        t.negative = match r.u8("time sign")? {
            0 => false,
            1 => true,
            other => return Err(DecodeError::InvalidValue { field: "time sign", value: u64::from(other) }),
        };
        t.days = r.u32("days")?;
        t.hours = r.u8("hours")?;
        t.minutes = r.u8("minutes")?;
        t.seconds = r.u8("seconds")?;
    }
    if len == 12 {
        t.micros = r.u32("microseconds")?;
    }
    Ok(t)
}

/// Writes the shortest form; a zero duration is length 0 whatever its sign, as servers send it.
fn encode_time(t: &Time, out: &mut Vec<u8>) {
    let whole = t.days != 0 || t.hours != 0 || t.minutes != 0 || t.seconds != 0;
    let len: u8 = if t.micros != 0 {
        12
    } else if whole {
        8
    } else {
        0
    };
    out.push(len);
    if len >= 8 {
        out.push(u8::from(t.negative));
        put_u32(out, t.days);
        out.extend_from_slice(&[t.hours, t.minutes, t.seconds]);
    }
    if len == 12 {
        put_u32(out, t.micros);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use proptest::prelude::*;

    fn enc(v: BinaryValue<'_>) -> Vec<u8> {
        let mut out = Vec::new();
        v.encode(&mut out);
        out
    }

    fn dec(bytes: &[u8], ty: ColumnType, unsigned: bool) -> BinaryValue<'_> {
        let mut r = Reader::new(bytes);
        let v = BinaryValue::decode(&mut r, ValueType::new(ty, unsigned)).unwrap();
        assert!(r.is_empty());
        v
    }

    #[test]
    fn golden_integers_at_limits() {
        assert_eq!(enc(BinaryValue::I8(-1)), [0xFF]);
        assert_eq!(dec(&[0xFF], ColumnType::TINY, false), BinaryValue::I8(-1));
        assert_eq!(dec(&[0xFF], ColumnType::TINY, true), BinaryValue::U8(255));
        assert_eq!(dec(&[0x00, 0x80], ColumnType::SHORT, false), BinaryValue::I16(i16::MIN));
        assert_eq!(dec(&[0xE8, 0x07], ColumnType::YEAR, true), BinaryValue::U16(2024));
        assert_eq!(dec(&[0xFF, 0xFF, 0xFF, 0x7F], ColumnType::INT24, false), BinaryValue::I32(i32::MAX));
        assert_eq!(enc(BinaryValue::U64(u64::MAX)), [0xFF; 8]);
        assert_eq!(enc(BinaryValue::I64(i64::MIN)), [0, 0, 0, 0, 0, 0, 0, 0x80]);
        assert_eq!(enc(BinaryValue::Double(1.0)), [0, 0, 0, 0, 0, 0, 0xF0, 0x3F]);
        assert_eq!(enc(BinaryValue::Float(1.0)), [0, 0, 0x80, 0x3F]);
    }

    #[test]
    fn golden_temporal() {
        let date = DateTime { year: 2010, month: 10, day: 17, ..DateTime::default() };
        assert_eq!(enc(BinaryValue::DateTime(date)), [0x04, 0xDA, 0x07, 0x0A, 0x11]);
        let dt6 = DateTime { hour: 19, minute: 27, second: 30, micros: 1, ..date };
        assert_eq!(enc(BinaryValue::DateTime(dt6)), [0x0B, 0xDA, 0x07, 0x0A, 0x11, 0x13, 0x1B, 0x1E, 0x01, 0, 0, 0]);
        assert_eq!(enc(BinaryValue::DateTime(DateTime::default())), [0x00]);
        let t = Time { negative: true, days: 120, hours: 19, minutes: 27, seconds: 30, micros: 0 };
        assert_eq!(enc(BinaryValue::Time(t)), [0x08, 0x01, 0x78, 0, 0, 0, 0x13, 0x1B, 0x1E]);
        assert_eq!(dec(&[0x00], ColumnType::TIME, false), BinaryValue::Time(Time::default()));
        // A 7-byte DATETIME is read as sent even though midnight would encode shorter.
        let v = dec(&[0x07, 0xDA, 0x07, 0x0A, 0x11, 0, 0, 0], ColumnType::DATETIME, false);
        assert_eq!(v, BinaryValue::DateTime(date));
    }

    #[test]
    fn invalid_lengths_and_types() {
        let ty = |t| ValueType::new(t, false);
        assert!(BinaryValue::decode(&mut Reader::new(&[5, 0, 0, 0, 0, 0]), ty(ColumnType::DATE)).is_err());
        assert!(BinaryValue::decode(&mut Reader::new(&[9]), ty(ColumnType::TIME)).is_err());
        assert!(BinaryValue::decode(&mut Reader::new(&[8, 2, 0, 0, 0, 0, 0, 0, 0]), ty(ColumnType::TIME)).is_err());
        assert_eq!(
            BinaryValue::decode(&mut Reader::new(&[0]), ty(ColumnType(100))),
            Err(DecodeError::UnsupportedType(100))
        );
        assert_eq!(dec(&[3, b'1', b'.', b'5'], ColumnType::NEWDECIMAL, false), BinaryValue::Bytes(b"1.5"));
    }

    /// Every (type, value) pair the binary protocol can carry, for property tests elsewhere too.
    pub(crate) fn typed_value() -> impl Strategy<Value = (ValueType, BinaryValue<'static>)> {
        let vt = |t, u| ValueType::new(t, u);
        let datetime = (any::<u16>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u32>())
            .prop_map(|(year, month, day, hour, minute, second, micros)| DateTime {
                year,
                month,
                day,
                hour,
                minute,
                second,
                micros,
            });
        let time = (any::<bool>(), any::<u32>(), any::<u8>(), any::<u8>(), any::<u8>(), any::<u32>()).prop_map(
            |(negative, days, hours, minutes, seconds, micros)| {
                let zero = days == 0 && hours == 0 && minutes == 0 && seconds == 0 && micros == 0;
                // A zero duration has no sign on the wire.
                Time { negative: negative && !zero, days, hours, minutes, seconds, micros }
            },
        );
        let strings: &'static [&'static [u8]] = &[b"", b"abc", b"-12345.678900", b"{\"a\":[1,2]}", &[0xFB; 300]];
        prop_oneof![
            Just((vt(ColumnType::NULL, false), BinaryValue::Null)),
            any::<i8>().prop_map(move |v| (vt(ColumnType::TINY, false), BinaryValue::I8(v))),
            any::<u8>().prop_map(move |v| (vt(ColumnType::TINY, true), BinaryValue::U8(v))),
            any::<i16>().prop_map(move |v| (vt(ColumnType::SHORT, false), BinaryValue::I16(v))),
            any::<u16>().prop_map(move |v| (vt(ColumnType::YEAR, true), BinaryValue::U16(v))),
            any::<i32>().prop_map(move |v| (vt(ColumnType::LONG, false), BinaryValue::I32(v))),
            any::<u32>().prop_map(move |v| (vt(ColumnType::INT24, true), BinaryValue::U32(v))),
            any::<i64>().prop_map(move |v| (vt(ColumnType::LONGLONG, false), BinaryValue::I64(v))),
            any::<u64>().prop_map(move |v| (vt(ColumnType::LONGLONG, true), BinaryValue::U64(v))),
            any::<f32>()
                .prop_filter("NaN", |v| !v.is_nan())
                .prop_map(move |v| (vt(ColumnType::FLOAT, false), BinaryValue::Float(v))),
            any::<f64>()
                .prop_filter("NaN", |v| !v.is_nan())
                .prop_map(move |v| (vt(ColumnType::DOUBLE, false), BinaryValue::Double(v))),
            (
                0..strings.len(),
                prop::sample::select(vec![
                    ColumnType::VAR_STRING,
                    ColumnType::BLOB,
                    ColumnType::NEWDECIMAL,
                    ColumnType::JSON,
                    ColumnType::BIT,
                    ColumnType::GEOMETRY
                ])
            )
                .prop_map(move |(i, t)| (
                    vt(t, false),
                    BinaryValue::Bytes(strings.get(i).copied().unwrap_or_default())
                )),
            (datetime, prop::sample::select(vec![ColumnType::DATE, ColumnType::DATETIME, ColumnType::TIMESTAMP]))
                .prop_map(move |(d, t)| (vt(t, false), BinaryValue::DateTime(d))),
            time.prop_map(move |t| (vt(ColumnType::TIME, false), BinaryValue::Time(t))),
        ]
    }

    proptest! {
        #[test]
        fn round_trip_every_type((ty, v) in typed_value()) {
            let bytes = enc(v);
            let mut r = Reader::new(&bytes);
            prop_assert_eq!(BinaryValue::decode(&mut r, ty).unwrap(), v);
            prop_assert!(r.is_empty());
        }

        #[test]
        fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..24), t in any::<u8>(), u in any::<bool>()) {
            let _ = BinaryValue::decode(&mut Reader::new(&bytes), ValueType::new(ColumnType(t), u));
        }
    }
}
