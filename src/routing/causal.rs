//! The causal token (#22): a session's read-your-writes position as text a client can read
//! (`SHOW querypilot.causal_token`, a ParameterStatus after each write) and hand to another
//! connection (`SET querypilot.causal_token = '...'`), so a request served by another
//! application instance still reads its writes. Pure: token codec and statement recognition.
//!
//! A PostgreSQL token is `pg:` followed by the WAL position in PostgreSQL's own `pg_lsn` text
//! form (`16/B374D848`), so an operator can compare it with `pg_last_wal_replay_lsn()`; a
//! MariaDB token is `gtid:` followed by the GTID position as `@@gtid_slave_pos` prints it
//! (`0-1-100,1-2-7`). A session that committed a write whose position could not be learned
//! (a MariaDB result set ending in an EOF packet, which carries no `last_gtid`; a position
//! query that failed) hands out `primary`: its holder's reads go to the primary, as the
//! session's own do, until the holder learns a commit position of its own. A session that
//! needs no position hands out the empty token, which changes nothing where it is set. Every
//! token the router issues is accepted back (#34).

use crate::id::{Position, Token};
use crate::sql::lexer::{Lexer, TokenKind};
use crate::sql::Dialect;
use smallvec::SmallVec;

/// Tokens in the longest token statement: `SET SESSION querypilot . causal_token = 'v'`.
const TOKEN_COMMAND_MAX: usize = 7;

/// The name clients use for the token (SHOW / SET / ParameterStatus).
pub const TOKEN_NAME: &str = "querypilot.causal_token";

/// Why a token was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// Not `pg:<hex>/<hex>`, `gtid:<domain>-<server>-<sequence>,...`, `primary` nor empty.
    #[error("invalid value for parameter \"querypilot.causal_token\": \"{0}\" (expected a token such as \"pg:16/B374D848\", \"gtid:0-1-100\", \"primary\" or \"\", as SHOW querypilot.causal_token returns it)")]
    Malformed(String),
    /// Over the size limits (#33): longer than `MAX_TOKEN_LEN` bytes or more than
    /// `MAX_GTID_DOMAINS` domains, alone or added to the session's position.
    #[error("invalid value for parameter \"querypilot.causal_token\": the token is too large (at most {} bytes and {} replication domains per session)", crate::id::position::MAX_TOKEN_LEN, crate::id::position::MAX_GTID_DOMAINS)]
    TooLarge,
}

/// What a token hands over (the inverse of [`Token`]'s `Display`).
pub fn parse_token(token: &str) -> Result<Token, TokenError> {
    if Position::token_too_large(token) {
        // Never echoed back: it may be megabytes.
        return Err(TokenError::TooLarge);
    }
    Token::parse(token).ok_or_else(|| TokenError::Malformed(token.to_owned()))
}

/// A statement about the token, answered by the router itself.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum TokenCommand {
    /// `SHOW querypilot.causal_token`.
    Show,
    /// `SET [SESSION] querypilot.causal_token {=|TO} 'value'` (the value unquoted).
    Set(String),
    /// `SET [SESSION] querypilot.causal_token {=|TO} DEFAULT` (`reset`: `false`) or `RESET
    /// querypilot.causal_token` (`true`). A token only ever raises the position a session's
    /// reads wait for, so going back to the default keeps what it already waits for: dropping
    /// it would let the session read from a replica that misses its own writes.
    Default {
        /// Spelled `RESET` (its command tag is `RESET` rather than `SET`).
        reset: bool,
    },
}

impl TokenCommand {
    /// The command tag a server would answer it with.
    pub fn tag(&self) -> &'static str {
        match self {
            TokenCommand::Show => "SHOW",
            TokenCommand::Set(_) | TokenCommand::Default { reset: false } => "SET",
            TokenCommand::Default { reset: true } => "RESET",
        }
    }
}

/// Why a statement naming the token is refused: it is not one the router answers alone.
pub const TOKEN_ELSEWHERE: &str = "querypilot.causal_token can only be read or set by a statement of its own (SHOW querypilot.causal_token, SET querypilot.causal_token = '...'), not inside a multi-statement query, SET LOCAL, set_config() or current_setting(): the router owns it and it never reaches a server";

/// Whether `sql` names the token anywhere (as a setting name or inside a string, as
/// `set_config` / `current_setting` take it). Such a statement that [`token_command`] does not
/// recognize must not reach a server: the server would keep a placeholder setting the router
/// never sees, and leave it on the pooled connection for the next client.
pub fn mentions_token(sql: &str) -> bool {
    // Runs on every statement: a byte scan first, the lexer only when the name occurs.
    names_token(sql.as_bytes()) && names_token_when_read(sql)
}

/// [`mentions_token`] of a text that contains [`TOKEN_WORD`]: whether either server reads it
/// as the token's name rather than, say, a comment.
fn names_token_when_read(sql: &str) -> bool {
    let lower = sql.to_ascii_lowercase();
    // Read as either server would: a MySQL `#` comment or `/*! .. */` body is an operator or a
    // comment to PostgreSQL, and the other way round.
    [Dialect::Postgres, Dialect::MySql].into_iter().any(|d| compacted(&lower, d).contains(TOKEN_NAME))
}

/// The word every statement naming the token contains, in some ASCII case: the byte prefilter
/// of [`token_use`] (and, read with other words in one pass, of the router's `reading`).
pub(super) const TOKEN_WORD: &str = "causal_token";

/// What a statement is to the token, `None` when it does not name it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenUse {
    /// A statement the router answers ([`token_command`]).
    Command(TokenCommand),
    /// Names the token otherwise ([`mentions_token`]): refused with [`TOKEN_ELSEWHERE`].
    Elsewhere,
}

/// [`token_command`], or [`TokenUse::Elsewhere`] when `sql` [`mentions_token`] without being one.
pub fn token_use(sql: &str, dialect: Dialect) -> Option<TokenUse> {
    token_use_named(sql, dialect, names_token(sql.as_bytes()))
}

/// [`token_use`] of a text whose byte prefilter was read with others: `named` is whether `sql`
/// contains [`TOKEN_WORD`] in any ASCII case.
pub(super) fn token_use_named(sql: &str, dialect: Dialect, named: bool) -> Option<TokenUse> {
    // A token statement spells the name too (its `causal_token` word), so a text without the
    // word is neither, settled without the lexer.
    if !named {
        return None;
    }
    match token_command(sql, dialect) {
        Some(command) => Some(TokenUse::Command(command)),
        None => names_token_when_read(sql).then_some(TokenUse::Elsewhere),
    }
}

/// Whether `causal_token` occurs in `b`, in any case. Only the windows around the text's
/// underscores are compared, found with the memchr crate's vector search: comparing every
/// window took a few instructions per byte of every statement (#33), std's `match_indices`
/// searcher ~350 a pgbench statement (#39), and a search eight bytes a step (SWAR) 245 against
/// memchr's 144 (#39, s18).
fn names_token(b: &[u8]) -> bool {
    names_underscored(b, TOKEN_WORD.as_bytes(), 6)
}

/// Whether `word`, whose first underscore is `underscore` bytes in, occurs in `b` in any ASCII
/// case: only the windows whose first underscore falls on one of the text's are compared (see
/// [`names_token`]; MySQL sessions look for `session_track_system_variables` so too).
#[inline]
pub(crate) fn names_underscored(b: &[u8], word: &[u8], underscore: usize) -> bool {
    memchr::memchr_iter(b'_', b).any(|i| {
        let window = i.checked_sub(underscore).and_then(|start| b.get(start..start + word.len()));
        window.is_some_and(|w| w.eq_ignore_ascii_case(word))
    })
}

/// `sql`'s tokens as `dialect` reads them, comments left out, with quotes and spaces removed:
/// comments and quoting may split the name (`querypilot . "causal_token"`).
fn compacted(sql: &str, dialect: Dialect) -> String {
    let mut compact = String::with_capacity(sql.len());
    for t in Lexer::new(sql, dialect).filter(|t| t.kind != TokenKind::Comment) {
        compact.extend(t.text.chars().filter(|c| !matches!(c, '"' | '`' | '\'' | ' ')));
    }
    compact
}

/// Text after `SET [SESSION] querypilot.causal_token =` that long is refused as too large
/// without being lexed: lexing a megabyte-long value cost its core milliseconds per statement
/// (#33). The allowance leaves room for quotes, spaces and a comment around a real token.
const VALUE_TEXT_MAX: usize = crate::id::position::MAX_TOKEN_LEN + 1024;

/// Whether the tokens so far are a token SET up to its value and `rest` bytes of text follow
/// them, too many to hold a token ([`VALUE_TEXT_MAX`]).
fn oversized_value(text: &[&str], rest: usize) -> bool {
    if rest <= VALUE_TEXT_MAX {
        return false;
    }
    let is = |i: usize, w: &str| text.get(i).is_some_and(|t| t.eq_ignore_ascii_case(w));
    let start = if is(1, "SESSION") { 2 } else { 1 };
    let set = is(0, "SET") && is(start, "querypilot") && is(start + 1, ".") && is(start + 2, "causal_token");
    set && text.len() == start + 4 && (is(start + 3, "=") || is(start + 3, "TO"))
}

/// Whether a statement may be a token statement from its first word on.
fn may_be_token_command(first: &str) -> bool {
    ["SHOW", "SET", "RESET"].iter().any(|w| first.eq_ignore_ascii_case(w))
}

/// Whether a statement text of `len` bytes that begins with `head` (as much of it as has
/// arrived) is a token SET whose value text is too long to hold a token, as [`token_command`]
/// and [`parse_token`] would find on the whole text: such a message can be refused from its
/// head, its body read and dropped rather than held (#33). `false` when the head is too short
/// to tell.
pub fn oversized_token_set(head: &str, len: usize, dialect: Dialect) -> bool {
    let mut text: SmallVec<[&str; TOKEN_COMMAND_MAX]> = SmallVec::new();
    for t in Lexer::new(head, dialect).filter(|t| !matches!(t.kind, TokenKind::Comment | TokenKind::Semicolon)) {
        // The head's last token may go on past it (or be a comment left open).
        if t.end() >= head.len()
            || text.len() == TOKEN_COMMAND_MAX
            || (text.is_empty() && !may_be_token_command(t.text))
        {
            return false;
        }
        text.push(t.text);
        if oversized_value(&text, len.saturating_sub(t.end())) {
            return true;
        }
    }
    false
}

/// Recognizes `sql` as a token statement (one statement, comments and a final `;` allowed),
/// lexed as `dialect` reads it: both protocols answer the same two statements.
pub fn token_command(sql: &str, dialect: Dialect) -> Option<TokenCommand> {
    // Runs on every statement: it stops at the first word unless that is SHOW or SET, and at
    // the eighth token (both forms are shorter), without allocating; a text that starts with
    // none of the three words is settled without the lexer.
    if !crate::sql::lexer::may_start_with(sql, &["show", "set", "reset"]) {
        return None;
    }
    let mut text: SmallVec<[&str; TOKEN_COMMAND_MAX]> = SmallVec::new();
    for t in Lexer::new(sql, dialect).filter(|t| !matches!(t.kind, TokenKind::Comment | TokenKind::Semicolon)) {
        if text.len() == TOKEN_COMMAND_MAX || (text.is_empty() && !may_be_token_command(t.text)) {
            return None;
        }
        text.push(t.text);
        if oversized_value(&text, sql.len().saturating_sub(t.end())) {
            // Refused by parse_token for its length alone, whitespace and all, as
            // `oversized_token_set` refuses it from the head of a message.
            return Some(TokenCommand::Set(sql.get(t.end()..).unwrap_or_default().to_owned()));
        }
    }
    let is = |i: usize, w: &str| text.get(i).is_some_and(|t| t.eq_ignore_ascii_case(w));
    let name_at = |i: usize| is(i, "querypilot") && is(i + 1, ".") && is(i + 2, "causal_token");
    if is(0, "SHOW") && name_at(1) && text.len() == 4 {
        return Some(TokenCommand::Show);
    }
    if is(0, "RESET") && name_at(1) && text.len() == 4 {
        return Some(TokenCommand::Default { reset: true });
    }
    let start = if is(1, "SESSION") { 2 } else { 1 };
    if is(0, "SET") && name_at(start) && is(start + 4, "DEFAULT") && text.len() == start + 5 {
        return Some(TokenCommand::Default { reset: false });
    }
    if is(0, "SET") && name_at(start) && (is(start + 3, "=") || is(start + 3, "TO")) && text.len() == start + 5 {
        let value = text.get(start + 4)?;
        let unquoted = value.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')).unwrap_or(value);
        return Some(TokenCommand::Set(unquoted.replace("''", "'")));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `token`'s text and what it parses back to.
    fn round_trip(token: &Token) -> (String, Result<Token, TokenError>) {
        (token.to_string(), parse_token(&token.to_string()))
    }

    #[test]
    fn tokens_round_trip_in_pg_lsn_form() {
        let p = Token::At(Position::Wal((0x16 << 32) | 0xB374_D848));
        assert_eq!(round_trip(&p), ("pg:16/B374D848".to_owned(), Ok(p)));
        assert_eq!(parse_token("pg:0/0"), Ok(Token::At(Position::Wal(0))));
        let max = Token::At(Position::Wal(u64::MAX));
        assert_eq!(round_trip(&max).1, Ok(max));
        for bad in ["16/B374D848", "pg:", "pg:16", "pg:16/", "pg:x/1", "pg:1/123456789", "my:1/2"] {
            assert!(parse_token(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_round_trip_in_gtid_form() {
        use crate::id::GtidPosition;
        let g = Token::At(Position::Gtid(GtidPosition::parse("0-1-100,1-2-7").expect("gtids")));
        assert_eq!(round_trip(&g), ("gtid:0-1-100,1-2-7".to_owned(), Ok(g)));
        for bad in ["gtid:", "gtid:0-1", "gtid:x", "0-1-100"] {
            assert!(parse_token(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_primary_and_the_empty_token_round_trip_too() {
        // Every token SHOW can answer is accepted back (#34).
        assert_eq!(round_trip(&Token::Primary), ("primary".to_owned(), Ok(Token::Primary)));
        assert_eq!(round_trip(&Token::Empty), (String::new(), Ok(Token::Empty)));
        for bad in ["Primary", "primary ", " ", "primary:1", "pg:primary"] {
            assert_eq!(parse_token(bad), Err(TokenError::Malformed(bad.to_owned())), "{bad:?}");
        }
        let message = TokenError::Malformed("x".into()).to_string();
        assert!(message.contains("\"primary\"") && message.contains("\"\""), "{message}");
    }

    fn token_command(sql: &str) -> Option<TokenCommand> {
        let pg = super::token_command(sql, Dialect::Postgres);
        assert_eq!(super::token_command(sql, Dialect::MySql), pg, "both dialects read {sql}");
        pg
    }

    #[test]
    fn token_statements_are_recognized() {
        assert_eq!(token_command("SHOW querypilot.causal_token"), Some(TokenCommand::Show));
        assert_eq!(token_command("show QueryPilot.Causal_Token;"), Some(TokenCommand::Show));
        assert_eq!(token_command("SET querypilot.causal_token = 'pg:1/2'"), Some(TokenCommand::Set("pg:1/2".into())));
        assert_eq!(
            token_command("/* c */ SET SESSION querypilot.causal_token TO 'x'"),
            Some(TokenCommand::Set("x".into()))
        );
        // An empty statement ahead of it is skipped, as the server skips it: the token is not
        // passed to the server as a custom setting it would accept and ignore.
        assert_eq!(token_command(" ; SHOW querypilot.causal_token"), Some(TokenCommand::Show));
        for other in [
            "SHOW work_mem",
            "SET querypilot.other = 'x'",
            "SET LOCAL querypilot.causal_token = 'x'",
            "SELECT 1",
            "SELECT querypilot.causal_token",
            "SET SESSION querypilot.causal_token = 'x' 'y'",
            "SHOW querypilot.causal_token x",
            "RESET querypilot.other",
        ] {
            assert_eq!(token_command(other), None, "{other}");
        }
        let default = Some(TokenCommand::Default { reset: false });
        assert_eq!(token_command("SET querypilot.causal_token TO DEFAULT"), default);
        assert_eq!(token_command("set session querypilot.causal_token = default;"), default);
        assert_eq!(token_command("RESET querypilot.causal_token"), Some(TokenCommand::Default { reset: true }));
        assert_eq!(default.map(|c| c.tag()), Some("SET"));
    }

    #[test]
    fn an_oversized_value_is_refused_as_too_large_without_being_lexed() {
        let huge = "x".repeat(VALUE_TEXT_MAX);
        for sql in [
            format!("SET querypilot.causal_token = 'gtid:{huge}'"),
            format!("set session querypilot.causal_token to '{huge}'; select 1"),
            // An unterminated literal is never lexed to its end either.
            format!("SET querypilot.causal_token = '{huge}"),
        ] {
            let Some(TokenCommand::Set(value)) = token_command(&sql) else { panic!("not a token SET") };
            assert_eq!(parse_token(&value), Err(TokenError::TooLarge));
        }
        assert_eq!(token_command(&format!("SELECT '{huge}'")), None);
        assert_eq!(token_command(&format!("SET querypilot.other = '{huge}'")), None);
    }

    #[test]
    fn a_head_tells_an_oversized_token_set_as_the_whole_text_would() {
        let huge = "0-1-5,".repeat(VALUE_TEXT_MAX / 4);
        let padded = " ".repeat(VALUE_TEXT_MAX + 1);
        let refused = [
            format!("SET querypilot.causal_token = 'gtid:{huge}'"),
            format!("/* c */ set session querypilot . causal_token to '{huge}'"),
            // Padding counts as value text: the whole text is refused for its length too.
            format!("SET querypilot.causal_token = 'pg:1/2'{padded}"),
        ];
        for sql in &refused {
            let Some(TokenCommand::Set(value)) = token_command(sql) else { panic!("not a token SET: {sql:.60}") };
            assert_eq!(parse_token(&value), Err(TokenError::TooLarge), "{sql:.60}");
            for dialect in [Dialect::Postgres, Dialect::MySql] {
                assert!(oversized_token_set(sql.get(..64).unwrap_or_default(), sql.len(), dialect), "{sql:.60}");
                // A head that ends at or inside the `=` cannot tell yet.
                let eq = sql.find(" = ").map(|i| i + 2).or_else(|| sql.find(" to ").map(|i| i + 3));
                let eq = eq.unwrap_or_default();
                assert!(!oversized_token_set(sql.get(..eq).unwrap_or_default(), sql.len(), dialect), "{sql:.60}");
            }
        }
        let small = "SET querypilot.causal_token = 'pg:1/2'";
        let others = [
            format!("SELECT '{huge}'"),
            format!("SET querypilot.other = '{huge}'"),
            format!("SET LOCAL querypilot.causal_token = '{huge}'"),
            format!("/* {huge} */ {small}"),
            small.to_owned(),
        ];
        for sql in &others {
            assert!(!matches!(token_command(sql).map(|c| parse_token_of(&c)), Some(Err(TokenError::TooLarge))));
            for head in [64, sql.len()] {
                let head = sql.get(..head.min(sql.len())).unwrap_or_default();
                assert!(!oversized_token_set(head, sql.len(), Dialect::Postgres), "{sql:.60}");
            }
        }
    }

    fn parse_token_of(command: &TokenCommand) -> Result<Token, TokenError> {
        match command {
            TokenCommand::Set(value) => parse_token(value),
            _ => Err(TokenError::Malformed(String::new())),
        }
    }

    #[test]
    fn every_mention_of_the_token_is_found() {
        for named in [
            "select 1; set querypilot.causal_token = 'pg:1/2'",
            "SET LOCAL querypilot.causal_token = 'x'",
            "select set_config('querypilot.causal_token', 'x', false)",
            "select current_setting('QueryPilot.Causal_Token')",
            "set querypilot . /* c */ \"causal_token\" = 'x'",
            "SHOW querypilot.causal_token; SELECT 1",
        ] {
            assert!(mentions_token(named), "{named}");
        }
        for other in ["select causal_token from t", "SELECT 1", "set querypilot.other_causal_token = 1", "_", "ken_"] {
            assert!(!mentions_token(other), "{other}");
        }
        // The name at either end of the text, after other underscores, and in other scripts' company.
        assert!(mentions_token("show_x querypilot.CAUSAL_TOKEN"));
        assert!(mentions_token("current_setting('querypilot.causal_token')"));
        assert!(mentions_token("select 'é_ü', current_setting('querypilot.causal_token')"));
    }

    #[test]
    fn the_name_is_found_at_every_offset_and_length() {
        // Every position in the text, every length of text around it, underscores (each one a
        // window the scan compares) before and after it.
        for before in 0..20 {
            for after in 0..20 {
                for fill in ["x", "_", "é"] {
                    let (head, tail) = (fill.repeat(before), fill.repeat(after));
                    let text = format!("{head}CaUsAl_ToKeN{tail}");
                    assert!(names_token(text.as_bytes()), "{text}");
                    let near = format!("{head}causal_tokxn{tail}");
                    assert!(!names_token(near.as_bytes()), "{near}");
                }
            }
        }
        assert!(!names_token(b"causal_toke"));
        assert!(!names_token(b""));
    }

    #[test]
    fn the_token_is_found_through_comments_quotes_and_string_forms() {
        for named in [
            // Split by comments and whitespace between its words.
            "set querypilot/* a */./* b */causal_token = 'x'",
            "set querypilot -- a\n . causal_token = 'x'",
            "SET querypilot # a\n.causal_token = 'x'",
            // Quoted identifiers, whole or in parts, in either quoting.
            "SET \"querypilot\".\"causal_token\" = 'x'",
            "SET \"querypilot.causal_token\" TO 'x'",
            "SET `querypilot`.`CAUSAL_TOKEN` = 'x'",
            "set @@querypilot.`causal_token` = 1",
            // Every string form the name can be passed in.
            "select set_config($$querypilot.causal_token$$, 'x', false)",
            "select set_config($q$QueryPilot.Causal_Token$q$, 'x', false)",
            "select set_config(E'querypilot.causal_token', 'x', false)",
            "select set_config(e'querypilot.causal_token', 'x', false)",
            "select current_setting(N'querypilot.causal_token')",
            "select current_setting(\"querypilot.causal_token\")",
            // After an unterminated string or comment, and inside a MySQL executable comment.
            "select 1 /*! , @@querypilot.causal_token */",
            "/*!40101 SET querypilot.causal_token = 'x' */",
            "select current_setting('querypilot.causal_token",
        ] {
            assert!(mentions_token(named), "{named}");
        }
        for other in [
            "select 1 /* querypilot.causal_token */",
            "select 1 -- querypilot.causal_token",
            "select causal_token, querypilot from t",
        ] {
            assert!(!mentions_token(other), "{other}");
        }
    }
}
