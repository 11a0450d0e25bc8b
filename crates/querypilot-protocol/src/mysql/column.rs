//! Column metadata (Client/Server Protocol, "Column Definition" and "Column Types"): the type byte
//! and flag bits shared by result sets and prepared-statement parameters, and the
//! `ColumnDefinition41` packet that describes each result column.

use super::codec::{put_lenenc_bytes, put_lenenc_int, put_u16, put_u32, Reader};
use super::error::DecodeError;

/// A column or parameter type byte (`enum_field_types`). The consts are every value a server or
/// client may put on the wire; types internal to the server (`NEWDATE`, `TIMESTAMP2`…) are listed
/// because replication and old servers expose them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ColumnType(pub u8);

impl ColumnType {
    /// `DECIMAL` (old, pre-5.0 form; sent as a string).
    pub const DECIMAL: Self = Self(0);
    /// `TINYINT`: 1 byte.
    pub const TINY: Self = Self(1);
    /// `SMALLINT`: 2 bytes.
    pub const SHORT: Self = Self(2);
    /// `INT`: 4 bytes.
    pub const LONG: Self = Self(3);
    /// `FLOAT`: 4-byte IEEE 754.
    pub const FLOAT: Self = Self(4);
    /// `DOUBLE`: 8-byte IEEE 754.
    pub const DOUBLE: Self = Self(5);
    /// The NULL type (a parameter bound to NULL); no value bytes.
    pub const NULL: Self = Self(6);
    /// `TIMESTAMP`.
    pub const TIMESTAMP: Self = Self(7);
    /// `BIGINT`: 8 bytes.
    pub const LONGLONG: Self = Self(8);
    /// `MEDIUMINT`: sent in 4 bytes.
    pub const INT24: Self = Self(9);
    /// `DATE`.
    pub const DATE: Self = Self(10);
    /// `TIME`.
    pub const TIME: Self = Self(11);
    /// `DATETIME`.
    pub const DATETIME: Self = Self(12);
    /// `YEAR`: sent in 2 bytes.
    pub const YEAR: Self = Self(13);
    /// Server-internal date type.
    pub const NEWDATE: Self = Self(14);
    /// `VARCHAR`.
    pub const VARCHAR: Self = Self(15);
    /// `BIT`: sent as a byte string.
    pub const BIT: Self = Self(16);
    /// Server-internal fractional `TIMESTAMP` (binlog only).
    pub const TIMESTAMP2: Self = Self(17);
    /// Server-internal fractional `DATETIME` (binlog only).
    pub const DATETIME2: Self = Self(18);
    /// Server-internal fractional `TIME` (binlog only).
    pub const TIME2: Self = Self(19);
    /// MySQL 9 `VECTOR`: sent as a byte string.
    pub const VECTOR: Self = Self(242);
    /// `JSON` (MySQL; MariaDB reports JSON as a BLOB).
    pub const JSON: Self = Self(245);
    /// `DECIMAL`/`NUMERIC`: sent as a string.
    pub const NEWDECIMAL: Self = Self(246);
    /// `ENUM`.
    pub const ENUM: Self = Self(247);
    /// `SET`.
    pub const SET: Self = Self(248);
    /// `TINYBLOB`/`TINYTEXT`.
    pub const TINY_BLOB: Self = Self(249);
    /// `MEDIUMBLOB`/`MEDIUMTEXT`.
    pub const MEDIUM_BLOB: Self = Self(250);
    /// `LONGBLOB`/`LONGTEXT`.
    pub const LONG_BLOB: Self = Self(251);
    /// `BLOB`/`TEXT`.
    pub const BLOB: Self = Self(252);
    /// `VARCHAR`/`VARBINARY` as seen by clients.
    pub const VAR_STRING: Self = Self(253);
    /// `CHAR`/`BINARY`.
    pub const STRING: Self = Self(254);
    /// Spatial types.
    pub const GEOMETRY: Self = Self(255);
}

/// Column definition flag: `NOT NULL`.
pub const NOT_NULL_FLAG: u16 = 1;
/// Column definition flag: part of the primary key.
pub const PRI_KEY_FLAG: u16 = 2;
/// Column definition flag: part of a unique key.
pub const UNIQUE_KEY_FLAG: u16 = 4;
/// Column definition flag: part of a non-unique key.
pub const MULTIPLE_KEY_FLAG: u16 = 8;
/// Column definition flag: a BLOB or TEXT column.
pub const BLOB_FLAG: u16 = 16;
/// Column definition flag (and parameter type flag 0x80 in `COM_STMT_EXECUTE`): unsigned integer.
pub const UNSIGNED_FLAG: u16 = 32;
/// Column definition flag: `ZEROFILL`.
pub const ZEROFILL_FLAG: u16 = 64;
/// Column definition flag: binary collation.
pub const BINARY_FLAG: u16 = 128;
/// Column definition flag: an ENUM column.
pub const ENUM_FLAG: u16 = 256;
/// Column definition flag: `AUTO_INCREMENT`.
pub const AUTO_INCREMENT_FLAG: u16 = 512;
/// Column definition flag: a TIMESTAMP column.
pub const TIMESTAMP_FLAG: u16 = 1024;
/// Column definition flag: a SET column.
pub const SET_FLAG: u16 = 2048;
/// Column definition flag: no default value.
pub const NO_DEFAULT_VALUE_FLAG: u16 = 4096;
/// Column definition flag: `ON UPDATE CURRENT_TIMESTAMP`.
pub const ON_UPDATE_NOW_FLAG: u16 = 8192;
/// Column definition flag: part of some key.
pub const PART_KEY_FLAG: u16 = 16384;
/// Column definition flag: a numeric column.
pub const NUM_FLAG: u16 = 32768;

/// What the binary protocol needs to know to read or write one value: its type and signedness.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ValueType {
    /// The column or parameter type.
    pub column_type: ColumnType,
    /// Whether an integer type is unsigned.
    pub unsigned: bool,
}

impl ValueType {
    /// A value type from its parts.
    #[must_use]
    pub const fn new(column_type: ColumnType, unsigned: bool) -> Self {
        Self { column_type, unsigned }
    }
}

/// One result column's metadata (`Protocol::ColumnDefinition41`), borrowed from the payload.
///
/// MariaDB's extended type info (`MARIADB_CLIENT_EXTENDED_TYPE_INFO`) is not decoded: the router
/// does not offer that capability to either side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ColumnDefinition41<'a> {
    /// Always `def`.
    pub catalog: &'a [u8],
    /// Schema (database) name.
    pub schema: &'a [u8],
    /// Virtual table name (alias).
    pub table: &'a [u8],
    /// Physical table name.
    pub org_table: &'a [u8],
    /// Virtual column name (alias).
    pub name: &'a [u8],
    /// Physical column name.
    pub org_name: &'a [u8],
    /// Character set and collation id.
    pub charset: u16,
    /// Maximum display length.
    pub column_length: u32,
    /// The column type.
    pub column_type: ColumnType,
    /// `*_FLAG` bits.
    pub flags: u16,
    /// Shown decimals (0x00 integers/static strings, 0x1F dynamic strings/floats, 0–0x51 decimals).
    pub decimals: u8,
}

/// Length of the fixed-size block after the names: charset, length, type, flags, decimals, filler.
const FIXED_FIELDS_LEN: u8 = 0x0C;

impl<'a> ColumnDefinition41<'a> {
    /// The type the binary protocol uses for this column's values.
    #[must_use]
    pub fn value_type(&self) -> ValueType {
        ValueType::new(self.column_type, self.flags & UNSIGNED_FLAG != 0)
    }

    /// Decodes a column definition payload. The fixed block must be at least 10 bytes; its length
    /// prefix (0x0C on every known server) is honoured so longer blocks are skipped, not misread.
    pub fn decode(payload: &'a [u8]) -> Result<Self, DecodeError> {
        let mut r = Reader::new(payload);
        let catalog = r.lenenc_bytes("catalog")?;
        let schema = r.lenenc_bytes("schema")?;
        let table = r.lenenc_bytes("table")?;
        let org_table = r.lenenc_bytes("org_table")?;
        let name = r.lenenc_bytes("name")?;
        let org_name = r.lenenc_bytes("org_name")?;
        let fixed_len = r.lenenc_int("fixed fields length")?;
        if fixed_len < 10 {
            return Err(DecodeError::InvalidValue { field: "fixed fields length", value: fixed_len });
        }
        let fixed_len = usize::try_from(fixed_len).map_err(|_| DecodeError::Truncated { field: "fixed fields" })?;
        let mut f = Reader::new(r.bytes(fixed_len, "fixed fields")?);
        let def = Self {
            catalog,
            schema,
            table,
            org_table,
            name,
            org_name,
            charset: f.u16("charset")?,
            column_length: f.u32("column length")?,
            column_type: ColumnType(f.u8("column type")?),
            flags: f.u16("flags")?,
            decimals: f.u8("decimals")?,
        };
        // COM_FIELD_LIST appends a lenenc default value; it is not part of result-set metadata.
        Ok(def)
    }

    /// Appends the column definition payload.
    pub fn encode(&self, out: &mut Vec<u8>) {
        for s in [self.catalog, self.schema, self.table, self.org_table, self.name, self.org_name] {
            put_lenenc_bytes(out, s);
        }
        put_lenenc_int(out, u64::from(FIXED_FIELDS_LEN));
        put_u16(out, self.charset);
        put_u32(out, self.column_length);
        out.push(self.column_type.0);
        put_u16(out, self.flags);
        out.push(self.decimals);
        out.extend_from_slice(&[0, 0]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> ColumnDefinition41<'static> {
        ColumnDefinition41 {
            catalog: b"def",
            schema: b"shop",
            table: b"o",
            org_table: b"orders",
            name: b"id",
            org_name: b"id",
            charset: 63,
            column_length: 20,
            column_type: ColumnType::LONGLONG,
            flags: NOT_NULL_FLAG | PRI_KEY_FLAG | UNSIGNED_FLAG | AUTO_INCREMENT_FLAG,
            decimals: 0,
        }
    }

    #[test]
    fn golden_column_definition() {
        let mut out = Vec::new();
        sample().encode(&mut out);
        let mut want = b"\x03def\x04shop\x01o\x06orders\x02id\x02id\x0c".to_vec();
        want.extend_from_slice(&[0x3F, 0x00, 0x14, 0, 0, 0, 0x08, 0x23, 0x02, 0x00, 0, 0]);
        assert_eq!(out, want);
        let back = ColumnDefinition41::decode(&out).unwrap();
        assert_eq!(back, sample());
        assert_eq!(back.value_type(), ValueType::new(ColumnType::LONGLONG, true));
    }

    #[test]
    fn short_fixed_block_rejected() {
        let bytes = b"\x03def\x00\x00\x00\x01a\x00\x05\x3f\x00\x01\x00\x00";
        assert!(matches!(ColumnDefinition41::decode(bytes), Err(DecodeError::InvalidValue { .. })));
    }

    proptest::proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..80)) {
            let _ = ColumnDefinition41::decode(&bytes);
        }
    }
}
