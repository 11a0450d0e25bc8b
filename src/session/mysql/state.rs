//! Sans-IO MySQL session state for transaction and statement pooling: the session variables,
//! default database and character set a client chose (replayed on whichever backend connection
//! it borrows next), and what pins it to one connection for good (user variables, `GET_LOCK`,
//! temporary tables, `LOCK TABLES`, SQL-level `PREPARE`, settings that cannot be replayed).
//!
//! MySQL `SET` is not transactional: an effect applies once its statement succeeded, which the
//! relay learns from the number of results that came back before any error.

use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};

use crate::sql::lexer::{Lexer, Token, TokenKind};
use crate::sql::Dialect;

/// Why a MySQL client is pinned to its backend connection for the rest of its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinReason {
    /// `@name` user variables.
    UserVariable,
    /// `GET_LOCK` named locks.
    NamedLock,
    /// `CREATE TEMPORARY TABLE`.
    TempTable,
    /// `LOCK TABLES`.
    LockTables,
    /// SQL-level `PREPARE`.
    SqlPrepare,
    /// `LAST_INSERT_ID()` read in a later statement than the insert.
    LastInsertId,
    /// `SET TRANSACTION` for the next transaction only, `SET ROLE` and the like.
    UntrackedSetting,
}

/// The session-relevant effect of one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// A session variable: replay `stmt` to restore it.
    Set {
        /// Lower-cased variable name (`names` for `SET NAMES` / `SET CHARACTER SET`).
        name: String,
        /// The statement to replay.
        stmt: String,
    },
    /// `USE db` / `COM_INIT_DB`.
    Use(String),
    /// State that pins the session.
    Pin(PinReason),
}

/// Effects of a (possibly multi-statement) query, each tagged with the 0-based index of the
/// statement it belongs to; also the number of statements.
pub fn effects(sql: &str) -> (Vec<(usize, Effect)>, usize) {
    let tokens: Vec<Token<'_>> = Lexer::new(sql, Dialect::MySql).filter(|t| t.kind != TokenKind::Comment).collect();
    let mut out = Vec::new();
    let mut count = 0;
    for stmt in super::split::statements(&tokens) {
        let mut effs = Vec::new();
        // A stored program's body runs later, when called: defining it changes no session.
        if !super::split::defines_stored_program(stmt) {
            classify(sql, stmt, &mut effs);
        }
        out.extend(effs.into_iter().map(|e| (count, e)));
        count += 1;
    }
    (out, count.max(1))
}

fn classify(sql: &str, stmt: &[Token<'_>], out: &mut Vec<Effect>) {
    let Some(first) = stmt.first() else { return };
    let second = stmt.get(1);
    if first.is_word("SET") {
        classify_set(sql, stmt.get(1..).unwrap_or_default(), out);
    } else if first.is_word("USE") {
        if let Some(db) = second {
            out.push(Effect::Use(unquote(db.text)));
        }
    } else if first.is_word("PREPARE") {
        out.push(Effect::Pin(PinReason::SqlPrepare));
    } else if first.is_word("LOCK") && second.is_some_and(|t| t.is_word("TABLES") || t.is_word("TABLE")) {
        out.push(Effect::Pin(PinReason::LockTables));
    } else if first.is_word("CREATE") && stmt.iter().take(4).any(|t| t.is_word("TEMPORARY")) {
        out.push(Effect::Pin(PinReason::TempTable));
    }
    for (i, t) in stmt.iter().enumerate() {
        if t.kind == TokenKind::Variable && !t.text.starts_with("@@") {
            push_pin(out, PinReason::UserVariable);
        }
        if t.kind == TokenKind::Variable {
            let v = t.text.to_ascii_lowercase();
            if v.ends_with("identity") || v.ends_with("last_insert_id") {
                push_pin(out, PinReason::LastInsertId);
            }
        }
        if t.kind != TokenKind::Word || stmt.get(i + 1).is_none_or(|n| n.kind != TokenKind::LParen) {
            continue;
        }
        if t.is_word("GET_LOCK") {
            push_pin(out, PinReason::NamedLock);
        } else if t.is_word("LAST_INSERT_ID") {
            push_pin(out, PinReason::LastInsertId);
        }
    }
}

fn push_pin(out: &mut Vec<Effect>, r: PinReason) {
    if !out.contains(&Effect::Pin(r)) {
        out.push(Effect::Pin(r));
    }
}

fn unquote(s: &str) -> String {
    let t = s.trim();
    if t.len() >= 2 && t.starts_with('`') && t.ends_with('`') {
        t.get(1..t.len() - 1).unwrap_or(t).replace("``", "`")
    } else {
        t.to_owned()
    }
}

/// `SET` forms: `SET [SESSION|LOCAL|@@session.|@@] var = expr [, ...]`, `SET NAMES`, `SET
/// CHARACTER SET`, `SET TRANSACTION`, `SET GLOBAL`, `SET @user = ...`.
fn classify_set(sql: &str, rest: &[Token<'_>], out: &mut Vec<Effect>) {
    let Some(first) = rest.first() else { return };
    if first.is_word("NAMES")
        || first.is_word("CHARSET")
        || (first.is_word("CHARACTER") && rest.get(1).is_some_and(|t| t.is_word("SET")))
    {
        let (Some(a), Some(b)) = (rest.first(), rest.last()) else { return };
        let text = sql.get(a.start..b.end()).unwrap_or("");
        out.push(Effect::Set { name: "names".into(), stmt: format!("SET {text}") });
        return;
    }
    if first.is_word("TRANSACTION") || first.is_word("ROLE") || first.is_word("DEFAULT") || first.is_word("PASSWORD") {
        if !first.is_word("PASSWORD") {
            out.push(Effect::Pin(PinReason::UntrackedSetting));
        }
        return;
    }
    if first.is_word("SESSION") && rest.get(1).is_some_and(|t| t.is_word("TRANSACTION")) {
        // Isolation level and access mode are separate settings: setting one keeps the other.
        for part in split_top_level(rest.get(2..).unwrap_or_default()) {
            let (Some(a), Some(b)) = (part.first(), part.last()) else { continue };
            let text = sql.get(a.start..b.end()).unwrap_or("");
            let name = if a.is_word("ISOLATION") { ISOLATION } else { ACCESS_MODE };
            out.push(Effect::Set { name: name.into(), stmt: format!("SET SESSION TRANSACTION {text}") });
        }
        return;
    }
    if first.is_word("STATEMENT") || first.is_word("GLOBAL") || first.text.to_ascii_lowercase().starts_with("@@global.")
    {
        return; // per-statement or server-wide: no session state
    }
    for assignment in split_top_level(rest) {
        classify_assignment(sql, assignment, out);
    }
}

/// The setting key of the session's transaction isolation level (`SET SESSION TRANSACTION
/// ISOLATION LEVEL`, `tx_isolation`, `transaction_isolation`).
const ISOLATION: &str = "transaction";
/// The setting key of the session's transaction access mode (`SET SESSION TRANSACTION READ
/// ONLY | READ WRITE`, `tx_read_only`, `transaction_read_only`).
const ACCESS_MODE: &str = "transaction_access";

/// Splits `a = f(x, y), b = 2` at top-level commas.
fn split_top_level<'t, 'a>(tokens: &'t [Token<'a>]) -> Vec<&'t [Token<'a>]> {
    let mut parts = Vec::new();
    let (mut depth, mut from) = (0i32, 0usize);
    for (i, t) in tokens.iter().enumerate() {
        match t.kind {
            TokenKind::LParen => depth += 1,
            TokenKind::RParen => depth -= 1,
            TokenKind::Comma if depth == 0 => {
                parts.push(tokens.get(from..i).unwrap_or_default());
                from = i + 1;
            }
            _ => {}
        }
    }
    parts.push(tokens.get(from..).unwrap_or_default());
    parts
}

fn classify_assignment(sql: &str, tokens: &[Token<'_>], out: &mut Vec<Effect>) {
    let mut toks = tokens;
    if toks.first().is_some_and(|t| t.is_word("SESSION") || t.is_word("LOCAL")) {
        toks = toks.get(1..).unwrap_or_default();
    }
    let Some(var) = toks.first() else { return };
    if var.is_word("GLOBAL") {
        return;
    }
    let lower = var.text.to_ascii_lowercase();
    let name = match var.kind {
        TokenKind::Variable if lower.starts_with("@@global.") => return,
        TokenKind::Variable if lower.starts_with("@@") => {
            lower.trim_start_matches("@@").trim_start_matches("session.").trim_start_matches("local.").to_owned()
        }
        TokenKind::Variable => {
            push_pin(out, PinReason::UserVariable);
            return;
        }
        TokenKind::Word | TokenKind::QuotedIdent => unquote(&lower),
        _ => return,
    };
    let Some(value_from) = toks.iter().position(|t| t.kind == TokenKind::Operator).map(|p| p + 1) else { return };
    let (Some(a), Some(b)) = (toks.get(value_from), toks.last()) else { return };
    let value = sql.get(a.start..b.end()).unwrap_or("");
    let stmt = format!("SET SESSION {name} = {value}");
    // Spellings of one setting share its key, so the last one set is the one replayed.
    let name = match name.as_str() {
        "tx_isolation" | "transaction_isolation" => ISOLATION.to_owned(),
        "tx_read_only" | "transaction_read_only" => ACCESS_MODE.to_owned(),
        _ => name,
    };
    out.push(Effect::Set { stmt, name });
}

/// Whether the replayable `SET SESSION name = <value>` sets a boolean on; any value the router
/// cannot read (an expression, a variable, `DEFAULT`) counts as off.
pub fn setting_on(stmt: &str) -> bool {
    let value = stmt.rsplit_once('=').map_or("", |(_, v)| v).trim().trim_matches(|c| c == '\'' || c == '"');
    ["1", "ON", "TRUE"].iter().any(|v| value.eq_ignore_ascii_case(v))
}

/// Settings, default database and pins of one client.
#[derive(Debug, Default, Clone)]
pub struct MyState {
    settings: BTreeMap<String, String>,
    db: Option<String>,
    pin: Option<PinReason>,
    signature: u64,
}

impl MyState {
    /// Starts with the client's database (when it differs from the pool's) and a `SET NAMES`
    /// for its character set (when it differs from the backends').
    pub fn new(db: Option<String>, names: Option<String>) -> Self {
        let mut s = Self { db, ..Self::default() };
        if let Some(stmt) = names {
            s.settings.insert("names".into(), stmt);
        }
        s.resign();
        s
    }

    /// Applies the effects of the statements with index below `succeeded`; pins apply even for
    /// failed statements (being conservative costs only a dedicated connection).
    pub fn apply(&mut self, effects: &[(usize, Effect)], succeeded: usize) {
        let mut changed = false;
        for (i, e) in effects {
            match e {
                Effect::Pin(r) => {
                    self.pin.get_or_insert(*r);
                }
                _ if *i >= succeeded => {}
                // Back to the server's default: nothing of the client's is left to carry (#35:
                // `SET sql_select_limit = DEFAULT` must lift what the setting refused).
                Effect::Set { name, stmt } if sets_default(stmt) => {
                    self.settings.remove(name);
                    changed = true;
                }
                Effect::Set { name, stmt } => {
                    self.settings.insert(name.clone(), stmt.clone());
                    changed = true;
                }
                Effect::Use(db) => {
                    self.db = Some(db.clone());
                    changed = true;
                }
            }
        }
        if changed {
            self.resign();
        }
    }

    /// Forgets everything (`COM_RESET_CONNECTION`, `COM_CHANGE_USER`), starting again from
    /// `db` and `names` as [`MyState::new`] does.
    pub fn reset(&mut self, db: Option<String>, names: Option<String>) {
        *self = Self::new(db, names);
    }

    /// Why the session is pinned, if it is.
    pub fn pin(&self) -> Option<PinReason> {
        self.pin
    }

    /// The database the client selected, if it differs from the pool's.
    pub fn db(&self) -> Option<&str> {
        self.db.as_deref()
    }

    /// Identifies settings plus database; 0 means "connection defaults".
    pub fn signature(&self) -> u64 {
        self.signature
    }

    /// Whether the client made its transactions `READ ONLY` for the session (`SET SESSION
    /// TRANSACTION READ ONLY`, `tx_read_only` / `transaction_read_only` on), so an implicitly
    /// opened transaction cannot write.
    pub fn read_only_transactions(&self) -> bool {
        let Some(stmt) = self.settings.get(ACCESS_MODE).map(|s| s.to_ascii_uppercase()) else { return false };
        match stmt.rsplit_once('=') {
            Some((_, value)) => matches!(value.trim().trim_matches('\''), "1" | "ON" | "TRUE"),
            None => stmt.ends_with("READ ONLY"),
        }
    }

    /// The tracked settings: each one's name and the statement that restores it.
    pub fn settings(&self) -> impl Iterator<Item = (&str, &str)> {
        self.settings.iter().map(|(k, v)| (k.as_str(), v.as_str()))
    }

    /// Whether the setting the router replays turns autocommit off.
    pub fn autocommit_off(&self) -> bool {
        self.settings.get("autocommit").is_some_and(|stmt| !setting_on(stmt))
    }

    /// One multi-statement query that applies every tracked setting, or `None`.
    pub fn replay_sql(&self) -> Option<String> {
        if self.settings.is_empty() {
            return None;
        }
        Some(self.settings.values().cloned().collect::<Vec<_>>().join("; "))
    }

    fn resign(&mut self) {
        self.signature = if self.settings.is_empty() && self.db.is_none() {
            0
        } else {
            let mut h = std::collections::hash_map::DefaultHasher::new();
            self.settings.hash(&mut h);
            self.db.hash(&mut h);
            h.finish() | 1
        };
    }
}

/// `SET NAMES` for a handshake collation id the router knows, `None` otherwise.
pub fn names_for_collation(id: u8) -> Option<String> {
    let (cs, coll) = match id {
        8 => ("latin1", "latin1_swedish_ci"),
        33 => ("utf8mb3", "utf8mb3_general_ci"),
        45 => ("utf8mb4", "utf8mb4_general_ci"),
        46 => ("utf8mb4", "utf8mb4_bin"),
        47 => ("latin1", "latin1_bin"),
        48 => ("latin1", "latin1_general_ci"),
        63 => ("binary", "binary"),
        83 => ("utf8mb3", "utf8mb3_bin"),
        192 => ("utf8mb3", "utf8mb3_unicode_ci"),
        224 => ("utf8mb4", "utf8mb4_unicode_ci"),
        // MySQL 8 clients default to utf8mb4_0900_ai_ci, which MariaDB lacks.
        255 => ("utf8mb4", "utf8mb4_general_ci"),
        _ => return None,
    };
    Some(format!("SET NAMES {cs} COLLATE {coll}"))
}

/// Whether the one-variable `SET` statement `stmt` assigns `DEFAULT`.
fn sets_default(stmt: &str) -> bool {
    let value = match (stmt.find('='), stmt.to_ascii_lowercase().find(" to ")) {
        (Some(i), _) => stmt.get(i + 1..),
        (None, Some(i)) => stmt.get(i + 4..),
        (None, None) => None,
    };
    value.is_some_and(|v| v.trim().trim_end_matches(';').trim().eq_ignore_ascii_case("default"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(name: &str, stmt: &str) -> Effect {
        Effect::Set { name: name.into(), stmt: stmt.into() }
    }

    fn only(sql: &str) -> Vec<Effect> {
        effects(sql).0.into_iter().map(|(_, e)| e).collect()
    }

    #[test]
    fn recognizes_set_forms() {
        assert_eq!(only("SET time_zone = '+01:00'"), vec![set("time_zone", "SET SESSION time_zone = '+01:00'")]);
        assert_eq!(only("set session sql_mode='ANSI'"), vec![set("sql_mode", "SET SESSION sql_mode = 'ANSI'")]);
        assert_eq!(only("SET @@session.autocommit = 0"), vec![set("autocommit", "SET SESSION autocommit = 0")]);
        assert_eq!(only("SET @@wait_timeout=5"), vec![set("wait_timeout", "SET SESSION wait_timeout = 5")]);
        assert_eq!(
            only("SET a = CONCAT('x', 'y'), b = 2"),
            vec![set("a", "SET SESSION a = CONCAT('x', 'y')"), set("b", "SET SESSION b = 2")]
        );
        assert_eq!(only("SET NAMES latin1"), vec![set("names", "SET NAMES latin1")]);
        assert_eq!(only("SET CHARACTER SET utf8mb4"), vec![set("names", "SET CHARACTER SET utf8mb4")]);
        assert!(only("SET GLOBAL max_connections = 5").is_empty());
        assert!(only("SET @@global.max_connections = 5").is_empty());
        assert!(only("SET STATEMENT max_statement_time=1 FOR SELECT 1").is_empty());
        assert_eq!(
            only("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE"),
            vec![Effect::Pin(PinReason::UntrackedSetting)]
        );
        assert_eq!(
            only("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED"),
            vec![set("transaction", "SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")]
        );
    }

    #[test]
    fn recognizes_use_and_pins() {
        assert_eq!(only("USE `my``db`"), vec![Effect::Use("my`db".into())]);
        assert_eq!(only("use app"), vec![Effect::Use("app".into())]);
        assert_eq!(only("SET @x = 1"), vec![Effect::Pin(PinReason::UserVariable)]);
        assert_eq!(only("SELECT @x"), vec![Effect::Pin(PinReason::UserVariable)]);
        assert!(only("SELECT @@version").is_empty());
        assert_eq!(only("SELECT GET_LOCK('a', 1)"), vec![Effect::Pin(PinReason::NamedLock)]);
        assert_eq!(only("CREATE TEMPORARY TABLE t (x int)"), vec![Effect::Pin(PinReason::TempTable)]);
        assert_eq!(only("LOCK TABLES t READ"), vec![Effect::Pin(PinReason::LockTables)]);
        assert_eq!(only("PREPARE s FROM 'SELECT 1'"), vec![Effect::Pin(PinReason::SqlPrepare)]);
        assert_eq!(only("SELECT LAST_INSERT_ID()"), vec![Effect::Pin(PinReason::LastInsertId)]);
        assert!(only("SELECT 'SET @x = 1', 'GET_LOCK(' -- LOCK TABLES").is_empty());
    }

    #[test]
    fn multi_statements_are_indexed() {
        let (e, n) = effects("SET a = 1; SELECT 1; USE b;");
        assert_eq!(n, 3);
        assert_eq!(e, vec![(0, set("a", "SET SESSION a = 1")), (2, Effect::Use("b".into()))]);
        assert_eq!(effects("").1, 1);
        let body = "CREATE PROCEDURE p() BEGIN SET @x = 1; SELECT LAST_INSERT_ID(); END";
        assert_eq!(effects(body), (Vec::new(), 1), "a definition is one statement with no effect");
        assert_eq!(effects(&format!("{body}; SET @y = 2")).1, 2);
    }

    #[test]
    fn a_setting_set_back_to_default_is_forgotten() {
        let mut s = MyState::default();
        s.apply(&effects("SET sql_select_limit = 1").0, 1);
        assert_eq!(s.settings().count(), 1);
        for back in [
            "SET sql_select_limit = DEFAULT",
            "SET SESSION sql_select_limit=default;",
            "SET @@session.sql_select_limit = Default",
        ] {
            s.apply(&effects("SET sql_select_limit = 1").0, 1);
            s.apply(&effects(back).0, 1);
            assert_eq!(s.settings().count(), 0, "{back}");
            assert_eq!(s.signature(), 0, "{back}");
        }
    }

    #[test]
    fn only_succeeded_statements_apply() {
        let mut s = MyState::default();
        assert_eq!(s.signature(), 0);
        let (e, _) = effects("SET a = 1; SET b = 2; SET @u = 3");
        s.apply(&e, 1);
        assert_eq!(s.replay_sql().as_deref(), Some("SET SESSION a = 1"));
        assert_eq!(s.pin(), Some(PinReason::UserVariable), "pins hold even when the statement failed");
        let sig = s.signature();
        assert_ne!(sig, 0);
        s.apply(&effects("USE x").0, 1);
        assert_eq!(s.db(), Some("x"));
        assert_ne!(s.signature(), sig);
        s.reset(None, None);
        assert_eq!((s.signature(), s.pin()), (0, None));
    }

    #[test]
    fn read_only_transactions_are_tracked() {
        let mut s = MyState::default();
        assert!(!s.read_only_transactions());
        s.apply(&effects("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED, READ ONLY").0, 1);
        assert!(s.read_only_transactions());
        s.apply(&effects("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE").0, 1);
        assert!(s.read_only_transactions(), "the isolation level leaves the access mode");
        assert_eq!(
            s.replay_sql().as_deref(),
            Some("SET SESSION TRANSACTION ISOLATION LEVEL SERIALIZABLE; SET SESSION TRANSACTION READ ONLY")
        );
        s.apply(&effects("SET SESSION TRANSACTION READ WRITE").0, 1);
        assert!(!s.read_only_transactions());
        s.apply(&effects("SET @@session.tx_read_only = ON").0, 1);
        assert!(s.read_only_transactions());
        s.apply(&effects("SET tx_read_only = 0").0, 1);
        assert!(!s.read_only_transactions());
        s.apply(&effects("SET transaction_read_only = 1").0, 1);
        assert!(s.read_only_transactions());
    }

    #[test]
    fn collation_names() {
        assert_eq!(names_for_collation(8).as_deref(), Some("SET NAMES latin1 COLLATE latin1_swedish_ci"));
        assert_eq!(names_for_collation(200), None);
    }
}
