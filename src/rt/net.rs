//! Sockets: SO_REUSEPORT listeners (one per core per listener address), deadline-bound connects,
//! and a non-blocking look at whether an idle connection's peer is still there.

use std::io;
use std::net::SocketAddr;
use std::time::Instant;

/// A client or backend TCP connection owned by the core that created it.
pub type Stream = glommio::net::TcpStream;

/// A listening socket owned by one core.
pub struct Listener {
    inner: glommio::net::TcpListener,
}

impl Listener {
    /// Waits for the next connection; TCP_NODELAY is set because the router relays small
    /// request/response messages whose latency matters more than segment count.
    pub async fn accept(&self) -> io::Result<Stream> {
        let s = self.inner.accept().await.map_err(io::Error::from)?;
        s.set_nodelay(true).map_err(io::Error::from)?;
        Ok(s)
    }

    /// The address actually bound (useful with port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr().map_err(io::Error::from)
    }
}

/// Listen backlog per core and listener (the kernel caps it at `net.core.somaxconn`).
const BACKLOG: i32 = 1024;

/// Binds `addr` with SO_REUSEPORT so every core can own a listener on the same port and the
/// kernel spreads incoming connections between them. SO_REUSEADDR too, so that accepted
/// connections inherit it and their TIME_WAIT remnants never block a restart.
pub fn bind_reuseport(addr: SocketAddr) -> io::Result<Listener> {
    use socket2::{Domain, Protocol, Socket, Type};
    use std::os::fd::{FromRawFd, IntoRawFd};
    let sock = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    sock.set_reuse_address(true)?;
    sock.set_reuse_port(true)?;
    sock.set_nonblocking(true)?;
    sock.bind(&addr.into())?;
    sock.listen(BACKLOG)?;
    // SAFETY: the descriptor is a bound, listening TCP socket that we own exclusively; its
    // ownership moves into the glommio listener, which closes it.
    let inner = unsafe { glommio::net::TcpListener::from_raw_fd(sock.into_raw_fd()) };
    Ok(Listener { inner })
}

/// Connects to `addr`, failing with `TimedOut` once `deadline` has passed.
pub async fn connect(addr: SocketAddr, deadline: Instant) -> io::Result<Stream> {
    let left = deadline.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::Error::new(io::ErrorKind::TimedOut, "connect deadline already passed"));
    }
    let s = Stream::connect_timeout(addr, left).await.map_err(io::Error::from)?;
    s.set_nodelay(true).map_err(io::Error::from)?;
    Ok(s)
}

/// Hands a connection to a plain thread (the admin console): a blocking `std` stream on a
/// duplicate of its descriptor. The core's stream is dropped here, so only the duplicate stays.
/// Call it only between reads and writes, when no operation of the core is pending on it.
pub fn detach(stream: Stream) -> io::Result<std::net::TcpStream> {
    use std::os::fd::{AsRawFd, BorrowedFd};
    // SAFETY: the descriptor belongs to `stream`, which outlives `fd`; the clone owns its own.
    let fd = unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) };
    let owned = fd.try_clone_to_owned()?;
    drop(stream);
    let plain = std::net::TcpStream::from(owned);
    plain.set_nonblocking(false)?;
    Ok(plain)
}

/// Whether a connection that sat idle is still usable: the peer has neither closed it nor sent
/// anything. An idle PostgreSQL or MySQL connection receives bytes only when the server is
/// about to close it (FATAL 57P01 at shutdown, an idle timeout), so either means "do not lend
/// this one". Never blocks: one non-blocking peek.
pub fn idle_stream_usable(stream: &Stream) -> bool {
    use std::os::fd::{AsRawFd, BorrowedFd};
    // SAFETY: the descriptor belongs to `stream`, which is borrowed for longer than `fd` lives.
    let fd = unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) };
    let sock = socket2::SockRef::from(&fd);
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    match sock.recv_with_flags(&mut byte, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
        Err(e) => e.kind() == io::ErrorKind::WouldBlock,
        // 0: the peer closed; more: unsolicited bytes.
        Ok(_) => false,
    }
}

/// Whether a read on `stream` would not wait: the peer sent bytes, closed, or the socket has
/// an error. Never blocks: one non-blocking peek. Lets a session sending a long request notice
/// an early answer (an error) without racing a read against its writes.
pub fn readable_now(stream: &Stream) -> bool {
    use std::os::fd::{AsRawFd, BorrowedFd};
    // SAFETY: the descriptor belongs to `stream`, which is borrowed for longer than `fd` lives.
    let fd = unsafe { BorrowedFd::borrow_raw(stream.as_raw_fd()) };
    let sock = socket2::SockRef::from(&fd);
    let mut byte = [std::mem::MaybeUninit::<u8>::uninit(); 1];
    match sock.recv_with_flags(&mut byte, libc::MSG_PEEK | libc::MSG_DONTWAIT) {
        Err(e) => e.kind() != io::ErrorKind::WouldBlock,
        Ok(_) => true,
    }
}
