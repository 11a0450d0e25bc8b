//! PostgreSQL side of the harness: addresses, credentials and client helpers for the
//! primary and its streaming hot standby.
//!
//! Roles created by `dbs.sh`: `app`/`app` (SCRAM, owns database `app`, member of
//! `pg_monitor`), `app_md5`/`app_md5` (md5), `app_plain`/`app_plain` (cleartext password)
//! and the superuser `postgres` (trust, no password).

use std::time::{Duration, Instant};

use postgres::{Client, Config, NoTls};

use super::script::{get, get_port, Vars};

/// Where and how to reach the PostgreSQL pair.
#[derive(Clone, Debug)]
pub struct PgEnv {
    /// Always `127.0.0.1`.
    pub host: String,
    /// Primary (read-write) port.
    pub primary_port: u16,
    /// Hot standby (read-only) port.
    pub replica_port: u16,
    /// Application role (SCRAM-SHA-256).
    pub user: String,
    /// Password of `user`.
    pub password: String,
    /// Database owned by `user`.
    pub database: String,
    /// Superuser, trusted without a password.
    pub superuser: String,
}

impl PgEnv {
    pub(super) fn from_vars(vars: &Vars) -> Result<PgEnv, String> {
        Ok(PgEnv {
            host: get(vars, "PG_HOST")?.to_owned(),
            primary_port: get_port(vars, "PG_PRIMARY_PORT")?,
            replica_port: get_port(vars, "PG_REPLICA_PORT")?,
            user: get(vars, "PG_USER")?.to_owned(),
            password: get(vars, "PG_PASSWORD")?.to_owned(),
            database: get(vars, "PG_DATABASE")?.to_owned(),
            superuser: get(vars, "PG_SUPERUSER")?.to_owned(),
        })
    }

    /// A connection configuration for `user`/`password` on `port`, database `self.database`.
    /// Use it to reach a router under test too (just pass the router's port).
    pub fn config(&self, port: u16, user: &str, password: &str) -> Config {
        let mut c = Config::new();
        c.host(&self.host)
            .port(port)
            .user(user)
            .password(password)
            .dbname(&self.database)
            .connect_timeout(Duration::from_secs(10));
        c
    }

    /// Connects `user`/`password` to `port`; panics with the server's error.
    pub fn connect(&self, port: u16, user: &str, password: &str) -> Client {
        self.config(port, user, password)
            .connect(NoTls)
            .unwrap_or_else(|e| panic!("connect to PostgreSQL {}:{port} as {user}: {e}", self.host))
    }

    /// The application user on the primary.
    pub fn primary_client(&self) -> Client {
        self.connect(self.primary_port, &self.user, &self.password)
    }

    /// The application user on the hot standby.
    pub fn replica_client(&self) -> Client {
        self.connect(self.replica_port, &self.user, &self.password)
    }

    /// The superuser on `port` (primary or replica), database `self.database`.
    pub fn superuser_client(&self, port: u16) -> Client {
        self.connect(port, &self.superuser, "")
    }

    /// Blocks until the standby has replayed everything the primary had written when this
    /// was called (LSN comparison: the `*_lag` columns are not reliable). Panics after
    /// `timeout`, e.g. while replay is paused. Uses the primary's WAL *flush* position: it
    /// covers every commit made with `synchronous_commit = on` (the servers' setting), and
    /// unlike the insert position it never points past a page header that the standby's
    /// replay position would only pass with the next record.
    pub fn wait_replica_caught_up(&self, timeout: Duration) {
        let lsn: String = self
            .superuser_client(self.primary_port)
            .query_one("SELECT pg_current_wal_flush_lsn()::text", &[])
            .map(|row| row.get(0))
            .unwrap_or_else(|e| panic!("pg_current_wal_flush_lsn on the primary: {e}"));
        let mut replica = self.superuser_client(self.replica_port);
        let deadline = Instant::now() + timeout;
        loop {
            let replayed: Option<bool> = replica
                .query_one("SELECT pg_last_wal_replay_lsn() >= $1::text::pg_lsn", &[&lsn])
                .map(|row| row.get(0))
                .unwrap_or_else(|e| panic!("pg_last_wal_replay_lsn on the standby: {e}"));
            if replayed == Some(true) {
                return;
            }
            assert!(Instant::now() < deadline, "PG standby did not replay {lsn} within {timeout:?}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}
