//! The routing side of the control plane's API: dry-run decisions, pattern rules and
//! translations added at runtime (ephemeral: a reload clears them), and digest statistics.
//!
//! Every rule change compiles a whole new rule set first (so an invalid rule changes nothing),
//! then publishes it to every core and returns once each acknowledged: a statement sent right
//! after the call already sees the change.

use std::sync::Arc;
use std::time::Instant;

use crossbeam_channel::unbounded;

use super::limits::{self, LimitsView};
use super::msg::{CoreCommand, RulesVersion, Snapshot};
use super::view::{DigestsView, PatternRuleView, RouteTest, TranslationView};
use super::{ControlError, ControlHandle, ControlPlane, CORE_REPLY_TIMEOUT};
use crate::config::{Engine, PatternRule, PoolMode, Protocol, TranslationRule};
use crate::metrics::DigestSnapshot;
use crate::routing::{Decision, Hold, MySqlSession, RouteInput, Settled};

/// A statement to decide without running it.
#[derive(Debug, Clone)]
pub struct RouteQuery {
    /// The SQL text.
    pub sql: String,
    /// Session user (for user-matched rules).
    pub user: String,
    /// Database (for database-matched rules).
    pub database: String,
    /// Client protocol; `None`: the first listener's.
    pub protocol: Option<Protocol>,
    /// The session's settings as far as routing cares (#19): tokenizing mode, serializable
    /// default isolation, and the pool a held connection (open transaction) is on.
    pub session: SessionQuery,
}

/// The session state a dry-run assumes (all default: a fresh session).
#[derive(Debug, Clone, Default)]
pub struct SessionQuery {
    /// Tokenizing mode (`standard_conforming_strings`, `sql_mode`).
    pub lex_mode: crate::routing::LexMode,
    /// The session's transactions default to SERIALIZABLE.
    pub serializable: bool,
    /// The session holds a connection to this pool (open transaction, session state).
    pub held_pool: Option<String>,
    /// The session holds the causal token `primary` (#34): in `causal` mode its reads go to
    /// the primary.
    pub causal_primary: bool,
    /// MySQL session state (ignored for PostgreSQL clients).
    pub mysql: MySqlQuery,
}

/// The MySQL session state a dry-run assumes (#19): what the server last reported and what
/// holds the connection of [`SessionQuery::held_pool`].
#[derive(Debug, Clone, Copy, Default)]
pub struct MySqlQuery {
    /// The server last reported autocommit off.
    pub autocommit_off: bool,
    /// What holds the connection on `held_pool`; a transaction when `held_pool` is given
    /// without it.
    pub hold: Option<Hold>,
    /// The session's transactions are declared `READ ONLY`.
    pub read_only: bool,
}

/// What the router does on PostgreSQL pools and not on a generic PostgreSQL-wire engine's
/// (`engine = "generic"`, #35), as the dry-run says it.
const GENERIC_ENGINE_SKIPS: [&str; 3] = [
    "no RESET SESSION AUTHORIZATION / RESET ROLE / RESET ALL / SET of the client's settings when a connection is handed over: settings a client makes there stay on that connection",
    "health is checked with health.check_query only: no pg_is_in_recovery() role check, no WAL positions",
    "no DISCARD ALL at the end of a session: a connection that carried a pinned session is closed instead",
];

impl ControlHandle {
    /// The decision live traffic would get for `q` now, with its evidence: the same router code
    /// over the current rules and catalogs, without sending anything anywhere.
    pub fn route_test(&self, q: RouteQuery) -> Result<RouteTest, ControlError> {
        self.call(move |cp| cp.route_test(&q))
    }

    /// Each pool's shape limiter (#41), merged over cores.
    pub fn limits(&self) -> Result<LimitsView, ControlError> {
        self.call(|cp| {
            let reports = cp.collect_with(false);
            limits::limits_view(&cp.current.config, &reports)
        })
    }

    /// The pattern rules added through the API.
    pub fn pattern_rules(&self) -> Result<Vec<PatternRuleView>, ControlError> {
        self.call(|cp| cp.dynamic.iter().map(PatternRuleView::from).collect())
    }

    /// Adds a runtime pattern rule and publishes it to every core.
    pub fn add_pattern_rule(&self, rule: PatternRule) -> Result<RulesVersion, ControlError> {
        self.call(move |cp| cp.add_pattern_rule(rule))?
    }

    /// Removes the runtime pattern rule `name`, or all of them with `None`; returns how many
    /// went and the version every core acknowledged.
    pub fn remove_pattern_rules(&self, name: Option<String>) -> Result<(usize, RulesVersion), ControlError> {
        self.call(move |cp| cp.remove_pattern_rules(name.as_deref()))?
    }

    /// The translations added through the API, with their compiled forms.
    pub fn translations(&self) -> Result<Vec<TranslationView>, ControlError> {
        self.call(|cp| (0..cp.translations.len()).filter_map(|i| cp.translation_view(i)).collect())
    }

    /// Registers a runtime translation, publishes it, and returns its parameterized forms and
    /// literal mapping.
    pub fn add_translation(&self, rule: TranslationRule) -> Result<TranslationView, ControlError> {
        self.call(move |cp| cp.add_translation(rule))?
    }

    /// Removes runtime translation `index`, or all of them with `None`.
    pub fn remove_translations(&self, index: Option<usize>) -> Result<(usize, RulesVersion), ControlError> {
        self.call(move |cp| cp.remove_translations(index))?
    }

    /// Digest statistics merged over cores, longest total time first, at most `limit` shapes.
    pub fn digests(&self, limit: usize) -> Result<DigestsView, ControlError> {
        self.call(move |cp| cp.digests(limit))
    }

    /// Clears the digest statistics on every core; returns how many cores confirmed.
    pub fn reset_digests(&self) -> Result<usize, ControlError> {
        self.call(|cp| cp.reset_digests())?
    }
}

impl ControlPlane {
    fn route_test(&mut self, q: &RouteQuery) -> RouteTest {
        let mut view = self.route_decision(q);
        // #41: whether the pool's limiter would hold the statement back now.
        if let (Some(pool), Ok(digest)) = (view.pool.clone(), view.fingerprint.parse::<u64>()) {
            if self.current.config.pool(&pool).is_some_and(|p| p.shape_limits.any()) {
                let reports = self.collect_with(false);
                view.shape_limit = limits::limit_test(&self.current.config, &reports, &pool, digest);
            }
        }
        view
    }

    fn route_decision(&self, q: &RouteQuery) -> RouteTest {
        let config = &self.current.config;
        let protocol =
            q.protocol.or_else(|| config.listeners.first().map(|l| l.protocol)).unwrap_or(Protocol::Postgres);
        let mut input = RouteInput::new(&q.sql, protocol, &q.user, &q.database);
        let held: Option<Arc<str>> = q.session.held_pool.as_deref().map(Arc::from);
        input.session.transaction_pool = held.as_ref();
        input.session.lex_mode = q.session.lex_mode;
        input.session.primary_only = q.session.serializable.then_some("serializable_session");
        input.session.pinned_to_primary =
            q.session.causal_primary && config.routing.read_your_writes == crate::config::ReadYourWrites::Causal;
        let hold = held.as_ref().map(|_| q.session.mysql.hold.unwrap_or(Hold::Transaction));
        input.session.read_only_transaction = hold == Some(Hold::Transaction) && q.session.mysql.read_only;
        let mut explanation = self.explainer.explain(&input);
        let mut view = if protocol == Protocol::MySql {
            let settled = self.settle_mysql(q, hold, &mut explanation.decision);
            let mut view = RouteTest::new(self.current.version.0, protocol, &explanation);
            view.settled_by_mysql_session(hold, &settled);
            view
        } else {
            RouteTest::new(self.current.version.0, protocol, &explanation)
        };
        let pool = view.pool.as_deref().and_then(|name| config.pools.iter().find(|p| p.name == name));
        view.pool_protocol = pool.map(|p| p.backend_protocol(protocol).as_str());
        let generic =
            pool.filter(|p| p.backend_protocol(protocol) == Protocol::Postgres && p.engine == Engine::Generic);
        view.pool_engine = pool.map(|p| p.engine.as_str());
        if let Some(p) = generic {
            view.engine_skips = GENERIC_ENGINE_SKIPS.to_vec();
            if p.role == crate::config::PoolRole::Replica {
                view.engine_skips.push("no replica lag or read-your-writes position is measured there");
            }
        }
        view
    }

    /// What a MySQL session in the state `q` describes makes of `decision`: the session's own
    /// function, over the session's pool (`held_pool`, else the pool the router chose).
    fn settle_mysql(&self, q: &RouteQuery, hold: Option<Hold>, decision: &mut Decision) -> Settled {
        let rules = self.explainer.rules();
        let pool = q.session.held_pool.clone().or_else(|| decision.pool().map(|p| p.to_string())).unwrap_or_default();
        let primary = rules.primary_pool(Protocol::MySql).cloned();
        let read = rules.read_pool(Protocol::MySql);
        // As the session judges its own pool: the role, or the read pool that is not also the primary.
        let on_replica = rules.is_replica(&pool)
            || (read.is_some_and(|r| **r == *pool) && primary.as_deref() != Some(pool.as_str()));
        let statement_pooling =
            self.current.config.pools.iter().any(|p| p.name == pool && p.mode == PoolMode::Statement);
        let m = q.session.mysql;
        let in_transaction = hold == Some(Hold::Transaction);
        let session = MySqlSession {
            pool: &pool,
            on_replica,
            hold,
            cursor_only: hold == Some(Hold::Cursor) && !m.autocommit_off,
            opens_write_transaction: m.autocommit_off && !in_transaction && !m.read_only,
            statement_pooling,
            primary,
        };
        (self.setup.settle_mysql)(decision, &q.sql, &session)
    }

    /// Compiles the current configuration with these runtime rules and publishes the result;
    /// nothing changes when the rules do not compile.
    fn republish(
        &mut self,
        dynamic: Vec<PatternRule>,
        translations: Vec<TranslationRule>,
    ) -> Result<RulesVersion, ControlError> {
        let config = self.current.config.clone();
        let snap = Snapshot::build(self.next_version(), config, &dynamic, &translations)?;
        self.dynamic = dynamic;
        self.translations = translations;
        self.publish(Arc::new(snap))
    }

    fn add_pattern_rule(&mut self, rule: PatternRule) -> Result<RulesVersion, ControlError> {
        let name = rule.name.trim();
        if name.is_empty() {
            return Err(ControlError::BadRequest("a rule needs a name".into()));
        }
        let routing = &self.current.config.routing;
        let taken = routing.pattern_rules.iter().any(|r| r.name == name)
            || routing.rules.iter().any(|r| r.name == name)
            || self.dynamic.iter().any(|r| r.name == name);
        if taken {
            return Err(ControlError::BadRequest(format!(
                "a rule named `{name}` already exists; rule names are unique"
            )));
        }
        let mut dynamic = self.dynamic.clone();
        dynamic.push(rule);
        self.republish(dynamic, self.translations.clone())
    }

    fn remove_pattern_rules(&mut self, name: Option<&str>) -> Result<(usize, RulesVersion), ControlError> {
        let mut dynamic = self.dynamic.clone();
        match name {
            Some(n) => dynamic.retain(|r| r.name != n),
            None => dynamic.clear(),
        }
        let removed = self.dynamic.len() - dynamic.len();
        if let (Some(n), 0) = (name, removed) {
            return Err(ControlError::NotFound(format!("no runtime pattern rule named `{n}`")));
        }
        let version = self.republish(dynamic, self.translations.clone())?;
        Ok((removed, version))
    }

    fn translation_view(&self, index: usize) -> Option<TranslationView> {
        let rule = self.translations.get(index)?;
        let templates = (self.setup.describe)(&self.current.config, rule);
        Some(TranslationView::new(index, rule, templates))
    }

    fn add_translation(&mut self, rule: TranslationRule) -> Result<TranslationView, ControlError> {
        let mut translations = self.translations.clone();
        translations.push(rule);
        let index = translations.len() - 1;
        self.republish(self.dynamic.clone(), translations)?;
        self.translation_view(index).ok_or_else(|| ControlError::NotFound("the translation vanished".into()))
    }

    fn remove_translations(&mut self, index: Option<usize>) -> Result<(usize, RulesVersion), ControlError> {
        let mut translations = self.translations.clone();
        match index {
            Some(i) if i < translations.len() => {
                translations.remove(i);
            }
            Some(i) => return Err(ControlError::NotFound(format!("no runtime translation with index {i}"))),
            None => translations.clear(),
        }
        let removed = self.translations.len() - translations.len();
        let version = self.republish(self.dynamic.clone(), translations)?;
        Ok((removed, version))
    }

    fn digests(&mut self, limit: usize) -> DigestsView {
        let reports = self.collect_with(true);
        let cores_reporting = reports.len();
        let merged = DigestSnapshot::merge(reports.into_iter().map(|r| r.digests));
        let shapes = merged.rows.len();
        DigestsView {
            cores_reporting,
            shapes,
            dropped: merged.dropped,
            digests: merged.rows.into_iter().take(limit).map(Into::into).collect(),
        }
    }

    fn reset_digests(&mut self) -> Result<usize, ControlError> {
        let (tx, rx) = unbounded();
        let mut expected = 0;
        for (i, core) in self.setup.cores.iter().enumerate() {
            let running = !self.stopped.get(i).copied().unwrap_or(true);
            if running && core.send(CoreCommand::ResetDigests(tx.clone())).is_ok() {
                expected += 1;
            }
        }
        let deadline = Instant::now() + CORE_REPLY_TIMEOUT;
        let mut confirmed = Vec::with_capacity(expected);
        while confirmed.len() < expected {
            match rx.recv_deadline(deadline) {
                Ok(core) => confirmed.push(core),
                Err(_) => break,
            }
        }
        if confirmed.len() < expected {
            let silent = (0..self.setup.cores.len())
                .filter(|i| !self.stopped.get(*i).copied().unwrap_or(true))
                .map(|i| super::msg::CoreId(i as u16))
                .filter(|c| !confirmed.contains(c))
                .collect();
            return Err(ControlError::CoresSilent(silent));
        }
        Ok(confirmed.len())
    }
}
