//! Re-encodes a PostgreSQL response (simple query or one extended-protocol execution) as the
//! MySQL response to a `COM_QUERY` (text rows) or `COM_STMT_EXECUTE` (binary rows). Sans-IO:
//! the session feeds each backend message in and writes `out` to the client.
//!
//! Each result ends in an OK (or EOF) packet that is held back until the next message shows
//! whether another result follows (`SERVER_MORE_RESULTS_EXISTS`) or ReadyForQuery gives the
//! final transaction status, which the MySQL status flags must report.

use super::errmap;
use super::tag::affected_rows;
use super::types::{map_type, Column};
use super::value::{binary_value, text_value};
use crate::protocol::mysql::capability::CLIENT_DEPRECATE_EOF;
use crate::protocol::mysql::codec::put_lenenc_int;
use crate::protocol::mysql::errcode::ErrorNumber;
use crate::protocol::mysql::response::{
    EofPacket, OkPacket, StmtPrepareOk, SERVER_MORE_RESULTS_EXISTS, SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_IN_TRANS,
    SERVER_STATUS_NO_BACKSLASH_ESCAPES,
};
use crate::protocol::mysql::row::{encode_binary_row, encode_text_row};
use crate::protocol::mysql::{encode_packets, BinaryValue};
use crate::protocol::pg::{BackendMessage, TransactionStatus};

/// `ER_EMPTY_QUERY`.
const ER_EMPTY_QUERY: ErrorNumber = ErrorNumber { code: 1065, sql_state: *b"42000" };
/// `ER_NOT_SUPPORTED_YET`, for COPY through the bridge.
const ER_NOT_SUPPORTED_YET: ErrorNumber = ErrorNumber { code: 1235, sql_state: *b"42000" };

/// Row encoding of the response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowFormat {
    /// Text rows (`COM_QUERY`).
    Text,
    /// Binary rows (`COM_STMT_EXECUTE`).
    Binary,
}

/// A notice PostgreSQL sent during the statement, kept for `SHOW WARNINGS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warning {
    /// `Note` or `Warning` (MySQL's levels).
    pub level: &'static str,
    /// The MySQL error number its SQLSTATE maps to.
    pub code: u16,
    /// The server's message.
    pub message: String,
}

/// What the session does after feeding a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Feed the next backend message.
    More,
    /// ReadyForQuery arrived: the response is complete.
    Done(TransactionStatus),
    /// The backend started COPY, which the bridge cannot carry: the client was told; the
    /// connection must be closed because it now waits for COPY data.
    Unsupported,
}

/// The status flags that do not follow the transaction: autocommit, and
/// `NO_BACKSLASH_ESCAPES` when the client was told that backslashes are ordinary characters in
/// its strings. The bridge reads the client's strings that way (it re-serialises every literal
/// for PostgreSQL, `sql::requote`), so the flag must never change within a session: a client
/// that quotes by it and a router that lexes by it must agree on every statement (#33).
#[must_use]
pub fn session_flags(autocommit: bool, no_backslash_escapes: bool) -> u16 {
    let mut s = 0;
    if no_backslash_escapes {
        s |= SERVER_STATUS_NO_BACKSLASH_ESCAPES;
    }
    if autocommit {
        s |= SERVER_STATUS_AUTOCOMMIT;
    }
    s
}

/// MySQL status flags for the session's [`session_flags`] and PostgreSQL transaction state.
#[must_use]
pub fn status_flags(session: u16, tx: TransactionStatus) -> u16 {
    if tx == TransactionStatus::Idle {
        session
    } else {
        session | SERVER_STATUS_IN_TRANS
    }
}

/// The end of a result, held until its status flags are known.
#[derive(Debug, Clone, Copy)]
enum Pending {
    Ok(u64),
    EndOfRows,
}

/// Translates one PostgreSQL response into MySQL packets.
#[derive(Debug)]
pub struct ResultWriter {
    caps: u64,
    format: RowFormat,
    /// The session's [`session_flags`].
    session: u16,
    /// Transaction state assumed for results before ReadyForQuery.
    tx: TransactionStatus,
    seq: u8,
    columns: Vec<Column>,
    in_rows: bool,
    pending: Option<Pending>,
    sent_anything: bool,
    errored: bool,
    /// Notices of this response.
    pub warnings: Vec<Warning>,
    scratch: Vec<Vec<u8>>,
    payload: Vec<u8>,
}

impl ResultWriter {
    /// A writer for a client with capabilities `caps`; `tx` is the transaction state before the
    /// statement (used for intermediate results of a multi-statement query); `seq`, the sequence
    /// id after the command's last packet.
    #[must_use]
    pub fn new(caps: u64, format: RowFormat, session: u16, tx: TransactionStatus, seq: u8) -> Self {
        Self {
            caps,
            format,
            session,
            tx,
            seq,
            columns: Vec::new(),
            in_rows: false,
            pending: None,
            sent_anything: false,
            errored: false,
            warnings: Vec::new(),
            scratch: Vec::new(),
            payload: Vec::with_capacity(256),
        }
    }

    /// Whether the response carried an error.
    #[must_use]
    pub fn errored(&self) -> bool {
        self.errored
    }

    fn packet(&mut self, out: &mut Vec<u8>) {
        self.seq = encode_packets(&self.payload, self.seq, out);
        self.payload.clear();
        self.sent_anything = true;
    }

    fn warning_count(&self) -> u16 {
        u16::try_from(self.warnings.len()).unwrap_or(u16::MAX)
    }

    fn flush_pending(&mut self, status: u16, out: &mut Vec<u8>) {
        let Some(p) = self.pending.take() else { return };
        let warnings = self.warning_count();
        let deprecate_eof = self.caps & CLIENT_DEPRECATE_EOF != 0;
        match p {
            Pending::Ok(affected_rows) => {
                OkPacket { affected_rows, status, warnings, ..OkPacket::default() }
                    .encode(self.caps, &mut self.payload);
            }
            Pending::EndOfRows if deprecate_eof => {
                OkPacket { status, warnings, ..OkPacket::default() }.encode_as_eof(self.caps, &mut self.payload);
            }
            Pending::EndOfRows => EofPacket { warnings, status }.encode(&mut self.payload),
        }
        self.packet(out);
    }

    fn more_results(&mut self, out: &mut Vec<u8>) {
        let status = status_flags(self.session, self.tx) | SERVER_MORE_RESULTS_EXISTS;
        self.flush_pending(status, out);
    }

    /// Feeds one backend message, appending client packets to `out`.
    pub fn on_message(&mut self, msg: &BackendMessage<'_>, out: &mut Vec<u8>) -> Step {
        match msg {
            BackendMessage::RowDescription(rd) => {
                self.more_results(out);
                self.columns = rd.iter().map(|f| map_type(f.type_oid, f.type_modifier)).collect();
                self.scratch.resize_with(self.columns.len(), Vec::new);
                put_lenenc_int(&mut self.payload, rd.len() as u64);
                self.packet(out);
                for (f, c) in rd.iter().zip(self.columns.clone()) {
                    c.encode_definition(f.name.as_bytes(), &mut self.payload);
                    self.packet(out);
                }
                if self.caps & CLIENT_DEPRECATE_EOF == 0 {
                    EofPacket { warnings: 0, status: status_flags(self.session, self.tx) }.encode(&mut self.payload);
                    self.packet(out);
                }
                self.in_rows = true;
            }
            BackendMessage::DataRow(values) => {
                self.encode_row(values.iter(), out);
            }
            BackendMessage::CommandComplete(tag) => {
                self.more_results(out);
                self.pending = Some(if self.in_rows { Pending::EndOfRows } else { Pending::Ok(affected_rows(tag)) });
                self.in_rows = false;
            }
            BackendMessage::EmptyQueryResponse => {
                self.more_results(out);
                self.error(ER_EMPTY_QUERY, "Query was empty", out);
            }
            BackendMessage::ErrorResponse(fields) => {
                self.more_results(out);
                self.seq = errmap::encode_error(fields, self.seq, out);
                self.sent_anything = true;
                self.errored = true;
            }
            BackendMessage::NoticeResponse(fields) => {
                let level = if fields.get(b'V') == Some("WARNING") { "Warning" } else { "Note" };
                let code = errmap::error_number(fields.code()).code;
                let message = fields.get(b'M').unwrap_or_default().to_owned();
                self.warnings.push(Warning { level, code, message });
            }
            BackendMessage::ReadyForQuery(tx) => {
                self.tx = *tx;
                if !self.errored {
                    if !self.sent_anything && self.pending.is_none() {
                        self.pending = Some(Pending::Ok(0));
                    }
                    self.flush_pending(status_flags(self.session, *tx), out);
                }
                return Step::Done(*tx);
            }
            BackendMessage::CopyInResponse(_)
            | BackendMessage::CopyOutResponse(_)
            | BackendMessage::CopyBothResponse(_) => {
                self.more_results(out);
                self.error(ER_NOT_SUPPORTED_YET, "COPY is not supported through a cross-protocol pool", out);
                return Step::Unsupported;
            }
            _ => {}
        }
        Step::More
    }

    fn error(&mut self, number: ErrorNumber, message: &str, out: &mut Vec<u8>) {
        if !self.errored {
            self.seq = number.encode(message.as_bytes(), self.seq, out);
            self.sent_anything = true;
            self.errored = true;
        }
    }

    /// One row; a value that cannot be read as its column's type ends the result with an error
    /// (the statement fails) rather than reaching the client as a guess (#35).
    fn encode_row<'v>(&mut self, values: impl Iterator<Item = Option<&'v [u8]>>, out: &mut Vec<u8>) {
        if self.errored {
            return;
        }
        let cols = self.columns.iter().zip(self.scratch.iter_mut());
        let encoded = match self.format {
            RowFormat::Text => values
                .zip(cols)
                .map(|(v, (c, s))| v.map(|v| text_value(c, v, s)).transpose())
                .collect::<Result<Vec<Option<&[u8]>>, _>>()
                .map(|row| encode_text_row(&row, &mut self.payload)),
            RowFormat::Binary => values
                .zip(cols)
                .map(|(v, (c, s))| v.map_or(Ok(BinaryValue::Null), |v| binary_value(c, v, s)))
                .collect::<Result<Vec<BinaryValue<'_>>, _>>()
                .map(|row| encode_binary_row(&row, &mut self.payload)),
        };
        match encoded {
            Ok(()) => self.packet(out),
            Err(e) => {
                self.payload.clear();
                self.error(e.number(), &e.to_string(), out);
            }
        }
    }
}

/// Appends the `COM_STMT_PREPARE_OK` of statement `id`, as the MySQL client (`caps`) reads it:
/// one `?` definition per parameter (PostgreSQL type `params`), then one per result column
/// (name, PostgreSQL type, typmod), each non-empty section ending with an EOF unless the client
/// deprecated it (`status` in it).
pub fn encode_prepare_ok(
    caps: u64,
    id: u32,
    params: &[u32],
    columns: &[(String, u32, i32)],
    status: u16,
    out: &mut Vec<u8>,
) {
    let num_params = u16::try_from(params.len()).unwrap_or(u16::MAX);
    let num_columns = u16::try_from(columns.len()).unwrap_or(u16::MAX);
    let mut p = Vec::with_capacity(64);
    StmtPrepareOk { stmt_id: id, num_columns, num_params, warnings: 0 }.encode(&mut p);
    let mut seq = encode_packets(&p, 1, out);
    let params: Vec<_> = params.iter().map(|o| ("?", *o, -1)).collect();
    let columns: Vec<_> = columns.iter().map(|(name, o, typmod)| (name.as_str(), *o, *typmod)).collect();
    for defs in [params, columns].iter().filter(|d| !d.is_empty()) {
        for (name, oid, typmod) in defs {
            p.clear();
            map_type(*oid, *typmod).encode_definition(name.as_bytes(), &mut p);
            seq = encode_packets(&p, seq, out);
        }
        if caps & CLIENT_DEPRECATE_EOF == 0 {
            p.clear();
            EofPacket { warnings: 0, status }.encode(&mut p);
            seq = encode_packets(&p, seq, out);
        }
    }
}

/// Appends a complete text result set computed by the router (emulated session commands):
/// columns of `(name, column)` and rows of optional text values, ending with `status`, framed from
/// sequence id `seq`.
pub fn encode_local_result(
    caps: u64,
    mut seq: u8,
    columns: &[(&str, Column)],
    rows: &[Vec<Option<String>>],
    status: u16,
    out: &mut Vec<u8>,
) {
    let mut payload = Vec::with_capacity(128);
    put_lenenc_int(&mut payload, columns.len() as u64);
    seq = encode_packets(&payload, seq, out);
    for (name, c) in columns {
        payload.clear();
        c.encode_definition(name.as_bytes(), &mut payload);
        seq = encode_packets(&payload, seq, out);
    }
    let deprecate_eof = caps & CLIENT_DEPRECATE_EOF != 0;
    if !deprecate_eof {
        payload.clear();
        EofPacket { warnings: 0, status }.encode(&mut payload);
        seq = encode_packets(&payload, seq, out);
    }
    for row in rows {
        payload.clear();
        let values: Vec<Option<&[u8]>> = row.iter().map(|v| v.as_deref().map(str::as_bytes)).collect();
        encode_text_row(&values, &mut payload);
        seq = encode_packets(&payload, seq, out);
    }
    payload.clear();
    if deprecate_eof {
        OkPacket { status, ..OkPacket::default() }.encode_as_eof(caps, &mut payload);
    } else {
        EofPacket { warnings: 0, status }.encode(&mut payload);
    }
    encode_packets(&payload, seq, out);
}
