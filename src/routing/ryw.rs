//! Read-your-writes: the small sans-IO state a session keeps so that, once it may have changed
//! data, its later reads go to the primary (for the rest of the session, or for a window), or —
//! in `causal` mode (#22) — only to a replica that replayed the session's last commit position.
//! Also remembers a `route=primary` hint, which pins the session whatever the mode.
//! Time is a parameter: the session passes its clock's `now`.

use std::time::{Duration, Instant};

use crate::config::ReadYourWrites;
use crate::id::{Position, Token};

use super::decision::Decision;

/// A session's read-your-writes state. Call [`RywState::observe`] with every decision that ran,
/// [`RywState::statement_done`] when the backend reports the statement finished, and pass
/// [`RywState::pinned`] into the next [`super::SessionView::pinned_to_primary`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RywState {
    mode: ReadYourWrites,
    /// A `route=primary` hint was honored: pinned for good.
    hinted: bool,
    /// When the session last changed data (or ended a transaction that did).
    last_write: Option<Instant>,
    /// A data change was seen and no transaction end since: the commit refreshes the window,
    /// since that is when the changes become visible to replicas.
    open_write: bool,
    /// A write (or the commit of one) was routed and the backend has not yet said it finished
    /// outside a transaction: [`RywState::statement_done`] then starts the window (#19 case 10).
    awaiting_commit: bool,
    /// causal: the open transaction ran on the primary without being proven read-only
    /// ([`RywState::observe_unproven`]): its end learns a position unless the server says it
    /// wrote nothing ([`RywState::wrote_nothing`]).
    unproven: bool,
    /// causal: the commit awaited was due only to `unproven` (no write the analysis saw).
    blind: bool,
    /// causal: the highest commit position (WAL offset or GTID per domain) the session wrote at.
    position: Option<Position>,
    /// causal: a write committed and its position is not learned yet ([`RywState::learned`]).
    position_due: bool,
    /// causal: learning a commit position failed; reads stay on the primary until one is learned.
    position_lost: bool,
}

/// A session's read-your-writes state on its way to a new binary (#40).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FrozenRyw {
    hinted: bool,
    /// How long ago the session last wrote.
    write_age_ms: Option<u64>,
    /// The causal token the session would hand out.
    token: String,
}

impl RywState {
    /// A fresh session in `mode` (`RuleSet::read_your_writes()`).
    pub fn new(mode: ReadYourWrites) -> RywState {
        RywState {
            mode,
            hinted: false,
            last_write: None,
            open_write: false,
            awaiting_commit: false,
            unproven: false,
            blind: false,
            position: None,
            position_due: false,
            position_lost: false,
        }
    }

    /// Forgets everything observed (DISCARD ALL, RESET ALL, COM_RESET_CONNECTION...): the
    /// client asked for a fresh session, and a pooled application connection that wrote once
    /// must not keep every later request of other users on the primary.
    pub fn reset(&mut self) {
        *self = RywState::new(self.mode);
    }

    /// Changes the mode (after a reload); what was observed is kept.
    pub fn set_mode(&mut self, mode: ReadYourWrites) {
        self.mode = mode;
    }

    /// Records a decision the session executed at `now`. Refused statements are ignored.
    pub fn observe(&mut self, decision: &Decision, now: Instant) {
        if decision.pool().is_none() {
            return;
        }
        if decision.pins_primary {
            self.hinted = true;
        }
        if decision.writes {
            self.last_write = Some(now);
            self.open_write = true;
            self.awaiting_commit = true;
            self.blind = false;
        } else if (self.open_write || self.unproven) && decision.ends_transaction() {
            self.last_write = Some(now);
            self.blind = !self.open_write && !self.awaiting_commit;
            self.open_write = false;
            self.unproven = false;
            self.awaiting_commit = true;
        }
    }

    /// causal: a statement of an explicit transaction that is not declared read-only ran on
    /// the primary. The analysis cannot prove it wrote nothing (a STABLE function may call a
    /// VOLATILE one that inserts; triggers, rules and `DO` write unseen), so the transaction's
    /// end learns a commit position as after a write: a read never misses a write the parse
    /// did not see. Other modes keep trusting the analysis.
    pub fn observe_unproven(&mut self) {
        if self.mode == ReadYourWrites::Causal {
            self.unproven = true;
        }
    }

    /// causal: an autocommit statement the analysis calls a read is about to run on the primary
    /// as its own transaction, where a view, a policy or a function STABLE to the parse may
    /// write unseen. Its commit is awaited as a blind one: a position is learned after it unless
    /// the server, asked inside it, says it has no transaction id ([`RywState::wrote_nothing`]).
    pub fn autocommit_unproven(&mut self) {
        if self.mode == ReadYourWrites::Causal && !self.awaiting_commit {
            self.awaiting_commit = true;
            self.blind = true;
        }
    }

    /// causal: the transaction being ended by the statement just observed is committed only
    /// because it was not proven read-only, and nothing the analysis saw wrote in it: the
    /// session may ask the server whether it wrote ([`RywState::wrote_nothing`]).
    pub fn commit_unproven(&self) -> bool {
        self.blind && self.awaiting_commit
    }

    /// causal: the server reported that the transaction being committed has no transaction id
    /// (`pg_current_xact_id_if_assigned()` is NULL): it changed nothing, triggers, rules and
    /// functions included, so its commit leaves no position to wait for.
    pub fn wrote_nothing(&mut self) {
        if self.commit_unproven() {
            self.awaiting_commit = false;
            self.blind = false;
        }
    }

    /// causal: the open transaction moved to another server before anything ran in it (a
    /// `SET TRANSACTION` that changes where it belongs): what its `BEGIN` implied is void.
    pub fn transaction_moved(&mut self) {
        self.unproven = false;
    }

    /// causal: the statement or transaction that just ended committed nothing (an error rolled
    /// it back, a ROLLBACK, a PREPARE TRANSACTION): no commit position is due for it, so a
    /// failed write does not keep the session's reads on the primary. Positions learned
    /// before are kept. A transaction that ended uncommitted no statement of it announced
    /// (the router's own COMMIT, of MySQL's `SET autocommit = 1`) leaves nothing unproven.
    pub fn nothing_committed(&mut self) {
        self.position_due = false;
        self.awaiting_commit = false;
        self.blind = false;
        self.unproven = false;
    }

    /// The backend finished a statement at `now` and reports whether a transaction is still
    /// open. A write is visible to others only once it commits, which for a long UPDATE may be
    /// seconds after it was routed: the window restarts here when the write (or the commit of
    /// a transaction that wrote) has just completed outside a transaction.
    pub fn statement_done(&mut self, now: Instant, in_transaction: bool) {
        // `unproven` outside a transaction: a text that ran a whole transaction (`BEGIN; ...;
        // COMMIT` as one query), whose commit no statement of its own announced.
        if (self.awaiting_commit || self.unproven) && !in_transaction {
            self.last_write = Some(now);
            self.awaiting_commit = false;
            self.open_write = false;
            self.unproven = false;
            self.blind = false;
            self.position_due = self.mode == ReadYourWrites::Causal;
        }
    }

    /// causal: whether a write (or the end of a transaction that wrote) was routed and has not
    /// finished: the statement about to run may commit it.
    pub fn commit_awaited(&self) -> bool {
        self.mode == ReadYourWrites::Causal && self.awaiting_commit
    }

    /// causal: whether a write just committed on the session's backend connection, whose
    /// commit position must be read there before the connection serves anyone else.
    pub fn position_due(&self) -> bool {
        self.position_due
    }

    /// causal: the commit position read after the commit (`None`: it could not be read, so the
    /// session's reads stay on the primary until a later commit's position is learned).
    pub fn learned(&mut self, position: Option<Position>) {
        self.position_due = false;
        match position {
            Some(p) => {
                self.raise(p);
                self.position_lost = false;
            }
            None => self.position_lost = true,
        }
    }

    fn raise(&mut self, p: Position) {
        match self.position.as_mut() {
            Some(old) => old.raise(&p),
            None => self.position = Some(p),
        }
    }

    /// Whether adopting `position` keeps the session's position within the domain limit
    /// (`id::position::MAX_GTID_DOMAINS`, #33).
    pub fn can_adopt(&self, position: &Position) -> bool {
        self.position.as_ref().is_none_or(|p| p.can_raise(position))
    }

    /// causal: a client handed over a token (another connection's position): this session's
    /// reads wait for it too. Outside `causal` mode nothing changes.
    pub fn adopt(&mut self, position: Position) {
        if self.mode == ReadYourWrites::Causal {
            self.raise(position);
        }
    }

    /// causal: a client handed over a token ([`RywState::token`] of another connection):
    /// this session's reads wait for what it names. `primary`: they stay on the primary until
    /// a commit position of this session's own is learned, as for the session that lost its
    /// position; empty: nothing changes. Outside `causal` mode nothing changes.
    pub fn adopt_token(&mut self, token: Token) {
        match token {
            Token::Empty => {}
            Token::Primary => self.position_lost |= self.mode == ReadYourWrites::Causal,
            Token::At(position) => self.adopt(position),
        }
    }

    /// What a session moving to a new binary keeps of its reads' requirements (#40), with its
    /// write window as an age at `now`. Conservative where the state is mid-statement: a
    /// write in flight restarts the window, and a position not learned yet hands over
    /// `primary`.
    pub fn freeze(&self, now: Instant) -> FrozenRyw {
        let pending = self.awaiting_commit || self.open_write || self.unproven;
        let age =
            if pending { Some(Duration::ZERO) } else { self.last_write.map(|t| now.saturating_duration_since(t)) };
        let token = match self.token() {
            _ if self.mode == ReadYourWrites::Causal && (pending || self.position_due) => Token::Primary,
            token => token,
        };
        FrozenRyw { hinted: self.hinted, write_age_ms: age.map(|a| a.as_millis() as u64), token: token.to_string() }
    }

    /// The state [`RywState::freeze`] kept, in `mode` (the new binary's), at `now`.
    pub fn thaw(mode: ReadYourWrites, frozen: &FrozenRyw, now: Instant) -> RywState {
        let mut ryw = RywState::new(mode);
        ryw.hinted = frozen.hinted;
        ryw.last_write = frozen.write_age_ms.map(|ms| now.checked_sub(Duration::from_millis(ms)).unwrap_or(now));
        // A token that does not parse here names something this binary cannot check: primary.
        ryw.adopt_token(Token::parse(&frozen.token).unwrap_or(Token::Primary));
        ryw
    }

    /// causal: the token that hands this session's reads' requirement to another connection
    /// (`SHOW querypilot.causal_token`). A lost position gives `primary`, never the older
    /// position learned before it, which a replica may have applied without the write that
    /// followed; a `route=primary` hint pins only this session, so its position is handed
    /// over too.
    pub fn token(&self) -> Token {
        match &self.position {
            _ if self.mode != ReadYourWrites::Causal => Token::Empty,
            _ if self.position_lost => Token::Primary,
            Some(position) => Token::At(position.clone()),
            None => Token::Empty,
        }
    }

    /// causal: the position a replica must have replayed before it may serve this session's
    /// reads (`None`: any replica may).
    pub fn required_position(&self) -> Option<&Position> {
        if self.mode == ReadYourWrites::Causal && !self.hinted {
            self.position.as_ref()
        } else {
            None
        }
    }

    /// True while the session's reads must go to the primary.
    pub fn pinned(&self, now: Instant) -> bool {
        if self.hinted {
            return true;
        }
        match (self.mode, self.last_write) {
            // A write whose commit position is not known yet (in flight, or unreadable).
            (ReadYourWrites::Causal, _) => self.awaiting_commit || self.position_due || self.position_lost,
            (ReadYourWrites::None, _) | (_, None) => false,
            (ReadYourWrites::Session, Some(_)) => true,
            (ReadYourWrites::Window(window), Some(at)) => now.saturating_duration_since(at) < window,
        }
    }

    /// Time left in the window at `now` (`None` when not pinned by a window), for diagnostics.
    pub fn window_left(&self, now: Instant) -> Option<Duration> {
        match (self.mode, self.last_write) {
            (ReadYourWrites::Window(window), Some(at)) => {
                window.checked_sub(now.saturating_duration_since(at)).filter(|d| !d.is_zero())
            }
            _ => None,
        }
    }
}
