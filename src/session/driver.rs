//! The one client loop both wires run (#37): read until the client's next unit (a PostgreSQL
//! message, a MySQL command) is whole, hand it to the wire, and end the session wherever it
//! waits when its pool is killed, the router drains, or the client leaves. The wires supply only
//! what differs: how a unit is framed, what a held backend may do while the client is silent,
//! and how a unit is handled; [`ClientIo`] is the client's socket and buffers for both.
//!
//! Owns: the client socket's reads and writes between units, the idle read, the
//! idle-in-transaction limit's read and expiry, a fatal error's linger, large units' buffer
//! release, and the session's end (KILLs, the goodbye, what it held given back).
//! Must not know either protocol's framing.

use std::io;
use std::time::Duration;

use crate::metrics::Charge;
use crate::rt::{self, Event, Stream};
use crate::session::placement::Placed;
use crate::session::HandedSession;

/// Bytes buffered for the client before they are written out mid-result.
pub(super) const CLIENT_FLUSH_AT: usize = 64 * 1024;
/// Read size for client and backend sockets.
pub(super) const READ_CHUNK: usize = 16 * 1024;
/// Read size while a session waits between transactions: most requests fit, and thousands of
/// idle clients must not each hold a large buffer (a longer message just takes more reads).
pub(super) const IDLE_READ_CHUNK: usize = 1024;

/// Units at least this long are charged to the process's client buffer budget while they
/// arrive and until they were handled (#33); backend messages this long pass through in pieces.
pub(super) const PIECEWISE_AT: usize = 256 * 1024;

/// Copies of a large unit charged: the bytes read, and the copy queued for the backend (a unit
/// alone in the read buffer becomes the handled unit without a copy).
const COPIES: u64 = 2;

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
    /// The session moved to a new binary (#40): nothing more is said or read here.
    Moved,
    /// A MySQL client's `KILL [CONNECTION]` of this session.
    KilledByClient,
}

/// The client's socket and the buffers between it and the session.
pub(super) struct ClientIo {
    pub stream: Stream,
    /// Bytes read from the client; `pos` is where the first one not yet taken as a unit starts.
    pub buf: Vec<u8>,
    pub pos: usize,
    /// The unit being handled (a PostgreSQL message, tag byte first; a MySQL command payload).
    pub unit: Vec<u8>,
    /// Bytes buffered for the client.
    pub out: Vec<u8>,
    /// Largest unit accepted (the listener's `max_message_size`).
    pub max_msg: usize,
    /// The listener the client connected to (its index in the configuration).
    pub listener: u16,
    /// What the client's units took of the core's current turn (#33).
    pub share: rt::Share,
    /// A large unit being read and handled, charged to the process's budget (#33).
    pub held: Charge,
    /// Writes to the client so far: a statement's answer began to reach it once this moved
    /// ([`ClientIo::unanswered_since`], #40).
    pub writes: u32,
}

/// Where the client's output stood when a statement was sent ([`ClientIo::mark`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct OutMark {
    writes: u32,
    buffered: usize,
}

impl ClientIo {
    /// The buffers of a freshly logged-in client; `leftover` is what it sent past its login.
    pub fn new(stream: Stream, leftover: Vec<u8>, listener: usize, max_msg: usize, held: Charge) -> Self {
        Self {
            stream,
            buf: leftover,
            pos: 0,
            unit: Vec::new(),
            out: Vec::new(),
            max_msg,
            listener: listener as u16,
            share: rt::Share::default(),
            held,
            writes: 0,
        }
    }

    /// Where the client's output stands now, for [`ClientIo::unanswered_since`].
    pub fn mark(&self) -> OutMark {
        OutMark { writes: self.writes, buffered: self.out.len() }
    }

    /// Whether nothing was written or buffered for the client since `mark`: no byte of what
    /// came after reached it (#40).
    pub fn unanswered_since(&self, mark: OutMark) -> bool {
        self.writes == mark.writes && self.out.len() == mark.buffered
    }

    /// Counts a write to the client that went past its buffer.
    pub fn wrote_through(&mut self) {
        self.writes = self.writes.wrapping_add(1);
    }

    /// Writes and clears buffered client output.
    pub async fn flush(&mut self) -> Result<(), End> {
        if self.out.is_empty() {
            return Ok(());
        }
        self.wrote_through();
        let r = rt::write_all(&mut self.stream, &self.out).await;
        self.out.clear();
        r.map_err(|_| End::ClientGone)
    }

    /// Sends the fatal error buffered in `out` and ends the session in a way the error survives
    /// (see [`rt::linger_close`]): the client may still be sending what was refused.
    pub async fn fatal(&mut self) -> End {
        if self.flush().await.is_ok() {
            rt::linger_close(&mut self.stream, rt::now() + super::FATAL_LINGER).await;
        }
        End::Fatal
    }

    /// Reads from a client that holds no backend; [`End::Drained`] when the router starts
    /// draining. A small first read keeps idle buffers small; the rest of a big unit arrives in
    /// full-size chunks.
    pub async fn read_idle(&mut self, drain: &Event) -> Result<io::Result<usize>, End> {
        let chunk = if self.buf.is_empty() { IDLE_READ_CHUNK } else { READ_CHUNK };
        let (stream, buf) = (&mut self.stream, &mut self.buf);
        let read = rt::race(async { Some(rt::read_some(stream, buf, chunk).await) }, async {
            drain.wait().await;
            None
        });
        read.await.ok_or(End::Drained)
    }

    /// Reads from the client within `limit`; `Err` when the limit passed first.
    pub async fn read_within(&mut self, limit: Option<Duration>) -> Result<io::Result<usize>, rt::Elapsed> {
        rt::within(limit, rt::read_some(&mut self.stream, &mut self.buf, READ_CHUNK)).await
    }

    /// Charges the unit of `declared` bytes the read buffer starts with, as far as it arrived
    /// and the next read may take it, before that read; `false` when `budget` refuses it. A
    /// smaller unit charges nothing. The buffer gets room for the whole unit at once: grown read
    /// by read, it would double and copy, and the allocator keeps what it copied from.
    pub fn charge_incoming(&mut self, declared: usize, budget: u64) -> bool {
        if declared < PIECEWISE_AT {
            return true;
        }
        let have = self.buf.len();
        let want = COPIES * have.saturating_add(READ_CHUNK).min(declared) as u64;
        if !self.held.resize(want, budget) {
            return false;
        }
        self.buf.reserve_exact(declared.saturating_sub(have));
        true
    }

    /// A large unit was handled: its charge goes, and so do the buffers it grew to `at` bytes or
    /// more, rather than stay with the session; `false` when none was held (the wire then has
    /// nothing of its own to shrink either).
    pub fn release_large(&mut self, at: usize) -> bool {
        if self.held.bytes() == 0 {
            return false;
        }
        // The unit's bytes go first: the buffer then shrinks to what follows it.
        self.buf.drain(..self.pos);
        self.pos = 0;
        self.held.resize(0, 0);
        for buf in [&mut self.buf, &mut self.unit] {
            shrink_from(buf, at);
        }
        true
    }

    /// Hands the empty buffers to the core's spares before a possibly long wait for the client's
    /// next unit: an idle session holds none (the read waiting meanwhile selects a provided
    /// buffer), and the next unit takes spares back instead of allocating.
    pub fn release_idle_buffers(&mut self) {
        for buf in [&mut self.buf, &mut self.out, &mut self.unit] {
            if buf.is_empty() {
                rt::recycle(buf);
            }
        }
    }
}

/// Shrinks `buf` to a read's size when it grew to `at` bytes or more for a large unit.
pub(super) fn shrink_from(buf: &mut Vec<u8>, at: usize) {
    if buf.capacity() >= at {
        buf.shrink_to(READ_CHUNK);
    }
}

/// What a wire supplies to the loop, beside its backend side ([`Placed`]).
pub(super) trait Wire: Placed {
    /// Whether a client of the wire can KILL another's session (MySQL's `KILL CONNECTION`, #18).
    const CLIENT_KILLS: bool;
    /// Moves the client's next whole unit into `io.unit` (`false`: not whole yet). A unit that
    /// cannot be framed ends the session (`Err`), the client told why.
    async fn take_unit(&mut self) -> Result<bool, End>;
    /// Charges or refuses the large unit the unread bytes start with, before they are read on
    /// (`true`: it was refused, look at the buffer again).
    async fn over_budget(&mut self) -> Result<bool, End>;
    /// Waits for the client's next bytes while the session is where it is: idle, holding a
    /// backend, mid-batch. `None`: something else happened meanwhile; look at the buffer again.
    async fn read_client(&mut self) -> Result<Option<io::Result<usize>>, End>;
    /// Handles the unit in `io.unit` (and whatever it decides to handle with it).
    async fn handle(&mut self) -> Result<(), End>;
    /// Hands the wire's own empty buffers to the core's spares and parks what it holds nothing
    /// in (`session::lend`), before the session waits idle.
    fn park(&mut self);
    /// Queues the error of a session whose client stayed silent `ms` milliseconds inside a
    /// transaction.
    fn tell_idle_expired(&mut self, ms: u128);
    /// Queues the error a session the router ends is told: `killed`, by an operator's KILL of
    /// its pool; else the router drains.
    fn goodbye(&mut self, killed: bool);
    /// Gives back what the session holds beside its seat as it ends: a statement's connection
    /// on another protocol's pool, the client's statements.
    async fn leave(&mut self);
    /// The session for the new binary (#40), its client's socket `client` and `leftover` the
    /// bytes the client sent that no unit took yet; `None` when it cannot move (it holds a
    /// backend connection or state only this process has), and then it ends as a drain ends it.
    async fn freeze(&mut self, client: super::handover::Client, leftover: Vec<u8>) -> Option<HandedSession>;
}

/// Ends a session whose client stayed silent past `idle_transaction_timeout` while holding its
/// backend connection, which is closed (rolling the transaction back); the client is told why,
/// on either wire in a way the error survives a client that sends meanwhile (#37).
pub(super) async fn idle_transaction_expired<W: Wire>(w: &mut W) -> End {
    let ms = w.seat().drop_idle_transaction();
    w.tell_idle_expired(ms);
    w.parts().0.fatal().await
}

/// Ends the session as `end` says: the goodbye the client is owed, and everything the session
/// held given back, the cancel key last. A KILL closes the connection in use wherever it was
/// (on another protocol's pool too), before the session returns to its own.
async fn finish<W: Wire>(w: &mut W, end: End) {
    let (io, seat) = w.parts();
    if let End::KilledByClient = end {
        // The killer is answered once the client's socket is closed, as on the server.
        let _ = io.stream.shutdown(std::net::Shutdown::Both).await;
        seat.cancel.slot.mark_closed();
    }
    if let (End::Killed | End::KilledByClient, Some(conn)) = (&end, seat.conn.as_mut()) {
        // Killed wherever it was: a response may still be on its way, and a killed server
        // connection is gone on the server too, so the connection goes.
        conn.broken = true;
    }
    // The other ends owe no word: the client left, was told, was handed over, or was killed by
    // another client (closed without a word, as on the server).
    if matches!(end, End::Drained | End::Killed) {
        w.goodbye(matches!(end, End::Killed));
        let _ = w.parts().0.flush().await;
    }
    w.leave().await;
    w.release_backend(true).await;
    let seat = w.seat();
    seat.ctx.cancels.remove(seat.cancel.key);
}

/// Serves one client from its login (`login`: `None` when it did not log in) to its close.
pub(super) async fn serve<W: Wire, L: std::future::Future<Output = Option<W>>>(login: std::pin::Pin<Box<L>>) {
    // Boxed by the caller: the login's state is large and needed only until the greeting, and
    // a login future passed in place would stay in this future's every state, the idle
    // session's included (3.7 KB of a PostgreSQL session's 9.2, #39).
    let Some(mut w) = login.await else { return };
    let mut end = run(&mut w).await;
    if matches!(end, End::Drained) && w.seat().ctx.handing_over() && Box::pin(move_out(&mut w)).await {
        end = End::Moved;
    }
    // Boxed: its state is larger than the loop's, and in place it would size every idle
    // session's future (#39); one allocation per session, at its end.
    Box::pin(finish(&mut w, end)).await;
}

/// Gives an idle session to the binary taking over (#40); `false`: it stays, to end here.
async fn move_out<W: Wire>(w: &mut W) -> bool {
    let io = w.parts().0;
    let rt::Handed { fd, got, tls } = match rt::hand_off(&mut io.stream).await {
        Ok(taken) => taken,
        Err(e) => {
            tracing::debug!(error = %e, "a session could not be handed over");
            return false;
        }
    };
    let mut leftover = io.buf.split_off(io.pos.min(io.buf.len()));
    leftover.extend_from_slice(&got);
    let Some(handed) = w.freeze((fd, tls), leftover).await else { return false };
    if handed.state.len() > super::handover::STATE_MAX {
        tracing::warn!(bytes = handed.state.len(), "a session's state is too large to hand over; it ends here");
        return false;
    }
    w.seat().ctx.move_session(handed)
}

/// Waits for the client of a session whose backend says nothing meanwhile: idle (no backend),
/// the wait ends when the router drains; holding a backend, it lasts at most `limit`.
pub(super) async fn read_alone<W: Wire>(
    w: &mut W,
    idle: bool,
    limit: Option<Duration>,
) -> Result<Option<io::Result<usize>>, End> {
    if idle {
        let (io, seat) = w.parts();
        io.release_idle_buffers();
        seat.conn.park();
        w.park();
        let (io, seat) = w.parts();
        return io.read_idle(&seat.ctx.drain).await.map(Some);
    }
    match w.parts().0.read_within(limit).await {
        Ok(read) => Ok(Some(read)),
        // Boxed where it is taken, at most once per session: in place, its state would be
        // part of every idle session's wait (#39).
        Err(_) => Err(Box::pin(idle_transaction_expired(w)).await),
    }
}

/// Reads more of a unit being dropped or passed on: a client that closes mid-unit ends the
/// session, and so does one silent past `limit`.
pub(super) async fn read_more<W: Wire>(w: &mut W, limit: Option<Duration>) -> Result<(), End> {
    match w.parts().0.read_within(limit).await {
        Ok(Ok(n)) if n > 0 => Ok(()),
        Ok(_) => Err(End::ClientGone),
        Err(_) => Err(idle_transaction_expired(w).await),
    }
}

/// Runs the session until it ends.
pub(super) async fn run<W: Wire>(w: &mut W) -> End {
    loop {
        // A KILL ends the session wherever it waits; whatever was in flight is dropped with its
        // backend connection, which the release then closes.
        let seat = w.seat();
        let (pool, client) = (seat.pool.gate().killed(), W::CLIENT_KILLS.then(|| seat.cancel.slot.end()));
        let stepped = match client {
            Some(client) => rt::unless_set(&pool, rt::unless_set(&client, step(w)))
                .await
                .map(|by| by.unwrap_or(Some(End::KilledByClient))),
            None => rt::unless_set(&pool, step(w)).await,
        };
        match stepped {
            None => return End::Killed,
            Some(Some(end)) => return end,
            Some(None) => {}
        }
    }
}

/// Reads and handles one unit; `Some` when the session ends.
async fn step<W: Wire>(w: &mut W) -> Option<End> {
    match next_unit(w).await {
        Ok(true) => {}
        Ok(false) => return Some(End::ClientGone),
        Err(end) => return Some(end),
    }
    // Boxed: the handlers' state is large, and an idle session (most of them, most of the
    // time) should hold only what waiting for the next unit needs. The core's sessions reuse
    // the blocks (#39): allocating one per unit cost ~400 instructions.
    rt::rebox(|| w.handle()).await.err()
}

/// Reads until the client's next unit is whole (`false`: the client closed).
async fn next_unit<W: Wire>(w: &mut W) -> Result<bool, End> {
    loop {
        if w.take_unit().await? {
            return Ok(true);
        }
        let io = w.parts().0;
        io.buf.drain(..std::mem::take(&mut io.pos));
        if w.over_budget().await? {
            continue; // #33
        }
        w.parts().0.flush().await?;
        if let Some(read) = w.read_client().await? {
            if matches!(read, Ok(0) | Err(_)) {
                return Ok(false);
            }
        }
    }
}
