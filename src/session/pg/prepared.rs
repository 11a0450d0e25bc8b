//! Prepared-statement bookkeeping: the client's statements under router-chosen backend names,
//! and the queue of responses the relay must expect, swallow or synthesize.
//!
//! A client statement `s1` becomes `qp_<hash of text and parameter types>` on every backend
//! connection, so identical statements of different clients share one backend preparation and a
//! statement can be re-prepared transparently on whichever connection the client borrows next.

use crate::protocol::pg::frontend;
use crate::routing::StatementKey;
use crate::session::state::{pg_effects, Effect};

/// A statement a client prepared.
#[derive(Debug)]
pub(super) struct Stmt {
    /// Identity of text + parameter types; names the statement on backends.
    pub key: u64,
    /// `qp_<key>`.
    pub server_name: String,
    /// A ready Parse message under `server_name`.
    pub parse_msg: Vec<u8>,
    /// Session effects of the statement text (SET and friends).
    pub effects: Vec<Effect>,
    /// The client's text, which routing decides on at every execute.
    pub query: String,
    /// The routing key of `query`, computed once at Parse.
    pub route_key: Option<StatementKey>,
}

impl Stmt {
    /// `translated` is what a translation rule rewrote the client's `query` into; it is what
    /// backends prepare.
    pub fn new(query: &str, translated: Option<&str>, types: &[u32]) -> Self {
        let client_query = query;
        let query = translated.unwrap_or(query);
        let key = statement_key(query, types);
        let server_name = server_name(key);
        let mut parse_msg = Vec::with_capacity(query.len() + 32);
        // Encoding fails only on NUL bytes, which the decoder already rejected.
        let _ = frontend::encode_parse(&server_name, query, types, &mut parse_msg);
        Self {
            key,
            server_name,
            parse_msg,
            effects: pg_effects(query),
            query: client_query.to_owned(),
            route_key: None,
        }
    }
}

/// The backend name of statement `key`.
pub(super) fn server_name(key: u64) -> String {
    format!("qp_{key:016x}")
}

/// A fixed-seed hash: the same statement gets the same name on every core and connection.
fn statement_key(query: &str, types: &[u32]) -> u64 {
    use std::hash::{BuildHasher, Hash, Hasher};
    let mut h = ahash::RandomState::with_seeds(0x5150, 0x9e37_79b9, 0x7f4a_7c15, 0x2545_f491).build_hasher();
    query.hash(&mut h);
    types.hash(&mut h);
    h.finish()
}

/// One response the backend (or the router itself) owes the client, in order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Expect {
    /// ParseComplete; `swallow` when the router injected the Parse; `key` to forget on error.
    Parse { swallow: bool, key: Option<u64> },
    /// BindComplete.
    Bind,
    /// ParameterDescription + RowDescription/NoData.
    DescribeStatement,
    /// RowDescription/NoData.
    DescribePortal,
    /// Rows and CommandComplete/EmptyQueryResponse/PortalSuspended.
    Execute,
    /// CloseComplete; `swallow` when the router evicted a statement.
    Close { swallow: bool },
    /// ReadyForQuery.
    Sync,
    /// A response the router answers itself (ParseComplete `'1'` or CloseComplete `'3'`).
    Synth(u8),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_text_and_types_share_a_name() {
        let a = Stmt::new("SELECT $1", None, &[23]);
        let b = Stmt::new("SELECT $1", None, &[23]);
        let c = Stmt::new("SELECT $1", None, &[25]);
        let d = Stmt::new("SELECT $2", None, &[23]);
        assert_eq!(a.server_name, b.server_name);
        assert_ne!(a.server_name, c.server_name);
        assert_ne!(a.server_name, d.server_name);
        assert!(a.server_name.starts_with("qp_") && a.server_name.len() == 19);
        assert_eq!(a.parse_msg.first(), Some(&b'P'));
    }
}
