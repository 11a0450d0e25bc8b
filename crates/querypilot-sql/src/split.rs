//! Sans-IO statement splitting for MySQL query text: where one statement of a multi-statement
//! `COM_QUERY` ends, as the server sees it (#18). A stored program's body (`CREATE PROCEDURE |
//! FUNCTION | TRIGGER | EVENT ... BEGIN ...; ...; END`, MariaDB's `BEGIN NOT ATOMIC ... END`)
//! holds semicolons yet is one statement, which the server runs without
//! `CLIENT_MULTI_STATEMENTS`.
//!
//! Also where a comma-separated list ends its items ([`top_level`]).
//!
//! Works on the lexer's tokens (comments already removed by the caller), never on raw text, so a
//! `;` or `END` inside a string or quoted identifier splits nothing.

use super::lexer::{Token, TokenKind};

/// The statements of `tokens` (comments removed), split at top-level semicolons; empty
/// statements are dropped. Inside a compound statement (see the module docs) only a semicolon
/// after the outermost `END` ends it.
pub fn statements<'t, 'a>(tokens: &'t [Token<'a>]) -> Vec<&'t [Token<'a>]> {
    let mut out = Vec::new();
    let (mut from, mut depth) = (0usize, 0u32);
    let mut compound = false;
    for (i, t) in tokens.iter().enumerate() {
        if i == from {
            compound = opens_compound(tokens.get(i..).unwrap_or_default());
        }
        if compound && t.kind == TokenKind::Word {
            let prev = i.checked_sub(1).and_then(|p| tokens.get(p));
            depth = nest(depth, prev, t, tokens.get(i + 1));
        }
        if t.kind == TokenKind::Semicolon && depth == 0 {
            out.extend(tokens.get(from..i).filter(|s| !s.is_empty()));
            from = i + 1;
        }
    }
    out.extend(tokens.get(from..).filter(|s| !s.is_empty()));
    out
}

/// Whether `stmt` defines a stored program (its body is code, not statements that run now).
pub fn defines_stored_program(stmt: &[Token<'_>]) -> bool {
    const KINDS: [&str; 5] = ["PROCEDURE", "FUNCTION", "TRIGGER", "EVENT", "PACKAGE"];
    // CREATE [OR REPLACE] [DEFINER = user] [AGGREGATE] {PROCEDURE | ...}: the kind comes within
    // the first few tokens (a quoted `user`@`host` is at most four).
    stmt.first().is_some_and(|t| t.is_word("CREATE"))
        && stmt.iter().take(12).any(|t| KINDS.iter().any(|k| t.is_word(k)))
}

/// A list split at its top-level commas (`a = f(x, y), b = 2` is two parts): the assignments of
/// a `SET`, the items of a select list.
pub fn top_level<'t, 'a>(tokens: &'t [Token<'a>]) -> Vec<&'t [Token<'a>]> {
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

/// A statement whose `BEGIN ... END` (and `CASE ... END`) blocks must be matched before a
/// semicolon ends it: any `CREATE` (only a stored program can hold a block with semicolons;
/// other CREATEs at worst balance a `CASE ... END` expression) and `BEGIN NOT ATOMIC`. A
/// top-level `BEGIN` alone starts a transaction and opens no block.
fn opens_compound(stmt: &[Token<'_>]) -> bool {
    let first = stmt.first();
    first.is_some_and(|t| t.is_word("CREATE"))
        || (first.is_some_and(|t| t.is_word("BEGIN")) && stmt.get(1).is_some_and(|t| t.is_word("NOT")))
}

/// The block depth after word `t` (between `prev` and `next`): `BEGIN` and `CASE` open a block
/// closed by `END` / `END CASE`; `IF`, `LOOP`, `WHILE`, `REPEAT` and `FOR` are closed by their
/// own `END IF` ... `END FOR`, so neither side counts.
fn nest(depth: u32, prev: Option<&Token<'_>>, t: &Token<'_>, next: Option<&Token<'_>>) -> u32 {
    const OWN_END: [&str; 5] = ["IF", "LOOP", "WHILE", "REPEAT", "FOR"];
    let after_end = prev.is_some_and(|p| p.is_word("END"));
    if t.is_word("BEGIN") || (t.is_word("CASE") && !after_end) {
        depth.saturating_add(1)
    } else if t.is_word("END") && !next.is_some_and(|n| OWN_END.iter().any(|k| n.is_word(k))) {
        depth.saturating_sub(1)
    } else {
        depth
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lexer::Lexer;
    use crate::Dialect;

    fn split(sql: &str) -> Vec<String> {
        let tokens: Vec<Token<'_>> = Lexer::new(sql, Dialect::MySql).filter(|t| t.kind != TokenKind::Comment).collect();
        statements(&tokens)
            .iter()
            .map(|s| {
                let (a, b) = (s.first().map_or(0, |t| t.start), s.last().map_or(0, Token::end));
                sql[a..b].to_owned()
            })
            .collect()
    }

    #[test]
    fn plain_statements_split_at_semicolons() {
        assert_eq!(split("SELECT 1; SELECT 2;"), ["SELECT 1", "SELECT 2"]);
        assert_eq!(split(";;SELECT ';'; -- ;\n"), ["SELECT ';'"]);
        assert_eq!(split("BEGIN; UPDATE t SET a = 1; COMMIT"), ["BEGIN", "UPDATE t SET a = 1", "COMMIT"]);
        assert!(split("").is_empty());
    }

    #[test]
    fn stored_program_bodies_are_one_statement() {
        let p = "CREATE PROCEDURE p() BEGIN SELECT 1; SELECT 2; END";
        assert_eq!(split(p), [p]);
        let nested = "CREATE DEFINER=`root`@`localhost` PROCEDURE p(x INT) lbl: BEGIN \
                      IF x > 0 THEN SELECT CASE WHEN x = 1 THEN 'a' ELSE 'b' END; END IF; \
                      WHILE x > 0 DO SET x = x - 1; END WHILE; \
                      CASE x WHEN 0 THEN SELECT 0; ELSE BEGIN SELECT 9; END; END CASE; \
                      LOOP LEAVE lbl; END LOOP; END lbl";
        assert_eq!(split(&format!("{nested}; SELECT 3")), [nested, "SELECT 3"]);
        let f = "create function f() returns int deterministic begin declare v int; set v = 1; return v; end";
        assert_eq!(split(f), [f]);
        let t = "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW BEGIN SET NEW.a = 1; SET NEW.b = 2; END";
        assert_eq!(split(t), [t]);
        let e = "CREATE EVENT e ON SCHEDULE EVERY 1 DAY DO BEGIN DELETE FROM t; INSERT INTO t VALUES (1); END";
        assert_eq!(split(e), [e]);
        let block = "BEGIN NOT ATOMIC SELECT 1; SELECT 2; END";
        assert_eq!(split(&format!("{block}; SELECT 4")), [block, "SELECT 4"]);
        let one_liner = "CREATE TRIGGER tr BEFORE INSERT ON t FOR EACH ROW SET NEW.a = 1";
        assert_eq!(split(&format!("{one_liner}; SELECT 5")), [one_liner, "SELECT 5"]);
    }

    #[test]
    fn other_creates_split_normally() {
        assert_eq!(
            split("CREATE TABLE event (a INT); BEGIN; SELECT 1"),
            ["CREATE TABLE event (a INT)", "BEGIN", "SELECT 1"]
        );
        assert_eq!(
            split("CREATE VIEW v AS SELECT CASE WHEN a THEN 1 END FROM t; SELECT 2"),
            ["CREATE VIEW v AS SELECT CASE WHEN a THEN 1 END FROM t", "SELECT 2"]
        );
        assert_eq!(split("SELECT 'BEGIN'; SELECT `end`"), ["SELECT 'BEGIN'", "SELECT `end`"]);
    }

    #[test]
    fn stored_program_definitions_are_recognized() {
        let toks = |sql: &'static str| -> Vec<Token<'static>> {
            Lexer::new(sql, Dialect::MySql).filter(|t| t.kind != TokenKind::Comment).collect()
        };
        assert!(defines_stored_program(&toks("CREATE OR REPLACE PROCEDURE p() SELECT @x")));
        assert!(defines_stored_program(&toks("CREATE DEFINER = 'a'@'%' FUNCTION f() RETURNS INT RETURN 1")));
        assert!(!defines_stored_program(&toks("CREATE TEMPORARY TABLE t AS SELECT @x")));
        assert!(!defines_stored_program(&toks("SELECT 'CREATE PROCEDURE'")));
    }
}
