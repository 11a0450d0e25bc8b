//! The new process's side (`querypilot --take-over PATH`): connects to the running router's
//! hand-over socket, says `Hello`, and on `Accept` receives the listening sockets, which its
//! cores accept on instead of binding ([`Taken::share`]); then a thread passes each session the
//! old process sends to the core that will serve it, until `Done`.

use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::Duration;

use socket2::SockRef;

use super::unix::{Channel, UnixError};
use super::wire::{Frame, Listeners, FORMAT_VERSION, MAGIC};
use crate::control::msg::{Inherited, MovingClient};
use crate::control::ControlHandle;

/// How long the old process may take to answer and send its listeners (its cores answer
/// within the control plane's reply timeout).
const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// Why taking over failed.
#[derive(Debug, thiserror::Error)]
pub enum TakeError {
    /// The socket could not be reached.
    #[error("cannot connect to the hand-over socket {path}: {source}")]
    Connect {
        /// The path.
        path: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The exchange failed.
    #[error("hand-over: {0}")]
    Exchange(#[from] UnixError),
    /// The running router said no; it keeps serving.
    #[error("the running router refused the hand-over: {0}")]
    Refused(String),
    /// The running router sent a frame out of turn.
    #[error("hand-over: expected {expected}, got {got}")]
    Unexpected {
        /// What was due.
        expected: &'static str,
        /// What came, as debug text.
        got: String,
    },
    /// The session thread could not start.
    #[error("cannot start the hand-over thread: {0}")]
    Thread(std::io::Error),
}

impl crate::error::ErrorCode for TakeError {
    fn code(&self) -> &'static str {
        match self {
            Self::Connect { .. } => "handover.connect",
            Self::Exchange(e) => crate::error::ErrorCode::code(e),
            Self::Refused(_) => "handover.refused",
            Self::Unexpected { .. } => "handover.unexpected",
            Self::Thread(_) => "handover.thread",
        }
    }
    fn origin(&self) -> crate::error::Origin {
        crate::error::Origin::Internal
    }
}

/// The listening sockets taken from the old process; the connection stays open for the
/// sessions that follow.
pub struct Taken {
    channel: Channel,
    listeners: Listeners,
    /// One per `listeners.entries`, in order.
    fds: Vec<OwnedFd>,
    admin: Option<[OwnedFd; 2]>,
}

/// Connects, says `Hello` and receives the listeners.
pub fn connect(path: &Path) -> Result<Taken, TakeError> {
    let sock =
        UnixStream::connect(path).map_err(|source| TakeError::Connect { path: path.display().to_string(), source })?;
    sock.set_read_timeout(Some(ANSWER_TIMEOUT)).map_err(UnixError::Io)?;
    let mut channel = Channel::new(sock);
    channel.send(&Frame::Hello { magic: MAGIC, version: FORMAT_VERSION, pid: std::process::id() }, &[])?;
    let old_pid = match channel.recv()?.0 {
        Frame::Accept { pid } => pid,
        Frame::Refuse { reason } => return Err(TakeError::Refused(reason)),
        other => return Err(TakeError::Unexpected { expected: "Accept", got: format!("{other:?}") }),
    };
    let (listeners, mut fds) = match channel.recv()? {
        (Frame::Listeners(l), fds) => (l, fds),
        (other, _) => return Err(TakeError::Unexpected { expected: "Listeners", got: format!("{other:?}") }),
    };
    let admin = if listeners.admin {
        let api = fds.pop();
        let metrics = fds.pop();
        metrics.zip(api).map(|(m, a)| [m, a])
    } else {
        None
    };
    // The old process sends sessions for as long as its busy ones take to finish.
    channel.socket().set_read_timeout(None).map_err(UnixError::Io)?;
    tracing::info!(old_pid, sockets = fds.len(), "took the listeners over");
    Ok(Taken { channel, listeners, fds, admin })
}

impl Taken {
    /// The `/metrics` and API sockets, when the old process served them on `metrics` and `api`
    /// (as configured: any port for port 0); else they close.
    pub fn admin(&mut self, metrics: SocketAddr, api: SocketAddr) -> Option<[OwnedFd; 2]> {
        let [m, a] = self.admin.take()?;
        let at = |fd: &OwnedFd| SockRef::from(fd).local_addr().ok().and_then(|a| a.as_socket());
        match (at(&m), at(&a)) {
            (Some(am), Some(aa)) if same_address(metrics, am) && same_address(api, aa) => Some([m, a]),
            found => {
                tracing::warn!(?found, %metrics, %api, "the old process's admin sockets are elsewhere; closed");
                None
            }
        }
    }

    /// Per key core number, the first sequence the old process's clients leave free: carried
    /// on to the next hand-over.
    pub fn next_seq(&self) -> Vec<u32> {
        self.listeners.next_seq.clone()
    }

    /// What each of `cores` cores takes: old core `j`'s sockets go to core `j % cores`; a socket
    /// for a listener `binds` does not have (or on another address) is closed. Each core issues
    /// keys from the highest sequence of the old cores it stands for.
    pub fn share(&mut self, cores: usize, binds: &[SocketAddr]) -> Vec<Inherited> {
        let cores = cores.max(1);
        let mut out: Vec<Inherited> = (0..cores)
            .map(|i| Inherited {
                listeners: binds.iter().map(|_| Vec::new()).collect(),
                next_seq: self
                    .listeners
                    .next_seq
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| j % cores == i)
                    .map(|(_, seq)| *seq)
                    .max(),
            })
            .collect();
        for (entry, fd) in self.listeners.entries.iter().zip(std::mem::take(&mut self.fds)) {
            let index = usize::from(entry.listener);
            let Some(bind) = binds.get(index) else {
                tracing::warn!(listener = index, "the old process's listener is not configured here; closed");
                continue;
            };
            match SockRef::from(&fd).local_addr().ok().and_then(|a| a.as_socket()) {
                Some(at) if same_address(*bind, at) => {}
                at => {
                    tracing::warn!(listener = index, ?at, %bind, "the old process's listener is elsewhere; closed");
                    continue;
                }
            }
            if let Some(slot) = out.get_mut(usize::from(entry.core) % cores).and_then(|c| c.listeners.get_mut(index)) {
                slot.push(fd);
            }
        }
        out
    }

    /// Starts the thread passing each session the old process sends to the core that serves
    /// its key, until `Done` (or the old process goes away).
    pub fn adopt_sessions(self, control: ControlHandle, listeners: usize) -> Result<JoinHandle<()>, TakeError> {
        let mut channel = self.channel;
        std::thread::Builder::new()
            .name("qp-takeover".into())
            .spawn(move || receive(&mut channel, &control, listeners))
            .map_err(TakeError::Thread)
    }
}

/// The configured address `bind` is served by a socket bound to `at` (any port for port 0).
fn same_address(bind: SocketAddr, at: SocketAddr) -> bool {
    bind.ip() == at.ip() && (bind.port() == 0 || bind.port() == at.port())
}

fn receive(channel: &mut Channel, control: &ControlHandle, listeners: usize) {
    let mut adopted = 0usize;
    loop {
        match channel.recv() {
            Ok((Frame::Session(s), fds)) => {
                // The client's socket, then the server connection the session owns, if any.
                let mut fds = fds.into_iter();
                let (Some(client), backend) = (fds.next(), fds.next()) else { continue };
                let Ok(listener) = usize::try_from(s.listener) else { continue };
                if listener >= listeners {
                    tracing::warn!(listener, "a handed-over client of a listener not configured here; closed");
                    continue;
                }
                let moving =
                    MovingClient { protocol: s.protocol, listener, key: s.key, state: s.state, client, backend };
                match control.adopt(moving) {
                    Ok(()) => adopted += 1,
                    Err(e) => tracing::warn!(error = %e, "a handed-over client could not be adopted; closed"),
                }
            }
            Ok((Frame::Done, _)) => {
                tracing::info!(adopted, "hand-over complete: the old process has stopped");
                return;
            }
            Ok((other, _)) => {
                tracing::error!(frame = ?other, adopted, "unexpected hand-over frame; no more sessions are taken");
                return;
            }
            Err(e) => {
                tracing::error!(error = %e, adopted, "the old process left the hand-over early");
                return;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::handover::wire::ListenerEntry;

    fn listening() -> (OwnedFd, SocketAddr) {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let at = l.local_addr().expect("addr");
        (l.into(), at)
    }

    fn taken(next_seq: Vec<u32>, entries: Vec<ListenerEntry>, fds: Vec<OwnedFd>) -> Taken {
        let (a, _b) = UnixStream::pair().expect("pair");
        Taken { channel: Channel::new(a), listeners: Listeners { next_seq, entries, admin: false }, fds, admin: None }
    }

    #[test]
    fn old_cores_map_onto_new_ones_modulo_their_count() {
        let (a, at_a) = listening();
        let (b, at_b) = listening();
        let (c, _) = listening();
        let (d, _) = listening();
        let entries = vec![
            ListenerEntry { core: 0, listener: 0 },
            ListenerEntry { core: 1, listener: 0 },
            ListenerEntry { core: 2, listener: 0 },
            ListenerEntry { core: 2, listener: 5 },
        ];
        let bind_a = SocketAddr::new(at_a.ip(), 0);
        let mut t = taken(vec![10, 70, 30], entries, vec![a, b, c, d]);
        let shared = t.share(2, &[bind_a]);
        assert_eq!(shared.len(), 2);
        assert_eq!(shared[0].listeners[0].len(), 2, "old cores 0 and 2 go to new core 0");
        assert_eq!(shared[1].listeners[0].len(), 1, "old core 1 goes to new core 1");
        assert_eq!(shared[0].next_seq, Some(30), "the highest of old cores 0 and 2");
        assert_eq!(shared[1].next_seq, Some(70));
        // A listener on another address than configured is closed, not served.
        let (e, _) = listening();
        let mut t = taken(vec![1], vec![ListenerEntry { core: 0, listener: 0 }], vec![e]);
        let shared = t.share(1, &[at_b]);
        assert!(shared[0].listeners[0].is_empty());
    }

    #[test]
    fn more_new_cores_than_old_leave_some_to_bind_their_own() {
        let (a, at) = listening();
        let mut t = taken(vec![5], vec![ListenerEntry { core: 0, listener: 0 }], vec![a]);
        let shared = t.share(3, &[at]);
        assert_eq!(shared.iter().map(|c| c.listeners[0].len()).collect::<Vec<_>>(), vec![1, 0, 0]);
        assert_eq!(shared.iter().map(|c| c.next_seq).collect::<Vec<_>>(), vec![Some(5), None, None]);
    }
}
