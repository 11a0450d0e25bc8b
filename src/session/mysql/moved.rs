//! A MySQL session moving to a new binary (#40): who the client is, its capabilities and the
//! scramble its login used (a later COM_CHANGE_USER answers it), its settings and database, its
//! prepared statements under the ids it was given, its read-your-writes position and its
//! connection id — written out by the old process and read back by the new one. Only a session
//! between transactions moves; one owning its server connection takes it along, and a bridged
//! one its statements on PostgreSQL pools.

use std::rc::Rc;

use super::prepared::{FrozenStatements, Statements};
use super::state::{FrozenMyState, MyState};
use super::{login, Session};
use crate::config::Protocol;
use crate::protocol::mysql::response::SERVER_STATUS_IN_TRANS;
use crate::session::driver::ClientIo;
use crate::session::handover::{
    freeze_seat, handed, sockets, unpack, AdoptError, Client, FrozenSeat, HandedSession, Moving, Refused, Sockets,
};
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
    stmts: FrozenStatements,
    #[serde(flatten)]
    seat: FrozenSeat,
    /// What a session served by a PostgreSQL pool (or with statements prepared on one) keeps.
    bridge: super::bridged::FrozenBridge,
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

/// The session for the new binary, or `None` when it cannot move. A session holding its
/// server connection between transactions (session mode, a pin) takes it along.
pub(super) async fn freeze(s: &mut Session, client: Client, leftover: Vec<u8>) -> Option<HandedSession> {
    let t = &s.tx;
    let between = t.status & SERVER_STATUS_IN_TRANS == 0 && t.cursor.is_none() && !t.lost && t.deferred.is_none();
    // A statement under way on another protocol's pool is this process's.
    let owned = s.seat.conn.as_ref().is_some_and(|c| !c.broken && s.link.out.is_empty());
    if !between || !s.foreign.cross.is_empty() || (s.seat.conn.is_some() && !owned) {
        return None;
    }
    let client_state = FrozenClient {
        user: s.client.user.clone(),
        home: s.client.home.clone(),
        named_pool: s.client.named_pool.clone(),
        caps: s.client.caps,
        names: s.client.names.clone(),
        scramble: s.client.scramble.to_vec(),
    };
    let (status, lex, state) = (s.tx.status, s.routing.lex.to_bits(), s.state.freeze(owned)?);
    let (stmts, bridge) = (s.stmts.freeze()?, s.foreign.bridge.freeze()?);
    let (seat, backend) = freeze_seat(&mut s.seat, leftover, s.link.pos).await?;
    let frozen = Frozen { client: client_state, status, lex, state, stmts, seat, bridge };
    handed(&frozen, Protocol::MySql, &s.seat, s.io.listener, (client, backend))
}

/// Gives the session the server connection it owns again, with what it set there: `KILL` of
/// the id the client's `CONNECTION_ID()` shows finds the session here too (`Seat::hold`).
fn attach_moved(s: &mut Session, backend: Option<crate::pool::Conn>) {
    if let Some(conn) = backend {
        s.seat.hold(conn);
    }
}

/// The session a former process handed over, served on this core; on an error, the client's
/// socket back, to be told why.
pub(in crate::session) fn adopt(ctx: &Rc<CoreContext>, (handed, tls): Moving) -> Result<Session, Refused> {
    let (frozen, client): (Frozen, _) = unpack(&handed.state, (handed.client, tls))?;
    let Some(pool) = ctx.pools().get(&frozen.client.home).cloned() else {
        return Err((AdoptError::NoPool(frozen.client.home), Some(client)));
    };
    let Ok(scramble) = <[u8; 20]>::try_from(frozen.client.scramble.as_slice()) else {
        return Err((AdoptError::Garbled("the scramble is not 20 bytes".into()), Some(client)));
    };
    let config = ctx.config();
    let max = config.listeners.get(handed.listener).map_or(1 << 26, |l| l.max_message_size);
    let Sockets { stream, backend, pass, ryw, leftover } = sockets(ctx, &pool, client, (frozen.seat, handed.backend))?;
    let held = ctx.client_budget().charge(crate::metrics::BufferKind::Messages);
    let io = ClientIo::new(stream, leftover, handed.listener, max, held);
    let greeted = login::Greeted {
        pool,
        state: MyState::thaw(frozen.state),
        key: handed.key,
        caps: frozen.client.caps,
        names: frozen.client.names,
        scramble,
        // Read only by the bridge's state, which is thawed below.
        version: String::new(),
        status: frozen.status,
        user: frozen.client.user,
        named_pool: frozen.client.named_pool,
        pass,
        causal: None,
    };
    let mut s = Session::new(ctx.clone(), io, greeted);
    s.foreign.bridge = super::bridged::Bridge::thaw(frozen.bridge);
    attach_moved(&mut s, backend);
    s.tx.status = frozen.status;
    s.routing.lex = SessionModes::from_bits(frozen.lex);
    s.seat.ryw = ryw;
    let route_key = |text: &str| Some(ctx.statement_key(text, Protocol::MySql));
    s.stmts = Statements::thaw(frozen.stmts, route_key, ctx.client_budget(), config.limits.client_buffer_budget);
    Ok(s)
}
