//! What both bridged directions share (#24, #37): a PostgreSQL session on a MySQL pool and a
//! MySQL session on a PostgreSQL pool (whole sessions, or one statement routed across) read the
//! other protocol's answers off a borrowed connection, park the session's own pool and
//! connection while a statement runs across, and refuse such a statement for the same reasons.

use std::rc::Rc;

use crate::pool::{Conn, CorePool};
use crate::protocol::mysql::decode_payload;
use crate::protocol::pg::decode_frame;
use crate::rt::{self, Stream};
use crate::session::driver::CLIENT_FLUSH_AT;
use crate::session::error::RelayError;
use crate::session::placement::Seat;

/// Largest backend frame accepted: PostgreSQL's own limit for a field, MySQL's
/// `max_allowed_packet` ceiling.
pub(super) const MAX_BACKEND_FRAME: usize = 1 << 30;

/// A backend answer the bridge cannot read.
pub(super) fn malformed(e: impl std::fmt::Display) -> RelayError {
    RelayError::Malformed(e.to_string())
}

/// Reads more of the backend's bytes into its buffer; a closed connection is lost.
pub(super) async fn read_more(conn: &mut Conn) -> Result<(), RelayError> {
    match rt::read_some(&mut conn.stream, &mut conn.rbuf, super::driver::READ_CHUNK).await {
        Ok(0) => Err(RelayError::BackendClosed(None)),
        Ok(_) => Ok(()),
        Err(e) => Err(RelayError::BackendClosed(Some(e))),
    }
}

/// Writes `bytes` to the backend.
pub(super) async fn send(conn: &mut Conn, bytes: &[u8]) -> Result<(), RelayError> {
    rt::write_all(&mut conn.stream, bytes).await.map_err(|e| RelayError::BackendClosed(Some(e)))
}

/// Reads one whole PostgreSQL message of at most `max` bytes, returned as (tag, body) copies:
/// for the small control paths.
pub(super) async fn pg_frame(conn: &mut Conn, max: usize) -> Result<(u8, Vec<u8>), RelayError> {
    loop {
        if let Some(f) = decode_frame(&conn.rbuf, max).map_err(malformed)? {
            let (tag, body, n) = (f.tag, f.body.to_vec(), f.total_len);
            conn.rbuf.drain(..n);
            return Ok((tag, body));
        }
        read_more(conn).await?;
    }
}

/// Reads one logical MySQL payload of at most `max` bytes and its last sequence id.
pub(super) async fn my_payload(conn: &mut Conn, max: usize) -> Result<(Vec<u8>, u8), RelayError> {
    loop {
        if let Some(f) = decode_payload(&conn.rbuf, max).map_err(malformed)? {
            let (payload, seq, n) = (f.payload.into_owned(), f.last_seq, f.consumed);
            conn.rbuf.drain(..n);
            return Ok((payload, seq));
        }
        read_more(conn).await?;
    }
}

/// The write half of a bridged result: what the client gets for the other protocol's backend
/// units, which it cuts from the connection's bytes itself (the read half).
pub(super) trait Translate {
    /// What the result ended with.
    type End;

    /// Feeds the whole backend units at the front of `bytes` into `out`, stopping at the
    /// result's end, or after a unit the backend waits for an answer to (put in `reply`).
    /// Returns the bytes taken, and the end once reached.
    fn feed(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<u8>,
        reply: &mut Vec<u8>,
    ) -> Result<(usize, Option<Self::End>), RelayError>;

    /// Whether the client was sent the backend's error.
    fn errored(&self) -> bool;
}

/// Where a bridged result's client bytes go: `out`, written to `client` whenever it reaches
/// [`CLIENT_FLUSH_AT`] when given one (then `out` is what the client gets next, in order).
pub(super) struct Sink<'a> {
    pub out: &'a mut Vec<u8>,
    pub client: Option<&'a mut Stream>,
    /// Whether some of `out` was written to the client.
    pub flushed: bool,
}

/// Streams the result of what was sent on `seat`'s connection through `t` into `sink`, the one
/// loop of both bridged directions; the statement is no longer cancellable once it ended.
pub(super) async fn stream<T: Translate>(
    seat: &mut Seat,
    t: &mut T,
    sink: &mut Sink<'_>,
) -> Result<T::End, RelayError> {
    let mut reply = Vec::new();
    loop {
        let conn = seat.conn.as_mut().ok_or(RelayError::BackendClosed(None))?;
        let (taken, end) = t.feed(&conn.rbuf, sink.out, &mut reply)?;
        conn.rbuf.drain(..taken);
        if let Some(end) = end {
            seat.cancel.slot.set_running(None);
            if t.errored() {
                seat.pool.counters.backend_error(); // metrics: the client got the error
            }
            return Ok(end);
        }
        if !reply.is_empty() {
            send(conn, &reply).await?;
            reply.clear();
            continue;
        }
        if let Some(client) = sink.client.as_deref_mut().filter(|_| sink.out.len() >= CLIENT_FLUSH_AT) {
            // A client that went away is noticed at its next read; the backend's response is
            // still drained so the connection stays usable.
            let _ = rt::write_all(client, sink.out).await;
            sink.out.clear();
            sink.flushed = true;
        }
        read_more(conn).await?;
    }
}

/// What a session sets aside while one statement runs on another protocol's pool: its own
/// pool and connection, and the wire's own part `S` (its transaction state, ...).
pub(super) struct Parked<S> {
    pool: Rc<CorePool>,
    backend: Option<Conn>,
    pub state: S,
}

impl<S> Parked<S> {
    /// Sets `seat`'s pool and connection aside and points it at `pool`, with no connection.
    pub fn park(seat: &mut Seat, pool: Rc<CorePool>, state: S) -> Self {
        Self { pool: std::mem::replace(&mut seat.pool, pool), backend: seat.conn.take(), state }
    }

    /// Puts the parked pool and connection back on `seat` (whatever it borrowed is given
    /// back first); returns the wire's part.
    pub fn restore(self, seat: &mut Seat) -> S {
        seat.pool = self.pool;
        *seat.conn = self.backend;
        self.state
    }
}

/// Why a statement routed to pool `pool`, whose backends speak `protocol`, cannot run there:
/// `why`, worded with the client's capital (`title`: MySQL's messages start with one).
pub(super) fn refusal(title: bool, protocol: &str, pool: &str, why: &str) -> String {
    let verb = if title { "Cannot" } else { "cannot" };
    format!("{verb} run the statement on {protocol} pool \"{pool}\" chosen by routing: {why}")
}

/// [`refusal`]'s reason while the session's own pool `own` has a transaction open.
pub(super) fn open_transaction(own: &str) -> String {
    format!("a transaction is open on pool \"{own}\" and a transaction never spans two pools; COMMIT or ROLLBACK first")
}

/// [`refusal`]'s reason for a statement that controls a transaction itself.
pub(super) const CONTROLS_TRANSACTION: &str =
    "it controls a transaction, which a statement routed to another pool cannot do";

#[cfg(test)]
mod tests {
    use super::refusal;

    #[test]
    fn refusals_name_the_pool_and_the_reason() {
        assert_eq!(
            refusal(true, "PostgreSQL", "pg", "why"),
            "Cannot run the statement on PostgreSQL pool \"pg\" chosen by routing: why"
        );
        assert!(refusal(false, "MySQL", "my", "x").starts_with("cannot run the statement on MySQL pool \"my\""));
    }
}
