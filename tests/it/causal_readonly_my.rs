//! Issue #34, MariaDB: declared read-only transactions run whole on a replica that has applied
//! the session's causal position, and on the primary when it has not (the replica's SQL thread
//! stopped) or when their first statement is not replica-safe. Placement is proven by
//! `@@server_id` and `@@in_transaction` read inside the transaction.

use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::Conn;

use crate::causal_mysql::{client, my_router};
use crate::support::{eventually, unique_name, Dbs, Kind};

const PRIMARY: u64 = 1;
const REPLICA: u64 = 2;

/// Runs `statements` as one transaction's statements and returns, for each read, `(rows of t,
/// @@server_id, @@in_transaction)`.
fn transaction(c: &mut Conn, begin: &[&str], reads: &[String]) -> Vec<(u64, u64, u64)> {
    for sql in begin {
        c.query_drop(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    }
    let rows =
        reads.iter().map(|sql| c.query_first(sql).unwrap_or_else(|e| panic!("{sql}: {e}")).expect("a row")).collect();
    c.query_drop("COMMIT").expect("commit");
    rows
}

#[test]
fn mariadb_read_only_transactions_run_on_a_caught_up_replica_else_on_the_primary() {
    let env = Dbs::private();
    let my = &env.my;
    let router = my_router(my, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let t = unique_name("causal_ro");
    my.primary_client().query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY)")).expect("create");
    my.wait_replica_caught_up(Duration::from_secs(20));
    let mut c = client(&router, my);
    let count = format!("SELECT COUNT(*), @@server_id, @@in_transaction FROM {t}");
    let again = "SELECT 0, @@server_id, @@in_transaction".to_owned();
    let reads = [count.clone(), again.clone()];
    eventually(Duration::from_secs(15), "a declared read-only transaction on the replica", || {
        transaction(&mut c, &["START TRANSACTION READ ONLY"], &reads) == [(0, REPLICA, 1), (0, REPLICA, 1)]
    });
    let snapshot = ["START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"];
    assert_eq!(transaction(&mut c, &snapshot, &reads), [(0, REPLICA, 1), (0, REPLICA, 1)]);
    let next_only = ["SET TRANSACTION READ ONLY", "START TRANSACTION"];
    assert_eq!(transaction(&mut c, &next_only, &reads), [(0, REPLICA, 1), (0, REPLICA, 1)], "SET TRANSACTION");
    let session = ["SET SESSION TRANSACTION READ ONLY", "BEGIN"];
    assert_eq!(transaction(&mut c, &session, &reads), [(0, REPLICA, 1), (0, REPLICA, 1)], "SET SESSION");
    c.query_drop("SET SESSION TRANSACTION READ WRITE").expect("read write again");
    c.query_drop("START TRANSACTION READ ONLY").expect("begin");
    c.query_drop("COMMIT").expect("an empty read-only transaction ends");

    // The server still enforces read-only, wherever the write went.
    c.query_drop("START TRANSACTION READ ONLY").expect("begin");
    let refused = c.query_drop(format!("INSERT INTO {t} VALUES (100)")).expect_err("a read-only transaction");
    assert!(matches!(&refused, mysql::Error::MySqlError(e) if e.code == 1792), "{refused}");
    c.query_drop("ROLLBACK").expect("rollback");
    // A first statement that is not replica-safe (a locking read) takes the transaction to
    // the primary before it starts.
    let locking = [format!("{count} LOCK IN SHARE MODE"), again.clone()];
    assert_eq!(transaction(&mut c, &["START TRANSACTION READ ONLY"], &locking), [(0, PRIMARY, 1), (0, PRIMARY, 1)]);

    // The replica has not applied the session's write: the whole transaction on the primary.
    env.pause_replication(Kind::Mariadb);
    c.query_drop(format!("INSERT INTO {t} VALUES (1)")).expect("write");
    assert_eq!(transaction(&mut c, &["START TRANSACTION READ ONLY"], &reads), [(1, PRIMARY, 1), (0, PRIMARY, 1)]);
    let mut other = client(&router, my);
    let fresh = transaction(&mut other, &["START TRANSACTION READ ONLY"], &reads);
    assert_eq!(fresh, [(0, REPLICA, 1), (0, REPLICA, 1)], "a session that wrote nothing uses the stopped replica");
    env.resume_replication(Kind::Mariadb);
    eventually(Duration::from_secs(20), "back on the replica once it applied the write", || {
        transaction(&mut c, &["START TRANSACTION READ ONLY"], &reads) == [(1, REPLICA, 1), (0, REPLICA, 1)]
    });
}
