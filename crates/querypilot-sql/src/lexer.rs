//! Dialect-aware SQL tokenizer: one forward pass over the statement bytes, yielding tokens that
//! borrow spans of the input (no allocation).
//!
//! It owns lexical rules only (strings, comments, numbers, operators, parameters); it knows nothing
//! of grammar beyond classifying `TRUE`/`FALSE`/`NULL` as literal kinds. It never panics: input it
//! cannot make sense of becomes an [`TokenKind::Error`] or [`TokenKind::Unterminated`] token.
//! Whitespace is skipped; comments are yielded (the route hint reader and tests need them) and
//! consumers that do not care filter them out.

use super::mode::LexMode;
use super::Dialect;

/// What a string literal looked like in the source; decides how its body is decoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StringKind {
    /// `'..'` with `''` doubling and no backslash escapes (PostgreSQL standard strings).
    Standard,
    /// Backslash escapes apply: PostgreSQL `E'..'`, every MySQL `'..'`/`".."` string.
    Escaped,
    /// PostgreSQL `$tag$..$tag$`: the body is taken verbatim.
    Dollar,
    /// `B'0101'` / MySQL `b'0101'` bit strings.
    Bit,
    /// `X'1F'` hex strings.
    Hex,
    /// PostgreSQL `U&'..'` Unicode-escape strings.
    Unicode,
}

/// The lexical class of a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TokenKind {
    /// A keyword or unquoted identifier; compare with [`Token::is_word`] (ASCII case-insensitive).
    Word,
    /// `"x"` (PostgreSQL, MySQL with ANSI_QUOTES) or `` `x` `` (MySQL).
    QuotedIdent,
    /// MySQL `@user_var` / `@@system_var`.
    Variable,
    /// Integer, decimal, exponent, `0x`/`0o`/`0b` prefixed or `1_000` number (no sign).
    Number,
    /// A string literal of the given form; the span includes prefix and quotes.
    String(StringKind),
    /// `TRUE` or `FALSE`.
    Bool,
    /// `NULL`.
    Null,
    /// A bind parameter: `$1`, `?`, `:name`.
    Param,
    /// An operator such as `=`, `<=`, `::`, `->>`, `||`.
    Operator,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `,`
    Comma,
    /// `;`
    Semicolon,
    /// `.`
    Dot,
    /// Other single-character punctuation: `[`, `]`, `{`, `}`, a lone `:`.
    Punct,
    /// A `--`, `#` (MySQL) or `/* */` comment, delimiters included.
    Comment,
    /// A string, quoted identifier or comment missing its closing delimiter; runs to the end.
    Unterminated,
    /// A byte that starts no token in this dialect.
    Error,
}

/// One token: its kind and the exact slice of the input it covers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Token<'a> {
    /// Lexical class.
    pub kind: TokenKind,
    /// The source text of the token.
    pub text: &'a str,
    /// Byte offset of `text` in the input.
    pub start: usize,
}

impl Token<'_> {
    /// Byte offset one past the end of the token.
    pub fn end(&self) -> usize {
        self.start + self.text.len()
    }

    /// Byte range of the token in the input.
    pub fn span(&self) -> std::ops::Range<usize> {
        self.start..self.end()
    }

    /// Whether this is the unquoted word `kw`, compared ASCII case-insensitively.
    pub fn is_word(&self, kw: &str) -> bool {
        self.kind == TokenKind::Word && self.text.eq_ignore_ascii_case(kw)
    }

    /// The name a PostgreSQL identifier token stands for: an unquoted word folded to lower
    /// case, a quoted one as written (`""` read as `"`); `None` for any other token.
    pub fn pg_identifier(&self) -> Option<String> {
        match self.kind {
            TokenKind::Word => Some(self.text.to_ascii_lowercase()),
            TokenKind::QuotedIdent => {
                let inner = self.text.strip_prefix('"')?.strip_suffix('"')?;
                Some(inner.replace("\"\"", "\""))
            }
            _ => None,
        }
    }

    /// Whether the token is a literal value (number, string, boolean, NULL).
    pub fn is_literal(&self) -> bool {
        matches!(self.kind, TokenKind::Number | TokenKind::String(_) | TokenKind::Bool | TokenKind::Null)
    }
}

/// Tokenizer over one SQL text; an [`Iterator`] of [`Token`]s. Cheap to clone for lookahead.
#[derive(Debug, Clone)]
pub struct Lexer<'a> {
    src: &'a str,
    pos: usize,
    dialect: Dialect,
    /// The session's string and quote rules (#19).
    mode: LexMode,
    /// Start of an open MySQL `/*! ... */` executable comment whose body is being lexed as code.
    exec_comment: Option<usize>,
}

impl<'a> Lexer<'a> {
    /// A lexer for `src` in `dialect` (MySQL with its default `"` = string rule).
    pub fn new(src: &'a str, dialect: Dialect) -> Self {
        Lexer { src, pos: 0, dialect, mode: LexMode::default(), exec_comment: None }
    }

    /// Treat MySQL `".."` as a quoted identifier (the `ANSI_QUOTES` SQL mode). No effect on PostgreSQL.
    pub fn ansi_quotes(mut self, on: bool) -> Self {
        self.mode.ansi_quotes = on;
        self
    }

    /// Lex as a session in `mode` would be read by its server: PostgreSQL
    /// `standard_conforming_strings = off` (backslash escapes in `'..'`), MySQL
    /// `NO_BACKSLASH_ESCAPES` and `ANSI_QUOTES`.
    pub fn mode(mut self, mode: LexMode) -> Self {
        self.mode = mode;
        self
    }

    /// How a MySQL `'..'` / `".."` string is read: with backslash escapes unless the session
    /// runs with `NO_BACKSLASH_ESCAPES`.
    fn mysql_string_kind(&self) -> StringKind {
        if self.mode.no_backslash_escapes {
            StringKind::Standard
        } else {
            StringKind::Escaped
        }
    }

    /// Continue the scan at byte `pos`, a token boundary of a pass over the same text (no
    /// `/*! .. */` open there): the normalizer's own pass asks for a token it does not read itself.
    pub(crate) fn starting_at(mut self, pos: usize) -> Self {
        self.pos = pos;
        self
    }

    /// Byte offset where the next token's scan starts.
    pub fn offset(&self) -> usize {
        self.pos
    }

    fn bytes(&self) -> &'a [u8] {
        self.src.as_bytes()
    }

    fn at(&self, i: usize) -> u8 {
        self.bytes().get(i).copied().unwrap_or(0)
    }

    fn mysql(&self) -> bool {
        self.dialect == Dialect::MySql
    }

    fn token(&mut self, kind: TokenKind, start: usize, end: usize) -> Token<'a> {
        let end = end.min(self.src.len());
        self.pos = end;
        // Every boundary we cut at is next to an ASCII byte, so slicing cannot split a char;
        // `get` keeps that a checked fact rather than an assumption.
        let text = self.src.get(start..end).unwrap_or("");
        Token { kind, text, start }
    }

    fn skip_whitespace(&mut self) {
        while is(self.at(self.pos), Class::Space) {
            self.pos += 1;
        }
    }

    fn next_token(&mut self) -> Option<Token<'a>> {
        self.skip_whitespace();
        let start = self.pos;
        let b = *self.bytes().get(start)?;
        if is_ident_start(b) {
            // Most tokens are words, and no arm below takes a letter, `_` or a non-ASCII byte.
            return Some(self.word_or_prefixed(start));
        }
        let next = self.at(start + 1);
        Some(match b {
            b'-' if next == b'-' && self.line_comment_starts(start) => self.line_comment(start),
            b'#' if self.mysql() => self.line_comment(start),
            b'/' if next == b'*' => return self.block_comment(start),
            b'*' if next == b'/' && self.exec_comment.is_some() => {
                self.exec_comment = None;
                self.pos = start + 2;
                return self.next_token();
            }
            b'\'' => self.quoted(start, start, b'\'', self.default_string_kind()),
            b'"' if self.mysql() && !self.mode.ansi_quotes => self.quoted(start, start, b'"', self.mysql_string_kind()),
            b'"' => self.quoted_ident(start, b'"'),
            b'`' if self.mysql() => self.quoted_ident(start, b'`'),
            b'0'..=b'9' => self.number(start),
            b'.' if next.is_ascii_digit() => self.number(start),
            b'$' => self.dollar(start),
            b'?' if !self.pg_question_operator(start) => self.token(TokenKind::Param, start, start + 1),
            b':' => self.colon(start),
            b'@' if self.mysql() => self.variable(start),
            b'(' => self.token(TokenKind::LParen, start, start + 1),
            b')' => self.token(TokenKind::RParen, start, start + 1),
            b',' => self.token(TokenKind::Comma, start, start + 1),
            b';' => self.token(TokenKind::Semicolon, start, start + 1),
            b'.' => self.token(TokenKind::Dot, start, start + 1),
            b'[' | b']' | b'{' | b'}' => self.token(TokenKind::Punct, start, start + 1),
            _ if is_op_char(b) => self.operator(start),
            _ => self.token(TokenKind::Error, start, start + 1),
        })
    }

    fn default_string_kind(&self) -> StringKind {
        if self.mysql() {
            self.mysql_string_kind()
        } else if self.mode.backslash_strings {
            StringKind::Escaped
        } else {
            StringKind::Standard
        }
    }

    /// MySQL needs whitespace or a control character after `--`; PostgreSQL does not.
    fn line_comment_starts(&self, start: usize) -> bool {
        if !self.mysql() {
            return true;
        }
        // At the end of input `at` yields 0, which counts as a control character.
        self.at(start + 2) <= b' '
    }

    fn line_comment(&mut self, start: usize) -> Token<'a> {
        let end = match self.bytes().get(start..).and_then(|r| r.iter().position(|&c| c == b'\n')) {
            Some(n) => start + n,
            None => self.src.len(),
        };
        self.token(TokenKind::Comment, start, end)
    }

    fn block_comment(&mut self, start: usize) -> Option<Token<'a>> {
        if self.mysql() && self.at(start + 2) == b'!' && self.exec_comment.is_none() {
            // `/*!50100 code */`: MySQL runs the body, so we lex it as code.
            let mut p = start + 3;
            while self.at(p).is_ascii_digit() {
                p += 1;
            }
            self.exec_comment = Some(start);
            self.pos = p;
            return self.next_token();
        }
        let nested = !self.mysql();
        let mut depth = 1usize;
        let mut p = start + 2;
        while p < self.src.len() {
            // Only a `*` or a `/` can end or open a comment: jump to the next one (a comment's
            // body was a dozen instructions a byte, most of the cost of a client's long
            // comments, #33).
            let Some(skip) = self.src.as_bytes().get(p..).and_then(|rest| memchr::memchr2(b'*', b'/', rest)) else {
                break;
            };
            p += skip;
            match (self.at(p), self.at(p + 1)) {
                (b'*', b'/') => {
                    depth -= 1;
                    p += 2;
                    if depth == 0 {
                        return Some(self.token(TokenKind::Comment, start, p));
                    }
                }
                (b'/', b'*') if nested => {
                    depth += 1;
                    p += 2;
                }
                _ => p += 1,
            }
        }
        Some(self.token(TokenKind::Unterminated, start, self.src.len()))
    }

    /// A quoted body starting at `quote_at`; `start` may be earlier (a prefix such as `E` or `_utf8`).
    fn quoted(&mut self, start: usize, quote_at: usize, q: u8, kind: StringKind) -> Token<'a> {
        let backslash = kind == StringKind::Escaped;
        let mut p = quote_at + 1;
        while p < self.src.len() {
            let c = self.at(p);
            if backslash && c == b'\\' {
                p += 2;
            } else if c == q {
                if self.at(p + 1) == q {
                    p += 2;
                } else {
                    return self.token(TokenKind::String(kind), start, p + 1);
                }
            } else {
                p += 1;
            }
        }
        self.token(TokenKind::Unterminated, start, self.src.len())
    }

    fn quoted_ident(&mut self, start: usize, q: u8) -> Token<'a> {
        let mut p = start + 1;
        while p < self.src.len() {
            if self.at(p) == q {
                if self.at(p + 1) == q {
                    p += 2;
                    continue;
                }
                return self.token(TokenKind::QuotedIdent, start, p + 1);
            }
            p += 1;
        }
        self.token(TokenKind::Unterminated, start, self.src.len())
    }

    /// End of a digit run; PostgreSQL also allows single `_` separators between digits (`1_000`).
    fn digits(&self, mut p: usize, ok: impl Fn(u8) -> bool) -> usize {
        let pg = !self.mysql();
        loop {
            let c = self.at(p);
            // The separator test only where a digit run stops: most numbers have none.
            let separator = || pg && c == b'_' && p > 0 && ok(self.at(p - 1)) && ok(self.at(p + 1));
            if !(ok(c) || separator()) {
                return p;
            }
            p += 1;
        }
    }

    fn number(&mut self, start: usize) -> Token<'a> {
        let radix = match (self.at(start), self.at(start + 1) | 0x20) {
            (b'0', b'x') if self.at(start + 2).is_ascii_hexdigit() => Some(16),
            (b'0', b'o') if matches!(self.at(start + 2), b'0'..=b'7') => Some(8),
            (b'0', b'b') if matches!(self.at(start + 2), b'0' | b'1') => Some(2),
            _ => None,
        };
        let mut p = match radix {
            Some(r) => self.digits(start + 2, |c| (c as char).is_digit(r)),
            None => {
                let mut p = self.digits(start, |c| c.is_ascii_digit());
                if self.at(p) == b'.' && self.at(p + 1) != b'.' {
                    p = self.digits(p + 1, |c| c.is_ascii_digit());
                }
                let e = self.at(p) | 0x20 == b'e';
                let sign = matches!(self.at(p + 1), b'+' | b'-');
                let exp_digit = self.at(p + 1 + usize::from(sign)).is_ascii_digit();
                if e && exp_digit {
                    p = self.digits(p + 1 + usize::from(sign), |c| c.is_ascii_digit());
                }
                p
            }
        };
        // MySQL identifiers may begin with digits (`1st_col`): a number run into word characters is a word.
        if self.mysql() && is_ident_char(self.at(p)) {
            while is_ident_char(self.at(p)) {
                p += 1;
            }
            return self.token(TokenKind::Word, start, p);
        }
        self.token(TokenKind::Number, start, p)
    }

    fn dollar(&mut self, start: usize) -> Token<'a> {
        let next = self.at(start + 1);
        if next.is_ascii_digit() {
            let end = self.digits(start + 1, |c| c.is_ascii_digit());
            return self.token(TokenKind::Param, start, end);
        }
        if self.dialect == Dialect::Postgres && (next == b'$' || is_ident_start(next)) {
            let mut p = start + 1;
            while p < self.src.len() && self.at(p) != b'$' && is_ident_char_no_dollar(self.at(p)) {
                p += 1;
            }
            if self.at(p) == b'$' {
                let tag = self.src.get(start..=p).unwrap_or("$");
                let body = p + 1;
                return match self.src.get(body..).and_then(|r| r.find(tag)) {
                    Some(n) => self.token(TokenKind::String(StringKind::Dollar), start, body + n + tag.len()),
                    None => self.token(TokenKind::Unterminated, start, self.src.len()),
                };
            }
        }
        self.token(TokenKind::Error, start, start + 1)
    }

    /// PostgreSQL jsonb operators `?|`, `?&`, `?-`, `?-|`, `?||` start with `?`.
    fn pg_question_operator(&self, start: usize) -> bool {
        !self.mysql() && matches!(self.at(start + 1), b'|' | b'&' | b'-' | b'#')
    }

    fn colon(&mut self, start: usize) -> Token<'a> {
        match self.at(start + 1) {
            b':' | b'=' => self.token(TokenKind::Operator, start, start + 2),
            c if is_ident_start(c) => {
                let end = self.ident_end(start + 1);
                self.token(TokenKind::Param, start, end)
            }
            _ => self.token(TokenKind::Punct, start, start + 1),
        }
    }

    fn variable(&mut self, start: usize) -> Token<'a> {
        let mut p = start + 1;
        if self.at(p) == b'@' {
            p += 1;
        }
        match self.at(p) {
            q @ (b'\'' | b'"' | b'`') => {
                let t = self.quoted_ident(p, q);
                let kind = if t.kind == TokenKind::QuotedIdent { TokenKind::Variable } else { t.kind };
                self.token(kind, start, t.end())
            }
            c if is_ident_char(c) => {
                let mut end = p;
                while is_ident_char(self.at(end)) || self.at(end) == b'.' {
                    end += 1;
                }
                self.token(TokenKind::Variable, start, end)
            }
            _ => self.token(TokenKind::Operator, start, start + 1),
        }
    }

    fn ident_end(&self, p: usize) -> usize {
        let rest = self.bytes().get(p..).unwrap_or(&[]);
        p + rest.iter().position(|&c| !is_ident_char(c)).unwrap_or(rest.len())
    }

    fn word_or_prefixed(&mut self, start: usize) -> Token<'a> {
        let next = self.at(start + 1);
        // Only a quote or `&` after the first letter can make a prefixed string or identifier.
        if matches!(next, b'\'' | b'&') {
            if let Some(t) = self.prefixed(start, next) {
                return t;
            }
        }
        // The first byte is an identifier start, so the word runs at least to the second.
        let end = self.ident_end(start + 1);
        if self.mysql() && self.at(start) == b'_' {
            if let Some(t) = self.introducer(start, end) {
                return t;
            }
        }
        let kind = literal_word_kind(self.bytes().get(start..end).unwrap_or_default());
        self.token(kind, start, end)
    }

    /// A string or quoted identifier whose prefix (`E'`, `B'`, `X'`, `N'`, PostgreSQL `U&'`,
    /// `U&"`) starts at `start`, where `next` follows the first letter.
    fn prefixed(&mut self, start: usize, next: u8) -> Option<Token<'a>> {
        let b = self.at(start) | 0x20;
        let pg = !self.mysql();
        if next == b'\'' {
            let kind = match b {
                b'e' if pg => StringKind::Escaped,
                b'b' => StringKind::Bit,
                b'x' => StringKind::Hex,
                b'n' => self.default_string_kind(),
                _ => return None,
            };
            return Some(self.quoted(start, start + 1, b'\'', kind));
        }
        if pg && b == b'u' {
            match self.at(start + 2) {
                b'\'' => return Some(self.quoted(start, start + 2, b'\'', StringKind::Unicode)),
                b'"' => {
                    let t = self.quoted_ident(start + 2, b'"');
                    return Some(self.token(t.kind, start, t.end()));
                }
                _ => {}
            }
        }
        None
    }

    /// MySQL `_charset'..'` (always) or `_charset '..'` (known character sets only).
    fn introducer(&mut self, start: usize, end: usize) -> Option<Token<'a>> {
        let mut q = end;
        if !matches!(self.at(q), b'\'' | b'"') {
            let name = self.src.get(start + 1..end)?;
            if !MYSQL_CHARSETS.iter().any(|c| c.eq_ignore_ascii_case(name)) {
                return None;
            }
            while matches!(self.at(q), b' ' | b'\t' | b'\n' | b'\r') {
                q += 1;
            }
        }
        match self.at(q) {
            b'\'' => Some(self.quoted(start, q, b'\'', self.mysql_string_kind())),
            b'"' if !self.mode.ansi_quotes => Some(self.quoted(start, q, b'"', self.mysql_string_kind())),
            _ => None,
        }
    }

    fn operator(&mut self, start: usize) -> Token<'a> {
        let end = if self.mysql() { self.mysql_operator_end(start) } else { self.pg_operator_end(start) };
        self.token(TokenKind::Operator, start, end)
    }

    fn mysql_operator_end(&self, start: usize) -> usize {
        let rest = self.bytes().get(start..).unwrap_or(&[]);
        for op in MYSQL_OPERATORS {
            if rest.starts_with(op.as_bytes()) {
                return start + op.len();
            }
        }
        start + 1
    }

    /// PostgreSQL operator rule: a maximal run of operator characters, cut before `--` or `/*`,
    /// and a trailing `+`/`-` is dropped unless the operator contains `~ ! @ # % ^ & | \` ?`.
    fn pg_operator_end(&self, start: usize) -> usize {
        let mut p = start;
        // `?` only continues an operator that began with it (`?|`), so `id=?` stays `=` then `?`.
        let question = self.at(start) == b'?';
        while is_op_char(self.at(p)) && (question || self.at(p) != b'?') {
            let two = (self.at(p), self.at(p + 1));
            if p > start && (two == (b'-', b'-') || two == (b'/', b'*')) {
                break;
            }
            p += 1;
        }
        let run = self.bytes().get(start..p).unwrap_or(&[]);
        let special = run.iter().any(|&c| is(c, Class::OpSpecial));
        let mut end = p;
        while !special && end > start + 1 && matches!(self.at(end - 1), b'+' | b'-') {
            end -= 1;
        }
        end
    }
}

impl<'a> Iterator for Lexer<'a> {
    type Item = Token<'a>;

    fn next(&mut self) -> Option<Token<'a>> {
        match self.next_token() {
            Some(t) => Some(t),
            None => {
                // An executable comment left open at the end: report it once.
                let open = self.exec_comment.take()?;
                Some(Token { kind: TokenKind::Unterminated, text: self.src.get(open..open + 3)?, start: open })
            }
        }
    }
}

/// False only when the first token of `sql` is neither a comment (in either dialect), nor a
/// semicolon (callers that skip empty statements see the word after it), nor a word that begins
/// with one of `words` (ASCII, any case). A few instructions instead of a lexer
/// start, for callers that look on every statement for the few that begin with a given word
/// (`BEGIN`, `SET`, `DISCARD`...).
pub fn may_start_with(sql: &str, words: &[&str]) -> bool {
    let bytes = sql.as_bytes();
    let Some(at) = bytes.iter().position(|&b| !is(b, Class::Space)) else { return false };
    let rest = bytes.get(at..).unwrap_or_default();
    matches!(rest.first(), Some(b'-' | b'/' | b'#' | b';'))
        || words.iter().any(|w| rest.get(..w.len()).is_some_and(|h| h.eq_ignore_ascii_case(w.as_bytes())))
}

/// Longest first, so a prefix never shadows a longer operator.
const MYSQL_OPERATORS: &[&str] = &["<=>", "->>", "<=", ">=", "<>", "!=", "||", "&&", "<<", ">>", "->", ":="];

/// Character sets MySQL accepts as `_name 'string'` introducers with whitespace in between.
const MYSQL_CHARSETS: &[&str] = &[
    "utf8mb4", "utf8mb3", "utf8", "latin1", "binary", "ascii", "ucs2", "utf16", "utf16le", "utf32", "big5", "gbk",
    "gb2312", "gb18030", "sjis", "ujis", "euckr", "cp1250", "cp1251", "cp1252", "cp932", "latin2", "koi8r",
];

/// Byte classes, bits of [`CLASS`]: one table lookup instead of a chain of range tests (the
/// lexer runs several times over every statement).
#[derive(Clone, Copy)]
#[repr(u8)]
enum Class {
    IdentStart = 1,
    /// `IdentStart` plus digits.
    IdentNoDollar = 2,
    /// `IdentNoDollar` plus `$`.
    Ident = 4,
    /// The characters PostgreSQL and MySQL operators are made of.
    Op = 8,
    /// An operator character that keeps a PostgreSQL operator's trailing `+`/`-`.
    OpSpecial = 16,
    /// What the lexer skips between tokens.
    Space = 32,
}

const CLASS: [u8; 256] = classes();

const fn classes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut b = 0usize;
    while b < 256 {
        let c = b as u8;
        let start = c.is_ascii_alphabetic() || c == b'_' || c >= 0x80;
        let no_dollar = start || c.is_ascii_digit();
        let mut class = 0;
        if start {
            class |= Class::IdentStart as u8;
        }
        if no_dollar {
            class |= Class::IdentNoDollar as u8 | Class::Ident as u8;
        }
        if c == b'$' {
            class |= Class::Ident as u8;
        }
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c) {
            class |= Class::Space as u8;
        }
        t[b] = class;
        b += 1;
    }
    let ops = b"+-*/<>=~!@#%^&|`?";
    let mut i = 0;
    while i < ops.len() {
        t[ops[i] as usize] |= Class::Op as u8;
        i += 1;
    }
    let special = b"~!@#%^&|`?";
    let mut i = 0;
    while i < special.len() {
        t[special[i] as usize] |= Class::OpSpecial as u8;
        i += 1;
    }
    t
}

/// `NULL`, `TRUE`/`FALSE` or a plain word, told by length first and then by one compare of the
/// word's bytes with each letter's 0x20 bit set (exact: only `X`/`x` become `x`).
pub(crate) fn literal_word_kind(word: &[u8]) -> TokenKind {
    const fn le4(w: &[u8; 4]) -> u32 {
        u32::from_le_bytes(*w)
    }
    const NULL: u32 = le4(b"null");
    const TRUE: u32 = le4(b"true");
    const FALS: u32 = le4(b"fals");
    const LOWER: u32 = 0x2020_2020;
    let Some(head) = word.get(..4).and_then(|h| <[u8; 4]>::try_from(h).ok()).map(|h| le4(&h) | LOWER) else {
        return TokenKind::Word;
    };
    match (word.len(), head) {
        (4, NULL) => TokenKind::Null,
        (4, TRUE) => TokenKind::Bool,
        (5, FALS) if word.get(4).is_some_and(|&e| e | 0x20 == b'e') => TokenKind::Bool,
        _ => TokenKind::Word,
    }
}

fn is(b: u8, class: Class) -> bool {
    CLASS[usize::from(b)] & class as u8 != 0
}

/// What the lexer skips between tokens.
pub(crate) fn is_space(b: u8) -> bool {
    is(b, Class::Space)
}

pub(crate) fn is_ident_start(b: u8) -> bool {
    is(b, Class::IdentStart)
}

pub(crate) fn is_ident_char(b: u8) -> bool {
    is(b, Class::Ident)
}

fn is_ident_char_no_dollar(b: u8) -> bool {
    is(b, Class::IdentNoDollar)
}

pub(crate) fn is_op_char(b: u8) -> bool {
    is(b, Class::Op)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use StringKind as S;
    use TokenKind as K;

    fn lex(sql: &str, d: Dialect) -> Vec<(TokenKind, &str)> {
        Lexer::new(sql, d).map(|t| (t.kind, t.text)).collect()
    }

    fn pg(sql: &str) -> Vec<(TokenKind, &str)> {
        lex(sql, Dialect::Postgres)
    }

    fn my(sql: &str) -> Vec<(TokenKind, &str)> {
        lex(sql, Dialect::MySql)
    }

    #[test]
    fn words_identifiers_and_punctuation() {
        let want = vec![
            (K::Word, "SELECT"),
            (K::Word, "a"),
            (K::Comma, ","),
            (K::Word, "t"),
            (K::Dot, "."),
            (K::Word, "b$1"),
            (K::Word, "FROM"),
            (K::Word, "tbl_ü"),
            (K::Semicolon, ";"),
        ];
        assert_eq!(pg("SELECT a, t.b$1 FROM tbl_ü;"), want);
        assert_eq!(my("SELECT a, t.b$1 FROM tbl_ü;"), want);
        assert!(Lexer::new("x", Dialect::Postgres).next().is_some_and(|t| t.is_word("X")));
    }

    #[test]
    fn quoted_identifiers() {
        assert_eq!(pg(r#""My ""Col""""#), vec![(K::QuotedIdent, r#""My ""Col""""#)]);
        assert_eq!(pg(r#"U&"d\0061t""#), vec![(K::QuotedIdent, r#"U&"d\0061t""#)]);
        assert_eq!(my("`a``b`"), vec![(K::QuotedIdent, "`a``b`")]);
        assert_eq!(my(r#""x""#), vec![(K::String(S::Escaped), r#""x""#)]);
        let ansi: Vec<_> = Lexer::new(r#""x""#, Dialect::MySql).ansi_quotes(true).map(|t| t.kind).collect();
        assert_eq!(ansi, vec![K::QuotedIdent]);
        assert_eq!(pg("`a`"), vec![(K::Operator, "`"), (K::Word, "a"), (K::Operator, "`")]);
    }

    #[test]
    fn numbers() {
        for d in [Dialect::Postgres, Dialect::MySql] {
            for n in ["0", "42", "3.14", ".5", "1.", "1e10", "1.5E-3", "2e+7", "0x1F", "0b101"] {
                assert_eq!(lex(n, d), vec![(K::Number, n)], "{n} in {d:?}");
            }
        }
        assert_eq!(pg("1_000_000"), vec![(K::Number, "1_000_000")]);
        assert_eq!(pg("0o17"), vec![(K::Number, "0o17")]);
        assert_eq!(pg("1e"), vec![(K::Number, "1"), (K::Word, "e")]);
        assert_eq!(my("1e"), vec![(K::Word, "1e")]);
        assert_eq!(my("1st_col"), vec![(K::Word, "1st_col")]);
        assert_eq!(pg("1..5"), vec![(K::Number, "1"), (K::Dot, "."), (K::Number, ".5")]);
    }

    #[test]
    fn postgres_strings() {
        assert_eq!(pg("'it''s'"), vec![(K::String(S::Standard), "'it''s'")]);
        assert_eq!(pg(r"'a\'"), vec![(K::String(S::Standard), r"'a\'")]);
        assert_eq!(pg(r"E'a\'b'"), vec![(K::String(S::Escaped), r"E'a\'b'")]);
        assert_eq!(pg(r"e'\\'"), vec![(K::String(S::Escaped), r"e'\\'")]);
        assert_eq!(pg("$$a'b$$"), vec![(K::String(S::Dollar), "$$a'b$$")]);
        assert_eq!(pg("$fn$ $x$ $$ $fn$"), vec![(K::String(S::Dollar), "$fn$ $x$ $$ $fn$")]);
        assert_eq!(pg("B'0101'"), vec![(K::String(S::Bit), "B'0101'")]);
        assert_eq!(pg("X'1F'"), vec![(K::String(S::Hex), "X'1F'")]);
        assert_eq!(pg("N'x'"), vec![(K::String(S::Standard), "N'x'")]);
        assert_eq!(pg(r"U&'\0041'"), vec![(K::String(S::Unicode), r"U&'\0041'")]);
        assert_eq!(pg("e 'x'"), vec![(K::Word, "e"), (K::String(S::Standard), "'x'")]);
    }

    #[test]
    fn mysql_strings() {
        assert_eq!(my(r"'a\'b'"), vec![(K::String(S::Escaped), r"'a\'b'")]);
        assert_eq!(my("'a''b'"), vec![(K::String(S::Escaped), "'a''b'")]);
        assert_eq!(my(r#""a\"b""#), vec![(K::String(S::Escaped), r#""a\"b""#)]);
        assert_eq!(my("_utf8mb4'x'"), vec![(K::String(S::Escaped), "_utf8mb4'x'")]);
        assert_eq!(my("_latin1 'x'"), vec![(K::String(S::Escaped), "_latin1 'x'")]);
        assert_eq!(my("_col 'x'"), vec![(K::Word, "_col"), (K::String(S::Escaped), "'x'")]);
        assert_eq!(my("X'4142'"), vec![(K::String(S::Hex), "X'4142'")]);
        assert_eq!(my("b'01'"), vec![(K::String(S::Bit), "b'01'")]);
        assert_eq!(my("E'x'"), vec![(K::Word, "E"), (K::String(S::Escaped), "'x'")]);
        assert_eq!(my("$$"), vec![(K::Error, "$"), (K::Error, "$")]);
    }

    #[test]
    fn comments() {
        assert_eq!(pg("a -- c\nb"), vec![(K::Word, "a"), (K::Comment, "-- c"), (K::Word, "b")]);
        assert_eq!(pg("a--c"), vec![(K::Word, "a"), (K::Comment, "--c")]);
        assert_eq!(my("a--c"), vec![(K::Word, "a"), (K::Operator, "-"), (K::Operator, "-"), (K::Word, "c")]);
        assert_eq!(my("a-- c"), vec![(K::Word, "a"), (K::Comment, "-- c")]);
        assert_eq!(my("a--"), vec![(K::Word, "a"), (K::Comment, "--")]);
        assert_eq!(my("# x\ny"), vec![(K::Comment, "# x"), (K::Word, "y")]);
        assert_eq!(pg("/* a /* b */ c */x"), vec![(K::Comment, "/* a /* b */ c */"), (K::Word, "x")]);
        assert_eq!(
            my("/* a /* b */ c */"),
            vec![(K::Comment, "/* a /* b */"), (K::Word, "c"), (K::Operator, "*"), (K::Operator, "/")]
        );
        assert_eq!(
            my("SELECT /*!40101 SQL_NO_CACHE */ 1"),
            vec![(K::Word, "SELECT"), (K::Word, "SQL_NO_CACHE"), (K::Number, "1")]
        );
        assert_eq!(my("/*+ BKA(t) */ x"), vec![(K::Comment, "/*+ BKA(t) */"), (K::Word, "x")]);
        assert_eq!(pg("/*! x */"), vec![(K::Comment, "/*! x */")]);
        // Lone `*` and `/` inside a body, and one at its very end, neither end nor open one.
        assert_eq!(pg("/* a*b / c * / d **/x"), vec![(K::Comment, "/* a*b / c * / d **/"), (K::Word, "x")]);
        assert_eq!(pg("/*/ x */y"), vec![(K::Comment, "/*/ x */"), (K::Word, "y")]);
        assert_eq!(pg("/* /* x */ *"), vec![(K::Unterminated, "/* /* x */ *")]);
        assert_eq!(my("/* x *"), vec![(K::Unterminated, "/* x *")]);
    }

    #[test]
    fn operators() {
        assert_eq!(pg("a<=b"), vec![(K::Word, "a"), (K::Operator, "<="), (K::Word, "b")]);
        assert_eq!(pg("x=-1"), vec![(K::Word, "x"), (K::Operator, "="), (K::Operator, "-"), (K::Number, "1")]);
        assert_eq!(pg("a @> b"), vec![(K::Word, "a"), (K::Operator, "@>"), (K::Word, "b")]);
        assert_eq!(pg("a::int"), vec![(K::Word, "a"), (K::Operator, "::"), (K::Word, "int")]);
        assert_eq!(pg("j->>'k'")[1], (K::Operator, "->>"));
        assert_eq!(pg("a*/*c*/b"), vec![(K::Word, "a"), (K::Operator, "*"), (K::Comment, "/*c*/"), (K::Word, "b")]);
        assert_eq!(pg("j ?| a")[1], (K::Operator, "?|"));
        assert_eq!(my("a<=>b")[1], (K::Operator, "<=>"));
        assert_eq!(my("a=-1")[1], (K::Operator, "="));
        assert_eq!(my("@a := 1")[1], (K::Operator, ":="));
        assert_eq!(pg("a[1:2]")[3], (K::Punct, ":"));
        assert_eq!(pg("\\x"), vec![(K::Error, "\\"), (K::Word, "x")]);
    }

    #[test]
    fn parameters_variables_and_literal_words() {
        assert_eq!(
            pg("$1 $23 ? :name"),
            vec![(K::Param, "$1"), (K::Param, "$23"), (K::Param, "?"), (K::Param, ":name")]
        );
        assert_eq!(pg("id=?"), vec![(K::Word, "id"), (K::Operator, "="), (K::Param, "?")]);
        assert_eq!(my("?"), vec![(K::Param, "?")]);
        assert_eq!(
            my("@x @@session.sql_mode @'q r'"),
            vec![(K::Variable, "@x"), (K::Variable, "@@session.sql_mode"), (K::Variable, "@'q r'"),]
        );
        assert_eq!(
            pg("TRUE false Null nullable"),
            vec![(K::Bool, "TRUE"), (K::Bool, "false"), (K::Null, "Null"), (K::Word, "nullable"),]
        );
    }

    #[test]
    fn unterminated_constructs_are_tokens() {
        assert_eq!(pg("'abc"), vec![(K::Unterminated, "'abc")]);
        assert_eq!(pg(r"E'ab\'"), vec![(K::Unterminated, r"E'ab\'")]);
        assert_eq!(my(r"'ab\"), vec![(K::Unterminated, r"'ab\")]);
        assert_eq!(pg("$q$ body"), vec![(K::Unterminated, "$q$ body")]);
        assert_eq!(pg("/* /* */"), vec![(K::Unterminated, "/* /* */")]);
        assert_eq!(pg("\"id"), vec![(K::Unterminated, "\"id")]);
        assert_eq!(my("`id"), vec![(K::Unterminated, "`id")]);
        assert_eq!(my("/*! SELECT 1"), vec![(K::Word, "SELECT"), (K::Number, "1"), (K::Unterminated, "/*!")]);
    }

    #[test]
    fn spans_point_into_the_input() {
        let sql = "SELECT  'x' ,\n $1";
        for t in Lexer::new(sql, Dialect::Postgres) {
            assert_eq!(sql.get(t.span()), Some(t.text));
        }
    }

    proptest! {
        #[test]
        fn may_start_with_never_misses_a_first_word_or_comment(
            s in "[ \t\n]{0,2}([-/#*'\"`$(;@_a-zA-Z0-9]|--|/\\*|be|BEGIN|set|\u{a0}|\u{e9}){0,6}",
            words in proptest::collection::vec("[a-zA-Z]{1,3}|begin|SET", 0..3),
        ) {
            let words: Vec<&str> = words.iter().map(String::as_str).collect();
            for d in [Dialect::Postgres, Dialect::MySql] {
                let first = Lexer::new(&s, d).next();
                let named = first.is_some_and(|t| {
                    t.kind == TokenKind::Comment
                        || (t.kind == TokenKind::Word
                            && words.iter().any(|w| t.text.get(..w.len()).is_some_and(|h| h.eq_ignore_ascii_case(w))))
                });
                if named {
                    prop_assert!(may_start_with(&s, &words), "{:?} {:?} {:?}", d, s, words);
                }
            }
        }

        #[test]
        fn never_panics_and_spans_cover_input(s in "\\PC{0,64}|[-'\"`$/*#!?:@_a-zA-Z0-9 \\\\\n.eExX&|]{0,64}") {
            for d in [Dialect::Postgres, Dialect::MySql] {
                let mut last = 0;
                for t in Lexer::new(&s, d) {
                    prop_assert!(s.get(t.span()).is_some());
                    prop_assert!(!t.text.is_empty());
                    if t.kind != K::Unterminated {
                        prop_assert!(t.start >= last);
                        last = t.end();
                    }
                }
            }
        }
    }
}
