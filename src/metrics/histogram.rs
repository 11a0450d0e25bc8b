//! A fixed-bucket latency histogram: the bucket bounds are compile-time constants, so histograms
//! from different cores merge by adding counts bucket by bucket.

use std::cell::Cell;
use std::time::Duration;

/// Upper bounds of the buckets in microseconds; a final `+Inf` bucket follows. Chosen for pool
/// waits: sub-millisecond when a connection is idle, seconds when the pool is exhausted.
pub const BOUNDS_MICROS: [u64; 14] = [
    100, 500, 1_000, 5_000, 10_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000, 5_000_000, 10_000_000,
    30_000_000,
];

/// Number of buckets including `+Inf`.
pub const BUCKETS: usize = BOUNDS_MICROS.len() + 1;

/// A core-local histogram (`Cell`s: only the owning core records into it).
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [Cell<u64>; BUCKETS],
    sum_micros: Cell<u64>,
}

impl Histogram {
    /// Records one observation.
    pub fn observe(&self, d: Duration) {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        let i = BOUNDS_MICROS.iter().position(|b| micros <= *b).unwrap_or(BOUNDS_MICROS.len());
        if let Some(c) = self.counts.get(i) {
            c.set(c.get() + 1);
        }
        self.sum_micros.set(self.sum_micros.get().saturating_add(micros));
    }

    /// A plain copy.
    pub fn snapshot(&self) -> HistogramSnapshot {
        HistogramSnapshot { counts: self.counts.each_ref().map(Cell::get), sum_micros: self.sum_micros.get() }
    }
}

/// A point-in-time copy of a histogram: per-bucket (not cumulative) counts.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct HistogramSnapshot {
    /// Observations per bucket, `+Inf` last.
    pub counts: [u64; BUCKETS],
    /// Sum of all observations in microseconds.
    pub sum_micros: u64,
}

impl HistogramSnapshot {
    /// Adds another histogram's observations.
    pub fn merge(&mut self, other: &HistogramSnapshot) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.sum_micros = self.sum_micros.saturating_add(other.sum_micros);
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// Sum of observations in seconds.
    pub fn sum_seconds(&self) -> f64 {
        self.sum_micros as f64 / 1e6
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn observations_land_in_the_first_bucket_that_holds_them_and_merge_adds() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(100)); // on the bound: first bucket (le is inclusive)
        h.observe(Duration::from_micros(101));
        h.observe(Duration::from_secs(3600));
        let s = h.snapshot();
        assert_eq!(s.counts[0], 1);
        assert_eq!(s.counts[1], 1);
        assert_eq!(s.counts[BUCKETS - 1], 1);
        assert_eq!(s.count(), 3);
        let mut m = s;
        m.merge(&s);
        assert_eq!(m.count(), 6);
        assert_eq!(m.sum_micros, 2 * s.sum_micros);
        assert!((s.sum_seconds() - 3600.000201).abs() < 1e-9);
    }
}
