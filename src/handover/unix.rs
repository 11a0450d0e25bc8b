//! Frames with descriptors over a Unix stream socket: one `sendmsg` carries a frame's first bytes
//! and its descriptors as SCM_RIGHTS, the rest follows plainly; the receiver gathers bytes and
//! descriptors (MSG_CMSG_CLOEXEC, so none leaks into a child) until a whole frame is there and
//! gives the frame the descriptors it says it carries. Descriptors that arrive with a frame it
//! rejects are closed with it (they are `OwnedFd`s from the moment they arrive).

use std::collections::VecDeque;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use super::wire::{self, Frame, WireError, MAX_FDS};

/// Bytes read per `recvmsg`.
const CHUNK: usize = 64 << 10;

/// Why a frame could not be sent or received.
#[derive(Debug, thiserror::Error)]
pub enum UnixError {
    /// The socket failed (a timeout shows as `WouldBlock`/`TimedOut`).
    #[error("hand-over socket: {0}")]
    Io(#[from] io::Error),
    /// The peer sent something that is not a frame.
    #[error(transparent)]
    Wire(#[from] WireError),
    /// The peer closed the connection (inside a frame, when `partial`).
    #[error("the other process closed the hand-over connection{}", if *.partial { " inside a frame" } else { "" })]
    Closed {
        /// Whether part of a frame had arrived.
        partial: bool,
    },
    /// A frame came without the descriptors it says it carries, or more were passed to send.
    #[error("hand-over frame with {got} descriptors where {expected} belong")]
    Fds {
        /// What the frame says.
        expected: usize,
        /// What there is.
        got: usize,
    },
    /// The kernel dropped descriptors that did not fit the control buffer.
    #[error("hand-over descriptors were cut off (MSG_CTRUNC)")]
    Truncated,
}

impl crate::error::ErrorCode for UnixError {
    fn code(&self) -> &'static str {
        match self {
            Self::Io(_) => "handover.io",
            Self::Wire(e) => e.code(),
            Self::Closed { .. } => "handover.closed",
            Self::Fds { .. } | Self::Truncated => "handover.descriptors",
        }
    }
    fn origin(&self) -> crate::error::Origin {
        crate::error::Origin::Internal
    }
}

/// One end of a hand-over connection.
pub struct Channel {
    sock: UnixStream,
    buf: Vec<u8>,
    fds: VecDeque<OwnedFd>,
}

impl Channel {
    /// Frames over `sock` (blocking; its timeouts apply).
    pub fn new(sock: UnixStream) -> Self {
        Channel { sock, buf: Vec::new(), fds: VecDeque::new() }
    }

    /// The socket, for its options.
    pub fn socket(&self) -> &UnixStream {
        &self.sock
    }

    /// Sends `frame` with `fds`, which must be as many as the frame says it carries.
    pub fn send(&mut self, frame: &Frame, fds: &[BorrowedFd<'_>]) -> Result<(), UnixError> {
        if fds.len() != frame.fds() {
            return Err(UnixError::Fds { expected: frame.fds(), got: fds.len() });
        }
        let mut bytes = Vec::new();
        wire::encode(frame, &mut bytes)?;
        let raw: Vec<RawFd> = fds.iter().map(|f| f.as_raw_fd()).collect();
        let mut sent = send_with_fds(&self.sock, &bytes, &raw)?;
        while let Some(rest) = bytes.get(sent..).filter(|r| !r.is_empty()) {
            sent += send_with_fds(&self.sock, rest, &[])?;
        }
        Ok(())
    }

    /// Waits for the next frame and its descriptors. After an error the connection is of no
    /// further use.
    pub fn recv(&mut self) -> Result<(Frame, Vec<OwnedFd>), UnixError> {
        loop {
            if let Some((frame, used)) = wire::decode(&self.buf)? {
                self.buf.drain(..used);
                let expected = frame.fds();
                if self.fds.len() < expected {
                    let got = self.fds.len();
                    self.fds.clear();
                    return Err(UnixError::Fds { expected, got });
                }
                let fds = self.fds.drain(..expected).collect();
                return Ok((frame, fds));
            }
            let n = self.fill()?;
            if n == 0 {
                return Err(UnixError::Closed { partial: !self.buf.is_empty() });
            }
        }
    }

    /// One `recvmsg`: appends its bytes and queues its descriptors; returns the byte count.
    fn fill(&mut self) -> Result<usize, UnixError> {
        let mut data = vec![0u8; CHUNK];
        let mut control = vec![0u8; control_len(MAX_FDS)];
        let mut iov = libc::iovec { iov_base: data.as_mut_ptr().cast(), iov_len: data.len() };
        // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        let n = loop {
            // SAFETY: `msg` points at `iov` and `control`, both live and as long as they say.
            let n = unsafe { libc::recvmsg(self.sock.as_raw_fd(), &mut msg, libc::MSG_CMSG_CLOEXEC) };
            if n >= 0 {
                break n as usize;
            }
            let e = io::Error::last_os_error();
            if e.kind() != io::ErrorKind::Interrupted {
                return Err(e.into());
            }
        };
        // Owned first, so that they close on every error below.
        self.fds.extend(received_fds(&msg));
        if msg.msg_flags & libc::MSG_CTRUNC != 0 {
            self.fds.clear();
            return Err(UnixError::Truncated);
        }
        self.buf.extend_from_slice(data.get(..n).unwrap_or_default());
        Ok(n)
    }
}

fn control_len(fds: usize) -> usize {
    // SAFETY: CMSG_SPACE only computes a size.
    unsafe { libc::CMSG_SPACE((fds * std::mem::size_of::<RawFd>()) as u32) as usize }
}

/// The descriptors of every SCM_RIGHTS message in `msg`'s control buffer, now owned.
fn received_fds(msg: &libc::msghdr) -> Vec<OwnedFd> {
    let mut out = Vec::new();
    // SAFETY: `msg` was filled by recvmsg; the CMSG macros stay within msg_controllen.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(msg);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_RIGHTS {
                let data = libc::CMSG_DATA(cmsg).cast::<RawFd>();
                let len = (*cmsg).cmsg_len as usize - libc::CMSG_LEN(0) as usize;
                for i in 0..len / std::mem::size_of::<RawFd>() {
                    out.push(OwnedFd::from_raw_fd(std::ptr::read_unaligned(data.add(i))));
                }
            }
            cmsg = libc::CMSG_NXTHDR(msg, cmsg);
        }
    }
    out
}

/// One `sendmsg` of (a prefix of) `bytes`, with `fds` attached when any; returns the bytes sent.
fn send_with_fds(sock: &UnixStream, bytes: &[u8], fds: &[RawFd]) -> io::Result<usize> {
    let mut control = vec![0u8; if fds.is_empty() { 0 } else { control_len(fds.len()) }];
    let mut iov = libc::iovec { iov_base: bytes.as_ptr().cast_mut().cast(), iov_len: bytes.len() };
    // SAFETY: an all-zero msghdr is valid; the pointers set below outlive the call.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    if !fds.is_empty() {
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len() as _;
        // SAFETY: the control buffer has room for one header and `fds` (CMSG_SPACE above).
        unsafe {
            let cmsg = libc::CMSG_FIRSTHDR(&msg);
            (*cmsg).cmsg_level = libc::SOL_SOCKET;
            (*cmsg).cmsg_type = libc::SCM_RIGHTS;
            (*cmsg).cmsg_len = libc::CMSG_LEN(std::mem::size_of_val(fds) as u32) as _;
            std::ptr::copy_nonoverlapping(fds.as_ptr(), libc::CMSG_DATA(cmsg).cast::<RawFd>(), fds.len());
        }
    }
    loop {
        // SAFETY: `msg` points at live buffers; the kernel only reads them.
        let n = unsafe { libc::sendmsg(sock.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// The uid of the process at the other end of `sock` (SO_PEERCRED).
pub fn peer_uid(sock: &UnixStream) -> io::Result<u32> {
    // SAFETY: an all-zero ucred is valid; getsockopt writes at most `len` bytes into it.
    let mut cred: libc::ucred = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::ucred>() as libc::socklen_t;
    // SAFETY: `cred` and `len` are live and sized as the call expects.
    let rc = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_PEERCRED,
            (&mut cred as *mut libc::ucred).cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(cred.uid)
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::os::fd::AsFd;

    use super::*;
    use crate::handover::wire::{ListenerEntry, Listeners, Session};

    fn pipe_fd() -> (OwnedFd, std::fs::File) {
        let dir = tempfile::tempfile().expect("tempfile");
        (dir.try_clone().expect("dup").into(), dir)
    }

    #[test]
    fn frames_carry_their_descriptors_across() {
        let (a, b) = UnixStream::pair().expect("pair");
        let (mut tx, mut rx) = (Channel::new(a), Channel::new(b));
        let (fd1, mut file1) = pipe_fd();
        let (fd2, _file2) = pipe_fd();
        let listeners = Frame::Listeners(Listeners {
            next_seq: vec![3],
            entries: vec![ListenerEntry { core: 0, listener: 0 }, ListenerEntry { core: 0, listener: 1 }],
            admin: false,
        });
        tx.send(&listeners, &[fd1.as_fd(), fd2.as_fd()]).expect("send");
        let session = Frame::Session(Session {
            protocol: crate::config::Protocol::Postgres,
            listener: 1,
            key: crate::id::CancelKey { pid: 1, secret: 2 },
            state: vec![7; 200_000],
            backend: false,
        });
        tx.send(&session, &[fd1.as_fd()]).expect("send a frame larger than one read");
        tx.send(&Frame::Done, &[]).expect("send");
        let (got, fds) = rx.recv().expect("listeners");
        assert_eq!((got, fds.len()), (listeners, 2));
        // The received descriptor is the same open file: a write through it shows in the other.
        file1.write_all(b"x").expect("write");
        let mut through = std::fs::File::from(fds.into_iter().next().expect("fd"));
        through.write_all(b"y").expect("write through the received descriptor");
        let (got, fds) = rx.recv().expect("session");
        assert_eq!((got, fds.len()), (session, 1));
        assert_eq!(rx.recv().expect("done").0, Frame::Done);
        drop(tx);
        assert!(matches!(rx.recv(), Err(UnixError::Closed { partial: false })));
    }

    #[test]
    fn a_frame_without_its_descriptor_and_garbage_are_errors() {
        let (a, b) = UnixStream::pair().expect("pair");
        let mut rx = Channel::new(b);
        let mut bytes = Vec::new();
        let session = Frame::Session(Session {
            protocol: crate::config::Protocol::MySql,
            listener: 0,
            key: crate::id::CancelKey { pid: 1, secret: 2 },
            state: vec![],
            backend: false,
        });
        wire::encode(&session, &mut bytes).expect("encode");
        (&a).write_all(&bytes).expect("write without SCM_RIGHTS");
        assert!(matches!(rx.recv(), Err(UnixError::Fds { expected: 1, got: 0 })));
        (&a).write_all(&[0, 0, 0, 1, 42]).expect("write");
        assert!(matches!(rx.recv(), Err(UnixError::Wire(WireError::UnknownTag(42)))));
        let (a, b) = UnixStream::pair().expect("pair");
        let mut rx = Channel::new(b);
        (&a).write_all(&[0, 0, 0, 9, 1]).expect("write");
        drop(a);
        assert!(matches!(rx.recv(), Err(UnixError::Closed { partial: true })));
    }

    #[test]
    fn sending_the_wrong_number_of_descriptors_is_refused() {
        let (a, _b) = UnixStream::pair().expect("pair");
        let (fd, _file) = pipe_fd();
        assert!(matches!(Channel::new(a).send(&Frame::Done, &[fd.as_fd()]), Err(UnixError::Fds { .. })));
    }

    #[test]
    fn the_peer_is_this_user() {
        let (a, _b) = UnixStream::pair().expect("pair");
        // SAFETY: getuid cannot fail.
        assert_eq!(peer_uid(&a).expect("SO_PEERCRED"), unsafe { libc::getuid() });
    }
}
