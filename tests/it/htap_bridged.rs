//! Issue #24: a MySQL session bridged to PostgreSQL (it logged in to a `protocol = "postgres"`
//! pool) gets the whole routing chain: `[routing.mysql]` splits its reads to the PostgreSQL hot
//! standby and its writes to the primary, read-your-writes keeps its reads on the primary after
//! a write, and a transaction stays on the pool it began on. Placement is proven by
//! `pg_stat_wal_receiver` (a row only on the standby) and by the row a write left on the
//! primary (`pg_is_in_recovery()` where it ran). Client: the `mysql` crate.

use std::time::Duration;

use mysql::prelude::Queryable;

use crate::router::Router;
use crate::support::{dbs, unique_name};

/// A `protocol = "postgres"` pool named `name` on the PostgreSQL server at `port`.
fn pg_pool(name: &str, port: u16) -> String {
    let pg = &dbs().pg;
    format!(
        "[pools.{name}]\nprotocol = \"postgres\"\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\n\
         database = \"{d}\"\nmax_connections = 4\nacquire_timeout = \"20s\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n",
        u = pg.user,
        p = pg.password,
        d = pg.database,
    )
}

/// `read_your_writes = "session"`: the session's reads stay on the primary after a write (in the
/// default `causal` mode they go back to a standby that replayed it, #34: `causal_bridged.rs`).
fn router() -> Router {
    let pg = &dbs().pg;
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         {}{}[routing]\nread_your_writes = \"session\"\n\n[routing.mysql]\nread_write_split = true\nread_pool = \"pg_standby\"\nwrite_pool = \"pg_primary\"\n",
        pg_pool("pg_primary", pg.primary_port),
        pg_pool("pg_standby", pg.replica_port),
    ))
}

fn client(router: &Router) -> mysql::Conn {
    let pg = &dbs().pg;
    mysql::Conn::new(dbs().my.opts(router.port(), &pg.user, &pg.password).db_name(Some(pg.database.as_str())))
        .unwrap_or_else(|e| panic!("connect through the bridge: {e}"))
}

/// Whether a plain read ran on the standby: `pg_stat_wal_receiver` has its row only there. (A
/// call of `pg_is_in_recovery()` would be a function the MySQL-dialect analysis does not know,
/// so the split would send it to the primary.)
fn on_standby(c: &mut mysql::Conn) -> bool {
    let v: Option<i64> = c.query_first("SELECT COUNT(*) FROM pg_stat_wal_receiver").expect("wal receiver");
    v.expect("a row") == 1
}

#[test]
fn bridged_mysql_session_gets_the_read_write_split_and_read_your_writes() {
    let pg = &dbs().pg;
    let t = unique_name("htap_split");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {t} (id int, standby bool)")).expect("table");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    let router = router();
    let mut c = client(&router);
    for round in 0..3 {
        assert!(on_standby(&mut c), "round {round}: a read on the standby");
    }
    // A transaction runs on the primary from its BEGIN to its COMMIT.
    c.query_drop("BEGIN").expect("begin");
    assert!(!on_standby(&mut c), "a read inside a transaction stays on the primary");
    c.query_drop("COMMIT").expect("commit");
    assert!(on_standby(&mut c), "after the transaction reads go to the standby again");
    c.query_drop(format!("INSERT INTO {t} VALUES (1, pg_is_in_recovery())")).expect("write through the bridge");
    let row = pg.primary_client().query_one(&format!("SELECT standby FROM {t} WHERE id = 1"), &[]).expect("row");
    assert!(!row.get::<_, bool>(0), "the write ran on the primary");
    assert!(!on_standby(&mut c), "read-your-writes: after its write the session reads the primary");
    assert!(on_standby(&mut client(&router)), "another session still reads the standby");
    drop(c);
    drop(router);
    pg.primary_client().batch_execute(&format!("DROP TABLE {t}")).expect("drop");
}
