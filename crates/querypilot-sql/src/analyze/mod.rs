//! Semantic analysis: may this SQL string run on a replica?
//!
//! Owns [`analyze`] and the [`StatementFacts`] it returns, and [`session_effects`]: what a
//! statement does to its session (settings, pins), for both dialects. Pure: sqlparser (with its `visitor`
//! feature) and the sibling [`crate::volatility`] catalog only; no runtime, clock or globals.
//!
//! The rule is "unknown never means safe": a string is replica-eligible only when analysis proves
//! every statement is a read, calls only immutable or stable functions, takes no row lock and
//! needs no session or transaction affinity. Unparsable SQL, unknown functions, unsupported
//! statements and inputs past the complexity guards are all `Unknown` or volatile.
//!
//! Decisions worth knowing:
//! - SHOW / DESCRIBE are reads carrying [`Affinity::ServerState`], hence never eligible.
//! - EXPLAIN without ANALYZE is an eligible read (nothing executes); EXPLAIN ANALYZE has the facts
//!   of the statement it runs.
//! - COPY ... TO STDOUT is a read (eligible when its query is); COPY FROM is a write; COPY TO a
//!   server file or program is admin.
//! - CALL, DO, EXECUTE and unparsable statements are `Unknown`.
//! - A multi-statement string is split at top-level semicolons and each statement analyzed on
//!   its own; facts combine (strongest operation, most volatile, union of affinities), so the
//!   string is eligible only when every statement is.
//! - Stack and time safety: statements are parsed through [`crate::parse`], which refuses
//!   nesting deeper than 10, more than 1,000 chain operators and parses that overrun their work
//!   budget (evidence `too_deep` / `too_complex`). The deepest accepted input is tested on a
//!   2 MiB thread in a debug build. A refused statement gets the fallback classifier's label and
//!   simply runs on the primary.
//! - Statements sqlparser 0.59 cannot parse but the session layer must see (RESET, ABORT,
//!   PREPARE TRANSACTION, XA) are recognized from their leading words, still with `parse_error`.

mod effects;
mod facts;
mod fallback;
mod session;
mod statement;
mod tokens;
mod transaction;
mod walker;

#[cfg(test)]
mod quoted_tests;
#[cfg(test)]
mod tests;

pub use effects::{
    mentioned, opens_transaction, opens_transaction_named, session_effects, session_effects_named, Effect, Effects,
    Initials, PinReason, MYSQL_ACCESS_MODE, MYSQL_EFFECT_WORDS, MYSQL_ISOLATION, OPENER_WORDS, PG_EFFECT_WORDS,
};
pub use facts::{
    Affinity, AffinitySet, Evidence, LockClause, LockStrength, LockWait, Operation, StatementFacts, TxControl,
};
pub use transaction::{transaction_statement, AccessMode, TxKind, TxStatement};

use crate::parse;
use crate::volatility::FunctionCatalog;
use crate::Dialect;

/// Analyzes one SQL string (possibly several statements). Never panics and never fails: anything
/// it cannot prove safe comes back as not eligible.
pub fn analyze(sql: &str, dialect: Dialect, catalog: &FunctionCatalog) -> StatementFacts {
    let segments = match tokens::split(sql, dialect) {
        Ok(s) => s,
        Err(e) => return StatementFacts::unknown(e.label(), e.to_string()),
    };
    if segments.len() > usize::from(u16::MAX) {
        return StatementFacts::unknown("too_many_statements", segments.len().to_string());
    }
    let mut combined: Option<StatementFacts> = None;
    for segment in segments {
        let facts = analyze_segment(segment, dialect, catalog);
        match combined.as_mut() {
            Some(c) => c.combine(facts),
            None => combined = Some(facts),
        }
    }
    combined.unwrap_or_else(|| {
        let mut f = StatementFacts::unknown("empty", "no statement");
        f.statement_count = 0;
        f
    })
}

fn analyze_segment(mut segment: tokens::Segment, dialect: Dialect, catalog: &FunctionCatalog) -> StatementFacts {
    let statements = match parse::parse_tokens(std::mem::take(&mut segment.tokens), dialect) {
        Ok(s) if !s.is_empty() => s,
        Ok(_) => return fallback::classify(&segment, "parse_error", "no statement parsed", dialect),
        Err(e) => return fallback::classify(&segment, e.label(), &e.to_string(), dialect),
    };
    let mut combined: Option<StatementFacts> = None;
    for stmt in &statements {
        let facts = statement::analyze_statement(stmt, dialect, catalog);
        match combined.as_mut() {
            Some(c) => c.combine(facts),
            None => combined = Some(facts),
        }
    }
    let mut facts = combined.unwrap_or_else(|| StatementFacts::unknown("empty", "no statement"));
    refine_lock_strength(&mut facts, &segment.lock_phrases);
    if dialect == Dialect::MySql {
        mysql_token_facts(&mut facts, &segment);
    }
    facts
}

/// MySQL spellings sqlparser 0.59 parses without keeping their meaning.
fn mysql_token_facts(facts: &mut StatementFacts, segment: &tokens::Segment) {
    // SQL_CALC_FOUND_ROWS parses as a plain select item, yet it sets FOUND_ROWS() for the next
    // statement on this connection.
    if segment.calc_found_rows {
        facts.affinity.insert(Affinity::FoundRows);
        facts.note(Affinity::FoundRows.name(), "SQL_CALC_FOUND_ROWS");
    }
    // `SET SESSION TRANSACTION ...` parses as a one-transaction SET TRANSACTION, but in MySQL it
    // sets the characteristics of every following transaction of the session.
    if facts.operation == Operation::TransactionControl(TxControl::SetTransaction) {
        match segment.leading.get(1).map(String::as_str) {
            Some("SESSION") => {
                facts.operation = Operation::Session;
                facts.affinity.insert(Affinity::SessionSet);
                facts.note(Affinity::SessionSet.name(), "SET SESSION TRANSACTION");
            }
            Some("GLOBAL") => facts.operation = Operation::Admin,
            _ => {}
        }
    }
}

/// The AST knows only UPDATE/SHARE; the token scan knows the spelling (NO KEY UPDATE, KEY SHARE).
/// When the AST confirmed a lock, report the strongest spelling actually written.
fn refine_lock_strength(facts: &mut StatementFacts, phrases: &[LockStrength]) {
    if let (Some(lock), Some(strongest)) = (facts.locking.as_mut(), phrases.iter().max()) {
        lock.strength = *strongest;
        let text = lock.to_string();
        if let Some(e) = facts.evidence.iter_mut().find(|e| e.fact == "row_lock") {
            e.detail = text;
        }
    }
}
