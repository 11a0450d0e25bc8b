//! Long rows pass through in pieces (#33): a backend packet of [`PIECEWISE_AT`] payload bytes
//! or more in a result's rows (a row, or the continuation of one over 16 MiB) is never held
//! whole. Its bytes go to the client as they arrive, each piece written before the next is
//! read, so the router holds at most one read of it and a backend that floods rows faster than
//! its client reads slows only its own connection. Anything else that long is read whole as
//! before (the exchange says which, from the packet's header and first byte).
//!
//! A client's command that long (a COM_QUERY, COM_STMT_PREPARE or COM_STMT_EXECUTE) is held
//! whole: routing reads a statement's whole text, and an execute is rewritten for the backend's
//! statement id. It is charged to the process's client buffer budget while it arrives and until
//! it was handled (`sqp_client_buffer_bytes{kind="messages"}`). Past the budget the rest of it is
//! read and dropped, never held, and the client gets `1041 (HY000) Out of memory` as its
//! answer, as from a server that cannot allocate it; the session goes on.

use super::exchange::Exchange;
use super::stmt::ER_OUT_OF_RESOURCES;
use super::{End, Session, READ_CHUNK};
use crate::metrics::BufferKind;
use crate::protocol::mysql::decode_packet_header;
use crate::protocol::mysql::framer::{Frame, MAX_PACKET_PAYLOAD};
use crate::rt;
use crate::session::client_error::MyClientError;
use crate::session::driver;
use crate::session::engine::release;
use crate::session::error::RelayError;
use crate::session::placement::Placed;

/// Payloads at least this long pass through in pieces; shorter ones are read whole.
pub(super) use crate::session::driver::PIECEWISE_AT;

/// Bytes of a packet header.
const HEADER_LEN: usize = 4;

/// Whether `f`, decoded from `buf`, is a large command of one packet that fills `buf`: its
/// payload is then taken from the buffer ([`take_alone`]) rather than copied.
pub(super) fn alone(f: &Frame<'_>, buf: &[u8]) -> bool {
    f.consumed == buf.len() && f.consumed >= PIECEWISE_AT && f.first_seq == f.last_seq
}

/// The payload of the one packet that fills `buf`, which is left empty.
pub(super) fn take_alone(buf: &mut Vec<u8>) -> Vec<u8> {
    let mut payload = std::mem::take(buf);
    payload.drain(..HEADER_LEN.min(payload.len()));
    payload
}

/// Wire bytes of the command `buf` starts with, as far as its packets' headers tell so far.
fn declared(buf: &[u8]) -> usize {
    let mut at = 0;
    while let Some((len, _)) = buf.get(at..).and_then(decode_packet_header) {
        at += HEADER_LEN + len;
        if len < MAX_PACKET_PAYLOAD {
            break;
        }
    }
    at
}

/// The payload length, sequence id and first payload byte of the packet `rest` starts with,
/// once they are there.
pub(super) fn head(rest: &[u8]) -> Option<(usize, u8, u8)> {
    let (len, seq) = decode_packet_header(rest)?;
    Some((len, seq, *rest.get(HEADER_LEN)?))
}

impl Session {
    /// Passes the backend packet at the read position to the client in pieces when it is long
    /// and a row; `false` (nothing taken) otherwise.
    pub(super) async fn pass_on_large(&mut self, ex: &mut Exchange) -> Result<bool, RelayError> {
        let Some(conn) = self.seat.conn.as_ref() else { return Ok(false) };
        let rest = conn.rbuf.get(self.link.pos..).unwrap_or_default();
        let Some((len, seq, first)) = head(rest).filter(|(len, ..)| *len >= PIECEWISE_AT) else { return Ok(false) };
        if ex.on_large(seq, first, len)?.is_none() {
            return Ok(false);
        }
        self.io.flush().await.map_err(|_| RelayError::ClientClosed(None))?;
        let mut held = self.seat.ctx.client_budget().charge(BufferKind::Rows);
        let mut left = HEADER_LEN + len;
        while left > 0 {
            let conn = self.seat.conn.as_mut().ok_or_else(super::relay::no_backend)?;
            let pos = self.link.pos;
            let piece = conn.rbuf.len().saturating_sub(pos).min(left);
            if piece == 0 {
                held.resize(0, 0);
                self.read_backend().await?;
                continue;
            }
            // At most one read: the budget only shows it (a row already begun cannot be
            // refused in the middle).
            held.resize(piece as u64, u64::MAX);
            self.io.wrote_through();
            let written = rt::write_all(&mut self.io.stream, conn.rbuf.get(pos..pos + piece).unwrap_or_default()).await;
            conn.rbuf.drain(..pos + piece);
            self.link.pos = 0;
            left -= piece;
            written.map_err(|e| RelayError::ClientClosed(Some(e)))?;
        }
        Ok(true)
    }
}

impl Session {
    /// Charges the large command the read buffer starts with
    /// ([`ClientIo::charge_incoming`](crate::session::driver::ClientIo::charge_incoming));
    /// `false` when the budget refuses it.
    pub(super) fn charge_incoming(&mut self) -> bool {
        let budget = self.seat.ctx.config().limits.client_buffer_budget;
        self.io.charge_incoming(declared(&self.io.buf), budget)
    }

    /// Refuses the command the read buffer starts with (the budget is spent): the rest of its
    /// packets is read and dropped, then the client gets `1041` as the command's answer.
    pub(super) async fn refuse_incoming(&mut self) -> Result<(), End> {
        self.io.held.resize(0, 0);
        let (len, seq) = self.discard_command().await?;
        self.io.buf.shrink_to(READ_CHUNK);
        let text =
            format!("Out of memory: a command of {len} bytes would take the router past limits.client_buffer_budget");
        MyClientError::new(ER_OUT_OF_RESOURCES, text).encode(seq.wrapping_add(1), &mut self.io.out);
        self.io.flush().await
    }

    /// Reads and drops the packets of the command the read buffer starts with, holding at most
    /// one read of them: its payload's length and its last packet's sequence id.
    async fn discard_command(&mut self) -> Result<(usize, u8), End> {
        let (mut total, mut left, mut last) = (0usize, 0usize, None);
        loop {
            let buf = &mut self.io.buf;
            if left == 0 {
                if let Some(seq) = last {
                    return Ok((total, seq));
                }
                if let Some((len, seq)) = decode_packet_header(buf) {
                    buf.drain(..HEADER_LEN);
                    (total, left) = (total + len, len);
                    last = (len < MAX_PACKET_PAYLOAD).then_some(seq);
                    continue;
                }
            }
            let piece = buf.len().min(left);
            buf.drain(..piece);
            left -= piece;
            if left == 0 && (last.is_some() || buf.len() >= HEADER_LEN) {
                continue;
            }
            // Inside a transaction the backend waits for this client: not for ever.
            let limit = release::idle_limit(self.holding(), self.seat.pool.config.timeouts.idle_transaction);
            driver::read_more(self, limit).await?;
        }
    }

    /// The large command just handled is held no more: its charge goes, and so do the buffers
    /// it grew, rather than stay with the session.
    pub(super) fn release_command(&mut self) {
        if self.io.release_large(PIECEWISE_AT) {
            driver::shrink_from(&mut self.link.out, PIECEWISE_AT);
        }
    }
}

#[cfg(test)]
mod tests;
