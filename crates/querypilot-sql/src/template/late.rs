//! Translations bound at execute time (#35): a prepared statement whose JSON-array slot is a
//! parameter (MySQL's `?`, PostgreSQL's `$n`) has no value to translate at prepare time;
//! [`LateTranslation`] keeps the statement's slots and, at each execute, writes the values in
//! as literals of the target dialect ([`LateTranslation::bind`]) or of the client's own
//! ([`LateTranslation::inline`], which the router then routes and translates like a statement
//! the client wrote with literals).

use super::{Dialect, Literal, LiteralKind, Parameterized, SlotValueError, TranslationTemplate};

/// The number of a parameter the client binds at execute: 0 for MySQL's positional `?`, `n` for
/// PostgreSQL's `$n`; `None` for anything else.
pub(super) fn bound_param(text: &str, dialect: Dialect) -> Option<usize> {
    match dialect {
        Dialect::MySql => (text == "?").then_some(0),
        Dialect::Postgres => {
            let digits = text.strip_prefix('$')?;
            let n: usize = digits.bytes().all(|c| c.is_ascii_digit()).then(|| digits.parse().ok())??;
            (n >= 1).then_some(n)
        }
    }
}

/// Why a statement's parameters could not be written in as literals.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InlineError {
    /// Fewer values than the statement's highest `$n` (the server's own 08P01).
    #[error("bind message supplies {got} parameters, but prepared statement requires {needed}")]
    Count {
        /// Parameters the statement uses.
        needed: usize,
        /// Values the Bind carried.
        got: usize,
    },
    /// A text value with a NUL byte, which no PostgreSQL literal can hold (22021).
    #[error("invalid byte sequence for encoding \"UTF8\": 0x00 in parameter ${0}")]
    Nul(usize),
}

/// A value bound to a positional parameter at execute time, as a literal of the client's kind.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamValue {
    /// SQL NULL.
    Null,
    /// A number, as text.
    Number(String),
    /// Anything else (strings, dates, bytes as UTF-8), as text.
    Text(String),
}

/// A translation waiting for its parameters' values ([`TranslationTemplate::apply_late`]).
#[derive(Debug, Clone)]
pub struct LateTranslation {
    pub(super) template: TranslationTemplate,
    pub(super) incoming: Parameterized,
}

impl LateTranslation {
    /// The client's own statement (`incoming_sql`, the text this translation was made for) with
    /// each PostgreSQL `$n` written as a literal: `values[n - 1]` (`None` = NULL) as a number
    /// where the original example has a number there and the value is one, else as a string
    /// (`E'..'` when it holds a backslash, so it reads the same whatever
    /// `standard_conforming_strings` is). Routing it then translates it as if the client had
    /// written the values, a non-array refused there as for a literal.
    pub fn inline(&self, incoming_sql: &str, values: &[Option<&str>]) -> Result<String, InlineError> {
        let mut out = incoming_sql.to_owned();
        let numbers = self.incoming.literals.iter().filter_map(|l| bound_param(l.value.as_deref()?, Dialect::Postgres));
        let needed = numbers.max().unwrap_or(0);
        if values.len() < needed {
            return Err(InlineError::Count { needed, got: values.len() });
        }
        let slots = self.incoming.literals.iter().zip(&self.template.original.literals).rev();
        for (lit, was) in slots.filter(|(l, _)| l.kind == LiteralKind::Param) {
            let n = lit.value.as_deref().and_then(|v| bound_param(v, Dialect::Postgres)).unwrap_or(0);
            let Some(value) = values.get(n.wrapping_sub(1)) else {
                return Err(InlineError::Count { needed, got: values.len() });
            };
            let text = match value {
                None => "NULL".to_owned(),
                Some(v) if was.kind == LiteralKind::Number && is_number(v) => (*v).to_owned(),
                Some(v) if v.contains('\0') => return Err(InlineError::Nul(n)),
                Some(v) if v.contains('\\') => format!("E'{}'", v.replace('\\', "\\\\").replace('\'', "''")),
                Some(v) => format!("'{}'", v.replace('\'', "''")),
            };
            // Spans come from lexing this very text, so they fall on character boundaries.
            if out.get(lit.span.clone()).is_some() {
                out.replace_range(lit.span.clone(), &text);
            }
        }
        Ok(out)
    }

    /// The original example's literal where the client's `$n` first sits, for `n` from 1 to
    /// the statement's highest `$n` (`None` for a number no slot uses): what each parameter
    /// stands for, to describe the statement before any value is bound.
    pub fn param_examples(&self) -> Vec<Option<&Literal>> {
        let mut out: Vec<Option<&Literal>> = Vec::new();
        let slots = self.incoming.literals.iter().zip(&self.template.original.literals);
        for (lit, was) in slots.filter(|(l, _)| l.kind == LiteralKind::Param) {
            let n = lit.value.as_deref().and_then(|v| bound_param(v, Dialect::Postgres)).unwrap_or(0);
            // A Bind carries at most 65535 values: a higher `$n` can never be bound.
            if n == 0 || n > usize::from(u16::MAX) {
                continue;
            }
            if out.len() < n {
                out.resize(n, None);
            }
            if let Some(slot @ None) = out.get_mut(n - 1) {
                *slot = Some(was);
            }
        }
        out
    }

    /// How many positional parameters the statement has.
    pub fn params(&self) -> usize {
        self.incoming.literals.iter().map(Literal::positional_params).sum()
    }

    /// The translation as if each parameter held the original example's value in its slot: the
    /// statement to describe at prepare time (same columns as every execute).
    pub fn example_sql(&self) -> Option<String> {
        let mut incoming = self.incoming.clone();
        for (lit, was) in incoming.literals.iter_mut().zip(&self.template.original.literals) {
            if lit.kind == LiteralKind::Param {
                *lit = was.clone();
            }
        }
        let arrays = self.template.parse_arrays(&incoming.literals).ok()??;
        self.template.render_all(&incoming, &arrays, 0).map(|t| t.sql)
    }

    /// The translation with `values` (one per `?`, in order) written in as literals of the
    /// target dialect; `Err` when a JSON-array slot's value is not a JSON array of scalars,
    /// `Ok(None)` when the values do not fit (wrong count, a number that is not one).
    pub fn bind(&self, values: &[ParamValue]) -> Result<Option<String>, SlotValueError> {
        if values.len() != self.params() {
            return Ok(None);
        }
        let mut incoming = self.incoming.clone();
        let mut next = values.iter();
        for lit in incoming.literals.iter_mut().filter(|l| l.kind == LiteralKind::Param) {
            let Some(v) = next.next() else { return Ok(None) };
            let (kind, value, text) = match v {
                ParamValue::Null => (LiteralKind::Null, "null".to_owned(), "NULL".to_owned()),
                ParamValue::Number(n) => (LiteralKind::Number, n.to_ascii_lowercase(), n.clone()),
                ParamValue::Text(t) => (LiteralKind::String, t.clone(), format!("'{}'", t.replace('\'', "''"))),
            };
            *lit = Literal { kind, text, value: Some(value), span: lit.span.clone(), items: Vec::new() };
        }
        let Some(arrays) = self.template.parse_arrays(&incoming.literals)? else { return Ok(None) };
        Ok(self.template.render_all(&incoming, &arrays, 0).map(|t| t.sql))
    }
}

/// A plain decimal number (`-12`, `3.5`, `1e3`), safe to write bare.
fn is_number(v: &str) -> bool {
    let body = v.strip_prefix('-').unwrap_or(v);
    let (mantissa, exponent) = body.split_once(['e', 'E']).unwrap_or((body, "0"));
    let (int, frac) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let digits = |s: &str| s.bytes().all(|c| c.is_ascii_digit());
    let exponent = exponent.strip_prefix(['+', '-']).unwrap_or(exponent);
    !(int.is_empty() && frac.is_empty()) && digits(int) && digits(frac) && !exponent.is_empty() && digits(exponent)
}
