//! The hand-over wire format, sans-IO: frames the old and the new process exchange over the
//! hand-over socket. Descriptors never appear here: they ride beside a frame as SCM_RIGHTS
//! ([`super::unix`]), and [`Frame::fds`] says how many belong to each.
//!
//! A frame is a big-endian `u32` body length, then the body: one tag byte and the tag's fields.
//! The header and the layouts of `Hello` and `Refuse` never change, so that any two versions can
//! at least say why they cannot talk; [`FORMAT_VERSION`] covers everything else, the session
//! state bytes included.
//!
//! ```text
//! new → old  Hello { magic, version, pid }
//! old → new  Refuse { reason }                        (and the old process keeps serving)
//!        or  Accept { pid }
//!            Listeners { next_seq[], entries[], admin }   + one fd per entry, then admin fds
//!            Session { protocol, listener, key, backend, state }   + the client's fd, then the
//!                                                      server connection's if `backend` (repeated)
//!            Done                                         (the old process has stopped)
//! ```

use crate::config::Protocol;
use crate::id::CancelKey;

/// The first bytes of a `Hello`: a peer that is not a QueryPilot hand-over is told apart from
/// one of another version.
pub const MAGIC: [u8; 8] = *b"QPHANDOV";

/// This binary's format of the hand-over frames and of the session state they carry. Bumped
/// whenever either changes: an old process refuses a new one speaking another version.
pub const FORMAT_VERSION: u32 = 2;

/// Largest frame body: a session's state (its prepared statements, settings) is far below it,
/// and a garbled length is refused before anything is allocated for it.
pub const MAX_FRAME: usize = 16 << 20;

/// Most descriptors one frame may carry: the kernel's limit for one `sendmsg` (SCM_MAX_FD).
pub const MAX_FDS: usize = 253;

/// Length of the frame header.
const HEADER: usize = 4;

/// One message of the hand-over.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Frame {
    /// The new process introduces itself.
    Hello {
        /// Must be [`MAGIC`].
        magic: [u8; 8],
        /// The new process's [`FORMAT_VERSION`].
        version: u32,
        /// The new process's pid, for the old one's log.
        pid: u32,
    },
    /// The old process goes ahead.
    Accept {
        /// The old process's pid, for the new one's log.
        pid: u32,
    },
    /// The old process will not hand over, and says why; it keeps serving.
    Refuse {
        /// Why, for the operator.
        reason: String,
    },
    /// The listening sockets, then the admin sockets, ride with this frame.
    Listeners(Listeners),
    /// One client connection (its descriptor rides with the frame).
    Session(Session),
    /// Every core of the old process has stopped: nothing more comes.
    Done,
}

/// What the `Listeners` frame says about the descriptors riding with it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Listeners {
    /// Per cancel-key core number (a key's bits 24..30), the first sequence number the new
    /// process may issue with it: above every key a client of the old process holds.
    pub next_seq: Vec<u32>,
    /// One per listener descriptor, in descriptor order: which core of the old process
    /// accepted on it, and for which listener (by config index).
    pub entries: Vec<ListenerEntry>,
    /// Whether the `/metrics` and admin API sockets follow the listeners (two more descriptors).
    pub admin: bool,
}

/// Where one listener descriptor came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListenerEntry {
    /// The old process's core.
    pub core: u16,
    /// The listener, by config index.
    pub listener: u16,
}

/// A client connection on its way (see `session::HandedSession`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    /// Its listener's protocol.
    pub protocol: Protocol,
    /// Its listener, by config index.
    pub listener: u32,
    /// The cancel key the client holds.
    pub key: CancelKey,
    /// The session's own encoding of its state (opaque here).
    pub state: Vec<u8>,
    /// The server connection the session owns rides along, after the client's socket.
    pub backend: bool,
}

impl Frame {
    /// How many descriptors ride with this frame.
    pub fn fds(&self) -> usize {
        match self {
            Frame::Listeners(l) => l.entries.len() + if l.admin { 2 } else { 0 },
            Frame::Session(s) => 1 + usize::from(s.backend),
            _ => 0,
        }
    }

    fn tag(&self) -> u8 {
        match self {
            Frame::Hello { .. } => 1,
            Frame::Accept { .. } => 2,
            Frame::Refuse { .. } => 3,
            Frame::Listeners(_) => 4,
            Frame::Session(_) => 5,
            Frame::Done => 6,
        }
    }
}

/// Why bytes are not a frame, or a frame cannot be written.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The announced body is larger than [`MAX_FRAME`].
    #[error("hand-over frame of {0} bytes is over the {MAX_FRAME}-byte limit")]
    TooLarge(usize),
    /// A frame with no tag byte.
    #[error("empty hand-over frame")]
    Empty,
    /// A tag this version does not know.
    #[error("unknown hand-over frame tag {0}")]
    UnknownTag(u8),
    /// The body ends inside a field.
    #[error("hand-over frame ends inside its {0}")]
    Truncated(&'static str),
    /// The body goes on after its last field.
    #[error("{0} bytes after the end of a hand-over frame")]
    Trailing(usize),
    /// A refusal's reason is not UTF-8.
    #[error("hand-over refusal reason is not UTF-8")]
    Utf8,
    /// A protocol number this version does not know.
    #[error("unknown protocol {0} in a hand-over session")]
    Protocol(u8),
    /// A yes/no field that is neither.
    #[error("hand-over session flag {0} is neither 0 nor 1")]
    Flag(u8),
    /// More descriptors than one frame may carry, or a count over its field's width.
    #[error("a hand-over frame cannot carry {0} entries")]
    TooMany(usize),
}

impl crate::error::ErrorCode for WireError {
    fn code(&self) -> &'static str {
        match self {
            Self::TooLarge(_) => "handover.frame_too_large",
            Self::TooMany(_) => "handover.too_many",
            _ => "handover.malformed",
        }
    }
    fn origin(&self) -> crate::error::Origin {
        crate::error::Origin::Internal
    }
}

/// Appends `frame` to `out`.
pub fn encode(frame: &Frame, out: &mut Vec<u8>) -> Result<(), WireError> {
    if frame.fds() > MAX_FDS {
        return Err(WireError::TooMany(frame.fds()));
    }
    let start = out.len();
    out.extend_from_slice(&[0; HEADER]);
    out.push(frame.tag());
    match frame {
        Frame::Hello { magic, version, pid } => {
            out.extend_from_slice(magic);
            out.extend_from_slice(&version.to_be_bytes());
            out.extend_from_slice(&pid.to_be_bytes());
        }
        Frame::Accept { pid } => out.extend_from_slice(&pid.to_be_bytes()),
        Frame::Refuse { reason } => put_bytes(out, reason.as_bytes())?,
        Frame::Listeners(l) => {
            put_len16(out, l.next_seq.len())?;
            for seq in &l.next_seq {
                out.extend_from_slice(&seq.to_be_bytes());
            }
            put_len16(out, l.entries.len())?;
            for e in &l.entries {
                out.extend_from_slice(&e.core.to_be_bytes());
                out.extend_from_slice(&e.listener.to_be_bytes());
            }
            out.push(u8::from(l.admin));
        }
        Frame::Session(s) => {
            out.push(match s.protocol {
                Protocol::Postgres => 0,
                Protocol::MySql => 1,
            });
            out.extend_from_slice(&s.listener.to_be_bytes());
            out.extend_from_slice(&s.key.pid.to_be_bytes());
            out.extend_from_slice(&s.key.secret.to_be_bytes());
            out.push(u8::from(s.backend));
            put_bytes(out, &s.state)?;
        }
        Frame::Done => {}
    }
    let body = out.len() - start - HEADER;
    if body > MAX_FRAME {
        out.truncate(start);
        return Err(WireError::TooLarge(body));
    }
    let len = (body as u32).to_be_bytes();
    out.get_mut(start..start + HEADER).ok_or(WireError::Empty)?.copy_from_slice(&len);
    Ok(())
}

fn put_len16(out: &mut Vec<u8>, n: usize) -> Result<(), WireError> {
    let n16 = u16::try_from(n).map_err(|_| WireError::TooMany(n))?;
    out.extend_from_slice(&n16.to_be_bytes());
    Ok(())
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) -> Result<(), WireError> {
    let n = u32::try_from(bytes.len()).map_err(|_| WireError::TooLarge(bytes.len()))?;
    out.extend_from_slice(&n.to_be_bytes());
    out.extend_from_slice(bytes);
    Ok(())
}

/// Decodes the first frame of `buf`: `Ok(None)` until all of it is there, else the frame and
/// how many bytes it took. A length over [`MAX_FRAME`] is refused from the header alone.
pub fn decode(buf: &[u8]) -> Result<Option<(Frame, usize)>, WireError> {
    let Some(header) = buf.get(..HEADER) else { return Ok(None) };
    let mut len = [0; HEADER];
    len.copy_from_slice(header);
    let len = u32::from_be_bytes(len) as usize;
    if len > MAX_FRAME {
        return Err(WireError::TooLarge(len));
    }
    let Some(body) = buf.get(HEADER..HEADER + len) else { return Ok(None) };
    let mut r = Reader(body);
    let frame = match r.u8("tag").map_err(|_| WireError::Empty)? {
        1 => Frame::Hello { magic: r.array("magic")?, version: r.u32("version")?, pid: r.u32("pid")? },
        2 => Frame::Accept { pid: r.u32("pid")? },
        3 => {
            let reason = r.bytes("reason")?;
            Frame::Refuse { reason: String::from_utf8(reason.to_vec()).map_err(|_| WireError::Utf8)? }
        }
        4 => Frame::Listeners(listeners(&mut r)?),
        5 => Frame::Session(session(&mut r)?),
        6 => Frame::Done,
        tag => return Err(WireError::UnknownTag(tag)),
    };
    if !r.0.is_empty() {
        return Err(WireError::Trailing(r.0.len()));
    }
    if frame.fds() > MAX_FDS {
        return Err(WireError::TooMany(frame.fds()));
    }
    Ok(Some((frame, HEADER + len)))
}

fn listeners(r: &mut Reader<'_>) -> Result<Listeners, WireError> {
    let n = usize::from(r.u16("core count")?);
    let next_seq = (0..n).map(|_| r.u32("sequence")).collect::<Result<_, _>>()?;
    let n = usize::from(r.u16("listener count")?);
    if n > MAX_FDS {
        return Err(WireError::TooMany(n));
    }
    let entries = (0..n)
        .map(|_| Ok(ListenerEntry { core: r.u16("listener core")?, listener: r.u16("listener index")? }))
        .collect::<Result<_, WireError>>()?;
    let admin = match r.u8("admin flag")? {
        0 => false,
        1 => true,
        _ => return Err(WireError::Truncated("admin flag")),
    };
    Ok(Listeners { next_seq, entries, admin })
}

fn session(r: &mut Reader<'_>) -> Result<Session, WireError> {
    let protocol = match r.u8("protocol")? {
        0 => Protocol::Postgres,
        1 => Protocol::MySql,
        other => return Err(WireError::Protocol(other)),
    };
    let listener = r.u32("listener")?;
    let key = CancelKey { pid: r.u32("key")? as i32, secret: r.u32("key")? as i32 };
    let backend = match r.u8("backend")? {
        0 => false,
        1 => true,
        other => return Err(WireError::Flag(other)),
    };
    let state = r.bytes("state")?.to_vec();
    Ok(Session { protocol, listener, key, state, backend })
}

/// A cursor over a frame body whose every read is checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &'static str) -> Result<&'a [u8], WireError> {
        if self.0.len() < n {
            return Err(WireError::Truncated(what));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self, what: &'static str) -> Result<[u8; N], WireError> {
        let mut out = [0; N];
        out.copy_from_slice(self.take(N, what)?);
        Ok(out)
    }

    fn u8(&mut self, what: &'static str) -> Result<u8, WireError> {
        Ok(u8::from_be_bytes(self.array(what)?))
    }

    fn u16(&mut self, what: &'static str) -> Result<u16, WireError> {
        Ok(u16::from_be_bytes(self.array(what)?))
    }

    fn u32(&mut self, what: &'static str) -> Result<u32, WireError> {
        Ok(u32::from_be_bytes(self.array(what)?))
    }

    fn bytes(&mut self, what: &'static str) -> Result<&'a [u8], WireError> {
        let n = self.u32(what)? as usize;
        self.take(n, what)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples() -> Vec<Frame> {
        vec![
            Frame::Hello { magic: MAGIC, version: FORMAT_VERSION, pid: 4242 },
            Frame::Accept { pid: 17 },
            Frame::Refuse { reason: "the running router speaks hand-over format 2, this binary 1".into() },
            Frame::Listeners(Listeners {
                next_seq: vec![5, 1 << 20],
                entries: vec![ListenerEntry { core: 0, listener: 0 }, ListenerEntry { core: 1, listener: 2 }],
                admin: true,
            }),
            Frame::Listeners(Listeners::default()),
            Frame::Session(Session {
                protocol: Protocol::MySql,
                listener: 3,
                key: CancelKey { pid: CancelKey::make_pid(crate::id::CoreId(1), 9), secret: -77 },
                state: (0..=255).collect(),
                backend: true,
            }),
            Frame::Session(Session {
                protocol: Protocol::Postgres,
                listener: 0,
                key: CancelKey { pid: 1, secret: 2 },
                state: Vec::new(),
                backend: false,
            }),
            Frame::Done,
        ]
    }

    fn stream() -> Vec<u8> {
        let mut out = Vec::new();
        for f in samples() {
            encode(&f, &mut out).expect("encodes");
        }
        out
    }

    #[test]
    fn every_frame_round_trips() {
        for f in samples() {
            let mut out = Vec::new();
            encode(&f, &mut out).expect("encodes");
            assert_eq!(decode(&out), Ok(Some((f.clone(), out.len()))), "{f:?}");
        }
    }

    #[test]
    fn a_stream_split_at_every_offset_decodes_to_the_same_frames() {
        let bytes = stream();
        for cut in 0..=bytes.len() {
            let mut buf = Vec::new();
            let mut frames = Vec::new();
            for chunk in [&bytes[..cut], &bytes[cut..]] {
                buf.extend_from_slice(chunk);
                while let Some((f, used)) = decode(&buf).expect("valid stream") {
                    frames.push(f);
                    buf.drain(..used);
                }
            }
            assert_eq!(frames, samples(), "split at {cut}");
            assert!(buf.is_empty());
        }
    }

    #[test]
    fn an_oversized_length_is_refused_from_the_header_alone() {
        let len = (MAX_FRAME as u32 + 1).to_be_bytes();
        assert_eq!(decode(&len), Err(WireError::TooLarge(MAX_FRAME + 1)));
        let big = Frame::Session(Session {
            protocol: Protocol::Postgres,
            listener: 0,
            key: CancelKey { pid: 1, secret: 1 },
            state: vec![0; MAX_FRAME],
            backend: false,
        });
        let mut out = vec![9];
        assert!(matches!(encode(&big, &mut out), Err(WireError::TooLarge(_))));
        assert_eq!(out, vec![9], "a refused frame leaves nothing behind");
    }

    #[test]
    fn garbled_frames_are_typed_errors() {
        let frame = |body: &[u8]| {
            let mut out = (body.len() as u32).to_be_bytes().to_vec();
            out.extend_from_slice(body);
            out
        };
        assert_eq!(decode(&frame(&[])), Err(WireError::Empty));
        assert_eq!(decode(&frame(&[99])), Err(WireError::UnknownTag(99)));
        assert_eq!(decode(&frame(&[1, b'Q'])), Err(WireError::Truncated("magic")));
        assert_eq!(decode(&frame(&[2, 0, 0, 0, 1, 0])), Err(WireError::Trailing(1)));
        assert_eq!(decode(&frame(&[3, 0, 0, 0, 1, 0xff])), Err(WireError::Utf8));
        assert_eq!(decode(&frame(&[3, 0xff, 0xff, 0xff, 0xff])), Err(WireError::Truncated("reason")));
        assert_eq!(decode(&frame(&[5, 7])), Err(WireError::Protocol(7)));
        assert_eq!(decode(&frame(&[4, 0, 0, 0xff, 0xff])), Err(WireError::TooMany(0xffff)));
        assert_eq!(decode(&frame(&[4, 0, 0, 0, 0, 2])), Err(WireError::Truncated("admin flag")));
    }

    #[test]
    fn every_mutation_and_truncation_decodes_or_errs_without_panicking() {
        let bytes = stream();
        for i in 0..bytes.len() {
            let _ = decode(&bytes[i..]);
            for bit in 0..8 {
                let mut m = bytes.clone();
                m[i] ^= 1 << bit;
                let mut rest = &m[..];
                while let Ok(Some((_, used))) = decode(rest) {
                    rest = &rest[used..];
                }
            }
        }
    }

    #[test]
    fn the_committed_fuzz_seed_is_this_format_frame_for_frame() {
        // Written by fuzz/seeds/make_seeds.py from the layout in the module header: a change of
        // the layout without a new FORMAT_VERSION shows here.
        let mut rest: &[u8] = include_bytes!("../../fuzz/seeds/handover_wire/exchange");
        let mut frames = Vec::new();
        while let Some((f, used)) = decode(rest).expect("the seed decodes") {
            frames.push(f);
            rest = &rest[used..];
        }
        assert!(rest.is_empty());
        let key = CancelKey { pid: CancelKey::make_pid(crate::id::CoreId(1), 7), secret: 42 };
        assert_eq!(
            frames,
            vec![
                Frame::Hello { magic: MAGIC, version: 2, pid: 4242 },
                Frame::Accept { pid: 17 },
                Frame::Listeners(Listeners {
                    next_seq: vec![5, 70],
                    entries: vec![ListenerEntry { core: 0, listener: 0 }, ListenerEntry { core: 1, listener: 0 }],
                    admin: true,
                }),
                Frame::Session(Session {
                    protocol: Protocol::Postgres,
                    listener: 0,
                    key,
                    state: b"abc".to_vec(),
                    backend: true,
                }),
                Frame::Done,
            ]
        );
    }

    #[test]
    fn too_many_descriptors_cannot_be_encoded() {
        let l = Listeners {
            next_seq: vec![],
            entries: vec![ListenerEntry { core: 0, listener: 0 }; MAX_FDS - 1],
            admin: true,
        };
        assert_eq!(encode(&Frame::Listeners(l), &mut Vec::new()), Err(WireError::TooMany(MAX_FDS + 1)));
    }
}
