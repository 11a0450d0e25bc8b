//! PostgreSQL type → MySQL column metadata: which `enum_field_types` value, flags, character set,
//! display length and decimals a MySQL client sees for a PostgreSQL result column.
//!
//! Decisions (documented in README.md "Cross-protocol pools"): every character type and JSON is
//! sent as utf8mb4 (`utf8mb4_general_ci`, id 45, the collation the router greets bridged clients
//! with); numbers, dates and bytea use the binary character set (63) like a MySQL server does.

use crate::protocol::mysql::column::{ColumnDefinition41, ColumnType, ValueType, BINARY_FLAG, BLOB_FLAG, NUM_FLAG};

/// Collation id of `utf8mb4_general_ci`, used for every textual column.
pub const UTF8MB4: u16 = 45;
/// Collation id of the `binary` character set.
pub const BINARY: u16 = 63;

/// PostgreSQL type OIDs the bridge maps specially (from `pg_type.dat`).
pub mod oid {
    /// `bool`.
    pub const BOOL: u32 = 16;
    /// `bytea`.
    pub const BYTEA: u32 = 17;
    /// `int8`.
    pub const INT8: u32 = 20;
    /// `int2`.
    pub const INT2: u32 = 21;
    /// `int4`.
    pub const INT4: u32 = 23;
    /// `text`.
    pub const TEXT: u32 = 25;
    /// `json`.
    pub const JSON: u32 = 114;
    /// `unknown` (an untyped literal or parameter).
    pub const UNKNOWN: u32 = 705;
    /// `float4`.
    pub const FLOAT4: u32 = 700;
    /// `float8`.
    pub const FLOAT8: u32 = 701;
    /// `bpchar` (`char(n)`).
    pub const BPCHAR: u32 = 1042;
    /// `varchar`.
    pub const VARCHAR: u32 = 1043;
    /// `date`.
    pub const DATE: u32 = 1082;
    /// `time`.
    pub const TIME: u32 = 1083;
    /// `timestamp`.
    pub const TIMESTAMP: u32 = 1114;
    /// `timestamptz`.
    pub const TIMESTAMPTZ: u32 = 1184;
    /// `interval`.
    pub const INTERVAL: u32 = 1186;
    /// `numeric`.
    pub const NUMERIC: u32 = 1700;
    /// `uuid`.
    pub const UUID: u32 = 2950;
    /// `jsonb`.
    pub const JSONB: u32 = 3802;
}

/// How the bridge converts one column's PostgreSQL text value for a MySQL client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValueKind {
    /// `int2` → `SHORT`.
    Int2,
    /// `int4` → `LONG`.
    Int4,
    /// `int8` → `LONGLONG`.
    Int8,
    /// `float4` → `FLOAT`.
    Float4,
    /// `float8` → `DOUBLE`.
    Float8,
    /// `numeric` → `NEWDECIMAL` (a string on both protocols).
    Numeric,
    /// `bool` → `TINY(1)` with 0/1.
    Bool,
    /// `bytea` → `BLOB`, bytes decoded from PostgreSQL's hex or escape text form.
    Bytea,
    /// `date` → `DATE`.
    Date,
    /// `time` → `TIME`.
    Time,
    /// `timestamp` → `DATETIME`.
    Timestamp,
    /// `timestamptz` → `DATETIME` in the session time zone (the offset is dropped).
    TimestampTz,
    /// `json`/`jsonb` → `JSON`.
    Json,
    /// Everything else: its text form as `VAR_STRING`.
    Text,
}

/// The MySQL description of one PostgreSQL column.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Column {
    /// How values are converted.
    pub kind: ValueKind,
    /// MySQL column type.
    pub column_type: ColumnType,
    /// `*_FLAG` bits.
    pub flags: u16,
    /// Collation id.
    pub charset: u16,
    /// Display length.
    pub length: u32,
    /// Shown decimals (fractional digits for time types and numerics; 0x1F when not fixed).
    pub decimals: u8,
}

/// Decimals value meaning "not fixed" (floats, unconstrained numerics, strings).
const NOT_FIXED: u8 = 0x1F;
/// Display length of an unconstrained string (65,535 utf8mb4 characters).
const LONG_STRING: u32 = 65_535 * 4;

/// Fractional-second digits of a time type: its typmod, or 6 (PostgreSQL's maximum) when the
/// column has none.
fn fraction_digits(typmod: i32) -> u8 {
    u8::try_from(typmod).ok().filter(|p| *p <= 6).unwrap_or(6)
}

/// Precision and scale of a `numeric(p, s)` type modifier.
#[must_use]
pub fn numeric_precision_scale(typmod: i32) -> Option<(u16, u16)> {
    let m = typmod.checked_sub(4).filter(|m| *m >= 0)?;
    let precision = u16::try_from((m >> 16) & 0xFFFF).ok()?;
    let scale = u16::try_from(m & 0xFFFF).ok()?;
    Some((precision, scale))
}

fn column(kind: ValueKind, column_type: ColumnType, flags: u16, charset: u16, length: u32, decimals: u8) -> Column {
    Column { kind, column_type, flags, charset, length, decimals }
}

/// Maps a PostgreSQL column (`type_oid`, `typmod` from RowDescription or ParameterDescription).
#[must_use]
pub fn map_type(type_oid: u32, typmod: i32) -> Column {
    let num = BINARY_FLAG | NUM_FLAG;
    match type_oid {
        oid::INT2 => column(ValueKind::Int2, ColumnType::SHORT, num, BINARY, 6, 0),
        oid::INT4 => column(ValueKind::Int4, ColumnType::LONG, num, BINARY, 11, 0),
        oid::INT8 => column(ValueKind::Int8, ColumnType::LONGLONG, num, BINARY, 20, 0),
        oid::FLOAT4 => column(ValueKind::Float4, ColumnType::FLOAT, num, BINARY, 12, NOT_FIXED),
        oid::FLOAT8 => column(ValueKind::Float8, ColumnType::DOUBLE, num, BINARY, 22, NOT_FIXED),
        oid::NUMERIC => match numeric_precision_scale(typmod) {
            Some((p, s)) => {
                // Sign and decimal point count in the display length, as MySQL reports it.
                let length = u32::from(p) + 1 + u32::from(s > 0);
                column(
                    ValueKind::Numeric,
                    ColumnType::NEWDECIMAL,
                    num,
                    BINARY,
                    length,
                    u8::try_from(s).unwrap_or(NOT_FIXED),
                )
            }
            None => column(ValueKind::Numeric, ColumnType::NEWDECIMAL, num, BINARY, 67, NOT_FIXED),
        },
        oid::BOOL => column(ValueKind::Bool, ColumnType::TINY, num, BINARY, 1, 0),
        oid::BYTEA => column(ValueKind::Bytea, ColumnType::BLOB, BLOB_FLAG | BINARY_FLAG, BINARY, u32::MAX, 0),
        oid::DATE => column(ValueKind::Date, ColumnType::DATE, BINARY_FLAG, BINARY, 10, 0),
        oid::TIME => time_column(ValueKind::Time, ColumnType::TIME, 10, typmod),
        oid::TIMESTAMP => time_column(ValueKind::Timestamp, ColumnType::DATETIME, 19, typmod),
        oid::TIMESTAMPTZ => time_column(ValueKind::TimestampTz, ColumnType::DATETIME, 19, typmod),
        oid::JSON | oid::JSONB => column(ValueKind::Json, ColumnType::JSON, BLOB_FLAG, UTF8MB4, u32::MAX, 0),
        oid::VARCHAR | oid::BPCHAR => {
            // varchar(n)/char(n) carry n + 4 in the typmod; MySQL counts 4 bytes per character.
            let chars = u32::try_from(typmod.saturating_sub(4)).ok().filter(|n| *n > 0);
            let length = chars.map_or(LONG_STRING, |n| n.saturating_mul(4));
            column(ValueKind::Text, ColumnType::VAR_STRING, 0, UTF8MB4, length, 0)
        }
        oid::UUID => column(ValueKind::Text, ColumnType::VAR_STRING, 0, UTF8MB4, 36 * 4, 0),
        _ => column(ValueKind::Text, ColumnType::VAR_STRING, 0, UTF8MB4, LONG_STRING, 0),
    }
}

fn time_column(kind: ValueKind, column_type: ColumnType, base_len: u32, typmod: i32) -> Column {
    let digits = fraction_digits(typmod);
    let length = base_len + if digits > 0 { u32::from(digits) + 1 } else { 0 };
    column(kind, column_type, BINARY_FLAG, BINARY, length, digits)
}

impl Column {
    /// The type the binary protocol writes this column's values as.
    #[must_use]
    pub fn value_type(&self) -> ValueType {
        ValueType::new(self.column_type, false)
    }

    /// Appends the `ColumnDefinition41` payload describing this column as `name`.
    pub fn encode_definition(&self, name: &[u8], out: &mut Vec<u8>) {
        ColumnDefinition41 {
            catalog: b"def",
            schema: b"",
            table: b"",
            org_table: b"",
            name,
            org_name: name,
            charset: self.charset,
            column_length: self.length,
            column_type: self.column_type,
            flags: self.flags,
            decimals: self.decimals,
        }
        .encode(out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(oid: u32, typmod: i32) -> (ColumnType, u16, u16, u32, u8) {
        let c = map_type(oid, typmod);
        (c.column_type, c.flags, c.charset, c.length, c.decimals)
    }

    #[test]
    fn integers_and_floats() {
        assert_eq!(shape(oid::INT2, -1), (ColumnType::SHORT, BINARY_FLAG | NUM_FLAG, 63, 6, 0));
        assert_eq!(shape(oid::INT4, -1), (ColumnType::LONG, BINARY_FLAG | NUM_FLAG, 63, 11, 0));
        assert_eq!(shape(oid::INT8, -1), (ColumnType::LONGLONG, BINARY_FLAG | NUM_FLAG, 63, 20, 0));
        assert_eq!(shape(oid::FLOAT4, -1).0, ColumnType::FLOAT);
        assert_eq!(shape(oid::FLOAT8, -1), (ColumnType::DOUBLE, BINARY_FLAG | NUM_FLAG, 63, 22, 0x1F));
        assert_eq!(map_type(oid::BOOL, -1).column_type, ColumnType::TINY);
        assert_eq!(map_type(oid::BOOL, -1).length, 1);
    }

    #[test]
    fn numeric_precision_and_scale() {
        // numeric(30,10): typmod = ((30 << 16) | 10) + 4.
        let typmod = ((30 << 16) | 10) + 4;
        assert_eq!(numeric_precision_scale(typmod), Some((30, 10)));
        assert_eq!(shape(oid::NUMERIC, typmod), (ColumnType::NEWDECIMAL, BINARY_FLAG | NUM_FLAG, 63, 32, 10));
        assert_eq!(shape(oid::NUMERIC, (12 << 16) + 4), (ColumnType::NEWDECIMAL, BINARY_FLAG | NUM_FLAG, 63, 13, 0));
        assert_eq!(numeric_precision_scale(-1), None);
        assert_eq!(shape(oid::NUMERIC, -1).4, 0x1F);
    }

    #[test]
    fn strings_binary_json_uuid() {
        assert_eq!(shape(oid::VARCHAR, 100 + 4), (ColumnType::VAR_STRING, 0, 45, 400, 0));
        assert_eq!(shape(oid::BPCHAR, 3 + 4), (ColumnType::VAR_STRING, 0, 45, 12, 0));
        assert_eq!(shape(oid::TEXT, -1), (ColumnType::VAR_STRING, 0, 45, 65_535 * 4, 0));
        assert_eq!(shape(oid::BYTEA, -1), (ColumnType::BLOB, BLOB_FLAG | BINARY_FLAG, 63, u32::MAX, 0));
        assert_eq!(shape(oid::JSONB, -1).0, ColumnType::JSON);
        assert_eq!(shape(oid::JSON, -1).2, 45);
        assert_eq!(shape(oid::UUID, -1), (ColumnType::VAR_STRING, 0, 45, 144, 0));
        // int4[] and an unknown type: their text form.
        assert_eq!(map_type(1007, -1).kind, ValueKind::Text);
        assert_eq!(map_type(99_999, -1).column_type, ColumnType::VAR_STRING);
    }

    #[test]
    fn time_types_carry_fraction_digits() {
        assert_eq!(shape(oid::DATE, -1), (ColumnType::DATE, BINARY_FLAG, 63, 10, 0));
        assert_eq!(shape(oid::TIMESTAMP, 3), (ColumnType::DATETIME, BINARY_FLAG, 63, 23, 3));
        assert_eq!(shape(oid::TIMESTAMPTZ, -1), (ColumnType::DATETIME, BINARY_FLAG, 63, 26, 6));
        assert_eq!(shape(oid::TIMESTAMP, 0), (ColumnType::DATETIME, BINARY_FLAG, 63, 19, 0));
        assert_eq!(shape(oid::TIME, 2), (ColumnType::TIME, BINARY_FLAG, 63, 13, 2));
    }
}
