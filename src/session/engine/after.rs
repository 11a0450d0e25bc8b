//! The end of a statement, one event for both wires (#37): when the server's answer to a client
//! statement is complete (PostgreSQL: its ReadyForQuery; MySQL: the last OK, EOF or ERR of the
//! response), the wire reads what its protocol said into [`StatementEnd`], and [`statement`]
//! keeps the session's read-your-writes books and says what the wire must do: settle the
//! session effects staged in a transaction, learn a commit position, close a connection a
//! transaction escaped statement pooling on, pin a setting the router cannot replay, keep the
//! connection for what only it can answer. The wire then releases the connection if nothing
//! holds it (`release::gives_back`).

use std::time::Instant;

use crate::config::PoolMode;
use crate::routing::RywState;
use crate::sql::analyze::PinReason;

/// The server's transaction state around the statement.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TxMove {
    /// A transaction was open before the answer began.
    pub before: bool,
    /// A transaction is open after it.
    pub after: bool,
    /// The server's autocommit is off after it: every statement opens a transaction (MySQL;
    /// PostgreSQL has no such setting).
    pub autocommit_off: bool,
}

/// How a wire learns what the statement committed, which is also when its session effects apply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Commits {
    /// From the answer's command tags (PostgreSQL): a setting commits or rolls back with its
    /// transaction, and a commit position is asked of the server once the transaction ended.
    Tagged {
        /// The last transaction-ending tag was COMMIT (`true`) or ROLLBACK (`false`).
        last_end: Option<bool>,
        /// A COMMIT tag was seen anywhere in the answer.
        any_commit: bool,
        /// The last tag (ROLLBACK, PREPARE TRANSACTION) left what ran before it uncommitted.
        ends_uncommitted: bool,
        /// More answers are due on the connection (a pipeline): it is busy, and the position
        /// waits for a later end.
        more_due: bool,
    },
    /// From the position the answer carries (MySQL's session-state GTID): a setting applied
    /// when its statement succeeded, before this event; the position is read off the answer.
    Carried {
        /// The client broke off mid-exchange and the connection was given up: there is no
        /// answer to read.
        abandoned: bool,
    },
}

/// What a wire read off the answer that ended a statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StatementEnd {
    /// The pool's mode.
    pub mode: PoolMode,
    /// The transaction state around it.
    pub tx: TxMove,
    /// The answer reported an error.
    pub error: bool,
    /// What the answer says was committed, and how the wire learns it.
    pub commits: Commits,
    /// The answer reported a generated insert id (MySQL's `LAST_INSERT_ID()`).
    pub insert_id: bool,
    /// The server's autocommit differs from what the router replays (MySQL: a procedure
    /// changed it); always `false` where the answer reports no status.
    pub autocommit_drift: bool,
}

/// What becomes of the session effects a transaction staged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effects {
    /// Nothing: a transaction is still open, or the wire applied them with their statements.
    Keep,
    /// The transaction committed: they are the session's now.
    Commit,
    /// It rolled back or failed: they are forgotten.
    Rollback,
}

/// What the wire does after the statement, before it may release the connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AfterStatement {
    /// The staged session effects.
    pub effects: Effects,
    /// A commit position is due: learn it on this connection before it serves anyone else.
    pub learn_position: bool,
    /// A transaction (or autocommit off) slipped past statement pooling's refusal: close the
    /// connection, which rolls it back, and count the session's transaction as gone.
    pub break_connection: bool,
    /// Pin the session to its connection for this reason.
    pub pin: Option<PinReason>,
    /// Keep the connection until the next command: it alone can answer for the insert id.
    pub sticky: bool,
}

/// The one after-statement rule. Keeps `ryw`'s books (the read-your-writes window restarts at
/// a commit; an answer that committed nothing leaves no position due) and says what the wire
/// does. `replica_reads` (whether any read may go to a replica, where a position is worth
/// learning) is asked only when a position could be learned.
pub fn statement(
    ryw: &mut RywState,
    f: &StatementEnd,
    now: Instant,
    replica_reads: impl FnOnce() -> bool,
) -> AfterStatement {
    ryw.statement_done(now, f.tx.after);
    let (effects, learn_position) = match f.commits {
        Commits::Tagged { .. } if f.tx.after => (Effects::Keep, false),
        Commits::Tagged { last_end, any_commit, ends_uncommitted, more_due } => {
            if !any_commit && (f.error || ends_uncommitted) {
                // Rolled back, failed or only prepared: no commit position to wait for (#34).
                ryw.nothing_committed();
            }
            // A statement outside a transaction commits unless it failed; a transaction's end
            // commits only when its last word was COMMIT (a failed block's COMMIT rolls back).
            let committed = if f.tx.before { last_end == Some(true) } else { !f.error };
            let effects = if committed { Effects::Commit } else { Effects::Rollback };
            (effects, ryw.position_due() && !more_due && replica_reads())
        }
        Commits::Carried { abandoned } => (Effects::Keep, !abandoned && replica_reads()),
    };
    let drift = f.mode == PoolMode::Transaction && f.autocommit_drift;
    AfterStatement {
        effects,
        learn_position,
        break_connection: super::release::escaped_statement_pooling(f.mode, f.tx.after || f.tx.autocommit_off),
        pin: drift.then_some(PinReason::UntrackedSetting),
        sticky: f.insert_id && !f.error,
    }
}

#[cfg(test)]
mod tests;
