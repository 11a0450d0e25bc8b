//! Issue #12, faults: a real backend server killed with SIGKILL (a crash: no goodbye on any
//! connection) while clients are mid-statement, mid-transaction and mid-COPY. Every client gets
//! an error instead of hanging, a transaction cut short is never reported committed, the pool
//! drops the dead connections, and once the server is restarted the same router (no restart)
//! serves new statements. A replica stopped and restarted under read load costs at most the
//! reads running on it at that moment. Each test owns its servers (`Dbs::private`).

// Blocking test clients on their own threads, not data-plane code.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::io::Write;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;
use std::time::Duration;

use mysql::prelude::Queryable;

use crate::router::{pg_config, Router};
use crate::support::{eventually, unique_name, Dbs, Server};

/// How long a client may take to see the crash: far beyond what a working router needs, far
/// below the statements' own 60 s, so a hang fails the test.
const NO_HANG: Duration = Duration::from_secs(30);

/// `[pools.main]` on `port` with fast health checks.
fn pool(user: &str, password: &str, database: &str, port: u16) -> String {
    format!(
        "[pools.main]\nmode = \"transaction\"\nusername = \"{user}\"\npassword = \"{password}\"\ndatabase = \"{database}\"\n\
         max_connections = 8\nacquire_timeout = \"20s\"\nconnect_timeout = \"5s\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
         [pools.main.health]\ninterval = \"200ms\"\n"
    )
}

/// Runs `work` on a thread; its result arrives on the returned channel.
fn spawn<T: Send + 'static>(work: impl FnOnce() -> T + Send + 'static) -> mpsc::Receiver<T> {
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let _ = tx.send(work());
    });
    rx
}

/// The result of a spawned client, or a failure naming `what` if it hangs.
fn outcome<T>(rx: &mpsc::Receiver<T>, what: &str) -> T {
    rx.recv_timeout(NO_HANG).unwrap_or_else(|_| panic!("{what}: no answer within {NO_HANG:?} (hang)"))
}

/// SQLSTATE and message of a PostgreSQL error (its `Display` says only "db error").
fn describe(e: &postgres::Error) -> String {
    match e.as_db_error() {
        Some(d) => format!("{} {}", d.code().code(), d.message()),
        None => e.to_string(),
    }
}

fn pg_active(su: &mut postgres::Client, marker: &str) -> bool {
    su.query_one(
        "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()",
        &[&marker],
    )
    .expect("pg_stat_activity")
    .get::<_, i64>(0)
        > 0
}

#[test]
fn pg_sigkill_mid_statement_transaction_and_copy_then_restart() {
    let env = Dbs::private();
    let pg = env.pg.clone();
    let r = Router::start(&pg_config(&[0], &pool(&pg.user, &pg.password, &pg.database, pg.primary_port), "main"));
    let table = unique_name("fk_pg");
    let mut su = pg.superuser_client(pg.primary_port);
    su.batch_execute(&format!("CREATE TABLE {table} (id int); GRANT ALL ON {table} TO {}", pg.user)).expect("create");

    // Mid-statement, outside a transaction.
    let sleep_marker = unique_name("fk_sleep");
    let mut a = r.pg(&pg.database);
    let sql = format!("SELECT pg_sleep(60) /* {sleep_marker} */");
    let statement = spawn(move || {
        let res = a.simple_query(&sql).map(drop).map_err(|e| describe(&e));
        (res, a)
    });
    // Idle inside a transaction with an uncommitted insert.
    let mut b = r.pg(&pg.database);
    b.batch_execute(&format!("BEGIN; INSERT INTO {table} VALUES (1)")).expect("begin + insert");
    // Mid-statement inside a transaction.
    let tx_marker = unique_name("fk_txsleep");
    let mut d = r.pg(&pg.database);
    d.batch_execute(&format!("BEGIN; INSERT INTO {table} VALUES (3)")).expect("begin + insert");
    let sql = format!("SELECT pg_sleep(60) /* {tx_marker} */");
    let in_tx = spawn(move || {
        let res = d.simple_query(&sql).map(drop).map_err(|e| e.to_string());
        (res, d)
    });
    // Mid-COPY FROM STDIN: some rows sent, the rest after the crash.
    let (go_tx, go_rx) = mpsc::channel::<()>();
    let (sent_tx, sent_rx) = mpsc::channel::<()>();
    let mut e = r.pg(&pg.database);
    let copy_sql = format!("COPY {table} (id) FROM STDIN");
    let copy = spawn(move || {
        let res = (|| {
            let mut w = e.copy_in(&copy_sql)?;
            w.write_all(b"100\n101\n").and_then(|()| w.flush()).map_err(|io| io.to_string()).expect("first rows");
            let _ = sent_tx.send(());
            let _ = go_rx.recv();
            // The writer may already fail here, or only at finish.
            let _ = w.write_all(b"102\n".repeat(20_000).as_slice()).and_then(|()| w.flush());
            w.finish()
        })();
        res.map(drop).map_err(|e| e.to_string())
    });
    sent_rx.recv_timeout(NO_HANG).expect("COPY started");

    eventually(Duration::from_secs(10), "both sleeps and the COPY to run", || {
        pg_active(&mut su, &sleep_marker) && pg_active(&mut su, &tx_marker) && pg_active(&mut su, "FROM STDIN")
    });
    drop(su);
    env.kill(Server::PgPrimary);
    let _ = go_tx.send(());

    let (res, mut a) = outcome(&statement, "statement");
    let err = res.err().unwrap_or_default();
    assert!(err.contains("08006"), "mid-statement: connection-failure error, got {err:?}");
    let (res, mut d) = outcome(&in_tx, "statement in a transaction");
    assert!(res.is_err(), "mid-statement in a transaction: an error");
    let res = outcome(&copy, "COPY");
    assert!(res.is_err(), "mid-COPY: an error, got {res:?}");

    env.start(Server::PgPrimary);
    // Clients that were inside a transaction must not see it (or a later autocommit piece of
    // it) reported committed: the transaction died with the server.
    let b_insert = b.batch_execute(&format!("INSERT INTO {table} VALUES (2)"));
    let b_commit = b_insert.is_ok() && b.batch_execute("COMMIT").is_ok();
    let d_insert = d.batch_execute(&format!("INSERT INTO {table} VALUES (4)"));
    let d_commit = d_insert.is_ok() && d.batch_execute("COMMIT").is_ok();
    let mut check = pg.superuser_client(pg.primary_port);
    let ids: Vec<i32> = check
        .query(&format!("SELECT id FROM {table} WHERE id < 100 ORDER BY id"), &[])
        .expect("rows")
        .iter()
        .map(|row| row.get(0))
        .collect();
    assert!(ids.is_empty(), "no piece of a crashed transaction was committed: {ids:?}");
    assert!(!b_commit && !d_commit, "a crashed transaction reported as committed (b {b_commit}, d {d_commit})");
    let copied: i64 =
        check.query_one(&format!("SELECT count(*) FROM {table} WHERE id >= 100"), &[]).expect("count").get(0);
    assert_eq!(copied, 0, "the interrupted COPY committed nothing");

    // The same router serves again: the survivor of the mid-statement error and new clients,
    // every statement on the first try (the dead pooled connections are gone).
    for i in 0..20 {
        let mut c = r.pg(&pg.database);
        c.simple_query("SELECT 1").unwrap_or_else(|e| panic!("statement {i} after the restart: {e}"));
        a.simple_query("SELECT 1").unwrap_or_else(|e| panic!("old client, statement {i} after the restart: {e}"));
    }
}

#[test]
fn mariadb_sigkill_mid_statement_and_transaction_then_restart() {
    let env = Dbs::private();
    let my = env.my.clone();
    let config = pool(&my.user, &my.password, &my.database, my.primary_port);
    let r = Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n{config}\n[routing]\nmysql_default_pool = \"main\"\n"
    ));
    let client = || mysql::Conn::new(my.opts(r.port(), &my.user, &my.password)).expect("connect through the router");
    let table = unique_name("fk_my");
    let mut root = my.superuser_client(my.primary_port);
    root.query_drop(format!("CREATE TABLE {}.{table} (id int) ENGINE=InnoDB", my.database)).expect("create");

    let sleep_marker = unique_name("fk_sleep");
    let mut a = client();
    let sql = format!("SELECT SLEEP(60) AS {sleep_marker}");
    let statement = spawn(move || a.query_drop(sql).map_err(|e| e.to_string()));
    let mut b = client();
    b.query_drop(format!("BEGIN; INSERT INTO {table} VALUES (1)")).expect("begin + insert");
    let tx_marker = unique_name("fk_txsleep");
    let mut d = client();
    d.query_drop(format!("BEGIN; INSERT INTO {table} VALUES (3)")).expect("begin + insert");
    let sql = format!("SELECT SLEEP(60) AS {tx_marker}");
    let in_tx = spawn(move || {
        let res = d.query_drop(sql).map_err(|e| e.to_string());
        (res, d)
    });
    eventually(Duration::from_secs(10), "both sleeps to run", || {
        let running: Vec<String> = root
            .query("SELECT INFO FROM information_schema.PROCESSLIST WHERE INFO LIKE 'SELECT SLEEP%'")
            .expect("processlist");
        running.iter().any(|q| q.contains(&sleep_marker)) && running.iter().any(|q| q.contains(&tx_marker))
    });
    drop(root);
    env.kill(Server::MyPrimary);

    let res = outcome(&statement, "statement");
    assert!(res.is_err(), "mid-statement: an error");
    let (res, mut d) = outcome(&in_tx, "statement in a transaction");
    assert!(res.is_err(), "mid-statement in a transaction: an error");

    env.start(Server::MyPrimary);
    let b_commit = b.query_drop(format!("INSERT INTO {table} VALUES (2)")).is_ok() && b.query_drop("COMMIT").is_ok();
    let d_commit = d.query_drop(format!("INSERT INTO {table} VALUES (4)")).is_ok() && d.query_drop("COMMIT").is_ok();
    let mut check = my.superuser_client(my.primary_port);
    let ids: Vec<i32> = check.query(format!("SELECT id FROM {}.{table} ORDER BY id", my.database)).expect("rows");
    assert!(ids.is_empty(), "no piece of a crashed transaction was committed: {ids:?}");
    assert!(!b_commit && !d_commit, "a crashed transaction reported as committed (b {b_commit}, d {d_commit})");

    for i in 0..20 {
        let mut c = client();
        let one: Option<i64> =
            c.query_first("SELECT 1").unwrap_or_else(|e| panic!("statement {i} after the restart: {e}"));
        assert_eq!(one, Some(1));
    }
}

/// What the readers of the replica stop/start tests saw (`standby`: reads that ran on the replica).
#[derive(Default)]
struct Tally {
    standby: AtomicU64,
    primary: AtomicU64,
    errors: Mutex<Vec<String>>,
}

impl Tally {
    fn standby(&self) -> u64 {
        self.standby.load(Ordering::SeqCst)
    }
    fn primary(&self) -> u64 {
        self.primary.load(Ordering::SeqCst)
    }
}

/// One reader: split-eligible reads back to back until `stop`, tallying where each ran.
fn pg_reader(port: u16, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let mut client = None;
    while !stop.load(Ordering::SeqCst) {
        let c = match client.as_mut() {
            Some(c) => c,
            None => match crate::pg_util::connect(port, "app", "app") {
                Ok(c) => client.insert(c),
                Err(e) => {
                    tally.errors.lock().expect("tally").push(format!("connect: {}", describe(&e)));
                    continue;
                }
            },
        };
        match c.query_one("SELECT pg_is_in_recovery()", &[]) {
            Ok(row) if row.get::<_, bool>(0) => tally.standby.fetch_add(1, Ordering::SeqCst),
            Ok(_) => tally.primary.fetch_add(1, Ordering::SeqCst),
            Err(e) => {
                tally.errors.lock().expect("tally").push(describe(&e));
                if c.is_closed() {
                    client = None;
                }
                continue;
            }
        };
    }
}

/// Readers running split-eligible reads through a read/write split while the replica is
/// stopped and restarted: reads move to the primary and come back, and only statements
/// running on the replica when it stopped may fail (one per reader at most).
struct ReplicaUnderLoad<'a> {
    env: &'a Dbs,
    protocol: &'a str,
    /// (user, password, database, primary port, replica port).
    server: (&'a str, &'a str, &'a str, u16, u16),
    replica: Server,
}

impl ReplicaUnderLoad<'_> {
    fn run(&self, spawn_reader: impl Fn(u16, Arc<AtomicBool>, Arc<Tally>) -> thread::JoinHandle<()>) {
        const READERS: usize = 4;
        let (user, password, database, primary_port, replica_port) = self.server;
        let pool = |name: &str, port: u16| {
            format!(
                "[pools.{name}]\nmode = \"transaction\"\nusername = \"{user}\"\npassword = \"{password}\"\ndatabase = \"{database}\"\n\
                 max_connections = 8\nacquire_timeout = \"20s\"\nconnect_timeout = \"5s\"\n\
                 backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
                 [pools.{name}.health]\ninterval = \"200ms\"\nfailure_threshold = 2\nsuccess_threshold = 2\n\n",
            )
        };
        let r = Router::start(&format!(
            "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"{}\"\nbind = \"127.0.0.1:0\"\n\n{}{}\
             [routing]\nread_write_split = true\nread_pool = \"replica\"\nwrite_pool = \"primary\"\n",
            self.protocol,
            pool("primary", primary_port),
            pool("replica", replica_port)
        ));
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Tally::default());
        let readers: Vec<_> = (0..READERS).map(|_| spawn_reader(r.port(), stop.clone(), tally.clone())).collect();

        eventually(Duration::from_secs(15), "reads on the replica", || tally.standby() >= 200);
        self.env.stop(self.replica);
        let primary_before = tally.primary();
        eventually(Duration::from_secs(15), "reads moving to the primary", || tally.primary() >= primary_before + 200);
        let replica_while_down = tally.standby();
        self.env.start(self.replica);
        eventually(Duration::from_secs(30), "reads back on the restarted replica", || {
            tally.standby() >= replica_while_down + 200
        });
        stop.store(true, Ordering::SeqCst);
        for t in readers {
            t.join().expect("reader");
        }
        let errors = tally.errors.lock().expect("tally");
        eprintln!(
            "{} replica stop/start under load: {} reads on the replica, {} on the primary, {} errors: {errors:?}",
            self.protocol,
            tally.standby(),
            tally.primary(),
            errors.len()
        );
        assert!(errors.len() <= READERS, "{} errors for {READERS} readers: {errors:?}", errors.len());
    }
}

#[test]
fn pg_replica_stopped_and_restarted_under_read_load() {
    let env = Dbs::private();
    let pg = env.pg.clone();
    let scenario = ReplicaUnderLoad {
        env: &env,
        protocol: "postgres",
        server: (&pg.user, &pg.password, &pg.database, pg.primary_port, pg.replica_port),
        replica: Server::PgReplica,
    };
    scenario.run(|port, stop, tally| thread::spawn(move || pg_reader(port, stop, tally)));
}

/// One MariaDB reader: split-eligible reads back to back until `stop`, tallying where each
/// ran (`@@server_id` 2 is the replica).
fn my_reader(opts: mysql::OptsBuilder, stop: Arc<AtomicBool>, tally: Arc<Tally>) {
    let mut client: Option<mysql::Conn> = None;
    while !stop.load(Ordering::SeqCst) {
        let c = match client.as_mut() {
            Some(c) => c,
            None => match mysql::Conn::new(opts.clone()) {
                Ok(c) => client.insert(c),
                Err(e) => {
                    tally.errors.lock().expect("tally").push(format!("connect: {e}"));
                    continue;
                }
            },
        };
        match c.query_first::<u32, _>("SELECT @@server_id") {
            Ok(Some(2)) => tally.standby.fetch_add(1, Ordering::SeqCst),
            Ok(_) => tally.primary.fetch_add(1, Ordering::SeqCst),
            Err(e) => {
                tally.errors.lock().expect("tally").push(e.to_string());
                client = None; // the driver's connection state is unknown after an error
                continue;
            }
        };
    }
}

#[test]
fn mariadb_replica_stopped_and_restarted_under_read_load() {
    let env = Dbs::private();
    let my = env.my.clone();
    let scenario = ReplicaUnderLoad {
        env: &env,
        protocol: "mysql",
        server: (&my.user, &my.password, &my.database, my.primary_port, my.replica_port),
        replica: Server::MyReplica,
    };
    scenario.run(|port, stop, tally| {
        let opts = my.opts(port, &my.user, &my.password);
        thread::spawn(move || my_reader(opts, stop, tally))
    });
}
