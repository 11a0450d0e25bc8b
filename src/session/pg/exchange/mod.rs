//! The sans-IO heart of a PostgreSQL session's relay (#20): the batch queued for the backend
//! with the responses it expects, the in-flight state (healing, retry, FATAL seen, timeout
//! fired) and where the session stands in the exchange. It takes decoded backend frames and
//! says what to do with each ([`Step`]); the session performs the I/O and the bookkeeping on
//! its backend connection.
//!
//! Must not use the runtime, the pool, sockets, clocks or logging: time and limits come in as
//! parameters.

use crate::protocol::pg::tag::{backend as server, frontend as frontend_tag, tx_status};
use std::collections::VecDeque;
use std::rc::Rc;

use super::flight::{classify_error, ErrorKind, Flight, Gone, HealMark, Replay, Spare};
use super::prepared::{Expect, Stmt};
use super::retry::RetryBatch;
use crate::protocol::pg::{frontend, sqlstate, FrontendMessage, RawFrame, Target, TransactionStatus};
use crate::session::client_error::PgClientError;
use crate::session::engine::retry::RulePolicy;
use crate::session::error::RelayError;

#[cfg(test)]
mod tests;

/// Where the session stands between its client's batch and the backend's answers. The three
/// facts it used to keep as flags (a response is owed, the router refused part of the batch,
/// the backend aborted it before its Sync) combine only as these.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(super) enum Phase {
    /// Nothing sent is unanswered.
    #[default]
    Idle,
    /// Bytes went to the backend; its ReadyForQuery is owed.
    Awaiting,
    /// The router refused a message before any of the batch reached a backend: the client's
    /// messages are skipped up to its Sync.
    Refused,
    /// The router refused a message after the backend got part of the batch: skipped up to
    /// Sync, whose stand-in error then makes the backend abort its part too.
    RefusedMidBatch,
    /// The backend reported an error before the batch's Sync: it discards everything up to
    /// Sync, and so does the session (`refused`: the router had refused a message too).
    Aborted {
        /// The router had refused a message of the batch as well.
        refused: bool,
    },
}

/// What one response (up to ReadyForQuery) taught about the transaction.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Outcome {
    /// An error was reported (or stood in for).
    pub error: bool,
    /// The last COMMIT (`true`) or ROLLBACK (`false`) command tag.
    pub last_tag_commit: Option<bool>,
    /// A COMMIT command tag was seen (a transaction committed, whatever came after it).
    pub any_commit: bool,
    /// The last command tag was ROLLBACK or PREPARE TRANSACTION: what ran before it in the
    /// response is not committed (a multi-statement text's implicit block included).
    pub ends_uncommitted: bool,
}

/// What the client gets of one backend frame.
#[derive(Debug)]
pub enum Action {
    /// The frame, unchanged.
    Forward,
    /// These held-back bytes, then the frame.
    ReleaseThenForward(Vec<u8>),
    /// Nothing: the exchange keeps the frame (a ParameterDescription until the plan proved valid).
    Hold,
    /// Nothing: an answer to a message the router injected, a healed or stood-in error.
    Swallow,
    /// This reply in place of the frame (an error the router words itself).
    Replace(PgClientError),
    /// An ordinary error: held for a retry if the session's retry takes it, otherwise relayed
    /// after what is held back.
    MayRetry,
    /// The backend is going away: nothing more is relayed, the connection is lost with this.
    Fail,
}

/// Bookkeeping the session does for a frame on its backend connection and session state.
#[derive(Debug)]
pub enum Note {
    /// Nothing.
    None,
    /// The described statement's row type is the frame's (RowDescription or NoData).
    RowType(Rc<Stmt>),
    /// A CommandComplete: statistics, schema changes, prepared statements dropped.
    CommandTag,
    /// A ParameterStatus to record.
    ParameterStatus,
    /// A NotificationResponse whose pid may need to be the client's.
    Notification,
    /// A stale plan: the schema changed where the router did not see it.
    SchemaChanged,
    /// The row of the router's transaction probe (#34): whether the batch's transaction wrote.
    XactProbe,
    /// The connection has (`exists`) or lacks statement `key`, whatever its bookkeeping says.
    Misnamed {
        /// The router statement's key.
        key: u64,
        /// Whether the backend has it.
        exists: bool,
    },
}

/// What the session does for one backend frame.
#[derive(Debug)]
pub struct Step {
    /// What the client gets.
    pub action: Action,
    /// The bookkeeping it calls for.
    pub note: Note,
    /// Messages the server skipped after an error, up to the batch's Sync (not run).
    pub skipped: Vec<Expect>,
}

impl Step {
    fn new(action: Action) -> Self {
        Self { action, note: Note::None, skipped: Vec::new() }
    }

    fn noting(action: Action, note: Note) -> Self {
        Self { action, note, skipped: Vec::new() }
    }
}

/// The `Synth` tag of a response with a body, kept in `Exchange::answers` (no backend
/// message has tag 0).
const ANSWER: u8 = 0;

/// A Sync message's length: its tag and its length field.
const SYNC_LEN: usize = 5;

/// Fails to parse on every server (a syntax error), aborting the batch it is sent in.
const ABORT_SQL: &str = "querypilot: the router refused a statement of this batch";

/// What the session does with the client's Sync.
#[derive(Debug, PartialEq, Eq)]
pub enum SyncStep {
    /// No part of the batch is on a backend: the router answers ReadyForQuery itself.
    AnswerHere,
    /// The queued batch, ending in the Sync, goes to the backend and its answers to the
    /// client; `retry`: a batch that may be kept for a retry (#11).
    Send {
        /// A whole batch of the client's, which a retry may send again.
        retry: bool,
    },
}

/// What a frame a held backend sends while the client is idle means.
#[derive(Debug)]
pub enum Unprompted {
    /// A notification, notice or parameter change: the client gets it.
    Relay,
    /// Anything else: the backend is going away (its FATAL, if it sent one, is the cause and
    /// waits in the flight; this is the frame out of step).
    Lost(RelayError),
}

/// What a ReadyForQuery leads to before the response may end.
#[derive(Debug)]
pub enum ReadyStep {
    /// The stale-plan error was swallowed: the statement is prepared again and this batch sent
    /// again, renamed.
    Heal(Replay),
    /// Nothing to heal: the response ends, unless the session's retry sends the batch again.
    Settle,
}

/// One session's exchange with its backend connection.
#[derive(Debug, Default)]
pub struct Exchange {
    /// Responses expected from the backend (or synthesized), in order.
    expect: VecDeque<Expect>,
    /// Bytes queued for the backend and not sent yet.
    bout: Vec<u8>,
    /// The statement in flight: FATAL seen, timeout fired, stale-plan healing, retry.
    flight: Flight,
    /// What the flight's heal replay reuses at each Sync.
    spare: Spare,
    phase: Phase,
    outcome: Outcome,
    /// The messages of each synthesized response that has a body (the router's own answers to
    /// a token statement, #34), in the order of their `Synth` expectations; the batch's end
    /// drops what an error made the server skip.
    answers: VecDeque<Vec<u8>>,
}

impl Exchange {
    /// Whether the exchange holds nothing the client's next message could need: nothing is
    /// queued, owed or kept of the last batch (#39: an idle session then gives it back). The
    /// last response's outcome does not count: each response starts a new one
    /// ([`Exchange::begin_response`]) before anything reads it.
    pub fn is_fresh(&self) -> bool {
        // Nor does the replay's spare allocation, which holds nothing.
        let Self { expect, bout, flight, spare: _, phase, outcome: _, answers } = self;
        expect.is_empty() && bout.is_empty() && flight.is_fresh() && *phase == Phase::Idle && answers.is_empty()
    }

    /// The responses expected from the backend (or the router's own), in order.
    pub fn expects(&self) -> &VecDeque<Expect> {
        &self.expect
    }

    /// A message for the backend, whose response is `expect`.
    pub fn forward(&mut self, raw: &[u8], expect: Expect) {
        self.bout.extend_from_slice(raw);
        self.expect.push_back(expect);
    }

    /// Messages for the backend, whose responses are `expects`, in order.
    pub fn forward_all(&mut self, raw: &[u8], expects: &[Expect]) {
        self.bout.extend_from_slice(raw);
        self.expect_all(expects);
    }

    /// Expects `expects` in order. One `push_back` each: a batch's messages come one or two at
    /// a time, where `VecDeque::extend`'s reserve-and-copy cost several times a push (#39).
    fn expect_all(&mut self, expects: &[Expect]) {
        for &e in expects {
            self.expect.push_back(e);
        }
    }

    /// causal (#34): `probe` (the router's Parse if needed, Bind and Execute of the transaction
    /// probe), answered as `expects` say, goes into the queued batch just ahead of its closing
    /// Sync, so it runs last in the batch's implicit transaction; the client sees none of its
    /// answers, and its row is noted ([`Note::XactProbe`]). `false` when the queue does not
    /// end with the Sync.
    pub fn probe_before_sync(&mut self, probe: &[u8], expects: &[Expect]) -> bool {
        let sync = self.bout.len().checked_sub(SYNC_LEN);
        let Some(at) = sync.filter(|&at| self.bout[at] == frontend_tag::SYNC) else { return false };
        if self.expect.back() != Some(&Expect::Sync) {
            return false;
        }
        self.bout.splice(at..at, probe.iter().copied());
        let sync = self.expect.pop_back();
        self.expect.extend(expects.iter().copied().chain(sync));
        true
    }

    /// Messages with no response of their own to expect: a simple Query or FunctionCall
    /// (answered up to its ReadyForQuery), a Flush, COPY data.
    pub fn forward_unanswered(&mut self, raw: &[u8]) {
        self.bout.extend_from_slice(raw);
    }

    /// `first` (whole messages) goes to the backend ahead of what is queued: the commit
    /// position probe, answered before the batch it precedes.
    pub fn forward_first(&mut self, mut first: Vec<u8>) {
        first.append(&mut self.bout);
        self.bout = first;
    }

    /// The bytes queued for the backend and not sent yet.
    pub fn queued(&self) -> &[u8] {
        &self.bout
    }

    /// The queued bytes were written to the backend (or the write failed, and the connection
    /// goes with them).
    pub fn written(&mut self) {
        self.bout.clear();
    }

    /// What is queued is not sent: the backend rejected the COPY it was data for, or the
    /// backend of a bridged session speaks another protocol.
    pub fn discard_queued(&mut self) {
        self.bout.clear();
    }

    /// The COPY IN is given up (`reason`): in place of what was queued the backend gets a
    /// CopyFail, which ends the COPY with an error.
    pub fn fail_copy(&mut self, reason: &str) {
        self.bout.clear();
        let _ = FrontendMessage::CopyFail(reason).encode(&mut self.bout);
    }

    /// The queue's buffer while nothing is queued, for the runtime to take or give its spare
    /// allocation.
    pub fn idle_buffer(&mut self) -> Option<&mut Vec<u8>> {
        self.bout.is_empty().then_some(&mut self.bout)
    }

    /// Gives back the queue's allocation beyond `to` bytes once it grew to `at` (a large
    /// message went through it).
    pub fn shrink_buffer(&mut self, at: usize, to: usize) {
        if self.bout.capacity() >= at {
            self.bout.shrink_to(to);
        }
    }

    /// Messages `encode` writes for the backend, answered by `expects` in order. When it
    /// fails nothing is expected: the caller refuses the batch, which drops what it wrote.
    pub fn forward_encoded<E>(
        &mut self,
        encode: impl FnOnce(&mut Vec<u8>) -> Result<(), E>,
        expects: &[Expect],
    ) -> Result<(), E> {
        encode(&mut self.bout)?;
        self.expect_all(expects);
        Ok(())
    }

    /// The router closes statement `name` on the backend (`key`: one of its own statements);
    /// the client does not see the CloseComplete.
    pub fn close_on_backend(&mut self, name: &str, key: Option<u64>) {
        let _ = frontend::encode_close(Target::Statement, name, &mut self.bout);
        self.expect.push_back(Expect::Close { swallow: true, key });
    }

    /// The router answers the client's current message itself with an empty message `tag`,
    /// in its place among the backend's answers.
    pub fn answer_here(&mut self, tag: u8) {
        self.expect.push_back(Expect::Synth(tag));
    }

    /// The Describe of a statement just queued gets the router's ParameterDescription
    /// (`parameters`, whole messages) in place of the backend's; the row type that follows is
    /// the one the client learns.
    pub fn described_with(&mut self, parameters: Vec<u8>) {
        self.expect.push_back(Expect::Swallow(server::PARAMETER_DESCRIPTION));
        self.answer(parameters);
        self.flight.describing.push_back(None);
        self.expect.push_back(Expect::DescribeStatement);
    }

    /// The client's named Parse (`name`, of `stmt`) went to the backend: forgotten, as on the
    /// server, should the server not run it.
    pub fn parsing(&mut self, name: &str, stmt: Rc<Stmt>) {
        self.flight.named.push_back((name.to_owned(), stmt));
    }

    /// The server did not run the oldest named Parse still unanswered: its name and statement.
    pub fn parse_not_run(&mut self) -> Option<(String, Rc<Stmt>)> {
        self.flight.named.pop_front()
    }

    /// A Describe of a statement (`stmt`: one of the router's) went to the backend: the row
    /// type it answers is the one the client learns.
    pub fn describing(&mut self, stmt: Option<Rc<Stmt>>) {
        self.flight.describing.push_back(stmt);
    }

    /// The server did not run the oldest statement Describe still unanswered.
    pub fn describe_not_run(&mut self) {
        self.flight.describing.pop_front();
    }

    /// Statement `stale` was prepared again as `fresh`: the Describes in flight of it describe
    /// the fresh one.
    pub fn redescribing(&mut self, stale: &Rc<Stmt>, fresh: &Rc<Stmt>) {
        for s in self.flight.describing.iter_mut().flatten().filter(|s| Rc::ptr_eq(s, stale)) {
            *s = fresh.clone();
        }
    }

    /// The message being queued is healable if the batch turns out to have a stale plan: it
    /// uses `stmt` (a Bind, `bind`, or a Describe of it), prepared earlier on this connection,
    /// first in its batch, outside a transaction (`idle`); see `flight`.
    pub fn mark_healable(&mut self, stmt: &Rc<Stmt>, bind: bool, idle: bool) {
        let first = !self
            .expect
            .iter()
            .any(|e| matches!(e, Expect::Bind | Expect::Execute | Expect::DescribePortal | Expect::DescribeStatement));
        if idle && self.flight.mark.is_none() && first {
            let (bout, expect) = (self.bout.len(), self.expect.len());
            self.flight.mark = Some(HealMark { bout, expect, stmt: stmt.clone(), bind });
        }
    }

    /// Part of the batch goes to the backend before its Sync (a Flush, a long or paused batch):
    /// what was sent cannot be sent again, so the batch is not healed.
    pub fn sent_before_sync(&mut self) {
        self.flight.mark = None;
    }

    /// Answers are relayed before the batch's ReadyForQuery: the client has seen part of it,
    /// so it is not retried.
    pub fn relayed_before_ready(&mut self) {
        self.flight.flushed = true;
    }

    /// A statement of the batch was routed by a rule whose retry policy is `policy`.
    pub fn routed_by(&mut self, policy: Option<crate::config::RetryPolicy>) {
        self.flight.rules.note(policy);
    }

    /// The batch is about to be armed for a retry: the one kept before goes. Returns the retry
    /// policies of the rules that routed it and whether part of it already reached the client.
    pub fn arming(&mut self) -> (RulePolicy, bool) {
        self.flight.retry = None;
        (std::mem::take(&mut self.flight.rules), self.flight.flushed)
    }

    /// The batch is kept (`batch`) to be sent again on a serialization failure or deadlock.
    pub fn keep_for_retry(&mut self, batch: Box<RetryBatch>) {
        self.flight.retry = Some(batch);
    }

    /// The batch kept for a retry, if any.
    pub fn retry_batch(&mut self) -> Option<&mut RetryBatch> {
        self.flight.retry.as_deref_mut()
    }

    /// The batch kept for a retry, taken out (to be sent again, or given up).
    pub fn take_retry(&mut self) -> Option<Box<RetryBatch>> {
        self.flight.retry.take()
    }

    /// The batch will not be retried.
    pub fn no_retry(&mut self) {
        self.flight.retry = None;
    }

    /// The ParameterDescription held back for healing (the fuzz target checks it is exactly
    /// the frames the client has not been given).
    pub fn held(&self) -> &[u8] {
        &self.flight.held
    }

    /// The ParameterDescription held back for healing, taken (an error ends its wait).
    pub fn take_held(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.flight.held)
    }

    /// The ParameterDescription held back goes to the client (`out`), ahead of the error that
    /// ended its wait.
    pub fn deliver_held(&mut self, out: &mut Vec<u8>) {
        out.append(&mut self.flight.held);
    }

    /// The batch is sent again from its start: nothing held back for the attempt before stays.
    pub fn drop_held(&mut self) {
        self.flight.held.clear();
    }

    /// Nothing is held back for a retry or a stale-plan healing, which need whole messages:
    /// what the backend sends may go to the client as it comes.
    pub fn holds_nothing(&self) -> bool {
        self.flight.healing.is_none() && self.flight.held.is_empty() && !self.retry_pending()
    }

    /// A stale plan's error was swallowed: the batch is prepared again and sent again.
    pub fn healing(&self) -> bool {
        self.flight.healing.is_some()
    }

    /// The stand-in Parse of a statement the router refused is on its way (it failed on
    /// purpose, in place of the client's unnamed statement).
    pub fn aborting(&self) -> bool {
        self.flight.aborting
    }

    /// `query_timeout` fired and a cancel went out for the running statement.
    pub fn cancel_sent(&mut self) {
        self.flight.timed_out = true;
    }

    /// Whether `query_timeout` fired for the running statement already.
    pub fn timed_out(&self) -> bool {
        self.flight.timed_out
    }

    /// The backend is given up for `cause`, which the client is told when it is found lost.
    pub fn give_up(&mut self, cause: RelayError) {
        self.flight.fatal = Some(cause.into());
    }

    /// The response ended (ReadyForQuery): nothing of the batch is in flight any more.
    pub fn response_done(&mut self) {
        self.flight.settle(&mut self.spare);
    }

    /// The connection was found lost: nothing of the batch is in flight any more; returns why
    /// it went, when that is known.
    pub fn forget_flight(&mut self) -> Option<Gone> {
        let gone = self.flight.fatal.take();
        self.flight.settle(&mut self.spare);
        gone
    }

    /// A batch is about to be sent again from its start (healed or retried): nothing of the
    /// attempt before stays queued.
    pub fn start_over(&mut self) {
        self.bout.clear();
        self.expect.clear();
    }

    /// A response is owed by the backend (bytes were sent, ReadyForQuery has not come).
    pub fn awaiting(&self) -> bool {
        matches!(self.phase, Phase::Awaiting | Phase::RefusedMidBatch | Phase::Aborted { .. })
    }

    /// The router refused a message of the batch: the rest is skipped up to Sync.
    pub fn refused(&self) -> bool {
        matches!(self.phase, Phase::Refused | Phase::RefusedMidBatch | Phase::Aborted { refused: true })
    }

    /// The backend aborted the batch before its Sync.
    pub fn aborted(&self) -> bool {
        matches!(self.phase, Phase::Aborted { .. })
    }

    /// Bytes were sent to the backend: its ReadyForQuery is owed.
    pub fn sent(&mut self) {
        self.phase = match self.phase {
            Phase::Idle => Phase::Awaiting,
            Phase::Refused => Phase::RefusedMidBatch,
            other => other,
        };
    }

    /// The backend's response ended, or the connection went: nothing is owed any more.
    pub fn settled(&mut self) {
        self.phase = if self.refused() { Phase::Refused } else { Phase::Idle };
    }

    /// The router refused a message of the current batch.
    pub fn refuse(&mut self) {
        self.phase = match self.phase {
            Phase::Idle | Phase::Refused => Phase::Refused,
            Phase::Awaiting | Phase::RefusedMidBatch => Phase::RefusedMidBatch,
            Phase::Aborted { .. } => Phase::Aborted { refused: true },
        };
    }

    /// The router refused a message of the current batch: what was queued for the backend is
    /// discarded with it (none of its Parses reaches the server, nothing of it is healed or
    /// retried), and the client's messages are skipped up to its Sync.
    pub fn refuse_batch(&mut self) {
        self.bout.clear();
        self.expect.clear();
        self.answers.clear();
        self.flight.mark = None;
        self.flight.rules = RulePolicy::default();
        self.flight.named.clear();
        self.flight.describing.clear();
        self.refuse();
    }

    /// The batch's Sync arrived: the client's messages are read again.
    pub fn synced(&mut self) {
        self.phase = if self.awaiting() { Phase::Awaiting } else { Phase::Idle };
    }

    /// The backend reported an error before the batch's Sync was sent: it discards up to that
    /// Sync, which the client has still to send, so no Sync is expected from this batch yet.
    pub fn abort_before_sync(&mut self) {
        self.expect.retain(|e| *e != Expect::Sync);
        self.phase = Phase::Aborted { refused: self.refused() };
    }

    /// The connection was lost: nothing more comes for what was sent.
    pub fn lost(&mut self) {
        self.expect.clear();
        self.phase = if self.refused() { Phase::Refused } else { Phase::Idle };
    }

    /// A new response (or a new attempt of one) starts.
    pub fn begin_response(&mut self) {
        self.outcome = Outcome::default();
    }

    /// What the response taught so far.
    pub fn outcome(&self) -> Outcome {
        self.outcome
    }

    /// The client's Sync (`raw`) ends its batch; `attached`: a backend connection is held.
    /// Synthesized answers due before the router's own ReadyForQuery go to `out`.
    pub fn on_sync(&mut self, raw: &[u8], attached: bool, out: &mut Vec<u8>) -> SyncStep {
        if self.aborted() || (self.refused() && self.awaiting()) {
            return self.sync_aborted(raw, attached);
        }
        if self.refused() || !attached {
            if !self.refused() {
                self.emit_synth(out);
            }
            self.synced();
            self.expect.clear();
            self.answers.clear();
            return SyncStep::AnswerHere;
        }
        self.bout.extend_from_slice(raw);
        self.expect.push_back(Expect::Sync);
        self.flight.arm(&self.bout, &self.expect, &mut self.spare);
        SyncStep::Send { retry: true }
    }

    /// The Sync of a batch that the backend aborted, or that the router refused after part of
    /// it had already reached the backend: only the backend can end the batch it is in.
    fn sync_aborted(&mut self, raw: &[u8], attached: bool) -> SyncStep {
        let refused = self.refused() && !self.aborted();
        self.synced();
        self.flight.mark = None;
        self.bout.clear();
        self.expect.clear();
        if !attached {
            return SyncStep::AnswerHere;
        }
        if refused {
            // What the backend ran of the batch must not outlive the refusal: a statement that
            // fails makes the server roll the batch's implicit transaction back (or fail the
            // client's open one), as if the refused statement had failed there.
            let _ = frontend::encode_parse("", ABORT_SQL, &[], &mut self.bout);
            self.flight.aborting = true;
        }
        self.bout.extend_from_slice(raw);
        self.expect.push_back(Expect::Sync);
        SyncStep::Send { retry: false }
    }

    /// Pops the responses the router answers itself from the head of the queue and writes them.
    pub fn emit_synth(&mut self, out: &mut Vec<u8>) {
        while let Some(Expect::Synth(tag)) = self.expect.front().copied() {
            self.expect.pop_front();
            if tag == ANSWER {
                out.extend(self.answers.pop_front().unwrap_or_default());
            } else {
                out.extend_from_slice(&[tag, 0, 0, 0, 4]);
            }
        }
    }

    /// Queues `messages` (whole backend messages the router words itself) as the response to
    /// the client's current message, in its place among the backend's answers.
    pub fn answer(&mut self, messages: Vec<u8>) {
        // The answer is emitted once: a batch holding one is neither healed nor retried,
        // which would send its expectations again.
        self.flight.mark = None;
        self.flight.flushed = true;
        self.expect.push_back(Expect::Synth(ANSWER));
        self.answers.push_back(messages);
    }

    /// ReadyForQuery with status byte `status` ended the response: the batch's expectations
    /// are done; returns the transaction status it reports.
    pub fn ready(&mut self, status: Option<u8>) -> TransactionStatus {
        self.phase = if self.refused() { Phase::Refused } else { Phase::Idle };
        if self.expect.front() == Some(&Expect::Sync) {
            self.expect.pop_front();
        }
        self.expect.retain(|e| !matches!(e, Expect::Synth(_)));
        self.answers.clear();
        match status {
            Some(tx_status::IN_BLOCK) => TransactionStatus::InBlock,
            Some(tx_status::FAILED) => TransactionStatus::Failed,
            _ => TransactionStatus::Idle,
        }
    }

    /// The backend's ReadyForQuery arrived: whether the batch is healed now.
    pub fn at_ready(&mut self) -> ReadyStep {
        match self.flight.healing.take() {
            Some(replay) => ReadyStep::Heal(replay),
            None => ReadyStep::Settle,
        }
    }

    /// Whether an error is held back for a retry of the batch.
    pub fn retry_pending(&self) -> bool {
        self.flight.retry.as_ref().is_some_and(|r| r.is_holding())
    }

    /// Decides what a frame the backend sent unprompted, between the client's requests, means.
    pub fn on_unprompted(&mut self, frame: &RawFrame<'_>) -> Unprompted {
        match frame.tag() {
            server::NOTIFICATION_RESPONSE | server::NOTICE_RESPONSE | server::PARAMETER_STATUS => Unprompted::Relay,
            server::ERROR_RESPONSE => {
                if let ErrorKind::Fatal(e) = classify_error(frame.body()) {
                    self.flight.fatal = Some(Gone::said(e, frame.bytes()));
                }
                Unprompted::Lost(RelayError::OutOfStep { tag: frame.tag() })
            }
            tag => Unprompted::Lost(RelayError::OutOfStep { tag }),
        }
    }

    /// Decides what to do with one backend frame. `query_ms` is the pool's `query_timeout` in
    /// milliseconds, for the router's wording of a cancel it sent.
    pub fn on_backend(&mut self, frame: &RawFrame<'_>, query_ms: u128) -> Step {
        let mut step = self.decide(frame, query_ms);
        if !self.flight.held.is_empty() {
            self.keep_order(&mut step);
        }
        step
    }

    /// A frame other than the RowDescription, NoData or stale-plan error the held
    /// ParameterDescription waits for must not overtake it (#37, found by the `pg_exchange`
    /// fuzz target): one the client gets releases the hold before it, and so ends the chance to
    /// heal (the client has seen the description); a router-worded error drops it.
    fn keep_order(&mut self, step: &mut Step) {
        match step.action {
            Action::Forward => {
                self.flight.disarm(&mut self.spare);
                step.action = self.release_held();
            }
            Action::Replace(_) => self.flight.held.clear(),
            _ => {}
        }
    }

    fn decide(&mut self, frame: &RawFrame<'_>, query_ms: u128) -> Step {
        let front = self.expect.front().copied();
        match frame.tag() {
            server::DATA_ROW if front == Some(Expect::XactProbe) => Step::noting(Action::Swallow, Note::XactProbe),
            server::COMMAND_COMPLETE if front == Some(Expect::XactProbe) => {
                self.expect.pop_front();
                Step::new(Action::Swallow)
            }
            tag if front == Some(Expect::Swallow(tag)) => {
                self.expect.pop_front();
                Step::new(Action::Swallow)
            }
            server::PARSE_COMPLETE => Step::new(self.on_parse_complete(front)),
            server::CLOSE_COMPLETE => match front {
                Some(Expect::Close { swallow, .. }) => {
                    self.expect.pop_front();
                    Step::new(if swallow { Action::Swallow } else { Action::Forward })
                }
                _ => Step::new(Action::Forward),
            },
            server::BIND_COMPLETE => {
                if front == Some(Expect::Bind) {
                    self.expect.pop_front();
                }
                // The batch's first Bind succeeded: no stale plan to heal in this batch.
                self.flight.disarm(&mut self.spare);
                Step::new(Action::Forward)
            }
            server::ROW_DESCRIPTION | server::NO_DATA => self.on_row_type(front),
            server::PARAMETER_DESCRIPTION
                if self.flight.replay.is_some() && front == Some(Expect::DescribeStatement) =>
            {
                self.flight.held.extend_from_slice(frame.bytes());
                Step::new(Action::Hold)
            }
            server::COMMAND_COMPLETE | server::EMPTY_QUERY_RESPONSE | server::PORTAL_SUSPENDED => {
                self.on_completion(frame, front)
            }
            server::ERROR_RESPONSE => {
                let mut step = self.on_error(frame, front, query_ms);
                step.skipped = self.skip_to_sync();
                step
            }
            server::READY_FOR_QUERY if self.flight.healing.is_some() || self.retry_pending() => {
                Step::new(Action::Swallow)
            }
            server::PARAMETER_STATUS => Step::noting(Action::Forward, Note::ParameterStatus),
            server::NOTIFICATION_RESPONSE => Step::noting(Action::Forward, Note::Notification),
            _ => Step::new(Action::Forward),
        }
    }

    fn on_parse_complete(&mut self, front: Option<Expect>) -> Action {
        let Some(Expect::Parse { swallow, key }) = front else { return Action::Forward };
        self.expect.pop_front();
        if !swallow && key.is_some() {
            self.flight.named.pop_front(); // the client's named statement exists (#18)
        }
        if swallow {
            Action::Swallow
        } else {
            Action::Forward
        }
    }

    fn on_row_type(&mut self, front: Option<Expect>) -> Step {
        let mut note = Note::None;
        if front == Some(Expect::DescribeStatement) {
            if let Some(Some(stmt)) = self.flight.describing.pop_front() {
                note = Note::RowType(stmt); // #18
            }
        }
        if matches!(front, Some(Expect::DescribeStatement | Expect::DescribePortal)) {
            self.expect.pop_front();
        }
        // The Describe got past revalidation: release what was held, no healing.
        self.flight.disarm(&mut self.spare);
        Step::noting(self.release_held(), note)
    }

    fn on_completion(&mut self, frame: &RawFrame<'_>, front: Option<Expect>) -> Step {
        if front == Some(Expect::Execute) {
            self.expect.pop_front();
        }
        if frame.tag() != server::COMMAND_COMPLETE {
            return Step::new(Action::Forward);
        }
        let tag = command_tag(frame.body());
        match tag {
            b"COMMIT" => {
                self.outcome.last_tag_commit = Some(true);
                self.outcome.any_commit = true;
            }
            b"ROLLBACK" => self.outcome.last_tag_commit = Some(false),
            _ => {}
        }
        self.outcome.ends_uncommitted = matches!(tag, b"ROLLBACK" | b"PREPARE TRANSACTION");
        Step::noting(Action::Forward, Note::CommandTag)
    }

    /// Decides what the client sees of an ErrorResponse: most are relayed; a FATAL becomes the
    /// connection-loss error; a stale plan is healed; a cancel sent by query_timeout says so.
    fn on_error(&mut self, frame: &RawFrame<'_>, front: Option<Expect>, query_ms: u128) -> Step {
        if std::mem::take(&mut self.flight.aborting) {
            // The router's stand-in for a statement it refused: the client has its error.
            self.outcome.error = true;
            return Step::new(Action::Swallow);
        }
        let kind = classify_error(frame.body());
        let stale = matches!(kind, ErrorKind::StalePlan);
        let healable = matches!(front, Some(Expect::Bind | Expect::DescribeStatement)) && self.flight.replay.is_some();
        if stale && healable {
            self.flight.held.clear();
            self.flight.healing = self.flight.replay.take();
            return Step::noting(Action::Swallow, Note::SchemaChanged);
        }
        self.outcome.error = true;
        match kind {
            ErrorKind::Fatal(e) => {
                self.flight.fatal = Some(Gone::said(e, frame.bytes()));
                Step::new(Action::Fail)
            }
            ErrorKind::Canceled if self.flight.timed_out => {
                let text = format!("canceling statement due to query_timeout ({query_ms} ms)");
                Step::new(Action::Replace(PgClientError::new(sqlstate::QUERY_CANCELED, text)))
            }
            ErrorKind::Misnamed { key, exists } => Step::noting(self.release_held(), Note::Misnamed { key, exists }),
            ErrorKind::StalePlan => Step::noting(Action::MayRetry, Note::SchemaChanged),
            _ => Step::new(Action::MayRetry),
        }
    }

    /// The frame goes to the client after whatever was held back.
    fn release_held(&mut self) -> Action {
        if self.flight.held.is_empty() {
            return Action::Forward;
        }
        Action::ReleaseThenForward(std::mem::take(&mut self.flight.held))
    }

    /// After an error the server skips everything up to Sync: so do the expectations.
    fn skip_to_sync(&mut self) -> Vec<Expect> {
        let end = self.expect.iter().position(|e| *e == Expect::Sync).unwrap_or(self.expect.len());
        self.expect.drain(..end).collect()
    }
}

/// A CommandComplete body's tag, without its terminating NUL.
pub(super) fn command_tag(body: &[u8]) -> &[u8] {
    body.strip_suffix(b"\0").unwrap_or(body)
}

/// The bytes of a ReadyForQuery with status `status` (the one a held error goes out with).
/// A ReadyForQuery message's length.
pub(super) const READY_LEN: usize = 6;

pub(super) fn ready_for_query(status: Option<u8>) -> [u8; 6] {
    [server::READY_FOR_QUERY, 0, 0, 0, 5, status.unwrap_or(tx_status::IDLE)]
}
