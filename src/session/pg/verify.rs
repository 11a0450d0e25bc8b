//! Row-type checks for statements that move to another backend connection after a schema
//! change (#18).
//!
//! On a direct connection a prepared statement whose result type changed fails with `0A000
//! cached plan must not change result type`, and the client prepares it again. Through the
//! router, a statement executed on a connection that never had it is prepared there afresh,
//! after the change: without a check, the client would decode the new rows with the row
//! description it learned before. So the router remembers the row type a client was given when
//! it described its statement, and before preparing that statement on another connection after
//! a schema change it describes it there first, in an exchange of its own: a different row
//! type fails the batch with the server's `0A000`, as the statement's own connection would.

use crate::protocol::pg::tag::backend as server;
use std::hash::{BuildHasher, Hash, Hasher};
use std::time::Duration;

use super::prepared::Stmt;
use super::relay::{frame_at, next_frame};
use super::{Session, READ_CHUNK};
use crate::pool::Conn;
use crate::protocol::pg::{frontend, sqlstate, BackendMessage, Frame, Target, TransactionStatus};
use crate::rt;
use crate::session::client_error::PgClientError;
use crate::session::error::RelayError;

/// The server's message for a prepared statement whose result type changed.
const RESULT_TYPE_CHANGED: &str = "cached plan must not change result type";

/// The row type in a RowDescription (`'T'`) or NoData (`'n'`) message: column names, types and
/// type modifiers, what PostgreSQL compares when it revalidates a plan (not the source table,
/// which a re-created table changes without changing the row type).
pub(super) fn row_type(tag: u8, body: &[u8]) -> Option<u64> {
    let mut h = ahash::RandomState::with_seeds(0x18, 0x5eed, 0x7a61, 0x0b1e).build_hasher();
    match BackendMessage::decode(&Frame::new(tag, body)).ok()? {
        BackendMessage::NoData => 0u8.hash(&mut h),
        BackendMessage::RowDescription(rd) => {
            1u8.hash(&mut h);
            for f in rd.iter() {
                (f.name, f.type_oid, f.type_modifier).hash(&mut h);
            }
        }
        _ => return None,
    }
    Some(h.finish())
}

/// What a backend answered to an exchange the router ran on its own.
pub(super) struct Answer {
    /// The ErrorResponse, if one came.
    pub error: Option<Vec<u8>>,
    /// The transaction status of its ReadyForQuery.
    pub status: TransactionStatus,
    /// The row type of its RowDescription/NoData, if one came.
    pub row_type: Option<u64>,
}

/// Sends `bytes` (ending in Sync) and reads the answers through ReadyForQuery, within `limit`
/// (the pool's `query_timeout`: a Parse can wait for a lock). `Err`: the connection is lost,
/// out of step or too slow; the caller gives it up.
pub(super) async fn exchange(conn: &mut Conn, bytes: &[u8], limit: Option<Duration>) -> Result<Answer, RelayError> {
    let timeout_ms = limit.map_or(0, |d| d.as_millis());
    rt::within(limit, exchange_now(conn, bytes)).await.map_err(|_| RelayError::TimedOut { timeout_ms })?
}

async fn exchange_now(conn: &mut Conn, bytes: &[u8]) -> Result<Answer, RelayError> {
    rt::write_all(&mut conn.stream, bytes).await.map_err(|e| RelayError::BackendClosed(Some(e)))?;
    let mut answer = Answer { error: None, status: TransactionStatus::Idle, row_type: None };
    loop {
        let mut pos = 0;
        let (tag, len) = next_frame(conn, &mut pos, READ_CHUNK).await?;
        let frame = frame_at(&conn.rbuf, pos).ok_or_else(|| RelayError::Malformed("a frame vanished".into()))?;
        let status = match tag {
            server::ERROR_RESPONSE => {
                answer.error = Some(frame.bytes().to_vec());
                None
            }
            server::ROW_DESCRIPTION | server::NO_DATA => {
                answer.row_type = row_type(tag, frame.body());
                None
            }
            server::READY_FOR_QUERY => match BackendMessage::decode(&Frame::new(tag, frame.body())) {
                Ok(BackendMessage::ReadyForQuery(s)) => Some(s),
                _ => return Err(RelayError::Malformed("a ReadyForQuery without a valid status".into())),
            },
            // ParseComplete, CloseComplete, ParameterDescription, notices.
            _ => None,
        };
        conn.rbuf.drain(..pos + len);
        if let Some(status) = status {
            answer.status = status;
            return Ok(answer);
        }
    }
}

impl Session {
    /// A Describe of a statement was answered: the row type its client now knows.
    pub(super) fn note_row_type(&self, stmt: &Stmt, tag: u8, pos: usize) {
        let Some(frame) = self.seat.conn.as_ref().and_then(|c| frame_at(&c.rbuf, pos)) else { return };
        stmt.row_type.set(row_type(tag, frame.body()));
    }

    /// Before `stmt` is prepared on the attached connection, which does not have it: when the
    /// schema changed since the client prepared it and the client was told its row type, the
    /// statement is prepared and described here first. `Err`: the row type changed (the batch
    /// fails with 0A000) or the connection was lost (the batch fails with that).
    pub(super) async fn check_moved(&mut self, stmt: &Stmt) -> Result<(), PgClientError> {
        let Some(told) = stmt.row_type.get() else { return Ok(()) };
        // Only at a batch boundary may the router run an exchange of its own (its Sync would
        // end the implicit transaction of a batch under way).
        let boundary = self.ex.expects().is_empty() && self.ex.queued().is_empty() && !self.ex.awaiting();
        if stmt.generation == self.seat.pool.schema_generation()
            || !boundary
            || self.progress.tx == TransactionStatus::Failed
        {
            return Ok(());
        }
        let lost = || PgClientError::new(sqlstate::CONNECTION_FAILURE, "the backend connection was lost");
        let limit = self.seat.pool.config.timeouts.query;
        let Some(conn) = self.seat.conn.as_mut() else { return Ok(()) };
        let mut out = stmt.parse_msg.clone();
        let _ = frontend::encode_describe(Target::Statement, &stmt.server_name, &mut out);
        frontend::encode_sync(&mut out);
        let Ok(answer) = exchange(conn, &out, limit).await else {
            conn.broken = true;
            return Err(lost());
        };
        if answer.error.is_some() {
            // Left to the batch: its own Parse gets the server's error in place.
            return Ok(());
        }
        if answer.row_type == Some(told) {
            conn.prepared.push(stmt.key);
            return Ok(());
        }
        let mut close = Vec::new();
        let _ = frontend::encode_close(Target::Statement, &stmt.server_name, &mut close);
        frontend::encode_sync(&mut close);
        if exchange(conn, &close, limit).await.is_err() {
            conn.broken = true;
            return Err(lost());
        }
        Err(PgClientError::new(sqlstate::FEATURE_NOT_SUPPORTED, RESULT_TYPE_CHANGED))
    }
}

#[cfg(test)]
mod tests;
