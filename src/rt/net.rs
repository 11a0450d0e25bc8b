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

/// Whether an idle connection can no longer be used: its peer closed it, or sent something
/// nobody asked for (a server going away says why first, e.g. PostgreSQL's FATAL 57P01 at
/// shutdown), or the socket failed. Looks without reading or blocking, so a connection that
/// is fine is left exactly as it was.
pub fn idle_peer_gone(s: &Stream) -> bool {
    use std::os::fd::AsRawFd;
    let mut byte = 0u8;
    // SAFETY: `recv` on a descriptor the stream owns and keeps open for the duration of the
    // call, into a one-byte buffer that outlives it; MSG_PEEK leaves any data in the socket and
    // MSG_DONTWAIT keeps the call from blocking.
    let n = unsafe {
        libc::recv(s.as_raw_fd(), (&mut byte as *mut u8).cast(), 1, libc::MSG_PEEK | libc::MSG_DONTWAIT)
    };
    if n < 0 {
        let err = io::Error::last_os_error();
        return !matches!(err.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted);
    }
    true
}
