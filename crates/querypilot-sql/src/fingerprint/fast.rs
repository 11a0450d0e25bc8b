//! The normalizer's own pass over the statements most traffic is made of (#39): one forward walk
//! over the bytes that reads the common tokens itself — whitespace, words, plain numbers, `'..'`
//! strings, `=`/`<`/`>` and punctuation — by byte offsets alone: a token is classified with the
//! lexer's byte tables and written straight into the output, never made into a [`Token`]. The
//! rest it asks the [`Lexer`] for, at the same offset, so every token is the one the lexer would
//! yield. The rules are [`super::Normalizer`]'s (the same spacing, sign, `NULL`/boolean and
//! keyword rules, from the same tables), so its output is byte for byte that pass's output.
//!
//! The output goes to a buffer on the stack, eight bytes a step (a word is loaded once, and that
//! load is lower-cased, looked up as a keyword and stored), and reaches the sink in one piece, so
//! the hash takes eight bytes a step rather than a call per token. Per pgbench SELECT a
//! `Token` per token, moved through `Result<Option<_>>` and three rule lookups, cost ~230
//! instructions a token.
//!
//! What needs the general pass's lookahead machinery — `IN`, `ARRAY` and `VALUES` lists, a MySQL
//! `/*! .. */` body — is handed over ([`Handover`]): the general pass continues from that token
//! with this pass's state, which is the state it would have had there itself.

use super::{
    keyword, keyword_of, literal_is_syntax, load_le, lowercase_word, spaced, word_bits, Before, Last, Normalizer,
};
use super::{Sink, Writer, KW_ARRAY, KW_IN, KW_SPACED, KW_VALUES, PREV_SIGN};
use crate::lexer::{is_ident_char, is_ident_start, is_op_char, is_space};
use crate::lexer::{Lexer, Token, TokenKind};
use crate::mode::LexMode;
use crate::Dialect;

/// What the own pass writes to besides a [`Sink`]'s calls: the normalized bytes as they are, and
/// the literal values it takes out without making tokens of them.
pub(crate) trait OwnSink<'a>: Sink<'a> {
    /// [`Sink::text`] of bytes cut between tokens of the input `str` (whole characters).
    fn bytes(&mut self, b: &[u8], fold: bool);
    /// A literal value (not a parameter) became `?`.
    fn value(&mut self);
}

/// Where the general pass takes over: lexing at `at`, after stepping through `first` (a token
/// this pass read but leaves to it), if any.
pub(super) struct Handover<'a> {
    at: usize,
    first: Option<Token<'a>>,
}

/// Bytes of normalized text kept before they go to the sink. Most statements fit whole; a longer
/// one goes in pieces, each cut between two tokens.
const BUF: usize = 256;
/// Room past the written bytes: text is stored eight bytes at a time.
const SLACK: usize = 8;

/// The first eight bytes of `null`, `true` and `false`, zero-padded, as [`Pass::word`] loads them.
const NULL: u64 = u32::from_le_bytes(*b"null") as u64;
const TRUE: u64 = u32::from_le_bytes(*b"true") as u64;
const FALSE: u64 = u32::from_le_bytes(*b"fals") as u64 | (b'e' as u64) << 32;

/// The pass over one text, writing to `sink`.
pub(super) struct Pass<'a, 's, S> {
    sql: &'a str,
    dialect: Dialect,
    mode: LexMode,
    sink: &'s mut S,
    /// Next byte to read.
    pos: usize,
    /// [`super::prev_bits`] of the last two significant tokens, most recent first.
    prev: [u8; 2],
    last: Last,
    /// The `;` before this offset are known to be followed by a statement (see `semicolon`).
    statement_after: usize,
    /// Normalized text not yet given to the sink: `out[..len]`.
    out: [u8; BUF],
    len: usize,
}

impl<'a, S: OwnSink<'a>> Writer<'a> for Pass<'a, '_, S> {
    /// Into the buffer; never muted (no collapsed rows here).
    #[inline(always)]
    fn emit(&mut self, s: &str, fold: bool, before: Before, after: Last) {
        if self.reserve(s.len(), before, after) {
            self.put_from(s.as_bytes(), 0, s.len(), fold);
        } else {
            self.sink.text(s, fold);
        }
    }

    #[inline(always)]
    fn shift(&mut self, bits: u8) {
        self.prev = [bits, self.prev[0]];
    }

    fn scalar(&mut self, sign: Option<Token<'a>>, t: Token<'a>) {
        self.sink.scalar(sign, t);
    }
}

impl<'a, 's, S: OwnSink<'a>> Pass<'a, 's, S> {
    pub(super) fn new(sql: &'a str, dialect: Dialect, mode: LexMode, sink: &'s mut S) -> Self {
        let (prev, last) = ([PREV_SIGN, 0], Last::Nothing);
        Pass { sql, dialect, mode, sink, pos: 0, prev, last, statement_after: 0, out: [0; BUF], len: 0 }
    }

    /// Normalizes the whole text; true when the general pass had to take over part of it.
    pub(super) fn run(mut self) -> bool {
        let handover = self.walk().err();
        self.flush();
        let Some(Handover { at, first }) = handover else { return false };
        let lex = Lexer::new(self.sql, self.dialect).mode(self.mode).starting_at(at);
        // No `VALUES` probe has run before the first list, so the budget is a fresh pass's.
        let mut general = Normalizer::over(lex, &mut *self.sink, self.sql.len().saturating_mul(2));
        (general.prev, general.last) = (self.prev, self.last);
        if let Some(t) = first {
            general.step(t);
        }
        general.run();
        true
    }

    fn walk(&mut self) -> Result<(), Handover<'a>> {
        let bytes = self.sql.as_bytes();
        loop {
            let mut p = self.pos;
            while bytes.get(p).is_some_and(|&b| is_space(b)) {
                p += 1;
            }
            self.pos = p;
            let Some(&b) = bytes.get(p) else { return Ok(()) };
            if self.own(b, p)? {
                continue;
            }
            match self.lexed_at(p) {
                Some(Some(t)) => {
                    self.pos = t.end();
                    self.step(t)?;
                }
                Some(None) => return Ok(()),
                None => return Err(Handover { at: p, first: None }),
            }
        }
    }

    fn at(&self, i: usize) -> u8 {
        self.sql.as_bytes().get(i).copied().unwrap_or(0)
    }

    /// Reads and writes the token starting with byte `b` at `start` when it is one this pass
    /// reads itself, and moves past it; `false` leaves it to the lexer. Each arm stops short of
    /// every case the lexer reads otherwise, and writes what [`super::spacing`] and
    /// [`super::prev_bits`] say of the token the lexer would have made.
    #[inline(always)]
    fn own(&mut self, b: u8, start: usize) -> Result<bool, Handover<'a>> {
        if is_ident_start(b) {
            return Ok(self.word(b, start));
        }
        let next = self.at(start + 1);
        let (before, after, bits) = match b {
            b'0'..=b'9' => return Ok(self.number(start)),
            b'\'' => return Ok(self.string(start)),
            b';' => return self.semicolon(start).map(|()| true),
            b'(' => (Before::AfterName, Last::Tight, PREV_SIGN),
            b')' => (Before::Tight, Last::Other, 0),
            b',' => (Before::Tight, Last::Other, PREV_SIGN),
            b'.' if !next.is_ascii_digit() => (Before::Tight, Last::Tight, 0),
            // Alone, these are one-byte operators in both dialects' operator rules.
            b'=' | b'<' | b'>' if !is_op_char(next) => (Before::Spaced, Last::Other, PREV_SIGN),
            _ => return Ok(false),
        };
        self.put_span(start, start + 1, false, before, after);
        self.shift(bits);
        self.pos = start + 1;
        Ok(true)
    }

    /// A word (or `NULL`, `TRUE`, `FALSE`) at `start`, which starts with `b`: its first eight
    /// bytes are loaded once, lower-cased, and serve the literal check, the keyword lookup and
    /// the output.
    #[inline(always)]
    fn word(&mut self, b: u8, start: usize) -> bool {
        // MySQL `_x` may be a character set introducer.
        if self.dialect == Dialect::MySql && b == b'_' {
            return false;
        }
        let end = self.run_of(start + 1, is_ident_char);
        // A quote or `&` right after the first letter may make a prefixed string.
        if end == start + 1 && matches!(self.at(end), b'\'' | b'&') {
            return false;
        }
        let bytes = self.sql.as_bytes();
        let n = end - start;
        let lower = lowercase_word(word_at(bytes, start));
        let head = if n >= 8 { lower } else { lower & ((1u64 << (n * 8)) - 1) };
        let literal = match (n, head) {
            (4, NULL) => TokenKind::Null,
            (4, TRUE) | (5, FALSE) => TokenKind::Bool,
            _ => TokenKind::Word,
        };
        match literal {
            TokenKind::Word => {
                let kw = keyword_of(head, bytes.get(start..end).unwrap_or_default());
                if kw & (KW_IN | KW_ARRAY | KW_VALUES) != 0 {
                    // Left to the lexer, whose token `step` hands over.
                    return false;
                }
                let after = if kw & KW_SPACED != 0 { Last::Other } else { Last::Word };
                self.put_word(lower, start, end, after);
                self.shift(word_bits(kw));
            }
            _ if literal_is_syntax(literal, self.prev) => {
                self.put_word(lower, start, end, Last::Other);
                self.shift(0);
            }
            _ => self.value(),
        }
        self.pos = end;
        true
    }

    /// A plain run of digits at `start`, as the lexer reads it: a value.
    #[inline(always)]
    fn number(&mut self, start: usize) -> bool {
        // Decimals, exponents, radix prefixes, `_` separators and MySQL's digit-led names all
        // continue with a `.` or a word character.
        let end = self.run_of(start, |c| c.is_ascii_digit());
        let next = self.at(end);
        if next == b'.' || is_ident_char(next) {
            return false;
        }
        self.value();
        self.pos = end;
        true
    }

    /// A literal value read by this pass: `?` in its place.
    #[inline(always)]
    fn value(&mut self) {
        self.sink.value();
        self.emit("?", false, Before::Spaced, Last::Other);
        self.shift(0);
    }

    /// End of the run of bytes from `p` that `ok` accepts.
    #[inline(always)]
    fn run_of(&self, p: usize, ok: impl Fn(u8) -> bool) -> usize {
        let rest = self.sql.as_bytes().get(p..).unwrap_or_default();
        p + rest.iter().position(|&c| !ok(c)).unwrap_or(rest.len())
    }

    /// A terminated `'..'` string at `start`, read as the lexer reads it in this mode: a value.
    fn string(&mut self, start: usize) -> bool {
        let backslash = match self.dialect {
            Dialect::MySql => !self.mode.no_backslash_escapes,
            Dialect::Postgres => self.mode.backslash_strings,
        };
        let bytes = self.sql.as_bytes();
        let mut p = start + 1;
        while let Some(&c) = bytes.get(p) {
            if backslash && c == b'\\' {
                p += 2;
            } else if c == b'\'' {
                if self.at(p + 1) != b'\'' {
                    self.value();
                    self.pos = p + 1;
                    return true;
                }
                p += 2;
            } else {
                p += 1;
            }
        }
        // Unterminated: the lexer's token.
        false
    }

    /// The lexer's token at `p`. A token that does not start there (after whitespace) came from
    /// inside a MySQL `/*! .. */`, whose open state the general pass keeps and this one does not:
    /// `None` then.
    fn lexed_at(&self, p: usize) -> Option<Option<Token<'a>>> {
        let Some(t) = Lexer::new(self.sql, self.dialect).mode(self.mode).starting_at(p).next() else {
            return Some(None);
        };
        let gap = self.sql.as_bytes().get(p..t.start)?;
        gap.iter().all(|&b| is_space(b)).then_some(Some(t))
    }

    /// The next token from `p` that is not a comment; `None` as [`Pass::lexed_at`].
    fn significant_at(&self, mut p: usize) -> Option<Option<Token<'a>>> {
        loop {
            match self.lexed_at(p)? {
                Some(t) if t.kind == TokenKind::Comment => p = t.end(),
                other => return Some(other),
            }
        }
    }

    /// [`super::Normalizer::step`] for the tokens the lexer read.
    fn step(&mut self, t: Token<'a>) -> Result<(), Handover<'a>> {
        let handover = Handover { at: t.end(), first: Some(t) };
        match t.kind {
            TokenKind::Word => {
                let kw = keyword(t.text);
                if kw & (KW_IN | KW_ARRAY | KW_VALUES) != 0 {
                    return Err(handover);
                }
                self.plain_as(t, kw);
            }
            TokenKind::Number | TokenKind::String(_) | TokenKind::Param => self.placeholder(None, t),
            TokenKind::Null | TokenKind::Bool if literal_is_syntax(t.kind, self.prev) => self.plain(t),
            TokenKind::Null | TokenKind::Bool => self.placeholder(None, t),
            TokenKind::Comment => {}
            TokenKind::Semicolon => self.semicolon(t.start)?,
            TokenKind::Operator if matches!(t.text, "-" | "+") && self.prev[0] & PREV_SIGN != 0 => {
                match self.significant_at(self.pos).ok_or(handover)? {
                    Some(n) if n.kind == TokenKind::Number => {
                        self.pos = n.end();
                        self.placeholder(Some(t), n);
                    }
                    _ => self.plain(t),
                }
            }
            TokenKind::Unterminated => {
                self.emit("/*unterminated*/", false, Before::Spaced, Last::Other);
                self.prev = [0, self.prev[0]];
                // It ran to the end, or (an empty `/*!` body) the lexer read the rest as nothing.
                self.pos = self.sql.len();
            }
            _ => self.plain(t),
        }
        Ok(())
    }

    /// The `;` at `start`: dropped with the rest of its run when nothing but `;` and comments
    /// follow it, written otherwise. The run is scanned once: its other `;` know a statement
    /// follows.
    fn semicolon(&mut self, start: usize) -> Result<(), Handover<'a>> {
        let end = start + 1;
        if start >= self.statement_after {
            // Most often the text's last byte, or followed by whitespace alone.
            if self.sql.as_bytes().get(end..).unwrap_or_default().iter().all(|&c| is_space(c)) {
                self.pos = self.sql.len();
                return Ok(());
            }
            let mut p = end;
            loop {
                let Some(next) = self.significant_at(p) else {
                    let first = self.sql.get(start..end).map(|text| Token { kind: TokenKind::Semicolon, text, start });
                    return Err(Handover { at: end, first });
                };
                match next {
                    Some(s) if s.kind == TokenKind::Semicolon => p = s.end(),
                    Some(s) => {
                        self.statement_after = s.start;
                        break;
                    }
                    None => {
                        self.pos = self.sql.len();
                        return Ok(());
                    }
                }
            }
        }
        self.put_span(start, end, false, Before::Spaced, Last::Other);
        self.shift(PREV_SIGN);
        self.pos = end;
        Ok(())
    }

    /// Makes room for `n` bytes of text sitting `before` against what was written last, and
    /// writes the space it needs; `false` when the text is too long for the buffer and goes to
    /// the sink itself, after the space written there.
    #[inline(always)]
    fn reserve(&mut self, n: usize, before: Before, after: Last) -> bool {
        let space = spaced(before, self.last);
        self.last = after;
        let need = n + 1 + SLACK;
        if self.len + need > BUF {
            self.flush();
            if need > BUF {
                if space {
                    self.sink.space();
                }
                return false;
            }
        }
        if space {
            if let Some(o) = self.out.get_mut(self.len) {
                *o = b' ';
                self.len += 1;
            }
        }
        true
    }

    /// Writes the input's bytes `start..end`.
    #[inline(always)]
    fn put_span(&mut self, start: usize, end: usize, fold: bool, before: Before, after: Last) {
        let bytes = self.sql.as_bytes();
        if self.reserve(end - start, before, after) {
            self.put_from(bytes, start, end - start, fold);
        } else {
            self.sink.bytes(bytes.get(start..end).unwrap_or_default(), fold);
        }
    }

    /// Writes the word `start..end`, whose first eight bytes (and what follows it, if it is
    /// shorter) are `lower`, lower-cased.
    #[inline(always)]
    fn put_word(&mut self, lower: u64, start: usize, end: usize, after: Last) {
        let n = end - start;
        if !self.reserve(n, Before::Spaced, after) {
            self.sink.bytes(self.sql.as_bytes().get(start..end).unwrap_or_default(), true);
            return;
        }
        if let Some(to) = self.out.get_mut(self.len..self.len + 8) {
            to.copy_from_slice(&lower.to_le_bytes());
        }
        if n > 8 {
            self.len += 8;
            self.put_from(self.sql.as_bytes(), start + 8, n - 8, true);
        } else {
            self.len += n;
        }
    }

    /// Appends the `n` bytes of `src` from `from` (lower-cased when `fold`), eight at a time; the
    /// caller made room, slack included. Bytes past them may be stored too, in the slack.
    #[inline(always)]
    fn put_from(&mut self, src: &[u8], from: usize, n: usize, fold: bool) {
        let mut i = 0;
        while i < n {
            let w = match src.get(from + i..from + i + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) {
                Some(w) => u64::from_le_bytes(w),
                None => load_le(src.get(from + i..from + n).unwrap_or_default()),
            };
            let w = if fold { lowercase_word(w) } else { w };
            let at = self.len + i;
            if let Some(to) = self.out.get_mut(at..at + 8) {
                to.copy_from_slice(&w.to_le_bytes());
            }
            i += 8;
        }
        self.len += n;
    }

    /// Gives the buffered text to the sink.
    fn flush(&mut self) {
        if self.len > 0 {
            if let Some(b) = self.out.get(..self.len) {
                self.sink.bytes(b, false);
            }
            self.len = 0;
        }
    }
}

/// The eight bytes of `b` from `at` as a little-endian word; fewer when the text ends first
/// (the rest zero).
#[inline(always)]
fn word_at(b: &[u8], at: usize) -> u64 {
    match b.get(at..at + 8).and_then(|w| <[u8; 8]>::try_from(w).ok()) {
        Some(w) => u64::from_le_bytes(w),
        None => load_le(b.get(at..).unwrap_or_default()),
    }
}
