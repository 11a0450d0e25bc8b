//! The router under test, run in-process on ephemeral ports, plus config snippets pointing at
//! the harness's real servers.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use querypilot::app::{self, Running};
use querypilot::config::Config;

use crate::support::{dbs, PgEnv};

/// A running router; drained and joined on drop.
pub struct Router {
    running: Option<Running>,
    /// Bound listener addresses in config order.
    pub listen: Vec<SocketAddr>,
    config_path: PathBuf,
    _dir: tempfile::TempDir,
}

impl Router {
    /// Starts a router from TOML text (listener ports should be 0). The text is also written
    /// to a file so reloads can re-read it.
    pub fn start(toml: &str) -> Router {
        let dir = tempfile::tempdir().expect("tempdir");
        let config_path = dir.path().join("querypilot.toml");
        std::fs::write(&config_path, toml).expect("write config");
        let config = Config::parse(toml, "test.toml").unwrap_or_else(|e| panic!("test config invalid:\n{e}"));
        let running = app::start(config, Some(config_path.clone()), Default::default()).expect("router starts");
        let listen = running.listen.clone();
        Router { running: Some(running), listen, config_path, _dir: dir }
    }

    /// The first listener's port.
    pub fn port(&self) -> u16 {
        self.listen[0].port()
    }

    /// The control plane of this router.
    pub fn control(&self) -> &querypilot::control::ControlHandle {
        &self.running.as_ref().expect("running").control
    }

    /// Replaces the config file and reloads it on every core.
    pub fn reload_with(&self, toml: &str) -> Result<querypilot::id::RulesVersion, querypilot::control::ControlError> {
        std::fs::write(&self.config_path, toml).expect("write config");
        self.control().reload()
    }

    /// A PostgreSQL client connected through the router to `database` as the pool user.
    pub fn pg(&self, database: &str) -> postgres::Client {
        let mut c = postgres::Config::new();
        c.host("127.0.0.1").port(self.port()).user("app").password("app").dbname(database);
        c.connect_timeout(Duration::from_secs(20));
        c.connect(postgres::NoTls).unwrap_or_else(|e| panic!("connect through router: {e:?}"))
    }
}

/// How long a router under test may take to stop: longer than any test's drain. A core that
/// never comes back to its loop (a task that spins) would otherwise hang the whole test run
/// until CI's own timeout, with no word of which test.
const STOP_WITHIN: Duration = Duration::from_secs(120);

impl Drop for Router {
    fn drop(&mut self) {
        if let Some(r) = self.running.take() {
            r.control.drain();
            let (done, stopped) = std::sync::mpsc::channel();
            std::thread::spawn(move || {
                r.wait();
                let _ = done.send(());
            });
            if stopped.recv_timeout(STOP_WITHIN).is_err() {
                eprintln!(
                    "the router did not stop within {STOP_WITHIN:?}: a core is stuck (test {:?})",
                    std::thread::current().name()
                );
                std::process::abort();
            }
        }
    }
}

/// `[pools.NAME]` for PostgreSQL server `port` of the shared harness, credentials app/app.
pub fn pg_pool(name: &str, port: u16, mode: &str, max: u32) -> String {
    let pg: &PgEnv = &dbs().pg;
    format!(
        "[pools.{name}]\nmode = \"{mode}\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
         max_connections = {max}\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n",
        u = pg.user,
        p = pg.password,
        d = pg.database,
    )
}

/// A complete config: one PostgreSQL listener on an ephemeral port, `cores` cores, the
/// given pools, default pool `default`.
pub fn pg_config(cores: &[usize], pools: &str, default: &str) -> String {
    let cores: Vec<String> = cores.iter().map(|c| c.to_string()).collect();
    format!(
        "[general]\ncores = [{}]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n{pools}\n[routing]\ndefault_pool = \"{default}\"\n",
        cores.join(", ")
    )
}
