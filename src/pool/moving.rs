//! Open server connections moving off the core that opened them, with what the router knows
//! of each: to a new process of the router with the session that owns it (#40), and to another
//! core of this process that waits for its backend's budget (#39), where a move used to be a
//! close here and a connect and login there.

use std::os::fd::OwnedFd;
use std::time::Instant;

use super::{Conn, ConnInfo};
use crate::config::Pool as PoolConfig;
use crate::rt::{FrozenTls, Stream};

/// A server connection on its way: what the router knows of it, apart from its socket.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FrozenConn {
    pub(crate) addr: std::net::SocketAddr,
    pub(crate) info: ConnInfo,
    /// The router's statements prepared on it.
    pub(crate) prepared: Vec<u64>,
    /// The signature of the settings applied on it.
    pub(crate) settings: u64,
    /// Its TLS session, if it is encrypted.
    pub(crate) tls: Option<Box<FrozenTls>>,
    /// Bytes the server sent that nobody read yet (a notice, a notification).
    pub(crate) unread: Vec<u8>,
}

/// Takes `conn`'s socket off this core (see [`crate::rt::hand_off`]), with what its read buffer
/// holds from `from` on as unread; `None` when it cannot move, and then the connection is marked
/// broken: its parked receive was stopped.
pub async fn freeze(conn: &mut Conn, from: usize) -> Option<(OwnedFd, FrozenConn)> {
    match crate::rt::hand_off(&mut conn.stream).await {
        Ok(crate::rt::Handed { fd, got, tls }) => {
            let mut unread = conn.rbuf.split_off(from.min(conn.rbuf.len()));
            unread.extend_from_slice(&got);
            let (addr, info, prepared, settings) =
                (conn.addr(), conn.info().clone(), conn.prepared.clone(), conn.settings);
            Some((fd, FrozenConn { addr, info, prepared, settings, tls, unread }))
        }
        Err(e) => {
            tracing::debug!(error = %e, "a server connection could not be moved");
            conn.broken = true;
            None
        }
    }
}

impl FrozenConn {
    /// Socket `fd` of the connection joined to this core's loop, with its TLS session.
    pub(crate) fn join(&mut self, fd: OwnedFd) -> std::io::Result<Stream> {
        Stream::adopt_backend(fd, self.tls.take())
    }

    /// Where the connection goes and what it is, and the rest of what the router knew of it,
    /// for the connection made on the joined socket.
    pub(crate) fn into_parts(self) -> (std::net::SocketAddr, ConnInfo, Restore) {
        let rest = Restore { prepared: self.prepared, settings: self.settings, unread: self.unread };
        (self.addr, self.info, rest)
    }
}

/// What the router knew of a moving connection past its address and identity.
pub(crate) struct Restore {
    prepared: Vec<u64>,
    settings: u64,
    unread: Vec<u8>,
}

impl Restore {
    /// Gives `conn`, made on the joined socket, what the router knew of it.
    pub(crate) fn apply(self, conn: &mut Conn) {
        conn.rbuf = self.unread;
        conn.settings = self.settings;
        conn.prepared = self.prepared;
    }
}

/// An idle connection one core gave up for another core's waiting checkout (#39), left open
/// beside its backend's budget: the core that takes the freed unit next uses it instead of
/// logging in anew. Only a core of the same pool configuration and RECONNECT epoch may: a
/// connection opened under other settings, or before a RECONNECT, is closed instead.
pub struct Handed {
    fd: OwnedFd,
    conn: FrozenConn,
    config: Box<PoolConfig>,
    epoch: u64,
    at: Instant,
}

impl std::fmt::Debug for Handed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handed").field("addr", &self.conn.addr).field("at", &self.at).finish()
    }
}

impl Handed {
    /// `conn`, frozen with nothing unread, on socket `fd`, given up at `at` by a core of a pool
    /// configured as `config` at RECONNECT `epoch`.
    pub(crate) fn new(fd: OwnedFd, conn: FrozenConn, config: PoolConfig, epoch: u64, at: Instant) -> Self {
        Self { fd, conn, config: Box::new(config), epoch, at }
    }

    /// Whether a core of a pool configured as `config` at `epoch` may use it.
    pub(crate) fn fits(&self, config: &PoolConfig, epoch: u64) -> bool {
        self.epoch == epoch && *self.config == *config
    }

    /// Whether it was handed at or after `since`.
    pub(crate) fn since(&self, since: Instant) -> bool {
        self.at >= since
    }

    /// Its socket and state, to be thawed.
    pub(crate) fn into_parts(self) -> (OwnedFd, FrozenConn) {
        (self.fd, self.conn)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;
    use std::os::unix::net::UnixStream;

    use super::*;
    use crate::config::Config;
    use crate::pool::{Budget, BudgetRegistry, PgInfo};

    fn pool_config(password: &str) -> PoolConfig {
        let text = format!(
            "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\nusername = \"u\"\n\
             password = \"{password}\"\nmax_connections = 4\nbackends = [{{ host = \"127.0.0.1\", port = 5432 }}]\n\
             [routing]\ndefault_pool = \"main\"\n"
        );
        let config = Config::parse(&text, "test.toml").expect("valid config");
        config.pools.into_iter().next().expect("a pool")
    }

    /// A connection handed over by a pool configured as `config` at `epoch`, `age` ago, and the
    /// other end of its socket (which reads end-of-file once the connection is closed).
    fn handed(config: &PoolConfig, epoch: u64, age: std::time::Duration, prepared: u64) -> (Handed, UnixStream) {
        let (ours, peer) = UnixStream::pair().expect("socket pair");
        let conn = FrozenConn {
            addr: "127.0.0.1:5432".parse().expect("address"),
            info: ConnInfo::Pg(PgInfo::default()),
            prepared: vec![prepared],
            settings: 0,
            tls: None,
            unread: Vec::new(),
        };
        let at = Instant::now().checked_sub(age).expect("a past instant");
        (Handed::new(OwnedFd::from(ours), conn, config.clone(), epoch, at), peer)
    }

    fn closed(peer: &mut UnixStream) -> bool {
        peer.set_nonblocking(true).expect("non-blocking");
        matches!(peer.read(&mut [0u8; 1]), Ok(0))
    }

    fn budget() -> std::sync::Arc<Budget> {
        BudgetRegistry::default().get("main", "127.0.0.1:5432", 4)
    }

    #[test]
    fn a_core_takes_only_a_connection_of_its_configuration_and_epoch_and_closes_the_others() {
        let (config, other) = (pool_config("p"), pool_config("changed"));
        let b = budget();
        let second = std::time::Duration::from_secs(1);
        let (old_epoch, mut p1) = handed(&config, 0, second, 1);
        let (other_config, mut p2) = handed(&other, 1, second, 2);
        let (fits, mut p3) = handed(&config, 1, second, 3);
        let (fits_too, mut p4) = handed(&config, 1, second, 4);
        b.hand(old_epoch);
        b.hand(other_config);
        b.hand(fits);
        b.hand(fits_too);
        let (_socket, taken) = b.take_handed(&config, 1).expect("the fitting one").into_parts();
        assert_eq!(taken.prepared, [4], "the newest first, and what the router knew of it moves with it");
        assert!(closed(&mut p1), "one opened before a RECONNECT is closed");
        assert!(closed(&mut p2), "one of another configuration is closed");
        assert!(!closed(&mut p4), "the one taken stays open");
        assert!(!closed(&mut p3), "another fitting one stays for the next unit taken");
        let (_socket, next) = b.take_handed(&config, 1).expect("the other fitting one").into_parts();
        assert_eq!(next.prepared, [3]);
        assert!(b.take_handed(&config, 1).is_none(), "nothing is left");
    }

    #[test]
    fn a_connection_nobody_took_is_closed_at_upkeep_and_a_fresh_one_kept() {
        let config = pool_config("p");
        let b = budget();
        let (old, mut p_old) = handed(&config, 0, std::time::Duration::from_secs(10), 1);
        let (new, mut p_new) = handed(&config, 0, std::time::Duration::ZERO, 2);
        b.hand(old);
        b.hand(new);
        b.close_handed_before(Instant::now() - std::time::Duration::from_secs(5));
        assert!(closed(&mut p_old));
        assert!(!closed(&mut p_new));
        assert_eq!(b.take_handed(&config, 0).expect("the fresh one").into_parts().1.prepared, [2]);
    }
}
