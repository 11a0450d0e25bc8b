//! A MySQL session moving to a new binary (#40): who the client is, its capabilities and the
//! scramble its login used (a later COM_CHANGE_USER answers it), its settings and database, its
//! prepared statements under the ids it was given, its read-your-writes position and its
//! connection id — written out by the old process and read back by the new one. Only an idle
//! session moves; one whose state is on a connection or on another protocol's pool stays.

use std::os::fd::OwnedFd;
use std::rc::Rc;

use super::prepared::{FrozenStatements, Statements};
use super::state::{FrozenMyState, MyState};
use super::{login, Session};
use crate::config::Protocol;
use crate::protocol::mysql::response::SERVER_STATUS_IN_TRANS;
use crate::routing::{FrozenRyw, RywState};
use crate::session::driver::ClientIo;
use crate::session::handover::{adopt_conn, handed, sockets, AdoptError, HandedSession, Refused, Sockets};
use crate::session::CoreContext;
use crate::sql::mode::SessionModes;

/// Everything a MySQL session takes along.
#[derive(serde::Serialize, serde::Deserialize)]
struct Frozen {
    client: FrozenClient,
    /// Status flags of the last OK the client got (autocommit).
    status: u16,
    /// [`SessionModes::to_bits`].
    lex: u16,
    state: FrozenMyState,
    ryw: FrozenRyw,
    stmts: FrozenStatements,
    /// Bytes the client sent that no command took yet.
    leftover: Vec<u8>,
    /// The server connection the session owns (session mode, a pin), if it moves with one.
    backend: Option<FrozenConn>,
    /// On a pass-through pool, who its backend connections log in as (#23).
    pass: Option<crate::pool::FrozenPass>,
}

/// Who the client is and how it logged in.
#[derive(serde::Serialize, serde::Deserialize)]
struct FrozenClient {
    user: String,
    /// The pool the client logged in to.
    home: String,
    /// The pool its handshake database named.
    named_pool: Option<String>,
    caps: u64,
    names: Option<String>,
    /// The login's scramble, which a later COM_CHANGE_USER answers.
    scramble: Vec<u8>,
}

/// A server connection moving with its session.
#[derive(serde::Serialize, serde::Deserialize)]
struct FrozenConn {
    addr: std::net::SocketAddr,
    info: crate::pool::MyInfo,
    /// The signature of the settings applied on it.
    settings: u64,
    /// Bytes the server sent that the session did not read yet.
    unread: Vec<u8>,
}

/// The session for the new binary, or `None` when it cannot move. A session holding its
/// server connection between transactions (session mode, a pin) takes it along.
pub(super) async fn freeze(s: &mut Session, client: OwnedFd, leftover: Vec<u8>) -> Option<HandedSession> {
    let t = &s.tx;
    let between = t.status & SERVER_STATUS_IN_TRANS == 0 && t.cursor.is_none() && !t.lost && t.deferred.is_none();
    // A bridged session, or one with statements on another protocol's pool, has state only
    // this process holds.
    let here_only = s.is_bridged() || !s.foreign.cross.is_empty() || s.foreign.bridge.has_statements();
    let owned = s.seat.conn.as_ref().is_some_and(|c| !c.broken && s.link.out.is_empty());
    if !between || here_only || (s.seat.conn.is_some() && !owned) {
        return None;
    }
    let mut frozen = Frozen {
        client: FrozenClient {
            user: s.client.user.clone(),
            home: s.client.home.clone(),
            named_pool: s.client.named_pool.clone(),
            caps: s.client.caps,
            names: s.client.names.clone(),
            scramble: s.client.scramble.to_vec(),
        },
        status: s.tx.status,
        lex: s.routing.lex.to_bits(),
        state: s.state.freeze(owned)?,
        ryw: s.seat.ryw.freeze(crate::rt::now()),
        stmts: s.stmts.freeze()?,
        leftover,
        backend: None,
        pass: s.seat.pass.as_ref().map(|p| p.freeze()),
    };
    let backend = match s.seat.conn.as_mut() {
        Some(conn) => {
            let (fd, frozen_conn) = hand_off_backend(conn, s.link.pos).await?;
            frozen.backend = Some(frozen_conn);
            // Closed here without a word: the server session goes on in the new process.
            s.seat.cancel.slot.set_server(None);
            crate::session::give_back::close(&s.seat.pool, s.seat.conn.take());
            Some(fd)
        }
        None => None,
    };
    handed(&frozen, Protocol::MySql, &s.seat, s.io.listener, (client, backend))
}

/// Takes `conn`'s socket out of this process (see [`crate::rt::hand_off`]), with what it holds
/// past `pos` unread; `None` when it cannot move, and then the connection is marked broken: its
/// parked receive was stopped.
async fn hand_off_backend(conn: &mut crate::pool::Conn, pos: usize) -> Option<(OwnedFd, FrozenConn)> {
    let crate::pool::ConnInfo::MySql(info) = &conn.info else { return None };
    let info = info.clone();
    match crate::rt::hand_off(&mut conn.stream).await {
        Ok((fd, got)) => {
            let mut unread = conn.rbuf.split_off(pos.min(conn.rbuf.len()));
            unread.extend_from_slice(&got);
            Some((fd, FrozenConn { addr: conn.addr, info, settings: conn.settings, unread }))
        }
        Err(e) => {
            tracing::debug!(error = %e, "a session's server connection could not be handed over");
            conn.broken = true;
            None
        }
    }
}

/// The server connection `frozen` describes, on socket `fd`, lent to the session adopting it.
fn thaw_conn(
    pool: &crate::pool::CorePool,
    frozen: FrozenConn,
    fd: OwnedFd,
    user: Option<&str>,
) -> Result<crate::pool::Conn, AdoptError> {
    let info = crate::pool::ConnInfo::MySql(frozen.info);
    adopt_conn(pool, fd, frozen.addr, info, user, (frozen.unread, frozen.settings))
}

/// Gives the session the server connection it owns again.
fn attach_moved(s: &mut Session, backend: Option<crate::pool::Conn>) {
    if let Some(conn) = &backend {
        if let (crate::pool::ConnInfo::MySql(info), crate::config::PoolMode::Session) =
            (&conn.info, s.seat.pool.config.mode)
        {
            // `KILL` of the id the client's `CONNECTION_ID()` shows finds the session here too.
            s.seat.cancel.slot.set_server(Some((conn.addr, info.thread_id)));
        }
    }
    *s.seat.conn = backend;
}

/// The session a former process handed over, served on this core; on an error, the client's
/// socket back, to be told why.
pub(in crate::session) fn adopt(ctx: &Rc<CoreContext>, handed: HandedSession) -> Result<Session, Refused> {
    let frozen: Frozen = match serde_json::from_slice(&handed.state) {
        Ok(f) => f,
        Err(e) => return Err((AdoptError::Garbled(e.to_string()), Some(handed.client))),
    };
    let Some(pool) = ctx.pools().get(&frozen.client.home).cloned() else {
        return Err((AdoptError::NoPool(frozen.client.home), Some(handed.client)));
    };
    let Ok(scramble) = <[u8; 20]>::try_from(frozen.client.scramble.as_slice()) else {
        return Err((AdoptError::Garbled("the scramble is not 20 bytes".into()), Some(handed.client)));
    };
    let config = ctx.config();
    let max = config.listeners.get(handed.listener).map_or(1 << 26, |l| l.max_message_size);
    let Sockets { stream, backend, pass } =
        sockets(handed.client, frozen.pass, frozen.backend, handed.backend, |f, fd, user| {
            thaw_conn(&pool, f, fd, user)
        })?;
    let held = ctx.client_budget().charge(crate::metrics::BufferKind::Messages);
    let io = ClientIo::new(stream, frozen.leftover, handed.listener, max, held);
    let greeted = login::Greeted {
        pool,
        state: MyState::thaw(frozen.state),
        key: handed.key,
        caps: frozen.client.caps,
        names: frozen.client.names,
        scramble,
        // Read only by a bridged session's state, and bridged sessions do not move.
        version: String::new(),
        status: frozen.status,
        user: frozen.client.user,
        named_pool: frozen.client.named_pool,
        pass,
        causal: None,
    };
    let mut s = Session::new(ctx.clone(), io, greeted);
    attach_moved(&mut s, backend);
    s.tx.status = frozen.status;
    s.routing.lex = SessionModes::from_bits(frozen.lex);
    s.seat.ryw = RywState::thaw(ctx.read_your_writes(), &frozen.ryw, crate::rt::now());
    let route_key = |text: &str| Some(ctx.statement_key(text, Protocol::MySql));
    s.stmts = Statements::thaw(frozen.stmts, route_key, ctx.client_budget(), config.limits.client_buffer_budget);
    Ok(s)
}
