//! Buffered socket reads, whole writes and lingering closes over [`Stream`], as ring operations
//! on buffers the ring owns while the kernel may touch them.

use std::io;
use std::net::Shutdown;
use std::time::Instant;

use io_uring::{opcode, types};

use super::ring::{Keep, Op};
use super::Stream;

/// Largest read into an empty buffer: most messages and responses are small. A buffer holding
/// a partial message (a big result streaming in) reads full chunks.
const FIRST_CHUNK: usize = 4096;

/// Largest buffer a stream keeps between operations: enough for any common message, small
/// enough that thousands of idle connections stay cheap.
const SPARE_MAX: usize = 16 * 1024;

/// Largest single ring operation (the SQE length field is 32 bits; reads are far smaller).
const OP_MAX: usize = 1 << 30;

fn keep_spare(spare: &mut Vec<u8>, mut buf: Vec<u8>) {
    if buf.capacity() <= SPARE_MAX {
        buf.clear();
        *spare = buf;
    }
}

fn transient(res: i32) -> bool {
    res == -libc::EINTR || res == -libc::EAGAIN
}

/// Posts a receive on `stream` if none is in flight, parked for the next [`read_some`]. Meant
/// for a connection about to sit idle (a pooled backend connection): the kernel then notices
/// unsolicited bytes or a close by itself, [`super::idle_stream_usable`] reads the answer
/// without a system call, and the next read, which would have been posted anyway, is already
/// in the kernel.
pub fn watch(stream: &mut Stream) {
    if stream.recv.is_none() {
        // Not on a core (impossible for a pooled connection): the check falls back to a peek.
        let _ = start_recv(stream, FIRST_CHUNK);
    }
}

fn start_recv(stream: &mut Stream, chunk: usize) -> io::Result<&mut Op> {
    let mut room = std::mem::take(&mut stream.spare_recv);
    room.reserve(chunk);
    let sqe = opcode::Recv::new(types::Fd(stream.raw()), room.as_mut_ptr(), chunk as u32).build();
    Ok(stream.recv.insert(Op::start(sqe, Keep::Buf(room))?))
}

/// Reads whatever is available (at most `chunk` bytes; at most [`FIRST_CHUNK`] into an empty
/// buffer) and appends it to `buf`. Returns the number of bytes read; 0 means the peer closed
/// the connection. Safe to abandon: `buf` is left as it was, and the receive stays in flight on
/// the stream so the next read gets its bytes (nothing received is ever lost).
pub async fn read_some(stream: &mut Stream, buf: &mut Vec<u8>, chunk: usize) -> io::Result<usize> {
    let chunk = if buf.is_empty() { chunk.min(FIRST_CHUNK) } else { chunk }.clamp(1, OP_MAX);
    loop {
        let op = match stream.recv {
            Some(ref mut op) => op,
            None => start_recv(stream, chunk)?,
        };
        let (res, keep) = op.await;
        stream.recv = None;
        let Keep::Buf(mut room) = keep else {
            return Err(io::Error::other("receive completed without its buffer"));
        };
        if transient(res) {
            keep_spare(&mut stream.spare_recv, room);
            continue;
        }
        if res < 0 {
            return Err(io::Error::from_raw_os_error(-res));
        }
        let n = (res as usize).min(room.capacity());
        // SAFETY: the kernel wrote `n` bytes at the start of `room`'s allocation (never more
        // than the length it was given, which is within the capacity).
        unsafe { room.set_len(n) };
        buf.extend_from_slice(&room);
        keep_spare(&mut stream.spare_recv, room);
        return Ok(n);
    }
}

/// Awaits a send left in flight by an abandoned write, so bytes leave in order.
async fn finish_abandoned_send(stream: &mut Stream) -> io::Result<()> {
    let Some(op) = &mut stream.send else { return Ok(()) };
    let (res, keep) = op.await;
    stream.send = None;
    if let Keep::Buf(b) = keep {
        keep_spare(&mut stream.spare_send, b);
    }
    if res < 0 && !transient(res) {
        return Err(io::Error::from_raw_os_error(-res));
    }
    Ok(())
}

/// Writes all of `data`. The bytes are copied into a buffer the ring owns while the kernel
/// sends them, so abandoning the write never lets the kernel read freed memory.
pub async fn write_all(stream: &mut Stream, data: &[u8]) -> io::Result<()> {
    finish_abandoned_send(stream).await?;
    let mut out = std::mem::take(&mut stream.spare_send);
    out.extend_from_slice(data);
    let mut done = 0;
    while done < out.len() {
        let len = (out.len() - done).min(OP_MAX) as u32;
        // `done` is within `out`, so the pointer stays inside its allocation.
        let from = out.as_ptr().wrapping_add(done);
        let sqe = opcode::Send::new(types::Fd(stream.raw()), from, len).flags(libc::MSG_NOSIGNAL).build();
        let op = stream.send.insert(Op::start(sqe, Keep::Buf(out))?);
        let (res, keep) = op.await;
        stream.send = None;
        let Keep::Buf(b) = keep else {
            return Err(io::Error::other("send completed without its buffer"));
        };
        out = b;
        if transient(res) {
            continue;
        }
        if res <= 0 {
            keep_spare(&mut stream.spare_send, out);
            return Err(match res {
                0 => io::Error::from(io::ErrorKind::WriteZero),
                _ => io::Error::from_raw_os_error(-res),
            });
        }
        done += res as usize;
    }
    keep_spare(&mut stream.spare_send, out);
    Ok(())
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
