//! The schema generation: a process-wide counter that PostgreSQL sessions advance when a schema
//! change passes through the router (or a backend reports a plan made stale by one), so that a
//! statement a client prepares afterwards never reuses a server-side statement parsed before.
//!
//! Written only on a schema change, read once per client Parse: the cache line stays shared
//! by every core between schema changes, so the per-statement path writes no shared memory.

use std::sync::atomic::{AtomicU64, Ordering};

/// The process-wide schema generation (see the module docs).
#[derive(Debug, Default)]
pub struct SchemaGeneration(AtomicU64);

impl SchemaGeneration {
    /// The generation in force now.
    pub fn current(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }

    /// A schema change happened: statements prepared from now on get new server names.
    pub fn advance(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advances_monotonically() {
        let g = SchemaGeneration::default();
        let before = g.current();
        g.advance();
        g.advance();
        assert_eq!(g.current(), before + 2);
    }
}
