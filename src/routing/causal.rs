//! The causal token (#22): a session's read-your-writes position as text a client can read
//! (`SHOW querypilot.causal_token`, a ParameterStatus after each write) and hand to another
//! connection (`SET querypilot.causal_token = '...'`), so a request served by another
//! application instance still reads its writes. Pure: token codec and statement recognition.
//!
//! A PostgreSQL token is `pg:` followed by the WAL position in PostgreSQL's own `pg_lsn` text
//! form (`16/B374D848`), so an operator can compare it with `pg_last_wal_replay_lsn()`; a
//! MariaDB token is `gtid:` followed by the GTID position as `@@gtid_slave_pos` prints it
//! (`0-1-100,1-2-7`).

use crate::id::Position;
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
    /// Not `pg:<hex>/<hex>` nor `gtid:<domain>-<server>-<sequence>,...` (or empty, which
    /// clears nothing and is refused too).
    #[error("invalid value for parameter \"querypilot.causal_token\": \"{0}\" (expected a token such as \"pg:16/B374D848\" or \"gtid:0-1-100\", as SHOW querypilot.causal_token returns it)")]
    Malformed(String),
    /// Over the size limits (#33): longer than `MAX_TOKEN_LEN` bytes or more than
    /// `MAX_GTID_DOMAINS` domains, alone or added to the session's position.
    #[error("invalid value for parameter \"querypilot.causal_token\": the token is too large (at most {} bytes and {} replication domains per session)", crate::id::position::MAX_TOKEN_LEN, crate::id::position::MAX_GTID_DOMAINS)]
    TooLarge,
}

/// The token for `position` (its `Display` form).
pub fn format_token(position: &Position) -> String {
    position.to_string()
}

/// The position a token names.
pub fn parse_token(token: &str) -> Result<Position, TokenError> {
    if Position::token_too_large(token) {
        // Never echoed back: it may be megabytes.
        return Err(TokenError::TooLarge);
    }
    Position::parse_token(token).ok_or_else(|| TokenError::Malformed(token.to_owned()))
}

/// A statement about the token, answered by the router itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenCommand {
    /// `SHOW querypilot.causal_token`.
    Show,
    /// `SET [SESSION] querypilot.causal_token {=|TO} 'value'` (the value unquoted).
    Set(String),
}

/// Recognizes `sql` as a token statement (one statement, comments and a final `;` allowed),
/// lexed as `dialect` reads it: both protocols answer the same two statements.
pub fn token_command(sql: &str, dialect: Dialect) -> Option<TokenCommand> {
    // Runs on every statement: it stops at the first word unless that is SHOW or SET, and at
    // the eighth token (both forms are shorter), without allocating.
    let mut text: SmallVec<[&str; TOKEN_COMMAND_MAX]> = SmallVec::new();
    for t in Lexer::new(sql, dialect).filter(|t| !matches!(t.kind, TokenKind::Comment | TokenKind::Semicolon)) {
        if text.len() == TOKEN_COMMAND_MAX
            || (text.is_empty() && !t.text.eq_ignore_ascii_case("SHOW") && !t.text.eq_ignore_ascii_case("SET"))
        {
            return None;
        }
        text.push(t.text);
    }
    let is = |i: usize, w: &str| text.get(i).is_some_and(|t| t.eq_ignore_ascii_case(w));
    let name_at = |i: usize| is(i, "querypilot") && is(i + 1, ".") && is(i + 2, "causal_token");
    if is(0, "SHOW") && name_at(1) && text.len() == 4 {
        return Some(TokenCommand::Show);
    }
    let start = if is(1, "SESSION") { 2 } else { 1 };
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

    #[test]
    fn tokens_round_trip_in_pg_lsn_form() {
        let p = Position::Wal((0x16 << 32) | 0xB374_D848);
        assert_eq!(format_token(&p), "pg:16/B374D848");
        assert_eq!(parse_token("pg:16/B374D848"), Ok(p));
        assert_eq!(parse_token("pg:0/0"), Ok(Position::Wal(0)));
        assert_eq!(parse_token(&format_token(&Position::Wal(u64::MAX))), Ok(Position::Wal(u64::MAX)));
        for bad in ["", "16/B374D848", "pg:", "pg:16", "pg:16/", "pg:x/1", "pg:1/123456789", "my:1/2"] {
            assert!(parse_token(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn tokens_round_trip_in_gtid_form() {
        use crate::id::GtidPosition;
        let g = Position::Gtid(GtidPosition::parse("0-1-100,1-2-7").expect("gtids"));
        assert_eq!(format_token(&g), "gtid:0-1-100,1-2-7");
        assert_eq!(parse_token("gtid:0-1-100,1-2-7"), Ok(g));
        for bad in ["gtid:", "gtid:0-1", "gtid:x", "0-1-100"] {
            assert!(parse_token(bad).is_err(), "{bad}");
        }
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
        for other in [
            "SHOW work_mem",
            "SET querypilot.other = 'x'",
            "SET LOCAL querypilot.causal_token = 'x'",
            "SELECT 1",
            "SELECT querypilot.causal_token",
            "SET SESSION querypilot.causal_token = 'x' 'y'",
            "SHOW querypilot.causal_token x",
        ] {
            assert_eq!(token_command(other), None, "{other}");
        }
    }
}
