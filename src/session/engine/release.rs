//! When a session's backend connection goes back to its pool, is reset first or is closed; what
//! a session does when that connection breaks under it; when a silent client is timed. The wires
//! do the I/O (the reset, the checkin, the error the client hears); the choice is made here.

use std::time::{Duration, Instant};

use super::effects::setting_on;
use super::hold::Hold;
use crate::config::PoolMode;
use crate::routing::Facts;
use crate::sql::analyze::{opens_transaction, session_effects, Effect, PinReason};
use crate::sql::Dialect;

/// Whether a statement that just ended leaves the session's connection to go back to the pool:
/// in transaction and statement pooling whenever nothing holds it; in session pooling only when
/// its backend is marked down and the session's state can follow it elsewhere (health).
pub fn gives_back(mode: PoolMode, hold: Hold, move_off: bool) -> bool {
    !hold.held() && (mode != PoolMode::Session || move_off)
}

/// What a client of either wire is told when statement pooling cannot serve `sql` (each
/// statement runs on whichever connection is free, so nothing may stay open between
/// statements), or `None` when it can: a statement that opens a transaction (`BEGIN`, `START
/// TRANSACTION`, MySQL's `XA START`) in either dialect, or MySQL's `SET autocommit` to anything
/// but a plain "on" value (or back to the server's default, which may be off). The words are
/// PgBouncer's, and why. What slips past is [`escaped_statement_pooling`].
pub fn statement_pooling_refusal(sql: &str, dialect: Dialect) -> Option<String> {
    const REFUSED: &str = "transaction blocks are not allowed in statement pooling mode";
    if let Some(opener) = opens_transaction(sql, dialect) {
        return Some(format!("{REFUSED}: {opener} opens a transaction"));
    }
    if dialect != Dialect::MySql {
        return None; // PostgreSQL has no autocommit setting
    }
    session_effects(sql, dialect).into_effects().find_map(|e| match e {
        Effect::Set { name, stmt } if name == "autocommit" && !setting_on(&stmt) => {
            Some(format!("{REFUSED}: {stmt} makes every later statement part of a transaction"))
        }
        Effect::Reset(name) if name == "autocommit" => {
            Some(format!("{REFUSED}: SET autocommit = DEFAULT makes every later statement part of a transaction"))
        }
        _ => None,
    })
}

/// A transaction (or MySQL's autocommit = 0) that slipped past statement pooling's refusal: its
/// connection is closed, which rolls it back, rather than being handed to another client.
pub fn escaped_statement_pooling(mode: PoolMode, transaction_open: bool) -> bool {
    mode == PoolMode::Statement && transaction_open
}

/// What a wire knows of a connection it is about to give up, past what holds it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseFacts {
    /// The client's session is ending: a later client of the pool gets the connection.
    pub session_end: bool,
    /// The pool's mode.
    pub mode: PoolMode,
    /// The connection failed or was marked for closing.
    pub broken: bool,
    /// The client changed settings the next client's replay would not undo (MySQL: any; a
    /// PostgreSQL replay starts with `RESET ALL`).
    pub settings_linger: bool,
    /// The wire can reset session state on this pool's engine.
    pub can_reset: bool,
    /// The client's startup settings were reset on it and not yet put back (PostgreSQL, #18).
    pub settings_stale: bool,
}

impl ReleaseFacts {
    /// A connection the session gives up (at its end or not) in a pool of `mode`, on an engine
    /// with a reset, whose settings are the session's and whose next client's replay undoes
    /// them: the facts a wire then corrects where its own differ.
    pub fn leaving(session_end: bool, mode: PoolMode, broken: bool) -> ReleaseFacts {
        ReleaseFacts { session_end, mode, broken, settings_linger: false, can_reset: true, settings_stale: false }
    }
}

/// What becomes of a connection the session gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Back to the pool as it is; `stale`: its settings are not known to be the session's, so
    /// the next client replays its own whatever they are.
    Return {
        /// Its settings are not the session's.
        stale: bool,
    },
    /// Back after its session state is reset (PostgreSQL `DISCARD ALL`, MySQL
    /// `COM_RESET_CONNECTION`); a reset that fails closes it.
    Reset,
    /// Closed instead.
    Close(Unfit),
}

/// Why a connection is closed rather than given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfit {
    /// It failed, or was marked to be closed.
    Broken,
    /// A transaction, cursor or exchange is open on it; closing rolls it back.
    Unfinished,
    /// It carries state the next client must not inherit, and this engine has no reset.
    NoReset,
}

/// The one release rule for a connection `hold` describes: an unfinished or broken connection
/// is closed; one a session leaves with state on it (session pooling, pins, lingering
/// settings) is reset, or closed where the engine has no reset; any other goes back as it is.
pub fn release(hold: Hold, f: &ReleaseFacts) -> Release {
    if f.broken {
        return Release::Close(Unfit::Broken);
    }
    if exclusive(hold) {
        return Release::Close(Unfit::Unfinished);
    }
    let pinned = matches!(hold, Hold::Pin(_));
    match (f.session_end && (f.mode == PoolMode::Session || pinned || f.settings_linger), f.can_reset) {
        (true, true) => Release::Reset,
        (true, false) => Release::Close(Unfit::NoReset),
        _ => Release::Return { stale: f.settings_stale },
    }
}

/// Whether `hold` keeps the connection from anyone else until the client acts: a transaction,
/// a cursor, an unfinished exchange. Pins and stickiness only keep the session where it is.
fn exclusive(hold: Hold) -> bool {
    matches!(hold, Hold::Tx { .. } | Hold::Cursor | Hold::MidBatch)
}

/// What a wire knows of its session when the backend connection broke under it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LossFacts {
    /// The pool's mode.
    pub mode: PoolMode,
    /// The pool is the one the client logged in to; a pool it reached by routing (a translation
    /// onto an analytics engine, #35) holds no server session of its own.
    pub home_pool: bool,
    /// The server had a transaction open for the client (it rolled back).
    pub in_transaction: bool,
    /// Session state that died with the connection.
    pub pin: Option<PinReason>,
    /// The client got part of a response and cannot find its way back to a command boundary.
    pub out_of_step: bool,
}

/// What a session lost with its connection that it cannot go on without. Going on would run the
/// client's next statements without it: a COMMIT answered with success, a role gone (#18).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Gone {
    /// An open transaction, rolled back.
    Transaction,
    /// Session state the connection held.
    State(PinReason),
    /// A session-mode client's own server session (#18).
    ServerSession,
    /// The client's place in the response.
    Step,
}

impl Gone {
    /// What died, as both wires tell it after "the backend connection was lost".
    pub fn wording(self) -> String {
        match self {
            Gone::Transaction => " inside a transaction; the transaction was rolled back".to_owned(),
            Gone::State(pin) => format!("; the session's state ({}) is gone", pin.as_str()),
            Gone::ServerSession => "; the server session is gone".to_owned(),
            Gone::Step => "; the response was cut off".to_owned(),
        }
    }
}

/// The one loss rule: what ends the session, in the order a client is told why; `None`: the
/// client hears the statement may not have completed, and its next one takes a new connection.
pub fn after_loss(f: &LossFacts) -> Option<Gone> {
    if f.in_transaction {
        Some(Gone::Transaction)
    } else if let Some(pin) = f.pin {
        Some(Gone::State(pin))
    } else if f.mode == PoolMode::Session && f.home_pool {
        Some(Gone::ServerSession)
    } else {
        f.out_of_step.then_some(Gone::Step)
    }
}

/// How many of a resendable statement's lost connections count ([`Resends`]) before the last is
/// the client's error (#40).
pub const RESEND_ATTEMPTS: u8 = 3;

/// Whether a statement outside any transaction goes again on another connection when its own is
/// lost unanswered (#40), by the facts routing proved of it (`facts`, of the text sent: `None`
/// when a translation replaced it): one statement that routing found fit for a replica (a read
/// without row locks, volatile or unknown functions, session effects or affinities), so running
/// it twice changes nothing. A lone `BEGIN` is the other such statement; the wires know it by
/// its text.
pub fn without_effect(facts: Option<&Facts>) -> bool {
    facts.is_some_and(|f| f.replica_eligible() && f.statement_count == 1)
}

/// Whether a statement without effect ([`without_effect`], or a lone `BEGIN`) whose connection
/// was lost goes again on a new one (#40): only when none of its answer reached the client
/// (`unanswered`), so nothing it started outlived the connection, and the session goes on
/// without that connection ([`after_loss`] is `None`): a transaction, pinned state or a
/// session-mode client's server session that died with it would be hidden by a statement that
/// succeeded elsewhere.
pub fn resends_unanswered(f: &LossFacts, unanswered: bool) -> bool {
    unanswered && after_loss(f).is_none()
}

/// A resendable statement's lost connections (#40), counted against [`RESEND_ATTEMPTS`]. The
/// first loss counts, and so does that of a connection opened or given back to the pool after it;
/// a connection that sat idle in the pool since before the first loss does not: whatever broke
/// the first (a server stopping) broke it too, only its close had not reached the router when it
/// was lent. A server shutting down closes all its connections within a few milliseconds, and a
/// statement racing that can meet several of them in a row. Such connections only get fewer (any
/// other is given back later), so the sends stay bounded.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Resends {
    /// Losses counted against [`RESEND_ATTEMPTS`].
    counted: u8,
    /// Losses of connections idle since before the first.
    exposed: u32,
    /// When the first loss was seen.
    first: Option<Instant>,
}

/// Why a statement whose connection was lost is not sent again: the client hears of the loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResendKept {
    /// Part of its answer reached the client.
    Answered,
    /// The session cannot go on without the lost connection ([`after_loss`]).
    Gone(Gone),
    /// [`RESEND_ATTEMPTS`] losses counted.
    Exhausted,
}

impl Resends {
    /// The connection the statement was last sent on was lost at `now`, facts `f`, `unanswered`
    /// as for [`resends_unanswered`]; it was given back to the pool or opened at `idle_since`
    /// (`None`: not known, counted). `Ok`: the statement goes again on another connection.
    pub fn lost(
        &mut self,
        f: &LossFacts,
        unanswered: bool,
        idle_since: Option<Instant>,
        now: Instant,
    ) -> Result<(), ResendKept> {
        if !resends_unanswered(f, unanswered) {
            return Err(after_loss(f).map_or(ResendKept::Answered, ResendKept::Gone));
        }
        let exposed = matches!((self.first, idle_since), (Some(first), Some(since)) if since <= first);
        self.first.get_or_insert(now);
        if exposed {
            self.exposed = self.exposed.saturating_add(1);
        } else {
            self.counted = self.counted.saturating_add(1);
        }
        if self.counted >= RESEND_ATTEMPTS {
            Err(ResendKept::Exhausted)
        } else {
            Ok(())
        }
    }
}

/// How long a client may stay silent while `hold` keeps the connection from everyone else: the
/// pool's `idle_transaction_timeout` (`limit`); a free or merely pinned session is not timed.
pub fn idle_limit(hold: Hold, limit: Option<Duration>) -> Option<Duration> {
    limit.filter(|_| exclusive(hold))
}
