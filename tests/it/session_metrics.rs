//! `sqp_session_pins_total{reason}` and `sqp_errors_total{pool,code}` count what they document,
//! on both wires: a session's first pin (temporary table, advisory lock / `GET_LOCK`) once per
//! session by reason, and each statement whose error the backend answered and the client got,
//! on its pool — native and bridged sessions alike. Scraped over real HTTP from `/metrics`.

// Blocking test clients, not data-plane code.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::time::Duration;

use mysql::prelude::Queryable;

use crate::admin::{addrs, http, sum, with_metrics};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, eventually};
use crate::{bridge_mysql_pg, bridge_pg_mysql, mysql_session};

/// `name` summed over cores for the series whose labels contain every `filters` pair.
fn scrape(router: &Router, name: &str, filters: &[&str]) -> f64 {
    let reply = http(addrs(router).0, "GET", "/metrics", &[]);
    assert_eq!(reply.status, 200, "{}", reply.body);
    sum(&reply.body, name, filters).0
}

/// Waits until `name{filters}` reads `want` (a session counts after its response is sent), then
/// checks it stays there rather than overshooting.
fn expect(router: &Router, name: &str, filters: &[&str], want: f64) {
    eventually(Duration::from_secs(5), &format!("{name}{filters:?} = {want}"), || {
        scrape(router, name, filters) >= want
    });
    assert_eq!(scrape(router, name, filters), want, "{name}{filters:?}");
}

fn pins(router: &Router, reason: &str, want: f64) {
    expect(router, "sqp_session_pins_total", &[&format!("reason=\"{reason}\"")], want);
}

fn errors(router: &Router, pool: &str, want: f64) {
    expect(router, "sqp_errors_total", &[&format!("pool=\"{pool}\""), "code=\"backend.error\""], want);
}

#[test]
fn postgresql_pins_and_errors_are_counted() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 4);
    let router = Router::start(&with_metrics(&pg_config(&[0], &pools, "main"), None));
    pins(&router, "temp_object", 0.0);
    errors(&router, "main", 0.0);

    let mut temp = router.pg(&dbs().pg.database);
    temp.batch_execute("CREATE TEMP TABLE metrics_pin (x int)").expect("temp table");
    pins(&router, "temp_object", 1.0);
    // A pinned session is counted once, however many statements it runs after.
    temp.batch_execute("INSERT INTO metrics_pin VALUES (1); SELECT * FROM metrics_pin").expect("use it");
    pins(&router, "temp_object", 1.0);

    let mut lock = router.pg(&dbs().pg.database);
    lock.query_one("SELECT pg_advisory_lock(424242)", &[]).expect("advisory lock");
    pins(&router, "advisory_lock", 1.0);
    lock.query_one("SELECT pg_advisory_unlock(424242)", &[]).expect("unlock");

    let mut c = router.pg(&dbs().pg.database);
    let e = c.batch_execute("SELECT 1 / 0").expect_err("division by zero");
    assert_eq!(e.as_db_error().map(|d| d.code().code()), Some("22012"), "{e}");
    errors(&router, "main", 1.0);
    // The extended protocol too: the Parse of an unknown table fails.
    c.query("SELECT * FROM metrics_no_such_table", &[]).expect_err("unknown table");
    errors(&router, "main", 2.0);
    c.batch_execute("SELECT 1").expect("the session goes on");
    errors(&router, "main", 2.0);
}

#[test]
fn mysql_pins_and_errors_are_counted() {
    let pools = mysql_session::my_pool("main", "transaction", 4);
    let router = Router::start(&with_metrics(&mysql_session::my_config(&[0], &pools, "main"), None));
    pins(&router, "advisory_lock", 0.0);
    errors(&router, "main", 0.0);

    let mut lock = mysql_session::client(&router);
    let got: Option<i64> = lock.query_first("SELECT GET_LOCK('metrics_pin', 5)").expect("GET_LOCK");
    assert_eq!(got, Some(1));
    pins(&router, "advisory_lock", 1.0);
    lock.query_drop("SELECT RELEASE_LOCK('metrics_pin')").expect("release");
    pins(&router, "advisory_lock", 1.0);

    let mut temp = mysql_session::client(&router);
    temp.query_drop("CREATE TEMPORARY TABLE metrics_pin (x int)").expect("temp table");
    pins(&router, "temp_object", 1.0);

    let mut c = mysql_session::client(&router);
    c.query_drop("SELECT * FROM metrics_no_such_table").expect_err("unknown table");
    errors(&router, "main", 1.0);
    // A prepared statement's execute fails on the server too (a duplicate key).
    c.query_drop("CREATE TEMPORARY TABLE metrics_dup (x int PRIMARY KEY)").expect("table");
    c.exec_drop("INSERT INTO metrics_dup VALUES (?)", (1,)).expect("first row");
    c.exec_drop("INSERT INTO metrics_dup VALUES (?)", (1,)).expect_err("duplicate key");
    errors(&router, "main", 2.0);
    // And a prepare of an unknown table.
    c.prep("SELECT * FROM metrics_no_such_table WHERE x = ?").expect_err("prepare fails");
    errors(&router, "main", 3.0);
}

#[test]
fn bridged_sessions_count_errors_on_their_pool() {
    let to_mysql = Router::start(&with_metrics(&bridge_pg_mysql::bridge_router_toml("transaction"), None));
    let mut pg = to_mysql.pg(&dbs().my.database);
    errors(&to_mysql, "myx", 0.0);
    pg.batch_execute("SELECT * FROM metrics_no_such_table").expect_err("unknown table on MariaDB");
    errors(&to_mysql, "myx", 1.0);

    let to_pg =
        Router::start(&with_metrics(&bridge_mysql_pg::bridge_router_toml("transaction", &dbs().pg.database), None));
    let mut my = bridge_mysql_pg::client(&to_pg);
    errors(&to_pg, "pgx", 0.0);
    my.query_drop("SELECT 1 / 0").expect_err("division by zero on PostgreSQL");
    errors(&to_pg, "pgx", 1.0);
}
