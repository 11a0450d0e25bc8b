//! Plain, mergeable copies of the per-digest (query shape) statistics the cores keep, for
//! `GET /api/stats/digests`. The live tables are core-local (`session::digest`); this is what
//! crosses to the control plane and how it combines cores.
//!
//! Digests are never metric labels (a fingerprint is unbounded); they are served as JSON only.

use std::collections::HashMap;
use std::time::Duration;

use super::sketch::LatencySketch;

/// Most distinct pools remembered per shape; a statement shape rarely runs on more.
pub const MAX_DIGEST_POOLS: usize = 4;

/// One query shape's figures, from one core or merged over several.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DigestRow {
    /// The shape's fingerprint (under the routing normalization strategy).
    pub fingerprint: u64,
    /// The client protocol (`postgres` or `mysql`): the same hash in two dialects is two shapes.
    pub protocol: &'static str,
    /// The normalized text (literals replaced by placeholders).
    pub normalized: String,
    /// Statements run.
    pub calls: u64,
    /// Time from sending the statement to the end of its response, summed.
    pub total: Duration,
    /// The longest single execution.
    pub max: Duration,
    /// Rows returned or affected, summed.
    pub rows: u64,
    /// Executions that ended in an error.
    pub errors: u64,
    /// Pools the shape ran on (at most [`MAX_DIGEST_POOLS`], first seen first).
    pub pools: Vec<String>,
    /// The distribution of the executions' times, for percentiles.
    pub latency: LatencySketch,
}

impl DigestRow {
    /// Adds `other` (the same shape from another core) to this row.
    fn absorb(&mut self, other: &DigestRow) {
        self.calls += other.calls;
        self.total += other.total;
        self.max = self.max.max(other.max);
        self.rows += other.rows;
        self.errors += other.errors;
        self.latency.merge(&other.latency);
        for p in &other.pools {
            if self.pools.len() < MAX_DIGEST_POOLS && !self.pools.contains(p) {
                self.pools.push(p.clone());
            }
        }
    }

    /// Mean time per call (zero before the first call).
    pub fn mean(&self) -> Duration {
        match u32::try_from(self.calls) {
            Ok(0) => Duration::ZERO,
            Ok(n) => self.total / n,
            Err(_) => Duration::from_secs_f64(self.total.as_secs_f64() / self.calls as f64),
        }
    }

    /// The `q` quantile (0.0..=1.0) of the execution times, within
    /// [`super::sketch::RELATIVE_ERROR`] (zero before the first call).
    pub fn percentile(&self, q: f64) -> Duration {
        self.latency.quantile(q).unwrap_or_default()
    }
}

/// One core's digest table (or several merged).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DigestSnapshot {
    /// Per shape.
    pub rows: Vec<DigestRow>,
    /// Executions not recorded because the table was full when their shape was new.
    pub dropped: u64,
}

impl DigestSnapshot {
    /// Merges per-core snapshots: the same (fingerprint, protocol) from several cores becomes one
    /// row. Rows come out sorted by total time, longest first.
    pub fn merge(parts: impl IntoIterator<Item = DigestSnapshot>) -> DigestSnapshot {
        let mut index: HashMap<(u64, &'static str), usize> = HashMap::new();
        let mut out = DigestSnapshot::default();
        for part in parts {
            out.dropped += part.dropped;
            for row in part.rows {
                match index.get(&(row.fingerprint, row.protocol)) {
                    Some(&i) => {
                        if let Some(mine) = out.rows.get_mut(i) {
                            mine.absorb(&row);
                        }
                    }
                    None => {
                        index.insert((row.fingerprint, row.protocol), out.rows.len());
                        out.rows.push(row);
                    }
                }
            }
        }
        out.rows
            .sort_by(|a, b| b.total.cmp(&a.total).then(b.calls.cmp(&a.calls)).then(a.fingerprint.cmp(&b.fingerprint)));
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(fp: u64, calls: u64, ms: u64, pools: &[&str]) -> DigestRow {
        let mut latency = LatencySketch::default();
        for _ in 0..calls {
            latency.record(Duration::from_millis(ms / calls.max(1)));
        }
        DigestRow {
            fingerprint: fp,
            protocol: "postgres",
            normalized: format!("select {fp}"),
            calls,
            total: Duration::from_millis(ms),
            max: Duration::from_millis(ms / calls.max(1)),
            rows: calls,
            errors: 1,
            pools: pools.iter().map(|p| (*p).to_owned()).collect(),
            latency,
        }
    }

    #[test]
    fn merges_the_same_shape_across_cores_and_sorts_by_total_time() {
        let a = DigestSnapshot { rows: vec![row(1, 2, 10, &["a"]), row(2, 1, 50, &["b"])], dropped: 1 };
        let b = DigestSnapshot { rows: vec![row(1, 3, 60, &["b", "a"])], dropped: 2 };
        let mut other_protocol = row(2, 1, 1, &[]);
        other_protocol.protocol = "mysql";
        let c = DigestSnapshot { rows: vec![other_protocol], dropped: 0 };
        let m = DigestSnapshot::merge([a, b, c]);
        assert_eq!(m.dropped, 3);
        assert_eq!(m.rows.len(), 3, "same hash, other protocol: another shape");
        let first = &m.rows[0];
        assert_eq!((first.fingerprint, first.calls, first.errors), (1, 5, 2));
        assert_eq!(first.total, Duration::from_millis(70));
        assert_eq!(first.max, Duration::from_millis(20));
        assert_eq!(first.pools, vec!["a".to_owned(), "b".to_owned()]);
        assert_eq!(first.mean(), Duration::from_millis(14));
        // Two calls of 5 ms from one core, three of 20 ms from the other: percentiles of all five.
        assert_eq!(first.latency.count(), 5);
        let (p50, p99) = (first.percentile(0.5), first.percentile(0.99));
        assert!(p50 >= Duration::from_micros(17_500) && p50 <= Duration::from_millis(20), "{p50:?}");
        assert_eq!(p99, p50, "the same bucket");
        let p20 = first.percentile(0.2);
        assert!(p20 >= Duration::from_micros(4_375) && p20 <= Duration::from_micros(5_625), "{p20:?}");
        assert_eq!(m.rows[1].fingerprint, 2);
        assert_eq!(m.rows[2].protocol, "mysql");
    }

    #[test]
    fn pools_stay_bounded_and_mean_of_nothing_is_zero() {
        let mut r = row(1, 0, 0, &["a", "b", "c", "d"]);
        assert_eq!(r.mean(), Duration::ZERO);
        assert_eq!(r.percentile(0.99), Duration::ZERO);
        r.absorb(&row(1, 1, 1, &["e"]));
        assert_eq!(r.pools.len(), MAX_DIGEST_POOLS);
        assert!(!r.pools.contains(&"e".to_owned()));
    }
}
