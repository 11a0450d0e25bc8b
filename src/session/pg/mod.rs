//! The PostgreSQL wire of a session (`driver::Wire`): frames client messages for the driver's
//! loop, borrows backend connections as the pool mode says, rewrites prepared-statement names so
//! statements follow the client across backend connections, and relays responses.
//!
//! `dispatch` is a `match` over message kinds delegating to one handler each; the response side
//! lives in `relay`, statement bookkeeping in `prepared` (on backend connections: `backend_stmts`;
//! SQL `EXECUTE`/`DEALLOCATE` of them: `named`; row types after schema changes: `verify`), client
//! login in `login`. A session whose pool speaks MySQL (`protocol = "mysql"`) is served by
//! `bridged` instead, and so is one statement that routing sends to such a pool (`bridged::cross`).

mod backend_stmts;
mod batch;
mod bridged;
mod copy;
mod database;
mod encoding;
pub mod exchange;
pub(super) mod flight;
mod idle;
mod large;
mod late;
mod login;
pub(super) use login::login;
mod lost;
pub(super) mod moved;
mod named;
mod pipeline;
pub(super) mod prepared;
mod readonly;
mod relay;
mod retry;
mod route;
mod settings;
mod token;
mod unnamed;
mod verify;
mod xact;

use crate::protocol::pg::tag::{backend as server, frontend as client};
use std::rc::Rc;

use crate::config::{Engine, PoolMode, Protocol};
use crate::id::CancelKey;
use crate::pool::{Conn, CorePool, PoolError};
use crate::protocol::pg::{
    backend, decode_raw_frame, frontend, sqlstate, DecodeError, Frame, FrontendMessage, Target, TransactionStatus,
};
use crate::rt::{self, Stream};
use crate::session::client_error::PgClientError;
use crate::session::driver::{self, ClientIo, End, Wire, CLIENT_FLUSH_AT, READ_CHUNK};
use crate::session::engine::hold::{Exchange, Hold, HoldFacts};
use crate::session::engine::release::{self, Gone, LossFacts, Release, ReleaseFacts};
use crate::session::engine::text::Text;
use crate::session::error::RelayError;
use crate::session::give_back::give_back;
use crate::session::lend::Lent;
use crate::session::loss::Farewell;
use crate::session::placement::{Placed, Seat};
use crate::session::state::SessionState;
use crate::session::{handover::Client, CoreContext, HandedSession};
use crate::sql::analyze::PinReason;
use prepared::Expect;

/// One PostgreSQL client connection.
pub(super) struct Session {
    /// The client's socket and the buffers between it and the session.
    io: ClientIo,
    /// Its pool, connection, read-your-writes and digest timing.
    seat: Seat,
    state: SessionState,
    stmts: prepared::Stmts,
    /// The batch queued for the backend, the responses it expects and the statement in flight;
    /// lent while the session works (#39).
    ex: Lent<exchange::Exchange>,
    /// Extended messages held until the batch can be routed as one unit (#19).
    batch: batch::Held,
    /// Where the client's statements stand: transaction, read-your-writes, timing.
    progress: Progress,
    /// Who the client is, for rules matching user and database.
    identity: Identity,
    /// Statements and portals of a session served by a MySQL pool, or of a native session's
    /// statements routed to one (#24); lent while it holds any (#39).
    bridge: Lent<bridged::Bridge>,
}

/// Where the client's statements stand.
struct Progress {
    tx: TransactionStatus,
    /// The open transaction was declared `READ ONLY`: nothing in it changes data.
    read_only_tx: bool,
    /// The BEGIN of the open transaction, while nothing else ran in it (#34).
    fresh: Option<String>,
    /// Bytes of text the client's named statements hold, at least, charged to the process's
    /// client buffer budget (see `statements_refusal`, #33).
    stmts_held: crate::metrics::Charge,
    /// The client's token statements and portals, which the router answers itself (#34); lent
    /// while it has any (#39).
    tokens: Lent<token::TokenStatements>,
    /// The client's unnamed statement, which follows it across connections (#36).
    unnamed: unnamed::Unnamed,
    /// An autocommit read on the primary that may write unseen (#34).
    unseen: xact::Unseen,
    /// A statement that goes again if its connection is lost before it was answered (#40).
    resend: lost::Resend,
    /// Routing proved the last statement it routed without effect (`release::without_effect`).
    no_effect: bool,
    /// A statement held for a late translation (#35) may be among `stmts`; until the first
    /// one, a Bind or Describe does not look there for one (#39: a hash per message).
    late_held: bool,
}

/// The client's user and requested database.
pub(super) struct Identity {
    /// Both this core's shared copies (`session::names`): most clients of a pool give the same.
    pub user: Rc<str>,
    pub database: Rc<str>,
    /// How the server tokenizes this session's SQL (`standard_conforming_strings`, #19).
    pub lex: crate::sql::mode::SessionModes,
    /// The pool the client logged in to: in session mode, the one whose server session it owns.
    pub home: std::sync::Arc<str>,
}

/// What a login hands the session it starts: who the client is, and what the session's
/// [`Seat`] takes at its start, kept apart so an idle session does not carry it (#39).
pub(super) struct Arrival {
    pub identity: Identity,
    /// On a pass-through pool, who the session's backend connections log in as (#23).
    pub pass: Option<Rc<crate::pool::PassThrough>>,
    /// A causal token the client passed as startup parameter `querypilot.causal_token` (#22).
    pub causal: Option<crate::id::Token>,
}

impl Wire for Session {
    async fn take_unit(&mut self) -> Result<bool, End> {
        match self.take_client_frame() {
            Ok(taken) => Ok(taken),
            Err(e) => Err(Box::pin(self.refuse_frame(e)).await),
        }
    }

    /// A causal-token SET too long to hold a token is refused from its head, before the charge.
    /// The refusals are boxed where they are taken, as `read_client`'s rare waits are.
    async fn over_budget(&mut self) -> Result<bool, End> {
        if let Some(len) = self.oversized_token_set() {
            Box::pin(self.refuse_token_set(len)).await?;
            return Ok(true);
        }
        let Some((tag, len)) = self.charge_incoming() else { return Ok(false) };
        Box::pin(self.refuse_incoming(tag, len)).await?;
        Ok(true)
    }

    async fn read_client(&mut self) -> Result<Option<std::io::Result<usize>>, End> {
        // The rarer waits are boxed where they are taken: in place, each would size every idle
        // session's future by its own state (#39).
        if self.unsynced_unsent() {
            if let Some(read) = Box::pin(self.push_unsynced()).await? {
                return Ok(Some(read)); // a batch without Sync waits nowhere (#36)
            }
        }
        let idle = self.seat.conn.is_none() && self.ex.expects().is_empty();
        // Between transactions a held backend may speak unprompted (NOTIFY is delivered only
        // then; notices; its own death), so watch it too. Inside a transaction only a dying
        // backend speaks, and the next statement finds that out: racing a second read there
        // would cost an io_uring cancellation per statement.
        // Mid-exchange (a pipeline past a Flush, an aborted batch, a COPY) the backend's next
        // words answer the client's next message, never an unprompted one.
        let between =
            !idle && self.ex.expects().is_empty() && !self.ex.awaiting() && self.progress.tx == TransactionStatus::Idle;
        // A bridged MySQL connection has nothing unprompted to relay: the session waits for its
        // client as an idle one does, and a drain or a hand-over ends the wait.
        let watch_backend = between && !self.is_bridged();
        // While the backend is held for this client alone (a transaction, a COPY, a batch),
        // a silent client may not keep it for ever.
        let limit = self.idle_transaction_timeout();
        // Mid-batch past a Flush or a pause, the backend's answers are relayed as they come (#36).
        let mid_batch = self.mid_batch();
        if watch_backend || mid_batch {
            return Box::pin(self.wait_held(mid_batch, limit)).await;
        }
        driver::read_alone(self, idle || between, limit).await
    }

    /// Handles the message and then every whole message already buffered behind it (an
    /// extended-protocol batch arrives in one read), under the one boxed future of the loop:
    /// boxing copies the future's full size, once per read rather than once per message.
    async fn handle(&mut self) -> Result<(), End> {
        loop {
            // A client pipelining thousands of messages must not hold the core: past its share
            // of this turn, the other sessions go first (#33). Taken before each message, the
            // clock is read as the first starts, not after the last, which waits for the client.
            rt::take_share(&mut self.io.share).await;
            self.dispatch().await?;
            if !self.take_unit().await? {
                return Ok(());
            }
        }
    }

    /// The client's statements go in slices (#33).
    async fn leave(&mut self) {
        self.cross_unpark();
        prepared::drop_in_slices(std::mem::take(&mut self.stmts)).await;
    }

    /// Said where the session stands: what was queued for the client mid-response is dropped.
    fn goodbye(&mut self, killed: bool) {
        let message = if killed {
            "terminating connection due to administrator command (KILL of its pool)"
        } else {
            "terminating connection: the router is shutting down"
        };
        self.io.out.clear();
        PgClientError::new(sqlstate::ADMIN_SHUTDOWN, message).encode_fatal(&mut self.io.out);
    }

    fn tell_idle_expired(&mut self, ms: u128) {
        let text = format!("terminating connection due to idle_transaction_timeout ({ms} ms)");
        PgClientError::new(sqlstate::IDLE_IN_TRANSACTION_SESSION_TIMEOUT, text).encode_fatal(&mut self.io.out);
    }

    async fn freeze(&mut self, client: Client, leftover: Vec<u8>) -> Option<HandedSession> {
        moved::freeze(self, client, leftover).await
    }

    fn park(&mut self) {
        idle::park(self);
    }

    const CLIENT_KILLS: bool = false;
}

/// Turns away a client over its listener's `max_client_connections` (see [`login::turn_away`]).
pub(super) async fn refuse(ctx: Rc<CoreContext>, stream: Stream, listener: usize) {
    // A refused client's task is its own (`session::spawn`), so its startup read sizes no other.
    login::turn_away(&ctx, stream, listener).await;
}

/// The server parameters a client of `pool` is greeted with, learned from a real backend
/// connection: the server's own, or for a MySQL pool the bridge's set for its version. On a
/// pass-through pool they are those of a connection logged in as `who` (`session_authorization`
/// and `is_superuser` are the user's own), which also proves at login that the backend takes
/// the user's credentials.
pub(super) async fn server_params(
    pool: &Rc<CorePool>,
    who: Option<&crate::pool::PassThrough>,
) -> Result<Rc<Vec<(String, String)>>, PoolError> {
    let protocol = pool.config.backend_protocol(Protocol::Postgres);
    if pool.passes_through() && protocol == Protocol::Postgres {
        let deadline = rt::now() + pool.config.timeouts.acquire;
        let conn = pool.checkout(protocol, who, deadline).await?;
        let params = match conn.info() {
            crate::pool::ConnInfo::Pg(info) => Rc::new(info.params.clone()),
            crate::pool::ConnInfo::MySql(_) => Rc::default(),
        };
        pool.checkin(conn, true);
        return Ok(params);
    }
    let params = crate::session::placement::learned_params(pool, protocol).await?;
    if protocol == Protocol::Postgres {
        return Ok(params);
    }
    let version = params.iter().find(|(k, _)| k == "server_version").map_or("unknown", |(_, v)| v.as_str());
    Ok(Rc::new(crate::bridge::pg_params::pg_parameters(version)))
}

impl Session {
    #[allow(clippy::too_many_arguments)] // one call site: the login hands over everything it learned
    fn new(
        ctx: Rc<CoreContext>,
        client: Stream,
        leftover: Vec<u8>,
        pool: Rc<CorePool>,
        state: SessionState,
        key: CancelKey,
        listener: usize,
        max_msg: usize,
        arrival: Arrival,
    ) -> Self {
        let stmts_held = ctx.client_budget().charge(crate::metrics::BufferKind::Statements);
        let held = ctx.client_budget().charge(crate::metrics::BufferKind::Messages);
        let Arrival { identity, pass, causal } = arrival;
        Self {
            io: ClientIo::new(client, leftover, listener, max_msg, held),
            seat: Seat::new(ctx, pool, key, pass, causal),
            state,
            stmts: prepared::Stmts::default(),
            ex: Lent::default(),
            batch: batch::Held::default(),
            progress: Progress {
                tx: TransactionStatus::Idle,
                read_only_tx: false,
                fresh: None,
                stmts_held,
                tokens: Lent::default(),
                unnamed: unnamed::Unnamed::default(),
                unseen: xact::Unseen::No,
                resend: lost::Resend::Off,
                no_effect: false,
                late_held: false,
            },
            identity,
            bridge: Lent::default(),
        }
    }

    fn max_message(&self) -> usize {
        self.io.max_msg
    }

    /// Moves the next whole client message from `buf` into `unit` (`false`: it has not fully
    /// arrived yet).
    fn take_client_frame(&mut self) -> Result<bool, DecodeError> {
        let max = self.max_message();
        let (rest, f) = loop {
            let Some(rest) = self.io.buf.get(self.io.pos..) else { return Ok(false) };
            let Some(f) = decode_raw_frame(rest, max)? else { return Ok(false) };
            if !self.skips_unread(f.tag()) {
                break (rest, f);
            }
            // Dropped where it lies, never copied or dispatched: past a failed batch's error,
            // each message up to its Sync costs the router its header alone (#33).
            self.io.pos += f.len();
            self.release_message();
        };
        let len = f.len();
        if self.io.pos == 0 && len == rest.len() {
            // A message alone in the buffer becomes the message, not a copy of it: a large one
            // (#33), and most reads of a client awaiting each answer bring one (#39).
            std::mem::swap(&mut self.io.unit, &mut self.io.buf);
            self.io.buf.clear();
            return Ok(true);
        }
        self.io.unit.clear();
        rt::refill(&mut self.io.unit);
        self.io.unit.extend_from_slice(f.bytes());
        self.io.pos += len;
        if self.io.pos == self.io.buf.len() {
            self.io.buf.clear();
            self.io.pos = 0;
        }
        Ok(true)
    }

    /// Ends the session over a client message that cannot be framed (e.g. over the size limit).
    async fn refuse_frame(&mut self, e: DecodeError) -> End {
        self.io.out.clear();
        PgClientError::new(e.sqlstate(), e.to_string()).encode_fatal(&mut self.io.out);
        self.io.fatal().await
    }

    /// The pool's `idle_transaction_timeout` when the session holds its backend inside a
    /// transaction or mid-exchange (COPY, an extended batch awaiting Sync); `None` otherwise.
    fn idle_transaction_timeout(&self) -> Option<std::time::Duration> {
        release::idle_limit(Hold::of(&self.hold_facts(Exchange::Open)), self.seat.pool.config.timeouts.idle_transaction)
    }

    async fn dispatch(&mut self) -> Result<(), End> {
        let Some(&tag) = self.io.unit.first() else { return Ok(()) };
        rt::refill(&mut self.io.out);
        if let Some(buf) = self.ex.idle_buffer() {
            rt::refill(buf); // an allocation-less buffer is empty
        }
        let mut msg = std::mem::take(&mut self.io.unit);
        let res = self.dispatch_msg(tag, &msg).await;
        // Emptied, so that a session going idle hands the buffer to the core's spares rather
        // than keep its last message (a read's worth, when it was taken whole) while idle (#39).
        msg.clear();
        self.io.unit = msg;
        self.release_message(); // #33
        res?;
        if self.streams_batch() {
            self.stream_batch().await?;
        }
        Ok(())
    }

    async fn dispatch_msg(&mut self, tag: u8, raw: &[u8]) -> Result<(), End> {
        if self.skips_unread(tag) {
            return Ok(()); // #33
        }
        let Some(body) = body_of(raw) else {
            return self.fatal(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "malformed message")).await;
        };
        let frame = Frame::new(tag, body);
        let decoded = match FrontendMessage::decode(&frame) {
            Ok(m) => m,
            // A non-UTF-8 client_encoding (#18).
            Err(DecodeError::InvalidUtf8 { .. })
                if matches!(tag, client::QUERY | client::PARSE) && !self.is_bridged() =>
            {
                return if self.ex.refused() { Ok(()) } else { self.on_foreign_text(tag, raw).await };
            }
            Err(e) => return self.fatal(PgClientError::new(e.sqlstate(), e.to_string())).await,
        };
        if self.skips(&decoded) {
            return Ok(());
        }
        if self.is_bridged() {
            return self.bridged_dispatch(decoded).await;
        }
        if self.holds(&decoded) {
            return self.hold(raw).await;
        }
        if !self.batch.is_empty() && decoded != FrontendMessage::Terminate {
            // The held batch ends here: it goes first, routed as one unit (#19).
            self.release_batch().await?;
            if self.skips(&decoded) {
                return Ok(());
            }
        }
        self.handle(decoded, raw).await
    }

    /// Whether the current batch failed and `msg` is dropped until its Sync, as on the server.
    fn skips(&self, msg: &FrontendMessage<'_>) -> bool {
        (self.ex.refused() || self.ex.aborted()) && !matches!(msg, FrontendMessage::Sync | FrontendMessage::Terminate)
    }

    /// Handles one client message of a PostgreSQL-speaking pool.
    async fn handle(&mut self, decoded: FrontendMessage<'_>, raw: &[u8]) -> Result<(), End> {
        if let Some(done) = self.on_cross_message(&decoded).await {
            return done; // a statement routed to a MySQL pool (#24)
        }
        self.release_blocked_database(&decoded).await; // #36
        if let Some(done) = self.on_late_message(&decoded).await {
            return done; // a `$n` in a translation's JSON-array slot (#35)
        }
        match decoded {
            FrontendMessage::Query(sql) => self.on_query(sql, raw).await,
            FrontendMessage::Parse { name, query, param_types } => {
                if let Some(done) = self.on_token_parse(name, query) {
                    return done; // causal token (#34)
                }
                let types: Vec<u32> = param_types.iter().collect();
                self.on_parse(name, query, &types, raw).await
            }
            FrontendMessage::Bind { portal, statement, .. } => match self.on_token_bind(portal, statement) {
                Some(done) => done, // causal token (#34)
                None => self.on_bind(statement, raw).await,
            },
            FrontendMessage::Describe { kind, name } => match self.on_token_describe(kind, name) {
                Some(done) => done,
                None => self.on_describe(kind, name, raw).await,
            },
            FrontendMessage::Execute { portal, .. } => match self.on_token_execute(portal) {
                Some(done) => done,
                None => self.forward_ext(raw, Expect::Execute).await,
            },
            FrontendMessage::Close { kind, name } => match self.on_token_close(kind, name) {
                Some(done) => done,
                None => self.on_close(kind, name, raw).await,
            },
            FrontendMessage::Flush => self.on_flush(raw).await,
            FrontendMessage::Sync => self.on_sync(raw).await,
            FrontendMessage::Terminate => Err(End::ClientGone),
            FrontendMessage::FunctionCall(_) => self.on_simple(raw).await,
            // Outside COPY the server ignores these too.
            FrontendMessage::CopyData(_) | FrontendMessage::CopyDone | FrontendMessage::CopyFail(_) => Ok(()),
            FrontendMessage::Password(_) => {
                self.fatal(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "unexpected password message")).await
            }
        }
    }

    async fn fatal(&mut self, e: PgClientError) -> Result<(), End> {
        e.encode_fatal(&mut self.io.out);
        let _ = self.io.flush().await;
        Err(End::Fatal)
    }

    async fn on_query(&mut self, sql: &str, raw: &[u8]) -> Result<(), End> {
        if let Some(e) = self.statement_pooling_refusal(sql) {
            e.encode(&mut self.io.out);
            backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
            return self.io.flush().await;
        }
        if let Some(done) = self.on_token_query(sql).await {
            return done; // causal token (#22, #34)
        }
        if let Some(done) = self.on_named_query(sql).await {
            return done;
        }
        if let Some(done) = self.on_cross_query(sql).await {
            return done; // routed to a MySQL pool (#24)
        }
        let text = Text::pg(sql);
        let rewritten = match self.route_statement(&text, true, None).await {
            Ok(r) => r,
            Err(e) => {
                e.encode(&mut self.io.out);
                backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
                return self.io.flush().await;
            }
        };
        let Some(sql) = rewritten else {
            self.stage_routed(sql);
            if self.commit_probe_due(sql) {
                return self.on_probed_commit(raw).await; // #34
            }
            if self.progress.tx == TransactionStatus::Idle
                && ((self.progress.no_effect && !self.holding().held()) || text.is_lone_begin())
            {
                return self.on_resendable(raw).await; // #40
            }
            return self.on_simple(raw).await;
        };
        self.state.stage_sql(&sql);
        let mut query = Vec::with_capacity(sql.len() + 6);
        if frontend::encode_query(&sql, &mut query).is_err() {
            return self
                .fatal(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "translated SQL is not encodable"))
                .await;
        }
        self.on_simple(&query).await
    }

    /// A message answered by a full response ending in ReadyForQuery (Query, FunctionCall).
    async fn on_simple(&mut self, raw: &[u8]) -> Result<(), End> {
        if let Err(e) = self.ensure_backend().await {
            e.encode(&mut self.io.out);
            backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
            return self.io.flush().await;
        }
        if raw.first() == Some(&client::QUERY) {
            self.progress.unnamed.dropped(); // as the server does at every simple Query
        }
        self.ex.forward_unanswered(raw);
        self.arm_retry(); // retry (#11)
        self.wrap_unseen_query(raw); // causal reads (#34)
        self.send_backend_answered().await?;
        self.read_unseen_begin().await;
        let relayed = self.relay(relay::Until::Ready).await;
        // A connection lost before the wrapped Query's ReadyForQuery ends the wrap with it: no
        // later response may be read as its probe's.
        self.progress.unseen = xact::Unseen::No;
        relayed
    }

    async fn on_parse(&mut self, name: &str, query: &str, types: &[u32], raw: &[u8]) -> Result<(), End> {
        if let Some(e) = self.statement_pooling_refusal(query) {
            return self.fail_batch(e);
        }
        if name.is_empty() {
            if let Some(done) = self.on_named_parse(query, types).await {
                return done;
            }
            let rewritten = match self.route_statement(&Text::pg(query), true, None).await {
                Ok(r) => r,
                Err(e) => return self.fail_batch(e),
            };
            let Some(sql) = rewritten else {
                self.stage_routed(query);
                return self.forward_unnamed_parse(raw, None).await;
            };
            self.state.stage_sql(&sql);
            let mut parse = Vec::with_capacity(sql.len() + 16);
            if frontend::encode_parse("", &sql, types, &mut parse).is_err() {
                return self
                    .fail_batch(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "translated SQL is not encodable"));
            }
            return self.forward_unnamed_parse(&parse, None).await;
        }
        if let Some(e) = self.named_parse_refusal(name, query) {
            return self.fail_batch(e);
        }
        let stmt = Rc::new(self.client_stmt(query, types));
        self.stmts.insert(name.to_owned(), stmt.clone());
        if self.seat.conn.is_none() {
            // Outside a transaction a named statement needs no connection yet: it is prepared
            // on whichever connection its first Bind or Describe lands on. Holding a connection
            // for a bare Parse would let synchronous clients (libpq's PQprepare) deadlock a
            // small pool. A statement the server rejects reports its error at that first use.
            self.ex.answer_here(server::PARSE_COMPLETE);
            return Ok(());
        }
        if let Some(inner) = &stmt.executes {
            self.prepare_executed(inner);
        }
        if self.has_prepared(stmt.key) {
            self.ex.answer_here(server::PARSE_COMPLETE);
        } else {
            self.prepare_on_backend(&stmt, false);
            self.ex.parsing(name, stmt);
        }
        Ok(())
    }

    async fn on_bind(&mut self, statement: &str, raw: &[u8]) -> Result<(), End> {
        if statement.is_empty() {
            return self.forward_to_unnamed(raw, Expect::Bind).await;
        }
        let Some(stmt) = self.stmts.get(statement).cloned() else {
            // Unknown to the router: let the server report it.
            return self.forward_ext(raw, Expect::Bind).await;
        };
        if let Err(e) = self.route_statement(&Text::pg(&stmt.query), true, stmt.route_key).await {
            return self.fail_batch(e);
        }
        if let Err(e) = self.ensure_backend().await {
            return self.fail_batch(e);
        }
        self.state.stage(stmt.effects().iter().cloned());
        if let Some(inner) = &stmt.executes {
            self.prepare_executed(inner);
        }
        // Asked again only after `check_moved`, which may prepare it: a connection's statements
        // are a list, each look a search and a move to its front.
        let mut prepared = self.has_prepared(stmt.key);
        if !prepared {
            if let Err(e) = self.check_moved(&stmt).await {
                return self.fail_batch(e);
            }
            prepared = self.has_prepared(stmt.key);
        }
        if !prepared {
            self.prepare_on_backend(&stmt, true);
        } else {
            self.mark_healable(&stmt, true);
        }
        let renamed = body_of(raw).map(|body| {
            self.ex.forward_encoded(|out| frontend::encode_bind_renamed(body, &stmt.server_name, out), &[Expect::Bind])
        });
        if !matches!(renamed, Some(Ok(()))) {
            return self.fail_batch(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "malformed Bind"));
        }
        Ok(())
    }

    async fn on_describe(&mut self, kind: Target, name: &str, raw: &[u8]) -> Result<(), End> {
        let expect = match kind {
            Target::Statement => Expect::DescribeStatement,
            Target::Portal => Expect::DescribePortal,
        };
        let stmt = match kind {
            Target::Statement if !name.is_empty() => self.stmts.get(name).cloned(),
            _ => None,
        };
        let Some(stmt) = stmt else {
            if kind == Target::Statement {
                self.ex.describing(None);
                if name.is_empty() {
                    return self.forward_to_unnamed(raw, expect).await;
                }
            }
            return self.forward_ext(raw, expect).await;
        };
        if let Err(e) = self.route_statement(&Text::pg(&stmt.query), false, stmt.route_key).await {
            return self.fail_batch(e);
        }
        if let Err(e) = self.ensure_backend().await {
            return self.fail_batch(e);
        }
        if kind == Target::Statement {
            self.ex.describing(Some(stmt.clone()));
        }
        if let Some(inner) = &stmt.executes {
            self.prepare_executed(inner);
        }
        if !self.has_prepared(stmt.key) {
            self.prepare_on_backend(&stmt, true);
        } else {
            self.mark_healable(&stmt, false);
        }
        let renamed = body_of(raw).map(|body| {
            self.ex.forward_encoded(|out| frontend::encode_describe_renamed(body, &stmt.server_name, out), &[expect])
        });
        if !matches!(renamed, Some(Ok(()))) {
            return self.fail_batch(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "malformed Describe"));
        }
        Ok(())
    }

    /// Queues an extended-protocol message unchanged for the backend.
    async fn forward_ext(&mut self, raw: &[u8], expect: Expect) -> Result<(), End> {
        // Most messages of a batch find the connection its first one took: no checkout's
        // future is made for them (#39).
        if self.seat.conn.is_none() {
            if let Err(e) = self.ensure_backend().await {
                return self.fail_batch(e);
            }
        }
        self.ex.forward(raw, expect);
        Ok(())
    }

    /// Sends everything queued for the backend and marks the session's statement cancellable.
    async fn send_backend(&mut self) -> Result<(), End> {
        self.send_queued(false).await
    }

    /// [`Session::send_backend`] of what ends in a message the backend always answers with
    /// ReadyForQuery (a Query, a Sync), read next: the answer's receive goes in with the send
    /// (`rt::write_for_answer`, #39).
    async fn send_backend_answered(&mut self) -> Result<(), End> {
        self.send_queued(true).await
    }

    async fn send_queued(&mut self, answered: bool) -> Result<(), End> {
        if self.seat.conn.is_none() {
            return Ok(());
        }
        // A cancel still on its way for an earlier statement must not reach this one. The server
        // signals the backend twice for one CancelRequest (its process, then its process group),
        // and a client that does not wait for its cancel connection to close (tokio-postgres)
        // can send its next statement between the two; on a held connection no release waits.
        self.seat.cancel.slot.settle().await;
        let Some(conn) = self.seat.conn.as_mut() else { return Ok(()) };
        self.seat.cancel.slot.running_on(conn, Protocol::Postgres);
        // Until its ReadyForQuery arrives the connection carries this client's response: it must
        // never be handed to anyone else (the client may vanish mid-result).
        self.ex.sent();
        let r = if answered {
            rt::write_for_answer(&mut conn.stream, self.ex.queued()).await
        } else {
            rt::write_all(&mut conn.stream, self.ex.queued()).await
        };
        self.ex.written();
        if let Err(e) = r {
            return self.backend_lost(RelayError::BackendClosed(Some(e))).await;
        }
        Ok(())
    }

    /// Statement pooling's refusal of `sql` ([`release::statement_pooling_refusal`]).
    fn statement_pooling_refusal(&self, sql: &str) -> Option<PgClientError> {
        let text = (self.seat.pool.config.mode == PoolMode::Statement)
            .then(|| release::statement_pooling_refusal(sql, crate::sql::Dialect::Postgres))??;
        Some(PgClientError::new(sqlstate::FEATURE_NOT_SUPPORTED, text))
    }
}

/// The body of `raw`, a whole client message the session framed itself (`take_client_frame`,
/// a held batch's frames): its length was checked there, and is not decoded again (#39).
fn body_of(raw: &[u8]) -> Option<&[u8]> {
    raw.get(large::HEADER..)
}

impl Placed for Session {
    type Error = PgClientError;
    const PROTOCOL: Protocol = Protocol::Postgres;

    /// A transaction, session state, or an extended-protocol exchange in progress (also after a
    /// Flush sent part of a batch: its implicit transaction is open until ReadyForQuery). A
    /// PostgreSQL cursor lives in a transaction or is session state (WITH HOLD), and nothing a
    /// statement leaves is read only from its own connection outside those.
    fn hold_facts(&self, counted: Exchange) -> HoldFacts {
        let ex = &self.ex;
        HoldFacts {
            connected: self.seat.conn.is_some(),
            in_transaction: self.progress.tx != TransactionStatus::Idle,
            read_only: self.progress.read_only_tx,
            mid_exchange: !ex.expects().is_empty()
                || (counted <= Exchange::Open && ex.awaiting())
                || (counted == Exchange::Queued && !ex.queued().is_empty()),
            pin: self.state.pin(),
            ..HoldFacts::default()
        }
    }

    fn take_uncounted_pin(&mut self) -> Option<PinReason> {
        self.state.take_uncounted_pin()
    }

    fn parts(&mut self) -> (&mut ClientIo, &mut Seat) {
        (&mut self.io, &mut self.seat)
    }

    /// Returns the backend to the pool as [`release::release`] says (cleaning it when the
    /// session ends with state on it).
    async fn release_backend(&mut self, session_end: bool) {
        if self.is_bridged() {
            self.my_release(session_end);
            return;
        }
        self.seat.cancel.slot.set_running(None);
        self.seat.cancel.slot.settle().await;
        let hold = Hold::of(&self.hold_facts(Exchange::Open));
        let Some(mut conn) = self.seat.conn.take() else { return };
        // The next client's replay starts with RESET ALL (see `replay`), so no setting
        // lingers; DISCARD ALL is PostgreSQL's (#35): a generic engine's connection goes
        // instead; the client's startup values may be RESET on it and not yet put back (#18).
        let verdict = release::release(
            hold,
            &ReleaseFacts {
                can_reset: self.seat.pool.config.engine != Engine::Generic,
                settings_stale: self.state.restore_pending(),
                ..ReleaseFacts::leaving(session_end, self.seat.pool.config.mode, conn.broken)
            },
        );
        self.ex.settled();
        // DISCARD ALL drops what the next client must not inherit, our prepared statements too.
        let reset = verdict == Release::Reset && relay::discard_all(&mut conn).await.is_ok();
        if reset {
            conn.prepared.clear();
        }
        give_back(&self.seat.pool, conn, verdict, reset, self.state.signature());
    }

    fn unplaced(message: String) -> PgClientError {
        PgClientError::new(sqlstate::SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION, message)
    }

    fn seat_and_user(&mut self) -> (&mut Seat, &str) {
        (&mut self.seat, &self.identity.user)
    }

    fn signature(&self) -> u64 {
        self.state.signature()
    }

    /// Starts with RESET ALL and friends, PostgreSQL's (#35): a generic engine's connections
    /// carry only what clients sent on them.
    async fn replay(&mut self, conn: &mut Conn) -> Result<(), PgClientError> {
        if self.seat.pool.config.engine == Engine::Generic {
            return Ok(());
        }
        relay::run_silently(conn, &self.state.replay_sql()).await
    }

    fn attaching(&mut self) {
        self.progress.unnamed.elsewhere();
    }

    fn loss_facts(&self) -> LossFacts {
        LossFacts {
            mode: self.seat.pool.config.mode,
            home_pool: **self.seat.pool.name() == *self.identity.home,
            in_transaction: self.progress.tx != TransactionStatus::Idle,
            pin: self.state.pin(),
            // An ErrorResponse ends any response: the client reads on to ReadyForQuery.
            out_of_step: false,
        }
    }

    /// The flight's FATAL, when the server sent one before closing: the relay then saw only
    /// the close that followed it.
    fn forget_lost(&mut self) -> Farewell {
        self.ex.lost();
        self.progress.tx = TransactionStatus::Idle;
        self.state.rollback();
        self.ex.forget_flight().map_or_else(Farewell::default, |g| Farewell { cause: Some(g.cause), said: g.said })
    }

    /// A session that ends hears the server's own FATAL when it sent one, else the router's,
    /// naming the cause; one that goes on hears the statement may not have completed.
    fn tell_lost(&mut self, gone: Option<Gone>, farewell: Farewell) {
        let why = farewell.cause.as_ref().and_then(|c| c.cause()).map(|m| format!(" ({m})")).unwrap_or_default();
        let Some(gone) = gone else {
            let text = format!("the backend connection was lost{why}; the statement may not have completed");
            PgClientError::new(sqlstate::CONNECTION_FAILURE, text).encode(&mut self.io.out);
            return backend::encode_ready_for_query(TransactionStatus::Idle, &mut self.io.out);
        };
        match farewell.said {
            Some(frame) => self.io.out.extend_from_slice(&frame),
            None => {
                let text = format!("the backend connection was lost{why}{}", gone.wording());
                PgClientError::new(sqlstate::CONNECTION_FAILURE, text).encode_fatal(&mut self.io.out);
            }
        }
    }
}
