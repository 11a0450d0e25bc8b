//! Issue #40, failover: one write pool lists the primary and its replica; the router writes only
//! to the server that is writable now. Under a TPC-B-like load of 16 clients the primary is
//! stopped cleanly (PostgreSQL `pg_ctl stop -m fast`, which ships its last WAL to the standby;
//! MariaDB `SHUTDOWN WAIT FOR ALL SLAVES`, which does the same with the binlog), the replica is
//! promoted (`pg_ctl promote`; `STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0`), and
//! with `failover_wait` above the promotion time:
//!
//! - no client errs unless it had a transaction open: each client counts what happened to each
//!   transaction it tried, from its own side of the wire. A failed BEGIN (or a failed connect)
//!   is an error of a client without a transaction open and must not happen; a failure after
//!   BEGIN was acknowledged hit a transaction the stopped server was running (allowed: the
//!   server aborted it), and a failed COMMIT is in doubt. pgbench itself cannot tell these
//!   apart (it ends a client at its first error, and with 16 busy clients nearly every one has
//!   a transaction open when the server stops), so the clients here run pgbench's TPC-B
//!   statements on pgbench's tables and go on after an error, with a new connection;
//! - every acknowledged commit is on the new primary: `count(*)` of the history table lies
//!   between the acknowledged commits and those plus the in-doubt ones, and the balances add up;
//! - no write reached a read-only server: no client saw 25006 / 1290, the error a write gets
//!   there. Where each committed write ran is recorded by the server itself in its history
//!   row (`inet_server_port()`, `@@server_id`): both servers took writes, each in its turn.
//!
//! The figures (promotion time, longest stall, error counts) are printed for tuning.md.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;

use crate::router::Router;
use crate::support::{Dbs, Kind, MyEnv, Server};

/// Clients of the load, as in the issue.
pub(crate) const CLIENTS: usize = 16;
/// How long a checkout waits for a writable backend: well above a promotion here (< 1 s).
const FAILOVER_WAIT: &str = "30s";
/// Commits wanted before the primary stops and again after the promotion.
pub(crate) const COMMITS_PER_PHASE: u64 = 300;

/// The write pool `main` over `ports` (the primary first), with fast probes.
pub(crate) fn pool(user: &str, password: &str, database: &str, ports: [u16; 2]) -> String {
    let backends: Vec<String> = ports.iter().map(|p| format!("{{ host = \"127.0.0.1\", port = {p} }}")).collect();
    format!(
        "[pools.main]\nmode = \"transaction\"\nrole = \"primary\"\nusername = \"{user}\"\npassword = \"{password}\"\n\
         database = \"{database}\"\nmax_connections = 24\nacquire_timeout = \"10s\"\nconnect_timeout = \"2s\"\n\
         failover_wait = \"{FAILOVER_WAIT}\"\nbackends = [{}]\n\n[pools.main.health]\ninterval = \"100ms\"\n\
         timeout = \"1s\"\nfailure_threshold = 1\nsuccess_threshold = 1\n\n",
        backends.join(", ")
    )
}

/// A config with one `protocol` listener sending everything to `main`.
pub(crate) fn config(protocol: &str, pools: &str) -> String {
    let default = if protocol == "mysql" { "mysql_default_pool" } else { "default_pool" };
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"{protocol}\"\n\
         bind = \"127.0.0.1:0\"\n\n{pools}[routing]\n{default} = \"main\"\n"
    )
}

fn router(protocol: &str, pools: &str) -> Router {
    Router::start(&config(protocol, pools))
}

/// How one transaction ended, as its client saw it.
pub(crate) enum Outcome {
    /// COMMIT acknowledged.
    Committed,
    /// The connect or the BEGIN failed (a BEGIN in flight on the server that stopped ran
    /// nothing, and the router sends it again on a new connection): the client had no
    /// transaction open.
    Refused(String),
    /// A statement after BEGIN failed; `read_only`: a read-only server refused a write.
    Failed { read_only: bool },
    /// COMMIT was sent and failed: it may or may not have committed.
    InDoubt,
}

/// A client of the load, for one protocol.
pub(crate) trait Tpcb: Sized {
    /// Where and how to connect (through the router).
    type Target: Clone + Send + 'static;
    fn connect(target: &Self::Target) -> Result<Self, String>;
    /// One TPC-B-like transaction with the account, teller, branch and delta `pick` gives.
    fn transaction(&mut self, pick: [i64; 4]) -> Outcome;
    /// After a failure: whether the connection can go on (a ROLLBACK went through).
    fn recover(&mut self) -> bool;
}

/// What the clients saw, merged.
#[derive(Default)]
pub(crate) struct Tally {
    pub committed: u64,
    pub in_doubt: u64,
    pub failed_in_transaction: u64,
    pub read_only_refusals: u64,
    /// Errors of clients without a transaction open, with their text.
    pub refused: Vec<String>,
    /// New connections to the router after one was lost, and the longest of those logins.
    reconnects: u64,
    longest_login: Duration,
    /// When each commit was acknowledged (for the longest stall) and the longest transaction.
    commits: Vec<Instant>,
    longest_transaction: Duration,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.committed += other.committed;
        self.in_doubt += other.in_doubt;
        self.failed_in_transaction += other.failed_in_transaction;
        self.read_only_refusals += other.read_only_refusals;
        self.refused.extend(other.refused);
        self.reconnects += other.reconnects;
        self.longest_login = self.longest_login.max(other.longest_login);
        self.commits.extend(other.commits);
        self.longest_transaction = self.longest_transaction.max(other.longest_transaction);
    }

    /// The longest time between two acknowledged commits of any client.
    fn longest_stall(&mut self) -> Duration {
        self.commits.sort();
        self.commits.windows(2).map(|w| w[1] - w[0]).max().unwrap_or_default()
    }

    /// From `since` to the first commit acknowledged after it.
    fn first_commit_after(&self, since: Instant) -> Option<Duration> {
        self.commits.iter().filter(|c| **c > since).min().map(|c| *c - since)
    }
}

/// A small xorshift generator: each client its own reproducible stream.
fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// Runs one client until `stop`, counting into its own tally.
fn client<C: Tpcb>(target: &C::Target, seed: u64, stop: &AtomicBool, committed: &AtomicU64) -> Tally {
    let mut tally = Tally::default();
    let mut rng = seed.max(1);
    let mut conn: Option<C> = None;
    while !stop.load(Ordering::Relaxed) {
        if conn.is_none() {
            let login = Instant::now();
            match C::connect(target) {
                Ok(c) => {
                    if tally.committed + tally.failed_in_transaction > 0 {
                        tally.reconnects += 1;
                        tally.longest_login = tally.longest_login.max(login.elapsed());
                    }
                    conn = Some(c);
                }
                Err(e) => {
                    tally.refused.push(format!("connect: {e}"));
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
            }
        }
        let Some(c) = conn.as_mut() else { continue };
        // pgbench's scale 1: 100,000 accounts, 10 tellers, 1 branch; delta in -5000..=5000.
        let pick = [1 + next(&mut rng) % 100_000, 1 + next(&mut rng) % 10, 1, next(&mut rng) % 10_001]
            .map(|v| i64::try_from(v).expect("small"));
        let pick = [pick[0], pick[1], pick[2], pick[3] - 5000];
        let started = Instant::now();
        let healthy = match c.transaction(pick) {
            Outcome::Committed => {
                tally.committed += 1;
                tally.commits.push(Instant::now());
                tally.longest_transaction = tally.longest_transaction.max(started.elapsed());
                committed.fetch_add(1, Ordering::Relaxed);
                true
            }
            Outcome::Refused(e) => {
                tally.refused.push(e);
                false
            }
            Outcome::Failed { read_only } => {
                tally.failed_in_transaction += 1;
                tally.read_only_refusals += u64::from(read_only);
                false
            }
            Outcome::InDoubt => {
                tally.in_doubt += 1;
                false
            }
        };
        if !healthy && !c.recover() {
            conn = None;
        }
    }
    tally
}

/// The load: `CLIENTS` threads until [`Load::finish`].
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    committed: Arc<AtomicU64>,
    threads: Vec<JoinHandle<Tally>>,
}

impl Load {
    pub(crate) fn start<C: Tpcb + 'static>(target: &C::Target) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let committed = Arc::new(AtomicU64::new(0));
        let threads = (0..CLIENTS as u64)
            .map(|i| {
                let (stop, committed, target) = (stop.clone(), committed.clone(), target.clone());
                std::thread::spawn(move || client::<C>(&target, 0x9E37_79B9_7F4A_7C15 ^ (i + 1), &stop, &committed))
            })
            .collect();
        Load { stop, committed, threads }
    }

    /// Waits until `n` more commits were acknowledged than `from`; panics after `timeout`.
    pub(crate) fn until_commits(&self, from: u64, n: u64, timeout: Duration, what: &str) -> u64 {
        crate::support::eventually(timeout, what, || self.committed.load(Ordering::Relaxed) >= from + n);
        self.committed.load(Ordering::Relaxed)
    }

    pub(crate) fn finish(self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        let mut total = Tally::default();
        for t in self.threads {
            total.merge(t.join().expect("client thread"));
        }
        total
    }
}

/// The figures of one failover, printed for tuning.md and checked by the caller: how long the
/// stop (`stop`: the old primary's shutdown, as the harness's script waits for it) and the
/// promotion took, and what the clients saw.
pub(crate) fn report(what: &str, stopping: Instant, stop: Duration, promotion: Duration, tally: &mut Tally) {
    let stall = tally.longest_stall();
    let outage = tally.first_commit_after(stopping + stop + promotion);
    eprintln!(
        "[failover] {what}: stop {stop:?}, promotion {promotion:?}, first commit {outage:?} after the promotion, \
         longest stall between commits {stall:?}, longest transaction {:?}; committed {}, in doubt {}, failed in a \
         transaction {}, refused without one {}, read-only refusals {}; {} reconnects, \
         longest login {:?}",
        tally.longest_transaction,
        tally.committed,
        tally.in_doubt,
        tally.failed_in_transaction,
        tally.refused.len(),
        tally.read_only_refusals,
        tally.reconnects,
        tally.longest_login,
    );
}

// ---- PostgreSQL ----

pub(crate) struct PgClient(postgres::Client);

fn pg_error(e: &postgres::Error) -> String {
    e.as_db_error().map_or_else(|| e.to_string(), |d| format!("{} {}", d.code().code(), d.message()))
}

impl Tpcb for PgClient {
    /// The router's port.
    type Target = u16;

    fn connect(port: &u16) -> Result<Self, String> {
        crate::pg_util::connect(*port, "main", "app").map(PgClient).map_err(|e| pg_error(&e))
    }

    fn transaction(&mut self, [aid, tid, bid, delta]: [i64; 4]) -> Outcome {
        if let Err(e) = self.0.batch_execute("BEGIN") {
            return Outcome::Refused(pg_error(&e));
        }
        // pgbench's built-in tpcb-like script, statement by statement.
        let statements = [
            format!("UPDATE pgbench_accounts SET abalance = abalance + {delta} WHERE aid = {aid}"),
            format!("SELECT abalance FROM pgbench_accounts WHERE aid = {aid}"),
            format!("UPDATE pgbench_tellers SET tbalance = tbalance + {delta} WHERE tid = {tid}"),
            format!("UPDATE pgbench_branches SET bbalance = bbalance + {delta} WHERE bid = {bid}"),
            format!(
                "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES ({tid}, {bid}, {aid}, {delta}, \
                 CURRENT_TIMESTAMP)"
            ),
        ];
        for sql in &statements {
            if let Err(e) = self.0.batch_execute(sql) {
                let read_only = e.code() == Some(&postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION);
                return Outcome::Failed { read_only };
            }
        }
        match self.0.batch_execute("END") {
            Ok(()) => Outcome::Committed,
            Err(_) => Outcome::InDoubt,
        }
    }

    fn recover(&mut self) -> bool {
        !self.0.is_closed() && self.0.batch_execute("ROLLBACK").is_ok()
    }
}

/// Runs `pgbench` directly against a server (not through the router).
pub(crate) fn pgbench(port: u16, args: &[&str]) {
    let out = std::process::Command::new("pgbench")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "app"])
        .args(args)
        .arg("app")
        .env("PGPASSWORD", "app")
        .output()
        .expect("run pgbench");
    assert!(out.status.success(), "pgbench {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

#[test]
fn pg_failover_under_tpcb_errs_only_open_transactions_and_loses_no_commit() {
    let env = Dbs::private();
    let pg = &env.pg;
    pgbench(pg.primary_port, &["-i", "-q", "-s", "1"]);
    // Each history row records the server that ran its transaction.
    let mut primary = pg.primary_client();
    primary.batch_execute("ALTER TABLE pgbench_history ADD COLUMN port int DEFAULT inet_server_port()").expect("port");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    let r = router("postgres", &pool(&pg.user, &pg.password, "app", [pg.primary_port, pg.replica_port]));

    let load = Load::start::<PgClient>(&r.port());
    let before = load.until_commits(0, COMMITS_PER_PHASE, Duration::from_secs(60), "commits on the primary");
    let stopping = Instant::now();
    env.stop(Server::PgPrimary); // pg_ctl stop -m fast (SIGINT)
    let stop = stopping.elapsed();
    let promoting = Instant::now();
    env.promote(Kind::Pg);
    let promotion = promoting.elapsed();
    load.until_commits(before, COMMITS_PER_PHASE, Duration::from_secs(60), "commits after the promotion");
    let mut tally = load.finish();
    report("PostgreSQL", stopping, stop, promotion, &mut tally);

    assert!(tally.refused.is_empty(), "clients without a transaction open got errors: {:?}", tally.refused);
    assert_eq!(tally.read_only_refusals, 0, "a write reached a read-only server");
    let in_flight = tally.failed_in_transaction + tally.in_doubt;
    assert!(in_flight <= CLIENTS as u64, "at most one statement in flight per client when the server stopped");
    let mut new_primary = pg.superuser_client(pg.replica_port);
    let in_recovery: bool = new_primary.query_one("SELECT pg_is_in_recovery()", &[]).expect("role").get(0);
    assert!(!in_recovery, "the standby was promoted");
    let row = new_primary
        .query_one(
            "SELECT count(*), coalesce(sum(delta), 0)::int8, (SELECT sum(abalance)::int8 FROM pgbench_accounts), \
             (SELECT sum(tbalance)::int8 FROM pgbench_tellers), (SELECT sum(bbalance)::int8 FROM pgbench_branches), \
             count(*) FILTER (WHERE port = $1), count(*) FILTER (WHERE port = $2) FROM pgbench_history",
            &[&i32::from(pg.primary_port), &i32::from(pg.replica_port)],
        )
        .expect("history on the new primary");
    let (rows, delta): (i64, i64) = (row.get(0), row.get(1));
    let committed = i64::try_from(tally.committed).expect("count");
    let in_doubt = i64::try_from(tally.in_doubt).expect("count");
    assert!(
        committed <= rows && rows <= committed + in_doubt,
        "history rows {rows}: acknowledged commits {committed}, in doubt {in_doubt}"
    );
    assert_eq!([row.get::<_, i64>(2), row.get(3), row.get(4)], [delta; 3], "every transaction whole or not at all");
    let (on_old, on_new): (i64, i64) = (row.get(5), row.get(6));
    assert_eq!(on_old + on_new, rows, "every write ran on one of the pool's servers");
    assert!(on_old > 0 && on_new > 0, "writes ran on the primary ({on_old}), then on the promoted standby ({on_new})");
}

// ---- MariaDB ----

pub(crate) struct MyClient(mysql::Conn);

fn my_error(e: &mysql::Error) -> String {
    match e {
        mysql::Error::MySqlError(m) => format!("{} {}", m.code, m.message),
        other => other.to_string(),
    }
}

impl Tpcb for MyClient {
    /// app/app through the router.
    type Target = mysql::OptsBuilder;

    fn connect(opts: &mysql::OptsBuilder) -> Result<Self, String> {
        mysql::Conn::new(opts.clone()).map(MyClient).map_err(|e| my_error(&e))
    }

    fn transaction(&mut self, [account, _, _, delta]: [i64; 4]) -> Outcome {
        if let Err(e) = self.0.query_drop("START TRANSACTION") {
            return Outcome::Refused(my_error(&e));
        }
        let statements = [
            format!("UPDATE acc SET bal = bal + {delta} WHERE id = {account}"),
            format!("SELECT bal FROM acc WHERE id = {account}"),
            format!("INSERT INTO hist (acc, delta, server) VALUES ({account}, {delta}, @@server_id)"),
        ];
        for sql in &statements {
            if let Err(e) = self.0.query_drop(sql) {
                let read_only = matches!(&e, mysql::Error::MySqlError(m) if m.code == 1290);
                return Outcome::Failed { read_only };
            }
        }
        match self.0.query_drop("COMMIT") {
            Ok(()) => Outcome::Committed,
            Err(_) => Outcome::InDoubt,
        }
    }

    fn recover(&mut self) -> bool {
        self.0.query_drop("ROLLBACK").is_ok()
    }
}

/// The load's tables on the MariaDB primary (`acc`: 100,000 accounts; `hist`: one row per
/// transaction with the `@@server_id` that ran it), replicated before this returns.
pub(crate) fn my_tables(my: &MyEnv) {
    my.primary_client()
        .query_drop(
            "CREATE TABLE acc (id INT PRIMARY KEY, bal BIGINT NOT NULL) ENGINE = InnoDB; \
             INSERT INTO acc SELECT seq, 0 FROM seq_1_to_100000; \
             CREATE TABLE hist (id BIGINT AUTO_INCREMENT PRIMARY KEY, acc INT, delta INT, server INT) ENGINE = InnoDB",
        )
        .expect("tables");
    my.wait_replica_caught_up(Duration::from_secs(30));
}

#[test]
fn mariadb_failover_under_load_errs_only_open_transactions_and_loses_no_commit() {
    let env = Dbs::private();
    let my = &env.my;
    my_tables(my);
    let server_id = |port: u16| -> u32 {
        my.superuser_client(port).query_first("SELECT @@server_id").expect("@@server_id").expect("a row")
    };
    let (old_id, new_id) = (server_id(my.primary_port), server_id(my.replica_port));
    let r = router("mysql", &pool(&my.user, &my.password, &my.database, [my.primary_port, my.replica_port]));

    // pgbench speaks only PostgreSQL: the same shape on MariaDB, accounts 1..100,000 and one
    // history row per transaction.
    let load = Load::start::<MyClient>(&my.opts(r.port(), &my.user, &my.password));
    let before = load.until_commits(0, COMMITS_PER_PHASE, Duration::from_secs(60), "commits on the primary");
    // The MariaDB counterpart of pg_ctl stop -m fast: the binlog reaches the replica first.
    let stopping = Instant::now();
    let _ = my.superuser_client(my.primary_port).query_drop("SHUTDOWN WAIT FOR ALL SLAVES");
    env.stop(Server::MyPrimary);
    let stop = stopping.elapsed();
    let promoting = Instant::now();
    env.promote(Kind::Mariadb);
    let promotion = promoting.elapsed();
    load.until_commits(before, COMMITS_PER_PHASE, Duration::from_secs(60), "commits after the promotion");
    let mut tally = load.finish();
    report("MariaDB", stopping, stop, promotion, &mut tally);

    assert!(tally.refused.is_empty(), "clients without a transaction open got errors: {:?}", tally.refused);
    assert_eq!(tally.read_only_refusals, 0, "a write reached a read-only server");
    let in_flight = tally.failed_in_transaction + tally.in_doubt;
    assert!(in_flight <= CLIENTS as u64, "at most one statement in flight per client when the server stopped");
    let mut new_primary = my.superuser_client(my.replica_port);
    let read_only: u32 = new_primary.query_first("SELECT @@read_only").expect("read_only").expect("a row");
    assert_eq!(read_only, 0, "the replica was promoted");
    let (rows, delta, balance, on_old, on_new): (i64, i64, i64, i64, i64) = new_primary
        .query_first(format!(
            "SELECT count(*), coalesce(sum(delta), 0), (SELECT sum(bal) FROM app.acc), \
             coalesce(sum(server = {old_id}), 0), coalesce(sum(server = {new_id}), 0) FROM app.hist"
        ))
        .expect("history on the new primary")
        .expect("a row");
    let committed = i64::try_from(tally.committed).expect("count");
    let in_doubt = i64::try_from(tally.in_doubt).expect("count");
    assert!(
        committed <= rows && rows <= committed + in_doubt,
        "history rows {rows}: acknowledged commits {committed}, in doubt {in_doubt}"
    );
    assert_eq!(balance, delta, "every transaction whole or not at all");
    assert_eq!(on_old + on_new, rows, "every write ran on one of the pool's servers");
    assert!(on_old > 0 && on_new > 0, "writes ran on the primary ({on_old}), then on the promoted replica ({on_new})");
}

/// The error a checkout ends with when no backend became writable within `failover_wait`: a
/// connection failure (PostgreSQL `08001`, MySQL 1105 with SQLSTATE `08S01`) naming the wait,
/// after the wait and not before; with `failover_wait = "0s"` the pool keeps its old behaviour
/// (the standby is lent and the server refuses the write with `25006`).
#[test]
fn failover_wait_ends_with_a_connection_error_and_zero_keeps_the_servers_refusal() {
    let env = Dbs::private();
    let (pg, my) = (&env.pg, &env.my);
    let short = |pools: String, wait: &str| pools.replace(&format!("failover_wait = \"{FAILOVER_WAIT}\""), wait);
    let pg_pools = pool(&pg.user, &pg.password, "app", [pg.primary_port, pg.replica_port]);
    let pg_router = router("postgres", &short(pg_pools.clone(), "failover_wait = \"1s\""));
    let my_pools = pool(&my.user, &my.password, &my.database, [my.primary_port, my.replica_port]);
    let my_router = router("mysql", &short(my_pools, "failover_wait = \"1s\""));
    let mut pgc = crate::pg_util::connect(pg_router.port(), "main", "app").expect("client");
    let port: i32 = pgc.query_one("SELECT inet_server_port()", &[]).expect("port").get(0);
    assert_eq!(port, i32::from(pg.primary_port), "the writable server");
    let mut myc = mysql::Conn::new(my.opts(my_router.port(), &my.user, &my.password)).expect("client");
    let server_id = |c: &mut mysql::Conn| -> u32 { c.query_first("SELECT @@server_id").expect("id").expect("a row") };
    assert_eq!(server_id(&mut myc), server_id(&mut my.primary_client()), "the writable server");

    env.stop(Server::PgPrimary);
    env.stop(Server::MyPrimary);
    let started = Instant::now();
    let e = pgc.batch_execute("CREATE TABLE nowhere (v int)").expect_err("no writable server");
    let db = e.as_db_error().unwrap_or_else(|| panic!("{e:?}"));
    assert_eq!(db.code().code(), "08001", "{db:?}");
    assert!(db.message().contains("none became writable within failover_wait"), "{db:?}");
    assert!(started.elapsed() >= Duration::from_secs(1), "after the wait: {:?}", started.elapsed());
    let started = Instant::now();
    match myc.query_drop("CREATE TABLE nowhere (v int)") {
        Err(mysql::Error::MySqlError(m)) => {
            assert_eq!((m.code, m.state.as_str()), (1105, "08S01"), "{m:?}");
            assert!(m.message.contains("none became writable within failover_wait"), "{m:?}");
        }
        other => panic!("expected the router's error, got {other:?}"),
    }
    assert!(started.elapsed() >= Duration::from_secs(1), "after the wait: {:?}", started.elapsed());

    // Without a wait the standby is lent, as before roles were read: the server refuses.
    pg_router.reload_with(&config("postgres", &short(pg_pools, "failover_wait = \"0s\""))).expect("reload");
    let mut pgc = crate::pg_util::connect(pg_router.port(), "main", "app").expect("client");
    let e = pgc.batch_execute("CREATE TABLE nowhere (v int)").expect_err("a read-only server");
    assert_eq!(e.code(), Some(&postgres::error::SqlState::READ_ONLY_SQL_TRANSACTION), "{e:?}");
}
