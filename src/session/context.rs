//! What a session may use of the core it runs on: configuration, pools, the core's router,
//! digest statistics, counters, signals.
//!
//! One `CoreContext` per core, shared by that core's sessions through `Rc`; it never crosses
//! threads. The core assembly (`crate::core`) builds it and swaps snapshots into it. Every
//! `RefCell` here is borrowed only inside one synchronous call, never across an `.await`.

mod database;
mod in_force;
mod udf;

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use self::in_force::InForce;
use super::derive::Derivations;
use crate::auth::{FailureLimiter, SecretCache};
use crate::config::{Config, ConsoleRole, PoolRole, Protocol, ReadYourWrites};
use crate::id::{CancelKey, CoreId, KillRequest, KillTarget};
use crate::metrics::{self, CausalOutcome, CoreCounters, DigestSnapshot, FallbackOutcome};
use crate::pool::{Conn, CorePool, Looked, PassThrough, PoolError, PoolSet, Shape};
use crate::routing::causal::TokenUse;
use crate::routing::{
    CacheStats, Catalogs, Decision, DecisionKind, Outcome, RouteInput, Router, RuleSet, StatementKey,
};
use crate::rt::{CoreQueues, Event};
use crate::session::cancel::CancelRegistry;
use crate::session::digest::DigestTable;
use crate::session::engine::digest::Timing;
use crate::session::engine::ryw;
use crate::sql::analyze::{Effects, Operation};

/// A pool a statement goes to, found once for the statement (#39).
#[derive(Clone)]
pub struct Chosen {
    /// The pool's name, as routing (or the session) chose it.
    pub name: Arc<str>,
    /// The pool of that name in force; `None` when there is none.
    pub pool: Option<Rc<CorePool>>,
}

/// Core-local state shared by the sessions of one core.
pub struct CoreContext {
    /// The core this context belongs to.
    pub core: CoreId,
    /// Task queues of this core.
    pub queues: CoreQueues,
    /// Counters owned by this core.
    pub counters: CoreCounters,
    /// Set when the router starts draining: idle sessions close, busy ones finish first.
    pub drain: Event,
    /// Sessions of this core that can be cancelled, by router-issued key.
    pub cancels: CancelRegistry,
    config: RefCell<LocalConfig>,
    pools: RefCell<InForce>,
    router: RefCell<Router>,
    digests: RefCell<DigestTable>,
    /// Where this core's sessions come from and go to.
    turnover: Turnover,
    links: CoreLinks,
    /// What this core's client logins share.
    logins: Logins,
}

/// The numbering of a core's sessions, and where they go at a binary upgrade.
struct Turnover {
    /// The sequence number of the next session's cancel key.
    next_session: Cell<u32>,
    /// Where idle sessions go while the router hands over to a new binary (#40).
    moving: RefCell<Option<super::handover::HandOverSink>>,
}

/// What the client logins of one core share.
struct Logins {
    /// Failed logins per source address (`auth.max_failed_logins`, #23).
    failures: RefCell<FailureLimiter>,
    /// Secrets fetched by the auth query (#23); a reload flushes it.
    secrets: RefCell<SecretCache>,
    /// Key derivations, one slice per loop turn in the background (#41).
    derivations: Rc<Derivations>,
}

assert_not_send!(CoreContext);

/// The configuration as published and this core's own copy of it. Sessions clone the copy's
/// `Arc` per statement; a shared one would bounce its reference count between cores (#20).
struct LocalConfig {
    published: Arc<Config>,
    local: Arc<Config>,
}

impl LocalConfig {
    fn of(published: Arc<Config>) -> Self {
        let local = Arc::new(Config::clone(&published));
        LocalConfig { published, local }
    }
}

/// Hands a logged-in admin-console client (its connection, unread bytes, user and role) to the
/// console thread.
pub type HandOffConsole = Box<dyn Fn(std::net::TcpStream, Vec<u8>, String, ConsoleRole)>;

/// Where a core that handled a cancel or KILL says whether it found the session.
pub type KillReply = futures_channel::mpsc::UnboundedSender<bool>;

/// What the core assembly lends its sessions to reach the rest of the process, so sessions own
/// no channel of their own.
pub struct CoreLinks {
    /// Hands cancels and KILLs for sessions of other cores to the control plane, with the
    /// channel each core that looked answers on (whether it found the session, once done).
    pub forward_cancel: Box<dyn Fn(KillRequest, KillReply)>,
    /// Hands admin-console clients to the console thread.
    pub console: HandOffConsole,
    /// What every session of the process holds for its client (`limits.client_buffer_budget`,
    /// #33).
    pub buffers: Arc<metrics::ClientBudget>,
    /// #36: asks every core to let go of a database by the deadline; each answers on the channel.
    pub release_database: Box<dyn Fn(String, Instant, ReleaseReply)>,
    /// How many cores answer a release.
    pub cores: usize,
    /// The process-wide budgets, for the pools made from `[pool_template]` (#36).
    pub budgets: crate::pool::BudgetRegistry,
}

/// Where each core says it let go of a database (#36).
pub type ReleaseReply = futures_channel::mpsc::UnboundedSender<CoreId>;

impl CoreContext {
    /// Builds the context of `core` serving `rules` (with the built-in function catalogs until
    /// the loaded ones arrive); `links` reach the control plane and the admin console thread.
    pub fn new(
        core: CoreId,
        queues: CoreQueues,
        config: Arc<Config>,
        rules: Arc<RuleSet>,
        pools: PoolSet,
        links: CoreLinks,
    ) -> Self {
        let login_failures = RefCell::new(limiter(&config));
        let secrets = RefCell::new(secret_cache(&config));
        Self {
            core,
            queues,
            counters: CoreCounters::default(),
            drain: Event::new(),
            cancels: CancelRegistry::default(),
            config: RefCell::new(LocalConfig::of(config)),
            pools: RefCell::new(InForce::new(pools)),
            router: RefCell::new(Router::new(rules.for_core(), Catalogs::builtin())),
            digests: RefCell::default(),
            turnover: Turnover { next_session: Cell::new(1), moving: RefCell::new(None) },
            logins: Logins { failures: login_failures, secrets, derivations: Derivations::new(queues.background) },
            links,
        }
    }

    /// Whether logins from `addr` are refused unchecked now (too many failures, #23).
    pub fn login_blocked(&self, addr: Option<std::net::IpAddr>) -> bool {
        addr.is_some_and(|a| self.logins.failures.borrow_mut().blocked(a, crate::rt::now()))
    }

    /// Counts a failed login from `addr`.
    pub fn login_failed(&self, addr: Option<std::net::IpAddr>) {
        if let Some(a) = addr {
            self.logins.failures.borrow_mut().failed(a, crate::rt::now());
        }
    }

    /// The auth query cache of this core (#23), borrowed for one synchronous call.
    /// This core's client-login key derivations.
    pub(super) fn derivations(&self) -> &Rc<Derivations> {
        &self.logins.derivations
    }

    pub fn secrets(&self) -> std::cell::RefMut<'_, SecretCache> {
        self.logins.secrets.borrow_mut()
    }

    /// Hands a logged-in console client to the console thread.
    pub fn hand_off_console(&self, stream: std::net::TcpStream, leftover: Vec<u8>, user: String, role: ConsoleRole) {
        (self.links.console)(stream, leftover, user, role);
    }

    /// The process-wide budget of what sessions hold for their clients (#33).
    pub fn client_budget(&self) -> &Arc<metrics::ClientBudget> {
        &self.links.buffers
    }

    /// The configuration in force now (cheap clone of this core's own `Arc`; hold it for one
    /// statement).
    pub fn config(&self) -> Arc<Config> {
        self.config.borrow().local.clone()
    }

    /// Whether `config` is the snapshot this core serves (a rule change through the API keeps it).
    pub fn serves(&self, config: &Arc<Config>) -> bool {
        Arc::ptr_eq(&self.config.borrow().published, config)
    }

    /// The pools in force now.
    pub fn pools(&self) -> Rc<PoolSet> {
        self.pools.borrow().set().clone()
    }

    /// The pool called `name` in force, found once for a statement and passed on (#39):
    /// `current`, the session's own pool, when it is that pool (no lookup), else the pool set's.
    pub fn pool_named(&self, name: &str, current: &Rc<CorePool>) -> Option<Rc<CorePool>> {
        self.pools.borrow().named(name, current)
    }

    /// The pool called `name` ([`Self::pool_named`]), with its name.
    pub fn choose(&self, name: Arc<str>, current: &Rc<CorePool>) -> Chosen {
        let pool = self.pool_named(&name, current);
        Chosen { name, pool }
    }

    /// The pool `d` sends its statement to ([`Self::pool_named`]), if it runs and that pool
    /// exists.
    pub fn decided_pool(&self, d: &Decision, current: &Rc<CorePool>) -> Option<Rc<CorePool>> {
        d.pool().and_then(|name| self.pool_named(name, current))
    }

    /// [`Self::checkout`], its error worded as client error type `E` words it.
    pub async fn checkout_for<E: for<'e> From<&'e PoolError>>(
        &self,
        pool: &mut Rc<CorePool>,
        protocol: Protocol,
        who: Option<&PassThrough>,
        shape: &Shape<'_>,
        looked: Option<Looked>,
    ) -> Result<Conn, E> {
        self.checkout(pool, protocol, who, shape, looked).await.map_err(|e| E::from(&e))
    }

    /// Borrows a connection of `pool` speaking `protocol`, waiting up to the pool's `acquire`
    /// timeout (counted from now, on the pool as it is when called). A pool that
    /// a reload rebuilt (new backends, limits...) is first swapped for its successor in the
    /// current pool set, also when the reload happened while the checkout waited (between PAUSE
    /// and RESUME), so a new transaction always runs on the configuration in force. `shape` is
    /// the statement the connection is for, which the pool's limiter may hold back (#41).
    /// `looked`: the checkout's first look on `pool` ([`CorePool::lend_now`]), in this turn.
    pub async fn checkout(
        &self,
        pool: &mut Rc<CorePool>,
        protocol: Protocol,
        who: Option<&PassThrough>,
        shape: &Shape<'_>,
        mut looked: Option<Looked>,
    ) -> Result<Conn, PoolError> {
        let deadline = crate::rt::now() + pool.config.timeouts.acquire;
        loop {
            if pool.is_replaced() {
                // A look on the pool replaced is none on its successor; a unit it held goes back.
                looked = None;
                let Some(successor) = self.pools().get(pool.config.name.as_str()).cloned() else {
                    return Err(PoolError::NoBackend(pool.config.name.clone()));
                };
                *pool = successor;
            }
            match pool.checkout_shaped(protocol, who, deadline, shape, looked.take()).await {
                Err(PoolError::Replaced(_)) => continue,
                other => return other,
            }
        }
    }

    /// Swaps in a new configuration, pool set and rule set (between statements: sessions re-read
    /// them per statement, in-flight statements keep the `Rc`s they hold). The router's plan
    /// cache is cleared.
    pub fn apply(&self, config: Arc<Config>, pools: PoolSet, rules: Arc<RuleSet>) {
        *self.logins.failures.borrow_mut() = limiter(&config);
        *self.logins.secrets.borrow_mut() = secret_cache(&config);
        *self.config.borrow_mut() = LocalConfig::of(config);
        self.pools.borrow_mut().swap(pools);
        self.router.borrow_mut().set_rules(rules.for_core());
    }

    /// Switches the router to a new rule set, same configuration (a rule added or removed
    /// through the admin API); clears its plan cache.
    pub fn set_rules(&self, rules: Arc<RuleSet>) {
        self.router.borrow_mut().set_rules(rules.for_core());
    }

    /// Switches the router to newly loaded function catalogs (clears its plan cache).
    pub fn set_catalogs(&self, catalogs: Catalogs) {
        self.router.borrow_mut().set_catalogs(catalogs);
    }

    /// Decides where a statement runs, with this core's router and plan cache.
    pub fn route(&self, input: &RouteInput<'_>) -> Decision {
        self.router.borrow_mut().route(input)
    }

    /// The routing key of `sql` under the current normalization strategy, to keep with a
    /// prepared statement and pass back in [`RouteInput::key`].
    pub fn statement_key(&self, sql: &str, protocol: Protocol) -> StatementKey {
        self.router.borrow().key(sql, protocol)
    }

    /// The session effects of `sql` ([`Router::session_effects`]: a repeated parameterized text
    /// is not scanned again).
    pub fn session_effects(&self, sql: &str, protocol: Protocol) -> Effects {
        self.router.borrow().session_effects(sql, protocol)
    }

    /// Which transaction block `sql` opens ([`Router::opens_transaction`]: a repeated
    /// parameterized text is not scanned again).
    pub fn opens_transaction(&self, sql: &str, protocol: Protocol) -> Option<&'static str> {
        self.router.borrow().opens_transaction(sql, protocol)
    }

    /// What `sql` is to the causal token ([`Router::token_use`]: read with its effects and
    /// opener in one pass, a repeated parameterized text not again).
    pub fn token_use(&self, sql: &str, protocol: Protocol) -> Option<TokenUse> {
        self.router.borrow().token_use(sql, protocol)
    }

    /// Applies `routing.replica_fallback` to a read/write-split decision for `target`: the
    /// pool to use, or the reason reads must fail. A read pool with no healthy backend sends
    /// reads to the write pool ("primary") or fails them ("error"); health is a few atomic loads.
    /// When `count`, a fallback is counted on the read pool (`sqp_replica_fallbacks_total`).
    pub fn replica_fallback(&self, protocol: Protocol, target: Arc<str>, count: bool) -> Result<Arc<str>, String> {
        let config = self.config();
        let write = config.routing.primary_pool(protocol);
        let pools = self.pools();
        let Some(read) = pools.get(&target).filter(|p| write != Some(&*target) && !p.has_healthy_backend()) else {
            return Ok(target);
        };
        let to_primary = ryw::fallback(config.routing.replica_fallback, write);
        if count {
            read.counters.fell_back(if to_primary.is_some() {
                FallbackOutcome::Primary
            } else {
                FallbackOutcome::Error
            });
        }
        to_primary.map(Arc::from).ok_or_else(|| {
            format!("no healthy backend in read pool \"{target}\" and routing.replica_fallback = \"error\"")
        })
    }

    /// After a split read's connect to pool `current` failed (and marked it down): the pool
    /// `routing.replica_fallback` sends the read to instead, when it is another one.
    pub fn split_fallback(&self, protocol: Protocol, current: &Arc<str>, count: bool) -> Option<Rc<CorePool>> {
        let next = self.replica_fallback(protocol, current.clone(), count).ok().filter(|n| n != current)?;
        self.pools().get(&next).cloned()
    }

    /// causal: the pool a read on `from` goes to when none of its replicas replayed the
    /// session's position in time: `protocol`'s primary pool (one whose backends speak
    /// `speaking`, when given), or none when the read must fail. Counted on `from` either way.
    pub fn causal_fallback(
        &self,
        from: &CorePool,
        protocol: Protocol,
        speaking: Option<Protocol>,
    ) -> Option<Rc<CorePool>> {
        let config = self.config();
        let primary = config.routing.primary_pool(protocol).and_then(|p| self.pools().get(p).cloned());
        let primary = primary.filter(|p| speaking.is_none_or(|want| p.config.backend_protocol(protocol) == want));
        let to = ryw::fallback(config.routing.replica_fallback, primary);
        from.counters.causal_read(if to.is_some() { CausalOutcome::FellBackToPrimary } else { CausalOutcome::Error });
        to
    }

    /// `pool`, or the pool that replaced it on a reload, when there is one.
    pub fn current(&self, pool: &Rc<CorePool>) -> Rc<CorePool> {
        let successor = pool.is_replaced().then(|| self.pools().get(pool.name()).cloned()).flatten();
        successor.unwrap_or_else(|| pool.clone())
    }

    /// Whether a read may run anywhere but a primary (a split or a replica-role pool): only then
    /// is a commit position worth a round trip (#22).
    pub fn has_replica_reads(&self) -> bool {
        self.router.borrow().rules().has_replica_reads()
    }

    /// Whether `protocol`'s reads are split off to a read pool.
    pub fn splits_reads(&self, protocol: Protocol) -> bool {
        self.router.borrow().rules().read_pool(protocol).is_some()
    }

    /// Whether `pool` is the read pool of `protocol`'s read/write split.
    pub fn is_read_pool(&self, protocol: Protocol, pool: &str) -> bool {
        self.router.borrow().rules().read_pool(protocol).is_some_and(|r| **r == *pool)
    }

    /// Whether `pool` (of `role`) is a replica for `protocol` clients under the rules in force
    /// ([`crate::session::engine::route::on_replica`]).
    pub fn on_replica(&self, role: PoolRole, pool: &str, protocol: Protocol) -> bool {
        crate::session::engine::route::on_replica(role, pool, self.router.borrow().rules(), protocol)
    }

    /// Whether `pool` has the replica role in the rules in force.
    pub fn is_replica_pool(&self, pool: &str) -> bool {
        self.router.borrow().rules().is_replica(pool)
    }

    /// The read-your-writes mode of the rules in force (for a session's `RywState`).
    pub fn read_your_writes(&self) -> ReadYourWrites {
        self.router.borrow().rules().read_your_writes()
    }

    /// The rule set in force now.
    pub fn rules(&self) -> Rc<RuleSet> {
        self.router.borrow().rules().clone()
    }

    /// The router's plan-cache counters (monotonic), for metrics.
    pub fn cache_stats(&self) -> CacheStats {
        self.router.borrow().cache_stats()
    }

    /// Counts a session's first pin, `first` (`sqp_session_pins_total{reason}`), once it starts
    /// to keep the session's connection.
    pub fn count_pin(&self, first: Option<crate::sql::analyze::PinReason>) {
        if let Some(reason) = first {
            self.counters.pinned(reason.as_str());
        }
    }

    /// Counts a decision in the metrics: `sqp_routing_decisions_total{decision,pool}` on the
    /// chosen pool, `decided` ([`Self::decided_pool`]: none when no pool has the name routing
    /// chose; a statement that runs nowhere, rejected by a rule or refused because of a hint,
    /// counts as `reject` without a pool) and `sqp_statement_operations_total{operation}`.
    pub fn count_decision(&self, d: &Decision, decided: Option<&CorePool>) {
        self.counters.operation(operation_label(d.facts.operation));
        match &d.outcome {
            Outcome::Route(_) => {
                if let Some(p) = decided {
                    p.counters.decided(decision_label(d.kind));
                    p.counters.statement();
                }
            }
            Outcome::Reject(_) | Outcome::Error(_) => self.counters.rejected(),
        }
    }

    /// Ends `timing` now and adds the statement it timed (if any) to this core's digest
    /// statistics and to `pool`'s `sqp_statement_duration_seconds`. Cheap when the shape is known
    /// (no allocation unless the shape or its pool is new; the pool's counters are this core's).
    pub fn record_digest(&self, timing: &mut Timing, protocol: Protocol, pool: &CorePool) {
        if timing.statement().is_none() {
            // Asked again as the next statement is routed, the last one having ended with its
            // response: nothing is timed, so the clock is not read.
            return;
        }
        if let Some(execution) = timing.finish(crate::rt::now(), protocol, &pool.config.name) {
            pool.counters.statement_finished(execution.elapsed);
            self.digests.borrow_mut().record(&execution);
        }
    }

    /// A copy of this core's digest statistics.
    pub fn digests(&self) -> DigestSnapshot {
        self.digests.borrow().snapshot()
    }

    /// Forgets this core's digest statistics.
    pub fn reset_digests(&self) {
        self.digests.borrow_mut().reset();
    }

    /// The sequence number the next session's cancel key gets: a new binary taking over goes on
    /// from it, so no key it issues equals one a moved client holds (#40).
    pub fn next_session_seq(&self) -> u32 {
        self.turnover.next_session.get()
    }

    /// Issues keys from `seq` on (see [`Self::next_session_seq`]).
    pub fn continue_sessions_from(&self, seq: u32) {
        self.turnover.next_session.set(seq);
    }

    /// Sends idle sessions to `sink` from now on (#40).
    pub(super) fn set_hand_over(&self, sink: super::handover::HandOverSink) {
        *self.turnover.moving.borrow_mut() = Some(sink);
    }

    /// Whether the router is handing its sessions over to a new binary.
    pub(super) fn handing_over(&self) -> bool {
        self.turnover.moving.borrow().is_some()
    }

    /// Gives a session to the new binary; `false` when no hand-over runs.
    pub(super) fn move_session(&self, handed: super::handover::HandedSession) -> bool {
        match self.turnover.moving.borrow().as_ref() {
            Some(sink) => {
                sink(handed);
                true
            }
            None => false,
        }
    }

    /// A fresh cancel key for a new session of this core.
    pub fn new_cancel_key(&self) -> CancelKey {
        let seq = self.turnover.next_session.get();
        self.turnover.next_session.set(seq.wrapping_add(1));
        CancelKey { pid: CancelKey::make_pid(self.core, seq), secret: rand::random::<i32>() & i32::MAX }
    }

    /// Cancels the statement of the session `req` names, or ends that session, on whichever
    /// core owns it. Resolves once a cancel was delivered to the backend (bounded by the
    /// delivery timeout), with whether some session was found.
    pub async fn kill(&self, req: KillRequest) -> bool {
        let (reply, mut found) = futures_channel::mpsc::unbounded();
        match &req.target {
            // A key issued by another process's core `n` lives on core `n % cores` here (#40).
            KillTarget::Session(key)
                if usize::from(key.core().0) % self.links.cores.max(1) == usize::from(self.core.0) =>
            {
                crate::session::answer_kill(self.cancels.act(*key, req.connection), reply)
            }
            _ => (self.links.forward_cancel)(req, reply),
        }
        // Every core that might own the session answers; the channel ends when all have.
        let any = async {
            while let Some(hit) = futures_lite::StreamExt::next(&mut found).await {
                if hit {
                    return true;
                }
            }
            false
        };
        let limit = crate::session::cancel::DELIVERY_TIMEOUT + std::time::Duration::from_secs(1);
        crate::rt::with_deadline(crate::rt::now() + limit, any).await.unwrap_or(false)
    }
}

/// The `decision` metric label of a routing decision kind (the same names, one for one).
pub fn decision_label(kind: DecisionKind) -> metrics::Decision {
    match kind {
        DecisionKind::TransactionPin => metrics::Decision::TransactionPin,
        DecisionKind::Translation => metrics::Decision::Translation,
        DecisionKind::DynamicRule => metrics::Decision::DynamicRule,
        DecisionKind::Cache => metrics::Decision::Cache,
        DecisionKind::PatternRule => metrics::Decision::PatternRule,
        DecisionKind::RegexRule => metrics::Decision::RegexRule,
        DecisionKind::ReadWriteSplit => metrics::Decision::ReadWriteSplit,
        DecisionKind::Default => metrics::Decision::Default,
        DecisionKind::Reject => metrics::Decision::Reject,
        DecisionKind::Hint => metrics::Decision::Hint,
    }
}

/// The `operation` metric label of an analyzed statement.
pub fn operation_label(op: Operation) -> metrics::Operation {
    match op {
        Operation::Read => metrics::Operation::Read,
        Operation::Write => metrics::Operation::Write,
        Operation::Ddl => metrics::Operation::Ddl,
        Operation::TransactionControl(_) => metrics::Operation::Transaction,
        Operation::Session => metrics::Operation::Session,
        Operation::Admin => metrics::Operation::Admin,
        Operation::Unknown => metrics::Operation::Unknown,
    }
}

/// The failed-login limiter `config` asks for: `auth.max_failed_logins` per minute.
fn limiter(config: &Config) -> FailureLimiter {
    FailureLimiter::new(config.auth.max_failed_logins, Duration::from_secs(60))
}

/// An empty auth query cache with the configured TTL.
fn secret_cache(config: &Config) -> SecretCache {
    SecretCache::new(config.auth.query.as_ref().map_or(Duration::ZERO, |q| q.cache_ttl))
}

#[cfg(test)]
mod tests;
