//! MySQL session commands on a PostgreSQL backend: which statements the router answers itself
//! (connectors send them on connect and PostgreSQL would reject them), which it translates,
//! and the system-variable table it answers `@@var` and `SHOW VARIABLES` from.
//!
//! The exact list, mirrored in README.md ("Cross-protocol pools"):
//!
//! | statement | handling |
//! |---|---|
//! | `SET NAMES …`, `SET CHARACTER SET …`, `SET [SESSION] <var> = …` for the MySQL-only variables in [`IGNORED_SETTINGS`] | OK, nothing sent (the bridge always speaks utf8mb4) |
//! | `SET [SESSION] autocommit = 0/1/ON/OFF` | tracked; `0` opens a transaction before the next statement, `1` commits an open one |
//! | `SELECT @@var [AS a], …  [LIMIT n]` | result set from [`variable`]; unknown names → ERR 1193 |
//! | `SHOW [SESSION\|GLOBAL] VARIABLES [LIKE 'p' \| WHERE …]` | the same table, filtered by the pattern(s) |
//! | `SHOW WARNINGS` | the notices PostgreSQL sent for the previous statement |
//! | `SELECT DATABASE()` / `SCHEMA()` | the session's current database |
//! | `SELECT CONNECTION_ID()` | the router-issued connection id (what `KILL` takes) |
//! | `USE db` / `COM_INIT_DB` | `search_path` set to schema `db` (ERR 1049 when no such schema) |
//! | `SHOW DATABASES` / `SHOW SCHEMAS` | translated to a query of `information_schema.schemata` |
//! | `SHOW TABLES` | translated to a query of `information_schema.tables` in the current schema |
//! | `COM_PING`, `COM_FIELD_LIST`, `COM_STATISTICS` | answered locally |

use super::response::Warning;
use super::types::{map_type, oid, Column};
use crate::sql::lexer::{Lexer, Token, TokenKind};
use crate::sql::split;
use crate::sql::Dialect;

/// MySQL-only settings a `SET` may change without effect on a PostgreSQL backend.
pub const IGNORED_SETTINGS: &[&str] = &[
    "names",
    "character set",
    "charset",
    "character_set_client",
    "character_set_connection",
    "character_set_results",
    "collation_connection",
    "sql_mode",
    "sql_auto_is_null",
    "sql_select_limit",
    "sql_safe_updates",
    "sql_notes",
    "sql_warnings",
    "net_read_timeout",
    "net_write_timeout",
    "wait_timeout",
    "interactive_timeout",
    "session_track_schema",
    "session_track_state_change",
    "session_track_system_variables",
    "session_track_transaction_info",
];

/// How the bridge handles a statement instead of sending it as written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Emulation {
    /// `SET` of ignored settings and/or autocommit (`Some` when autocommit was set).
    Set(Option<bool>),
    /// `SELECT @@var …`: (column name, normalized variable name) per item.
    SelectVariables(Vec<(String, String)>),
    /// `SHOW VARIABLES`: LIKE patterns to match (empty: all).
    ShowVariables(Vec<String>),
    /// `SHOW WARNINGS`.
    ShowWarnings,
    /// `SELECT DATABASE()`.
    Database,
    /// `SELECT CONNECTION_ID()`.
    ConnectionId,
    /// `USE db`.
    Use(String),
    /// `SHOW TABLES`: the session names the column after its database.
    ShowTables,
    /// Run this PostgreSQL statement instead.
    Translate(String),
}

/// The PostgreSQL query answering `SHOW TABLES` for a session whose database is `db`.
#[must_use]
pub fn show_tables_query(db: &str) -> String {
    let column = format!("Tables_in_{db}").replace('"', "\"\"");
    format!(
        "SELECT table_name AS \"{column}\" FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1"
    )
}

/// A variable's value: numeric values are sent as `LONGLONG` columns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VarValue {
    /// An integer.
    Int(i64),
    /// A string.
    Str(String),
}

/// What the dynamic variables depend on.
#[derive(Debug, Clone, Copy)]
pub struct VarContext<'a> {
    /// Current autocommit mode.
    pub autocommit: bool,
    /// The version string the client was greeted with.
    pub version: &'a str,
    /// Largest packet the listener accepts.
    pub max_allowed_packet: usize,
}

/// Fixed variables: (name, value, numeric).
const FIXED: &[(&str, &str, bool)] = &[
    ("auto_increment_increment", "1", true),
    ("auto_increment_offset", "1", true),
    ("character_set_client", "utf8mb4", false),
    ("character_set_connection", "utf8mb4", false),
    ("character_set_database", "utf8mb4", false),
    ("character_set_results", "utf8mb4", false),
    ("character_set_server", "utf8mb4", false),
    ("character_set_system", "utf8mb4", false),
    ("collation_connection", "utf8mb4_general_ci", false),
    ("collation_database", "utf8mb4_general_ci", false),
    ("collation_server", "utf8mb4_general_ci", false),
    ("have_ssl", "DISABLED", false),
    ("init_connect", "", false),
    ("interactive_timeout", "28800", true),
    ("license", "PostgreSQL", false),
    ("lower_case_table_names", "0", true),
    ("net_buffer_length", "16384", true),
    ("net_write_timeout", "60", true),
    ("performance_schema", "0", true),
    ("query_cache_size", "0", true),
    ("query_cache_type", "OFF", false),
    ("sql_mode", "ANSI_QUOTES,NO_BACKSLASH_ESCAPES", false),
    ("system_time_zone", "UTC", false),
    ("time_zone", "SYSTEM", false),
    ("transaction_isolation", "READ-COMMITTED", false),
    ("transaction_read_only", "0", true),
    ("tx_isolation", "READ-COMMITTED", false),
    ("tx_read_only", "0", true),
    ("version_comment", "QueryPilot cross-protocol bridge to PostgreSQL", false),
    ("wait_timeout", "28800", true),
];

/// The value of system variable `name` (lower-case, without `@@` or scope).
#[must_use]
pub fn variable(name: &str, ctx: &VarContext<'_>) -> Option<VarValue> {
    match name {
        "autocommit" => return Some(VarValue::Int(i64::from(ctx.autocommit))),
        "version" => return Some(VarValue::Str(ctx.version.to_owned())),
        "max_allowed_packet" => return Some(VarValue::Int(i64::try_from(ctx.max_allowed_packet).unwrap_or(i64::MAX))),
        _ => {}
    }
    let &(_, value, numeric) = FIXED.iter().find(|(n, _, _)| *n == name)?;
    Some(match value.parse() {
        Ok(n) if numeric => VarValue::Int(n),
        _ => VarValue::Str(value.to_owned()),
    })
}

/// Every variable in name order (for `SHOW VARIABLES`).
#[must_use]
pub fn all_variables(ctx: &VarContext<'_>) -> Vec<(String, VarValue)> {
    let mut names: Vec<&str> =
        FIXED.iter().map(|(n, _, _)| *n).chain(["autocommit", "version", "max_allowed_packet"]).collect();
    names.sort_unstable();
    names.into_iter().filter_map(|n| Some((n.to_owned(), variable(n, ctx)?))).collect()
}

/// Columns (name, type) and text rows of a result set the router answers itself.
pub type LocalResult<'a> = (Vec<(&'a str, Column)>, Vec<Vec<Option<String>>>);

impl VarValue {
    /// The value as its result set's text.
    #[must_use]
    pub fn text(&self) -> String {
        match self {
            Self::Int(n) => n.to_string(),
            Self::Str(s) => s.clone(),
        }
    }
}

/// The answer to `SELECT @@a AS x, ...` (`items`: column name, variable): one row, each value
/// typed as it is; `Err` names the first variable not known.
pub fn select_variables<'a>(items: &'a [(String, String)], ctx: &VarContext<'_>) -> Result<LocalResult<'a>, &'a str> {
    let (mut columns, mut row) = (Vec::with_capacity(items.len()), Vec::with_capacity(items.len()));
    for (column, name) in items {
        let value = variable(name, ctx).ok_or(name.as_str())?;
        let ty = if matches!(value, VarValue::Int(_)) { oid::INT8 } else { oid::TEXT };
        columns.push((column.as_str(), map_type(ty, -1)));
        row.push(Some(value.text()));
    }
    Ok((columns, vec![row]))
}

/// The answer to `SHOW VARIABLES`, with `LIKE` `patterns` (none: every variable).
#[must_use]
pub fn show_variables(patterns: &[String], ctx: &VarContext<'_>) -> LocalResult<'static> {
    let rows = all_variables(ctx)
        .into_iter()
        .filter(|(name, _)| patterns.is_empty() || patterns.iter().any(|p| like(p, name)))
        .map(|(name, v)| vec![Some(name), Some(v.text())])
        .collect();
    let text = map_type(oid::TEXT, -1);
    (vec![("Variable_name", text), ("Value", text)], rows)
}

/// The answer to `SHOW WARNINGS`: the last statement's notices.
#[must_use]
pub fn show_warnings(warnings: &[Warning]) -> LocalResult<'static> {
    let text = map_type(oid::TEXT, -1);
    let rows = warnings
        .iter()
        .map(|w| vec![Some(w.level.to_owned()), Some(w.code.to_string()), Some(w.message.clone())])
        .collect();
    (vec![("Level", text), ("Code", map_type(oid::INT4, -1)), ("Message", text)], rows)
}

/// SQL `LIKE` matching (`%`, `_`, `\` escape), ASCII case-insensitive as MySQL's default
/// collation compares variable names.
#[must_use]
pub fn like(pattern: &str, name: &str) -> bool {
    fn go(p: &[u8], s: &[u8]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some((b'%', rest)) => (0..=s.len()).any(|i| s.get(i..).is_some_and(|t| go(rest, t))),
            Some((b'_', rest)) => s.split_first().is_some_and(|(_, t)| go(rest, t)),
            Some((b'\\', rest)) if !rest.is_empty() => go_literal(rest, s),
            Some(_) => go_literal(p, s),
        }
    }
    fn go_literal(p: &[u8], s: &[u8]) -> bool {
        match (p.split_first(), s.split_first()) {
            (Some((a, pr)), Some((b, sr))) => a.eq_ignore_ascii_case(b) && go(pr, sr),
            _ => false,
        }
    }
    go(pattern.as_bytes(), name.as_bytes())
}

/// The body of a quoted string token, with MySQL's backslash escapes and quote doubling undone.
fn unquote(t: &Token<'_>) -> String {
    let text = t.text;
    let inner = text.get(1..text.len().saturating_sub(1)).unwrap_or_default();
    if !matches!(t.kind, TokenKind::String(_) | TokenKind::QuotedIdent) {
        return text.to_owned();
    }
    let quote = text.chars().next().unwrap_or('\'');
    let mut out = String::with_capacity(inner.len());
    let mut chars = inner.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && quote != '`' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else if c == quote && chars.peek() == Some(&quote) {
            chars.next();
            out.push(c);
        } else {
            out.push(c);
        }
    }
    out
}

/// Classifies a MySQL statement; `None` means "send it to PostgreSQL as written".
#[must_use]
pub fn classify(sql: &str) -> Option<Emulation> {
    let tokens: Vec<Token<'_>> = Lexer::new(sql, Dialect::MySql).filter(|t| t.kind != TokenKind::Comment).collect();
    let tokens = match tokens.split_last() {
        Some((last, rest)) if last.kind == TokenKind::Semicolon => rest,
        _ => &tokens[..],
    };
    if tokens.iter().any(|t| t.kind == TokenKind::Semicolon) {
        return None;
    }
    let first = tokens.first()?;
    let rest = tokens.get(1..).unwrap_or_default();
    if first.is_word("SET") {
        classify_set(rest)
    } else if first.is_word("SELECT") {
        classify_select(sql, rest)
    } else if first.is_word("SHOW") {
        classify_show(rest)
    } else if first.is_word("USE") {
        match rest {
            [db] if matches!(db.kind, TokenKind::Word | TokenKind::QuotedIdent) => Some(Emulation::Use(unquote(db))),
            _ => None,
        }
    } else {
        None
    }
}

/// The setting name of `SET` assignment tokens and the index where its value starts.
fn setting_name(a: &[Token<'_>]) -> Option<(String, usize)> {
    let mut i = 0;
    if a.first().is_some_and(|t| t.is_word("SESSION") || t.is_word("LOCAL")) {
        i = 1;
    }
    let t = a.get(i)?;
    if t.is_word("NAMES") || t.is_word("CHARSET") {
        return Some((t.text.to_ascii_lowercase(), i + 1));
    }
    if t.is_word("CHARACTER") && a.get(i + 1).is_some_and(|n| n.is_word("SET")) {
        return Some(("character set".into(), i + 2));
    }
    let name = match t.kind {
        TokenKind::Word => t.text.to_ascii_lowercase(),
        TokenKind::Variable if t.text.starts_with("@@") => {
            let v = t.text.trim_start_matches('@').to_ascii_lowercase();
            let v = v
                .strip_prefix("session.")
                .or_else(|| v.strip_prefix("local."))
                .map_or_else(|| v.clone(), str::to_owned);
            if v.contains('.') {
                return None;
            }
            v
        }
        _ => return None,
    };
    let eq = a.get(i + 1)?;
    (eq.kind == TokenKind::Operator && (eq.text == "=" || eq.text == ":=")).then_some((name, i + 2))
}

fn autocommit_value(v: &[Token<'_>]) -> Option<bool> {
    let [t] = v else { return None };
    let text = unquote(t).to_ascii_lowercase();
    match text.as_str() {
        "1" | "on" | "true" => Some(true),
        "0" | "off" | "false" => Some(false),
        _ => None,
    }
}

fn classify_set(rest: &[Token<'_>]) -> Option<Emulation> {
    let mut autocommit = None;
    for a in split::top_level(rest) {
        let (name, value_at) = setting_name(a)?;
        if name == "autocommit" {
            autocommit = Some(autocommit_value(a.get(value_at..).unwrap_or_default())?);
        } else if !IGNORED_SETTINGS.contains(&name.as_str()) {
            return None;
        }
    }
    Some(Emulation::Set(autocommit))
}

fn classify_select(sql: &str, rest: &[Token<'_>]) -> Option<Emulation> {
    let is_call = |name: &str| matches!(rest, [f, l, r] if f.is_word(name) && l.kind == TokenKind::LParen && r.kind == TokenKind::RParen);
    if is_call("DATABASE") || is_call("SCHEMA") {
        return Some(Emulation::Database);
    }
    if is_call("CONNECTION_ID") {
        return Some(Emulation::ConnectionId);
    }
    let items = match rest.iter().position(|t| t.is_word("LIMIT")) {
        Some(at) => {
            let limit = rest.get(at + 1..).unwrap_or_default();
            if !matches!(limit, [n] if n.kind == TokenKind::Number) {
                return None;
            }
            rest.get(..at).unwrap_or_default()
        }
        None => rest,
    };
    let mut out = Vec::new();
    for item in split::top_level(items) {
        let (var, alias) = match item {
            [v] => (v, None),
            [v, a] => (v, Some(a)),
            [v, kw, a] if kw.is_word("AS") => (v, Some(a)),
            _ => return None,
        };
        if var.kind != TokenKind::Variable || !var.text.starts_with("@@") {
            return None;
        }
        let name = var.text.trim_start_matches('@').to_ascii_lowercase();
        let name = ["session.", "local.", "global."]
            .iter()
            .find_map(|p| name.strip_prefix(p))
            .map_or_else(|| name.clone(), str::to_owned);
        let column = match alias {
            Some(a) if matches!(a.kind, TokenKind::Word | TokenKind::QuotedIdent | TokenKind::String(_)) => unquote(a),
            Some(_) => return None,
            None => sql.get(var.span()).unwrap_or_default().to_owned(),
        };
        out.push((column, name));
    }
    (!out.is_empty()).then_some(Emulation::SelectVariables(out))
}

fn classify_show(rest: &[Token<'_>]) -> Option<Emulation> {
    let mut rest = rest;
    if rest.first().is_some_and(|t| t.is_word("SESSION") || t.is_word("GLOBAL") || t.is_word("LOCAL")) {
        rest = rest.get(1..).unwrap_or_default();
    }
    let first = rest.first()?;
    let tail = rest.get(1..).unwrap_or_default();
    if first.is_word("VARIABLES") {
        let patterns = match tail.first() {
            None => Vec::new(),
            Some(t) if t.is_word("LIKE") => match tail.get(1..) {
                Some([p]) if matches!(p.kind, TokenKind::String(_)) => vec![unquote(p)],
                _ => return None,
            },
            // `WHERE Variable_name = 'a' OR Variable_name IN ('b', …)`: the names it mentions.
            Some(t) if t.is_word("WHERE") => {
                tail.iter().filter(|t| matches!(t.kind, TokenKind::String(_))).map(unquote).collect()
            }
            Some(_) => return None,
        };
        return Some(Emulation::ShowVariables(patterns));
    }
    if first.is_word("WARNINGS") {
        return Some(Emulation::ShowWarnings);
    }
    if (first.is_word("DATABASES") || first.is_word("SCHEMAS")) && tail.is_empty() {
        return Some(Emulation::Translate(
            "SELECT schema_name AS \"Database\" FROM information_schema.schemata ORDER BY 1".into(),
        ));
    }
    if first.is_word("TABLES") && tail.is_empty() {
        return Some(Emulation::ShowTables);
    }
    None
}
