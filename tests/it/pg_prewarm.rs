//! Issue #3: `min_connections` — `CorePool::prewarm` opens a core's share of the minimum, and
//! idle reaping keeps that many open. Driven through the pool API on a core of its own (the
//! router's start-up wiring calls the same method).

use std::sync::mpsc;
use std::time::Duration;

use querypilot::config::{Config, Protocol};
use querypilot::pool::{BudgetRegistry, CorePool, PoolSet};

use crate::router::{pg_config, pg_pool};
use crate::support::dbs;

#[test]
fn min_share_spreads_the_minimum_over_cores() {
    assert_eq!((0..3).map(|i| CorePool::min_share(7, 3, i)).collect::<Vec<_>>(), vec![3, 2, 2]);
    assert_eq!((0..2).map(|i| CorePool::min_share(1, 2, i)).collect::<Vec<_>>(), vec![1, 0]);
    assert_eq!(CorePool::min_share(0, 4, 0), 0);
    assert_eq!(CorePool::min_share(5, 0, 0), 5, "zero cores counts as one");
}

#[test]
fn prewarm_opens_the_share_and_maintain_keeps_it() {
    let pools =
        pg_pool("main", dbs().pg.primary_port, "transaction", 4) + "min_connections = 3\nidle_timeout = \"1s\"\n";
    let config = Config::parse(&pg_config(&[0], &pools, "main"), "prewarm.toml").expect("config");
    let (tx, rx) = mpsc::channel();
    let core = querypilot::rt::spawn_core("prewarm-test", None, move |_queues| async move {
        let budgets = BudgetRegistry::default();
        let set = PoolSet::build(&config, &budgets, None);
        let pool = set.get("main").expect("pool").clone();
        let opened = pool.prewarm(Protocol::Postgres, 3).await.expect("prewarm");
        let after_prewarm = pool.idle_count();
        let again = pool.prewarm(Protocol::Postgres, 3).await.expect("prewarm again");
        // Far in the future every connection is past idle_timeout: only the minimum stays.
        let extra = pool
            .checkout(Protocol::Postgres, None, querypilot::rt::now() + Duration::from_secs(5))
            .await
            .expect("checkout");
        let extra2 = pool
            .checkout(Protocol::Postgres, None, querypilot::rt::now() + Duration::from_secs(5))
            .await
            .expect("checkout");
        let extra3 = pool
            .checkout(Protocol::Postgres, None, querypilot::rt::now() + Duration::from_secs(5))
            .await
            .expect("checkout");
        let extra4 = pool
            .checkout(Protocol::Postgres, None, querypilot::rt::now() + Duration::from_secs(5))
            .await
            .expect("checkout a 4th");
        for c in [extra, extra2, extra3, extra4] {
            pool.checkin(c, true);
        }
        let before_reap = pool.idle_count();
        pool.maintain(querypilot::rt::now() + Duration::from_secs(3600));
        let _ = tx.send((opened, after_prewarm, again, before_reap, pool.idle_count()));
    })
    .expect("spawn core");
    let got = rx.recv_timeout(Duration::from_secs(30)).expect("core reported");
    core.join().expect("core ends");
    assert_eq!(got, (3, 3, 0, 4, 3), "(opened, idle after prewarm, opened again, before reaping, after reaping)");
}
