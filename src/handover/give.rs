//! The old process's side: listens on `general.handover_socket` on a plain thread; a new binary
//! of this user that says `Hello` in this format gets the listening sockets (each core's
//! duplicates, then the admin ones), then every session as the cores let go of it, then `Done`
//! once every core has stopped, after which the process exits as after a drain.
//!
//! A peer of another uid, or one of another format, is refused and the router keeps serving. If
//! the new process goes away mid-way, the sessions sent are its; the rest end here as a drain
//! ends them, and the process exits when the cores have stopped.

use std::os::fd::{AsFd, OwnedFd};
use std::os::linux::fs::MetadataExt;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crossbeam_channel::{unbounded, Receiver, RecvTimeoutError};

use super::unix::{peer_uid, Channel, UnixError};
use super::wire::{Frame, ListenerEntry, Listeners, Session, FORMAT_VERSION, MAGIC};
use crate::control::msg::{CoreListeners, Moving};
use crate::control::ControlHandle;

/// How long a connected peer has to say `Hello`.
const HELLO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long one frame may take to leave: a new process that stops reading is treated as gone.
const SEND_TIMEOUT: Duration = Duration::from_secs(10);
/// How long past `handover_wait` the thread waits for the cores to say they stopped.
const STOP_SLACK: Duration = Duration::from_secs(10);

/// Stops the admin server and returns its `/metrics` and API sockets (none when disabled).
pub type ReleaseAdmin = Box<dyn FnOnce() -> Vec<OwnedFd> + Send>;

/// Why the hand-over socket could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum GiveError {
    /// Creating, or removing a stale, socket file failed.
    #[error("general.handover_socket {path}: {source}")]
    Socket {
        /// The path.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
    /// Something that is not a socket is in the way.
    #[error("general.handover_socket {0} exists and is not a socket")]
    NotASocket(PathBuf),
    /// The thread could not start.
    #[error("cannot start the hand-over thread: {0}")]
    Thread(std::io::Error),
}

impl crate::error::ErrorCode for GiveError {
    fn code(&self) -> &'static str {
        match self {
            Self::Socket { .. } | Self::NotASocket(_) => "handover.socket",
            Self::Thread(_) => "handover.thread",
        }
    }
    fn origin(&self) -> crate::error::Origin {
        crate::error::Origin::Internal
    }
}

/// What the hand-over thread needs.
pub struct GiveSetup {
    /// `general.handover_socket`.
    pub path: PathBuf,
    /// The control plane, which asks the cores.
    pub control: ControlHandle,
    /// Stops the admin server and hands its sockets over.
    pub release_admin: ReleaseAdmin,
    /// The key sequences this process took over itself (#40): carried on, so that no later
    /// process issues a key a client from an earlier one still holds.
    pub inherited_seq: Vec<u32>,
}

/// The listening hand-over socket and its thread; [`Giver::stop`] ends both and removes the
/// file (unless another process has put its own socket there since).
pub struct Giver {
    path: PathBuf,
    /// Device and inode of the socket file we created.
    file: (u64, u64),
    stop: Arc<AtomicBool>,
    /// Set once a new process was accepted: the path is its from then on (it binds its own
    /// socket there, which may even get the old file's inode number back on tmpfs).
    given: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Giver {
    /// Stops listening (after a hand-over in progress has finished) and removes the file.
    pub fn stop(mut self) {
        self.shutdown();
    }

    fn shutdown(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            if !t.is_finished() {
                // Wake the blocking accept; it sees the flag and returns.
                let _ = UnixStream::connect(&self.path);
            }
            let _ = t.join();
        }
        let ours = std::fs::metadata(&self.path).is_ok_and(|m| (m.st_dev(), m.st_ino()) == self.file);
        if ours && !self.given.load(Ordering::Acquire) {
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl Drop for Giver {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// Creates the socket (mode 0600; a stale socket file is replaced) and starts the thread.
pub fn listen(setup: GiveSetup) -> Result<Giver, GiveError> {
    let path = setup.path.clone();
    let err = |source| GiveError::Socket { path: path.clone(), source };
    match std::fs::symlink_metadata(&path) {
        Ok(m) if m.file_type().is_socket() => std::fs::remove_file(&path).map_err(err)?,
        Ok(_) => return Err(GiveError::NotASocket(path)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(err(e)),
    }
    let listener = UnixListener::bind(&path).map_err(err)?;
    // Peers of another uid are refused by SO_PEERCRED as well; the mode keeps them from
    // connecting at all.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).map_err(err)?;
    let meta = std::fs::metadata(&path).map_err(err)?;
    let stop = Arc::new(AtomicBool::new(false));
    let given = Arc::new(AtomicBool::new(false));
    let (flag, handed) = (stop.clone(), given.clone());
    let thread = std::thread::Builder::new()
        .name("qp-handover".into())
        .spawn(move || serve(&listener, setup, &flag, &handed))
        .map_err(GiveError::Thread)?;
    tracing::info!(path = %path.display(), "hand-over socket listening");
    Ok(Giver { path, file: (meta.st_dev(), meta.st_ino()), stop, given, thread: Some(thread) })
}

fn serve(listener: &UnixListener, setup: GiveSetup, stop: &AtomicBool, given: &AtomicBool) {
    let GiveSetup { control, release_admin, inherited_seq, .. } = setup;
    let mut release_admin = Some(release_admin);
    for conn in listener.incoming() {
        if stop.load(Ordering::Acquire) {
            return;
        }
        let sock = match conn {
            Ok(s) => s,
            Err(e) => {
                tracing::warn!(error = %e, "hand-over accept failed");
                // The hand-over thread's own blocking loop, not a core or the control plane.
                #[allow(clippy::disallowed_methods)]
                std::thread::sleep(Duration::from_millis(50));
                continue;
            }
        };
        let Some(mut channel) = greet(sock, &control) else { continue };
        given.store(true, Ordering::Release);
        let release = release_admin.take().unwrap_or_else(|| Box::new(Vec::new));
        give(&mut channel, &control, release, &inherited_seq);
        // One hand-over per process: the cores have stopped, nothing is left to give.
        return;
    }
}

/// Checks the peer and its `Hello`; answers `Accept` and returns the connection when the
/// hand-over may go ahead, else refuses (the router keeps serving).
fn greet(sock: UnixStream, control: &ControlHandle) -> Option<Channel> {
    let _ = sock.set_read_timeout(Some(HELLO_TIMEOUT));
    let _ = sock.set_write_timeout(Some(SEND_TIMEOUT));
    let mut channel = Channel::new(sock);
    let refuse = |channel: &mut Channel, reason: String| {
        tracing::warn!(%reason, "hand-over refused; the router keeps serving");
        let _ = channel.send(&Frame::Refuse { reason }, &[]);
        None
    };
    // Read before anything is checked, so that the refusal is not lost to a reset: closing
    // with unread bytes would discard what the peer has not read yet.
    let hello = channel.recv();
    // SAFETY: getuid cannot fail.
    let uid = unsafe { libc::getuid() };
    match peer_uid(channel.socket()) {
        Ok(peer) if peer == uid => {}
        Ok(peer) => return refuse(&mut channel, format!("uid {peer} may not take over a router of uid {uid}")),
        Err(e) => return refuse(&mut channel, format!("cannot tell who connected: {e}")),
    }
    let pid = match hello {
        Ok((Frame::Hello { magic, .. }, _)) if magic != MAGIC => {
            return refuse(&mut channel, "not a QueryPilot hand-over (bad magic)".into())
        }
        Ok((Frame::Hello { version, .. }, _)) if version != FORMAT_VERSION => {
            return refuse(
                &mut channel,
                format!("the running router speaks hand-over format {FORMAT_VERSION}, this binary {version}"),
            )
        }
        Ok((Frame::Hello { pid, .. }, _)) => pid,
        Ok((other, _)) => return refuse(&mut channel, format!("expected Hello, got {other:?}")),
        Err(e) => return refuse(&mut channel, format!("no valid Hello: {e}")),
    };
    if control.is_draining() {
        return refuse(&mut channel, "the running router is shutting down".into());
    }
    if let Err(e) = channel.send(&Frame::Accept { pid: std::process::id() }, &[]) {
        tracing::warn!(error = %e, new_pid = pid, "hand-over abandoned: the new process is gone");
        return None;
    }
    tracing::info!(new_pid = pid, "handing over to a new binary");
    Some(channel)
}

/// The hand-over proper: the listeners, then the sessions as they come, then `Done`.
fn give(channel: &mut Channel, control: &ControlHandle, release_admin: ReleaseAdmin, inherited_seq: &[u32]) {
    let wait = control.current().map(|s| s.config.general.handover_wait).unwrap_or_default();
    let (tx, rx) = unbounded();
    let cores = match control.hand_over(tx, wait) {
        Ok(c) => c,
        Err(e) => {
            tracing::error!(error = %e, "hand-over failed: the control plane has stopped");
            return;
        }
    };
    let admin = release_admin();
    let count = cores.len();
    let (frame, fds) = listeners(cores, admin, inherited_seq);
    let borrowed: Vec<_> = fds.iter().map(|f| f.as_fd()).collect();
    let mut alive = match channel.send(&frame, &borrowed) {
        Ok(()) => true,
        Err(e) => gone(&e),
    };
    drop(fds);
    let moved = relay(channel, &rx, count, Instant::now() + wait + STOP_SLACK, &mut alive);
    if alive {
        if let Err(e) = channel.send(&Frame::Done, &[]) {
            gone(&e);
        }
    }
    tracing::info!(sessions = moved, complete = alive, "hand-over finished; this process exits");
}

/// The `Listeners` frame of the cores' answers, and the descriptors riding with it.
fn listeners(cores: Vec<CoreListeners>, admin: Vec<OwnedFd>, inherited_seq: &[u32]) -> (Frame, Vec<OwnedFd>) {
    let mut next_seq = inherited_seq.to_vec();
    let mut entries = Vec::new();
    let mut fds = Vec::new();
    for c in cores {
        let core = usize::from(c.core.0);
        if next_seq.len() <= core {
            next_seq.resize(core + 1, 0);
        }
        if let Some(seq) = next_seq.get_mut(core) {
            *seq = (*seq).max(c.next_seq);
        }
        for (listener, fd) in c.listeners {
            let Ok(listener) = u16::try_from(listener) else { continue };
            entries.push(ListenerEntry { core: c.core.0, listener });
            fds.push(fd);
        }
    }
    let with_admin = admin.len() == 2;
    if with_admin {
        fds.extend(admin);
    }
    (Frame::Listeners(Listeners { next_seq, entries, admin: with_admin }), fds)
}

/// Forwards sessions until every core of `cores` has stopped (or the deadline); returns how
/// many were sent.
fn relay(channel: &mut Channel, rx: &Receiver<Moving>, cores: usize, deadline: Instant, alive: &mut bool) -> usize {
    let (mut stopped, mut moved) = (0, 0);
    while stopped < cores {
        match rx.recv_deadline(deadline) {
            Ok(Moving::Stopped(_)) => stopped += 1,
            Ok(Moving::Client(c)) if *alive => {
                let frame = Frame::Session(Session {
                    protocol: c.protocol,
                    listener: u32::try_from(c.listener).unwrap_or(u32::MAX),
                    key: c.key,
                    state: c.state,
                    backend: c.backend.is_some(),
                });
                // The client's socket first, then the server connection it owns, if any.
                let fds: Vec<_> =
                    std::iter::once(c.client.as_fd()).chain(c.backend.as_ref().map(|b| b.as_fd())).collect();
                match channel.send(&frame, &fds) {
                    Ok(()) => moved += 1,
                    Err(e) => *alive = gone(&e),
                }
            }
            // Nobody to give it to: the client's connection closes here.
            Ok(Moving::Client(_)) => {}
            Err(RecvTimeoutError::Timeout) => {
                tracing::warn!(stopped, cores, "cores did not stop in time; ending the hand-over");
                break;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        }
    }
    moved
}

/// Logs that the new process went away mid-way; always `false` (no longer alive).
fn gone(e: &UnixError) -> bool {
    tracing::error!(error = %e, "the new process left the hand-over; sessions not yet sent end here");
    false
}
