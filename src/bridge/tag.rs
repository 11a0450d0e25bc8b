//! CommandComplete tags (PostgreSQL docs, "Message Formats", CommandComplete) both ways: the
//! affected-rows count of a MySQL OK packet from a tag, and the tag a PostgreSQL client expects
//! for a statement MySQL answered with an OK packet or a result set.

use crate::sql::lexer::{Lexer, Token, TokenKind};
use crate::sql::Dialect;

/// Rows affected according to `tag`: the last number of `INSERT 0 n`, `UPDATE n`, `DELETE n`,
/// `MERGE n`, `SELECT n` (CREATE TABLE AS), `COPY n`, `MOVE n`, `FETCH n`; 0 for other commands.
#[must_use]
pub fn affected_rows(tag: &str) -> u64 {
    let mut words = tag.split_ascii_whitespace();
    let counted =
        matches!(words.next(), Some("INSERT" | "UPDATE" | "DELETE" | "MERGE" | "SELECT" | "COPY" | "MOVE" | "FETCH"));
    if !counted {
        return 0;
    }
    words.last().and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// The statements of a (multi-statement) query, split at top-level semicolons as MySQL does;
/// statements with no tokens but comments are skipped, as MySQL sends no result for them.
#[must_use]
pub fn statements(sql: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start: Option<usize> = None;
    let mut end = 0;
    for t in Lexer::new(sql, Dialect::MySql) {
        match t.kind {
            TokenKind::Comment => {}
            TokenKind::Semicolon => {
                if let Some(s) = start.take() {
                    parts.push(sql.get(s..end).unwrap_or_default());
                }
            }
            _ => {
                start.get_or_insert(t.start);
                end = t.end();
            }
        }
    }
    if let Some(s) = start {
        parts.push(sql.get(s..end).unwrap_or_default());
    }
    parts
}

/// Words that may sit between `CREATE`/`DROP`/`ALTER` and the object kind.
const MODIFIERS: &[&str] = &[
    "OR",
    "REPLACE",
    "TEMPORARY",
    "TEMP",
    "UNIQUE",
    "FULLTEXT",
    "SPATIAL",
    "ONLINE",
    "OFFLINE",
    "DEFINER",
    "SQL",
    "SECURITY",
    "ALGORITHM",
    "IGNORE",
];

/// The CommandComplete tag of `statement` after MySQL answered it with an OK packet reporting
/// `affected` rows (result sets are always `SELECT n`): `INSERT 0 n` (also REPLACE), `UPDATE n`,
/// `DELETE n`, `SELECT n`, `CREATE TABLE`-style tags for DDL, else the first word.
#[must_use]
pub fn command_tag(statement: &str, affected: u64) -> String {
    let words: Vec<Token<'_>> =
        Lexer::new(statement, Dialect::MySql).filter(|t| t.kind != TokenKind::Comment).take(8).collect();
    let Some(first) = words.first() else { return String::new() };
    let verb = first.text.to_ascii_uppercase();
    match verb.as_str() {
        "INSERT" | "REPLACE" => format!("INSERT 0 {affected}"),
        "UPDATE" | "DELETE" | "SELECT" => format!("{verb} {affected}"),
        "START" => "START TRANSACTION".to_owned(),
        "TRUNCATE" => "TRUNCATE TABLE".to_owned(),
        "CREATE" | "DROP" | "ALTER" => {
            let object =
                words.iter().skip(1).find(|t| t.kind == TokenKind::Word && !MODIFIERS.iter().any(|m| t.is_word(m)));
            match object {
                Some(o) => format!("{verb} {}", o.text.to_ascii_uppercase()),
                None => verb,
            }
        }
        _ => verb,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_statements() {
        assert_eq!(statements("SELECT 1; SELECT ';' ;"), vec!["SELECT 1", "SELECT ';'"]);
        assert_eq!(statements(" /* c */ ; -- x\n"), Vec::<&str>::new());
        assert_eq!(statements("INSERT INTO t VALUES (1)"), vec!["INSERT INTO t VALUES (1)"]);
    }

    #[test]
    fn pg_tags() {
        assert_eq!(command_tag("insert into t values (1),(2)", 2), "INSERT 0 2");
        assert_eq!(command_tag("REPLACE INTO t VALUES (1)", 1), "INSERT 0 1");
        assert_eq!(command_tag("/* x */ UPDATE t SET a = 1", 3), "UPDATE 3");
        assert_eq!(command_tag("DELETE FROM t", 0), "DELETE 0");
        assert_eq!(command_tag("CREATE TEMPORARY TABLE t (a int)", 0), "CREATE TABLE");
        assert_eq!(command_tag("create unique index i on t (a)", 0), "CREATE INDEX");
        assert_eq!(command_tag("DROP TABLE IF EXISTS t", 0), "DROP TABLE");
        assert_eq!(command_tag("start transaction", 0), "START TRANSACTION");
        assert_eq!(command_tag("TRUNCATE t", 0), "TRUNCATE TABLE");
        assert_eq!(command_tag("begin", 0), "BEGIN");
        assert_eq!(command_tag("SET @a = 1", 0), "SET");
        assert_eq!(command_tag("", 0), "");
    }

    #[test]
    fn tags() {
        assert_eq!(affected_rows("INSERT 0 3"), 3);
        assert_eq!(affected_rows("UPDATE 12"), 12);
        assert_eq!(affected_rows("DELETE 0"), 0);
        assert_eq!(affected_rows("MERGE 4"), 4);
        assert_eq!(affected_rows("SELECT 7"), 7);
        assert_eq!(affected_rows("COPY 18446744073709551615"), u64::MAX);
        assert_eq!(affected_rows("CREATE TABLE"), 0);
        assert_eq!(affected_rows("BEGIN"), 0);
        assert_eq!(affected_rows(""), 0);
        assert_eq!(affected_rows("INSERT 0 x"), 0);
    }
}
