//! The MySQL wire of a session (`driver::Wire`): frames client commands for the driver's loop,
//! borrows backend connections as the pool mode says (releasing them when the server's status flags show no open transaction), replays
//! the client's session state on borrowed connections, maps prepared statements onto whichever
//! connection executes them, and relays responses untouched.
//!
//! `dispatch` is a `match` over command codes delegating to one handler each; the response side
//! is the sans-IO `exchange` (what a response must look like next, what to do with each packet)
//! driven by `relay` (the I/O, LOCAL INFILE included), statements in `prepared` and `stmt`, session state
//! in `state`, client login in `login`, `KILL` in `kill`, the warning of a retried statement in
//! `warning`.

mod bridged;
mod causal;
mod detour;
pub mod exchange;
mod idle;
mod kill;
mod large;
mod login;
pub(super) mod moved;
pub(super) use login::login;
mod prepared;
mod readonly;
mod relay;
mod retry;
mod route;
pub mod settle;
mod sqlmode;
mod state;
mod stmt;
mod template;
mod warning;

use std::borrow::Cow;
use std::rc::Rc;

use crate::config::Protocol;
use crate::pool::{Conn, CorePool, PoolError};
use crate::protocol::mysql::command::*;
use crate::protocol::mysql::errcode::{
    ErrorNumber, ER_CLIENT_INTERACTION_TIMEOUT, ER_CON_COUNT_ERROR, ER_NET_PACKETS_OUT_OF_ORDER,
    ER_NET_PACKET_TOO_LARGE, ER_UNKNOWN_COM_ERROR,
};
use crate::protocol::mysql::response::{
    sql_mode_flags, EofPacket, OkPacket, SERVER_SESSION_STATE_CHANGED, SERVER_STATUS_AUTOCOMMIT,
    SERVER_STATUS_IN_TRANS, SERVER_STATUS_IN_TRANS_READONLY,
};
use crate::protocol::mysql::{decode_payload, encode_packets, DecodeError};
use crate::rt::{self, Stream};
use crate::session::client_error::MyClientError;
use crate::session::driver::{self, ClientIo, End, Wire, CLIENT_FLUSH_AT, READ_CHUNK};
use crate::session::engine::after::{Commits, StatementEnd, TxMove};
use crate::session::engine::hold::{Exchange, HoldFacts};
use crate::session::engine::release::{self, Gone, LossFacts, Release, ReleaseFacts, Resends, Unfit};
use crate::session::engine::text::Text;
use crate::session::error::RelayError;
use crate::session::give_back::give_back;
use crate::session::lend::Lent;
use crate::session::loss::{self, Farewell};
use crate::session::placement::{Placed, Seat};
use crate::session::{handover::Client, CoreContext, HandedSession};
use crate::sql::analyze::{session_effects, Effect, Effects, PinReason};
use crate::sql::Dialect;
use relay::{Grammar, Outcome};
use state::MyState;

/// `ER_CONNECTION_KILLED`: the session was ended by an operator's KILL.
pub(super) const ER_CONNECTION_KILLED: ErrorNumber = ErrorNumber { code: 1927, sql_state: *b"70100" };
pub(super) use crate::protocol::mysql::errcode::ER_SERVER_SHUTDOWN;
// A backend lost mid-command: the number clients show for a lost server.
use crate::session::client_error::ER_BACKEND_UNAVAILABLE as ER_BACKEND_LOST;
/// `ER_PARSE_ERROR` for multi-statement text from a client that did not enable them.
const ER_PARSE_ERROR: ErrorNumber = ErrorNumber { code: 1064, sql_state: *b"42000" };

/// The attached backend connection and the session's place in its byte streams.
#[derive(Default)]
struct BackendLink {
    /// Bytes for the backend not written yet.
    out: Vec<u8>,
    /// Read position in the connection's buffer: bytes before it belong to the response being
    /// relayed.
    pos: usize,
    /// Sequence id the next backend packet must carry (`None` until a command set it): a
    /// packet out of sequence means the connection is out of step and is given up.
    seq: Option<u8>,
    /// The `query_timeout` of the statement being relayed.
    deadline: Option<QueryTimer>,
}

/// What ties the session to the other protocol's pools (#24).
struct Foreign {
    /// State of a session served by a PostgreSQL pool, or of a native session's statements
    /// routed to one.
    bridge: bridged::Bridge,
    /// A native session's statements on another protocol's pool; lent while it has any (#39).
    cross: Lent<bridged::cross::Cross>,
}

/// What the next statement's routing reads from the session's past.
struct RoutingFacts {
    /// How the server tokenizes this session's SQL (`sql_mode`, #19): from the SETs the router
    /// reads and the status flags of each answer (see [`Session::follow_server_mode`]).
    lex: crate::sql::mode::SessionModes,
    /// causal: the GTIDs the OK packets of the command being relayed reported (#34).
    commit: causal::CommitGtid,
}

/// Retry of the statement about to run (#11).
#[derive(Default)]
struct RetryContext {
    /// The retry policy of the routing rule that decided it (it replaces the pool's).
    rule: crate::session::engine::retry::RulePolicy,
    /// The warning of a statement that succeeded after a retry.
    notice: warning::RetryNotice,
}

/// Transaction-related facts learned from the server's status flags.
#[derive(Debug, Default, Clone, Copy)]
struct Tx {
    /// Status flags of the last OK/EOF relayed.
    status: u16,
    /// A cursor of client statement `.0` (backend statement `.1`) is open on the attached
    /// backend connection.
    cursor: Option<(u32, u32)>,
    /// The last statement generated an insert id: keep the connection until the next command,
    /// so `SELECT LAST_INSERT_ID()` right after an INSERT reads the right connection.
    sticky: bool,
    /// Statement pooling: the server reported a transaction or autocommit off after a command,
    /// and the connection holding it was closed; the session ends at its next command.
    lost: bool,
    /// A read-only transaction start held back until its first statement (#34).
    deferred: Option<readonly::Deferred>,
}

/// What the client negotiated at login.
struct ClientInfo {
    caps: u64,
    names: Option<String>,
    scramble: [u8; 20],
    multi_statements: bool,
    /// The pool the client's database named (handshake or COM_CHANGE_USER), if it named one.
    named_pool: Option<String>,
    /// The pool the client logged in to (or changed user onto): in session mode, the one whose
    /// server session it owns; a pool it reaches by routing holds none (#35).
    home: String,
    /// The client's user name, for rules matching users.
    user: String,
    /// The sequence id the router's own answer to the command being handled starts at: one past
    /// its last packet's, which is 1 unless the command spanned packets of 16 MiB.
    reply_seq: u8,
}

/// The `query_timeout` of the statement being relayed: when it fires, and whether it fired
/// already (the statement was killed; a backend that stays silent for another `query_timeout`
/// after that is given up).
#[derive(Debug, Clone, Copy)]
pub(super) struct QueryTimer {
    /// When it fires (next).
    pub at: std::time::Instant,
    /// It fired once and the statement was killed.
    pub killed: bool,
}

/// One MySQL client connection.
pub(super) struct Session {
    /// Its pool, connection, read-your-writes and digest timing.
    seat: Seat,
    /// The client's socket and the buffers between it and the session.
    io: ClientIo,
    link: BackendLink,
    state: MyState,
    stmts: prepared::Statements,
    tx: Tx,
    client: ClientInfo,
    foreign: Foreign,
    routing: RoutingFacts,
    retry: RetryContext,
}

impl Wire for Session {
    const CLIENT_KILLS: bool = true;

    /// Takes the next command's payload; malformed framing gets an ERR and ends the session.
    async fn take_unit(&mut self) -> Result<bool, End> {
        let io = &mut self.io;
        let refusal = match decode_payload(&io.buf, io.max_msg) {
            Ok(Some(f)) if f.first_seq != 0 => {
                MyClientError::new(ER_NET_PACKETS_OUT_OF_ORDER, "Got packets out of order")
            }
            Ok(Some(f)) if large::alone(&f, &io.buf) => {
                self.client.reply_seq = f.last_seq.wrapping_add(1);
                io.unit = large::take_alone(&mut io.buf);
                return Ok(true);
            }
            Ok(Some(f)) => {
                self.client.reply_seq = f.last_seq.wrapping_add(1);
                io.unit.clear();
                rt::refill(&mut io.unit);
                io.unit.extend_from_slice(&f.payload);
                let n = f.consumed;
                io.buf.drain(..n);
                return Ok(true);
            }
            Ok(None) => return Ok(false),
            Err(DecodeError::PayloadTooLarge { len, max }) => {
                let msg = format!("Got a packet bigger than 'max_allowed_packet' bytes ({len} > {max})");
                MyClientError::new(ER_NET_PACKET_TOO_LARGE, msg)
            }
            Err(e) => MyClientError::new(ER_NET_PACKETS_OUT_OF_ORDER, e.to_string()),
        };
        // Boxed: in place, a refusal's state would be part of every idle session's wait (#39).
        Box::pin(self.fatal(refusal)).await
    }

    async fn over_budget(&mut self) -> Result<bool, End> {
        let refused = !self.charge_incoming();
        if refused {
            Box::pin(self.refuse_incoming()).await?; // boxed as `take_unit`'s refusal is
        }
        Ok(refused)
    }

    async fn read_client(&mut self) -> Result<Option<std::io::Result<usize>>, End> {
        let idle = self.seat.conn.is_none();
        // In a transaction or with a cursor open the backend is this client's alone, so a
        // silent client may not keep it for ever.
        let limit = release::idle_limit(self.holding(), self.seat.pool.config.timeouts.idle_transaction);
        // Holding its server connection between transactions (session mode, a pin), the
        // session still hears a drain or a hand-over (#40), as an idle one does.
        let between = self.tx.status & SERVER_STATUS_IN_TRANS == 0 && self.tx.cursor.is_none();
        if !idle && limit.is_none() && between {
            let (io, ctx) = (&mut self.io, &self.seat.ctx);
            return io.read_idle(&ctx.drain).await.map(Some);
        }
        driver::read_alone(self, idle, limit).await
    }

    async fn handle(&mut self) -> Result<(), End> {
        // Commands answered without a wait (pipelined COM_STMT_CLOSE, COM_PING) must not hold
        // the core: past the client's share of this turn, the other sessions go first (#33).
        rt::take_share(&mut self.io.share).await;
        let mut payload = std::mem::take(&mut self.io.unit);
        let done = self.dispatch(&payload).await;
        payload.clear(); // so that an idle session hands it to the core's spares
        self.io.unit = payload;
        self.release_command(); // #33
        done?;
        self.io.flush().await
    }

    fn park(&mut self) {
        idle::park(self);
    }

    fn tell_idle_expired(&mut self, ms: u128) {
        let text = format!(
            "The client was disconnected by the router because of inactivity inside a transaction (idle_transaction_timeout {ms} ms)"
        );
        // Unsolicited, read by the client as the answer to its next command, which it sends
        // from sequence id 0.
        MyClientError::new(ER_CLIENT_INTERACTION_TIMEOUT, text).encode(1, &mut self.io.out);
    }

    async fn freeze(&mut self, client: Client, leftover: Vec<u8>) -> Option<HandedSession> {
        moved::freeze(self, client, leftover).await
    }

    /// Ended while a statement ran on another protocol's pool: back to the session's own (#24).
    async fn leave(&mut self) {
        self.unpark();
    }

    /// Said after whatever was queued for the client.
    fn goodbye(&mut self, killed: bool) {
        let (number, message) = if killed {
            (ER_CONNECTION_KILLED, "Connection was killed (KILL of its pool)")
        } else {
            (ER_SERVER_SHUTDOWN, "Server shutdown in progress: the router is draining")
        };
        MyClientError::new(number, message).encode(0, &mut self.io.out);
    }
}

/// Turns away a client over its listener's `max_client_connections`: an ERR packet (1040,
/// "Too many connections") where the greeting would be, as MySQL does, then close.
pub(super) async fn refuse(mut stream: Stream) {
    let mut out = Vec::new();
    MyClientError::new(ER_CON_COUNT_ERROR, "Too many connections").encode_before_greeting(&mut out);
    let _ = rt::write_all(&mut stream, &out).await;
}

/// The server parameters (version, charset) of `pool`, learned from a real backend connection.
pub(super) async fn server_params(pool: &Rc<CorePool>) -> Result<Rc<Vec<(String, String)>>, PoolError> {
    let protocol = pool.config.backend_protocol(Protocol::MySql);
    if pool.server_params().is_none() && pool.passes_through() && protocol == Protocol::MySql {
        return pool.peek_mysql_params(rt::now() + pool.config.timeouts.acquire).await;
    }
    crate::session::placement::learned_params(pool, protocol).await
}

/// A new session's tokenizing mode (#19): the server's global `sql_mode` shows through the
/// status flags of the pool's login (NO_BACKSLASH_ESCAPES; ANSI_QUOTES on MariaDB, assumed on
/// where the server cannot report it). Each connection a statement later runs on is checked
/// against its own flags (see `route::Session::lexed_as_its_replica_reads`).
fn login_modes(pool: &CorePool) -> crate::sql::mode::SessionModes {
    let params = pool.server_params();
    let param = |key: &str| params.as_ref().and_then(|p| p.iter().find(|(k, _)| k == key).map(|(_, v)| v.clone()));
    let status = param("status").and_then(|v| v.parse::<u16>().ok()).unwrap_or(0);
    let (nbe, ansi) = sql_mode_flags(status, &param("server_version").unwrap_or_default());
    let mut mode = crate::sql::mode::LexMode::default();
    mode.follow_mysql_server(nbe, ansi);
    crate::sql::mode::SessionModes::new(mode)
}

impl Session {
    fn new(ctx: Rc<CoreContext>, io: ClientIo, g: login::Greeted) -> Self {
        let bridged = g.pool.config.backend_protocol(Protocol::MySql) == Protocol::Postgres;
        let bridge = bridged::Bridge::new(g.state.db().map(str::to_owned), g.version, g.status);
        // A bridged session's strings read as its greeting said, whatever PostgreSQL's flags (#33).
        let lex = if bridged { bridge.lex_modes() } else { login_modes(&g.pool) };
        let status = if bridged { bridge.status() } else { SERVER_STATUS_AUTOCOMMIT };
        let home = g.pool.config.name.clone();
        Self {
            seat: Seat::new(ctx, g.pool, g.key, g.pass, g.causal),
            io,
            link: BackendLink::default(),
            state: g.state,
            stmts: prepared::Statements::default(),
            tx: Tx { status, ..Tx::default() },
            client: ClientInfo {
                caps: g.caps,
                names: g.names,
                scramble: g.scramble,
                multi_statements: g.caps & crate::protocol::mysql::capability::CLIENT_MULTI_STATEMENTS != 0,
                named_pool: g.named_pool,
                home,
                user: g.user,
                reply_seq: 1,
            },
            foreign: Foreign { bridge, cross: Lent::default() },
            routing: RoutingFacts { lex, commit: causal::CommitGtid::default() },
            retry: RetryContext::default(),
        }
    }

    /// Whether this session is served by a PostgreSQL pool through the bridge.
    fn is_bridged(&self) -> bool {
        self.seat.pool.config.backend_protocol(Protocol::MySql) == Protocol::Postgres
    }

    /// Tells the client why its session ends, in a way the error survives (see
    /// [`ClientIo::fatal`]): the client may still be sending the packet that was refused.
    async fn fatal<T>(&mut self, e: MyClientError) -> Result<T, End> {
        e.encode(self.client.reply_seq, &mut self.io.out);
        Err(self.io.fatal().await)
    }

    async fn dispatch(&mut self, payload: &[u8]) -> Result<(), End> {
        rt::refill(&mut self.io.out);
        rt::refill(&mut self.link.out);
        // An empty command is an unknown one.
        let (code, body) = payload.split_first().map_or((0xFF, &[][..]), |(code, body)| (*code, body));
        if self.is_bridged() {
            return self.bridged_dispatch(code, payload, body).await;
        }
        if self.answer_retry_warning(code, body) {
            return Ok(());
        }
        if self.tx.lost && code != COM_QUIT {
            let text = "statement pooling cannot serve a transaction or autocommit = 0: the last command left one \
                        open, so its connection was closed (rolling it back) and this session ends";
            return self.fatal(MyClientError::new(route::ER_STATEMENT_POOLING, text)).await;
        }
        self.check_held_backend(code).await?;
        if self.tx.sticky && code != COM_QUERY {
            self.tx.sticky = false;
            self.maybe_release().await;
        }
        if let Some(r) = self.cross_stmt_command(code, payload, body).await {
            return r;
        }
        match code {
            COM_QUIT => Err(End::ClientGone),
            COM_PING => self.ok_local(),
            COM_QUERY => self.on_query(payload, body).await,
            COM_INIT_DB => {
                let db = String::from_utf8_lossy(body).into_owned();
                self.forward(payload, Grammar::Single, vec![(0, Effect::Use(db))]).await
            }
            COM_FIELD_LIST => self.forward(payload, Grammar::UntilEof, Vec::new()).await,
            COM_STATISTICS => self.forward(payload, Grammar::Single, Vec::new()).await,
            COM_RESET_CONNECTION => self.on_reset().await,
            COM_CHANGE_USER => self.on_change_user(payload).await,
            COM_SET_OPTION => self.on_set_option(body),
            COM_PROCESS_KILL => {
                let id = body.get(..4).and_then(|b| b.try_into().ok()).map_or(0, u32::from_le_bytes);
                // The server ends the whole connection for COM_PROCESS_KILL (`mysql_kill()`).
                self.kill(id, true).await
            }
            COM_STMT_PREPARE if self.refuses_token_prepare(body) => Ok(()), // #34
            COM_STMT_PREPARE => self.on_prepare(body).await,
            COM_STMT_EXECUTE => self.on_execute(payload).await,
            COM_STMT_SEND_LONG_DATA => self.on_long_data(body),
            COM_STMT_CLOSE => self.on_stmt_close(body).await,
            COM_STMT_RESET => self.on_stmt_reset(payload).await,
            COM_STMT_FETCH => self.on_fetch(payload).await,
            _ => {
                MyClientError::new(ER_UNKNOWN_COM_ERROR, format!("Unknown command {code:#04x}"))
                    .encode(self.client.reply_seq, &mut self.io.out);
                Ok(())
            }
        }
    }

    /// Answers with an OK packet carrying the session's current status.
    fn ok_local(&mut self) -> Result<(), End> {
        let mut payload = Vec::with_capacity(16);
        OkPacket { status: self.tx.status, ..OkPacket::default() }.encode(self.client.caps, &mut payload);
        encode_packets(&payload, self.client.reply_seq, &mut self.io.out);
        Ok(())
    }

    fn on_set_option(&mut self, body: &[u8]) -> Result<(), End> {
        match body {
            [0, 0] => self.client.multi_statements = true,
            [1, 0] => self.client.multi_statements = false,
            _ => {
                MyClientError::new(ER_UNKNOWN_COM_ERROR, "Unknown COM_SET_OPTION value")
                    .encode(self.client.reply_seq, &mut self.io.out);
                return Ok(());
            }
        }
        let mut payload = Vec::with_capacity(8);
        EofPacket { warnings: 0, status: self.tx.status }.encode(&mut payload);
        encode_packets(&payload, self.client.reply_seq, &mut self.io.out);
        Ok(())
    }

    async fn on_query(&mut self, payload: &[u8], body: &[u8]) -> Result<(), End> {
        let sql = query_text(body);
        // Read as a transaction statement once, for all that asks below (#39).
        let text = Text::mysql(&sql);
        if self.on_token_query(&sql) || self.on_deferrable(&text) {
            return Ok(()); // causal token (#22), read-only transaction start (#34)
        }
        if let Some((id, connection)) = kill::parse_kill(&sql) {
            return self.kill(id, connection).await;
        }
        let Effects { list: effects, statements: count } = session_effects(&sql, Dialect::MySql);
        if count > 1 && !self.client.multi_statements {
            let e = MyClientError::new(
                ER_PARSE_ERROR,
                "You have an error in your SQL syntax: multiple statements are not enabled for this connection",
            );
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        }
        // May it run? Asked in `run_command`, once routing chose its pool.
        let grammar = if loads_local_file(&sql) { Grammar::LoadLocal } else { Grammar::Query };
        if let Some(e) = self.statement_pooling_refusal(&sql) {
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        }
        let routed = match self.route_statement(&sql, None, None).await {
            Ok(r) => r,
            Err(e) => {
                e.encode(self.client.reply_seq, &mut self.io.out);
                return Ok(());
            }
        };
        if let Some(pool) = routed.cross {
            let translated = routed.rewritten.is_some();
            return self.cross_query(pool, routed.rewritten.as_deref().unwrap_or(&sql), translated).await;
        }
        self.seat.digest.begin(routed.fingerprint, &sql, rt::now());
        let outcome = match routed.rewritten {
            None if routed.detour => self.detour(payload, grammar).await?,
            None if count == 1 && self.resendable(&routed, grammar, &text) => {
                self.run_command_sent(payload, grammar, effects, true).await? // #40
            }
            None => self.run_command(payload, grammar, effects).await?,
            Some(translated) => {
                let effects = session_effects(&translated, Dialect::MySql).list;
                let payload = [&[COM_QUERY][..], translated.as_bytes()].concat();
                self.run_command(&payload, grammar, effects).await?
            }
        };
        if let Some(o) = outcome {
            self.record(&o);
        }
        Ok(())
    }

    /// Sends a client command to a backend and relays the response, applying `effects` for
    /// the statements that succeeded.
    async fn forward(&mut self, payload: &[u8], grammar: Grammar, effects: Vec<(usize, Effect)>) -> Result<(), End> {
        self.run_command(payload, grammar, effects).await.map(drop)
    }

    /// [`Session::forward`], returning what the response said (`None` when the command never
    /// ran: no backend, or the backend was lost).
    async fn run_command(
        &mut self,
        payload: &[u8],
        grammar: Grammar,
        effects: Vec<(usize, Effect)>,
    ) -> Result<Option<Outcome>, End> {
        self.run_command_sent(payload, grammar, effects, false).await
    }

    /// Whether a statement goes again on a new connection when its own is lost unanswered
    /// (#40): outside a transaction, a lone BEGIN or a query routing proved without effect on a
    /// session nothing holds.
    fn resendable(&self, routed: &route::Routed, grammar: Grammar, text: &Text<'_>) -> bool {
        let without_effect = routed.no_effect && grammar == Grammar::Query && !self.holding().held();
        self.tx.status & SERVER_STATUS_IN_TRANS == 0 && (without_effect || text.is_lone_begin())
    }

    /// [`Session::run_command`]; a `resendable` statement is sent again while its connection is
    /// lost before any of its answer reached the client and no transaction was open, as
    /// [`Resends`] allows: it started nothing that outlives the lost connection (#40).
    async fn run_command_sent(
        &mut self,
        payload: &[u8],
        grammar: Grammar,
        effects: Vec<(usize, Effect)>,
        resendable: bool,
    ) -> Result<Option<Outcome>, End> {
        if grammar == Grammar::LoadLocal && self.refuses_local_infile() {
            return Ok(None);
        }
        self.tx.sticky = false;
        let (mut losses, mark) = (resendable.then(Resends::default), self.io.mark());
        // Sends and relays, retrying a deadlock when the pool opts in (#11).
        let outcome = loop {
            if let Err(e) = self.ensure_backend().await {
                e.encode(self.client.reply_seq, &mut self.io.out);
                return Ok(None);
            }
            self.arm_query_timeout();
            match self.send_and_relay(payload, grammar).await {
                Ok(outcome) => break outcome,
                Err(e) => {
                    let unanswered = self.io.unanswered_since(mark);
                    // #40: a statement without effect lost unanswered goes again.
                    if let Some(losses) = losses.as_mut() {
                        if loss::resendable_lost(self, losses, &e, unanswered) {
                            continue;
                        }
                    }
                    return loss::backend_lost(self, e).await.map(|()| None);
                }
            }
        };
        self.state.apply(&effects, outcome.succeeded);
        self.after_response(&outcome).await;
        if outcome.abandoned {
            return Err(self.end_abandoned().await);
        }
        Ok(Some(outcome))
    }

    fn arm_query_timeout(&mut self) {
        self.link.deadline =
            self.seat.pool.config.timeouts.query.map(|d| QueryTimer { at: rt::now() + d, killed: false });
    }

    /// Bookkeeping after a relayed response: status flags, cursor, release.
    async fn after_response(&mut self, outcome: &Outcome) {
        self.link.deadline = None;
        if let Some(s) = outcome.status {
            // The router's own tracking set the flag; its replies must not claim state.
            self.tx.status = s & !SERVER_SESSION_STATE_CHANGED;
            if let Some(c) = self.seat.conn.as_mut() {
                relay::note_status(c, Some(s));
            }
            if !self.is_bridged() {
                // The server's own flags beat the router's reading of SETs (#19): whatever set
                // sql_mode, the next statement is lexed as the server will read it.
                self.routing.lex.mode = self.server_mode(self.seat.conn.as_ref());
            }
        }
        let off = self.tx.status & SERVER_STATUS_AUTOCOMMIT == 0;
        let after = self.seat.statement_ended(&StatementEnd {
            mode: self.seat.pool.config.mode,
            tx: TxMove { before: false, after: self.tx.status & SERVER_STATUS_IN_TRANS != 0, autocommit_off: off },
            error: outcome.error,
            commits: Commits::Carried { abandoned: outcome.abandoned },
            insert_id: outcome.last_insert_id != 0,
            autocommit_drift: outcome.status.is_some() && off != self.state.autocommit_off(),
        });
        let seen = std::mem::take(&mut self.routing.commit);
        if after.learn_position {
            self.learn_commit(seen, outcome.error && outcome.succeeded == 0).await;
            // causal reads (#22, #34)
        }
        if after.break_connection {
            // What the client believes is open is gone with the connection: the session ends
            // at its next command, whose COMMIT must never be answered OK (#19).
            self.tx.status = SERVER_STATUS_AUTOCOMMIT;
            self.tx.lost = true;
        }
        if let Some(reason) = after.pin {
            // The server's autocommit is not what the router would replay (a procedure changed
            // it, say): the connection cannot be shared, so the session keeps it (#19).
            self.state.apply(&[(0, Effect::Pin(reason))], 0);
        }
        self.tx.sticky = after.sticky;
        self.maybe_release().await;
    }

    /// Before command `code`: the connection the session holds between commands (pinned, in a
    /// transaction, session pooling) may have died while the client was idle, as a PostgreSQL
    /// session sees too (#18, [`loss::lost_while_idle`]). Commands that get no answer leave
    /// that to the next one.
    async fn check_held_backend(&mut self, code: u8) -> Result<(), End> {
        let Some(conn) = self.seat.conn.as_ref() else { return Ok(()) };
        if rt::idle_stream_usable(&conn.stream) || matches!(code, COM_QUIT | COM_STMT_CLOSE | COM_STMT_SEND_LONG_DATA) {
            return Ok(());
        }
        // Answers to earlier commands go first: they are whole, and leave no one mid-result.
        self.io.flush().await?;
        match loss::lost_while_idle(self, RelayError::BackendClosed(None)) {
            None => Ok(()),
            Some(_) => Err(self.io.fatal().await),
        }
    }

    async fn on_reset(&mut self) -> Result<(), End> {
        if self.is_bridged() {
            return self.bridged_reset();
        }
        self.seat.cancel.slot.set_server(None);
        if let Some(mut c) = self.seat.conn.take() {
            // The connection may hold pins or a transaction: it is cleaned before reuse.
            let ok = self.tx.cursor.is_none()
                && stmt::reset_connection(&mut c, &self.seat.pool.config.database).await.is_ok();
            if ok {
                c.settings = 0;
            }
            self.seat.pool.checkin(c, ok);
        }
        self.link.pos = 0;
        self.tx = Tx { status: SERVER_STATUS_AUTOCOMMIT, ..Tx::default() };
        let db = self.state.db().map(str::to_owned);
        self.state.reset(db, self.client.names.clone());
        self.seat.ryw.reset(); // #22: read-your-writes follows the client's reset
        self.stmts.clear();
        self.cross_reset();
        self.ok_local()
    }

    async fn on_change_user(&mut self, payload: &[u8]) -> Result<(), End> {
        let cu = match Command::decode(payload, self.client.caps) {
            Ok(Command::ChangeUser(cu)) => cu,
            _ => return self.fatal(MyClientError::new(ER_UNKNOWN_COM_ERROR, "malformed COM_CHANGE_USER")).await,
        };
        let plugin_ok =
            cu.auth_plugin.is_none_or(|p| p.is_empty() || p == crate::protocol::mysql::auth::MYSQL_NATIVE_PASSWORD);
        let config = self.seat.ctx.config();
        let user = String::from_utf8_lossy(cu.username).into_owned();
        let database = Some(String::from_utf8_lossy(cu.database).into_owned()).filter(|d| !d.is_empty());
        let resolved = login::resolve_pool(&config, database.as_deref());
        let addr = self.io.stream.peer_addr().ok().map(|a| a.ip());
        // A pass-through pool checks the new user against its own stored secret (#23).
        let stored = match &resolved {
            Ok((p, _)) if p.username.is_none() => {
                let pool = (p.name.as_str(), Protocol::MySql);
                Some(crate::session::secret::stored_secret(&self.seat.ctx, &config, pool, &user, addr).await)
            }
            _ => None,
        };
        // #34: the new login's token, as the handshake's; an invalid one refuses it (1231).
        let causal = login::causal_attribute(cu.connect_attrs.as_ref());
        let checked = causal.and_then(|causal| resolved.map(|r| (r, causal))).and_then(|((p, db), causal)| {
            if !plugin_ok {
                return Err(MyClientError::new(
                    crate::protocol::mysql::errcode::ER_ACCESS_DENIED_ERROR,
                    "COM_CHANGE_USER through the router supports mysql_native_password only",
                ));
            }
            // Not counted in sqp_auth_failures_total: the session no longer knows its listener.
            let reason = std::cell::Cell::new(crate::metrics::AuthFailure::WrongPassword);
            let token = (&self.client.scramble[..], cu.auth_response);
            let pass = login::check_password(p, stored.as_ref(), (&user, addr), token, false, &reason)?;
            let target = self.target_pool(&p.name)?;
            Ok((target, db, pass, causal))
        });
        match checked {
            Ok((target, db, pass, causal)) => {
                self.client.user = user;
                self.seat.pass = pass;
                self.client.named_pool = login::named_pool(&config, database.as_deref());
                self.on_reset().await?;
                if let Some(token) = causal {
                    self.seat.ryw.adopt_token(token); // after the reset, which forgets positions
                }
                self.io.out.clear();
                // The client proved the credentials of `target`, as a new connection would.
                self.client.home = target.config.name.clone();
                self.seat.pool = target;
                self.state.reset(db, self.client.names.clone());
                self.ok_local()
            }
            Err(e) => self.fatal(e).await,
        }
    }

    /// The pool a COM_CHANGE_USER moves the session to: its own, or another pool whose backends
    /// speak the same protocol (a bridged session keeps its PostgreSQL pool).
    fn target_pool(&self, name: &str) -> Result<Rc<CorePool>, MyClientError> {
        let same = |p: &Rc<CorePool>| {
            p.config.backend_protocol(Protocol::MySql) == self.seat.pool.config.backend_protocol(Protocol::MySql)
        };
        if name == self.seat.pool.config.name {
            return Ok(self.seat.pool.clone());
        }
        self.seat.ctx.pools().get(name).cloned().filter(|p| !self.is_bridged() && same(p)).ok_or_else(|| {
            MyClientError::new(
                crate::protocol::mysql::errcode::ER_BAD_DB_ERROR,
                format!("COM_CHANGE_USER cannot move this session to pool \"{name}\""),
            )
        })
    }
}

/// A COM_QUERY's text, as `String::from_utf8_lossy` reads it. A client's text is valid UTF-8
/// in practice, which `from_utf8` checks a word at a time; the lossy reading walks it byte by
/// byte, ~300 instructions of a sysbench point select (#39), and now reads only invalid text.
fn query_text(body: &[u8]) -> Cow<'_, str> {
    std::str::from_utf8(body).map_or_else(|_| String::from_utf8_lossy(body), Cow::Borrowed)
}

/// Whether any statement of `sql` is `LOAD DATA|XML ... LOCAL INFILE`.
fn loads_local_file(sql: &str) -> bool {
    use crate::sql::lexer::{Lexer, Token, TokenKind};
    // Asked of every text query: lexing it whole was an eighth of the router's work for a
    // sysbench point select (#39). A word token is a slice of the text, so a text that does
    // not spell `infile` in any case has none.
    if !names_infile(sql.as_bytes()) {
        return false;
    }
    let tokens: Vec<Token<'_>> = Lexer::new(sql, Dialect::MySql).filter(|t| t.kind != TokenKind::Comment).collect();
    crate::sql::split::statements(&tokens).into_iter().any(|stmt| {
        let local = stmt.iter().position(|t| t.is_word("LOCAL"));
        let infile = stmt.iter().position(|t| t.is_word("INFILE"));
        stmt.first().is_some_and(|t| t.is_word("LOAD")) && matches!((local, infile), (Some(l), Some(i)) if l < i)
    })
}

/// The word [`names_infile`] looks for.
const INFILE: [u8; 6] = *b"infile";

/// Whether `infile` occurs in `b`, in any case: only the windows around its `f`s, found with
/// memchr's vector search, are compared.
fn names_infile(b: &[u8]) -> bool {
    let [_, _, f, ..] = INFILE;
    memchr::memchr2_iter(f, f.to_ascii_uppercase(), b).any(|at| {
        let window = at.checked_sub(2).and_then(|start| b.get(start..start + INFILE.len()));
        window.is_some_and(|w| w.eq_ignore_ascii_case(&INFILE))
    })
}

impl Placed for Session {
    type Error = MyClientError;
    const PROTOCOL: Protocol = Protocol::MySql;

    /// Returns the backend to the pool as [`release::release`] says, resetting it when the
    /// session ends with state the next client must not inherit.
    async fn release_backend(&mut self, session_end: bool) {
        self.seat.cancel.slot.set_running(None);
        self.seat.cancel.slot.set_server(None);
        self.seat.cancel.slot.settle().await;
        if self.is_bridged() {
            self.pg_release(session_end);
            return;
        }
        let hold = self.holding();
        let Some(mut conn) = self.seat.conn.take() else { return };
        // A replay only sets the next client's values: the server keeps any other.
        let settings_linger = self.state.signature() != 0;
        let facts = ReleaseFacts {
            settings_linger,
            ..ReleaseFacts::leaving(session_end, self.seat.pool.config.mode, conn.broken)
        };
        let mut verdict = release::release(hold, &facts);
        // #34: the reset drops a GTID the connection owes; one going back as it is must not
        // report it to the next client.
        if matches!(verdict, Release::Return { .. }) && !self.settle_owed_gtid(&mut conn).await {
            verdict = Release::Close(Unfit::Broken);
        }
        let db = &self.seat.pool.config.database;
        let reset = verdict == Release::Reset && stmt::reset_connection(&mut conn, db).await.is_ok();
        give_back(&self.seat.pool, conn, verdict, reset, self.state.signature());
    }

    fn unplaced(message: String) -> MyClientError {
        MyClientError::new(route::ER_NO_POOL, message)
    }

    /// A read-only transaction's start is held back until its first statement runs (#34).
    fn needs_ready(&self) -> bool {
        self.tx.deferred.is_some()
    }

    /// Runs the held-back start (#34).
    async fn ready(&mut self) -> Result<(), MyClientError> {
        self.run_deferred().await
    }

    fn seat_and_user(&mut self) -> (&mut Seat, &str) {
        (&mut self.seat, &self.client.user)
    }

    async fn replay(&mut self, conn: &mut Conn) -> Result<(), MyClientError> {
        stmt::replay(conn, &self.state, &self.seat.pool.config.database).await
    }

    fn signature(&self) -> u64 {
        self.state.signature()
    }

    fn attaching(&mut self) {
        self.link.pos = 0;
    }

    fn parts(&mut self) -> (&mut ClientIo, &mut Seat) {
        (&mut self.io, &mut self.seat)
    }

    fn behind(message: String) -> MyClientError {
        MyClientError::new(causal::ER_NO_CAUGHT_UP_REPLICA, message)
    }

    /// A transaction, a cursor, a response read part-way, session state, or a statement that
    /// generated an insert id (`LAST_INSERT_ID()` reads that connection).
    fn hold_facts(&self, counted: Exchange) -> HoldFacts {
        HoldFacts {
            connected: self.seat.conn.is_some(),
            in_transaction: self.tx.status & SERVER_STATUS_IN_TRANS != 0,
            read_only: self.tx.status & SERVER_STATUS_IN_TRANS_READONLY != 0,
            cursor: self.tx.cursor.is_some(),
            mid_exchange: counted <= Exchange::Open && self.link.pos != 0,
            pin: self.state.pin(),
            sticky: self.tx.sticky,
        }
    }

    fn take_uncounted_pin(&mut self) -> Option<PinReason> {
        self.state.take_uncounted_pin()
    }

    fn loss_facts(&self) -> LossFacts {
        LossFacts {
            mode: self.seat.pool.config.mode,
            home_pool: self.seat.pool.config.name == self.client.home,
            in_transaction: self.tx.status & SERVER_STATUS_IN_TRANS != 0,
            pin: self.state.pin(),
            // Relayed packets of the broken response may have left the client mid-result: it
            // cannot resynchronize.
            out_of_step: !self.io.out.is_empty(),
        }
    }

    fn forget_lost(&mut self) -> Farewell {
        self.link.pos = 0;
        self.link.deadline = None;
        self.tx.status = SERVER_STATUS_AUTOCOMMIT;
        self.tx.cursor = None;
        self.tx.sticky = false;
        Farewell::default()
    }

    /// A session that goes on hears that the statement may not have completed. One that ends
    /// (`gone`) hears what MariaDB sends a client whose connection another one killed,
    /// `ER_CONNECTION_KILLED` (1927, 70100): its server session did end under it, and that is
    /// what its driver would raise on a direct connection. A server's number rather than the
    /// client-side CR_SERVER_LOST (2013), which no server sends and which libmariadb-based
    /// clients report as a malformed packet (#35); the connection closing after it is what
    /// such a client then sees as the lost server.
    fn tell_lost(&mut self, gone: Option<Gone>, _: Farewell) {
        self.io.out.clear();
        let e = match gone {
            None => MyClientError::new(
                ER_BACKEND_LOST,
                "Lost connection to the backend server during query; the statement may not have completed",
            ),
            Some(gone) => MyClientError::new(
                ER_CONNECTION_KILLED,
                format!("Connection was killed: the backend connection was lost{}", gone.wording()),
            ),
        };
        e.encode(self.client.reply_seq, &mut self.io.out);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_infile_is_recognized() {
        assert!(loads_local_file("LOAD DATA LOCAL INFILE '/tmp/x' INTO TABLE t"));
        assert!(loads_local_file("load data low_priority local infile 'x' into table t"));
        assert!(loads_local_file("SELECT 1; /* c */ LOAD XML LOCAL INFILE 'x' INTO TABLE t"));
        assert!(!loads_local_file("LOAD DATA INFILE '/tmp/x' INTO TABLE t"));
        assert!(!loads_local_file("SELECT 'LOAD DATA LOCAL INFILE'"));
        assert!(!loads_local_file("SELECT local, infile FROM t"));
    }

    #[test]
    fn a_query_text_is_the_lossy_reading() {
        let texts: [&[u8]; 7] = [
            b"SELECT c FROM sbtest1 WHERE id=5017",
            "SELECT 'h\u{e9}t\u{e9}', '\u{1f600}'".as_bytes(),
            b"SELECT '\xff'",
            b"SELECT '\xc3'",
            b"SELECT '\xe2\x82'",
            b"\xed\xa0\x80",
            b"",
        ];
        for body in texts {
            let text = query_text(body);
            assert_eq!(text, String::from_utf8_lossy(body), "{body:?}");
            assert_eq!(matches!(text, Cow::Borrowed(_)), std::str::from_utf8(body).is_ok(), "{body:?}");
        }
    }

    #[test]
    fn infile_is_found_in_any_case_anywhere() {
        for t in ["infile", "LOAD DATA LOCAL InFiLe 'x'", "x INFILE", "ffinfile", "a.infileb"] {
            assert!(names_infile(t.as_bytes()), "{t}");
        }
        for t in ["", "f", "fi", "inf", "infil", "nfile", "in file", "SELECT c FROM sbtest1 WHERE id = ?"] {
            assert!(!names_infile(t.as_bytes()), "{t}");
        }
    }
}
