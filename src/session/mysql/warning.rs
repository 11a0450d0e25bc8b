//! The warning a MySQL client gets for a statement that succeeded after a retry, when the retry
//! policy says `notify_client` (#11): the final OK/EOF packet of the relayed response carries one
//! more warning, and the client's very next command, if it is `SHOW WARNINGS`,
//! `SHOW COUNT(*) WARNINGS` or `SELECT @@warning_count`, is answered here with the backend's own
//! warnings of that statement (read with SHOW WARNINGS on the same connection right after it,
//! before the connection can go back to the pool) plus a `Note` saying what was retried. Any
//! other command forgets the note.

use super::Session;
use crate::protocol::mysql::column::{BINARY_FLAG, NOT_NULL_FLAG, UNSIGNED_FLAG};
use crate::protocol::mysql::command::COM_QUERY;
use crate::protocol::mysql::response::SERVER_MORE_RESULTS_EXISTS;
use crate::protocol::mysql::{add_warning, encode_packets, encode_text_row, ColumnDefinition41, ColumnType, EofPacket};
use crate::protocol::mysql::{framer::MAX_PACKET_PAYLOAD, Reader};
use crate::session::engine::retry::ServerError;
use crate::session::error::RelayError;
use crate::sql::lexer::{Lexer, TokenKind};

/// `binary` collation id, for the synthesized count column.
const BINARY_CHARSET: u16 = 63;

/// The retry warning of the statement being relayed and of the one relayed last.
#[derive(Debug, Default)]
pub(super) struct RetryNotice {
    /// The statement being relayed succeeded after a retry: add a warning to its final OK/EOF.
    pub bump: bool,
    /// The final OK/EOF got its extra warning.
    pub bumped: bool,
    /// What the next `SHOW WARNINGS` answers, until any other command.
    pending: Option<Box<Pending>>,
}

/// The warnings of a retried statement: the backend's own, raw, and the router's note.
#[derive(Debug)]
struct Pending {
    /// SHOW WARNINGS' column count, column definitions and their EOF, as the backend sent them.
    head: Vec<Vec<u8>>,
    /// The backend's rows.
    rows: Vec<Vec<u8>>,
    /// The router's `Note` row.
    note: Vec<u8>,
}

/// The retried error and how many attempts it took, for the note's text.
pub(super) struct Retried {
    /// The error number.
    pub code: u16,
    /// Its SQLSTATE.
    pub sql_state: [u8; 5],
    /// Attempts made, the successful one included.
    pub attempt: u32,
    /// The policy's `maximum_attempts`.
    pub of: u32,
}

impl Retried {
    /// From the error that was retried (an ERR that did not decode has no number).
    pub fn new(e: ServerError, attempt: u32, of: u32) -> Option<Self> {
        Some(Self { code: e.code?, sql_state: e.sqlstate.unwrap_or(*b"HY000"), attempt, of })
    }
}

/// Which question about warnings a command asks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Question {
    /// `SHOW WARNINGS`.
    List,
    /// `SHOW COUNT(*) WARNINGS` or `SELECT @@warning_count`, with the column name the server uses.
    Count(&'static str),
}

/// The question `sql` asks, if it is one this module answers.
fn question(sql: &str) -> Option<Question> {
    let words: Vec<String> = Lexer::new(sql, crate::sql::Dialect::MySql)
        .filter(|t| t.kind != TokenKind::Comment && t.kind != TokenKind::Semicolon)
        .map(|t| t.text.to_ascii_lowercase())
        .collect();
    match words.join(" ").as_str() {
        "show warnings" => Some(Question::List),
        "show count ( * ) warnings" => Some(Question::Count("@@session.warning_count")),
        "select @@warning_count" => Some(Question::Count("@@warning_count")),
        _ => None,
    }
}

/// Appends `payloads` framed with consecutive sequence ids from `seq`, then an EOF with `status`.
pub(super) fn encode_result(
    mut seq: u8,
    payloads: impl IntoIterator<Item = impl AsRef<[u8]>>,
    status: u16,
    out: &mut Vec<u8>,
) {
    for p in payloads {
        seq = encode_packets(p.as_ref(), seq, out);
    }
    let mut eof = Vec::with_capacity(5);
    EofPacket { warnings: 0, status }.encode(&mut eof);
    encode_packets(&eof, seq, out);
}

/// The one-column result set of a warning count.
fn encode_count(seq: u8, name: &str, count: u64, status: u16, out: &mut Vec<u8>) {
    let column = ColumnDefinition41 {
        catalog: b"def",
        schema: b"",
        table: b"",
        org_table: b"",
        name: name.as_bytes(),
        org_name: b"",
        charset: BINARY_CHARSET,
        column_length: 21,
        column_type: ColumnType::LONGLONG,
        flags: NOT_NULL_FLAG | UNSIGNED_FLAG | BINARY_FLAG,
        decimals: 0,
    };
    let mut def = Vec::with_capacity(48);
    column.encode(&mut def);
    let mut eof = Vec::with_capacity(5);
    EofPacket { warnings: 0, status }.encode(&mut eof);
    let mut row = Vec::with_capacity(8);
    encode_text_row(&[Some(count.to_string().as_bytes())], &mut row);
    encode_result(seq, [&[1u8][..], &def, &eof, &row], status, out);
}

impl Session {
    /// Adds the retry warning to the payload of `len` bytes just appended to the client output
    /// (an OK/EOF with `status`) when it ends a response relayed with [`RetryNotice::bump`].
    pub(super) fn bump_final(&mut self, len: usize, status: Option<u16>) {
        let last = status.is_some_and(|s| s & SERVER_MORE_RESULTS_EXISTS == 0);
        if !self.retry.notice.bump || !last || len >= MAX_PACKET_PAYLOAD {
            return;
        }
        let start = self.io.out.len().saturating_sub(len);
        if let Some(payload) = self.io.out.get_mut(start..) {
            self.retry.notice.bumped |= add_warning(payload).is_some();
        }
    }

    /// After a retried statement succeeded with its warning count raised: reads the backend's
    /// warnings of it on the same connection and keeps them with the router's note for the
    /// client's next command. The statement's response stands whatever happens here: a backend
    /// lost now only costs the note (and the connection, closed at release).
    pub(super) async fn keep_retry_warnings(&mut self, retried: Retried) {
        // The client has its answer before the router asks the server for more; a client gone
        // meanwhile is noticed at its next command.
        let _ = self.io.flush().await;
        let (head, rows) = match self.backend_warnings().await {
            Ok(Some(kept)) => kept,
            Ok(None) => return,
            Err(e) => {
                tracing::debug!(error = %e, "SHOW WARNINGS after a retry failed; the connection goes");
                if let Some(c) = self.seat.conn.as_mut() {
                    c.broken = true;
                }
                return;
            }
        };
        let text = format!(
            "querypilot: statement failed with error {} ({}) before any result; retried, attempt {} of {}",
            retried.code,
            String::from_utf8_lossy(&retried.sql_state),
            retried.attempt,
            retried.of
        );
        let mut note = Vec::with_capacity(text.len() + 16);
        encode_text_row(&[Some(b"Note"), Some(retried.code.to_string().as_bytes()), Some(text.as_bytes())], &mut note);
        self.retry.notice.pending = Some(Box::new(Pending { head, rows, note }));
    }

    /// Runs SHOW WARNINGS on the backend: its column count, column definitions and EOF, and its
    /// rows, each payload whole; `None` when the answer is not that (an ERR, or a payload too
    /// long to keep). `Err` means the backend was lost.
    async fn backend_warnings(&mut self) -> Result<Option<(Vec<Vec<u8>>, Vec<Vec<u8>>)>, RelayError> {
        self.send_command(b"\x03SHOW WARNINGS").await?;
        let first = self.backend_payload(false).await?;
        if first.is_err() {
            self.compact();
            return Ok(None);
        }
        let columns = Reader::new(&first.head).lenenc_int("column count");
        let columns = columns.map_err(|e| RelayError::Malformed(e.to_string()))?;
        let mut head = vec![first.whole().map(<[u8]>::to_vec)];
        for _ in 0..=columns {
            let p = self.backend_payload(false).await?;
            head.push(p.whole().map(<[u8]>::to_vec));
        }
        let mut rows = Vec::new();
        loop {
            let p = self.backend_payload(false).await?;
            if p.is_eof() || p.is_err() {
                break;
            }
            rows.push(p.whole().map(<[u8]>::to_vec));
        }
        self.compact();
        let head: Option<Vec<_>> = head.into_iter().collect();
        let rows: Option<Vec<_>> = rows.into_iter().collect();
        Ok(head.zip(rows).filter(|_| columns == 3))
    }

    /// Answers the client's command from the kept retry warning when it asks for warnings;
    /// any command forgets the warning. Returns whether the command was answered.
    pub(super) fn answer_retry_warning(&mut self, code: u8, body: &[u8]) -> bool {
        let Some(pending) = self.retry.notice.pending.take() else {
            return false;
        };
        if code != COM_QUERY {
            return false;
        }
        let status = self.tx.status;
        match question(&String::from_utf8_lossy(body)) {
            Some(Question::List) => {
                let payloads = pending.head.iter().chain(std::iter::once(&pending.note)).chain(&pending.rows);
                encode_result(self.client.reply_seq, payloads, status, &mut self.io.out);
            }
            Some(Question::Count(name)) => {
                encode_count(self.client.reply_seq, name, pending.rows.len() as u64 + 1, status, &mut self.io.out)
            }
            None => return false,
        }
        true
    }
}

#[cfg(test)]
mod tests;
