//! The dangerous direction: nothing that could change data, lock, depend on the connection or be
//! misunderstood reaches the read pool, on the first sight or from the cache. Then the benchmark
//! statements that must reach it.

use super::*;
use crate::sql::volatility::{FunctionCatalog, Volatility};
use crate::sql::Dialect;

const PG_UNSAFE: &[&str] = &[
    "SELECT * FROM accounts WHERE id = 1 FOR UPDATE",
    "SELECT * FROM accounts WHERE id = 1 FOR SHARE",
    "SELECT * FROM accounts WHERE id = 1 FOR NO KEY UPDATE SKIP LOCKED",
    "SELECT nextval('s')",
    "SELECT currval('s')",
    "SELECT setval('s', 10)",
    "SELECT random()",
    "SELECT * FROM t ORDER BY random() LIMIT 1",
    "WITH x AS (UPDATE t SET a = 1 RETURNING *) SELECT * FROM x",
    "WITH x AS (DELETE FROM t WHERE id = 1 RETURNING id) SELECT count(*) FROM x",
    "SELECT my_udf(1)",
    "SELECT app.audit_and_return(42)",
    "SELEKT * FROM t",
    "SELECT * FROM",
    "",
    "SET search_path = app",
    "SET LOCAL statement_timeout = 0",
    "BEGIN",
    "START TRANSACTION READ ONLY",
    "COMMIT",
    "SELECT pg_advisory_lock(1)",
    "LISTEN ch",
    "CREATE TEMP TABLE tmp (a int)",
    "SELECT * INTO newtable FROM t",
    "SELECT 1; DELETE FROM t",
    "SHOW search_path",
    "EXPLAIN ANALYZE DELETE FROM t",
    "EXPLAIN (ANALYZE false) DELETE FROM t",
    "DO $$ BEGIN PERFORM 1; END $$",
    "CALL proc(1)",
    "COPY t FROM STDIN",
    "SELECT pg_backend_pid()",
    "SELECT txid_current()",
];

const MY_UNSAFE: &[&str] = &[
    "SELECT c FROM sbtest1 WHERE id = 1 FOR UPDATE",
    "SELECT c FROM sbtest1 WHERE id = 1 LOCK IN SHARE MODE",
    "SELECT c FROM sbtest1 WHERE id = 1 /*!50000 FOR UPDATE */",
    "SELECT LAST_INSERT_ID()",
    "SELECT FOUND_ROWS()",
    "SELECT SQL_CALC_FOUND_ROWS * FROM t LIMIT 1",
    "SELECT @x",
    "SELECT GET_LOCK('a', 1)",
    "SELECT RAND()",
    "SELECT UUID()",
    "SELECT my_udf(1)",
    "SET NAMES utf8mb4",
    "SET autocommit = 0",
    "BEGIN",
    "SELECT c INTO @v FROM sbtest1 WHERE id = 1",
    "SHOW TABLES",
    "SELEKT 1",
    "CALL p()",
];

fn assert_never_replica(r: &mut Router, protocol: Protocol, sql: &str) {
    // Twice: the second decision comes from the cache and must be just as safe.
    for round in 0..2 {
        let d = r.route(&RouteInput::new(sql, protocol, "app", "app"));
        assert_ne!(d.pool().map(|p| &**p), Some("replicas"), "{protocol} round {round}: {sql:?} -> {d:#?}");
        assert!(!d.facts.replica_eligible(), "{sql:?}");
    }
}

#[test]
fn unsafe_statements_never_reach_the_read_pool() {
    let mut r = split_router("");
    for sql in PG_UNSAFE {
        assert_never_replica(&mut r, Protocol::Postgres, sql);
    }
    for sql in MY_UNSAFE {
        assert_never_replica(&mut r, Protocol::MySql, sql);
    }
}

#[test]
fn unsafe_statements_stay_off_the_replica_after_a_safe_cousin_is_cached() {
    let mut r = split_router("");
    let pairs = [
        (Protocol::Postgres, "SELECT * FROM accounts WHERE id = 1", "SELECT * FROM accounts WHERE id = 2 FOR UPDATE"),
        (Protocol::Postgres, "SELECT abs(1)", "SELECT random()"),
        (Protocol::Postgres, "EXPLAIN DELETE FROM t", "EXPLAIN (ANALYZE true) DELETE FROM t"),
        (Protocol::Postgres, "SELECT 1", "SELECT 1; DELETE FROM t"),
        (
            Protocol::MySql,
            "SELECT c FROM sbtest1 WHERE id = 1",
            "SELECT c FROM sbtest1 WHERE id = 1 /*!50000 FOR UPDATE */",
        ),
        (Protocol::MySql, "SELECT 1", "SELECT 1 /*! , RELEASE_LOCK('x') */"),
    ];
    for (protocol, safe, unsafe_sql) in pairs {
        let d = r.route(&RouteInput::new(safe, protocol, "app", "app"));
        assert_eq!(pool(&d), "replicas", "{safe}");
        assert_never_replica(&mut r, protocol, unsafe_sql);
    }
}

#[test]
fn udf_volatility_comes_from_the_catalog() {
    let mut r = split_router("");
    assert_eq!(pool(&pg(&mut r, "SELECT app.price(1)")), "primary", "unknown function is volatile");
    let mut catalog = FunctionCatalog::builtin(Dialect::Postgres);
    catalog.insert(Some("app"), "price", Volatility::Stable);
    catalog.insert(Some("app"), "touch", Volatility::Volatile);
    r.set_catalogs(Catalogs { postgres: Arc::new(catalog), mysql: Catalogs::builtin().mysql });
    assert_eq!(r.cache_len(), 0, "new catalogs invalidate cached facts");
    assert_eq!(pool(&pg(&mut r, "SELECT app.price(1)")), "replicas");
    assert_eq!(pool(&pg(&mut r, "SELECT app.touch(1)")), "primary");
}

const PGBENCH_SELECT: &[&str] = &[
    "SELECT abalance FROM pgbench_accounts WHERE aid = 48213",
    "SELECT abalance FROM pgbench_accounts WHERE aid = $1",
];

const SYSBENCH_READ_ONLY: &[&str] = &[
    "SELECT c FROM sbtest1 WHERE id=5021",
    "SELECT c FROM sbtest1 WHERE id BETWEEN 5021 AND 5120",
    "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 5021 AND 5120",
    "SELECT c FROM sbtest1 WHERE id BETWEEN 5021 AND 5120 ORDER BY c",
    "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 5021 AND 5120 ORDER BY c",
];

#[test]
fn benchmark_reads_go_to_the_read_pool() {
    let mut r = split_router("");
    for round in 0..3 {
        for sql in PGBENCH_SELECT.iter().chain(SYSBENCH_READ_ONLY) {
            assert_eq!(pool(&pg(&mut r, sql)), "replicas", "pg round {round}: {sql}");
        }
        for sql in SYSBENCH_READ_ONLY {
            assert_eq!(pool(&my(&mut r, sql)), "replicas", "mysql round {round}: {sql}");
        }
    }
    let s = r.cache_stats();
    // 11 shapes (pgbench's literal and $1 forms share one), then hits only.
    assert_eq!((s.misses, s.hits), (11, 25));
}

#[test]
fn benchmark_writes_go_to_the_write_pool() {
    let mut r = split_router("");
    let pg_writes = [
        "UPDATE pgbench_accounts SET abalance = abalance + -3201 WHERE aid = 42",
        "UPDATE pgbench_tellers SET tbalance = tbalance + $1 WHERE tid = $2",
        "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (7, 1, 42, -3201, CURRENT_TIMESTAMP)",
        "END",
    ];
    for sql in pg_writes {
        assert_eq!(pool(&pg(&mut r, sql)), "primary", "{sql}");
    }
    let my_writes = [
        "UPDATE sbtest1 SET k=k+1 WHERE id=5021",
        "DELETE FROM sbtest1 WHERE id=5021",
        "INSERT INTO sbtest1 (id, k, c, pad) VALUES (5021, 4990, 'c', 'pad')",
    ];
    for sql in my_writes {
        assert_eq!(pool(&my(&mut r, sql)), "primary", "{sql}");
    }
}
