//! MySQL column metadata → the PostgreSQL type a PostgreSQL client sees (the reverse bridge: a
//! PostgreSQL client served by a MySQL pool).
//!
//! Decisions (documented in README.md "Cross-protocol pools"): unsigned integers widen to the
//! next PostgreSQL integer (BIGINT UNSIGNED to `numeric(20,0)`); `TIME`, which MySQL uses for
//! durations of up to ±838 hours, becomes `interval`; strings and blobs in the binary character
//! set become `bytea`, every other string type (ENUM and SET included) `text`; MariaDB reports
//! its JSON columns as text, MySQL's `JSON` type becomes `json`.

use super::pg_result::format_of;
use super::types::{oid, BINARY};
use crate::protocol::mysql::column::{ColumnDefinition41, ColumnType, ValueType, UNSIGNED_FLAG};
use crate::protocol::pg::backend::{encode_row_description, FieldDescription};
use crate::protocol::pg::tag::backend::{NO_DATA, PARAMETER_DESCRIPTION};

/// How values of one result column are converted for a PostgreSQL client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum PgKind {
    /// `int2`.
    Int2,
    /// `int4`.
    Int4,
    /// `int8`.
    Int8,
    /// `numeric` (decimals and BIGINT UNSIGNED).
    Numeric,
    /// `float4`.
    Float4,
    /// `float8`.
    Float8,
    /// `text`.
    Text,
    /// `bytea`.
    Bytea,
    /// `date`.
    Date,
    /// `interval` (MySQL `TIME`).
    Interval,
    /// `timestamp` (MySQL `DATETIME` and `TIMESTAMP`, in the session time zone).
    Timestamp,
    /// `json`.
    Json,
}

impl PgKind {
    /// The PostgreSQL type OID.
    #[must_use]
    pub fn type_oid(self) -> u32 {
        match self {
            Self::Int2 => oid::INT2,
            Self::Int4 => oid::INT4,
            Self::Int8 => oid::INT8,
            Self::Numeric => oid::NUMERIC,
            Self::Float4 => oid::FLOAT4,
            Self::Float8 => oid::FLOAT8,
            Self::Text => oid::TEXT,
            Self::Bytea => oid::BYTEA,
            Self::Date => oid::DATE,
            Self::Interval => oid::INTERVAL,
            Self::Timestamp => oid::TIMESTAMP,
            Self::Json => oid::JSON,
        }
    }

    /// `pg_type.typlen`: the fixed width, or -1 for variable-length types.
    #[must_use]
    pub fn type_size(self) -> i16 {
        match self {
            Self::Int2 => 2,
            Self::Int4 | Self::Float4 | Self::Date => 4,
            Self::Int8 | Self::Float8 | Self::Timestamp => 8,
            Self::Interval => 16,
            Self::Numeric | Self::Text | Self::Bytea | Self::Json => -1,
        }
    }
}

/// The PostgreSQL description of one MySQL result column.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(from = "FrozenColumn", into = "FrozenColumn")]
pub struct PgColumn {
    /// Column name (MySQL's alias).
    pub name: String,
    /// How values are converted.
    pub kind: PgKind,
    /// PostgreSQL type modifier (-1: none).
    pub typmod: i32,
    /// How MySQL encodes the column's values in binary rows.
    pub value_type: ValueType,
}

/// A column as it moves to a new binary (#40): MySQL's value type as its type byte and
/// whether it is unsigned.
#[derive(serde::Serialize, serde::Deserialize)]
struct FrozenColumn {
    name: String,
    kind: PgKind,
    typmod: i32,
    value_type: (u8, bool),
}

impl From<FrozenColumn> for PgColumn {
    fn from(c: FrozenColumn) -> Self {
        let value_type = ValueType { column_type: ColumnType(c.value_type.0), unsigned: c.value_type.1 };
        Self { name: c.name, kind: c.kind, typmod: c.typmod, value_type }
    }
}

impl From<PgColumn> for FrozenColumn {
    fn from(c: PgColumn) -> Self {
        let value_type = (c.value_type.column_type.0, c.value_type.unsigned);
        Self { name: c.name, kind: c.kind, typmod: c.typmod, value_type }
    }
}

impl PgColumn {
    /// The RowDescription field for this column sent in `format` (0 text, 1 binary).
    #[must_use]
    pub fn field(&self, format: i16) -> FieldDescription<'_> {
        FieldDescription {
            name: &self.name,
            table_oid: 0,
            column_attr: 0,
            type_oid: self.kind.type_oid(),
            type_size: self.kind.type_size(),
            type_modifier: self.typmod,
            format,
        }
    }
}

/// Appends the ParameterDescription of a statement's `param_types` (0, unspecified, is
/// described as text).
pub fn encode_parameter_description(param_types: &[u32], out: &mut Vec<u8>) {
    let start = out.len();
    out.push(PARAMETER_DESCRIPTION);
    out.extend_from_slice(&[0; 4]);
    out.extend_from_slice(&u16::try_from(param_types.len()).unwrap_or(u16::MAX).to_be_bytes());
    for ty in param_types {
        out.extend_from_slice(&(if *ty == 0 { oid::TEXT } else { *ty }).to_be_bytes());
    }
    let len = u32::try_from(out.len() - start - 1).unwrap_or(u32::MAX);
    if let Some(slot) = out.get_mut(start + 1..start + 5) {
        slot.copy_from_slice(&len.to_be_bytes());
    }
}

/// Appends the RowDescription of result `columns` sent in `formats`, or NoData when there are
/// none.
pub fn encode_described(columns: &[PgColumn], formats: &[i16], out: &mut Vec<u8>) {
    if columns.is_empty() {
        out.extend_from_slice(&[NO_DATA, 0, 0, 0, 4]);
        return;
    }
    let fields: Vec<_> = columns.iter().enumerate().map(|(i, c)| c.field(format_of(formats, i))).collect();
    // MySQL column names hold no NUL; an over-long description cannot be sent.
    let _ = encode_row_description(&fields, out);
}

/// `numeric(p, s)` as a type modifier.
fn numeric_typmod(precision: u32, scale: u32) -> i32 {
    i32::try_from(((precision << 16) | scale) + 4).unwrap_or(-1)
}

/// Maps one MySQL column definition.
#[must_use]
pub fn pg_column(def: &ColumnDefinition41<'_>) -> PgColumn {
    let unsigned = def.flags & UNSIGNED_FLAG != 0;
    let binary_charset = def.charset == BINARY;
    let (kind, typmod) = match def.column_type {
        ColumnType::TINY => (PgKind::Int2, -1),
        ColumnType::SHORT | ColumnType::YEAR if unsigned => (PgKind::Int4, -1),
        ColumnType::SHORT | ColumnType::YEAR => (PgKind::Int2, -1),
        ColumnType::INT24 => (PgKind::Int4, -1),
        ColumnType::LONG if unsigned => (PgKind::Int8, -1),
        ColumnType::LONG => (PgKind::Int4, -1),
        ColumnType::LONGLONG if unsigned => (PgKind::Numeric, numeric_typmod(20, 0)),
        ColumnType::LONGLONG => (PgKind::Int8, -1),
        ColumnType::DECIMAL | ColumnType::NEWDECIMAL => {
            // The display length counts the sign (unless unsigned) and the decimal point.
            let scale = u32::from(def.decimals);
            let extra = u32::from(!unsigned) + u32::from(scale > 0);
            let precision = def.column_length.saturating_sub(extra);
            let typmod = if precision > 0 && scale <= precision && scale <= 0x1E {
                numeric_typmod(precision, scale)
            } else {
                -1
            };
            (PgKind::Numeric, typmod)
        }
        ColumnType::FLOAT => (PgKind::Float4, -1),
        ColumnType::DOUBLE => (PgKind::Float8, -1),
        ColumnType::DATE | ColumnType::NEWDATE => (PgKind::Date, -1),
        ColumnType::TIME | ColumnType::TIME2 => (PgKind::Interval, fraction_typmod(def.decimals, true)),
        ColumnType::DATETIME | ColumnType::TIMESTAMP | ColumnType::DATETIME2 | ColumnType::TIMESTAMP2 => {
            (PgKind::Timestamp, fraction_typmod(def.decimals, false))
        }
        ColumnType::JSON => (PgKind::Json, -1),
        ColumnType::BIT | ColumnType::GEOMETRY => (PgKind::Bytea, -1),
        ColumnType::VARCHAR
        | ColumnType::VAR_STRING
        | ColumnType::STRING
        | ColumnType::TINY_BLOB
        | ColumnType::MEDIUM_BLOB
        | ColumnType::LONG_BLOB
        | ColumnType::BLOB
            if binary_charset =>
        {
            (PgKind::Bytea, -1)
        }
        _ => (PgKind::Text, -1),
    };
    PgColumn { name: String::from_utf8_lossy(def.name).into_owned(), kind, typmod, value_type: def.value_type() }
}

/// Fractional-second digits as a PostgreSQL typmod: timestamps carry the precision itself,
/// intervals it in the low 16 bits under "all fields" (0x7FFF << 16).
fn fraction_typmod(decimals: u8, interval: bool) -> i32 {
    if decimals > 6 {
        return -1;
    }
    let p = i32::from(decimals);
    if interval {
        (0x7FFF << 16) | p
    } else {
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::types::UTF8MB4;
    use crate::protocol::mysql::column::BINARY_FLAG;

    fn def(column_type: ColumnType, flags: u16, charset: u16, column_length: u32, decimals: u8) -> PgColumn {
        pg_column(&ColumnDefinition41 {
            catalog: b"def",
            schema: b"",
            table: b"",
            org_table: b"",
            name: b"c",
            org_name: b"c",
            charset,
            column_length,
            column_type,
            flags,
            decimals,
        })
    }

    fn shape(c: &PgColumn) -> (u32, i16, i32) {
        (c.kind.type_oid(), c.kind.type_size(), c.typmod)
    }

    #[test]
    fn integers_widen_when_unsigned() {
        assert_eq!(shape(&def(ColumnType::TINY, 0, BINARY, 4, 0)), (oid::INT2, 2, -1));
        assert_eq!(def(ColumnType::TINY, UNSIGNED_FLAG, BINARY, 3, 0).kind, PgKind::Int2);
        assert_eq!(def(ColumnType::SHORT, 0, BINARY, 6, 0).kind, PgKind::Int2);
        assert_eq!(def(ColumnType::SHORT, UNSIGNED_FLAG, BINARY, 5, 0).kind, PgKind::Int4);
        assert_eq!(def(ColumnType::INT24, UNSIGNED_FLAG, BINARY, 8, 0).kind, PgKind::Int4);
        assert_eq!(def(ColumnType::LONG, 0, BINARY, 11, 0).kind, PgKind::Int4);
        assert_eq!(def(ColumnType::LONG, UNSIGNED_FLAG, BINARY, 10, 0).kind, PgKind::Int8);
        assert_eq!(shape(&def(ColumnType::LONGLONG, 0, BINARY, 20, 0)), (oid::INT8, 8, -1));
        assert_eq!(shape(&def(ColumnType::LONGLONG, UNSIGNED_FLAG, BINARY, 20, 0)), (oid::NUMERIC, -1, (20 << 16) + 4));
        assert!(def(ColumnType::LONG, UNSIGNED_FLAG, BINARY, 10, 0).value_type.unsigned);
    }

    #[test]
    fn decimals_floats_and_times() {
        // DECIMAL(30,10): length 32 = 30 digits + sign + point.
        assert_eq!(shape(&def(ColumnType::NEWDECIMAL, 0, BINARY, 32, 10)), (oid::NUMERIC, -1, ((30 << 16) | 10) + 4));
        // DECIMAL(5,0) UNSIGNED: length 5.
        assert_eq!(def(ColumnType::NEWDECIMAL, UNSIGNED_FLAG, BINARY, 5, 0).typmod, (5 << 16) + 4);
        assert_eq!(shape(&def(ColumnType::FLOAT, 0, BINARY, 12, 31)), (oid::FLOAT4, 4, -1));
        assert_eq!(shape(&def(ColumnType::DOUBLE, 0, BINARY, 22, 31)), (oid::FLOAT8, 8, -1));
        assert_eq!(shape(&def(ColumnType::DATE, BINARY_FLAG, BINARY, 10, 0)), (oid::DATE, 4, -1));
        assert_eq!(shape(&def(ColumnType::DATETIME, BINARY_FLAG, BINARY, 26, 6)), (oid::TIMESTAMP, 8, 6));
        assert_eq!(def(ColumnType::TIMESTAMP, BINARY_FLAG, BINARY, 19, 0).typmod, 0);
        assert_eq!(shape(&def(ColumnType::TIME, BINARY_FLAG, BINARY, 10, 0)), (oid::INTERVAL, 16, 0x7FFF_0000));
        assert_eq!(def(ColumnType::TIME, BINARY_FLAG, BINARY, 10, 39).typmod, -1);
    }

    #[test]
    fn strings_by_charset() {
        assert_eq!(def(ColumnType::VAR_STRING, 0, UTF8MB4, 400, 0).kind, PgKind::Text);
        assert_eq!(def(ColumnType::VAR_STRING, BINARY_FLAG, BINARY, 16, 0).kind, PgKind::Bytea);
        assert_eq!(def(ColumnType::BLOB, BINARY_FLAG, BINARY, 65_535, 0).kind, PgKind::Bytea);
        assert_eq!(def(ColumnType::BLOB, 0, UTF8MB4, 65_535, 0).kind, PgKind::Text);
        assert_eq!(def(ColumnType::STRING, 0, UTF8MB4, 4, 0).kind, PgKind::Text);
        assert_eq!(def(ColumnType::JSON, 0, UTF8MB4, 0, 0).kind, PgKind::Json);
        assert_eq!(def(ColumnType::BIT, 0, BINARY, 8, 0).kind, PgKind::Bytea);
        assert_eq!(def(ColumnType::NULL, 0, BINARY, 0, 0).kind, PgKind::Text);
        let c = def(ColumnType::LONG, 0, BINARY, 11, 0);
        let f = c.field(1);
        assert_eq!((f.name, f.type_oid, f.type_size, f.format), ("c", oid::INT4, 4, 1));
    }

    #[test]
    fn a_described_statement_has_parameter_types_and_columns_or_no_data() {
        let mut out = Vec::new();
        encode_parameter_description(&[0, oid::INT8], &mut out);
        let mut want = vec![b't', 0, 0, 0, 14, 0, 2];
        want.extend_from_slice(&oid::TEXT.to_be_bytes());
        want.extend_from_slice(&oid::INT8.to_be_bytes());
        assert_eq!(out, want, "an unspecified type is described as text");

        out.clear();
        encode_described(&[], &[1], &mut out);
        assert_eq!(out, [b'n', 0, 0, 0, 4]);
        out.clear();
        let columns = [def(ColumnType::LONG, 0, BINARY, 11, 0), def(ColumnType::LONGLONG, 0, BINARY, 20, 0)];
        encode_described(&columns, &[0, 1], &mut out);
        let mut want = Vec::new();
        encode_row_description(&[columns[0].field(0), columns[1].field(1)], &mut want).unwrap();
        assert_eq!(out, want, "each column in its own format");
    }

    #[test]
    fn a_column_moves_to_a_new_binary_as_its_type_byte() {
        let c = def(ColumnType::LONGLONG, UNSIGNED_FLAG, BINARY, 20, 0);
        let json = serde_json::to_string(&c).unwrap();
        let byte = ColumnType::LONGLONG.0;
        let (kind, typmod) = (c.kind, c.typmod);
        let want = format!(r#"{{"name":"c","kind":"{kind:?}","typmod":{typmod},"value_type":[{byte},true]}}"#);
        assert_eq!(json, want);
        assert_eq!(serde_json::from_str::<PgColumn>(&json).unwrap(), c);
    }
}
