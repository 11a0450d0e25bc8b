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

use crate::protocol::pg::tag::{backend as server, tx_status};
use std::time::Instant;

use super::copy::CopyIn;
use super::flight::{classify_error, ErrorKind};
use super::{End, Session, CLIENT_FLUSH_AT, READ_CHUNK};
use crate::config::PoolMode;
use crate::pool::Conn;
use crate::protocol::pg::backend::is_after_startup;
use crate::protocol::pg::notice::peek_sqlstate;
use crate::protocol::pg::{data_row_run, decode_frame, frontend, sqlstate, TransactionStatus};
use crate::rt;
use crate::session::client_error::PgClientError;
use crate::session::pg::prepared::Expect;

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
    /// The backend sent bytes (`true`) or closed (`false`).
    Backend(bool),
    /// The router is draining and the session is between transactions.
    Drain,
}

/// What one relay pass learned about the transaction.
#[derive(Default)]
struct Outcome {
    error: bool,
    last_tag_commit: Option<bool>,
}

/// Whether a whole backend frame starts at `pos` of `rbuf`.
fn has_frame(rbuf: &[u8], pos: usize) -> bool {
    matches!(decode_frame(rbuf.get(pos..).unwrap_or_default(), BACKEND_MAX), Ok(Some(_)))
}

/// Reads the next whole backend frame, `chunk` bytes at a time; returns (tag, length) of the
/// frame at `*pos`.
async fn next_frame(conn: &mut Conn, pos: &mut usize, chunk: usize) -> Result<(u8, usize), ()> {
    loop {
        match decode_frame(conn.rbuf.get(*pos..).unwrap_or_default(), BACKEND_MAX) {
            Ok(Some(f)) => return Ok((f.tag, f.total_len)),
            Ok(None) => {}
            Err(_) => return Err(()),
        }
        if *pos > 0 {
            conn.rbuf.drain(..*pos);
            *pos = 0;
        }
        match rt::read_some(&mut conn.stream, &mut conn.rbuf, chunk).await {
            Ok(0) | Err(_) => return Err(()),
            Ok(_) => {}
        }
    }
}

impl Session {
    pub(super) fn emit_synth(&mut self) {
        while let Some(Expect::Synth(tag)) = self.expect.front().copied() {
            self.expect.pop_front();
            self.out.extend_from_slice(&[tag, 0, 0, 0, 4]);
        }
    }

    /// Relays backend responses until `until`.
    pub(super) async fn relay(&mut self, until: Until) -> Result<(), End> {
        let mut outcome = Outcome::default();
        let mut pos = 0usize;
        let mut deadline = self.query_deadline();
        let mut chunk = READ_CHUNK;
        let mut copy_rejected = false;
        self.flight.flushed |= until != Until::Ready; // retry (#11)
        loop {
            self.emit_synth();
            if until != Until::Ready && self.expect.is_empty() {
                break;
            }
            let Some(conn) = self.backend.as_mut() else { return Ok(()) };
            if until == Until::Available && !has_frame(&conn.rbuf, pos) && !rt::readable_now(&conn.stream) {
                break;
            }
            let next = match deadline {
                Some(d) => rt::with_deadline(d, next_frame(conn, &mut pos, chunk)).await,
                None => Ok(next_frame(conn, &mut pos, chunk).await),
            };
            let Ok(next) = next else {
                if self.flight.timed_out {
                    // The backend ignored the cancel for another query_timeout: it is not
                    // answering at all, and the connection is given up.
                    let ms = self.pool.config.timeouts.query.map_or(0, |d| d.as_millis());
                    self.flight.fatal = Some(format!("no answer to the cancel sent at query_timeout ({ms} ms)"));
                    return self.backend_lost().await;
                }
                // query_timeout: cancel through the same path a client's CancelRequest takes,
                // then wait one more query_timeout for the backend's answer.
                deadline = self.query_deadline();
                self.flight.timed_out = true;
                let _ = self.ctx.cancels.act(self.key, false);
                continue;
            };
            let Ok((tag, len)) = next else {
                return self.backend_lost().await;
            };
            if !is_after_startup(tag) {
                self.flight.fatal =
                    Some(format!("protocol violation: the backend sent message type {:?}", tag as char));
                return self.backend_lost().await;
            }
            if tag == server::DATA_ROW && self.passes_rows() {
                // Still read under the deadline above: query_timeout works as on the decoded path.
                self.pass_rows(&mut pos).await?;
                let full = self.backend.as_ref().is_some_and(|c| c.rbuf.len() >= READ_CHUNK);
                chunk = if full { PASS_READ_CHUNK } else { READ_CHUNK };
                continue;
            }
            chunk = READ_CHUNK;
            let forward = self.on_backend_message(tag, pos, len, &mut outcome);
            let Some(conn) = self.backend.as_mut() else { return Ok(()) };
            let frame = conn.rbuf.get(pos..pos + len).unwrap_or_default();
            if forward {
                self.out.extend_from_slice(frame);
            }
            let status = (tag == server::READY_FOR_QUERY).then(|| frame.get(5).copied()).flatten();
            pos += len;
            match tag {
                server::READY_FOR_QUERY => {
                    conn.rbuf.drain(..pos);
                    pos = 0;
                    if self.flight.healing.is_some() {
                        self.resend_healed().await?;
                        outcome = Outcome::default();
                        continue;
                    }
                    if self.retry_at_ready(status).await? {
                        outcome = Outcome::default(); // retry (#11): a new attempt
                        continue;
                    }
                    self.flight.settle();
                    self.on_ready(status, &outcome).await;
                    return self.flush_client().await;
                }
                server::COPY_IN_RESPONSE => {
                    conn.rbuf.drain(..pos);
                    pos = 0;
                    let extended = self.expect.contains(&Expect::Sync);
                    if let CopyIn::Rejected = self.pump_copy_in().await? {
                        // The server took the batch's Sync as part of the COPY: the client's
                        // next Sync ends the batch.
                        copy_rejected = extended;
                    }
                    deadline = self.query_deadline();
                }
                server::ERROR_RESPONSE if until != Until::Ready || copy_rejected => {
                    // Before Sync: the server now discards the client's messages up to Sync.
                    self.expect.retain(|e| *e != Expect::Sync);
                    self.aborted = true;
                    break;
                }
                _ => {}
            }
            if self.out.len() >= CLIENT_FLUSH_AT {
                self.flush_client().await?;
            }
        }
        if let Some(conn) = self.backend.as_mut() {
            conn.rbuf.drain(..pos);
        }
        self.flush_client().await
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
        self.pool.config.raw_passthrough
            && self.expect.front() == Some(&Expect::Execute)
            && self.flight.healing.is_none()
            && self.flight.held.is_empty()
            && !self.retry_pending()
    }

    /// Passes through the run of complete DataRows starting at `*pos` and moves `*pos` past
    /// it: the run is found from the message headers alone ([`data_row_run`]) and goes to the
    /// client unchanged, a long run straight from the backend's read buffer after what the
    /// client buffer already holds.
    async fn pass_rows(&mut self, pos: &mut usize) -> Result<(), End> {
        let Some(conn) = self.backend.as_ref() else { return Ok(()) };
        let run = data_row_run(conn.rbuf.get(*pos..).unwrap_or_default(), BACKEND_MAX);
        self.retry_note(server::DATA_ROW, run);
        self.pool.counters.passed_through(run as u64);
        if run < PASS_DIRECT_AT {
            let rows = self.backend.as_ref().and_then(|c| c.rbuf.get(*pos..*pos + run)).unwrap_or_default();
            self.out.extend_from_slice(rows);
            *pos += run;
            if self.out.len() >= CLIENT_FLUSH_AT {
                self.flush_client().await?;
            }
            return Ok(());
        }
        self.flush_client().await?;
        let Some(conn) = self.backend.as_ref() else { return Ok(()) };
        let written = rt::write_all(&mut self.client, conn.rbuf.get(*pos..*pos + run).unwrap_or_default()).await;
        *pos += run;
        written.map_err(|_| End::ClientGone)
    }

    /// Updates bookkeeping for one backend message; returns whether the client gets it.
    fn on_backend_message(&mut self, tag: u8, pos: usize, len: usize, outcome: &mut Outcome) -> bool {
        self.retry_note(tag, len); // retry (#11)
        let front = self.expect.front().copied();
        match tag {
            server::PARSE_COMPLETE => match front {
                Some(Expect::Parse { swallow, key }) => {
                    self.expect.pop_front();
                    if !swallow && key.is_some() {
                        self.flight.named.pop_front(); // the client's named statement exists (#18)
                    }
                    !swallow
                }
                _ => true,
            },
            server::CLOSE_COMPLETE => match front {
                Some(Expect::Close { swallow, .. }) => {
                    self.expect.pop_front();
                    !swallow
                }
                _ => true,
            },
            server::BIND_COMPLETE => {
                if front == Some(Expect::Bind) {
                    self.expect.pop_front();
                }
                // The batch's first Bind succeeded: no stale plan to heal in this batch.
                self.flight.replay = None;
                true
            }
            server::ROW_DESCRIPTION | server::NO_DATA => {
                if front == Some(Expect::DescribeStatement) {
                    self.note_row_type(tag, pos, len); // #18
                }
                if matches!(front, Some(Expect::DescribeStatement | Expect::DescribePortal)) {
                    self.expect.pop_front();
                }
                // The Describe got past revalidation: release what was held, no healing.
                self.out.append(&mut self.flight.held);
                self.flight.replay = None;
                true
            }
            server::PARAMETER_DESCRIPTION
                if self.flight.replay.is_some() && front == Some(Expect::DescribeStatement) =>
            {
                let frame = self.backend.as_ref().and_then(|c| c.rbuf.get(pos..pos + len)).unwrap_or_default();
                self.flight.held.extend_from_slice(frame);
                false
            }
            server::COMMAND_COMPLETE | server::EMPTY_QUERY_RESPONSE | server::PORTAL_SUSPENDED => {
                if front == Some(Expect::Execute) {
                    self.expect.pop_front();
                }
                if tag == server::COMMAND_COMPLETE {
                    self.on_command_complete(pos, len, outcome);
                }
                true
            }
            server::ERROR_RESPONSE => {
                self.digest.error();
                let forward = self.on_error_response(pos, len, front, outcome);
                self.on_backend_error(front);
                forward
            }
            server::READY_FOR_QUERY => self.flight.healing.is_none() && !self.retry_pending(),
            server::PARAMETER_STATUS => {
                self.note_parameter_status(pos, len); // session settings (#18)
                true
            }
            server::NOTIFICATION_RESPONSE => {
                self.own_notification_pid(pos, len); // #18
                true
            }
            _ => true,
        }
    }

    /// Decides what the client sees of an ErrorResponse: most are relayed; a FATAL becomes the
    /// connection-loss error; a stale plan is healed; a cancel sent by query_timeout says so.
    fn on_error_response(&mut self, pos: usize, len: usize, front: Option<Expect>, outcome: &mut Outcome) -> bool {
        if std::mem::take(&mut self.flight.aborting) {
            // The router's stand-in for a statement it refused: the client has its error.
            outcome.error = true;
            return false;
        }
        let body = self.backend.as_ref().and_then(|c| c.rbuf.get(pos + 5..pos + len)).unwrap_or_default();
        let kind = classify_error(body);
        if matches!(kind, ErrorKind::StalePlan) {
            // A schema change the router did not see (#18): statements prepared from now on
            // get new server names, on every connection.
            self.pool.schema_changed();
        }
        match kind {
            ErrorKind::StalePlan
                if matches!(front, Some(Expect::Bind | Expect::DescribeStatement)) && self.flight.replay.is_some() =>
            {
                self.flight.held.clear();
                self.flight.healing = self.flight.replay.take();
                tracing::debug!("stale prepared plan: re-preparing and retrying the batch once");
                return false;
            }
            ErrorKind::Fatal(m) => {
                self.flight.fatal = Some(m);
                outcome.error = true;
                return false;
            }
            ErrorKind::Canceled if self.flight.timed_out => {
                let ms = self.pool.config.timeouts.query.map_or(0, |d| d.as_millis());
                PgClientError::new(
                    sqlstate::QUERY_CANCELED,
                    format!("canceling statement due to query_timeout ({ms} ms)"),
                )
                .encode(&mut self.out);
                outcome.error = true;
                return false;
            }
            ErrorKind::Misnamed { key, exists } => self.correct_prepared(key, exists),
            _ if self.retry_hold(pos, len) => {
                // retry (#11): held back with its ReadyForQuery until the batch runs again.
                outcome.error = true;
                return false;
            }
            _ => {}
        }
        self.out.append(&mut self.flight.held);
        outcome.error = true;
        true
    }

    /// The deadline of the statement being relayed, under the pool's query_timeout.
    fn query_deadline(&self) -> Option<Instant> {
        self.pool.config.timeouts.query.map(|t| rt::now() + t)
    }

    /// Re-prepares the healed statement on this connection and sends its batch again.
    async fn resend_healed(&mut self) -> Result<(), End> {
        let Some(replay) = self.flight.healing.take() else { return Ok(()) };
        self.bout.clear();
        self.expect.clear();
        // Under a fresh name (#18): other clients sharing the stale server statement keep it.
        let bytes = self.heal_fresh(&replay.stmt, &replay.bytes);
        self.bout.extend_from_slice(&bytes);
        if let Some(conn) = self.backend.as_mut() {
            // The error made the server skip the batch's Parses: they run again now.
            for e in &replay.expects {
                if let Expect::Parse { key: Some(k), .. } = e {
                    if !conn.prepared.contains(k) {
                        conn.prepared.push(*k);
                    }
                }
            }
        }
        self.expect.extend(replay.expects.iter().copied());
        self.send_backend().await
    }

    /// Waits for the client while a backend connection is held, relaying what the backend
    /// sends unprompted meanwhile. `Ok(None)`: something was relayed, wait again.
    pub(super) async fn wait_client_or_backend(&mut self) -> Result<Option<std::io::Result<usize>>, End> {
        let Some(conn) = self.backend.as_mut() else {
            return Ok(Some(rt::read_some(&mut self.client, &mut self.cbuf, READ_CHUNK).await));
        };
        let (client, cbuf) = (&mut self.client, &mut self.cbuf);
        let drain = (self.tx == TransactionStatus::Idle).then(|| self.ctx.drain.clone());
        let reads = rt::race(async { Woke::Client(rt::read_some(client, cbuf, READ_CHUNK).await) }, async {
            Woke::Backend(matches!(rt::read_some(&mut conn.stream, &mut conn.rbuf, READ_CHUNK).await, Ok(n) if n > 0))
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
            Woke::Backend(true) => self.relay_unprompted(),
            Woke::Backend(false) => Err(self.lost_while_idle()),
        };
        if let Err(end) = res {
            // The FATAL error must reach the client before the session closes.
            let _ = self.flush_client().await;
            return Err(end);
        }
        Ok(None)
    }

    /// Relays complete unprompted messages (NotificationResponse, NoticeResponse,
    /// ParameterStatus); anything else means the backend is going away.
    fn relay_unprompted(&mut self) -> Result<(), End> {
        let mut pos = 0usize;
        let mut bad = false;
        loop {
            let Some(conn) = self.backend.as_ref() else { return Ok(()) };
            let Ok(Some(f)) = decode_frame(conn.rbuf.get(pos..).unwrap_or_default(), BACKEND_MAX) else { break };
            let (tag, len) = (f.tag, f.total_len);
            if tag == server::NOTIFICATION_RESPONSE {
                self.own_notification_pid(pos, len); // #18
            }
            let Some(conn) = self.backend.as_ref() else { return Ok(()) };
            match tag {
                server::NOTIFICATION_RESPONSE | server::NOTICE_RESPONSE | server::PARAMETER_STATUS => {
                    self.out.extend_from_slice(conn.rbuf.get(pos..pos + len).unwrap_or_default())
                }
                server::ERROR_RESPONSE => {
                    if let ErrorKind::Fatal(m) = classify_error(conn.rbuf.get(pos + 5..pos + len).unwrap_or_default()) {
                        self.flight.fatal = Some(m);
                    }
                    bad = true;
                }
                _ => bad = true,
            }
            pos += len;
        }
        if let Some(conn) = self.backend.as_mut() {
            conn.rbuf.drain(..pos);
        }
        if bad {
            return Err(self.lost_while_idle());
        }
        Ok(())
    }

    /// The held backend went away while the client was idle: the session's server-side state
    /// (transaction, temp objects, LISTEN) is gone, so the client is told and closed, as
    /// PostgreSQL itself would.
    fn lost_while_idle(&mut self) -> End {
        if let Some(mut c) = self.backend.take() {
            c.broken = true;
            self.pool.checkin(c, false);
        }
        self.slot.set_running(None);
        self.aborted = false;
        let why = self.flight.fatal.take().map(|m| format!(" ({m})")).unwrap_or_default();
        self.flight.settle();
        PgClientError::new(sqlstate::CONNECTION_FAILURE, format!("the backend connection was lost{why}"))
            .encode_fatal(&mut self.out);
        End::Fatal
    }

    fn on_command_complete(&mut self, pos: usize, len: usize, outcome: &mut Outcome) {
        let Some(conn) = self.backend.as_mut() else { return };
        let tag = conn.rbuf.get(pos + 5..pos + len).unwrap_or_default();
        let tag = tag.strip_suffix(b"\0").unwrap_or(tag);
        self.digest.command_complete(tag);
        match tag {
            b"COMMIT" => outcome.last_tag_commit = Some(true),
            b"ROLLBACK" => outcome.last_tag_commit = Some(false),
            // The client dropped every prepared statement of the connection, ours included.
            b"DISCARD ALL" | b"DEALLOCATE ALL" => conn.prepared.clear(),
            tag if super::prepared::changes_schema(tag) => self.pool.schema_changed(),
            _ => {}
        }
    }

    /// After an error the server skips everything up to Sync: so do the expectations.
    fn on_backend_error(&mut self, front: Option<Expect>) {
        if let (Some(Expect::Parse { key: Some(k), .. }), Some(conn)) = (front, self.backend.as_mut()) {
            conn.prepared.retain(|p| *p != k);
        }
        while let Some(e) = self.expect.front() {
            if *e == Expect::Sync {
                break;
            }
            let e = *e;
            self.not_run(e);
            self.expect.pop_front();
        }
    }

    async fn on_ready(&mut self, status: Option<u8>, outcome: &Outcome) {
        self.awaiting_ready = false;
        self.finish_digest();
        if self.expect.front() == Some(&Expect::Sync) {
            self.expect.pop_front();
        }
        self.expect.retain(|e| !matches!(e, Expect::Synth(_)));
        let new = match status {
            Some(tx_status::IN_BLOCK) => TransactionStatus::InBlock,
            Some(tx_status::FAILED) => TransactionStatus::Failed,
            _ => TransactionStatus::Idle,
        };
        let was = self.tx;
        self.tx = new;
        self.ryw.statement_done(rt::now(), new != TransactionStatus::Idle); // #19: window from commit
        self.slot.set_running(None);
        if new == TransactionStatus::Idle {
            self.read_only_tx = false;
            let committed =
                if was == TransactionStatus::Idle { !outcome.error } else { outcome.last_tag_commit == Some(true) };
            if committed {
                self.state.commit();
            } else {
                self.state.rollback();
            }
            self.restore_startup_values().await; // session settings (#18)
            if self.ryw.position_due() && self.expect.is_empty() && self.ctx.has_replica_reads() {
                self.learn_commit_position().await; // causal reads (#22)
            }
        }
        if self.mode() == PoolMode::Statement && new != TransactionStatus::Idle {
            // A transaction slipped past the BEGIN check (e.g. inside a function): closing the
            // connection rolls it back rather than leaking it to another client.
            if let Some(c) = self.backend.as_mut() {
                c.broken = true;
            }
            self.tx = TransactionStatus::Idle;
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
        let body = conn.rbuf.get(pos + 5..pos + len).unwrap_or_default();
        if tag == server::ERROR_RESPONSE {
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

/// Cleans a connection for the next client.
pub(super) async fn discard_all(conn: &mut Conn) -> Result<(), PgClientError> {
    run_silently(conn, "DISCARD ALL").await
}
