//! Real-database harness shared by every integration test (tests/it/*).
//!
//! What it does: starts, once per test binary, a PostgreSQL primary + streaming hot standby
//! and a MariaDB primary + replica on 127.0.0.1 through `tests/support/dbs.sh` (the project's
//! single implementation of server lifecycle), and hands out typed connection helpers.
//!
//! What it owns: the shared environment returned by [`dbs()`] (base dir
//! `/tmp/qp-<pid>-<suffix>`, or under `$QP_DBS_DIR`) and every [`Dbs::private`] environment.
//! Teardown is guaranteed three ways: a detached watchdog started by `dbs.sh up --owner-pid`
//! tears down once this process is gone (even after SIGKILL), an `atexit` hook stops the
//! shared servers synchronously on normal exit (so the next run starts from a clean
//! machine), and a private environment stops in `Drop`.
//!
//! Rules for tests (the environment is shared by tests running in parallel threads):
//! - Isolate by name: every test creates its own tables, e.g. with [`unique_name`]; never
//!   rely on a table another test created, never drop or truncate shared objects.
//! - Never disturb the shared servers. Fault injection (stop/start, pause/resume
//!   replication) is only allowed on an environment of your own from [`Dbs::private`]; on
//!   the shared one those methods panic, because concurrent tests would see the fault.
//! - Replication is asynchronous: after a write on a primary, call
//!   `wait_replica_caught_up` (or poll with [`eventually`]) before reading the replica.
//! - MySQL clients must connect over TCP with `prefer_socket(false)` (see
//!   [`MyEnv::opts`]): the `mysql` crate otherwise asks the server for `@@socket` and
//!   silently reconnects over the unix socket, which would bypass a proxy under test.
//!
//! `QP_DBS_ENV=BASE_DIR` reuses servers started by hand with `dbs.sh up BASE_DIR` (they are
//! neither stopped nor faulted by the tests), which makes an edit-test loop faster.
//!
//! Must not depend on: anything in `querypilot` (this harness tests it from the outside).

// Each test module uses a subset of this API; the rest is not dead, just unused there.
#![allow(dead_code)]

mod buenavista;
mod my;
mod pg;
mod script;

use std::net::{Ipv4Addr, TcpListener};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use buenavista::Buenavista;
pub use my::MyEnv;
pub use pg::PgEnv;

/// One of the four servers of an environment, for fault injection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Server {
    /// PostgreSQL primary (read-write).
    PgPrimary,
    /// PostgreSQL hot standby (read-only, streaming from the primary).
    PgReplica,
    /// MariaDB primary (read-write).
    MyPrimary,
    /// MariaDB replica (`read_only=1`, GTID replication from the primary).
    MyReplica,
}

impl Server {
    /// The name `dbs.sh stop|start` expects.
    fn script_name(self) -> &'static str {
        match self {
            Server::PgPrimary => "pg-primary",
            Server::PgReplica => "pg-replica",
            Server::MyPrimary => "my-primary",
            Server::MyReplica => "my-replica",
        }
    }
}

/// A database family, for replication-wide operations.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// PostgreSQL (pause = `pg_wal_replay_pause()` on the standby).
    Pg,
    /// MariaDB (pause = `STOP SLAVE SQL_THREAD` on the replica).
    Mariadb,
}

/// A running environment: both server pairs plus what is needed to fault or stop them.
#[derive(Debug)]
pub struct Dbs {
    /// PostgreSQL primary + hot standby.
    pub pg: PgEnv,
    /// MariaDB primary + replica.
    pub my: MyEnv,
    /// Directory holding data, logs (`pg/*.log`, `mariadb/*.log`) and `env.sh`.
    pub base: PathBuf,
    /// Who may fault and who tears the servers down.
    role: Role,
    /// Port of the second PostgreSQL hot standby, once a test asked for it.
    second_standby: OnceLock<u16>,
    /// The TLS-only PostgreSQL server, once a test asked for it.
    pg_tls: OnceLock<PgTls>,
    /// The TLS-only MariaDB server, once a test asked for it.
    my_tls: OnceLock<MyTls>,
}

/// A PostgreSQL server that accepts TLS connections only (`dbs.sh add-pg-tls`): `ssl = on`,
/// `hostssl` rules and `hostnossl ... reject`; roles app/app (scram-sha-256) and app_cert
/// (certificate login), database app.
#[derive(Debug)]
pub struct PgTls {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// `ca.crt` (the server certificate's issuer), `other-ca.crt` (an unrelated CA),
    /// `server.crt` (for localhost and 127.0.0.1), `client.crt`/`client.key` (CN app_cert).
    pub certs: PathBuf,
}

/// A MariaDB server that accepts TLS connections only over TCP (`dbs.sh add-my-tls`):
/// `require_secure_transport = ON`, the same certificates as [`PgTls`]; users root (no
/// password), app/app and app_x509/app (`REQUIRE X509`), database app.
#[derive(Debug)]
pub struct MyTls {
    /// Its port on 127.0.0.1.
    pub port: u16,
    /// The certificates, as [`PgTls::certs`].
    pub certs: PathBuf,
}

/// Ownership of an environment's servers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Role {
    /// The per-binary environment: shared by concurrent tests, stopped at process exit.
    Shared,
    /// Started by `QP_DBS_ENV`'s owner: never stopped or faulted by tests.
    External,
    /// One test's own environment: may be faulted, stopped on drop.
    Private,
}

static SHARED: OnceLock<Result<Dbs, String>> = OnceLock::new();
static NAMES: AtomicU64 = AtomicU64::new(0);

/// The environment shared by all tests of this binary, started on first use.
///
/// Panics (in every caller, without retrying) if the servers could not be started, with
/// the script's progress log in the message.
pub fn dbs() -> &'static Dbs {
    let shared = SHARED.get_or_init(|| {
        let started = match std::env::var("QP_DBS_ENV") {
            Ok(base) if !base.is_empty() => script::attach(PathBuf::from(base)),
            _ => script::up(&new_base_dir()).map(|(base, vars)| (base, vars, Role::Shared)),
        };
        let dbs = started.and_then(|(base, vars, role)| Dbs::from_vars(base, &vars, role))?;
        if dbs.role == Role::Shared {
            register_exit_teardown();
        }
        Ok(dbs)
    });
    match shared {
        Ok(dbs) => dbs,
        Err(e) => panic!("test databases unavailable: {e}"),
    }
}

impl Dbs {
    /// Starts an environment owned by the calling test (for fault injection); its servers
    /// stop when the value is dropped. Costs about 1-5 s; prefer [`dbs()`] when no fault is
    /// injected.
    pub fn private() -> Dbs {
        let (base, vars) = script::up(&new_base_dir()).unwrap_or_else(|e| panic!("private databases: {e}"));
        Dbs::from_vars(base, &vars, Role::Private).unwrap_or_else(|e| panic!("private databases: {e}"))
    }

    fn from_vars(base: PathBuf, vars: &script::Vars, role: Role) -> Result<Dbs, String> {
        Ok(Dbs {
            pg: PgEnv::from_vars(vars)?,
            my: MyEnv::from_vars(vars)?,
            base,
            role,
            second_standby: OnceLock::new(),
            pg_tls: OnceLock::new(),
            my_tls: OnceLock::new(),
        })
    }

    /// Port of a second PostgreSQL hot standby of this environment's primary, started on the
    /// first call (a base backup, 1-3 s) so that only the tests that balance reads over two
    /// replicas pay for it; `dbs.sh down` stops it with the rest. Private environments only,
    /// since the tests that use it pause replay on one of the standbys.
    pub fn second_pg_standby(&self) -> u16 {
        *self.second_standby.get_or_init(|| {
            let port = free_port();
            self.fault(&["add-pg-standby", &port.to_string()]);
            port
        })
    }

    /// The TLS-only PostgreSQL server of this environment, started on the first call (initdb
    /// and certificates, 1-3 s) so that only the TLS tests pay for it; `dbs.sh down` stops it
    /// with the rest. Starting it disturbs no other server, so the shared environment has one.
    pub fn pg_tls(&self) -> &PgTls {
        self.pg_tls.get_or_init(|| {
            let port = free_port();
            if let Err(e) = script::run("add-pg-tls", &self.base, &[&port.to_string()]) {
                panic!("dbs.sh add-pg-tls {}: {e}", self.base.display());
            }
            let pg = self.base.join("pg");
            let written = std::fs::read_to_string(pg.join("tls.port")).expect("pg/tls.port");
            PgTls { port: written.trim().parse().expect("a port in pg/tls.port"), certs: self.base.join("tls-certs") }
        })
    }

    /// The TLS-only MariaDB server of this environment, started on the first call
    /// (install-db and certificates, 2-4 s) so that only the MySQL TLS tests pay for it, as
    /// [`Dbs::pg_tls`].
    pub fn my_tls(&self) -> &MyTls {
        self.my_tls.get_or_init(|| {
            let port = free_port();
            if let Err(e) = script::run("add-my-tls", &self.base, &[&port.to_string()]) {
                panic!("dbs.sh add-my-tls {}: {e}", self.base.display());
            }
            let written = std::fs::read_to_string(self.base.join("mariadb/tls.port")).expect("mariadb/tls.port");
            MyTls {
                port: written.trim().parse().expect("a port in mariadb/tls.port"),
                certs: self.base.join("tls-certs"),
            }
        })
    }

    /// Stops one server (clean shutdown); returns once its process is gone.
    pub fn stop(&self, s: Server) {
        self.fault(&["stop", s.script_name()]);
    }

    /// Kills one server with SIGKILL (a crash, no shutdown); returns once its process (and a
    /// PostgreSQL server's backends) are gone. [`Dbs::start`] restarts it with crash recovery.
    pub fn kill(&self, s: Server) {
        self.fault(&["kill", s.script_name()]);
    }

    /// Starts a server stopped by [`Dbs::stop`] or [`Dbs::kill`]; returns once it accepts connections.
    /// A restarted replica reconnects and catches up by itself (PG keeps WAL in a slot).
    pub fn start(&self, s: Server) {
        self.fault(&["start", s.script_name()]);
    }

    /// Stops applying replicated changes on the replica of `k` (changes are still
    /// received); takes effect when this returns.
    pub fn pause_replication(&self, k: Kind) {
        self.fault(&["pause-replication", kind_name(k)]);
    }

    /// Undoes [`Dbs::pause_replication`]; the replica then applies the backlog.
    pub fn resume_replication(&self, k: Kind) {
        self.fault(&["resume-replication", kind_name(k)]);
    }

    /// Promotes the replica of `k` to primary (#40), the operator's step of a failover or
    /// switchover: PostgreSQL `pg_ctl promote -w`; MariaDB, once the relay log is applied,
    /// `STOP SLAVE; RESET SLAVE ALL; SET GLOBAL read_only = 0`. Returns once it accepts writes.
    pub fn promote(&self, k: Kind) {
        self.fault(&["promote", kind_name(k)]);
    }

    fn fault(&self, args: &[&str]) {
        assert!(
            self.role == Role::Private,
            "fault injection ({}) on the shared test databases would break concurrently running \
             tests; start your own with support::Dbs::private()",
            args.join(" ")
        );
        if let Err(e) = script::run(args[0], &self.base, &args[1..]) {
            panic!("dbs.sh {} failed: {e}", args.join(" "));
        }
    }
}

impl Drop for Dbs {
    fn drop(&mut self) {
        if self.role == Role::Private {
            script::down(&self.base);
        }
    }
}

fn kind_name(k: Kind) -> &'static str {
    match k {
        Kind::Pg => "pg",
        Kind::Mariadb => "mariadb",
    }
}

/// Stops the shared servers when the test binary exits normally (libtest calls `exit`),
/// so they are gone before `cargo test` returns. Statics are never dropped, hence `atexit`;
/// the watchdog covers the exits that skip it (signals).
fn register_exit_teardown() {
    extern "C" fn teardown() {
        if let Some(Ok(dbs)) = SHARED.get() {
            script::down(&dbs.base);
        }
    }
    // SAFETY: `teardown` is a plain `extern "C" fn` with no arguments that lives for the
    // whole program; registering it has no other precondition.
    let rc = unsafe { libc::atexit(teardown) };
    if rc != 0 {
        eprintln!("[support] atexit failed; the dbs.sh watchdog will stop the servers");
    }
}

/// A fresh, short base directory (unix socket paths must stay under 108 bytes).
fn new_base_dir() -> PathBuf {
    static SEQ: AtomicU64 = AtomicU64::new(0);
    let parent = std::env::var("QP_DBS_DIR").unwrap_or_else(|_| "/tmp".to_owned());
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let seq = SEQ.fetch_add(1, Ordering::Relaxed);
    PathBuf::from(format!("{parent}/qp-{}-{seq}-{:x}", std::process::id(), nanos >> 8))
}

/// A loopback TCP port that was free a moment ago, for a router or fake backend under test
/// that is started later. Taken from 10000..19999: below the kernel's ephemeral range, from
/// which every outgoing connection of a running suite takes its local port (a port picked
/// there could be some client socket's by the time the router binds it), and below `dbs.sh`'s
/// 20000..32767. Each process walks the range from its own pid-derived start, one port per
/// call, skipping ports something holds.
pub fn free_port() -> u16 {
    const LOW: u32 = 10_000;
    const SPAN: u32 = 10_000;
    let start = (std::process::id() % 500) * 20;
    for _ in 0..SPAN {
        let n = PORTS.fetch_add(1, Ordering::Relaxed);
        let port = u16::try_from(LOW + (start + n) % SPAN).expect("below 20000");
        if TcpListener::bind((Ipv4Addr::LOCALHOST, port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in 10000..19999");
}

/// How many ports this process has handed out (see [`free_port`]).
static PORTS: AtomicU32 = AtomicU32::new(0);

/// A table/database name unique across concurrent tests and across runs against the same
/// servers (`QP_DBS_ENV`): `<prefix>_<pid>_<n>`. Keep `prefix` under 40 bytes (identifiers
/// are limited to 63 bytes in PostgreSQL and 64 in MariaDB).
pub fn unique_name(prefix: &str) -> String {
    let n = NAMES.fetch_add(1, Ordering::Relaxed);
    format!("{prefix}_{}_{n}", std::process::id())
}

/// Polls `check` every 20 ms until it returns true; panics with `what` after `timeout`.
/// Use this instead of fixed sleeps whenever a test waits for something asynchronous.
pub fn eventually(timeout: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    loop {
        if check() {
            return;
        }
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}
