//! DuckDB behind buenavista (a third-party PostgreSQL-wire server) as the analytics engine of
//! the HTAP tests: installed once per machine into a pinned venv by `buenavista.sh`, one server
//! per test on a free port over a DuckDB file the test seeds. buenavista logs every statement
//! it runs (`Input SQL: ...`), so a test proves from the engine's side that a statement ran there.
//!
//! Must not depend on: anything in `querypilot`.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use super::free_port;

/// Marks the test's own queries in the server's log.
const DIRECT: &str = "/* direct, not through the router */";

const SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/support/buenavista.sh");

/// The venv, installed (or found up to date) once per test binary.
fn venv() -> &'static Path {
    static VENV: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let venv = VENV.get_or_init(|| {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("buenavista-venv");
        let out = Command::new("bash").arg(SCRIPT).arg("install").arg(&dir).output().map_err(|e| e.to_string())?;
        if out.status.success() {
            Ok(dir)
        } else {
            Err(String::from_utf8_lossy(&out.stderr).into_owned())
        }
    });
    match venv {
        Ok(dir) => dir,
        Err(e) => panic!("buenavista venv unavailable: {e}"),
    }
}

/// A running buenavista server over its own DuckDB file; killed on drop.
pub struct Buenavista {
    /// TCP port on 127.0.0.1.
    pub port: u16,
    /// The DuckDB file it serves.
    pub file: PathBuf,
    log: PathBuf,
    child: Option<Child>,
    _dir: tempfile::TempDir,
}

impl Buenavista {
    /// Creates a DuckDB file, runs `seed` on it, and serves it.
    pub fn start(seed: &str) -> Buenavista {
        let venv = venv();
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("analytics.duckdb");
        let out = Command::new("bash").arg(SCRIPT).arg("seed").arg(venv).arg(&file).arg(seed).output().expect("seed");
        assert!(out.status.success(), "seeding DuckDB: {}", String::from_utf8_lossy(&out.stderr));
        let log = dir.path().join("buenavista.log");
        let mut bv = Buenavista { port: 0, file, log, child: None, _dir: dir };
        bv.spawn();
        bv
    }

    fn spawn(&mut self) {
        if self.port == 0 {
            self.port = free_port();
        }
        let log = std::fs::OpenOptions::new().create(true).append(true).open(&self.log).expect("log file");
        let child = Command::new("bash")
            .arg(SCRIPT)
            .arg("serve")
            .arg(venv())
            .arg(&self.file)
            .arg(self.port.to_string())
            // DuckDB renders TIMESTAMPTZ in the process's zone: one zone on every machine.
            .env("TZ", "UTC")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("start buenavista");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "buenavista did not listen on {}: {}", self.port, self.log_text());
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Stops the server (SIGKILL: an engine that dies, not one that says goodbye).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port and file.
    pub fn restart(&mut self) {
        self.stop();
        self.spawn();
    }

    /// Everything the server logged so far.
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many times the server ran a statement whose text contains `needle`, other than the
    /// test's own direct queries ([`Self::query`]).
    pub fn ran(&self, needle: &str) -> usize {
        let ran = |l: &&str| l.contains("Input SQL: ") && l.contains(needle) && !l.contains(DIRECT);
        self.log_text().lines().filter(ran).count()
    }

    /// `sql` run on the engine directly (psql to buenavista, bypassing the router): each row's
    /// values joined by `|`.
    pub fn query(&self, sql: &str) -> Vec<String> {
        let out = Command::new("psql")
            .args(["-X", "-A", "-t", "-h", "127.0.0.1", "-U", "direct", "-d", "direct", "-v", "ON_ERROR_STOP=1"])
            .arg("-p")
            .arg(self.port.to_string())
            .args(["-c", &format!("{sql} {DIRECT}")])
            .output()
            .expect("run psql");
        assert!(out.status.success(), "psql {sql}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
    }
}

impl Drop for Buenavista {
    fn drop(&mut self) {
        self.stop();
    }
}
