//! Translations bound at execute time (#35): a prepared statement whose JSON-array slot is a
//! positional `?` has no value to translate at prepare time; [`LateTranslation`] keeps the
//! statement's slots and writes each execute's values in as literals of the target dialect.

use super::{Literal, LiteralKind, Parameterized, SlotValueError, TranslationTemplate};

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
