//! Sans-IO session state for transaction and statement pooling: which session settings a client
//! made (so they can be replayed on whatever backend connection it borrows next) and what pins
//! it to one backend connection for good (state that cannot be replayed).
//!
//! SET is transactional in PostgreSQL, so effects are staged while a statement or transaction
//! runs and applied only once it committed.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use crate::sql::lexer::{Lexer, Token, TokenKind};
use crate::sql::Dialect;

/// Why a client is pinned to its backend connection for the rest of its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinReason {
    /// `CREATE TEMP TABLE` and friends.
    TempObject,
    /// Session-level advisory locks.
    AdvisoryLock,
    /// `LISTEN`.
    Listen,
    /// SQL-level `PREPARE`.
    SqlPrepare,
    /// `DECLARE ... WITH HOLD` cursors.
    HoldCursor,
    /// Settings changed in ways that cannot be replayed (`set_config`, `SET ROLE`, ...).
    UntrackedSetting,
}

impl PinReason {
    /// Metric label / log value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TempObject => "temp_object",
            Self::AdvisoryLock => "advisory_lock",
            Self::Listen => "listen",
            Self::SqlPrepare => "sql_prepare",
            Self::HoldCursor => "hold_cursor",
            Self::UntrackedSetting => "untracked_setting",
        }
    }
}

/// The session-relevant effect of one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// `SET name ...` at session level: replay `stmt` to restore it.
    Set {
        /// Lower-cased parameter name.
        name: String,
        /// The statement text to replay.
        stmt: String,
    },
    /// `RESET name`.
    Reset(String),
    /// `RESET ALL` or `DISCARD ALL`.
    ResetAll,
    /// State that pins the session.
    Pin(PinReason),
}

/// Lists the session effects of a (possibly multi-statement) PostgreSQL query string.
pub fn pg_effects(sql: &str) -> Vec<Effect> {
    let mut effects = Vec::new();
    let tokens: Vec<Token<'_>> = Lexer::new(sql, Dialect::Postgres).filter(|t| t.kind != TokenKind::Comment).collect();
    for stmt in tokens.split(|t| t.kind == TokenKind::Semicolon) {
        classify(sql, stmt, &mut effects);
    }
    effects
}

fn word(t: Option<&Token<'_>>, kw: &str) -> bool {
    t.is_some_and(|t| t.is_word(kw))
}

fn classify(sql: &str, stmt: &[Token<'_>], out: &mut Vec<Effect>) {
    let (Some(first), Some(last)) = (stmt.first(), stmt.last()) else { return };
    let text = sql.get(first.start..last.end()).unwrap_or("").trim();
    let second = stmt.get(1);
    if first.is_word("SET") {
        classify_set(text, &stmt[1..], out);
    } else if first.is_word("RESET") {
        match second {
            Some(t) if t.is_word("ALL") => out.push(Effect::ResetAll),
            Some(t) => out.push(Effect::Reset(t.text.to_ascii_lowercase())),
            None => {}
        }
    } else if first.is_word("DISCARD") && word(second, "ALL") {
        out.push(Effect::ResetAll);
    } else if first.is_word("LISTEN") {
        out.push(Effect::Pin(PinReason::Listen));
    } else if first.is_word("PREPARE") && !word(second, "TRANSACTION") {
        out.push(Effect::Pin(PinReason::SqlPrepare));
    } else if first.is_word("DECLARE") && has_seq(stmt, &["WITH", "HOLD"]) {
        out.push(Effect::Pin(PinReason::HoldCursor));
    } else if first.is_word("CREATE") && creates_temp(stmt) {
        out.push(Effect::Pin(PinReason::TempObject));
    }
    for (i, t) in stmt.iter().enumerate() {
        if t.kind != TokenKind::Word || stmt.get(i + 1).is_none_or(|n| n.kind != TokenKind::LParen) {
            continue;
        }
        let f = t.text.to_ascii_lowercase();
        if matches!(
            f.as_str(),
            "pg_advisory_lock" | "pg_advisory_lock_shared" | "pg_try_advisory_lock" | "pg_try_advisory_lock_shared"
        ) {
            out.push(Effect::Pin(PinReason::AdvisoryLock));
        } else if f == "set_config" {
            out.push(Effect::Pin(PinReason::UntrackedSetting));
        }
    }
}

fn has_seq(stmt: &[Token<'_>], seq: &[&str]) -> bool {
    stmt.windows(seq.len()).any(|w| w.iter().zip(seq).all(|(t, k)| t.is_word(k)))
}

fn creates_temp(stmt: &[Token<'_>]) -> bool {
    // CREATE [GLOBAL|LOCAL] {TEMP|TEMPORARY} {TABLE|VIEW|SEQUENCE}, or CREATE ... TABLE ... AS
    // with TEMP: the keyword sits before the object kind.
    stmt.iter().take(4).any(|t| t.is_word("TEMP") || t.is_word("TEMPORARY"))
}

fn classify_set(text: &str, rest: &[Token<'_>], out: &mut Vec<Effect>) {
    let mut rest = rest;
    match rest.first() {
        Some(t) if t.is_word("LOCAL") => return, // transaction-scoped: dies with the transaction
        Some(t) if t.is_word("SESSION") => {
            rest = &rest[1..];
            if rest.first().is_some_and(|t| t.is_word("AUTHORIZATION") || t.is_word("CHARACTERISTICS")) {
                out.push(Effect::Pin(PinReason::UntrackedSetting));
                return;
            }
        }
        Some(t) if t.is_word("TRANSACTION") || t.is_word("CONSTRAINTS") => return,
        Some(t) if t.is_word("ROLE") => {
            out.push(Effect::Pin(PinReason::UntrackedSetting));
            return;
        }
        _ => {}
    }
    let name = match (rest.first(), rest.get(1)) {
        (Some(a), Some(b)) if a.is_word("TIME") && b.is_word("ZONE") => "timezone".to_owned(),
        (Some(a), _) if a.is_word("SCHEMA") => "search_path".to_owned(),
        (Some(a), _) if a.is_word("NAMES") => "client_encoding".to_owned(),
        (Some(a), Some(b)) if b.kind == TokenKind::Dot => {
            // Custom placeholder variables: `SET myapp.user_id = 1`.
            let tail = rest.get(2).map_or("", |t| t.text);
            format!("{}.{}", a.text.to_ascii_lowercase(), tail.to_ascii_lowercase())
        }
        (Some(a), _) => a.text.trim_matches('"').to_ascii_lowercase(),
        (None, _) => return,
    };
    out.push(Effect::Set { name, stmt: text.to_owned() });
}

/// Settings a client made, plus its pins.
#[derive(Debug, Default, Clone)]
pub struct SessionState {
    settings: BTreeMap<String, String>,
    staged: Vec<Effect>,
    pin: Option<PinReason>,
    signature: u64,
}

impl SessionState {
    /// Starts from the client's startup parameters that differ from the server defaults.
    pub fn from_startup<'a>(params: impl Iterator<Item = (&'a str, &'a str)>) -> Self {
        let mut s = Self::default();
        for (name, value) in params {
            let stmt = format!("SET {} TO {}", quote_ident(name), quote_literal(value));
            s.settings.insert(name.to_ascii_lowercase(), stmt);
        }
        s.resign();
        s
    }

    /// Records the effects of a statement that was sent; they apply once it commits.
    pub fn stage(&mut self, effects: impl IntoIterator<Item = Effect>) {
        for e in effects {
            match e {
                // A pin holds even if the transaction rolls back: being conservative costs only
                // a dedicated connection.
                Effect::Pin(r) => {
                    self.pin.get_or_insert(r);
                }
                other => self.staged.push(other),
            }
        }
    }

    /// The staged effects committed: apply them.
    pub fn commit(&mut self) {
        if self.staged.is_empty() {
            return;
        }
        for e in std::mem::take(&mut self.staged) {
            match e {
                Effect::Set { name, stmt } => {
                    self.settings.insert(name, stmt);
                }
                Effect::Reset(name) => {
                    self.settings.remove(&name);
                }
                Effect::ResetAll => self.settings.clear(),
                Effect::Pin(_) => {}
            }
        }
        self.resign();
    }

    /// The staged effects were rolled back: forget them.
    pub fn rollback(&mut self) {
        self.staged.clear();
    }

    /// Why the session is pinned, if it is.
    pub fn pin(&self) -> Option<PinReason> {
        self.pin
    }

    /// Identifies the settings; 0 means "server defaults". Equal signatures need no replay.
    pub fn signature(&self) -> u64 {
        self.signature
    }

    /// One query that turns any pooled connection's settings into this session's.
    pub fn replay_sql(&self) -> String {
        let mut sql = String::from("RESET ALL");
        for stmt in self.settings.values() {
            sql.push_str("; ");
            sql.push_str(stmt);
        }
        sql
    }

    fn resign(&mut self) {
        self.signature = if self.settings.is_empty() {
            0
        } else {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            self.settings.hash(&mut h);
            h.finish() | 1
        };
    }
}

fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

fn quote_literal(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, stmt: &str) -> Effect {
        Effect::Set { name: name.into(), stmt: stmt.into() }
    }

    #[test]
    fn recognizes_set_forms() {
        assert_eq!(
            pg_effects("SET search_path = app, public"),
            vec![set("search_path", "SET search_path = app, public")]
        );
        assert_eq!(pg_effects("set TimeZone to 'UTC';"), vec![set("timezone", "set TimeZone to 'UTC'")]);
        assert_eq!(pg_effects("SET TIME ZONE 'Europe/Paris'"), vec![set("timezone", "SET TIME ZONE 'Europe/Paris'")]);
        assert_eq!(
            pg_effects("SET SESSION statement_timeout = 5"),
            vec![set("statement_timeout", "SET SESSION statement_timeout = 5")]
        );
        assert_eq!(pg_effects("SET myapp.tenant = '7'"), vec![set("myapp.tenant", "SET myapp.tenant = '7'")]);
        assert!(pg_effects("SET LOCAL work_mem = '1MB'").is_empty());
        assert!(pg_effects("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE").is_empty());
        assert_eq!(pg_effects("SET ROLE admin"), vec![Effect::Pin(PinReason::UntrackedSetting)]);
    }

    #[test]
    fn recognizes_resets_and_pins() {
        assert_eq!(pg_effects("RESET search_path"), vec![Effect::Reset("search_path".into())]);
        assert_eq!(pg_effects("RESET ALL"), vec![Effect::ResetAll]);
        assert_eq!(pg_effects("DISCARD ALL"), vec![Effect::ResetAll]);
        assert_eq!(pg_effects("LISTEN jobs"), vec![Effect::Pin(PinReason::Listen)]);
        assert_eq!(pg_effects("CREATE TEMP TABLE t(x int)"), vec![Effect::Pin(PinReason::TempObject)]);
        assert_eq!(pg_effects("create global temporary table t(x int)"), vec![Effect::Pin(PinReason::TempObject)]);
        assert_eq!(pg_effects("PREPARE q AS SELECT 1"), vec![Effect::Pin(PinReason::SqlPrepare)]);
        assert!(pg_effects("PREPARE TRANSACTION 'x'").is_empty());
        assert_eq!(pg_effects("DECLARE c CURSOR WITH HOLD FOR SELECT 1"), vec![Effect::Pin(PinReason::HoldCursor)]);
        assert!(pg_effects("DECLARE c CURSOR FOR SELECT 1").is_empty());
        assert_eq!(pg_effects("SELECT pg_advisory_lock(1)"), vec![Effect::Pin(PinReason::AdvisoryLock)]);
        assert!(pg_effects("SELECT pg_advisory_xact_lock(1)").is_empty());
        assert_eq!(pg_effects("select set_config('a.b', '1', false)"), vec![Effect::Pin(PinReason::UntrackedSetting)]);
        assert!(pg_effects("SELECT 'SET x = 1', 'LISTEN y' -- CREATE TEMP TABLE").is_empty());
    }

    #[test]
    fn multi_statement_strings_yield_every_effect() {
        let e = pg_effects("SET a = 1; SELECT 1; LISTEN x; RESET b");
        assert_eq!(e, vec![set("a", "SET a = 1"), Effect::Pin(PinReason::Listen), Effect::Reset("b".into())]);
    }

    #[test]
    fn effects_apply_only_on_commit() {
        let mut s = SessionState::default();
        assert_eq!(s.signature(), 0);
        s.stage(pg_effects("SET search_path = a"));
        assert_eq!(s.signature(), 0, "staged, not applied");
        s.rollback();
        s.commit();
        assert_eq!(s.signature(), 0, "rolled back SET leaves nothing");
        s.stage(pg_effects("SET search_path = a"));
        s.commit();
        let sig = s.signature();
        assert_ne!(sig, 0);
        assert_eq!(s.replay_sql(), "RESET ALL; SET search_path = a");
        s.stage(pg_effects("RESET ALL"));
        s.commit();
        assert_eq!(s.signature(), 0);
    }

    #[test]
    fn startup_params_become_replayable_settings() {
        let s = SessionState::from_startup([("application_name", "it's"), ("TimeZone", "UTC")].into_iter());
        assert_eq!(s.replay_sql(), "RESET ALL; SET \"application_name\" TO 'it''s'; SET \"TimeZone\" TO 'UTC'");
        let same = SessionState::from_startup([("TimeZone", "UTC"), ("application_name", "it's")].into_iter());
        assert_eq!(s.signature(), same.signature(), "order does not matter");
    }

    #[test]
    fn pins_survive_rollback() {
        let mut s = SessionState::default();
        s.stage(pg_effects("CREATE TEMP TABLE t(x int)"));
        s.rollback();
        assert_eq!(s.pin(), Some(PinReason::TempObject));
    }
}
