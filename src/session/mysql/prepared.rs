//! Prepared-statement bookkeeping for MySQL clients: router-issued statement ids, the text each
//! one stands for (so it can be prepared again on whichever backend connection executes it),
//! the parameter types last bound (so an execute that says "types as before" still carries
//! them to a connection that never saw them), long data buffered until the execute, and the
//! reordering of parameters for a translation that moves or repeats the client's `?`.

use std::cell::OnceCell;
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use crate::config::Limits;
use crate::metrics::{BufferKind, Charge, ClientBudget};

use crate::protocol::mysql::codec::put_u32;
use crate::protocol::mysql::command::COM_STMT_EXECUTE;
use crate::protocol::mysql::execute::PARAM_UNSIGNED;
use crate::protocol::mysql::{decode_execute_params, encode_execute_params, ColumnType, ValueType};
use crate::routing::StatementKey;
use crate::sql::analyze::{session_effects, transaction_statement, Effect, PinReason};
use crate::sql::Dialect;

/// One client statement.
#[derive(Debug)]
pub(super) struct Stmt {
    /// Identity of text + default database; names the statement on backend connections.
    pub key: u64,
    /// The statement text prepared on backends (a translation rule's rewrite, if one applied);
    /// shared with each execute, which may prepare it again after awaiting a connection.
    pub sql: Rc<[u8]>,
    /// The client's original text: what the statement is routed by at every execute.
    pub origin: Rc<str>,
    /// The routing key of `origin`, computed once at prepare.
    pub route_key: Option<StatementKey>,
    /// Number of `?` parameters the client binds (the server's count, unless `order` is set).
    pub params: u16,
    /// For a translation that moves or repeats the `?` parameters: for each `?` of `sql`, the
    /// client parameter it takes (from the routing decision at prepare).
    pub order: Option<Rc<[u16]>>,
    /// What executing it does beyond its result, read from its texts at its first execute (once
    /// `params` is final) rather than at every one (#39); see [`Stmt::reading`].
    reading: OnceCell<Rc<Reading>>,
    /// Parameter types (2 bytes each) from the last execute that bound them.
    pub types: Vec<u8>,
    /// `COM_STMT_SEND_LONG_DATA` chunks waiting for the next execute: (parameter, bytes).
    pub long_data: Vec<(u16, Vec<u8>)>,
    /// Long data was dropped (#33): executes fail with this error until COM_STMT_RESET, as
    /// on MariaDB.
    pub long_refused: Option<LongRefusal>,
    /// What `long_data` holds against the process's client buffer budget.
    pub long_charge: Option<Charge>,
}

/// Why a statement's long data was dropped (#33).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum LongRefusal {
    /// A parameter went past `limits.long_data`, the router's `max_allowed_packet`.
    TooLarge,
    /// The process's `limits.client_buffer_budget` was spent.
    Budget,
}

/// Whether a statement may hold `chunk` more bytes of long data for a parameter holding `held`
/// (native and bridged sessions alike, #33/#37): within `limits.long_data`, the router's
/// `max_allowed_packet`, then within the process's budget, which `charge` (what the
/// statement's long data holds) grows from.
pub(super) fn long_data_admission(
    limits: &Limits,
    held: usize,
    chunk: usize,
    charge: &mut Charge,
) -> Result<(), LongRefusal> {
    if held.saturating_add(chunk) > limits.long_data {
        return Err(LongRefusal::TooLarge);
    }
    if !charge.resize(charge.bytes() + chunk as u64, limits.client_buffer_budget) {
        return Err(LongRefusal::Budget);
    }
    Ok(())
}

/// What an execute of a statement needs read from its texts: the same at every execute.
#[derive(Debug, PartialEq)]
pub(super) struct Reading {
    /// The session effects of executing it ([`executed_effects`] of what backends prepare).
    pub effects: Vec<(usize, Effect)>,
    /// The client's text is a `LOAD DATA LOCAL INFILE`, whose execute asks for the client's
    /// file (#34).
    pub loads_local_file: bool,
    /// The client's text is a transaction statement ([`transaction_statement`]): only such a
    /// text may be a read-only start the session holds back (#34).
    pub transaction: bool,
    /// The client's text begins with a word of a statement that commits nothing before it
    /// fails ([`super::causal::opens_with_atomic_word`]), for each execute's commit
    /// expectation.
    pub atomic_word: bool,
}

/// A client's statements by router-issued id. ahash rather than std's SipHash: every execute
/// looks its statement up (#39); its keys are random per map as SipHash's are.
#[derive(Debug, Default)]
pub(super) struct Statements {
    by_id: HashMap<u32, Stmt, ahash::RandomState>,
    /// Bytes of statement text held (`limits.session_prepared_bytes`, #33).
    bytes: usize,
    /// What they hold against the process's client buffer budget.
    charge: Option<Charge>,
    next_id: u32,
    /// The most recently prepared id (MariaDB's "-1 means the last prepared statement").
    pub last: u32,
}

impl Statements {
    /// Registers a statement and returns its router-issued id.
    pub fn insert(&mut self, stmt: Stmt) -> u32 {
        self.next_id = crate::session::engine::prepared::next_id(self.next_id, |id| self.by_id.contains_key(&id));
        self.bytes += stmt.text_len();
        self.by_id.insert(self.next_id, stmt);
        self.last = self.next_id;
        self.next_id
    }

    /// The statement with client id `id` (0xFFFFFFFF: the last prepared).
    pub fn get_mut(&mut self, id: u32) -> Option<&mut Stmt> {
        self.by_id.get_mut(&self.resolve(id))
    }

    /// Resolves 0xFFFFFFFF to the last prepared id.
    pub fn resolve(&self, id: u32) -> u32 {
        if id == u32::MAX {
            self.last
        } else {
            id
        }
    }

    /// Forgets statement `id`.
    pub fn remove(&mut self, id: u32) {
        if let Some(stmt) = self.by_id.remove(&self.resolve(id)) {
            self.bytes -= stmt.text_len();
            if let Some(c) = &mut self.charge {
                c.resize(self.bytes as u64, 0); // shrinking always succeeds
            }
        }
    }

    /// Bytes of statement text the statements hold.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Charges `bytes` in all for the statements to `budget` (at most `limit` bytes for the
    /// whole process); `false` when it is spent.
    pub fn charge(&mut self, budget: &Arc<ClientBudget>, bytes: usize, limit: u64) -> bool {
        self.charge.get_or_insert_with(|| budget.charge(BufferKind::Statements)).resize(bytes as u64, limit)
    }

    /// Number of statements.
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    /// Forgets every statement.
    pub fn clear(&mut self) {
        self.by_id.clear();
        self.bytes = 0;
        self.charge = None;
    }
}

/// A client's statements on their way to a new binary (#40).
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct FrozenStatements {
    stmts: Vec<FrozenStmt>,
    next_id: u32,
    last: u32,
}

/// One statement as the client knows it: its id, and what the router prepares for it.
#[derive(serde::Serialize, serde::Deserialize)]
struct FrozenStmt {
    id: u32,
    key: u64,
    sql: Vec<u8>,
    origin: String,
    params: u16,
    order: Option<Vec<u16>>,
    types: Vec<u8>,
}

impl Statements {
    /// What a new binary needs to go on serving the client's statements under their ids;
    /// `None` while one holds long data (it belongs to the next execute, here).
    pub fn freeze(&self) -> Option<FrozenStatements> {
        let mut stmts = Vec::with_capacity(self.by_id.len());
        for (id, s) in &self.by_id {
            if !s.long_data.is_empty() || s.long_refused.is_some() {
                return None;
            }
            stmts.push(FrozenStmt {
                id: *id,
                key: s.key,
                sql: s.sql.to_vec(),
                origin: s.origin.to_string(),
                params: s.params,
                order: s.order.as_deref().map(<[u16]>::to_vec),
                types: s.types.clone(),
            });
        }
        Some(FrozenStatements { stmts, next_id: self.next_id, last: self.last })
    }

    /// The statements [`Statements::freeze`] kept, each routed by `route_key` of its text and
    /// charged to `budget`.
    pub fn thaw(
        frozen: FrozenStatements,
        mut route_key: impl FnMut(&str) -> Option<StatementKey>,
        budget: &Arc<ClientBudget>,
        limit: u64,
    ) -> Statements {
        let mut out = Statements { next_id: frozen.next_id, last: frozen.last, ..Statements::default() };
        for f in frozen.stmts {
            let mut stmt = Stmt::new(f.key, f.sql.into(), f.origin.into(), f.params, f.order.map(Rc::from));
            stmt.route_key = route_key(&stmt.origin);
            stmt.types = f.types;
            out.bytes += stmt.text_len();
            out.by_id.insert(f.id, stmt);
        }
        // Over a smaller budget here the statements stay: the client has them.
        let _ = out.charge(budget, out.bytes, limit);
        out
    }
}

impl Stmt {
    /// Statement `key`, prepared on backends as `sql`, the client's `origin` text with `params`
    /// parameters (and their `order` for a reordering translation); routed without a key and
    /// with no types bound yet.
    pub fn new(key: u64, sql: Rc<[u8]>, origin: Rc<str>, params: u16, order: Option<Rc<[u16]>>) -> Self {
        let (reading, types, long_data, long_refused, long_charge) =
            (OnceCell::new(), Vec::new(), Vec::new(), None, None);
        let route_key = None;
        Stmt { key, sql, origin, route_key, params, order, reading, types, long_data, long_refused, long_charge }
    }

    /// What executing the statement does to the session, whether it loads a local file and
    /// how its first word reads, from `sql`, `params` and `origin` at the first call.
    pub fn reading(&self) -> Rc<Reading> {
        self.reading
            .get_or_init(|| {
                let effects = executed_effects(&self.sql, self.params);
                Rc::new(Reading {
                    effects,
                    loads_local_file: super::loads_local_file(&self.origin),
                    transaction: transaction_statement(&self.origin, Dialect::MySql).is_some(),
                    atomic_word: super::causal::opens_with_atomic_word(&self.origin),
                })
            })
            .clone()
    }

    /// Bytes of text the statement holds (what it prepares, and the client's text if another).
    fn text_len(&self) -> usize {
        self.sql.len() + self.origin.len()
    }
}

/// The session effects of executing prepared `sql` with `params` parameters: a prepared `SET`
/// or `USE` changes the session as a text one does (a prepared `SET autocommit = 0` included,
/// #19). With parameters the value is not in the text, so the setting cannot be replayed and
/// pins the session instead.
pub(super) fn executed_effects(sql: &[u8], params: u16) -> Vec<(usize, Effect)> {
    let mut effects = session_effects(&String::from_utf8_lossy(sql), Dialect::MySql).list;
    if params > 0 {
        for (_, e) in &mut effects {
            if !matches!(e, Effect::Pin(_)) {
                *e = Effect::Pin(PinReason::UntrackedSetting);
            }
        }
    }
    effects
}

/// The backend key of a statement: its text and the database it was prepared in.
pub(super) fn statement_key(sql: &[u8], db: Option<&str>) -> u64 {
    crate::session::engine::prepared::statement_key(0x6d79, (sql, db))
}

/// Writes to `out` the head of a COM_STMT_EXECUTE of backend statement `backend_id` with the
/// flags and iteration count of the client's payload `client`; returns the client's parameters
/// after them, `None` when it is shorter (`out` is then discarded).
fn execute_head<'a>(client: &'a [u8], backend_id: u32, out: &mut Vec<u8>) -> Option<&'a [u8]> {
    // code(1) stmt_id(4) flags(1) iterations(4) before the parameters.
    let (flags_iterations, body) = client.split_at_checked(5)?.1.split_at_checked(5)?;
    out.push(COM_STMT_EXECUTE);
    put_u32(out, backend_id);
    out.extend_from_slice(flags_iterations);
    Some(body)
}

/// Writes a COM_STMT_EXECUTE payload for backend statement `backend_id` from the client's
/// payload `client` (command byte included), making sure parameter types are always bound:
/// types the client sent are remembered in `types`; an execute without them gets the
/// remembered ones inserted. Returns `false` when the payload is too short to be valid.
pub(super) fn rewrite_execute(
    client: &[u8],
    backend_id: u32,
    params: u16,
    types: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> bool {
    let Some(body) = execute_head(client, backend_id, out) else { return false };
    let n = usize::from(params);
    if n == 0 {
        out.extend_from_slice(body);
        return true;
    }
    let bitmap = n.div_ceil(8);
    let Some((nulls, after)) = body.split_at_checked(bitmap) else { return false };
    let Some((&flag, rest)) = after.split_first() else { return false };
    out.extend_from_slice(nulls);
    if flag == 1 {
        let Some(t) = rest.get(..2 * n) else { return false };
        types.clear();
        types.extend_from_slice(t);
        out.push(1);
        out.extend_from_slice(rest);
    } else if types.len() == 2 * n {
        out.push(1);
        out.extend_from_slice(types);
        out.extend_from_slice(rest);
    } else {
        // Nothing to add: the server reports the missing types itself.
        out.push(flag);
        out.extend_from_slice(rest);
    }
    true
}

/// Writes a COM_STMT_EXECUTE payload for backend statement `backend_id` whose `j`-th `?` takes
/// the client's parameter `order[j]`, from the client's payload `client` (command byte included)
/// for its `params` parameters. `long_data[i]`: client parameter `i` came through
/// `COM_STMT_SEND_LONG_DATA`. Types the client sent are remembered in `types` (2 bytes each, as
/// on the wire) and used when it sends none. Returns `false` when the payload is not valid.
pub(super) fn reorder_execute(
    client: &[u8],
    backend_id: u32,
    params: u16,
    order: &[u16],
    long_data: &[bool],
    types: &mut Vec<u8>,
    out: &mut Vec<u8>,
) -> bool {
    let Some(body) = execute_head(client, backend_id, out) else { return false };
    let prev: Vec<ValueType> = types
        .chunks_exact(2)
        .map(|pair| match *pair {
            [t, flags] => ValueType::new(ColumnType(t), flags & PARAM_UNSIGNED != 0),
            _ => ValueType::new(ColumnType::NULL, false),
        })
        .collect();
    let Ok(decoded) = decode_execute_params(body, params, &prev, long_data) else { return false };
    if decoded.new_params_bound {
        types.clear();
        for t in &decoded.types {
            types.extend_from_slice(&[t.column_type.0, if t.unsigned { PARAM_UNSIGNED } else { 0 }]);
        }
    }
    let Some(reordered) = decoded.reorder(order) else { return false };
    encode_execute_params(&reordered, out);
    true
}

/// The backend parameters that client parameter `param` binds: itself, or with a reordering
/// translation every `?` that takes it (long data is then sent once for each).
pub(super) fn backend_params(order: Option<&[u16]>, param: u16) -> Vec<u16> {
    match order {
        None => vec![param],
        Some(order) => {
            order.iter().enumerate().filter(|(_, p)| **p == param).filter_map(|(j, _)| u16::try_from(j).ok()).collect()
        }
    }
}

#[cfg(test)]
mod tests;
