//! Who may check out a pool's connections now (#41): per statement shape (digest) a fixed
//! (`max_concurrent`) or learned (`adaptive_limit`, see [`aimd`]) limit on the checkouts it
//! holds at once, and per user a weighted fair share of the pool while another user waits.
//!
//! In transaction and statement modes a statement that starts a transaction checks out a
//! connection and holds it until the transaction ends, so "statements of one shape running at
//! once" is "connections lent for checkouts caused by that shape": the limit is a permit taken
//! before the checkout and given back with the connection. What is over its limit queues here,
//! first come first served per shape and per user, and a permit freed goes to the first waiter
//! it admits.
//!
//! Sans-IO and pure: time is a parameter, waiters are tickets; `pool::admit` does the waiting.
//! One table per pool per core, like the pool itself: the limits are per core (a shape may run
//! `cores × limit` at once across a process, which keeps the statement path free of memory
//! another core writes).

mod aimd;
#[cfg(test)]
mod tests;

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::rc::Rc;
use std::time::Instant;

pub use aimd::{Aimd, Sample};

use crate::config::ShapeLimits;
use crate::metrics::LimitRow;

/// Shapes a table follows at most; a shape arriving when it is full of busy ones is not limited.
const MAX_SHAPES: usize = 1024;
/// Characters of a statement's text kept to name its shape in errors and views.
const TEXT_CHARS: usize = 80;

/// What a checkout is for: the statement's shape, when the session knows it, and the user.
#[derive(Debug, Clone, Copy, Default)]
pub struct Shape<'a> {
    /// The statement's fingerprint (`fingerprint_hex` in `/api/stats/digests`).
    pub digest: Option<u64>,
    /// The statement's text, to name the shape.
    pub text: &'a str,
    /// The client's user.
    pub user: &'a str,
}

impl<'a> Shape<'a> {
    /// A checkout for `statement` (fingerprint and text, if one is being routed) of `user`.
    pub fn new(statement: Option<(u64, &'a str)>, user: &'a str) -> Self {
        Self { digest: statement.map(|(d, _)| d), text: statement.map_or("", |(_, t)| t), user }
    }
}

/// A waiter's place in the queue.
pub type Ticket = u64;

/// Admission granted: what must be given back, by [`Table::release`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grant {
    digest: Option<u64>,
    user: Option<Rc<str>>,
}

impl Grant {
    /// Whether the grant holds anything (an untracked checkout holds nothing to give back).
    pub fn is_tracked(&self) -> bool {
        self.digest.is_some() || self.user.is_some()
    }
}

/// The answer to a checkout.
#[derive(Debug, PartialEq, Eq)]
pub enum Admit {
    /// Go on to the pool.
    Go(Grant),
    /// Over a limit: wait for the ticket to be granted.
    Wait(Ticket),
}

/// Why a checkout was refused, naming the shape or the user (the client's error says it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Over {
    /// The shape's limit.
    Shape {
        /// Its fingerprint.
        digest: u64,
        /// The start of a statement of it.
        text: String,
        /// The limit in force.
        limit: u32,
    },
    /// The user's share of the pool while other users waited.
    Share {
        /// The user.
        user: String,
        /// Its share, in connections.
        share: u32,
    },
    /// The pool's queue for a connection: the checkouts ahead would keep this one waiting past
    /// its deadline (`pool::waiters` measures how fast the line moves), so it is turned away at
    /// once rather than at the deadline.
    Queue {
        /// The wait expected, in milliseconds.
        expected_ms: u128,
        /// What was left of the checkout's `acquire_timeout`, in milliseconds.
        left_ms: u128,
    },
}

impl fmt::Display for Over {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Over::Shape { digest, text, limit } => write!(
                f,
                "too many statements of shape {digest:016x} (\"{text}\") running at once: its limit is {limit}"
            ),
            Over::Share { user, share } => {
                write!(f, "user \"{user}\" holds its fair share of {share} connections while other users wait")
            }
            Over::Queue { expected_ms, left_ms } => write!(
                f,
                "the queue for a connection would hold this statement about {expected_ms} ms, past the {left_ms} ms \
                 left of its acquire_timeout"
            ),
        }
    }
}

/// One shape's limit and load.
#[derive(Debug)]
struct Entry {
    /// A fixed limit (`max_concurrent`), else the learned one.
    fixed: Option<u32>,
    learned: Aimd,
    in_use: u32,
    queued: u32,
    rejected: u64,
    text: String,
}

impl Entry {
    fn limit(&self) -> u32 {
        self.fixed.unwrap_or_else(|| self.learned.limit())
    }
}

/// One user's load, for the fair share.
#[derive(Debug, Default)]
struct UserLoad {
    in_use: u32,
    /// Checkouts of the user queued here (they make the user count in the shares).
    queued: u32,
    /// Checkouts of the user queued in the pool for a connection.
    waiting: u32,
}

impl UserLoad {
    fn idle(&self) -> bool {
        self.in_use == 0 && self.queued == 0 && self.waiting == 0
    }
}

/// A queued checkout.
#[derive(Debug)]
struct Waiter {
    ticket: Ticket,
    digest: Option<u64>,
    user: Option<Rc<str>>,
}

/// A pool's limits and who holds and waits for them, on one core.
#[derive(Debug)]
pub struct Table {
    policy: ShapeLimits,
    /// The pool's connections (every backend): the learned limits' ceiling, the shares' whole.
    capacity: u32,
    shapes: HashMap<u64, Entry>,
    users: HashMap<Rc<str>, UserLoad>,
    queue: VecDeque<Waiter>,
    granted: HashMap<Ticket, Grant>,
    next: Ticket,
    /// Checkouts queued in the pool for a connection now, by shape (`None`: untracked), with
    /// how many: the shapes waiting are few, so a release looks through them all.
    waiting: Vec<(Option<u64>, u32)>,
}

impl Table {
    /// A table enforcing `policy` on a pool of `capacity` connections.
    pub fn new(policy: &ShapeLimits, capacity: u32) -> Self {
        Self {
            policy: policy.clone(),
            capacity: capacity.max(1),
            shapes: HashMap::new(),
            users: HashMap::new(),
            queue: VecDeque::new(),
            granted: HashMap::new(),
            next: 0,
            waiting: Vec::new(),
        }
    }

    /// Admits a checkout for `shape` now, or queues it.
    pub fn admit(&mut self, shape: &Shape<'_>) -> Admit {
        let digest = shape.digest.filter(|d| self.follow(*d, shape.text));
        let user = self.policy.fair_share.then(|| self.user_key(shape.user));
        let grant = Grant { digest, user };
        if !grant.is_tracked() {
            return Admit::Go(grant);
        }
        // First come, first served per shape: nobody passes a waiter of its shape. (Not per
        // user: a user's lookup must not queue behind its own report held by the report's limit.)
        let behind = digest.and_then(|d| self.shapes.get(&d)).is_some_and(|e| e.queued > 0);
        if !behind && self.over(&grant).is_none() {
            self.take(&grant);
            return Admit::Go(grant);
        }
        self.next += 1;
        let ticket = self.next;
        if let Some(e) = digest.and_then(|d| self.shapes.get_mut(&d)) {
            e.queued += 1;
        }
        if let Some(u) = grant.user.as_ref().and_then(|u| self.users.get_mut(u)) {
            u.queued += 1;
        }
        self.queue.push_back(Waiter { ticket, digest, user: grant.user });
        Admit::Wait(ticket)
    }

    /// The grant of a queued `ticket`, once [`Table::release`] or [`Table::pool_waiting`]
    /// granted it.
    pub fn claim(&mut self, ticket: Ticket) -> Option<Grant> {
        self.granted.remove(&ticket)
    }

    /// A queued checkout gives up at `now` (its deadline passed, or its client left): counted as
    /// a rejection of what held it back when `rejected`. Returns what held it back, and the
    /// tickets its leaving grants.
    pub fn abandon(&mut self, ticket: Ticket, rejected: bool, now: Instant) -> (Option<Over>, Vec<Ticket>) {
        if let Some(grant) = self.granted.remove(&ticket) {
            // Granted as it gave up: the permit goes to the next in line.
            return (None, self.release(&grant, None, now));
        }
        let Some(pos) = self.queue.iter().position(|w| w.ticket == ticket) else { return (None, Vec::new()) };
        let Some(w) = self.queue.remove(pos) else { return (None, Vec::new()) };
        let grant = Grant { digest: w.digest, user: w.user };
        let blame = self.blame(&grant);
        if let Some(e) = grant.digest.and_then(|d| self.shapes.get_mut(&d)) {
            e.queued = e.queued.saturating_sub(1);
            e.rejected += u64::from(rejected && matches!(blame, Some(Over::Shape { .. })));
        }
        if let Some(u) = grant.user.as_ref().and_then(|u| self.users.get_mut(u)) {
            u.queued = u.queued.saturating_sub(1);
        }
        // Its leaving may end another user's wait for its share.
        (blame, self.grant_waiting())
    }

    /// What held a queued `grant` back: the limit it is over, else (it waited behind others of
    /// its shape or user) its shape's limit, else its user's share.
    fn blame(&self, grant: &Grant) -> Option<Over> {
        self.over(grant).or_else(|| {
            if let Some((digest, e)) = grant.digest.and_then(|d| self.shapes.get(&d).map(|e| (d, e))) {
                return Some(Over::Shape { digest, text: e.text.clone(), limit: e.limit() });
            }
            let user = grant.user.as_ref()?;
            Some(Over::Share { user: user.to_string(), share: self.share(user) })
        })
    }

    /// Gives back `grant`, learning from `sample` (none when the checkout failed); returns the
    /// tickets now granted.
    pub fn release(&mut self, grant: &Grant, sample: Option<Sample>, now: Instant) -> Vec<Ticket> {
        // A lighter shape queueing for a connection as this one comes back is the damage a shape
        // holding connections does. Its own checkout queueing is not: a shape alone in a full
        // pool would only trade the pool's queue for this one's, with a shorter wait.
        let lighter_waits = grant.digest.is_some_and(|d| self.lighter_waits(d));
        if let Some(e) = grant.digest.and_then(|d| self.shapes.get_mut(&d)) {
            if let Some(s) = sample.filter(|_| self.policy.adaptive) {
                e.learned.sample(Sample { in_use: e.in_use, queued: lighter_waits, ..s }, now);
            }
            e.in_use = e.in_use.saturating_sub(1);
        }
        if let Some(u) = grant.user.as_ref().and_then(|u| self.users.get_mut(u)) {
            u.in_use = u.in_use.saturating_sub(1);
        }
        self.grant_waiting()
    }

    /// One more (`more`) or one fewer checkout of `shape` queues in the pool for a connection:
    /// while one does, shapes slower than it are congested, and other users are held to their
    /// shares (a wait for another user's permit to be given back is left to the limit that
    /// holds it). Returns the tickets granted.
    pub fn pool_waiting(&mut self, shape: &Shape<'_>, more: bool) -> Vec<Ticket> {
        let user = shape.user;
        let digest = shape.digest.filter(|d| self.shapes.contains_key(d));
        match self.waiting.iter().position(|(d, _)| *d == digest) {
            Some(i) if more => {
                if let Some(w) = self.waiting.get_mut(i) {
                    w.1 += 1;
                }
            }
            Some(i) => {
                if let Some(w) = self.waiting.get_mut(i) {
                    w.1 = w.1.saturating_sub(1);
                }
                if self.waiting.get(i).is_some_and(|w| w.1 == 0) {
                    self.waiting.swap_remove(i);
                }
            }
            None if more => self.waiting.push((digest, 1)),
            None => {}
        }
        if !self.policy.fair_share {
            return Vec::new();
        }
        let key = self.user_key(user);
        if let Some(u) = self.users.get_mut(&key) {
            u.waiting = if more { u.waiting + 1 } else { u.waiting.saturating_sub(1) };
        }
        if more {
            return Vec::new();
        }
        self.grant_waiting()
    }

    /// Whether a checkout of a shape lighter than `digest` (a shorter round trip) queues in the
    /// pool now. Checkouts of no followed shape (logins, causal reads) do not count: nothing says
    /// what they weigh.
    fn lighter_waits(&self, digest: u64) -> bool {
        let rtt = |d: u64| self.shapes.get(&d).map(|e| e.learned.round_trip());
        let mine = rtt(digest);
        self.waiting.iter().any(|(d, _)| d.is_some_and(|d| d != digest && rtt(d) < mine))
    }

    /// Checkouts waiting here now, for a shape's limit or a user's share.
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// The shapes followed, busiest first, for metrics and the views.
    pub fn rows(&self) -> Vec<LimitRow> {
        let mut rows: Vec<LimitRow> = self
            .shapes
            .iter()
            .map(|(digest, e)| LimitRow {
                digest: *digest,
                text: e.text.clone(),
                limit: e.limit(),
                fixed: e.fixed.is_some(),
                in_use: e.in_use,
                queued: e.queued,
                rejected: e.rejected,
            })
            .collect();
        rows.sort_by(|a, b| (b.in_use + b.queued).cmp(&(a.in_use + a.queued)).then(a.digest.cmp(&b.digest)));
        rows
    }

    /// Whether `digest` is limited, starting to follow it if it should be (bounded: a full table
    /// forgets an idle learned shape first, and leaves a new one unlimited when none is idle).
    fn follow(&mut self, digest: u64, text: &str) -> bool {
        if self.shapes.contains_key(&digest) {
            return true;
        }
        let fixed = self.policy.max_concurrent.get(&digest).map(|n| n.get());
        if fixed.is_none() && !self.policy.adaptive {
            return false;
        }
        if self.shapes.len() >= MAX_SHAPES {
            let idle = self.shapes.iter().find(|(_, e)| e.in_use == 0 && e.queued == 0 && e.fixed.is_none());
            let Some(idle) = idle.map(|(d, _)| *d) else { return false };
            self.shapes.remove(&idle);
        }
        let text = text.chars().take(TEXT_CHARS).collect();
        let entry = Entry { fixed, learned: Aimd::new(self.capacity), in_use: 0, queued: 0, rejected: 0, text };
        self.shapes.insert(digest, entry);
        true
    }

    /// The key of `user` in the load table, created on first use; idle users are forgotten
    /// once the table grows past the pool's capacity (they weigh nothing in the shares).
    fn user_key(&mut self, user: &str) -> Rc<str> {
        if let Some((k, _)) = self.users.get_key_value(user) {
            return k.clone();
        }
        if self.users.len() >= self.capacity as usize {
            self.users.retain(|_, u| !u.idle());
        }
        let key: Rc<str> = Rc::from(user);
        self.users.insert(key.clone(), UserLoad::default());
        key
    }

    /// What `grant` is over now, if anything: its shape's limit, or its user's share while
    /// another user waits.
    fn over(&self, grant: &Grant) -> Option<Over> {
        if let Some((digest, e)) = grant.digest.and_then(|d| self.shapes.get(&d).map(|e| (d, e))) {
            if e.in_use >= e.limit() {
                return Some(Over::Shape { digest, text: e.text.clone(), limit: e.limit() });
            }
        }
        let user = grant.user.as_ref()?;
        let load = self.users.get(user)?;
        let share = self.share(user);
        // Only a wait for a connection counts: one held by its own shape's limit is not the
        // pool's to share.
        let others_wait = self.users.iter().any(|(k, u)| k != user && u.waiting > 0);
        (load.in_use >= share && others_wait).then(|| Over::Share { user: user.to_string(), share })
    }

    /// `user`'s weighted share of the pool among the users holding or wanting connections.
    fn share(&self, user: &str) -> u32 {
        let weight = |u: &str| self.policy.share_weights.get(u).map_or(1, |w| w.get());
        let total: u64 =
            self.users.iter().filter(|(k, u)| !u.idle() || &***k == user).map(|(k, _)| u64::from(weight(k))).sum();
        let share = u64::from(self.capacity) * u64::from(weight(user)) / total.max(1);
        u32::try_from(share).unwrap_or(u32::MAX).max(1)
    }

    /// Takes what `grant` holds.
    fn take(&mut self, grant: &Grant) {
        if let Some(e) = grant.digest.and_then(|d| self.shapes.get_mut(&d)) {
            e.in_use += 1;
        }
        if let Some(u) = grant.user.as_ref().and_then(|u| self.users.get_mut(u)) {
            u.in_use += 1;
        }
    }

    /// Grants, in queue order, every waiter that fits now and has nobody of its shape still
    /// waiting ahead of it.
    fn grant_waiting(&mut self) -> Vec<Ticket> {
        let mut woken = Vec::new();
        let mut blocked: Vec<u64> = Vec::new();
        let mut i = 0;
        while let Some(w) = self.queue.get(i) {
            let grant = Grant { digest: w.digest, user: w.user.clone() };
            if grant.digest.is_some_and(|d| blocked.contains(&d)) || self.over(&grant).is_some() {
                blocked.extend(grant.digest);
                i += 1;
                continue;
            }
            let ticket = w.ticket;
            self.queue.remove(i);
            self.take(&grant);
            if let Some(e) = grant.digest.and_then(|d| self.shapes.get_mut(&d)) {
                e.queued = e.queued.saturating_sub(1);
            }
            if let Some(u) = grant.user.as_ref().and_then(|u| self.users.get_mut(u)) {
                u.queued = u.queued.saturating_sub(1);
            }
            self.granted.insert(ticket, grant);
            woken.push(ticket);
        }
        woken
    }
}
