//! What opening a backend connection looks like for every protocol: dial within the connect
//! deadline, run the protocol's login, and wrap the result into a pooled [`Conn`] with errors
//! that name the pool and backend.

use std::net::SocketAddr;
use std::time::Instant;

use super::conn::BudgetUnit;
use super::{Conn, ConnInfo, PoolError};
use crate::config::Pool as PoolConfig;
use crate::rt::{self, Elapsed, Stream};

/// What a protocol's login hands back: the stream, bytes read past the login, connection facts.
pub(super) type LoggedIn = (Stream, Vec<u8>, ConnInfo);

/// The pool and backend a login is for; builds errors that name both.
pub(super) struct Login<'a> {
    pub cfg: &'a PoolConfig,
    pub label: &'a str,
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
                Ok(c)
            }
            Ok(Err(e)) => Err(e),
            Err(Elapsed) => Err(self.connect_err("connect_timeout elapsed")),
        }
    }
}
