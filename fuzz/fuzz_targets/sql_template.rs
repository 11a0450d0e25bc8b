//! The translation template engine: `TranslationTemplate::compile`, `apply`, `describe` and
//! `parameterize`.
//!
//! Input layout: byte 0 picks the source and target dialects (bits 0 and 1); the rest is split at
//! the first two NUL bytes into the rule's original example, its translation and an incoming
//! statement. Properties: no panic; the mapping's spans lie inside the translated example; a
//! translated statement has the translation's shape, and every literal it took from the incoming
//! statement decodes back to the incoming value (a value can be re-quoted but never changed, and
//! never spill into the statement's structure); a `?` parameter order names one incoming `?` per
//! output `?`.
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::sql::fingerprint::fingerprint;
use querypilot::sql::template::{parameterize, Literal, LiteralKind, SlotSource, Translated, TranslationTemplate};
use querypilot::sql::Dialect;

fn dialect(bit: bool) -> Dialect {
    if bit {
        Dialect::MySql
    } else {
        Dialect::Postgres
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    let (source, target) = (dialect(selector & 1 != 0), dialect(selector & 2 != 0));
    let text = String::from_utf8_lossy(rest);
    let mut parts = text.splitn(3, '\0');
    let original = parts.next().unwrap_or_default();
    let translated = parts.next().unwrap_or_default();
    let incoming = parts.next().unwrap_or(original);

    let template = match TranslationTemplate::compile(original, translated, source, target) {
        Ok(t) => t,
        Err(e) => {
            let _ = e.to_string();
            return;
        }
    };
    let description = template.describe();
    for m in &description.mapping {
        assert!(translated.get(m.span.clone()).is_some(), "mapping span {:?} outside the translation", m.span);
    }
    let Some(Translated { sql: out, param_order, .. }) = template.apply(incoming, source) else { return };
    // A JSON-array slot may become a list of another length (#35): its shape is checked by
    // `apply` against the translation with that many items.
    if !description.mapping.iter().any(|m| matches!(m.source, SlotSource::JsonArray(_))) {
        assert_eq!(fingerprint(&out, target), fingerprint(translated, target), "translated: {out:?}");
    }
    if let Some(order) = &param_order {
        // Each `?` of the output names one of the incoming statement's `?` parameters.
        let questions =
            |sql: &str, d| parameterize(sql, d).literals.iter().map(Literal::positional_params).sum::<usize>();
        assert_eq!(order.len(), questions(&out, target), "one entry per `?` of {out:?}");
        let incoming_count = questions(incoming, source);
        assert!(order.iter().all(|&i| usize::from(i) < incoming_count), "{order:?} beyond {incoming_count} parameters");
    }

    // Scalar slots taken from the incoming statement keep their decoded value in the output. The
    // output's literals line up with the mapping: a list mapped whole is one entry, any other
    // list contributes its items.
    let now = parameterize(incoming, source);
    let mut written = Vec::new();
    for lit in parameterize(&out, target).literals {
        let whole = matches!(description.mapping.get(written.len()).map(|m| m.kind), Some(LiteralKind::InList(_)));
        if lit.items.is_empty() || whole {
            written.push(lit);
        } else {
            written.extend(lit.items);
        }
    }
    if written.len() != description.mapping.len() {
        return; // an incoming list with another item count than the example's shifts positions
    }
    for (w, m) in written.iter().zip(&description.mapping) {
        let SlotSource::Original(i) = m.source else { continue };
        let Some(from) = now.literals.get(i) else { continue };
        if from.items.is_empty() && !matches!(from.kind, LiteralKind::Param | LiteralKind::Null) && from.value.is_some()
        {
            assert_eq!(w.value, from.value, "slot {i} changed value on the way: {out:?}");
        }
    }
});
