//! Prepared-statement policy both wires share (#37): which router statements a backend
//! connection holds and which to close to make room, how many statements and bytes of text a
//! client may hold, and the fixed-seed key that names a statement alike on every core. The
//! wires keep the frames (Parse/Close, `COM_STMT_PREPARE`/`CLOSE`), the I/O and their errors.

use crate::config::Limits;

/// One statement the router prepared on a backend connection: its key, with whatever the
/// backend calls it (PostgreSQL: the name is the key; MySQL: the server's statement id).
pub trait OnConn: Copy {
    /// The router's key of the statement.
    fn key(self) -> u64;
}

impl OnConn for u64 {
    fn key(self) -> u64 {
        self
    }
}

impl OnConn for (u64, u32) {
    fn key(self) -> u64 {
        self.0
    }
}

/// Statement `key` on a connection whose statements are `prepared` (coldest first), made the
/// most recently used so eviction takes the coldest; `None` when the connection lacks it.
pub fn touch<E: OnConn>(prepared: &mut Vec<E>, key: u64) -> Option<E> {
    let entry = forget(prepared, key)?;
    prepared.push(entry);
    Some(entry)
}

/// Takes the coldest statements off `prepared` while the connection is at `limit`, so one more
/// fits, and returns them for the wire to close on the backend.
pub fn make_room<E: OnConn>(prepared: &mut Vec<E>, limit: usize) -> Vec<E> {
    let over = (prepared.len() + 1).saturating_sub(limit.max(1)).min(prepared.len());
    prepared.drain(..over).collect()
}

/// Records `entry` as prepared on the connection, the most recently used, in place of an
/// older entry of its key (prepared again under a new backend id) and after [`make_room`];
/// returns what it took off, that older entry first, for the wire to close on the backend.
pub fn admit<E: OnConn>(prepared: &mut Vec<E>, entry: E, limit: usize) -> Vec<E> {
    let mut gone: Vec<E> = forget(prepared, entry.key()).into_iter().collect();
    gone.extend(make_room(prepared, limit));
    prepared.push(entry);
    gone
}

/// Takes statement `key` off the connection's bookkeeping (it is closed, or was never
/// prepared there), returning its entry.
pub fn forget<E: OnConn>(prepared: &mut Vec<E>, key: u64) -> Option<E> {
    Some(prepared.remove(prepared.iter().position(|e| e.key() == key)?))
}

/// The id a client's new statement gets after `last` (MySQL's statement ids): never 0 (it
/// names no statement) nor 0xFFFFFFFF (MariaDB's "the last statement prepared", since 10.2),
/// nor one another of its statements has (`taken`), wrapping around.
pub fn next_id(last: u32, taken: impl Fn(u32) -> bool) -> u32 {
    let after = |id: u32| match id.wrapping_add(1) {
        0 | u32::MAX => 1,
        next => next,
    };
    let mut id = after(last);
    while taken(id) {
        id = after(id);
    }
    id
}

/// Why a client may not prepare one more statement (#33); each wire words it as its server
/// would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// It holds `limits.session_prepared_statements` already (the value).
    Count(u32),
    /// Its statements would hold more than `limits.session_prepared_bytes` (the value).
    Bytes(usize),
    /// The process's `limits.client_buffer_budget` is spent.
    Budget,
}

/// Whether a client holding `count` statements of `held` bytes may hold one more of `want`
/// bytes: within the session's count and bytes, then within the process's budget, which
/// `charge(total)` draws the session's new total from (`false`: spent, nothing drawn).
pub fn admission(
    limits: &Limits,
    count: usize,
    held: u64,
    want: u64,
    charge: impl FnOnce(u64, u64) -> bool,
) -> Result<(), Refusal> {
    let max = limits.session_prepared_statements.get();
    if count >= max as usize {
        return Err(Refusal::Count(max));
    }
    let total = held.saturating_add(want);
    if total > limits.session_prepared_bytes as u64 {
        return Err(Refusal::Bytes(limits.session_prepared_bytes));
    }
    if !charge(total, limits.client_buffer_budget) {
        return Err(Refusal::Budget);
    }
    Ok(())
}

/// The key of a statement from what identifies it on a wire (`parts`: its text and what
/// else changes what the server prepares), hashed with the wire's `seed`: fixed, so a
/// statement has the same key, and backend name, on every core and after a handover.
// Not `hash_one`: ahash specializes it on nightly builds, which would change the keys.
#[allow(clippy::manual_hash_one)]
pub fn statement_key(seed: u64, parts: impl std::hash::Hash) -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = ahash::RandomState::with_seeds(seed, 0x9e37_79b9, 0x7f4a_7c15, 0x2545_f491).build_hasher();
    parts.hash(&mut h);
    h.finish()
}

#[cfg(test)]
mod tests;
