//! Per-statement cross-protocol routing of a native MySQL session (#24): when a translation,
//! rule or hint sends one statement to a pool whose backends speak PostgreSQL, the session parks
//! its own pool and MySQL connection, runs that statement through the bridge on a connection it
//! borrows there (answering in MySQL wire format, errors mapped), gives that connection back at
//! once and returns to its pool. A transaction never spans the two: such a statement is refused
//! while the session's MySQL transaction is open (or autocommit is off, so one opens).
//!
//! Prepared statements routed there at `COM_STMT_PREPARE` live in the bridge's statement table
//! (ids from [`CROSS_STMT_IDS`] up, apart from the session's own) and every execute runs them
//! there, described and bound as a bridged session does.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use crate::bridge::session_map::to_postgres;
use crate::config::Protocol;
use crate::pool::CorePool;
use crate::protocol::mysql::command::{COM_STMT_CLOSE, COM_STMT_EXECUTE, COM_STMT_RESET, COM_STMT_SEND_LONG_DATA};
use crate::protocol::mysql::errcode::ErrorNumber;
use crate::protocol::mysql::response::{SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_IN_TRANS};
use crate::protocol::pg::TransactionStatus;
use crate::routing::{Decision, Outcome, StatementKey};
use crate::session::client_error::{MyClientError, ER_BACKEND_UNAVAILABLE};
use crate::session::cross as shared;
use crate::sql::template::LateTranslation;

use super::super::{End, Session, Tx};
use super::io::Quiet;

/// A statement routed to another protocol's pool that cannot run there now: inside a MySQL
/// transaction, with autocommit off, or controlling a transaction itself. The router's own
/// number; SQLSTATE 25001 (active SQL transaction).
pub(in crate::session::mysql) const ER_QP_CROSS_PROTOCOL: ErrorNumber =
    ErrorNumber { code: 9004, sql_state: *b"25001" };

/// A statement routed to another protocol's pool from a session whose settings (`time_zone`,
/// character set, ...) cannot be carried there: it would run with other semantics. The router's
/// own number; SQLSTATE 0A000 (feature not supported).
pub(in crate::session::mysql) const ER_QP_CROSS_STATE: ErrorNumber = ErrorNumber { code: 9005, sql_state: *b"0A000" };

/// First id of statements prepared on another protocol's pool: far above the ids the session
/// hands out for its own statements (which count up from 1), so the two never meet.
const CROSS_STMT_IDS: u32 = 0x4000_0000;

/// A native session's cross-protocol part: what is parked while a statement runs elsewhere,
/// and the pool each statement prepared elsewhere runs on.
#[derive(Default)]
pub(in crate::session::mysql) struct Cross {
    parked: Option<Parked>,
    /// Client statement id → name of the pool it was prepared on.
    stmts: HashMap<u32, Arc<str>>,
    /// Where the statement's response starts in the client buffer, while none of it has been
    /// sent: a lost connection then replaces it with one error and the session goes on (#35).
    unsent_from: Option<usize>,
}

impl Cross {
    /// Whether the session has nothing on another protocol's pool.
    pub(in crate::session::mysql) fn is_empty(&self) -> bool {
        self.parked.is_none() && self.stmts.is_empty() && self.unsent_from.is_none()
    }
}

/// What the session sets aside while one statement runs on another protocol's pool: with its
/// pool and connection, its transaction state and its place in the backend's buffer.
type Parked = shared::Parked<(Tx, usize)>;

impl Cross {
    /// Whether a native session's statement is running on another protocol's pool now.
    pub(super) fn crossing(&self) -> bool {
        self.parked.is_some()
    }
}

impl Session {
    /// The pool named `target` when its backends speak PostgreSQL and this session is a native
    /// MySQL one: the statement runs there through the bridge.
    pub(in crate::session::mysql) fn cross_pool(&self, target: &str) -> Option<Rc<CorePool>> {
        if self.is_bridged() {
            return None;
        }
        self.crossing_to(self.seat.ctx.pool_named(target, &self.seat.pool))
    }

    /// [`Session::cross_pool`] of a pool found already for the statement (#39: once).
    pub(in crate::session::mysql) fn crossing_to(&self, pool: Option<Rc<CorePool>>) -> Option<Rc<CorePool>> {
        let pool = pool.filter(|_| !self.is_bridged())?;
        (pool.config.backend_protocol(Protocol::MySql) == Protocol::Postgres).then_some(pool)
    }

    /// Inside a held connection the router keeps every statement on the session's pool and
    /// skips translations. When the statement would otherwise go to a PostgreSQL-protocol pool,
    /// that decision is returned instead: the executor then runs it there (a pinned session
    /// outside a transaction) or refuses it (a transaction must not span two pools). Asked
    /// only when some pool speaks PostgreSQL.
    pub(in crate::session::mysql) fn cross_decision(
        &self,
        decision: &Decision,
        sql: &str,
        key: Option<StatementKey>,
    ) -> Option<Decision> {
        if decision.kind != crate::routing::DecisionKind::TransactionPin || !self.any_cross_pool() {
            return None;
        }
        let free = self.decide_held(sql, key, false);
        match &free.outcome {
            Outcome::Route(pool) if self.cross_pool(pool).is_some() => Some(free),
            _ => None,
        }
    }

    /// Whether this is a native session and some pool's backends speak PostgreSQL: only then
    /// can routing send a statement across.
    fn any_cross_pool(&self) -> bool {
        !self.is_bridged()
            && self.seat.ctx.pools().iter().any(|p| p.config.backend_protocol(Protocol::MySql) == Protocol::Postgres)
    }

    /// The PostgreSQL-protocol pool routing sends `sql` to, for a `COM_STMT_PREPARE`.
    pub(in crate::session::mysql) fn cross_prepare_pool(&self, sql: &str) -> Option<Rc<CorePool>> {
        if !self.any_cross_pool() {
            return None;
        }
        let d = self.decide(sql, None);
        let d = self.cross_decision(&d, sql, None).unwrap_or(d);
        match &d.outcome {
            Outcome::Route(pool) => {
                self.cross_pool(pool).or_else(|| self.late_translation(sql).and_then(|(p, _)| self.cross_pool(&p)))
            }
            _ => None,
        }
    }

    /// The pool name and the unbound translation of a statement to prepare whose JSON-array
    /// slot is a `?` (#35): translated at each execute, once the value is known.
    pub(in crate::session::mysql) fn late_translation(&self, sql: &str) -> Option<(Arc<str>, LateTranslation)> {
        let key = self.seat.ctx.statement_key(sql, Protocol::MySql);
        self.seat.ctx.rules().late_translation(&key, sql)
    }

    /// Forgets the statements prepared on other protocols' pools (`COM_RESET_CONNECTION`,
    /// `COM_CHANGE_USER`).
    pub(in crate::session::mysql) fn cross_reset(&mut self) {
        self.foreign.cross.stmts.clear();
        self.foreign.bridge.stmts.clear();
    }

    /// Why the statement routed to `pool` cannot run there now, if it cannot.
    fn cross_refusal(&self, pool: &CorePool, sql: &str) -> Option<MyClientError> {
        let why = if self.tx.status & SERVER_STATUS_IN_TRANS != 0 {
            shared::open_transaction(&self.seat.pool.config.name)
        } else if self.tx.status & SERVER_STATUS_AUTOCOMMIT == 0 || self.state.autocommit_off() {
            "autocommit is off, so the statement would belong to a transaction on this session's pool; \
             SET autocommit = 1 first"
                .to_owned()
        } else if super::controls_transaction(sql) {
            shared::CONTROLS_TRANSACTION.to_owned()
        } else {
            return None;
        };
        Some(MyClientError::new(ER_QP_CROSS_PROTOCOL, shared::refusal(true, "PostgreSQL", &pool.config.name, &why)))
    }

    /// Moves the session to `pool` for one statement (`sql`, as it will run there), with the
    /// session's settings carried over; `false` when it must not run there (the client was told).
    async fn enter(&mut self, pool: Rc<CorePool>, sql: &str) -> Result<bool, End> {
        if let Some(e) = self.cross_refusal(&pool, sql) {
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Ok(false);
        }
        let sets = match to_postgres(self.state.iter()) {
            Ok(sets) => sets,
            Err(e) => {
                let text = shared::refusal(true, "PostgreSQL", &pool.config.name, &e.to_string());
                MyClientError::new(ER_QP_CROSS_STATE, text).encode(self.client.reply_seq, &mut self.io.out);
                return Ok(false);
            }
        };
        self.park(pool);
        if sets.is_empty() {
            return Ok(true);
        }
        if let Err(e) = self.pg_backend().await {
            e.encode(self.client.reply_seq, &mut self.io.out);
            self.unpark();
            return Ok(false);
        }
        // The settings are this statement's alone: the connection is closed after it.
        self.foreign.bridge.dirty = true;
        for set in sets {
            match self.pg_quiet(&set).await {
                Ok(Quiet { error: None, .. }) => {}
                Ok(Quiet { error: Some(m), .. }) => {
                    let text = format!("PostgreSQL refused the session's setting ({set}): {m}");
                    MyClientError::new(ER_QP_CROSS_STATE, text).encode(self.client.reply_seq, &mut self.io.out);
                    self.unpark();
                    return Ok(false);
                }
                Err(e) => {
                    let r = self.bridged_lost(e).await;
                    self.unpark();
                    return r.map(|()| false);
                }
            }
        }
        Ok(true)
    }

    /// Sets the session's pool and MySQL connection aside and points the session at `pool`,
    /// with fresh bridge state (autocommit, no transaction, the pool's own database).
    fn park(&mut self, pool: Rc<CorePool>) {
        let pos = std::mem::take(&mut self.link.pos);
        self.foreign.cross.parked = Some(Parked::park(&mut self.seat, pool, (self.tx, pos)));
        self.foreign.cross.unsent_from = Some(self.io.out.len());
        self.foreign.bridge.autocommit = true;
        // The client quotes as its MariaDB told it to; the answer from across must not change
        // that (its status flags say the same), nor may the bridge read its strings otherwise.
        self.foreign.bridge.client_mode = self.routing.lex.mode;
        self.foreign.bridge.tx = TransactionStatus::Idle;
        self.foreign.bridge.schema = None;
        self.foreign.bridge.next_stmt = self.foreign.bridge.next_stmt.max(CROSS_STMT_IDS);
        self.sync_status();
    }

    /// The response of the statement running on another protocol's pool reached the client in
    /// part (the buffer was flushed): a failure after it cannot be answered cleanly.
    pub(in crate::session::mysql) fn cross_flushed(&mut self) {
        self.foreign.cross.unsent_from = None;
    }

    /// The borrowed connection failed before any of the statement's response reached the
    /// client: that statement gets one error in place of what was buffered for it, and the
    /// session, whose own pool and connection were set aside intact, goes on. `false` when
    /// this is no such statement.
    pub(in crate::session::mysql) fn cross_lost(&mut self) -> bool {
        let Some(from) = self.foreign.cross.unsent_from.filter(|_| self.foreign.cross.parked.is_some()) else {
            return false;
        };
        self.io.out.truncate(from);
        let text = format!(
            "Lost the connection to pool \"{}\" during the statement; it did not complete there, and this session goes on",
            self.seat.pool.config.name
        );
        MyClientError::new(ER_BACKEND_UNAVAILABLE, text).encode(self.client.reply_seq, &mut self.io.out);
        true
    }

    /// Gives the borrowed PostgreSQL connection back (closing it if the statement left a
    /// transaction open, which rolls it back) and returns to the parked pool and connection.
    /// Also called when the session ends, wherever it was.
    pub(in crate::session::mysql) fn unpark(&mut self) {
        let Some(p) = self.foreign.cross.parked.take() else { return };
        self.pg_release(false);
        (self.tx, self.link.pos) = p.restore(&mut self.seat);
    }

    /// Runs `sql` (the client's, or its translation when `translated`) on PostgreSQL-protocol
    /// `pool` as a text query.
    pub(in crate::session::mysql) async fn cross_query(
        &mut self,
        pool: Rc<CorePool>,
        sql: &str,
        translated: bool,
    ) -> Result<(), End> {
        if !self.enter(pool, sql).await? {
            return Ok(());
        }
        let r = self.bridged_statement(sql, translated).await;
        self.unpark();
        r
    }

    /// `COM_STMT_PREPARE` of a statement routing sends to PostgreSQL-protocol `pool`:
    /// described there; its executes run there.
    pub(in crate::session::mysql) async fn cross_prepare(&mut self, pool: Rc<CorePool>, sql: &[u8]) -> Result<(), End> {
        let name = pool.name().clone();
        if !self.enter(pool, &String::from_utf8_lossy(sql)).await? {
            return Ok(());
        }
        let before = self.foreign.bridge.next_stmt;
        let r = self.bridged_prepare(sql).await;
        // A statement was registered exactly when the bridge handed out a new id.
        let id = self.foreign.bridge.next_stmt;
        if id != before && self.foreign.bridge.stmts.contains_key(&id) {
            self.foreign.cross.stmts.insert(id, name);
        }
        self.unpark();
        r
    }

    /// Handles the statement commands of statements prepared on another protocol's pool;
    /// `None` for every other command.
    pub(in crate::session::mysql) async fn cross_stmt_command(
        &mut self,
        code: u8,
        payload: &[u8],
        body: &[u8],
    ) -> Option<Result<(), End>> {
        if !matches!(code, COM_STMT_EXECUTE | COM_STMT_CLOSE | COM_STMT_RESET | COM_STMT_SEND_LONG_DATA) {
            return None;
        }
        let id = super::leading_id(body)?;
        let name = self.foreign.cross.stmts.get(&id)?.clone();
        Some(match code {
            COM_STMT_EXECUTE => match self.cross_pool(&name) {
                Some(pool) => self.cross_execute(pool, payload).await,
                None => {
                    let text = format!("pool \"{name}\", where statement {id} was prepared, is no longer configured");
                    MyClientError::new(super::ER_BRIDGE, text).encode(self.client.reply_seq, &mut self.io.out);
                    Ok(())
                }
            },
            COM_STMT_CLOSE => {
                self.foreign.bridge.stmts.remove(&id);
                self.foreign.cross.stmts.remove(&id);
                Ok(())
            }
            COM_STMT_RESET => {
                self.stmt_reset(body);
                self.ok_local()
            }
            _ => {
                self.stmt_long_data(payload);
                Ok(())
            }
        })
    }

    async fn cross_execute(&mut self, pool: Rc<CorePool>, payload: &[u8]) -> Result<(), End> {
        // The statement's text is not at hand here; only the session's transaction matters.
        if !self.enter(pool, "").await? {
            return Ok(());
        }
        let r = self.bridged_execute(payload).await;
        self.unpark();
        r
    }
}
