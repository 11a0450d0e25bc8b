//! A PostgreSQL session moving to a new binary (#40): what the client knows of its session and
//! the router must keep honouring — who it is, its settings and reported parameters, its named
//! and unnamed statements, its read-your-writes position, its cancel key — written out by the
//! old process and read back by the new one, which serves the client as if it had logged in
//! there. Only a session between transactions moves (nothing held for a batch); one that owns
//! its server connection takes it along, and a bridged one its statements on MySQL pools.

use std::rc::Rc;

use super::unnamed::{FrozenUnnamed, Unnamed};
use super::{Arrival, Identity, Session};
use crate::config::Protocol;
use crate::protocol::pg::TransactionStatus;
use crate::session::handover::{
    freeze_seat, handed, sockets, unpack, AdoptError, Client, FrozenSeat, HandedSession, Moving, Refused, Sockets,
};
use crate::session::names;
use crate::session::state::{FrozenState, SessionState};
use crate::session::CoreContext;
use crate::sql::mode::SessionModes;

use super::prepared::Stmt;

/// Everything a PostgreSQL session takes along.
#[derive(serde::Serialize, serde::Deserialize)]
struct Frozen {
    user: String,
    database: String,
    /// The pool the client logged in to.
    home: String,
    /// [`SessionModes::to_bits`].
    lex: u16,
    state: FrozenState,
    stmts: FrozenStatements,
    #[serde(flatten)]
    seat: FrozenSeat,
}

/// The client's statements, wherever they run.
#[derive(serde::Serialize, serde::Deserialize)]
struct FrozenStatements {
    /// Named statements, each after the statements its text runs.
    named: Vec<FrozenStmt>,
    unnamed: FrozenUnnamed,
    /// Statements about the causal token, which the router answers itself (#34).
    tokens: Vec<(String, crate::routing::causal::TokenCommand)>,
    /// Statements prepared on a MySQL pool: the session's own, when it is bridged, or a native
    /// session's routed across (#24).
    bridge: Vec<(String, super::bridged::FrozenPrepared)>,
}

/// A named statement as the client prepared it.
#[derive(serde::Serialize, serde::Deserialize)]
struct FrozenStmt {
    name: String,
    query: String,
    types: Vec<u32>,
    /// The row type the client was told (see `verify`).
    row_type: Option<u64>,
    /// Held until Bind (`late`, #35).
    late: bool,
}

/// The session for the new binary, or `None` when it cannot move. A session holding its
/// server connection between transactions (session mode, a pin) takes it along.
pub(super) async fn freeze(s: &mut Session, client: Client, leftover: Vec<u8>) -> Option<HandedSession> {
    let between = s.progress.tx == TransactionStatus::Idle
        && s.progress.fresh.is_none()
        && s.progress.unseen == super::xact::Unseen::No
        && s.ex.expects().is_empty()
        && s.ex.queued().is_empty()
        && !s.ex.awaiting()
        && s.batch.is_empty();
    let owned = s.seat.conn.as_ref().is_some_and(|c| !c.broken);
    if !between || (s.seat.conn.is_some() && !owned) {
        return None;
    }
    let (user, database, home) =
        (s.identity.user.to_string(), s.identity.database.to_string(), s.identity.home.to_string());
    let (state, lex) = (s.state.freeze(owned)?, s.identity.lex.to_bits());
    let stmts = FrozenStatements {
        named: frozen_stmts(s)?,
        unnamed: s.progress.unnamed.freeze()?,
        tokens: s.progress.tokens.freeze(),
        bridge: s.bridge.freeze()?,
    };
    let (seat, backend) = freeze_seat(&mut s.seat, leftover, 0).await?;
    let frozen = Frozen { user, database, home, lex, state, stmts, seat };
    handed(&frozen, Protocol::Postgres, &s.seat, s.io.listener, (client, backend))
}

/// The named statements, each after those its text runs; `None` when one runs a
/// statement the client no longer has under that name (it could not be made again).
fn frozen_stmts(s: &Session) -> Option<Vec<FrozenStmt>> {
    let mut left: Vec<(&String, &Rc<Stmt>)> = s.stmts.iter().collect();
    let mut done: Vec<&Rc<Stmt>> = Vec::with_capacity(left.len());
    let mut out = Vec::with_capacity(left.len());
    while !left.is_empty() {
        let before = left.len();
        left.retain(|(name, stmt)| {
            let ready = stmt.executes.as_ref().is_none_or(|inner| done.iter().any(|d| Rc::ptr_eq(d, inner)));
            if ready {
                done.push(stmt);
                out.push(FrozenStmt {
                    name: (*name).clone(),
                    query: stmt.query.clone(),
                    types: stmt.sent.1.clone(),
                    row_type: stmt.row_type.get(),
                    late: stmt.late,
                });
            }
            !ready
        });
        if left.len() == before {
            return None;
        }
    }
    Some(out)
}

/// Makes the client's named statements again, as its Parses made them here.
fn thaw_stmts(s: &mut Session, stmts: Vec<FrozenStmt>) {
    let mut held = 0u64;
    for f in stmts {
        let stmt = if f.late {
            let mut stmt = Stmt::new(&f.query, None, &f.types, s.seat.pool.schema_generation());
            stmt.route_key = Some(s.seat.ctx.statement_key(&f.query, Protocol::Postgres));
            stmt.late = true;
            s.progress.late_held = true;
            stmt
        } else {
            s.client_stmt(&f.query, &f.types)
        };
        stmt.row_type.set(f.row_type);
        held = held.saturating_add(f.query.len() as u64 * 3);
        s.stmts.insert(f.name, Rc::new(stmt));
    }
    let budget = s.seat.ctx.config().limits.client_buffer_budget;
    // Over a smaller budget here the statements stay: the client has them.
    let _ = s.progress.stmts_held.resize(held, budget);
}

/// The session a former process handed over, served on this core; on an error, the client's
/// socket back, to be told why.
pub(in crate::session) fn adopt(ctx: &Rc<CoreContext>, (handed, tls): Moving) -> Result<Session, Refused> {
    let (frozen, client): (Frozen, _) = unpack(&handed.state, (handed.client, tls))?;
    let pool = match ctx.pools().get(&frozen.home) {
        Some(pool) => pool.clone(),
        None => match ctx.pool_for_database(&frozen.database) {
            Some(Ok(pool)) => pool,
            _ => return Err((AdoptError::NoPool(frozen.home), Some(client))),
        },
    };
    let config = ctx.config();
    let max = config.listeners.get(handed.listener).map_or(1 << 26, |l| l.max_message_size);
    let Sockets { stream, backend, pass, ryw, leftover } = sockets(ctx, &pool, client, (frozen.seat, handed.backend))?;
    let state = SessionState::thaw(frozen.state, |shown| pool.share_params(shown));
    let identity = Identity {
        user: names::shared(&frozen.user),
        database: names::shared(&frozen.database),
        lex: SessionModes::from_bits(frozen.lex),
        // Its own name: a pool found by the database instead is not the client's home.
        home: frozen.home.into(),
    };
    let arrival = Arrival { identity, pass: pass.clone(), causal: None };
    let mut s = Session::new(ctx.clone(), stream, leftover, pool, state, handed.key, handed.listener, max, arrival);
    *s.seat.conn = backend;
    s.seat.ryw = ryw;
    s.progress.unnamed = Unnamed::thaw(frozen.stmts.unnamed);
    *s.bridge = super::bridged::Bridge::thaw(frozen.stmts.bridge);
    *s.progress.tokens = super::token::TokenStatements::thaw(frozen.stmts.tokens);
    thaw_stmts(&mut s, frozen.stmts.named);
    Ok(s)
}
