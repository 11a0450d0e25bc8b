//! Core-local per-digest statistics: for each query shape (fingerprint and client protocol) the
//! normalized text, calls, total and max time, a fixed-size latency sketch (p50/p99, 760 bytes,
//! `metrics::sketch`), rows, errors and the pools it ran on.
//!
//! Owned by one core (`CoreContext`), so recording takes no lock. Bounded: once `capacity`
//! shapes are known, new shapes are refused and counted as dropped rather than evicting, so a
//! flood of one-off statements costs nothing and the shapes already measured keep their figures
//! (`DELETE /api/stats/digests` makes room). Recording an existing shape on a pool it has used
//! allocates nothing; the normalized text is computed once, when a shape is first seen.
//!
//! Per-core state shared by the core's sessions, not session policy, so not in the engine (what
//! one session measures of a statement is `engine::digest`).

use std::collections::HashMap;
use std::time::Duration;

use crate::config::Protocol;
use crate::metrics::{DigestRow, DigestSnapshot, LatencySketch, MAX_DIGEST_POOLS};
use crate::routing::dialect;
use crate::session::engine::digest::Execution;
use crate::sql::fingerprint::normalize;

/// Shapes a core remembers by default.
pub const DEFAULT_CAPACITY: usize = 5_000;

/// Adds one execution to its shape's figures.
fn add(row: &mut DigestRow, e: &Execution<'_>) {
    row.calls += 1;
    row.total += e.elapsed;
    row.max = row.max.max(e.elapsed);
    row.rows += e.rows;
    row.errors += u64::from(e.error);
    row.latency.record(e.elapsed);
    if row.pools.len() < MAX_DIGEST_POOLS && !row.pools.iter().any(|p| p == e.pool) {
        row.pools.push(e.pool.to_owned());
    }
}

/// A core's digest table.
#[derive(Debug)]
pub struct DigestTable {
    entries: HashMap<(u64, Protocol), DigestRow, ahash::RandomState>,
    capacity: usize,
    dropped: u64,
}

impl Default for DigestTable {
    fn default() -> Self {
        Self::with_capacity(DEFAULT_CAPACITY)
    }
}

impl DigestTable {
    /// An empty table remembering at most `capacity` shapes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self { entries: HashMap::with_hasher(ahash::RandomState::new()), capacity, dropped: 0 }
    }

    /// Adds one execution to its shape's figures (creating the shape if there is room).
    pub fn record(&mut self, e: &Execution<'_>) {
        let key = (e.fingerprint.0, e.protocol);
        if let Some(row) = self.entries.get_mut(&key) {
            add(row, e);
            return;
        }
        if self.entries.len() >= self.capacity {
            self.dropped += 1;
            return;
        }
        let mut row = DigestRow {
            fingerprint: e.fingerprint.0,
            protocol: e.protocol.as_str(),
            normalized: normalize(e.sql, dialect(e.protocol)),
            calls: 0,
            total: Duration::ZERO,
            max: Duration::ZERO,
            rows: 0,
            errors: 0,
            pools: Vec::new(),
            latency: LatencySketch::default(),
        };
        add(&mut row, e);
        self.entries.insert(key, row);
    }

    /// A plain copy for the control plane.
    pub fn snapshot(&self) -> DigestSnapshot {
        DigestSnapshot { rows: self.entries.values().cloned().collect(), dropped: self.dropped }
    }

    /// Forgets every shape and the drop count.
    pub fn reset(&mut self) {
        self.entries.clear();
        self.entries.shrink_to(self.capacity.min(1024));
        self.dropped = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn exec<'a>(sql: &'a str, ms: u64, pool: &'a str, error: bool) -> Execution<'a> {
        Execution {
            fingerprint: crate::sql::fingerprint::fingerprint(sql, crate::sql::Dialect::Postgres),
            sql,
            protocol: Protocol::Postgres,
            elapsed: Duration::from_millis(ms),
            rows: 2,
            error,
            pool,
        }
    }

    #[test]
    fn one_shape_accumulates_calls_time_rows_errors_and_pools() {
        let mut t = DigestTable::default();
        t.record(&exec("SELECT * FROM t WHERE id = 1", 3, "primary", false));
        t.record(&exec("select * from t where id = 42", 7, "replica", true));
        t.record(&exec("SELECT * FROM t WHERE id = 9", 1, "primary", false));
        let s = t.snapshot();
        assert_eq!(s.rows.len(), 1);
        let r = &s.rows[0];
        assert_eq!((r.calls, r.rows, r.errors), (3, 6, 1));
        assert_eq!((r.total, r.max), (Duration::from_millis(11), Duration::from_millis(7)));
        assert_eq!(r.latency.count(), 3, "every execution timed in the sketch");
        let (p50, p100) = (r.percentile(0.5), r.percentile(1.0));
        assert!(p50 > Duration::from_micros(2_625) && p50 < Duration::from_micros(3_375), "3 ms ± 12.5%: {p50:?}");
        assert!(p100 > Duration::from_micros(6_125) && p100 <= Duration::from_millis(7), "{p100:?}");
        assert_eq!(r.pools, vec!["primary".to_owned(), "replica".to_owned()]);
        assert_eq!(r.protocol, "postgres");
        assert!(!r.normalized.contains("42") && !r.normalized.contains('1'), "{}", r.normalized);
    }

    #[test]
    fn a_full_table_refuses_new_shapes_counts_them_and_reset_makes_room() {
        let mut t = DigestTable::with_capacity(2);
        t.record(&exec("SELECT a FROM t", 1, "p", false));
        t.record(&exec("SELECT b FROM t", 1, "p", false));
        t.record(&exec("SELECT c FROM t", 1, "p", false));
        t.record(&exec("SELECT a FROM t", 1, "p", false));
        let s = t.snapshot();
        assert_eq!((s.rows.len(), s.dropped), (2, 1));
        assert_eq!(s.rows.iter().map(|r| r.calls).sum::<u64>(), 3, "known shapes still count");
        t.reset();
        assert!(t.snapshot().rows.is_empty());
        assert_eq!(t.snapshot().dropped, 0);
        t.record(&exec("SELECT c FROM t", 1, "p", false));
        assert_eq!(t.snapshot().rows.len(), 1);
    }

    #[test]
    fn the_same_hash_under_two_protocols_is_two_shapes() {
        let mut t = DigestTable::default();
        let pg = exec("SELECT 1", 1, "p", false);
        let my = Execution { protocol: Protocol::MySql, ..pg };
        t.record(&pg);
        t.record(&my);
        assert_eq!(t.snapshot().rows.len(), 2);
    }
}
