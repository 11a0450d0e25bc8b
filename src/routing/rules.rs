//! The compiled, immutable rule set: pattern rules, session rules, dynamic rules, translation
//! templates and the default pools, built once on the control plane from the `Config`, the
//! runtime-added rules and the runtime translations, then shared by every core (`Send + Sync`).
//!
//! Regexes and templates are compiled here, once; every problem is reported with the rule's name.

use std::rc::Rc;
use std::sync::Arc;

use ahash::AHashMap;
use regex::Regex;

use crate::config::{
    CacheConfig, Config, NormalizationStrategy, PatternKind, PatternRule, PoolRole, Protocol, ReadYourWrites,
    RegexRule, RetryPolicy, RuleTarget, TranslationRule,
};
use crate::error::{ErrorCode, Origin};
use crate::sql::fingerprint::Fingerprint;
use crate::sql::template::{LateTranslation, TemplateError, Translated, TranslationTemplate};

use super::decision::{Decision, DecisionError};
use super::{dialect, KeySpace, RouteInput, StatementKey};

/// A rule that cannot be compiled; names the rule so the operator can find it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RuleError {
    /// A regex pattern does not compile.
    #[error("rule `{rule}`: invalid regex: {message}")]
    InvalidRegex {
        /// Rule name.
        rule: String,
        /// The regex engine's reason.
        message: String,
    },
    /// A `hash` pattern is not a decimal u64.
    #[error("rule `{rule}`: hash pattern `{pattern}` is not a decimal u64 fingerprint")]
    InvalidHash {
        /// Rule name.
        rule: String,
        /// The pattern as given.
        pattern: String,
    },
    /// A `template` pattern is empty.
    #[error("rule `{rule}`: a template pattern must not be empty")]
    EmptyTemplate {
        /// Rule name.
        rule: String,
    },
    /// A rule names a pool the configuration does not define.
    #[error("rule `{rule}`: unknown pool `{pool}`")]
    UnknownPool {
        /// Rule name.
        rule: String,
        /// The pool name as given.
        pool: String,
    },
    /// A translation rule's literals cannot be mapped.
    #[error("rule `{rule}` ({protocol} clients): {source}")]
    Translation {
        /// Rule name (`translation.rules[i]` or `api.translations[i]`).
        rule: String,
        /// The client protocol the template was compiled for.
        protocol: Protocol,
        /// Why the mapping is refused.
        source: TemplateError,
    },
}

impl ErrorCode for RuleError {
    fn code(&self) -> &'static str {
        "routing.invalid_rule"
    }

    fn origin(&self) -> Origin {
        Origin::Client
    }
}

/// Every rule error found while building a [`RuleSet`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{}", .0.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
pub struct RuleErrors(pub Vec<RuleError>);

impl ErrorCode for RuleErrors {
    fn code(&self) -> &'static str {
        "routing.invalid_rule"
    }

    fn origin(&self) -> Origin {
        Origin::Client
    }
}

/// What a matched rule does.
#[derive(Debug, Clone)]
pub(super) enum Target {
    Pool(Arc<str>),
    Reject(Arc<str>),
}

#[derive(Debug, Clone)]
enum Matcher {
    /// Key of the example, per client protocol (indexed by [`proto_index`]).
    Template([(Fingerprint, KeySpace); 2]),
    Regex(Regex),
    Hash(u64),
}

/// A compiled pattern rule (config or dynamic).
#[derive(Debug)]
pub(super) struct Pattern {
    pub(super) name: Arc<str>,
    matcher: Matcher,
    pub(super) target: Target,
    /// The rule's own retry policy (#11).
    pub(super) retry: Option<RetryPolicy>,
    /// The operator lets this rule send unsafe statements to a replica-role pool (#19).
    pub(super) allow_writes: bool,
}

impl Pattern {
    fn is_regex(&self) -> bool {
        matches!(self.matcher, Matcher::Regex(_))
    }

    /// Template and hash rules: decided by the key alone, hence cacheable.
    fn matches_key(&self, key: &StatementKey) -> bool {
        match &self.matcher {
            Matcher::Template(keys) => keys.get(proto_index(key.protocol)) == Some(&(key.fingerprint, key.space)),
            Matcher::Hash(h) => key.fingerprint.0 == *h,
            Matcher::Regex(_) => false,
        }
    }

    fn matches(&self, key: &StatementKey, sql: &str) -> bool {
        match &self.matcher {
            Matcher::Regex(re) => re.is_match(sql),
            Matcher::Template(_) | Matcher::Hash(_) => self.matches_key(key),
        }
    }
}

/// A compiled `[[routing.rules]]` entry.
#[derive(Debug)]
pub(super) struct SessionRule {
    pub(super) name: Arc<str>,
    regex: Option<Regex>,
    user: Option<String>,
    database: Option<String>,
    protocol: Option<Protocol>,
    pub(super) target: Target,
    /// The rule's own retry policy (#11).
    pub(super) retry: Option<RetryPolicy>,
    /// The operator lets this rule send unsafe statements to a replica-role pool (#19).
    pub(super) allow_writes: bool,
}

impl SessionRule {
    fn matches(&self, input: &RouteInput<'_>) -> bool {
        self.protocol.is_none_or(|p| p == input.protocol)
            && self.user.as_deref().is_none_or(|u| u == input.user)
            && self.database.as_deref().is_none_or(|d| d == input.database)
            && self.regex.as_ref().is_none_or(|re| re.is_match(input.sql))
    }
}

/// A compiled translation template with its target.
#[derive(Debug)]
pub(super) struct Translation {
    pub(super) name: Arc<str>,
    template: TranslationTemplate,
    pub(super) pool: Arc<str>,
}

/// The immutable rules of one configuration version. A new `RuleSet` means an empty plan cache.
#[derive(Debug)]
pub struct RuleSet {
    cache: CacheConfig,
    read_your_writes: ReadYourWrites,
    /// Per protocol ([`proto_index`]): the primary (write/default) pool and the read pool.
    primary: [Option<Arc<str>>; 2],
    read: [Option<Arc<str>>; 2],
    /// The pools whose role is `replica` (few: a linear scan beats hashing).
    replicas: Vec<Arc<str>>,
    /// Keyed by (lexer fingerprint, client protocol); candidates in registration order.
    translations: AHashMap<(Fingerprint, Protocol), Vec<Translation>>,
    dynamic: Vec<Pattern>,
    patterns: Vec<Pattern>,
    pattern_regexes: bool,
    rules: Vec<SessionRule>,
}

/// Index of a protocol in per-protocol arrays.
fn proto_index(p: Protocol) -> usize {
    match p {
        Protocol::Postgres => 0,
        Protocol::MySql => 1,
    }
}

const PROTOCOLS: [Protocol; 2] = [Protocol::Postgres, Protocol::MySql];

/// Rules are tried by ascending priority (issue #5: lower numbers first); ties keep their file
/// order (the sort is stable).
fn by_priority<T>(mut rules: Vec<(i32, T)>) -> Vec<T> {
    rules.sort_by_key(|(priority, _)| *priority);
    rules.into_iter().map(|(_, r)| r).collect()
}

/// Builds rules, interning pool names and collecting errors.
struct Builder<'c> {
    config: &'c Config,
    pools: AHashMap<String, Arc<str>>,
    errors: Vec<RuleError>,
}

impl Builder<'_> {
    fn pool(&mut self, rule: &str, name: &str) -> Option<Arc<str>> {
        if self.config.pool(name).is_none() {
            self.errors.push(RuleError::UnknownPool { rule: rule.to_owned(), pool: name.to_owned() });
            return None;
        }
        Some(self.pools.entry(name.to_owned()).or_insert_with(|| Arc::from(name)).clone())
    }

    fn target(&mut self, rule: &str, target: &RuleTarget) -> Option<Target> {
        match target {
            RuleTarget::Pool(p) => self.pool(rule, p).map(Target::Pool),
            RuleTarget::Reject(msg) => Some(Target::Reject(Arc::from(msg.as_str()))),
        }
    }

    fn regex(&mut self, rule: &str, pattern: &str) -> Option<Regex> {
        Regex::new(pattern)
            .map_err(|e| {
                let text = e.to_string();
                let message = text.lines().last().unwrap_or(&text).trim().to_owned();
                self.errors.push(RuleError::InvalidRegex { rule: rule.to_owned(), message });
            })
            .ok()
    }

    fn pattern(&mut self, rule: &PatternRule) -> Option<(i32, Pattern)> {
        let strategy = self.config.routing.cache.normalization_strategy;
        let matcher = match rule.kind {
            PatternKind::Template if rule.pattern.trim().is_empty() => {
                self.errors.push(RuleError::EmptyTemplate { rule: rule.name.clone() });
                None
            }
            PatternKind::Template => Some(Matcher::Template(PROTOCOLS.map(|p| {
                let key = StatementKey::compute(&rule.pattern, p, strategy);
                (key.fingerprint, key.space)
            }))),
            PatternKind::Regex => self.regex(&rule.name, &rule.pattern).map(Matcher::Regex),
            PatternKind::Hash => match rule.pattern.trim().parse::<u64>() {
                Ok(h) => Some(Matcher::Hash(h)),
                Err(_) => {
                    let (rule, pattern) = (rule.name.clone(), rule.pattern.clone());
                    self.errors.push(RuleError::InvalidHash { rule, pattern });
                    None
                }
            },
        };
        let target = self.target(&rule.name, &rule.target);
        let (matcher, target) = (matcher?, target?);
        let name = Arc::from(rule.name.as_str());
        let (retry, allow_writes) = (rule.retry, rule.allow_writes);
        Some((rule.priority, Pattern { name, matcher, target, retry, allow_writes }))
    }

    fn session_rule(&mut self, rule: &RegexRule) -> Option<(i32, SessionRule)> {
        let regex = match &rule.pattern {
            Some(p) => Some(self.regex(&rule.name, p)?),
            None => None,
        };
        let target = self.target(&rule.name, &rule.target)?;
        let compiled = SessionRule {
            name: Arc::from(rule.name.as_str()),
            regex,
            user: rule.user.clone(),
            database: rule.database.clone(),
            protocol: rule.protocol,
            target,
            retry: rule.retry,
            allow_writes: rule.allow_writes,
        };
        Some((rule.priority, compiled))
    }

    /// Compiles `rule` for every client protocol with a listener.
    fn translation(&mut self, name: &str, rule: &TranslationRule, into: &mut TranslationMap) {
        let Some(pool) = self.pool(name, &rule.target_pool) else {
            return;
        };
        let backend = self.config.pool(&rule.target_pool).and_then(|p| p.protocol);
        for protocol in client_protocols(self.config) {
            let target = dialect(backend.unwrap_or(protocol));
            match TranslationTemplate::compile(&rule.original_sql, &rule.translated_sql, dialect(protocol), target) {
                Ok(template) => into.entry((template.fingerprint(), protocol)).or_default().push(Translation {
                    name: Arc::from(name),
                    template,
                    pool: pool.clone(),
                }),
                Err(source) => self.errors.push(RuleError::Translation { rule: name.to_owned(), protocol, source }),
            }
        }
    }
}

type TranslationMap = AHashMap<(Fingerprint, Protocol), Vec<Translation>>;

/// What is likely wrong with the configuration's translation rules although they compile
/// ([`TranslationTemplate::warnings`]), each naming its rule and client protocol: `--check`
/// prints them and the router logs them at start.
pub fn translation_warnings(config: &Config) -> Vec<String> {
    let mut out = Vec::new();
    for (i, rule) in config.translations.iter().enumerate() {
        let backend = config.pool(&rule.target_pool).and_then(|p| p.protocol);
        for protocol in client_protocols(config) {
            let target = dialect(backend.unwrap_or(protocol));
            let Ok(t) =
                TranslationTemplate::compile(&rule.original_sql, &rule.translated_sql, dialect(protocol), target)
            else {
                continue;
            };
            let name = protocol.as_str();
            out.extend(t.warnings().into_iter().map(|w| format!("translation.rules[{i}] ({name} clients): {w}")));
        }
    }
    out
}

/// The protocols clients may speak: those with a listener (both when none is configured).
fn client_protocols(config: &Config) -> Vec<Protocol> {
    let listed: Vec<Protocol> =
        PROTOCOLS.into_iter().filter(|p| config.listeners.iter().any(|l| l.protocol == *p)).collect();
    if listed.is_empty() {
        PROTOCOLS.to_vec()
    } else {
        listed
    }
}

/// Re-allocates names for [`RuleSet::for_core`], interning them so each pool keeps one
/// allocation per core.
#[derive(Default)]
struct Localizer {
    names: AHashMap<Arc<str>, Arc<str>>,
}

impl Localizer {
    fn name(&mut self, name: &Arc<str>) -> Arc<str> {
        self.names.entry(name.clone()).or_insert_with(|| Arc::from(&**name)).clone()
    }

    fn target(&mut self, target: &Target) -> Target {
        match target {
            Target::Pool(p) => Target::Pool(self.name(p)),
            Target::Reject(m) => Target::Reject(self.name(m)),
        }
    }

    fn pattern(&mut self, p: &Pattern) -> Pattern {
        Pattern {
            name: self.name(&p.name),
            // `Regex::clone` shares the compiled program and starts a fresh cache pool.
            matcher: p.matcher.clone(),
            target: self.target(&p.target),
            retry: p.retry,
            allow_writes: p.allow_writes,
        }
    }

    fn session_rule(&mut self, r: &SessionRule) -> SessionRule {
        SessionRule {
            name: self.name(&r.name),
            regex: r.regex.clone(),
            user: r.user.clone(),
            database: r.database.clone(),
            protocol: r.protocol,
            target: self.target(&r.target),
            retry: r.retry,
            allow_writes: r.allow_writes,
        }
    }

    fn translation(&mut self, t: &Translation) -> Translation {
        Translation { name: self.name(&t.name), template: t.template.clone(), pool: self.name(&t.pool) }
    }
}

impl RuleSet {
    /// Compiles the configuration's rules, the runtime-added pattern rules (`dynamic`, same shape
    /// as `[[routing.pattern_rules]]`) and the runtime translations (`POST /api/translations`,
    /// tried after the configured ones). Every error is reported, each naming its rule.
    pub fn build(
        config: &Config,
        dynamic: &[PatternRule],
        runtime_translations: &[TranslationRule],
    ) -> Result<RuleSet, RuleErrors> {
        let mut b = Builder { config, pools: AHashMap::new(), errors: Vec::new() };
        let routing = &config.routing;
        let patterns = by_priority(routing.pattern_rules.iter().filter_map(|r| b.pattern(r)).collect());
        let dynamic = by_priority(dynamic.iter().filter_map(|r| b.pattern(r)).collect());
        let rules = by_priority(routing.rules.iter().filter_map(|r| b.session_rule(r)).collect());
        let mut translations = TranslationMap::new();
        for (i, rule) in config.translations.iter().enumerate() {
            b.translation(&format!("translation.rules[{i}]"), rule, &mut translations);
        }
        for (i, rule) in runtime_translations.iter().enumerate() {
            b.translation(&format!("api.translations[{i}]"), rule, &mut translations);
        }
        let mut primary = [None, None];
        let mut read = [None, None];
        for protocol in PROTOCOLS {
            let i = proto_index(protocol);
            if let (Some(slot), Some(name)) = (primary.get_mut(i), routing.primary_pool(protocol)) {
                *slot = b.pool("routing", name);
            }
            if let (Some(slot), Some(name)) = (read.get_mut(i), routing.read_pool_of(protocol)) {
                *slot = b.pool("routing", name);
            }
        }
        let replicas = config.pools.iter().filter(|p| p.role == PoolRole::Replica).map(|p| Arc::from(p.name.as_str()));
        let replicas = replicas.collect();
        if !b.errors.is_empty() {
            return Err(RuleErrors(b.errors));
        }
        Ok(RuleSet {
            cache: routing.cache,
            read_your_writes: routing.read_your_writes,
            primary,
            read,
            replicas,
            translations,
            dynamic,
            pattern_regexes: patterns.iter().any(Pattern::is_regex),
            patterns,
            rules,
        })
    }

    /// A copy of these rules for one core: every pool name and rule name in a fresh allocation and
    /// every regex with its own scratch-space pool, so the per-statement path (name clones in
    /// decisions, regex searches) writes no memory another core uses (#20, #21). The regex
    /// programs themselves stay shared: they are read-only. The copy comes behind an `Rc`: the
    /// published `RuleSet` crosses threads, the core's own copy cannot.
    pub fn for_core(&self) -> Rc<RuleSet> {
        let mut names = Localizer::default();
        let patterns = |list: &[Pattern], names: &mut Localizer| -> Vec<Pattern> {
            list.iter().map(|p| names.pattern(p)).collect()
        };
        let translations = self
            .translations
            .iter()
            .map(|(k, list)| (*k, list.iter().map(|t| names.translation(t)).collect()))
            .collect();
        Rc::new(RuleSet {
            cache: self.cache,
            read_your_writes: self.read_your_writes,
            primary: self.primary.clone().map(|p| p.map(|n| names.name(&n))),
            read: self.read.clone().map(|p| p.map(|n| names.name(&n))),
            replicas: self.replicas.iter().map(|n| names.name(n)).collect(),
            translations,
            dynamic: patterns(&self.dynamic, &mut names),
            patterns: patterns(&self.patterns, &mut names),
            pattern_regexes: self.pattern_regexes,
            rules: self.rules.iter().map(|r| names.session_rule(r)).collect(),
        })
    }

    /// The normalization strategy of the cache key and template rules.
    pub fn strategy(&self) -> NormalizationStrategy {
        self.cache.normalization_strategy
    }

    /// The plan-cache settings.
    pub fn cache_config(&self) -> CacheConfig {
        self.cache
    }

    /// The configured read-your-writes mode (for [`super::RywState::new`]).
    pub fn read_your_writes(&self) -> ReadYourWrites {
        self.read_your_writes
    }

    /// Whether reads of any protocol's clients are split from writes.
    pub fn read_write_split(&self) -> bool {
        self.read.iter().any(Option::is_some)
    }

    /// The primary (write or default) pool of `protocol` clients.
    pub fn primary_pool(&self, protocol: Protocol) -> Option<&Arc<str>> {
        self.primary.get(proto_index(protocol)).and_then(Option::as_ref)
    }

    /// The read pool of `protocol` clients; `None` when they are not split.
    pub fn read_pool(&self, protocol: Protocol) -> Option<&Arc<str>> {
        self.read.get(proto_index(protocol)).and_then(Option::as_ref)
    }

    /// Whether any read can leave the primary: some protocol splits reads, or some pool has the
    /// `replica` role a rule may send reads to. Without either, causal reads have nothing to learn.
    pub fn has_replica_reads(&self) -> bool {
        self.read_write_split() || !self.replicas.is_empty()
    }

    /// Whether `pool` has the `replica` role: only replica-safe statements may run there.
    pub fn is_replica(&self, pool: &str) -> bool {
        self.replicas.iter().any(|r| **r == *pool)
    }

    /// The refusal of running `decision`'s statement on `pool` when the session, not the router,
    /// picked that pool (a client that named a pool as its database): `None` when it may run.
    pub fn replica_refusal(&self, decision: &Decision, pool: &Arc<str>) -> Option<DecisionError> {
        let unsafe_here = self.is_replica(pool) && !decision.facts.replica_safe();
        let why = decision.facts.ineligibility.unwrap_or("unanalyzable");
        unsafe_here.then(|| DecisionError::ReplicaUnsafe {
            pool: pool.clone(),
            chosen_by: "the database name the client connected with".to_owned(),
            reason: why,
        })
    }

    /// Step 2: the first translation whose template fits, with the rewritten SQL. Only MySQL
    /// clients bind parameters by position (`?`), so only their translations may reorder them.
    ///
    /// A statement of a translation's shape whose value that translation refuses (a JSON-array
    /// slot holding something else) is refused with the reason: run untranslated on the
    /// session's pool it would answer from the wrong engine, silently.
    pub(super) fn translate(
        &self,
        key: &StatementKey,
        sql: &str,
    ) -> Option<(&Translation, Result<Translated, String>)> {
        if self.translations.is_empty() {
            return None;
        }
        let candidates = self.translations.get(&(key.lexer, key.protocol))?;
        let mut refused = None;
        let hit =
            candidates.iter().find_map(|t| match t.template.apply_checked(sql, dialect(key.protocol), key.mode) {
                Ok(out) => out
                    .filter(|out| out.param_order.is_none() || key.protocol == Protocol::MySql)
                    .map(|out| (t, Ok(out))),
                Err(e) => {
                    refused.get_or_insert_with(|| (t, Err(format!("translation {}: {e}", t.name))));
                    None
                }
            });
        hit.or(refused)
    }

    /// Whether any translation rule exists: without one, no statement needs fingerprinting to
    /// look for a translation.
    pub fn has_translations(&self) -> bool {
        !self.translations.is_empty()
    }

    /// A statement to prepare whose translation waits for its parameters' values (a JSON-array
    /// slot holding a MySQL `?` or PostgreSQL `$n`, #35): the target pool and the unbound
    /// translation.
    pub fn late_translation(&self, key: &StatementKey, sql: &str) -> Option<(Arc<str>, LateTranslation)> {
        let candidates = self.translations.get(&(key.lexer, key.protocol))?;
        candidates
            .iter()
            .find_map(|t| t.template.apply_late(sql, dialect(key.protocol), key.mode).map(|l| (t.pool.clone(), l)))
    }

    /// Step 3: the first matching dynamic rule.
    pub(super) fn dynamic(&self, key: &StatementKey, sql: &str) -> Option<&Pattern> {
        self.dynamic.iter().find(|p| p.matches(key, sql))
    }

    /// Step 5, cacheable half: index of the first template/hash rule the key matches.
    pub(super) fn key_pattern(&self, key: &StatementKey) -> Option<u32> {
        let i = self.patterns.iter().position(|p| p.matches_key(key))?;
        u32::try_from(i).ok()
    }

    /// Step 5 in full, given the cached template/hash match: a regex rule ranked before it wins.
    /// Returns the rule's index in priority order with the rule.
    pub(super) fn pattern(&self, cached: Option<u32>, sql: &str) -> Option<(u32, &Pattern)> {
        let limit = cached.map_or(self.patterns.len(), |i| i as usize);
        if self.pattern_regexes {
            let before = self.patterns.get(..limit).unwrap_or(&self.patterns);
            let regex_hit = before.iter().position(|p| matches!(&p.matcher, Matcher::Regex(re) if re.is_match(sql)));
            if let Some((i, p)) = regex_hit.and_then(|i| Some((u32::try_from(i).ok()?, before.get(i)?))) {
                return Some((i, p));
            }
        }
        let i = cached?;
        Some((i, self.patterns.get(i as usize)?))
    }

    /// Step 6: the first `[[routing.rules]]` entry whose every matcher matches.
    pub(super) fn session_rule(&self, input: &RouteInput<'_>) -> Option<&SessionRule> {
        self.rules.iter().find(|r| r.matches(input))
    }
}
