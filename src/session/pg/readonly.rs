//! Declared read-only transactions on replicas (#34): `BEGIN READ ONLY`, `START TRANSACTION
//! READ ONLY`, a plain `BEGIN` in a session whose `default_transaction_read_only` is on
//! (startup parameter, `SET`, `SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY`: what
//! PgJDBC's `setReadOnly(true)` sends), and a transaction whose first statement is `SET
//! TRANSACTION READ ONLY` run whole on a replica that replayed the session's causal position,
//! or on the primary when none has. The server enforces the read-only property; what the
//! router alone deems unsafe inside such a transaction is refused on the replica (25006,
//! `routing::Router`'s role check), never split onto another server.
//!
//! Owns the reading of those statements (pure) and the move of a transaction in which nothing
//! ran yet; the routing itself is `routing::Router::split`'s.

use super::relay::run_silently;
use super::Session;
use crate::config::PoolRole;
use crate::protocol::pg::{sqlstate, TransactionStatus};
use crate::session::client_error::PgClientError;
use crate::session::placement::Placed;
use crate::sql::lexer::{Lexer, TokenKind};
use crate::sql::Dialect;

/// What a transaction statement declares about writing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Access {
    /// `READ ONLY` among its modes (the last of `READ ONLY` / `READ WRITE` wins, as on the server).
    ReadOnly,
    /// `READ WRITE` among its modes.
    ReadWrite,
}

/// The kind of transaction statement `sql` is, when it is one alone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum TxStatement {
    /// `BEGIN` / `START TRANSACTION`.
    Begin,
    /// `SET TRANSACTION` (the current transaction's modes).
    SetTransaction,
}

/// Reads `sql` as one `BEGIN`, `START TRANSACTION` or `SET TRANSACTION` statement (comments and
/// a final `;` allowed) and the access mode it declares. A string of several statements is
/// `None`: what follows could end the transaction.
pub(super) fn transaction_statement(sql: &str) -> Option<(TxStatement, Option<Access>)> {
    // Asked four times per statement: most begin with none of BEGIN, START or SET.
    if !crate::sql::lexer::may_start_with(sql, &["begin", "start", "set"]) {
        return None;
    }
    let mut words = Lexer::new(sql, Dialect::Postgres).filter(|t| t.kind != TokenKind::Comment);
    let kind = match words.next() {
        Some(t) if t.is_word("BEGIN") => TxStatement::Begin,
        Some(t) if t.is_word("START") && words.next().is_some_and(|t| t.is_word("TRANSACTION")) => TxStatement::Begin,
        Some(t) if t.is_word("SET") && words.next().is_some_and(|t| t.is_word("TRANSACTION")) => {
            TxStatement::SetTransaction
        }
        _ => return None,
    };
    let (mut access, mut read, mut ended) = (None, false, false);
    for t in words {
        if ended {
            return None;
        }
        ended = t.kind == TokenKind::Semicolon;
        if read && t.is_word("ONLY") {
            access = Some(Access::ReadOnly);
        } else if read && t.is_word("WRITE") {
            access = Some(Access::ReadWrite);
        }
        read = t.is_word("READ");
    }
    Some((kind, access))
}

/// Whether `sql` is one `BEGIN` or `START TRANSACTION` and nothing else.
pub(super) fn is_lone_begin(sql: &str) -> bool {
    matches!(transaction_statement(sql), Some((TxStatement::Begin, _)))
}

/// Whether `sql` opens or sets a `READ ONLY` transaction: nothing run in it changes data.
pub(super) fn declares_read_only(sql: &str) -> bool {
    transaction_statement(sql).is_some_and(|(_, a)| a == Some(Access::ReadOnly))
}

/// Whether `sql` opens a transaction block in any of its statements (`SELECT 1; BEGIN` too):
/// what statement pooling refuses, through the classifier MySQL sessions use as well (#37).
pub(super) fn begins_transaction(sql: &str) -> bool {
    crate::sql::analyze::opens_transaction(sql, Dialect::Postgres).is_some()
}

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

    /// Whether routing may treat `sql` as part of a read-only transaction: inside one, or a
    /// statement that opens one (routed with it to a replica by `routing::Router::split`).
    pub(super) fn read_only_view(&self, sql: &str, held: bool) -> bool {
        if self.progress.read_only_tx {
            return true;
        }
        if held || self.progress.tx != TransactionStatus::Idle {
            return false;
        }
        match transaction_statement(sql) {
            Some((TxStatement::Begin, Some(access))) => access == Access::ReadOnly,
            Some((TxStatement::Begin, None)) => self.default_read_only(),
            _ => false,
        }
    }

    /// Notes, for a statement that runs, whether it leaves a transaction in which nothing ran
    /// yet (a lone BEGIN from outside one), which [`Session::move_fresh_transaction`] may move.
    pub(super) fn note_fresh(&mut self, sql: &str) {
        let begins = self.progress.tx == TransactionStatus::Idle
            && matches!(transaction_statement(sql), Some((TxStatement::Begin, _)));
        self.progress.fresh = begins.then(|| sql.into());
    }

    /// `SET TRANSACTION READ ONLY` (or `READ WRITE`) as the first statement after a BEGIN that
    /// went to the other role: the empty transaction is rolled back there and opened again,
    /// with the client's own BEGIN, where the declared access mode belongs — a replica that
    /// replayed the session's position for READ ONLY (a standby refuses READ WRITE outright),
    /// the primary for READ WRITE. Nothing ran in it, so nothing the client sees changes.
    /// Only between responses: with a batch in flight the transaction stays, and the server
    /// enforces the mode (or refuses READ WRITE on a standby with its own error).
    pub(super) async fn move_fresh_transaction(&mut self, sql: &str) -> Result<(), PgClientError> {
        let Some(begin) = self.progress.fresh.take() else { return Ok(()) };
        let Some((TxStatement::SetTransaction, Some(access))) = transaction_statement(sql) else { return Ok(()) };
        let on_replica = self.seat.pool.config.role == PoolRole::Replica;
        let quiet = self.ex.expects().is_empty() && self.ex.queued().is_empty() && !self.ex.awaiting();
        if (access == Access::ReadOnly) == on_replica
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
            Access::ReadOnly => "BEGIN READ ONLY",
            Access::ReadWrite => "BEGIN READ WRITE",
        };
        self.progress.read_only_tx = access == Access::ReadOnly;
        // Boxed: routing is what called this (rarely taken, so the allocation is too).
        let routed = Box::pin(self.route_statement(as_declared, false, None)).await;
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
mod tests {
    use super::*;

    #[test]
    fn read_only_transactions_are_recognized() {
        for sql in [
            "BEGIN READ ONLY",
            "begin transaction isolation level repeatable read, read only",
            "START TRANSACTION READ ONLY",
            "/* c */ SET TRANSACTION READ ONLY",
            "BEGIN ISOLATION LEVEL SERIALIZABLE READ ONLY DEFERRABLE",
            "BEGIN READ ONLY;",
            "BEGIN READ WRITE, READ ONLY",
        ] {
            assert!(declares_read_only(sql), "{sql}");
        }
        for sql in [
            "BEGIN",
            "BEGIN READ WRITE",
            "BEGIN READ ONLY, READ WRITE",
            "SELECT 'READ ONLY'",
            "SET default_transaction_read_only = on",
            "BEGIN READ ONLY; UPDATE t SET a = 1",
            "SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY",
        ] {
            assert!(!declares_read_only(sql), "{sql}");
        }
    }

    #[test]
    fn transaction_statements_and_their_modes() {
        assert_eq!(transaction_statement("BEGIN"), Some((TxStatement::Begin, None)));
        assert_eq!(transaction_statement("start transaction;"), Some((TxStatement::Begin, None)));
        assert_eq!(
            transaction_statement("SET TRANSACTION READ WRITE"),
            Some((TxStatement::SetTransaction, Some(Access::ReadWrite)))
        );
        assert_eq!(
            transaction_statement("set transaction isolation level serializable"),
            Some((TxStatement::SetTransaction, None))
        );
        for other in ["SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY", "BEGIN; SELECT 1", "COMMIT", "START"] {
            assert_eq!(transaction_statement(other), None, "{other}");
        }
    }

    #[test]
    fn a_transaction_block_is_seen_in_any_statement_of_a_text() {
        for sql in [
            "BEGIN",
            "begin isolation level serializable",
            "START TRANSACTION READ ONLY",
            "/* app */ start transaction",
            "SELECT 1; BEGIN",
            "SELECT 1;BEGIN READ ONLY;",
            "SELECT 1; -- x\n START TRANSACTION; SELECT 2",
        ] {
            assert!(begins_transaction(sql), "{sql}");
        }
        for sql in [
            "SELECT 1",
            "SELECT 'BEGIN'",
            "SELECT 1; SELECT 'START TRANSACTION'",
            "SELECT begin FROM t",
            "COMMIT; SELECT 1",
            "START",
            "SET x = 'BEGIN'; -- BEGIN",
        ] {
            assert!(!begins_transaction(sql), "{sql}");
        }
    }

    #[test]
    fn boolean_settings_read_as_the_server_does() {
        for on in ["on", "ON", "true", "1", "yes"] {
            assert!(is_on(on), "{on}");
        }
        for off in ["off", "false", "0", "no", ""] {
            assert!(!is_on(off), "{off}");
        }
    }
}
