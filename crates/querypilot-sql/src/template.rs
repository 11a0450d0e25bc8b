//! Literal-slot templates for translation rules: a statement is split into its shape (the
//! [`Fingerprint`]) and its ordered literal slots, so a rule written for one example statement
//! ("this PostgreSQL query becomes that MySQL query") applies to every statement of that shape.
//!
//! [`TranslationTemplate::compile`] maps each literal of the translated example to the literal of
//! the original example with the same value, rejecting mappings that would be guesses (two equal
//! original literals, a changed kind). [`TranslationTemplate::apply`] substitutes the incoming
//! statement's values, re-quoted for the target dialect from their decoded values (never pasted
//! source text), and then checks that the result has the translated example's fingerprint, so a
//! value can never change the statement's structure. Uses [`super::fingerprint`]'s normalizer, so
//! slots and fingerprint come from one pass.

mod array;
mod late;

pub use late::{InlineError, LateTranslation, ParamValue};

use super::fingerprint::{fingerprint, normalize, HashSink, Normalizer, Sink};
use super::lexer::{StringKind, Token, TokenKind};
use super::{fingerprint::Fingerprint, Dialect};
use std::ops::Range;

/// What a literal slot holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum LiteralKind {
    /// A number, sign included.
    Number,
    /// A character string (any quoting form).
    String,
    /// `TRUE` / `FALSE`.
    Bool,
    /// `NULL` used as a value.
    Null,
    /// A `X'..'` hex or `B'..'` bit string.
    Bits,
    /// A bind parameter (`$1`, `?`, `:name`); its value arrives separately.
    Param,
    /// A collapsed `IN (..)` / `ARRAY[..]` list with this many items.
    InList(usize),
}

/// One literal slot of a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Literal {
    /// Kind of the slot.
    pub kind: LiteralKind,
    /// The source text of the slot (for lists, from the first item to the last).
    pub text: String,
    /// The decoded value used for matching and re-quoting (string contents without quotes or
    /// escapes, canonical number/bits text, `true`/`false`/`null`); `None` if it cannot be decoded
    /// (PostgreSQL `U&` strings, escapes producing invalid UTF-8) and for lists.
    pub value: Option<String>,
    /// Byte range of the slot in the statement.
    pub span: Range<usize>,
    /// The items of an [`LiteralKind::InList`] slot; empty otherwise.
    pub items: Vec<Literal>,
}

impl Literal {
    /// How many positional (`?`) parameters the slot holds (an IN list may hold several).
    pub fn positional_params(&self) -> usize {
        let one = |l: &Literal| usize::from(l.kind == LiteralKind::Param && l.value.as_deref() == Some("?"));
        if self.items.is_empty() {
            one(self)
        } else {
            self.items.iter().map(one).sum()
        }
    }
}

/// A statement split into its shape and its literal slots, in source order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parameterized {
    /// Same value as [`fingerprint`] of the statement.
    pub fingerprint: Fingerprint,
    /// Slots in source order; rows of a collapsed `VALUES` list all contribute their slots.
    pub literals: Vec<Literal>,
}

/// Split `sql` into fingerprint and literal slots (an `IN` list is one slot holding its items).
pub fn parameterize(sql: &str, dialect: Dialect) -> Parameterized {
    parameterize_in(sql, dialect, super::mode::LexMode::default())
}

/// [`parameterize`] of `sql` lexed as a session in `mode` has its strings read (#33: a bridged
/// MySQL session told NO_BACKSLASH_ESCAPES writes `'a\'` for the value `a\`).
pub fn parameterize_in(sql: &str, dialect: Dialect, mode: super::mode::LexMode) -> Parameterized {
    let mut c = Collector { src: sql, dialect, hash: HashSink::default(), literals: Vec::new(), list: None };
    Normalizer::in_mode(sql, dialect, mode, &mut c).run();
    Parameterized { fingerprint: c.hash.finish(), literals: c.literals }
}

struct Collector<'a> {
    src: &'a str,
    dialect: Dialect,
    hash: HashSink,
    literals: Vec<Literal>,
    list: Option<Vec<Literal>>,
}

impl<'a> Sink<'a> for Collector<'a> {
    fn text(&mut self, s: &str, fold: bool) {
        self.hash.text(s, fold);
    }

    fn scalar(&mut self, sign: Option<Token<'a>>, tok: Token<'a>) {
        let lit = scalar_literal(self.src, self.dialect, sign, tok);
        match &mut self.list {
            Some(items) => items.push(lit),
            None => self.literals.push(lit),
        }
    }

    fn list(&mut self, open: bool) {
        if open {
            self.list = Some(Vec::new());
            return;
        }
        let Some(items) = self.list.take() else { return };
        let span = match (items.first(), items.last()) {
            (Some(f), Some(l)) => f.span.start..l.span.end,
            _ => return,
        };
        let text = self.src.get(span.clone()).unwrap_or("").to_owned();
        self.literals.push(Literal { kind: LiteralKind::InList(items.len()), text, value: None, span, items });
    }
}

fn scalar_literal(src: &str, dialect: Dialect, sign: Option<Token<'_>>, tok: Token<'_>) -> Literal {
    let span = sign.map_or(tok.start, |s| s.start)..tok.end();
    let text = src.get(span.clone()).unwrap_or(tok.text).to_owned();
    let (kind, value) = match tok.kind {
        TokenKind::Number => {
            let minus = if sign.is_some_and(|s| s.text == "-") { "-" } else { "" };
            (LiteralKind::Number, Some(format!("{minus}{}", tok.text.to_ascii_lowercase())))
        }
        TokenKind::String(k @ (StringKind::Bit | StringKind::Hex)) => (LiteralKind::Bits, canonical_bits(tok.text, k)),
        TokenKind::String(k) => (LiteralKind::String, decode_string(tok.text, k, dialect)),
        TokenKind::Bool => (LiteralKind::Bool, Some(tok.text.to_ascii_lowercase())),
        TokenKind::Null => (LiteralKind::Null, Some("null".to_owned())),
        _ => (LiteralKind::Param, Some(tok.text.to_owned())),
    };
    Literal { kind, text, value, span, items: Vec::new() }
}

/// `x'1F'` → `X'1f'`; `b'01'` → `B'01'`; `None` if a digit is out of range.
fn canonical_bits(text: &str, kind: StringKind) -> Option<String> {
    let body = text.get(2..text.len().checked_sub(1)?)?;
    let (prefix, ok): (char, fn(char) -> bool) = match kind {
        StringKind::Hex => ('X', |c| c.is_ascii_hexdigit()),
        _ => ('B', |c| c == '0' || c == '1'),
    };
    body.chars().all(ok).then(|| format!("{prefix}'{}'", body.to_ascii_lowercase()))
}

/// The contents of a string literal token with quoting and escapes removed.
fn decode_string(text: &str, kind: StringKind, dialect: Dialect) -> Option<String> {
    if kind == StringKind::Dollar {
        let tag_end = text.get(1..)?.find('$')? + 2;
        return text.get(tag_end..text.len().checked_sub(tag_end)?).map(str::to_owned);
    }
    if kind == StringKind::Unicode {
        return None;
    }
    let open = text.find(['\'', '"'])?;
    let quote = text.get(open..=open)?.chars().next()?;
    let body = text.get(open + 1..text.len().checked_sub(1)?)?;
    let mut out: Vec<u8> = Vec::with_capacity(body.len());
    let bytes = body.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        i += 1;
        if b == quote as u8 && bytes.get(i) == Some(&b) {
            i += 1;
            out.push(b);
        } else if b == b'\\' && kind == StringKind::Escaped {
            i = match dialect {
                Dialect::Postgres => pg_escape(bytes, i, &mut out)?,
                Dialect::MySql => mysql_escape(bytes, i, &mut out),
            };
        } else {
            out.push(b);
        }
    }
    String::from_utf8(out).ok()
}

/// One MySQL backslash escape at `i` (just after the backslash); returns the next index.
fn mysql_escape(bytes: &[u8], i: usize, out: &mut Vec<u8>) -> usize {
    let Some(&c) = bytes.get(i) else { return i };
    match c {
        b'0' => out.push(0),
        b'b' => out.push(8),
        b'n' => out.push(b'\n'),
        b'r' => out.push(b'\r'),
        b't' => out.push(b'\t'),
        b'Z' => out.push(0x1a),
        // `\%` and `\_` keep their backslash (they are LIKE escapes).
        b'%' | b'_' => out.extend_from_slice(&[b'\\', c]),
        _ => out.push(c),
    }
    i + 1
}

/// One PostgreSQL `E''` escape at `i` (just after the backslash); returns the next index.
fn pg_escape(bytes: &[u8], i: usize, out: &mut Vec<u8>) -> Option<usize> {
    let c = *bytes.get(i)?;
    let digits = |from: usize, max: usize, radix: u32| {
        let run =
            bytes.get(from..).unwrap_or(&[]).iter().take(max).take_while(|d| (**d as char).is_digit(radix)).count();
        let s = std::str::from_utf8(bytes.get(from..from + run)?).ok()?;
        u32::from_str_radix(s, radix).ok().map(|v| (v, from + run))
    };
    let simple = |b| {
        Some(match b {
            b'b' => 8,
            b'f' => 12,
            b'n' => b'\n',
            b'r' => b'\r',
            b't' => b'\t',
            _ => return None,
        })
    };
    if let Some(b) = simple(c) {
        out.push(b);
        return Some(i + 1);
    }
    let (code, next, unicode) = match c {
        b'0'..=b'7' => digits(i, 3, 8).map(|(v, n)| (v, n, false))?,
        b'x' => digits(i + 1, 2, 16).map(|(v, n)| (v, n, false))?,
        b'u' => digits(i + 1, 4, 16).filter(|(_, n)| *n == i + 5).map(|(v, n)| (v, n, true))?,
        b'U' => digits(i + 1, 8, 16).filter(|(_, n)| *n == i + 9).map(|(v, n)| (v, n, true))?,
        _ => {
            out.push(c);
            return Some(i + 1);
        }
    };
    if unicode {
        let mut buf = [0u8; 4];
        out.extend_from_slice(char::from_u32(code)?.encode_utf8(&mut buf).as_bytes());
    } else {
        out.push(u8::try_from(code).ok()?);
    }
    Some(next)
}

/// Why a translation template cannot be compiled. Positions are 1-based ordinals of the
/// translated statement's literals; offsets are byte offsets in the translated text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TemplateError {
    /// The value appears more than once in the original, so which one it stands for is a guess.
    #[error("translated literal #{position} `{text}` (byte {offset}) matches {count} literals of the original statement; make the example values distinct")]
    Ambiguous {
        /// Ordinal of the translated literal.
        position: usize,
        /// Byte offset in the translated text.
        offset: usize,
        /// Source text of the literal.
        text: String,
        /// How many original literals have this value.
        count: usize,
    },
    /// The value appears in the original with another kind (or inside an IN list).
    #[error("translated literal #{position} `{text}` (byte {offset}) is a {to:?} but original literal #{original} `{original_text}` is a {from:?}")]
    KindChanged {
        /// Ordinal of the translated literal.
        position: usize,
        /// Byte offset in the translated text.
        offset: usize,
        /// Source text of the literal.
        text: String,
        /// Ordinal of the original literal (of its list, for a list item).
        original: usize,
        /// Source text of the original literal.
        original_text: String,
        /// Kind in the original.
        from: LiteralKind,
        /// Kind in the translation.
        to: LiteralKind,
    },
}

/// Where a translated literal's value comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SlotSource {
    /// The original statement's slot with this 0-based index.
    Original(usize),
    /// The original's string slot with this 0-based index, holding a JSON array of scalars: the
    /// translated literal is a list whose items are that array's (see [`array`]).
    JsonArray(usize),
    /// Nothing: the translated text is kept as is.
    Constant,
}

/// One translated literal and where its value comes from, for the admin API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SlotMapping {
    /// Kind of the translated literal.
    pub kind: LiteralKind,
    /// Its text in the translated example.
    pub text: String,
    /// Byte range in the translated example.
    pub span: Range<usize>,
    /// The original slot it takes its value from, or constant.
    pub source: SlotSource,
}

/// What a template does, for the admin API.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TemplateDescription {
    /// Normalized original example (source dialect).
    pub original: String,
    /// Normalized translated example (target dialect).
    pub translated: String,
    /// The original example's slots.
    pub original_slots: Vec<Literal>,
    /// Every translated literal with its source, in translated order.
    pub mapping: Vec<SlotMapping>,
}

/// A statement rewritten by a template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Translated {
    /// The translated text.
    pub sql: String,
    /// When the translation moves or repeats positional `?` parameters: for each `?` of `sql`
    /// in order, the 0-based `?` parameter of the incoming statement it stands for. `None` when
    /// they appear once each in their order (or there are none).
    pub param_order: Option<Vec<u16>>,
    /// For each literal written into `sql`, in its order: the client's literal as written and
    /// the text it became (for the dry-run: which client literal lands where).
    pub placed: Vec<(String, String)>,
}

/// A compiled translation rule: original shape → translated text with value holes.
#[derive(Debug, Clone)]
pub struct TranslationTemplate {
    source: Dialect,
    target: Dialect,
    original: Parameterized,
    original_sql: String,
    translated_sql: String,
    translated_fingerprint: Fingerprint,
    mapping: Vec<SlotMapping>,
}

impl TranslationTemplate {
    /// Compile a rule from an example statement and its translation.
    pub fn compile(
        original_sql: &str,
        translated_sql: &str,
        source: Dialect,
        target: Dialect,
    ) -> Result<TranslationTemplate, TemplateError> {
        let original = parameterize(original_sql, source);
        let translated = parameterize(translated_sql, target);
        let arrays = array::json_arrays(&original);
        let mut mapping = Vec::new();
        let mut skip = 0;
        for (j, lit) in translated.literals.iter().enumerate() {
            if skip > 0 {
                skip -= 1;
                continue;
            }
            if let Some((i, span, n)) =
                array::slot(&arrays, translated_sql, &translated.literals, j, mapping.len() + 1)?
            {
                mapping.push(SlotMapping {
                    kind: lit.kind,
                    text: translated_sql.get(span.clone()).unwrap_or("").to_owned(),
                    span,
                    source: SlotSource::JsonArray(i),
                });
                skip = n.saturating_sub(1);
                continue;
            }
            let whole = if lit.items.is_empty() { None } else { match_list(&original, lit) };
            match whole {
                Some(i) => mapping.push(slot(lit, SlotSource::Original(i))),
                None if !lit.items.is_empty() => {
                    for item in &lit.items {
                        let source = match_scalar(&original, item, mapping.len() + 1)?;
                        mapping.push(slot(item, source));
                    }
                }
                None => {
                    let source = match_scalar(&original, lit, mapping.len() + 1)?;
                    mapping.push(slot(lit, source));
                }
            }
        }
        Ok(TranslationTemplate {
            source,
            target,
            original,
            original_sql: original_sql.to_owned(),
            translated_sql: translated_sql.to_owned(),
            translated_fingerprint: translated.fingerprint,
            mapping,
        })
    }

    /// The fingerprint (in the source dialect) of statements this template applies to.
    pub fn fingerprint(&self) -> Fingerprint {
        self.original.fingerprint
    }

    /// Translate `incoming_sql` if it has the original's shape: its literal values are written into
    /// the translated text, quoted for the target dialect. `None` when the shape differs, a slot's
    /// kind differs, a value the translation does not use differs from the example (the translation
    /// may depend on it), or a value cannot be rendered safely.
    ///
    /// A bind parameter (`$1`, `?`, `:name`) stands for a value of any scalar kind, so a prepared
    /// statement matches a rule written with example values; the parameter itself is written into
    /// the translated text, so numbered and named parameters keep their meaning wherever the
    /// translation moves them. Positional `?` parameters are bound by position, so when the
    /// translation moves or repeats them [`Translated::param_order`] says which of the
    /// statement's parameters each `?` of the result binds; the caller must then reorder the
    /// values (or not translate). `None` when a `?` of the result has no parameter of the
    /// statement behind it or one of the statement's `?` is not used.
    pub fn apply(&self, incoming_sql: &str, dialect: Dialect) -> Option<Translated> {
        self.apply_in(incoming_sql, dialect, super::mode::LexMode::default())
    }

    /// [`TranslationTemplate::apply`] to a statement whose session reads strings in `mode`.
    pub fn apply_in(&self, incoming_sql: &str, dialect: Dialect, mode: super::mode::LexMode) -> Option<Translated> {
        self.apply_checked(incoming_sql, dialect, mode).ok().flatten()
    }

    /// [`Self::apply_in`], except that a statement of the original's shape whose value for a
    /// JSON-array slot is not a JSON array of scalars is refused (`Err`): it must not run
    /// untranslated elsewhere, nor be guessed at.
    pub fn apply_checked(
        &self,
        incoming_sql: &str,
        dialect: Dialect,
        mode: super::mode::LexMode,
    ) -> Result<Option<Translated>, SlotValueError> {
        if dialect != self.source {
            return Ok(None);
        }
        let incoming = parameterize_in(incoming_sql, dialect, mode);
        if incoming.fingerprint != self.original.fingerprint || incoming.literals.len() != self.original.literals.len()
        {
            return Ok(None);
        }
        let arrays = match self.parse_arrays(&incoming.literals)? {
            Some(a) => a,
            None => return Ok(None),
        };
        let used: Vec<usize> = self.mapping.iter().filter_map(|m| m.source.original()).collect();
        for (i, (now, was)) in incoming.literals.iter().zip(&self.original.literals).enumerate() {
            if !kind_fits(now.kind, was.kind) || (!used.contains(&i) && !same_value(now, was)) {
                return Ok(None);
            }
        }
        Ok(self.render_all(&incoming, &arrays, incoming_sql.len()))
    }

    /// The parsed items of each JSON-array slot of `incoming`, by original slot index; `None`
    /// when such a slot holds a parameter, whose value is not known here.
    fn parse_arrays(&self, incoming: &[Literal]) -> Result<Option<Arrays>, SlotValueError> {
        let mut out = Vec::new();
        for m in &self.mapping {
            let SlotSource::JsonArray(i) = m.source else { continue };
            let Some(lit) = incoming.get(i) else { return Ok(None) };
            let parsed = match (lit.kind, lit.value.as_deref()) {
                (LiteralKind::Param, _) => return Ok(None),
                (LiteralKind::String, Some(v)) => array::parse(v),
                (LiteralKind::String, None) => Err("its text cannot be decoded".to_owned()),
                (kind, _) => Err(format!("it is a {} literal, not a string", literal_word(kind))),
            };
            match parsed {
                Ok(items) => out.push((i, items)),
                Err(reason) => {
                    return Err(SlotValueError::NotJsonArray { position: i + 1, text: lit.text.clone(), reason })
                }
            }
        }
        Ok(Some(out))
    }

    /// Writes the translation with `incoming`'s values; `None` when a value cannot be written
    /// safely or the result would not have the translation's shape.
    fn render_all(&self, incoming: &Parameterized, arrays: &Arrays, hint: usize) -> Option<Translated> {
        let param_order = positional_order(&incoming.literals, &self.mapping)?;
        let mut out = String::with_capacity(self.translated_sql.len() + hint);
        // The translation with each array slot holding as many placeholder items as the value
        // has: what `out` must fingerprint as.
        let mut shape = String::new();
        let mut placed = Vec::new();
        let mut at = 0;
        for m in &self.mapping {
            let i = match m.source {
                SlotSource::Original(i) | SlotSource::JsonArray(i) => i,
                SlotSource::Constant => continue,
            };
            let between = self.translated_sql.get(at..m.span.start)?;
            out.push_str(between);
            shape.push_str(between);
            let start = out.len();
            match arrays.iter().find(|(k, _)| *k == i) {
                Some((_, items)) if matches!(m.source, SlotSource::JsonArray(_)) => {
                    array::render(&mut out, items, self.target)?;
                    shape.push_str(&vec!["0"; items.len()].join(", "));
                }
                _ => {
                    render(&mut out, incoming.literals.get(i)?, self.target)?;
                    shape.push_str(self.translated_sql.get(m.span.clone())?);
                }
            }
            placed.push((incoming.literals.get(i)?.text.clone(), out.get(start..)?.to_owned()));
            at = m.span.end;
        }
        let rest = self.translated_sql.get(at..)?;
        out.push_str(rest);
        shape.push_str(rest);
        // The structural guarantee: whatever the values were, the result has the translation's shape.
        let expected = if arrays.is_empty() { self.translated_fingerprint } else { fingerprint(&shape, self.target) };
        (fingerprint(&out, self.target) == expected).then_some(Translated { sql: out, param_order, placed })
    }

    /// What is likely wrong with this rule although it compiles: a literal of the original that
    /// no literal of the translation takes (the rule then applies only to that exact value),
    /// and a constant of the translation that looks like it came from a literal of the original
    /// (it will not follow the statement's values).
    pub fn warnings(&self) -> Vec<String> {
        let used: Vec<usize> = self.mapping.iter().filter_map(|m| m.source.original()).collect();
        let mut out = Vec::new();
        for (i, o) in self.original.literals.iter().enumerate() {
            if !used.contains(&i) && o.kind != LiteralKind::Param {
                out.push(format!(
                    "original literal #{} `{}` maps to no literal of the translation: the rule applies only to statements with exactly this value",
                    i + 1,
                    o.text
                ));
            }
        }
        for m in self.mapping.iter().filter(|m| m.source == SlotSource::Constant) {
            let words = |s: &str| -> Vec<String> {
                s.split(|c: char| !c.is_alphanumeric() && c != '.' && c != '_')
                    .filter(|w| !w.is_empty())
                    .map(str::to_owned)
                    .collect()
            };
            let mine = words(&m.text);
            let hit = self.original.literals.iter().enumerate().find(|(_, o)| {
                let theirs = words(o.value.as_deref().unwrap_or(&o.text));
                !mine.is_empty() && mine.iter().all(|w| theirs.contains(w))
            });
            if let Some((i, o)) = hit {
                out.push(format!(
                    "translated literal `{}` is a constant but looks like it came from original literal #{} `{}`: it will not follow the statement's values",
                    m.text,
                    i + 1,
                    o.text
                ));
            }
        }
        out
    }

    /// For a statement of the original's shape whose JSON-array slot is a parameter bound at
    /// execute (MySQL's `?` of a server-side prepared statement, PostgreSQL's `$n`): the
    /// translation is known only once the values arrive, so it is returned unbound
    /// ([`LateTranslation::bind`], [`LateTranslation::inline`] at each execute). `None` for every
    /// other statement, and when a parameter sits inside a list.
    pub fn apply_late(
        &self,
        incoming_sql: &str,
        dialect: Dialect,
        mode: super::mode::LexMode,
    ) -> Option<LateTranslation> {
        if dialect != self.source {
            return None;
        }
        let incoming = parameterize_in(incoming_sql, dialect, mode);
        let same = incoming.fingerprint == self.original.fingerprint
            && incoming.literals.len() == self.original.literals.len();
        // MySQL's `?` and PostgreSQL's `$n`: the parameters a client binds at execute.
        let is_q = |l: &Literal| {
            l.kind == LiteralKind::Param && l.value.as_deref().is_some_and(|v| late::bound_param(v, dialect).is_some())
        };
        let late_slot = self
            .mapping
            .iter()
            .any(|m| matches!(m.source, SlotSource::JsonArray(i) if incoming.literals.get(i).is_some_and(is_q)));
        let plain = incoming.literals.iter().all(|l| l.items.iter().all(|x| x.kind != LiteralKind::Param))
            && incoming.literals.iter().all(|l| l.kind != LiteralKind::Param || is_q(l));
        (same && late_slot && plain).then(|| LateTranslation { template: self.clone(), incoming })
    }

    /// Normalized texts and the slot mapping, for the admin API.
    pub fn describe(&self) -> TemplateDescription {
        TemplateDescription {
            original: normalize(&self.original_sql, self.source),
            translated: normalize(&self.translated_sql, self.target),
            original_slots: self.original.literals.clone(),
            mapping: self.mapping.clone(),
        }
    }
}

/// The parsed items of each JSON-array slot of a statement, by original slot index.
type Arrays = Vec<(usize, Vec<array::Item>)>;

impl SlotSource {
    /// The original slot this takes its value from.
    pub fn original(self) -> Option<usize> {
        match self {
            SlotSource::Original(i) | SlotSource::JsonArray(i) => Some(i),
            SlotSource::Constant => None,
        }
    }
}

/// A value the client sent for a slot that cannot be translated: the statement must not run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SlotValueError {
    /// The slot of a JSON-array translation does not hold a JSON array of scalars.
    #[error(
        "literal #{position} ({text}) must be a JSON array of scalars such as '[1,2]' for this translation: {reason}"
    )]
    NotJsonArray {
        /// 1-based ordinal of the statement's literal.
        position: usize,
        /// Its text as the client wrote it (shortened by the caller if it must be).
        text: String,
        /// Why it is not one.
        reason: String,
    },
}

fn literal_word(kind: LiteralKind) -> &'static str {
    match kind {
        LiteralKind::Number => "number",
        LiteralKind::String => "string",
        LiteralKind::Bool => "boolean",
        LiteralKind::Null => "NULL",
        LiteralKind::Bits => "bit-string",
        LiteralKind::Param => "parameter",
        LiteralKind::InList(_) => "list",
    }
}

/// Whether an incoming slot of kind `now` may fill the example's slot of kind `was`.
fn kind_fits(now: LiteralKind, was: LiteralKind) -> bool {
    match (now, was) {
        (LiteralKind::InList(_), LiteralKind::InList(_)) => true,
        // A parameter's value arrives at execute time and may be of any scalar kind.
        (LiteralKind::Param, w) => !matches!(w, LiteralKind::InList(_)),
        (a, b) => a == b,
    }
}

/// Which of the statement's `?` parameters each `?` of the translation binds, in translated
/// order; `Some(None)` when that is simply each of them once in their order (nothing to
/// reorder). `None` when the translation keeps a `?` of its own (no value would bind it), leaves
/// one of the statement's `?` out (its value would bind the next one) or has more `?` than a
/// prepared statement may.
fn positional_order(incoming: &[Literal], mapping: &[SlotMapping]) -> Option<Option<Vec<u16>>> {
    let counts: Vec<usize> = incoming.iter().map(Literal::positional_params).collect();
    let total: usize = counts.iter().sum();
    let mut order: Vec<u16> = Vec::with_capacity(total);
    for m in mapping {
        let i = match m.source {
            SlotSource::Original(i) | SlotSource::JsonArray(i) => i,
            SlotSource::Constant if m.kind == LiteralKind::Param && m.text == "?" => return None,
            SlotSource::Constant => continue,
        };
        let first: usize = counts.iter().take(i).sum();
        for p in first..first + counts.get(i).copied().unwrap_or(0) {
            order.push(u16::try_from(p).ok()?);
        }
    }
    if order.iter().copied().map(usize::from).eq(0..total) {
        return Some(None);
    }
    let mut used = vec![false; total];
    for &p in &order {
        *used.get_mut(usize::from(p))? = true;
    }
    (used.into_iter().all(|u| u) && u16::try_from(order.len()).is_ok()).then_some(Some(order))
}

fn slot(lit: &Literal, source: SlotSource) -> SlotMapping {
    SlotMapping { kind: lit.kind, text: lit.text.clone(), span: lit.span.clone(), source }
}

fn same_value(a: &Literal, b: &Literal) -> bool {
    match (&a.value, &b.value) {
        (Some(x), Some(y)) => x == y,
        (None, None) if a.items.is_empty() && b.items.is_empty() => a.text == b.text,
        _ => {
            a.items.len() == b.items.len()
                && !a.items.is_empty()
                && a.items.iter().zip(&b.items).all(|(x, y)| x.kind == y.kind && same_value(x, y))
        }
    }
}

/// A translated list that equals one original list as a whole.
fn match_list(original: &Parameterized, lit: &Literal) -> Option<usize> {
    let hits: Vec<usize> = (0..original.literals.len())
        .filter(|&i| original.literals.get(i).is_some_and(|o| !o.items.is_empty() && same_value(o, lit)))
        .collect();
    match hits.as_slice() {
        [one] => Some(*one),
        _ => None,
    }
}

/// The original slot a translated scalar stands for, constant if none, error if it is a guess.
fn match_scalar(original: &Parameterized, lit: &Literal, position: usize) -> Result<SlotSource, TemplateError> {
    // (slot index, is a list item, the literal)
    let mut hits: Vec<(usize, bool, &Literal)> = Vec::new();
    for (i, o) in original.literals.iter().enumerate() {
        if o.items.is_empty() {
            if same_value(o, lit) {
                hits.push((i, false, o));
            }
        } else {
            hits.extend(o.items.iter().filter(|x| same_value(x, lit)).map(|x| (i, true, x)));
        }
    }
    let (i, in_list, o) = match hits.as_slice() {
        [] => return Ok(SlotSource::Constant),
        [one] => *one,
        many => {
            return Err(TemplateError::Ambiguous {
                position,
                offset: lit.span.start,
                text: lit.text.clone(),
                count: many.len(),
            })
        }
    };
    if in_list || o.kind != lit.kind {
        let from = if in_list { original.literals.get(i).map_or(o.kind, |l| l.kind) } else { o.kind };
        return Err(TemplateError::KindChanged {
            position,
            offset: lit.span.start,
            text: lit.text.clone(),
            original: i + 1,
            original_text: o.text.clone(),
            from,
            to: lit.kind,
        });
    }
    Ok(SlotSource::Original(i))
}

/// Append `lit` as a literal of `target`; `None` if its value cannot be written safely.
fn render(out: &mut String, lit: &Literal, target: Dialect) -> Option<()> {
    if !lit.items.is_empty() {
        for (n, item) in lit.items.iter().enumerate() {
            if n > 0 {
                out.push_str(", ");
            }
            render(out, item, target)?;
        }
        return Some(());
    }
    let value = lit.value.as_deref()?;
    match lit.kind {
        LiteralKind::Number => {
            let ok = value.bytes().all(|b| b.is_ascii_digit() || matches!(b, b'-' | b'+' | b'.' | b'e'))
                && value.bytes().any(|b| b.is_ascii_digit());
            if !ok {
                return None;
            }
            // `a-` followed by `-5` would start a `--` comment.
            if value.starts_with('-') && out.ends_with('-') {
                out.push(' ');
            }
            out.push_str(value);
        }
        LiteralKind::String => quote_string(out, value, target)?,
        LiteralKind::Bool => out.push_str(if value == "true" { "TRUE" } else { "FALSE" }),
        LiteralKind::Null => out.push_str("NULL"),
        LiteralKind::Bits | LiteralKind::Param => {
            let ok = value.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'\'' | b'$' | b'?' | b':' | b'_'));
            if !ok {
                return None;
            }
            out.push_str(value);
        }
        LiteralKind::InList(_) => return None,
    }
    Some(())
}

/// PostgreSQL: a standard string with `''` doubling (standard_conforming_strings is on by default
/// since 9.1); NUL cannot be stored in text. MySQL: `''` doubling (safe even under
/// NO_BACKSLASH_ESCAPES) and backslashes escaped, NUL as `\0`.
fn quote_string(out: &mut String, value: &str, target: Dialect) -> Option<()> {
    out.push('\'');
    for c in value.chars() {
        match (c, target) {
            ('\'', _) => out.push_str("''"),
            ('\0', Dialect::Postgres) => return None,
            ('\0', Dialect::MySql) => out.push_str("\\0"),
            ('\\', Dialect::MySql) => out.push_str("\\\\"),
            _ => out.push(c),
        }
    }
    out.push('\'');
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mode::LexMode;
    use proptest::prelude::*;

    const PG: Dialect = Dialect::Postgres;
    const MY: Dialect = Dialect::MySql;

    fn compile(o: &str, t: &str, s: Dialect, d: Dialect) -> TranslationTemplate {
        match TranslationTemplate::compile(o, t, s, d) {
            Ok(t) => t,
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn apply_reads_strings_in_the_session_mode() {
        let t = compile("SELECT `id` FROM `a` WHERE v = 'x'", "SELECT id FROM b WHERE v = 'x'", MY, PG);
        let nbe = super::super::mode::LexMode { no_backslash_escapes: true, ..Default::default() };
        let out = t.apply_in(r#"SELECT `id` FROM `a` WHERE v = 'it''s "q" \ -- ü'"#, MY, nbe).map(|t| t.sql);
        assert_eq!(out.as_deref(), Some(r#"SELECT id FROM b WHERE v = 'it''s "q" \ -- ü'"#));
        let out = t.apply(r"SELECT `id` FROM `a` WHERE v = 'it\'s \\'", MY).map(|t| t.sql);
        assert_eq!(out.as_deref(), Some(r"SELECT id FROM b WHERE v = 'it''s \'"));
    }

    #[test]
    fn parameterize_slots() {
        let p = parameterize(
            "SELECT -1, 'it''s', E'a\\nb', $t$x$t$, TRUE, NULL, X'1F', $1 FROM t WHERE a IN (1, 'b') AND c IS NULL",
            PG,
        );
        assert_eq!(p.fingerprint, fingerprint("SELECT 1, 2, 3, 4, 5, 6, 7, 8 FROM t WHERE a IN (1) AND c IS NULL", PG));
        let got: Vec<_> = p.literals.iter().map(|l| (l.kind, l.value.as_deref())).collect();
        assert_eq!(
            got,
            vec![
                (LiteralKind::Number, Some("-1")),
                (LiteralKind::String, Some("it's")),
                (LiteralKind::String, Some("a\nb")),
                (LiteralKind::String, Some("x")),
                (LiteralKind::Bool, Some("true")),
                (LiteralKind::Null, Some("null")),
                (LiteralKind::Bits, Some("X'1f'")),
                (LiteralKind::Param, Some("$1")),
                (LiteralKind::InList(2), None),
            ]
        );
        assert_eq!(p.literals.last().map(|l| l.text.as_str()), Some("1, 'b'"));
        let m = parameterize(r#"SELECT 'a\'b\\c', "d""e", _utf8mb4'\%', 'x\0' FROM t"#, MY);
        let got: Vec<_> = m.literals.iter().map(|l| l.value.as_deref()).collect();
        assert_eq!(got, vec![Some("a'b\\c"), Some("d\"e"), Some("\\%"), Some("x\0")]);
        let rows = parameterize("INSERT INTO t VALUES (1, 'a'), (2, 'b')", MY);
        assert_eq!(rows.literals.len(), 4);
        assert_eq!(rows.fingerprint, fingerprint("INSERT INTO t VALUES (9, 'z')", MY));
        assert_eq!(
            parameterize(r"SELECT U&'\0041', E'\xff'", PG).literals.iter().map(|l| l.value.clone()).collect::<Vec<_>>(),
            vec![None, None]
        );
    }

    #[test]
    fn postgres_to_mysql_round_trip() {
        let t = compile(
            "SELECT name FROM users WHERE id = ANY(ARRAY[1, 2]) AND email ILIKE 'a%' LIMIT 5",
            "SELECT name FROM users WHERE id IN (1, 2) AND LOWER(email) LIKE LOWER('a%') LIMIT 5",
            PG,
            MY,
        );
        let out = t
            .apply("select name from users where id = any(array[7, 8, 9]) and email ilike 'o''b\\r%' limit 50", PG)
            .map(|a| a.sql);
        assert_eq!(
            out.as_deref(),
            Some("SELECT name FROM users WHERE id IN (7, 8, 9) AND LOWER(email) LIKE LOWER('o''b\\\\r%') LIMIT 50")
        );
        let back = parameterize(out.as_deref().unwrap_or(""), MY);
        assert_eq!(back.literals.get(1).and_then(|l| l.value.as_deref()), Some("o'b\\r%"));
        assert_eq!(t.apply("SELECT name FROM users WHERE id = 1", PG).map(|a| a.sql), None);
        assert_eq!(
            t.apply("SELECT name FROM users WHERE id = ANY(ARRAY[1]) AND email ILIKE 'a' LIMIT 5", MY).map(|a| a.sql),
            None
        );
    }

    #[test]
    fn mysql_to_postgres_round_trip() {
        let t = compile(
            "SELECT `c` FROM t WHERE a = 'x' AND b = -3 AND f = true AND g <=> NULL LIMIT 10",
            "SELECT \"c\" FROM t WHERE a = 'x' AND b = -3 AND f = true AND g IS NOT DISTINCT FROM NULL LIMIT 10 FOR READ ONLY",
            MY,
            PG,
        );
        let out = t
            .apply(r#"SELECT `c` FROM t WHERE a = "q\"\\'ü€" AND b = 4.5e3 AND f = FALSE AND g <=> NULL LIMIT 1"#, MY)
            .map(|a| a.sql);
        assert_eq!(
            out.as_deref(),
            Some(
                r#"SELECT "c" FROM t WHERE a = 'q"\''ü€' AND b = 4.5e3 AND f = FALSE AND g IS NOT DISTINCT FROM NULL LIMIT 1 FOR READ ONLY"#
            )
        );
        assert_eq!(
            t.apply("SELECT `c` FROM t WHERE a = 'x' AND b = 'y' AND f = true AND g <=> NULL LIMIT 10", MY)
                .map(|a| a.sql),
            None
        );
        assert_eq!(
            t.apply("SELECT `c` FROM t WHERE a = 'nul\\0' AND b = 1 AND f = true AND g <=> NULL LIMIT 1", MY)
                .map(|a| a.sql),
            None
        );
    }

    #[test]
    fn negative_numbers_never_form_comments() {
        let t = compile("SELECT a-1 FROM t", "SELECT a-1 FROM t", PG, PG);
        assert_eq!(t.apply("SELECT a - -7 FROM t", PG).map(|a| a.sql).as_deref(), Some("SELECT a- -7 FROM t"));
        assert_eq!(t.apply("SELECT a - 8 FROM t", PG).map(|a| a.sql).as_deref(), Some("SELECT a-8 FROM t"));
    }

    #[test]
    fn constants_and_unused_values() {
        let t = compile("SELECT * FROM t WHERE a = 1 AND b = 'k'", "SELECT * FROM t WHERE a = 1 LIMIT 1000", PG, MY);
        let d = t.describe();
        assert_eq!(d.original, "select * from t where a = ? and b = ?");
        assert_eq!(d.translated, "select * from t where a = ? limit ?");
        assert_eq!(
            d.mapping.iter().map(|m| m.source).collect::<Vec<_>>(),
            vec![SlotSource::Original(0), SlotSource::Constant]
        );
        assert_eq!(
            t.apply("SELECT * FROM t WHERE a = 2 AND b = 'k'", PG).map(|a| a.sql).as_deref(),
            Some("SELECT * FROM t WHERE a = 2 LIMIT 1000")
        );
        // `b` is not carried into the translation, so only the example's value is known to be safe.
        assert_eq!(t.apply("SELECT * FROM t WHERE a = 2 AND b = 'other'", PG).map(|a| a.sql), None);
    }

    #[test]
    fn rejects_guesses_with_the_literal_named() {
        let err = TranslationTemplate::compile(
            "SELECT * FROM t WHERE a = 1 AND b = 1",
            "SELECT * FROM t WHERE a = 1",
            PG,
            MY,
        );
        assert!(
            matches!(&err, Err(TemplateError::Ambiguous { position: 1, count: 2, text, .. }) if text == "1"),
            "{err:?}"
        );
        let err = TranslationTemplate::compile("SELECT * FROM t WHERE a = '5'", "SELECT * FROM t WHERE a = 5", PG, MY);
        assert!(
            matches!(&err, Err(TemplateError::KindChanged { from: LiteralKind::String, to: LiteralKind::Number, .. })),
            "{err:?}"
        );
        let err =
            TranslationTemplate::compile("SELECT * FROM t WHERE a IN (5, 6)", "SELECT * FROM t WHERE a = 5", PG, MY);
        assert!(
            matches!(&err, Err(TemplateError::KindChanged { from: LiteralKind::InList(2), original: 1, .. })),
            "{err:?}"
        );
        let msg = err.err().map(|e| e.to_string()).unwrap_or_default();
        assert!(msg.contains("#1") && msg.contains("`5`"), "{msg}");
    }

    #[test]
    fn scalars_can_become_a_fixed_list() {
        let t = compile("SELECT * FROM t WHERE a = 1 OR a = 2", "SELECT * FROM t WHERE a IN (1, 2)", MY, PG);
        assert_eq!(
            t.apply("SELECT * FROM t WHERE a = 5 OR a = -6", MY).map(|a| a.sql).as_deref(),
            Some("SELECT * FROM t WHERE a IN (5, -6)")
        );
    }

    #[test]
    fn in_lists_expand_to_any_length() {
        let t = compile(
            "SELECT * FROM t WHERE id IN (1, 2) AND s = 'a'",
            "SELECT * FROM t WHERE s = 'a' AND id IN (1, 2)",
            MY,
            PG,
        );
        for len in [1usize, 2, 3, 17, 999, 1000] {
            let items: Vec<String> = (0..len).map(|i| format!("'v{i}\\''")).collect();
            let sql = format!("SELECT * FROM t WHERE id IN ({}) AND s = 'b'", items.join(","));
            let out = t.apply(&sql, MY).map(|a| a.sql);
            let back = out.as_deref().map(|o| parameterize(o, PG));
            let list = back.as_ref().and_then(|b| b.literals.get(1));
            assert_eq!(list.map(|l| l.kind), Some(LiteralKind::InList(len)));
            assert_eq!(list.and_then(|l| l.items.last()).and_then(|i| i.value.clone()), Some(format!("v{}'", len - 1)));
        }
    }

    #[test]
    fn parameters_fill_slots_of_any_kind() {
        let t = compile(
            "SELECT v FROM a WHERE id = 1 AND s = 'x' AND f = true",
            "SELECT v FROM b WHERE s = 'x' AND id = 1 AND f = true",
            PG,
            PG,
        );
        assert_eq!(
            t.apply("SELECT v FROM a WHERE id = $1 AND s = $2 AND f = $3", PG).map(|a| a.sql).as_deref(),
            Some("SELECT v FROM b WHERE s = $2 AND id = $1 AND f = $3"),
            "numbered parameters keep their numbers wherever they move"
        );
        assert_eq!(
            t.apply("SELECT v FROM a WHERE id = :id AND s = 'q' AND f = $1", PG).map(|a| a.sql).as_deref(),
            Some("SELECT v FROM b WHERE s = 'q' AND id = :id AND f = $1")
        );
        let list = compile("SELECT v FROM a WHERE id IN (1, 2)", "SELECT v FROM b WHERE id IN (1, 2)", MY, MY);
        assert_eq!(
            list.apply("SELECT v FROM a WHERE id IN (?, ?, 7)", MY).map(|a| a.sql).as_deref(),
            Some("SELECT v FROM b WHERE id IN (?, ?, 7)")
        );
        // A parameter in a slot the translation drops would leave the client's value unbound.
        let dropped = compile("SELECT v FROM a WHERE id = 1 AND s = 'x'", "SELECT v FROM b WHERE id = 1", PG, PG);
        assert_eq!(dropped.apply("SELECT v FROM a WHERE id = $1 AND s = $2", PG).map(|a| a.sql), None);
        assert_eq!(
            dropped.apply("SELECT v FROM a WHERE id = $1 AND s = 'x'", PG).map(|a| a.sql).as_deref(),
            Some("SELECT v FROM b WHERE id = $1")
        );
    }

    /// `(sql, param_order)` of a translation.
    fn applied(t: &TranslationTemplate, sql: &str) -> Option<(String, Option<Vec<u16>>)> {
        t.apply(sql, MY).map(|a| (a.sql, a.param_order))
    }

    #[test]
    fn positional_parameters_that_move_or_repeat_come_with_their_order() {
        let same =
            compile("SELECT v FROM a WHERE id = 1 AND s = 'x'", "SELECT v, 0 FROM b WHERE id = 1 AND s = 'x'", MY, MY);
        assert_eq!(
            applied(&same, "SELECT v FROM a WHERE id = ? AND s = ?"),
            Some(("SELECT v, 0 FROM b WHERE id = ? AND s = ?".to_owned(), None))
        );
        let swapped =
            compile("SELECT v FROM a WHERE id = 1 AND s = 'x'", "SELECT v FROM b WHERE s = 'x' AND id = 1", MY, MY);
        assert_eq!(
            applied(&swapped, "SELECT v FROM a WHERE id = ? AND s = ?"),
            Some(("SELECT v FROM b WHERE s = ? AND id = ?".to_owned(), Some(vec![1, 0])))
        );
        assert_eq!(
            applied(&swapped, "SELECT v FROM a WHERE id = ? AND s = 'y'"),
            Some(("SELECT v FROM b WHERE s = 'y' AND id = ?".to_owned(), None)),
            "one positional parameter needs no reordering"
        );
        let twice = compile(
            "SELECT v FROM a WHERE id = 5 AND k = 'x'",
            "SELECT v FROM b WHERE k = 'x' AND (id = 5 OR parent = 5)",
            MY,
            MY,
        );
        assert_eq!(
            applied(&twice, "SELECT v FROM a WHERE id = ? AND k = ?"),
            Some(("SELECT v FROM b WHERE k = ? AND (id = ? OR parent = ?)".to_owned(), Some(vec![1, 0, 0])))
        );
        assert_eq!(
            applied(&twice, "SELECT v FROM a WHERE id = 6 AND k = 'x'"),
            Some(("SELECT v FROM b WHERE k = 'x' AND (id = 6 OR parent = 6)".to_owned(), None))
        );
        // A list's parameters move together, each keeping its place within the list.
        let list = compile(
            "SELECT v FROM a WHERE s = 'x' AND id IN (1, 2)",
            "SELECT v FROM b WHERE id IN (1, 2) AND s = 'x' OR s = 'x'",
            MY,
            MY,
        );
        assert_eq!(
            applied(&list, "SELECT v FROM a WHERE s = ? AND id IN (?, 7, ?)"),
            Some(("SELECT v FROM b WHERE id IN (?, 7, ?) AND s = ? OR s = ?".to_owned(), Some(vec![1, 2, 0, 0])))
        );
    }

    #[test]
    fn positional_parameters_that_cannot_be_bound_are_not_translated() {
        // The translation's own `?` would have no value behind it.
        let own = compile("SELECT v FROM a WHERE id = 1", "SELECT v FROM b WHERE id = 1 AND k = ?", MY, MY);
        assert_eq!(applied(&own, "SELECT v FROM a WHERE id = ?"), None);
        // The example's own `?` in a slot the translation drops: the client's value would bind nothing.
        let dropped = compile("SELECT v FROM a WHERE id = 1 AND k = ?", "SELECT v FROM b WHERE id = 1", MY, MY);
        assert_eq!(applied(&dropped, "SELECT v FROM a WHERE id = ? AND k = ?"), None);
        assert_eq!(applied(&dropped, "SELECT v FROM a WHERE id = 3 AND k = ?"), None);
    }

    #[test]
    fn a_json_array_string_becomes_a_list_literal_of_any_length() {
        let duck = compile(
            "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '[1,2]')",
            "SELECT id FROM tags WHERE list_has_any(labels, [1,2])",
            MY,
            PG,
        );
        assert_eq!(
            duck.describe().mapping.iter().map(|m| m.source).collect::<Vec<_>>(),
            vec![SlotSource::JsonArray(0)]
        );
        assert!(duck.warnings().is_empty(), "{:?}", duck.warnings());
        let run =
            |t: &TranslationTemplate, sql: &str| t.apply_checked(sql, MY, LexMode::default()).map(|o| o.map(|a| a.sql));
        for (value, list) in [
            ("[1,2]", "[1, 2]"),
            ("[7]", "[7]"),
            ("[1,2,3,4,5]", "[1, 2, 3, 4, 5]"),
            ("[]", "[]"),
            (" [ -3 , 2.5e1 ] ", "[-3, 2.5e1]"),
            ("[\"it's\", null, true]", "['it''s', NULL, TRUE]"),
        ] {
            let sql = format!("SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '{}')", value.replace('\'', "\\'"));
            assert_eq!(
                run(&duck, &sql),
                Ok(Some(format!("SELECT id FROM tags WHERE list_has_any(labels, {list})"))),
                "{value}"
            );
        }
        for bad in ["'7'", "'{\"a\":1}'", "'[1); DROP TABLE tags; --]'", "'[[1]]'", "7", "NULL"] {
            let sql = format!("SELECT id FROM tags WHERE JSON_OVERLAPS(labels, {bad})");
            assert!(matches!(run(&duck, &sql), Err(SlotValueError::NotJsonArray { position: 1, .. })), "{bad}");
        }
        assert_eq!(run(&duck, "SELECT id FROM tags WHERE JSON_OVERLAPS(other, '[1]')"), Ok(None), "another shape");
        let pg = compile(
            "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '[1,2]') AND id > 0",
            "SELECT id FROM tags WHERE labels && ARRAY[1,2]::int[] AND id > 0",
            MY,
            PG,
        );
        assert_eq!(
            run(&pg, "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '[9,8,7]') AND id > 5"),
            Ok(Some("SELECT id FROM tags WHERE labels && ARRAY[9, 8, 7]::int[] AND id > 5".to_owned()))
        );
        assert_eq!(
            run(&pg, "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '[]') AND id > 5"),
            Ok(Some("SELECT id FROM tags WHERE labels && ARRAY[]::int[] AND id > 5".to_owned()))
        );
    }

    #[test]
    fn a_parameter_in_a_json_array_slot_is_bound_at_execute() {
        let t = compile(
            "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '[1,2]') AND id > 0",
            "SELECT id FROM tags WHERE list_has_any(labels, [1,2]) AND id > 0",
            MY,
            PG,
        );
        assert_eq!(t.apply("SELECT id FROM tags WHERE JSON_OVERLAPS(labels, ?) AND id > ?", MY).map(|a| a.sql), None);
        let late = t
            .apply_late("SELECT id FROM tags WHERE JSON_OVERLAPS(labels, ?) AND id > ?", MY, LexMode::default())
            .expect("late");
        assert_eq!(late.params(), 2);
        assert_eq!(
            late.example_sql().as_deref(),
            Some("SELECT id FROM tags WHERE list_has_any(labels, [1, 2]) AND id > 0")
        );
        let bind = |v: &[ParamValue]| late.bind(v);
        let text = |s: &str| ParamValue::Text(s.to_owned());
        assert_eq!(
            bind(&[text("[7, \"x'\"]"), ParamValue::Number("3".into())]),
            Ok(Some("SELECT id FROM tags WHERE list_has_any(labels, [7, 'x''']) AND id > 3".to_owned()))
        );
        assert!(matches!(bind(&[text("7"), ParamValue::Null]), Err(SlotValueError::NotJsonArray { .. })));
        assert!(bind(&[ParamValue::Number("7".into()), ParamValue::Null]).is_err());
        assert_eq!(bind(&[text("[1]")]), Ok(None), "one value per parameter");
        assert!(t
            .apply_late("SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '[3]') AND id > ?", MY, LexMode::default())
            .is_none());
    }

    /// A PostgreSQL client's `$n` in a JSON-array slot: the statement is held until Bind, and
    /// its values are written into the client's own text as literals (then routed and
    /// translated like any statement with literals).
    #[test]
    fn a_postgres_parameter_in_a_json_array_slot_is_inlined_at_bind() {
        let t = compile(
            "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '[1,2]') AND id > 0",
            "SELECT id FROM tags WHERE list_has_any(labels, [1,2]) AND id > 0",
            PG,
            PG,
        );
        let sql = "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, $2) AND id > $1";
        assert_eq!(t.apply(sql, PG).map(|a| a.sql), None);
        let late = t.apply_late(sql, PG, LexMode::default()).expect("late");
        assert_eq!(
            late.inline(sql, &[Some("3"), Some("[7, \"it's\"]")]).as_deref(),
            Ok("SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '[7, \"it''s\"]') AND id > 3")
        );
        let inlined = late.inline(sql, &[Some("-1.5e3"), Some("[\"a\\\\b\"]")]).expect("inlined");
        assert_eq!(inlined, "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, E'[\"a\\\\\\\\b\"]') AND id > -1.5e3");
        let translated = t.apply(&inlined, PG).map(|a| a.sql);
        assert_eq!(
            translated.as_deref(),
            Some("SELECT id FROM tags WHERE list_has_any(labels, ['a\\b']) AND id > -1.5e3")
        );
        assert_eq!(
            late.inline(sql, &[Some("1 OR true"), None]).as_deref(),
            Ok("SELECT id FROM tags WHERE JSON_OVERLAPS(labels, NULL) AND id > '1 OR true'"),
            "a value that is no number stays a string"
        );
        let examples: Vec<Option<&str>> =
            late.param_examples().iter().map(|l| l.and_then(|l| l.value.as_deref())).collect();
        assert_eq!(examples, [Some("0"), Some("[1,2]")], "what each `$n` stands for in the original");
        assert_eq!(late.inline(sql, &[Some("1")]), Err(InlineError::Count { needed: 2, got: 1 }));
        assert_eq!(late.inline(sql, &[Some("1"), Some("[\"\0\"]")]), Err(InlineError::Nul(2)));
        assert!(t
            .apply_late("SELECT id FROM tags WHERE JSON_OVERLAPS(labels, ?) AND id > 0", PG, LexMode::default())
            .is_none());
    }

    #[test]
    fn unmapped_literals_and_lookalike_constants_are_warned_about() {
        let t = compile(
            "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '[1,2]') AND kind = 'x'",
            "SELECT id FROM tags WHERE list_has_any(labels, [2,1])",
            MY,
            PG,
        );
        let w = t.warnings();
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(w[0].contains("#1 `'[1,2]'`") && w[1].contains("#2 `'x'`"), "{w:?}");
        assert!(w[2].contains("`2` is a constant") && w[2].contains("'[1,2]'"), "{w:?}");
    }

    fn text_value() -> impl Strategy<Value = String> {
        "[a-zA-Z0-9 '\"\\\\%_;\\-/*#$`\n\tü€😀]{0,24}"
    }

    proptest! {
        #[test]
        fn any_string_round_trips_without_changing_structure(v in text_value(), n in any::<i64>(), src_pg in any::<bool>(), dst_pg in any::<bool>()) {
            let (s, d) = (if src_pg { PG } else { MY }, if dst_pg { PG } else { MY });
            let t = compile("SELECT * FROM t WHERE a = 'x' AND b = 1", "SELECT * FROM t WHERE b = 1 AND a = 'x' -- tr", s, d);
            let quoted = match s {
                Dialect::Postgres => format!("'{}'", v.replace('\'', "''")),
                Dialect::MySql => format!("'{}'", v.replace('\\', "\\\\").replace('\'', "\\'")),
            };
            let out = t.apply(&format!("SELECT * FROM t WHERE a = {quoted} AND b = {n}"), s).map(|a| a.sql);
            prop_assert!(out.is_some());
            let back = parameterize(out.as_deref().unwrap_or(""), d);
            prop_assert_eq!(back.fingerprint, fingerprint("SELECT * FROM t WHERE b = 1 AND a = 'x'", d));
            prop_assert_eq!(back.literals.first().and_then(|l| l.value.clone()), Some(n.to_string()));
            prop_assert_eq!(back.literals.get(1).and_then(|l| l.value.clone()), Some(v));
        }

        #[test]
        fn random_input_never_panics(s in "\\PC{0,60}|[-'\"`$/*#!?:@_a-z0-9 (),;\\\\\n.]{0,60}") {
            for d in [PG, MY] {
                let p = parameterize(&s, d);
                prop_assert_eq!(p.fingerprint, fingerprint(&s, d));
                if let Ok(t) = TranslationTemplate::compile(&s, &s, d, d) {
                    let _ = t.apply(&s, d);
                }
            }
        }
    }
}
