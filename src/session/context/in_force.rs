//! The pools in force on a core, and how a statement finds the pool routing named (#39).
//!
//! Routing names pools; sessions need the pool itself (its counters, its backends' protocol,
//! its connections). Hashing the name in the pool set cost ~140 instructions a time, and a
//! statement asked up to three times, while nearly every statement goes to the pool its session
//! is on. So the session's own pool answers for its name, when it is still the pool of that
//! name in force: a reload that rebuilt it marks it replaced, and one that removed it is
//! remembered here, so both are looked up as before. Owns the core's pool set; knows nothing of
//! sessions or routing.

use std::rc::{Rc, Weak};

use crate::pool::{CorePool, PoolSet};

/// The core's pool set, and the pools it dropped that may still be in use.
pub(super) struct InForce {
    set: Rc<PoolSet>,
    /// Pools a new set dropped without marking them replaced (a reload removed the pool, or a
    /// template pool gave way), while something may hold them: a session on one of them must
    /// not take it for the pool of its name.
    gone: Vec<Weak<CorePool>>,
}

impl InForce {
    /// `set` in force, nothing dropped yet.
    pub(super) fn new(set: PoolSet) -> Self {
        Self { set: Rc::new(set), gone: Vec::new() }
    }

    /// The pool set in force.
    pub(super) fn set(&self) -> &Rc<PoolSet> {
        &self.set
    }

    /// Puts `set` in force, remembering each pool of the old set it drops unmarked.
    pub(super) fn swap(&mut self, set: PoolSet) {
        self.gone.retain(|p| p.strong_count() > 0);
        for old in self.set.iter() {
            let kept = set.get(old.name()).is_some_and(|new| Rc::ptr_eq(new, old));
            if !kept && !old.is_replaced() {
                self.gone.push(Rc::downgrade(old));
            }
        }
        self.set = Rc::new(set);
    }

    /// The pool called `name` in force: `current` itself, with no lookup, when it has that name
    /// and is still the pool of that name; otherwise the set's.
    pub(super) fn named(&self, name: &str, current: &Rc<CorePool>) -> Option<Rc<CorePool>> {
        if **current.name() == *name && self.holds(current) {
            return Some(current.clone());
        }
        self.set.get(name).cloned()
    }

    /// Whether `pool`, taken from a set that was in force, still is the pool of its name.
    fn holds(&self, pool: &Rc<CorePool>) -> bool {
        // A dropped pool's address reused by a new one only costs that one a lookup.
        !pool.is_replaced() && !self.gone.iter().any(|p| std::ptr::eq(p.as_ptr(), Rc::as_ptr(pool)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::pool::BudgetRegistry;

    fn config(pools: &[(&str, u16)]) -> Config {
        let mut text = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n".to_owned();
        for (name, port) in pools {
            text += &format!(
                "[pools.{name}]\nusername = \"u\"\npassword = \"p\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n"
            );
        }
        text += &format!("[routing]\ndefault_pool = \"{}\"\n", pools[0].0);
        Config::parse(&text, "t.toml").expect("valid config")
    }

    fn build(pools: &[(&str, u16)], previous: Option<&InForce>) -> PoolSet {
        PoolSet::build(&config(pools), &BudgetRegistry::default(), previous.map(|p| &**p.set()))
    }

    fn pool(set: &InForce, name: &str) -> Rc<CorePool> {
        set.set().get(name).cloned().expect("pool in the set")
    }

    fn same(a: Option<Rc<CorePool>>, b: &Rc<CorePool>) -> bool {
        a.is_some_and(|a| Rc::ptr_eq(&a, b))
    }

    #[test]
    fn the_sessions_own_pool_answers_for_its_name_without_a_lookup() {
        let pools = InForce::new(build(&[("main", 5432), ("other", 5433)], None));
        let (main, other) = (pool(&pools, "main"), pool(&pools, "other"));
        assert!(same(pools.named("main", &main), &main));
        assert!(same(pools.named("other", &main), &other), "another name is looked up");
        assert!(pools.named("none", &main).is_none());
        // A pool of the same name that the set does not hold is only ever answered by the
        // shortcut: the set would answer with its own.
        let twin = build(&[("main", 5432)], None).get("main").cloned().expect("twin");
        assert!(same(pools.named("main", &twin), &twin), "the session's own pool, not looked up");
    }

    #[test]
    fn a_pool_a_reload_rebuilt_or_removed_is_looked_up_as_before() {
        let mut pools = InForce::new(build(&[("main", 5432), ("other", 5433)], None));
        let (main, other) = (pool(&pools, "main"), pool(&pools, "other"));
        pools.swap(build(&[("main", 6432)], Some(&pools)));
        assert!(main.is_replaced());
        assert!(same(pools.named("main", &main), &pool(&pools, "main")), "the successor");
        assert!(pools.named("other", &other).is_none(), "removed: no pool of that name");
        pools.swap(build(&[("main", 6432), ("other", 5433)], Some(&pools)));
        let back = pool(&pools, "other");
        assert!(!Rc::ptr_eq(&back, &other));
        assert!(same(pools.named("other", &other), &back), "added again: the new pool");
        assert!(same(pools.named("other", &back), &back));
    }

    #[test]
    fn a_dropped_pool_is_forgotten_once_nothing_holds_it() {
        let mut pools = InForce::new(build(&[("main", 5432), ("other", 5433)], None));
        let other = pool(&pools, "other");
        pools.swap(build(&[("main", 5432)], Some(&pools)));
        assert_eq!(pools.gone.len(), 1);
        drop(other);
        pools.swap(build(&[("main", 5432)], Some(&pools)));
        assert!(pools.gone.is_empty(), "a kept pool is not dropped, a dead one not remembered");
    }
}
