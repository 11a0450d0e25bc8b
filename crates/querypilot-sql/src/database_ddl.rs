//! Statements a PostgreSQL server refuses while any other session is connected to a database
//! (#36): `DROP DATABASE x`, `ALTER DATABASE x RENAME TO y` and `CREATE DATABASE y [TEMPLATE
//! x]` (`template1` when it names none) all need `x` free of connections, and the router's own
//! idle pool connections and health probes count. [`blocked_database`] names `x` so the router can let go of it first.
//!
//! Pure: one lexer pass over the statement's first tokens, no allocation but the name found.

use super::lexer::{Lexer, TokenKind};
use super::Dialect;

/// The database `sql` needs free of other connections, as the server folds the name
/// (unquoted: lower case; quoted: as written, `""` undoubled); `None` for any other statement.
/// Only the first statement of a text is looked at: none of these runs in a transaction
/// block, so a multi-statement text holding one fails at the server anyway.
pub fn blocked_database(sql: &str) -> Option<String> {
    let text = sql.trim_start();
    let verb_first = ["drop", "alter", "create"]
        .iter()
        .any(|w| text.get(..w.len()).is_some_and(|head| head.eq_ignore_ascii_case(w)));
    if !verb_first && !text.starts_with(['/', '-']) {
        return None; // the common case, decided without lexing
    }
    let mut tokens = Lexer::new(sql, Dialect::Postgres).filter(|t| t.kind != TokenKind::Comment);
    let verb = tokens.next()?;
    if !tokens.next()?.is_word("database") {
        return None;
    }
    if verb.is_word("drop") {
        let mut name = tokens.next()?;
        if name.is_word("if") {
            if !tokens.next()?.is_word("exists") {
                return None;
            }
            name = tokens.next()?;
        }
        return name.pg_identifier();
    }
    if verb.is_word("alter") {
        let name = tokens.next()?.pg_identifier()?;
        return tokens.next()?.is_word("rename").then_some(name);
    }
    if verb.is_word("create") {
        // CREATE DATABASE name [WITH] [option [=] value ...]: the template is the value after
        // the word TEMPLATE (or `TEMPLATE = value`); without one (or with DEFAULT) the server
        // copies `template1`, which must be free just the same.
        tokens.next()?;
        while let Some(t) = tokens.next() {
            if t.is_word("template") {
                let mut value = tokens.next()?;
                if value.kind == TokenKind::Operator && value.text == "=" {
                    value = tokens.next()?;
                }
                return value.pg_identifier().filter(|n| !n.eq_ignore_ascii_case("default")).or_else(template1);
            }
            if t.kind == TokenKind::Semicolon {
                break;
            }
        }
        return template1();
    }
    None
}

/// The template `CREATE DATABASE` copies when it names none.
fn template1() -> Option<String> {
    Some("template1".to_owned())
}

#[cfg(test)]
mod tests {
    use super::blocked_database;

    #[test]
    fn names_the_database_each_statement_needs_free() {
        let cases = [
            ("DROP DATABASE regression", Some("regression")),
            ("drop database if exists \"regression\"", Some("regression")),
            ("DROP DATABASE Mixed WITH (FORCE)", Some("mixed")),
            ("DROP DATABASE \"Mi\"\"xed\"", Some("Mi\"xed")),
            ("  /* c */ DROP /* c */ DATABASE x;", Some("x")),
            ("ALTER DATABASE regression_tbd RENAME TO regression_utf8", Some("regression_tbd")),
            ("ALTER DATABASE regression SET lc_messages TO 'C'", None),
            ("CREATE DATABASE \"regression\" TEMPLATE=template0 ENCODING='UTF8'", Some("template0")),
            ("create database copy with owner app template \"Src\"", Some("Src")),
            ("CREATE DATABASE x TEMPLATE DEFAULT", Some("template1")),
            ("CREATE DATABASE x", Some("template1")),
            ("create database x owner app;", Some("template1")),
            ("CREATE TABLE database (template int)", None),
            ("DROP TABLE x", None),
            ("SELECT 1", None),
            ("DROP", None),
            ("DROP DATABASE", None),
            ("", None),
            ("dröp database x", None),
        ];
        for (sql, want) in cases {
            assert_eq!(blocked_database(sql).as_deref(), want, "{sql}");
        }
    }
}
