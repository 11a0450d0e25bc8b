//! Issue #40, binary upgrade with the sessions: a client connected to the old process keeps its
//! session in the new one — its settings, its named statements (PostgreSQL) or prepared
//! statement ids (MySQL), its cancel key or connection id — and under load (pgbench TPC-B with
//! prepared statements, sysbench read-write) two hand-overs in a row cost no client an error
//! and no committed transaction. That the new process serves a moved client is shown by the
//! old process having exited while the client's connection goes on.

// Blocking test code driving child processes, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;

use crate::client_tls::{tls_keys, with_listener_keys};
use crate::handover::Proc;
use crate::mysql_session::{my_config, my_pool};
use crate::pg_pgbench::{number, Database};
use crate::router::{pg_config, pg_pool};
use crate::support::{dbs, eventually, free_port, unique_name};

/// How long an old process may take to hand everything over and exit.
const EXIT: Duration = Duration::from_secs(30);

/// A router's config file and hand-over socket in a temporary directory.
pub(crate) struct Upgrade {
    dir: tempfile::TempDir,
    pub(crate) port: u16,
    toml: String,
}

impl Upgrade {
    /// `config` with the listener on a fixed free port and a hand-over socket.
    pub(crate) fn new(config: &str) -> Upgrade {
        let dir = tempfile::tempdir().expect("tempdir");
        let port = free_port();
        let socket = dir.path().join("handover.sock");
        let toml = config.replace("127.0.0.1:0", &format!("127.0.0.1:{port}")).replace(
            "shutdown_drain = \"2s\"",
            &format!("shutdown_drain = \"2s\"\nhandover_socket = \"{}\"\nhandover_wait = \"20s\"", socket.display()),
        );
        Upgrade { dir, port, toml }
    }

    fn socket(&self) -> PathBuf {
        self.dir.path().join("handover.sock")
    }

    /// Starts a router process; `take_over`: from the one running.
    pub(crate) fn start(&self, name: &str, take_over: bool) -> Proc {
        let socket = self.socket();
        let p = Proc::start(self.dir.path(), name, &self.toml, take_over.then_some(socket.as_path()));
        let port = self.port;
        eventually(Duration::from_secs(60), "the router to listen", || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        });
        if !take_over {
            eventually(Duration::from_secs(60), "the hand-over socket", || socket.exists());
        }
        p
    }

    /// Hands `old` over to a new process named `name`, which is returned once `old` exited 0,
    /// with how long that took.
    pub(crate) fn hand_over(&self, old: &mut Proc, name: &str) -> (Proc, Duration) {
        let started = Instant::now();
        let new = self.start(name, true);
        let status = old.exit_within(EXIT, "the old router");
        assert!(status.success(), "the old router exits 0 after handing over, got {status:?}:\n{}", old.log());
        let took = started.elapsed();
        // The new process listens on the socket for the next hand-over.
        let socket = self.socket();
        eventually(Duration::from_secs(60), "the new process's hand-over socket", || socket.exists());
        (new, took)
    }
}

/// User app (password app) through the router on `port`, to database `database`.
pub(crate) fn app_client(port: u16, database: &str) -> postgres::Client {
    let mut c = postgres::Config::new();
    c.host("127.0.0.1").port(port).user("app").password("app").dbname(database);
    c.connect(postgres::NoTls).expect("connect through the router")
}

fn pg_client(port: u16) -> postgres::Client {
    let pg = &dbs().pg;
    pg.config(port, &pg.user, &pg.password).dbname("main").connect(postgres::NoTls).expect("connect through the router")
}

#[test]
fn a_postgresql_session_moves_with_its_settings_statements_and_cancel_key() {
    let up = Upgrade::new(&pg_config(&[0, 1], &pg_pool("main", dbs().pg.primary_port, "transaction", 4), "main"));
    let mut old = up.start("old", false);
    let mut c = pg_client(up.port);
    c.batch_execute("SET work_mem = '7MB'; SET application_name = 'moving'").expect("settings");
    let stmt = c.prepare("SELECT $1::int + 1, current_setting('work_mem')").expect("a named statement");
    let row = c.query_one(&stmt, &[&41]).expect("run it");
    assert_eq!((row.get::<_, i32>(0), row.get::<_, String>(1)), (42, "7MB".to_owned()));
    let cancel = c.cancel_token();

    let (_new, took) = up.hand_over(&mut old, "new");
    eprintln!("[upgrade] one idle PostgreSQL client: handed over in {took:?}");
    let row = c.query_one(&stmt, &[&1]).expect("the statement prepared before the hand-over");
    assert_eq!((row.get::<_, i32>(0), row.get::<_, String>(1)), (2, "7MB".to_owned()), "statement and setting moved");
    let name: String = c.query_one("SELECT current_setting('application_name')", &[]).expect("setting").get(0);
    assert_eq!(name, "moving");
    // The cancel key the old process issued reaches the statement the new one runs.
    let canceller = thread::spawn(move || {
        thread::sleep(Duration::from_millis(500));
        cancel.cancel_query(postgres::NoTls).expect("cancel request")
    });
    let started = Instant::now();
    let err = c.batch_execute("SELECT pg_sleep(30)").expect_err("cancelled");
    canceller.join().expect("canceller");
    assert_eq!(err.code(), Some(&postgres::error::SqlState::QUERY_CANCELED), "{err}");
    assert!(started.elapsed() < Duration::from_secs(20), "cancelled, not run out");
    assert_eq!(c.query_one("SELECT 1", &[]).expect("goes on").get::<_, i32>(0), 1);
}

/// Statements about the causal token (#34), which the router answers itself, move with the
/// session: those prepared before the hand-over answer after it, with the position the session
/// waited for before.
#[test]
fn a_postgresql_session_moves_with_its_causal_token_statements() {
    let config = pg_config(&[0], &pg_pool("main", dbs().pg.primary_port, "transaction", 4), "main")
        + "read_your_writes = \"causal\"\n";
    let up = Upgrade::new(&config);
    let mut old = up.start("old", false);
    let mut c = pg_client(up.port);
    let show = c.prepare("SHOW querypilot.causal_token").expect("a token statement");
    let set = c.prepare("SET querypilot.causal_token = 'pg:0/2000'").expect("another");
    c.execute(&set, &[]).expect("set the token");
    let before: String = c.query_one(&show, &[]).expect("the token").get(0);
    assert_eq!(before, "pg:0/2000");
    let (new, took) = up.hand_over(&mut old, "new");
    eprintln!("[upgrade] one PostgreSQL client with a prepared token statement: handed over in {took:?}");
    let after: String = c
        .query_one(&show, &[])
        .unwrap_or_else(|e| panic!("the token statement: {e}\nold:\n{}\nnew:\n{}", old.log(), new.log()))
        .get(0);
    assert_eq!(after, before, "the same position after the move");
    c.execute(&set, &[]).expect("the other token statement");
}

/// A transaction open when the hand-over starts finishes on the old process (which waits for
/// it, up to `handover_wait`), commits, and the session then moves.
#[test]
fn a_transaction_open_at_the_hand_over_commits_and_then_moves() {
    let up = Upgrade::new(&pg_config(&[0], &pg_pool("main", dbs().pg.primary_port, "transaction", 4), "main"));
    let mut old = up.start("old", false);
    let mut c = pg_client(up.port);
    let table = unique_name("ho_tx");
    c.batch_execute(&format!("CREATE TABLE {table} (x int)")).expect("table");
    c.batch_execute(&format!("BEGIN; INSERT INTO {table} VALUES (1)")).expect("open transaction");
    let new = up.start("new", true);
    thread::sleep(Duration::from_millis(500));
    assert!(old.running(), "the old process waits for the open transaction");
    c.batch_execute(&format!("INSERT INTO {table} VALUES (2); COMMIT")).expect("the transaction commits");
    let status = old.exit_within(EXIT, "the old router");
    assert!(status.success(), "{status:?}\n{}", old.log());
    let n: i64 = c.query_one(&format!("SELECT count(*) FROM {table}"), &[]).expect("moved").get(0);
    assert_eq!(n, 2, "both rows committed; the session goes on in the new process:\n{}", new.log());
    c.batch_execute(&format!("DROP TABLE {table}")).expect("drop");
}

/// A session that owns its server connection — session mode, or a pin in transaction mode (a
/// temporary table) — moves with it: the same server session (its backend pid, its temporary
/// table) goes on in the new process, and a cancel by the key the client holds reaches it.
#[test]
fn a_postgresql_session_owning_its_server_connection_moves_with_it() {
    let pools =
        pg_pool("main", dbs().pg.primary_port, "session", 4) + &pg_pool("tx", dbs().pg.primary_port, "transaction", 4);
    let up = Upgrade::new(&pg_config(&[0, 1], &pools, "main"));
    let mut old = up.start("old", false);
    let pg = &dbs().pg;
    let mut session = pg_client(up.port);
    let mut pinned =
        pg.config(up.port, &pg.user, &pg.password).dbname("tx").connect(postgres::NoTls).expect("transaction pool");
    let mut before = Vec::new();
    for c in [&mut session, &mut pinned] {
        c.batch_execute("CREATE TEMP TABLE moving (x int); INSERT INTO moving VALUES (7)").expect("temp table");
        before.push(c.query_one("SELECT pg_backend_pid()", &[]).expect("pid").get::<_, i32>(0));
    }
    let cancel = session.cancel_token();

    let (new, took) = up.hand_over(&mut old, "new");
    eprintln!("[upgrade] two PostgreSQL clients owning their server connections: handed over in {took:?}");
    for (c, pid) in [&mut session, &mut pinned].into_iter().zip(before) {
        let row = c
            .query_one("SELECT x, pg_backend_pid() FROM moving", &[])
            .unwrap_or_else(|e| panic!("the temp table is still there: {e}\nold:\n{}\nnew:\n{}", old.log(), new.log()));
        assert_eq!((row.get::<_, i32>(0), row.get::<_, i32>(1)), (7, pid), "the same server session");
    }
    let canceller = thread::spawn(move || {
        thread::sleep(Duration::from_millis(500));
        cancel.cancel_query(postgres::NoTls).expect("cancel request")
    });
    let err = session.batch_execute("SELECT pg_sleep(30)").expect_err("cancelled");
    canceller.join().expect("canceller");
    assert_eq!(err.code(), Some(&postgres::error::SqlState::QUERY_CANCELED), "{err}");
}

/// As for PostgreSQL: a MariaDB session-mode client keeps its server session (its thread id,
/// its user variable and temporary table), and `KILL QUERY` of the id it reads from
/// `CONNECTION_ID()` reaches it in the new process.
#[test]
fn a_mysql_session_owning_its_server_connection_moves_with_it() {
    let up = Upgrade::new(&my_config(&[0, 1], &my_pool("main", "session", 4), "main"));
    let mut old = up.start("old", false);
    let mut c = my_client(up.port);
    c.query_drop("SET @moving = 5").expect("user variable");
    c.query_drop("CREATE TEMPORARY TABLE moving (x int)").expect("temp table");
    c.query_drop("INSERT INTO moving VALUES (7)").expect("insert");
    let thread: Option<u64> = c.query_first("SELECT CONNECTION_ID()").expect("thread id");

    let (_new, took) = up.hand_over(&mut old, "new");
    eprintln!("[upgrade] one MariaDB session-mode client: handed over in {took:?}");
    let row: Option<(i64, i64, u64)> =
        c.query_first("SELECT x, @moving, CONNECTION_ID() FROM moving").expect("the server session goes on");
    assert_eq!(row, Some((7, 5, thread.expect("an id"))), "the same server session");
    kill_query_interrupts(&mut c, up.port, thread.expect("an id"));
}

/// A client logged in as itself on a pass-through pool (SCRAM, no password configured) moves
/// with what its proof revealed: the new process logs in to the server as that role for its
/// next transaction, and the role sees its own table, as before.
#[test]
fn a_pass_through_session_moves_with_its_identity() {
    let roles = crate::passthrough::Roles::create("ho_pt", "scram-sha-256");
    let file = tempfile::NamedTempFile::new().expect("auth file");
    std::fs::write(file.path(), roles.userlist()).expect("write auth file");
    let config = format!(
        "[general]\ncores = [0, 1]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\n\
         bind = \"127.0.0.1:0\"\nauth_method = \"scram-sha-256\"\n\n[pools.app]\nmode = \"transaction\"\n\
         max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {} }}]\n\n\
         [routing]\ndefault_pool = \"app\"\n\n[auth]\nfile = \"{}\"\n",
        dbs().pg.primary_port,
        file.path().display()
    );
    let up = Upgrade::new(&config);
    let mut old = up.start("old", false);
    let role = &roles.names[0];
    let mut c = crate::passthrough::client(up.port, role, &format!("pw_{role}")).expect("log in as the role");
    let who = |c: &mut postgres::Client| -> (String, String) {
        let row =
            c.query_one(&format!("SELECT current_user::text, owner FROM public.{role}_t"), &[]).expect("own table");
        (row.get(0), row.get(1))
    };
    assert_eq!(who(&mut c), (role.clone(), role.clone()));
    let (_new, took) = up.hand_over(&mut old, "new");
    eprintln!("[upgrade] one pass-through PostgreSQL client: handed over in {took:?}");
    assert_eq!(who(&mut c), (role.clone(), role.clone()), "still itself, through a login the new process made");
}

fn my_client(port: u16) -> mysql::Conn {
    let my = &dbs().my;
    mysql::Conn::new(my.opts(port, &my.user, &my.password)).expect("connect through the router")
}

#[test]
fn a_mysql_session_moves_with_its_settings_statements_and_connection_id() {
    let up = Upgrade::new(&my_config(&[0, 1], &my_pool("main", "transaction", 4), "main"));
    let mut old = up.start("old", false);
    let mut c = my_client(up.port);
    c.query_drop("SET SESSION wait_timeout = 1234").expect("setting");
    let stmt = c.prep("SELECT ? + 1, @@session.wait_timeout").expect("a prepared statement");
    let row: (i64, i64) = c.exec_first(&stmt, (41,)).expect("run it").expect("a row");
    assert_eq!(row, (42, 1234));
    let id = c.connection_id();

    let (_new, took) = up.hand_over(&mut old, "new");
    eprintln!("[upgrade] one idle MariaDB client: handed over in {took:?}");
    let row: (i64, i64) = c.exec_first(&stmt, (1,)).expect("the statement prepared before").expect("a row");
    assert_eq!(row, (2, 1234), "statement id and setting moved");
    // KILL QUERY with the connection id the old process greeted the client with.
    kill_query_interrupts(&mut c, up.port, u64::from(id));
}

/// `KILL QUERY id`, sent from another connection through the router at `port`, interrupts
/// the statement `c` runs, and `c`'s session goes on.
fn kill_query_interrupts(c: &mut mysql::Conn, port: u16, id: u64) {
    let killer = thread::spawn(move || {
        thread::sleep(Duration::from_millis(500));
        my_client(port).query_drop(format!("KILL QUERY {id}")).expect("kill")
    });
    let started = Instant::now();
    let slept: Result<Option<i64>, _> = c.query_first("SELECT SLEEP(30)");
    killer.join().expect("killer");
    match slept {
        Ok(v) => assert_eq!(v, Some(1), "SLEEP reports the interruption"),
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1317, "query interrupted: {e:?}"),
        Err(e) => panic!("the session survives the KILL QUERY: {e}"),
    }
    assert!(started.elapsed() < Duration::from_secs(20), "killed, not run out");
    let one: Option<i64> = c.query_first("SELECT 1").expect("goes on");
    assert_eq!(one, Some(1));
}

/// The largest gap between two transactions' ends in pgbench's per-transaction logs (`-l`,
/// in `dir`): the longest the whole load stood still.
fn longest_stall(dir: &Path) -> Duration {
    let mut ends: Vec<u128> = Vec::new();
    for entry in std::fs::read_dir(dir).expect("log dir").flatten() {
        let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
        for line in text.lines() {
            let f: Vec<&str> = line.split_whitespace().collect();
            if let (Some(s), Some(us)) =
                (f.get(4).and_then(|s| s.parse::<u128>().ok()), f.get(5).and_then(|s| s.parse::<u128>().ok()))
            {
                ends.push(s * 1_000_000 + us);
            }
        }
    }
    ends.sort_unstable();
    let gap = ends.windows(2).map(|w| w[1] - w[0]).max().unwrap_or(0);
    Duration::from_micros(u64::try_from(gap).unwrap_or(u64::MAX))
}

fn history_rows(db: &str) -> i64 {
    let pg = &dbs().pg;
    let mut direct =
        pg.config(pg.primary_port, &pg.superuser, "").dbname(db).connect(postgres::NoTls).expect("direct connection");
    direct.query_one("SELECT count(*) FROM pgbench_history", &[]).expect("history").get(0)
}

#[test]
fn pgbench_tpcb_through_two_hand_overs_fails_and_loses_nothing() {
    pgbench_through_two_hand_overs(false);
}

/// The same over TLS: every client's TLS session moves twice, the second time from a process
/// that had itself taken it over (its records protected by the router, not rustls).
#[test]
fn pgbench_tpcb_over_tls_through_two_hand_overs_fails_and_loses_nothing() {
    pgbench_through_two_hand_overs(true);
}

fn pgbench_through_two_hand_overs(tls: bool) {
    let db = Database::create();
    let pgbench = |port: u16, args: &[&str], database: &str, dir: &Path| {
        let mut cmd = Command::new("pgbench");
        cmd.args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "app"])
            .args(args)
            .arg(database)
            .env("PGPASSWORD", "app")
            .env("PGSSLMODE", if tls && port != dbs().pg.primary_port { "require" } else { "disable" })
            .current_dir(dir);
        cmd
    };
    let logs = tempfile::tempdir().expect("log dir");
    let init =
        pgbench(dbs().pg.primary_port, &["-i", "-q", "-s", "1"], &db.0, logs.path()).output().expect("pgbench -i");
    assert!(init.status.success(), "pgbench -i: {}", String::from_utf8_lossy(&init.stderr));
    let pools = pg_pool("pgb", dbs().pg.primary_port, "transaction", 8)
        .replace(&format!("database = \"{}\"", dbs().pg.database), &format!("database = \"{}\"", db.0));
    let mut config = pg_config(&[0, 1], &pools, "pgb");
    if tls {
        config = with_listener_keys(&config, &tls_keys("require", "server", ""));
    }
    let up = Upgrade::new(&config);
    let mut old = up.start("old", false);

    let bench =
        pgbench(up.port, &["-n", "-M", "prepared", "-c", "16", "-j", "2", "-T", "25", "-l"], "pgb", logs.path())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start pgbench");
    eventually(Duration::from_secs(60), "pgbench under way", || history_rows(&db.0) >= 300);
    let (mut first, took1) = up.hand_over(&mut old, "new1");
    let at = history_rows(&db.0);
    eventually(Duration::from_secs(60), "pgbench on the new process", || history_rows(&db.0) >= at + 300);
    let (_second, took2) = up.hand_over(&mut first, "new2");
    let out = bench.wait_with_output().expect("pgbench output");
    let report = String::from_utf8_lossy(&out.stdout);
    let errors = String::from_utf8_lossy(&out.stderr);
    let processed = number(&report, "number of transactions actually processed");
    let rows = history_rows(&db.0);
    let stall = longest_stall(logs.path());
    eprintln!(
        "[upgrade] pgbench TPC-B -M prepared, 16 clients{}, two hand-overs ({took1:?}, {took2:?}): {processed} \
         transactions, pgbench_history {rows}, longest stall {stall:?}",
        if tls { " over TLS" } else { "" }
    );
    assert!(out.status.success(), "pgbench failed:\n{report}\n{errors}");
    assert!(!errors.contains("error") && !errors.contains("aborted"), "a client saw an error:\n{errors}");
    assert_eq!(rows, processed as i64, "every transaction pgbench counted is in pgbench_history, and no other");
}

fn sysbench(port: u16, db: &str, args: &[&str]) -> std::process::Child {
    Command::new("sysbench")
        .args(args)
        .args(["--mysql-host=127.0.0.1", "--mysql-user=app", "--mysql-password=app", "--mysql-ssl=off"])
        .args(["--db-driver=mysql", "--tables=2", "--table-size=5000"])
        .arg(format!("--mysql-port={port}"))
        .arg(format!("--mysql-db={db}"))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run sysbench")
}

/// The figure after `label` in a sysbench summary.
fn figure(summary: &str, label: &str) -> u64 {
    summary
        .lines()
        .find_map(|l| l.trim().strip_prefix(label))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {label} in:\n{summary}"))
}

#[test]
fn sysbench_through_two_hand_overs_fails_nothing() {
    let db = unique_name("sbu");
    dbs().my.superuser_client(dbs().my.primary_port).query_drop(format!("CREATE DATABASE {db}")).expect("create db");
    let config = my_config(&[0, 1], &my_pool("main", "transaction", 8), "main").replace(
        "mysql_default_pool = \"main\"\n",
        "mysql_default_pool = \"main\"\nunknown_database = \"default_pool\"\n",
    );
    let up = Upgrade::new(&config);
    let mut old = up.start("old", false);
    let prepare = sysbench(up.port, &db, &["oltp_read_write", "prepare"]).wait_with_output().expect("prepare");
    assert!(prepare.status.success(), "sysbench prepare: {}", String::from_utf8_lossy(&prepare.stderr));
    let run = sysbench(up.port, &db, &["oltp_read_write", "run", "--threads=16", "--time=20", "--db-ps-mode=auto"]);
    thread::sleep(Duration::from_secs(5));
    let (mut first, took1) = up.hand_over(&mut old, "new1");
    thread::sleep(Duration::from_secs(5));
    let (_second, took2) = up.hand_over(&mut first, "new2");
    let out = run.wait_with_output().expect("sysbench output");
    let summary = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    eprintln!(
        "[upgrade] sysbench oltp_read_write, 16 threads, prepared, two hand-overs ({took1:?}, {took2:?}): {} \
         transactions, {} ignored errors (InnoDB deadlocks), {} reconnects",
        figure(&summary, "transactions:"),
        figure(&summary, "ignored errors:"),
        figure(&summary, "reconnects:"),
    );
    assert!(out.status.success(), "sysbench stops at the first error that is not a deadlock:\n{summary}");
    assert_eq!(figure(&summary, "reconnects:"), 0, "{summary}");
    assert!(figure(&summary, "transactions:") > 0, "{summary}");
}
