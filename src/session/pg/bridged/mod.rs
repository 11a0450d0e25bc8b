//! A PostgreSQL session served by a MySQL pool (`protocol = "mysql"` on the pool): messages run
//! through the `bridge` module's translation instead of being relayed. A simple Query becomes
//! `COM_QUERY` (MySQL runs every statement of a multi-statement string, as PostgreSQL does);
//! the extended protocol becomes `COM_STMT_PREPARE` at Parse (`$n` rewritten to `?`, repeated or
//! reordered parameters duplicated in the order MySQL needs them) and `COM_STMT_EXECUTE` at
//! Execute, with results in the formats the Bind asked for.
//!
//! Transactions: statements pass through; ReadyForQuery reports MySQL's `IN_TRANS` status flag,
//! and transaction pooling gives the connection back whenever MySQL reports none open.
//!
//! Values (#33): the client is told `standard_conforming_strings = on`; every statement text is
//! lexed that way and its literals re-serialised for the connection's string mode
//! (`sql::requote`; the bridge's connections run with `NO_BACKSLASH_ESCAPES`). A literal that
//! cannot be carried exactly is refused with an ErrorResponse and the statement does not run.

pub(super) mod cross;
mod ext;
mod io;

pub(super) use ext::FrozenPrepared;

use crate::protocol::pg::tag::backend as server;
use std::collections::HashMap;
use std::rc::Rc;

use crate::bridge::pg_result::PgResultWriter;
use crate::bridge::tag::statements;
use crate::config::{PoolMode, Protocol};
use crate::error::ErrorCode;
use crate::protocol::mysql::response::SERVER_STATUS_NO_BACKSLASH_ESCAPES;
use crate::protocol::mysql::Command;
use crate::protocol::pg::{backend, sqlstate, FrontendMessage, Target};
use crate::session::client_error::{requote_code, PgClientError};
use crate::session::error::RelayError;
use crate::sql::mode::LexMode;
use crate::sql::requote::{self, requote, RequoteError};
use crate::sql::Dialect;

use super::{End, Session};

/// `character_not_in_repertoire`: PostgreSQL's code for text it cannot hold (a NUL, bytes that
/// are not UTF-8).
const CHARACTER_NOT_IN_REPERTOIRE: &str = "22021";

/// The ErrorResponse for a statement whose literals cannot be carried to MySQL exactly.
fn requote_error(e: &RequoteError) -> PgClientError {
    let code = requote_code(e, sqlstate::SYNTAX_ERROR, CHARACTER_NOT_IN_REPERTOIRE, sqlstate::FEATURE_NOT_SUPPORTED);
    PgClientError::new(code, format!("statement not run on the MySQL pool: {e}"))
}

/// The bridged part of a PostgreSQL session's state.
#[derive(Default)]
pub(in crate::session::pg) struct Bridge {
    /// Prepared statements by client name ("" = unnamed). ahash: every Close of a native
    /// session looks here first (see `prepared::Stmts`, #33).
    stmts: HashMap<String, Rc<ext::Prepared>, ahash::RandomState>,
    /// Bound portals by name.
    portals: HashMap<String, ext::Portal, ahash::RandomState>,
    /// A native session's pipeline ran a statement on this MySQL pool (#24): until its Sync,
    /// statements of the session's own pool are refused, as a pipeline never spans two pools.
    crossed: Option<std::sync::Arc<str>>,
    /// The session's own pool and connection while one statement runs on a MySQL pool (#24).
    parked: Option<Box<cross::Parked>>,
}

impl Bridge {
    /// Whether nothing of the session is on a MySQL pool: no statement, portal or parked
    /// connection.
    pub(in crate::session::pg) fn is_empty(&self) -> bool {
        self.stmts.is_empty() && self.portals.is_empty() && self.crossed.is_none() && self.parked.is_none()
    }

    /// The client's statements on MySQL pools, as they move to a new binary (#40); `None`
    /// while a statement is under way across (a pipeline, a parked connection). Portals stay
    /// behind: a session moves between transactions, and PostgreSQL ends every portal with its
    /// transaction.
    pub(in crate::session::pg) fn freeze(&self) -> Option<Vec<(String, ext::FrozenPrepared)>> {
        if self.crossed.is_some() || self.parked.is_some() {
            return None;
        }
        Some(self.stmts.iter().map(|(name, stmt)| (name.clone(), stmt.freeze())).collect())
    }

    /// The bridge of a session a former process handed over.
    pub(in crate::session::pg) fn thaw(stmts: Vec<(String, ext::FrozenPrepared)>) -> Self {
        let stmts = stmts.into_iter().map(|(name, f)| (name, Rc::new(ext::Prepared::thaw(f)))).collect();
        Self { stmts, ..Self::default() }
    }
}

impl Session {
    /// Whether this session is served by a MySQL pool through the bridge.
    pub(super) fn is_bridged(&self) -> bool {
        self.seat.pool.config.backend_protocol(Protocol::Postgres) == Protocol::MySql
    }

    /// Handles one client message of a bridged session.
    pub(super) async fn bridged_dispatch(&mut self, msg: FrontendMessage<'_>) -> Result<(), End> {
        match msg {
            FrontendMessage::Query(sql) => self.bridged_query(sql).await,
            FrontendMessage::Parse { name, query, param_types } => {
                let types: Vec<u32> = param_types.iter().collect();
                self.bridged_parse(name, query, types, false).await
            }
            FrontendMessage::Bind { portal, statement, param_formats, params, result_formats } => {
                let formats: Vec<i16> = param_formats.iter().collect();
                let values: Vec<Option<&[u8]>> = params.iter().collect();
                self.bridged_bind(portal, statement, &formats, &values, result_formats.iter().collect())
            }
            FrontendMessage::Describe { kind: Target::Statement, name } => self.describe_statement(name),
            FrontendMessage::Describe { kind: Target::Portal, name } => self.describe_portal(name),
            FrontendMessage::Execute { portal, max_rows } => self.bridged_execute(portal, max_rows).await,
            FrontendMessage::Close { kind, name } => {
                match kind {
                    Target::Statement => self.bridge.stmts.remove(name).map(|_| ()),
                    Target::Portal => self.bridge.portals.remove(name).map(|_| ()),
                };
                self.io.out.extend_from_slice(&[server::CLOSE_COMPLETE, 0, 0, 0, 4]);
                Ok(())
            }
            FrontendMessage::Flush => self.io.flush().await,
            FrontendMessage::Sync => {
                self.ex.synced();
                backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
                self.my_maybe_release();
                self.io.flush().await
            }
            FrontendMessage::Terminate => Err(End::ClientGone),
            FrontendMessage::CopyData(_) | FrontendMessage::CopyDone | FrontendMessage::CopyFail(_) => Ok(()),
            FrontendMessage::FunctionCall(_) => {
                let why = "function calls are not supported through a cross-protocol pool";
                self.refuse_query(PgClientError::new(sqlstate::FEATURE_NOT_SUPPORTED, why)).await
            }
            FrontendMessage::Password(_) => {
                self.fatal(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "unexpected password message")).await
            }
        }
    }

    /// Answers a simple Query or a FunctionCall with `e` and ReadyForQuery.
    async fn refuse_query(&mut self, e: PgClientError) -> Result<(), End> {
        e.encode(&mut self.io.out);
        backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
        self.io.flush().await
    }

    /// A simple Query: `COM_QUERY` with the text as written, each result translated.
    async fn bridged_query(&mut self, sql: &str) -> Result<(), End> {
        if let Some(e) = self.statement_pooling_refusal(sql) {
            return self.refuse_query(e).await;
        }
        if let Err(e) = self.my_simple(sql, false).await {
            return self.bridged_lost(false, e).await;
        }
        backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
        self.my_maybe_release();
        self.io.flush().await
    }

    /// Runs `sql` (the client's, or a translation when `translated`) as `COM_QUERY`, each
    /// result translated into the client buffer; an error before it runs is answered there. An
    /// `Err` is the lost connection, for the caller to answer.
    async fn my_simple(&mut self, sql: &str, translated: bool) -> Result<(), RelayError> {
        let parts = statements(sql);
        if parts.is_empty() {
            // MySQL refuses an empty query; PostgreSQL answers EmptyQueryResponse.
            self.io.out.extend_from_slice(&[server::EMPTY_QUERY_RESPONSE, 0, 0, 0, 4]);
            return Ok(());
        }
        let text = match self.my_backend().await.and_then(|()| self.for_mysql(sql, translated)) {
            Ok(text) => text,
            Err(e) => {
                e.encode(&mut self.io.out);
                return Ok(());
            }
        };
        let mut writer = PgResultWriter::new(parts, false, true, &[], self.my_caps(), self.my_status());
        self.my_answer(&Command::Query(text.as_bytes()), &mut writer).await
    }

    /// How the attached MySQL connection reads strings (its last status flags say).
    fn my_string_mode(&self) -> LexMode {
        let no_backslash_escapes = self.my_status() & SERVER_STATUS_NO_BACKSLASH_ESCAPES != 0;
        LexMode { no_backslash_escapes, ..LexMode::default() }
    }

    /// `sql` as the attached MySQL connection must read it: the client's text lexed as the
    /// client writes strings (what it was told, or in a native session its server's setting), a
    /// translation's (`translated`) as the MySQL text it is; every literal re-serialised.
    pub(super) fn for_mysql(&self, sql: &str, translated: bool) -> Result<String, PgClientError> {
        let to = requote::Target::MySql { no_backslash_escapes: self.my_string_mode().no_backslash_escapes };
        let (from, mode) = match (translated, self.crossing()) {
            (true, _) => (Dialect::MySql, LexMode::default()),
            (false, true) => (Dialect::Postgres, self.identity.lex.mode),
            (false, false) => (Dialect::Postgres, LexMode::default()),
        };
        requote(sql, from, mode, to).map_err(|e| requote_error(&e))
    }

    /// Status flags of the attached connection's last response.
    fn my_status(&self) -> u16 {
        match self.seat.conn.as_ref().map(|c| c.info()) {
            Some(crate::pool::ConnInfo::MySql(info)) => info.status,
            _ => 0,
        }
    }

    /// The MySQL connection failed mid-command: tell the client, stay alive. In an
    /// extended-protocol batch the rest is skipped until Sync, which sends ReadyForQuery. A
    /// session-mode client's server session (its variables, temporary tables) is gone: it is
    /// told so with a FATAL error and closed, as a direct connection would be (#18). `cause`
    /// is counted, not worded.
    async fn bridged_lost(&mut self, batch: bool, cause: RelayError) -> Result<(), End> {
        self.drop_my_backend();
        self.seat.ctx.counters.relay_failed(cause.code()); // metrics
                                                           // A connection borrowed for one statement (#24) held none of the client's session.
        if self.seat.pool.config.mode == PoolMode::Session && !self.crossing() {
            PgClientError::new(
                sqlstate::CONNECTION_FAILURE,
                "the backend connection was lost; the server session is gone",
            )
            .encode_fatal(&mut self.io.out);
            let _ = self.io.flush().await;
            return Err(End::Fatal);
        }
        PgClientError::new(
            sqlstate::CONNECTION_FAILURE,
            "the backend connection was lost; the statement may not have completed",
        )
        .encode(&mut self.io.out);
        if batch {
            self.ex.refuse();
            return Ok(());
        }
        backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
        self.io.flush().await
    }
}
