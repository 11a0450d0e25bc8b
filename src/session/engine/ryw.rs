//! Read-your-writes decisions both wires take after routing (#22, #37): where a read goes
//! when no replica can serve it, and when a commit is probed before its position is learned.
//! The wires keep the I/O (position queries, probes' bytes) and their error wording.

use crate::config::ReplicaFallback;
use crate::id::Token;
use crate::routing::causal::{parse_token, TokenError};
use crate::routing::RywState;
use crate::sql::analyze::{transaction_statement, TxKind};
use crate::sql::Dialect;

/// Where a replica read goes when its replicas cannot serve it (no healthy backend, or none
/// replayed the session's position within `routing.causal_wait`): the `primary`, when
/// `routing.replica_fallback` says so and there is one, else nowhere (the read fails).
pub fn fallback<P>(mode: ReplicaFallback, primary: Option<P>) -> Option<P> {
    primary.filter(|_| mode == ReplicaFallback::Primary)
}

/// causal: whether the COMMIT about to run goes with a probe asking the server whether the
/// transaction wrote at all: only when the commit would learn a position solely because
/// nothing proved the transaction read-only, the transaction is open (`in_block`), and some
/// read could go to a replica (`replica_reads`), else the position is not worth a round trip.
pub fn probes_commit(ryw: &RywState, in_block: bool, replica_reads: bool) -> bool {
    ryw.commit_unproven() && in_block && replica_reads
}

/// causal: whether `sql` (PostgreSQL text, from either wire) is a lone `COMMIT` or `END`
/// (`TRANSACTION` / `WORK` allowed; not `AND CHAIN`, which keeps a transaction open, nor
/// `COMMIT PREPARED`, nor a text holding more statements): the commits a probe may precede.
pub fn is_lone_commit(sql: &str) -> bool {
    transaction_statement(sql, Dialect::Postgres).is_some_and(|t| t.kind == TxKind::Commit && t.plain)
}

/// causal: `SET querypilot.causal_token = value` (or the startup parameter / connection
/// attribute), from either wire: the session's reads wait for what the token names too
/// ([`RywState::adopt_token`]). A token that is invalid, or that would take the session's
/// position past its size limits (#33), changes nothing.
pub fn set_token(ryw: &mut RywState, value: &str) -> Result<(), TokenError> {
    let token = parse_token(value)?;
    if matches!(&token, Token::At(position) if !ryw.can_adopt(position)) {
        return Err(TokenError::TooLarge);
    }
    ryw.adopt_token(token);
    Ok(())
}

/// causal: the text `SHOW querypilot.causal_token` answers, on either wire ([`RywState::token`]).
pub fn show_token(ryw: &RywState) -> String {
    ryw.token().to_string()
}

#[cfg(test)]
mod tests;
