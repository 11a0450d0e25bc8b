//! The core-local router: the decision chain over one [`RuleSet`] snapshot, its plan cache and
//! the function catalogs analysis uses. `route` serves traffic; `explain` is the same computation
//! from a fresh analysis that leaves the cache alone.

use std::cell::RefCell;
use std::rc::Rc;
use std::sync::Arc;

use crate::config::{Protocol, RetryPolicy};
use crate::sql::analyze::{
    analyze, opens_transaction, session_effects, Effects, Evidence, Operation, StatementFacts, TxControl,
};
use crate::sql::hint::{route_hint, RouteHint};
use crate::sql::mode::LexMode;
use crate::sql::template::Translated;

use super::cache::{CacheStats, Plan, PlanCache};
use super::causal::{token_use, TokenUse};
use super::decision::{Decision, DecisionError, DecisionKind, Explanation, Facts, Outcome, ReplicaCheck};
use super::memo::KeyMemo;
use super::rules::{RuleSet, Target};
use super::{dialect, Catalogs, RouteInput, StatementKey};

/// One core's router. Replacing the rules or the catalogs empties the cache. Its rules are the
/// core's own copy ([`RuleSet::for_core`]) behind an `Rc`: the router, and with it its plan
/// cache, cannot leave the thread that built it.
#[derive(Debug)]
pub struct Router {
    rules: Rc<RuleSet>,
    catalogs: Catalogs,
    cache: PlanCache,
    /// Keys of texts without literal values, by their bytes (a driver's repeated statements).
    /// In a cell because [`Router::key`] (a named Parse, which sessions ask through a shared
    /// borrow of the router) uses it too; `route` reaches it through `get_mut`, no flag checked.
    memo: RefCell<KeyMemo>,
}

assert_not_send!(Router);

/// What the rules say before the session is taken into account (steps 2–7).
struct Base {
    /// `None`: no rule matched, the split/default decides.
    target: Option<Target>,
    step: DecisionKind,
    rule: Option<Arc<str>>,
    rewritten: Option<Translated>,
    facts: Arc<Facts>,
    /// The facts came from the plan cache.
    cached: bool,
    /// The deciding step itself was answered by the cache.
    from_cache: bool,
    /// The matched rule's own retry policy.
    retry: Option<RetryPolicy>,
    /// The matched rule lets unsafe statements reach a replica-role target (#19).
    allow_writes: bool,
}

impl Base {
    fn rule(target: &Target, step: DecisionKind, name: &Arc<str>, facts: Arc<Facts>) -> Base {
        let (cached, from_cache, rewritten) = (false, false, None);
        Base {
            target: Some(target.clone()),
            step,
            rule: Some(name.clone()),
            rewritten,
            facts,
            cached,
            from_cache,
            retry: None,
            allow_writes: false,
        }
    }
}

impl Router {
    /// A router over `rules`, analyzing with `catalogs`, with an empty cache.
    pub fn new(rules: Rc<RuleSet>, catalogs: Catalogs) -> Router {
        let cache = PlanCache::new(rules.cache_config().size.get());
        Router { rules, catalogs, cache, memo: RefCell::default() }
    }

    /// Switches to a new rule set; the cache is cleared (counted as an invalidation).
    pub fn set_rules(&mut self, rules: Rc<RuleSet>) {
        self.cache.reset(rules.cache_config().size.get());
        self.rules = rules;
    }

    /// Switches to new function catalogs (UDFs reloaded); cached facts came from the old ones, so
    /// the cache is cleared.
    pub fn set_catalogs(&mut self, catalogs: Catalogs) {
        self.cache.clear();
        self.catalogs = catalogs;
    }

    /// The rule set in use.
    pub fn rules(&self) -> &Rc<RuleSet> {
        &self.rules
    }

    /// Cache operation counters (monotonic across rule changes).
    pub fn cache_stats(&self) -> CacheStats {
        self.cache.stats()
    }

    /// Entries in the plan cache now.
    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// The key of `sql` for `protocol` clients under the current strategy; a session may keep it
    /// with a prepared statement and pass it back in [`RouteInput::key`].
    /// A parameterized text keyed before (the same named Parse again, or the text `route` saw)
    /// is taken from the core's memo.
    pub fn key(&self, sql: &str, protocol: Protocol) -> StatementKey {
        let (strategy, mode) = (self.rules.strategy(), LexMode::default());
        match self.memo.try_borrow_mut() {
            Ok(mut memo) => memo.key(sql, protocol, strategy, mode),
            Err(_) => StatementKey::compute_in(sql, protocol, strategy, mode),
        }
    }

    /// The session effects of `sql` for `protocol` clients ([`crate::sql::analyze::session_effects`]):
    /// a parameterized text the memo keeps is scanned for them once, not at every repeat (#39),
    /// and another text once for its effects, opener and token together.
    pub fn session_effects(&self, sql: &str, protocol: Protocol) -> Effects {
        match self.memo.try_borrow_mut() {
            Ok(mut memo) => memo.effects(sql, protocol),
            Err(_) => session_effects(sql, dialect(protocol)),
        }
    }

    /// Which transaction block `sql` opens for `protocol` clients
    /// ([`crate::sql::analyze::opens_transaction`]), read as [`Router::session_effects`] is.
    pub fn opens_transaction(&self, sql: &str, protocol: Protocol) -> Option<&'static str> {
        match self.memo.try_borrow_mut() {
            Ok(mut memo) => memo.opens_transaction(sql, protocol),
            Err(_) => opens_transaction(sql, dialect(protocol)),
        }
    }

    /// What `sql` is to the causal token for `protocol` clients ([`token_use`]), read as
    /// [`Router::session_effects`] is.
    pub fn token_use(&self, sql: &str, protocol: Protocol) -> Option<TokenUse> {
        match self.memo.try_borrow_mut() {
            Ok(mut memo) => memo.token_use(sql, protocol),
            Err(_) => token_use(sql, dialect(protocol)),
        }
    }

    fn key_for(&self, input: &RouteInput<'_>) -> StatementKey {
        let mode = input.session.lex_mode;
        match input.key {
            Some(k) if k.protocol == input.protocol && k.strategy == self.rules.strategy() && k.mode == mode => k,
            _ => StatementKey::compute_in(input.sql, input.protocol, self.rules.strategy(), mode),
        }
    }

    /// [`Router::key_for`] through the memo: a text sent before without literal values (the
    /// same parameterized statement again) is not lexed again.
    fn remembered_key(&mut self, input: &RouteInput<'_>) -> StatementKey {
        let (protocol, strategy, mode) = (input.protocol, self.rules.strategy(), input.session.lex_mode);
        if let Some(k) = input.key.filter(|k| k.protocol == protocol && k.strategy == strategy && k.mode == mode) {
            return k;
        }
        self.memo.get_mut().key(input.sql, protocol, strategy, mode)
    }

    fn analyze(&self, input: &RouteInput<'_>) -> StatementFacts {
        analyze(input.sql, dialect(input.protocol), self.catalogs.get(input.protocol))
    }

    /// The routing facts of a fresh analysis, distrusting what the analysis cannot see.
    fn facts(&self, input: &RouteInput<'_>) -> Facts {
        self.facts_of(input, &self.analyze(input))
    }

    fn facts_of(&self, input: &RouteInput<'_>, analysis: &StatementFacts) -> Facts {
        let mut facts = Facts::from_analysis(analysis);
        if hidden_code(input) {
            // MySQL runs `/*! ... */` bodies, but sqlparser skips them as comments: whatever they
            // hold (FOR UPDATE, a function call) is invisible to the analysis.
            facts.ineligibility = Some("executable_comment");
            facts.changes_data = true;
            let detail = "MySQL /*! ... */ body not analyzed".to_owned();
            facts.evidence.push(Evidence { fact: "executable_comment", detail });
        }
        if misread(input) {
            // sqlparser reads the default mode only: in this session the server may see other
            // strings, comments or identifiers (#19 case 5), so nothing the analysis says holds.
            facts.ineligibility = Some("lexer_mode");
            facts.changes_data = true;
            let detail =
                format!("session lexer mode {} changes how this text reads", input.session.lex_mode.describe());
            facts.evidence.push(Evidence { fact: "lexer_mode", detail });
        }
        facts
    }

    /// Decides where `input` runs. Never fails: analysis problems send the statement to the
    /// primary; refusals are [`Outcome::Reject`] or [`Outcome::Error`].
    pub fn route(&mut self, input: &RouteInput<'_>) -> Decision {
        let key = self.remembered_key(input);
        let base = match self.early(input, &key, || Arc::new(self.facts(input))) {
            Some(base) => base,
            None => {
                let (plan, cached) = self.plan(input, &key);
                self.late(input, plan, cached)
            }
        };
        self.finish(base, input, &key)
    }

    /// The decision `route` would make, from a fresh analysis, with the full evidence. Never
    /// reads or writes cache entries or counters.
    pub fn explain(&self, input: &RouteInput<'_>) -> Explanation {
        let key = self.key_for(input);
        let analysis = self.analyze(input);
        let facts = Arc::new(self.facts_of(input, &analysis));
        let base = match self.early(input, &key, || facts.clone()) {
            Some(base) => base,
            None => {
                let plan = Plan { facts: facts.clone(), pattern: self.rules.key_pattern(&key) };
                self.late(input, plan, false)
            }
        };
        Explanation {
            decision: self.finish(base, input, &key),
            analysis,
            key,
            normalized: crate::sql::fingerprint::normalize_in(
                input.sql,
                dialect(input.protocol),
                input.session.lex_mode,
            ),
            hint: route_hint(input.sql),
            in_cache: self.rules.cache_config().enabled && self.cache.contains(&key),
        }
    }

    /// Steps 2 and 3: translation (not inside a transaction, which cannot change pools) and
    /// dynamic rules. Neither is cached; `facts` is only called on a hit.
    fn early(&self, input: &RouteInput<'_>, key: &StatementKey, facts: impl FnOnce() -> Arc<Facts>) -> Option<Base> {
        // A translation re-reads literals in the session's mode (#33); not in a mode unknown.
        if input.session.transaction_pool.is_none() && !input.session.lex_mode.unknown {
            match self.rules.translate(key, input.sql) {
                Some((t, Ok(translated))) => {
                    let target = Target::Pool(t.pool.clone());
                    let mut base = Base::rule(&target, DecisionKind::Translation, &t.name, facts());
                    base.rewritten = Some(translated);
                    return Some(base);
                }
                Some((t, Err(why))) => {
                    let target = Target::Reject(Arc::from(why.as_str()));
                    return Some(Base::rule(&target, DecisionKind::Translation, &t.name, facts()));
                }
                None => {}
            }
        }
        let rule = self.rules.dynamic(key, input.sql)?;
        let mut base = Base::rule(&rule.target, DecisionKind::DynamicRule, &rule.name, facts());
        base.allow_writes = rule.allow_writes;
        Some(base)
    }

    /// Step 4: the cached plan, or a fresh analysis stored for next time.
    /// Statements with code the analysis cannot see bypass the cache both ways.
    fn plan(&mut self, input: &RouteInput<'_>, key: &StatementKey) -> (Plan, bool) {
        let enabled = self.rules.cache_config().enabled && !hidden_code(input) && !misread(input);
        if enabled {
            if let Some(plan) = self.cache.get(key) {
                return (plan, true);
            }
        }
        let facts = Arc::new(self.facts(input));
        let plan = Plan { facts, pattern: self.rules.key_pattern(key) };
        if enabled {
            self.cache.insert(key, plan.clone());
        }
        (plan, false)
    }

    /// Steps 5–7 given the plan: regex pattern rules ranked above the cached template/hash match,
    /// that match, session rules, then the split (resolved in `finish`).
    fn late(&self, input: &RouteInput<'_>, plan: Plan, cached: bool) -> Base {
        if let Some((i, p)) = self.rules.pattern(plan.pattern, input.sql) {
            let mut base = Base::rule(&p.target, DecisionKind::PatternRule, &p.name, plan.facts);
            base.cached = cached;
            base.retry = p.retry;
            base.allow_writes = p.allow_writes;
            base.from_cache = cached && plan.pattern == Some(i);
            return base;
        }
        if let Some(r) = self.rules.session_rule(input) {
            let mut base = Base::rule(&r.target, DecisionKind::RegexRule, &r.name, plan.facts);
            base.cached = cached;
            base.retry = r.retry;
            base.allow_writes = r.allow_writes;
            return base;
        }
        let step = if self.rules.read_pool(input.protocol).is_some() {
            DecisionKind::ReadWriteSplit
        } else {
            DecisionKind::Default
        };
        let (rule, rewritten) = (None, None);
        let facts = plan.facts;
        Base {
            target: None,
            step,
            rule,
            rewritten,
            facts,
            cached,
            from_cache: cached,
            retry: None,
            allow_writes: false,
        }
    }

    /// Applies the session: rejects first, then hints, the open transaction, rule targets and
    /// finally the split with read-your-writes.
    fn finish(&self, base: Base, input: &RouteInput<'_>, key: &StatementKey) -> Decision {
        let writes = base.facts.changes_data && !input.session.read_only_transaction;
        let label = if base.from_cache { DecisionKind::Cache } else { base.step };
        let mut d = Decision {
            outcome: Outcome::Error(DecisionError::NoPool { protocol: input.protocol }),
            kind: label,
            step: base.step,
            cached: base.cached,
            fingerprint: key.fingerprint,
            rule: base.rule,
            rewritten: base.rewritten,
            reason: "rule",
            facts: base.facts,
            pins_primary: false,
            writes,
            retry: None,
            replica_check: ReplicaCheck::NotReplica,
        };
        let hint = route_hint(input.sql);
        match (&base.target, hint, input.session.transaction_pool) {
            // Translations target pools: this is a value the translation refused.
            (Some(Target::Reject(msg)), _, _) if base.step == DecisionKind::Translation => {
                d.outcome = Outcome::Error(DecisionError::TranslationValue { message: msg.clone() });
            }
            (Some(Target::Reject(msg)), _, _) => {
                d.outcome = Outcome::Reject(msg.clone());
                d.kind = DecisionKind::Reject;
            }
            (_, Some(RouteHint::Invalid), _) => self.hint_error(&mut d, DecisionError::InvalidHint),
            (_, hint, Some(tx_pool)) => self.in_transaction(&mut d, hint, tx_pool, input),
            (_, Some(RouteHint::Primary), None) => self.hint_primary(&mut d, input),
            (_, Some(RouteHint::Replica), None) => self.hint_replica(&mut d, input),
            (Some(Target::Pool(pool)), None, None) => {
                d.outcome = Outcome::Route(pool.clone());
                d.retry = base.retry;
                if base.step == DecisionKind::Translation {
                    d.reason = "translation";
                }
            }
            (None, None, None) => self.split(&mut d, input),
        }
        let allowed =
            base.allow_writes && matches!((&base.target, d.pool()), (Some(Target::Pool(t)), Some(p)) if t == p);
        self.check_role(&mut d, allowed, input.session);
        d
    }

    /// Whatever chose the pool, a statement that is not replica-safe never runs on a
    /// replica-role pool unless the rule that chose it says `allow_writes = true` (#19).
    /// A session whose settings a standby cannot serve (`primary_only`) is refused there too,
    /// outside a transaction already held on it.
    /// Inside a transaction declared read-only, what the server refuses there anyway is left
    /// to it ([`Facts::safe_when_read_only`], #34).
    fn check_role(&self, d: &mut Decision, allowed_by_rule: bool, session: crate::routing::SessionView<'_>) {
        let Some(pool) = d.pool().filter(|p| self.rules.is_replica(p)).cloned() else { return };
        let session_refuses = session.primary_only.filter(|_| d.kind != DecisionKind::TransactionPin);
        let read_only = session.read_only_transaction && d.kind == DecisionKind::TransactionPin;
        let safe =
            (d.facts.replica_safe() || (read_only && d.facts.safe_when_read_only())) && session_refuses.is_none();
        d.replica_check = match (safe, allowed_by_rule) {
            (true, _) => ReplicaCheck::Safe,
            (false, true) => ReplicaCheck::AllowedByRule,
            (false, false) => ReplicaCheck::Refused,
        };
        if d.replica_check != ReplicaCheck::Refused {
            return;
        }
        let chosen_by = match (d.kind, &d.rule) {
            (DecisionKind::TransactionPin, _) => {
                "the connection the session holds (open transaction or session state)".to_owned()
            }
            (DecisionKind::Hint, _) => "a route hint".to_owned(),
            (DecisionKind::Translation, Some(rule)) => format!("translation `{rule}`"),
            (_, Some(rule)) => format!("rule `{rule}`"),
            (kind, None) => kind.as_str().to_owned(),
        };
        let reason = session_refuses.or(d.facts.ineligibility).unwrap_or("unanalyzable");
        d.outcome = Outcome::Error(DecisionError::ReplicaUnsafe { pool, chosen_by, reason });
        d.reason = "replica_unsafe";
        d.rewritten = None;
        d.retry = None;
    }

    fn hint_error(&self, d: &mut Decision, error: DecisionError) {
        d.outcome = Outcome::Error(error);
        d.kind = DecisionKind::Hint;
        d.reason = "hint";
        d.rewritten = None;
    }

    fn not_honored(&self, d: &mut Decision, reason: String) {
        self.hint_error(d, DecisionError::HintNotHonored { reason });
    }

    /// Inside a transaction the statement stays on the transaction's pool (untranslated); a hint
    /// is honored only when it names that same pool's role.
    fn in_transaction(&self, d: &mut Decision, hint: Option<RouteHint>, tx_pool: &Arc<str>, input: &RouteInput<'_>) {
        let role_pool = match hint {
            Some(RouteHint::Primary) => self.rules.primary_pool(input.protocol),
            Some(RouteHint::Replica) if !d.facts.replica_eligible() => {
                let why = d.facts.ineligibility.unwrap_or("unanalyzable");
                return self.not_honored(d, format!("route=replica: statement is not replica-eligible ({why})"));
            }
            Some(RouteHint::Replica) => self.rules.read_pool(input.protocol),
            Some(RouteHint::Invalid) | None => Some(tx_pool),
        };
        if role_pool != Some(tx_pool) {
            return self.not_honored(d, format!("a transaction is open on pool `{tx_pool}`; the hint cannot move it"));
        }
        d.outcome = Outcome::Route(tx_pool.clone());
        d.kind = DecisionKind::TransactionPin;
        d.step = DecisionKind::TransactionPin;
        d.reason = "transaction";
        d.rewritten = None;
        d.pins_primary = hint == Some(RouteHint::Primary);
    }

    /// `route=primary` always wins (over rules and translations, never over a reject) and pins.
    fn hint_primary(&self, d: &mut Decision, input: &RouteInput<'_>) {
        match self.rules.primary_pool(input.protocol) {
            Some(pool) => {
                d.outcome = Outcome::Route(pool.clone());
                d.kind = DecisionKind::Hint;
                d.reason = "hint_primary";
                d.rewritten = None;
                d.pins_primary = true;
            }
            None => self.hint_error(d, DecisionError::NoPool { protocol: input.protocol }),
        }
    }

    /// `route=replica` only for a replica-eligible statement of an unpinned session with a read
    /// pool; anything else is an error, so the statement never runs on the wrong role.
    fn hint_replica(&self, d: &mut Decision, input: &RouteInput<'_>) {
        let Some(read) = self.rules.read_pool(input.protocol) else {
            return self
                .not_honored(d, format!("route=replica: no read pool is configured for {} clients", input.protocol));
        };
        if let Some(why) = d.facts.ineligibility {
            return self.not_honored(d, format!("route=replica: statement is not replica-eligible ({why})"));
        }
        if input.session.pinned_to_primary {
            let why = "route=replica: the session is pinned to the primary (read-your-writes or route=primary)";
            return self.not_honored(d, why.to_owned());
        }
        if let Some(why) = input.session.primary_only {
            return self
                .not_honored(d, format!("route=replica: a replica cannot serve this session's settings ({why})"));
        }
        d.outcome = Outcome::Route(read.clone());
        d.kind = DecisionKind::Hint;
        d.reason = "hint_replica";
        d.rewritten = None;
    }

    /// Step 7: the read pool for a replica-eligible statement of an unpinned session, else the
    /// primary (write or default) pool.
    fn split(&self, d: &mut Decision, input: &RouteInput<'_>) {
        let read = self.rules.read_pool(input.protocol);
        let opens_read_only = opens_read_only(&d.facts, input);
        let ineligibility = d.facts.ineligibility.filter(|_| !opens_read_only);
        let (pool, reason) = match (read, ineligibility) {
            (Some(_), None) if input.session.primary_only.is_some() => {
                (self.rules.primary_pool(input.protocol), input.session.primary_only.unwrap_or("session"))
            }
            (Some(read), None) if !input.session.pinned_to_primary && opens_read_only => {
                (Some(read), "read_only_transaction")
            }
            (Some(read), None) if !input.session.pinned_to_primary => (Some(read), "replica_eligible"),
            (Some(_), None) => (self.rules.primary_pool(input.protocol), "read_your_writes"),
            (Some(_), Some(why)) => (self.rules.primary_pool(input.protocol), why),
            (None, _) => (self.rules.primary_pool(input.protocol), "default"),
        };
        d.reason = reason;
        d.outcome = match pool {
            Some(pool) => Outcome::Route(pool.clone()),
            None => Outcome::Error(DecisionError::NoPool { protocol: input.protocol }),
        };
    }
}

/// Whether the statement is a lone BEGIN / START TRANSACTION of a transaction the session
/// declared read-only (`RouteInput::session.read_only_transaction` outside a transaction): the
/// server refuses every data change in it, so the whole transaction may run on a replica (#34).
/// What the router alone deems unsafe there is refused on the replica (`check_role`), never split.
fn opens_read_only(facts: &Facts, input: &RouteInput<'_>) -> bool {
    input.session.read_only_transaction
        && input.session.transaction_pool.is_none()
        && facts.operation == Operation::TransactionControl(TxControl::Begin)
        && facts.statement_count == 1
        && facts.locking.is_none()
        && facts.affinity.is_empty()
}

/// Whether the session's lexer mode may make the server read `input.sql` otherwise than the
/// analysis does; such statements bypass the plan cache and translations and go to the primary.
fn misread(input: &RouteInput<'_>) -> bool {
    input.session.lex_mode.may_misread(input.sql, dialect(input.protocol))
}

/// A MySQL executable comment (`/*! ... */`) may hide code from sqlparser. Any occurrence counts,
/// even inside a string literal: a false positive only sends a statement to the primary.
fn hidden_code(input: &RouteInput<'_>) -> bool {
    input.protocol == Protocol::MySql && input.sql.contains("/*!")
}
