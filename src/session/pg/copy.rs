//! COPY FROM STDIN: the client's copy data goes to the backend until CopyDone or CopyFail,
//! while the backend is watched: a server that rejects the COPY (bad data, or `FREEZE` refused
//! right after CopyInResponse) answers at once with ErrorResponse (and, for a simple query,
//! ReadyForQuery) and from then on ignores the client's copy data. The relay then delivers
//! that answer while the client is still sending, and the session drops the rest of the
//! client's copy data as the server would (#18): the session and its backend stay usable.

use super::prepared::Expect;
use super::{End, Session, CLIENT_FLUSH_AT, READ_CHUNK};
use crate::protocol::pg::tag::{backend as server, frontend as client};
use crate::protocol::pg::{decode_raw_frame, sqlstate};
use crate::rt;
use crate::session::client_error::PgClientError;
use crate::session::driver::Wire as _;

/// Largest backend message looked at while copying (notices are small; anything else ends the
/// COPY and is read by the relay under its own limit).
const PEEK_MAX: usize = 1 << 30;

/// How the client's part of a COPY FROM STDIN ended.
pub(super) enum CopyIn {
    /// Its data ended (CopyDone or CopyFail, and in the extended protocol the Sync after it).
    Sent,
    /// The backend answered before the data ended: the COPY was rejected (or the backend
    /// went away), and the relay reads the answer.
    Rejected,
}

/// What woke a session pumping copy data.
enum Woke {
    /// A whole client message is in `io.unit`.
    Client,
    /// More client bytes arrived.
    ClientBytes,
    /// The client closed its connection.
    ClientGone,
    /// The backend sent bytes (`true`) or closed (`false`).
    Backend(bool),
}

impl Session {
    /// Forwards the client's COPY data until CopyDone or CopyFail, or until the backend speaks.
    pub(super) async fn pump_copy_in(&mut self) -> Result<CopyIn, End> {
        self.io.flush().await?;
        // In the extended protocol the server ignores the batch's Sync while copying; the
        // client sends another after CopyDone/CopyFail (libpq and tokio-postgres both do), and
        // only that one ends the batch.
        let extended = self.ex.expects().contains(&Expect::Sync);
        let mut ended = false;
        loop {
            let tag = match self.next_copy_event(!ended).await? {
                Woke::Client => self.io.unit.first().copied().unwrap_or_default(),
                Woke::ClientBytes => continue,
                Woke::Backend(alive) => {
                    if !alive || !self.relay_notices_during_copy() {
                        self.ex.discard_queued();
                        return Ok(CopyIn::Rejected);
                    }
                    continue;
                }
                Woke::ClientGone => return Err(self.client_gone_mid_copy().await),
            };
            match tag {
                client::SYNC if ended => {
                    self.ex.forward_unanswered(&self.io.unit);
                    self.send_backend().await?;
                    return Ok(CopyIn::Sent);
                }
                _ if ended => {
                    let e =
                        PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "expected Sync after the end of COPY data");
                    e.encode_fatal(&mut self.io.out);
                    let _ = self.io.flush().await;
                    return Err(End::Fatal);
                }
                client::COPY_DATA | client::COPY_DONE | client::COPY_FAIL => {
                    self.ex.forward_unanswered(&self.io.unit);
                    if tag != client::COPY_DATA || self.ex.queued().len() >= CLIENT_FLUSH_AT {
                        self.send_backend().await?;
                    }
                    if tag != client::COPY_DATA {
                        if !extended {
                            return Ok(CopyIn::Sent);
                        }
                        ended = true;
                    }
                }
                // The server ignores Flush and Sync during COPY IN.
                client::FLUSH | client::SYNC => {}
                _ => {
                    self.ex.fail_copy("unexpected message during COPY");
                    self.send_backend().await?;
                    return Ok(CopyIn::Sent);
                }
            }
        }
    }

    /// The client vanished mid-COPY: the COPY is aborted on the backend so that the
    /// connection is not left waiting for data, and the connection goes.
    async fn client_gone_mid_copy(&mut self) -> End {
        self.ex.fail_copy("client disconnected");
        let _ = self.send_backend().await;
        if let Some(c) = self.seat.conn.as_mut() {
            c.broken = true;
        }
        End::ClientGone
    }

    /// Waits for the next whole client message, or (when `watch`) for the backend to speak.
    async fn next_copy_event(&mut self, watch: bool) -> Result<Woke, End> {
        loop {
            if self.take_unit().await? {
                return Ok(Woke::Client);
            }
            if let Some(len) = self.large_copy_data().filter(|_| watch) {
                self.pass_on_copy_data(len).await?; // in pieces (#33)
                continue;
            }
            if self.io.pos > 0 {
                self.io.buf.drain(..self.io.pos);
                self.io.pos = 0;
            }
            self.io.flush().await?;
            let limit = self.idle_transaction_timeout();
            let (client, cbuf) = (&mut self.io.stream, &mut self.io.buf);
            let from_client = async {
                match rt::read_some(client, cbuf, READ_CHUNK).await {
                    Ok(n) if n > 0 => Woke::ClientBytes,
                    _ => Woke::ClientGone,
                }
            };
            let woke = match self.seat.conn.as_mut().filter(|_| watch) {
                Some(conn) => {
                    let from_backend = async {
                        Woke::Backend(
                            matches!(rt::read_some(&mut conn.stream, &mut conn.rbuf, READ_CHUNK).await, Ok(n) if n > 0),
                        )
                    };
                    rt::within(limit, rt::race(from_client, from_backend)).await
                }
                None => rt::within(limit, from_client).await,
            };
            match woke {
                Err(_) => return Err(crate::session::driver::idle_transaction_expired(self).await),
                Ok(Woke::ClientBytes) => {}
                Ok(other) => return Ok(other),
            }
        }
    }

    /// Relays the notices and parameter changes at the start of the backend's buffer; `false`
    /// when anything else is there (an ErrorResponse: the COPY was rejected).
    fn relay_notices_during_copy(&mut self) -> bool {
        let Some(conn) = self.seat.conn.as_mut() else { return false };
        let mut pos = 0usize;
        let mut only_notices = true;
        while let Some(f) = conn.rbuf.get(pos..).and_then(|rest| decode_raw_frame(rest, PEEK_MAX).ok().flatten()) {
            if !matches!(f.tag(), server::NOTICE_RESPONSE | server::PARAMETER_STATUS | server::NOTIFICATION_RESPONSE) {
                only_notices = false;
                break;
            }
            self.io.out.extend_from_slice(f.bytes());
            pos += f.len();
        }
        conn.rbuf.drain(..pos);
        only_notices
    }
}
