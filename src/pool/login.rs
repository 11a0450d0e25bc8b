//! What opening a backend connection looks like for every protocol: dial within the connect
//! deadline, run the protocol's login, and wrap the result into a pooled [`Conn`] with errors
//! that name the pool and backend.

use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Instant;

use super::conn::BudgetUnit;
use super::{Conn, ConnInfo, PoolError};
use crate::config::Pool as PoolConfig;
use crate::protocol::pg::ScramKeys;
use crate::rt::{self, Elapsed, Stream};

/// Who a connection of a pool without `username` logs in as (#23): the client's own user, with
/// what the router learned at the client's login to prove it to the server.
pub struct PassThrough {
    /// The client's user name, which the backend connection logs in as.
    pub user: Rc<str>,
    /// How the backend connection proves it.
    pub secret: BackendSecret,
}

/// What proves a passed-through user to a backend; never a value shown anywhere.
pub enum BackendSecret {
    /// Nothing: the backend must trust the router (`allow_anonymous`).
    Nothing,
    /// The plaintext password (from an auth file entry that holds one).
    Password(String),
    /// PostgreSQL's stored MD5 secret `md5<hex>`, which answers an MD5 challenge.
    Md5(String),
    /// SCRAM keys recovered from the client's proof.
    Scram(ScramKeys),
    /// MySQL `SHA1(password)`, recovered from the client's `mysql_native_password` response.
    NativeStage1([u8; 20]),
}

/// A passed-through identity on its way to a new binary with its session (#40). It holds the
/// secret: it travels only over the hand-over socket, which only the router's own user reaches.
#[derive(serde::Serialize, serde::Deserialize)]
pub struct FrozenPass {
    user: String,
    secret: FrozenSecret,
}

#[derive(serde::Serialize, serde::Deserialize)]
enum FrozenSecret {
    Nothing,
    Password(String),
    Md5(String),
    Scram { iterations: u32, salt: Vec<u8>, client_key: [u8; 32], server_key: [u8; 32] },
    NativeStage1([u8; 20]),
}

impl PassThrough {
    /// The identity for the new binary.
    pub fn freeze(&self) -> FrozenPass {
        let secret = match &self.secret {
            BackendSecret::Nothing => FrozenSecret::Nothing,
            BackendSecret::Password(p) => FrozenSecret::Password(p.clone()),
            BackendSecret::Md5(m) => FrozenSecret::Md5(m.clone()),
            BackendSecret::Scram(k) => FrozenSecret::Scram {
                iterations: k.iterations,
                salt: k.salt.clone(),
                client_key: k.client_key,
                server_key: k.server_key,
            },
            BackendSecret::NativeStage1(s) => FrozenSecret::NativeStage1(*s),
        };
        FrozenPass { user: self.user.to_string(), secret }
    }

    /// The identity [`PassThrough::freeze`] kept.
    pub fn thaw(frozen: FrozenPass) -> PassThrough {
        let secret = match frozen.secret {
            FrozenSecret::Nothing => BackendSecret::Nothing,
            FrozenSecret::Password(p) => BackendSecret::Password(p),
            FrozenSecret::Md5(m) => BackendSecret::Md5(m),
            FrozenSecret::Scram { iterations, salt, client_key, server_key } => {
                BackendSecret::Scram(ScramKeys { iterations, salt, client_key, server_key })
            }
            FrozenSecret::NativeStage1(s) => BackendSecret::NativeStage1(s),
        };
        PassThrough { user: Rc::from(frozen.user), secret }
    }
}

impl std::fmt::Debug for PassThrough {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PassThrough").field("user", &self.user).finish_non_exhaustive()
    }
}

/// What a protocol's login hands back: the stream, bytes read past the login, connection facts.
pub(super) type LoggedIn = (Stream, Vec<u8>, ConnInfo);

/// The pool and backend a login is for; builds errors that name both.
pub(super) struct Login<'a> {
    pub cfg: &'a PoolConfig,
    pub label: &'a str,
    /// The client a pass-through pool logs in as; `None` on a pool with credentials.
    pub who: Option<&'a PassThrough>,
}

impl<'a> Login<'a> {
    /// The user name the backend connection logs in as.
    pub fn user(&self) -> Result<&str, PoolError> {
        match (self.who, self.cfg.username.as_deref()) {
            (_, Some(user)) => Ok(user),
            (Some(who), None) => Ok(&who.user),
            (None, None) => Err(self.auth_err("the pool has no username and no client to pass through")),
        }
    }

    /// The client's secret when the pool passes clients through, else `None`.
    pub fn passed_secret(&self) -> Option<&'a BackendSecret> {
        self.who.filter(|_| self.cfg.username.is_none()).map(|w| &w.secret)
    }
}

impl Login<'_> {
    /// The backend could not be reached or spoke garbage.
    pub fn connect_err(&self, reason: impl std::fmt::Display) -> PoolError {
        PoolError::Connect { pool: self.cfg.name.clone(), addr: self.label.to_owned(), reason: reason.to_string() }
    }

    /// The backend refused the pool's credentials.
    pub fn auth_err(&self, message: impl std::fmt::Display) -> PoolError {
        PoolError::Auth { pool: self.cfg.name.clone(), addr: self.label.to_owned(), message: message.to_string() }
    }

    /// The backend answered with the other protocol's bytes (the pool has no `protocol`).
    pub fn wrong_protocol(&self, speaks: crate::config::Protocol) -> PoolError {
        PoolError::WrongProtocol { pool: self.cfg.name.clone(), addr: self.label.to_owned(), speaks }
    }

    /// Opens the TCP connection.
    pub async fn dial(&self, addr: SocketAddr, deadline: Instant) -> Result<Stream, PoolError> {
        rt::connect(addr, deadline).await.map_err(|e| self.connect_err(e))
    }

    /// Turns a finished (or timed-out) login into a pooled connection.
    pub fn assemble(
        &self,
        outcome: Result<Result<LoggedIn, PoolError>, Elapsed>,
        addr: SocketAddr,
        backend: usize,
        unit: BudgetUnit,
    ) -> Result<Conn, PoolError> {
        match outcome {
            Ok(Ok((stream, rbuf, info))) => {
                let mut c = Conn::new(stream, addr, backend, info, unit);
                c.rbuf = rbuf;
                c.lease.user = self.who.filter(|_| self.cfg.username.is_none()).map(|w| w.user.clone());
                Ok(c)
            }
            Ok(Err(e)) => Err(e),
            Err(Elapsed) => Err(self.connect_err("connect_timeout elapsed")),
        }
    }
}
