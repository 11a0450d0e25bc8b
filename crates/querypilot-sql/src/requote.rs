//! Re-serialises the string literals of a statement written in one dialect for a server of the
//! other (issue #33): the protocol bridges never pass a client's literal on as written, because
//! the two servers end strings at different places (`'a\'` is a complete string to PostgreSQL and
//! an open one to MySQL), and a value that ends early runs as SQL.
//!
//! [`requote`] lexes the text in the client's dialect and mode (what the client was told: MySQL
//! `NO_BACKSLASH_ESCAPES`, PostgreSQL `standard_conforming_strings`), decodes each string literal
//! to its value, and writes the value in a form the backend reads back exactly whatever its own
//! string mode. Quoted identifiers change quotes (`` `a` `` ⇄ `"a"`), and comments the other
//! dialect would end elsewhere are rewritten. The result is then lexed as the backend will read
//! it and must show exactly the literals written, with the same values; anything else (an
//! unterminated string, a NUL the backend cannot store, a literal the other dialect would read
//! differently) is refused with a [`RequoteError`], never passed on raw.
//!
//! Pure: depends on the lexer only.

use super::lexer::{Lexer, StringKind, Token, TokenKind};
use super::mode::LexMode;
use super::Dialect;

/// How the backend reads string literals.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// PostgreSQL, in either `standard_conforming_strings` setting (the forms written do not
    /// depend on it).
    Postgres,
    /// MySQL/MariaDB; `no_backslash_escapes` is the connection's `NO_BACKSLASH_ESCAPES` mode.
    MySql {
        /// Backslashes are ordinary characters in the connection's strings.
        no_backslash_escapes: bool,
    },
}

impl Target {
    fn dialect(self) -> Dialect {
        match self {
            Target::Postgres => Dialect::Postgres,
            Target::MySql { .. } => Dialect::MySql,
        }
    }

    fn mode(self) -> LexMode {
        LexMode {
            no_backslash_escapes: matches!(self, Target::MySql { no_backslash_escapes: true }),
            ..LexMode::default()
        }
    }
}

/// Why a statement cannot be carried to the backend exactly. Offsets are bytes of the input
/// (for [`RequoteError::Misread`], of the re-serialised text).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequoteError {
    /// A string, quoted identifier or comment has no end.
    #[error("unterminated quoted string, identifier or comment at byte {0}")]
    Unterminated(usize),
    /// A literal's value contains NUL, which PostgreSQL text cannot hold.
    #[error("the string literal at byte {0} contains a NUL character, which PostgreSQL text cannot hold")]
    Nul(usize),
    /// A literal's escapes yield bytes that are not UTF-8.
    #[error("the string literal at byte {0} is not valid UTF-8 once its escapes are applied")]
    Encoding(usize),
    /// A literal form the bridge does not carry.
    #[error("the {1} at byte {0} cannot be carried to the other dialect exactly")]
    Unsupported(usize, &'static str),
    /// The backend would read the re-serialised text's literals differently.
    #[error("the statement's literals would read differently on the backend (near byte {0})")]
    Misread(usize),
}

/// [`encode`] was given a NUL for PostgreSQL, whose text cannot hold it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("PostgreSQL text cannot hold a NUL character")]
pub struct NulInText;

/// A literal written into the output: its span there and what the backend must read.
#[derive(Debug)]
struct Written {
    span: std::ops::Range<usize>,
    /// The decoded value, or `None` for bit/hex strings carried as written.
    value: Option<String>,
}

/// `sql` (in `from`, lexed in `mode`) with every string literal re-serialised for `to`.
pub fn requote(sql: &str, from: Dialect, mode: LexMode, to: Target) -> Result<String, RequoteError> {
    let mut out = String::with_capacity(sql.len() + 8);
    let mut written = Vec::new();
    let mut copied = 0;
    let tokens: Vec<Token<'_>> = Lexer::new(sql, from).mode(mode).collect();
    for (i, t) in tokens.iter().enumerate() {
        let replacement = match t.kind {
            TokenKind::Unterminated => return Err(RequoteError::Unterminated(t.start)),
            TokenKind::String(StringKind::Bit | StringKind::Hex) => {
                check_bits(t)?;
                out.push_str(sql.get(copied..t.start).unwrap_or_default());
                copied = t.end();
                let start = out.len();
                out.push_str(t.text);
                written.push(Written { span: start..out.len(), value: None });
                continue;
            }
            TokenKind::String(StringKind::Unicode) if uescape_follows(tokens.get(i + 1..).unwrap_or_default()) => {
                return Err(RequoteError::Unsupported(t.start, "UESCAPE clause"));
            }
            TokenKind::String(_) => {
                out.push_str(sql.get(copied..t.start).unwrap_or_default());
                copied = t.end();
                let value = decode(t, from)?;
                if ends_in_word_or_quote(&out) {
                    out.push(' ');
                }
                let start = out.len();
                encode(&value, to, &mut out).map_err(|NulInText| RequoteError::Nul(t.start))?;
                written.push(Written { span: start..out.len(), value: Some(value) });
                continue;
            }
            TokenKind::QuotedIdent => Some(requote_ident(t, from, to)?),
            TokenKind::Comment => comment(t.text, from, to),
            _ => None,
        };
        if let Some(text) = replacement {
            out.push_str(sql.get(copied..t.start).unwrap_or_default());
            out.push_str(&text);
            copied = t.end();
        }
    }
    out.push_str(sql.get(copied..).unwrap_or_default());
    verify(&out, to, &written)?;
    Ok(out)
}

/// Lexes `out` as the backend will and checks that its string literals are exactly `written`.
fn verify(out: &str, to: Target, written: &[Written]) -> Result<(), RequoteError> {
    let mut next = written.iter().peekable();
    for t in Lexer::new(out, to.dialect()).mode(to.mode()) {
        let ours = next.peek().filter(|w| w.span.start < t.end());
        match (t.kind, ours) {
            (TokenKind::String(_), Some(w)) if w.span == t.span() => {
                let same = match &w.value {
                    Some(v) => decode(&t, to.dialect()).ok().as_ref() == Some(v),
                    None => true,
                };
                if !same {
                    return Err(RequoteError::Misread(t.start));
                }
                next.next();
            }
            (TokenKind::String(_) | TokenKind::Unterminated, _) | (_, Some(_)) => {
                return Err(RequoteError::Misread(t.start));
            }
            _ => {}
        }
    }
    match next.next() {
        Some(w) => Err(RequoteError::Misread(w.span.start)),
        None => Ok(()),
    }
}

/// A following literal must not fuse with a word (`E'..'`, `N'..'`) or a quote (`''`) before it.
fn ends_in_word_or_quote(out: &str) -> bool {
    out.bytes()
        .last()
        .is_some_and(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'$' | b'\'' | b'"') || b >= 0x80)
}

/// PostgreSQL `U&'..' UESCAPE '!'` changes the escape character; the bridge does not decode it.
fn uescape_follows(rest: &[Token<'_>]) -> bool {
    rest.iter().find(|t| t.kind != TokenKind::Comment).is_some_and(|t| t.is_word("UESCAPE"))
}

/// A bit or hex string passes as written only when its body is digits of its base (so the other
/// dialect ends it at the same quote).
fn check_bits(t: &Token<'_>) -> Result<(), RequoteError> {
    let body = t.text.get(2..t.text.len().saturating_sub(1)).unwrap_or_default();
    let hex = t.text.starts_with(['x', 'X']);
    let ok = body.bytes().all(|b| if hex { b.is_ascii_hexdigit() } else { b == b'0' || b == b'1' });
    if ok && t.text.len() >= 3 {
        Ok(())
    } else {
        Err(RequoteError::Unsupported(t.start, "bit or hex string"))
    }
}

/// `` `a` `` for MySQL, `"a"` for PostgreSQL; a quoted identifier already in the target's quotes
/// stays as written.
fn requote_ident(t: &Token<'_>, from: Dialect, to: Target) -> Result<String, RequoteError> {
    let (open, want) = match to.dialect() {
        Dialect::MySql => ('"', '`'),
        Dialect::Postgres => ('`', '"'),
    };
    if from == to.dialect() || !t.text.starts_with(open) {
        if t.text.starts_with(['U', 'u']) {
            return Err(RequoteError::Unsupported(t.start, "Unicode-escaped identifier"));
        }
        return Ok(t.text.to_owned());
    }
    let body = t.text.get(1..t.text.len().saturating_sub(1)).unwrap_or_default();
    let name = body.replace(&format!("{open}{open}"), &open.to_string());
    Ok(format!("{want}{}{want}", name.replace(want, &format!("{want}{want}"))))
}

/// A comment the target would end elsewhere: MySQL `#` becomes `--`, PostgreSQL `--x` gets the
/// space MySQL needs, and a block comment containing `/*` (PostgreSQL nests them, MySQL does
/// not) becomes a single space.
fn comment(text: &str, from: Dialect, to: Target) -> Option<String> {
    if from == to.dialect() {
        return None;
    }
    if let Some(rest) = text.strip_prefix('#') {
        return Some(format!("--{rest}"));
    }
    if let Some(rest) = text.strip_prefix("--") {
        return Some(format!("-- {rest}"));
    }
    let body = text.get(2..text.len().saturating_sub(2)).unwrap_or_default();
    body.contains("/*").then(|| " ".to_owned())
}

/// Writes `value` as a string literal `to` reads back exactly; `Err` for a NUL PostgreSQL text
/// cannot hold. PostgreSQL: `'..'`, or `E'..'` when it holds a backslash (the same under either
/// `standard_conforming_strings`). MySQL: `''` doubling, backslashes doubled unless the
/// connection runs with `NO_BACKSLASH_ESCAPES`.
pub fn encode(value: &str, to: Target, out: &mut String) -> Result<(), NulInText> {
    let backslashes = match to {
        Target::Postgres => value.contains('\\'),
        Target::MySql { no_backslash_escapes } => !no_backslash_escapes,
    };
    if to == Target::Postgres && value.contains('\0') {
        return Err(NulInText);
    }
    if to == Target::Postgres && backslashes {
        out.push('E');
    }
    out.push('\'');
    for c in value.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' if backslashes => out.push_str("\\\\"),
            '\0' if backslashes => out.push_str("\\0"),
            _ => out.push(c),
        }
    }
    out.push('\'');
    Ok(())
}

/// The value of a string literal token lexed in `dialect` (prefix, quotes and escapes removed).
pub fn decode(t: &Token<'_>, dialect: Dialect) -> Result<String, RequoteError> {
    let TokenKind::String(kind) = t.kind else { return Err(RequoteError::Unsupported(t.start, "token")) };
    if kind == StringKind::Dollar {
        let tag_end = t.text.get(1..).and_then(|r| r.find('$')).map_or(0, |n| n + 2);
        let body = t.text.get(tag_end..t.text.len().saturating_sub(tag_end)).unwrap_or_default();
        return no_nul(body.to_owned(), t.start);
    }
    let open = t.text.find(['\'', '"']).ok_or(RequoteError::Unsupported(t.start, "string"))?;
    check_prefix(t, open, dialect)?;
    let quote = t.text.as_bytes().get(open).copied().unwrap_or(b'\'');
    let body = t.text.get(open + 1..t.text.len().saturating_sub(1)).unwrap_or_default();
    let bytes = match (kind, dialect) {
        (StringKind::Escaped, Dialect::MySql) => unescape_mysql(body, quote),
        (StringKind::Escaped, Dialect::Postgres) => unescape_pg(body).ok_or(RequoteError::Encoding(t.start))?,
        (StringKind::Unicode, _) => unescape_unicode(body).ok_or(RequoteError::Encoding(t.start))?,
        _ => undouble(body, quote),
    };
    let value = String::from_utf8(bytes).map_err(|_| RequoteError::Encoding(t.start))?;
    if dialect == Dialect::Postgres {
        return no_nul(value, t.start);
    }
    Ok(value)
}

/// PostgreSQL text never holds NUL: a literal that decodes to one is an error there.
fn no_nul(value: String, at: usize) -> Result<String, RequoteError> {
    if value.contains('\0') {
        Err(RequoteError::Nul(at))
    } else {
        Ok(value)
    }
}

/// Prefixes that only mark a string (`E`, `N`, `U&`, a UTF-8 character set introducer) are
/// dropped; another introducer would change how the bytes are read.
fn check_prefix(t: &Token<'_>, open: usize, dialect: Dialect) -> Result<(), RequoteError> {
    let prefix = t.text.get(..open).unwrap_or_default().trim_end().to_ascii_lowercase();
    let ok = match prefix.as_str() {
        "" | "n" => true,
        "e" | "u&" => dialect == Dialect::Postgres,
        "_utf8" | "_utf8mb3" | "_utf8mb4" => dialect == Dialect::MySql,
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(RequoteError::Unsupported(t.start, "character set introducer"))
    }
}

fn undouble(body: &str, quote: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let mut bytes = body.bytes().peekable();
    while let Some(b) = bytes.next() {
        if b == quote && bytes.peek() == Some(&quote) {
            bytes.next();
        }
        out.push(b);
    }
    out
}

/// MySQL's escapes (`\0 \b \n \r \t \Z`, `\%` and `\_` keeping their backslash for LIKE, any
/// other `\c` meaning `c`) and quote doubling.
fn unescape_mysql(body: &str, quote: u8) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len());
    let mut chars = body.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('0') => out.push(0),
                Some('b') => out.push(8),
                Some('n') => out.push(b'\n'),
                Some('r') => out.push(b'\r'),
                Some('t') => out.push(b'\t'),
                Some('Z') => out.push(0x1a),
                Some(e @ ('%' | '_')) => out.extend_from_slice(&[b'\\', e as u8]),
                Some(e) => push_char(&mut out, e),
                None => out.push(b'\\'),
            }
            continue;
        }
        if c as u32 == u32::from(quote) && chars.peek() == Some(&c) {
            chars.next();
        }
        push_char(&mut out, c);
    }
    out
}

fn push_char(out: &mut Vec<u8>, c: char) {
    let mut buf = [0; 4];
    out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
}

/// PostgreSQL `E'..'` escapes (PostgreSQL manual 4.1.2.2): `\b \f \n \r \t`, octal `\ooo`, hex
/// `\xh[h]`, `\uXXXX`, `\UXXXXXXXX` (surrogate pairs joined), any other `\c` meaning `c`; quote
/// doubling. `None` for an invalid code point.
fn unescape_pg(body: &str) -> Option<Vec<u8>> {
    let b = body.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        i += 1;
        if c == b'\'' {
            i += usize::from(b.get(i) == Some(&b'\''));
            out.push(c);
            continue;
        }
        if c != b'\\' {
            out.push(c);
            continue;
        }
        let e = *b.get(i)?;
        i += 1;
        match e {
            b'b' => out.push(8),
            b'f' => out.push(12),
            b'n' => out.push(b'\n'),
            b'r' => out.push(b'\r'),
            b't' => out.push(b'\t'),
            b'0'..=b'7' => {
                let (v, n) = digits(b, i - 1, 3, 8);
                // `\400` and above wrap to a byte, as PostgreSQL does.
                out.push((v & 0xff) as u8);
                i = n;
            }
            b'x' if b.get(i).is_some_and(u8::is_ascii_hexdigit) => {
                let (v, n) = digits(b, i, 2, 16);
                out.push(v as u8);
                i = n;
            }
            b'u' | b'U' => {
                let len = if e == b'u' { 4 } else { 8 };
                let (cp, n) = digits(b, i, len, 16);
                if n != i + len {
                    return None;
                }
                i = n;
                let cp = if (0xd800..0xdc00).contains(&cp) {
                    let low = b.get(i..i + 2).filter(|p| p == b"\\u").map(|_| digits(b, i + 2, 4, 16));
                    let (lo, n) = low.filter(|(lo, n)| *n == i + 6 && (0xdc00..0xe000).contains(lo))?;
                    i = n;
                    0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00)
                } else {
                    cp
                };
                push_char(&mut out, char::from_u32(cp)?);
            }
            _ => out.push(e),
        }
    }
    Some(out)
}

/// Up to `max` digits of `radix` from `from`: their value and the index after them.
fn digits(b: &[u8], from: usize, max: usize, radix: u32) -> (u32, usize) {
    let mut v = 0u32;
    let mut i = from;
    while i < from + max {
        match b.get(i).and_then(|d| (*d as char).to_digit(radix)) {
            Some(d) => v = v * radix + d,
            None => break,
        }
        i += 1;
    }
    (v, i)
}

/// PostgreSQL `U&'..'` with the default escape: `\XXXX`, `\+XXXXXX`, `\\`; quote doubling.
fn unescape_unicode(body: &str) -> Option<Vec<u8>> {
    let b = body.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while let Some(&c) = b.get(i) {
        i += 1;
        match c {
            b'\'' => {
                i += usize::from(b.get(i) == Some(&b'\''));
                out.push(c);
            }
            b'\\' if b.get(i) == Some(&b'\\') => {
                i += 1;
                out.push(c);
            }
            b'\\' => {
                let (from, len) = if b.get(i) == Some(&b'+') { (i + 1, 6) } else { (i, 4) };
                let (cp, n) = digits(b, from, len, 16);
                if n != from + len {
                    return None;
                }
                i = n;
                push_char(&mut out, char::from_u32(cp)?);
            }
            _ => out.push(c),
        }
    }
    Some(out)
}

#[cfg(test)]
#[path = "requote_tests.rs"]
mod tests;
