//! The core-local key memo: statement text → [`StatementKey`], for texts without literal values.
//!
//! Drivers on the extended protocol (and MySQL prepared statements) send the same parameterized
//! text again and again, byte for byte: its key is a pure function of the text, the protocol,
//! the normalization strategy and the session's lexer mode, so a repeat can take it from here
//! instead of lexing and hashing the whole statement again (#39). A text with literals in it is
//! not remembered: its next execution has other values, so it would only fill a slot.
//!
//! The session reads the same repeat again once it runs it, for the transaction block it opens,
//! the session effects it stages and whether it is about the causal token: a slot keeps those
//! too ([`Reading`], read on the first ask), so a repeat is not scanned for them either. A text
//! that is not kept is read once for all three while it is handled ([`Last`]).
//!
//! Direct-mapped and bounded: [`SLOTS`] slots of at most [`MAX_TEXT`] bytes each, their buffers
//! reused, so a flood of distinct texts overwrites slots and never grows the memo; [`Last`]
//! holds one more text of at most [`MAX_TEXT`] bytes.

use std::cell::OnceCell;

use super::causal::TokenUse;
use super::reading::{Last, Reading};
use super::StatementKey;
use crate::config::{NormalizationStrategy, Protocol};
use crate::sql::analyze::Effects;
use crate::sql::mode::LexMode;

/// Slots in the memo (a power of two).
const SLOTS: usize = 64;
/// The longest text remembered: longer ones cost more to keep than a repeat saves in
/// proportion, and the bound keeps the memo within `SLOTS × MAX_TEXT` bytes a core.
const MAX_TEXT: usize = 1024;

#[derive(Debug)]
struct Slot {
    text: String,
    key: StatementKey,
    /// The text's reading in the key's dialect, once asked.
    reading: OnceCell<Reading>,
}

/// Remembered keys by text. Owned by one core's router.
#[derive(Debug, Default)]
pub(super) struct KeyMemo {
    slots: Vec<Option<Slot>>,
    /// The words of the last text read that no slot keeps.
    last: Last,
}

impl KeyMemo {
    /// The key remembered for `sql` when it was computed for the same protocol, strategy and mode.
    pub(super) fn get(
        &self,
        sql: &str,
        protocol: Protocol,
        strategy: NormalizationStrategy,
        mode: LexMode,
    ) -> Option<StatementKey> {
        let slot = self.slots.get(slot_of(sql))?.as_ref()?;
        let k = slot.key;
        (slot.text == sql && k.protocol == protocol && k.strategy == strategy && k.mode == mode).then_some(k)
    }

    /// The key of `sql`: remembered, or computed and remembered when the text has no literal
    /// values (the same rules for `Router::route` and `Router::key`).
    pub(super) fn key(
        &mut self,
        sql: &str,
        protocol: Protocol,
        strategy: NormalizationStrategy,
        mode: LexMode,
    ) -> StatementKey {
        if let Some(k) = self.get(sql, protocol, strategy, mode) {
            return k;
        }
        let (key, values) = StatementKey::compute_noting_values(sql, protocol, strategy, mode);
        if !values {
            self.put(sql, key);
        }
        key
    }

    /// Remembers `key` for `sql` (a text without literal values), replacing the slot's text.
    pub(super) fn put(&mut self, sql: &str, key: StatementKey) {
        if sql.len() > MAX_TEXT {
            return;
        }
        if self.slots.is_empty() {
            self.slots.resize_with(SLOTS, || None);
        }
        let Some(entry) = self.slots.get_mut(slot_of(sql)) else { return };
        match entry {
            Some(slot) => {
                slot.text.clear();
                slot.text.push_str(sql);
                slot.key = key;
                slot.reading = OnceCell::new();
            }
            None => *entry = Some(Slot { text: sql.to_owned(), key, reading: OnceCell::new() }),
        }
    }

    /// `session_effects` of `sql` in `protocol`'s dialect, kept for a remembered text.
    pub(super) fn effects(&mut self, sql: &str, protocol: Protocol) -> Effects {
        match self.reading(sql, protocol) {
            Some(r) => r.effects.clone(),
            None => self.last.words(sql, protocol, MAX_TEXT).effects(sql, protocol),
        }
    }

    /// `opens_transaction` of `sql` in `protocol`'s dialect, kept for a remembered text.
    pub(super) fn opens_transaction(&mut self, sql: &str, protocol: Protocol) -> Option<&'static str> {
        match self.reading(sql, protocol) {
            Some(r) => r.opens,
            None => self.last.words(sql, protocol, MAX_TEXT).opens(sql, protocol),
        }
    }

    /// `causal::token_use` of `sql` in `protocol`'s dialect, kept for a remembered text.
    pub(super) fn token_use(&mut self, sql: &str, protocol: Protocol) -> Option<TokenUse> {
        match self.reading(sql, protocol) {
            Some(r) => r.token.clone(),
            None => self.last.words(sql, protocol, MAX_TEXT).token(sql, protocol),
        }
    }

    /// The reading of `sql` when it is remembered for `protocol`, read now if not yet.
    fn reading(&self, sql: &str, protocol: Protocol) -> Option<&Reading> {
        let slot = self.slots.get(slot_of(sql))?.as_ref()?;
        let kept = slot.key.protocol == protocol && slot.text == sql;
        kept.then(|| slot.reading.get_or_init(|| Reading::of(sql, protocol)))
    }
}

/// The slot of `sql`: its length and its first and last eight bytes mixed, so texts that differ
/// in their length or at either end (the table, the last condition) spread over the slots.
fn slot_of(sql: &str) -> usize {
    let b = sql.as_bytes();
    let word = |s: Option<&[u8]>| s.and_then(|s| <[u8; 8]>::try_from(s).ok()).map_or(0, u64::from_le_bytes);
    let first = word(b.get(..8));
    let last = word(b.len().checked_sub(8).and_then(|at| b.get(at..)));
    let h = (first ^ last.rotate_left(29) ^ b.len() as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    (h >> (64 - SLOTS.trailing_zeros())) as usize
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::routing::causal::token_use;
    use crate::routing::dialect;
    use crate::sql::analyze::{opens_transaction, session_effects};
    use crate::sql::Dialect;

    fn key(sql: &str, protocol: Protocol, mode: LexMode) -> StatementKey {
        StatementKey::compute_in(sql, protocol, NormalizationStrategy::String, mode)
    }

    #[test]
    fn a_text_is_found_only_under_what_its_key_was_computed_for() {
        let sql = "SELECT abalance FROM pgbench_accounts WHERE aid = $1";
        let mode = LexMode::default();
        let mut memo = KeyMemo::default();
        assert_eq!(memo.get(sql, Protocol::Postgres, NormalizationStrategy::String, mode), None);
        memo.put(sql, key(sql, Protocol::Postgres, mode));
        let found = memo.get(sql, Protocol::Postgres, NormalizationStrategy::String, mode);
        assert_eq!(found, Some(key(sql, Protocol::Postgres, mode)));
        assert_eq!(memo.get(sql, Protocol::MySql, NormalizationStrategy::String, mode), None);
        assert_eq!(memo.get(sql, Protocol::Postgres, NormalizationStrategy::Auto, mode), None);
        let other = LexMode { backslash_strings: true, ..mode };
        assert_eq!(memo.get(sql, Protocol::Postgres, NormalizationStrategy::String, other), None);
        // Same length, same slot or not: another text is never answered with this key.
        assert_eq!(memo.get(&sql.replace("$1", "$2"), Protocol::Postgres, NormalizationStrategy::String, mode), None);
    }

    #[test]
    fn keys_are_remembered_for_texts_without_values_only() {
        let (mode, strategy) = (LexMode::default(), NormalizationStrategy::String);
        let mut memo = KeyMemo::default();
        for (sql, remembered) in [
            ("SELECT abalance FROM pgbench_accounts WHERE aid = $1", true),
            ("BEGIN", true),
            ("SELECT abalance FROM pgbench_accounts WHERE aid = 12345", false),
        ] {
            for _ in 0..2 {
                assert_eq!(memo.key(sql, Protocol::Postgres, strategy, mode), key(sql, Protocol::Postgres, mode));
            }
            assert_eq!(memo.get(sql, Protocol::Postgres, strategy, mode).is_some(), remembered, "{sql}");
        }
    }

    /// Texts with and without session effects in either dialect, each one statement or more.
    const EFFECT_TEXTS: &[&str] = &[
        "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
        "SET application_name TO DEFAULT",
        "SET @x = ?",
        "LISTEN jobs",
        "SELECT pg_advisory_lock($1)",
        "BEGIN; SET LOCAL lock_timeout TO '1s'; SET search_path TO pg_temp, public",
        "CREATE TEMPORARY TABLE t (a int)",
        "USE app",
        "BEGIN",
        "SELECT 1; START TRANSACTION READ ONLY",
        "XA START 'x'",
        "BEGIN NOT ATOMIC SELECT 1; END",
        "SHOW querypilot.causal_token",
        "SELECT current_setting('querypilot.causal_token')",
    ];

    #[test]
    fn kept_readings_are_the_scans_in_either_protocol() {
        let (mode, strategy) = (LexMode::default(), NormalizationStrategy::String);
        for protocol in [Protocol::Postgres, Protocol::MySql] {
            let mut memo = KeyMemo::default();
            for sql in EFFECT_TEXTS {
                memo.put(sql, StatementKey::compute_in(sql, protocol, strategy, mode));
                for other in [protocol, Protocol::Postgres, Protocol::MySql] {
                    // First ask fills the slot, the second reads it; a text kept for the other
                    // protocol is its own dialect's scan.
                    for _ in 0..2 {
                        assert_eq!(memo.effects(sql, other), session_effects(sql, dialect(other)), "{sql} {other:?}");
                        let opens = opens_transaction(sql, dialect(other));
                        assert_eq!(memo.opens_transaction(sql, other), opens, "{sql} {other:?}");
                        assert_eq!(memo.token_use(sql, other), token_use(sql, dialect(other)), "{sql} {other:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn a_slot_given_to_another_text_forgets_what_it_kept() {
        let (mode, strategy) = (LexMode::default(), NormalizationStrategy::String);
        let listen = "BEGIN; LISTEN jobs";
        // Texts that differ at their end spread over the slots: one shares the listener's.
        let quiet = (0..10_000)
            .map(|i| format!("SELECT c FROM t WHERE id = ${i}"))
            .find(|t| slot_of(t) == slot_of(listen))
            .unwrap_or_default();
        assert_eq!(slot_of(&quiet), slot_of(listen));
        let mut memo = KeyMemo::default();
        memo.put(listen, key(listen, Protocol::Postgres, mode));
        assert!(memo.effects(listen, Protocol::Postgres).pins());
        assert_eq!(memo.opens_transaction(listen, Protocol::Postgres), Some("BEGIN"));
        memo.put(&quiet, StatementKey::compute_in(&quiet, Protocol::Postgres, strategy, mode));
        assert_eq!(memo.effects(&quiet, Protocol::Postgres), session_effects(&quiet, Dialect::Postgres));
        assert!(memo.effects(&quiet, Protocol::Postgres).list.is_empty());
        assert_eq!(memo.opens_transaction(&quiet, Protocol::Postgres), None);
    }

    #[test]
    fn bounded_by_slots_and_text_length() {
        let mode = LexMode::default();
        let mut memo = KeyMemo::default();
        let long = format!("SELECT {} FROM t", "a, ".repeat(MAX_TEXT));
        memo.put(&long, key(&long, Protocol::Postgres, mode));
        assert_eq!(memo.get(&long, Protocol::Postgres, NormalizationStrategy::String, mode), None);
        let texts: Vec<String> = (0..10 * SLOTS).map(|i| format!("SELECT c{i} FROM t WHERE id = $1")).collect();
        for t in &texts {
            memo.put(t, key(t, Protocol::Postgres, mode));
            assert_eq!(
                memo.get(t, Protocol::Postgres, NormalizationStrategy::String, mode),
                Some(key(t, Protocol::Postgres, mode))
            );
        }
        assert_eq!(memo.slots.len(), SLOTS);
        let kept =
            texts.iter().filter(|t| memo.get(t, Protocol::Postgres, NormalizationStrategy::String, mode).is_some());
        assert!(kept.count() <= SLOTS);
    }
}
