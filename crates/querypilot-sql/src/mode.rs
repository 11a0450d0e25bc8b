//! The session settings that change how SQL text is tokenized (#19 case 5), and how a session's
//! statements change them. Pure: the session feeds what it sees (its SETs, startup parameters,
//! the server's reports) and passes the result to routing, which lexes and keys statements in it.
//!
//! PostgreSQL `standard_conforming_strings = off` makes backslashes escape in plain `'...'`
//! strings; MySQL `sql_mode` with `NO_BACKSLASH_ESCAPES` makes them plain characters, and with
//! `ANSI_QUOTES` makes `"..."` an identifier. Read in the wrong mode, `SELECT 'x\' -- '; UPDATE t`
//! is one harmless string to one reader and a write to the other. sqlparser only knows the
//! defaults, so analysis distrusts a statement whose text the mode could change (see
//! [`LexMode::may_misread`]); the router sends it to the primary.

use super::lexer::{Lexer, Token, TokenKind};
use super::Dialect;

/// A session's tokenizing mode. `Default` is each server's default: PostgreSQL
/// `standard_conforming_strings = on`, MySQL `sql_mode` without `NO_BACKSLASH_ESCAPES` and
/// `ANSI_QUOTES`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct LexMode {
    /// PostgreSQL `standard_conforming_strings = off`: backslashes escape in `'...'` strings.
    pub backslash_strings: bool,
    /// MySQL `NO_BACKSLASH_ESCAPES`: backslashes are ordinary characters in strings.
    pub no_backslash_escapes: bool,
    /// MySQL `ANSI_QUOTES`: `"..."` is a quoted identifier.
    pub ansi_quotes: bool,
    /// The session set the mode to something the router cannot know (`SET sql_mode = @v`).
    pub unknown: bool,
}

/// MySQL/MariaDB composite modes that include `ANSI_QUOTES`.
const ANSI_QUOTES_MODES: [&str; 7] = ["ANSI_QUOTES", "ANSI", "DB2", "MAXDB", "MSSQL", "ORACLE", "POSTGRESQL"];

impl LexMode {
    /// True for the servers' default mode.
    pub fn is_default(self) -> bool {
        self == LexMode::default()
    }

    /// Four bits that tell modes apart, for cache keys.
    pub fn bits(self) -> u8 {
        u8::from(self.backslash_strings)
            | u8::from(self.no_backslash_escapes) << 1
            | u8::from(self.ansi_quotes) << 2
            | u8::from(self.unknown) << 3
    }

    /// The mode [`LexMode::bits`] describes.
    pub fn from_bits(bits: u8) -> LexMode {
        LexMode {
            backslash_strings: bits & 1 != 0,
            no_backslash_escapes: bits & 2 != 0,
            ansi_quotes: bits & 4 != 0,
            unknown: bits & 8 != 0,
        }
    }

    /// Stable description for the dry-run API, e.g. `standard_conforming_strings=off`.
    pub fn describe(self) -> String {
        let mut parts = Vec::new();
        if self.backslash_strings {
            parts.push("standard_conforming_strings=off");
        }
        if self.no_backslash_escapes {
            parts.push("NO_BACKSLASH_ESCAPES");
        }
        if self.ansi_quotes {
            parts.push("ANSI_QUOTES");
        }
        if self.unknown {
            parts.push("unknown");
        }
        if parts.is_empty() {
            "default".to_owned()
        } else {
            parts.join(",")
        }
    }

    /// Whether analysis, which reads SQL in the default mode, may read `sql` differently from
    /// the server in this mode: any backslash when backslashes change meaning, any `"` under
    /// `ANSI_QUOTES`, anything at all when the mode is unknown. A false positive only costs a
    /// replica read.
    pub fn may_misread(self, sql: &str, dialect: Dialect) -> bool {
        if self.unknown {
            return true;
        }
        let backslashes = match dialect {
            Dialect::Postgres => self.backslash_strings,
            Dialect::MySql => self.no_backslash_escapes,
        };
        let quotes = dialect == Dialect::MySql && self.ansi_quotes;
        (backslashes && sql.contains('\\')) || (quotes && sql.contains('"'))
    }

    /// Applies PostgreSQL `standard_conforming_strings` set to `value` (a startup parameter, a
    /// `ParameterStatus` report or a SET's literal); an unreadable value makes the mode unknown.
    pub fn set_standard_conforming_strings(&mut self, value: &str) {
        match pg_bool(value) {
            Some(on) => self.backslash_strings = !on,
            None => self.unknown = true,
        }
    }

    /// Applies MySQL `sql_mode` set to `value` (a comma-separated list, as a SET literal or
    /// a session-tracking report gives it).
    pub fn set_sql_mode(&mut self, value: &str) {
        let mut modes = value.split(',').map(|m| m.trim().to_ascii_uppercase());
        let (mut no_backslash, mut ansi) = (false, false);
        for m in modes.by_ref() {
            no_backslash |= m == "NO_BACKSLASH_ESCAPES";
            ansi |= ANSI_QUOTES_MODES.contains(&m.as_str());
        }
        self.no_backslash_escapes = no_backslash;
        self.ansi_quotes = ansi;
    }

    /// Takes what a MySQL server reported for the connection a statement ran on or will run
    /// on (its status flags, see `protocol::mysql::response::sql_mode_flags`):
    /// `NO_BACKSLASH_ESCAPES`, and `ANSI_QUOTES` where the server reports it. Where it does not
    /// (`None`: MySQL), `ANSI_QUOTES` may be on through the global `sql_mode`, a prepared SET or
    /// a procedure without the router seeing it, so it is assumed on: a statement with a `"`
    /// then stays off replicas. An unknown mode stays unknown: the report is one connection's,
    /// and a `SET sql_mode` from an expression replayed on another may come out otherwise.
    pub fn follow_mysql_server(&mut self, no_backslash_escapes: bool, ansi_quotes: Option<bool>) {
        self.no_backslash_escapes = no_backslash_escapes;
        self.ansi_quotes = ansi_quotes.unwrap_or(true);
    }

    /// Follows one statement the session ran. `in_transaction`: PostgreSQL rolls a SET back
    /// with its transaction, so a change back towards the default is only believed outside
    /// one (a change away from it always is: over-estimating the mode only costs replica reads).
    /// `startup` is what RESET returns to. Statements that mention the setting in a form this
    /// does not read make the mode unknown.
    pub fn observe(&mut self, sql: &str, dialect: Dialect, in_transaction: bool, startup: LexMode) {
        let setting = match dialect {
            Dialect::Postgres => "standard_conforming_strings",
            Dialect::MySql => "sql_mode",
        };
        if !contains_ignore_case(sql, setting) && !resets_all(sql, dialect) {
            return;
        }
        let before = *self;
        let mut next = before;
        match parse_change(sql, dialect, setting) {
            Some(Change::To(value)) => {
                next.unknown = false;
                match dialect {
                    Dialect::Postgres => next.set_standard_conforming_strings(&value),
                    Dialect::MySql => next.set_sql_mode(&value),
                }
            }
            Some(Change::Add(flags)) => {
                // `CONCAT(@@sql_mode, ',FLAG')`: the current mode plus the literal flags.
                next.no_backslash_escapes |=
                    flags.split(',').any(|f| f.trim().eq_ignore_ascii_case("NO_BACKSLASH_ESCAPES"));
                next.ansi_quotes |=
                    flags.split(',').any(|f| ANSI_QUOTES_MODES.iter().any(|m| f.trim().eq_ignore_ascii_case(m)));
            }
            Some(Change::Reset) => next = startup,
            Some(Change::None) => return,
            None => next.unknown = true,
        }
        let towards_default = next.bits() & !before.bits() == 0;
        if dialect == Dialect::Postgres && in_transaction && towards_default {
            return;
        }
        *self = next;
    }
}

fn pg_bool(value: &str) -> Option<bool> {
    match value.trim().trim_matches('\'').to_ascii_lowercase().as_str() {
        "on" | "true" | "yes" | "1" | "t" | "y" => Some(true),
        "off" | "false" | "no" | "0" | "f" | "n" => Some(false),
        _ => None,
    }
}

fn contains_ignore_case(haystack: &str, needle: &str) -> bool {
    let n = needle.as_bytes();
    haystack.as_bytes().windows(n.len()).any(|w| w.eq_ignore_ascii_case(n))
}

/// PostgreSQL `RESET ALL` / `DISCARD ALL`: every setting back to its startup value.
fn resets_all(sql: &str, dialect: Dialect) -> bool {
    dialect == Dialect::Postgres && (contains_ignore_case(sql, "reset") || contains_ignore_case(sql, "discard"))
}

/// What a statement does to the setting.
enum Change {
    /// Sets it to this value (unquoted).
    To(String),
    /// Back to the startup value (PostgreSQL RESET / DISCARD ALL, `SET x TO DEFAULT`).
    Reset,
    /// MySQL `CONCAT(@@sql_mode, '...')`: these comma-separated flags added to the current mode.
    Add(String),
    /// Nothing to the session's value (`SET GLOBAL`, `SHOW`, a mention in a string).
    None,
}

/// Reads the one statement forms that change the setting with a visible value; `None` when
/// the setting is changed (or may be) in a form this cannot follow.
fn parse_change(sql: &str, dialect: Dialect, setting: &str) -> Option<Change> {
    let tokens: Vec<Token<'_>> = Lexer::new(sql, dialect).filter(|t| t.kind != TokenKind::Comment).collect();
    let mut result = Change::None;
    for st in tokens.split(|t| t.kind == TokenKind::Semicolon) {
        let Some(first) = st.first() else { continue };
        let second = st.get(1);
        let change = if first.is_word("SET") && second.is_some_and(|t| t.is_word("STATEMENT")) {
            // MariaDB `SET STATEMENT sql_mode = ... FOR ...`: a mode for that statement only.
            if st.iter().any(|t| contains_ignore_case(t.text, setting)) {
                return None;
            }
            Change::None
        } else if first.is_word("SET") {
            set_change(st, dialect, setting)?
        } else if dialect == Dialect::Postgres && (first.is_word("RESET") || first.is_word("DISCARD")) {
            match second {
                Some(t) if t.is_word("ALL") || t.is_word(setting) => Change::Reset,
                _ => Change::None,
            }
        } else if dialect == Dialect::Postgres
            && st.iter().any(|t| t.is_word("set_config"))
            && st.iter().any(|t| contains_ignore_case(t.text, setting))
        {
            // set_config('standard_conforming_strings', ...): its value may be an expression.
            return None;
        } else {
            // Reads of the setting (SHOW, @@sql_mode, current_setting) change nothing.
            Change::None
        };
        if !matches!(change, Change::None) {
            result = change;
        }
    }
    Some(result)
}

/// `SET [SESSION | LOCAL] name {= | TO} value [, ...]` (MySQL also `@@name`, `@@session.name`,
/// several assignments; `SET GLOBAL` / `@@global.` change no session). PostgreSQL `SET LOCAL`
/// counts as a session change: over-estimating is safe.
fn set_change(st: &[Token<'_>], dialect: Dialect, setting: &str) -> Option<Change> {
    let mut result = Change::None;
    let assignments = st.get(1..).unwrap_or(&[]);
    // Assignments are separated by commas outside parentheses (CONCAT has its own).
    let mut depth = 0i32;
    let top_level_comma = |t: &Token<'_>| {
        match t.kind {
            TokenKind::LParen => depth += 1,
            TokenKind::RParen => depth -= 1,
            _ => {}
        }
        t.kind == TokenKind::Comma && depth == 0
    };
    for part in assignments.split(top_level_comma) {
        let mut words = part.iter().peekable();
        let mut global = false;
        while let Some(t) = words.peek() {
            if t.is_word("SESSION") || t.is_word("LOCAL") {
                words.next();
            } else if t.is_word("GLOBAL") || t.is_word("PERSIST") || t.is_word("PERSIST_ONLY") {
                global = true;
                words.next();
            } else {
                break;
            }
        }
        let rest: Vec<&Token<'_>> = words.collect();
        let Some((name, value)) = rest.split_first() else { continue };
        let name_text = name.text.to_ascii_lowercase();
        let bare = name_text.trim_start_matches("@@").trim_matches('`').trim_matches('"');
        let (scope, bare) = match bare.split_once('.') {
            Some((scope, n)) => (scope, n),
            None => ("session", bare),
        };
        if bare != setting {
            if contains_ignore_case(&name_text, setting) {
                return None;
            }
            continue;
        }
        if global || scope == "global" {
            continue;
        }
        let value: Vec<&&Token<'_>> = value.iter().filter(|t| !(t.is_word("TO") || t.text == "=")).collect();
        result = match value.as_slice() {
            [v] if v.is_word("DEFAULT") => match dialect {
                Dialect::Postgres => Change::Reset,
                // MySQL's session default is the global value, which the router does not know.
                Dialect::MySql => return None,
            },
            [v] if matches!(v.kind, TokenKind::String(_)) => Change::To(unquote(v.text)),
            [f, open, rest @ ..]
                if dialect == Dialect::MySql && f.is_word("CONCAT") && open.kind == TokenKind::LParen =>
            {
                Change::Add(concat_flags(rest, setting)?)
            }
            [v] if dialect == Dialect::Postgres
                && matches!(v.kind, TokenKind::Word | TokenKind::Bool | TokenKind::Number) =>
            {
                Change::To(v.text.to_owned())
            }
            _ => return None,
        };
    }
    Some(result)
}

/// The literal flags of `CONCAT(@@sql_mode, ',A', ',B')` after its `(`: `None` unless the first
/// argument is the session's own `sql_mode` and every other one a string literal.
fn concat_flags(args: &[&&Token<'_>], setting: &str) -> Option<String> {
    let (first, rest) = args.split_first()?;
    let own = first.text.to_ascii_lowercase();
    if first.kind != TokenKind::Variable
        || !matches!(own.as_str(), "@@sql_mode" | "@@session.sql_mode")
        || setting != "sql_mode"
    {
        return None;
    }
    let (close, middle) = rest.split_last()?;
    if close.kind != TokenKind::RParen {
        return None;
    }
    let mut flags = String::new();
    for pair in middle.chunks(2) {
        match pair {
            [comma, lit] if comma.kind == TokenKind::Comma && matches!(lit.kind, TokenKind::String(_)) => {
                flags.push(',');
                flags.push_str(&unquote(lit.text));
            }
            _ => return None,
        }
    }
    Some(flags)
}

/// What a session's settings mean for routing, with the values RESET returns to; what sessions
/// keep and pass into the routing input (#19): its tokenizing mode and whether its transactions
/// default to SERIALIZABLE (which a standby cannot serve).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SessionModes {
    /// The tokenizing mode now.
    pub mode: LexMode,
    /// The session's default isolation is SERIALIZABLE: its reads belong on the primary.
    pub serializable: bool,
    startup: LexMode,
    startup_serializable: bool,
}

impl SessionModes {
    /// A session that starts in `startup` (its startup parameters over the server's defaults).
    pub fn new(startup: LexMode) -> SessionModes {
        SessionModes { mode: startup, startup, ..SessionModes::default() }
    }

    /// PostgreSQL: the start mode from the client's startup parameters, else what the server
    /// reported (`standard_conforming_strings` in both cases).
    pub fn pg_startup<'a>(
        client: impl IntoIterator<Item = (&'a str, &'a str)>,
        server: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> SessionModes {
        let client: Vec<(&str, &str)> = client.into_iter().collect();
        let scs = |(k, _): &(&str, &str)| k.eq_ignore_ascii_case("standard_conforming_strings");
        let value = client.iter().copied().find(scs).or_else(|| server.into_iter().find(scs)).map(|(_, v)| v);
        let mut mode = LexMode::default();
        if let Some(v) = value {
            mode.set_standard_conforming_strings(v);
        }
        let mut modes = SessionModes::new(mode);
        let isolation = |(k, _): &(&str, &str)| k.eq_ignore_ascii_case("default_transaction_isolation");
        if let Some((_, v)) = client.iter().copied().find(isolation) {
            let serializable = v.trim().eq_ignore_ascii_case("serializable");
            modes.serializable = serializable;
            modes.startup_serializable = serializable;
        }
        modes
    }

    /// Follows a statement the session ran (see [`LexMode::observe`] and
    /// [`super::isolation::serializable_after`]).
    pub fn observe(&mut self, sql: &str, dialect: Dialect, in_transaction: bool) {
        self.mode.observe(sql, dialect, in_transaction, self.startup);
        self.serializable = super::isolation::serializable_after(
            sql,
            dialect,
            in_transaction,
            self.serializable,
            self.startup_serializable,
        );
    }

    /// All the modes in one number, for a session moving to a new binary (#40).
    pub fn to_bits(&self) -> u16 {
        u16::from(self.mode.bits())
            | u16::from(self.startup.bits()) << 4
            | u16::from(self.serializable) << 8
            | u16::from(self.startup_serializable) << 9
    }

    /// The modes [`SessionModes::to_bits`] describes.
    pub fn from_bits(bits: u16) -> SessionModes {
        SessionModes {
            mode: LexMode::from_bits((bits & 0xf) as u8),
            startup: LexMode::from_bits((bits >> 4 & 0xf) as u8),
            serializable: bits & 1 << 8 != 0,
            startup_serializable: bits & 1 << 9 != 0,
        }
    }

    /// Why the session's reads must stay on the primary whatever the statement, if they must.
    pub fn primary_only(&self) -> Option<&'static str> {
        self.serializable.then_some("serializable_session")
    }
}

/// The body of a simple quoted literal (no prefix); escapes are not expected in these values.
fn unquote(text: &str) -> String {
    let t = text.trim();
    let t = t.strip_prefix(['\'', '"']).unwrap_or(t);
    t.strip_suffix(['\'', '"']).unwrap_or(t).to_owned()
}
