//! Databases as the core's sessions see them (#36): pools made on demand from
//! `[pool_template]` for a database no pool serves, and letting go of a database a client is
//! about to drop, rename or copy (every core closes its idle connections to it first).

use std::rc::Rc;
use std::time::Duration;

use futures_lite::StreamExt;

use super::CoreContext;
use crate::pool::{CorePool, OnDemandError, PoolSet};
use crate::rt;

/// How long a client's `DROP DATABASE` (or RENAME, or copy) waits for every core to let go of
/// the database before it goes to the server anyway (which then says who still holds it).
const RELEASE_WAIT: Duration = Duration::from_secs(2);

/// How long after a release connections given back to a pool on the database are closed:
/// PostgreSQL's `DROP DATABASE` waits up to 5 s for other sessions to leave, and a connection
/// whose client was just ending (or a session-mode one being reset) must be among them.
const LET_GO_WINDOW: Duration = Duration::from_secs(6);

impl CoreContext {
    /// The pool serving `database` made from `[pool_template]`: this core's, or a new one
    /// (`None`: there is no template; an error: `max_pools` are in use). Its first connection
    /// tells whether the server has the database; a pool nobody uses is dropped at the next
    /// upkeep tick, so a name the server refuses leaves nothing behind.
    pub fn pool_for_database(&self, database: &str) -> Option<Result<Rc<CorePool>, OnDemandError>> {
        let pools = self.pools();
        if let Some(p) = pools.get(database).filter(|p| p.is_on_demand()) {
            return Some(Ok(p.clone()));
        }
        let config = self.config();
        let made = pools.with_on_demand(&config, database, &self.links.budgets)?;
        Some(made.map(|(set, pool)| {
            self.pools.borrow_mut().swap(set);
            tracing::info!(database, "made a pool from the pool template");
            pool
        }))
    }

    /// Drops the template pools nobody on this core uses (core upkeep).
    pub fn drop_unused_pools(&self) {
        let smaller: Option<PoolSet> = self.pools.borrow().set().without_unused();
        if let Some(set) = smaller {
            self.pools.borrow_mut().swap(set);
        }
    }

    /// Closes this core's idle server connections to `database`; returns how many pools had
    /// some.
    pub fn close_idle_on_database(&self, database: &str) -> usize {
        let pools = self.pools();
        let until = rt::now() + LET_GO_WINDOW;
        let mut had_idle = 0;
        for pool in pools.iter().filter(|p| p.config.database == database) {
            had_idle += usize::from(pool.idle_count() > 0);
            pool.let_go(until);
        }
        had_idle
    }

    /// Asks every core (this one included) to let go of `database` and waits for their
    /// answers, at most [`RELEASE_WAIT`].
    pub async fn release_database(&self, database: &str) {
        let deadline = rt::now() + RELEASE_WAIT;
        let (tx, mut rx) = futures_channel::mpsc::unbounded();
        (self.links.release_database)(database.to_owned(), deadline, tx);
        let cores = self.links.cores;
        let answered = rt::with_deadline(deadline, async {
            let mut n = 0;
            while n < cores && rx.next().await.is_some() {
                n += 1;
            }
        })
        .await;
        if answered.is_err() {
            tracing::warn!(database, "not every core let go of the database in time");
        }
    }
}
