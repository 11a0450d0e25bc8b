//! Declared read-only transactions on a replica (#34). `START TRANSACTION READ ONLY`, a plain
//! `START TRANSACTION`/`BEGIN` under `SET SESSION TRANSACTION READ ONLY`, and `SET TRANSACTION
//! READ ONLY` (the next transaction only) are answered by the router and held back until the
//! transaction's first statement: that statement is routed as any other (a replica-safe read
//! to a replica that has applied the session's causal position, anything else to the
//! primary), and the held-back statement runs first on the connection it got. The rest of
//! the transaction is held there; on a replica only replica-safe statements may follow
//! (`settle`), and the server enforces the read-only property itself. An empty transaction's
//! `COMMIT`/`ROLLBACK` is answered too, as the server would.
//!
//! Only with a read pool to use, outside a transaction, with autocommit on, on a connection
//! nothing pins, and not under statement pooling (which refuses transactions).
//!
//! Which statement opens, ends or is refused is [`readonly::step`]'s, the rule PostgreSQL
//! sessions follow too; this owns MySQL's way of carrying it out: answering, holding back and
//! running the held-back statement.

use super::Session;
use crate::config::{PoolMode, Protocol};
use crate::protocol::mysql::command::COM_QUERY;
use crate::protocol::mysql::errcode::ErrorNumber;
use crate::protocol::mysql::response::{
    SERVER_STATUS_AUTOCOMMIT, SERVER_STATUS_IN_TRANS, SERVER_STATUS_IN_TRANS_READONLY,
};
use crate::protocol::mysql::{encode_packets, OkPacket};
use crate::session::client_error::MyClientError;
use crate::session::engine::readonly::{self, Facts, Step, Tx};
use crate::session::engine::text::Text;
use crate::session::placement::Placed;

/// A statement the router answered and holds back until the transaction's first statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Deferred {
    /// A read-only transaction start (`WITH CONSISTENT SNAPSHOT` kept).
    Begin {
        /// The client asked for a consistent snapshot.
        snapshot: bool,
    },
    /// `SET TRANSACTION READ ONLY`: the next transaction (or autocommit statement) is read-only.
    NextReadOnly,
}

impl Deferred {
    fn sql(self) -> &'static str {
        match self {
            Deferred::Begin { snapshot: false } => "START TRANSACTION READ ONLY",
            Deferred::Begin { snapshot: true } => "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY",
            Deferred::NextReadOnly => "SET TRANSACTION READ ONLY",
        }
    }
}

/// The server's refusal of `SET TRANSACTION` inside a transaction.
const ER_CANT_CHANGE_TX_CHARACTERISTICS: ErrorNumber = ErrorNumber { code: 1568, sql_state: *b"25001" };

/// Longest text read for the rule: a transaction start is short, and every text query of a
/// split session passes here.
const SHAPE_MAX: usize = 256;

impl Session {
    /// Answers and holds back a read-only transaction start (see the module header), and the
    /// `COMMIT`/`ROLLBACK` of one that ran nothing or a `SET TRANSACTION` in it; `false` when
    /// `text` is not one of those or the session cannot defer it, and the statement goes on.
    pub(super) fn on_deferrable(&mut self, text: &Text<'_>) -> bool {
        let deferred = self.tx.deferred;
        if text.sql.len() > SHAPE_MAX {
            return false;
        }
        let facts = || Facts {
            tx: match deferred {
                Some(Deferred::Begin { .. }) => Tx::Fresh,
                _ if self.tx.status & SERVER_STATUS_IN_TRANS != 0 => Tx::Open,
                _ => Tx::Idle,
            },
            default_read_only: self.state.read_only_transactions(),
            next_read_only: deferred == Some(Deferred::NextReadOnly),
            placeable: deferred.is_some() || self.may_defer(),
            restates: true,
        };
        let next = match readonly::step(text, facts) {
            Step::Open { snapshot } => Some(Deferred::Begin { snapshot }),
            Step::Next => Some(Deferred::NextReadOnly),
            // An empty transaction ends, or a `SET TRANSACTION` is spent by a COMMIT (as the
            // server resets one-shot characteristics there).
            Step::EndEmpty => None,
            Step::Refuse => {
                let text = "Transaction characteristics can't be changed while a transaction is in progress";
                MyClientError::new(ER_CANT_CHANGE_TX_CHARACTERISTICS, text)
                    .encode(self.client.reply_seq, &mut self.io.out);
                return true;
            }
            Step::Pass | Step::Declare { .. } => return false,
        };
        self.tx.deferred = next;
        let mut status = SERVER_STATUS_AUTOCOMMIT;
        if matches!(next, Some(Deferred::Begin { .. })) {
            status |= SERVER_STATUS_IN_TRANS | SERVER_STATUS_IN_TRANS_READONLY;
        }
        let mut ok = Vec::with_capacity(16);
        OkPacket { status, ..OkPacket::default() }.encode(self.client.caps, &mut ok);
        encode_packets(&ok, self.client.reply_seq, &mut self.io.out);
        true
    }

    /// Whether a read-only start may wait for its first statement (see the module header).
    fn may_defer(&self) -> bool {
        self.tx.status & (SERVER_STATUS_IN_TRANS | SERVER_STATUS_AUTOCOMMIT) == SERVER_STATUS_AUTOCOMMIT
            && self.seat.pool.config.mode != PoolMode::Statement
            && !self.is_bridged()
            && !self.holding().held()
            && self.state.pin().is_none()
            && self.seat.ctx.splits_reads(Protocol::MySql)
    }

    /// Runs the held-back statement on the connection the transaction's first statement got,
    /// before that statement. A server error is that statement's error.
    pub(super) async fn run_deferred(&mut self) -> Result<(), MyClientError> {
        let Some(deferred) = self.tx.deferred.take() else { return Ok(()) };
        let Some(conn) = self.seat.conn.as_mut() else { return Ok(()) };
        let payload = [&[COM_QUERY][..], deferred.sql().as_bytes()].concat();
        super::stmt::run_silently(conn, &payload).await
    }
}
