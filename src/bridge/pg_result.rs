//! Re-encodes a MySQL response (to `COM_QUERY` or `COM_STMT_EXECUTE`) as the PostgreSQL
//! messages a PostgreSQL client expects: RowDescription (simple query only: in the extended
//! protocol Describe sends it), DataRow in the client's requested formats, CommandComplete with
//! PostgreSQL's tags, ErrorResponse with the mapped SQLSTATE. Sans-IO: the session feeds every
//! backend payload in order and writes `out` to the client; ReadyForQuery is the session's.
//!
//! The backend connection never negotiates `CLIENT_DEPRECATE_EOF` (see `pool::mysql`), so column
//! definitions and rows each end with an EOF packet whose status flags tell whether another
//! result follows (`SERVER_MORE_RESULTS_EXISTS`) and whether a transaction is open.

use super::errmap;
use super::pg_column::{pg_column, PgColumn};
use super::pg_value::{binary_row_value, names_no_day_binary, names_no_day_text, text_row_value, ValueError};
use super::tag::command_tag;
use crate::protocol::mysql::response::{
    classify_response, classify_row, EofPacket, ErrPacket, OkPacket, ResponseKind, RowKind,
};
use crate::protocol::mysql::response::{SERVER_MORE_RESULTS_EXISTS, SERVER_STATUS_IN_TRANS};
use crate::protocol::mysql::{decode_binary_row, decode_text_row, ColumnDefinition41, DecodeError, ValueType};
use crate::protocol::pg::backend::encode_row_description;
use crate::protocol::pg::{BackendMessage, ErrorFields, Severity, TransactionStatus};

/// `ER_LOCK_DEADLOCK`: MySQL rolled the whole transaction back.
const ER_LOCK_DEADLOCK: u16 = 1213;

/// What the session does after feeding a payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PgStep {
    /// Feed the next payload.
    More,
    /// The response is complete.
    Done,
    /// The server asked for a `LOAD DATA LOCAL` file: the client was told it is unsupported;
    /// the session must send the server an empty packet (no file) and keep feeding.
    LocalInfile,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Expecting the first packet of a result.
    First,
    /// Reading column definitions; this many are left.
    Columns(u64),
    /// Expecting the EOF after the column definitions.
    ColumnsEnd,
    /// Reading rows.
    Rows,
}

/// The result columns of a response, as they came in the column definitions.
pub type Columns = Vec<PgColumn>;

/// What the current result has sent so far.
#[derive(Debug, Default)]
struct Counts {
    /// Rows, for the `SELECT n` tag.
    rows: u64,
    /// Dates sent as NULL because they name no calendar day (a WARNING notice says how many).
    no_day_dates: u64,
}

/// Translates one MySQL response into PostgreSQL messages.
#[derive(Debug)]
pub struct PgResultWriter<'s> {
    /// Statement texts, one per result, for the CommandComplete tags.
    statements: Vec<&'s str>,
    index: usize,
    binary_rows: bool,
    describe: bool,
    formats: &'s [i16],
    caps: u64,
    state: State,
    columns: Columns,
    value_types: Vec<ValueType>,
    counts: Counts,
    /// Status flags of the last OK/EOF.
    pub status: u16,
    /// Whether the response carried an error (later payloads are drained silently).
    pub errored: bool,
}

impl<'s> PgResultWriter<'s> {
    /// A writer for the response to `statements` (one text per expected result). `binary_rows`:
    /// the response is to `COM_STMT_EXECUTE`; `describe`: send a RowDescription for each result
    /// set; `formats`: the Bind's result format codes (none: all text, one: for all columns);
    /// `caps`: the backend connection's capabilities; `status`: the flags before the statement.
    #[must_use]
    pub fn new(
        statements: Vec<&'s str>,
        binary_rows: bool,
        describe: bool,
        formats: &'s [i16],
        caps: u64,
        status: u16,
    ) -> Self {
        Self {
            statements,
            index: 0,
            binary_rows,
            describe,
            formats,
            caps,
            state: State::First,
            columns: Vec::new(),
            value_types: Vec::new(),
            counts: Counts::default(),
            status,
            errored: false,
        }
    }

    /// The transaction state to report in ReadyForQuery. MySQL keeps a transaction open after a
    /// failed statement (no aborted state), except after a deadlock, which rolls it back.
    #[must_use]
    pub fn transaction_status(&self) -> TransactionStatus {
        tx_status(self.status)
    }

    /// The columns of the last result set.
    #[must_use]
    pub fn columns(&self) -> &[PgColumn] {
        &self.columns
    }

    /// Feeds one backend payload, appending client messages to `out`.
    pub fn on_payload(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<PgStep, DecodeError> {
        match self.state {
            State::First => self.on_first(payload, out),
            State::Columns(left) => {
                let def = ColumnDefinition41::decode(payload)?;
                self.value_types.push(def.value_type());
                self.columns.push(pg_column(&def));
                self.state = if left <= 1 { State::ColumnsEnd } else { State::Columns(left - 1) };
                Ok(PgStep::More)
            }
            State::ColumnsEnd => {
                self.start_rows(out);
                if classify_row(payload, self.caps) == RowKind::End {
                    return Ok(PgStep::More);
                }
                // With CLIENT_DEPRECATE_EOF the rows follow the definitions directly.
                self.on_row(payload, out)
            }
            State::Rows => self.on_row(payload, out),
        }
    }

    fn statement(&self) -> &'s str {
        self.statements.get(self.index).or_else(|| self.statements.last()).copied().unwrap_or_default()
    }

    fn on_first(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<PgStep, DecodeError> {
        match classify_response(payload)? {
            ResponseKind::Ok => {
                let ok = OkPacket::decode(payload, self.caps)?;
                let tag = command_tag(self.statement(), ok.affected_rows);
                self.complete(&tag, ok.status, out)
            }
            ResponseKind::Err => {
                self.error(&ErrPacket::decode(payload)?, out);
                Ok(PgStep::Done)
            }
            ResponseKind::Eof => {
                self.status = EofPacket::decode(payload)?.status;
                Ok(PgStep::Done)
            }
            ResponseKind::LocalInfile => {
                self.refuse("LOAD DATA LOCAL INFILE is not supported through a cross-protocol pool", out);
                Ok(PgStep::LocalInfile)
            }
            ResponseKind::ResultSet { column_count } => {
                self.columns.clear();
                self.value_types.clear();
                self.counts = Counts::default();
                self.state = State::Columns(column_count);
                Ok(PgStep::More)
            }
        }
    }

    fn start_rows(&mut self, out: &mut Vec<u8>) {
        self.state = State::Rows;
        if self.describe && !self.errored {
            let fields: Vec<_> =
                self.columns.iter().enumerate().map(|(i, c)| c.field(format_of(self.formats, i))).collect();
            // Names come from MySQL and hold no NUL; an over-long description cannot be sent.
            let _ = encode_row_description(&fields, out);
        }
    }

    fn on_row(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<PgStep, DecodeError> {
        match classify_row(payload, self.caps) {
            RowKind::Row => {
                if !self.errored {
                    self.data_row(payload, out)?;
                }
                self.counts.rows += 1;
                Ok(PgStep::More)
            }
            RowKind::End => {
                let status = if payload.len() < 9 {
                    EofPacket::decode(payload)?.status
                } else {
                    OkPacket::decode(payload, self.caps)?.status
                };
                let tag = format!("SELECT {}", self.counts.rows);
                self.complete(&tag, status, out)
            }
            RowKind::Err => {
                self.error(&ErrPacket::decode(payload)?, out);
                Ok(PgStep::Done)
            }
        }
    }

    fn data_row(&mut self, payload: &[u8], out: &mut Vec<u8>) -> Result<(), DecodeError> {
        let start = out.len();
        out.push(b'D');
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&u16::try_from(self.columns.len()).unwrap_or(u16::MAX).to_be_bytes());
        let mut bad = None;
        if self.binary_rows {
            let values = decode_binary_row(payload, &self.value_types)?;
            for (i, (v, c)) in values.iter().zip(&self.columns).enumerate() {
                let no_day = names_no_day_binary(c.kind, v);
                self.counts.no_day_dates += u64::from(no_day);
                let value = (!v.is_null() && !no_day).then_some(v);
                put_value(out, value, |v, o| {
                    keep_first(&mut bad, binary_row_value(c, v, format_of(self.formats, i), o))
                });
            }
        } else {
            let values = decode_text_row(payload, self.columns.len())?;
            for (i, (v, c)) in values.iter().zip(&self.columns).enumerate() {
                let no_day = v.is_some_and(|raw| names_no_day_text(c.kind, raw));
                self.counts.no_day_dates += u64::from(no_day);
                let value = v.filter(|_| !no_day);
                put_value(out, value, |raw, o| {
                    keep_first(&mut bad, text_row_value(c, raw, format_of(self.formats, i), o))
                });
            }
        }
        if let Some(e) = bad {
            // The row is not sent: the statement fails with the value's error, as PostgreSQL's
            // own output of an impossible value would.
            out.truncate(start);
            self.errored = true;
            encode_error_fields(e.sqlstate, &e.to_string(), None, out);
            return Ok(());
        }
        let len = i32::try_from(out.len() - start - 1).unwrap_or(i32::MAX);
        patch(out, start + 1, len);
        Ok(())
    }

    fn complete(&mut self, tag: &str, status: u16, out: &mut Vec<u8>) -> Result<PgStep, DecodeError> {
        self.status = status;
        if !self.errored && self.counts.no_day_dates > 0 {
            let message = format!(
                "{} MySQL date value(s) naming no calendar day (such as 0000-00-00) were sent as NULL",
                self.counts.no_day_dates
            );
            // Short text built here, no NUL: encoding cannot fail.
            let _ = ErrorFields::new(Severity::Warning, "01000", &message).encode_notice(out);
            self.counts.no_day_dates = 0;
        }
        if !self.errored {
            // A tag is short ASCII built here: encoding cannot fail.
            let _ = BackendMessage::CommandComplete(tag).encode(out);
        }
        if status & SERVER_MORE_RESULTS_EXISTS != 0 {
            self.index += 1;
            self.state = State::First;
            return Ok(PgStep::More);
        }
        Ok(PgStep::Done)
    }

    fn error(&mut self, err: &ErrPacket<'_>, out: &mut Vec<u8>) {
        if err.code == ER_LOCK_DEADLOCK {
            self.status &= !SERVER_STATUS_IN_TRANS;
        }
        if self.errored {
            return;
        }
        self.errored = true;
        let state = errmap::sqlstate(err.code, err.sql_state);
        let code = std::str::from_utf8(&state).unwrap_or("XX000");
        let message = String::from_utf8_lossy(err.message);
        let detail = format!("MySQL error {}", err.code);
        encode_error_fields(code, &message, Some(&detail), out);
    }

    fn refuse(&mut self, message: &str, out: &mut Vec<u8>) {
        if !self.errored {
            self.errored = true;
            encode_error_fields("0A000", message, None, out);
        }
    }
}

/// Appends an ErrorResponse; NUL bytes (which the wire format cannot carry) cut the text.
pub fn encode_error_fields(code: &str, message: &str, detail: Option<&str>, out: &mut Vec<u8>) {
    let cut = |s: &'_ str| s.split('\0').next().unwrap_or_default().to_owned();
    let (message, detail) = (cut(message), detail.map(cut));
    let fields = ErrorFields { detail: detail.as_deref(), ..ErrorFields::new(Severity::Error, code, &message) };
    let _ = fields.encode_error(out);
}

/// The transaction state MySQL status flags report.
#[must_use]
pub fn tx_status(status: u16) -> TransactionStatus {
    if status & SERVER_STATUS_IN_TRANS != 0 {
        TransactionStatus::InBlock
    } else {
        TransactionStatus::Idle
    }
}

/// The format code of result column `i` under Bind's format list.
#[must_use]
pub fn format_of(formats: &[i16], i: usize) -> i16 {
    match formats {
        [] => 0,
        [one] => *one,
        many => many.get(i).copied().unwrap_or(0),
    }
}

/// Appends one DataRow value: its length (-1 for NULL), then what `write` produces.
/// Keeps the first of a row's value errors.
fn keep_first(bad: &mut Option<ValueError>, r: Result<(), ValueError>) {
    if let (None, Err(e)) = (&bad, r) {
        *bad = Some(e);
    }
}

fn put_value<T>(out: &mut Vec<u8>, value: Option<T>, write: impl FnOnce(T, &mut Vec<u8>)) {
    let Some(v) = value else {
        out.extend_from_slice(&(-1i32).to_be_bytes());
        return;
    };
    let at = out.len();
    out.extend_from_slice(&[0; 4]);
    write(v, out);
    let len = i32::try_from(out.len() - at - 4).unwrap_or(i32::MAX);
    patch(out, at, len);
}

fn patch(out: &mut [u8], at: usize, len: i32) {
    if let Some(slot) = out.get_mut(at..at + 4) {
        slot.copy_from_slice(&len.to_be_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bridge::types::{map_type, oid};
    use crate::protocol::mysql::capability::{CLIENT_PROTOCOL_41, CLIENT_TRANSACTIONS};
    use crate::protocol::mysql::codec::put_lenenc_int;
    use crate::protocol::mysql::{encode_binary_row, encode_text_row, BinaryValue};
    use crate::protocol::pg::decode_frame;

    /// What the backend connection negotiates (`pool::mysql`), as far as responses care.
    const CAPS: u64 = CLIENT_PROTOCOL_41 | CLIENT_TRANSACTIONS;

    /// A MySQL column definition as the forward bridge describes PostgreSQL type `type_oid`.
    fn def(name: &[u8], type_oid: u32) -> Vec<u8> {
        let mut p = Vec::new();
        map_type(type_oid, -1).encode_definition(name, &mut p);
        p
    }

    fn eof(status: u16) -> Vec<u8> {
        let mut p = Vec::new();
        EofPacket { warnings: 0, status }.encode(&mut p);
        p
    }

    fn ok(affected_rows: u64, status: u16) -> Vec<u8> {
        let mut p = Vec::new();
        OkPacket { affected_rows, status, ..OkPacket::default() }.encode(CAPS, &mut p);
        p
    }

    fn result_set(rows: Vec<Vec<u8>>, status: u16) -> Vec<Vec<u8>> {
        let mut count = Vec::new();
        put_lenenc_int(&mut count, 2);
        let mut all = vec![count, def(b"id", oid::INT4), def(b"name", oid::TEXT), eof(status)];
        all.extend(rows);
        all.push(eof(status));
        all
    }

    /// Feeds payloads; returns (tag, body) of each PostgreSQL message and the last step.
    fn run(w: &mut PgResultWriter<'_>, payloads: &[Vec<u8>]) -> (Vec<(u8, Vec<u8>)>, PgStep) {
        let mut out = Vec::new();
        let mut step = PgStep::More;
        for p in payloads {
            step = w.on_payload(p, &mut out).expect("decodes");
        }
        let mut msgs = Vec::new();
        let mut rest = &out[..];
        while let Some(f) = decode_frame(rest, 1 << 20).expect("frame") {
            msgs.push((f.tag, f.body.to_vec()));
            rest = &rest[f.total_len..];
        }
        (msgs, step)
    }

    fn decode<'a>(m: &'a (u8, Vec<u8>)) -> BackendMessage<'a> {
        BackendMessage::decode(&crate::protocol::pg::Frame::new(m.0, &m.1)).expect("message")
    }

    #[test]
    fn text_result_set_becomes_row_description_rows_and_select_tag() {
        let mut row1 = Vec::new();
        encode_text_row(&[Some(b"7"), Some("é".as_bytes())], &mut row1);
        let mut row2 = Vec::new();
        encode_text_row(&[Some(b"-1"), None], &mut row2);
        let mut w = PgResultWriter::new(vec!["SELECT id, name FROM t"], false, true, &[], CAPS, 0);
        let (msgs, step) = run(&mut w, &result_set(vec![row1, row2], SERVER_STATUS_IN_TRANS));
        assert_eq!(step, PgStep::Done);
        assert_eq!(msgs.iter().map(|m| m.0).collect::<Vec<_>>(), b"TDDC");
        let BackendMessage::RowDescription(rd) = decode(&msgs[0]) else { panic!("row description") };
        let fields: Vec<_> = rd.iter().map(|f| (f.name, f.type_oid, f.type_size, f.format)).collect();
        assert_eq!(fields, vec![("id", oid::INT4, 4, 0), ("name", oid::TEXT, -1, 0)]);
        let BackendMessage::DataRow(v) = decode(&msgs[1]) else { panic!("data row") };
        assert_eq!(v.iter().collect::<Vec<_>>(), vec![Some(&b"7"[..]), Some("é".as_bytes())]);
        let BackendMessage::DataRow(v) = decode(&msgs[2]) else { panic!("data row") };
        assert_eq!(v.iter().collect::<Vec<_>>(), vec![Some(&b"-1"[..]), None]);
        assert_eq!(decode(&msgs[3]), BackendMessage::CommandComplete("SELECT 2"));
        assert_eq!(w.transaction_status(), TransactionStatus::InBlock);
        assert_eq!(w.columns().len(), 2);
    }

    /// A value with no binary form of its column's type fails the statement with its error
    /// (22P02 here); the rows before it were sent, the row holding it is not, and no
    /// CommandComplete follows. Before, the client got 0 in its place and a normal end.
    #[test]
    fn a_value_with_no_binary_form_fails_the_statement() {
        let mut good = Vec::new();
        encode_text_row(&[Some(b"7"), Some(b"a")], &mut good);
        let mut bad = Vec::new();
        encode_text_row(&[Some(b"x7"), Some(b"b")], &mut bad);
        let mut w = PgResultWriter::new(vec!["SELECT id, name FROM t"], false, true, &[1], CAPS, 0);
        let (msgs, step) = run(&mut w, &result_set(vec![good, bad], 0));
        assert_eq!(step, PgStep::Done);
        assert_eq!(msgs.iter().map(|m| m.0).collect::<Vec<_>>(), b"TDE");
        let BackendMessage::DataRow(v) = decode(&msgs[1]) else { panic!("data row") };
        assert_eq!(v.iter().collect::<Vec<_>>(), vec![Some(&7i32.to_be_bytes()[..]), Some(&b"a"[..])]);
        let BackendMessage::ErrorResponse(e) = decode(&msgs[2]) else { panic!("error") };
        assert_eq!(e.code(), Some("22P02"));
        let message = e.to_fields().message.unwrap_or_default();
        assert!(message.contains("\"x7\"") && message.contains("integer"), "{message}");
    }

    #[test]
    fn multi_statement_ok_then_error() {
        let stmts = vec!["INSERT INTO t VALUES (1),(2),(3)", "UPDATE t SET a = 1", "INSERT INTO t VALUES (1)"];
        let mut w = PgResultWriter::new(stmts, false, true, &[], CAPS, 0);
        let mut err = Vec::new();
        ErrPacket { code: 1062, sql_state: Some(*b"23000"), message: b"Duplicate entry '1' for key 'PRIMARY'" }
            .encode(&mut err);
        let more = SERVER_MORE_RESULTS_EXISTS | SERVER_STATUS_IN_TRANS;
        let (msgs, step) = run(&mut w, &[ok(3, more), ok(2, more), err]);
        assert_eq!(step, PgStep::Done);
        assert_eq!(decode(&msgs[0]), BackendMessage::CommandComplete("INSERT 0 3"));
        assert_eq!(decode(&msgs[1]), BackendMessage::CommandComplete("UPDATE 2"));
        let BackendMessage::ErrorResponse(f) = decode(&msgs[2]) else { panic!("error") };
        assert_eq!(f.code(), Some("23505"));
        assert_eq!(f.get(b'M'), Some("Duplicate entry '1' for key 'PRIMARY'"));
        assert_eq!(f.get(b'D'), Some("MySQL error 1062"));
        assert!(w.errored);
        // MySQL keeps the transaction open after a failed statement.
        assert_eq!(w.transaction_status(), TransactionStatus::InBlock);
    }

    #[test]
    fn deadlock_ends_the_transaction() {
        let mut w = PgResultWriter::new(vec!["UPDATE t SET a = 1"], false, true, &[], CAPS, SERVER_STATUS_IN_TRANS);
        let mut err = Vec::new();
        ErrPacket { code: 1213, sql_state: Some(*b"40001"), message: b"Deadlock found" }.encode(&mut err);
        let (msgs, _) = run(&mut w, &[err]);
        let BackendMessage::ErrorResponse(f) = decode(&msgs[0]) else { panic!("error") };
        assert_eq!(f.code(), Some("40P01"));
        assert_eq!(w.transaction_status(), TransactionStatus::Idle);
    }

    #[test]
    fn binary_rows_in_requested_formats_without_description() {
        let mut row = Vec::new();
        encode_binary_row(&[BinaryValue::I32(-5), BinaryValue::Bytes(b"x")], &mut row);
        let formats = [1, 0];
        let mut w = PgResultWriter::new(vec!["SELECT id, name FROM t WHERE id = ?"], true, false, &formats, CAPS, 0);
        let (msgs, step) = run(&mut w, &result_set(vec![row], 0));
        assert_eq!(step, PgStep::Done);
        assert_eq!(msgs.iter().map(|m| m.0).collect::<Vec<_>>(), b"DC", "Execute sends no RowDescription");
        let BackendMessage::DataRow(v) = decode(&msgs[0]) else { panic!("data row") };
        assert_eq!(v.iter().collect::<Vec<_>>(), vec![Some(&(-5i32).to_be_bytes()[..]), Some(&b"x"[..])]);
        assert_eq!(decode(&msgs[1]), BackendMessage::CommandComplete("SELECT 1"));
    }

    #[test]
    fn local_infile_is_refused() {
        let mut w = PgResultWriter::new(vec!["LOAD DATA LOCAL INFILE 'x' INTO TABLE t"], false, true, &[], CAPS, 0);
        let (msgs, step) = run(&mut w, &[b"\xFBx".to_vec()]);
        assert_eq!(step, PgStep::LocalInfile);
        let BackendMessage::ErrorResponse(f) = decode(&msgs[0]) else { panic!("error") };
        assert_eq!(f.code(), Some("0A000"));
        // The server's answer after the empty file is drained silently.
        let (msgs, step) = run(&mut w, &[ok(0, 0)]);
        assert_eq!((msgs.len(), step), (0, PgStep::Done));
    }

    #[test]
    fn format_codes() {
        assert_eq!(format_of(&[], 3), 0);
        assert_eq!(format_of(&[1], 3), 1);
        assert_eq!(format_of(&[0, 1], 1), 1);
        assert_eq!(format_of(&[0, 1], 5), 0);
    }
}
