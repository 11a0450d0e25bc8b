//! The response side of one MySQL command as a sans-IO state machine (#20): an [`Exchange`]
//! owns what the command's response must look like next (its grammar, the sequence id the next
//! backend packet carries, the state of a result set or a LOCAL INFILE transfer) and is fed
//! the backend's packets one by one, and the client's file while one streams. For each it says
//! what the session must do ([`Action`]); what the response said gathers in an [`Outcome`].
//!
//! Grammar (Client/Server Protocol, "COM_QUERY Response", "Binary Protocol Resultset",
//! "COM_STMT_FETCH"): OK | ERR | LOCAL INFILE request | column count → column definitions →
//! EOF (absent under `CLIENT_DEPRECATE_EOF`) → rows → EOF (an OK with the 0xFE header under
//! `CLIENT_DEPRECATE_EOF`) | ERR, chained while the status says `SERVER_MORE_RESULTS_EXISTS`.
//!
//! Owns no socket, clock or log: the session does the I/O the actions ask for. Depends only on
//! `protocol::mysql` and `session` types.

#[cfg(test)]
mod tests;

use crate::protocol::mysql::codec::Reader;
use crate::protocol::mysql::errcode::ER_SERVER_SHUTDOWN;
use crate::protocol::mysql::infile::{FileStream, LOCAL_INFILE_REQUEST};
use crate::protocol::mysql::response::{SERVER_MORE_RESULTS_EXISTS, SERVER_STATUS_CURSOR_EXISTS};
use crate::protocol::mysql::ErrPacket;
use crate::protocol::mysql::{DecodeError, Packet, MAX_PACKET_PAYLOAD};
use crate::session::engine::retry::{Failure, ServerError};
use crate::session::error::RelayError;

/// MariaDB's answer on each connection as it shuts down (`ER_SERVER_SHUTDOWN`): the connection
/// closes after it, so it is the connection's loss, judged as PostgreSQL's FATAL before a close
/// is (a statement that started nothing goes again on a new connection, #40), not the
/// statement's own error. An operator's KILL (`ER_CONNECTION_KILLED`) stays the statement's
/// error, as on a direct connection: sending it again would undo the KILL.
fn shutting_down(payload: &[u8]) -> Option<RelayError> {
    if payload.first() != Some(&ERR_HEADER) {
        return None;
    }
    let e = ErrPacket::decode(payload).ok().filter(|e| e.code == ER_SERVER_SHUTDOWN.code)?;
    Some(RelayError::BackendFatal {
        code: e.code.to_string(),
        message: String::from_utf8_lossy(e.message).into_owned(),
    })
}

/// First byte of an OK packet.
const OK_HEADER: u8 = 0x00;
/// First byte of an EOF packet (and of an OK packet under `CLIENT_DEPRECATE_EOF`).
const EOF_HEADER: u8 = 0xFE;
/// First byte of an ERR packet.
const ERR_HEADER: u8 = 0xFF;
/// An EOF packet is shorter than this; a longer 0xFE payload is a row or an OK.
const EOF_MAX_LEN: usize = 9;

/// Which response a command gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Grammar {
    /// COM_QUERY: OK / ERR / text result sets, chained by MORE_RESULTS; a LOCAL INFILE request
    /// is refused.
    Query,
    /// COM_QUERY (or COM_STMT_EXECUTE, #34) of `LOAD DATA LOCAL INFILE` on a pool with
    /// `local_infile`, from a client that set `CLIENT_LOCAL_FILES`: as Query, but the server's
    /// file request goes to the client.
    LoadLocal,
    /// COM_STMT_EXECUTE: as Query, but binary rows and a cursor may be opened.
    Execute,
    /// COM_FIELD_LIST and COM_STMT_FETCH: packets until EOF or ERR.
    UntilEof,
    /// COM_STATISTICS, COM_PING, COM_INIT_DB, COM_STMT_RESET, COM_RESET_CONNECTION: one packet.
    Single,
}

/// What one relayed response said.
#[derive(Debug, Default, Clone, Copy)]
pub struct Outcome {
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
    /// The client broke off in the middle of sending a local file: the backend connection was
    /// given up and the session ends.
    pub abandoned: bool,
}

/// What the session does with the backend packet just fed in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Relay it to the client unchanged, sequence id included.
    Forward,
    /// Relay it; it carries the status flags that end a result (the session may raise its
    /// warning count, see `warning`).
    ForwardEnd,
    /// An OK packet that ends a result: relay it as the client's capabilities want it, without
    /// the session state the router's own tracking added (`protocol::mysql::tracking`).
    ForwardOk,
    /// Relay the server's LOCAL INFILE request, then stream the client's file to the server
    /// through [`Exchange::on_client_file`].
    SendFile,
    /// Swallow the server's LOCAL INFILE request and send it an empty file (an empty packet
    /// with sequence id `reply_seq`): this statement may not send one.
    RefuseFile {
        /// Sequence id of the empty packet.
        reply_seq: u8,
    },
    /// Swallow the server's answer to a refused file and tell the client why its statement
    /// failed, with sequence id `seq`; `unusable` when the server goes on with more results,
    /// which leaves the connection out of step.
    Refused {
        /// Sequence id of the error for the client (the request's).
        seq: u8,
        /// The connection cannot be used again.
        unusable: bool,
    },
}

/// Where a response stands.
#[derive(Debug)]
enum State {
    /// The first payload of a result: OK, ERR, LOCAL INFILE request or column count.
    Head,
    /// Column definitions still to come.
    Columns {
        /// How many.
        left: u64,
    },
    /// The EOF after the column definitions.
    ColumnsEnd,
    /// Rows up to the EOF or ERR that ends them.
    Rows,
    /// The client's file streams to the server.
    File(FileStream),
    /// The server's answer to a refused file request.
    RefusedAnswer {
        /// Sequence id of the request.
        request_seq: u8,
    },
    /// The response is complete.
    Done,
}

/// One command's response, from its first backend packet to its last.
#[derive(Debug)]
pub struct Exchange {
    grammar: Grammar,
    state: State,
    /// Sequence id the next backend packet must carry (`None`: not checked).
    seq: Option<u8>,
    /// The backends negotiated `CLIENT_DEPRECATE_EOF`.
    deprecate_eof: bool,
    /// The action of the last packet, while it continues in the next one (a payload of 16 MiB
    /// or more): the continuation gets the same.
    continued: Option<Action>,
    /// Something of this response went to the client already.
    forwarded: bool,
    /// Largest payload of the client's file accepted (its `max_allowed_packet`).
    file_max: usize,
    outcome: Outcome,
}

impl Exchange {
    /// A response of `grammar` whose first packet carries sequence id `seq`; `deprecate_eof`
    /// when the backend connection agreed on `CLIENT_DEPRECATE_EOF`.
    pub fn new(grammar: Grammar, seq: Option<u8>, deprecate_eof: bool) -> Self {
        let state = if grammar == Grammar::UntilEof { State::Rows } else { State::Head };
        let outcome = Outcome::default();
        Self { grammar, state, seq, deprecate_eof, continued: None, forwarded: false, file_max: usize::MAX, outcome }
    }

    /// Refuses client file packets longer than `max` bytes.
    pub fn limit_file_packets(mut self, max: usize) -> Self {
        self.file_max = max;
        self
    }

    /// Whether the response is complete.
    pub fn done(&self) -> bool {
        matches!(self.state, State::Done) && self.continued.is_none()
    }

    /// What the response said so far.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// The sequence id the next backend packet must carry.
    pub fn next_seq(&self) -> Option<u8> {
        self.seq
    }

    /// When `p`, the next backend packet, is an ERR: the failure as the retry policy
    /// (`engine::retry`) judges it. Only the first packet of the response finds nothing
    /// relayed to the client yet.
    pub fn failure(&self, p: &Packet<'_>) -> Option<Failure> {
        if p.payload.first() != Some(&ERR_HEADER) {
            return None;
        }
        let relayed = !matches!(self.state, State::Head) || self.forwarded || self.outcome.succeeded != 0;
        let error = ErrPacket::decode(p.payload).map(|e| ServerError { sqlstate: e.sql_state, code: Some(e.code) });
        Some(Failure { protocol: crate::config::Protocol::MySql, relayed, error: error.unwrap_or_default() })
    }

    /// Takes the next physical backend packet and says what to do with it.
    pub fn on_backend(&mut self, p: &Packet<'_>) -> Result<Action, RelayError> {
        if let Some(want) = self.seq.filter(|want| *want != p.seq) {
            return Err(RelayError::OutOfSequence { expected: want, got: p.seq });
        }
        self.seq = Some(p.seq.wrapping_add(1));
        let action = match self.continued {
            Some(action) => action,
            None => {
                if let Some(fatal) = shutting_down(p.payload) {
                    return Err(fatal);
                }
                self.step(p.payload)?
            }
        };
        self.continued = p.is_continued().then_some(action);
        self.forwarded |= matches!(action, Action::Forward | Action::ForwardEnd | Action::ForwardOk | Action::SendFile);
        Ok(action)
    }

    /// Takes a backend packet of `len` payload bytes, sequence id `seq` and first byte `first`
    /// that is passed on in pieces, never held whole (#33): `Some(Forward)` when it is a row
    /// or the continuation of one, which is all a long packet can be in a result's rows;
    /// `None` (nothing taken) for anything else, which is read whole as usual.
    pub fn on_large(&mut self, seq: u8, first: u8, len: usize) -> Result<Option<Action>, RelayError> {
        let row = match self.continued {
            Some(action) => action == Action::Forward,
            None => {
                let end = first == EOF_HEADER && self.deprecate_eof && len < MAX_PACKET_PAYLOAD;
                matches!(self.state, State::Rows) && first != ERR_HEADER && !end
            }
        };
        if !row {
            return Ok(None);
        }
        if let Some(want) = self.seq.filter(|want| *want != seq) {
            return Err(RelayError::OutOfSequence { expected: want, got: seq });
        }
        self.seq = Some(seq.wrapping_add(1));
        if self.continued.is_none() {
            self.outcome.rows += 1;
        }
        self.continued = (len == MAX_PACKET_PAYLOAD).then_some(Action::Forward);
        self.forwarded = true;
        Ok(Some(Action::Forward))
    }

    /// Takes the client's unread input while its file streams: how many leading bytes go on to
    /// the server now (none when no file streams). Once the file's last packet passed, the
    /// server's answer is next. A client packet out of sequence or over the limit is an error.
    pub fn on_client_file(&mut self, buf: &[u8]) -> Result<usize, DecodeError> {
        let State::File(file) = &mut self.state else { return Ok(0) };
        let n = file.advance(buf)?;
        if file.done() {
            self.seq = Some(file.next_seq());
            self.state = State::Head;
        }
        Ok(n)
    }

    /// Whether the client's file has been passed on whole (or none is streaming).
    pub fn file_done(&self) -> bool {
        !matches!(self.state, State::File(_))
    }

    /// The sequence id the client's next file packet carries (the one an error answering a
    /// broken-off file carries).
    pub fn file_seq(&self) -> Option<u8> {
        match &self.state {
            State::File(file) => Some(file.next_seq()),
            _ => None,
        }
    }

    /// The client broke off its file: the statement failed and the session ends.
    pub fn abandon(&mut self) {
        self.outcome.error = true;
        self.outcome.abandoned = true;
        self.state = State::Done;
    }

    /// Follows the grammar over the first packet of one payload. The state is read in place and
    /// each arm leaves the next one (`Done` unless it says otherwise): moving the whole state out
    /// and back for every packet was ~10 instructions of each relayed packet (#39).
    fn step(&mut self, payload: &[u8]) -> Result<Action, RelayError> {
        match self.state {
            State::Rows => Ok(self.row(payload)),
            State::Columns { left } => {
                self.state = self.after_column(left.saturating_sub(1));
                Ok(Action::Forward)
            }
            State::Head => {
                self.state = State::Done;
                self.head(payload)
            }
            State::ColumnsEnd => {
                self.state = State::Done;
                self.columns_end(payload)
            }
            State::RefusedAnswer { request_seq } => {
                self.state = State::Done;
                self.outcome.error = true;
                let unusable = status_of(payload).0.is_some_and(|s| s & SERVER_MORE_RESULTS_EXISTS != 0);
                Ok(Action::Refused { seq: request_seq, unusable })
            }
            State::File(_) | State::Done => {
                self.state = State::Done;
                Err(RelayError::OutOfStep { tag: payload.first().copied().unwrap_or(0) })
            }
        }
    }

    /// The first payload of a result.
    fn head(&mut self, payload: &[u8]) -> Result<Action, RelayError> {
        let first = payload.first().copied();
        if first == Some(ERR_HEADER) || self.grammar == Grammar::Single {
            self.outcome.error = first == Some(ERR_HEADER);
            if !self.outcome.error {
                (self.outcome.status, self.outcome.last_insert_id) = status_of(payload);
                self.outcome.succeeded += 1;
            }
            return Ok(if first == Some(OK_HEADER) { Action::ForwardOk } else { Action::Forward });
        }
        match first {
            Some(OK_HEADER) => {
                // Saturating: a server's affected-row counts (each up to 2^64-1) must not panic the session.
                self.outcome.rows = self.outcome.rows.saturating_add(affected_rows(payload));
                (self.outcome.status, self.outcome.last_insert_id) = status_of(payload);
                self.outcome.succeeded += 1;
                self.state = self.next_result();
                Ok(Action::ForwardOk)
            }
            Some(LOCAL_INFILE_REQUEST) => Ok(self.file_request()),
            _ => {
                let columns = Reader::new(payload)
                    .lenenc_int("column count")
                    .map_err(|e| RelayError::Malformed(format!("result set: {e}")))?;
                self.state = self.after_column(columns);
                Ok(Action::Forward)
            }
        }
    }

    /// A LOCAL INFILE request: relayed for a statement let through as
    /// [`Grammar::LoadLocal`] (#4), refused for any other.
    fn file_request(&mut self) -> Action {
        let request_seq = self.seq.unwrap_or(1).wrapping_sub(1);
        if self.grammar == Grammar::LoadLocal {
            self.state = State::File(FileStream::new(request_seq, self.file_max));
            return Action::SendFile;
        }
        let reply_seq = request_seq.wrapping_add(1);
        self.seq = Some(reply_seq.wrapping_add(1));
        self.state = State::RefusedAnswer { request_seq };
        Action::RefuseFile { reply_seq }
    }

    /// The state after a column definition with `left` more to come.
    fn after_column(&self, left: u64) -> State {
        match (left, self.deprecate_eof) {
            (0, true) => State::Rows,
            (0, false) => State::ColumnsEnd,
            (left, _) => State::Columns { left },
        }
    }

    /// The EOF after column definitions: rows follow, unless an execute opened a cursor.
    fn columns_end(&mut self, payload: &[u8]) -> Result<Action, RelayError> {
        if !is_eof(payload) {
            return Err(RelayError::OutOfStep { tag: payload.first().copied().unwrap_or(0) });
        }
        let status = status_of(payload).0;
        if self.grammar == Grammar::Execute && status.is_some_and(|s| s & SERVER_STATUS_CURSOR_EXISTS != 0) {
            self.outcome.status = status;
            self.outcome.cursor = true;
            self.outcome.succeeded += 1;
            return Ok(Action::Forward);
        }
        self.state = State::Rows;
        Ok(Action::Forward)
    }

    /// A row, or the EOF or ERR that ends the rows; the rows go on (`State::Rows`) until then.
    fn row(&mut self, payload: &[u8]) -> Action {
        let end = if self.deprecate_eof {
            payload.first() == Some(&EOF_HEADER) && payload.len() < MAX_PACKET_PAYLOAD
        } else {
            is_eof(payload)
        };
        if end {
            self.outcome.status = if self.deprecate_eof { ok_status(payload) } else { status_of(payload).0 };
            self.outcome.succeeded += 1;
            let cursor_opened = self.grammar == Grammar::Execute
                && self.deprecate_eof
                && self.outcome.status.is_some_and(|s| s & SERVER_STATUS_CURSOR_EXISTS != 0);
            self.outcome.cursor |= cursor_opened;
            let more = self.grammar != Grammar::UntilEof && !cursor_opened;
            self.state = if more { self.next_result() } else { State::Done };
            return Action::ForwardEnd;
        }
        if payload.first() == Some(&ERR_HEADER) {
            self.outcome.error = true;
            self.state = State::Done;
            return Action::Forward;
        }
        self.outcome.rows += 1;
        Action::Forward
    }

    /// After a complete result: another when the server says more results follow.
    fn next_result(&self) -> State {
        match self.outcome.status {
            Some(s) if s & SERVER_MORE_RESULTS_EXISTS != 0 => State::Head,
            _ => State::Done,
        }
    }
}

/// An EOF packet (0xFE, shorter than 9 bytes).
pub(in crate::session::mysql) fn is_eof(payload: &[u8]) -> bool {
    payload.first() == Some(&EOF_HEADER) && payload.len() < EOF_MAX_LEN
}

/// Status flags and last insert id of an OK packet, or status of an EOF packet. An EOF's status
/// is read by position (header, warnings, status) rather than through a `Reader`: it is read
/// twice for each of a result set's two EOFs, here and by the relay's `note_owed` (#39).
pub(in crate::session::mysql) fn status_of(payload: &[u8]) -> (Option<u16>, u64) {
    match payload {
        [EOF_HEADER, _, _, lo, hi, ..] if payload.len() < EOF_MAX_LEN => (Some(u16::from_le_bytes([*lo, *hi])), 0),
        [EOF_HEADER, ..] if payload.len() < EOF_MAX_LEN => (None, 0),
        [OK_HEADER | EOF_HEADER, rest @ ..] => ok_fields(&mut Reader::new(rest)),
        _ => (None, 0),
    }
}

/// Status flags of an OK packet under `CLIENT_DEPRECATE_EOF`, whatever its length.
fn ok_status(payload: &[u8]) -> Option<u16> {
    let mut r = Reader::new(payload);
    r.u8("header").ok()?;
    ok_fields(&mut r).0
}

/// Status flags and last insert id of an OK packet read past its header.
fn ok_fields(r: &mut Reader<'_>) -> (Option<u16>, u64) {
    let _ = r.lenenc_int("affected rows");
    let id = r.lenenc_int("last insert id").unwrap_or(0);
    (r.u16("status").ok(), id)
}

/// Affected rows of an OK packet (0 for anything else).
fn affected_rows(payload: &[u8]) -> u64 {
    let mut r = Reader::new(payload);
    match r.u8("header") {
        Ok(OK_HEADER) => r.lenenc_int("affected rows").unwrap_or(0),
        _ => 0,
    }
}
