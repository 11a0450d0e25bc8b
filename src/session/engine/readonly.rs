//! Declared read-only transactions (#34), one rule for both wires: which statement opens a
//! transaction that runs whole on a replica that replayed the session's causal position (`BEGIN
//! READ ONLY`, `START TRANSACTION READ ONLY`, a plain start under a read-only session default or
//! after MySQL's one-shot `SET TRANSACTION READ ONLY`), which declares the access mode of the
//! transaction already open, and which ends one in which nothing ran.
//!
//! The wires differ only in how they carry it out: a PostgreSQL session sends the start itself
//! to the replica (and moves a transaction a later `SET TRANSACTION` declares), a MySQL session
//! answers the start and holds it back until the transaction's first statement is routed. Where
//! the dialects' servers differ (a `BEGIN` inside a transaction, `SET TRANSACTION`'s scope) the
//! rule follows each server, so the router never answers what the server would not.
//!
//! #37: MySQL sessions answered a `SET TRANSACTION READ ONLY` after a held-back start as if no
//! transaction were open (dropping the start the client had been told of); both wires now
//! treat it as a statement inside the transaction, each as its server does.
//! Pure: no clock, no socket, no protocol frame.

use super::text::Text;
use crate::sql::analyze::{AccessMode, TxKind};
use crate::sql::Dialect;

/// Where the session's transaction stands, as the rule reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Tx {
    /// None is open.
    Idle,
    /// A lone start opened one and nothing ran in it yet (PostgreSQL: open on the server; MySQL:
    /// held back by the router).
    Fresh,
    /// One is open and something ran in it.
    Open,
}

/// What the rule reads of a session besides the statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Facts {
    /// Where its transaction stands.
    pub tx: Tx,
    /// Its transactions default to read-only (PostgreSQL's reported
    /// `default_transaction_read_only`, MySQL's `SET SESSION TRANSACTION READ ONLY`).
    pub default_read_only: bool,
    /// A MySQL `SET TRANSACTION READ ONLY` waits for the next transaction.
    pub next_read_only: bool,
    /// The wire may place a transaction the statement opens: nothing holds the session on its
    /// connection, and the wire's own conditions for its mechanism hold.
    pub placeable: bool,
    /// The wire says the statement again in its own words (MySQL holds it back), so only a
    /// plain one qualifies; one with more in it goes to the server as it is.
    pub restates: bool,
}

/// What the wire does with the statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Nothing of this rule: it goes on as any other statement.
    Pass,
    /// It opens a read-only transaction, to run on a replica that replayed the session's causal
    /// position, or on the primary when none has.
    Open {
        /// MySQL's `WITH CONSISTENT SNAPSHOT` was asked for.
        snapshot: bool,
    },
    /// It makes the next transaction read-only (MySQL's `SET TRANSACTION` outside one).
    Next,
    /// It ends a transaction in which nothing ran, or spends a pending [`Step::Next`].
    EndEmpty,
    /// It changes the characteristics of a transaction in progress, which the server refuses
    /// (MySQL's 1568); a wire that holds the start back answers that refusal itself, so the
    /// transaction stays unplaced until its first statement.
    Refuse,
    /// It declares the access mode of the open transaction (PostgreSQL's `SET TRANSACTION`);
    /// `fresh`: nothing ran in it yet, so it may still move to where that mode runs.
    Declare {
        /// The declared mode.
        access: AccessMode,
        /// Nothing ran in the transaction yet.
        fresh: bool,
    },
}

/// What `text` means for a session in the state `facts` describes, read only for a transaction
/// statement: most statements are none, and pass without the session's facts (#39).
pub fn step(text: &Text<'_>, facts: impl FnOnce() -> Facts) -> Step {
    let Some(t) = text.transaction() else { return Step::Pass };
    let f = facts();
    if f.restates && !t.plain {
        return Step::Pass;
    }
    let pg = text.dialect() == Dialect::Postgres;
    match t.kind {
        TxKind::Begin => {
            // PostgreSQL ignores a BEGIN inside a transaction (with a warning); MySQL commits
            // the open one and starts another, so a held-back start is replaced.
            let starts = f.tx == Tx::Idle || (f.tx == Tx::Fresh && !pg);
            let read_only = match t.access {
                Some(access) => access == AccessMode::ReadOnly,
                None => f.default_read_only || f.next_read_only,
            };
            if starts && f.placeable && read_only {
                Step::Open { snapshot: t.snapshot }
            } else {
                Step::Pass
            }
        }
        TxKind::SetTransaction => match (t.access, f.tx) {
            (None, _) => Step::Pass,
            // PostgreSQL: outside a transaction it does nothing (the server warns).
            (Some(_), Tx::Idle) if pg => Step::Pass,
            (Some(access), tx) if pg => Step::Declare { access, fresh: tx == Tx::Fresh },
            // MySQL: the next transaction's (READ WRITE is the server's default to keep), and
            // refused inside one: by the router while it holds the start back, as the server
            // refuses it in one it runs.
            (Some(AccessMode::ReadOnly), Tx::Idle) if f.placeable => Step::Next,
            (Some(_), Tx::Fresh) => Step::Refuse,
            (Some(_), _) => Step::Pass,
        },
        TxKind::Commit | TxKind::Rollback => {
            if f.tx == Tx::Fresh || (f.tx == Tx::Idle && f.next_read_only) {
                Step::EndEmpty
            } else {
                Step::Pass
            }
        }
    }
}

#[cfg(test)]
mod tests;
