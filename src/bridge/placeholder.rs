//! Placeholders between the protocols, found with the SQL lexer so one inside a string, quoted
//! identifier or comment is left alone: MySQL `?` → PostgreSQL `$n` (the statement is lexed as
//! PostgreSQL, where it runs, so `?|`, `?&`, `?-` and `?#` stay operators), and PostgreSQL `$n` →
//! MySQL `?` (lexed as MySQL in the connection's string mode, where backslash escapes end
//! strings differently).

use crate::sql::lexer::{Lexer, TokenKind};
use crate::sql::mode::LexMode;
use crate::sql::Dialect;

/// Rewrites each `?` parameter to `$1`, `$2`, … in order, or, given `order`, the `j`-th `?` to
/// `$(order[j] + 1)` (a translation that moved or repeated the client's parameters; a `?` past
/// the end of `order` keeps its own position); returns the text and the count of `?`.
#[must_use]
pub fn number_placeholders(sql: &str, order: Option<&[u16]>) -> (String, u16) {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut copied = 0;
    let mut n: u16 = 0;
    for t in Lexer::new(sql, Dialect::Postgres) {
        if t.kind != TokenKind::Param || t.text != "?" {
            continue;
        }
        let number = order.and_then(|o| o.get(usize::from(n))).map_or_else(|| u32::from(n) + 1, |p| u32::from(*p) + 1);
        n = n.saturating_add(1);
        out.push_str(sql.get(copied..t.start).unwrap_or_default());
        out.push('$');
        out.push_str(&number.to_string());
        copied = t.end();
    }
    out.push_str(sql.get(copied..).unwrap_or_default());
    (out, n)
}

/// Rewrites each `$n` parameter of MySQL text `sql` (read in `mode`) to `?`; returns the text
/// and, for each `?` in order, the 0-based PostgreSQL parameter it stands for. `$1` used twice yields two `?` both bound to
/// parameter 0, and `$2 … $1` yields `[1, 0]`: the caller sends values in that order.
#[must_use]
pub fn question_placeholders(sql: &str, mode: LexMode) -> (String, Vec<u16>) {
    let mut out = String::with_capacity(sql.len());
    let mut copied = 0;
    let mut order = Vec::new();
    for t in Lexer::new(sql, Dialect::MySql).mode(mode) {
        let Some(n) = t.text.strip_prefix('$').and_then(|n| n.parse::<u16>().ok()).filter(|n| *n > 0) else { continue };
        if t.kind != TokenKind::Param {
            continue;
        }
        out.push_str(sql.get(copied..t.start).unwrap_or_default());
        out.push('?');
        order.push(n - 1);
        copied = t.end();
    }
    out.push_str(sql.get(copied..).unwrap_or_default());
    (out, order)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dollars_to_questions_with_reuse_and_reordering() {
        let q = |sql| question_placeholders(sql, LexMode::default());
        assert_eq!(q("SELECT $1 + 1, $2"), ("SELECT ? + 1, ?".to_owned(), vec![0, 1]));
        assert_eq!(q("SELECT $2, $1, $2"), ("SELECT ?, ?, ?".to_owned(), vec![1, 0, 1]));
        assert_eq!(q("SELECT 1"), ("SELECT 1".to_owned(), vec![]));
        let sql = "SELECT '$1', 'it\\'s $1', `a$1`, \"$2\" /* $1 */ FROM t WHERE x = $10 -- $1\n AND y = $1";
        let want = "SELECT '$1', 'it\\'s $1', `a$1`, \"$2\" /* $1 */ FROM t WHERE x = ? -- $1\n AND y = ?";
        assert_eq!(q(sql), (want.to_owned(), vec![9, 0]));
        // With NO_BACKSLASH_ESCAPES `'a\'` is a whole string, so the `$1` after it is a parameter.
        let nbe = LexMode { no_backslash_escapes: true, ..LexMode::default() };
        assert_eq!(question_placeholders("SELECT 'a\\', $1", nbe), ("SELECT 'a\\', ?".to_owned(), vec![0]));
        assert_eq!(q("SELECT 'a\\', $1"), ("SELECT 'a\\', $1".to_owned(), vec![]));
    }

    #[test]
    fn numbers_follow_a_translation_order() {
        assert_eq!(number_placeholders("SELECT ? + ?, ?", Some(&[1, 0, 1])), ("SELECT $2 + $1, $2".to_owned(), 3));
        assert_eq!(number_placeholders("SELECT ?, '?', ?", Some(&[0])), ("SELECT $1, '?', $2".to_owned(), 2));
    }

    #[test]
    fn numbers_in_order() {
        assert_eq!(number_placeholders("SELECT ? + 1, ?", None), ("SELECT $1 + 1, $2".to_owned(), 2));
        assert_eq!(
            number_placeholders("INSERT INTO t VALUES (?,?,?)", None),
            ("INSERT INTO t VALUES ($1,$2,$3)".to_owned(), 3)
        );
        assert_eq!(number_placeholders("SELECT 1", None), ("SELECT 1".to_owned(), 0));
    }

    #[test]
    fn strings_comments_and_identifiers_untouched() {
        let sql = "SELECT '?', \"a?\", $$?$$, E'\\'?' /* ? */ FROM t WHERE x = ? -- ?\n AND y = ?";
        let want = "SELECT '?', \"a?\", $$?$$, E'\\'?' /* ? */ FROM t WHERE x = $1 -- ?\n AND y = $2";
        assert_eq!(number_placeholders(sql, None), (want.to_owned(), 2));
    }

    #[test]
    fn jsonb_operators_stay() {
        assert_eq!(
            number_placeholders("SELECT j ?| array['a'] FROM t WHERE id = ?", None),
            ("SELECT j ?| array['a'] FROM t WHERE id = $1".to_owned(), 1)
        );
    }
}
