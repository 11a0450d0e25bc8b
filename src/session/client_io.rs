//! The client-socket I/O both protocol sessions share: read sizes, the drain-aware read of an
//! idle session, writing buffered output, and what a read's outcome means for the session loop.

use crate::metrics::Charge;
use crate::rt::{self, Event, Stream};

/// Bytes buffered for the client before they are written out mid-result.
pub(super) const CLIENT_FLUSH_AT: usize = 64 * 1024;
/// Read size for client and backend sockets.
pub(super) const READ_CHUNK: usize = 16 * 1024;
/// Read size while a session waits between transactions: most requests fit, and thousands of
/// idle clients must not each hold a large buffer (a longer message just takes more reads).
pub(super) const IDLE_READ_CHUNK: usize = 1024;

/// Why a session loop ended.
pub(super) enum End {
    /// The client said goodbye (Terminate, COM_QUIT) or closed its socket.
    ClientGone,
    /// The router is draining and the session was idle.
    Drained,
    /// An error the client was told about; close.
    Fatal,
    /// An operator's KILL of the session's pool.
    Killed,
    /// A MySQL client's `KILL [CONNECTION]` of this session.
    KilledByClient,
}

/// A large client message was handled: its charge (`held`) goes, and so do the buffers it grew
/// to `at` bytes or more (`bufs`), rather than stay with the session; `false` when none was held.
pub(super) fn release_large<const N: usize>(held: &mut Charge, bufs: [&mut Vec<u8>; N], at: usize) -> bool {
    if held.bytes() == 0 {
        return false;
    }
    held.resize(0, 0);
    for buf in bufs {
        if buf.capacity() >= at {
            buf.shrink_to(READ_CHUNK);
        }
    }
    true
}

/// Writes and clears buffered client output.
pub(super) async fn flush(stream: &mut Stream, out: &mut Vec<u8>) -> Result<(), End> {
    if out.is_empty() {
        return Ok(());
    }
    let r = rt::write_all(stream, out).await;
    out.clear();
    r.map_err(|_| End::ClientGone)
}

/// Reads from a client that holds no backend; `None` when the router starts draining. A small
/// first read keeps idle buffers small; the rest of a big message arrives in full-size chunks.
pub(super) async fn read_idle(stream: &mut Stream, buf: &mut Vec<u8>, drain: &Event) -> Option<std::io::Result<usize>> {
    let chunk = if buf.is_empty() { IDLE_READ_CHUNK } else { READ_CHUNK };
    rt::race(async { Some(rt::read_some(stream, buf, chunk).await) }, async {
        drain.wait().await;
        None
    })
    .await
}

/// Whether a client read ended the client's side (closed or failed); a read cut short by
/// draining ends the session as [`End::Drained`].
pub(super) fn client_closed(read: Option<std::io::Result<usize>>) -> Result<bool, End> {
    match read {
        None => Err(End::Drained),
        Some(Ok(0)) | Some(Err(_)) => Ok(true),
        Some(Ok(_)) => Ok(false),
    }
}
