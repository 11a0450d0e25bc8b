//! A fixed-size, mergeable latency sketch: per-digest p50/p99 (`GET /api/stats/digests`).
//!
//! Log-linear buckets over microseconds: every power of two from 16 µs to 2^27 µs (134 s) is
//! split into [`SUBS`] equal sub-buckets, with one bucket below 16 µs and one at or above
//! 134 s. An observation costs a leading-zeros count, two shifts and an add; no allocation, no
//! float. Bucket bounds are constants, so sketches from different cores merge exactly by adding
//! counts (the merge of two sketches is the sketch of the union of their observations).
//!
//! Size: [`SKETCH_BUCKETS`] (94) `u64` counts and the exact maximum, 760 bytes per digest entry.
//! Counts are `u64` so a hot shape on one core never saturates them.
//!
//! Error: a percentile is reported as the middle of the bucket holding the nearest-rank
//! observation, capped by the exact maximum, so for observations from 16 µs to 134 s it is
//! within [`RELATIVE_ERROR`] (12.5%, half a sub-bucket over its lower bound) of the true
//! nearest-rank value. Below 16 µs the error is at most 8 µs; at or above 134 s the
//! percentile is the exact maximum (a lower bound only once two values exceed 134 s).

use std::time::Duration;

/// Sub-buckets per power of two, as a bit count.
const SUB_BITS: u32 = 2;
/// Sub-buckets per power of two.
pub const SUBS: usize = 1 << SUB_BITS;
/// Observations below `2^FLOOR_BITS` µs (16 µs) share the first bucket.
const FLOOR_BITS: u32 = 4;
/// Observations at or above `2^CEIL_BITS` µs (134 s) share the last bucket.
const CEIL_BITS: u32 = 27;
/// Number of buckets: underflow, the log-linear range, overflow.
pub const SKETCH_BUCKETS: usize = 1 + (CEIL_BITS - FLOOR_BITS) as usize * SUBS + 1;
/// Worst relative error of a percentile between 16 µs and 134 s.
pub const RELATIVE_ERROR: f64 = 1.0 / (2 * SUBS) as f64;

/// Latencies of one query shape, on one core or merged over several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatencySketch {
    counts: [u64; SKETCH_BUCKETS],
    max_micros: u64,
}

impl Default for LatencySketch {
    fn default() -> Self {
        Self { counts: [0; SKETCH_BUCKETS], max_micros: 0 }
    }
}

/// The bucket of an observation of `micros`.
fn index(micros: u64) -> usize {
    if micros < 1 << FLOOR_BITS {
        return 0;
    }
    if micros >= 1 << CEIL_BITS {
        return SKETCH_BUCKETS - 1;
    }
    let octave = u64::BITS - 1 - micros.leading_zeros(); // FLOOR_BITS..CEIL_BITS
    let sub = (micros >> (octave - SUB_BITS)) as usize & (SUBS - 1);
    1 + (octave - FLOOR_BITS) as usize * SUBS + sub
}

/// The lower bound and width of bucket `i` in microseconds (`i` below the overflow bucket).
fn bounds(i: usize) -> (u64, u64) {
    if i == 0 {
        return (0, 1 << FLOOR_BITS);
    }
    let octave = FLOOR_BITS + ((i - 1) / SUBS) as u32;
    let width = 1u64 << (octave - SUB_BITS);
    ((1u64 << octave) + ((i - 1) % SUBS) as u64 * width, width)
}

impl LatencySketch {
    /// Records one observation.
    pub fn record(&mut self, d: Duration) {
        let micros = u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
        if let Some(c) = self.counts.get_mut(index(micros)) {
            *c += 1;
        }
        self.max_micros = self.max_micros.max(micros);
    }

    /// Adds another sketch's observations (the same shape from another core).
    pub fn merge(&mut self, other: &LatencySketch) {
        for (a, b) in self.counts.iter_mut().zip(other.counts.iter()) {
            *a += b;
        }
        self.max_micros = self.max_micros.max(other.max_micros);
    }

    /// Observations recorded.
    pub fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// The `q` quantile (0.0..=1.0) by nearest rank, within [`RELATIVE_ERROR`]; `None` when
    /// nothing was recorded.
    pub fn quantile(&self, q: f64) -> Option<Duration> {
        let n = self.count();
        if n == 0 {
            return None;
        }
        let rank = ((q.clamp(0.0, 1.0) * n as f64).ceil() as u64).clamp(1, n);
        let mut seen = 0;
        let i = self.counts.iter().position(|c| {
            seen += c;
            seen >= rank
        })?;
        let estimate = if i == SKETCH_BUCKETS - 1 {
            self.max_micros
        } else {
            let (low, width) = bounds(i);
            (low + width / 2).min(self.max_micros)
        };
        Some(Duration::from_micros(estimate))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    fn of(values: &[u64]) -> LatencySketch {
        let mut s = LatencySketch::default();
        for v in values {
            s.record(us(*v));
        }
        s
    }

    /// The nearest-rank `q` quantile of `values`, exactly.
    fn exact(values: &[u64], q: f64) -> u64 {
        let mut v = values.to_vec();
        v.sort_unstable();
        let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
        v[rank - 1]
    }

    fn within_error(estimate: Duration, truth: u64) -> bool {
        let e = estimate.as_micros() as f64;
        (e - truth as f64).abs() <= RELATIVE_ERROR * truth as f64
    }

    #[test]
    fn buckets_tile_the_range_without_gaps_and_the_size_is_as_documented() {
        assert_eq!(SKETCH_BUCKETS, 94);
        assert_eq!(std::mem::size_of::<LatencySketch>(), 760);
        for i in 1..SKETCH_BUCKETS - 1 {
            let (low, width) = bounds(i);
            assert_eq!(index(low), i);
            assert_eq!(index(low + width - 1), i);
            assert_eq!(index(low + width), i + 1, "bucket {i} ends where the next starts");
            assert!(width as f64 / low as f64 <= 2.0 * RELATIVE_ERROR, "bucket {i} too wide");
        }
        assert_eq!(index(0), 0);
        assert_eq!(index(15), 0);
        assert_eq!(index(16), 1);
        assert_eq!(index((1 << 27) - 1), SKETCH_BUCKETS - 2);
        assert_eq!(index(1 << 27), SKETCH_BUCKETS - 1);
        assert_eq!(index(u64::MAX), SKETCH_BUCKETS - 1);
    }

    #[test]
    fn an_empty_sketch_has_no_percentiles() {
        let s = LatencySketch::default();
        assert_eq!((s.count(), s.quantile(0.5), s.quantile(0.99)), (0, None, None));
    }

    #[test]
    fn one_value_is_every_percentile_within_the_error() {
        for v in [16, 100, 999, 200_000, 1_000_000, 30_000_000, (1 << 27) - 1] {
            let s = of(&[v]);
            for q in [0.0, 0.5, 0.99, 1.0] {
                let p = s.quantile(q).expect("one value");
                assert!(within_error(p, v), "{v} µs at q={q}: {p:?}");
                assert!(p <= us(v), "never above the maximum");
            }
        }
    }

    #[test]
    fn extremes_are_capped_by_the_exact_maximum_and_tiny_values_stay_tiny() {
        let s = of(&[3_600_000_000]); // an hour: past the last bound
        assert_eq!(s.quantile(0.5), Some(Duration::from_secs(3600)));
        let s = of(&[0, 1, 15]);
        let p = s.quantile(1.0).expect("values");
        assert!(p <= us(15), "{p:?}");
        let s = of(&[u64::MAX]);
        assert_eq!(s.quantile(0.99), Some(us(u64::MAX)));
        assert_eq!(s.count(), 1);
    }

    #[test]
    fn percentiles_of_a_spread_are_within_the_stated_error() {
        // Deterministic spread over 20 µs .. 60 s: a multiplicative walk.
        let mut values = Vec::new();
        let mut v = 20.0f64;
        while v < 60e6 {
            values.push(v as u64);
            v *= 1.013;
        }
        let s = of(&values);
        for q in [0.01, 0.25, 0.5, 0.9, 0.99, 0.999, 1.0] {
            let p = s.quantile(q).expect("values");
            let truth = exact(&values, q);
            assert!(within_error(p, truth), "q={q}: {p:?} vs {truth} µs");
        }
    }

    #[test]
    fn merge_is_the_sketch_of_the_union() {
        let a: Vec<u64> = (0..500).map(|i| 50 + i * 7).collect();
        let b: Vec<u64> = (0..300).map(|i| 200_000 + i * 1_000).collect();
        let mut merged = of(&a);
        merged.merge(&of(&b));
        let union: Vec<u64> = a.iter().chain(b.iter()).copied().collect();
        assert_eq!(merged, of(&union), "bucket for bucket, maximum included");
        assert_eq!(merged.count(), 800);
        let p99 = merged.quantile(0.99).expect("values");
        assert!(within_error(p99, exact(&union, 0.99)), "{p99:?}");
        let mut empty = LatencySketch::default();
        empty.merge(&merged);
        assert_eq!(empty, merged, "merging into nothing copies");
    }
}
