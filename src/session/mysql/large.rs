//! Long rows pass through in pieces (#33): a backend packet of [`PIECEWISE_AT`] payload bytes
//! or more in a result's rows (a row, or the continuation of one over 16 MiB) is never held
//! whole. Its bytes go to the client as they arrive, each piece written before the next is
//! read, so the router holds at most one read of it and a backend that floods rows faster than
//! its client reads slows only its own connection. Anything else that long is read whole as
//! before (the exchange says which, from the packet's header and first byte).

use super::exchange::Exchange;
use super::Session;
use crate::metrics::BufferKind;
use crate::protocol::mysql::decode_packet_header;
use crate::rt;
use crate::session::error::RelayError;

/// Payloads at least this long pass through in pieces; shorter ones are read whole.
pub(super) const PIECEWISE_AT: usize = 256 * 1024;

/// Bytes of a packet header.
const HEADER_LEN: usize = 4;

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
        let Some(conn) = self.link.conn.as_ref() else { return Ok(false) };
        let rest = conn.rbuf.get(self.link.pos..).unwrap_or_default();
        let Some((len, seq, first)) = head(rest).filter(|(len, ..)| *len >= PIECEWISE_AT) else { return Ok(false) };
        if ex.on_large(seq, first, len)?.is_none() {
            return Ok(false);
        }
        self.flush_client().await.map_err(|_| RelayError::ClientClosed(None))?;
        let mut held = self.ctx.client_budget().charge(BufferKind::Rows);
        let mut left = HEADER_LEN + len;
        while left > 0 {
            let conn = self.link.conn.as_mut().ok_or(RelayError::BackendClosed(None))?;
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
            let written = rt::write_all(&mut self.io.stream, conn.rbuf.get(pos..pos + piece).unwrap_or_default()).await;
            conn.rbuf.drain(..pos + piece);
            self.link.pos = 0;
            left -= piece;
            written.map_err(|e| RelayError::ClientClosed(Some(e)))?;
        }
        Ok(true)
    }
}
