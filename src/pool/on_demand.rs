//! Pools made on demand from `[pool_template]` (#36): a PostgreSQL client naming a database no
//! pool serves gets a pool for it, a copy of the template pool (same backends, credentials,
//! mode, limits) with that database. Each core makes its own slice when its first client asks,
//! as configured pools have one per core; the connection budget is process-wide as for any
//! pool (keyed by the pool's name, so every core's slice draws from the same `max_connections`).
//!
//! How many such pools exist is bounded process-wide by `max_pools` (a client cannot make
//! unlimited pools by trying names): the registry counts each name's live pool objects on every
//! core, and a name holds its place until the last of them is dropped. A core drops its slice
//! as soon as nobody uses it (no session holds it, no connection idle or lent), so a name the
//! server refuses leaves no pool behind, and a pool idle for its `idle_timeout` (whose idle
//! connections `maintain` closed) goes too. Made pools keep no `min_connections` (that would
//! hold databases open, blocking `DROP DATABASE`) and share the template's backend health,
//! which the prober keeps up to date (they have no probe of their own).

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::Arc;

use parking_lot::Mutex;

use super::{BudgetRegistry, CorePool, PoolSet};
use crate::config::{Config, Pool as PoolConfig, Protocol};
use crate::error::{ErrorCode, Origin};
use crate::metrics::PoolCounters;

/// Why no pool could be made for a database.
#[derive(Debug, thiserror::Error)]
pub enum OnDemandError {
    /// `max_pools` template pools exist already.
    #[error(
        "the router serves {max} databases from its pool template already (pool_template.max_pools); database \
         \"{database}\" gets a pool once one of them is unused"
    )]
    Full {
        /// The database asked for.
        database: String,
        /// `pool_template.max_pools`.
        max: u32,
    },
}

impl ErrorCode for OnDemandError {
    fn code(&self) -> &'static str {
        "pool.template_full"
    }
    fn origin(&self) -> Origin {
        Origin::Internal
    }
    fn retryable(&self) -> bool {
        false
    }
}

/// A made pool's place among `max_pools`, held by one core-local pool object.
pub(super) struct Claim {
    registry: Arc<Mutex<HashMap<String, u32>>>,
    name: String,
}

impl Drop for Claim {
    fn drop(&mut self) {
        let mut map = self.registry.lock();
        if let Some(n) = map.get_mut(&self.name) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                map.remove(&self.name);
            }
        }
    }
}

impl BudgetRegistry {
    /// A place for a pool object named `name`: always when the name has one already (another
    /// core's slice, or the predecessor a reload replaces), else while fewer than `max` names do.
    fn claim(&self, name: &str, max: u32) -> Option<Claim> {
        let mut map = self.on_demand.lock();
        let room = map.len() < max as usize;
        match map.get_mut(name) {
            Some(n) => *n += 1,
            None if room => {
                map.insert(name.to_owned(), 1);
            }
            None => return None,
        }
        Some(Claim { registry: self.on_demand.clone(), name: name.to_owned() })
    }

    /// Databases served by template pools now, on any core.
    pub fn on_demand_pools(&self) -> usize {
        self.on_demand.lock().len()
    }
}

/// The configuration of the pool `template` makes for `database`.
fn derive(template: &PoolConfig, database: &str) -> PoolConfig {
    let mut config = template.clone();
    config.name = database.to_owned();
    config.database = database.to_owned();
    config.limits.min_connections = 0;
    config
}

impl CorePool {
    /// Whether the pool was made from `[pool_template]` for its client's database: its clients'
    /// statements all run there (a rule or split naming another pool would change database).
    pub fn is_on_demand(&self) -> bool {
        self.on_demand.is_some()
    }

    fn made_from(
        template: &PoolConfig,
        database: &str,
        budgets: &BudgetRegistry,
        max_pools: u32,
        predecessor: Option<&CorePool>,
    ) -> Result<CorePool, OnDemandError> {
        let claim = budgets
            .claim(database, max_pools)
            .ok_or_else(|| OnDemandError::Full { database: database.to_owned(), max: max_pools })?;
        let config = derive(template, database);
        let counters = predecessor.map_or_else(|| Rc::new(PoolCounters::new(database)), |p| p.counters.clone());
        let gate = predecessor.map_or_else(Rc::default, |p| p.gate.clone());
        let mut pool = CorePool::build_sharing_health(&config, &template.name, budgets, counters, gate);
        pool.on_demand = Some(claim);
        Ok(pool)
    }

    /// Nobody uses this core's slice: no session holds it, no connection is idle or lent.
    fn unused(self: &Rc<Self>) -> bool {
        Rc::strong_count(self) == 1 && self.idle.borrow().is_empty() && self.lent() == 0
    }
}

impl PoolSet {
    /// This set plus a pool for `database` made from the `config`'s PostgreSQL template, and
    /// that pool; `None` when there is no template.
    pub fn with_on_demand(
        &self,
        config: &Config,
        database: &str,
        budgets: &BudgetRegistry,
    ) -> Option<Result<(PoolSet, Rc<CorePool>), OnDemandError>> {
        let template = config.template_pool(Protocol::Postgres)?;
        let max = config.pool_template.max_pools.get();
        Some(CorePool::made_from(template, database, budgets, max, None).map(|pool| {
            let pool = Rc::new(pool);
            let mut pools = self.pools.clone();
            pools.insert(database.to_owned(), pool.clone());
            (PoolSet { pools }, pool)
        }))
    }

    /// This set without the template pools nobody uses; `None` when every one is in use.
    pub fn without_unused(&self) -> Option<PoolSet> {
        let unused: Vec<&String> =
            self.pools.iter().filter(|(_, p)| p.is_on_demand() && p.unused()).map(|(n, _)| n).collect();
        if unused.is_empty() {
            return None;
        }
        let pools = self.pools.iter().filter(|(n, _)| !unused.contains(n)).map(|(n, p)| (n.clone(), p.clone()));
        Some(PoolSet { pools: pools.collect() })
    }

    /// On reload: keeps each template pool of `previous` whose configuration the new template
    /// would make alike, remakes the others from it, and drops them all when there is no
    /// template any more (or a configured pool took the name).
    pub(super) fn carry_on_demand(&mut self, config: &Config, budgets: &BudgetRegistry, previous: &PoolSet) {
        let template = config.template_pool(Protocol::Postgres);
        let max = config.pool_template.max_pools.get();
        for (name, old) in previous.pools.iter().filter(|(_, p)| p.is_on_demand()) {
            let successor = match template {
                Some(t) if !self.pools.contains_key(name) => {
                    if old.config == derive(t, name) {
                        Some(old.clone())
                    } else {
                        CorePool::made_from(t, name, budgets, max, Some(old)).ok().map(Rc::new)
                    }
                }
                _ => None,
            };
            if !successor.as_ref().is_some_and(|s| Rc::ptr_eq(s, old)) {
                old.replaced.set(true);
            }
            if let Some(pool) = successor {
                self.pools.insert(name.clone(), pool);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_connections: u32, template: bool) -> Config {
        let template = if template { "[pool_template]\npostgres = \"main\"\nmax_pools = 2\n" } else { "" };
        let text = format!(
            "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\nusername = \"u\"\n\
             password = \"p\"\nmax_connections = {max_connections}\nbackends = [{{ host = \"127.0.0.1\", port = 5432 }}]\n\
             [routing]\ndefault_pool = \"main\"\n{template}"
        );
        Config::parse(&text, "test.toml").expect("valid config")
    }

    #[test]
    fn made_pools_follow_their_template_across_reloads_and_give_their_place_back() {
        let budgets = BudgetRegistry::default();
        let first = config(4, true);
        let set = PoolSet::build(&first, &budgets, None);
        let (set, made) = set.with_on_demand(&first, "db1", &budgets).expect("a template").expect("room");
        assert!(made.is_on_demand() && made.config.database == "db1" && made.config.limits.min_connections == 0);
        assert_eq!(made.config.backends, first.pool("main").expect("main").backends, "the template's backends");
        drop(made);
        // A reload that leaves the template alone keeps the pool (and its connections).
        let same = PoolSet::build(&first, &budgets, Some(&set));
        assert!(Rc::ptr_eq(same.get("db1").expect("kept"), set.get("db1").expect("made")));
        // One that changes the template remakes it from the new one.
        let bigger = config(8, true);
        let remade = PoolSet::build(&bigger, &budgets, Some(&same));
        let successor = remade.get("db1").expect("remade");
        assert_eq!(successor.config.limits.max_connections.get(), 8);
        assert!(set.get("db1").expect("old").is_replaced(), "sessions move to the successor");
        // Without a template it goes, and so does its place once every holder dropped it.
        let gone = PoolSet::build(&config(8, false), &budgets, Some(&remade));
        assert!(gone.get("db1").is_none() && remade.get("db1").expect("old").is_replaced());
        drop((set, same, remade));
        assert_eq!(budgets.on_demand_pools(), 0);
    }

    #[test]
    fn a_pool_nobody_uses_is_dropped() {
        let budgets = BudgetRegistry::default();
        let cfg = config(4, true);
        let set = PoolSet::build(&cfg, &budgets, None);
        let (set, held) = set.with_on_demand(&cfg, "db1", &budgets).expect("a template").expect("room");
        assert!(set.without_unused().is_none(), "a session holds it");
        drop(held);
        let smaller = set.without_unused().expect("unused now");
        assert!(smaller.get("db1").is_none() && smaller.get("main").is_some(), "configured pools stay");
        drop((set, smaller));
        assert_eq!(budgets.on_demand_pools(), 0, "its place is free");
    }

    #[test]
    fn max_pools_bounds_the_names_not_the_cores_holding_one() {
        let reg = BudgetRegistry::default();
        let a = reg.claim("a", 2).expect("first name");
        let a_other_core = reg.claim("a", 2).expect("the same name on another core takes no new place");
        let b = reg.claim("b", 2).expect("second name");
        assert!(reg.claim("c", 2).is_none(), "a third name is over max_pools");
        drop(a);
        assert!(reg.claim("c", 2).is_none(), "\"a\" still has a pool on another core");
        drop(a_other_core);
        assert!(reg.claim("c", 2).is_some(), "the last pool of \"a\" gave its place back");
        drop(b);
        assert_eq!(reg.on_demand_pools(), 0, "every claim returned");
    }
}
