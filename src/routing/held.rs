//! The vocabulary of a MySQL session's last word on a routing decision (#19): what holds the
//! session on its backend connection, the session state that settles the router's answer, and
//! what the session made of it. The settling itself needs the session's statement effects and
//! lives with the session; these types let the dry-run ask it the same question.

use std::sync::Arc;

/// What keeps a session on the backend connection it has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hold {
    /// The server reports a transaction open on it.
    Transaction,
    /// A server-side cursor is open on it (and no transaction).
    Cursor,
    /// Session state pins it (user variables, locks, an insert id, a response in progress).
    Pin,
}

impl Hold {
    /// Stable label for the dry-run.
    pub fn as_str(self) -> &'static str {
        match self {
            Hold::Transaction => "transaction",
            Hold::Cursor => "cursor",
            Hold::Pin => "session_pin",
        }
    }

    /// How refusals phrase it.
    pub fn describe(self) -> &'static str {
        match self {
            Hold::Transaction => "a transaction is open",
            Hold::Cursor => "a cursor is open",
            Hold::Pin => "the session is pinned to it",
        }
    }
}

/// A MySQL session's state as of its next statement, past what the router takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MySqlSession<'a> {
    /// The pool the session is on now.
    pub pool: &'a str,
    /// That pool is a replica (its role, or the MySQL read pool that is not also the primary).
    pub on_replica: bool,
    /// What holds the session on its connection there, if anything.
    pub hold: Option<Hold>,
    /// Only a cursor holds it, with autocommit on and no transaction: a statement that means
    /// the same on any connection may run on the primary meanwhile.
    pub cursor_only: bool,
    /// The next statement opens a transaction the client did not declare read-only (autocommit
    /// off and none open, as the server last reported).
    pub opens_write_transaction: bool,
    /// The pool uses statement pooling.
    pub statement_pooling: bool,
    /// The MySQL primary (write) pool, if one is configured.
    pub primary: Option<Arc<str>>,
}

/// What the session made of the router's decision.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Settled {
    /// As the router decided.
    AsRouted,
    /// A split read that opens a write transaction: the transaction runs on the primary.
    WriteTransaction,
    /// Runs on the primary on a connection of its own while the cursor's replica connection
    /// waits.
    Detour,
    /// Refused before anything runs: the held replica connection must not take it (the text
    /// the client gets with error 1792).
    HeldReplica(String),
    /// Refused before anything runs: statement pooling cannot serve it (error 1235).
    StatementPooling(String),
}

impl Settled {
    /// Stable label for the dry-run.
    pub fn as_str(&self) -> &'static str {
        match self {
            Settled::AsRouted => "as_routed",
            Settled::WriteTransaction => "write_transaction_on_primary",
            Settled::Detour => "detour_to_primary",
            Settled::HeldReplica(_) => "refused_held_replica",
            Settled::StatementPooling(_) => "refused_statement_pooling",
        }
    }
}
