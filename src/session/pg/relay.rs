//! The response side of a PostgreSQL session: relays backend messages to the client in order,
//! swallowing responses to messages the router injected and inserting the ones it answers
//! itself; COPY in both directions; settings replay and connection cleanup.

use super::{End, Session, CLIENT_FLUSH_AT, READ_CHUNK};
use crate::config::PoolMode;
use crate::pool::Conn;
use crate::protocol::pg::notice::peek_sqlstate;
use crate::protocol::pg::{decode_frame, frontend, sqlstate, TransactionStatus};
use crate::rt;
use crate::session::client_error::PgClientError;
use crate::session::pg::prepared::Expect;

/// Largest backend message accepted (PostgreSQL's own limit on a field is 1 GiB).
const BACKEND_MAX: usize = (1 << 30) + 1024;

/// Where relaying stops.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Until {
    /// At ReadyForQuery.
    Ready,
    /// When every expected response arrived (after a Flush), or at an error.
    Drained,
}

/// What one relay pass learned about the transaction.
#[derive(Default)]
struct Outcome {
    error: bool,
    last_tag_commit: Option<bool>,
}

/// Reads the next whole backend frame; returns (tag, length) of the frame at `*pos`.
async fn next_frame(conn: &mut Conn, pos: &mut usize) -> Result<(u8, usize), ()> {
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
        match rt::read_some(&mut conn.stream, &mut conn.rbuf, READ_CHUNK).await {
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
        loop {
            self.emit_synth();
            if until == Until::Drained && self.expect.is_empty() {
                break;
            }
            let Some(conn) = self.backend.as_mut() else { return Ok(()) };
            let Ok((tag, len)) = next_frame(conn, &mut pos).await else {
                return self.backend_lost().await;
            };
            let forward = self.on_backend_message(tag, pos, len, &mut outcome);
            let Some(conn) = self.backend.as_mut() else { return Ok(()) };
            let frame = conn.rbuf.get(pos..pos + len).unwrap_or_default();
            if forward {
                self.out.extend_from_slice(frame);
            }
            let status = (tag == b'Z').then(|| frame.get(5).copied()).flatten();
            pos += len;
            match tag {
                b'Z' => {
                    conn.rbuf.drain(..pos);
                    self.on_ready(status, &outcome).await;
                    return self.flush_client().await;
                }
                b'G' => {
                    conn.rbuf.drain(..pos);
                    pos = 0;
                    self.pump_copy_in().await?;
                }
                b'E' if until == Until::Drained => break,
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

    /// Updates bookkeeping for one backend message; returns whether the client gets it.
    fn on_backend_message(&mut self, tag: u8, pos: usize, len: usize, outcome: &mut Outcome) -> bool {
        let front = self.expect.front().copied();
        match tag {
            b'1' => match front {
                Some(Expect::Parse { swallow, .. }) => {
                    self.expect.pop_front();
                    !swallow
                }
                _ => true,
            },
            b'3' => match front {
                Some(Expect::Close { swallow }) => {
                    self.expect.pop_front();
                    !swallow
                }
                _ => true,
            },
            b'2' => {
                if front == Some(Expect::Bind) {
                    self.expect.pop_front();
                }
                true
            }
            b'T' | b'n' => {
                if matches!(front, Some(Expect::DescribeStatement | Expect::DescribePortal)) {
                    self.expect.pop_front();
                }
                true
            }
            b'C' | b'I' | b's' => {
                if front == Some(Expect::Execute) {
                    self.expect.pop_front();
                }
                if tag == b'C' {
                    self.on_command_complete(pos, len, outcome);
                }
                true
            }
            b'E' => {
                outcome.error = true;
                self.on_backend_error(front);
                true
            }
            _ => true,
        }
    }

    fn on_command_complete(&mut self, pos: usize, len: usize, outcome: &mut Outcome) {
        let Some(conn) = self.backend.as_mut() else { return };
        let tag = conn.rbuf.get(pos + 5..pos + len).unwrap_or_default();
        let tag = tag.strip_suffix(b"\0").unwrap_or(tag);
        match tag {
            b"COMMIT" => outcome.last_tag_commit = Some(true),
            b"ROLLBACK" => outcome.last_tag_commit = Some(false),
            // The client dropped every prepared statement of the connection, ours included.
            b"DISCARD ALL" | b"DEALLOCATE ALL" => conn.prepared.clear(),
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
            if let Expect::Parse { key: Some(k), .. } = *e {
                if let Some(conn) = self.backend.as_mut() {
                    conn.prepared.retain(|p| *p != k);
                }
            }
            self.expect.pop_front();
        }
    }

    async fn on_ready(&mut self, status: Option<u8>, outcome: &Outcome) {
        if self.expect.front() == Some(&Expect::Sync) {
            self.expect.pop_front();
        }
        self.expect.retain(|e| !matches!(e, Expect::Synth(_)));
        let new = match status {
            Some(b'T') => TransactionStatus::InBlock,
            Some(b'E') => TransactionStatus::Failed,
            _ => TransactionStatus::Idle,
        };
        let was = self.tx;
        self.tx = new;
        self.slot.set_running(None);
        if new == TransactionStatus::Idle {
            let committed = if was == TransactionStatus::Idle { !outcome.error } else { outcome.last_tag_commit == Some(true) };
            if committed {
                self.state.commit();
            } else {
                self.state.rollback();
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

    /// Forwards the client's COPY data until CopyDone or CopyFail.
    async fn pump_copy_in(&mut self) -> Result<(), End> {
        self.flush_client().await?;
        loop {
            let tag = match self.next_client_frame().await {
                Ok(Some(t)) => t,
                Ok(None) | Err(_) => {
                    // The client vanished mid-COPY: abort it on the backend so the connection
                    // is not left waiting for data.
                    self.bout.clear();
                    let _ = crate::protocol::pg::FrontendMessage::CopyFail("client disconnected").encode(&mut self.bout);
                    let _ = self.send_backend().await;
                    if let Some(c) = self.backend.as_mut() {
                        c.broken = true;
                    }
                    return Err(End::ClientGone);
                }
            };
            match tag {
                b'd' | b'c' | b'f' => {
                    self.bout.extend_from_slice(&self.msg);
                    if tag != b'd' || self.bout.len() >= CLIENT_FLUSH_AT {
                        self.send_backend().await?;
                    }
                    if tag != b'd' {
                        return Ok(());
                    }
                }
                // The server ignores Flush and Sync during COPY IN.
                b'H' | b'S' => {}
                _ => {
                    self.bout.clear();
                    let _ = crate::protocol::pg::FrontendMessage::CopyFail("unexpected message during COPY").encode(&mut self.bout);
                    return self.send_backend().await;
                }
            }
        }
    }
}

/// Runs `sql` on `conn` as a simple query and discards the responses; fails on any error.
pub(super) async fn run_silently(conn: &mut Conn, sql: &str) -> Result<(), PgClientError> {
    let lost = || PgClientError::new(sqlstate::CONNECTION_FAILURE, "backend connection lost while restoring session settings");
    let mut out = Vec::with_capacity(sql.len() + 8);
    frontend::encode_query(sql, &mut out).map_err(|e| PgClientError::new(sqlstate::PROTOCOL_VIOLATION, e.to_string()))?;
    rt::write_all(&mut conn.stream, &out).await.map_err(|_| lost())?;
    let mut pos = 0usize;
    let mut failure = None;
    loop {
        let (tag, len) = next_frame(conn, &mut pos).await.map_err(|_| lost())?;
        let body = conn.rbuf.get(pos + 5..pos + len).unwrap_or_default();
        if tag == b'E' {
            let code = peek_sqlstate(body).unwrap_or("XX000").to_owned();
            failure = Some(format!("restoring session settings failed on the backend ({code})"));
        }
        pos += len;
        if tag == b'Z' {
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
