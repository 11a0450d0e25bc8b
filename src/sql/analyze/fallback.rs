//! Facts for a statement sqlparser could not parse.
//!
//! Always `parse_error` evidence and never eligible. A few statement shapes the session layer
//! must still see (RESET, two-phase commit, ABORT, XA) are recognized from their leading words;
//! everything else is `Operation::Unknown`.

use super::facts::{Affinity, Operation, SessionEffect, StatementFacts, TxControl};
use super::tokens::Segment;

/// Facts for an unparsable segment.
pub(super) fn classify(segment: &Segment, error: &str) -> StatementFacts {
    let words = segment.leading_words(3);
    let word = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    let mut facts = StatementFacts::unknown("parse_error", error);
    let op = match (word(0), word(1)) {
        ("RESET", "ALL") => {
            facts.effects.push(SessionEffect::ResetAll);
            reset(&mut facts, "ALL")
        }
        ("RESET", name) if !name.is_empty() => {
            facts.effects.push(SessionEffect::Reset(name.to_ascii_lowercase()));
            reset(&mut facts, name)
        }
        ("ABORT", _) => Operation::TransactionControl(TxControl::Rollback),
        ("PREPARE", "TRANSACTION") | ("XA", "PREPARE") => {
            Operation::TransactionControl(TxControl::PrepareTransaction)
        }
        ("COMMIT", "PREPARED") | ("XA", "COMMIT") => {
            Operation::TransactionControl(TxControl::CommitPrepared)
        }
        ("ROLLBACK", "PREPARED") | ("XA", "ROLLBACK") => {
            Operation::TransactionControl(TxControl::RollbackPrepared)
        }
        ("XA", "START") | ("XA", "BEGIN") => Operation::TransactionControl(TxControl::Begin),
        _ => Operation::Unknown,
    };
    facts.operation = op;
    facts
}

fn reset(facts: &mut StatementFacts, what: &str) -> Operation {
    facts.affinity.insert(Affinity::SessionSet);
    facts.note(Affinity::SessionSet.name(), format!("RESET {what}"));
    Operation::Session
}
