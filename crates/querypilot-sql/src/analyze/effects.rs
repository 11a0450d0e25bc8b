//! The one session-effect classifier for both dialects (#37): what a (possibly multi-statement)
//! SQL string does to the session it runs in, read from its tokens alone — settings it changes
//! or resets, the database it selects, and state that pins the client to its backend connection
//! (temporary objects, session locks, a changed role, user variables, ...).
//!
//! Pure and protocol-neutral: it returns a description ([`Effects`]) and knows nothing of
//! sessions. Whether an effect applies (PostgreSQL: once its transaction committed; MySQL: once
//! its statement succeeded) is the session's business; the effects are indexed by statement so
//! either can decide.
//!
//! The classification errs on the side of pinning: a pin costs a dedicated connection, a
//! missed one leaks a role or a temporary table to the next client of that connection.
//!
//! The grammar differs per dialect where the languages do (`pg` and `mysql`): PostgreSQL `SET
//! LOCAL` dies with the transaction while MySQL's `LOCAL` is `SESSION`; PostgreSQL's `LOCK` is
//! transaction-scoped while MySQL's `LOCK TABLES` holds the session; a MySQL stored program's
//! body is code, not statements that run now. Statement splitting, the text prefilter, the
//! function-call scan and pin bookkeeping are shared.

mod mentions;
mod mysql;
mod pg;

#[cfg(test)]
mod tests;

use crate::lexer::{Lexer, Token, TokenKind};
use crate::split;
use crate::Dialect;
pub use mentions::{mentioned, Initials};
use mentions::{mentions, MYSQL_INITIALS, OPENER_INITIALS, PG_INITIALS};

/// Why a client is pinned to its backend connection for the rest of its session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PinReason {
    /// `CREATE TEMP TABLE`, `SELECT ... INTO TEMP`, anything in `pg_temp`; MySQL `CREATE
    /// TEMPORARY TABLE`.
    TempObject,
    /// PostgreSQL session-level advisory locks; MySQL `GET_LOCK` named locks.
    AdvisoryLock,
    /// `LISTEN`.
    Listen,
    /// SQL-level `PREPARE`.
    SqlPrepare,
    /// `DECLARE ... WITH HOLD` cursors.
    HoldCursor,
    /// Settings changed in ways that cannot be replayed (`set_config`, MySQL `SET TRANSACTION`
    /// for the next transaction only, `SET ROLE`, ...).
    UntrackedSetting,
    /// PostgreSQL `SET ROLE`, `SET SESSION AUTHORIZATION` and their `set_config` forms: the
    /// next client of the connection must never run with this client's identity.
    Role,
    /// `DO` blocks: they may change anything through dynamic SQL.
    DoBlock,
    /// MySQL `@name` user variables.
    UserVariable,
    /// MySQL `LOCK TABLES`.
    LockTables,
    /// MySQL `LAST_INSERT_ID()` read in a later statement than the insert.
    LastInsertId,
    /// A client encoding whose multi-byte characters can contain ASCII quote or backslash
    /// bytes (SJIS, BIG5, GBK, ...): statements cannot be read safely, so nothing is tracked.
    /// Never read from statement text: the session learns it from the server's report.
    ClientEncoding,
}

impl PinReason {
    /// Every reason.
    pub const ALL: [PinReason; 12] = [
        Self::TempObject,
        Self::AdvisoryLock,
        Self::Listen,
        Self::SqlPrepare,
        Self::HoldCursor,
        Self::UntrackedSetting,
        Self::Role,
        Self::DoBlock,
        Self::UserVariable,
        Self::LockTables,
        Self::LastInsertId,
        Self::ClientEncoding,
    ];

    /// The reason [`PinReason::as_str`] names.
    pub fn parse(name: &str) -> Option<PinReason> {
        Self::ALL.into_iter().find(|r| r.as_str() == name)
    }

    /// Metric label / log value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TempObject => "temp_object",
            Self::AdvisoryLock => "advisory_lock",
            Self::Listen => "listen",
            Self::SqlPrepare => "sql_prepare",
            Self::HoldCursor => "hold_cursor",
            Self::UntrackedSetting => "untracked_setting",
            Self::Role => "role",
            Self::DoBlock => "do_block",
            Self::UserVariable => "user_variable",
            Self::LockTables => "lock_tables",
            Self::LastInsertId => "last_insert_id",
            Self::ClientEncoding => "client_encoding",
        }
    }
}

/// The session-relevant effect of one statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Effect {
    /// A session setting: replay `stmt` to restore it.
    Set {
        /// Lower-cased setting name; spellings of one setting share it (MySQL `names` for `SET
        /// NAMES` / `SET CHARACTER SET`, [`MYSQL_ISOLATION`], [`MYSQL_ACCESS_MODE`]).
        name: String,
        /// The statement to replay.
        stmt: String,
    },
    /// `RESET name`, or `name` set to `DEFAULT`: back to the reset value.
    Reset(String),
    /// PostgreSQL `RESET ALL` or `DISCARD ALL`.
    ResetAll,
    /// MySQL `USE db` / `COM_INIT_DB`.
    Use(String),
    /// State that pins the session.
    Pin(PinReason),
}

/// The setting key of a MySQL session's transaction isolation level (`SET SESSION TRANSACTION
/// ISOLATION LEVEL`, `tx_isolation`, `transaction_isolation`).
pub const MYSQL_ISOLATION: &str = "transaction";
/// The setting key of a MySQL session's transaction access mode (`SET SESSION TRANSACTION READ
/// ONLY | READ WRITE`, `tx_read_only`, `transaction_read_only`).
pub const MYSQL_ACCESS_MODE: &str = "transaction_access";

/// The session effects of a SQL string.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Effects {
    /// Each effect with the 0-based index of the statement it belongs to, in statement order.
    pub list: Vec<(usize, Effect)>,
    /// The number of statements the server runs (at least 1): MySQL counts a stored program's
    /// definition as one.
    pub statements: usize,
}

impl Effects {
    /// The effects without their statement indexes.
    pub fn effects(&self) -> impl Iterator<Item = &Effect> {
        self.list.iter().map(|(_, e)| e)
    }

    /// The effects without their statement indexes, for a session that applies them together.
    pub fn into_effects(self) -> impl Iterator<Item = Effect> {
        self.list.into_iter().map(|(_, e)| e)
    }

    /// Whether any statement pins the session.
    pub fn pins(&self) -> bool {
        self.effects().any(|e| matches!(e, Effect::Pin(_)))
    }
}

/// Classifies the session effects of `sql`, written in `dialect`.
pub fn session_effects(sql: &str, dialect: Dialect) -> Effects {
    session_effects_named(sql, dialect, may_have_effects(sql, dialect))
}

/// [`session_effects`] of a text whose prefilter was read with others: `named` is whether `sql`
/// names one of the dialect's effect words ([`PG_EFFECT_WORDS`], [`MYSQL_EFFECT_WORDS`]) anywhere,
/// in any ASCII case, as [`mentioned`] reads it.
pub fn session_effects_named(sql: &str, dialect: Dialect, named: bool) -> Effects {
    // Most statements have no session effect and their text shows it: no second lexer pass
    // (the fingerprint made the first) for them, unless statements must be counted.
    if named || may_hold_statements_after_one(sql) {
        scan(sql, dialect)
    } else {
        Effects { list: Vec::new(), statements: 1 }
    }
}

/// False only when no `;` comes before the text's trailing run of `;` and ASCII whitespace: one
/// statement. Bytes, not chars: a trailing non-ASCII space merely sends the text to the scan.
fn may_hold_statements_after_one(sql: &str) -> bool {
    let bytes = sql.as_bytes();
    let end = bytes.iter().rposition(|&b| b != b';' && !b.is_ascii_whitespace()).map_or(0, |i| i + 1);
    memchr::memchr(b';', bytes.get(..end).unwrap_or_default()).is_some()
}

/// [`session_effects`] read from the tokens.
fn scan(sql: &str, dialect: Dialect) -> Effects {
    let mut tokens: Vec<Token<'_>> = Vec::with_capacity(sql.len() / 4 + 4);
    tokens.extend(Lexer::new(sql, dialect).filter(|t| t.kind != TokenKind::Comment));
    let statements = statements(&tokens, dialect);
    let mut list = Vec::new();
    for (i, stmt) in statements.iter().enumerate() {
        let mut out = Vec::new();
        match dialect {
            Dialect::Postgres => pg::classify(sql, stmt, &mut out),
            // A stored program's body runs later, when called: defining it changes no session.
            Dialect::MySql if split::defines_stored_program(stmt) => {}
            Dialect::MySql => mysql::classify(sql, stmt, &mut out),
        }
        list.extend(out.into_iter().map(|e| (i, e)));
    }
    Effects { list, statements: statements.len().max(1) }
}

/// The statements of `tokens` (comments removed) as the server of `dialect` splits them.
fn statements<'t, 'a>(tokens: &'t [Token<'a>], dialect: Dialect) -> Vec<&'t [Token<'a>]> {
    match dialect {
        Dialect::Postgres => tokens.split(|t| t.kind == TokenKind::Semicolon).filter(|s| !s.is_empty()).collect(),
        Dialect::MySql => split::statements(tokens),
    }
}

/// The first statement of `sql` that opens a transaction block spanning later statements, by
/// its name (`"BEGIN"`, `"START TRANSACTION"`, `"XA START"`), in whatever position of a
/// multi-statement text: what statement pooling must refuse on either wire (#37), since the
/// statements after it would run on whichever connection is free. A stored program's body
/// (MySQL) and MariaDB's `BEGIN NOT ATOMIC` block open none. Settings that make later
/// statements transactional (MySQL `autocommit`) are [`session_effects`]'.
pub fn opens_transaction(sql: &str, dialect: Dialect) -> Option<&'static str> {
    opens_transaction_named(sql, dialect, mentions(sql, &OPENER_WORDS, &OPENER_INITIALS))
}

/// [`opens_transaction`] of a text whose prefilter was read with others: `named` is whether
/// `sql` names one of [`OPENER_WORDS`] anywhere, in any ASCII case, as [`mentioned`] reads it.
pub fn opens_transaction_named(sql: &str, dialect: Dialect, named: bool) -> Option<&'static str> {
    // Every statement of a statement pool passes here: most name none of the words.
    if !named {
        return None;
    }
    let tokens: Vec<Token<'_>> = Lexer::new(sql, dialect).filter(|t| t.kind != TokenKind::Comment).collect();
    statements(&tokens, dialect).into_iter().find_map(|stmt| {
        let (first, second) = (stmt.first(), stmt.get(1));
        if word(first, "BEGIN") && !word(second, "NOT") {
            Some("BEGIN")
        } else if word(first, "START") && word(second, "TRANSACTION") {
            Some("START TRANSACTION")
        } else if word(first, "XA") && (word(second, "START") || word(second, "BEGIN")) {
            Some("XA START")
        } else {
            None
        }
    })
}

/// The words a transaction opener needs one of (in any ASCII case).
pub const OPENER_WORDS: [&str; 2] = ["begin", "start"];

/// The words every session effect needs one of (in any ASCII case).
/// PostgreSQL: a statement's first word (`SET`, `RESET`, `DISCARD`, `LISTEN`, `PREPARE`,
/// `DECLARE`, `CREATE`, `DO`), `TEMP` / `TEMPORARY` / `pg_temp`, or part of a function's name
/// (`pg_advisory_lock`..., `set_config`).
pub const PG_EFFECT_WORDS: [&str; 9] =
    ["set", "discard", "listen", "prepare", "declare", "create", "do", "temp", "advisory"];
const PG_WORDS: &[&str] = &PG_EFFECT_WORDS;
/// MySQL: `SET`, `USE`, `PREPARE`, `LOCK TABLES` / `GET_LOCK`, `CREATE TEMPORARY`, `@` of a
/// variable, `LAST_INSERT_ID`.
pub const MYSQL_EFFECT_WORDS: [&str; 7] = ["set", "use", "prepare", "lock", "temporary", "@", "last_insert_id"];
const MYSQL_WORDS: &[&str] = &MYSQL_EFFECT_WORDS;

/// False only when `sql` contains none of the dialect's effect words, so it has no effect.
fn may_have_effects(sql: &str, dialect: Dialect) -> bool {
    match dialect {
        Dialect::Postgres => mentions(sql, PG_WORDS, &PG_INITIALS),
        Dialect::MySql => mentions(sql, MYSQL_WORDS, &MYSQL_INITIALS),
    }
}

/// Whether `t` is the keyword `kw`.
fn word(t: Option<&Token<'_>>, kw: &str) -> bool {
    t.is_some_and(|t| t.is_word(kw))
}

/// Adds a pin unless the statement already produced the same one.
fn pin(out: &mut Vec<Effect>, reason: PinReason) {
    let e = Effect::Pin(reason);
    if !out.contains(&e) {
        out.push(e);
    }
}

/// `CREATE ... {TEMP|TEMPORARY} ...`: the keyword sits before the object kind, so within the
/// first `within` tokens.
fn creates_temp(stmt: &[Token<'_>], keywords: &[&str], within: usize) -> bool {
    word(stmt.first(), "CREATE") && stmt.iter().take(within).any(|t| keywords.iter().any(|k| t.is_word(k)))
}

/// The function calls of a statement: each name followed by `(` with its token index; a
/// quoted name (`"pg_advisory_lock"(1)`) only when `quoted`, bare of its quotes.
fn calls<'t>(stmt: &'t [Token<'_>], quoted: bool) -> impl Iterator<Item = (usize, &'t str)> {
    stmt.iter().enumerate().filter_map(move |(i, t)| {
        let named = t.kind == TokenKind::Word || (quoted && t.kind == TokenKind::QuotedIdent);
        let call = stmt.get(i + 1).is_some_and(|n| n.kind == TokenKind::LParen);
        (named && call).then(|| (i, t.text.trim_matches('"')))
    })
}

/// An identifier bare of its `quote` characters, doubled quotes undone.
fn unquote(s: &str, quote: char) -> String {
    match s.strip_prefix(quote).and_then(|s| s.strip_suffix(quote)) {
        Some(inner) => inner.replace(&format!("{quote}{quote}"), &quote.to_string()),
        None => s.to_owned(),
    }
}
