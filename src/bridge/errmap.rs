//! Errors across the bridge: PostgreSQL errors → MySQL ERR packets (the closest MySQL error
//! number for a SQLSTATE, keeping PostgreSQL's SQLSTATE unless MySQL clients key on a different
//! one for that error), and MySQL errors → the SQLSTATE a PostgreSQL client expects. One table
//! serves both directions.

use crate::protocol::mysql::errcode::ErrorNumber;
use crate::protocol::pg::FieldList;

const fn num(code: u16, sql_state: &[u8; 5]) -> ErrorNumber {
    ErrorNumber { code, sql_state: *sql_state }
}

/// SQLSTATE ↔ MySQL error pairs used in both directions: (PostgreSQL SQLSTATE, MySQL number,
/// MySQL SQLSTATE). The first row for a MySQL number is its reverse mapping.
const PAIRS: &[(&str, u16, &[u8; 5])] = &[
    ("23505", 1062, b"23000"),
    ("23502", 1048, b"23000"),
    ("23503", 1452, b"23000"),
    ("42P01", 1146, b"42S02"),
    ("42703", 1054, b"42S22"),
    ("42P07", 1050, b"42S01"),
    ("42601", 1064, b"42000"),
    ("42501", 1142, b"42000"),
    ("22012", 1365, b"22012"),
    ("22001", 1406, b"22001"),
    ("22003", 1264, b"22003"),
    ("40P01", 1213, b"40001"),
    ("40001", 1213, b"40001"),
    ("57014", 1317, b"70100"),
    ("3D000", 1049, b"42000"),
    ("28P01", 1045, b"28000"),
    ("28000", 1045, b"28000"),
];

/// PostgreSQL errors with a MySQL counterpart that does not map back, beyond [`PAIRS`].
const FORWARD_ONLY: &[(&str, u16, &[u8; 5])] = &[
    // Text PostgreSQL cannot hold (a NUL in a bound parameter): MariaDB's "Incorrect string
    // value", as the bridge answers a NUL in a literal (#33).
    ("22021", 1366, b"22007"),
];

/// MySQL errors PostgreSQL clients key on by SQLSTATE, beyond [`PAIRS`]: (MySQL number,
/// PostgreSQL SQLSTATE).
const REVERSE_ONLY: &[(u16, &str)] = &[
    (1451, "23503"), // row is referenced (delete/update parent)
    (1216, "23503"),
    (1217, "23503"),
    (1586, "23505"), // duplicate entry in a unique key (with key name)
    (1169, "23505"),
    (1051, "42P01"), // unknown table (DROP)
    (1109, "42P01"),
    (1060, "42701"), // duplicate column name
    (1061, "42P07"), // duplicate key name
    (1091, "42704"), // can't drop: does not exist
    (1305, "42883"), // function does not exist
    (1193, "42704"), // unknown system variable
    (1044, "42501"),
    (1143, "42501"),
    (1205, "55P03"), // lock wait timeout
    (1292, "22007"), // incorrect date/time value
    (1366, "22P02"), // incorrect integer/decimal value
    (1265, "22001"), // data truncated
    (1690, "22003"), // value out of range
    (3024, "57014"), // max_execution_time exceeded
    (1969, "57014"), // MariaDB max_statement_time exceeded
    (1792, "25006"), // read-only transaction
    (1290, "25006"), // --read-only
];

/// The MySQL error for SQLSTATE `state` (`None`: the server sent none).
#[must_use]
pub fn error_number(state: Option<&str>) -> ErrorNumber {
    let Some(state) = state else { return num(1105, b"HY000") };
    if let Some((_, code, my)) = PAIRS.iter().chain(FORWARD_ONLY).find(|(pg, _, _)| *pg == state) {
        return num(*code, my);
    }
    let mut s = *b"HY000";
    if let Ok(bytes) = <[u8; 5]>::try_from(state.as_bytes()) {
        s = bytes;
    }
    num(1105, &s)
}

/// The SQLSTATE a PostgreSQL client gets for MySQL error `code`: the PostgreSQL state of the
/// same condition when known, else MySQL's own SQLSTATE (`HY000` when it sent none).
#[must_use]
pub fn sqlstate(code: u16, mysql_state: Option<[u8; 5]>) -> [u8; 5] {
    let known = PAIRS.iter().find(|(_, c, _)| *c == code).map(|(pg, _, _)| *pg);
    let known = known.or_else(|| REVERSE_ONLY.iter().find(|(c, _)| *c == code).map(|(_, pg)| *pg));
    match known.and_then(|pg| <[u8; 5]>::try_from(pg.as_bytes()).ok()) {
        Some(state) => state,
        None => mysql_state.unwrap_or(*b"HY000"),
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
        assert_eq!(pair("22021"), (1366, *b"22007"));
        assert_eq!(pair("XX000"), (1105, *b"XX000"));
        assert_eq!(pair("bad"), (1105, *b"HY000"));
        assert_eq!(error_number(None).code, 1105);
    }

    #[test]
    fn mysql_errors_to_sqlstate() {
        assert_eq!(&sqlstate(1062, Some(*b"23000")), b"23505");
        assert_eq!(&sqlstate(1213, Some(*b"40001")), b"40P01");
        assert_eq!(&sqlstate(1146, Some(*b"42S02")), b"42P01");
        assert_eq!(&sqlstate(1064, Some(*b"42000")), b"42601");
        assert_eq!(&sqlstate(1451, Some(*b"23000")), b"23503");
        assert_eq!(&sqlstate(1366, Some(*b"22007")), b"22P02");
        // Unknown numbers keep MySQL's SQLSTATE.
        assert_eq!(&sqlstate(1235, Some(*b"42000")), b"42000");
        assert_eq!(&sqlstate(9999, None), b"HY000");
        // Every pair round-trips from its MySQL side to a PostgreSQL state mapping back to it.
        for (_, code, _) in PAIRS {
            let state = sqlstate(*code, None);
            assert_eq!(error_number(std::str::from_utf8(&state).ok()).code, *code);
        }
    }
}
