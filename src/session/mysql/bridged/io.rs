//! PostgreSQL backend I/O for a bridged MySQL session: checkout with `search_path` replay,
//! sending messages, streaming a response through the bridge's `ResultWriter`, quiet helper
//! queries, giving the connection back, and the commit positions and caught-up standbys of
//! causal reads.

use crate::bridge::txn::{ends_uncommitted, opens_transaction};
use crate::bridge::{status_flags, ResultWriter, Step};
use crate::config::{PoolMode, PoolRole, Protocol, ReadYourWrites};
use crate::id::Position;
use crate::pool::health::{pg_commit_position, pg_read_commit_position, PG_COMMIT_POSITION, PG_XACT_PROBE};
use crate::protocol::pg::tag::field;
use crate::protocol::pg::{decode_frame, frontend, BackendMessage, Frame, TransactionStatus};
use crate::routing::Decision;
use crate::rt;
use crate::session::client_error::MyClientError;
use crate::session::commit_io;
use crate::session::cross::{self, malformed, Sink, Translate, MAX_BACKEND_FRAME};
use crate::session::engine::after::{self, Commits, StatementEnd, TxMove};
use crate::session::engine::ryw;
use crate::session::error::RelayError;
use crate::session::placement::Placed;
use crate::session::state::quote_ident;
use crate::sql::analyze::Operation;

use super::super::route::Rewrite;
use super::super::Session;

/// What a quiet helper query returned.
pub(super) struct Quiet {
    /// Data rows received.
    pub rows: usize,
    /// The error message, if the statement failed.
    pub error: Option<String>,
    /// The command tag of the last statement that completed.
    pub tag: Option<String>,
}

/// causal (#34): an autocommit statement the parse calls a read, which a view, a row security
/// policy or a function the catalog calls STABLE may still make write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Unseen {
    /// Not such a statement, or nothing to do for it.
    No,
    /// Routing saw such a statement; if it runs on a primary, it is wrapped when sent.
    Routed,
    /// Sent as `BEGIN`, the statement, [`PG_XACT_PROBE`], `COMMIT`: one round trip, and the
    /// probe's answer says whether its commit leaves a position.
    Wrapped,
}

impl Session {
    /// Attaches a PostgreSQL connection (unless one is, e.g. a caught-up standby's for a causal
    /// read), replaying the session's `search_path` when the connection's settings differ.
    pub(super) async fn pg_backend(&mut self) -> Result<(), MyClientError> {
        if self.seat.conn.is_none() {
            let conn = self.seat.checkout::<MyClientError>(Protocol::Postgres, false, &self.client.user).await?;
            *self.seat.conn = Some(conn);
        }
        let sig = self.foreign.bridge.signature();
        if self.seat.conn.as_ref().is_some_and(|c| c.settings != sig) {
            let sql = match &self.foreign.bridge.schema {
                Some(s) => format!("SET search_path TO {}", quote_ident(s)),
                None => "RESET search_path".to_owned(),
            };
            match self.pg_quiet(&sql).await {
                Ok(Quiet { error: None, .. }) => {
                    if let Some(c) = self.seat.conn.as_mut() {
                        c.settings = sig;
                    }
                }
                Ok(Quiet { error: Some(m), .. }) => {
                    self.drop_pg_backend();
                    return Err(MyClientError::new(super::ER_BRIDGE, format!("cannot restore search_path: {m}")));
                }
                Err(_) => {
                    self.drop_pg_backend();
                    return Err(MyClientError::new(
                        super::ER_BRIDGE,
                        "lost the PostgreSQL backend while restoring search_path",
                    ));
                }
            }
        }
        Ok(())
    }

    /// Closes the attached connection (its open transaction, if any, rolls back).
    pub(super) fn drop_pg_backend(&mut self) {
        self.seat.close_conn();
        let b = &mut self.foreign.bridge;
        b.tx = TransactionStatus::Idle;
        b.rider = false; // its answer went with the connection
        b.unseen = Unseen::No;
        self.sync_status();
    }

    /// Writes `self.link.out` to the backend and marks the statement cancellable.
    pub(super) async fn pg_send(&mut self) -> Result<(), RelayError> {
        // The server may signal a cancelled statement's backend twice: the second must not
        // reach this statement (see the PostgreSQL session's `send_backend`).
        self.seat.cancel.slot.settle().await;
        let conn = self.seat.conn.as_mut().ok_or_else(super::super::relay::no_backend)?;
        self.seat.cancel.slot.running_on(conn, Protocol::Postgres);
        let r = cross::send(conn, &self.link.out).await;
        self.link.out.clear();
        r
    }

    /// Reads the response to what was sent, up to its ReadyForQuery (whose transaction state
    /// the bridge takes), each message seen by `on` (with its tag) before the next is read.
    pub(super) async fn pg_until_ready(
        &mut self,
        mut on: impl FnMut(u8, BackendMessage<'_>) -> Result<(), RelayError>,
    ) -> Result<(), RelayError> {
        loop {
            let conn = self.seat.conn.as_mut().ok_or_else(super::super::relay::no_backend)?;
            let (tag, body) = cross::pg_frame(conn, MAX_BACKEND_FRAME).await?;
            match BackendMessage::decode(&Frame::new(tag, &body)).map_err(malformed)? {
                BackendMessage::ReadyForQuery(tx) => {
                    self.foreign.bridge.tx = tx;
                    self.seat.cancel.slot.set_running(None);
                    return Ok(());
                }
                msg => on(tag, msg)?,
            }
        }
    }

    /// Runs `sql` as a simple query without telling the client anything.
    pub(super) async fn pg_quiet(&mut self, sql: &str) -> Result<Quiet, RelayError> {
        frontend::encode_query(sql, &mut self.link.out).map_err(|e| RelayError::Unsendable(e.to_string()))?;
        self.pg_send().await?;
        self.pg_drain().await
    }

    /// Reads the response to a query already sent, up to its ReadyForQuery, without telling
    /// the client anything.
    async fn pg_drain(&mut self) -> Result<Quiet, RelayError> {
        let mut q = Quiet { rows: 0, error: None, tag: None };
        self.pg_until_ready(|tag, msg| {
            match msg {
                BackendMessage::DataRow(_) => q.rows += 1,
                BackendMessage::CommandComplete(t) => q.tag = Some(t.to_owned()),
                BackendMessage::ErrorResponse(f) => q.error = Some(f.get(field::MESSAGE).unwrap_or("error").to_owned()),
                BackendMessage::CopyInResponse(_)
                | BackendMessage::CopyOutResponse(_)
                | BackendMessage::CopyBothResponse(_) => return Err(RelayError::OutOfStep { tag }),
                _ => {}
            }
            Ok(())
        })
        .await?;
        self.sync_status();
        Ok(q)
    }

    /// Streams the backend's response through `writer` into the client buffer until
    /// ReadyForQuery, flushing the client as the buffer fills.
    pub(super) async fn pg_stream(&mut self, writer: &mut ResultWriter) -> Result<Ended, RelayError> {
        let mut answer = Answer { writer, wrapped: self.foreign.bridge.unseen == Unseen::Wrapped };
        let mut sink = Sink { out: &mut self.io.out, client: Some(&mut self.io.stream), flushed: false };
        let r = cross::stream(&mut self.seat, &mut answer, &mut sink).await;
        if sink.flushed {
            self.cross_flushed();
        }
        r
    }

    /// Mirrors the PostgreSQL transaction state and autocommit mode into the MySQL status flags.
    pub(super) fn sync_status(&mut self) {
        let b = &self.foreign.bridge;
        self.tx.status = status_flags(b.session_flags(), b.tx);
    }

    /// Gives the connection back after a response when the pool mode allows: PostgreSQL said
    /// idle (no transaction) and the mode is not session pooling.
    pub(super) fn pg_maybe_release(&mut self) {
        let idle = self.foreign.bridge.tx == TransactionStatus::Idle;
        if self.seat.pool.config.mode != PoolMode::Session && idle {
            self.pg_release(false);
        }
    }

    /// Returns the connection to the pool. A connection inside a transaction is closed (that
    /// rolls it back); so is one carrying a `search_path` at session end, rather than handing
    /// the setting to another client.
    pub(in crate::session::mysql) fn pg_release(&mut self, session_end: bool) {
        if self.seat.conn.is_none() {
            return;
        }
        let b = &mut self.foreign.bridge;
        let (dirty, keeps_path) = (std::mem::take(&mut b.dirty), session_end && b.signature() != 0);
        // `conn.settings` already says what was replayed on it (set by `pg_backend`).
        self.seat.check_in(b.tx == TransactionStatus::Idle && !keeps_path && !dirty);
        self.foreign.bridge.tx = TransactionStatus::Idle;
        self.sync_status();
    }
}

// Causal reads of a bridged session (#34): its positions are WAL offsets, learned and waited
// for as a native PostgreSQL session's are. A position query rides behind every statement that
// may commit a write (same write, same round trip), else one query follows on the connection
// that committed, before it is given back. The token statements are answered as for a MySQL
// session on MariaDB ([`Session::on_token_query`]). A read routed to the standby pool runs on a
// standby that replayed the session's position, else on the primary (or fails with
// `replica_fallback = "error"`). A native session's statement run across on a PostgreSQL pool
// (#24) learns nothing here: that session's positions are MariaDB GTIDs.
//
// What the parse cannot see (#34): a transaction that ran on the primary is not trusted to be
// read-only (a trigger, a function reached through a view or a STABLE one may write). Its
// commit learns a position unless the server, asked inside it in the same send as the
// client's COMMIT, says it has no transaction id, as for a native PostgreSQL session.

impl Session {
    /// Queues the commit position query behind the statement in `link.out` when the statement
    /// may commit a write: the position then rides with it, in the same write and round trip.
    /// Its answer is read after the statement's, whatever the statement did.
    pub(super) fn queue_rider(&mut self) {
        let ride =
            self.seat.ryw.commit_awaited() && self.seat.ctx.has_replica_reads() && !self.foreign.cross.crossing();
        self.foreign.bridge.rider = ride && frontend::encode_query(PG_COMMIT_POSITION, &mut self.link.out).is_ok();
    }

    /// causal: `sql`, routed by `decision`, runs in a transaction (open, opened by it, or the
    /// emulated one of `autocommit = 0`) on a primary: the analysis cannot prove the
    /// transaction read-only, so its end learns a position unless the server says it wrote
    /// nothing ([`Session::queue_xact_probe`]). Called before the decision is observed, so
    /// the COMMIT that ends such a transaction is seen to commit it.
    pub(in crate::session::mysql) fn bridged_unproven(&mut self, sql: &str, decision: &Decision) {
        let b = &self.foreign.bridge;
        let in_tx = b.tx != TransactionStatus::Idle;
        let transaction = in_tx || !b.autocommit || opens_transaction(sql);
        // Where it runs is known only when it is sent (a causal read may fall back to the
        // primary): [`Session::queue_tail`] decides.
        let read = !transaction && !decision.writes && decision.facts.operation == Operation::Read;
        self.foreign.bridge.unseen = if read { Unseen::Routed } else { Unseen::No };
        // Inside a transaction the statement runs where the transaction does.
        let on_primary = if in_tx {
            self.seat.pool.config.role != PoolRole::Replica
        } else {
            decision.pool().is_some_and(|p| !self.seat.ctx.is_replica_pool(p))
        };
        if transaction && on_primary && !self.foreign.cross.crossing() {
            self.seat.ryw.observe_unproven();
        }
    }

    /// Queues what follows a statement in `link.out`: the wrapping of an autocommit read that
    /// runs on a primary ([`Session::wrap_unseen`]), else the commit position query when the
    /// statement may commit a write ([`Session::queue_rider`]). A wrapped read rarely writes:
    /// its position is asked after it only when the probe said it did.
    pub(super) fn queue_tail(&mut self) {
        if std::mem::replace(&mut self.foreign.bridge.unseen, Unseen::No) == Unseen::Routed {
            self.wrap_unseen();
        }
        if self.foreign.bridge.unseen != Unseen::Wrapped {
            self.queue_rider();
        }
    }

    /// causal: an autocommit statement the parse calls a read, about to run on a primary, may
    /// write through what the parse cannot see (a view, a policy, a function STABLE to the
    /// catalog). It is its own transaction, so whether it wrote can be asked only inside it:
    /// the statement in `link.out` is sent between `BEGIN` and [`PG_XACT_PROBE`] + `COMMIT`, in
    /// the same send (no round trip added), and its commit learns a position (one more round
    /// trip, after the client has its answer) only when the server says it has a transaction
    /// id. Reads on replicas, and on a primary while causal reads do not apply, pay nothing.
    fn wrap_unseen(&mut self) {
        let b = &self.foreign.bridge;
        let autocommit = b.autocommit && b.tx == TransactionStatus::Idle;
        let on_primary = self.seat.pool.config.role != PoolRole::Replica && self.seat.conn.is_some();
        let causal = self.seat.ctx.read_your_writes() == ReadYourWrites::Causal && self.seat.ctx.has_replica_reads();
        if !(autocommit && on_primary && causal) || self.foreign.cross.crossing() {
            return;
        }
        let mut out = Vec::with_capacity(self.link.out.len() + 128);
        let wrapped = frontend::encode_query("BEGIN", &mut out)
            .map(|()| out.extend_from_slice(&self.link.out))
            .and_then(|()| frontend::encode_query(PG_XACT_PROBE, &mut out))
            .and_then(|()| frontend::encode_query("COMMIT", &mut out));
        if wrapped.is_ok() {
            self.link.out = out;
            self.seat.ryw.autocommit_unproven();
            self.foreign.bridge.unseen = Unseen::Wrapped;
        }
    }

    /// Reads the answer to the `BEGIN` of a wrapped autocommit read ([`Session::wrap_unseen`]).
    pub(super) async fn read_unseen_begin(&mut self) -> Result<(), RelayError> {
        if self.foreign.bridge.unseen == Unseen::Wrapped {
            self.pg_drain().await?;
        }
        Ok(())
    }

    /// Reads the answers to the probe and the `COMMIT` of a wrapped autocommit read: without a
    /// transaction id it wrote nothing; a `COMMIT` that rolled back (the statement failed)
    /// committed nothing. Either way no position is due for it.
    pub(super) async fn read_unseen_end(&mut self) -> Result<(), RelayError> {
        if self.foreign.bridge.unseen != Unseen::Wrapped {
            return Ok(());
        }
        self.foreign.bridge.unseen = Unseen::No;
        self.read_xact_probe().await;
        let commit = self.pg_drain().await?;
        if commit.tag.as_deref() == Some("ROLLBACK") {
            self.seat.ryw.nothing_committed();
        }
        Ok(())
    }

    /// causal: when `sql` (PostgreSQL text) is a lone COMMIT of an open transaction whose
    /// commit would learn a position only because nothing proved it read-only, queues
    /// [`PG_XACT_PROBE`] ahead of it in `link.out` (the statement follows in the same send);
    /// its answer is read with [`Session::read_xact_probe`] before the COMMIT's.
    /// A lone ROLLBACK, and a COMMIT of a failed transaction (PostgreSQL answers ROLLBACK),
    /// commit nothing: no position is due for them, whatever the transaction ran.
    pub(super) fn queue_xact_probe(&mut self, sql: &str) -> bool {
        if !self.foreign.cross.crossing() && ends_uncommitted(sql, self.foreign.bridge.tx) {
            self.seat.ryw.nothing_committed();
            return false;
        }
        let in_block = self.foreign.bridge.tx == TransactionStatus::InBlock;
        let due = ryw::probes_commit(&self.seat.ryw, in_block, self.seat.ctx.has_replica_reads())
            && !self.foreign.cross.crossing()
            && ryw::is_lone_commit(sql);
        due && frontend::encode_query(PG_XACT_PROBE, &mut self.link.out).is_ok()
    }

    /// Reads the answer of the probe [`Session::queue_xact_probe`] sent: a transaction without a
    /// transaction id wrote nothing, so its commit leaves no position. A probe that failed
    /// leaves the position due.
    pub(super) async fn read_xact_probe(&mut self) {
        let Some(conn) = self.seat.conn.as_mut() else { return };
        commit_io::read_xact_probe(conn, &mut self.seat.ryw, "bridged transaction").await;
    }

    /// Routes a bridged statement ([`Session::bridged_route`]), then, for a read the split sent
    /// to the standby pool, attaches a standby that replayed the session's position.
    pub(super) async fn bridged_routed(&mut self, sql: &str) -> Result<Option<Rewrite>, MyClientError> {
        let rewrite = self.bridged_route(sql)?;
        self.bridged_causal().await?;
        Ok(rewrite)
    }

    /// After a bridged statement's response: the statement (or the transaction it ended)
    /// finished, and when it committed a write the commit position is learned on the attached
    /// connection before it is released.
    pub(super) async fn bridged_statement_done(&mut self) {
        if self.foreign.cross.crossing() {
            return;
        }
        // What committed nothing was recorded as its answer was read (`queue_xact_probe`,
        // `read_unseen_end`, `bridged_set`): no tags are known here, and the bridge settles no
        // staged effects and releases as PostgreSQL's status says (`pg_maybe_release`).
        let end = StatementEnd {
            mode: self.seat.pool.config.mode,
            tx: TxMove { after: self.foreign.bridge.tx != TransactionStatus::Idle, ..TxMove::default() },
            error: false,
            commits: Commits::Tagged { last_end: None, any_commit: false, ends_uncommitted: false, more_due: false },
            insert_id: false,
            autocommit_drift: false,
        };
        let ctx = &self.seat.ctx;
        let due = after::statement(&mut self.seat.ryw, &end, rt::now(), || ctx.has_replica_reads()).learn_position;
        let rode = std::mem::take(&mut self.foreign.bridge.rider);
        if !due && !rode {
            return;
        }
        if !rode {
            // The client has its answer before the router asks anything.
            let _ = self.io.flush().await;
        }
        let Some(conn) = self.seat.conn.as_mut() else {
            if due {
                self.seat.ryw.learned(None);
            }
            return;
        };
        let position = if rode { pg_read_commit_position(conn).await } else { pg_commit_position(conn).await };
        if !due {
            // The statement committed nothing (it left a transaction open, or failed): the
            // answer is read only to keep the connection in step.
            conn.broken |= position.is_err_and(|e| e.breaks_connection());
            return;
        }
        match position {
            Ok(position) => self.seat.ryw.learned(Some(Position::Wal(position))),
            Err(e) => commit_io::position_unknown(conn, &mut self.seat.ryw, &e, "bridged commit position"),
        }
    }

    /// Before a routed statement runs: when routing put the session on a standby pool and its
    /// reads must wait for a position, attaches a connection to a standby that replayed it
    /// (waiting up to `routing.causal_wait`), else moves to the primary pool. A connection the
    /// session kept idle (session pooling) is given back first: its standby may be behind.
    /// Nothing changes while a transaction or a pin holds the connection.
    pub(super) async fn bridged_causal(&mut self) -> Result<(), MyClientError> {
        let Some(position) = self.seat.ryw.required_position().cloned() else { return Ok(()) };
        // A transaction or a pin holds the session's connection where it is, as for a native one.
        let free = self.foreign.bridge.tx == TransactionStatus::Idle && !self.holding().held();
        if self.seat.pool.config.role != PoolRole::Replica || !free || self.foreign.cross.crossing() {
            return Ok(());
        }
        self.pg_release(false);
        let config = self.seat.ctx.config();
        let deadline = rt::now() + self.seat.pool.config.timeouts.acquire;
        let wait = config.routing.causal_wait;
        let caught_up = self.seat.pool.checkout_caught_up(Protocol::Postgres, None, deadline, &position, wait);
        if let Some(conn) = caught_up.await.map_err(|e| MyClientError::from(&e))? {
            *self.seat.conn = Some(conn);
            return Ok(());
        }
        self.seat.pool = self.causal_fallback(wait, Some(Protocol::Postgres))?;
        Ok(())
    }
}

/// How a bridged response ended: unlike the writer's [`Step`], never midway.
pub(super) enum Ended {
    /// ReadyForQuery arrived, with the backend's transaction status.
    Ready(TransactionStatus),
    /// The backend started COPY, which the bridge cannot carry ([`Step::Unsupported`]).
    Copy,
}

/// A PostgreSQL response, read message by message, for a MySQL client.
struct Answer<'a> {
    writer: &'a mut ResultWriter,
    /// Inside the router's `BEGIN` (#34): the client is told what it would be without it, no
    /// transaction.
    wrapped: bool,
}

impl Translate for Answer<'_> {
    type End = Ended;

    fn feed(&mut self, bytes: &[u8], out: &mut Vec<u8>, _: &mut Vec<u8>) -> Result<(usize, Option<Ended>), RelayError> {
        let mut taken = 0;
        while let Some(frame) =
            decode_frame(bytes.get(taken..).unwrap_or_default(), MAX_BACKEND_FRAME).map_err(malformed)?
        {
            taken += frame.total_len;
            let msg = match BackendMessage::decode(&frame).map_err(malformed)? {
                BackendMessage::ReadyForQuery(_) if self.wrapped => {
                    BackendMessage::ReadyForQuery(TransactionStatus::Idle)
                }
                msg => msg,
            };
            match self.writer.on_message(&msg, out) {
                Step::More => {}
                Step::Done(tx) => return Ok((taken, Some(Ended::Ready(tx)))),
                Step::Unsupported => return Ok((taken, Some(Ended::Copy))),
            }
        }
        Ok((taken, None))
    }

    fn errored(&self) -> bool {
        self.writer.errored()
    }
}
