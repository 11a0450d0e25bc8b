//! The response side of a PostgreSQL session: relays backend messages to the client in order,
//! swallowing responses to messages the router injected and inserting the ones it answers
//! itself; COPY in both directions; `query_timeout` (a cancel through the session's own cancel
//! slot; a backend that leaves the cancel unanswered for another `query_timeout` is given up);
//! a backend out of step (a message type with no place after startup) is lost; stale-plan
//! healing (see `flight`); what a held backend sends while the client is idle (NOTIFY, notices,
//! its own death); settings replay and connection cleanup. COPY FROM STDIN is pumped by `copy`.
//!
//! `raw_passthrough` (#10): every backend message normally goes through `next_frame` and
//! `on_backend_message` and is copied into the client buffer (the decoded path). On a pool with
//! `raw_passthrough = true`, the rows of an extended-protocol Execute skip that: see
//! `Session::passes_rows` for when, and `Session::pass_rows` for how.

use crate::protocol::pg::tag::backend as server;
use std::time::Instant;

use super::copy::CopyIn;
use super::exchange::{command_tag, Action, Note, ReadyStep, Unprompted};
use super::flight::Replay;
use super::large;
use super::xact::Unseen;
use super::{End, Session, CLIENT_FLUSH_AT, READ_CHUNK};
use crate::config::Protocol;
use crate::pool::health::pg_xact_probe_row;
use crate::pool::Conn;
use crate::protocol::pg::backend::is_after_startup;
use crate::protocol::pg::notice::peek_sqlstate;
use crate::protocol::pg::{
    data_row_run, decode_header, decode_raw_frame, frontend, sqlstate, RawFrame, TransactionStatus,
};
use crate::rt;
use crate::session::client_error::PgClientError;
use crate::session::engine::after::{Commits, Effects, StatementEnd, TxMove};
use crate::session::error::RelayError;
use crate::session::pg::prepared::Expect;
use crate::session::placement::Placed;

/// Largest backend message accepted (PostgreSQL's own limit on a field is 1 GiB).
pub(super) const BACKEND_MAX: usize = (1 << 30) + 1024;

/// Backend read size while rows are passed through and the reads come back full: a result
/// streaming in fills bigger reads, and each read's rows go to the client in one write. Only
/// then, because every read first zeroes the room it offers (`rt::read_some`): a small result
/// read 64 KiB at a time cost more than the decoded path in profiles.
const PASS_READ_CHUNK: usize = 64 * 1024;

/// A passed-through run of rows at least this long is written to the client straight from the
/// backend's read buffer. A shorter one (a small result, or a read that caught only a few of
/// the server's 8 KiB sends) costs less as one copy into the client buffer, which is written
/// out at `CLIENT_FLUSH_AT` as on the decoded path, than as a write of its own.
const PASS_DIRECT_AT: usize = 32 * 1024;

/// Where relaying stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Until {
    /// At ReadyForQuery.
    Ready,
    /// When every expected response arrived (after a Flush), or at an error.
    Drained,
    /// When the backend has nothing more to say right now, or at an error (a batch streaming
    /// to the backend before its Sync or Flush).
    Available,
}

/// What woke a session that waits for its client while holding a backend connection.
enum Woke {
    /// The client sent bytes (or closed: `Ok(0)`).
    Client(std::io::Result<usize>),
    /// The backend sent bytes, or closed or failed (the cause).
    Backend(Result<(), RelayError>),
    /// The router is draining and the session is between transactions.
    Drain,
}

/// Where a relay pass stands in the backend's read buffer and what it waits under.
pub(super) struct Pass {
    until: Until,
    /// Offset of the next frame in the backend's read buffer.
    pub(super) pos: usize,
    pub(super) deadline: Option<Instant>,
    /// Read size for the next backend read.
    chunk: usize,
    /// The server took an extended batch's Sync as part of a COPY it then rejected.
    copy_rejected: bool,
}

/// How a relay pass goes on after one frame.
enum Flow {
    /// Read the next frame.
    Next,
    /// Read the next frame of a batch sent again (healed or retried), the client buffer as is.
    Again,
    /// Stop relaying for now (the batch was aborted before its Sync).
    Stop,
    /// The relay is over (ReadyForQuery, or the connection was lost and the client told).
    Over,
}

/// Where a frame relayed without waiting left the pass.
enum Landed {
    /// As the flow says.
    Flow(Flow),
    /// At ReadyForQuery, with its status byte.
    Ready(Option<u8>),
    /// At CopyInResponse: the client's COPY data goes to the backend next.
    CopyIn,
}

/// Whether a whole backend frame starts at `pos` of `rbuf`.
fn has_frame(rbuf: &[u8], pos: usize) -> bool {
    frame_at(rbuf, pos).is_some()
}

/// The whole backend frame at `pos` of `rbuf`, if one is there.
pub(super) fn frame_at(rbuf: &[u8], pos: usize) -> Option<RawFrame<'_>> {
    decode_raw_frame(rbuf.get(pos..)?, BACKEND_MAX).ok().flatten()
}

/// The tag and length of the whole frame at `pos` of `rbuf`, when one is there and may come
/// after startup; anything else is left to [`next_frame_or_head`] and `read_frame`, which wait
/// for more bytes or report what is wrong.
fn buffered_frame(rbuf: &[u8], pos: usize) -> Option<(u8, usize)> {
    let rest = rbuf.get(pos..)?;
    match decode_header(rest, BACKEND_MAX) {
        Ok(Some((tag, len))) if rest.len() >= len && is_after_startup(tag) => Some((tag, len)),
        _ => None,
    }
}

/// The run of complete DataRows at `pos` of `rbuf` (see [`data_row_run`]).
fn row_run(rbuf: &[u8], pos: usize) -> Option<&[u8]> {
    let rest = rbuf.get(pos..)?;
    rest.get(..data_row_run(rest, BACKEND_MAX))
}

/// Reads until a whole backend frame starts at `*pos`, `chunk` bytes at a time; returns its
/// tag and length.
pub(super) async fn next_frame(conn: &mut Conn, pos: &mut usize, chunk: usize) -> Result<(u8, usize), RelayError> {
    next_frame_or_head(conn, pos, chunk, usize::MAX).await
}

/// [`next_frame`], except that a DataRow or CopyData of at least `piecewise` bytes is
/// returned as soon as its header is there: it is passed on in pieces (see `large`).
async fn next_frame_or_head(
    conn: &mut Conn,
    pos: &mut usize,
    chunk: usize,
    piecewise: usize,
) -> Result<(u8, usize), RelayError> {
    loop {
        let rest =
            conn.rbuf.get(*pos..).ok_or_else(|| RelayError::Malformed("read position past the buffer".into()))?;
        match decode_header(rest, BACKEND_MAX) {
            Ok(Some((tag, len))) if rest.len() >= len || (len >= piecewise && large::piecewise(tag)) => {
                return Ok((tag, len))
            }
            Ok(_) => {}
            Err(e) => return Err(RelayError::Malformed(e.to_string())),
        }
        if *pos > 0 {
            conn.rbuf.drain(..*pos);
            *pos = 0;
        }
        match rt::read_some(&mut conn.stream, &mut conn.rbuf, chunk).await {
            Ok(0) => return Err(RelayError::BackendClosed(None)),
            Err(e) => return Err(RelayError::BackendClosed(Some(e))),
            Ok(_) => {}
        }
    }
}

impl Session {
    /// Writes the responses the router answers itself that head the expectations.
    pub(super) fn emit_synth(&mut self) {
        self.ex.emit_synth(&mut self.io.out);
    }

    /// Relays backend responses until `until`.
    pub(super) async fn relay(&mut self, until: Until) -> Result<(), End> {
        let mut pass = Pass { until, pos: 0, deadline: self.query_deadline(), chunk: READ_CHUNK, copy_rejected: false };
        self.ex.begin_response();
        if until != Until::Ready {
            self.ex.relayed_before_ready(); // retry (#11)
        }
        loop {
            self.emit_synth();
            if until != Until::Ready && self.ex.expects().is_empty() {
                break;
            }
            let Some(conn) = self.seat.conn.as_mut() else { return Ok(()) };
            if until == Until::Available && !has_frame(&conn.rbuf, pass.pos) && !rt::readable_now(&conn.stream) {
                break;
            }
            // A frame already whole in the buffer (most of a response's arrive in one read) is
            // taken without a read's future and its deadline.
            let buffered = self.seat.conn.as_ref().and_then(|c| buffered_frame(&c.rbuf, pass.pos));
            let next = match buffered {
                Some(frame) => Some(frame),
                None => self.read_frame(&mut pass).await?,
            };
            let Some((tag, len)) = next else { continue };
            // The header was decoded and checked: whether the frame is whole is a length's
            // comparison, not a second decode.
            if self.seat.conn.as_ref().is_none_or(|c| c.rbuf.len().saturating_sub(pass.pos) < len) {
                self.pass_on_large(&mut pass, len).await?; // #33
                continue;
            }
            let landed = if tag == server::DATA_ROW && self.passes_rows() {
                Landed::Flow(self.on_rows(&mut pass).await?)
            } else {
                self.on_message(tag, len, &mut pass)
            };
            let flow = match landed {
                Landed::Flow(flow) => flow,
                Landed::Ready(status) => self.at_ready(status).await?,
                Landed::CopyIn => self.on_copy_in(&mut pass).await?,
            };
            match flow {
                Flow::Again => continue,
                Flow::Next => {}
                Flow::Stop => break,
                Flow::Over => return Ok(()),
            }
            if self.io.out.len() >= CLIENT_FLUSH_AT {
                self.io.flush().await?;
            }
        }
        if let Some(conn) = self.seat.conn.as_mut() {
            conn.rbuf.drain(..pass.pos);
        }
        self.io.flush().await
    }

    /// Reads the next backend frame under the statement's deadline: its tag and length, or
    /// `None` when the deadline passed (a cancel went out: read again). A lost connection is
    /// reported to the client, and ends the relay as [`End`] or as the connection's absence.
    async fn read_frame(&mut self, pass: &mut Pass) -> Result<Option<(u8, usize)>, End> {
        let piecewise = if self.passes_large() { large::PIECEWISE_AT } else { usize::MAX };
        let Some(conn) = self.seat.conn.as_mut() else { return Ok(None) };
        let next = match pass.deadline {
            Some(d) => rt::with_deadline(d, next_frame_or_head(conn, &mut pass.pos, pass.chunk, piecewise)).await,
            None => Ok(next_frame_or_head(conn, &mut pass.pos, pass.chunk, piecewise).await),
        };
        let Ok(next) = next else {
            self.overdue(pass).await?;
            return Ok(None);
        };
        match next {
            Ok((tag, _)) if !is_after_startup(tag) => {
                self.ex.give_up(RelayError::OutOfStep { tag });
                self.backend_lost(RelayError::OutOfStep { tag }).await?;
                Ok(None)
            }
            Ok(frame) => Ok(Some(frame)),
            Err(e) => {
                // The client hears only that the connection was lost, as it always has.
                tracing::debug!(error = %e, "backend connection lost mid-response");
                self.backend_lost(e).await?;
                Ok(None)
            }
        }
    }

    /// The statement's deadline passed while the relay waited for the backend: a cancel goes
    /// out, through the same path a client's CancelRequest takes, and the backend has one more
    /// `query_timeout` to answer; past that it is given up.
    pub(super) async fn overdue(&mut self, pass: &mut Pass) -> Result<(), End> {
        if self.ex.timed_out() {
            // The flight's copy is the one the client is told; the other is counted.
            let timeout_ms = self.query_ms();
            self.ex.give_up(RelayError::CancelIgnored { timeout_ms });
            return self.backend_lost(RelayError::CancelIgnored { timeout_ms }).await;
        }
        pass.deadline = self.query_deadline();
        self.ex.cancel_sent();
        let _ = self.seat.ctx.cancels.act(self.seat.cancel.key, false);
        Ok(())
    }

    /// Passes through the DataRows at the pass's position (`raw_passthrough`, #10), still read
    /// under the deadline above: query_timeout works as on the decoded path.
    async fn on_rows(&mut self, pass: &mut Pass) -> Result<Flow, End> {
        self.pass_rows(&mut pass.pos).await?;
        let full = self.seat.conn.as_ref().is_some_and(|c| c.rbuf.len() >= READ_CHUNK);
        pass.chunk = if full { PASS_READ_CHUNK } else { READ_CHUNK };
        Ok(Flow::Next)
    }

    /// CopyInResponse: the client's COPY data goes to the backend.
    async fn on_copy_in(&mut self, pass: &mut Pass) -> Result<Flow, End> {
        let extended = self.ex.expects().contains(&Expect::Sync);
        if let CopyIn::Rejected = self.pump_copy_in().await? {
            // The server took the batch's Sync as part of the COPY: the client's next Sync
            // ends the batch.
            pass.copy_rejected = extended;
        }
        pass.deadline = self.query_deadline();
        Ok(Flow::Next)
    }

    /// Relays the backend frame of `len` bytes at the pass's position on the decoded path and
    /// moves past it: the exchange's decision, the frame to the client buffer. It waits for
    /// nothing, so most frames cost no future of their own; ReadyForQuery and CopyInResponse
    /// are left to their awaiting handlers.
    fn on_message(&mut self, tag: u8, len: usize, pass: &mut Pass) -> Landed {
        pass.chunk = READ_CHUNK;
        self.retry_note(tag, len); // retry (#11)
        let forward = self.on_backend_message(pass.pos);
        // The frame at `pass.pos` is `len` bytes, as its header said: sliced, not decoded again.
        let Some(bytes) = self.seat.conn.as_ref().and_then(|c| c.rbuf.get(pass.pos..pass.pos + len)) else {
            return Landed::Flow(Flow::Over); // the connection went while the frame was looked at
        };
        if forward {
            self.io.out.extend_from_slice(bytes);
        }
        // ReadyForQuery's status is the byte after its type and length.
        let status = if tag == server::READY_FOR_QUERY { bytes.get(5).copied() } else { None };
        pass.pos += len;
        if matches!(tag, server::READY_FOR_QUERY | server::COPY_IN_RESPONSE) {
            if let Some(conn) = self.seat.conn.as_mut() {
                conn.rbuf.drain(..pass.pos);
            }
            pass.pos = 0;
        }
        match tag {
            server::READY_FOR_QUERY => Landed::Ready(status),
            server::COPY_IN_RESPONSE => Landed::CopyIn,
            server::ERROR_RESPONSE if pass.until != Until::Ready || pass.copy_rejected => {
                // Before Sync: the server now discards the client's messages up to Sync.
                self.ex.abort_before_sync();
                Landed::Flow(Flow::Stop)
            }
            _ => Landed::Flow(Flow::Next),
        }
    }

    /// ReadyForQuery ended a response: a healed batch or a retry goes out again (the relay
    /// goes on), or the response is over.
    async fn at_ready(&mut self, status: Option<u8>) -> Result<Flow, End> {
        if let ReadyStep::Heal(replay) = self.ex.at_ready() {
            self.resend_healed(replay).await?;
            self.ex.begin_response();
            return Ok(Flow::Again);
        }
        if self.retry_at_ready(status).await? {
            self.ex.begin_response(); // retry (#11): a new attempt
            return Ok(Flow::Again);
        }
        self.ex.response_done();
        self.on_ready(status).await;
        self.io.flush().await?;
        Ok(Flow::Over)
    }

    /// Whether the DataRow at hand, and the complete ones after it, may be passed through
    /// (`raw_passthrough`, #10) rather than relayed message by message. Only the rows of an
    /// Execute of the extended protocol qualify (named or unnamed statement; a simple Query,
    /// FunctionCall and COPY stay on the decoded path), and only when the relay has nothing to
    /// do with them there:
    /// - the Execute heads the expectations: no response before the rows is swallowed or
    ///   synthesized, and whatever is queued after the Execute comes after its CommandComplete;
    /// - no stale-plan healing is under way and no ParameterDescription is held for it (both
    ///   end before rows can flow);
    /// - no error is held back for a retry. Rows are results, so they end any chance of a
    ///   retry, here as on the decoded path (`retry_note`).
    ///
    /// Nothing else looks at rows: per-statement statistics count rows from CommandComplete,
    /// session state comes from the statement's text and from CommandComplete and
    /// ReadyForQuery, and query_timeout bounds the reads. So a statement "cannot be passed
    /// through" exactly when it returns no rows to an Execute (DDL, SET and other session
    /// commands, DML without RETURNING): all of its messages take the decoded path, as do the
    /// messages around every result (BindComplete, RowDescription, CommandComplete,
    /// ErrorResponse, notices, ReadyForQuery), one by one.
    fn passes_rows(&self) -> bool {
        self.seat.pool.config.raw_passthrough
            && self.ex.expects().front() == Some(&Expect::Execute)
            && self.ex.holds_nothing()
    }

    /// Passes through the run of complete DataRows starting at `*pos` and moves `*pos` past
    /// it: the run is found from the message headers alone ([`data_row_run`]) and goes to the
    /// client unchanged, a long run straight from the backend's read buffer after what the
    /// client buffer already holds.
    async fn pass_rows(&mut self, pos: &mut usize) -> Result<(), End> {
        let Some(run) = self.seat.conn.as_ref().and_then(|c| row_run(&c.rbuf, *pos)).map(<[u8]>::len) else {
            return Ok(());
        };
        self.retry_note(server::DATA_ROW, run);
        self.seat.pool.counters.passed_through(run as u64);
        if run < PASS_DIRECT_AT {
            if let Some(rows) = self.seat.conn.as_ref().and_then(|c| row_run(&c.rbuf, *pos)) {
                self.io.out.extend_from_slice(rows);
            }
            *pos += run;
            if self.io.out.len() >= CLIENT_FLUSH_AT {
                self.io.flush().await?;
            }
            return Ok(());
        }
        self.io.flush().await?;
        let Some(rows) = self.seat.conn.as_ref().and_then(|c| row_run(&c.rbuf, *pos)) else { return Ok(()) };
        self.io.wrote_through();
        let written = rt::write_all(&mut self.io.stream, rows).await;
        *pos += run;
        written.map_err(|_| End::ClientGone)
    }

    /// Lets the exchange decide on the backend frame at `pos` and does the bookkeeping it
    /// calls for; returns whether the client gets the frame.
    fn on_backend_message(&mut self, pos: usize) -> bool {
        let query_ms = self.query_ms();
        let Some(frame) = self.seat.conn.as_ref().and_then(|c| frame_at(&c.rbuf, pos)) else { return false };
        let tag = frame.tag();
        let step = self.ex.on_backend(&frame, query_ms);
        self.seat.digest.failed(tag == server::ERROR_RESPONSE);
        self.note(step.note, tag, pos);
        let forward = match step.action {
            Action::Forward => true,
            Action::ReleaseThenForward(held) => {
                self.io.out.extend_from_slice(&held);
                true
            }
            Action::Hold | Action::Swallow | Action::Fail => false,
            Action::Replace(e) => {
                self.seat.pool.counters.backend_error(); // metrics: the server's cancel, reworded
                e.encode(&mut self.io.out);
                false
            }
            // retry (#11): held back with its ReadyForQuery until the batch runs again.
            Action::MayRetry if self.retry_hold(pos) => false,
            Action::MayRetry => {
                self.ex.deliver_held(&mut self.io.out);
                true
            }
        };
        if forward && tag == server::ERROR_RESPONSE {
            self.seat.pool.counters.backend_error(); // metrics: an error the client gets
        }
        for e in step.skipped {
            self.not_run(e);
        }
        forward
    }

    /// Does the bookkeeping the exchange asked for about the frame (`tag`) at `pos`.
    fn note(&mut self, note: Note, tag: u8, pos: usize) {
        match note {
            Note::None => {}
            Note::RowType(stmt) => self.note_row_type(&stmt, tag, pos), // #18
            Note::CommandTag => self.on_command_complete(pos),
            Note::ParameterStatus => self.note_parameter_status(pos), // session settings (#18)
            Note::Notification => self.own_notification_pid(pos),     // #18
            Note::SchemaChanged => {
                // A schema change the router did not see (#18): statements prepared from now
                // on get new server names, on every connection.
                self.seat.pool.schema_changed();
                if self.ex.healing() {
                    tracing::debug!("stale prepared plan: re-preparing and retrying the batch once");
                }
            }
            Note::Misnamed { key, exists } => self.correct_prepared(key, exists),
            Note::XactProbe => {
                let frame = self.seat.conn.as_ref().and_then(|c| frame_at(&c.rbuf, pos));
                if frame.and_then(|f| pg_xact_probe_row(tag, f.body())) == Some(false) {
                    self.seat.ryw.wrote_nothing(); // causal reads (#34)
                }
            }
        }
    }

    /// The pool's `query_timeout` in milliseconds (0 without one), as the router words it.
    fn query_ms(&self) -> u128 {
        self.seat.pool.config.timeouts.query.map_or(0, |d| d.as_millis())
    }

    /// The deadline of the statement being relayed, under the pool's query_timeout.
    fn query_deadline(&self) -> Option<Instant> {
        self.seat.pool.config.timeouts.query.map(|t| rt::now() + t)
    }

    /// Re-prepares the healed statement on this connection and sends its batch again.
    async fn resend_healed(&mut self, replay: Replay) -> Result<(), End> {
        self.ex.start_over();
        // Under a fresh name (#18): other clients sharing the stale server statement keep it.
        let bytes = self.heal_fresh(&replay.stmt, &replay.bytes);
        self.ex.forward_all(&bytes, &replay.expects);
        if let Some(conn) = self.seat.conn.as_mut() {
            // The error made the server skip the batch's Parses: they run again now.
            for e in &replay.expects {
                if let Expect::Parse { key: Some(k), .. } = e {
                    if !conn.prepared.contains(k) {
                        conn.prepared.push(*k);
                    }
                }
            }
        }
        self.send_backend().await
    }

    /// Waits for the client while a backend connection is held, relaying what the backend
    /// sends unprompted meanwhile. `Ok(None)`: something was relayed, wait again.
    pub(super) async fn wait_client_or_backend(&mut self) -> Result<Option<std::io::Result<usize>>, End> {
        let Some(conn) = self.seat.conn.as_mut() else {
            return Ok(Some(rt::read_some(&mut self.io.stream, &mut self.io.buf, READ_CHUNK).await));
        };
        let (client, cbuf) = (&mut self.io.stream, &mut self.io.buf);
        let drain = (self.progress.tx == TransactionStatus::Idle).then(|| self.seat.ctx.drain.clone());
        let reads = rt::race(async { Woke::Client(rt::read_some(client, cbuf, READ_CHUNK).await) }, async {
            Woke::Backend(match rt::read_some(&mut conn.stream, &mut conn.rbuf, READ_CHUNK).await {
                Ok(0) => Err(RelayError::BackendClosed(None)),
                Ok(_) => Ok(()),
                Err(e) => Err(RelayError::BackendClosed(Some(e))),
            })
        });
        let drained = async {
            match drain {
                Some(d) => d.wait().await,
                None => std::future::pending::<()>().await,
            }
            Woke::Drain
        };
        let woke = rt::race(reads, drained).await;
        let res = match woke {
            Woke::Client(r) => return Ok(Some(r)),
            Woke::Drain => return Err(End::Drained),
            Woke::Backend(Ok(())) => self.relay_unprompted(),
            Woke::Backend(Err(cause)) => self.lost_while_idle(cause).map_or(Ok(()), Err),
        };
        if let Err(end) = res {
            // The FATAL error must reach the client before the session closes.
            let _ = self.io.flush().await;
            return Err(end);
        }
        Ok(None)
    }

    /// Relays complete unprompted messages (NotificationResponse, NoticeResponse,
    /// ParameterStatus); anything else means the backend is going away.
    fn relay_unprompted(&mut self) -> Result<(), End> {
        let mut pos = 0usize;
        let mut bad = None;
        loop {
            let Some(conn) = self.seat.conn.as_ref() else { return Ok(()) };
            let Some(tag) = frame_at(&conn.rbuf, pos).map(|f| f.tag()) else { break };
            if tag == server::NOTIFICATION_RESPONSE {
                self.own_notification_pid(pos); // #18
            }
            let Some(frame) = self.seat.conn.as_ref().and_then(|c| frame_at(&c.rbuf, pos)) else { break };
            match self.ex.on_unprompted(&frame) {
                Unprompted::Relay => self.io.out.extend_from_slice(frame.bytes()),
                Unprompted::Lost(cause) => bad = Some(cause),
            }
            pos += frame.len();
        }
        if let Some(conn) = self.seat.conn.as_mut() {
            conn.rbuf.drain(..pos);
        }
        if let Some(cause) = bad {
            return self.lost_while_idle(cause).map_or(Ok(()), Err);
        }
        Ok(())
    }

    /// Bookkeeping of the CommandComplete at `pos`: statistics, schema changes, and the
    /// client dropping every prepared statement of the connection, the router's included.
    fn on_command_complete(&mut self, pos: usize) {
        let Some(conn) = self.seat.conn.as_mut() else { return };
        let Some(frame) = frame_at(&conn.rbuf, pos) else { return };
        let tag = command_tag(frame.body());
        self.seat.digest.rows(std::str::from_utf8(tag).map_or(0, crate::bridge::tag::affected_rows));
        match tag {
            b"DISCARD ALL" | b"DEALLOCATE ALL" => conn.prepared.clear(),
            tag if super::prepared::changes_schema(tag) => self.seat.pool.schema_changed(),
            _ => {}
        }
    }

    /// The statement's answer ended ([`crate::session::engine::after::statement`]): the wire's
    /// own state follows the status, the staged settings commit or roll back, and a commit
    /// position is learned.
    async fn on_ready(&mut self, status: Option<u8>) {
        let status = self.end_unseen_wrap(status).await; // causal reads (#34)
        self.progress.unseen = Unseen::No;
        let new = self.ex.ready(status);
        let outcome = self.ex.outcome();
        self.seat.record_digest(Protocol::Postgres);
        let before = self.progress.tx != TransactionStatus::Idle;
        self.progress.tx = new;
        let after = self.seat.statement_ended(&StatementEnd {
            mode: self.seat.pool.config.mode,
            tx: TxMove { before, after: new != TransactionStatus::Idle, autocommit_off: false },
            error: outcome.error,
            commits: Commits::Tagged {
                last_end: outcome.last_tag_commit,
                any_commit: outcome.any_commit,
                ends_uncommitted: outcome.ends_uncommitted,
                more_due: !self.ex.expects().is_empty(),
            },
            insert_id: false,
            autocommit_drift: false,
        });
        match after.effects {
            Effects::Keep => {}
            Effects::Commit => self.state.commit(),
            Effects::Rollback => self.state.rollback(),
        }
        if new == TransactionStatus::Idle {
            self.progress.read_only_tx = false;
            self.progress.fresh = None;
            self.restore_startup_values().await; // session settings (#18)
        }
        if after.learn_position {
            self.learn_commit_position().await; // causal reads (#22)
        }
        if after.break_connection {
            // A transaction slipped past the BEGIN check (e.g. inside a function): its
            // connection closes, which rolls it back rather than leaking it to another client.
            self.progress.tx = TransactionStatus::Idle;
        }
        self.maybe_release().await;
    }
}

/// Runs `sql` on `conn` as a simple query and discards the responses; fails on any error.
pub(super) async fn run_silently(conn: &mut Conn, sql: &str) -> Result<(), PgClientError> {
    let lost =
        || PgClientError::new(sqlstate::CONNECTION_FAILURE, "backend connection lost while restoring session settings");
    let mut out = Vec::with_capacity(sql.len() + 8);
    frontend::encode_query(sql, &mut out)
        .map_err(|e| PgClientError::new(sqlstate::PROTOCOL_VIOLATION, e.to_string()))?;
    rt::write_all(&mut conn.stream, &out).await.map_err(|_| lost())?;
    let mut pos = 0usize;
    let mut failure = None;
    loop {
        let (tag, len) = next_frame(conn, &mut pos, READ_CHUNK).await.map_err(|_| lost())?;
        if tag == server::ERROR_RESPONSE {
            let body = frame_at(&conn.rbuf, pos).map(|f| f.body()).unwrap_or_default();
            let code = peek_sqlstate(body).unwrap_or("XX000").to_owned();
            failure = Some(format!("restoring session settings failed on the backend ({code})"));
        }
        pos += len;
        if tag == server::READY_FOR_QUERY {
            conn.rbuf.drain(..pos);
            return match failure {
                None => Ok(()),
                Some(m) => Err(PgClientError::new(sqlstate::CONNECTION_FAILURE, m)),
            };
        }
    }
}

/// Reads the answer to a statement the router sent on `conn` (`BEGIN`, `COMMIT`) up to its
/// ReadyForQuery: the status after it, and the ErrorResponse frame (whole) when it failed, or
/// `Some` of nothing when its command tag is not `done` (a failed block's COMMIT reports
/// ROLLBACK).
pub(super) async fn read_own_answer(conn: &mut Conn, done: &[u8]) -> Result<(Option<u8>, Option<Vec<u8>>), RelayError> {
    let mut pos = 0usize;
    let mut failed = None;
    loop {
        let (tag, len) = next_frame(conn, &mut pos, READ_CHUNK).await?;
        let frame = frame_at(&conn.rbuf, pos);
        match tag {
            server::ERROR_RESPONSE => failed = frame.map(|f| f.bytes().to_vec()),
            server::COMMAND_COMPLETE if frame.is_some_and(|f| command_tag(f.body()) != done) => {
                failed.get_or_insert_with(Vec::new);
            }
            _ => {}
        }
        pos += len;
        if tag == server::READY_FOR_QUERY {
            let status = frame_at(&conn.rbuf, pos - len).and_then(|f| f.body().first().copied());
            conn.rbuf.drain(..pos);
            return Ok((status, failed));
        }
    }
}

/// Cleans a connection for the next client.
pub(super) async fn discard_all(conn: &mut Conn) -> Result<(), PgClientError> {
    run_silently(conn, "DISCARD ALL").await
}
