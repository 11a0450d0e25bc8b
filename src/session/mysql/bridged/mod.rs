//! A MySQL session served by a PostgreSQL pool (`protocol = "postgres"` on the pool): commands
//! run through the `bridge` module's translation instead of being relayed. Text queries become
//! simple queries, prepared statements become Parse/Bind/Execute, and the session commands
//! connectors send on connect are answered from `bridge::emulated`.
//!
//! Transactions: `BEGIN`/`COMMIT`/… pass through; `SET autocommit = 0` is emulated by sending
//! `BEGIN` before the next statement whenever PostgreSQL reports no open transaction. The MySQL
//! status flags follow PostgreSQL's ReadyForQuery, and transaction pooling gives the connection
//! back whenever PostgreSQL is idle.
//!
//! Values (#33): every statement text sent to PostgreSQL is lexed as the client wrote it and its
//! literals re-serialised (`sql::requote`); a literal that cannot be carried exactly is refused
//! with a MySQL error and the statement does not run. The client's string mode is the
//! `NO_BACKSLASH_ESCAPES` flag of its greeting, which every later status repeats.

pub(super) mod cross;
mod io;
mod stmt;

use std::hash::{Hash, Hasher};

use crate::bridge::emulated::{self, Emulation, VarContext};
use crate::bridge::txn::{self, my_controls_transaction as controls_transaction};
use crate::bridge::types::{map_type, oid};
use crate::bridge::{encode_local_result, session_flags, Column, ResultWriter, RowFormat, Warning};
use crate::config::{Config, Protocol};
use crate::error::ErrorCode;
use crate::protocol::mysql::command::*;
use crate::protocol::mysql::encode_packets;
use crate::protocol::mysql::errcode::{ErrorNumber, ER_BAD_DB_ERROR, ER_UNKNOWN_COM_ERROR};
use crate::protocol::mysql::response::{EofPacket, SERVER_STATUS_NO_BACKSLASH_ESCAPES};
use crate::protocol::pg::{frontend, TransactionStatus};
use crate::session::client_error::{requote_code, MyClientError};
use crate::session::error::RelayError;
use crate::session::loss;
use crate::sql::mode::LexMode;
use crate::sql::requote::{requote, RequoteError, Target};
use crate::sql::Dialect;

use super::{End, Session};
use io::Ended;

/// Generic error for bridge failures that have no closer MySQL number (`ER_UNKNOWN_ERROR`).
const ER_BRIDGE: ErrorNumber = ErrorNumber { code: 1105, sql_state: *b"HY000" };
/// `ER_UNKNOWN_SYSTEM_VARIABLE`.
const ER_UNKNOWN_SYSTEM_VARIABLE: ErrorNumber = ErrorNumber { code: 1193, sql_state: *b"HY000" };
/// `ER_TRUNCATED_WRONG_VALUE_FOR_FIELD` ("Incorrect string value"), with MariaDB's SQLSTATE: a
/// string value PostgreSQL cannot store.
const ER_WRONG_STRING_VALUE: ErrorNumber = ErrorNumber { code: 1366, sql_state: *b"22007" };
/// `ER_NOT_SUPPORTED_YET`: a literal form the bridge does not carry.
const ER_NOT_SUPPORTED_YET: ErrorNumber = ErrorNumber { code: 1235, sql_state: *b"42000" };

/// The bridged part of a MySQL session's state.
#[derive(Debug)]
pub(in crate::session::mysql) struct Bridge {
    /// MySQL autocommit mode (emulated).
    autocommit: bool,
    /// PostgreSQL transaction state from the last ReadyForQuery.
    tx: TransactionStatus,
    /// Schema chosen with `USE`/`COM_INIT_DB` (`None`: the pool database's default path).
    schema: Option<String>,
    /// Notices of the last statement, for `SHOW WARNINGS`.
    warnings: Vec<Warning>,
    /// Prepared statements by client id (in a native session: those prepared on another
    /// protocol's pool, #24). Boxed: what bounds them (#37) would otherwise grow every MySQL
    /// session, most of which never prepare one here.
    stmts: Box<stmt::PgStmts>,
    next_stmt: u32,
    /// The version string the client was greeted with.
    version: String,
    /// The attached connection carries settings of one statement routed across (#24): it is
    /// closed rather than given back.
    dirty: bool,
    /// How the client writes strings: `NO_BACKSLASH_ESCAPES` as its greeting said (a native
    /// session's own mode while one statement runs across), so the bridge reads them as it does.
    client_mode: LexMode,
    /// causal (#34): the commit position query rides behind the statement sent last; its
    /// answer follows the statement's and must be read before anything else.
    rider: bool,
    /// causal (#34): where the statement being run stands as an autocommit read the parse
    /// cannot prove free of writes.
    unseen: io::Unseen,
}

/// The bridged part of a MySQL session's state as it moves to a new binary (#40).
#[derive(serde::Serialize, serde::Deserialize)]
pub(in crate::session::mysql) struct FrozenBridge {
    autocommit: bool,
    schema: Option<String>,
    stmts: Vec<(u32, stmt::FrozenPgStmt)>,
    next_stmt: u32,
    version: String,
    no_backslash_escapes: bool,
}

impl Bridge {
    /// The state as it moves to a new binary; `None` while something of it lives only here:
    /// a transaction or a statement under way on PostgreSQL, a connection carrying a routed
    /// statement's settings, a statement holding long data or a translation waiting for
    /// values. The last statement's warnings stay behind.
    pub(in crate::session::mysql) fn freeze(&self) -> Option<FrozenBridge> {
        if self.tx != TransactionStatus::Idle || self.dirty || self.rider || self.unseen != io::Unseen::No {
            return None;
        }
        let stmts = self.stmts.iter().map(|(id, s)| s.freeze().map(|f| (*id, f))).collect::<Option<_>>()?;
        Some(FrozenBridge {
            autocommit: self.autocommit,
            schema: self.schema.clone(),
            stmts,
            next_stmt: self.next_stmt,
            version: self.version.clone(),
            no_backslash_escapes: self.client_mode.no_backslash_escapes,
        })
    }

    /// The state of a session a former process handed over.
    pub(in crate::session::mysql) fn thaw(f: FrozenBridge) -> Self {
        let mut bridge = Self::new(f.schema, f.version, 0);
        bridge.autocommit = f.autocommit;
        bridge.stmts = Box::new(f.stmts.into_iter().map(|(id, s)| (id, stmt::PgStmt::thaw(s))).collect());
        bridge.next_stmt = f.next_stmt;
        bridge.client_mode.no_backslash_escapes = f.no_backslash_escapes;
        bridge
    }

    /// Fresh state for a client whose login selected `schema` and who was greeted with status
    /// flags `greeted`.
    pub(in crate::session::mysql) fn new(schema: Option<String>, version: String, greeted: u16) -> Self {
        let no_backslash_escapes = greeted & SERVER_STATUS_NO_BACKSLASH_ESCAPES != 0;
        Self {
            autocommit: true,
            tx: TransactionStatus::Idle,
            schema,
            warnings: Vec::new(),
            stmts: Box::default(),
            next_stmt: 0,
            version,
            dirty: false,
            client_mode: LexMode { no_backslash_escapes, ..LexMode::default() },
            rider: false,
            unseen: io::Unseen::No,
        }
    }

    /// The status flags that do not follow the transaction.
    fn session_flags(&self) -> u16 {
        session_flags(self.autocommit, self.client_mode.no_backslash_escapes)
    }

    /// How routing must lex the client's statements: as the bridge does.
    pub(in crate::session::mysql) fn lex_modes(&self) -> crate::sql::mode::SessionModes {
        crate::sql::mode::SessionModes::new(self.client_mode)
    }

    /// The status flags the client is told now.
    pub(in crate::session::mysql) fn status(&self) -> u16 {
        crate::bridge::status_flags(self.session_flags(), self.tx)
    }

    /// Identity of the settings replayed on a connection (0: the server defaults).
    fn signature(&self) -> u64 {
        let Some(s) = &self.schema else { return 0 };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        s.hash(&mut h);
        h.finish() | 1
    }
}

/// The MySQL version string shown to clients of a bridged pool: MySQL 8.0 syntax for what the
/// connectors should expect, plus the PostgreSQL server version.
pub(in crate::session::mysql) fn greeting_version(pg_version: &str) -> String {
    let v = pg_version.split_whitespace().next().unwrap_or("unknown");
    format!("8.0.36-QueryPilot-PostgreSQL-{v}")
}

/// `SERVER_STATUS_NO_BACKSLASH_ESCAPES` when every pool a MySQL client can log in to speaks
/// PostgreSQL, else 0. The greeting goes out before the client names its database: a client told
/// the flag quotes only `'`, which a MariaDB pool would misread, while a client not told it
/// quotes with backslashes, which the bridge reads correctly (it lexes by the greeting).
pub(in crate::session::mysql) fn greeting_escapes(config: &Config) -> u16 {
    let all_bridged = !config.pools.is_empty()
        && config.pools.iter().all(|p| p.backend_protocol(Protocol::MySql) == Protocol::Postgres);
    if all_bridged {
        SERVER_STATUS_NO_BACKSLASH_ESCAPES
    } else {
        0
    }
}

/// The MySQL error for a statement whose literals cannot be carried to PostgreSQL exactly.
/// A translation's PostgreSQL text (the router wrote its literals) checked and re-serialised as
/// any other text bound for PostgreSQL: a value the template wrote in is carried, never trusted.
pub(in crate::session::mysql) fn carry_translation(sql: &str) -> Result<String, MyClientError> {
    requote(sql, Dialect::Postgres, LexMode::default(), Target::Postgres).map_err(|e| requote_error(&e))
}

fn requote_error(e: &RequoteError) -> MyClientError {
    let number = requote_code(e, super::ER_PARSE_ERROR, ER_WRONG_STRING_VALUE, ER_NOT_SUPPORTED_YET);
    MyClientError::new(number, format!("Statement not run on the PostgreSQL pool: {e}"))
}

/// The id (a statement's, a connection's) a command's `body` starts with.
fn leading_id(body: &[u8]) -> Option<u32> {
    body.get(..4).and_then(|b| b.try_into().ok()).map(u32::from_le_bytes)
}

impl Session {
    /// Handles one command of a bridged session.
    pub(in crate::session::mysql) async fn bridged_dispatch(
        &mut self,
        code: u8,
        payload: &[u8],
        body: &[u8],
    ) -> Result<(), End> {
        match code {
            COM_QUIT => Err(End::ClientGone),
            COM_PING | COM_STMT_RESET => {
                if code == COM_STMT_RESET {
                    self.stmt_reset(body);
                }
                self.ok_local()
            }
            COM_QUERY => self.bridged_query(body).await,
            COM_INIT_DB => self.bridged_use(String::from_utf8_lossy(body).into_owned()).await,
            COM_FIELD_LIST => {
                let mut p = Vec::new();
                EofPacket { warnings: 0, status: self.tx.status }.encode(&mut p);
                encode_packets(&p, self.client.reply_seq, &mut self.io.out);
                Ok(())
            }
            COM_STATISTICS => {
                encode_packets(b"QueryPilot bridge to PostgreSQL", self.client.reply_seq, &mut self.io.out);
                Ok(())
            }
            COM_RESET_CONNECTION => self.bridged_reset(),
            COM_CHANGE_USER => self.on_change_user(payload).await,
            COM_SET_OPTION => self.on_set_option(body),
            // The whole connection, as `mysql_kill()` asks.
            COM_PROCESS_KILL => self.kill(leading_id(body).unwrap_or(0), true).await,
            COM_STMT_PREPARE if self.refuses_token_prepare(body) => Ok(()), // #34
            COM_STMT_PREPARE => self.bridged_prepare(body).await,
            COM_STMT_EXECUTE => self.bridged_execute(payload).await,
            COM_STMT_SEND_LONG_DATA => {
                self.stmt_long_data(payload);
                Ok(())
            }
            COM_STMT_CLOSE => {
                self.foreign.bridge.stmts.remove(&leading_id(body).unwrap_or(0));
                Ok(())
            }
            _ => {
                let msg = format!("Command {code:#04x} is not supported through a cross-protocol pool");
                MyClientError::new(ER_UNKNOWN_COM_ERROR, msg).encode(self.client.reply_seq, &mut self.io.out);
                Ok(())
            }
        }
    }

    /// COM_RESET_CONNECTION: the backend is closed (it may hold a transaction or settings)
    /// and the bridged state starts over.
    pub(in crate::session::mysql) fn bridged_reset(&mut self) -> Result<(), End> {
        self.drop_pg_backend();
        let version = std::mem::take(&mut self.foreign.bridge.version);
        let mode = self.foreign.bridge.client_mode;
        self.foreign.bridge = Bridge::new(None, version, 0);
        self.foreign.bridge.client_mode = mode;
        self.tx = super::Tx::default();
        self.sync_status();
        self.ok_local()
    }

    async fn bridged_query(&mut self, body: &[u8]) -> Result<(), End> {
        let sql = String::from_utf8_lossy(body).into_owned();
        if let Some((id, connection)) = super::kill::parse_kill(&sql) {
            return self.kill(id, connection).await;
        }
        if self.bridged_statement_count(&sql) > 1 && !self.client.multi_statements {
            let e = MyClientError::new(
                super::ER_PARSE_ERROR,
                "You have an error in your SQL syntax: multiple statements are not enabled for this connection",
            );
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        }
        let uncarried = || txn::uncarried(&sql).map(|text| MyClientError::new(ER_NOT_SUPPORTED_YET, text));
        if let Some(e) = self.statement_pooling_refusal(&sql).or_else(uncarried) {
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        }
        if self.on_token_query(&sql) {
            return Ok(()); // #34: the router's own setting never reaches PostgreSQL
        }
        let Some(emulation) = emulated::classify(&sql) else {
            // The whole routing chain, as for a native session (#24).
            return match self.bridged_routed(&sql).await {
                Ok(Some((translated, _))) => self.bridged_statement(&translated, true).await,
                Ok(None) => self.bridged_statement(&sql, false).await,
                Err(e) => {
                    e.encode(self.client.reply_seq, &mut self.io.out);
                    Ok(())
                }
            };
        };
        self.bridged_emulated(emulation).await
    }

    /// Answers a session command the bridge emulates.
    async fn bridged_emulated(&mut self, emulation: Emulation) -> Result<(), End> {
        match emulation {
            Emulation::Set(autocommit) => self.bridged_set(autocommit).await,
            Emulation::SelectVariables(items) => match emulated::select_variables(&items, &self.var_context()) {
                Ok((columns, rows)) => self.answer_local(&columns, &rows),
                Err(name) => {
                    let text = format!("Unknown system variable '{name}'");
                    MyClientError::new(ER_UNKNOWN_SYSTEM_VARIABLE, text)
                        .encode(self.client.reply_seq, &mut self.io.out);
                    Ok(())
                }
            },
            Emulation::ShowVariables(patterns) => {
                let (columns, rows) = emulated::show_variables(&patterns, &self.var_context());
                self.answer_local(&columns, &rows)
            }
            Emulation::ShowWarnings => {
                let (columns, rows) = emulated::show_warnings(&self.foreign.bridge.warnings);
                self.answer_local(&columns, &rows)
            }
            Emulation::Database => {
                let db = self.current_database();
                self.answer_local(&[("DATABASE()", map_type(oid::TEXT, -1))], &[vec![Some(db)]])
            }
            Emulation::ConnectionId => {
                let id = self.seat.cancel.key.pid.to_string();
                self.answer_local(&[("CONNECTION_ID()", map_type(oid::INT8, -1))], &[vec![Some(id)]])
            }
            Emulation::Use(db) => self.bridged_use(db).await,
            Emulation::ShowTables => self.bridged_simple(&emulated::show_tables_query(&self.current_database())).await,
            Emulation::Translate(q) => self.bridged_simple(&q).await,
        }
    }

    /// How many statements `sql` holds, read as the client writes strings (a `;` inside a
    /// string that a backslash would not end is no separator under NO_BACKSLASH_ESCAPES).
    fn bridged_statement_count(&self, sql: &str) -> usize {
        use crate::sql::lexer::{Lexer, TokenKind};
        let tokens: Vec<_> = Lexer::new(sql, Dialect::MySql)
            .mode(self.foreign.bridge.client_mode)
            .filter(|t| t.kind != TokenKind::Comment)
            .collect();
        crate::sql::split::statements(&tokens).len()
    }

    fn current_database(&self) -> String {
        self.foreign.bridge.schema.clone().unwrap_or_else(|| self.seat.pool.config.database.clone())
    }

    /// Opens the emulated transaction of `autocommit = 0` when PostgreSQL has none.
    async fn begin_if_needed(&mut self, sql: &str) -> Result<(), RelayError> {
        let b = &self.foreign.bridge;
        if b.autocommit || b.tx != TransactionStatus::Idle || controls_transaction(sql) {
            return Ok(());
        }
        self.pg_quiet("BEGIN").await.map(|_| ())
    }

    /// `sql` as PostgreSQL must read it: the client's text lexed as the client writes strings,
    /// a translation's (`translated`) as the PostgreSQL text it is; every literal re-serialised.
    pub(in crate::session::mysql) fn for_postgres(&self, sql: &str, translated: bool) -> Result<String, MyClientError> {
        if translated {
            return carry_translation(sql);
        }
        requote(sql, Dialect::MySql, self.foreign.bridge.client_mode, Target::Postgres).map_err(|e| requote_error(&e))
    }

    /// Runs a statement from the client (or its translation) once its literals are carried.
    pub(in crate::session::mysql) async fn bridged_statement(
        &mut self,
        sql: &str,
        translated: bool,
    ) -> Result<(), End> {
        match self.for_postgres(sql, translated) {
            Ok(text) => self.bridged_simple(&text).await,
            Err(e) => {
                e.encode(self.client.reply_seq, &mut self.io.out);
                Ok(())
            }
        }
    }

    /// Runs `sql` as a simple query and relays its results as text result sets.
    async fn bridged_simple(&mut self, sql: &str) -> Result<(), End> {
        let probed = match self.pg_ready(sql).await {
            Ok(probed) => probed,
            Err(answered) => return answered,
        };
        if let Err(e) = frontend::encode_query(sql, &mut self.link.out) {
            return self.bridged_lost(RelayError::Unsendable(e.to_string())).await;
        }
        self.run_queued(probed, RowFormat::Text).await
    }

    /// Attaches a connection for `sql` (PostgreSQL text) and opens the emulated transaction it
    /// needs; then queues the probe ahead of a COMMIT (#34: same send) and says whether it did.
    /// `Err`: the statement cannot run, and the client was answered.
    async fn pg_ready(&mut self, sql: &str) -> Result<bool, Result<(), End>> {
        if let Err(e) = self.pg_backend().await {
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Err(Ok(()));
        }
        if let Err(e) = self.begin_if_needed(sql).await {
            return Err(self.bridged_lost(e).await);
        }
        Ok(self.queue_xact_probe(sql))
    }

    /// Sends the statement queued in `link.out` with what follows it (`probed`: the probe
    /// [`Session::pg_ready`] queued ahead of it), and streams its response as `format` rows.
    async fn run_queued(&mut self, probed: bool, format: RowFormat) -> Result<(), End> {
        self.queue_tail();
        if let Err(e) = self.pg_send().await {
            return self.bridged_lost(e).await;
        }
        if probed {
            self.read_xact_probe().await;
        }
        self.finish_response(format).await
    }

    /// Streams a response already requested from the backend, then updates the status and
    /// releases the connection as the pool mode says.
    async fn finish_response(&mut self, format: RowFormat) -> Result<(), End> {
        if let Err(e) = self.read_unseen_begin().await {
            return self.bridged_lost(e).await;
        }
        let b = &self.foreign.bridge;
        let mut writer = ResultWriter::new(self.client.caps, format, b.session_flags(), b.tx, self.client.reply_seq);
        match self.pg_stream(&mut writer).await {
            Ok(Ended::Ready(tx)) => self.foreign.bridge.tx = tx,
            Ok(Ended::Copy) => self.drop_pg_backend(),
            Err(e) => return self.bridged_lost(e).await,
        }
        self.foreign.bridge.warnings = writer.warnings;
        if let Err(e) = self.read_unseen_end().await {
            return self.bridged_lost(e).await;
        }
        self.sync_status();
        self.bridged_statement_done().await; // causal reads (#34)
        self.pg_maybe_release();
        Ok(())
    }

    /// The PostgreSQL connection failed mid-command, for `cause` (counted, not worded).
    async fn bridged_lost(&mut self, cause: RelayError) -> Result<(), End> {
        self.drop_pg_backend();
        self.link.out.clear();
        if self.cross_lost() {
            self.seat.ctx.counters.relay_failed(cause.code()); // metrics
            self.sync_status();
            return Ok(());
        }
        let r = loss::backend_lost(self, cause).await;
        // `backend_lost` resets the flags for a MySQL backend; keep the bridged ones.
        self.sync_status();
        r
    }

    async fn bridged_set(&mut self, autocommit: Option<bool>) -> Result<(), End> {
        if autocommit == Some(true) && self.foreign.bridge.tx != TransactionStatus::Idle {
            // MySQL commits an open transaction when autocommit is switched back on.
            match self.pg_quiet("COMMIT").await {
                Ok(q) if q.error.is_none() => {
                    if q.tag.as_deref() == Some("ROLLBACK") {
                        self.seat.ryw.nothing_committed(); // a failed transaction (#34)
                    }
                    self.bridged_statement_done().await;
                }
                Ok(q) => {
                    let msg = q.error.unwrap_or_default();
                    MyClientError::new(ER_BRIDGE, msg).encode(self.client.reply_seq, &mut self.io.out);
                    return Ok(());
                }
                Err(e) => return self.bridged_lost(e).await,
            }
        }
        if let Some(on) = autocommit {
            self.foreign.bridge.autocommit = on;
        }
        self.sync_status();
        self.pg_maybe_release();
        self.ok_local()
    }

    /// `USE db`: selects schema `db` through `search_path`; the pool's own database name
    /// selects the default path again.
    async fn bridged_use(&mut self, db: String) -> Result<(), End> {
        let schema = (db != self.seat.pool.config.database).then_some(db.clone());
        if let Some(s) = &schema {
            if let Err(e) = self.pg_backend().await {
                e.encode(self.client.reply_seq, &mut self.io.out);
                return Ok(());
            }
            // A name PostgreSQL text cannot hold (NUL) names no schema: `= NULL` finds none.
            let name = crate::session::state::quote_literal(s).unwrap_or_else(|| "NULL".to_owned());
            let check = format!("SELECT 1 FROM pg_namespace WHERE nspname = {name}");
            match self.pg_quiet(&check).await {
                Ok(q) if q.rows > 0 => {}
                Ok(_) => {
                    MyClientError::new(
                        ER_BAD_DB_ERROR,
                        format!("Unknown database '{db}' (no such schema on the PostgreSQL backend)"),
                    )
                    .encode(self.client.reply_seq, &mut self.io.out);
                    self.pg_maybe_release();
                    return Ok(());
                }
                Err(e) => return self.bridged_lost(e).await,
            }
        }
        self.foreign.bridge.schema = schema;
        // The next checkout (or this connection, re-attached) replays the new path.
        if let Some(c) = self.seat.conn.as_mut() {
            c.settings = u64::MAX;
        }
        self.pg_release(false);
        self.ok_local()
    }

    fn var_context(&self) -> VarContext<'_> {
        let b = &self.foreign.bridge;
        VarContext { autocommit: b.autocommit, version: &b.version, max_allowed_packet: self.io.max_msg }
    }

    /// Answers with a result set the router computed.
    fn answer_local(&mut self, columns: &[(&str, Column)], rows: &[Vec<Option<String>>]) -> Result<(), End> {
        encode_local_result(self.client.caps, self.client.reply_seq, columns, rows, self.tx.status, &mut self.io.out);
        Ok(())
    }
}
