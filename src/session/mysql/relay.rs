//! The response side of a MySQL session: reads backend packets, relays them to the client
//! untouched (sequence ids included) while following the response grammar far enough to know
//! where it ends, which results succeeded and what the server's status flags say. A packet out
//! of sequence, like a broken one, means the backend connection is lost.
//!
//! A server's LOCAL INFILE request is relayed only for a statement the session let through as
//! [`Grammar::LoadLocal`] (#4); the client's file then streams to the backend packet piece by
//! packet piece. Any other request is refused here.

use super::{End, QueryTimer, Session, CLIENT_FLUSH_AT, READ_CHUNK};
use crate::pool::{Conn, ConnInfo};
use crate::protocol::mysql::capability::CLIENT_LOCAL_FILES;
use crate::protocol::mysql::codec::Reader;
use crate::protocol::mysql::errcode::{
    ER_CLIENT_INTERACTION_TIMEOUT, ER_NET_PACKETS_OUT_OF_ORDER, ER_NET_PACKET_TOO_LARGE, ER_NOT_ALLOWED_COMMAND,
};
use crate::protocol::mysql::framer::HEADER_LEN;
use crate::protocol::mysql::infile::{FileStream, LOCAL_INFILE_REQUEST};
use crate::protocol::mysql::response::{SERVER_MORE_RESULTS_EXISTS, SERVER_STATUS_CURSOR_EXISTS};
use crate::protocol::mysql::DecodeError;
use crate::protocol::mysql::{decode_packet, encode_packets, MAX_PACKET_PAYLOAD};
use crate::rt;
use crate::session::client_error::MyClientError;

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
}

/// What one relayed response said.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct Outcome {
    /// Results (OK packets or result sets) that completed before any error.
    pub succeeded: usize,
    /// The response ended with an ERR packet.
    pub error: bool,
    /// Status flags of the last OK/EOF packet.
    pub status: Option<u16>,
    /// Last insert id of the last OK packet.
    pub last_insert_id: u64,
    /// A cursor was opened (COM_STMT_EXECUTE with a cursor type).
    pub cursor: bool,
    /// Rows relayed plus rows the OK packets say were affected (for digest statistics).
    pub rows: u64,
    /// The client broke off in the middle of sending a local file (closed, or sent packets out
    /// of sequence or over the size limit): the backend connection was given up and the
    /// session ends.
    pub abandoned: bool,
}

/// Status flags and last insert id of an OK packet, or status of an EOF packet.
pub(super) fn status_of(p: &Pkt) -> (Option<u16>, u64) {
    let mut r = Reader::new(&p.head);
    match r.u8("header") {
        Ok(0xFE) if p.len < 9 => {
            let _ = r.u16("warnings");
            (r.u16("status").ok(), 0)
        }
        Ok(0x00 | 0xFE) => {
            let _ = r.lenenc_int("affected rows");
            let id = r.lenenc_int("last insert id").unwrap_or(0);
            (r.u16("status").ok(), id)
        }
        _ => (None, 0),
    }
}

/// Affected rows of an OK packet (0 for anything else).
fn affected_rows(p: &Pkt) -> u64 {
    let mut r = Reader::new(&p.head);
    match r.u8("header") {
        Ok(0x00) => r.lenenc_int("affected rows").unwrap_or(0),
        _ => 0,
    }
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

/// Result grammar variants.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Grammar {
    /// COM_QUERY: OK / ERR / text result sets, chained by MORE_RESULTS; a LOCAL INFILE request
    /// is refused.
    Query,
    /// COM_QUERY of `LOAD DATA LOCAL INFILE` on a pool with `local_infile`, from a client that
    /// set `CLIENT_LOCAL_FILES`: as Query, but the server's file request goes to the client.
    LoadLocal,
    /// COM_STMT_EXECUTE: as Query, but binary rows and a cursor may be opened.
    Execute,
    /// COM_FIELD_LIST and COM_STMT_FETCH: packets until EOF or ERR.
    UntilEof,
    /// COM_STATISTICS, COM_PING, COM_INIT_DB, COM_STMT_RESET, COM_RESET_CONNECTION: one packet.
    Single,
}

impl Session {
    /// Reads the next logical payload from the backend, forwarding its packets to the client
    /// when `forward`. `Err` means the backend connection is gone or desynchronized.
    pub(super) async fn backend_payload(&mut self, forward: bool) -> Result<Pkt, ()> {
        let p = self.read_payload(forward).await?;
        self.flush_full(forward).await?;
        Ok(p)
    }

    /// Writes the client output out once it is large, mid-response.
    async fn flush_full(&mut self, forward: bool) -> Result<(), ()> {
        if forward && self.out.len() >= CLIENT_FLUSH_AT {
            self.flush_client().await.map_err(|_| ())?;
        }
        Ok(())
    }

    /// [`Session::backend_payload`] without the flush, so the payload can still be changed in
    /// the client output.
    async fn read_payload(&mut self, forward: bool) -> Result<Pkt, ()> {
        let mut pkt: Option<Pkt> = None;
        loop {
            let (seq, plen) = self.next_backend_packet().await?;
            if self.bseq.is_some_and(|want| want != seq) {
                tracing::warn!(want = ?self.bseq, got = seq, "backend packet out of sequence; giving the connection up");
                return Err(());
            }
            self.bseq = Some(seq.wrapping_add(1));
            let Some(conn) = self.backend.as_mut() else { return Err(()) };
            let raw = conn.rbuf.get(self.bpos..self.bpos + HEADER_LEN + plen).ok_or(())?;
            let payload = raw.get(HEADER_LEN..).unwrap_or_default();
            let p = pkt.get_or_insert_with(|| Pkt { seq, len: 0, head: Vec::new() });
            p.len += plen;
            let room = HEAD_MAX.saturating_sub(p.head.len());
            p.head.extend_from_slice(payload.get(..room.min(payload.len())).unwrap_or_default());
            if forward {
                self.out.extend_from_slice(raw);
            }
            self.bpos += HEADER_LEN + plen;
            if plen < MAX_PACKET_PAYLOAD {
                break;
            }
        }
        pkt.ok_or(())
    }

    /// Waits for one whole backend packet at `self.bpos`; returns (sequence id, payload length).
    /// Past the query deadline the running statement is killed and reading goes on for another
    /// `query_timeout`; past that the backend counts as lost.
    pub(super) async fn next_backend_packet(&mut self) -> Result<(u8, usize), ()> {
        loop {
            let conn = self.backend.as_mut().ok_or(())?;
            match decode_packet(conn.rbuf.get(self.bpos..).unwrap_or_default(), MAX_PACKET_PAYLOAD) {
                Ok(Some(p)) => return Ok((p.seq, p.payload.len())),
                Ok(None) => {}
                Err(_) => return Err(()),
            }
            if self.bpos > 0 {
                conn.rbuf.drain(..self.bpos);
                self.bpos = 0;
            }
            let read = match self.query_deadline {
                Some(timer) => {
                    match rt::with_deadline(timer.at, rt::read_some(&mut conn.stream, &mut conn.rbuf, READ_CHUNK)).await
                    {
                        Ok(r) => r,
                        // Killed a query_timeout ago and still silent: the backend is not answering.
                        Err(_) if timer.killed => return Err(()),
                        Err(_) => {
                            let again = self.pool.config.timeouts.query.map(|d| rt::now() + d);
                            self.query_deadline = again.map(|at| QueryTimer { at, killed: true });
                            let _ = self.ctx.cancels.act(self.key, false);
                            continue;
                        }
                    }
                }
                None => rt::read_some(&mut conn.stream, &mut conn.rbuf, READ_CHUNK).await,
            };
            match read {
                Ok(0) | Err(_) => return Err(()),
                Ok(_) => {}
            }
        }
    }

    /// Drops the bytes of the finished response from the backend buffer.
    pub(super) fn compact(&mut self) {
        if let Some(conn) = self.backend.as_mut() {
            let n = self.bpos.min(conn.rbuf.len());
            conn.rbuf.drain(..n);
        }
        self.bpos = 0;
    }

    /// Forwards a payload read with `forward = false` (it must have been kept whole).
    pub(super) fn forward_pkt(&mut self, p: &Pkt) -> Result<(), ()> {
        let whole = p.whole().ok_or(())?;
        encode_packets(whole, p.seq, &mut self.out);
        Ok(())
    }

    /// Relays one whole response of `grammar`; with `forward = false` nothing reaches the
    /// client (settings replay, re-prepare). `Err` means the backend was lost.
    pub(super) async fn relay_response(&mut self, grammar: Grammar, forward: bool) -> Result<Outcome, ()> {
        let mut out = Outcome::default();
        if grammar == Grammar::UntilEof {
            self.rows_until_end(forward, &mut out).await?;
            self.compact();
            return Ok(out);
        }
        loop {
            let p = self.backend_payload(false).await?;
            if p.is_err() || grammar == Grammar::Single {
                if forward {
                    self.forward_pkt(&p)?;
                }
                out.error = p.is_err();
                if !out.error {
                    (out.status, out.last_insert_id) = status_of(&p);
                    out.succeeded += 1;
                }
                break;
            }
            match p.first() {
                Some(0x00) => {
                    out.rows += affected_rows(&p);
                    (out.status, out.last_insert_id) = status_of(&p);
                    out.succeeded += 1;
                    if forward {
                        self.forward_pkt(&p)?;
                        self.bump_final(p.len, out.status);
                    }
                }
                Some(LOCAL_INFILE_REQUEST) if grammar == Grammar::LoadLocal && forward => {
                    if !self.relay_local_infile(&p, &mut out).await? {
                        break;
                    }
                    // The server's OK or ERR for the loaded file follows.
                    continue;
                }
                Some(LOCAL_INFILE_REQUEST) => {
                    self.refuse_local_infile(&p, forward, &mut out).await?;
                    break;
                }
                _ => {
                    if forward {
                        self.forward_pkt(&p)?;
                    }
                    let columns = Reader::new(&p.head).lenenc_int("column count").map_err(|_| ())?;
                    self.result_set(columns, grammar, forward, &mut out).await?;
                    if out.error || out.cursor {
                        break;
                    }
                }
            }
            if out.status.is_none_or(|s| s & SERVER_MORE_RESULTS_EXISTS == 0) {
                break;
            }
        }
        self.compact();
        Ok(out)
    }

    async fn result_set(&mut self, columns: u64, grammar: Grammar, forward: bool, out: &mut Outcome) -> Result<(), ()> {
        for _ in 0..columns {
            self.backend_payload(forward).await?;
        }
        let eof = self.backend_payload(forward).await?;
        if !eof.is_eof() {
            return Err(());
        }
        let status = status_of(&eof).0;
        if grammar == Grammar::Execute && status.is_some_and(|s| s & SERVER_STATUS_CURSOR_EXISTS != 0) {
            out.status = status;
            out.cursor = true;
            out.succeeded += 1;
            return Ok(());
        }
        self.rows_until_end(forward, out).await
    }

    /// Relays rows up to and including the terminating EOF or ERR.
    pub(super) async fn rows_until_end(&mut self, forward: bool, out: &mut Outcome) -> Result<(), ()> {
        loop {
            let p = self.read_payload(forward).await?;
            if p.is_eof() {
                out.status = status_of(&p).0;
                out.succeeded += 1;
                if forward {
                    self.bump_final(p.len, out.status);
                }
                return self.flush_full(forward).await;
            }
            self.flush_full(forward).await?;
            if p.is_err() {
                out.error = true;
                return Ok(());
            }
            out.rows += 1;
        }
    }

    /// Why a `LOAD DATA LOCAL INFILE` may not run through this session, if it may not: its pool
    /// has no `local_infile`, or its client did not allow local files.
    pub(super) fn local_infile_refusal(&self) -> Option<MyClientError> {
        let why = if !self.pool.config.local_infile {
            format!(
                "LOAD DATA LOCAL INFILE is not enabled on pool \"{}\" (pool setting local_infile); load a file the server \
                 can read with LOAD DATA INFILE, or send the rows as INSERTs",
                self.pool.config.name
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

    /// Relays the server's file request `p` to the client and the client's file to the server,
    /// as it streams: the client's packets go on unchanged (sequence ids included) up to the
    /// empty one that ends the file, and the server's answer is next. `Ok(false)` when the
    /// client broke off: the backend connection, mid-statement, is given up.
    async fn relay_local_infile(&mut self, p: &Pkt, out: &mut Outcome) -> Result<bool, ()> {
        self.forward_pkt(p)?;
        let mut file = FileStream::new(p.seq, self.io.max_msg);
        let why = match self.stream_file(&mut file).await? {
            Ok(()) => {
                self.bseq = Some(file.next_seq());
                return Ok(true);
            }
            Err(why) => why,
        };
        tracing::debug!(?why, "client broke off a LOCAL INFILE transfer; closing its backend connection");
        // Closing the connection aborts the statement (its rows are rolled back) at once.
        if let Some(mut c) = self.backend.take() {
            c.broken = true;
            self.pool.checkin(c, false);
        }
        let told = match why {
            BrokeOff::Gone => None,
            // The client goes on sending its file: read it to its end, unbuffered, so that the
            // error arrives where the client expects the server's answer.
            BrokeOff::Bad(DecodeError::PayloadTooLarge { len, max }) => {
                self.discard_file(file.next_seq()).await.map(|seq| {
                    let text = format!(
                        "Got a packet bigger than 'max_allowed_packet' bytes ({len} > {max}) in a LOCAL INFILE file"
                    );
                    (seq, MyClientError::new(ER_NET_PACKET_TOO_LARGE, text))
                })
            }
            BrokeOff::Bad(e) => Some((
                file.next_seq(),
                MyClientError::new(ER_NET_PACKETS_OUT_OF_ORDER, format!("LOCAL INFILE file: {e}")),
            )),
            BrokeOff::Silent => {
                self.pool.counters.idle_transaction_timed_out();
                let limit = self.pool.config.timeouts.idle_transaction.unwrap_or_default();
                let text = format!(
                    "LOCAL INFILE file: the client sent nothing for idle_transaction_timeout ({} ms)",
                    limit.as_millis()
                );
                Some((file.next_seq(), MyClientError::new(ER_CLIENT_INTERACTION_TIMEOUT, text)))
            }
        };
        if let Some((seq, e)) = told {
            e.encode(seq, &mut self.out);
        }
        out.error = true;
        out.abandoned = true;
        Ok(false)
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
    async fn stream_file(&mut self, file: &mut FileStream) -> Result<Result<(), BrokeOff>, ()> {
        if self.flush_client().await.is_err() {
            return Ok(Err(BrokeOff::Gone));
        }
        loop {
            let n = match file.advance(&self.io.buf) {
                Ok(n) => n,
                Err(e) => return Ok(Err(BrokeOff::Bad(e))),
            };
            if n > 0 {
                let conn = self.backend.as_mut().ok_or(())?;
                rt::write_all(&mut conn.stream, self.io.buf.get(..n).unwrap_or_default()).await.map_err(|_| ())?;
                self.io.buf.drain(..n);
            }
            if file.done() {
                return Ok(Ok(()));
            }
            let limit = self.pool.config.timeouts.idle_transaction;
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
        if !self.out.is_empty() && self.flush_client().await.is_ok() {
            rt::linger_close(&mut self.io.stream, rt::now() + crate::session::FATAL_LINGER).await;
        }
        End::Fatal
    }

    /// The server asked for a local file this statement may not send through the router: send
    /// it none, and tell the client why its statement failed. A server that continues with more
    /// results leaves the connection unusable.
    async fn refuse_local_infile(&mut self, p: &Pkt, forward: bool, out: &mut Outcome) -> Result<(), ()> {
        let conn = self.backend.as_mut().ok_or(())?;
        let mut empty = Vec::with_capacity(4);
        self.bseq = Some(encode_packets(&[], p.seq.wrapping_add(1), &mut empty));
        rt::write_all(&mut conn.stream, &empty).await.map_err(|_| ())?;
        let reply = self.backend_payload(false).await?;
        if status_of(&reply).0.is_some_and(|s| s & SERVER_MORE_RESULTS_EXISTS != 0) {
            if let Some(c) = self.backend.as_mut() {
                c.broken = true;
            }
        }
        if forward {
            MyClientError::new(
                ER_NOT_ALLOWED_COMMAND,
                "the server asked for a local file, which the router relays only for a LOAD DATA LOCAL INFILE \
                 statement on a pool with local_infile, from a client that allows local files",
            )
            .encode(p.seq, &mut self.out);
        }
        out.error = true;
        Ok(())
    }

    /// Sends `payload` as a new command (sequence 0) to the backend and marks it cancellable.
    pub(super) async fn send_command(&mut self, payload: &[u8]) -> Result<(), ()> {
        self.bout.clear();
        self.bseq = Some(encode_packets(payload, 0, &mut self.bout));
        self.flush_backend().await
    }

    /// Writes `self.bout` to the backend.
    pub(super) async fn flush_backend(&mut self) -> Result<(), ()> {
        let conn = self.backend.as_mut().ok_or(())?;
        if let ConnInfo::MySql(info) = &conn.info {
            let kind = crate::session::cancel::TargetKind::MySql { thread_id: info.thread_id };
            self.slot.set_running(Some(crate::session::cancel::CancelTarget { addr: conn.addr, kind }));
        }
        let r = rt::write_all(&mut conn.stream, &self.bout).await;
        self.bout.clear();
        r.map_err(|_| ())
    }
}

/// Updates the connection's last known status flags.
pub(super) fn note_status(conn: &mut Conn, status: Option<u16>) {
    if let (ConnInfo::MySql(info), Some(s)) = (&mut conn.info, status) {
        info.status = s;
    }
}
