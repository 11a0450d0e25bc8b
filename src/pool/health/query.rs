//! One text-protocol query on a probe's dedicated connection, results as strings: PostgreSQL
//! simple query (`Query` → `RowDescription`/`DataRow`… → `ReadyForQuery`, protocol 3.0 §55.2.2)
//! and MySQL `COM_QUERY` with a text result set (column count, definitions, EOF, rows, EOF; the
//! router never asks backends for `CLIENT_DEPRECATE_EOF`).

use crate::error::{ErrorCode, Origin};
use crate::pool::Conn;
use crate::protocol::mysql::{self as my, ColumnDefinition41, ErrPacket};
use crate::protocol::pg::{self, frontend, BackendMessage};
use crate::rt;

/// Largest message a probe accepts from a backend.
const MAX_MESSAGE: usize = 1 << 20;

/// Why a probe query failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The socket failed or closed.
    #[error("probe connection failed: {0}")]
    Io(#[from] std::io::Error),
    /// The server answered with an error.
    #[error("probe query failed on the server: {0}")]
    Server(String),
    /// The server's answer could not be understood.
    #[error("probe answer undecodable: {0}")]
    Protocol(String),
}

impl ErrorCode for ProbeError {
    fn code(&self) -> &'static str {
        match self {
            Self::Io(_) => "health.io",
            Self::Server(_) => "health.server",
            Self::Protocol(_) => "health.protocol",
        }
    }
    fn origin(&self) -> Origin {
        Origin::Backend
    }
}

/// A small result set: column names and rows of text values (`None` is NULL).
#[derive(Debug, Default)]
pub struct Rows {
    /// Column names in order.
    pub columns: Vec<String>,
    /// Rows, each with one value per column.
    pub rows: Vec<Vec<Option<String>>>,
}

impl Rows {
    /// The value of column `name` (first of `names` present) in the first row.
    pub fn first(&self, names: &[&str]) -> Option<&str> {
        let i = self.columns.iter().position(|c| names.iter().any(|n| c.eq_ignore_ascii_case(n)))?;
        self.rows.first()?.get(i)?.as_deref()
    }
}

fn text(v: Option<&[u8]>) -> Option<String> {
    v.map(|b| String::from_utf8_lossy(b).into_owned())
}

async fn fill(conn: &mut Conn) -> Result<(), ProbeError> {
    let n = rt::read_some(&mut conn.stream, &mut conn.rbuf, 4096).await?;
    if n == 0 {
        return Err(ProbeError::Io(std::io::ErrorKind::UnexpectedEof.into()));
    }
    Ok(())
}

/// Runs `sql` as a PostgreSQL simple query and reads up to `ReadyForQuery`.
pub async fn pg_query(conn: &mut Conn, sql: &str) -> Result<Rows, ProbeError> {
    let mut out = Vec::with_capacity(sql.len() + 8);
    frontend::encode_query(sql, &mut out).map_err(|e| ProbeError::Protocol(e.to_string()))?;
    rt::write_all(&mut conn.stream, &out).await?;
    pg_read_rows(conn).await
}

/// Reads the answer to one simple query already sent on `conn`, up to its `ReadyForQuery`.
pub async fn pg_read_rows(conn: &mut Conn) -> Result<Rows, ProbeError> {
    let mut rows = Rows::default();
    let mut failure = None;
    loop {
        let (tag, body, used) = match pg::decode_frame(&conn.rbuf, MAX_MESSAGE) {
            Ok(Some(f)) => (f.tag, f.body.to_vec(), f.total_len),
            Ok(None) => {
                fill(conn).await?;
                continue;
            }
            Err(e) => return Err(ProbeError::Protocol(e.to_string())),
        };
        conn.rbuf.drain(..used);
        let frame = pg::Frame::new(tag, &body);
        match BackendMessage::decode(&frame).map_err(|e| ProbeError::Protocol(e.to_string()))? {
            BackendMessage::RowDescription(d) => rows.columns = d.iter().map(|f| f.name.to_owned()).collect(),
            BackendMessage::DataRow(values) => rows.rows.push(values.iter().map(text).collect()),
            BackendMessage::ErrorResponse(fields) => {
                let code = fields.code().unwrap_or("?????");
                failure = Some(format!("{code} {}", fields.get(b'M').unwrap_or("")));
            }
            BackendMessage::ReadyForQuery(_) => break,
            _ => {}
        }
    }
    failure.map_or(Ok(rows), |m| Err(ProbeError::Server(m)))
}

/// Reads one MySQL payload.
async fn my_read(conn: &mut Conn) -> Result<Vec<u8>, ProbeError> {
    loop {
        match my::decode_payload(&conn.rbuf, MAX_MESSAGE) {
            Ok(Some(f)) => {
                let payload = f.payload.to_vec();
                let used = f.consumed;
                conn.rbuf.drain(..used);
                return Ok(payload);
            }
            Ok(None) => fill(conn).await?,
            Err(e) => return Err(ProbeError::Protocol(e.to_string())),
        }
    }
}

fn my_error(payload: &[u8]) -> ProbeError {
    match ErrPacket::decode(payload) {
        Ok(e) => ProbeError::Server(format!("{}: {}", e.code, String::from_utf8_lossy(e.message))),
        Err(e) => ProbeError::Protocol(e.to_string()),
    }
}

/// Runs `sql` with `COM_QUERY` and reads its (single) text result set.
pub async fn my_query(conn: &mut Conn, sql: &str) -> Result<Rows, ProbeError> {
    let mut payload = Vec::with_capacity(sql.len() + 1);
    payload.push(0x03); // COM_QUERY
    payload.extend_from_slice(sql.as_bytes());
    let mut out = Vec::with_capacity(payload.len() + 4);
    my::encode_packets(&payload, 0, &mut out);
    rt::write_all(&mut conn.stream, &out).await?;
    let first = my_read(conn).await?;
    let count = match my::classify_response(&first).map_err(|e| ProbeError::Protocol(e.to_string()))? {
        my::ResponseKind::Ok => return Ok(Rows::default()),
        my::ResponseKind::ResultSet { column_count } => usize::try_from(column_count).unwrap_or(usize::MAX),
        my::ResponseKind::Err => return Err(my_error(&first)),
        other => return Err(ProbeError::Protocol(format!("unexpected response {other:?}"))),
    };
    let mut rows = Rows::default();
    for _ in 0..count {
        let def = my_read(conn).await?;
        let col = ColumnDefinition41::decode(&def).map_err(|e| ProbeError::Protocol(e.to_string()))?;
        rows.columns.push(String::from_utf8_lossy(col.name).into_owned());
    }
    let caps = my::capability::CLIENT_PROTOCOL_41;
    let eof = my_read(conn).await?;
    if my::classify_row(&eof, caps) != my::RowKind::End {
        return Err(ProbeError::Protocol("column definitions not followed by EOF".into()));
    }
    loop {
        let row = my_read(conn).await?;
        match my::classify_row(&row, caps) {
            my::RowKind::End => return Ok(rows),
            my::RowKind::Err => return Err(my_error(&row)),
            my::RowKind::Row => {
                let values = my::decode_text_row(&row, count).map_err(|e| ProbeError::Protocol(e.to_string()))?;
                rows.rows.push(values.iter().map(|v| text(*v)).collect());
            }
        }
    }
}
