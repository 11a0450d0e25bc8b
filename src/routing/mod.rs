//! The routing decision engine: for one statement of one session, which pool runs it (or why it
//! is refused), and the evidence behind that answer.
//!
//! Owns the compiled rules ([`RuleSet`], immutable, built on the control plane and shared by
//! every core), the core-local [`Router`] with its bounded plan cache, the [`Decision`] it returns
//! and the sans-IO read-your-writes state a session keeps ([`RywState`]).
//!
//! L1: depends only on `crate::sql` and `crate::config` types (and the crate's error vocabulary).
//! No runtime, no I/O, no clock: time is a parameter. The rule is "unknown never means safe": a
//! statement reaches the read pool only when analysis proved it replica-eligible and nothing
//! about the session forbids it.
//!
//! The chain, first step that decides wins:
//! 1. transaction pinning (the session's open transaction keeps its pool; reject rules still apply);
//! 2. translation rules (rewritten SQL to a target pool; never cached);
//! 3. dynamic pattern rules added at runtime (never cached);
//! 4. the plan cache (fingerprint → analysis facts and the matching fingerprint rule);
//! 5. `[[routing.pattern_rules]]` (template, regex, hash);
//! 6. `[[routing.rules]]` (regex and user/database/protocol matchers);
//! 7. read/write split or the default pool.
//!
//! What the cache stores is session- and literal-independent: the analysis facts of the shape and
//! the first template/hash rule it matches. Everything that depends on the raw text (regex rules)
//! or on the session (user/database rules, transaction, read-your-writes, hints) is applied after
//! the lookup, so one entry serves every session correctly and the common case (no regex rules)
//! costs one fingerprint pass and one hash lookup.
//!
//! Rule priority: rules are tried from the highest `priority` to the lowest (ties in file
//! order), as the configuration documents ("higher wins among matching rules").
//!
//! Session state, applied after the rules, in this order:
//! - a reject (from any rule) always wins: neither a transaction nor a hint bypasses it;
//! - an invalid `/* querypilot: ... */` hint is an error;
//! - inside a transaction the statement stays on the transaction's pool, untranslated; a hint is
//!   honored there only when it names that pool's role;
//! - `route=primary` overrides rule targets and translations (the original SQL goes to the
//!   protocol's primary pool) and pins the session; `route=replica` sends an eligible statement
//!   of an unpinned session to the read pool, and is an error otherwise;
//! - rule targets are explicit operator choices: read-your-writes does not move them;
//! - the split sends a replica-eligible statement to the read pool unless the session is pinned.
//!
//! MySQL clients follow `[routing.mysql]` (its own split and default pool) when it is set, the
//! top-level keys otherwise. The `ast` and `auto` strategies both key single SELECTs by their AST
//! and everything else by the lexer; the two hash spaces never share an entry.

mod cache;
pub mod causal;
mod decision;
mod held;
mod memo;
mod reading;
mod router;
mod rules;
mod ryw;

#[cfg(test)]
mod tests;

use std::sync::Arc;

/// The session tokenizing mode routing inputs carry (defined with the lexer).
pub use crate::sql::mode::LexMode;
pub use cache::CacheStats;
pub use decision::{Decision, DecisionError, DecisionKind, Explanation, Facts, Outcome, ReplicaCheck};
pub use held::{Hold, MySqlSession, Settled};
pub use router::Router;
pub use rules::{translation_warnings, RuleError, RuleErrors, RuleSet};
pub use ryw::{FrozenRyw, RywState};

use crate::config::{NormalizationStrategy, Protocol};
use crate::sql::fingerprint::Fingerprint;
use crate::sql::volatility::FunctionCatalog;
use crate::sql::Dialect;

/// One statement to route, with what the rules may match on and the session's current state.
#[derive(Debug, Clone, Copy)]
pub struct RouteInput<'a> {
    /// The SQL text as the client sent it (for prepared statements: the original SQL).
    pub sql: &'a str,
    /// The listener protocol the client speaks (decides the SQL dialect).
    pub protocol: Protocol,
    /// The client's user name (for `[[routing.rules]]` `user` matchers).
    pub user: &'a str,
    /// The database the client asked for (for `[[routing.rules]]` `database` matchers).
    pub database: &'a str,
    /// The session state that shapes the answer.
    pub session: SessionView<'a>,
    /// A key computed earlier by [`Router::key`] for this same `sql` (a prepared statement's
    /// memo); ignored when it was computed under another protocol or normalization strategy.
    pub key: Option<StatementKey>,
}

impl<'a> RouteInput<'a> {
    /// An input outside any transaction with a fresh session: the common test and dry-run case.
    pub fn new(sql: &'a str, protocol: Protocol, user: &'a str, database: &'a str) -> Self {
        RouteInput { sql, protocol, user, database, session: SessionView::default(), key: None }
    }
}

/// The parts of a session's state routing needs, as of this statement.
#[derive(Debug, Clone, Copy, Default)]
pub struct SessionView<'a> {
    /// The pool the session's open transaction runs on; `None` outside a transaction.
    pub transaction_pool: Option<&'a Arc<str>>,
    /// True while reads must go to the primary: [`RywState::pinned`] at the statement's time.
    pub pinned_to_primary: bool,
    /// True inside a `READ ONLY` transaction: nothing run there can change data, so it does not
    /// start read-your-writes pinning.
    pub read_only_transaction: bool,
    /// How the session's server tokenizes SQL now (`standard_conforming_strings`, `sql_mode`):
    /// statements are lexed and keyed in it, and analysis distrusts what it could misread.
    pub lex_mode: LexMode,
    /// Why the session's settings keep all its statements off replicas (a standby cannot serve
    /// them, e.g. `serializable_session`); `None` when nothing does.
    pub primary_only: Option<&'static str>,
}

/// The cache key of a statement: its fingerprint under the configured normalization strategy,
/// plus the lexer fingerprint translation rules are looked up by. Computing it is the one
/// lexer pass of the hot path, so a session may memo it per prepared statement.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct StatementKey {
    /// The fingerprint rules and the cache use (shown as the decision's fingerprint).
    pub fingerprint: Fingerprint,
    /// The lexer (`string` strategy) fingerprint; equal to `fingerprint` unless `ast` applied.
    pub lexer: Fingerprint,
    /// Which normalization produced `fingerprint`.
    pub space: KeySpace,
    /// The strategy configured when the key was computed.
    pub strategy: NormalizationStrategy,
    /// The protocol (dialect) the key was computed for.
    pub protocol: Protocol,
    /// The session's tokenizing mode the key was computed in: one text may be two shapes.
    pub mode: LexMode,
}

/// Which normalization produced a [`StatementKey::fingerprint`]. The two hash spaces never share
/// a cache entry or a template match.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum KeySpace {
    /// The lexer normalization (`sql::fingerprint::fingerprint`).
    Lexer,
    /// The sqlparser AST normalization (`sql::fingerprint::fingerprint_ast`, single SELECTs).
    Ast,
}

impl StatementKey {
    /// Computes the key of `sql` under `strategy`. `ast` and `auto` use the AST fingerprint for a
    /// single parsable SELECT and the lexer fingerprint for everything else (the AST strategy
    /// covers SELECT only); `string` never parses.
    pub fn compute(sql: &str, protocol: Protocol, strategy: NormalizationStrategy) -> StatementKey {
        StatementKey::compute_in(sql, protocol, strategy, LexMode::default())
    }

    /// [`StatementKey::compute`] for a session in `mode`. The AST (sqlparser knows only the
    /// default mode) is not used for text the mode could make it misread.
    pub fn compute_in(sql: &str, protocol: Protocol, strategy: NormalizationStrategy, mode: LexMode) -> StatementKey {
        StatementKey::compute_noting_values(sql, protocol, strategy, mode).0
    }

    /// [`StatementKey::compute_in`], and whether the lexer pass took a literal value out of
    /// `sql` (a text without one is worth remembering by its bytes: see `memo`).
    pub(super) fn compute_noting_values(
        sql: &str,
        protocol: Protocol,
        strategy: NormalizationStrategy,
        mode: LexMode,
    ) -> (StatementKey, bool) {
        let dialect = dialect(protocol);
        let (lexer, values) = crate::sql::fingerprint::fingerprint_noting_values(sql, dialect, mode);
        let ast = match strategy {
            _ if mode.may_misread(sql, dialect) => None,
            NormalizationStrategy::String => None,
            NormalizationStrategy::Ast | NormalizationStrategy::Auto => {
                crate::sql::fingerprint::fingerprint_ast(sql, dialect)
            }
        };
        let (fingerprint, space) = match ast {
            Some(fp) => (fp, KeySpace::Ast),
            None => (lexer, KeySpace::Lexer),
        };
        (StatementKey { fingerprint, lexer, space, strategy, protocol, mode }, values)
    }
}

/// The function catalogs analysis uses, one per dialect (built-ins plus UDFs the runtime loaded
/// from the backends). Replacing them clears the plan cache, since cached facts came from them.
#[derive(Debug, Clone)]
pub struct Catalogs {
    /// PostgreSQL functions.
    pub postgres: Arc<FunctionCatalog>,
    /// MySQL/MariaDB functions.
    pub mysql: Arc<FunctionCatalog>,
}

impl Catalogs {
    /// Built-in catalogs only (no UDFs loaded yet: every unknown function counts as volatile).
    pub fn builtin() -> Catalogs {
        Catalogs {
            postgres: Arc::new(FunctionCatalog::builtin(Dialect::Postgres)),
            mysql: Arc::new(FunctionCatalog::builtin(Dialect::MySql)),
        }
    }

    /// The catalog of `protocol`'s dialect.
    pub fn get(&self, protocol: Protocol) -> &FunctionCatalog {
        match protocol {
            Protocol::Postgres => &self.postgres,
            Protocol::MySql => &self.mysql,
        }
    }
}

/// The SQL dialect clients of `protocol` write.
pub fn dialect(protocol: Protocol) -> Dialect {
    match protocol {
        Protocol::Postgres => Dialect::Postgres,
        Protocol::MySql => Dialect::MySql,
    }
}
