//! Tests of the test harness itself: the servers replicate, the replicas refuse writes with
//! the codes the router's tests rely on, and fault injection does what it claims.
//!
//! Depends only on `support`; every test uses its own table names.

use std::time::Duration;

use mysql::prelude::Queryable;
use postgres::error::SqlState;
use postgres::NoTls;

use crate::support::{dbs, eventually, free_port, unique_name, Dbs, Kind, MyEnv, PgEnv, Server};

/// Generous: the machine is shared and may be saturated by other work.
const WAIT: Duration = Duration::from_secs(30);

fn pg_count(c: &mut postgres::Client, table: &str, id: i32) -> i64 {
    c.query_one(&format!("SELECT count(*) FROM {table} WHERE id = $1"), &[&id])
        .map(|r| r.get(0))
        .unwrap_or_else(|e| panic!("count in {table}: {e:?}"))
}

fn my_count(c: &mut mysql::Conn, table: &str, id: i32) -> Result<i64, mysql::Error> {
    c.exec_first(format!("SELECT count(*) FROM {table} WHERE id = ?"), (id,)).map(|v: Option<i64>| v.unwrap_or(0))
}

#[test]
fn pg_row_written_on_primary_appears_on_replica() {
    let pg = &dbs().pg;
    let table = unique_name("harness_pg_visible");
    let mut primary = pg.primary_client();
    primary.batch_execute(&format!("CREATE TABLE {table} (id int PRIMARY KEY)")).expect("create");
    primary.execute(&format!("INSERT INTO {table} VALUES (7)"), &[]).expect("insert");
    let mut replica = pg.replica_client();
    let in_recovery: bool = replica.query_one("SELECT pg_is_in_recovery()", &[]).expect("recovery").get(0);
    assert!(in_recovery, "the replica port must be a standby");
    // The table itself replicates asynchronously: a query failing with 42P01 means "not yet".
    eventually(WAIT, "the row on the PG standby", || {
        replica
            .query_one(&format!("SELECT count(*) FROM {table} WHERE id = 7"), &[])
            .map(|r| r.get::<_, i64>(0) == 1)
            .unwrap_or(false)
    });
}

#[test]
fn pg_replica_rejects_writes_with_25006() {
    let table = unique_name("harness_pg_ro");
    let err = dbs()
        .pg
        .replica_client()
        .batch_execute(&format!("CREATE TABLE {table} (id int)"))
        .expect_err("a write on the standby must fail");
    assert_eq!(err.code(), Some(&SqlState::READ_ONLY_SQL_TRANSACTION), "{err}");
}

#[test]
fn mariadb_row_written_on_primary_appears_on_replica() {
    let my = &dbs().my;
    let table = unique_name("harness_my_visible");
    let mut primary = my.primary_client();
    primary.query_drop(format!("CREATE TABLE {table} (id int PRIMARY KEY)")).expect("create");
    primary.query_drop(format!("INSERT INTO {table} VALUES (7)")).expect("insert");
    let mut replica = my.replica_client();
    let server_ids: (u32, u32) = (
        primary.query_first("SELECT @@server_id").expect("id").unwrap_or(0),
        replica.query_first("SELECT @@server_id").expect("id").unwrap_or(0),
    );
    assert_eq!(server_ids, (1, 2), "primary and replica ports must reach different servers");
    eventually(WAIT, "the row on the MariaDB replica", || my_count(&mut replica, &table, 7).is_ok_and(|n| n == 1));
}

#[test]
fn mariadb_replica_rejects_writes_with_1290() {
    let my = &dbs().my;
    let table = unique_name("harness_my_ro");
    my.primary_client().query_drop(format!("CREATE TABLE {table} (id int)")).expect("create");
    my.wait_replica_caught_up(WAIT);
    let err = my
        .replica_client()
        .query_drop(format!("INSERT INTO {table} VALUES (1)"))
        .expect_err("a write by the app user on the replica must fail");
    match err {
        mysql::Error::MySqlError(e) => assert_eq!(e.code, 1290, "{e}"),
        other => panic!("expected a server error, got {other}"),
    }
}

#[test]
#[should_panic(expected = "Dbs::private")]
fn fault_injection_is_refused_on_the_shared_environment() {
    dbs().pause_replication(Kind::Pg);
}

#[test]
fn free_ports_are_bindable_and_names_unique() {
    let port = free_port();
    std::net::TcpListener::bind(("127.0.0.1", port)).expect("free_port must return a bindable port");
    assert_ne!(unique_name("t"), unique_name("t"));
}

/// Both families in one private environment: one extra set of servers instead of two.
#[test]
fn fault_injection_on_a_private_environment() {
    let db = Dbs::private();
    pg_pause_resume_stop_start(&db);
    mariadb_pause_resume_stop_start(&db);
    let base = db.base.clone();
    drop(db);
    assert!(!base.exists(), "dropping a private environment must remove {}", base.display());
}

fn pg_pause_resume_stop_start(db: &Dbs) {
    let pg: &PgEnv = &db.pg;
    let mut primary = pg.primary_client();
    primary.batch_execute("CREATE TABLE faults (id int PRIMARY KEY)").expect("create");
    pg.wait_replica_caught_up(WAIT);

    db.pause_replication(Kind::Pg);
    primary.execute("INSERT INTO faults VALUES (1)", &[]).expect("insert 1");
    let lsn: String = primary.query_one("SELECT pg_current_wal_flush_lsn()::text", &[]).expect("lsn").get(0);
    let mut su = pg.superuser_client(pg.replica_port);
    // Deterministic negative check: the WAL holding the row has reached the standby, yet
    // the row stays invisible because replay is paused.
    eventually(WAIT, "the standby to receive the insert's WAL", || {
        su.query_one("SELECT pg_last_wal_receive_lsn() >= $1::text::pg_lsn", &[&lsn])
            .map(|r| r.get::<_, Option<bool>>(0) == Some(true))
            .unwrap_or(false)
    });
    eventually(WAIT, "replay state 'paused'", || {
        su.query_one("SELECT pg_get_wal_replay_pause_state()", &[])
            .map(|r| r.get::<_, String>(0) == "paused")
            .unwrap_or(false)
    });
    let mut replica = pg.replica_client();
    assert_eq!(pg_count(&mut replica, "faults", 1), 0, "row visible while replay is paused");

    db.resume_replication(Kind::Pg);
    pg.wait_replica_caught_up(WAIT);
    assert_eq!(pg_count(&mut replica, "faults", 1), 1, "row missing after resume");

    db.stop(Server::PgReplica);
    assert!(pg.config(pg.replica_port, &pg.user, &pg.password).connect(NoTls).is_err(), "standby still up");
    primary.execute("INSERT INTO faults VALUES (2)", &[]).expect("insert 2");
    db.start(Server::PgReplica);
    pg.wait_replica_caught_up(WAIT);
    assert_eq!(pg_count(&mut pg.replica_client(), "faults", 2), 1, "restarted standby did not catch up");
}

fn mariadb_pause_resume_stop_start(db: &Dbs) {
    let my: &MyEnv = &db.my;
    let mut primary = my.primary_client();
    primary.query_drop("CREATE TABLE faults (id int PRIMARY KEY)").expect("create");
    my.wait_replica_caught_up(WAIT);

    db.pause_replication(Kind::Mariadb);
    primary.query_drop("INSERT INTO faults VALUES (1)").expect("insert 1");
    let gtid: String = primary.query_first("SELECT @@gtid_binlog_pos").expect("gtid").unwrap_or_default();
    let mut root = my.superuser_client(my.replica_port);
    // The IO thread has fetched the transaction (Gtid_IO_Pos), the stopped SQL thread has
    // not applied it.
    eventually(WAIT, "the replica IO thread to fetch the insert", || {
        let status: Option<mysql::Row> = root.query_first("SHOW SLAVE STATUS").unwrap_or(None);
        status.and_then(|r| r.get::<String, _>("Gtid_IO_Pos")).as_deref() == Some(gtid.as_str())
    });
    let mut replica = my.replica_client();
    assert_eq!(my_count(&mut replica, "faults", 1).expect("count"), 0, "row visible while paused");

    db.resume_replication(Kind::Mariadb);
    my.wait_replica_caught_up(WAIT);
    assert_eq!(my_count(&mut replica, "faults", 1).expect("count"), 1, "row missing after resume");

    db.stop(Server::MyReplica);
    let refused = mysql::Conn::new(my.opts(my.replica_port, &my.user, &my.password));
    assert!(refused.is_err(), "replica still up");
    primary.query_drop("INSERT INTO faults VALUES (2)").expect("insert 2");
    db.start(Server::MyReplica);
    my.wait_replica_caught_up(WAIT);
    let n = my_count(&mut my.replica_client(), "faults", 2).expect("count");
    assert_eq!(n, 1, "restarted replica did not catch up");
}
