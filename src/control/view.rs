//! What the control plane answers the admin API with: plain, serializable views of routing
//! decisions, runtime rules and digest statistics, so the admin server never needs the routing
//! engine's types.

use serde::Serialize;

use crate::config::{PatternRule, Protocol, RuleTarget, TranslationRule};
use crate::metrics::DigestRow;
use crate::routing::{DecisionKind, Explanation, Hold, KeySpace, Outcome, Settled};

/// `GET /api/routing/test`: a dry-run decision with its evidence.
#[derive(Debug, Clone, Serialize)]
pub struct RouteTest {
    /// Version of the rules that decided.
    pub rules_version: u64,
    /// The client protocol assumed.
    pub protocol: &'static str,
    /// `route`, `reject` (a rule refuses it) or `error` (a hint that cannot be honored).
    pub outcome: &'static str,
    /// The pool it would run on.
    pub pool: Option<String>,
    /// The protocol that pool's backends speak (`postgres` or `mysql`): the other one than
    /// `protocol` means the statement runs through the bridge (#24).
    pub pool_protocol: Option<&'static str>,
    /// What that pool's backends are (`postgres` or `generic`, #35).
    pub pool_engine: Option<&'static str>,
    /// What the router does on PostgreSQL pools but will not do on that generic engine's.
    pub engine_skips: Vec<&'static str>,
    /// The reject message or error text.
    pub message: Option<String>,
    /// The decision label (`sqp_routing_decisions_total{decision}`).
    pub decision: &'static str,
    /// The chain step behind the target.
    pub step: &'static str,
    /// Why this target (`replica_eligible`, `row_lock`, `default`...).
    pub reason: &'static str,
    /// The matched rule's name.
    pub rule: Option<String>,
    /// The SQL a translation rule would send instead.
    pub rewritten_sql: Option<String>,
    /// For a MySQL client's `?` parameters that the translation moves or repeats: for each `?`
    /// of `rewritten_sql`, the client's parameter (0-based) it binds; `null` when in order.
    pub rewritten_param_order: Option<Vec<u16>>,
    /// For each literal a translation writes into `rewritten_sql`: the client's literal as
    /// written and what it became there (a JSON array as a list literal, #35).
    pub rewritten_literals: Vec<PlacedLiteral>,
    /// The fingerprint as a decimal u64 (what `hash` rules take), as a string so JSON readers
    /// lose no digits.
    pub fingerprint: String,
    /// The same fingerprint in hex.
    pub fingerprint_hex: String,
    /// `lexer` or `ast`: which normalization produced it.
    pub fingerprint_space: &'static str,
    /// The lexer-normalized text.
    pub normalized: String,
    /// The `/* querypilot: route=... */` hint found, if any.
    pub hint: Option<String>,
    /// Whether analysis proved it may run on a replica.
    pub replica_eligible: bool,
    /// Why not, when it may not.
    pub ineligibility: Option<&'static str>,
    /// Whether running it may change data (starts read-your-writes pinning).
    pub writes: bool,
    /// The pool-role check (#19): `not_replica`, `replica_safe`, `allowed_by_rule` (a rule's
    /// `allow_writes`) or `refused`.
    pub role_check: &'static str,
    /// Whether it could run on a replica-role pool at all (eligible reads, plus transaction
    /// control and session settings that change nothing).
    pub replica_safe: bool,
    /// The session tokenizing mode the statement was read in: `default`, or e.g.
    /// `standard_conforming_strings=off`, `NO_BACKSLASH_ESCAPES,ANSI_QUOTES`, `unknown`.
    pub lexer_mode: String,
    /// Why the session was kept where it is: `transaction` (a held connection) or a session
    /// setting a standby cannot serve (`serializable_session`); `null` when nothing held it.
    pub hold: Option<&'static str>,
    /// MySQL clients: what the session makes of the router's answer (#19): `as_routed`,
    /// `write_transaction_on_primary`, `detour_to_primary`, `refused_held_replica` or
    /// `refused_statement_pooling`; `null` for PostgreSQL clients.
    pub session_check: Option<&'static str>,
    /// The full analysis.
    pub analysis: AnalysisView,
    /// What the pool's shape limiter would do with the statement now (#41); `null` when the
    /// pool has no limiter.
    pub shape_limit: Option<super::limits::LimitTest>,
}

impl RouteTest {
    /// Folds in what a MySQL session held by `hold` made of the decision (#19): its refusals
    /// become errors (1792 / 1235 for the client), a detour or a write transaction moves the
    /// statement to the primary, and `hold` names what keeps the session where it is.
    pub fn settled_by_mysql_session(&mut self, hold: Option<Hold>, settled: &Settled) {
        self.session_check = Some(settled.as_str());
        self.hold = hold.map(Hold::as_str).or(self.hold);
        match settled {
            Settled::AsRouted => {}
            Settled::HeldReplica(text) | Settled::StatementPooling(text) => {
                (self.outcome, self.pool, self.message) = ("error", None, Some(text.clone()));
                self.reason = settled.as_str();
            }
            Settled::WriteTransaction | Settled::Detour => {
                self.reason = settled.as_str();
                if *settled == Settled::WriteTransaction {
                    self.hold = Some("autocommit_off");
                }
            }
        }
    }
}

/// The semantic facts behind a decision.
#[derive(Debug, Clone, Serialize)]
pub struct AnalysisView {
    /// `read`, `write`, `ddl`, `transaction`, `session`, `admin` or `unknown`.
    pub operation: &'static str,
    /// `immutable`, `stable` or `volatile`.
    pub volatility: String,
    /// The strongest row lock, e.g. `FOR UPDATE`.
    pub locking: Option<String>,
    /// Connection affinities found.
    pub affinity: Vec<&'static str>,
    /// Statements in the string.
    pub statement_count: u16,
    /// What was observed.
    pub evidence: Vec<EvidenceView>,
}

/// One observation of the analysis.
#[derive(Debug, Clone, Serialize)]
pub struct EvidenceView {
    /// What, e.g. `volatile_function`.
    pub fact: &'static str,
    /// Specifics, e.g. the function name.
    pub detail: String,
}

impl RouteTest {
    /// The view of an explanation made under rules `version` for `protocol` clients.
    pub fn new(version: u64, protocol: Protocol, e: &Explanation) -> RouteTest {
        let d = &e.decision;
        let (outcome, pool, message) = match &d.outcome {
            Outcome::Route(p) => ("route", Some(p.to_string()), None),
            Outcome::Reject(m) => ("reject", None, Some(m.to_string())),
            Outcome::Error(err) => ("error", None, Some(err.to_string())),
        };
        let a = &e.analysis;
        RouteTest {
            rules_version: version,
            protocol: protocol.as_str(),
            outcome,
            pool,
            pool_protocol: None,
            pool_engine: None,
            engine_skips: Vec::new(),
            message,
            decision: d.kind.as_str(),
            step: d.step.as_str(),
            reason: d.reason,
            rule: d.rule.as_deref().map(str::to_owned),
            rewritten_sql: d.rewritten_sql().map(str::to_owned),
            rewritten_param_order: d.param_order().map(<[u16]>::to_vec),
            rewritten_literals: d
                .rewritten
                .as_ref()
                .map(|t| {
                    t.placed
                        .iter()
                        .map(|(client, lands_as)| PlacedLiteral { client: client.clone(), lands_as: lands_as.clone() })
                        .collect()
                })
                .unwrap_or_default(),
            fingerprint: d.fingerprint.0.to_string(),
            fingerprint_hex: d.fingerprint.to_string(),
            fingerprint_space: match e.key.space {
                KeySpace::Lexer => "lexer",
                KeySpace::Ast => "ast",
            },
            normalized: e.normalized.clone(),
            hint: e.hint.map(|h| format!("{h:?}").to_ascii_lowercase()),
            replica_eligible: d.facts.replica_eligible(),
            ineligibility: d.facts.ineligibility,
            writes: d.writes,
            role_check: d.replica_check.as_str(),
            replica_safe: d.facts.replica_safe(),
            lexer_mode: e.key.mode.describe(),
            hold: match (d.kind, d.reason) {
                (DecisionKind::TransactionPin, _) => Some("transaction"),
                (_, "serializable_session") => Some("serializable_session"),
                _ => None,
            },
            session_check: None,
            analysis: AnalysisView {
                operation: a.operation.name(),
                volatility: format!("{:?}", a.volatility).to_ascii_lowercase(),
                locking: a.locking.map(|l| l.to_string()),
                affinity: a.affinity.iter().map(|x| x.name()).collect(),
                statement_count: a.statement_count,
                evidence: a
                    .evidence
                    .iter()
                    .map(|ev| EvidenceView { fact: ev.fact, detail: ev.detail.clone() })
                    .collect(),
            },
            shape_limit: None,
        }
    }
}

/// A pattern rule added through the API.
#[derive(Debug, Clone, Serialize)]
pub struct PatternRuleView {
    /// Rule name.
    pub name: String,
    /// `template`, `regex` or `hash`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// The pattern.
    pub pattern: String,
    /// Target pool, unless it rejects.
    pub pool: Option<String>,
    /// Reject message, if it rejects.
    pub reject: Option<String>,
    /// Lower numbers are tried first.
    pub priority: i32,
    /// The rule may send statements that are not replica-safe to a replica-role pool.
    pub allow_writes: bool,
}

impl From<&PatternRule> for PatternRuleView {
    fn from(r: &PatternRule) -> Self {
        let (pool, reject) = match &r.target {
            RuleTarget::Pool(p) => (Some(p.clone()), None),
            RuleTarget::Reject(m) => (None, Some(m.clone())),
        };
        PatternRuleView {
            name: r.name.clone(),
            kind: r.kind.as_str(),
            pattern: r.pattern.clone(),
            pool,
            reject,
            priority: r.priority,
            allow_writes: r.allow_writes,
        }
    }
}

/// A translation added through the API, with what it compiled to.
#[derive(Debug, Clone, Serialize)]
pub struct TranslationView {
    /// Position among the runtime translations (what `DELETE ?index=` takes).
    pub index: usize,
    /// The rule name decisions show (`api.translations[index]`).
    pub rule: String,
    /// The example as registered.
    pub original_sql: String,
    /// The replacement as registered.
    pub translated_sql: String,
    /// The pool translated statements run on.
    pub target_pool: String,
    /// One compiled template per client protocol with a listener.
    pub templates: Vec<TemplateView>,
}

impl TranslationView {
    /// The view of runtime translation `index`.
    pub fn new(index: usize, rule: &TranslationRule, templates: Vec<TemplateView>) -> Self {
        TranslationView {
            index,
            rule: format!("api.translations[{index}]"),
            original_sql: rule.original_sql.clone(),
            translated_sql: rule.translated_sql.clone(),
            target_pool: rule.target_pool.clone(),
            templates,
        }
    }
}

/// A translation compiled for one client protocol: the parameterized forms and where each
/// translated literal takes its value from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct TemplateView {
    /// The client protocol (source dialect).
    pub protocol: &'static str,
    /// The original, normalized (literals as placeholders).
    pub original: String,
    /// The translation, normalized.
    pub translated: String,
    /// The original's literal slots, in order.
    pub original_literals: Vec<LiteralView>,
    /// Every literal of the translation with its source.
    pub mapping: Vec<MappingView>,
    /// What is likely wrong with the rule although it compiles (also logged at load and printed
    /// by `--check`).
    pub warnings: Vec<String>,
}

/// A client literal and what a translation made of it (`GET /api/routing/test`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlacedLiteral {
    /// The literal as the client wrote it.
    pub client: String,
    /// Its text in the rewritten statement.
    pub lands_as: String,
}

/// One literal slot of the original.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LiteralView {
    /// 0-based slot index.
    pub index: usize,
    /// `number`, `string`, `bool`, `null`, `bits`, `param` or `in_list`.
    pub kind: &'static str,
    /// Its text in the example.
    pub text: String,
}

/// One literal of the translation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct MappingView {
    /// Literal kind.
    pub kind: &'static str,
    /// Its text in the translated example.
    pub text: String,
    /// The original slot whose value it takes; `None`: it stays a constant.
    pub from_original: Option<usize>,
    /// The original slot holds a JSON array whose items this list literal takes.
    pub json_array: bool,
}

/// `GET /api/stats/digests`.
#[derive(Debug, Clone, Serialize)]
pub struct DigestsView {
    /// Cores whose tables are included.
    pub cores_reporting: usize,
    /// Shapes known across cores (before `limit`).
    pub shapes: usize,
    /// Executions not recorded because a core's table was full.
    pub dropped: u64,
    /// Per shape, by total time, longest first.
    pub digests: Vec<DigestView>,
}

/// One query shape, merged over cores.
#[derive(Debug, Clone, Serialize)]
pub struct DigestView {
    /// Decimal u64 (as a string) and hex fingerprint.
    pub fingerprint: String,
    /// The same in hex.
    pub fingerprint_hex: String,
    /// Client protocol.
    pub protocol: &'static str,
    /// Normalized text.
    pub normalized: String,
    /// Executions.
    pub calls: u64,
    /// Summed time, milliseconds.
    pub total_ms: f64,
    /// Mean time, milliseconds.
    pub mean_ms: f64,
    /// Longest execution, milliseconds.
    pub max_ms: f64,
    /// Median execution time, milliseconds, within 12.5% (`metrics::sketch`).
    pub p50_ms: f64,
    /// 99th percentile execution time, milliseconds, within 12.5%.
    pub p99_ms: f64,
    /// Rows returned or affected.
    pub rows: u64,
    /// Executions ending in an error.
    pub errors: u64,
    /// Pools it ran on.
    pub pools: Vec<String>,
}

impl From<DigestRow> for DigestView {
    fn from(r: DigestRow) -> Self {
        let ms = |d: std::time::Duration| d.as_secs_f64() * 1000.0;
        DigestView {
            fingerprint: r.fingerprint.to_string(),
            fingerprint_hex: format!("{:016x}", r.fingerprint),
            protocol: r.protocol,
            total_ms: ms(r.total),
            mean_ms: ms(r.mean()),
            max_ms: ms(r.max),
            p50_ms: ms(r.percentile(0.5)),
            p99_ms: ms(r.percentile(0.99)),
            normalized: r.normalized,
            calls: r.calls,
            rows: r.rows,
            errors: r.errors,
            pools: r.pools,
        }
    }
}
