//! The core-local plan cache: statement shape → session-independent routing facts, bounded with
//! CLOCK (second-chance) eviction so a flood of distinct shapes cannot grow it, and counted for
//! metrics. Owned by one core, so plain counters, no atomics.

use std::sync::Arc;

use ahash::AHashMap;

use crate::config::Protocol;

use super::decision::Facts;
use super::{KeySpace, StatementKey};

/// What one entry remembers about a statement shape: everything about it that depends neither on
/// the session nor on literal values.
#[derive(Debug, Clone)]
pub(super) struct Plan {
    /// The analysis facts.
    pub(super) facts: Arc<Facts>,
    /// Index (in priority order) of the first template/hash pattern rule the shape matches.
    pub(super) pattern: Option<u32>,
}

/// Cache operation counters since the router was created (monotonic, for `_total` metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Lookups that found the shape.
    pub hits: u64,
    /// Lookups that did not.
    pub misses: u64,
    /// Entries added.
    pub inserts: u64,
    /// Entries dropped to make room.
    pub evictions: u64,
    /// Times the whole cache was cleared (new rules or catalogs).
    pub invalidations: u64,
    /// Entries dropped by those clears.
    pub invalidated_entries: u64,
}

/// Everything a cached answer depends on besides the rule set: the shape (fingerprint in its
/// normalization space), the client protocol (dialect, per-protocol template keys) and the
/// session's tokenizing mode (#19).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct CacheKey {
    fingerprint: u64,
    tag: u8,
}

impl CacheKey {
    fn of(key: &StatementKey) -> CacheKey {
        let proto = match key.protocol {
            Protocol::Postgres => 0,
            Protocol::MySql => 1,
        };
        let space = match key.space {
            KeySpace::Lexer => 0,
            KeySpace::Ast => 2,
        };
        CacheKey { fingerprint: key.fingerprint.0, tag: proto | space | key.mode.bits() << 2 }
    }
}

#[derive(Debug)]
struct Slot {
    key: CacheKey,
    plan: Plan,
    /// CLOCK's second-chance bit: set on every hit, cleared as the hand passes.
    referenced: bool,
}

/// Bounded map from statement key to [`Plan`].
#[derive(Debug)]
pub(super) struct PlanCache {
    map: AHashMap<CacheKey, usize>,
    slots: Vec<Slot>,
    hand: usize,
    capacity: usize,
    stats: CacheStats,
}

impl PlanCache {
    /// An empty cache holding at most `capacity` entries (at least one).
    pub(super) fn new(capacity: usize) -> PlanCache {
        PlanCache {
            map: AHashMap::new(),
            slots: Vec::new(),
            hand: 0,
            capacity: capacity.max(1),
            stats: CacheStats::default(),
        }
    }

    /// Looks `key` up, counting a hit or a miss.
    pub(super) fn get(&mut self, key: &StatementKey) -> Option<Plan> {
        let found = self.map.get(&CacheKey::of(key)).and_then(|&i| self.slots.get_mut(i));
        match found {
            Some(slot) => {
                slot.referenced = true;
                self.stats.hits += 1;
                Some(slot.plan.clone())
            }
            None => {
                self.stats.misses += 1;
                None
            }
        }
    }

    /// Looks `key` up without counting or touching recency (for the dry-run).
    pub(super) fn contains(&self, key: &StatementKey) -> bool {
        self.map.contains_key(&CacheKey::of(key))
    }

    /// Stores `plan` for `key`, evicting one entry when full.
    pub(super) fn insert(&mut self, key: &StatementKey, plan: Plan) {
        let key = CacheKey::of(key);
        if let Some(slot) = self.map.get(&key).and_then(|&i| self.slots.get_mut(i)) {
            slot.plan = plan;
            return;
        }
        self.stats.inserts += 1;
        if self.slots.len() < self.capacity {
            self.map.insert(key, self.slots.len());
            self.slots.push(Slot { key, plan, referenced: false });
            return;
        }
        let victim = self.advance_hand();
        if let Some(slot) = self.slots.get_mut(victim) {
            self.map.remove(&slot.key);
            self.stats.evictions += 1;
            *slot = Slot { key, plan, referenced: false };
            self.map.insert(key, victim);
        }
    }

    /// CLOCK: skip (and clear) referenced slots; at most one full turn plus one step.
    fn advance_hand(&mut self) -> usize {
        let len = self.slots.len();
        for _ in 0..=len {
            let at = self.hand % len.max(1);
            self.hand = (at + 1) % len.max(1);
            match self.slots.get_mut(at) {
                Some(slot) if slot.referenced => slot.referenced = false,
                _ => return at,
            }
        }
        self.hand
    }

    /// Drops every entry (the rules or catalogs changed).
    pub(super) fn clear(&mut self) {
        self.stats.invalidations += 1;
        self.stats.invalidated_entries += self.slots.len() as u64;
        self.map.clear();
        self.slots.clear();
        self.hand = 0;
    }

    /// Sets a new bound, clearing the cache (used with a new rule set).
    pub(super) fn reset(&mut self, capacity: usize) {
        self.clear();
        self.capacity = capacity.max(1);
    }

    /// Entries held now.
    pub(super) fn len(&self) -> usize {
        self.slots.len()
    }

    /// The counters.
    pub(super) fn stats(&self) -> CacheStats {
        self.stats
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::NormalizationStrategy;
    use crate::sql::analyze::{AffinitySet, Operation};
    use crate::sql::fingerprint::Fingerprint;
    use crate::sql::volatility::Volatility;

    fn key(n: u64, protocol: Protocol, space: KeySpace) -> StatementKey {
        StatementKey {
            fingerprint: Fingerprint(n),
            lexer: Fingerprint(n),
            space,
            strategy: NormalizationStrategy::String,
            protocol,
            mode: crate::sql::mode::LexMode::default(),
        }
    }

    fn pg(n: u64) -> StatementKey {
        key(n, Protocol::Postgres, KeySpace::Lexer)
    }

    fn plan(pattern: Option<u32>) -> Plan {
        let facts = Facts {
            operation: Operation::Read,
            volatility: Volatility::Immutable,
            locking: None,
            affinity: AffinitySet::EMPTY,
            statement_count: 1,
            ineligibility: None,
            changes_data: false,
            evidence: Vec::new(),
        };
        Plan { facts: Arc::new(facts), pattern }
    }

    #[test]
    fn hit_and_miss_are_counted() {
        let mut c = PlanCache::new(4);
        assert!(c.get(&pg(1)).is_none());
        c.insert(&pg(1), plan(Some(3)));
        assert_eq!(c.get(&pg(1)).and_then(|p| p.pattern), Some(3));
        let s = c.stats();
        assert_eq!((s.hits, s.misses, s.inserts, s.evictions), (1, 1, 1, 0));
    }

    #[test]
    fn protocol_and_space_are_part_of_the_key() {
        let mut c = PlanCache::new(8);
        c.insert(&pg(7), plan(Some(1)));
        assert!(c.get(&key(7, Protocol::MySql, KeySpace::Lexer)).is_none());
        assert!(c.get(&key(7, Protocol::Postgres, KeySpace::Ast)).is_none());
        assert!(c.get(&pg(7)).is_some());
    }

    #[test]
    fn bounded_with_clock_second_chance() {
        let mut c = PlanCache::new(3);
        for n in 0..3 {
            c.insert(&pg(n), plan(None));
        }
        // 0 and 2 are referenced, so the hand passes them and evicts 1.
        assert!(c.get(&pg(0)).is_some());
        assert!(c.get(&pg(2)).is_some());
        c.insert(&pg(10), plan(None));
        assert_eq!(c.len(), 3);
        assert!(!c.contains(&pg(1)));
        assert!(c.contains(&pg(0)) && c.contains(&pg(2)) && c.contains(&pg(10)));
        assert_eq!(c.stats().evictions, 1);
        // A flood of new shapes never grows it past the bound.
        for n in 100..1_000 {
            c.insert(&pg(n), plan(None));
            assert!(c.len() <= 3);
        }
        assert_eq!(c.stats().evictions, 901);
        assert_eq!(c.map.len(), c.slots.len());
    }

    #[test]
    fn reinsert_replaces_without_eviction() {
        let mut c = PlanCache::new(1);
        c.insert(&pg(1), plan(None));
        c.insert(&pg(1), plan(Some(2)));
        assert_eq!(c.stats().inserts, 1);
        assert_eq!(c.stats().evictions, 0);
        assert_eq!(c.get(&pg(1)).and_then(|p| p.pattern), Some(2));
    }

    #[test]
    fn clear_counts_invalidation() {
        let mut c = PlanCache::new(4);
        c.insert(&pg(1), plan(None));
        c.insert(&pg(2), plan(None));
        c.reset(2);
        assert_eq!(c.len(), 0);
        assert!(c.get(&pg(1)).is_none());
        let s = c.stats();
        assert_eq!((s.invalidations, s.invalidated_entries), (1, 2));
        for n in 0..5 {
            c.insert(&pg(n), plan(None));
        }
        assert_eq!(c.len(), 2);
    }
}
