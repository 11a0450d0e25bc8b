//! Issue #39, connections move to the core that needs them: the budget of `max_connections` is
//! process-wide and connections are core-local, so a core that holds an idle connection gives
//! it up (once it has gone unlent a while) when another core waits for the pool's budget.

use crate::router::{pg_config, pg_pool, Router};
use crate::support::dbs;

#[test]
fn a_core_gives_its_idle_connection_up_for_a_client_on_the_other_core() {
    // One connection for the whole process, lent for whole sessions and never reaped: a client
    // the kernel hands to the core that does not hold it is served only if the other core
    // gives the connection up, or gets 53300 after acquire_timeout.
    let pools = pg_pool("main", dbs().pg.primary_port, "session", 1)
        .replace("acquire_timeout = \"20s\"", "acquire_timeout = \"5s\"\nidle_timeout = \"1h\"");
    let r = Router::start(&pg_config(&[0, 1], &pools, "main"));
    let mut pids: Vec<i32> = Vec::new();
    for _ in 0..20 {
        let mut c = r.pg("main");
        pids.push(c.query_one("SELECT pg_backend_pid()", &[]).expect("pid").get(0));
    }
    // Clients land on either core at random (SO_REUSEPORT). The connection is kept between two
    // clients of one core (the same server process) and reopened on the other core after a
    // move (a new one), so both must show in 20 clients.
    let moves = pids.windows(2).filter(|w| w[0] != w[1]).count();
    assert!(moves > 0, "the connection never moved between cores: {pids:?}");
    assert!(moves < pids.len() - 1, "the connection was never kept between clients: {pids:?}");
}
