//! Running the real client programs of `tests/connectors` (PyMySQL, psycopg, asyncpg scripts and
//! Connector/J single-file programs) and reading what they print, one helper for every test that
//! drives them (the JDBC runner was copied between the HTAP tests before).

use std::io::{BufRead, BufReader, Lines, Write};
use std::path::Path;
use std::process::{Child, ChildStdout, Command, Stdio};

/// Where the client programs live.
const SCRIPTS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors");
/// MariaDB Connector/J, installed by `.ci/deps.sh`.
const JDBC_JAR: &str = "/usr/share/java/mariadb-java-client.jar";

/// Runs `cmd` to completion; its stdout lines. Panics with both streams when it fails.
pub(crate) fn run(cmd: &mut Command, what: &str) -> Vec<String> {
    let out = cmd.output().unwrap_or_else(|e| panic!("run {what}: {e} (installed by .ci/deps.sh)"));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{what} failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

/// `tests/connectors/SCRIPT ARGS...` under the system Python (where PyMySQL and the PostgreSQL
/// drivers are installed).
pub(crate) fn python<S: AsRef<std::ffi::OsStr>>(script: &str, args: &[S]) -> Vec<String> {
    run(&mut python_command(script, args), script)
}

/// The command [`python`] runs.
pub(crate) fn python_command<S: AsRef<std::ffi::OsStr>>(script: &str, args: &[S]) -> Command {
    let mut cmd = Command::new("/usr/bin/python3");
    cmd.arg(Path::new(SCRIPTS).join(script)).args(args);
    cmd
}

/// `tests/connectors/PROGRAM.java URL USER PASSWORD ARGS...` as a single-file Java program with
/// Connector/J on the class path.
pub(crate) fn jdbc<S: AsRef<std::ffi::OsStr>>(
    program: &str,
    url: &str,
    user: &str,
    password: &str,
    args: &[S],
) -> Vec<String> {
    run(&mut jdbc_command(program, url, user, password, args), program)
}

/// The command [`jdbc`] runs.
pub(crate) fn jdbc_command<S: AsRef<std::ffi::OsStr>>(
    program: &str,
    url: &str,
    user: &str,
    password: &str,
    args: &[S],
) -> Command {
    let mut cmd = Command::new("java");
    cmd.args(["-cp", JDBC_JAR]).arg(Path::new(SCRIPTS).join(program)).args([url, user, password]).args(args);
    cmd
}

/// A client program that stops half way: once set up it prints `ready` and waits for a line on
/// its stdin, so that a test can change the servers between its stages (stop a replica with
/// the program's connections already open and their earlier writes applied).
pub(crate) struct Staged {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
    what: String,
}

impl Staged {
    /// Starts `cmd` and waits until it is ready (its stderr passes through to the test's).
    pub(crate) fn start(cmd: &mut Command, what: &str) -> Staged {
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("run {what}: {e} (installed by .ci/deps.sh)"));
        let stdout = child.stdout.take().unwrap_or_else(|| panic!("{what}: no stdout"));
        let mut lines = BufReader::new(stdout).lines();
        let first = lines.next().map(|l| l.unwrap_or_else(|e| panic!("{what}: {e}")));
        assert_eq!(first.as_deref(), Some("ready"), "{what} did not get ready (exited: {:?})", child.try_wait());
        Staged { child, lines, what: what.to_owned() }
    }

    /// Lets the program go on and runs it to completion; the lines it printed after `ready`.
    pub(crate) fn finish(mut self) -> Vec<String> {
        let what = &self.what;
        let mut stdin = self.child.stdin.take().unwrap_or_else(|| panic!("{what}: no stdin"));
        stdin.write_all(b"go\n").unwrap_or_else(|e| panic!("{what}: {e}"));
        drop(stdin);
        let lines: Vec<String> = self.lines.map(|l| l.unwrap_or_else(|e| panic!("{what}: {e}"))).collect();
        let status = self.child.wait().unwrap_or_else(|e| panic!("{what}: {e}"));
        assert!(status.success(), "{what} failed ({status}) after printing:\n{}", lines.join("\n"));
        lines
    }
}
