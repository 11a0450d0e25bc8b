//! MariaDB side of the harness: addresses, credentials and client helpers for the primary
//! and its GTID replica.
//!
//! Users created by `dbs.sh` (on the primary; they replicate): `app`/`app`
//! (`mysql_native_password`, all privileges except `READ_ONLY ADMIN`, so its writes on the
//! replica fail with 1290), `app_ed`/`app_ed` (ed25519, when the plugin exists), `repl`
//! and `root` with an empty password (may write on the replica).

use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::{Conn, OptsBuilder};

use super::script::{get, get_port, Vars};

/// Where and how to reach the MariaDB pair.
#[derive(Clone, Debug)]
pub struct MyEnv {
    /// Always `127.0.0.1`.
    pub host: String,
    /// Primary (read-write) port.
    pub primary_port: u16,
    /// Replica (`read_only=1`) port.
    pub replica_port: u16,
    /// Application user (`mysql_native_password`).
    pub user: String,
    /// Password of `user`.
    pub password: String,
    /// Default database of `user`.
    pub database: String,
    /// `root`, empty password.
    pub superuser: String,
}

impl MyEnv {
    pub(super) fn from_vars(vars: &Vars) -> Result<MyEnv, String> {
        Ok(MyEnv {
            host: get(vars, "MY_HOST")?.to_owned(),
            primary_port: get_port(vars, "MY_PRIMARY_PORT")?,
            replica_port: get_port(vars, "MY_REPLICA_PORT")?,
            user: get(vars, "MY_USER")?.to_owned(),
            password: get(vars, "MY_PASSWORD")?.to_owned(),
            database: get(vars, "MY_DATABASE")?.to_owned(),
            superuser: get(vars, "MY_ROOT_USER")?.to_owned(),
        })
    }

    /// Options for `user`/`password` on `port` over TCP, database `self.database`.
    /// `prefer_socket(false)` matters: by default the `mysql` crate reads `@@socket` after
    /// connecting to 127.0.0.1 and reconnects through that unix socket, which would
    /// silently bypass a router under test. Use these options for router ports too.
    pub fn opts(&self, port: u16, user: &str, password: &str) -> OptsBuilder {
        OptsBuilder::new()
            .ip_or_hostname(Some(self.host.as_str()))
            .tcp_port(port)
            .user(Some(user))
            .pass(Some(password))
            .db_name(Some(self.database.as_str()))
            .prefer_socket(false)
            .tcp_connect_timeout(Some(Duration::from_secs(10)))
    }

    /// Connects `user`/`password` to `port`; panics with the server's error.
    pub fn connect(&self, port: u16, user: &str, password: &str) -> Conn {
        Conn::new(self.opts(port, user, password))
            .unwrap_or_else(|e| panic!("connect to MariaDB {}:{port} as {user}: {e}", self.host))
    }

    /// The application user on the primary.
    pub fn primary_client(&self) -> Conn {
        self.connect(self.primary_port, &self.user, &self.password)
    }

    /// The application user on the replica.
    pub fn replica_client(&self) -> Conn {
        self.connect(self.replica_port, &self.user, &self.password)
    }

    /// `root` on `port` (primary or replica).
    pub fn superuser_client(&self, port: u16) -> Conn {
        self.connect(port, &self.superuser, "")
    }

    /// Blocks until the replica has applied every transaction the primary had binlogged
    /// when this was called (`MASTER_GTID_WAIT`, the server's own read-your-writes
    /// primitive). Panics after `timeout`, e.g. while the SQL thread is stopped.
    pub fn wait_replica_caught_up(&self, timeout: Duration) {
        let gtid: String = self
            .superuser_client(self.primary_port)
            .query_first("SELECT @@gtid_binlog_pos")
            .unwrap_or_else(|e| panic!("@@gtid_binlog_pos on the primary: {e}"))
            .unwrap_or_default();
        let result: Option<i64> = self
            .superuser_client(self.replica_port)
            .exec_first("SELECT MASTER_GTID_WAIT(?, ?)", (&gtid, timeout.as_secs_f64()))
            .unwrap_or_else(|e| panic!("MASTER_GTID_WAIT on the replica: {e}"));
        assert_eq!(result, Some(0), "MariaDB replica did not reach GTID {gtid} within {timeout:?}");
    }
}
