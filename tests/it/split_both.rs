//! Issue #24: one router config splits PostgreSQL clients between the PostgreSQL primary and
//! hot standby (top-level `[routing]` keys) and MySQL clients between the MariaDB primary and
//! replica (`[routing.mysql]`) at the same time. Placement is proven on the servers:
//! `pg_is_in_recovery()` and the row a write left on the PostgreSQL primary; `@@server_id` and
//! the row a write left on the MariaDB primary. Clients: rust-postgres and the `mysql` crate.

use std::time::Duration;

use mysql::prelude::Queryable;

use crate::pg_util::first_value;
use crate::router::{pg_pool, Router};
use crate::support::{dbs, unique_name};

const MY_PRIMARY: u64 = 1;
const MY_REPLICA: u64 = 2;

/// A MySQL pool named `name` on the harness's MariaDB server at `port`.
fn my_pool(name: &str, port: u16) -> String {
    let my = &dbs().my;
    format!(
        "[pools.{name}]\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
         max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n",
        u = my.user,
        p = my.password,
        d = my.database,
    )
}

/// A postgres listener (first) and a mysql listener (second); each protocol split between its
/// own primary and replica.
fn both_config() -> String {
    let (pg, my) = (&dbs().pg, &dbs().my);
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n\
         [[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         [[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n{}\n{}\n{}\n{}\n\
         [routing]\nread_write_split = true\nread_pool = \"pg_standby\"\nwrite_pool = \"pg_primary\"\n\n\
         [routing.mysql]\nread_write_split = true\nread_pool = \"my_replica\"\nwrite_pool = \"my_primary\"\n",
        pg_pool("pg_primary", pg.primary_port, "transaction", 4),
        pg_pool("pg_standby", pg.replica_port, "transaction", 4),
        my_pool("my_primary", my.primary_port),
        my_pool("my_replica", my.replica_port),
    )
}

/// The server id that ran `sql` (its only column is `@@server_id`).
fn my_server(c: &mut mysql::Conn, sql: &str) -> u64 {
    let id: Option<u64> = c.query_first(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    id.unwrap_or_else(|| panic!("{sql}: no row"))
}

fn my_client(r: &Router) -> mysql::Conn {
    let my = &dbs().my;
    mysql::Conn::new(my.opts(r.listen[1].port(), &my.user, &my.password))
        .unwrap_or_else(|e| panic!("mysql connect through router: {e}"))
}

#[test]
fn one_router_splits_postgres_and_mysql_clients_each_between_their_own_servers() {
    let (pg, my) = (&dbs().pg, &dbs().my);
    let pt = unique_name("both_pg");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {pt}(id int, standby bool)")).expect("pg table");
    let mt = unique_name("both_my");
    my.primary_client().query_drop(format!("CREATE TABLE {mt} (id INT, sid INT)")).expect("mysql table");
    my.wait_replica_caught_up(Duration::from_secs(30));
    let router = Router::start(&both_config());
    // Both sessions are open at once and their statements interleave on the same router.
    let mut p = router.pg(&pg.database);
    let mut m = my_client(&router);
    for round in 0..3 {
        assert_eq!(
            first_value(&mut p, "SELECT pg_is_in_recovery()"),
            "t",
            "round {round}: a PostgreSQL read on the standby"
        );
        assert_eq!(my_server(&mut m, "SELECT @@server_id"), MY_REPLICA, "round {round}: a MySQL read on the replica");
    }
    let locked = "SELECT @@server_id FROM (SELECT 1) AS one LIMIT 1 FOR UPDATE";
    assert_eq!(my_server(&mut my_client(&router), locked), MY_PRIMARY, "a MySQL locking read on the primary");
    assert_eq!(first_value(&mut router.pg(&pg.database), "SELECT pg_is_in_recovery(), random()"), "f");
    // Writes: each lands on its protocol's primary, recording where it ran.
    p.batch_execute(&format!("INSERT INTO {pt} VALUES (1, pg_is_in_recovery())")).expect("pg write through router");
    m.query_drop(format!("INSERT INTO {mt} VALUES (1, @@server_id)")).expect("mysql write through router");
    let row = pg.primary_client().query_one(&format!("SELECT standby FROM {pt} WHERE id = 1"), &[]).expect("pg row");
    assert!(!row.get::<_, bool>(0), "the PostgreSQL write ran on the primary");
    let sid: Option<u64> =
        my.primary_client().query_first(format!("SELECT sid FROM {mt} WHERE id = 1")).expect("mysql row on primary");
    assert_eq!(sid, Some(MY_PRIMARY), "the MySQL write ran on (and is stored by) the MariaDB primary");
    // Fresh sessions of both protocols still read from their replicas.
    assert_eq!(first_value(&mut router.pg(&pg.database), "SELECT pg_is_in_recovery()"), "t");
    assert_eq!(my_server(&mut my_client(&router), "SELECT @@server_id"), MY_REPLICA);
    drop((p, m));
    drop(router);
    pg.primary_client().batch_execute(&format!("DROP TABLE {pt}")).expect("drop pg table");
    my.primary_client().query_drop(format!("DROP TABLE {mt}")).expect("drop mysql table");
}
