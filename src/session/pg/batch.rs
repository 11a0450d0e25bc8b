//! Pipelines routed as one unit (#19): with a read/write split, the extended messages of a
//! batch are held (bounded) until its Sync or Flush, so that the batch is routed as a whole:
//! to a replica only when every statement it runs or describes is a replica read, else to the
//! primary. A batch too large to hold goes to the primary (unknown never means safe). Once
//! part of a batch ran on a replica (after a Flush), the session is held there until
//! ReadyForQuery, and a statement that is not replica-safe is refused with `25006` rather than
//! sent there (`replica_hold_refusal`).

use std::collections::HashMap;

use super::prepared::Stmts;
use super::{End, Session};
use crate::config::Protocol;
use crate::protocol::pg::tag::frontend as client;
use crate::protocol::pg::{sqlstate, Frame, FrontendMessage, RawFrames, Target};
use crate::routing::{Decision, DecisionKind, Outcome, StatementKey};
use crate::session::client_error::PgClientError;
use crate::session::engine::replica::{self, Guard, HeldReplica};
use crate::session::placement::Placed;
use crate::sql::Dialect;

/// Bytes of client messages held for one batch (a larger batch goes to the primary).
const HOLD_BYTES: usize = 64 * 1024;
/// Messages held for one batch.
const HOLD_MESSAGES: usize = 1024;

/// The client's extended messages held until their batch is routed.
#[derive(Debug, Default)]
pub(super) struct Held {
    bytes: Vec<u8>,
    count: usize,
    /// The batch being released must run on the primary: some statement of it is not a read.
    pub primary: bool,
}

impl Held {
    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Holds one whole message; `false` (the message not held) when it would take the batch
    /// over the limits. Checked before copying: a large Bind is not copied only to be released.
    pub fn push(&mut self, raw: &[u8]) -> bool {
        if self.bytes.len().saturating_add(raw.len()) > HOLD_BYTES || self.count >= HOLD_MESSAGES {
            return false;
        }
        self.bytes.extend_from_slice(raw);
        self.count += 1;
        true
    }

    /// Hands over the held messages, leaving nothing held.
    pub fn take(&mut self) -> Vec<u8> {
        self.count = 0;
        std::mem::take(&mut self.bytes)
    }
}

/// Each statement text that `bytes` (whole extended messages) runs or describes, in order,
/// with its routing key when prepared before the batch: unnamed Parses, and the statements that
/// Binds and statement Describes name (parsed in the batch itself, or in `known`). Names the
/// router does not know are left out: the server reports them.
pub(super) fn statements(bytes: &[u8], known: &Stmts) -> Vec<(String, Option<StatementKey>)> {
    let mut parsed: HashMap<&str, &str> = HashMap::new();
    let mut out = Vec::new();
    for f in RawFrames::new(bytes, usize::MAX) {
        let name = match FrontendMessage::decode(&Frame::new(f.tag(), f.body())) {
            Ok(FrontendMessage::Parse { name: "", query, .. }) => {
                out.push((query.to_owned(), None));
                continue;
            }
            Ok(FrontendMessage::Parse { name, query, .. }) => {
                parsed.insert(name, query);
                continue;
            }
            Ok(FrontendMessage::Bind { statement, .. }) if !statement.is_empty() => statement,
            Ok(FrontendMessage::Describe { kind: Target::Statement, name }) if !name.is_empty() => name,
            _ => continue,
        };
        match (parsed.get(name), known.get(name)) {
            (Some(query), _) => out.push(((*query).to_owned(), None)),
            (None, Some(stmt)) => out.push((stmt.query.clone(), stmt.route_key)),
            (None, None) => {}
        }
    }
    out
}

impl Session {
    /// Whether `msg` is held for unit routing rather than handled now: an extended message
    /// while a batch is held, or one that starts a batch free to choose its pool.
    pub(super) fn holds(&self, msg: &FrontendMessage<'_>) -> bool {
        let extended = matches!(
            msg,
            FrontendMessage::Parse { .. }
                | FrontendMessage::Bind { .. }
                | FrontendMessage::Describe { .. }
                | FrontendMessage::Execute { .. }
                | FrontendMessage::Close { .. }
        );
        extended
            && (!self.batch.is_empty() || (!self.holding().held() && self.seat.ctx.splits_reads(Protocol::Postgres)))
    }

    /// Whether a message of type `tag` is dropped unread: the batch failed, and it is neither
    /// the Sync that ends the skipping nor a Terminate (`skips` of it decoded). As
    /// on the server, its body is not decoded: under a flood of 1 KiB Parses past a limit,
    /// finding their strings' ends and checking their UTF-8 was half the router's work (#33).
    /// A type no client sends is decoded, and refused as before.
    pub(super) fn skips_unread(&self, tag: u8) -> bool {
        (self.ex.refused() || self.ex.aborted())
            && FrontendMessage::known_tag(tag)
            && !matches!(tag, client::SYNC | client::TERMINATE)
    }

    /// Holds one message; a batch it would take over the limits is released to the primary at
    /// once, the message after it (handled where it is, never copied into the batch).
    pub(super) async fn hold(&mut self, raw: &[u8]) -> Result<(), End> {
        if self.batch.push(raw) {
            return Ok(());
        }
        // Too large to hold whole, so what follows is unknown: the batch goes to the primary.
        let bytes = self.batch.take();
        self.batch.primary = true;
        let mut res = self.handle_held(&bytes).await;
        if res.is_ok() {
            res = self.handle_held(raw).await;
        }
        self.batch.primary = false;
        res
    }

    /// Routes the held batch as one unit and handles its messages.
    pub(super) async fn release_batch(&mut self) -> Result<(), End> {
        let bytes = self.batch.take();
        self.batch.primary = self.batch_needs_primary(&bytes);
        let res = self.handle_held(&bytes).await;
        self.batch.primary = false;
        res
    }

    async fn handle_held(&mut self, bytes: &[u8]) -> Result<(), End> {
        for f in RawFrames::new(bytes, usize::MAX) {
            let raw = f.bytes();
            if self.skips_unread(f.tag()) {
                continue;
            }
            let Ok(msg) = FrontendMessage::decode(&Frame::new(f.tag(), f.body())) else {
                continue; // decoded once already when it was held
            };
            if self.skips(&msg) {
                continue;
            }
            self.handle(msg, raw).await?;
            self.stream_batch().await?;
        }
        Ok(())
    }

    /// Whether some statement of a batch of several would not run on the read pool.
    fn batch_needs_primary(&mut self, bytes: &[u8]) -> bool {
        let mut stmts = statements(bytes, &self.stmts);
        let mut seen = std::collections::HashSet::new();
        stmts.retain(|(sql, _)| seen.insert(sql.clone()));
        if stmts.len() < 2 {
            // One statement (however often it runs) decides for itself, as outside a pipeline.
            return false;
        }
        // A read-only transaction the batch opens runs whole on the replica its BEGIN goes to
        // (#34): what it runs there must be replica-safe, up to its end.
        let mut read_only = false;
        stmts.iter().any(|(sql, key)| {
            let d = self.decide(sql, *key);
            if read_only {
                read_only = !d.ends_transaction();
                return !d.facts.safe_when_read_only();
            }
            let on_read = matches!(&d.outcome, Outcome::Route(p) if self.seat.ctx.is_read_pool(Protocol::Postgres, p));
            read_only = on_read && d.reason == "read_only_transaction";
            !on_read
        })
    }

    /// The error for a statement that is not replica-safe while the session is held on the read
    /// pool (an open transaction, part of a pipeline already run there, pinned state): it must
    /// never be sent there, and cannot move either.
    pub(super) fn replica_hold_refusal(&self, d: &Decision, sql: &str) -> Option<PgClientError> {
        let hold = self.holding();
        let on_replica = self.seat.on_replica(Protocol::Postgres);
        let s = HeldReplica {
            held: hold.held(),
            on_replica,
            dialect: Dialect::Postgres,
            read_only_tx: self.progress.read_only_tx,
        };
        let Guard::Refuse(why) = replica::guard(&s, &d.facts, sql, || false) else { return None };
        let text = replica::refusal(self.seat.pool.name(), why, hold.describe());
        Some(PgClientError::new(sqlstate::READ_ONLY_SQL_TRANSACTION, text))
    }

    /// The write pool, when the batch being released must not use the read pool.
    pub(super) fn batch_override(&self, d: &Decision, target: &str) -> Option<std::sync::Arc<str>> {
        let split_read =
            d.step == DecisionKind::ReadWriteSplit && self.seat.ctx.is_read_pool(Protocol::Postgres, target);
        if !self.batch.primary || !split_read {
            return None;
        }
        self.seat.ctx.rules().primary_pool(Protocol::Postgres).cloned()
    }
}

#[cfg(test)]
mod tests;
