//! Buffered socket reads, whole writes and lingering closes over [`Stream`], as ring operations
//! on buffers the ring owns while the kernel may touch them.

use std::future::Future;
use std::io;
use std::net::Shutdown;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use io_uring::{opcode, squeue, types};

use super::provided;
use super::ring::{self, Keep, Op};
use super::Stream;

/// Largest read into an empty buffer: most messages and responses are small. A buffer holding
/// a partial message (a big result streaming in) reads full chunks.
const FIRST_CHUNK: usize = provided::BUF_SIZE;

/// Largest single ring operation (the SQE length field is 32 bits; reads are far smaller).
const OP_MAX: usize = 1 << 30;

/// Largest write to a client that returns before the kernel has taken it (see [`write_all`]):
/// responses of this size are most of them, and a larger result keeps waiting for each send,
/// so a client that reads slowly holds back the session, not more of its bytes.
const POST_MAX: usize = 16 * 1024;

/// `IORING_RECVSEND_POLL_FIRST` (Linux 5.19, as old as provided buffer rings): the receive
/// arms its poll at once instead of first trying a read that finds nothing.
const RECVSEND_POLL_FIRST: u16 = 1;

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
        let _ = start_recv(stream, FIRST_CHUNK, true);
    }
}

/// Posts a receive of at most `chunk` bytes: into a provided buffer when `select` and the core
/// has them (a receive that may wait long then holds no memory), else into a spare buffer.
fn start_recv(stream: &mut Stream, chunk: usize, select: bool) -> io::Result<&mut Op> {
    let fd = types::Fd(stream.raw());
    let op = if select && ring::selects_buffers() {
        let len = chunk.min(provided::BUF_SIZE) as u32;
        let sqe = opcode::Recv::new(fd, std::ptr::null_mut(), len)
            .buf_group(provided::GROUP)
            .ioprio(RECVSEND_POLL_FIRST)
            .build()
            .flags(squeue::Flags::BUFFER_SELECT);
        Op::start(sqe, Keep::Select)?
    } else {
        let mut room = super::spare_buffer();
        room.reserve(chunk);
        let sqe = opcode::Recv::new(fd, room.as_mut_ptr(), chunk as u32).build();
        Op::start(sqe, Keep::Buf(room))?
    };
    Ok(stream.recv.insert(op))
}

/// Reads whatever is available (at most `chunk` bytes; at most [`FIRST_CHUNK`] into an empty
/// buffer) and appends it to `buf`. Returns the number of bytes read; 0 means the peer closed
/// the connection. Safe to abandon: `buf` is left as it was, and the receive stays in flight on
/// the stream so the next read gets its bytes (nothing received is ever lost).
///
/// Which read it is, plaintext or encrypted, is settled when it is called (the stream is
/// borrowed until it ends), so the plaintext read is the future itself: an `async fn` awaiting
/// it was a second state machine around it, ~30 instructions a poll (#39).
pub fn read_some<'a>(
    stream: &'a mut Stream,
    buf: &'a mut Vec<u8>,
    chunk: usize,
) -> impl Future<Output = io::Result<usize>> + 'a {
    if stream.tls.is_some() {
        // Boxed so that a plaintext read's future stays the size it was without TLS.
        Either::Encrypted { read: Box::pin(super::tls::read_some(stream, buf, chunk)) }
    } else {
        Either::Plain { read: read_plain(stream, buf, chunk) }
    }
}

pin_project_lite::pin_project! {
    /// Future of [`read_some`]: one of two reads.
    #[project = EitherProj]
    enum Either<P, E> {
        Plain { #[pin] read: P },
        Encrypted { #[pin] read: E },
    }
}

impl<T, P: Future<Output = T>, E: Future<Output = T>> Future for Either<P, E> {
    type Output = T;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<T> {
        match self.project() {
            EitherProj::Plain { read } => read.poll(cx),
            EitherProj::Encrypted { read } => read.poll(cx),
        }
    }
}

/// [`read_some`] of the socket's own bytes (ciphertext on an encrypted stream).
pub(super) async fn read_plain(stream: &mut Stream, buf: &mut Vec<u8>, chunk: usize) -> io::Result<usize> {
    let chunk = if buf.is_empty() { chunk.min(FIRST_CHUNK) } else { chunk }.clamp(1, OP_MAX);
    // An empty buffer waits for a peer that may stay silent: select (see `start_recv`).
    let mut select = buf.is_empty();
    loop {
        let op = match stream.recv {
            Some(ref mut op) => op,
            None => start_recv(stream, chunk, select)?,
        };
        let (res, keep) = op.await;
        stream.recv = None;
        match keep {
            Keep::Picked(bid) => {
                super::refill(buf);
                ring::copy_picked(bid, res.max(0) as usize, buf);
                if res >= 0 {
                    return Ok(res as usize);
                }
            }
            Keep::Buf(mut room) => {
                if res >= 0 {
                    let n = (res as usize).min(room.capacity());
                    // SAFETY: the kernel wrote `n` bytes at the start of `room`'s allocation
                    // (never more than the length it was given, within the capacity).
                    unsafe { room.set_len(n) };
                    super::refill(buf);
                    buf.extend_from_slice(&room);
                }
                super::recycle(&mut room);
                if res >= 0 {
                    return Ok(res as usize);
                }
            }
            Keep::Select if res == -libc::ENOBUFS => {
                // Every provided buffer is taken (a burst): this receive brings its own.
                select = false;
                continue;
            }
            Keep::Select if res == 0 => return Ok(0),
            Keep::Select if res < 0 => {}
            _ => return Err(io::Error::other("receive completed without its buffer")),
        }
        if !transient(res) {
            return Err(io::Error::from_raw_os_error(-res));
        }
    }
}

/// A connection on its way out of this process ([`hand_off`]).
pub struct Handed {
    /// A duplicate of its descriptor.
    pub fd: std::os::fd::OwnedFd,
    /// What the peer sent that nobody read yet, decrypted if the connection is encrypted: the
    /// next process must read it first.
    pub got: Vec<u8>,
    /// Its TLS session's record protection, if it is encrypted (secret: it travels only to
    /// another process of the router, over the hand-over socket).
    pub tls: Option<Box<super::tls::FrozenTls>>,
}

/// Takes a connection out of this process for a new binary (#40): waits for a posted write to
/// leave, stops a parked receive (the bytes it already took are the peer's next message, which
/// the new process must read first), gives up the TLS session's keys if it is encrypted and
/// duplicates the descriptor. The stream must not be used after; dropping it then closes only
/// this process's descriptor, so the peer notices nothing. Fails on a failed write, a peer that
/// closed meanwhile, or a TLS session that cannot move (in the middle of a record, or with a
/// cipher the record layer here lacks); the stream is then unusable.
pub async fn hand_off(stream: &mut Stream) -> io::Result<Handed> {
    // Checked before anything is stopped: a session that cannot move goes on being served here
    // as the drain serves it, its TLS session intact.
    if stream.tls.is_some() {
        super::tls::ready_to_move(stream).await?;
    }
    settle_if_needed(stream).await?;
    let mut got = Vec::new();
    if let Some(op) = &mut stream.recv {
        op.cancel();
        let (res, keep) = op.await;
        stream.recv = None;
        match keep {
            Keep::Picked(bid) => ring::copy_picked(bid, res.max(0) as usize, &mut got),
            Keep::Buf(mut room) => {
                if res > 0 {
                    let n = (res as usize).min(room.capacity());
                    // SAFETY: the kernel wrote `n` bytes at the start of `room`'s allocation.
                    unsafe { room.set_len(n) };
                    got.extend_from_slice(&room);
                }
                super::recycle(&mut room);
            }
            _ => {}
        }
        if res == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        if res < 0 && res != -libc::ECANCELED && res != -libc::ENOBUFS && !transient(res) {
            return Err(io::Error::from_raw_os_error(-res));
        }
    }
    let fd = stream.fd().try_clone()?;
    match stream.tls.take() {
        Some(tls) => match tls.freeze(&got) {
            Ok((plain, frozen)) => Ok(Handed { fd, got: plain, tls: Some(Box::new(frozen)) }),
            Err(e) => {
                // The session's keys are gone with it: nothing more can be written that the
                // peer could read, so the stream is broken for writing, as after a cut write.
                stream.unsent = usize::MAX;
                Err(e)
            }
        },
        None => Ok(Handed { fd, got, tls: None }),
    }
}

/// Settles a write that was abandoned or failed: awaits the send it left in flight (so bytes
/// leave in order) and counts what that send took. If part of its message is still unsent, the
/// peer holds a truncated message and anything written after it would be read as its rest: the
/// stream stays broken and this fails, now and on every later write.
async fn settle_earlier_write(stream: &mut Stream) -> io::Result<()> {
    if let Some(op) = &mut stream.send {
        let (res, keep) = op.await;
        stream.send = None;
        if let Keep::Buf(mut b) = keep {
            super::recycle(&mut b);
        }
        stream.unsent = stream.unsent.saturating_sub(res.max(0) as usize);
    }
    if stream.unsent > 0 {
        return Err(io::Error::new(io::ErrorKind::BrokenPipe, "an earlier write was cut off mid-message"));
    }
    Ok(())
}

/// Writes all of `data`. The bytes are copied into a buffer the ring owns while the kernel
/// sends them, so abandoning the write never lets the kernel read freed memory. Abandoning it
/// (dropping the future) before every byte has left breaks the stream for writing: the send in
/// flight finishes, and the next write fails rather than append to a truncated message.
///
/// On an accepted (client) plaintext stream, a write of at most [`POST_MAX`] bytes returns as
/// soon as its send is queued (#39): the task goes on at once, and what it does next (check in
/// its backend, read the client's next request) goes to the kernel in the same submission
/// instead of a loop turn later. The ring sends the rest of a short send itself; the next write
/// (or a shutdown) waits for it first, so bytes still leave whole and in order, and a failure
/// surfaces there. Writes to backends always wait: whether a statement's bytes left decides
/// whether it may be retried.
pub async fn write_all(stream: &mut Stream, data: &[u8]) -> io::Result<()> {
    if stream.tls.is_some() {
        // Boxed so that a plaintext write's future stays the size it was without TLS.
        return Box::pin(super::tls::write_all(stream, data)).await;
    }
    if unsettled(stream) {
        settle_earlier_write(stream).await?;
    }
    let mut out = super::spare_buffer();
    out.extend_from_slice(data);
    if stream.posts && out.len() <= POST_MAX {
        return post(stream, out);
    }
    send_owned(stream, out).await
}

/// Queues the send of all of `out` without waiting for it (see [`write_all`]). The caller has
/// settled any earlier write.
fn post(stream: &mut Stream, out: Vec<u8>) -> io::Result<()> {
    let fd = stream.raw();
    let len = out.len();
    // The pointer is into `out`'s heap allocation, which moving the `Vec` into the ring keeps.
    // At most POST_MAX bytes, which the SQE's 32-bit length holds.
    let sqe = opcode::Send::new(types::Fd(fd), out.as_ptr(), len as u32).flags(libc::MSG_NOSIGNAL).build();
    stream.send = Some(Op::start(sqe, Keep::Posted { buf: out, sent: 0, fd })?);
    stream.unsent = len;
    Ok(())
}

/// Whether an earlier write is still to be settled (see [`settle_earlier_write`]). The writes
/// test it before they await the settling, rather than await [`settle_if_needed`]: a future
/// made and polled to completion for nothing cost ~50 instructions a write (#39).
fn unsettled(stream: &Stream) -> bool {
    stream.send.is_some() || stream.unsent > 0
}

/// Settles an earlier write that was abandoned or failed, if there is one (see
/// [`settle_earlier_write`]): a new message may follow only a whole one.
pub(super) async fn settle_if_needed(stream: &mut Stream) -> io::Result<()> {
    if unsettled(stream) {
        settle_earlier_write(stream).await?;
    }
    Ok(())
}

/// Writes all of `data` to a peer that answers it (a statement to its backend), waiting for
/// every byte to leave as [`write_all`] does, with the receive for the answer in the kernel
/// before the send: both go in one submission, and the send's completion does not end the
/// loop's wait by itself, so the task wakes once, when the answer has come (#39: one loop turn
/// and one `io_uring_enter` less per statement at one client; see [`Op::start_answered`]).
/// The caller reads the answer with [`read_some`], which takes the receive in flight. Only
/// for a message the peer always answers: otherwise the task would wait for some other
/// completion, or [`ring`]'s cap on such waits, before it goes on. A receive that already
/// completed (bytes nobody read yet) cannot take the answer, and a write larger than
/// [`POST_MAX`] may leave in pieces the answer cannot follow, so then, as on an encrypted
/// stream, this is [`write_all`].
pub async fn write_for_answer(stream: &mut Stream, data: &[u8]) -> io::Result<()> {
    let plain = stream.tls.is_none() && !stream.posts && data.len() <= POST_MAX;
    if !plain || stream.recv.as_ref().is_some_and(Op::is_done) {
        return write_all(stream, data).await;
    }
    if unsettled(stream) {
        settle_earlier_write(stream).await?;
    }
    watch(stream);
    let mut out = super::spare_buffer();
    out.extend_from_slice(data);
    let answered = stream.recv.is_some();
    send_from(stream, out, answered).await
}

/// Sends all of `out`, a buffer the ring owns while the kernel reads it (recycled after),
/// after any earlier write (a posted one may still be in flight).
pub(super) async fn send_owned(stream: &mut Stream, out: Vec<u8>) -> io::Result<()> {
    if unsettled(stream) {
        settle_earlier_write(stream).await?;
    }
    send_from(stream, out, false).await
}

/// Sends all of `out` on a settled stream; `answered`: its first send is answered into a
/// receive in flight ([`Op::start_answered`]). The rest of a short send is not: nothing may
/// answer a message the peer has only part of.
async fn send_from(stream: &mut Stream, mut out: Vec<u8>, mut answered: bool) -> io::Result<()> {
    // Counted down as sends complete: what is left if this future is dropped marks the cut.
    stream.unsent = out.len();
    let mut done = 0;
    while done < out.len() {
        let len = (out.len() - done).min(OP_MAX) as u32;
        // `done` is within `out`, so the pointer stays inside its allocation.
        let from = out.as_ptr().wrapping_add(done);
        let sqe = opcode::Send::new(types::Fd(stream.raw()), from, len).flags(libc::MSG_NOSIGNAL).build();
        let started = if answered { Op::start_answered(sqe, Keep::Buf(out)) } else { Op::start(sqe, Keep::Buf(out)) };
        answered = false;
        let op = stream.send.insert(started?);
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
            super::recycle(&mut out);
            return Err(match res {
                0 => io::Error::from(io::ErrorKind::WriteZero),
                _ => io::Error::from_raw_os_error(-res),
            });
        }
        done += res as usize;
        stream.unsent = out.len() - done;
    }
    super::recycle(&mut out);
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
