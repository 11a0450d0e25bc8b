//! Buffered socket reads, whole writes and lingering closes over [`Stream`].

use std::io;
use std::net::Shutdown;
use std::time::Instant;

use futures_lite::{AsyncReadExt, AsyncWriteExt};

use super::Stream;

/// Restores a buffer's length if a read is abandoned mid-await (a raced or timed-out read is
/// dropped), so the zeroed spare space never looks like received bytes.
struct Spare<'a> {
    buf: &'a mut Vec<u8>,
    keep: usize,
}

impl Drop for Spare<'_> {
    fn drop(&mut self) {
        self.buf.truncate(self.keep);
    }
}

/// Largest read into an empty buffer. The room a read offers must be zeroed first (safe Rust
/// cannot hand the kernel uninitialized memory), and most messages and responses are small:
/// zeroing a full chunk per read was a quarter of the router's user-space instructions with
/// pgbench. A buffer holding a partial message (a big result streaming in) reads full chunks.
const FIRST_CHUNK: usize = 4096;

/// Reads whatever is available (at most `chunk` bytes; at most [`FIRST_CHUNK`] into an empty
/// buffer) and appends it to `buf`. Returns the number of bytes read; 0 means the peer closed
/// the connection. Safe to abandon: if the future is dropped before completing, `buf` is left
/// as it was.
pub async fn read_some(stream: &mut Stream, buf: &mut Vec<u8>, chunk: usize) -> io::Result<usize> {
    let start = buf.len();
    let chunk = if start == 0 { chunk.min(FIRST_CHUNK) } else { chunk };
    buf.resize(start + chunk, 0);
    let mut spare = Spare { buf, keep: start };
    let res = match spare.buf.get_mut(start..) {
        Some(room) => stream.read(room).await,
        None => Ok(0),
    };
    spare.keep = start + *res.as_ref().unwrap_or(&0);
    res
}

/// Writes all of `data`.
pub async fn write_all(stream: &mut Stream, data: &[u8]) -> io::Result<()> {
    stream.write_all(data).await
}

/// Closes our side after a final error message without losing it: closing a socket that still
/// has unread input makes the kernel answer with a reset, and a reset can destroy the error the
/// peer has not read yet (typically a client still sending an oversized message). So: half-close
/// (the peer sees the error, then EOF), then read and discard what the peer still sends until it
/// closes too or `deadline` passes. Discarded bytes are never buffered beyond one chunk.
pub async fn linger_close(stream: &mut Stream, deadline: Instant) {
    if stream.shutdown(Shutdown::Write).await.is_err() {
        return;
    }
    let mut sink = Vec::with_capacity(LINGER_CHUNK);
    let drain = async {
        loop {
            sink.clear();
            match read_some(stream, &mut sink, LINGER_CHUNK).await {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
        }
    };
    let _ = super::with_deadline(deadline, drain).await;
}

/// Read size while discarding a closing peer's input.
const LINGER_CHUNK: usize = 16 * 1024;
