//! Loading function volatility from the backends: the primary pool of each client protocol is
//! asked for its functions (`pg_proc.provolatile`, `information_schema.ROUTINES`) over a pooled
//! connection, and the rows extend the built-in catalogs routing analyzes with.
//!
//! Runs on core 0's background queue after start and after a reload. Never fails as a whole: a
//! protocol whose load fails (no pool, backend down, query refused, timeout) keeps its built-in
//! catalog, where an unknown function counts as volatile, and the failure is logged.

use crate::protocol::pg::tag::backend as server;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::CoreContext;
use crate::config::Protocol;
use crate::pool::{Conn, ConnInfo, CorePool};
use crate::protocol::mysql::capability::CLIENT_DEPRECATE_EOF;
use crate::protocol::mysql::command::COM_QUERY;
use crate::protocol::mysql::response::{classify_response, classify_row, ResponseKind, RowKind};
use crate::protocol::mysql::{decode_text_row, encode_packets, ErrPacket};
use crate::protocol::pg::notice::peek_sqlstate;
use crate::protocol::pg::{frontend, BackendMessage, Frame};
use crate::routing::{dialect, Catalogs};
use crate::rt;
use crate::session::cross;
use crate::sql::volatility::{
    parse_mysql_udf_row, parse_pg_udf_row, FunctionCatalog, UdfRow, Volatility, MYSQL_UDF_QUERY, PG_UDF_QUERY,
};

/// How long one protocol's load may take, connection included.
const LOAD_TIMEOUT: Duration = Duration::from_secs(15);
/// Largest response message accepted (catalog rows are small).
const MAX_MESSAGE: usize = 1 << 24;

impl CoreContext {
    /// The built-in catalogs extended with the functions of each protocol's primary pool.
    pub async fn load_catalogs(&self) -> Catalogs {
        let (rules, config) = (self.rules(), self.config());
        let mut catalogs = Catalogs::builtin();
        for protocol in [Protocol::Postgres, Protocol::MySql] {
            if !config.listeners.iter().any(|l| l.protocol == protocol) {
                // No client speaks it: nothing to analyze, and the pool's backends may well
                // speak the other protocol.
                continue;
            }
            let Some(name) = rules.primary_pool(protocol) else {
                continue;
            };
            let Some(pool) = self.pools().get(name).cloned() else {
                continue;
            };
            if pool.config.backend_protocol(protocol) != protocol {
                // A bridged pool speaks the other dialect: its functions mean nothing here.
                continue;
            }
            let deadline = rt::now() + LOAD_TIMEOUT;
            let rows = match rt::with_deadline(deadline, load_rows(&pool, protocol)).await {
                Ok(Ok(rows)) => rows,
                Ok(Err(e)) => {
                    tracing::warn!(pool = %name, %protocol, error = %e, "cannot load function volatility; unknown functions count as volatile");
                    continue;
                }
                Err(_) => {
                    tracing::warn!(pool = %name, %protocol, "loading function volatility timed out; unknown functions count as volatile");
                    continue;
                }
            };
            tracing::info!(pool = %name, %protocol, functions = rows.len(), "function volatility loaded");
            let catalog = Arc::new(catalog_with(protocol, &rows, &config.routing.replica_safe_functions));
            match protocol {
                Protocol::Postgres => catalogs.postgres = catalog,
                Protocol::MySql => catalogs.mysql = catalog,
            }
        }
        catalogs
    }
}

/// The built-in catalog of `protocol`'s dialect plus `rows`. A MySQL stored function keeps its
/// declared volatility only when `trusted` (`routing.replica_safe_functions`) lists it: the
/// server never checks `DETERMINISTIC` / `READS SQL DATA`, so any other one may write or set
/// variables and counts as volatile (#19). PostgreSQL's `STABLE`/`IMMUTABLE` are kept: the
/// server refuses data-changing commands inside them.
fn catalog_with(protocol: Protocol, rows: &[UdfRow], trusted: &[String]) -> FunctionCatalog {
    let mut catalog = FunctionCatalog::builtin(dialect(protocol));
    for row in rows {
        let vouched = || {
            let qualified = format!("{}.{}", row.schema, row.name).to_ascii_lowercase();
            trusted.contains(&qualified)
        };
        if protocol == Protocol::MySql && !vouched() {
            catalog.insert(Some(&row.schema), &row.name, Volatility::Volatile);
        } else {
            catalog.insert_row(row);
        }
    }
    catalog
}

/// Runs the protocol's catalog query on a connection of `pool`, which gets it back unless
/// something went wrong.
async fn load_rows(pool: &Rc<CorePool>, protocol: Protocol) -> Result<Vec<UdfRow>, String> {
    let deadline = rt::now() + pool.config.timeouts.acquire;
    let mut conn = pool.checkout(protocol, None, deadline).await.map_err(|e| e.to_string())?;
    let res = match protocol {
        Protocol::Postgres => pg_rows(&mut conn).await,
        Protocol::MySql => mysql_rows(&mut conn).await,
    };
    pool.checkin(conn, res.is_ok());
    res
}

/// [`PG_UDF_QUERY`] as a simple query, up to ReadyForQuery.
async fn pg_rows(conn: &mut Conn) -> Result<Vec<UdfRow>, String> {
    let mut out = Vec::with_capacity(PG_UDF_QUERY.len() + 8);
    frontend::encode_query(PG_UDF_QUERY, &mut out).map_err(|e| e.to_string())?;
    rt::write_all(&mut conn.stream, &out).await.map_err(|e| e.to_string())?;
    let (mut rows, mut failure) = (Vec::new(), None);
    loop {
        let (tag, body) = cross::pg_frame(conn, MAX_MESSAGE).await.map_err(|e| e.to_string())?;
        let frame = Frame::new(tag, &body);
        match tag {
            server::DATA_ROW => rows.extend(pg_udf_row(&frame)),
            server::ERROR_RESPONSE => {
                let code = peek_sqlstate(frame.body).unwrap_or("XX000");
                failure = Some(format!("the catalog query failed (SQLSTATE {code})"));
            }
            server::READY_FOR_QUERY => return failure.map_or(Ok(rows), Err),
            _ => {}
        }
    }
}

/// One DataRow of [`PG_UDF_QUERY`] (schema, name, provolatile); `None` for anything else.
fn pg_udf_row(frame: &Frame<'_>) -> Option<UdfRow> {
    let BackendMessage::DataRow(values) = BackendMessage::decode(frame).ok()? else {
        return None;
    };
    let mut it = values.iter().map(|v| v.and_then(|b| std::str::from_utf8(b).ok()));
    let (schema, name, provolatile) = (it.next()??, it.next()??, it.next()??);
    parse_pg_udf_row(schema, name, provolatile)
}

/// Reads one whole MySQL payload from `conn`.
async fn mysql_payload(conn: &mut Conn) -> Result<Vec<u8>, String> {
    cross::my_payload(conn, MAX_MESSAGE).await.map(|(payload, _)| payload).map_err(|e| e.to_string())
}

/// [`MYSQL_UDF_QUERY`] as `COM_QUERY`, up to the end of its result set.
async fn mysql_rows(conn: &mut Conn) -> Result<Vec<UdfRow>, String> {
    let caps = match conn.info() {
        ConnInfo::MySql(i) => i.capabilities,
        ConnInfo::Pg(_) => return Err("not a MySQL connection".into()),
    };
    let mut payload = Vec::with_capacity(MYSQL_UDF_QUERY.len() + 1);
    payload.push(COM_QUERY);
    payload.extend_from_slice(MYSQL_UDF_QUERY.as_bytes());
    let mut out = Vec::with_capacity(payload.len() + 4);
    encode_packets(&payload, 0, &mut out);
    rt::write_all(&mut conn.stream, &out).await.map_err(|e| e.to_string())?;
    let first = mysql_payload(conn).await?;
    let columns = match classify_response(&first).map_err(|e| e.to_string())? {
        ResponseKind::ResultSet { column_count } => column_count,
        ResponseKind::Err => return Err(mysql_error(&first)),
        _ => return Err("the catalog query returned no result set".into()),
    };
    for _ in 0..columns {
        mysql_payload(conn).await?;
    }
    if caps & CLIENT_DEPRECATE_EOF == 0 {
        mysql_payload(conn).await?; // EOF after the column definitions
    }
    let columns = usize::try_from(columns).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    loop {
        let p = mysql_payload(conn).await?;
        match classify_row(&p, caps) {
            RowKind::Row => rows.extend(mysql_udf_row(&p, columns)),
            RowKind::End => return Ok(rows),
            RowKind::Err => return Err(mysql_error(&p)),
        }
    }
}

fn mysql_error(payload: &[u8]) -> String {
    match ErrPacket::decode(payload) {
        Ok(e) => format!("the catalog query failed: {}", String::from_utf8_lossy(e.message)),
        Err(_) => "the catalog query failed".into(),
    }
}

/// One text row of [`MYSQL_UDF_QUERY`] (schema, name, IS_DETERMINISTIC, SQL_DATA_ACCESS).
fn mysql_udf_row(payload: &[u8], columns: usize) -> Option<UdfRow> {
    let values = decode_text_row(payload, columns).ok()?;
    let mut it = values.iter();
    let mut text = || it.next().copied().flatten().and_then(|b| std::str::from_utf8(b).ok());
    let (schema, name, deterministic, access) = (text()?, text()?, text()?, text()?);
    parse_mysql_udf_row(schema, name, deterministic, access)
}

#[cfg(test)]
mod tests;
