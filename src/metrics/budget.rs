//! The process-wide budget for what the router holds on its clients' behalf (#33):
//! `limits.client_buffer_budget` bytes for every session of every core together, so that many
//! clients each within their own limits still cannot take the machine's memory.
//!
//! One atomic per buffer kind, shared by every core (the pools' connection budgets work the same
//! way): only a buffer that grows past what a session may hold without asking (a statement's
//! text, long data, a client message of 256 KiB or more) charges it, never a statement's
//! ordinary path. Cores charge concurrently, so
//! the total may pass the budget by at most one charge per core. The figures are exported as
//! `sqp_client_buffer_bytes{kind}`.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use super::label::BufferKind;

/// Bytes held per kind, process-wide.
#[derive(Debug, Default)]
pub struct ClientBudget {
    held: [AtomicU64; BufferKind::COUNT],
}

impl ClientBudget {
    /// An empty budget, shared by every core.
    pub fn new() -> Arc<Self> {
        Arc::new(Self::default())
    }

    /// Bytes held now, by [`BufferKind`] index.
    pub fn held(&self) -> [u64; BufferKind::COUNT] {
        self.held.each_ref().map(|h| h.load(Ordering::Relaxed))
    }

    /// Bytes held now, every kind together.
    pub fn total(&self) -> u64 {
        self.held().iter().sum()
    }

    /// A charge of nothing yet for buffers of `kind`; it grows with [`Charge::resize`].
    pub fn charge(self: &Arc<Self>, kind: BufferKind) -> Charge {
        Charge { budget: self.clone(), kind, bytes: 0 }
    }
}

/// Bytes one buffer holds against the budget; given back when dropped, however its owner ends.
#[derive(Debug)]
pub struct Charge {
    budget: Arc<ClientBudget>,
    kind: BufferKind,
    bytes: u64,
}

impl Charge {
    /// Bytes charged.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Makes the charge `bytes`; growing it fails (and changes nothing) when the process would
    /// hold more than `budget` bytes. Shrinking always succeeds.
    pub fn resize(&mut self, bytes: u64, budget: u64) -> bool {
        let Some(slot) = self.budget.held.get(self.kind.index()) else { return false };
        if bytes <= self.bytes {
            slot.fetch_sub(self.bytes - bytes, Ordering::Relaxed);
            self.bytes = bytes;
            return true;
        }
        let more = bytes - self.bytes;
        if self.budget.total().saturating_add(more) > budget {
            return false;
        }
        slot.fetch_add(more, Ordering::Relaxed);
        self.bytes = bytes;
        true
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.resize(0, 0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn charges_stay_within_the_budget_and_are_given_back_on_drop() {
        let budget = ClientBudget::new();
        let mut a = budget.charge(BufferKind::Statements);
        let mut b = budget.charge(BufferKind::LongData);
        assert!(a.resize(600, 1000));
        assert!(!b.resize(500, 1000), "600 + 500 is over 1000");
        assert_eq!(b.bytes(), 0, "a refused growth changes nothing");
        assert!(b.resize(400, 1000));
        assert_eq!(budget.held(), [600, 400, 0, 0, 0]);
        assert!(a.resize(100, 0), "shrinking always succeeds");
        assert_eq!(budget.total(), 500);
        drop(a);
        assert_eq!(budget.held(), [0, 400, 0, 0, 0]);
        drop(b);
        assert_eq!(budget.total(), 0);
    }
}
