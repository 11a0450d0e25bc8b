//! MySQL `?` placeholders → PostgreSQL `$n` parameters, found with the SQL lexer so a `?` inside
//! a string, quoted identifier or comment is left alone. The statement is lexed as PostgreSQL
//! (it runs there), where `?|`, `?&`, `?-` and `?#` stay operators.

use crate::sql::lexer::{Lexer, TokenKind};
use crate::sql::Dialect;

/// Rewrites each `?` parameter to `$1`, `$2`, … in order; returns the text and the count.
#[must_use]
pub fn number_placeholders(sql: &str) -> (String, u16) {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut copied = 0;
    let mut n: u16 = 0;
    for t in Lexer::new(sql, Dialect::Postgres) {
        if t.kind != TokenKind::Param || t.text != "?" {
            continue;
        }
        n = n.saturating_add(1);
        out.push_str(sql.get(copied..t.start).unwrap_or_default());
        out.push('$');
        out.push_str(&n.to_string());
        copied = t.end();
    }
    out.push_str(sql.get(copied..).unwrap_or_default());
    (out, n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_in_order() {
        assert_eq!(number_placeholders("SELECT ? + 1, ?"), ("SELECT $1 + 1, $2".to_owned(), 2));
        assert_eq!(number_placeholders("INSERT INTO t VALUES (?,?,?)"), ("INSERT INTO t VALUES ($1,$2,$3)".to_owned(), 3));
        assert_eq!(number_placeholders("SELECT 1"), ("SELECT 1".to_owned(), 0));
    }

    #[test]
    fn strings_comments_and_identifiers_untouched() {
        let sql = "SELECT '?', \"a?\", $$?$$, E'\\'?' /* ? */ FROM t WHERE x = ? -- ?\n AND y = ?";
        let want = "SELECT '?', \"a?\", $$?$$, E'\\'?' /* ? */ FROM t WHERE x = $1 -- ?\n AND y = $2";
        assert_eq!(number_placeholders(sql), (want.to_owned(), 2));
    }

    #[test]
    fn jsonb_operators_stay() {
        assert_eq!(number_placeholders("SELECT j ?| array['a'] FROM t WHERE id = ?"), ("SELECT j ?| array['a'] FROM t WHERE id = $1".to_owned(), 1));
    }
}
