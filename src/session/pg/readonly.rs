//! Declared read-only transactions on replicas (#34): `BEGIN READ ONLY`, `START TRANSACTION
//! READ ONLY`, a plain `BEGIN` in a session whose `default_transaction_read_only` is on
//! (startup parameter, `SET`, `SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY`: what
//! PgJDBC's `setReadOnly(true)` sends), and a transaction whose first statement is `SET
//! TRANSACTION READ ONLY` run whole on a replica that replayed the session's causal position,
//! or on the primary when none has. The server enforces the read-only property; what the
//! router alone deems unsafe inside such a transaction is refused on the replica (25006,
//! `routing::Router`'s role check), never split onto another server.
//!
//! The rule (which statement opens, declares or ends what) is [`readonly::step`]'s, the same as
//! MySQL sessions'; this owns PostgreSQL's way of carrying it out: the session's facts for it,
//! and the move of a transaction in which nothing ran yet. The routing itself is
//! `routing::Router::split`'s.

use super::relay::run_silently;
use super::Session;
use crate::config::PoolRole;
use crate::protocol::pg::{sqlstate, TransactionStatus};
use crate::session::client_error::PgClientError;
use crate::session::engine::readonly::{self, Facts, Step, Tx};
use crate::session::engine::text::Text;
use crate::session::placement::Placed;
use crate::sql::analyze::AccessMode;

/// Whether a parameter's text value is a true boolean, as PostgreSQL reads one.
fn is_on(value: &str) -> bool {
    ["on", "true", "yes", "1", "t", "y"].iter().any(|v| value.trim().eq_ignore_ascii_case(v))
}

impl Session {
    /// Whether the session's transactions default to read-only: the server reports
    /// `default_transaction_read_only` (PostgreSQL 14 on), so the client's view of it — from
    /// its startup parameters, `SET`, `SET SESSION CHARACTERISTICS`, a rollback — is exact. An
    /// older server never reports it, and a plain BEGIN then stays on the primary.
    fn default_read_only(&self) -> bool {
        self.state.reported_value("default_transaction_read_only").is_some_and(is_on)
    }

    /// What the read-only rule reads of the session ([`readonly::step`]), as if it were `held`
    /// on its connection or not.
    fn read_only_facts(&self, held: bool) -> Facts {
        let tx = match (self.progress.tx, &self.progress.fresh) {
            (TransactionStatus::Idle, _) => Tx::Idle,
            (_, Some(_)) => Tx::Fresh,
            (_, None) => Tx::Open,
        };
        Facts {
            tx,
            default_read_only: self.default_read_only(),
            next_read_only: false,
            placeable: !held,
            restates: false,
        }
    }

    /// What the read-only rule makes of `text` now.
    pub(super) fn read_only_step(&self, text: &Text<'_>) -> Step {
        readonly::step(text, || self.read_only_facts(self.holding().held()))
    }

    /// Whether routing may treat `text` as part of a read-only transaction: inside one, or a
    /// statement that opens one (routed with it to a replica by `routing::Router::split`).
    pub(super) fn read_only_view(&self, text: &Text<'_>, held: bool) -> bool {
        self.progress.read_only_tx || matches!(readonly::step(text, || self.read_only_facts(held)), Step::Open { .. })
    }

    /// Notes, for a statement that runs, whether it leaves a transaction in which nothing ran
    /// yet (a lone BEGIN from outside one), which [`Session::move_fresh_transaction`] may move.
    pub(super) fn note_fresh(&mut self, text: &Text<'_>) {
        let begins = self.progress.tx == TransactionStatus::Idle && text.is_lone_begin();
        self.progress.fresh = begins.then(|| text.sql.into());
    }

    /// The fresh transaction's BEGIN and the access mode `text` declares for it, if it does; a
    /// statement that runs ends the transaction's freshness either way.
    fn fresh_declaration(&mut self, text: &Text<'_>) -> Option<(String, AccessMode)> {
        let step = self.progress.fresh.is_some().then(|| self.read_only_step(text));
        let begin = self.progress.fresh.take()?;
        match step {
            Some(Step::Declare { access, fresh: true }) => Some((begin, access)),
            _ => None,
        }
    }

    /// `SET TRANSACTION READ ONLY` (or `READ WRITE`) as the first statement after a BEGIN that
    /// went to the other role: the empty transaction is rolled back there and opened again,
    /// with the client's own BEGIN, where the declared access mode belongs — a replica that
    /// replayed the session's position for READ ONLY (a standby refuses READ WRITE outright),
    /// the primary for READ WRITE. Nothing ran in it, so nothing the client sees changes.
    /// Only between responses: with a batch in flight the transaction stays, and the server
    /// enforces the mode (or refuses READ WRITE on a standby with its own error).
    pub(super) async fn move_fresh_transaction(&mut self, text: &Text<'_>) -> Result<(), PgClientError> {
        let Some((begin, access)) = self.fresh_declaration(text) else { return Ok(()) };
        let on_replica = self.seat.pool.config.role == PoolRole::Replica;
        let quiet = self.ex.expects().is_empty() && self.ex.queued().is_empty() && !self.ex.awaiting();
        if (access == AccessMode::ReadOnly) == on_replica
            || !quiet
            || self.progress.tx != TransactionStatus::InBlock
            || self.state.pin().is_some()
            || self.is_bridged()
        {
            return Ok(());
        }
        let Some(conn) = self.seat.conn.as_mut() else { return Ok(()) };
        let rolled_back = run_silently(conn, "ROLLBACK").await;
        self.progress.tx = TransactionStatus::Idle;
        self.seat.ryw.transaction_moved();
        if let Err(e) = rolled_back {
            if let Some(c) = self.seat.conn.as_mut() {
                c.broken = true;
            }
            self.release_backend(false).await;
            return Err(moved_error(&e));
        }
        // Routed as the mode it declares, without counting it: the client's statement is
        // the SET TRANSACTION that follows.
        let as_declared = match access {
            AccessMode::ReadOnly => "BEGIN READ ONLY",
            AccessMode::ReadWrite => "BEGIN READ WRITE",
        };
        self.progress.read_only_tx = access == AccessMode::ReadOnly;
        // Boxed: routing is what called this (rarely taken, so the allocation is too).
        let routed = Box::pin(self.route_statement(&Text::pg(as_declared), false, None)).await;
        let attached = match routed {
            Ok(_) => self.ensure_backend().await,
            Err(e) => Err(e),
        };
        let opened = match (attached, self.seat.conn.as_mut()) {
            (Ok(()), Some(conn)) => run_silently(conn, &begin).await,
            (Err(e), _) => Err(e),
            (Ok(()), None) => Err(PgClientError::new(sqlstate::CONNECTION_FAILURE, "no backend connection")),
        };
        match opened {
            Ok(()) => {
                self.progress.tx = TransactionStatus::InBlock;
                Ok(())
            }
            Err(e) => {
                self.progress.read_only_tx = false;
                Err(moved_error(&e))
            }
        }
    }
}

/// The error a client gets when its empty transaction could not be moved: it no longer has
/// one (its ReadyForQuery says so), as after a lost connection.
fn moved_error(cause: &PgClientError) -> PgClientError {
    PgClientError::new(
        sqlstate::CONNECTION_FAILURE,
        format!(
            "the transaction could not be reopened where its declared access mode runs ({}); it was rolled back",
            cause.message
        ),
    )
}

#[cfg(test)]
mod tests;
