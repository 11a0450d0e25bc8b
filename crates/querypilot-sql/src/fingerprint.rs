//! Statement fingerprints: the shape of a statement with its literal values taken out, hashed to
//! a [`Fingerprint`] with a fixed-seed hash so it is the same in every process, core and run.
//!
//! One lexer pass, no allocation on the hash path. Normalization: literals (numbers, strings,
//! booleans, `NULL`) and bind parameters become `?`; a sign directly before a number where a value
//! is expected belongs to the literal; `IN (..)` and `ARRAY[..]` lists of literals collapse to one
//! element; `VALUES` rows of one shape collapse to one row; comments are dropped; whitespace is
//! folded; unquoted words are lower-cased; trailing `;` are dropped. `NULL`/booleans after `IS`
//! (and `NULL` after `NOT`) are syntax, not values, and are kept.
//!
//! The [`normalize`]d text is exactly the byte stream that is hashed, so
//! `fingerprint(sql) == hash_normalized(&normalize(sql))` always holds.
//! Depends on [`super::lexer`] and, for [`fingerprint_ast`], `sqlparser`.

use super::lexer::{Lexer, Token, TokenKind};
use super::mode::LexMode;
use super::Dialect;
use fast::OwnSink;
use std::ops::ControlFlow;

mod fast;

/// A statement's shape hash. Equal for statements that differ only in literal values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Fingerprint(pub u64);

impl std::fmt::Display for Fingerprint {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

/// Fingerprint of `sql`: one lexer pass hashed without allocating.
pub fn fingerprint(sql: &str, dialect: Dialect) -> Fingerprint {
    hashed(sql, dialect, LexMode::default()).finish()
}

/// [`fingerprint`] of `sql` lexed as a session in `mode` would have its server read it (#19):
/// the same text may be other tokens in another mode, so it is another shape.
pub fn fingerprint_in(sql: &str, dialect: Dialect, mode: LexMode) -> Fingerprint {
    hashed(sql, dialect, mode).finish()
}

/// [`fingerprint_in`], and whether the pass took a literal value out of the text (a bind
/// parameter is not one). A text without values is the kind sent again byte for byte (a
/// parameterized statement, `BEGIN`), so a caller may remember its fingerprint by the text.
pub fn fingerprint_noting_values(sql: &str, dialect: Dialect, mode: LexMode) -> (Fingerprint, bool) {
    let sink = hashed(sql, dialect, mode);
    (sink.finish(), sink.values)
}

/// [`normalize`] in a session's `mode`.
pub fn normalize_in(sql: &str, dialect: Dialect, mode: LexMode) -> String {
    let mut sink = TextSink(String::with_capacity(sql.len()));
    fast::Pass::new(sql, dialect, mode, &mut sink).run();
    sink.0
}

/// The normalized text whose hash is [`fingerprint`]; for digests and the admin API.
pub fn normalize(sql: &str, dialect: Dialect) -> String {
    normalize_in(sql, dialect, LexMode::default())
}

/// The normalized text of `sql` hashed, by the normalizer's own pass ([`fast`]).
fn hashed(sql: &str, dialect: Dialect, mode: LexMode) -> HashSink {
    let mut sink = HashSink::default();
    fast::Pass::new(sql, dialect, mode, &mut sink).run();
    sink
}

/// Hash of already normalized text (the output of [`normalize`] or of [`fingerprint_ast`]'s printer).
pub fn hash_normalized(text: &str) -> Fingerprint {
    let mut sink = HashSink::default();
    sink.text(text, false);
    sink.finish()
}

/// Fingerprint through the sqlparser AST: every literal value becomes a placeholder, `IN` lists of
/// placeholders shrink to one element, and the printed statement is hashed with [`hash_normalized`].
///
/// Only a single `SELECT` (query) statement is covered; anything else, or text sqlparser cannot
/// parse or [`crate::parse`] refuses to, gives `None`. The value differs from [`fingerprint`] of the same text (it hashes the
/// AST printer's output), so the two strategies must not share one cache.
pub fn fingerprint_ast(sql: &str, dialect: Dialect) -> Option<Fingerprint> {
    use sqlparser::ast::{visit_expressions_mut, Expr, Statement, UnaryOperator, Value};
    // Bounded like analysis: this runs on every statement under the `ast`/`auto` strategies.
    let tokens = crate::parse::tokenize(sql, dialect).ok()?;
    let mut statements = crate::parse::parse_tokens(tokens, dialect).ok()?;
    if statements.len() != 1 {
        return None;
    }
    let mut statement = statements.pop()?;
    if !matches!(statement, Statement::Query(_)) {
        return None;
    }
    let is_placeholder = |e: &Expr| matches!(e, Expr::Value(v) if matches!(v.value, Value::Placeholder(_)));
    // Post-order: children first, so a literal is already a placeholder when its parent is seen.
    let _ = visit_expressions_mut(&mut statement, |expr: &mut Expr| {
        match expr {
            Expr::Value(v) => v.value = Value::Placeholder("?".to_owned()),
            Expr::UnaryOp { op: UnaryOperator::Minus | UnaryOperator::Plus, expr: inner } if is_placeholder(inner) => {
                *expr = Expr::Value(Value::Placeholder("?".to_owned()).with_empty_span());
            }
            Expr::InList { list, .. } if !list.is_empty() && list.iter().all(is_placeholder) => list.truncate(1),
            _ => {}
        }
        ControlFlow::<()>::Continue(())
    });
    Some(hash_normalized(&statement.to_string()))
}

/// Receives the normalized stream. `text` is hashed or appended; the literal callbacks let
/// [`super::template`] collect slots from the very pass that computes the fingerprint.
pub(crate) trait Sink<'a> {
    /// Append normalized text; `fold` asks for ASCII lower-casing.
    fn text(&mut self, s: &str, fold: bool);
    /// Append the one space between two tokens: [`Sink::text`] of `" "`, which a sink may do
    /// more cheaply (most tokens are written after one).
    fn space(&mut self) {
        self.text(" ", false);
    }
    /// A literal or parameter that became `?`, with the sign token folded into it, if any.
    fn scalar(&mut self, _sign: Option<Token<'a>>, _tok: Token<'a>) {}
    /// Start (`true`) or end (`false`) of a collapsed list; scalars in between are its items.
    fn list(&mut self, _open: bool) {}
}

impl<'a, S: Sink<'a> + ?Sized> Sink<'a> for &mut S {
    fn text(&mut self, s: &str, fold: bool) {
        (**self).text(s, fold);
    }
    fn space(&mut self) {
        (**self).space();
    }
    fn scalar(&mut self, sign: Option<Token<'a>>, tok: Token<'a>) {
        (**self).scalar(sign, tok);
    }
    fn list(&mut self, open: bool) {
        (**self).list(open);
    }
}

/// Streaming 64-bit hash: 8 bytes at a time through a multiply-rotate step that is a bijection of
/// the state for each word (no state collapse), then a murmur3 finalizer. Fixed constants only.
#[derive(Debug, Clone)]
pub(crate) struct HashSink {
    acc: u64,
    buf: u64,
    nbuf: u32,
    len: u64,
    /// A literal value (not a parameter) became `?`; not part of the hash.
    values: bool,
}

const SEED: u64 = 0x243F_6A88_85A3_08D3;
const K1: u64 = 0x9E37_79B9_7F4A_7C15;
const K2: u64 = 0xC2B2_AE3D_27D4_EB4F;

impl Default for HashSink {
    fn default() -> Self {
        HashSink { acc: SEED, buf: 0, nbuf: 0, len: 0, values: false }
    }
}

impl HashSink {
    #[inline]
    fn absorb(&mut self, w: u64) {
        self.acc = (self.acc ^ w).wrapping_mul(K1).rotate_left(29).wrapping_mul(K2);
    }

    /// The hash of everything written so far.
    pub(crate) fn finish(&self) -> Fingerprint {
        let mut h = self.clone();
        h.absorb(h.buf ^ u64::from(h.nbuf) << 59);
        let mut x = h.acc ^ h.len;
        x ^= x >> 33;
        x = x.wrapping_mul(0xff51_afd7_ed55_8ccd);
        x ^= x >> 33;
        x = x.wrapping_mul(0xc4ce_b9fe_1a85_ec53);
        x ^= x >> 33;
        Fingerprint(x)
    }
}

impl HashSink {
    /// Appends the `n` (1..=8) low bytes of `w` (its other bytes zero): the buffer and `w`
    /// side by side in one 128-bit value, whose low eight bytes are absorbed once they are full.
    #[inline]
    fn push(&mut self, w: u64, n: u32) {
        let wide = u128::from(self.buf) | u128::from(w) << (self.nbuf * 8);
        self.nbuf += n;
        if self.nbuf >= 8 {
            self.absorb(wide as u64);
            self.buf = (wide >> 64) as u64;
            self.nbuf -= 8;
        } else {
            self.buf = wide as u64;
        }
    }
}

impl<'a> Sink<'a> for HashSink {
    fn scalar(&mut self, _sign: Option<Token<'a>>, tok: Token<'a>) {
        self.values |= !matches!(tok.kind, TokenKind::Param);
    }

    #[inline]
    fn space(&mut self) {
        self.len = self.len.wrapping_add(1);
        self.push(u64::from(b' '), 1);
    }

    #[inline]
    fn text(&mut self, s: &str, fold: bool) {
        self.bytes(s.as_bytes(), fold);
    }
}

impl<'a> fast::OwnSink<'a> for HashSink {
    /// Only hashed: the bytes never become a `str`, so they need no UTF-8 check (they are whole
    /// characters of the input `str` anyway).
    #[inline]
    fn bytes(&mut self, b: &[u8], fold: bool) {
        self.len = self.len.wrapping_add(b.len() as u64);
        let mut rest = b;
        if self.nbuf == 0 {
            // Nothing buffered (the buffer is zero then): whole words go straight in, as `push`
            // would put them (the normalizer's own pass hands over its text so, in one piece).
            let mut words = rest.chunks_exact(8);
            for word in &mut words {
                let w = word.try_into().map_or(0, u64::from_le_bytes);
                self.absorb(if fold { lowercase_word(w) } else { w });
            }
            rest = words.remainder();
        }
        // What a byte at a time would do, eight bytes at a time (lower-cased together).
        for chunk in rest.chunks(8) {
            let w = load_le(chunk);
            self.push(if fold { lowercase_word(w) } else { w }, chunk.len() as u32);
        }
    }

    fn value(&mut self) {
        self.values = true;
    }
}

/// The bytes of `b` (at most eight) as a little-endian word, the rest zero. Two loads that may
/// overlap (an overlapped byte is the same byte both times, so `|` keeps it). The hash and
/// [`spaced_keyword`] read words so: a byte-at-a-time fold cost the hash ~7 instructions more a
/// byte of every statement (#39: 4,788 -> 4,410 a pgbench SELECT).
#[inline]
fn load_le(b: &[u8]) -> u64 {
    let n = b.len();
    let u32_at = |i: usize| b.get(i..i + 4).and_then(|s| <[u8; 4]>::try_from(s).ok()).map_or(0, u32::from_le_bytes);
    let u16_at = |i: usize| b.get(i..i + 2).and_then(|s| <[u8; 2]>::try_from(s).ok()).map_or(0, u16::from_le_bytes);
    if let Ok(all) = <[u8; 8]>::try_from(b) {
        u64::from_le_bytes(all)
    } else if n >= 4 {
        u64::from(u32_at(0)) | u64::from(u32_at(n - 4)) << ((n - 4) * 8)
    } else if n >= 2 {
        u64::from(u16_at(0)) | u64::from(u16_at(n - 2)) << ((n - 2) * 8)
    } else {
        b.first().map_or(0, |&x| u64::from(x))
    }
}

/// `to_ascii_lowercase` of each of the eight bytes of `w` at once: an ASCII upper-case letter
/// gets its 0x20 bit, every other byte (non-ASCII included) stays.
fn lowercase_word(w: u64) -> u64 {
    const LOW7: u64 = 0x7f7f_7f7f_7f7f_7f7f;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    // Per byte, on its low seven bits (no carry crosses bytes): the high bit says >= b'A', and
    // in the second sum > b'Z'.
    let low = w & LOW7;
    let from_a = low + 0x3f3f_3f3f_3f3f_3f3f;
    let past_z = low + 0x2525_2525_2525_2525;
    let upper = from_a & !past_z & !w & HIGH;
    w | (upper >> 2)
}

struct TextSink(String);

impl Sink<'_> for TextSink {
    fn text(&mut self, s: &str, fold: bool) {
        if fold {
            self.0.extend(s.chars().map(|c| c.to_ascii_lowercase()));
        } else {
            self.0.push_str(s);
        }
    }
}

impl fast::OwnSink<'_> for TextSink {
    /// Checked here, where the bytes become text (for the admin API, not on the hash path).
    fn bytes(&mut self, b: &[u8], fold: bool) {
        self.text(&String::from_utf8_lossy(b), fold);
    }

    fn value(&mut self) {}
}

/// Marker after the one element a collapsed list keeps; comments never survive normalization, so
/// no input can produce it.
const LIST_MARK: &str = "/*, ... */";

/// What was last written, for the spacing rule.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Last {
    Nothing,
    /// `(`, `[`, `.`, `::`: no space after.
    Tight,
    /// A word, for the "no space before a call's `(`" rule.
    Word,
    Other,
}

/// Words after which `-`/`+` starts a signed number rather than a subtraction.
const VALUE_KEYWORDS: &[&str] = &[
    "select", "where", "and", "or", "not", "then", "else", "when", "between", "like", "limit", "offset", "return",
    "by", "having", "on", "case", "in", "distinct", "all", "any", "some", "escape", "interval",
];

/// Words that keep a space before a following `(` (they are syntax, not function names).
const SPACED_KEYWORDS: &[&str] = &[
    "in",
    "values",
    "and",
    "or",
    "not",
    "exists",
    "as",
    "on",
    "from",
    "join",
    "where",
    "select",
    "using",
    "when",
    "then",
    "else",
    "into",
    "set",
    "over",
    "by",
    "lateral",
    "with",
    "union",
    "except",
    "intersect",
    "having",
    "returning",
    "is",
    "like",
    "between",
    "case",
    "table",
];

/// What a word is to the normalizer, bits of [`keyword`]'s answer: which list it is on and which
/// of the words `step` and the sign and `NULL` rules look for it is.
const KW_SPACED: u8 = 1;
const KW_VALUE: u8 = 2;
const KW_IN: u8 = 4;
const KW_ARRAY: u8 = 8;
const KW_VALUES: u8 = 16;
const KW_IS: u8 = 32;
const KW_NOT: u8 = 64;

/// Every word with a role, and its bits: [`SPACED_KEYWORDS`], [`VALUE_KEYWORDS`] and the words
/// `step` and the `NULL`/boolean rule compare with.
const ROLES: &[(&[&str], u8)] = &[
    (SPACED_KEYWORDS, KW_SPACED),
    (VALUE_KEYWORDS, KW_VALUE),
    (&["in"], KW_IN),
    (&["array"], KW_ARRAY),
    (&["values"], KW_VALUES),
    (&["is"], KW_IS),
    (&["not"], KW_NOT),
];

/// Most words with a role sharing a first letter (`i`: in, interval, into, intersect, is).
const KEYWORDS_PER_LETTER: usize = 5;

/// A word with a role as [`keyword`] compares it: its first eight bytes as one little-endian
/// word (zero-padded), its ninth byte (0: none), its length (0: no entry) and its role bits.
#[derive(Clone, Copy)]
struct Packed {
    head: u64,
    ninth: u8,
    len: u8,
    roles: u8,
}

const NO_ENTRY: Packed = Packed { head: 0, ninth: 0, len: 0, roles: 0 };

const fn pack(k: &str, roles: u8) -> Packed {
    let b = k.as_bytes();
    let mut head = 0u64;
    let mut i = 0;
    while i < b.len() && i < 8 {
        head |= (b[i] as u64) << (i * 8);
        i += 1;
    }
    Packed { head, ninth: if b.len() > 8 { b[8] } else { 0 }, len: b.len() as u8, roles }
}

/// Per first letter (`a`..`z`): the words of [`ROLES`] that start with it, each once with the
/// union of its bits. Every word the normalizer meets asks [`keyword`] once, which compares it,
/// loaded as one word-sized value, with at most five entries of its own first letter.
const KEYWORDS_BY_LETTER: [[Packed; KEYWORDS_PER_LETTER]; 26] = {
    let mut table = [[NO_ENTRY; KEYWORDS_PER_LETTER]; 26];
    let mut r = 0;
    while r < ROLES.len() {
        let (words, bits) = ROLES[r];
        let mut i = 0;
        while i < words.len() {
            let p = pack(words[i], bits);
            let letter = (words[i].as_bytes()[0] - b'a') as usize;
            let mut slot = 0;
            while table[letter][slot].len != 0
                && (table[letter][slot].head != p.head || table[letter][slot].ninth != p.ninth)
            {
                slot += 1;
            }
            table[letter][slot] = Packed { roles: table[letter][slot].roles | bits, ..p };
            i += 1;
        }
        r += 1;
    }
    table
};

/// The shortest and the longest word of [`ROLES`].
const KEYWORD_MIN_LEN: usize = 2;
const KEYWORD_MAX_LEN: usize = 9;
// [`Packed`] holds nine bytes of an entry, and an empty slot must match no word.
const _: () = assert!(
    KEYWORD_MIN_LEN > 0 && KEYWORD_MAX_LEN <= 9 && {
        let mut ok = true;
        let mut r = 0;
        while r < ROLES.len() {
            let mut i = 0;
            while i < ROLES[r].0.len() {
                let l = ROLES[r].0[i].len();
                ok &= l >= KEYWORD_MIN_LEN && l <= KEYWORD_MAX_LEN;
                i += 1;
            }
            r += 1;
        }
        ok
    }
);

/// The role bits of the unquoted word `text` (0 for most words: names).
#[inline(always)]
fn keyword(text: &str) -> u8 {
    let text = text.as_bytes();
    keyword_of(lowercase_word(load_le(text.get(..8).unwrap_or(text))), text)
}

/// [`keyword`] of the word `text` whose first eight bytes, lower-cased and zero-padded, are
/// `head` (the own pass has them loaded already).
#[inline(always)]
fn keyword_of(head: u64, text: &[u8]) -> u8 {
    // Most words are names longer or shorter than every keyword: settled by length.
    if !(KEYWORD_MIN_LEN..=KEYWORD_MAX_LEN).contains(&text.len()) {
        return 0;
    }
    let letter = (head as u8).wrapping_sub(b'a');
    let Some(entries) = KEYWORDS_BY_LETTER.get(usize::from(letter)) else { return 0 };
    let ninth = text.get(8).map_or(0, u8::to_ascii_lowercase);
    entries
        .iter()
        .find(|e| usize::from(e.len) == text.len() && e.head == head && e.ninth == ninth)
        .map_or(0, |e| e.roles)
}

/// The role bits of token `t`: those of [`keyword`] for an unquoted word, none otherwise.
fn roles(t: &Token<'_>) -> u8 {
    if matches!(t.kind, TokenKind::Word) {
        keyword(t.text)
    } else {
        0
    }
}

/// How a token sits against its neighbours in the normalized text.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Before {
    /// A space after anything but `Nothing`/`Tight`.
    Spaced,
    /// No space before: `)`, `,`, `.`, `]`, `::`.
    Tight,
    /// No space after a name (a call's `(`, a subscript's `[`), a space otherwise.
    AfterName,
}

/// The spacing rule's view of `t` (whose [`roles`] are `kw`): what goes before it, and what it
/// leaves for the token after it. One `match` on the kind; only `[`, `]` and `::` need the text.
#[inline(always)]
fn spacing(t: &Token<'_>, kw: u8) -> (Before, Last) {
    match t.kind {
        TokenKind::Word if kw & KW_SPACED != 0 => (Before::Spaced, Last::Other),
        TokenKind::Word | TokenKind::QuotedIdent => (Before::Spaced, Last::Word),
        TokenKind::RParen | TokenKind::Comma => (Before::Tight, Last::Other),
        TokenKind::Dot => (Before::Tight, Last::Tight),
        TokenKind::LParen => (Before::AfterName, Last::Tight),
        TokenKind::Punct => match t.text.as_bytes() {
            b"[" => (Before::AfterName, Last::Tight),
            b"]" => (Before::Tight, Last::Other),
            _ => (Before::Spaced, Last::Other),
        },
        TokenKind::Operator if t.text.as_bytes() == b"::" => (Before::Tight, Last::Tight),
        _ => (Before::Spaced, Last::Other),
    }
}

/// What the sign and `NULL`/boolean rules need to know of a token once it is behind, bits of
/// [`Normalizer::prev`].
const PREV_SIGN: u8 = 1;
const PREV_IS: u8 = 2;
const PREV_NOT: u8 = 4;

/// Whether a NULL or boolean literal, after the tokens `prev` describes, is syntax kept as
/// written rather than a value: `IS NULL`, `NOT NULL`, `IS TRUE`, `IS NOT FALSE`.
#[inline(always)]
fn literal_is_syntax(kind: TokenKind, prev: [u8; 2]) -> bool {
    match kind {
        TokenKind::Null => prev[0] & (PREV_IS | PREV_NOT) != 0,
        TokenKind::Bool => prev[0] & PREV_IS != 0 || (prev[0] & PREV_NOT != 0 && prev[1] & PREV_IS != 0),
        _ => false,
    }
}

/// The [`Normalizer::prev`] bits `t` (with [`roles`] `kw`) leaves: whether a `-`/`+` after it
/// starts a signed number (after an operator, `(`, `,`, `;`, punctuation other than `]`, or a
/// [`VALUE_KEYWORDS`] word) and whether it is the word `IS` or `NOT`.
#[inline(always)]
fn prev_bits(t: &Token<'_>, kw: u8) -> u8 {
    match t.kind {
        TokenKind::Word => word_bits(kw),
        TokenKind::Operator | TokenKind::LParen | TokenKind::Comma | TokenKind::Semicolon => PREV_SIGN,
        TokenKind::Punct if t.text != "]" => PREV_SIGN,
        _ => 0,
    }
}

/// [`prev_bits`] of an unquoted word with [`roles`] `kw`.
#[inline(always)]
fn word_bits(kw: u8) -> u8 {
    (if kw & KW_VALUE != 0 { PREV_SIGN } else { 0 })
        | (if kw & KW_IS != 0 { PREV_IS } else { 0 })
        | (if kw & KW_NOT != 0 { PREV_NOT } else { 0 })
}

#[cfg(test)]
fn word_in(t: &Token<'_>, list: &[&str]) -> bool {
    t.kind == TokenKind::Word && list.iter().any(|k| t.text.eq_ignore_ascii_case(k))
}

/// One normalization pass over a lexer, writing to a [`Sink`].
pub(crate) struct Normalizer<'a, S> {
    lex: Lexer<'a>,
    sink: S,
    /// [`prev_bits`] of the previous two significant input tokens (most recent first); before
    /// the first one a sign starts a value.
    prev: [u8; 2],
    last: Last,
    /// While set, text is suppressed but literal callbacks still fire (collapsed `VALUES` rows).
    mute: bool,
    /// Inside a `VALUES` row: nested rows are not collapsed, which keeps the pass linear.
    in_row: bool,
    /// Bytes `VALUES` probes may still scan. Successful probes cover disjoint text (at most the
    /// input length); only failed ones nested inside each other could rescan, and this caps them.
    probe_budget: usize,
    /// A probing row pass stops at this input offset (its share of the budget).
    limit: usize,
}

impl<'a, S: Sink<'a>> Writer<'a> for Normalizer<'a, S> {
    #[inline(always)]
    fn emit(&mut self, s: &str, fold: bool, before: Before, after: Last) {
        if !self.mute {
            if spaced(before, self.last) {
                self.sink.space();
            }
            self.sink.text(s, fold);
        }
        self.last = after;
    }

    #[inline(always)]
    fn shift(&mut self, bits: u8) {
        self.prev = [bits, self.prev[0]];
    }

    fn scalar(&mut self, sign: Option<Token<'a>>, t: Token<'a>) {
        self.sink.scalar(sign, t);
    }
}

/// The writing half of both normalizing passes (this module's [`Normalizer`] and the fast pass):
/// how a token kept as written, or a value's `?`, goes into the normalized text.
trait Writer<'a> {
    /// Writes `s`, after a space when it is [`spaced`] from what was written last; `after` is
    /// what it leaves for the next token.
    fn emit(&mut self, s: &str, fold: bool, before: Before, after: Last);
    /// Notes the [`prev_bits`] of the token just behind.
    fn shift(&mut self, bits: u8);
    /// Tells the sink of a value that became `?` (with the sign folded into it, if any).
    fn scalar(&mut self, sign: Option<Token<'a>>, t: Token<'a>);

    fn plain(&mut self, t: Token<'a>) {
        self.plain_as(t, roles(&t));
    }

    /// [`Writer::plain`] of a token whose [`roles`] are known.
    #[inline(always)]
    fn plain_as(&mut self, t: Token<'a>, kw: u8) {
        let fold = matches!(t.kind, TokenKind::Word | TokenKind::Variable | TokenKind::Null | TokenKind::Bool);
        let (before, after) = spacing(&t, kw);
        self.emit(t.text, fold, before, after);
        self.shift(prev_bits(&t, kw));
    }

    fn placeholder(&mut self, sign: Option<Token<'a>>, t: Token<'a>) {
        self.scalar(sign, t);
        self.emit("?", false, Before::Spaced, Last::Other);
        self.shift(0);
    }
}

/// Whether a token that sits `before` against what was written `last` is written after a space.
#[inline(always)]
fn spaced(before: Before, last: Last) -> bool {
    match before {
        Before::Spaced => !matches!(last, Last::Nothing | Last::Tight),
        Before::Tight => false,
        Before::AfterName => !matches!(last, Last::Nothing | Last::Tight | Last::Word),
    }
}

impl<'a, S: Sink<'a>> Normalizer<'a, S> {
    pub(crate) fn in_mode(sql: &'a str, dialect: Dialect, mode: LexMode, sink: S) -> Self {
        Self::over(Lexer::new(sql, dialect).mode(mode), sink, sql.len().saturating_mul(2))
    }

    fn over(lex: Lexer<'a>, sink: S, probe_budget: usize) -> Self {
        Normalizer {
            lex,
            sink,
            prev: [PREV_SIGN, 0],
            last: Last::Nothing,
            mute: false,
            in_row: false,
            probe_budget,
            limit: usize::MAX,
        }
    }

    /// Normalize the whole input.
    pub(crate) fn run(&mut self) {
        while let Some(t) = next_sig(&mut self.lex) {
            self.step(t);
        }
    }

    /// Writes text that stands for no input token (`?`, a list marker): spaced like a value.
    fn emit_other(&mut self, s: &str) {
        self.emit(s, false, Before::Spaced, Last::Other);
    }

    fn step(&mut self, t: Token<'a>) {
        match t.kind {
            TokenKind::Word => {
                let kw = keyword(t.text);
                self.plain_as(t, kw);
                if kw & KW_IN != 0 {
                    self.try_list(TokenKind::LParen, ")");
                } else if kw & KW_ARRAY != 0 {
                    self.try_list(TokenKind::Punct, "]");
                } else if kw & KW_VALUES != 0 && !self.in_row {
                    self.try_rows();
                }
            }
            TokenKind::Number | TokenKind::String(_) | TokenKind::Param => self.placeholder(None, t),
            TokenKind::Null | TokenKind::Bool if literal_is_syntax(t.kind, self.prev) => self.plain(t),
            TokenKind::Null | TokenKind::Bool => self.placeholder(None, t),
            TokenKind::Comment => {}
            TokenKind::Semicolon => self.semicolons(t),
            TokenKind::Operator if matches!(t.text, "-" | "+") && self.prev[0] & PREV_SIGN != 0 => {
                match peek_sig(&self.lex) {
                    Some(n) if matches!(n.kind, TokenKind::Number) => {
                        next_sig(&mut self.lex);
                        self.placeholder(Some(t), n);
                    }
                    _ => self.plain(t),
                }
            }
            TokenKind::Unterminated => {
                self.emit_other("/*unterminated*/");
                self.shift(0);
            }
            _ => self.plain(t),
        }
    }

    /// A run of `;`: dropped when nothing follows, written otherwise (one scan, so linear).
    fn semicolons(&mut self, first: Token<'a>) {
        let mut probe = self.lex.clone();
        let mut run = 0usize;
        loop {
            let mut step = probe.clone();
            match next_sig(&mut step) {
                Some(t) if matches!(t.kind, TokenKind::Semicolon) => {
                    run += 1;
                    probe = step;
                }
                Some(_) => break,
                None => {
                    self.lex = probe;
                    return;
                }
            }
        }
        self.plain(first);
        for _ in 0..run {
            if let Some(t) = next_sig(&mut self.lex) {
                self.plain(t);
            }
        }
    }

    /// After `IN`/`ARRAY`: if `open`, then only (signed) literals or parameters separated by commas,
    /// then `close` follow, write `(? /*, ... */)` and consume them; otherwise leave the input alone.
    fn try_list(&mut self, open: TokenKind, close: &str) {
        let mut probe = self.lex.clone();
        let Some(first) = next_sig(&mut probe).filter(|t| t.kind == open && t.text != "]") else { return };
        if open == TokenKind::Punct && first.text != "[" {
            return;
        }
        let mut items = 0usize;
        loop {
            let mut t = next_sig(&mut probe);
            if t.is_some_and(|s| matches!(s.text, "-" | "+") && s.kind == TokenKind::Operator) {
                t = next_sig(&mut probe).filter(|n| n.kind == TokenKind::Number);
            }
            if !t.is_some_and(|v| v.is_literal() || v.kind == TokenKind::Param) {
                return;
            }
            items += 1;
            match next_sig(&mut probe) {
                Some(s) if s.kind == TokenKind::Comma => {}
                Some(s) if s.text == close && items > 0 => break,
                _ => return,
            }
        }
        // The shape is confirmed: replay it to report each item, writing one element.
        let open_tok = next_sig(&mut self.lex);
        if let Some(o) = open_tok {
            self.plain(o);
        }
        self.sink.list(true);
        let mute = self.mute;
        for i in 0..items {
            let mut t = next_sig(&mut self.lex);
            let sign = t.filter(|s| s.kind == TokenKind::Operator);
            if sign.is_some() {
                t = next_sig(&mut self.lex);
            }
            if let Some(v) = t {
                self.placeholder(sign, v);
            }
            self.mute = true;
            if i + 1 < items {
                next_sig(&mut self.lex);
            }
        }
        self.mute = mute;
        self.sink.list(false);
        self.emit_other(LIST_MARK);
        if let Some(c) = next_sig(&mut self.lex) {
            self.plain(c);
        }
    }

    /// After `VALUES`: when every row has the same normalized shape, write the first row and a
    /// list marker, and run the other rows muted (their literals are still reported).
    fn try_rows(&mut self) {
        let mut probe = self.lex.clone();
        let mut shape = None;
        let mut rows = 0usize;
        loop {
            if !peek_sig(&probe).is_some_and(|t| t.kind == TokenKind::LParen) {
                break;
            }
            let before = probe.offset();
            let mut hash = HashSink::default();
            let mut row = Normalizer::over(probe.clone(), &mut hash, 0);
            row.in_row = true;
            row.limit = before.saturating_add(self.probe_budget);
            row.row();
            probe = row.lex;
            self.probe_budget = match self.probe_budget.checked_sub(probe.offset().saturating_sub(before)) {
                Some(left) if probe.offset() <= row.limit => left,
                _ => {
                    self.probe_budget = 0;
                    return;
                }
            };
            let h = hash.finish();
            if *shape.get_or_insert(h) != h {
                return;
            }
            rows += 1;
            let mut after = probe.clone();
            match (next_sig(&mut after), peek_sig(&after)) {
                (Some(c), Some(p)) if c.kind == TokenKind::Comma && p.kind == TokenKind::LParen => probe = after,
                _ => break,
            }
        }
        if rows == 0 {
            return;
        }
        let in_row = std::mem::replace(&mut self.in_row, true);
        self.row();
        let mute = std::mem::replace(&mut self.mute, true);
        for _ in 1..rows {
            next_sig(&mut self.lex);
            self.row();
        }
        self.mute = mute;
        self.in_row = in_row;
        self.emit_other(LIST_MARK);
    }

    /// Process one parenthesized group, through its matching `)` (or the end of input).
    fn row(&mut self) {
        let mut depth = 0usize;
        while let Some(t) = next_sig(&mut self.lex) {
            match t.kind {
                TokenKind::LParen => depth += 1,
                TokenKind::RParen => depth = depth.saturating_sub(1),
                _ => {}
            }
            self.step(t);
            if depth == 0 || self.lex.offset() > self.limit {
                return;
            }
        }
    }
}

/// Next token that is not a comment.
pub(crate) fn next_sig<'a>(lex: &mut Lexer<'a>) -> Option<Token<'a>> {
    lex.find(|t| !matches!(t.kind, TokenKind::Comment))
}

fn peek_sig<'a>(lex: &Lexer<'a>) -> Option<Token<'a>> {
    next_sig(&mut lex.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const PG: Dialect = Dialect::Postgres;
    const MY: Dialect = Dialect::MySql;

    fn n(sql: &str, d: Dialect) -> String {
        normalize(sql, d)
    }

    fn same(a: &str, b: &str, d: Dialect) {
        assert_eq!(fingerprint(a, d), fingerprint(b, d), "\n{}\n{}", n(a, d), n(b, d));
    }

    fn differ(a: &str, b: &str, d: Dialect) {
        assert_ne!(fingerprint(a, d), fingerprint(b, d), "\n{}\n{}", n(a, d), n(b, d));
    }

    #[test]
    fn normalized_text() {
        let cases = [
            ("SELECT a, b FROM t WHERE id = 42 AND name = 'x';", "select a, b from t where id = ? and name = ?"),
            ("select count(*) from T where x in (1, 2, 3)", "select count(*) from t where x in (? /*, ... */)"),
            ("SELECT * FROM t WHERE a IS NULL AND b IS NOT NULL", "select * from t where a is null and b is not null"),
            ("SELECT * FROM t WHERE a = NULL OR b = TRUE", "select * from t where a = ? or b = ?"),
            ("SELECT * FROM t WHERE a IS NOT TRUE", "select * from t where a is not true"),
            ("INSERT INTO t (a, b) VALUES (1, 'a'), (2, 'b')", "insert into t(a, b) values (?, ?) /*, ... */"),
            ("SELECT a - 1, -1, x=-2, f(-3) FROM t", "select a - ?, ?, x = ?, f(?) from t"),
            ("SELECT \"Mixed\".\"Col\" FROM s.t /* c */ -- d", "select \"Mixed\".\"Col\" from s.t"),
            ("SELECT $1::int, E'\\n', $$x$$", "select ?::int, ?, ?"),
            ("SELECT * FROM t WHERE id = ANY(ARRAY[1,2,3])", "select * from t where id = any(array[? /*, ... */])"),
            ("BEGIN;;", "begin"),
            ("SELECT 'abc", "select /*unterminated*/"),
        ];
        for (sql, want) in cases {
            assert_eq!(n(sql, PG), want, "{sql}");
        }
        assert_eq!(
            n("SELECT `a` FROM t WHERE c = \"x\" AND d = _utf8mb4'y' /*!40101 AND e = 1 */ # c", MY),
            "select `a` from t where c = ? and d = ? and e = ?"
        );
    }

    #[test]
    fn fingerprint_is_the_hash_of_the_normalized_text() {
        for sql in ["SELECT 1", "insert into t values (1),(2)", "x in (1,2)", "", "  ;  ", "SELECT 'oops"] {
            for d in [PG, MY] {
                assert_eq!(fingerprint(sql, d), hash_normalized(&normalize(sql, d)), "{sql}");
            }
        }
    }

    #[test]
    fn values_are_noted_and_parameters_are_not() {
        let mode = LexMode::default();
        for (sql, values) in [
            ("SELECT abalance FROM pgbench_accounts WHERE aid = $1", false),
            ("SELECT a FROM t WHERE b = ? AND c IN (?, ?)", false),
            ("BEGIN", false),
            ("SELECT a FROM t WHERE b IS NULL AND c IS NOT TRUE", false),
            ("SELECT abalance FROM pgbench_accounts WHERE aid = 12345;", true),
            ("SELECT a FROM t WHERE b = NULL", true),
            ("SELECT -1", true),
            ("INSERT INTO t VALUES ($1, 'x'), ($2, 'y')", true),
            ("SELECT * FROM t WHERE id IN ($1, 2)", true),
        ] {
            for d in [PG, MY] {
                let (fp, noted) = fingerprint_noting_values(sql, d, mode);
                assert_eq!(fp, fingerprint(sql, d), "{sql}");
                assert_eq!(noted, values, "{sql}");
            }
        }
    }

    /// The general pass alone: what [`fast`] must write whenever it does not give up.
    fn general(sql: &str, d: Dialect, mode: LexMode) -> (String, Fingerprint, bool) {
        let mut text = TextSink(String::new());
        Normalizer::in_mode(sql, d, mode, &mut text).run();
        let mut hash = HashSink::default();
        Normalizer::in_mode(sql, d, mode, &mut hash).run();
        (text.0, hash.finish(), hash.values)
    }

    fn both_passes_agree(sql: &str, d: Dialect, mode: LexMode) -> Result<(), TestCaseError> {
        let (text, fp, values) = general(sql, d, mode);
        prop_assert_eq!(normalize_in(sql, d, mode), text, "{:?} {:?} {:?}", sql, d, mode);
        prop_assert_eq!(fingerprint_noting_values(sql, d, mode), (fp, values), "{:?} {:?} {:?}", sql, d, mode);
        Ok(())
    }

    fn own_pass_takes(sql: &str, d: Dialect) -> bool {
        let mut sink = HashSink::default();
        !fast::Pass::new(sql, d, LexMode::default(), &mut sink).run()
    }

    #[test]
    fn the_own_pass_takes_common_statements_and_hands_lists_over() {
        for sql in [
            "SELECT abalance FROM pgbench_accounts WHERE aid = 12345;",
            "UPDATE pgbench_accounts SET abalance = abalance + -3201 WHERE aid = 48213;",
            "SELECT c FROM sbtest1 WHERE id BETWEEN 5021 AND 5120 ORDER BY c",
            "SELECT a FROM t WHERE b = 'x' AND c IS NOT NULL /* app */ LIMIT 1;;",
            "SELECT $1::int",
        ] {
            for d in [PG, MY] {
                assert!(own_pass_takes(sql, d), "{sql}");
                both_passes_agree(sql, d, LexMode::default()).unwrap();
            }
        }
        for sql in ["SELECT * FROM t WHERE id IN (1, 2)", "INSERT INTO t VALUES (1)", "SELECT ARRAY[1]"] {
            assert!(!own_pass_takes(sql, PG), "{sql}");
        }
        assert!(!own_pass_takes("SELECT /*!40101 SQL_NO_CACHE */ 1", MY));
    }

    #[test]
    fn the_own_pass_writes_words_longer_than_its_buffer_and_texts_in_pieces() {
        let long = |c: &str, n: usize| c.repeat(n);
        for sql in [
            format!("SELECT {} FROM t WHERE a = 1", long("Ab", 200)),
            format!("SELECT a FROM {} WHERE {} IS NOT NULL", long("T", 247), long("x", 248)),
            format!("SELECT 'x' AS {}, \"{}\"", long("é", 130), long("Q", 300)),
            format!("SELECT {}1", long("a, ", 200)),
            format!("SELECT {}", long("LongerThanEight_ ", 40)),
        ] {
            for d in [PG, MY] {
                for bits in 0u8..16 {
                    both_passes_agree(&sql, d, LexMode::from_bits(bits)).unwrap();
                }
            }
        }
    }

    /// Pieces of statements in every lexical form both passes know, including the ones the own
    /// pass leaves to the lexer or gives up on.
    const PIECES: &[&str] = &[
        "SELECT",
        "select",
        "FROM",
        "WHERE",
        "a",
        "B",
        "t_1",
        "x$y",
        "\"Q\"",
        "\"a\"\"b\"",
        "`q`",
        "IS",
        "is",
        "NOT",
        "NULL",
        "null",
        "TRUE",
        "false",
        "IN",
        "ARRAY",
        "VALUES",
        "AND",
        "OR",
        "LIMIT",
        "BETWEEN",
        "count",
        "=",
        "<",
        ">",
        "<=",
        "<>",
        "!=",
        "<=>",
        "->>",
        "-",
        "+",
        "*",
        "/",
        "%",
        "||",
        "@>",
        "?|",
        "::",
        ":",
        ":=",
        ":n",
        "(",
        ")",
        ",",
        ";",
        ";;",
        ".",
        "..",
        "[",
        "]",
        "{",
        "}",
        "0",
        "1",
        "12345",
        "1.5",
        ".5",
        "1.",
        "0x1F",
        "0b1",
        "1e5",
        "1e",
        "1_000",
        "1st",
        "'x'",
        "'it''s'",
        "''",
        "E'\\n'",
        "e'x'",
        "'a\\'b'",
        "'\\'",
        "_utf8'x'",
        "_latin1 'y'",
        "_c",
        "N'z'",
        "B'01'",
        "X'1F'",
        "U&'x'",
        "U&\"x\"",
        "$1",
        "$2",
        "$1_0",
        "$",
        "?",
        "$$d$$",
        "$q$x$q$",
        "-- c\n",
        "--c",
        "/* c */",
        "/* a /* b */ c */",
        "/*! 1 */",
        "/*!40101 x",
        "/*!",
        "*/",
        "#c\n",
        "@v",
        "@@g.h",
        "@'u'",
        "'unterm",
        "\"unterm",
        "/* unterm",
        "\\",
        "é",
        "ü1",
        "→",
        "\t",
        "\n",
    ];

    fn soup() -> impl Strategy<Value = String> {
        let piece = proptest::sample::select(PIECES);
        let gap = proptest::sample::select(&["", " ", " ", "  ", "\n", "\t"][..]);
        proptest::collection::vec((piece, gap), 0..24)
            .prop_map(|parts| parts.iter().flat_map(|(p, g)| [*p, *g]).collect::<String>())
    }

    #[test]
    fn hash_is_fixed_across_processes() {
        // Pinned values: a change here means every persisted fingerprint changes meaning.
        assert_eq!(hash_normalized("").to_string(), format!("{}", hash_normalized("")));
        assert_eq!(fingerprint("SELECT 1", PG), hash_normalized("select ?"));
        assert_eq!(hash_normalized("select ?").0, PINNED_SELECT);
        assert_ne!(hash_normalized("a"), hash_normalized("b"));
        assert_ne!(hash_normalized("abcdefgh"), hash_normalized("abcdefgh\0"));
    }

    const PINNED_SELECT: u64 = 7_722_117_348_667_084_764;

    #[test]
    fn structure_changes_the_fingerprint() {
        differ("SELECT a FROM t WHERE id = 1", "SELECT b FROM t WHERE id = 1", PG);
        differ("SELECT a FROM t WHERE id = 1", "SELECT a FROM t WHERE id > 1", PG);
        differ("SELECT a FROM t WHERE id = 1", "SELECT a FROM t WHERE id = 1 LIMIT 1", PG);
        differ("SELECT a - 1 FROM t", "SELECT a, -1 FROM t", PG);
        differ("SELECT * FROM t WHERE a IS NULL", "SELECT * FROM t WHERE a IS NOT NULL", PG);
        differ("SELECT \"A\" FROM t", "SELECT a FROM t", PG);
        differ("INSERT INTO t VALUES (1, 2)", "INSERT INTO t VALUES (1, 2, 3)", MY);
        differ("INSERT INTO t VALUES (1, 2), (3, now())", "INSERT INTO t VALUES (1, 2), (3, 4)", MY);
        differ("SELECT 1; SELECT 2", "SELECT 1", PG);
        same("SELECT 1;; SELECT 2;;", "SELECT 3;; SELECT 4", PG);
        differ("SELECT 1;; SELECT 2", "SELECT 1; SELECT 2", PG);
        same("select A from T", "SELECT a FROM t", PG);
        same("SELECT a\n\tFROM t  -- x", "SELECT a FROM t;", MY);
        same("SELECT * FROM t WHERE x IN ($1, $2)", "SELECT * FROM t WHERE x IN (1)", PG);
        same("INSERT INTO t VALUES (1, f(2)), (3, f(-4))", "INSERT INTO t VALUES (5, f(6))", PG);
    }

    #[test]
    fn pathological_inputs_stay_linear() {
        // Each of these would take minutes if a lookahead rescanned the rest per token.
        let semis = format!("{}x", ";".repeat(200_000));
        assert!(normalize(&semis, PG).ends_with("; x"));
        let nested = format!("{}1{}", "values (".repeat(3_000), "), (2)".repeat(3_000));
        let _ = fingerprint(&nested, PG);
        let list = format!("x in ({}a)", "1, ".repeat(100_000));
        assert!(normalize(&list, MY).starts_with("x in (?, ?"));
    }

    #[test]
    fn ast_strategy_covers_select_only() {
        let a = fingerprint_ast("SELECT a FROM t WHERE b IN (1, 2, 3) AND c = -5", PG);
        let b = fingerprint_ast("select a from t where b in (9) and c = 'x'", PG);
        assert!(a.is_some());
        assert_eq!(a, b);
        assert_ne!(a, fingerprint_ast("SELECT a FROM t WHERE b IN (1) AND d = 1", PG));
        assert_eq!(fingerprint_ast("UPDATE t SET a = 1", PG), None);
        assert_eq!(fingerprint_ast("SELEC oops", MY), None);
        assert_eq!(fingerprint_ast("SELECT 1; SELECT 2", MY), None);
        assert!(fingerprint_ast("SELECT `a` FROM t LIMIT 10", MY).is_some());
    }

    /// Corpus groups: blank-line separated; each line one statement; `##` lines are notes.
    fn check_corpus(text: &str, d: Dialect) {
        let mut groups: Vec<Vec<&str>> = vec![vec![]];
        for line in text.lines() {
            if line.trim().is_empty() {
                if groups.last().is_some_and(|g| !g.is_empty()) {
                    groups.push(vec![]);
                }
            } else if !line.starts_with("##") {
                if let Some(g) = groups.last_mut() {
                    g.push(line);
                }
            }
        }
        groups.retain(|g| !g.is_empty());
        assert!(groups.len() >= 20, "corpus too small: {}", groups.len());
        let mut seen: Vec<(Fingerprint, &str)> = Vec::new();
        for g in &groups {
            let fp = fingerprint(g[0], d);
            for sql in g {
                assert_eq!(fingerprint(sql, d), fp, "group split:\n{}\n{}", n(g[0], d), n(sql, d));
                assert_eq!(hash_normalized(&normalize(sql, d)), fp);
                both_passes_agree(sql, d, LexMode::default()).unwrap();
            }
            if let Some((_, other)) = seen.iter().find(|(f, _)| *f == fp) {
                panic!("groups merged:\n{}\n{}", other, g[0]);
            }
            seen.push((fp, g[0]));
        }
    }

    #[test]
    fn corpus_postgres() {
        check_corpus(include_str!("../../../tests/corpus/fingerprint_pg.txt"), PG);
    }

    #[test]
    fn corpus_mysql() {
        check_corpus(include_str!("../../../tests/corpus/fingerprint_mysql.txt"), MY);
    }

    fn literal() -> impl Strategy<Value = String> {
        prop_oneof![
            any::<i64>().prop_map(|v| v.to_string()),
            any::<f64>().prop_filter("finite", |v| v.is_finite()).prop_map(|v| format!("{v:e}")),
            "[a-zA-Z0-9 '\\\\\"ü€-]{0,12}".prop_map(|s| format!("'{}'", s.replace('\\', "").replace('\'', "''"))),
            Just("TRUE".to_owned()),
            Just("false".to_owned()),
            Just("NULL".to_owned()),
            "[a-z]{0,6}".prop_map(|s| format!("$q${s}$q$")),
        ]
    }

    fn shape(lits: &[String]) -> String {
        format!(
            "SELECT a, {} FROM t WHERE b = {} AND c IN ({}) AND d > {} ORDER BY a LIMIT {}",
            lits[0], lits[1], lits[2], lits[3], lits[4]
        )
    }

    proptest! {
        #[test]
        fn literal_values_never_change_the_fingerprint(
            a in proptest::collection::vec(literal(), 5),
            b in proptest::collection::vec(literal(), 5),
        ) {
            prop_assert_eq!(fingerprint(&shape(&a), PG), fingerprint(&shape(&b), PG));
            let my = |l: &[String]| shape(l).replace("$q$", "'");
            prop_assert_eq!(fingerprint(&my(&a), MY), fingerprint(&my(&b), MY));
        }

        #[test]
        fn in_lists_of_any_length_share_a_fingerprint(len in 1usize..1000, v in any::<i32>()) {
            let list = vec![v.to_string(); len].join(", ");
            let one = fingerprint("SELECT * FROM t WHERE id IN (7) AND x = 1", MY);
            prop_assert_eq!(fingerprint(&format!("SELECT * FROM t WHERE id IN ({list}) AND x = 1"), MY), one);
            let rows = vec![format!("({v}, 'x')"); len].join(",");
            prop_assert_eq!(
                fingerprint(&format!("INSERT INTO t VALUES {rows}"), PG),
                fingerprint("INSERT INTO t VALUES (1, 'y')", PG)
            );
        }

        #[test]
        fn identifiers_and_operators_matter(
            col in "[a-z][a-z0-9_]{0,8}",
            other in "[a-z][a-z0-9_]{0,8}",
            op in prop_oneof![Just("="), Just("<"), Just(">="), Just("<>")],
            op2 in prop_oneof![Just("="), Just("<"), Just(">="), Just("<>")],
        ) {
            prop_assume!(col != other);
            let q = |c: &str, o: &str| format!("SELECT x FROM t WHERE {c} {o} 1");
            prop_assert_ne!(fingerprint(&q(&col, op), PG), fingerprint(&q(&other, op), PG));
            if op != op2 {
                prop_assert_ne!(fingerprint(&q(&col, op), MY), fingerprint(&q(&col, op2), MY));
            }
            prop_assert_ne!(fingerprint(&q(&col, op), PG), fingerprint(&format!("{} ORDER BY 1", q(&col, op)), PG));
        }

        #[test]
        fn word_hashing_equals_byte_hashing(parts in proptest::collection::vec(("[A-Za-z0-9_ @\\[]{0,20}|\\PC{0,20}", any::<bool>(), any::<bool>()), 0..8)) {
            // The reference: one byte at a time into the buffer, absorbed when it holds eight.
            let mut words = HashSink::default();
            let mut bytes = HashSink::default();
            for (text, fold, spaced) in &parts {
                let mut reference = String::new();
                if *spaced {
                    words.space();
                    reference.push(' ');
                }
                words.text(text, *fold);
                reference.push_str(&if *fold { text.to_ascii_lowercase() } else { text.clone() });
                bytes.len = bytes.len.wrapping_add(reference.len() as u64);
                for &b in reference.as_bytes() {
                    bytes.buf |= u64::from(b) << (bytes.nbuf * 8);
                    bytes.nbuf += 1;
                    if bytes.nbuf == 8 {
                        bytes.absorb(bytes.buf);
                        bytes.buf = 0;
                        bytes.nbuf = 0;
                    }
                }
            }
            prop_assert_eq!(words.finish(), bytes.finish());
        }

        #[test]
        fn keyword_roles_are_list_membership(word in "[a-zA-Z_]{1,10}|in|INTO|Intersect|is|where|WHEN|with|table|RETURNING|returnin[gG_]|Array|vaLues|NOT|interval|escapE|\\PC{1,10}") {
            for kind in [TokenKind::Word, TokenKind::QuotedIdent] {
                let t = Token { kind, text: &word, start: 0 };
                let mut want = 0;
                for (list, bit) in ROLES {
                    if word_in(&t, list) {
                        want |= bit;
                    }
                }
                prop_assert_eq!(roles(&t), want, "{}", word);
            }
        }

        #[test]
        fn lowercase_word_lowers_each_byte(w in any::<u64>()) {
            let lowered = w.to_le_bytes().map(|b| b.to_ascii_lowercase());
            prop_assert_eq!(lowercase_word(w), u64::from_le_bytes(lowered));
        }

        #[test]
        fn the_own_pass_writes_what_the_general_pass_writes(
            s in soup(),
            bits in 0u8..16,
            raw in "\\PC{0,40}|[-'\"`$/*#!?:@_a-z0-9 (),;\\\\\n.eExX&|]{0,40}",
        ) {
            for d in [PG, MY] {
                both_passes_agree(&s, d, LexMode::from_bits(bits))?;
                both_passes_agree(&raw, d, LexMode::from_bits(bits))?;
            }
        }

        #[test]
        fn random_input_never_panics(s in "\\PC{0,80}|[-'\"`$/*#!?:@_a-z0-9 (),;\\\\\n.]{0,80}") {
            for d in [PG, MY] {
                prop_assert_eq!(fingerprint(&s, d), hash_normalized(&normalize(&s, d)));
                let _ = fingerprint_ast(&s, d);
            }
        }
    }
}
