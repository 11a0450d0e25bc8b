//! Sans-IO: a MySQL session's last word on the router's decision (#19). Only the session knows
//! what the server last reported (autocommit, an open transaction), whether a cursor or a pin
//! holds its connection, and what the statement does to its state: a statement statement
//! pooling cannot serve is refused, one the held replica connection must not take is refused or
//! detours to the primary, and a split read that opens a write transaction goes to the primary.
//! The session calls [`settle`] for every statement that needs it; the dry-run calls the same
//! function with the state it is asked to assume.

use crate::routing::{Decision, DecisionError, DecisionKind, Hold, MySqlSession, Outcome, Settled};
use crate::session::engine::release;
use crate::session::engine::replica::{self, Guard, HeldReplica};
use crate::sql::analyze::{session_effects, Operation};
use crate::sql::Dialect;

/// Settles `decision` for a session in state `s`; the decision's outcome then says where the
/// statement goes (the primary for a detour or a write transaction, a reject for a refusal).
pub fn settle(decision: &mut Decision, sql: &str, s: &MySqlSession<'_>) -> Settled {
    if s.statement_pooling {
        if let Some(text) = release::statement_pooling_refusal(sql, Dialect::MySql) {
            decision.outcome = Outcome::Reject(text.as_str().into());
            return Settled::StatementPooling(text);
        }
    }
    // The router's role check refuses what the held replica connection must not take; the
    // session knows more (a cursor-only hold lets a write detour to the primary) and says why
    // in its own terms, so that refusal is the session's to settle.
    let held_refusal = decision.kind == DecisionKind::TransactionPin
        && matches!(decision.outcome, Outcome::Error(DecisionError::ReplicaUnsafe { .. }));
    if !matches!(decision.outcome, Outcome::Route(_)) && !held_refusal {
        return Settled::AsRouted; // a rule's reject or a hint's error stands as the router said
    }
    let elsewhere = s.primary.clone().filter(|p| **p != *s.pool);
    let h =
        HeldReplica { held: s.hold.is_some(), on_replica: s.on_replica, dialect: Dialect::MySql, read_only_tx: false };
    let may_detour = || elsewhere.is_some() && s.cursor_only && detourable(decision, sql);
    match replica::guard(&h, &decision.facts, sql, may_detour) {
        Guard::Pass => {}
        Guard::Detour => {
            if let Some(p) = elsewhere {
                decision.outcome = Outcome::Route(p);
            }
            return Settled::Detour;
        }
        Guard::Refuse(why) => {
            let text = replica::refusal(s.pool, why, s.hold.map(Hold::describe).unwrap_or_default());
            decision.outcome = Outcome::Reject(text.as_str().into());
            return Settled::HeldReplica(text);
        }
    }
    let split = decision.step == DecisionKind::ReadWriteSplit && decision.kind != DecisionKind::Hint;
    if split && s.hold.is_none() && s.opens_write_transaction {
        // The read opens a transaction whose later statements may write: all of it runs on the
        // primary. A `route=replica` hint is the client's word that the replica may serve it;
        // what follows there is held to replica-safe statements.
        if let Some(p) = &s.primary {
            decision.outcome = Outcome::Route(p.clone());
        }
        return Settled::WriteTransaction;
    }
    Settled::AsRouted
}

/// Whether a statement means the same on any connection, so it may run on the primary while a
/// cursor holds the replica one: a plain read, write or DDL that neither changes session state
/// nor opens a transaction.
fn detourable(decision: &Decision, sql: &str) -> bool {
    matches!(decision.facts.operation, Operation::Read | Operation::Write | Operation::Ddl)
        && session_effects(sql, Dialect::MySql).list.is_empty()
        && release::statement_pooling_refusal(sql, Dialect::MySql).is_none()
}

#[cfg(test)]
mod tests;
