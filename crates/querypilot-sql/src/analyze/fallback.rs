//! Facts for a statement sqlparser could not parse, or was not allowed to (too deep, too complex).
//!
//! Always `parse_error` / `too_deep` / `too_complex` evidence and never eligible. Statement shapes the session layer must still
//! see (RESET, SET, PREPARE, two-phase commit, ABORT, XA) are recognized from their leading words;
//! the leading words of admin, DDL, COPY FROM, SET and MOVE statements only choose a more
//! telling label than `Unknown` (none of them can be eligible); everything else is
//! `Operation::Unknown`.

use super::facts::{Affinity, Operation, StatementFacts, TxControl};
use super::tokens::Segment;
use crate::Dialect;

/// Facts for an unparsed segment; `why` is the evidence label (`parse_error`, `too_deep`, ...).
pub(super) fn classify(segment: &Segment, why: &'static str, error: &str, dialect: Dialect) -> StatementFacts {
    let words = &segment.leading;
    let word = |i: usize| words.get(i).map(String::as_str).unwrap_or("");
    let mut facts = StatementFacts::unknown(why, error);
    let op = match (word(0), word(1)) {
        ("RESET", _) if dialect == Dialect::MySql => Operation::Admin,
        ("RESET", name) if !name.is_empty() => with_affinity(&mut facts, Affinity::SessionSet, words),
        ("SET", var) if var.starts_with('@') && !var.starts_with("@@") => {
            // `SET @x := 1` (the `:=` spelling does not parse).
            with_affinity(&mut facts, Affinity::UserVariable, words)
        }
        ("SET", scope) if !matches!(scope, "GLOBAL" | "PERSIST" | "PERSIST_ONLY") => {
            with_affinity(&mut facts, Affinity::SessionSet, words)
        }
        ("SET", _) => Operation::Admin,
        ("MOVE", _) => with_affinity(&mut facts, Affinity::Cursor, words),
        ("PREPARE", name) if name != "TRANSACTION" => with_affinity(&mut facts, Affinity::SqlPrepare, words),
        ("DROP" | "DEALLOCATE", "PREPARE") => with_affinity(&mut facts, Affinity::SqlPrepare, words),
        ("EXECUTE", _) => {
            facts.affinity.insert(Affinity::SqlPrepare);
            Operation::Unknown
        }
        ("SHOW", _) => with_affinity(&mut facts, Affinity::ServerState, words),
        _ => by_leading_words(word(0), word(1), segment),
    };
    facts.operation = op;
    facts
}

/// Labels that need no extra facts.
fn by_leading_words(first: &str, second: &str, segment: &Segment) -> Operation {
    match (first, second) {
        ("ABORT", _) => Operation::TransactionControl(TxControl::Rollback),
        ("START", "TRANSACTION") | ("XA", "START" | "BEGIN") => Operation::TransactionControl(TxControl::Begin),
        ("PREPARE", "TRANSACTION") | ("XA", "PREPARE") => Operation::TransactionControl(TxControl::PrepareTransaction),
        ("COMMIT", "PREPARED") | ("XA", "COMMIT") => Operation::TransactionControl(TxControl::CommitPrepared),
        ("ROLLBACK", "PREPARED") | ("XA", "ROLLBACK") => Operation::TransactionControl(TxControl::RollbackPrepared),
        ("CREATE" | "ALTER" | "DROP" | "RENAME", "USER" | "ROLE")
        | ("VACUUM" | "ANALYZE" | "CLUSTER" | "REINDEX" | "CHECKPOINT", _)
        | ("OPTIMIZE" | "CHECK" | "REPAIR" | "PURGE" | "CHANGE" | "STOP", _)
        | ("INSTALL" | "UNINSTALL" | "FLUSH" | "KILL" | "GRANT" | "REVOKE", _)
        | ("START", "SLAVE" | "REPLICA" | "GROUP_REPLICATION") => Operation::Admin,
        ("CREATE" | "ALTER" | "DROP" | "RENAME" | "COMMENT", _) => Operation::Ddl,
        ("INSERT" | "UPDATE" | "DELETE" | "REPLACE" | "MERGE" | "TRUNCATE" | "REFRESH" | "LOAD", _) => Operation::Write,
        ("COPY", _) if segment.has_from => Operation::Write,
        _ => Operation::Unknown,
    }
}

fn with_affinity(facts: &mut StatementFacts, a: Affinity, words: &[String]) -> Operation {
    facts.affinity.insert(a);
    facts.note(a.name(), words.join(" "));
    match a {
        // An unparsed SHOW is not claimed to be a read.
        Affinity::ServerState => Operation::Unknown,
        _ => Operation::Session,
    }
}
