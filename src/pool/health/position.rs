//! causal (#22): reading commit positions on a connection the caller holds — the commit
//! position of a session's write on the primary, right after its commit, and a replica's
//! replay position when the cached one is too old for a session's read. PostgreSQL positions
//! are WAL offsets, MariaDB ones GTIDs.

use std::time::Duration;

use super::query::{my_query, pg_query, pg_read_rows, ProbeError, Rows};
use crate::error::{ErrorCode, Origin};
use crate::id::GtidPosition;
use crate::pool::Conn;

/// Where the primary will insert its next WAL record: at or past the end of every transaction
/// committed before, so a standby that replayed up to it has replayed them all (a byte offset,
/// as `pg_lsn - '0/0'`).
pub const PG_COMMIT_POSITION: &str = "SELECT (pg_current_wal_insert_lsn() - '0/0'::pg_lsn)::text";

/// The end of the last WAL record a standby replayed (NULL on a primary).
const REPLAY_POSITION: &str = "SELECT (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::text";

/// MariaDB's `ER_WARNING_NOT_COMPLETE_ROLLBACK`: the statement that failed had changed a
/// non-transactional table, whose changes stay (and reach the binary log).
const NOT_COMPLETE_ROLLBACK: &str = "1196";

/// MariaDB's default `max_error_count`: a diagnostics list this long may have dropped its last
/// conditions, the one above among them.
const DEFAULT_MAX_ERROR_COUNT: usize = 64;

/// Why a position could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PositionError {
    /// The query failed (connection, server error, undecodable answer).
    #[error("reading the WAL position failed: {0}")]
    Query(#[from] ProbeError),
    /// The server answered without a position (NULL: not a standby, or not a primary).
    #[error("the server reported no WAL position")]
    Missing,
}

impl ErrorCode for PositionError {
    fn code(&self) -> &'static str {
        match self {
            Self::Query(e) => e.code(),
            Self::Missing => "health.no_position",
        }
    }
    fn origin(&self) -> Origin {
        Origin::Backend
    }
}

impl PositionError {
    /// Whether the connection is out of step with the server and must be closed.
    pub fn breaks_connection(&self) -> bool {
        matches!(self, Self::Query(ProbeError::Io(_) | ProbeError::Protocol(_)))
    }
}

async fn position(conn: &mut Conn, sql: &str) -> Result<u64, PositionError> {
    let rows = pg_query(conn, sql).await?;
    let value = rows.rows.first().and_then(|r| r.first()).and_then(|v| v.as_deref());
    parse(value).ok_or(PositionError::Missing)
}

/// `numeric::text` of a byte offset ("123" or "123.0") as a number.
fn parse(value: Option<&str>) -> Option<u64> {
    value.and_then(|s| s.split('.').next()).and_then(|s| s.parse().ok())
}

/// The primary's commit position, read on the connection that just committed (before it serves
/// anyone else, so nothing of another client's is mistaken for this session's).
pub async fn pg_commit_position(conn: &mut Conn) -> Result<u64, PositionError> {
    position(conn, PG_COMMIT_POSITION).await
}

/// Reads the answer to [`PG_COMMIT_POSITION`], which the caller sent on `conn` right behind a
/// statement (in the same write), so the position rides with it: no round trip of its own.
pub async fn pg_read_commit_position(conn: &mut Conn) -> Result<u64, PositionError> {
    parse(single(&pg_read_rows(conn).await?)).ok_or(PositionError::Missing)
}

/// A standby's replay position, read on a connection to it.
pub async fn pg_replay_position(conn: &mut Conn) -> Result<u64, PositionError> {
    position(conn, REPLAY_POSITION).await
}

/// Whether the open transaction has a transaction id: PostgreSQL assigns one at its first
/// change of data (a trigger's, a rule's or a function's included; 13 and later), so NULL
/// means that committing it writes nothing a standby must replay.
pub const PG_XACT_PROBE: &str = "SELECT pg_current_xact_id_if_assigned() IS NOT NULL";

/// Reads the answer to [`PG_XACT_PROBE`], which the caller sent on `conn` ahead of a COMMIT:
/// whether the transaction wrote.
pub async fn pg_read_xact_probe(conn: &mut Conn) -> Result<bool, PositionError> {
    match single(&pg_read_rows(conn).await?) {
        Some("t") => Ok(true),
        Some("f") => Ok(false),
        _ => Err(PositionError::Missing),
    }
}

/// The answer [`PG_XACT_PROBE`] gives in a DataRow frame `(tag, body)` (text format): whether
/// the transaction wrote; `None` for anything else.
pub fn pg_xact_probe_row(tag: u8, body: &[u8]) -> Option<bool> {
    use crate::protocol::pg::{BackendMessage, Frame};
    let BackendMessage::DataRow(values) = BackendMessage::decode(&Frame::new(tag, body)).ok()? else { return None };
    let mut values = values.iter();
    match (values.next()??, values.next()) {
        (b"t", None) => Some(true),
        (b"f", None) => Some(false),
        _ => None,
    }
}

/// The first value of a one-row answer.
fn single(rows: &Rows) -> Option<&str> {
    rows.rows.first().and_then(|r| r.first()).and_then(|v| v.as_deref())
}

/// MariaDB, after one statement that failed on this connection (#34): whether the server
/// rolled back everything it changed. Asked with `SHOW WARNINGS`, a diagnostics statement that
/// leaves `FOUND_ROWS()`, `ROW_COUNT()` (-1 after an error and after it) and the diagnostics
/// list as they were, so the client reads them as on a direct connection (a `SELECT` would
/// set `FOUND_ROWS()` to 1). Rolled back: the list holds the error and no
/// [`NOT_COMPLETE_ROLLBACK`], and is shorter than the default limit, so nothing was dropped.
/// The caller keeps this to single statements that cannot commit before failing.
pub async fn my_failure_rolled_back(conn: &mut Conn) -> Result<bool, PositionError> {
    let rows = my_query(conn, "SHOW WARNINGS").await?;
    let column = |name: &str| rows.columns.iter().position(|c| c.eq_ignore_ascii_case(name));
    let (Some(level), Some(code)) = (column("Level"), column("Code")) else {
        return Err(PositionError::Missing);
    };
    let is = |row: &Vec<Option<String>>, i: usize, want: &str| row.get(i).is_some_and(|v| v.as_deref() == Some(want));
    let failed = rows.rows.iter().any(|r| is(r, level, "Error"));
    let kept = rows.rows.iter().any(|r| is(r, code, NOT_COMPLETE_ROLLBACK));
    Ok(failed && !kept && rows.rows.len() < DEFAULT_MAX_ERROR_COUNT)
}

/// MariaDB: waits on a replica connection until it has applied `position` or `wait` is over
/// (`MASTER_GTID_WAIT`, which the replica's SQL thread wakes as it applies, so a read waits no
/// longer than the replica needs and costs one round trip). Returns whether it has.
pub async fn my_wait_for_gtid(conn: &mut Conn, position: &GtidPosition, wait: Duration) -> Result<bool, PositionError> {
    let sql = format!("SELECT MASTER_GTID_WAIT('{position}', {:.6})", wait.as_secs_f64());
    // 0: reached; -1: timed out; NULL: the server could not wait (not a replica, say).
    match single(&my_query(conn, &sql).await?) {
        Some("0") => Ok(true),
        Some(_) => Ok(false),
        None => Err(PositionError::Missing),
    }
}

#[cfg(test)]
mod tests {
    use super::parse;

    #[test]
    fn byte_offsets_parse_from_numeric_text() {
        assert_eq!(parse(Some("67108864")), Some(67_108_864));
        assert_eq!(parse(Some("5000.0")), Some(5000));
        assert_eq!(parse(None), None);
        assert_eq!(parse(Some("x")), None);
    }
}
