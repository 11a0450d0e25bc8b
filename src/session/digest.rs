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
mod tests;
