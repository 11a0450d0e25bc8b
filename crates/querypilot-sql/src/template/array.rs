//! JSON-array slots: a string literal of the original example that holds a JSON array of
//! scalars (MySQL's `JSON_OVERLAPS(labels, '[1,2]')`) written in the translation as a list
//! literal with the same items (DuckDB `[1, 2]`, PostgreSQL `ARRAY[1, 2]`). The client's value is
//! parsed here as JSON and each item written as a literal of the target dialect; its text is
//! never copied into the translation. Only scalars are items: a nested array or object has no
//! list-literal form the translation could have been written for.

use std::ops::Range;

use super::{quote_string, Dialect, Literal, LiteralKind, Parameterized, TemplateError};

/// One item of a JSON array.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Item {
    /// A JSON number, as written (the JSON grammar keeps it a valid SQL numeric literal).
    Number(String),
    /// A JSON string, unescaped.
    String(String),
    /// `true` / `false`.
    Bool(bool),
    /// `null`.
    Null,
}

impl Item {
    /// Whether the translated example's literal `lit` is this item.
    pub(super) fn is(&self, lit: &Literal) -> bool {
        let value = lit.value.as_deref();
        match (self, lit.kind) {
            (Item::Number(n), LiteralKind::Number) => value == Some(n.to_ascii_lowercase().as_str()),
            (Item::String(s), LiteralKind::String) => value == Some(s.as_str()),
            (Item::Bool(b), LiteralKind::Bool) => value == Some(if *b { "true" } else { "false" }),
            (Item::Null, LiteralKind::Null) => true,
            _ => false,
        }
    }
}

/// The original's string slots that hold a non-empty JSON array of scalars, with its items.
pub(super) fn json_arrays(original: &Parameterized) -> Vec<(usize, Vec<Item>)> {
    original
        .literals
        .iter()
        .enumerate()
        .filter(|(_, l)| l.kind == LiteralKind::String)
        .filter_map(|(i, l)| parse(l.value.as_deref()?).ok().filter(|v| !v.is_empty()).map(|v| (i, v)))
        .collect()
}

/// Whether the translated literals from `j` on are one of `arrays`' items as a list literal:
/// a collapsed `ARRAY[..]` list, or bare scalars separated by commas between `[` and `]`.
/// Returns (original slot, span of the items, how many translated literals it covers).
pub(super) fn slot(
    arrays: &[(usize, Vec<Item>)],
    sql: &str,
    lits: &[Literal],
    j: usize,
    position: usize,
) -> Result<Option<(usize, Range<usize>, usize)>, TemplateError> {
    let Some(first) = lits.get(j) else { return Ok(None) };
    let mut hits = Vec::new();
    for (i, items) in arrays {
        if !first.items.is_empty() {
            if first.items.len() == items.len() && items.iter().zip(&first.items).all(|(a, l)| a.is(l)) {
                hits.push((*i, first.span.clone(), 1));
            }
            continue;
        }
        let Some(run) = lits.get(j..j + items.len()) else { continue };
        let same = items.iter().zip(run).all(|(a, l)| l.items.is_empty() && a.is(l));
        let commas = run.windows(2).all(|w| match w {
            [a, b] => sql.get(a.span.end..b.span.start).is_some_and(|s| s.trim() == ","),
            _ => true,
        });
        let (start, end) = (first.span.start, run.last().map_or(first.span.end, |l| l.span.end));
        let open = sql.get(..start).is_some_and(|s| s.trim_end().ends_with('['));
        let close = sql.get(end..).is_some_and(|s| s.trim_start().starts_with(']'));
        if same && commas && open && close {
            hits.push((*i, start..end, items.len()));
        }
    }
    match hits.len() {
        0 | 1 => Ok(hits.pop()),
        count => Err(TemplateError::Ambiguous { position, offset: first.span.start, text: first.text.clone(), count }),
    }
}

/// Writes `items` as the items of a list literal of `target`, comma-separated (the brackets are
/// the translation's own); `None` if a string cannot be written safely.
pub(super) fn render(out: &mut String, items: &[Item], target: Dialect) -> Option<()> {
    for (n, item) in items.iter().enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        match item {
            Item::Number(v) => out.push_str(v),
            Item::String(s) => quote_string(out, s, target)?,
            Item::Bool(b) => out.push_str(if *b { "TRUE" } else { "FALSE" }),
            Item::Null => out.push_str("NULL"),
        }
    }
    Some(())
}

/// Parses `text` as a JSON array of scalars (RFC 8259), or says why it is not one.
pub(super) fn parse(text: &str) -> Result<Vec<Item>, String> {
    let mut p = Parser { s: text.as_bytes(), at: 0 };
    p.ws();
    if !p.eat(b'[') {
        return Err("it does not start with `[`".to_owned());
    }
    let mut items = Vec::new();
    p.ws();
    if !p.eat(b']') {
        loop {
            p.ws();
            items.push(p.item()?);
            p.ws();
            if p.eat(b']') {
                break;
            }
            if !p.eat(b',') {
                return Err(format!("expected `,` or `]` at byte {}", p.at));
            }
        }
    }
    p.ws();
    if p.at != p.s.len() {
        return Err(format!("unexpected text after the array at byte {}", p.at));
    }
    Ok(items)
}

struct Parser<'a> {
    s: &'a [u8],
    at: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<u8> {
        self.s.get(self.at).copied()
    }

    fn eat(&mut self, b: u8) -> bool {
        let hit = self.peek() == Some(b);
        self.at += usize::from(hit);
        hit
    }

    fn ws(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b'\n' | b'\r')) {
            self.at += 1;
        }
    }

    fn word(&mut self, w: &str) -> bool {
        let hit = self.s.get(self.at..self.at + w.len()) == Some(w.as_bytes());
        self.at += if hit { w.len() } else { 0 };
        hit
    }

    fn item(&mut self) -> Result<Item, String> {
        match self.peek() {
            Some(b'"') => self.string().map(Item::String),
            Some(b'-' | b'0'..=b'9') => self.number().map(Item::Number),
            Some(b'[' | b'{') => Err(format!("item at byte {} is an array or object, not a scalar", self.at)),
            _ if self.word("true") => Ok(Item::Bool(true)),
            _ if self.word("false") => Ok(Item::Bool(false)),
            _ if self.word("null") => Ok(Item::Null),
            _ => Err(format!("no JSON value at byte {}", self.at)),
        }
    }

    fn digits(&mut self) -> usize {
        let start = self.at;
        while matches!(self.peek(), Some(b'0'..=b'9')) {
            self.at += 1;
        }
        self.at - start
    }

    fn number(&mut self) -> Result<String, String> {
        let start = self.at;
        self.eat(b'-');
        let int = self.digits();
        let leading_zero = self.s.get(self.at - int) == Some(&b'0') && int > 1;
        let mut ok = int > 0 && !leading_zero;
        if self.eat(b'.') {
            ok &= self.digits() > 0;
        }
        if self.eat(b'e') || self.eat(b'E') {
            let _ = self.eat(b'+') || self.eat(b'-');
            ok &= self.digits() > 0;
        }
        let text = std::str::from_utf8(self.s.get(start..self.at).unwrap_or_default()).unwrap_or_default();
        if ok {
            Ok(text.to_ascii_lowercase())
        } else {
            Err(format!("malformed number `{text}` at byte {start}"))
        }
    }

    fn string(&mut self) -> Result<String, String> {
        let start = self.at;
        self.at += 1;
        let mut out = String::new();
        loop {
            let rest = std::str::from_utf8(self.s.get(self.at..).unwrap_or_default()).map_err(|e| e.to_string())?;
            let Some(c) = rest.chars().next() else {
                return Err(format!("unterminated string at byte {start}"));
            };
            self.at += c.len_utf8();
            match c {
                '"' => return Ok(out),
                '\\' => out.push(self.escape()?),
                c if u32::from(c) < 0x20 => return Err(format!("control character in the string at byte {start}")),
                c => out.push(c),
            }
        }
    }

    fn escape(&mut self) -> Result<char, String> {
        let at = self.at;
        let c = self.peek().ok_or("unterminated escape")?;
        self.at += 1;
        Ok(match c {
            b'"' => '"',
            b'\\' => '\\',
            b'/' => '/',
            b'b' => '\u{8}',
            b'f' => '\u{c}',
            b'n' => '\n',
            b'r' => '\r',
            b't' => '\t',
            b'u' => {
                let hi = self.hex4()?;
                let code = if (0xd800..0xdc00).contains(&hi) && self.word("\\u") {
                    let lo = self.hex4()?;
                    0x10000 + ((hi - 0xd800) << 10) + lo.wrapping_sub(0xdc00)
                } else {
                    hi
                };
                char::from_u32(code).filter(|c| *c != '\0').ok_or_else(|| format!("invalid \\u escape at byte {at}"))?
            }
            _ => return Err(format!("invalid escape at byte {at}")),
        })
    }

    fn hex4(&mut self) -> Result<u32, String> {
        let digits = self.s.get(self.at..self.at + 4).and_then(|d| std::str::from_utf8(d).ok());
        let v = digits
            .and_then(|d| u32::from_str_radix(d, 16).ok())
            .ok_or_else(|| format!("bad \\u escape at {}", self.at))?;
        self.at += 4;
        Ok(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_arrays_of_scalars_and_says_why_not() {
        assert_eq!(
            parse(" [1, -2.5e3 ,\"a\\\"b\\u00e9\", true, null] "),
            Ok(vec![
                Item::Number("1".into()),
                Item::Number("-2.5e3".into()),
                Item::String("a\"bé".into()),
                Item::Bool(true),
                Item::Null
            ])
        );
        assert_eq!(parse("[]"), Ok(vec![]));
        assert_eq!(parse("[\"\\ud83d\\ude00\"]"), Ok(vec![Item::String("😀".into())]));
        for bad in [
            "",
            "7",
            "{\"a\":1}",
            "[1,]",
            "[1",
            "[[1]]",
            "[{}]",
            "[01]",
            "[1.]",
            "[1] x",
            "[\"a]",
            "[tru]",
            "[1 2]",
            "[\"\\u0000\"]",
            "[1); DROP TABLE t; --]",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
