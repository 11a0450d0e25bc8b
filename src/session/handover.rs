//! Sessions moving to a new binary (#40): while the router hands over, an idle session gives its
//! client connection and what it knows of the client to the hand-over sink instead of saying
//! goodbye; the new process adopts each one as a session that is already logged in.
//!
//! The state is opaque outside the session: the hand-over transport (`crate::handover`) carries
//! its bytes and the client's descriptor, and the format version it checks covers both.

use std::os::fd::OwnedFd;
use std::rc::Rc;

use crate::config::Protocol;
use crate::id::CancelKey;
use crate::pool::{Conn, FrozenConn, PassThrough};
use crate::routing::RywState;
use crate::rt::{FrozenTls, Stream};
use crate::session::placement::Seat;
use crate::session::{ClientSlot, CoreContext};

/// The most a session's state may take: a session holding more (a client that prepared
/// megabytes of statements, or sent a large message the handover caught half-read) stays to end
/// here rather than fail the frame that would carry it, and with it the hand-over of the
/// sessions after it.
pub const STATE_MAX: usize = 4 << 20;

/// One client connection on its way to the new process.
pub struct HandedSession {
    /// The protocol its listener speaks.
    pub protocol: Protocol,
    /// Its listener, by config index.
    pub listener: usize,
    /// The cancel key (PostgreSQL BackendKeyData, MySQL connection id) the client was given: the
    /// new process keeps honouring it.
    pub key: CancelKey,
    /// What the session knows of its client, as the session encodes it (with the client's TLS
    /// session, if it is encrypted).
    pub state: Vec<u8>,
    /// The client's socket.
    pub client: OwnedFd,
    /// The server connection a session-mode or pinned session owns, which moves with it.
    pub backend: Option<OwnedFd>,
}

/// A handed-over client's socket, with its TLS session if it is encrypted.
pub(super) type Client = (OwnedFd, Option<Box<FrozenTls>>);

/// A session on its way in, with its client's TLS session taken out of its state.
pub(super) type Moving = (HandedSession, Option<Box<FrozenTls>>);

/// What travels as a session's state: the wire's own, and its client's TLS session apart, so
/// that a session the new process cannot serve is still told why in a record its client reads.
#[derive(serde::Serialize)]
struct Packed<'a, T> {
    tls: Option<&'a FrozenTls>,
    session: &'a T,
}

#[derive(serde::Deserialize)]
struct Unpacked<T> {
    tls: Option<Box<FrozenTls>>,
    session: T,
}

/// The session `frozen` describes, as the new binary gets it, with the client's socket and
/// the server connection's it owns, if any.
pub(super) fn handed<T: serde::Serialize>(
    frozen: &T,
    protocol: Protocol,
    seat: &super::placement::Seat,
    listener: u16,
    sockets: (Client, Option<OwnedFd>),
) -> Option<HandedSession> {
    let ((client, tls), backend) = sockets;
    let state = serde_json::to_vec(&Packed { tls: tls.as_deref(), session: frozen }).ok()?;
    Some(HandedSession { protocol, listener: usize::from(listener), key: seat.cancel.key, state, client, backend })
}

/// The wire's part of a handed-over session's `state`, with its `client` passed through (back
/// with the error, to be told why, when the state does not decode).
pub(super) fn unpack<T: serde::de::DeserializeOwned>(state: &[u8], client: Client) -> Result<(T, Client), Refused> {
    match serde_json::from_slice::<Unpacked<T>>(state) {
        Ok(u) => Ok((u.session, client)),
        Err(e) => Err((AdoptError::Garbled(e.to_string()), Some(client))),
    }
}

/// The client's TLS session in a handed-over session's `state`, if it was encrypted (`None`
/// too when the state does not decode: the client is then closed without a word).
fn client_tls(state: &[u8]) -> Option<Box<FrozenTls>> {
    serde_json::from_slice::<Unpacked<serde::de::IgnoredAny>>(state).ok().and_then(|u| u.tls)
}

/// Where a core's sessions go while the router hands over: called once per session that moves.
pub type HandOverSink = Box<dyn Fn(HandedSession)>;

/// Starts handing this core's sessions over: every idle session moves to `sink` (a busy one
/// moves once its transaction ended, one owning its server connection takes it along); a
/// session that cannot move (one owning a connection of the other protocol, say) ends as a
/// drain ends it. Sets the core's drain: new clients are no longer accepted here.
pub fn hand_over(ctx: &Rc<CoreContext>, sink: HandOverSink) {
    ctx.set_hand_over(sink);
    ctx.drain.set();
}

/// Why a handed-over session could not be served here.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    /// Its state does not decode (another format, or damaged on the way).
    #[error("the session's state does not decode: {0}")]
    Garbled(String),
    /// The configuration here has no pool by the name the session logged in to.
    #[error("no pool \"{0}\" in this router's configuration")]
    NoPool(String),
    /// Its listener is not in this configuration, or speaks another protocol here.
    #[error("listener {0} of the former process is not a listener of that protocol here")]
    Listener(usize),
    /// The server connection it owns is on a backend this configuration does not list.
    #[error("its server connection is to {0}, which this router's pool does not list")]
    Backend(std::net::SocketAddr),
    /// The socket could not join this core's loop.
    #[error("cannot serve the client's socket: {0}")]
    Socket(std::io::Error),
}

/// What every moving session takes along past its wire's own state, flattened into it.
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct FrozenSeat {
    ryw: crate::routing::FrozenRyw,
    /// Bytes the client sent that nothing took yet.
    leftover: Vec<u8>,
    /// The server connection the session owns (session mode, a pin), if it moves with one.
    backend: Option<FrozenConn>,
    /// On a pass-through pool, who its backend connections log in as (#23).
    pass: Option<crate::pool::FrozenPass>,
}

/// Freezes what `seat` holds, last (nothing may refuse the move after its connection left):
/// the server connection it owns moves with what its read buffer holds from `from` on, and is
/// closed here without a word, as its server session goes on in the new process.
pub(super) async fn freeze_seat(
    seat: &mut Seat,
    leftover: Vec<u8>,
    from: usize,
) -> Option<(FrozenSeat, Option<OwnedFd>)> {
    let (ryw, pass) = (seat.ryw.freeze(crate::rt::now()), seat.pass.as_ref().map(|p| p.freeze()));
    let Some(conn) = seat.conn.as_mut() else { return Some((FrozenSeat { ryw, leftover, backend: None, pass }, None)) };
    let (fd, backend) = crate::pool::freeze_conn(conn, from).await?;
    seat.cancel.slot.set_server(None);
    super::give_back::close(&seat.pool, seat.conn.take());
    Some((FrozenSeat { ryw, leftover, backend: Some(backend), pass }, Some(fd)))
}

/// What a moved session's wire is built on: the client's socket joined to this core's loop,
/// the server connection it owns lent again from `pool` (from its state and socket, both or
/// neither: with one alone its server session is gone, and serving the client as if it had
/// none would change what its statements see) and its pass-through identity; on an error, the
/// client's socket back, to be told why.
pub(super) fn sockets(
    ctx: &CoreContext,
    pool: &crate::pool::CorePool,
    client: Client,
    (frozen, fd): (FrozenSeat, Option<OwnedFd>),
) -> Result<Sockets, Refused> {
    let pass = frozen.pass.map(|p| Rc::new(PassThrough::thaw(p)));
    let user = pass.as_ref().map(|p| &*p.user);
    let backend = match (frozen.backend, fd) {
        (Some(f), Some(fd)) => match thaw_conn(pool, f, fd, user) {
            Ok(conn) => Some(conn),
            Err(e) => return Err((e, Some(client))),
        },
        (None, None) => None,
        _ => {
            let e = AdoptError::Garbled("a server connection without its state, or the other way".into());
            return Err((e, Some(client)));
        }
    };
    let stream = Stream::adopt(client.0, client.1).map_err(|e| (AdoptError::Socket(e), None))?;
    let ryw = RywState::thaw(ctx.read_your_writes(), &frozen.ryw, crate::rt::now());
    Ok(Sockets { stream, backend, pass, ryw, leftover: frozen.leftover })
}

/// The server connection `frozen` describes, on socket `fd`, lent to the session adopting it
/// (over its backend's budget if need be).
fn thaw_conn(
    pool: &crate::pool::CorePool,
    mut frozen: FrozenConn,
    fd: OwnedFd,
    user: Option<&str>,
) -> Result<Conn, AdoptError> {
    let stream = frozen.join(fd).map_err(AdoptError::Socket)?;
    let (addr, info, rest) = frozen.into_parts();
    let mut conn = pool.adopt(stream, addr, info, user).ok_or(AdoptError::Backend(addr))?;
    rest.apply(&mut conn);
    Ok(conn)
}

/// Why a handed-over session is not served, with the client's socket when it is still there to
/// be told.
pub(super) type Refused = (AdoptError, Option<Client>);

/// What [`sockets`] makes.
pub(super) struct Sockets {
    pub stream: Stream,
    pub backend: Option<Conn>,
    pub pass: Option<Rc<PassThrough>>,
    pub ryw: RywState,
    pub leftover: Vec<u8>,
}

/// Serves a client a former process handed over, as the session it was, on this core; without
/// a `slot` (the listener is full here) or when the session cannot be served here, the client
/// is told why and closed.
pub fn adopt(ctx: &Rc<CoreContext>, handed: HandedSession, slot: Option<ClientSlot>) {
    let protocol = ctx.config().listeners.get(handed.listener).map(|l| l.protocol);
    let listener = handed.listener;
    let tls = client_tls(&handed.state);
    let fut = {
        let ctx = ctx.clone();
        async move {
            ctx.counters.session_opened();
            let mut open = super::OpenSession(ctx.clone(), None);
            let refusal = match (protocol, slot) {
                (Some(p), _) if p != handed.protocol => AdoptError::Listener(listener),
                (None, _) => AdoptError::Listener(listener),
                (Some(_), None) => {
                    ctx.counters.client_refused(listener);
                    return refuse(handed.protocol, (handed.client, tls), "sorry, too many clients already").await;
                }
                (Some(p), Some(slot)) => match adopt_wire(&ctx, p, handed, tls) {
                    Ok(session) => {
                        ctx.counters.client_connected(listener);
                        open.1 = Some((listener, slot));
                        return match session {
                            Adopted::Pg(s) => super::driver::serve(Box::pin(std::future::ready(Some(s)))).await,
                            Adopted::MySql(s) => super::driver::serve(Box::pin(std::future::ready(Some(s)))).await,
                        };
                    }
                    Err((e, Some(client))) => {
                        tracing::warn!(error = %e, "a handed-over session cannot be served here");
                        return refuse(p, client, &e.to_string()).await;
                    }
                    Err((e, None)) => {
                        tracing::warn!(error = %e, "a handed-over session cannot be served here");
                        return;
                    }
                },
            };
            tracing::warn!(error = %refusal, "a handed-over session cannot be served here");
            refuse(handed.protocol, (handed.client, tls), &refusal.to_string()).await;
        }
    };
    super::spawn_session(ctx, fut);
}

/// The wire's session for `handed`, served by `serve`.
enum Adopted {
    Pg(super::pg::Session),
    MySql(super::mysql::Session),
}

fn adopt_wire(
    ctx: &Rc<CoreContext>,
    protocol: Protocol,
    handed: HandedSession,
    tls: Option<Box<FrozenTls>>,
) -> Result<Adopted, Refused> {
    match protocol {
        Protocol::Postgres => super::pg::moved::adopt(ctx, (handed, tls)).map(Adopted::Pg),
        Protocol::MySql => super::mysql::moved::adopt(ctx, (handed, tls)).map(Adopted::MySql),
    }
}

/// Tells a handed-over client why it is not served, in its protocol, and closes it.
async fn refuse(protocol: Protocol, (client, tls): Client, why: &str) {
    let Ok(mut stream) = crate::rt::Stream::adopt(client, tls) else { return };
    let mut out = Vec::new();
    match protocol {
        Protocol::Postgres => {
            let text = format!("the router restarted and cannot serve this session: {why}");
            super::client_error::PgClientError::new(crate::protocol::pg::sqlstate::ADMIN_SHUTDOWN, text)
                .encode_fatal(&mut out);
        }
        Protocol::MySql => {
            let text = format!("the router restarted and cannot serve this session: {why}");
            super::client_error::MyClientError::new(super::mysql::ER_SERVER_SHUTDOWN, &text).encode(0, &mut out);
        }
    }
    let _ = crate::rt::write_all(&mut stream, &out).await;
}
