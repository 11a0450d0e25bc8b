//! Issue #37: a relay that breaks under a session is counted by cause in
//! `sqp_relay_errors_total{code}`. A real server ends the relay: PostgreSQL's
//! `pg_terminate_backend` (its FATAL `57P01` is the cause) and MariaDB's `KILL CONNECTION`.

// Blocking test clients on their own threads, not data-plane code.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::Duration;

use mysql::prelude::Queryable;

use crate::admin::{addrs, http, sum, with_metrics};
use crate::mysql_session::{client, my_config, my_pool};
use crate::pg_util::superuser;
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, eventually, unique_name};

/// `sqp_relay_errors_total` summed over cores for `code`.
fn relay_errors(router: &Router, code: &str) -> f64 {
    let reply = http(addrs(router).0, "GET", "/metrics", &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    sum(&reply.body, "sqp_relay_errors_total", &[&format!("code=\"{code}\"")]).0
}

#[test]
fn a_terminated_postgresql_backend_counts_as_a_fatal_relay_error() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
    let router = Router::start(&with_metrics(&pg_config(&[0], &pools, "main"), None));
    assert_eq!(relay_errors(&router, "relay.backend_fatal"), 0.0);
    let mut c = router.pg("main");
    let marker = unique_name("relay_err");
    let sql = format!("SELECT pg_sleep(30) /* {marker} */");
    let victim = std::thread::spawn(move || c.batch_execute(&sql).map(|()| c));
    let mut su = superuser();
    let mut pid = 0;
    eventually(Duration::from_secs(10), "the statement to start", || {
        let row = su
            .query_opt(
                "SELECT pid FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%' \
                 AND pid <> pg_backend_pid()",
                &[&marker],
            )
            .expect("pg_stat_activity");
        pid = row.map_or(0, |r| r.get(0));
        pid != 0
    });
    let done: bool = su.query_one("SELECT pg_terminate_backend($1)", &[&pid]).expect("terminate").get(0);
    assert!(done, "terminated {pid}");
    assert!(victim.join().expect("victim").is_err(), "the client heard its backend died");
    assert_eq!(relay_errors(&router, "relay.backend_fatal"), 1.0, "the server's FATAL is the cause");
}

#[test]
fn a_killed_mariadb_connection_counts_as_a_relay_error() {
    let my = &dbs().my;
    let router = Router::start(&with_metrics(&my_config(&[0], &my_pool("main", "transaction", 1), "main"), None));
    let mut a = client(&router);
    let marker = unique_name("relay_err");
    let sql = format!("SELECT SLEEP(20) AS {marker}");
    let victim = std::thread::spawn(move || a.query_drop(sql));
    let mut root = my.superuser_client(my.primary_port);
    let mut id = None;
    eventually(Duration::from_secs(10), "the statement to start", || {
        id = root
            .query_first::<u64, _>(format!(
                "SELECT ID FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{marker}%' \
                 AND INFO NOT LIKE '%PROCESSLIST%'"
            ))
            .expect("processlist");
        id.is_some()
    });
    let id = id.expect("a server connection");
    root.query_drop(format!("KILL CONNECTION {id}")).expect("kill the server connection");
    assert!(victim.join().expect("victim").is_err(), "the client heard its backend died");
    let total: f64 = ["relay.backend_closed", "relay.backend_fatal"].iter().map(|c| relay_errors(&router, c)).sum();
    assert_eq!(total, 1.0, "one broken relay");
}
