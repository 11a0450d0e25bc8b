//! Sockets: SO_REUSEPORT listeners (one per core per listener address), deadline-bound connects,
//! and a look at whether an idle connection's peer is still there. Every socket is blocking at
//! the descriptor level: io_uring then polls it internally instead of failing with EAGAIN.

use std::cell::Cell;
use std::future::Future;
use std::io;
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use io_uring::opcode;
use socket2::{Domain, Protocol, SockAddr, SockRef, Socket, Type};

use super::ring::{fd_of, Keep, Op};

/// A client or backend TCP connection owned by the core that created it.
///
/// A receive whose read was abandoned (a raced read lost) stays in flight, parked here, and the
/// next read takes its bytes: cancelling it instead could lose bytes the kernel had already
/// moved into its buffer. Dropping the stream cancels what is in flight and closes the socket.
///
/// A write abandoned mid-message (see [`super::write_all`]) breaks the stream for writing: the
/// peer got part of a message, so nothing written after it could be understood.
pub struct Stream {
    pub(super) recv: Option<Op>,
    pub(super) send: Option<Op>,
    /// Bytes of the last write not yet known to have left: non-zero only while a write runs or
    /// after one was abandoned or failed mid-message.
    pub(super) unsent: usize,
    /// The TLS session when the connection is encrypted (#38); boxed so that a plaintext
    /// stream stays small.
    pub(super) tls: Option<Box<super::tls::Tls>>,
    /// Small writes return before their send completes (see [`super::write_all`]): accepted
    /// (client) connections only.
    pub(super) posts: bool,
    fd: OwnedFd,
}

impl Stream {
    fn new(fd: OwnedFd, posts: bool) -> io::Result<Self> {
        SockRef::from(&fd).set_nodelay(true)?;
        Ok(Self { recv: None, send: None, unsent: 0, tls: None, posts, fd })
    }

    pub(super) fn raw(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    pub(super) fn fd(&self) -> &OwnedFd {
        &self.fd
    }

    /// A client connection another process of the router accepted and handed over (#40),
    /// served as if this core had accepted it; `tls`, its TLS session if it is encrypted.
    pub fn adopt(fd: OwnedFd, tls: Option<Box<super::FrozenTls>>) -> io::Result<Self> {
        Self::new(fd, true)?.encrypted(tls)
    }

    /// A server connection another process of the router opened and handed over with the
    /// session owning it (#40), used as if this core had opened it.
    pub fn adopt_backend(fd: OwnedFd, tls: Option<Box<super::FrozenTls>>) -> io::Result<Self> {
        Self::new(fd, false)?.encrypted(tls)
    }

    fn encrypted(mut self, tls: Option<Box<super::FrozenTls>>) -> io::Result<Self> {
        if let Some(frozen) = tls {
            self.tls = Some(Box::new(super::tls::Tls::thaw(*frozen)?));
        }
        Ok(self)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        sock_addr(SockRef::from(&self.fd).peer_addr()?)
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sock_addr(SockRef::from(&self.fd).local_addr()?)
    }

    /// Shuts down one or both directions (a plain `shutdown(2)`, which never blocks) once an
    /// earlier write still in flight has left: a client told why it is cut off hears it before
    /// the close (fails if that write failed).
    pub async fn shutdown(&mut self, how: Shutdown) -> io::Result<()> {
        let settled = super::io::settle_if_needed(self).await;
        SockRef::from(&self.fd).shutdown(how)?;
        settled
    }

    /// A non-blocking look at the socket: `Some(true)` bytes or EOF or an error are waiting,
    /// `Some(false)` nothing is, `None` the look failed.
    fn peek(&self) -> Option<bool> {
        let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
        match SockRef::from(&self.fd).recv_with_flags(&mut byte, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
            Ok(_) => Some(true),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Some(false),
            Err(_) => None,
        }
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.recv.is_some() || self.send.is_some() {
            // Cancel what is in flight and submit it all before the descriptor closes. A posted
            // send still queued goes ahead of its cancellation: it leaves unless the socket had
            // no room for it.
            self.recv = None;
            self.send = None;
            super::ring::flush();
        }
    }
}

fn sock_addr(a: SockAddr) -> io::Result<SocketAddr> {
    a.as_socket().ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "not an IP socket address"))
}

/// A listening socket owned by one core. Like a stream's receive, an accept whose future was
/// dropped (raced and lost) stays in flight, parked here for the next `accept`: a connection the
/// kernel handed to it is never lost. Dropping the listener cancels it.
pub struct Listener {
    pub(super) pending: Cell<Option<Op>>,
    fd: OwnedFd,
}

impl Drop for Listener {
    fn drop(&mut self) {
        if self.pending.take().is_some() {
            super::ring::flush();
        }
    }
}

/// Holds an accept in flight; puts it back on its listener if dropped before completion.
struct Parked<'a> {
    home: &'a Cell<Option<Op>>,
    op: Option<Op>,
}

impl Future for Parked<'_> {
    type Output = (i32, Keep);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<(i32, Keep)> {
        let Some(op) = self.op.as_mut() else { return Poll::Ready((-libc::ECANCELED, Keep::Nothing)) };
        let out = std::task::ready!(Pin::new(op).poll(cx));
        self.op = None;
        Poll::Ready(out)
    }
}

impl Drop for Parked<'_> {
    fn drop(&mut self) {
        if let Some(op) = self.op.take() {
            self.home.set(Some(op));
        }
    }
}

impl Listener {
    /// Waits for the next connection; TCP_NODELAY is set because the router relays small
    /// request/response messages whose latency matters more than segment count.
    pub async fn accept(&self) -> io::Result<Stream> {
        let sqe = opcode::Accept::new(fd_of(&self.fd), std::ptr::null_mut(), std::ptr::null_mut())
            .flags(libc::SOCK_CLOEXEC)
            .build();
        loop {
            let op = match self.pending.take() {
                Some(op) => op,
                None => Op::start(sqe.clone(), Keep::Accept)?,
            };
            match (Parked { home: &self.pending, op: Some(op) }).await {
                (_, Keep::Fd(fd)) => return Stream::new(fd, true),
                // A connection reset before we took it: wait for the next one.
                (res, _) if res == -libc::ECONNABORTED || res == -libc::EINTR => continue,
                (res, _) => return Err(io::Error::from_raw_os_error(-res)),
            }
        }
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        sock_addr(SockRef::from(&self.fd).local_addr()?)
    }

    /// A listener on a listening TCP socket another process bound and handed over (#40).
    pub fn from_fd(fd: OwnedFd) -> io::Result<Listener> {
        let sock = SockRef::from(&fd);
        if sock.r#type()? != Type::STREAM || !sock.is_listener()? {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "not a listening stream socket"));
        }
        sock_addr(sock.local_addr()?)?;
        // Blocking at the descriptor level like every socket here (see the module header).
        sock.set_nonblocking(false)?;
        Ok(Listener { pending: Cell::new(None), fd })
    }

    /// A duplicate of the socket's descriptor, to hand it to another process (#40): the socket,
    /// and the connections waiting in its backlog, outlive this listener.
    pub fn dup_fd(&self) -> io::Result<OwnedFd> {
        self.fd.try_clone()
    }

    /// Ends accepting: cancels an accept parked here and waits for it, so that a connection
    /// the kernel handed to it meanwhile is returned instead of closed (#40).
    pub async fn stop(&self) -> Option<io::Result<Stream>> {
        let op = self.pending.take()?;
        op.cancel();
        match op.await {
            (_, Keep::Fd(fd)) => Some(Stream::new(fd, true)),
            _ => None,
        }
    }
}

/// Listen backlog per core and listener (the kernel caps it at `net.core.somaxconn`).
const BACKLOG: i32 = 1024;

/// Binds `addr` with SO_REUSEPORT so every core can own a listener on the same port and the
/// kernel spreads incoming connections between them. SO_REUSEADDR too, so that accepted
/// connections inherit it and their TIME_WAIT remnants never block a restart.
pub fn bind_reuseport(addr: SocketAddr) -> io::Result<Listener> {
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    sock.bind(&addr.into())?;
    sock.listen(BACKLOG)?;
    Ok(Listener { pending: Cell::new(None), fd: sock.into() })
}

/// Connects to `addr`, failing with `TimedOut` once `deadline` has passed. The connect is a ring
/// operation; at the deadline it is cancelled and its socket closed when the kernel lets go.
pub async fn connect(addr: SocketAddr, deadline: Instant) -> io::Result<Stream> {
    if super::now() >= deadline {
        return Err(io::Error::new(io::ErrorKind::TimedOut, "connect deadline already passed"));
    }
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM.cloexec(), Some(Protocol::TCP))?;
    let target = Box::new(SockAddr::from(addr));
    let sqe = opcode::Connect::new(fd_of(&sock), target.as_ptr().cast(), target.len()).build();
    let op = Op::start(sqe, Keep::Connect { _addr: target, fd: sock.into() })?;
    match super::with_deadline(deadline, op).await {
        Err(_) => Err(io::Error::new(io::ErrorKind::TimedOut, "connect timed out")),
        Ok((0, Keep::Connect { fd, .. })) => Stream::new(fd, false),
        Ok((res, _)) if res < 0 => Err(io::Error::from_raw_os_error(-res)),
        Ok(_) => Err(io::Error::other("connect completed without its socket")),
    }
}

/// Hands a connection to a plain thread (the admin console): a blocking `std` stream on a
/// duplicate of its descriptor. The core's stream is dropped here, so only the duplicate stays.
/// Refused while a receive is parked on it: that receive may already hold the client's bytes.
pub fn detach(stream: Stream) -> io::Result<std::net::TcpStream> {
    if stream.tls.is_some() {
        return Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "an encrypted connection cannot be handed to a plain thread",
        ));
    }
    if stream.recv.is_some() {
        return Err(io::Error::new(io::ErrorKind::WouldBlock, "a receive is still in flight on the connection"));
    }
    let owned: OwnedFd = stream.fd.try_clone()?;
    drop(stream);
    // SAFETY: `owned` is a TCP socket descriptor we own exclusively; ownership moves into the
    // std stream.
    let plain = unsafe { std::net::TcpStream::from_raw_fd(std::os::fd::IntoRawFd::into_raw_fd(owned)) };
    plain.set_nonblocking(false)?;
    Ok(plain)
}

/// Whether a connection that sat idle is still usable: the peer has neither closed it nor sent
/// anything. An idle PostgreSQL or MySQL connection receives bytes only when the server is
/// about to close it (FATAL 57P01 at shutdown, an idle timeout), so either means "do not lend
/// this one". Never blocks: a parked receive that completed answers it without a system call,
/// otherwise one non-blocking peek. A stream whose last write was abandoned mid-message (or is
/// still in flight) is not usable either: the server holds part of a message.
pub fn idle_stream_usable(stream: &Stream) -> bool {
    if stream.unsent > 0 || stream.tls.as_ref().is_some_and(|t| t.buffered) {
        return false;
    }
    match &stream.recv {
        Some(op) => !op.is_done(),
        None => stream.peek() == Some(false),
    }
}

/// Whether a read on `stream` would not wait: the peer sent bytes, closed, or the socket has
/// an error. Never blocks. Lets a session sending a long request notice an early answer (an
/// error) without racing a read against its writes.
pub fn readable_now(stream: &Stream) -> bool {
    if stream.tls.as_ref().is_some_and(|t| t.buffered) {
        return true;
    }
    match &stream.recv {
        Some(op) => op.is_done(),
        None => stream.peek() != Some(false),
    }
}
