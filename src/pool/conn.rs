//! A pooled backend connection and the budget unit it holds while open.

use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Instant;

use super::{Budget, Waiters};
use crate::config::Protocol;
use crate::rt::Stream;

/// One unit of a (pool, backend) budget, and on a pass-through pool of its (pool, backend, user)
/// budget too; released when dropped, and a waiter woken (on this core, and other cores waiting
/// for the budget called: `Waiters::unit_freed`).
pub(crate) struct BudgetUnit {
    budget: Arc<Budget>,
    user_budget: Option<Arc<Budget>>,
    waiters: Rc<Waiters>,
}

impl BudgetUnit {
    pub(crate) fn new(budget: Arc<Budget>, user_budget: Option<Arc<Budget>>, waiters: Rc<Waiters>) -> Self {
        Self { budget, user_budget, waiters }
    }
}

impl Drop for BudgetUnit {
    fn drop(&mut self) {
        self.budget.release();
        if let Some(b) = &self.user_budget {
            b.release();
        }
        self.waiters.unit_freed(&self.budget);
    }
}

/// What the backend told us about a PostgreSQL connection at startup.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct PgInfo {
    /// BackendKeyData process id (for cancel requests).
    pub pid: i32,
    /// BackendKeyData secret.
    pub secret: i32,
    /// ParameterStatus values reported at startup, in order.
    pub params: Vec<(String, String)>,
}

/// What the backend told us about a MySQL/MariaDB connection at login, plus the router's
/// bookkeeping of statements prepared on it.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct MyInfo {
    /// Backend connection (thread) id, for `KILL QUERY`.
    pub thread_id: u32,
    /// Server version string from the handshake.
    pub server_version: String,
    /// Capabilities in force on this connection (ours intersected with the server's).
    pub capabilities: u64,
    /// Status flags of the last OK/EOF the server sent.
    pub status: u16,
    /// Collation id the connection was opened with.
    pub charset: u8,
    /// Statements prepared on this connection: (router statement key, backend statement id),
    /// coldest first.
    pub prepared: Vec<(u64, u32)>,
    /// MariaDB: the last `last_gtid` value the connection's OK packets reported (#34), to tell
    /// after a failed statement whether it committed anything.
    pub last_gtid: String,
    /// MariaDB (#34): an OK packet on this connection may report a GTID committed by the
    /// session that holds it. A result set's EOF carries no session state, so the GTID of a
    /// commit inside it (an autocommit `SELECT f(n)` of an inserting function) waits for the
    /// connection's next OK with state, whoever's statement that answers.
    pub owes_gtid: bool,
}

/// Protocol-specific identity of a backend connection.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub enum ConnInfo {
    /// A PostgreSQL backend.
    Pg(PgInfo),
    /// A MySQL or MariaDB backend.
    MySql(MyInfo),
}

/// An open, authenticated backend connection owned by one core.
///
/// Kept to 128 bytes or less (a test pins it): a connection is moved by value through every
/// checkout and checkin, each layer of the checkout's futures copying it again (#39), and rustc
/// inlines a fixed-size copy of up to 128 bytes as a few vector moves where a larger one is a
/// `memcpy` call. What a transaction rarely reads lives in the boxed [`Lease`].
pub struct Conn {
    /// The socket.
    pub stream: Stream,
    /// Bytes read from the backend and not consumed yet.
    pub rbuf: Vec<u8>,
    /// Names of the statements the router prepared on this connection, most recent last.
    pub prepared: Vec<u64>,
    /// Signature of the session settings applied on this connection (0: server defaults).
    pub settings: u64,
    /// Last time the connection was checked in.
    pub last_used: Instant,
    /// Index of the backend within its pool: `u32` beside `broken` rather than a `usize`, which
    /// would take the size past 128 bytes.
    backend: u32,
    /// Set when an I/O error or protocol desync makes the connection unusable.
    pub broken: bool,
    pub(crate) lease: Box<Lease>,
}

/// What a connection holds of its pool's limits: its budget unit while it is open, and while it
/// is lent the permit of the checkout it was lent for (#41), given back at checkin or close;
/// and what a transaction rarely reads of it (its address and identity).
pub(crate) struct Lease {
    _unit: BudgetUnit,
    pub(crate) permit: Option<super::admit::Permit>,
    /// Its pool's RECONNECT epoch when it opened: one from before a RECONNECT is closed at checkin.
    pub(crate) epoch: u64,
    /// The client user it is logged in as on a pass-through pool (#23): lent only to that user.
    pub(crate) user: Option<Rc<str>>,
    addr: SocketAddr,
    info: ConnInfo,
}

impl Conn {
    pub(crate) fn new(stream: Stream, addr: SocketAddr, backend: usize, info: ConnInfo, unit: BudgetUnit) -> Self {
        Self {
            stream,
            rbuf: Vec::with_capacity(8192),
            prepared: Vec::new(),
            settings: 0,
            last_used: Instant::now(),
            // A pool's backends are a configured list: never near 2^32.
            backend: u32::try_from(backend).unwrap_or(u32::MAX),
            broken: false,
            lease: Box::new(Lease { _unit: unit, permit: None, epoch: 0, user: None, addr, info }),
        }
    }

    /// Index of the backend within its pool.
    pub fn backend(&self) -> usize {
        self.backend as usize
    }

    /// Backend address (for cancel connections).
    pub fn addr(&self) -> SocketAddr {
        self.lease.addr
    }

    /// Protocol-specific identity.
    pub fn info(&self) -> &ConnInfo {
        &self.lease.info
    }

    /// Protocol-specific identity, for what the connection's responses update (MySQL status
    /// flags, GTIDs, prepared statement ids).
    pub fn info_mut(&mut self) -> &mut ConnInfo {
        &mut self.lease.info
    }

    /// The bytes read and the identity at once, for a relay that updates the identity from
    /// the responses it reads.
    pub fn read_and_info_mut(&mut self) -> (&[u8], &mut ConnInfo) {
        (&self.rbuf, &mut self.lease.info)
    }

    /// The wire protocol this connection speaks.
    pub fn protocol(&self) -> Protocol {
        match self.lease.info {
            ConnInfo::Pg(_) => Protocol::Postgres,
            ConnInfo::MySql(_) => Protocol::MySql,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connection is moved by value through each layer of a checkout and of a checkin (#39):
    /// up to 128 bytes rustc copies it inline with a few vector moves, past that it calls
    /// `memcpy` every time (~1,400 instructions a transaction at 256 bytes). A field that would
    /// take it past this belongs in the boxed `Lease`.
    #[test]
    fn a_connection_is_small_enough_to_move_without_memcpy() {
        assert!(std::mem::size_of::<Conn>() <= 128, "{} bytes", std::mem::size_of::<Conn>());
    }
}
