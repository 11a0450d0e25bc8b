//! What holds a session on its backend connection: the one notion both wires use to decide
//! whether a session may move to another pool, what routing sees as its transaction pool, and
//! why a held replica connection refuses a statement.

use crate::routing;
use crate::sql::analyze::PinReason;

/// What keeps a session on the backend connection it has; `Free` when nothing does. When
/// several things hold it, the first in declaration order after `Free` names it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// Nothing: the session may move between statements.
    Free,
    /// The server reports a transaction open on the connection.
    Tx {
        /// The transaction was declared (or reported) read-only.
        read_only: bool,
    },
    /// A server-side cursor is open on it (MySQL `COM_STMT_EXECUTE` with a cursor).
    Cursor,
    /// The connection is in the middle of an exchange: an extended-protocol batch before its
    /// Sync (PostgreSQL; its implicit transaction is open until ReadyForQuery), or a response
    /// not yet read to its end (MySQL).
    MidBatch,
    /// Session state lives on the connection (temporary table, advisory lock, `LISTEN`...).
    Pin(PinReason),
    /// The last statement left something only that connection can answer (MySQL: the insert
    /// id `LAST_INSERT_ID()` reads).
    Sticky,
}

/// Which part of an unfinished exchange with the backend a rule counts as holding the
/// connection, each counting those after it too: routing keeps even messages not sent yet
/// together, the release and idle rules count a batch before its Sync or a response read
/// part-way, and the end of a statement only answers still due.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exchange {
    /// Messages queued for the backend and not sent yet (PostgreSQL).
    Queued,
    /// A batch before its Sync (PostgreSQL), a response read part-way (MySQL).
    Open,
    /// Answers still due from the backend.
    Due,
}

/// The protocol-neutral facts each wire reads off its own state to compute its [`Hold`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HoldFacts {
    /// The session has a backend connection at all (without one nothing can hold it).
    pub connected: bool,
    /// The server reports a transaction open.
    pub in_transaction: bool,
    /// That transaction is read-only.
    pub read_only: bool,
    /// A server-side cursor is open.
    pub cursor: bool,
    /// An exchange with the backend is unfinished (batch before Sync, response mid-way).
    pub mid_exchange: bool,
    /// Session state pins the connection, and why.
    pub pin: Option<PinReason>,
    /// Something the last statement left sticks to the connection.
    pub sticky: bool,
}

impl Hold {
    /// What holds a session in the state `f` describes.
    pub fn of(f: &HoldFacts) -> Hold {
        if !f.connected {
            Hold::Free
        } else if f.in_transaction {
            Hold::Tx { read_only: f.read_only }
        } else if f.cursor {
            Hold::Cursor
        } else if f.mid_exchange {
            Hold::MidBatch
        } else if let Some(reason) = f.pin {
            Hold::Pin(reason)
        } else if f.sticky {
            Hold::Sticky
        } else {
            Hold::Free
        }
    }

    /// Whether the session must stay on its current backend connection.
    pub fn held(self) -> bool {
        self != Hold::Free
    }

    /// The hold in the router's dry-run vocabulary ([`routing::Hold`]), which names what a
    /// client can be asked about: a transaction, a cursor, or anything else that pins.
    pub fn kind(self) -> Option<routing::Hold> {
        match self {
            Hold::Free => None,
            Hold::Tx { .. } => Some(routing::Hold::Transaction),
            Hold::Cursor => Some(routing::Hold::Cursor),
            Hold::MidBatch | Hold::Pin(_) | Hold::Sticky => Some(routing::Hold::Pin),
        }
    }

    /// What holds the session, in the words of a refusal ([`super::replica::refusal`]): the
    /// dry-run's, but for a batch in flight, whose earlier statements ran there.
    pub fn describe(self) -> &'static str {
        match self {
            Hold::MidBatch => "earlier statements of the batch ran there and hold it until its end",
            _ => self.kind().map_or("nothing holds it", routing::Hold::describe),
        }
    }
}
