//! The response side of a MySQL session, as I/O around [`Exchange`]: reads backend packets,
//! relays them to the client untouched (sequence ids included) when the exchange says so,
//! and does what else it asks (stream the client's file, refuse one). A packet out of
//! sequence, like a broken one, means the backend connection is lost.
//!
//! A server's LOCAL INFILE request is relayed only for a statement the session let through as
//! [`Grammar::LoadLocal`] (#4); the client's file then streams to the backend packet piece by
//! packet piece. Any other request is refused.
//!
//! Payloads outside a command's response (prepare answers, SHOW WARNINGS) are read whole
//! with [`Session::backend_payload`].

use super::exchange::{is_eof, status_of, Action, Exchange};
pub(super) use super::exchange::{Grammar, Outcome};
use super::{large, End, QueryTimer, Session, CLIENT_FLUSH_AT, READ_CHUNK};
use crate::pool::{Conn, ConnInfo, MyInfo};
use crate::protocol::mysql::capability::CLIENT_LOCAL_FILES;
use crate::protocol::mysql::errcode::{
    ER_CLIENT_INTERACTION_TIMEOUT, ER_NET_PACKETS_OUT_OF_ORDER, ER_NET_PACKET_TOO_LARGE, ER_NOT_ALLOWED_COMMAND,
};
use crate::protocol::mysql::framer::HEADER_LEN;
use crate::protocol::mysql::infile::FileStream;
use crate::protocol::mysql::response::SERVER_SESSION_STATE_CHANGED;
use crate::protocol::mysql::tracking::relay_ok;
use crate::protocol::mysql::DecodeError;
use crate::protocol::mysql::MAX_PACKET_PAYLOAD;
use crate::protocol::mysql::{decode_packet_header, decode_wire_packet, encode_packets, Packet, WirePacket};
use crate::rt;
use crate::session::client_error::MyClientError;
use crate::session::error::RelayError;
use crate::session::give_back::close;

/// Payload bytes of a packet kept for inspection; first packets of responses (OK, ERR, EOF,
/// column counts, prepare OK) are always shorter.
const HEAD_MAX: usize = 4096;

/// One logical backend payload: its first sequence id, total length and leading bytes.
pub(super) struct Pkt {
    pub seq: u8,
    pub len: usize,
    pub head: Vec<u8>,
}

impl Pkt {
    /// The payload's first byte.
    pub fn first(&self) -> Option<u8> {
        self.head.first().copied()
    }

    /// An EOF packet (0xFE, shorter than 9 bytes).
    pub fn is_eof(&self) -> bool {
        self.first() == Some(0xFE) && self.len < 9
    }

    /// An ERR packet.
    pub fn is_err(&self) -> bool {
        self.first() == Some(0xFF)
    }

    /// The whole payload, when it was small enough to be kept.
    pub fn whole(&self) -> Option<&[u8]> {
        (self.len == self.head.len()).then_some(&self.head[..])
    }

    /// The whole payload, or why it was not kept.
    pub fn whole_or_err(&self) -> Result<&[u8], RelayError> {
        self.whole()
            .ok_or_else(|| RelayError::Malformed(format!("a {}-byte payload where a short one was due", self.len)))
    }
}

/// The header of the backend packet at the read position, read once from the buffer and handed
/// on to whatever takes the packet: it was decoded three times a packet (whether it is long,
/// whether it is whole, and where it is taken), ~13 of the ~270 instructions relaying one (#39).
#[derive(Debug, Clone, Copy)]
pub(super) struct Head {
    /// Payload length.
    len: usize,
    /// Sequence id.
    seq: u8,
    /// The whole packet is buffered (else only its header and first payload byte are, of a
    /// packet passed on in pieces).
    whole: bool,
}

/// How a client's LOCAL INFILE transfer ended before its last packet.
#[derive(Debug)]
enum BrokeOff {
    /// The client closed its connection.
    Gone,
    /// The client sent nothing for `idle_transaction_timeout`.
    Silent,
    /// A packet out of sequence or over the size limit.
    Bad(DecodeError),
}

/// The whole backend packet at `pos` of `rbuf`, which [`Session::next_backend_packet`] made
/// sure is there.
pub(super) fn packet_at(rbuf: &[u8], pos: usize) -> Result<WirePacket<'_>, RelayError> {
    let rest = rbuf.get(pos..).ok_or_else(|| RelayError::Malformed("read position past the buffered bytes".into()))?;
    decode_wire_packet(rest, MAX_PACKET_PAYLOAD)
        .map_err(|e| RelayError::Malformed(e.to_string()))?
        .ok_or_else(|| RelayError::Malformed("an incomplete packet".into()))
}

/// The head of the packet `rest` starts with once it is there: whole, or for a packet of
/// `piecewise` payload bytes or more its header and first payload byte. A header's three
/// length bytes say at most [`MAX_PACKET_PAYLOAD`], so no length is refused here.
fn head_at(rest: &[u8], piecewise: usize) -> Option<Head> {
    let (len, seq) = decode_packet_header(rest)?;
    let buffered = rest.len().saturating_sub(HEADER_LEN);
    let here = if len >= piecewise { buffered > 0 } else { buffered >= len };
    here.then_some(Head { len, seq, whole: len < piecewise })
}

/// The packet `head` describes at `pos` of `rbuf`, whole there, without decoding its header again.
fn packet_of(rbuf: &[u8], pos: usize, head: Head) -> Result<WirePacket<'_>, RelayError> {
    let wire = rbuf.get(pos..).and_then(|rest| rest.get(..HEADER_LEN + head.len));
    let wire = wire.ok_or_else(|| RelayError::Malformed("an incomplete packet".into()))?;
    let payload = wire.get(HEADER_LEN..).unwrap_or_default();
    Ok(WirePacket { packet: Packet { seq: head.seq, payload }, wire })
}

/// Hands `ex` the packets buffered whole in `rbuf` from `*pos` on, the first of `head`, moving
/// `*pos` past each it says to forward unchanged (noting an EOF's state change in `info`, see
/// [`note_owed`]), so that the caller relays them as one copy: a result's column count,
/// definitions and rows mostly arrive in one read, and taking them packet by packet back
/// through `drive` was ~100 instructions a packet (#39). Stops at the first packet that asks for
/// more than that (an OK, a file request or refusal: `*pos` stays before it), after one that
/// ends a result or the response, before a packet not buffered whole, or once `room` bytes
/// were forwarded (the client output is then due to be written). Returns the last packet
/// taken and its action.
fn take_run<'b>(
    rbuf: &'b [u8],
    pos: &mut usize,
    mut head: Head,
    ex: &mut Exchange,
    mut info: Option<&mut MyInfo>,
    room: usize,
) -> Result<(Action, Packet<'b>), RelayError> {
    let from = *pos;
    loop {
        let WirePacket { packet, wire } = packet_of(rbuf, *pos, head)?;
        let action = ex.on_backend(&packet)?;
        if !matches!(action, Action::Forward | Action::ForwardEnd | Action::SendFile) {
            return Ok((action, packet));
        }
        if let (Some(info), true) = (info.as_deref_mut(), is_eof(packet.payload)) {
            note_owed(info, packet.payload, true);
        }
        *pos += wire.len();
        let more = action == Action::Forward && !ex.done() && *pos - from < room;
        match head_at(rbuf.get(*pos..).unwrap_or_default(), large::PIECEWISE_AT).filter(|h| more && h.whole) {
            Some(next) => head = next,
            None => return Ok((action, packet)),
        }
    }
}

/// The session has no backend connection to read or write: built only then, since a
/// `RelayError` made ready for every packet and dropped unused was ~2.5% of a point select's
/// work (#39).
pub(super) fn no_backend() -> RelayError {
    RelayError::BackendClosed(None)
}

/// A lost backend socket, with its io error.
fn lost(e: std::io::Error) -> RelayError {
    RelayError::BackendClosed(Some(e))
}

impl Session {
    /// Reads the next logical payload from the backend, forwarding its packets to the client
    /// when `forward`.
    pub(super) async fn backend_payload(&mut self, forward: bool) -> Result<Pkt, RelayError> {
        let p = self.read_payload(forward).await?;
        if forward {
            self.flush_full().await?;
        }
        Ok(p)
    }

    /// Writes the client output out once it is large, mid-response.
    async fn flush_full(&mut self) -> Result<(), RelayError> {
        if self.io.out.len() >= CLIENT_FLUSH_AT {
            self.io.flush().await.map_err(|_| RelayError::ClientClosed(None))?;
        }
        Ok(())
    }

    /// [`Session::backend_payload`] without the flush.
    async fn read_payload(&mut self, forward: bool) -> Result<Pkt, RelayError> {
        let mut pkt = Pkt { seq: self.link.seq.unwrap_or(0), len: 0, head: Vec::new() };
        loop {
            let head = self.next_backend_packet().await?;
            let conn = self.seat.conn.as_ref().ok_or_else(no_backend)?;
            let WirePacket { packet, wire } = packet_of(&conn.rbuf, self.link.pos, head)?;
            if let Some(want) = self.link.seq.filter(|want| *want != packet.seq) {
                return Err(out_of_sequence(want, packet.seq));
            }
            if pkt.len == 0 && pkt.head.is_empty() {
                pkt.seq = packet.seq;
            }
            self.link.seq = Some(packet.seq.wrapping_add(1));
            pkt.len += packet.payload.len();
            let room = HEAD_MAX.saturating_sub(pkt.head.len());
            pkt.head.extend(packet.payload.iter().take(room));
            if forward {
                self.io.out.extend_from_slice(wire);
            }
            self.link.pos += wire.len();
            if !packet.is_continued() {
                return Ok(pkt);
            }
        }
    }

    /// Waits for one whole backend packet at `self.link.pos`, and returns its header. Past the
    /// query deadline the running statement is killed and reading goes on for another
    /// `query_timeout`; past that the backend counts as lost.
    pub(super) async fn next_backend_packet(&mut self) -> Result<Head, RelayError> {
        self.next_backend_head(usize::MAX).await
    }

    /// [`Session::next_backend_packet`], except that a packet of `piecewise` payload bytes or
    /// more is there as soon as its header and first byte are (see `large`): its head is then
    /// not `whole`.
    async fn next_backend_head(&mut self, piecewise: usize) -> Result<Head, RelayError> {
        loop {
            if let Some(head) = self.backend_head_here(piecewise)? {
                return Ok(head);
            }
            let conn = self.seat.conn.as_mut().ok_or_else(no_backend)?;
            if self.link.pos > 0 {
                conn.rbuf.drain(..self.link.pos.min(conn.rbuf.len()));
                self.link.pos = 0;
            }
            self.read_backend().await?;
        }
    }

    /// [`Session::next_backend_head`] of the bytes already read: `None` when more must be read.
    fn backend_head_here(&self, piecewise: usize) -> Result<Option<Head>, RelayError> {
        let conn = self.seat.conn.as_ref().ok_or_else(no_backend)?;
        Ok(head_at(conn.rbuf.get(self.link.pos..).unwrap_or_default(), piecewise))
    }

    /// Reads what the backend sent next, under the statement's deadline: past it the statement
    /// is killed and nothing is read (the caller reads again, for another `query_timeout`).
    pub(super) async fn read_backend(&mut self) -> Result<(), RelayError> {
        let conn = self.seat.conn.as_mut().ok_or_else(no_backend)?;
        let read = match self.link.deadline {
            Some(timer) => {
                let reading = rt::read_some(&mut conn.stream, &mut conn.rbuf, READ_CHUNK);
                match rt::with_deadline(timer.at, reading).await {
                    Ok(r) => r,
                    // Killed a query_timeout ago and still silent: the backend is not answering.
                    Err(_) if timer.killed => return Err(self.cancel_ignored()),
                    Err(_) => {
                        self.kill_running();
                        return Ok(());
                    }
                }
            }
            None => rt::read_some(&mut conn.stream, &mut conn.rbuf, READ_CHUNK).await,
        };
        match read {
            Ok(0) => Err(RelayError::BackendClosed(None)),
            Err(e) => Err(lost(e)),
            Ok(_) => Ok(()),
        }
    }

    /// The query timeout fired: kills the running statement and waits another `query_timeout`.
    fn kill_running(&mut self) {
        let again = self.seat.pool.config.timeouts.query.map(|d| rt::now() + d);
        self.link.deadline = again.map(|at| QueryTimer { at, killed: true });
        let _ = self.seat.ctx.cancels.act(self.seat.cancel.key, false);
    }

    /// The backend left the kill of a timed-out statement unanswered.
    fn cancel_ignored(&self) -> RelayError {
        let timeout_ms = self.seat.pool.config.timeouts.query.unwrap_or_default().as_millis();
        RelayError::CancelIgnored { timeout_ms }
    }

    /// Drops the bytes of the finished response from the backend buffer.
    pub(super) fn compact(&mut self) {
        if let Some(conn) = self.seat.conn.as_mut() {
            let n = self.link.pos.min(conn.rbuf.len());
            conn.rbuf.drain(..n);
        }
        self.link.pos = 0;
    }

    /// Forwards a payload read with `forward = false` (it must have been kept whole).
    pub(super) fn forward_pkt(&mut self, p: &Pkt) -> Result<(), RelayError> {
        let whole = p.whole_or_err()?;
        encode_packets(whole, p.seq, &mut self.io.out);
        Ok(())
    }

    /// A new exchange for the response of the command just sent, of `grammar`.
    pub(super) fn exchange(&self, grammar: Grammar) -> Exchange {
        // Backend connections never agree on CLIENT_DEPRECATE_EOF (see pool::mysql).
        Exchange::new(grammar, self.link.seq, false).limit_file_packets(self.io.max_msg)
    }

    /// Relays one whole response of `grammar` to the client.
    pub(super) async fn relay_response(&mut self, grammar: Grammar) -> Result<Outcome, RelayError> {
        let mut ex = self.exchange(grammar);
        self.relay_exchange(&mut ex).await
    }

    /// Drives `ex` to the end of its response, doing what it asks.
    pub(super) async fn relay_exchange(&mut self, ex: &mut Exchange) -> Result<Outcome, RelayError> {
        let driven = self.drive(ex).await;
        self.link.seq = ex.next_seq();
        if let Err(e @ RelayError::OutOfSequence { .. }) = &driven {
            tracing::warn!(error = %e, "backend packet out of sequence; giving the connection up");
        }
        driven?;
        self.compact();
        let outcome = ex.outcome();
        if outcome.error {
            self.seat.pool.counters.backend_error(); // metrics: the response ended in an ERR
        }
        Ok(outcome)
    }

    /// Feeds backend packets to `ex` until its response is complete.
    async fn drive(&mut self, ex: &mut Exchange) -> Result<(), RelayError> {
        while !ex.done() {
            // A short packet there whole (the common one) is taken at once: asking the two
            // awaits below about it too was ~700 of the ~4,700 instructions relaying a point
            // select's response took (#39). Asked without an await first: a future made and
            // polled for each of a result's packets, of which only the first is waited for,
            // was ~40 instructions a packet (#39).
            let mut head = match self.backend_head_here(large::PIECEWISE_AT)? {
                Some(head) => head,
                None => self.next_backend_head(large::PIECEWISE_AT).await?,
            };
            if !head.whole {
                if self.pass_on_large(ex).await? {
                    continue; // a long row, read no faster than the client takes it (#33)
                }
                head = self.next_backend_packet().await?;
            }
            let (action, len) = self.take_packets(ex, head)?;
            match action {
                Action::Forward => {}
                Action::ForwardEnd | Action::ForwardOk => self.bump_final(len, ex.outcome().status),
                Action::SendFile => self.relay_local_infile(ex).await?,
                Action::RefuseFile { reply_seq } => self.refuse_local_infile(reply_seq).await?,
                Action::Refused { seq, unusable } => self.refused_local_infile(seq, unusable),
            }
            // The future only when there is something to write (#39).
            if self.io.out.len() >= CLIENT_FLUSH_AT {
                self.flush_full().await?;
            }
        }
        Ok(())
    }

    /// Hands `ex` the backend packets buffered whole from `self.link.pos` on, the first of
    /// `head`, and relays them as it says ([`take_run`]): the run it forwards unchanged as one
    /// copy. Returns the last packet's action and the length of the payload relayed for it. An
    /// OK goes out as the client's capabilities want it, and the `last_gtid` it reported is
    /// kept for causal reads (#34), as is whether the connection owes one ([`note_owed`]).
    fn take_packets(&mut self, ex: &mut Exchange, head: Head) -> Result<(Action, usize), RelayError> {
        let conn = self.seat.conn.as_mut().ok_or_else(no_backend)?;
        let (rbuf, conn_info) = conn.read_and_info_mut();
        let mut info = match conn_info {
            ConnInfo::MySql(info) => Some(info),
            ConnInfo::Pg(_) => None,
        };
        let (from, room) = (self.link.pos, CLIENT_FLUSH_AT.saturating_sub(self.io.out.len()));
        let taken = take_run(rbuf, &mut self.link.pos, head, ex, info.as_deref_mut(), room);
        // What was forwarded goes out even when a later packet broke the response, as it did
        // packet by packet.
        self.io.out.extend_from_slice(rbuf.get(from..self.link.pos).unwrap_or_default());
        let (action, packet) = taken?;
        let len = match action {
            Action::Forward | Action::ForwardEnd | Action::SendFile => return Ok((action, packet.payload.len())),
            Action::ForwardOk if packet.is_continued() => {
                return Err(RelayError::Malformed("an OK packet of 16 MiB or more".into()));
            }
            Action::ForwardOk => {
                let Some(info) = info else {
                    return Err(RelayError::Malformed("a MySQL answer on a PostgreSQL connection".into()));
                };
                note_owed(info, packet.payload, false);
                let mut ok = Vec::with_capacity(packet.payload.len());
                let gtid = relay_ok(packet.payload, info.capabilities, self.client.caps, &mut ok)
                    .map_err(|e| RelayError::Malformed(format!("OK packet: {e}")))?;
                self.routing.commit.note(gtid, &mut info.last_gtid);
                encode_packets(&ok, packet.seq, &mut self.io.out);
                ok.len()
            }
            Action::RefuseFile { .. } | Action::Refused { .. } => packet.payload.len(),
        };
        self.link.pos += packet.wire_len();
        Ok((action, len))
    }

    /// Why a `LOAD DATA LOCAL INFILE` may not run through this session, if it may not: its pool
    /// has no `local_infile`, or its client did not allow local files. Asked once the statement
    /// is routed: the pool the session sat on before (the read pool, after a read) is not the
    /// one a load runs on (#34).
    fn local_infile_refusal(&self) -> Option<MyClientError> {
        let why = if !self.seat.pool.config.local_infile {
            format!(
                "LOAD DATA LOCAL INFILE is not enabled on pool \"{}\" (pool setting local_infile); load a file the server \
                 can read with LOAD DATA INFILE, or send the rows as INSERTs",
                self.seat.pool.config.name
            )
        } else if self.client.caps & CLIENT_LOCAL_FILES == 0 {
            "LOAD DATA LOCAL INFILE needs a client that allows local files (CLIENT_LOCAL_FILES), \
             e.g. mysql --local-infile=1"
                .to_owned()
        } else {
            return None;
        };
        Some(MyClientError::new(ER_NOT_ALLOWED_COMMAND, why))
    }

    /// Refuses a routed `LOAD DATA LOCAL INFILE` that may not run ([`Session::local_infile_refusal`]),
    /// here with the reason rather than by the server with 1148's "not allowed with this MariaDB
    /// version" (#4); the write it was routed as never ran. `false` when it may run.
    pub(super) fn refuses_local_infile(&mut self) -> bool {
        let Some(e) = self.local_infile_refusal() else { return false };
        e.encode(self.client.reply_seq, &mut self.io.out);
        self.seat.ryw.nothing_committed();
        true
    }

    /// The grammar of an execute of a prepared statement, already routed, that
    /// `loads_local_file`: MariaDB prepares `LOAD DATA LOCAL INFILE` too, and its execute asks
    /// for the file as the text query does (#34), so it is relayed under the same conditions;
    /// `None` when it was refused.
    pub(super) fn execute_grammar(&mut self, loads_local_file: bool) -> Option<Grammar> {
        if !loads_local_file {
            Some(Grammar::Execute)
        } else if self.refuses_local_infile() {
            None
        } else {
            Some(Grammar::LoadLocal)
        }
    }

    /// Streams the client's file to the server after its request was relayed: the client's
    /// packets go on unchanged (sequence ids included) up to the empty one that ends the file,
    /// and the server's answer is next. When the client broke off, the backend connection,
    /// mid-statement, is given up and `ex` abandoned.
    async fn relay_local_infile(&mut self, ex: &mut Exchange) -> Result<(), RelayError> {
        let why = match self.stream_file(ex).await? {
            Ok(()) => return Ok(()),
            Err(why) => why,
        };
        tracing::debug!(?why, "client broke off a LOCAL INFILE transfer; closing its backend connection");
        // Closing the connection aborts the statement (its rows are rolled back) at once.
        close(&self.seat.pool, self.seat.conn.take());
        let seq = ex.file_seq().unwrap_or(0);
        if let Some((seq, e)) = self.broke_off_error(why, seq).await {
            e.encode(seq, &mut self.io.out);
        }
        ex.abandon();
        Ok(())
    }

    /// What a client that broke off its file at packet `seq` is told, and with which sequence
    /// id; `None` when it is gone.
    async fn broke_off_error(&mut self, why: BrokeOff, seq: u8) -> Option<(u8, MyClientError)> {
        match why {
            BrokeOff::Gone => None,
            // The client goes on sending its file: read it to its end, unbuffered, so that the
            // error arrives where the client expects the server's answer.
            BrokeOff::Bad(DecodeError::PayloadTooLarge { len, max }) => self.discard_file(seq).await.map(|seq| {
                let text = format!(
                    "Got a packet bigger than 'max_allowed_packet' bytes ({len} > {max}) in a LOCAL INFILE file"
                );
                (seq, MyClientError::new(ER_NET_PACKET_TOO_LARGE, text))
            }),
            BrokeOff::Bad(e) => {
                Some((seq, MyClientError::new(ER_NET_PACKETS_OUT_OF_ORDER, format!("LOCAL INFILE file: {e}"))))
            }
            BrokeOff::Silent => {
                self.seat.pool.counters.idle_transaction_timed_out();
                let limit = self.seat.pool.config.timeouts.idle_transaction.unwrap_or_default();
                let text = format!(
                    "LOCAL INFILE file: the client sent nothing for idle_transaction_timeout ({} ms)",
                    limit.as_millis()
                );
                Some((seq, MyClientError::new(ER_CLIENT_INTERACTION_TIMEOUT, text)))
            }
        }
    }

    /// Reads and drops the rest of a client's file from the packet with sequence id `seq` on;
    /// returns the sequence id the answer must carry, `None` when the client went away.
    async fn discard_file(&mut self, seq: u8) -> Option<u8> {
        let mut rest = FileStream::new(seq.wrapping_sub(1), usize::MAX);
        loop {
            let n = rest.advance(&self.io.buf).ok()?;
            self.io.buf.drain(..n);
            if rest.done() {
                return Some(rest.next_seq());
            }
            if !matches!(rt::read_some(&mut self.io.stream, &mut self.io.buf, READ_CHUNK).await, Ok(1..)) {
                return None;
            }
        }
    }

    /// Passes the client's file on to the backend as it arrives, up to its end. `Err` means the
    /// backend was lost; `Ok(Err)` that the client broke off.
    async fn stream_file(&mut self, ex: &mut Exchange) -> Result<Result<(), BrokeOff>, RelayError> {
        if self.io.flush().await.is_err() {
            return Ok(Err(BrokeOff::Gone));
        }
        loop {
            let n = match ex.on_client_file(&self.io.buf) {
                Ok(n) => n,
                Err(e) => return Ok(Err(BrokeOff::Bad(e))),
            };
            if n > 0 {
                let conn = self.seat.conn.as_mut().ok_or_else(no_backend)?;
                let piece =
                    self.io.buf.get(..n).ok_or_else(|| RelayError::Malformed("a file piece past the input".into()))?;
                rt::write_all(&mut conn.stream, piece).await.map_err(lost)?;
                self.io.buf.drain(..n);
            }
            if ex.file_done() {
                return Ok(Ok(()));
            }
            let limit = self.seat.pool.config.timeouts.idle_transaction;
            let Ok(read) = rt::within(limit, rt::read_some(&mut self.io.stream, &mut self.io.buf, READ_CHUNK)).await
            else {
                return Ok(Err(BrokeOff::Silent));
            };
            if !matches!(read, Ok(1..)) {
                return Ok(Err(BrokeOff::Gone));
            }
        }
    }

    /// Ends a session whose client broke off a LOCAL INFILE transfer: its error (if any) is
    /// sent in a way that survives the client still sending file bytes.
    pub(super) async fn end_abandoned(&mut self) -> End {
        if !self.io.out.is_empty() && self.io.flush().await.is_ok() {
            rt::linger_close(&mut self.io.stream, rt::now() + crate::session::FATAL_LINGER).await;
        }
        End::Fatal
    }

    /// The server asked for a local file this statement may not send through the router: send
    /// it none (an empty packet with sequence id `seq`).
    async fn refuse_local_infile(&mut self, seq: u8) -> Result<(), RelayError> {
        let conn = self.seat.conn.as_mut().ok_or_else(no_backend)?;
        let mut empty = Vec::with_capacity(4);
        encode_packets(&[], seq, &mut empty);
        rt::write_all(&mut conn.stream, &empty).await.map_err(lost)
    }

    /// The server answered the empty file: tell the client why its statement failed, with
    /// sequence id `seq`. A server that continues with more results (`unusable`) leaves the
    /// connection unusable.
    fn refused_local_infile(&mut self, seq: u8, unusable: bool) {
        if let Some(c) = self.seat.conn.as_mut().filter(|_| unusable) {
            c.broken = true;
        }
        MyClientError::new(
            ER_NOT_ALLOWED_COMMAND,
            "the server asked for a local file, which the router relays only for a LOAD DATA LOCAL INFILE \
             statement on a pool with local_infile, from a client that allows local files",
        )
        .encode(seq, &mut self.io.out);
    }

    /// Sends `payload` as a new command (sequence 0) to the backend and marks it cancellable.
    pub(super) async fn send_command(&mut self, payload: &[u8]) -> Result<(), RelayError> {
        self.link.out.clear();
        self.link.seq = Some(encode_packets(payload, 0, &mut self.link.out));
        self.flush_backend().await
    }

    /// Writes `self.link.out`, a command the backend answers, read next, to the backend: the
    /// answer's receive goes in with the send (`rt::write_for_answer`, #39).
    pub(super) async fn flush_backend(&mut self) -> Result<(), RelayError> {
        self.seat.cancel.slot.settle().await; // an earlier statement's KILL must not reach this one
        let conn = self.seat.conn.as_mut().ok_or_else(no_backend)?;
        self.seat.cancel.slot.running_on(conn, crate::config::Protocol::MySql);
        let r = rt::write_for_answer(&mut conn.stream, &self.link.out).await;
        self.link.out.clear();
        r.map_err(lost)
    }
}

/// A backend packet with sequence id `got` where `want` was due, logged as the connection goes.
fn out_of_sequence(want: u8, got: u8) -> RelayError {
    tracing::warn!(want, got, "backend packet out of sequence; giving the connection up");
    RelayError::OutOfSequence { expected: want, got }
}

/// Keeps [`MyInfo::owes_gtid`] (#34) after `payload`, an OK packet (`eof` false) or an EOF
/// packet the connection sent. Either says by `SERVER_SESSION_STATE_CHANGED` that tracked
/// state changed, but only an OK carries the change: after an EOF that says so (the result set
/// of an autocommit `SELECT f(n)` whose function inserts), MariaDB 10.11 reports the commit's
/// `last_gtid` with the connection's next OK that carries state, whichever command that
/// answers; OK packets without state, errors and result sets in between leave it pending, and
/// `COM_RESET_CONNECTION` drops it.
pub(super) fn note_owed(info: &mut MyInfo, payload: &[u8], eof: bool) {
    let changed = status_of(payload).0.is_some_and(|s| s & SERVER_SESSION_STATE_CHANGED != 0);
    if changed && crate::pool::tracks_gtid(info) {
        info.owes_gtid = eof;
    }
}

/// Updates the connection's last known status flags.
pub(super) fn note_status(conn: &mut Conn, status: Option<u16>) {
    if let (ConnInfo::MySql(info), Some(s)) = (conn.info_mut(), status) {
        info.status = s;
    }
}

#[cfg(test)]
mod tests;
