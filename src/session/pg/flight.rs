//! Bookkeeping of the statement in flight on a backend connection: a FATAL the backend sent
//! before going away, whether `query_timeout` fired, and what is needed to heal a stale plan.
//!
//! Healing: after a schema change, a statement the router prepared on a backend earlier fails
//! at Describe or Bind with `0A000 cached plan must not change result type`. Outside an
//! explicit transaction, and when that message is the first thing of its Sync batch to run,
//! nothing of the batch took effect, so the router prepares the statement on that connection
//! again under a fresh server name (#18: other clients sharing the stale server statement
//! learned its old row type, and must keep getting the server's error for it) and sends the
//! batch again, renamed, once. A Bind is healed only when the
//! batch also describes the portal before executing it (libpq does, for every execution):
//! otherwise the client would decode new rows with the row description it learned before the
//! change, so it gets the error, as from the server itself. Inside a transaction the error
//! reaches the client unchanged: the transaction is aborted and only the client can decide.

use crate::protocol::pg::tag::{backend as server, field};
use std::rc::Rc;

use super::prepared::{Expect, Stmt};
use super::retry::RetryBatch;
use crate::protocol::pg::{sqlstate, BackendMessage, Frame};
use crate::session::engine::retry::RulePolicy;
use crate::session::error::RelayError;

/// Largest batch kept for a heal retry; bigger batches (large parameters) are not retried.
const REPLAY_MAX: usize = 64 * 1024;

/// Largest kept batch whose allocations the next one reuses: a few messages with small
/// parameters; a bigger one is freed, not carried by the exchange's box on its shelf.
const SPARE_MAX: usize = 1024;

/// The server's text for a prepared statement whose result type changed.
const STALE_PLAN: &str = "cached plan must not change result type";

/// Why a backend connection went away or was given up.
#[derive(Debug)]
pub struct Gone {
    /// The cause, which the router's own error names.
    pub cause: RelayError,
    /// The server's own FATAL ErrorResponse, whole, when it sent one: a session that ends with
    /// its connection relays it, so the client sees what a direct connection shows (#36).
    pub said: Option<Vec<u8>>,
}

impl Gone {
    /// The server's FATAL `frame` (an ErrorResponse), whose fields are `cause`.
    pub fn said(cause: RelayError, frame: &[u8]) -> Self {
        Self { cause, said: Some(frame.to_vec()) }
    }
}

impl From<RelayError> for Gone {
    fn from(cause: RelayError) -> Self {
        Self { cause, said: None }
    }
}

/// Where, in the batch being assembled, a healable Bind starts.
#[derive(Debug, Clone)]
pub struct HealMark {
    /// Offset of the Bind in the bytes queued for the backend.
    pub bout: usize,
    /// Offset of its expectation in the expectation queue.
    pub expect: usize,
    /// The router statement the message uses.
    pub stmt: Rc<Stmt>,
    /// A Bind (rather than a Describe of the statement): needs a Describe of the portal.
    pub bind: bool,
}

/// A sent batch that can be sent again once its statement is re-prepared.
#[derive(Debug)]
pub struct Replay {
    /// The router statement to re-prepare (kept even if the client closes its name).
    pub stmt: Rc<Stmt>,
    /// The batch from the healable Bind through Sync.
    pub bytes: Vec<u8>,
    /// The expectations of those messages.
    pub expects: Vec<Expect>,
}

/// The allocations of a forgotten [`Replay`], emptied, for the next Sync's (#39: a prepared
/// batch armed at every Sync and dropped at its BindComplete allocated twice a transaction).
#[derive(Debug, Default)]
pub struct Spare {
    bytes: Vec<u8>,
    expects: Vec<Expect>,
}

/// The in-flight statement's state on the current backend connection.
#[derive(Debug, Default)]
pub struct Flight {
    /// Why the backend is going away or was given up (a FATAL it sent, a cancel it ignored),
    /// told to the client when the connection is found lost.
    pub(super) fatal: Option<Gone>,
    /// `query_timeout` fired and a cancel was sent for the running statement.
    pub(super) timed_out: bool,
    /// Set while the batch being assembled starts with a healable Bind.
    pub(super) mark: Option<HealMark>,
    /// The batch sent last, while its first Bind may still fail with a stale plan.
    pub(super) replay: Option<Replay>,
    /// The stale-plan error was swallowed: resend `replay` at ReadyForQuery.
    pub(super) healing: Option<Replay>,
    /// ParameterDescription of a healable Describe, held until its RowDescription shows the
    /// plan is valid (the server revalidates between the two).
    pub(super) held: Vec<u8>,
    /// Issue #11: the batch kept for a retry of a serialization failure or deadlock.
    pub(super) retry: Option<Box<RetryBatch>>,
    /// Issue #11: part of the batch was already relayed at a Flush (it cannot be retried).
    pub(super) flushed: bool,
    /// Issue #11: the retry policies of the rules that routed the batch's statements so far.
    pub(super) rules: RulePolicy,
    /// Issue #18: the client's named Parses sent to the backend and not answered yet, in order;
    /// a name whose Parse the server did not run is forgotten, as on the server.
    pub(super) named: std::collections::VecDeque<(String, Rc<Stmt>)>,
    /// Issue #18: the statements of the Describe (statement) messages sent and not answered
    /// yet, in order (`None`: not one of the router's), to note the row type the client learns.
    pub(super) describing: std::collections::VecDeque<Option<Rc<Stmt>>>,
    /// The router refused a statement of a batch the backend already holds part of, and sent
    /// a failing one in its place (see `Exchange::on_sync`): that error is not relayed.
    pub(super) aborting: bool,
}

impl Flight {
    /// At Sync: keeps the batch from the healable Bind on, if there is one and it is small.
    pub fn arm(&mut self, bout: &[u8], expect: &std::collections::VecDeque<Expect>, spare: &mut Spare) {
        self.disarm(spare);
        let Some(mark) = self.mark.take() else { return };
        let Some(bytes) = bout.get(mark.bout..) else { return };
        if bytes.len() > REPLAY_MAX {
            return;
        }
        // The batch's expectations as the deque's two slices: copied whole, not one at a time
        // through an iterator (#39).
        let (front, back) = expect.as_slices();
        let (front, back) = match front.get(mark.expect..) {
            Some(front) => (front, back),
            None => (&[][..], back.get(mark.expect - front.len()..).unwrap_or_default()),
        };
        let described =
            front.iter().chain(back).take_while(|e| **e != Expect::Execute).any(|e| *e == Expect::DescribePortal);
        if mark.bind && !described {
            return;
        }
        let Spare { bytes: mut kept, mut expects } = std::mem::take(spare);
        kept.extend_from_slice(bytes);
        expects.extend_from_slice(front);
        expects.extend_from_slice(back);
        self.replay = Some(Replay { stmt: mark.stmt, bytes: kept, expects });
    }

    /// The last batch can no longer be healed: forgets it, its allocations kept in `spare`
    /// when they are small.
    pub fn disarm(&mut self, spare: &mut Spare) {
        let Some(Replay { mut bytes, mut expects, .. }) = self.replay.take() else { return };
        if bytes.capacity() <= SPARE_MAX {
            bytes.clear();
            expects.clear();
            *spare = Spare { bytes, expects };
        }
    }

    /// Whether nothing is kept of the last batch nor learned of the connection.
    pub fn is_fresh(&self) -> bool {
        let Self { fatal, timed_out, mark, replay, healing, held, retry, flushed, rules, named, describing, aborting } =
            self;
        fatal.is_none()
            && !timed_out
            && mark.is_none()
            && replay.is_none()
            && healing.is_none()
            && held.is_empty()
            && retry.is_none()
            && !flushed
            && *rules == RulePolicy::default()
            && named.is_empty()
            && describing.is_empty()
            && !aborting
    }

    /// Forgets everything about the batch (at ReadyForQuery or when the connection goes).
    pub fn settle(&mut self, spare: &mut Spare) {
        self.timed_out = false;
        self.mark = None;
        self.disarm(spare);
        self.healing = None;
        self.held.clear();
        self.retry = None;
        self.flushed = false;
        self.rules = RulePolicy::default();
        self.named.clear();
        self.describing.clear();
        self.aborting = false;
    }
}

/// `bytes` (whole frontend messages) with every Bind and statement Describe of statement `old`
/// naming `new` instead; `None` if a message is malformed (the router encoded them itself).
pub(super) fn renamed(bytes: &[u8], old: &str, new: &str) -> Option<Vec<u8>> {
    use crate::protocol::pg::{frontend, FrontendMessage, RawFrames, Target};
    let mut out = Vec::with_capacity(bytes.len() + 16);
    let mut frames = RawFrames::new(bytes, REPLAY_MAX);
    for f in frames.by_ref() {
        let (raw, body) = (f.bytes(), f.body());
        match FrontendMessage::decode(&Frame::new(f.tag(), body)).ok()? {
            FrontendMessage::Bind { statement, .. } if statement == old => {
                frontend::encode_bind_renamed(body, new, &mut out).ok()?
            }
            FrontendMessage::Describe { kind: Target::Statement, name } if name == old => {
                frontend::encode_describe_renamed(body, new, &mut out).ok()?
            }
            _ => out.extend_from_slice(raw),
        }
    }
    frames.rest().is_empty().then_some(out)
}

/// What an ErrorResponse means to the relay.
pub(super) enum ErrorKind {
    /// The backend is going away (FATAL or PANIC), with its code and message.
    Fatal(RelayError),
    /// A statement the router prepared has a stale plan.
    StalePlan,
    /// The backend has (`exists`) or lacks a statement of the router's that the connection's
    /// bookkeeping says otherwise about (42P05 / 26000 naming a `qp_` statement).
    Misnamed { key: u64, exists: bool },
    /// The statement was canceled (57014).
    Canceled,
    /// Anything else: relay it.
    Other,
}

/// Classifies an ErrorResponse body.
pub(super) fn classify_error(body: &[u8]) -> ErrorKind {
    let Ok(BackendMessage::ErrorResponse(fields)) = BackendMessage::decode(&Frame::new(server::ERROR_RESPONSE, body))
    else {
        return ErrorKind::Other;
    };
    let severity = fields.get(field::SEVERITY_NONLOCALIZED).or_else(|| fields.get(field::SEVERITY)).unwrap_or("ERROR");
    let code = fields.code().unwrap_or("XX000");
    let message = fields.get(field::MESSAGE).unwrap_or("");
    if matches!(severity, "FATAL" | "PANIC") {
        return ErrorKind::Fatal(RelayError::BackendFatal { code: code.to_owned(), message: message.to_owned() });
    }
    match code {
        "0A000" if message.starts_with(STALE_PLAN) => ErrorKind::StalePlan,
        "57014" => ErrorKind::Canceled,
        sqlstate::INVALID_SQL_STATEMENT_NAME | sqlstate::DUPLICATE_PREPARED_STATEMENT => {
            match super::prepared::key_in_message(message) {
                Some(key) => ErrorKind::Misnamed { key, exists: code == sqlstate::DUPLICATE_PREPARED_STATEMENT },
                None => ErrorKind::Other,
            }
        }
        _ => ErrorKind::Other,
    }
}

#[cfg(test)]
mod tests;
