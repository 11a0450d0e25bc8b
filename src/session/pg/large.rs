//! Large messages pass through in pieces (#33): a DataRow or CopyData of the backend, or a
//! client's CopyData during COPY FROM STDIN, of [`PIECEWISE_AT`] bytes or more is never held
//! whole. Its bytes go on as they arrive, each piece written before the next is read, so the
//! router holds at most one read of it, and the side that sends reads no faster than the other
//! side takes: a backend that floods rows faster than its client reads slows only its own
//! connection, and a client that streams COPY data faster than the backend takes it is read no
//! faster. (A message is relayed unchanged here only when nothing in the router needs to look at
//! it: rows and copy data qualify once no retry or healing is under way.)
//!
//! Any other client message that long (a Query, Parse or Bind; CopyData outside COPY) must be
//! held whole: routing reads a statement's whole text, and a Bind's statement may be renamed or
//! replayed. Such a message is charged to the process's client buffer budget while it arrives
//! and until it was handled (`sqp_client_buffer_bytes{kind="messages"}`). Past the budget it is
//! read and dropped, never held, and the client gets `53200 out of memory` as from a server that
//! cannot allocate it: a simple Query ends with ReadyForQuery, an extended message fails its
//! batch up to Sync; the session goes on. A causal-token SET whose value is too long to be a
//! token is refused (`22023`) from its first bytes, before any charge: the rest of it is read
//! and dropped, never held, decoded or scanned.

use super::relay::Pass;
use super::route::INVALID_PARAMETER_VALUE;
use super::{End, Session, READ_CHUNK};
use crate::metrics::BufferKind;
use crate::protocol::pg::tag::{backend as server, frontend as client};
use crate::protocol::pg::{backend, decode_header, sqlstate};
use crate::routing::causal::{oversized_token_set, TokenError};
use crate::rt;
use crate::session::client_error::PgClientError;
use crate::session::driver;
use crate::session::error::RelayError;
use crate::sql::Dialect;

/// Messages at least this long pass through in pieces. Smaller ones are held whole, as every
/// message used to be: within a few reads, and most results' rows are far shorter.
pub(super) use crate::session::driver::PIECEWISE_AT;

/// A message's tag byte and length field.
pub(super) const HEADER: usize = 5;

/// How much of a Query's text is looked at for a causal-token SET before its body arrives:
/// ample for `SET SESSION querypilot.causal_token =` and a comment, and bounded, since it is
/// looked at again after each read.
const TOKEN_HEAD: usize = 4096;

/// Whether a backend message of type `tag` may pass through in pieces, as far as its type goes.
pub(super) fn piecewise(tag: u8) -> bool {
    matches!(tag, server::DATA_ROW | server::COPY_DATA)
}

impl Session {
    /// Whether the backend's large rows may go to the client in pieces now: nothing is held
    /// back for a retry or a stale-plan healing, which need whole messages.
    pub(super) fn passes_large(&self) -> bool {
        self.ex.holds_nothing()
    }

    /// Passes the backend message of `len` bytes at the pass's position (a large DataRow or
    /// CopyData whose header alone may be there) to the client in pieces, under the
    /// statement's deadline, and moves past it.
    pub(super) async fn pass_on_large(&mut self, pass: &mut Pass, len: usize) -> Result<(), End> {
        self.retry_note(server::DATA_ROW, len);
        self.io.flush().await?;
        let mut held = self.seat.ctx.client_budget().charge(BufferKind::Rows);
        let mut left = len;
        while left > 0 {
            let Some(conn) = self.seat.conn.as_mut() else { return Ok(()) };
            let piece = conn.rbuf.len().saturating_sub(pass.pos).min(left);
            if piece > 0 {
                // At most one read: the budget only shows it (refusing part of a row already
                // begun would leave the client nothing to resume from).
                held.resize(piece as u64, u64::MAX);
                let bytes = conn.rbuf.get(pass.pos..pass.pos + piece).unwrap_or_default();
                self.io.wrote_through();
                let written = rt::write_all(&mut self.io.stream, bytes).await;
                conn.rbuf.drain(..pass.pos + piece);
                pass.pos = 0;
                left -= piece;
                written.map_err(|_| End::ClientGone)?;
                continue;
            }
            held.resize(0, 0);
            let read = rt::read_some(&mut conn.stream, &mut conn.rbuf, READ_CHUNK);
            match pass.deadline {
                Some(d) => match rt::with_deadline(d, read).await {
                    Ok(Ok(n)) if n > 0 => {}
                    Ok(r) => return self.backend_lost(RelayError::BackendClosed(r.err())).await,
                    Err(_) => self.overdue(pass).await?,
                },
                None => match read.await {
                    Ok(n) if n > 0 => {}
                    r => return self.backend_lost(RelayError::BackendClosed(r.err())).await,
                },
            }
        }
        Ok(())
    }

    /// The length of the large CopyData whose header starts the client's unread bytes, when
    /// it has not fully arrived: it is passed on in pieces ([`Session::pass_on_copy_data`]).
    pub(super) fn large_copy_data(&self) -> Option<usize> {
        let rest = self.io.buf.get(self.io.pos..)?;
        match decode_header(rest, self.max_message()) {
            Ok(Some((client::COPY_DATA, len))) if len >= PIECEWISE_AT && rest.len() < len => Some(len),
            _ => None,
        }
    }

    /// Passes the client's CopyData of `len` bytes starting at its unread bytes to the backend
    /// in pieces, reading the client no faster than the backend takes them.
    pub(super) async fn pass_on_copy_data(&mut self, len: usize) -> Result<(), End> {
        self.send_backend().await?; // what was queued goes first
        let mut held = self.seat.ctx.client_budget().charge(BufferKind::Copy);
        let mut left = len;
        while left > 0 {
            let Some(conn) = self.seat.conn.as_mut() else { return Err(End::ClientGone) };
            let io = &mut self.io;
            let piece = io.buf.len().saturating_sub(io.pos).min(left);
            if piece > 0 {
                held.resize(piece as u64, u64::MAX);
                let bytes = io.buf.get(io.pos..io.pos + piece).unwrap_or_default();
                let written = rt::write_all(&mut conn.stream, bytes).await;
                io.buf.drain(..io.pos + piece);
                io.pos = 0;
                left -= piece;
                if let Err(e) = written {
                    return self.backend_lost(RelayError::BackendClosed(Some(e))).await.and(Err(End::Fatal));
                }
                continue;
            }
            held.resize(0, 0);
            let limit = self.idle_transaction_timeout();
            match rt::within(limit, rt::read_some(&mut self.io.stream, &mut self.io.buf, READ_CHUNK)).await {
                Ok(Ok(n)) if n > 0 => {}
                Ok(_) => {
                    // Part of a message went: nothing can follow it on this connection.
                    if let Some(c) = self.seat.conn.as_mut() {
                        c.broken = true;
                    }
                    return Err(End::ClientGone);
                }
                Err(_) => return Err(crate::session::driver::idle_transaction_expired(self).await),
            }
        }
        Ok(())
    }
}

impl Session {
    /// The length of the simple Query the read buffer starts with (not all of it arrived) when
    /// its head already shows a causal-token SET whose value is too long to be a token. Read
    /// whole, such a message was decoded, copied and scanned on the core in one go (a 1 MB one
    /// took a whole baseline p99 from the core's other sessions, #33); the answer cannot
    /// depend on the rest of it (`routing::causal::oversized_token_set`). Only between
    /// exchanges, where the whole-text path would answer it at once too.
    pub(super) fn oversized_token_set(&self) -> Option<usize> {
        let (tag, len) = decode_header(&self.io.buf, self.max_message()).ok().flatten()?;
        let idle = self.batch.is_empty() && self.ex.expects().is_empty() && !self.ex.awaiting();
        if tag != client::QUERY || !idle || self.ex.refused() || self.ex.aborted() || self.is_bridged() {
            return None;
        }
        let head = self.io.buf.get(HEADER..len.min(self.io.buf.len()).min(HEADER + TOKEN_HEAD))?;
        let head = match std::str::from_utf8(head) {
            Ok(head) => head,
            // Cut inside a character (or not UTF-8 further on): what comes before it.
            Err(e) => std::str::from_utf8(head.get(..e.valid_up_to())?).ok()?,
        };
        // The text: the body less its NUL.
        let text = len.saturating_sub(HEADER + 1);
        oversized_token_set(head, text, Dialect::Postgres).then_some(len)
    }

    /// Refuses the causal-token SET of `len` bytes that starts the unread bytes as the server
    /// refuses an invalid value (`22023`, the token not echoed): its bytes are read and dropped
    /// as they come, never held.
    pub(super) async fn refuse_token_set(&mut self, len: usize) -> Result<(), End> {
        // Its head may have come in a read too short to tell, charged as a large message.
        self.io.held.resize(0, 0);
        self.discard_client(len).await?;
        self.io.buf.shrink_to(READ_CHUNK);
        let e = PgClientError::new(INVALID_PARAMETER_VALUE, TokenError::TooLarge.to_string());
        e.encode(&mut self.io.out);
        backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
        self.io.flush().await
    }

    /// Charges the large client message whose header starts the read buffer
    /// ([`ClientIo::charge_incoming`](crate::session::driver::ClientIo::charge_incoming));
    /// `Some((tag, len))` when the budget refuses it.
    pub(super) fn charge_incoming(&mut self) -> Option<(u8, usize)> {
        let Ok(Some((tag, len))) = decode_header(&self.io.buf, self.max_message()) else { return None };
        let budget = self.seat.ctx.config().limits.client_buffer_budget;
        (!self.io.charge_incoming(len, budget)).then_some((tag, len))
    }

    /// Refuses the client message of type `tag` and `len` bytes that starts the unread bytes
    /// (the budget is spent): its bytes are read and dropped, then the client hears `53200`
    /// where the message's response belongs, as from a server that could not allocate it.
    pub(super) async fn refuse_incoming(&mut self, tag: u8, len: usize) -> Result<(), End> {
        self.io.held.resize(0, 0);
        self.discard_client(len).await?;
        self.io.buf.shrink_to(READ_CHUNK);
        if self.ex.refused() || self.ex.aborted() {
            return Ok(()); // skipped up to Sync anyway, as on the server
        }
        let text =
            format!("out of memory: a message of {len} bytes would take the router past limits.client_buffer_budget");
        let e = PgClientError::new(sqlstate::OUT_OF_MEMORY, text);
        let idle = self.batch.is_empty() && self.ex.expects().is_empty() && !self.ex.awaiting();
        if idle && matches!(tag, client::QUERY | client::FUNCTION_CALL) {
            e.encode(&mut self.io.out);
            backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
            return self.io.flush().await;
        }
        self.fail_batch(e)
    }

    /// Reads and drops the client's next `len` bytes (the unread ones first), holding at most
    /// one read of them.
    async fn discard_client(&mut self, len: usize) -> Result<(), End> {
        let mut left = len;
        loop {
            let io = &mut self.io;
            let piece = io.buf.len().saturating_sub(io.pos).min(left);
            io.buf.drain(..io.pos + piece);
            io.pos = 0;
            left -= piece;
            if left == 0 {
                return Ok(());
            }
            let limit = self.idle_transaction_timeout();
            driver::read_more(self, limit).await?;
        }
    }

    /// The large message just handled is held no more: its charge goes, and so do the buffers
    /// it grew, rather than stay with the session.
    pub(super) fn release_message(&mut self) {
        if self.io.release_large(PIECEWISE_AT) {
            self.ex.shrink_buffer(PIECEWISE_AT, READ_CHUNK);
        }
    }
}
