//! `[routing.mysql]`: one router splits PostgreSQL clients between the PostgreSQL pools and
//! MySQL clients between the MySQL pools at the same time (#24).

use super::*;

const MYSQL_SPLIT: &str =
    "[routing.mysql]\nread_write_split = true\nread_pool = \"my_replicas\"\nwrite_pool = \"my_primary\"\n";

#[test]
fn each_protocol_reads_and_writes_on_its_own_pools() {
    let mut r = split_router(MYSQL_SPLIT);
    let table: [(Protocol, &str, &str, &str); 8] = [
        (Protocol::Postgres, "SELECT a FROM t WHERE id = 1", "replicas", "replica_eligible"),
        (Protocol::Postgres, "UPDATE t SET a = 1 WHERE id = 1", "primary", "write"),
        (Protocol::Postgres, "SELECT a FROM t FOR UPDATE", "primary", "row_lock"),
        (Protocol::Postgres, "SELECT random()", "primary", "volatile_function"),
        (Protocol::MySql, "SELECT c FROM sbtest1 WHERE id = 1", "my_replicas", "replica_eligible"),
        (Protocol::MySql, "DELETE FROM sbtest1 WHERE id = 1", "my_primary", "write"),
        (Protocol::MySql, "SELECT c FROM sbtest1 WHERE id = 1 FOR UPDATE", "my_primary", "row_lock"),
        (Protocol::MySql, "SELECT GET_LOCK('a', 1)", "my_primary", "volatile_function"),
    ];
    for (protocol, sql, want, reason) in table {
        let d = match protocol {
            Protocol::Postgres => pg(&mut r, sql),
            Protocol::MySql => my(&mut r, sql),
        };
        assert_eq!((pool(&d), d.reason, d.step), (want, reason, DecisionKind::ReadWriteSplit), "{protocol} {sql}");
    }
}

#[test]
fn the_rule_set_keeps_one_split_per_protocol() {
    let rules = rules_with(&config(SPLIT, MYSQL_SPLIT), &[], &[]);
    let pools = |p: Protocol| (rules.primary_pool(p).map(|s| &**s), rules.read_pool(p).map(|s| &**s));
    assert_eq!(pools(Protocol::Postgres), (Some("primary"), Some("replicas")));
    assert_eq!(pools(Protocol::MySql), (Some("my_primary"), Some("my_replicas")));
    assert!(rules.is_replica("my_replicas") && rules.is_replica("replicas") && !rules.is_replica("my_primary"));
}

#[test]
fn a_mysql_split_needs_no_postgres_split() {
    let mut r = router_for(&config(NO_SPLIT, MYSQL_SPLIT));
    assert_eq!(pool(&pg(&mut r, "SELECT a FROM t WHERE id = 1")), "primary");
    assert_eq!(pool(&my(&mut r, "SELECT c FROM sbtest1 WHERE id = 1")), "my_replicas");
    assert_eq!(pool(&my(&mut r, "INSERT INTO sbtest1 VALUES (1)")), "my_primary");
}

#[test]
fn mysql_replica_hints_use_the_mysql_read_pool() {
    let mut r = split_router(MYSQL_SPLIT);
    let d = my(&mut r, "/* querypilot: route=replica */ SELECT c FROM sbtest1 WHERE id = 1");
    assert_eq!(pool(&d), "my_replicas");
    let d = my(&mut r, "/* querypilot: route=primary */ SELECT c FROM sbtest1 WHERE id = 1");
    assert_eq!(pool(&d), "my_primary");
}
