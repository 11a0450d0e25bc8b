//! Identifier newtypes that cross module boundaries (L0: depends on nothing).

pub mod position;

pub use position::{Gtid, GtidPosition, Position, Token};

/// Index of a data core (0-based, dense).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CoreId(pub u16);

/// Monotonic version of the published configuration and rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RulesVersion(pub u64);

/// A client's cancel request key as the router issued it (PostgreSQL BackendKeyData, or a MySQL
/// connection id for `KILL`), addressed to the session that owns it.
///
/// A router-issued pid names the owning core in its bits 24..31 and the secret is positive. A
/// PostgreSQL session-mode client is given its server's real pid instead (so `pg_backend_pid()`
/// agrees); its secret is then negative and names the core in its bits 24..30 (see
/// [`CancelKey::with_server_pid`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct CancelKey {
    /// Process/connection id the client was given.
    pub pid: i32,
    /// Router-issued secret (0 for MySQL `KILL`, which carries no secret).
    pub secret: i32,
}

impl CancelKey {
    /// Number of low bits of `pid` that number sessions within a core.
    pub const SESSION_BITS: u32 = 24;

    /// Builds the pid for session `seq` on `core`; the pid stays positive for up to 127 cores.
    pub fn make_pid(core: CoreId, seq: u32) -> i32 {
        let low = seq & ((1 << Self::SESSION_BITS) - 1);
        (((u32::from(core.0) & 0x7f) << Self::SESSION_BITS) | low) as i32
    }

    /// The core that owns this key.
    pub fn core(&self) -> CoreId {
        let bits = if self.secret < 0 { self.secret } else { self.pid };
        CoreId(((bits as u32) >> Self::SESSION_BITS) as u16 & 0x7f)
    }

    /// This router-issued key with the server's process id `pid` in place of the router's: the
    /// owning core moves into the secret, which keeps 24 random bits.
    pub fn with_server_pid(self, pid: i32) -> Self {
        let core = (self.pid as u32) >> Self::SESSION_BITS & 0x7f;
        let random = (self.secret as u32) & ((1 << Self::SESSION_BITS) - 1);
        Self { pid, secret: (0x8000_0000 | core << Self::SESSION_BITS | random) as i32 }
    }
}

impl CancelKey {
    /// Bit set in every router-issued MySQL connection id. MariaDB and MySQL count thread ids up
    /// from 1 and stay far below it, so `KILL n` names either a session by the id the router
    /// gave it or a server connection by the server's id, never both.
    pub const MYSQL_ROUTER_BIT: u32 = 1 << 30;

    /// The connection id a MySQL client is greeted with: the pid with [`Self::MYSQL_ROUTER_BIT`]
    /// set (the owning core stays readable for up to 64 cores).
    pub fn mysql_connection_id(&self) -> u32 {
        self.pid as u32 | Self::MYSQL_ROUTER_BIT
    }

    /// The session key a router-issued MySQL connection id stands for; `None` for an id the
    /// router did not issue (a server's thread id).
    pub fn from_mysql_connection_id(id: u32) -> Option<Self> {
        (id & Self::MYSQL_ROUTER_BIT != 0).then_some(Self { pid: (id & !Self::MYSQL_ROUTER_BIT) as i32, secret: 0 })
    }
}

/// What a cancel request or a MySQL `KILL` names, on its way to the core that owns the session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KillTarget {
    /// A session by the key the router gave it (PostgreSQL CancelRequest, router-issued MySQL id).
    Session(CancelKey),
    /// The session-mode MySQL session whose server connection, on a backend of pool `pool`, has
    /// thread id `id` (what its `CONNECTION_ID()` shows).
    Thread {
        /// The server's thread id.
        id: u32,
        /// The pool of the client that sent the KILL: the id is read on that pool's servers.
        pool: String,
    },
}

/// A cancel or `KILL` for the session a [`KillTarget`] names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KillRequest {
    /// Whose statement or connection.
    pub target: KillTarget,
    /// End the whole session (`KILL [CONNECTION]`), not only its running statement.
    pub connection: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mysql_connection_ids_round_trip_and_never_look_like_server_ids() {
        for core in [0u16, 1, 63] {
            for seq in [0u32, 7, 0xff_ffff] {
                let key = CancelKey { pid: CancelKey::make_pid(CoreId(core), seq), secret: 0 };
                let id = key.mysql_connection_id();
                assert!(id < 1 << 31, "clients reading it as a signed 32-bit number see it positive");
                assert_eq!(CancelKey::from_mysql_connection_id(id), Some(key));
                assert_eq!(CancelKey::from_mysql_connection_id(id).map(|k| k.core()), Some(CoreId(core)));
            }
        }
        for server_id in [1u32, 42, 1 << 29] {
            assert_eq!(CancelKey::from_mysql_connection_id(server_id), None);
        }
    }

    #[test]
    fn pid_encodes_core_and_stays_positive() {
        for core in [0u16, 1, 5, 127] {
            for seq in [0u32, 1, 0xff_ffff, 0x1ff_ffff] {
                let pid = CancelKey::make_pid(CoreId(core), seq);
                assert!(pid >= 0);
                assert_eq!(CancelKey { pid, secret: 0 }.core(), CoreId(core));
                let server = CancelKey { pid, secret: 0x0123_4567 }.with_server_pid(4242);
                assert_eq!((server.pid, server.core()), (4242, CoreId(core)));
                assert!(server.secret < 0);
                assert_eq!(server.secret & 0xff_ffff, 0x23_4567, "the random bits stay");
            }
        }
    }
}
