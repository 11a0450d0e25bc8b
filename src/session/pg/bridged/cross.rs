//! Per-statement cross-protocol routing of a native PostgreSQL session (#24), the reverse of
//! `session::mysql::bridged::cross`: when a translation, rule or hint sends one statement to a
//! pool whose backends speak MySQL, the session parks its own pool and connection, runs that
//! statement through the bridge on a MySQL connection it borrows there (answering in PostgreSQL
//! wire format: RowDescription types from MySQL column types, errors mapped to SQLSTATEs), gives
//! that connection back at once and returns to its pool.
//!
//! A simple Query runs as `COM_QUERY`. In the extended protocol a Parse that routing sends across
//! is prepared there and kept in the bridge's statement table (named or unnamed); its Bind,
//! Describe, Execute and Close are served from that table, every Execute on a connection borrowed
//! for it, prepared again there when needed.
//!
//! A transaction never spans two pools: such a statement is refused with `25001` while the
//! session's PostgreSQL transaction is open, while earlier messages of the same pipeline wait for
//! their Sync on the session's pool, and when it controls a transaction itself. Settings the
//! client made are carried over by `bridge::session_map::to_mysql` or refused with `0A000`; a
//! connection given such settings is closed after the statement, so no other client inherits them.

use crate::protocol::pg::tag::{backend as server, frontend as client};
use std::rc::Rc;

use crate::bridge::session_map::to_mysql;
use crate::bridge::txn::pg_controls_transaction as controls_transaction;
use crate::config::Protocol;
use crate::error::ErrorCode;
use crate::pool::CorePool;
use crate::protocol::pg::{backend, sqlstate, FrontendMessage, Target, TransactionStatus};
use crate::routing::{Decision, DecisionKind, Outcome};
use crate::session::client_error::PgClientError;
use crate::session::cross as shared;

use super::super::prepared::{duplicate, Expect};
use super::super::{End, Session};

/// `active_sql_transaction`: the statement would make a transaction span two pools.
const ACTIVE_SQL_TRANSACTION: &str = "25001";

/// What the session sets aside while one statement runs on a MySQL pool: with its pool and
/// connection, its transaction state, and whether the borrowed connection got the session's
/// settings (it is closed afterwards).
pub(in crate::session::pg) type Parked = shared::Parked<(TransactionStatus, bool)>;

/// Whether `pool`'s backends speak MySQL to a PostgreSQL session.
pub(in crate::session::pg) fn speaks_mysql(pool: &CorePool) -> bool {
    pool.config.backend_protocol(Protocol::Postgres) == Protocol::MySql
}

impl Session {
    /// Whether this is a native session and some pool's backends speak MySQL: only then can
    /// routing send a statement across.
    fn any_cross_pool(&self) -> bool {
        !self.is_bridged() && self.seat.ctx.pools().iter().any(|p| speaks_mysql(p))
    }

    /// The MySQL pool routing sends `sql` to, with the decision, when that is not the session's
    /// pool. Decided as if no transaction held the session, so that a statement inside one is
    /// refused rather than silently kept here untranslated. The default step (no rule, no split)
    /// keeps the session where it is.
    fn cross_target(&self, sql: &str) -> Option<(Rc<CorePool>, Decision)> {
        if !self.any_cross_pool() {
            return None;
        }
        let d = self.decide_as(sql, None, false);
        if d.step == DecisionKind::Default {
            return None;
        }
        let Outcome::Route(name) = &d.outcome else { return None };
        if **name == *self.seat.pool.config.name {
            return None;
        }
        let pool = self.seat.ctx.pools().get(name).filter(|p| speaks_mysql(p)).cloned()?;
        Some((pool, d))
    }

    /// Whether messages of the current pipeline wait for answers from the session's own pool.
    fn native_pending(&self) -> bool {
        self.ex.awaiting()
            || !self.ex.queued().is_empty()
            || self.ex.expects().iter().any(|e| !matches!(e, Expect::Synth(_)))
    }

    /// Why a statement (`sql`, empty for an Execute) routed to MySQL pool `pool` cannot run there
    /// now; otherwise answers synthesized so far go out first, keeping the client's order.
    fn cross_ready(&mut self, pool: &str, sql: &str) -> Result<(), PgClientError> {
        let own = &self.seat.pool.config.name;
        let why = if self.progress.tx != TransactionStatus::Idle {
            shared::open_transaction(own)
        } else if self.native_pending() {
            format!("earlier statements of this pipeline run on pool \"{own}\" until Sync, and a pipeline never spans two pools")
        } else if controls_transaction(sql) {
            shared::CONTROLS_TRANSACTION.to_owned()
        } else {
            self.emit_synth();
            return Ok(());
        };
        Err(PgClientError::new(ACTIVE_SQL_TRANSACTION, shared::refusal(false, "MySQL", pool, &why)))
    }

    /// Fails the pipeline with `e`. Messages of the session's own pool queued before it go out
    /// first (with a Flush), so their answers precede the error, as on a server; the backend
    /// then runs part of the batch, and the Sync aborts it there (`Exchange::on_sync`).
    async fn cross_fail(&mut self, e: PgClientError) -> Result<(), End> {
        if self.native_pending() && self.seat.conn.is_some() {
            self.on_flush(&[client::FLUSH, 0, 0, 0, 4]).await?;
            if self.ex.aborted() {
                return Ok(()); // the server failed the pipeline first: its error stands
            }
        }
        self.fail_batch(e)
    }

    /// Moves the session to MySQL pool `pool` for one statement; with `settle`, on a connection
    /// carrying the session's settings. On an error the session stays where it was.
    async fn cross_enter(&mut self, pool: Rc<CorePool>, sql: &str, settle: bool) -> Result<(), PgClientError> {
        self.cross_ready(&pool.config.name, sql)?;
        let sets = if settle {
            to_mysql(self.state.settings()).map_err(|e| {
                let text = shared::refusal(false, "MySQL", &pool.config.name, &e.to_string());
                PgClientError::new(sqlstate::FEATURE_NOT_SUPPORTED, text)
            })?
        } else {
            Vec::new()
        };
        let tx = std::mem::replace(&mut self.progress.tx, TransactionStatus::Idle);
        self.bridge.parked = Some(Box::new(Parked::park(&mut self.seat, pool, (tx, !sets.is_empty()))));
        let r = self.cross_settle(&sets).await;
        if r.is_err() {
            self.cross_unpark();
        }
        r
    }

    /// Applies `sets` (MySQL `SET` statements) on a borrowed connection.
    async fn cross_settle(&mut self, sets: &[String]) -> Result<(), PgClientError> {
        if sets.is_empty() {
            return Ok(());
        }
        self.my_backend().await?;
        for set in sets {
            if !self.my_quiet(set.as_bytes(), self.my_status()).await {
                let zones = if set.contains("time_zone") { " (named zones need MySQL's time zone tables)" } else { "" };
                return Err(PgClientError::new(
                    sqlstate::FEATURE_NOT_SUPPORTED,
                    format!(
                        "MySQL pool \"{}\" refused the session's setting ({set}){zones}",
                        self.seat.pool.config.name
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Gives the borrowed MySQL connection back (closed when it got the session's settings or a
    /// transaction is left open on it) and returns to the parked pool and connection. Also
    /// called when the session ends, wherever it was.
    pub(in crate::session::pg) fn cross_unpark(&mut self) {
        let Some(p) = self.bridge.parked.take() else { return };
        if let Some(c) = self.seat.conn.as_mut().filter(|_| p.state.1) {
            c.broken = true;
        }
        self.my_release(false);
        (self.progress.tx, _) = p.restore(&mut self.seat);
    }

    /// Whether a MySQL connection is borrowed for one statement right now.
    pub(super) fn crossing(&self) -> bool {
        self.bridge.parked.is_some()
    }

    /// A simple Query that routing sends to a MySQL pool: run there, answered here; `None` when
    /// it stays on the session's side.
    pub(in crate::session::pg) async fn on_cross_query(&mut self, sql: &str) -> Option<Result<(), End>> {
        let (pool, d) = self.cross_target(sql)?;
        self.seat.ctx.count_decision(&d, Some(&*pool));
        let translated = d.rewritten.is_some();
        let text = d.rewritten.map_or_else(|| sql.to_owned(), |t| t.sql);
        match self.cross_enter(pool, &text, true).await {
            Err(e) => e.encode(&mut self.io.out),
            Ok(()) => {
                if let Err(e) = self.my_simple(&text, translated).await {
                    self.seat.ctx.counters.relay_failed(e.code()); // metrics
                    self.drop_my_backend();
                    let why = "the MySQL backend connection was lost; the statement may not have completed";
                    PgClientError::new(sqlstate::CONNECTION_FAILURE, why).encode(&mut self.io.out);
                }
                self.cross_unpark();
            }
        }
        backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
        Some(self.io.flush().await)
    }

    /// An extended-protocol message of a statement routing sends to a MySQL pool (or of its
    /// portals); `None` for the session's own. A Parse or Bind of the session's own replaces a
    /// cross statement or portal of the same name.
    pub(in crate::session::pg) async fn on_cross_message(
        &mut self,
        msg: &FrontendMessage<'_>,
    ) -> Option<Result<(), End>> {
        let done = self.cross_message(msg).await;
        match msg {
            // The pipeline's implicit transaction ends: so do the portals bound in it.
            // Only when there is something to end: writing lends the session a box (#39).
            FrontendMessage::Sync if self.bridge.crossed.is_some() || !self.bridge.portals.is_empty() => {
                self.bridge.crossed = None;
                self.bridge.portals.clear();
            }
            FrontendMessage::Parse { .. }
            | FrontendMessage::Bind { .. }
            | FrontendMessage::Describe { .. }
            | FrontendMessage::Execute { .. } => {
                if done.is_some() {
                    if let Some(pool) = self.pool_of(msg) {
                        self.bridge.crossed = Some(pool);
                    }
                } else if let Some(pool) = self.bridge.crossed.clone() {
                    let why = format!(
                        "cannot run the statement on pool \"{}\": earlier statements of this pipeline ran on MySQL pool \
                         \"{pool}\", and a pipeline never spans two pools; Sync first",
                        self.seat.pool.config.name
                    );
                    return Some(self.fail_batch(PgClientError::new(ACTIVE_SQL_TRANSACTION, why)));
                }
            }
            _ => {}
        }
        done
    }

    /// The MySQL pool a cross message's statement belongs to.
    fn pool_of(&self, msg: &FrontendMessage<'_>) -> Option<std::sync::Arc<str>> {
        let stmt = |name: &str| self.bridge.stmts.get(name).map(|s| s.pool.clone());
        let portal = |name: &str| self.bridge.portals.get(name).map(|p| p.stmt.pool.clone());
        match *msg {
            FrontendMessage::Parse { name, .. } | FrontendMessage::Describe { kind: Target::Statement, name } => {
                stmt(name)
            }
            FrontendMessage::Bind { portal: name, .. }
            | FrontendMessage::Describe { kind: Target::Portal, name }
            | FrontendMessage::Execute { portal: name, .. } => portal(name),
            _ => None,
        }
    }

    /// [`Session::on_cross_message`] before the pipeline's bookkeeping.
    async fn cross_message(&mut self, msg: &FrontendMessage<'_>) -> Option<Result<(), End>> {
        match *msg {
            FrontendMessage::Parse { name, query, ref param_types } => {
                let Some((pool, d)) = self.cross_target(query) else { return self.own_parse(name) };
                Some(self.cross_parse(pool, d, name, query, param_types.iter().collect()).await)
            }
            FrontendMessage::Bind { portal, statement, ref param_formats, ref params, ref result_formats } => {
                let Some(pool) = self.bridge.stmts.get(statement).map(|s| s.pool.clone()) else {
                    if !self.bridge.portals.is_empty() {
                        self.bridge.portals.remove(portal); // as at Parse (#39)
                    }
                    return None;
                };
                if let Err(e) = self.cross_ready(&pool, "") {
                    return Some(self.cross_fail(e).await);
                }
                let formats: Vec<i16> = param_formats.iter().collect();
                let values: Vec<Option<&[u8]>> = params.iter().collect();
                Some(self.bridged_bind(portal, statement, &formats, &values, result_formats.iter().collect()))
            }
            FrontendMessage::Describe { kind, name } => {
                let pool = match kind {
                    Target::Statement => self.bridge.stmts.get(name).map(|s| s.pool.clone()),
                    Target::Portal => self.bridge.portals.get(name).map(|p| p.stmt.pool.clone()),
                }?;
                if let Err(e) = self.cross_ready(&pool, "") {
                    return Some(self.cross_fail(e).await);
                }
                Some(match kind {
                    Target::Statement => self.describe_statement(name),
                    Target::Portal => self.describe_portal(name),
                })
            }
            FrontendMessage::Execute { portal, max_rows } if self.bridge.portals.contains_key(portal) => {
                Some(self.cross_execute(portal, max_rows).await)
            }
            FrontendMessage::Close { kind, name } => {
                let known = match kind {
                    // No hashing of the name when there is none (a Close flood, #33).
                    Target::Statement => !self.bridge.stmts.is_empty() && self.bridge.stmts.remove(name).is_some(),
                    Target::Portal => !self.bridge.portals.is_empty() && self.bridge.portals.remove(name).is_some(),
                };
                // Answered in turn with whatever the session's pool answers before it.
                known.then(|| {
                    self.ex.answer_here(server::CLOSE_COMPLETE);
                    Ok(())
                })
            }
            _ => None,
        }
    }

    /// A Parse of the session's own statement `name`: an unnamed one replaces the cross unnamed
    /// statement; a named one fails the batch when a cross statement has its name.
    fn own_parse(&mut self, name: &str) -> Option<Result<(), End>> {
        // Nearly every session has no cross statement: removing would hash the name even from
        // an empty table, and lend the session a box for the bridge (#39).
        if self.bridge.stmts.is_empty() {
            return None;
        }
        if name.is_empty() {
            self.bridge.stmts.remove("");
        } else if self.bridge.stmts.contains_key(name) {
            return Some(self.fail_batch(duplicate(name)));
        }
        None
    }

    /// Parse of a statement routed to MySQL pool `pool`: prepared there (so errors and result
    /// columns are known now), kept in the bridge's table.
    async fn cross_parse(
        &mut self,
        pool: Rc<CorePool>,
        d: Decision,
        name: &str,
        query: &str,
        types: Vec<u32>,
    ) -> Result<(), End> {
        if !name.is_empty() && self.stmts.contains_key(name) {
            return self.fail_batch(duplicate(name));
        }
        self.seat.ctx.count_decision(&d, Some(&*pool));
        let translated = d.rewritten.is_some();
        let sql = d.rewritten.map_or_else(|| query.to_owned(), |t| t.sql);
        if let Err(e) = self.cross_enter(pool, &sql, false).await {
            return self.cross_fail(e).await;
        }
        let r = self.bridged_parse(name, &sql, types, translated).await;
        self.cross_unpark();
        r
    }

    /// Execute of a portal bound to a statement prepared on a MySQL pool.
    async fn cross_execute(&mut self, portal: &str, max_rows: i32) -> Result<(), End> {
        let name = self.bridge.portals.get(portal).map(|p| p.stmt.pool.clone()).unwrap_or_default();
        let Some(pool) = self.seat.ctx.pools().get(&name).filter(|p| speaks_mysql(p)).cloned() else {
            let text = format!("pool \"{name}\", where the statement was prepared, is no longer a MySQL pool");
            return self.fail_batch(PgClientError::new(sqlstate::FEATURE_NOT_SUPPORTED, text));
        };
        if let Err(e) = self.cross_enter(pool, "", true).await {
            return self.cross_fail(e).await;
        }
        let r = self.bridged_execute(portal, max_rows).await;
        self.cross_unpark();
        r
    }
}
