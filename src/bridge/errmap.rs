//! PostgreSQL errors → MySQL ERR packets: the closest MySQL error number for a SQLSTATE, keeping
//! PostgreSQL's SQLSTATE unless MySQL clients key on a different one for that error.

use crate::protocol::mysql::errcode::ErrorNumber;
use crate::protocol::pg::FieldList;

const fn num(code: u16, sql_state: &[u8; 5]) -> ErrorNumber {
    ErrorNumber { code, sql_state: *sql_state }
}

/// The MySQL error for SQLSTATE `state` (`None`: the server sent none).
#[must_use]
pub fn error_number(state: Option<&str>) -> ErrorNumber {
    let Some(state) = state else { return num(1105, b"HY000") };
    match state {
        "23505" => num(1062, b"23000"),
        "23502" => num(1048, b"23000"),
        "23503" => num(1452, b"23000"),
        "42P01" => num(1146, b"42S02"),
        "42703" => num(1054, b"42S22"),
        "42P07" => num(1050, b"42S01"),
        "42601" => num(1064, b"42000"),
        "42501" => num(1142, b"42000"),
        "22012" => num(1365, b"22012"),
        "22001" => num(1406, b"22001"),
        "22003" => num(1264, b"22003"),
        "40001" | "40P01" => num(1213, b"40001"),
        "57014" => num(1317, b"70100"),
        "3D000" => num(1049, b"42000"),
        "28P01" | "28000" => num(1045, b"28000"),
        other => {
            let mut s = *b"HY000";
            if let Ok(bytes) = <[u8; 5]>::try_from(other.as_bytes()) {
                s = bytes;
            }
            num(1105, &s)
        }
    }
}

/// Appends a MySQL ERR packet (sequence `seq`) for a PostgreSQL ErrorResponse; returns the
/// next sequence id. The message is the server's, with its DETAIL appended.
pub fn encode_error(fields: &FieldList<'_>, seq: u8, out: &mut Vec<u8>) -> u8 {
    let number = error_number(fields.code());
    let mut message = fields.get(b'M').unwrap_or("error on the PostgreSQL backend").to_owned();
    if let Some(detail) = fields.get(b'D') {
        message.push_str(" (");
        message.push_str(detail);
        message.push(')');
    }
    number.encode(message.as_bytes(), seq, out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair(state: &str) -> (u16, [u8; 5]) {
        let n = error_number(Some(state));
        (n.code, n.sql_state)
    }

    #[test]
    fn sqlstate_table() {
        assert_eq!(pair("23505"), (1062, *b"23000"));
        assert_eq!(pair("42P01"), (1146, *b"42S02"));
        assert_eq!(pair("42601"), (1064, *b"42000"));
        assert_eq!(pair("23502"), (1048, *b"23000"));
        assert_eq!(pair("22012"), (1365, *b"22012"));
        assert_eq!(pair("40001"), (1213, *b"40001"));
        assert_eq!(pair("40P01"), (1213, *b"40001"));
        assert_eq!(pair("57014"), (1317, *b"70100"));
        assert_eq!(pair("XX000"), (1105, *b"XX000"));
        assert_eq!(pair("bad"), (1105, *b"HY000"));
        assert_eq!(error_number(None).code, 1105);
    }
}
