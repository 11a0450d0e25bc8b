//! The figures of a pool's shape limiter (#41) on one core, and their merge over cores.
//!
//! Per limited shape: its limit, the permits in use, the checkouts queued and those refused.
//! Exported per pool in Prometheus (no fingerprint as a label, see the crate's naming rules) and
//! per shape in the API and console views.

/// One limited shape's figures on one core (or summed over cores).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LimitRow {
    /// The shape's fingerprint.
    pub digest: u64,
    /// The start of a statement of the shape.
    pub text: String,
    /// The limit in force (summed over cores: each core enforces its own).
    pub limit: u32,
    /// Whether the limit is fixed by `max_concurrent` rather than learned.
    pub fixed: bool,
    /// Permits held now: checkouts of the shape waiting for or holding a connection.
    pub in_use: u32,
    /// Checkouts of the shape waiting for a permit now.
    pub queued: u32,
    /// Checkouts refused after waiting `limit_wait` for a permit, since the pool was built.
    pub rejected: u64,
}

/// Adds `from`'s rows into `into`, shape by shape.
pub fn merge_rows(into: &mut Vec<LimitRow>, from: &[LimitRow]) {
    for r in from {
        match into.iter_mut().find(|mine| mine.digest == r.digest) {
            Some(mine) => {
                mine.limit += r.limit;
                mine.fixed |= r.fixed;
                mine.in_use += r.in_use;
                mine.queued += r.queued;
                mine.rejected += r.rejected;
            }
            None => into.push(r.clone()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_of_one_shape_add_up_over_cores_and_others_are_kept() {
        let row =
            |digest, limit, in_use| LimitRow { digest, limit, in_use, queued: 1, rejected: 2, ..LimitRow::default() };
        let mut merged = vec![row(1, 2, 2)];
        merge_rows(&mut merged, &[row(1, 3, 1), row(7, 8, 0)]);
        assert_eq!(merged.len(), 2);
        assert_eq!((merged[0].limit, merged[0].in_use, merged[0].queued, merged[0].rejected), (5, 3, 2, 4));
        assert_eq!(merged[1].digest, 7);
    }
}
