//! The normalizer's own pass over the statements most traffic is made of (#39): one forward walk
//! over the bytes that reads the common tokens itself — whitespace, words, plain numbers, `'..'`
//! strings, `=`/`<`/`>` and punctuation, one byte-class lookup each — and asks the [`Lexer`] only
//! for the rest, at the same offset, so every token is the one the lexer would yield. The rules
//! are [`super::Normalizer`]'s, applied to the same tokens with the same helpers, so its output is
//! byte for byte that pass's output. The output goes to a buffer on the stack (a word lower-cased
//! eight bytes at a time, a literal replaced by `?` in place) and reaches the sink in one piece, so
//! the hash takes eight bytes a step rather than a call per token.
//!
//! What needs the general pass's lookahead machinery — `IN`, `ARRAY` and `VALUES` lists, a MySQL
//! `/*! .. */` body — is handed over ([`Handover`]): the general pass continues from that token
//! with this pass's state, which is the state it would have had there itself.

use super::{keyword, literal_is_syntax, load_le, lowercase_word, spaced, Before, Last, Normalizer, Sink, Writer};
use super::{KW_ARRAY, KW_IN, KW_VALUES, PREV_SIGN};
use crate::lexer::{is_ident_char, is_ident_start, is_op_char, is_space, literal_word_kind};
use crate::lexer::{Lexer, StringKind, Token, TokenKind};
use crate::mode::LexMode;
use crate::Dialect;

/// Where the general pass takes over: lexing at `at`, after stepping through `first` (a token
/// this pass read but leaves to it), if any.
pub(super) struct Handover<'a> {
    at: usize,
    first: Option<Token<'a>>,
}

/// Bytes of normalized text kept before they go to the sink. Most statements fit whole; a longer
/// one goes in pieces, each cut between two tokens.
const BUF: usize = 256;
/// Room past the written bytes: a word is lower-cased and stored eight bytes at a time.
const SLACK: usize = 8;

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

impl<'a, S: Sink<'a>> Writer<'a> for Pass<'a, '_, S> {
    /// Into the buffer; never muted (no collapsed rows here).
    #[inline(always)]
    fn emit(&mut self, s: &str, fold: bool, before: Before, after: Last) {
        let space = spaced(before, self.last);
        self.last = after;
        let need = s.len() + 1 + SLACK;
        if self.len + need > BUF {
            self.flush();
            if need > BUF {
                if space {
                    self.sink.space();
                }
                self.sink.text(s, fold);
                return;
            }
        }
        if space {
            self.put(b" ");
        }
        if fold {
            self.put_folded(s.as_bytes());
        } else {
            self.put(s.as_bytes());
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

impl<'a, 's, S: Sink<'a>> Pass<'a, 's, S> {
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
        while let Some(t) = self.next_token()? {
            self.pos = t.end();
            self.step(t)?;
        }
        Ok(())
    }

    fn at(&self, i: usize) -> u8 {
        self.sql.as_bytes().get(i).copied().unwrap_or(0)
    }

    fn token(&self, kind: TokenKind, start: usize, end: usize) -> Option<Token<'a>> {
        Some(Token { kind, text: self.sql.get(start..end)?, start })
    }

    /// The token at `self.pos` (whitespace skipped), comments included.
    #[inline(always)]
    fn next_token(&mut self) -> Result<Option<Token<'a>>, Handover<'a>> {
        let bytes = self.sql.as_bytes();
        while bytes.get(self.pos).is_some_and(|&b| is_space(b)) {
            self.pos += 1;
        }
        let Some(&b) = bytes.get(self.pos) else { return Ok(None) };
        match self.own_token(b, self.pos) {
            Some(t) => Ok(Some(t)),
            None => self.lexed_at(self.pos).ok_or(Handover { at: self.pos, first: None }),
        }
    }

    /// The token starting with byte `b` at `start` when it is one this pass reads itself; `None`
    /// leaves it to the lexer. Each arm stops short of every case the lexer reads otherwise.
    #[inline(always)]
    fn own_token(&self, b: u8, start: usize) -> Option<Token<'a>> {
        let mysql = self.dialect == Dialect::MySql;
        if is_ident_start(b) {
            // A quote or `&` after the first letter may make a prefixed string; MySQL `_x` may
            // be a character set introducer.
            if matches!(self.at(start + 1), b'\'' | b'&') || (mysql && b == b'_') {
                return None;
            }
            let end = self.run_of(start + 1, is_ident_char);
            let kind = literal_word_kind(self.sql.as_bytes().get(start..end)?);
            return self.token(kind, start, end);
        }
        match b {
            b'0'..=b'9' => {
                // Decimals, exponents, radix prefixes, `_` separators and MySQL's digit-led
                // names all continue with a `.` or a word character.
                let end = self.run_of(start, |c| c.is_ascii_digit());
                let next = self.at(end);
                if next == b'.' || is_ident_char(next) {
                    return None;
                }
                self.token(TokenKind::Number, start, end)
            }
            b'\'' => self.string(start),
            b'(' => self.token(TokenKind::LParen, start, start + 1),
            b')' => self.token(TokenKind::RParen, start, start + 1),
            b',' => self.token(TokenKind::Comma, start, start + 1),
            b';' => self.token(TokenKind::Semicolon, start, start + 1),
            b'.' if !self.at(start + 1).is_ascii_digit() => self.token(TokenKind::Dot, start, start + 1),
            // Alone, these are one-byte operators in both dialects' operator rules.
            b'=' | b'<' | b'>' if !is_op_char(self.at(start + 1)) => self.token(TokenKind::Operator, start, start + 1),
            _ => None,
        }
    }

    /// End of the run of bytes from `p` that `ok` accepts.
    #[inline(always)]
    fn run_of(&self, p: usize, ok: impl Fn(u8) -> bool) -> usize {
        let rest = self.sql.as_bytes().get(p..).unwrap_or_default();
        p + rest.iter().position(|&c| !ok(c)).unwrap_or(rest.len())
    }

    /// A terminated `'..'` string at `start`, read as the lexer reads it in this mode.
    fn string(&self, start: usize) -> Option<Token<'a>> {
        let kind = match self.dialect {
            Dialect::MySql if self.mode.no_backslash_escapes => StringKind::Standard,
            Dialect::MySql => StringKind::Escaped,
            Dialect::Postgres if self.mode.backslash_strings => StringKind::Escaped,
            Dialect::Postgres => StringKind::Standard,
        };
        let backslash = kind == StringKind::Escaped;
        let bytes = self.sql.as_bytes();
        let mut p = start + 1;
        while let Some(&c) = bytes.get(p) {
            if backslash && c == b'\\' {
                p += 2;
            } else if c == b'\'' {
                if self.at(p + 1) != b'\'' {
                    return self.token(TokenKind::String(kind), start, p + 1);
                }
                p += 2;
            } else {
                p += 1;
            }
        }
        // Unterminated: the lexer's token.
        None
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

    /// [`super::Normalizer::step`] for the tokens this pass takes on.
    #[inline(always)]
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
            TokenKind::Semicolon => self.semicolon(t).ok_or(handover)?,
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

    /// A `;`: dropped with the rest of its run when nothing but `;` and comments follow it,
    /// written otherwise. The run is scanned once: its other `;` know a statement follows.
    fn semicolon(&mut self, t: Token<'a>) -> Option<()> {
        if t.start >= self.statement_after {
            let mut p = self.pos;
            loop {
                match self.significant_at(p)? {
                    Some(s) if s.kind == TokenKind::Semicolon => p = s.end(),
                    Some(s) => {
                        self.statement_after = s.start;
                        break;
                    }
                    None => {
                        self.pos = self.sql.len();
                        return Some(());
                    }
                }
            }
        }
        self.plain(t);
        Some(())
    }

    /// Appends `b`; the caller made room.
    #[inline(always)]
    fn put(&mut self, b: &[u8]) {
        if let Some(to) = self.out.get_mut(self.len..self.len + b.len()) {
            to.copy_from_slice(b);
            self.len += b.len();
        }
    }

    /// Appends `b` lower-cased (ASCII), eight bytes at a time; the caller made room, slack included.
    #[inline(always)]
    fn put_folded(&mut self, b: &[u8]) {
        for (i, chunk) in b.chunks(8).enumerate() {
            let at = self.len + i * 8;
            if let Some(to) = self.out.get_mut(at..at + 8) {
                to.copy_from_slice(&lowercase_word(load_le(chunk)).to_le_bytes());
            }
        }
        self.len += b.len();
    }

    /// Gives the buffered text to the sink. It was cut between tokens, which sit next to ASCII
    /// bytes, so it is whole characters.
    fn flush(&mut self) {
        if let Some(text) = self.out.get(..self.len).and_then(|b| std::str::from_utf8(b).ok()) {
            self.sink.text(text, false);
        }
        self.len = 0;
    }
}
