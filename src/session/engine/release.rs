//! When a session's backend connection goes back to its pool, is reset first or is closed; what
//! a session does when that connection breaks under it; and when a silent client is timed. The
//! wires do the I/O (the reset statement, the checkin, the error the client hears); the choice
//! is made here, once for both.

use std::time::Duration;

use super::hold::Hold;
use crate::config::PoolMode;
use crate::sql::analyze::PinReason;

/// Whether a statement that just ended leaves the session's connection to go back to the pool:
/// in transaction and statement pooling whenever nothing holds it; in session pooling only when
/// its backend is marked down and the session's state can follow it elsewhere (health).
pub fn gives_back(mode: PoolMode, hold: Hold, move_off: bool) -> bool {
    !hold.held() && (mode != PoolMode::Session || move_off)
}

/// A transaction (or MySQL's autocommit = 0) that slipped past statement pooling's refusal: its
/// connection is closed, which rolls it back, rather than being handed to another client.
pub fn escaped_statement_pooling(mode: PoolMode, transaction_open: bool) -> bool {
    mode == PoolMode::Statement && transaction_open
}

/// What a wire knows of a connection it is about to give up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReleaseFacts {
    /// The client's session is ending (a later client of the pool will get the connection).
    pub session_end: bool,
    /// The pool's mode.
    pub mode: PoolMode,
    /// The connection failed or was marked for closing.
    pub broken: bool,
    /// The server reports a transaction open on it.
    pub in_transaction: bool,
    /// A server-side cursor is open on it.
    pub cursor: bool,
    /// An exchange on it is unfinished: answers are still due or a response was not read to
    /// its end.
    pub mid_exchange: bool,
    /// Session state pins the client to it.
    pub pinned: bool,
    /// The client changed settings the next client's settings replay would not undo (MySQL:
    /// any; a PostgreSQL replay starts with `RESET ALL`, so none there).
    pub settings_linger: bool,
    /// The wire can reset the connection's session state on this pool's engine.
    pub can_reset: bool,
    /// The client's startup settings were reset on it and not yet put back (PostgreSQL, #18).
    pub settings_stale: bool,
}

/// What becomes of a connection the session gives up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Release {
    /// Back to the pool as it is, carrying `settings`.
    Return(Settings),
    /// Back to the pool after its session state is reset (PostgreSQL `DISCARD ALL`, MySQL
    /// `COM_RESET_CONNECTION`); a reset that fails closes it.
    Reset,
    /// Closed instead, for this reason.
    Close(Unfit),
}

/// Which settings a connection given back carries, so the next client knows whether to replay.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Settings {
    /// The session's own (their signature).
    Session,
    /// Not known to be anyone's: the next client replays its own.
    Unknown,
}

/// Why a connection is closed rather than given back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unfit {
    /// It failed, or was marked to be closed (a rollback that way, a lost exchange).
    Broken,
    /// Something is open on it (a transaction, a cursor, an exchange) that another client
    /// would inherit; closing rolls it back.
    Unfinished,
    /// It carries state the next client must not inherit, and this engine has no reset.
    NoReset,
}

/// The one release rule: an unfinished or broken connection is closed; one a session leaves
/// with state on it (session pooling, pins, lingering settings) is reset, or closed where the
/// engine has no reset; any other goes back as it is.
pub fn release(f: &ReleaseFacts) -> Release {
    if f.broken {
        return Release::Close(Unfit::Broken);
    }
    if f.in_transaction || f.cursor || f.mid_exchange {
        return Release::Close(Unfit::Unfinished);
    }
    let leaves_state = f.session_end && (f.mode == PoolMode::Session || f.pinned || f.settings_linger);
    match (leaves_state, f.can_reset) {
        (true, true) => Release::Reset,
        (true, false) => Release::Close(Unfit::NoReset),
        _ if f.settings_stale => Release::Return(Settings::Unknown),
        _ => Release::Return(Settings::Session),
    }
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

/// Whether a session goes on after losing its backend connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterLoss {
    /// The client is told the statement may not have completed; its next one takes a new
    /// connection.
    GoOn,
    /// The session ends, as a direct connection would, because of what was lost.
    End(Gone),
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

/// The one loss rule, in the order a client is told why.
pub fn after_loss(f: &LossFacts) -> AfterLoss {
    let gone = if f.in_transaction {
        Gone::Transaction
    } else if let Some(pin) = f.pin {
        Gone::State(pin)
    } else if f.mode == PoolMode::Session && f.home_pool {
        Gone::ServerSession
    } else if f.out_of_step {
        Gone::Step
    } else {
        return AfterLoss::GoOn;
    };
    AfterLoss::End(gone)
}

/// How long a client may stay silent holding a connection no one else can use meanwhile: a
/// transaction, a cursor, an unfinished exchange are timed by the pool's
/// `idle_transaction_timeout` (`limit`); a free or merely pinned session is not.
pub fn idle_limit(hold: Hold, limit: Option<Duration>) -> Option<Duration> {
    let timed = matches!(hold, Hold::Tx { .. } | Hold::Cursor | Hold::MidBatch);
    limit.filter(|_| timed)
}
