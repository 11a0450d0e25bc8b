//! Health probes speak each pool's actual protocol (#18): a MySQL pool without `protocol`,
//! reached by neither the MySQL default nor a MySQL-only rule, was probed with the PostgreSQL
//! protocol and stayed unhealthy for ever. With both listeners present the probe now asks the
//! backend (a MySQL server greets first, PostgreSQL waits), so the MariaDB replica and the
//! PostgreSQL primary, neither with `protocol` set, both stay healthy with passing probes.

use std::time::Duration;

use mysql::prelude::Queryable;

use crate::health::backend;
use crate::router::Router;
use crate::support::dbs;

fn config() -> String {
    let (pg, my) = (&dbs().pg, &dbs().my);
    let pool = |name: &str, user: &str, password: &str, database: &str, port: u16| {
        format!(
            "[pools.{name}]\nmode = \"transaction\"\nusername = \"{user}\"\npassword = \"{password}\"\n\
             database = \"{database}\"\nmax_connections = 4\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
             [pools.{name}.health]\ninterval = \"100ms\"\ntimeout = \"1s\"\nfailure_threshold = 2\nsuccess_threshold = 2\n\n"
        )
    };
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n\
         [[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\nauth_method = \"md5\"\n\n\
         [[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n{}{}{}\
         [routing]\ndefault_pool = \"pgmain\"\nmysql_default_pool = \"mymain\"\n\n\
         [[routing.rules]]\nname = \"replica_reports\"\npattern = \"qp_replica_report\"\npool = \"myreplica\"\n\n\
         [metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n",
        pool("pgmain", &pg.user, &pg.password, &pg.database, pg.primary_port),
        pool("mymain", &my.user, &my.password, &my.database, my.primary_port),
        pool("myreplica", &my.user, &my.password, &my.database, my.replica_port),
    )
}

/// The `/api/pools` health of the backend on `port` in `pool`: (healthy, cause).
fn health(router: &Router, pool: &str, port: u16) -> (bool, String) {
    let b = backend(router, pool, port);
    (b["healthy"].as_bool().unwrap_or(false), b["health_cause"].as_str().unwrap_or("").to_owned())
}

#[test]
fn a_pool_without_protocol_is_probed_in_the_protocol_its_backend_speaks() {
    let (pg, my) = (&dbs().pg, &dbs().my);
    let router = Router::start(&config());
    // Many probe intervals: a probe in the wrong protocol fails every time, and two failures
    // mark the backend down (it starts as assumed healthy).
    std::thread::sleep(Duration::from_secs(2));
    for (pool, port) in [("myreplica", my.replica_port), ("pgmain", pg.primary_port), ("mymain", my.primary_port)] {
        for _ in 0..5 {
            let (healthy, cause) = health(&router, pool, port);
            assert!(healthy, "{pool}: probed healthy (cause {cause:?})");
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    // The rule's pool serves a MySQL client, on the replica.
    let mut c = mysql::Conn::new(my.opts(router.listen[1].port(), &my.user, &my.password)).expect("connect");
    let id: Option<u64> = c.query_first("SELECT @@server_id AS qp_replica_report").expect("replica report");
    assert_eq!(id, Some(2));
}
