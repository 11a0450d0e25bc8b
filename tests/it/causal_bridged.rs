//! Issue #34's matrix, bridged cell: a MySQL client on PostgreSQL pools (`[routing.mysql]`
//! splitting to the hot standby) with causal reads. With replay paused on the standby, a read
//! after the session's write — a text INSERT, a prepared one (COM_STMT_PREPARE/EXECUTE), a
//! transaction — never misses it; reads before any write run on the standby. Placement is
//! proven by `pg_stat_wal_receiver` (a row only on the standby). Client: the `mysql` crate.

use std::time::Duration;

use mysql::prelude::Queryable;

use crate::router::Router;
use crate::support::{eventually, unique_name, Dbs, Kind, PgEnv};

fn pg_pool(pg: &PgEnv, name: &str, port: u16, mode: &str) -> String {
    format!(
        "[pools.{name}]\nprotocol = \"postgres\"\nmode = \"{mode}\"\nusername = \"{u}\"\npassword = \"{p}\"\n\
         database = \"{d}\"\nmax_connections = 4\nacquire_timeout = \"20s\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
         [pools.{name}.health]\ninterval = \"100ms\"\ntimeout = \"1s\"\nfailure_threshold = 2\nsuccess_threshold = 1\n\n",
        u = pg.user,
        p = pg.password,
        d = pg.database,
    )
}

fn router(pg: &PgEnv, mode: &str) -> Router {
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         {}{}[routing]\nread_your_writes = \"causal\"\ncausal_wait = \"20ms\"\n\n\
         [routing.mysql]\nread_write_split = true\nread_pool = \"pg_standby\"\nwrite_pool = \"pg_primary\"\n",
        pg_pool(pg, "pg_primary", pg.primary_port, mode),
        pg_pool(pg, "pg_standby", pg.replica_port, mode),
    ))
}

/// One way of writing row `n` through a connection.
type Write<'a> = &'a dyn Fn(&mut mysql::Conn, i64);

fn client(router: &Router, env: &Dbs) -> mysql::Conn {
    let pg = &env.pg;
    mysql::Conn::new(env.my.opts(router.port(), &pg.user, &pg.password).db_name(Some(pg.database.as_str())))
        .unwrap_or_else(|e| panic!("connect through the bridge: {e}"))
}

/// `(rows with id n, whether the read ran on the standby)`.
fn read(c: &mut mysql::Conn, t: &str, n: i64) -> (i64, bool) {
    let sql = format!("SELECT COUNT(*), (SELECT COUNT(*) FROM pg_stat_wal_receiver) FROM {t} WHERE id = {n}");
    let (count, receivers): (i64, i64) = c.query_first(&sql).unwrap_or_else(|e| panic!("{sql}: {e}")).expect("a row");
    (count, receivers == 1)
}

#[test]
fn bridged_mysql_sessions_never_read_their_writes_stale() {
    let env = Dbs::private();
    let pg = &env.pg;
    let t = unique_name("causal_bridged");
    pg.primary_client().batch_execute(&format!("CREATE TABLE {t} (id int PRIMARY KEY)")).expect("table");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    let mut n = 0;
    for mode in ["transaction", "session"] {
        let router = router(pg, mode);
        let mut c = client(&router, &env);
        eventually(Duration::from_secs(15), "reads on the standby", || read(&mut c, &t, 0).1);
        env.pause_replication(Kind::Pg);
        let writes: [(&str, Write); 3] = [
            ("text", &|c, n| c.query_drop(format!("INSERT INTO {t} VALUES ({n})")).expect("text insert")),
            ("prepared", &|c, n| c.exec_drop(format!("INSERT INTO {t} VALUES (?)"), (n,)).expect("prepared insert")),
            ("transaction", &|c, n| {
                for sql in ["BEGIN".to_owned(), format!("INSERT INTO {t} VALUES ({n})"), "COMMIT".to_owned()] {
                    c.query_drop(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
                }
            }),
        ];
        for (path, write) in writes {
            n += 1;
            let mut w = client(&router, &env);
            assert!(read(&mut w, &t, n).1, "{mode} {path}: a fresh session reads the standby");
            write(&mut w, n);
            assert_eq!(read(&mut w, &t, n), (1, false), "{mode} {path}: the write is read on the primary");
            assert_eq!(read(&mut client(&router, &env), &t, n), (0, true), "{mode} {path}: the standby is behind");
        }
        env.resume_replication(Kind::Pg);
        pg.wait_replica_caught_up(Duration::from_secs(30));
    }
}

fn my_pool(my: &crate::support::MyEnv, name: &str, port: u16) -> String {
    format!(
        "[pools.{name}]\nprotocol = \"mysql\"\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\n\
         database = \"{d}\"\nmax_connections = 4\nacquire_timeout = \"20s\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
         [pools.{name}.health]\ninterval = \"100ms\"\ntimeout = \"1s\"\nfailure_threshold = 2\nsuccess_threshold = 1\n\n",
        u = my.user,
        p = my.password,
        d = my.database,
    )
}

/// The other bridge: PostgreSQL clients (the `postgres` crate, simple and extended queries) on
/// MariaDB pools configured to split to the replica, whose SQL thread is stopped. A row written
/// to the primary directly is missing on the replica, so a read that finds it ran on the
/// primary. A bridged PostgreSQL session is not split today (its reads stay on its pool, the
/// primary), so causal reads do not apply there; what this cell holds is that the session's
/// own writes, by any path, are always read.
#[test]
fn bridged_postgres_sessions_never_read_their_writes_stale() {
    let env = Dbs::private();
    let my = &env.my;
    let t = unique_name("causal_bridged_my");
    my.primary_client().query_drop(format!("CREATE TABLE {t} (id INT PRIMARY KEY)")).expect("table");
    my.wait_replica_caught_up(Duration::from_secs(30));
    let router = Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         {}{}[routing]\nread_write_split = true\nread_pool = \"my_replica\"\nwrite_pool = \"my_primary\"\n\
         read_your_writes = \"causal\"\ncausal_wait = \"20ms\"\n",
        my_pool(my, "my_primary", my.primary_port),
        my_pool(my, "my_replica", my.replica_port),
    ));
    let count = |c: &mut postgres::Client, n: i64| -> i64 {
        let sql = format!("SELECT COUNT(*) FROM {t} WHERE id = {n}");
        let rows = c.simple_query(&sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
        rows.iter()
            .find_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => r.get(0).and_then(|v| v.parse().ok()),
                _ => None,
            })
            .expect("a count")
    };
    env.pause_replication(Kind::Mariadb);
    my.primary_client().query_drop(format!("INSERT INTO {t} VALUES (0)")).expect("direct write");
    for (n, path) in [(1, "simple"), (2, "extended"), (3, "transaction")] {
        let mut w = router.pg(&my.database);
        match path {
            "simple" => w.simple_query(&format!("INSERT INTO {t} VALUES ({n})")).map(drop),
            "extended" => w.execute(&format!("INSERT INTO {t} VALUES ({n})"), &[]).map(drop),
            _ => w.batch_execute(&format!("BEGIN; INSERT INTO {t} VALUES ({n}); COMMIT")),
        }
        .unwrap_or_else(|e| panic!("{path}: write: {e}"));
        assert_eq!(count(&mut w, n), 1, "{path}: the writer reads its write");
        assert_eq!(count(&mut w, 0), 1, "{path}: on the primary");
    }
    env.resume_replication(Kind::Mariadb);
}
