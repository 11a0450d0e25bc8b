//! Prepared-statement commands (`COM_STMT_*`) and the silent commands the router runs on a
//! connection itself: settings replay, connection reset, re-prepare.

use std::rc::Rc;

use super::causal::CommitGtid;
use super::prepared::{
    backend_params, long_data_admission, reorder_execute, rewrite_execute, statement_key, LongRefusal, Reading, Stmt,
};
use super::relay::Grammar;
use super::route::Routed;
use super::state::MyState;
use super::{End, Session};
use crate::config::Protocol;
use crate::metrics::BufferKind;
use crate::pool::{Conn, ConnInfo};
use crate::protocol::mysql::codec::{put_u16, put_u32, Reader};
use crate::protocol::mysql::command::{
    COM_INIT_DB, COM_QUERY, COM_RESET_CONNECTION, COM_STMT_CLOSE, COM_STMT_FETCH, COM_STMT_PREPARE, COM_STMT_RESET,
    COM_STMT_SEND_LONG_DATA,
};
use crate::protocol::mysql::errcode::{ErrorNumber, ER_UNKNOWN_STMT_HANDLER, ER_WRONG_ARGUMENTS};
use crate::protocol::mysql::framer::encode_framed;
use crate::protocol::mysql::response::{
    SERVER_MORE_RESULTS_EXISTS, SERVER_SESSION_STATE_CHANGED, SERVER_STATUS_LAST_ROW_SENT,
};
use crate::protocol::mysql::tracking::untrack_ok;
use crate::protocol::mysql::{encode_packets, StmtPrepareOk};
use crate::routing::StatementKey;
use crate::rt;
use crate::session::client_error::MyClientError;
use crate::session::cross;
use crate::session::engine::prepared::{self as engine, Refusal};
use crate::session::engine::text::Text;
use crate::session::error::RelayError;
use crate::session::loss;
use crate::session::placement::Placed;
use crate::sql::analyze::{session_effects, Effect};
use crate::sql::Dialect;

/// `ER_OUT_OF_RESOURCES`.
pub(super) const ER_OUT_OF_RESOURCES: ErrorNumber = ErrorNumber { code: 1041, sql_state: *b"HY000" };
/// `ER_UNKNOWN_ERROR`: what MariaDB reports at execute for long data past `max_allowed_packet`.
const ER_UNKNOWN_ERROR: ErrorNumber = ErrorNumber { code: 1105, sql_state: *b"HY000" };
/// MariaDB's own text for long data past `max_allowed_packet`, at the execute.
const LONG_DATA_TOO_LARGE: &str =
    "Parameter of prepared statement which is set through mysql_send_long_data() is longer than 'max_allowed_packet' bytes";
/// `ER_STMT_HAS_NO_OPEN_CURSOR`.
const ER_STMT_HAS_NO_OPEN_CURSOR: ErrorNumber = ErrorNumber { code: 1421, sql_state: *b"HY000" };
/// Largest response payload the router reads for its own silent commands.
const SILENT_MAX: usize = 1 << 24;

fn lost() -> MyClientError {
    MyClientError::new(
        crate::session::client_error::ER_BACKEND_UNAVAILABLE,
        "Lost connection to the backend while restoring session state",
    )
}

fn info(conn: &mut Conn) -> Option<&mut crate::pool::MyInfo> {
    match conn.info_mut() {
        ConnInfo::MySql(i) => Some(i),
        ConnInfo::Pg(_) => None,
    }
}

/// Notes on `conn` what the OK or final EOF `end` of a silent command reports (`eof`: an
/// EOF); whether more results follow. The connection's flags follow what a replayed SET or a
/// reset did to its sql_mode, which decides how its next statement is lexed (#19).
fn settled(conn: &mut Conn, end: &[u8], eof: bool) -> bool {
    super::relay::note_status(conn, status(end));
    if let Some(i) = info(conn) {
        super::relay::note_owed(i, end, eof);
    }
    status(end).is_some_and(|s| s & SERVER_MORE_RESULTS_EXISTS != 0)
}

fn status(ok_or_eof: &[u8]) -> Option<u16> {
    super::exchange::status_of(ok_or_eof).0
}

/// Runs `payload` as a command on `conn` and discards its (query-grammar) response.
/// `Ok(Some(err))` carries an ERR payload the server answered with.
async fn silent(conn: &mut Conn, payload: &[u8]) -> Result<Option<Vec<u8>>, RelayError> {
    let mut out = Vec::with_capacity(payload.len() + 4);
    encode_packets(payload, 0, &mut out);
    cross::send(conn, &out).await?;
    loop {
        let first = cross::my_payload(conn, SILENT_MAX).await?.0;
        match first.first() {
            Some(0xFF) => return Ok(Some(first)),
            Some(0x00) if !settled(conn, &first, false) => return Ok(None),
            Some(0x00) => {}
            Some(&tag @ 0xFB) => return Err(RelayError::OutOfStep { tag }),
            None => return Err(RelayError::Malformed("an empty first payload".into())),
            Some(_) => {
                // A result set: skip column definitions and rows up to the final EOF.
                let mut eofs = 0;
                loop {
                    let p = cross::my_payload(conn, SILENT_MAX).await?.0;
                    if p.first() == Some(&0xFF) {
                        return Ok(Some(p));
                    }
                    if p.first() == Some(&0xFE) && p.len() < 9 {
                        eofs += 1;
                        if eofs == 2 && !settled(conn, &p, true) {
                            return Ok(None);
                        } else if eofs == 2 {
                            break;
                        }
                    }
                }
            }
        }
    }
}

fn err_text(p: &[u8]) -> String {
    crate::protocol::mysql::ErrPacket::decode(p)
        .map(|e| String::from_utf8_lossy(e.message).into_owned())
        .unwrap_or_default()
}

/// Runs `payload` on `conn` for the session (a held-back transaction start, #34): a server
/// error becomes the client's error for the statement that needed it.
pub(super) async fn run_silently(conn: &mut Conn, payload: &[u8]) -> Result<(), MyClientError> {
    let Ok(answer) = silent(conn, payload).await else {
        conn.broken = true;
        return Err(lost());
    };
    let Some(err) = answer else { return Ok(()) };
    let e = crate::protocol::mysql::ErrPacket::decode(&err).map_err(|_| lost())?;
    let number = ErrorNumber { code: e.code, sql_state: e.sql_state.unwrap_or(*b"HY000") };
    Err(MyClientError::new(number, String::from_utf8_lossy(e.message)))
}

/// `COM_RESET_CONNECTION` plus the pool's default database (and, on MariaDB, `last_gtid`
/// tracking): the connection is as new, except that the router's prepared statements are gone.
pub(super) async fn reset_connection(conn: &mut Conn, default_db: &str) -> Result<(), MyClientError> {
    if silent(conn, &[COM_RESET_CONNECTION]).await.map_err(|_| lost())?.is_some() {
        return Err(lost());
    }
    let mut tracks = false;
    if let Some(i) = info(conn) {
        i.prepared.clear();
        // The reset drops a pending `last_gtid` change unreported (MariaDB 10.11, #34).
        i.owes_gtid = false;
        tracks = crate::pool::tracks_gtid(i);
    }
    // The reset restored the global tracked variables: causal reads need `last_gtid` again.
    if tracks {
        let track = [&[COM_QUERY][..], crate::pool::TRACK_LAST_GTID.as_bytes()].concat();
        silent(conn, &track).await.map_err(|_| lost())?;
    }
    let init = [&[COM_INIT_DB][..], default_db.as_bytes()].concat();
    match silent(conn, &init).await.map_err(|_| lost())? {
        None => Ok(()),
        Some(e) => Err(MyClientError::new(ErrorNumber { code: 1049, sql_state: *b"42000" }, err_text(&e))),
    }
}

/// Collects the GTID `conn` owes ([`crate::pool::MyInfo::owes_gtid`], #34) as its session
/// gives it up: `COM_INIT_DB` of the database it is already in, whose OK carries the session
/// state (the schema's change, tracked by default, and the pending `last_gtid`) and which
/// changes nothing but `ROW_COUNT()` (-1 after a result set, 0 after it) and the warning list
/// of the connection's last statement, which no client can count on once the connection is
/// back in the pool. `None` when no OK with state came: the debt may stand, so the connection
/// must not serve another client.
pub(super) async fn collect_owed_gtid(conn: &mut Conn, db: &str) -> Option<CommitGtid> {
    let init = [&[COM_INIT_DB][..], db.as_bytes()].concat();
    let mut out = Vec::with_capacity(init.len() + 4);
    encode_packets(&init, 0, &mut out);
    rt::write_all(&mut conn.stream, &out).await.ok()?;
    let ok = cross::my_payload(conn, SILENT_MAX).await.ok()?.0;
    let changed = status(&ok).is_some_and(|s| s & SERVER_SESSION_STATE_CHANGED != 0);
    let i = info(conn).filter(|_| changed && ok.first() == Some(&0x00))?;
    let gtid = untrack_ok(&ok, i.capabilities).ok()?.gtid;
    let mut commit = CommitGtid::default();
    commit.note(gtid, &mut i.last_gtid);
    i.owes_gtid = false;
    Some(commit)
}

/// Turns any pooled connection's session state into `state`'s.
pub(super) async fn replay(conn: &mut Conn, state: &MyState, default_db: &str) -> Result<(), MyClientError> {
    if conn.settings != 0 {
        reset_connection(conn, default_db).await?;
    }
    let fail = |e: Vec<u8>| {
        MyClientError::new(
            ErrorNumber { code: 1231, sql_state: *b"42000" },
            format!("restoring session state failed: {}", err_text(&e)),
        )
    };
    if let Some(db) = state.db() {
        let init = [&[COM_INIT_DB][..], db.as_bytes()].concat();
        if let Some(e) = silent(conn, &init).await.map_err(|_| lost())? {
            return Err(MyClientError::new(ErrorNumber { code: 1049, sql_state: *b"42000" }, err_text(&e)));
        }
    }
    if let Some(sql) = state.replay_sql() {
        let q = [&[COM_QUERY][..], sql.as_bytes()].concat();
        if let Some(e) = silent(conn, &q).await.map_err(|_| lost())? {
            return Err(fail(e));
        }
    }
    Ok(())
}

/// Prepares `sql` on `conn` silently; returns the backend statement id, or the server's ERR.
async fn prepare_silently(conn: &mut Conn, sql: &[u8]) -> Result<Result<u32, Vec<u8>>, RelayError> {
    let payload = [&[COM_STMT_PREPARE][..], sql].concat();
    let mut out = Vec::with_capacity(payload.len() + 4);
    encode_packets(&payload, 0, &mut out);
    cross::send(conn, &out).await?;
    let first = cross::my_payload(conn, SILENT_MAX).await?.0;
    if first.first() == Some(&0xFF) {
        return Ok(Err(first));
    }
    let ok = StmtPrepareOk::decode(&first).map_err(|e| RelayError::Malformed(e.to_string()))?;
    for n in [ok.num_params, ok.num_columns] {
        if n > 0 {
            for _ in 0..=n {
                cross::my_payload(conn, SILENT_MAX).await?;
            }
        }
    }
    Ok(Ok(ok.stmt_id))
}

/// The error for an execute of `stmt` whose long data was dropped (#33): as on the server,
/// every execute fails until COM_STMT_RESET, and the long data is gone.
fn long_data_refusal(stmt: &mut Stmt) -> Option<MyClientError> {
    let why = stmt.long_refused?;
    stmt.long_data.clear();
    stmt.long_charge = None;
    Some(long_data_error(why))
}

/// The error for an execute whose long data was dropped for `why`.
pub(super) fn long_data_error(why: LongRefusal) -> MyClientError {
    match why {
        LongRefusal::TooLarge => MyClientError::new(ER_UNKNOWN_ERROR, LONG_DATA_TOO_LARGE),
        LongRefusal::Budget => out_of_buffers(),
    }
}

/// The error for a statement `why` refuses (#33): past `limits.session_prepared_statements`,
/// as the server past `max_prepared_stmt_count`; past `limits.session_prepared_bytes` of text;
/// past the process's budget.
pub(super) fn statement_refusal_error(why: Refusal) -> MyClientError {
    match why {
        Refusal::Count(max) => too_many_statements(max),
        Refusal::Bytes(max) => {
            let text = format!(
                "Out of memory: the session's prepared statements would hold more than {max} bytes of text \
                 (querypilot limits.session_prepared_bytes); deallocate some first"
            );
            MyClientError::new(ER_OUT_OF_RESOURCES, text)
        }
        Refusal::Budget => out_of_buffers(),
    }
}

/// The server's error past `max_prepared_stmt_count` statements (`max`), ER_MAX_PREPARED_STMT_COUNT_REACHED.
fn too_many_statements(max: impl std::fmt::Display) -> MyClientError {
    let text = format!("Can't create more than max_prepared_stmt_count statements (current value: {max})");
    MyClientError::new(ErrorNumber { code: 1461, sql_state: *b"42000" }, text)
}

/// The server's error for a statement id the client does not have.
pub(super) fn unknown_stmt(id: u32) -> MyClientError {
    let text = format!("Unknown prepared statement handler ({id}) given to mysqld_stmt_execute");
    MyClientError::new(ER_UNKNOWN_STMT_HANDLER, text)
}

/// The error for work refused because the process's client buffer budget is spent (#33).
fn out_of_buffers() -> MyClientError {
    let text = "Out of memory: the router holds as much for its clients as limits.client_buffer_budget allows";
    MyClientError::new(ER_OUT_OF_RESOURCES, text)
}

impl Session {
    /// The backend id of statement `key` on the attached connection (most recently used last).
    fn backend_stmt(&mut self, key: u64) -> Option<u32> {
        engine::touch(&mut info(self.seat.conn.as_mut()?)?.prepared, key).map(|(_, id)| id)
    }

    /// Records a backend statement, closing the coldest one past the pool's limit.
    async fn remember_backend_stmt(&mut self, key: u64, id: u32) {
        let limit = self.seat.pool.config.limits.max_prepared_statements.get() as usize;
        let Some(conn) = self.seat.conn.as_mut() else { return };
        let evicted = info(conn).map(|i| engine::admit(&mut i.prepared, (key, id), limit)).unwrap_or_default();
        let mut out = Vec::new();
        for (_, old) in evicted {
            encode_packets(&[&[COM_STMT_CLOSE][..], &old.to_le_bytes()].concat(), 0, &mut out);
        }
        if !out.is_empty() && rt::write_all(&mut conn.stream, &out).await.is_err() {
            conn.broken = true;
        }
    }

    pub(super) async fn on_prepare(&mut self, sql: &[u8]) -> Result<(), End> {
        if let Some(e) = self.statements_refusal(sql.len()) {
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        }
        if let Some(pool) = self.cross_prepare_pool(&String::from_utf8_lossy(sql)) {
            return self.cross_prepare(pool, sql).await; // #24
        }
        self.tx.sticky = false;
        // A held-back read-only start (#34) waits for the execute, which is routed: preparing
        // on whatever connection is at hand must not start the transaction there.
        let deferred = self.tx.deferred.take();
        let attached = self.ensure_backend().await;
        self.tx.deferred = deferred;
        if let Err(e) = attached {
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        }
        // Routed at every execute; here only a translation matters, since it changes what is
        // prepared on backends.
        let origin = String::from_utf8_lossy(sql).into_owned();
        let route_key = self.seat.ctx.statement_key(&origin, Protocol::MySql);
        let decision = self.decide(&origin, Some(route_key));
        let (prepared, order): (Rc<[u8]>, _) = match decision.rewritten {
            Some(t) => (t.sql.into_bytes().into(), t.param_order.map(Rc::from)),
            None => (sql.into(), None),
        };
        let effects = session_effects(&String::from_utf8_lossy(&prepared), Dialect::MySql).list;
        let pins: Vec<(usize, Effect)> = effects.into_iter().filter(|(_, e)| matches!(e, Effect::Pin(_))).collect();
        let payload = [&[COM_STMT_PREPARE][..], &prepared].concat();
        if let Err(e) = self.send_command(&payload).await {
            return loss::backend_lost(self, e).await;
        }
        let res = self.relay_prepare(prepared, origin.into(), route_key, order).await;
        self.compact();
        if let Err(e) = res {
            return loss::backend_lost(self, e).await;
        }
        self.state.apply(&pins, 0);
        self.seat.cancel.slot.set_running(None);
        self.maybe_release().await;
        Ok(())
    }

    /// Relays a prepare response under a router-issued statement id.
    async fn relay_prepare(
        &mut self,
        sql: Rc<[u8]>,
        origin: Rc<str>,
        route_key: StatementKey,
        order: Option<Rc<[u16]>>,
    ) -> Result<(), RelayError> {
        let first = self.backend_payload(false).await?;
        if first.is_err() {
            self.seat.pool.counters.backend_error(); // metrics
            return self.forward_pkt(&first);
        }
        let ok = StmtPrepareOk::decode(&first.head).map_err(|e| RelayError::Malformed(e.to_string()))?;
        let key = statement_key(&sql, self.state.db());
        let mut stmt = Stmt::new(key, sql, origin, ok.num_params, order);
        stmt.route_key = Some(route_key);
        if stmt.order.is_some() {
            return self.relay_reordered_prepare(first.seq, ok, stmt).await;
        }
        let id = self.stmts.insert(stmt);
        let mut payload = Vec::with_capacity(12);
        StmtPrepareOk { stmt_id: id, ..ok }.encode(&mut payload);
        encode_packets(&payload, first.seq, &mut self.io.out);
        for n in [ok.num_params, ok.num_columns] {
            if n > 0 {
                for _ in 0..=n {
                    self.backend_payload(true).await?;
                }
            }
        }
        self.remember_backend_stmt(key, ok.stmt_id).await;
        Ok(())
    }

    /// Answers a prepare whose translation moves or repeats the client's `?` parameters: the
    /// client sees its own parameter count, each parameter described as the first `?` that
    /// takes it, and the columns unchanged (sequence ids renumbered after the shorter or longer
    /// parameter section).
    async fn relay_reordered_prepare(&mut self, seq: u8, ok: StmtPrepareOk, mut stmt: Stmt) -> Result<(), RelayError> {
        let order = stmt.order.clone().unwrap_or_default();
        let mut params = Vec::with_capacity(usize::from(ok.num_params) + 1);
        let mut columns = Vec::with_capacity(usize::from(ok.num_columns) + 1);
        for (n, section) in [(ok.num_params, &mut params), (ok.num_columns, &mut columns)] {
            // n definitions and their EOF (backends never get CLIENT_DEPRECATE_EOF).
            for _ in 0..if n > 0 { usize::from(n) + 1 } else { 0 } {
                section.push(self.backend_payload(false).await?.whole_or_err()?.to_vec());
            }
        }
        self.remember_backend_stmt(stmt.key, ok.stmt_id).await;
        let client_params = order.iter().max().map_or(0, |m| m.saturating_add(1));
        if usize::from(ok.num_params) != order.len() {
            let msg = format!(
                "the translated statement has {} parameters where the translation rule placed {}; it cannot be bound",
                ok.num_params,
                order.len()
            );
            MyClientError::new(ER_WRONG_ARGUMENTS, msg).encode(seq, &mut self.io.out);
            return Ok(());
        }
        stmt.params = client_params;
        let id = self.stmts.insert(stmt);
        let mut payload = Vec::with_capacity(12);
        StmtPrepareOk { stmt_id: id, num_params: client_params, ..ok }.encode(&mut payload);
        let mut seq = encode_packets(&payload, seq, &mut self.io.out);
        let eof = params.last().cloned();
        for i in 0..client_params {
            let def = order.iter().position(|p| *p == i).and_then(|j| params.get(j));
            let def = def.ok_or_else(|| RelayError::Malformed(format!("no description of parameter {i}")))?;
            seq = encode_packets(def, seq, &mut self.io.out);
        }
        for p in eof.iter().chain(&columns) {
            seq = encode_packets(p, seq, &mut self.io.out);
        }
        Ok(())
    }

    /// Why a client may not prepare one more statement of `len` bytes (#33), in
    /// [`statement_refusal_error`]'s words.
    fn statements_refusal(&mut self, len: usize) -> Option<MyClientError> {
        let limits = self.seat.ctx.config().limits.clone();
        let budget = self.seat.ctx.client_budget().clone();
        // Each statement keeps its text about twice (as prepared and as the client sent it).
        let (count, held, want) = (self.stmts.len(), self.stmts.bytes() as u64, 2 * len as u64);
        let verdict = engine::admission(&limits, count, held, want, |n, b| self.stmts.charge(&budget, n as usize, b));
        verdict.err().map(statement_refusal_error)
    }

    pub(super) async fn on_execute(&mut self, payload: &[u8]) -> Result<(), End> {
        let id = crate::protocol::mysql::stmt_id(payload).unwrap_or(0);
        let Some(stmt) = self.stmts.get_mut(id) else {
            unknown_stmt(id).encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        };
        if let Some(e) = long_data_refusal(stmt) {
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        }
        let (key, sql, origin, route_key) = (stmt.key, stmt.sql.clone(), stmt.origin.clone(), stmt.route_key);
        let reading = stmt.reading();
        if let Some(e) = self.statement_pooling_refusal(&origin) {
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        } else if reading.transaction && self.on_deferrable(&Text::mysql(&origin)) {
            return Ok(()); // a read-only start, held back as its text form is (#34)
        }
        if self.tx.cursor.is_some() {
            // An execute closes the open cursor anyway (below); closing it first frees a connection
            // it alone held, so this statement is routed on its own merits (#19).
            self.close_cursor().await;
            self.maybe_release().await;
        }
        let Some((routed, grammar)) = self.route_execute(id, &origin, route_key, &reading).await else { return Ok(()) };
        let Some(stmt) = self.stmts.get_mut(id) else { return Ok(()) };
        let long_data = std::mem::take(&mut stmt.long_data);
        stmt.long_charge = None; // sent or dropped below
        self.tx.sticky = false;
        self.seat.digest.begin(routed.fingerprint, &origin, rt::now());
        if let Err(e) = self.ensure_backend().await {
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        }
        self.close_cursor().await;
        let Some(backend_id) = self.backend_stmt_or_prepare(key, &sql).await? else { return Ok(()) };
        // The server's handling of long data after a failed execute is not the router's to
        // rely on: such an execute is not retried (#11).
        let retryable = long_data.is_empty();
        if !self.queue_execute(payload, id, backend_id, long_data) {
            MyClientError::new(ER_WRONG_ARGUMENTS, "Incorrect arguments to mysqld_stmt_execute")
                .encode(self.client.reply_seq, &mut self.io.out);
            self.maybe_release().await;
            return Ok(());
        }
        self.arm_query_timeout();
        // Sends and relays, retrying a deadlock when its rule or pool opts in (#11).
        let outcome = match self.flush_and_relay(grammar, retryable).await {
            Ok(outcome) => outcome,
            Err(e) => return loss::backend_lost(self, e).await,
        };
        if outcome.cursor {
            self.tx.cursor = Some((self.stmts.resolve(id), backend_id));
        }
        self.state.apply(&reading.effects, outcome.succeeded);
        self.record(&outcome);
        self.after_response(&outcome).await;
        Ok(())
    }

    /// Routes an execute of statement `id` (client text `origin`, read as `reading`), with the
    /// grammar of its response; `None` when it runs nowhere (the client was told).
    async fn route_execute(
        &mut self,
        id: u32,
        origin: &str,
        route_key: Option<StatementKey>,
        reading: &Reading,
    ) -> Option<(Routed, Grammar)> {
        let routed = match self.route_statement(origin, route_key, Some(reading.atomic_word)).await {
            Ok(r) => r,
            Err(e) => {
                // The statement runs nowhere: its buffered long data goes with it.
                if let Some(s) = self.stmts.get_mut(id) {
                    s.long_data.clear();
                    s.long_charge = None;
                }
                e.encode(self.client.reply_seq, &mut self.io.out);
                return None;
            }
        };
        if let Some(pool) = &routed.cross {
            // Prepared on this session's MySQL pool, whose backends alone know it (#24).
            let text = format!(
                "statement {id} was prepared on MySQL pool \"{}\" but routing now sends it to PostgreSQL pool \"{}\"; \
                 prepare it again",
                self.seat.pool.config.name, pool.config.name
            );
            MyClientError::new(super::bridged::cross::ER_QP_CROSS_PROTOCOL, text)
                .encode(self.client.reply_seq, &mut self.io.out);
            return None;
        }
        let grammar = self.execute_grammar(reading.loads_local_file)?;
        Some((routed, grammar))
    }

    /// The backend id of statement `key` (text `sql`) on the attached connection, prepared
    /// there silently when it is not yet; `None` when the server refused it (the client got
    /// its ERR).
    async fn backend_stmt_or_prepare(&mut self, key: u64, sql: &[u8]) -> Result<Option<u32>, End> {
        if let Some(b) = self.backend_stmt(key) {
            return Ok(Some(b));
        }
        let Some(conn) = self.seat.conn.as_mut() else { return Ok(None) };
        match prepare_silently(conn, sql).await {
            Err(e) => loss::backend_lost(self, e).await.map(|()| None),
            Ok(Err(err)) => {
                encode_packets(&err, self.client.reply_seq, &mut self.io.out);
                self.maybe_release().await;
                Ok(None)
            }
            Ok(Ok(b)) => {
                self.remember_backend_stmt(key, b).await;
                Ok(Some(b))
            }
        }
    }

    /// Queues the client's execute of statement `id` for the backend as statement
    /// `backend_id`, after its long data; `false` when its parameters do not fit the statement.
    fn queue_execute(&mut self, payload: &[u8], id: u32, backend_id: u32, long_data: Vec<(u16, Vec<u8>)>) -> bool {
        let Some(stmt) = self.stmts.get_mut(id) else { return false };
        let (params, order) = (stmt.params, stmt.order.as_deref());
        let long: Vec<bool> = match order {
            None => Vec::new(),
            Some(_) => (0..params).map(|i| long_data.iter().any(|(p, _)| *p == i)).collect(),
        };
        self.link.out.clear();
        for (param, data) in long_data {
            for target in backend_params(order, param) {
                let mut p = Vec::with_capacity(data.len() + 7);
                p.push(COM_STMT_SEND_LONG_DATA);
                put_u32(&mut p, backend_id);
                put_u16(&mut p, target);
                p.extend_from_slice(&data);
                encode_packets(&p, 0, &mut self.link.out);
            }
        }
        // Written where it is sent from, not built apart and copied there (#39).
        let mut valid = false;
        let seq = encode_framed(0, &mut self.link.out, |cmd| {
            valid = match order {
                None => rewrite_execute(payload, backend_id, params, &mut stmt.types, cmd),
                Some(order) => reorder_execute(payload, backend_id, params, order, &long, &mut stmt.types, cmd),
            };
        });
        if !valid {
            self.link.out.clear();
            return false;
        }
        self.link.seq = Some(seq);
        true
    }

    /// Closes the open cursor (if any) on the backend, so its statement can run again.
    async fn close_cursor(&mut self) {
        let Some((_, backend_id)) = self.tx.cursor.take() else { return };
        let mut p = vec![COM_STMT_RESET];
        put_u32(&mut p, backend_id);
        let Some(conn) = self.seat.conn.as_mut() else { return };
        if !matches!(silent(conn, &p).await, Ok(None)) {
            conn.broken = true;
        }
    }

    pub(super) fn on_long_data(&mut self, body: &[u8]) -> Result<(), End> {
        let mut r = Reader::new(body);
        let (Ok(id), Ok(param)) = (r.u32("statement id"), r.u16("parameter")) else { return Ok(()) };
        let limits = self.seat.ctx.config().limits.clone();
        let budget = self.seat.ctx.client_budget().clone();
        let Some(stmt) = self.stmts.get_mut(id) else { return Ok(()) };
        if stmt.long_refused.is_some() {
            return Ok(()); // dropped: the execute fails anyway
        }
        let chunk = r.rest();
        let held = stmt.long_data.iter().find(|(p, _)| *p == param).map_or(0, |(_, b)| b.len());
        let charge = stmt.long_charge.get_or_insert_with(|| budget.charge(BufferKind::LongData));
        if let Err(why) = long_data_admission(&limits, held, chunk.len(), charge) {
            // Past the router's max_allowed_packet or the process's budget (#33): nothing more
            // is held for the statement, and its execute reports it as the server would.
            stmt.long_data = Vec::new();
            stmt.long_charge = None;
            stmt.long_refused = Some(why);
            return Ok(());
        }
        match stmt.long_data.iter_mut().find(|(p, _)| *p == param) {
            Some((_, buf)) => buf.extend_from_slice(chunk),
            None => stmt.long_data.push((param, chunk.to_vec())),
        }
        Ok(())
    }

    pub(super) async fn on_stmt_close(&mut self, body: &[u8]) -> Result<(), End> {
        let id = Reader::new(body).u32("statement id").unwrap_or(0);
        let id = self.stmts.resolve(id);
        if self.tx.cursor.is_some_and(|(c, _)| c == id) {
            self.close_cursor().await;
            self.maybe_release().await;
        }
        // Only the client's id goes away; the backend keeps the statement for reuse.
        self.stmts.remove(id);
        Ok(())
    }

    pub(super) async fn on_stmt_reset(&mut self, payload: &[u8]) -> Result<(), End> {
        let id = crate::protocol::mysql::stmt_id(payload).unwrap_or(0);
        let Some(stmt) = self.stmts.get_mut(id) else {
            unknown_stmt(id).encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        };
        stmt.long_data.clear();
        stmt.long_refused = None;
        stmt.long_charge = None;
        if self.tx.cursor.is_some_and(|(c, _)| c == self.stmts.resolve(id)) {
            self.close_cursor().await;
            self.maybe_release().await;
        }
        self.ok_local()
    }

    pub(super) async fn on_fetch(&mut self, payload: &[u8]) -> Result<(), End> {
        let id = self.stmts.resolve(crate::protocol::mysql::stmt_id(payload).unwrap_or(0));
        let Some((_, backend_id)) = self.tx.cursor.filter(|(c, _)| *c == id) else {
            MyClientError::new(ER_STMT_HAS_NO_OPEN_CURSOR, "The statement has no open cursor")
                .encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        };
        let mut cmd = Vec::with_capacity(payload.len());
        if crate::protocol::mysql::rewrite_stmt_id(payload, backend_id, &mut cmd).is_err()
            || payload.first() != Some(&COM_STMT_FETCH)
        {
            return Ok(());
        }
        self.arm_query_timeout();
        if let Err(e) = self.send_command(&cmd).await {
            return loss::backend_lost(self, e).await;
        }
        let outcome = match self.relay_response(Grammar::UntilEof).await {
            Ok(outcome) => outcome,
            Err(e) => return loss::backend_lost(self, e).await,
        };
        if outcome.error || outcome.status.is_some_and(|s| s & SERVER_STATUS_LAST_ROW_SENT != 0) {
            self.close_cursor().await;
        }
        let mut o = outcome;
        o.last_insert_id = 0;
        self.after_response(&o).await;
        Ok(())
    }
}
