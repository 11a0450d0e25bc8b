//! Which backends of a primary-role pool may be lent now (#40), pure. A write pool may list
//! several servers of which one is the primary at a time; the health probes read each server's
//! liveness and role (`pg_is_in_recovery()`, `@@read_only` / `@@innodb_read_only`) into the
//! shared health table, and this module turns those readings into the least standing a backend
//! needs: writes go only to the servers found writable, a demoted one takes no new work, and
//! while none is writable the pool either waits (`failover_wait`) or, by default, lends as it
//! did before roles were read. No I/O, no clock.

/// What the shared health says of one backend of a primary-role pool, worst first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Standing {
    /// Marked down, or found read-only (a standby, a demoted primary).
    Unfit,
    /// Up, its role not read: before the first probe, or on a pool whose probes cannot read it
    /// (no `username`, a generic engine).
    Unverified,
    /// Up and found writable by the last probe that read its role.
    Writable,
}

impl Standing {
    /// A backend's standing from its health and its role reading (`Some(true)`: writable).
    /// `strict`: an unread role counts as unfit, so a pool that waits for a writable backend
    /// never lends one that may turn out to be a standby (the first probe runs at once).
    pub(crate) fn of(healthy: bool, writable: Option<bool>, strict: bool) -> Standing {
        match (healthy, writable) {
            (true, Some(true)) => Standing::Writable,
            (true, None) if !strict => Standing::Unverified,
            _ => Standing::Unfit,
        }
    }
}

/// Which backends a checkout of the pool may be lent now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Floor {
    /// Those of at least this standing, the best any backend has: a backend found writable
    /// excludes the unverified ones, an unverified one those known to be down or read-only.
    AtLeast(Standing),
    /// Any (health alone decides, as before #40): no backend is fit and the pool does not wait.
    Any,
    /// None: no backend is fit and checkouts wait for one to become writable (failover).
    Nothing,
}

impl Floor {
    /// The floor of a pool whose backends stand as `standings`; `waits`: the pool has a
    /// `failover_wait`, so having no fit backend means waiting rather than lending any.
    pub(crate) fn of(standings: impl IntoIterator<Item = Standing>, waits: bool) -> Floor {
        match standings.into_iter().max() {
            Some(best) if best > Standing::Unfit => Floor::AtLeast(best),
            _ if waits => Floor::Nothing,
            _ => Floor::Any,
        }
    }

    /// Whether a backend of standing `s` may be lent.
    pub(crate) fn admits(self, s: Standing) -> bool {
        match self {
            Floor::AtLeast(least) => s >= least,
            Floor::Any => true,
            Floor::Nothing => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Standing::{Unfit, Unverified, Writable};
    use super::*;

    #[test]
    fn standing_follows_health_then_role() {
        assert_eq!(Standing::of(true, Some(true), false), Writable);
        assert_eq!(Standing::of(true, Some(false), false), Unfit, "a standby or a demoted primary");
        assert_eq!(Standing::of(false, Some(true), false), Unfit, "a stopped primary keeps its last role");
        assert_eq!(Standing::of(true, None, false), Unverified);
        assert_eq!(Standing::of(true, None, true), Unfit, "a waiting pool does not guess");
        assert_eq!(Standing::of(true, Some(true), true), Writable);
    }

    #[test]
    fn the_writable_backend_excludes_the_others() {
        let f = Floor::of([Writable, Unfit, Unverified], false);
        assert_eq!(f, Floor::AtLeast(Writable));
        assert_eq!([Writable, Unfit, Unverified].map(|s| f.admits(s)), [true, false, false]);
    }

    #[test]
    fn without_a_writable_one_the_unverified_are_lent_but_not_the_read_only() {
        let f = Floor::of([Unfit, Unverified, Unverified], false);
        assert_eq!([Unfit, Unverified].map(|s| f.admits(s)), [false, true]);
    }

    #[test]
    fn no_fit_backend_means_any_by_default_and_nothing_with_failover_wait() {
        assert_eq!(Floor::of([Unfit, Unfit], false), Floor::Any);
        assert!(Floor::Any.admits(Unfit), "health alone decides, as before roles were read");
        assert_eq!(Floor::of([Unfit, Unfit], true), Floor::Nothing);
        assert!(!Floor::Nothing.admits(Writable));
        assert_eq!(Floor::of([], true), Floor::Nothing);
        assert_eq!(Floor::of([Unfit, Writable], true), Floor::AtLeast(Writable), "promoted: served again");
    }
}
