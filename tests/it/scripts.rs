//! Running the real client programs of `tests/connectors` (PyMySQL, psycopg, asyncpg scripts and
//! Connector/J single-file programs) and reading what they print, one helper for every test that
//! drives them (the JDBC runner was copied between the HTAP tests before).

use std::path::Path;
use std::process::Command;

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
    run(Command::new("/usr/bin/python3").arg(Path::new(SCRIPTS).join(script)).args(args), script)
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
    run(
        Command::new("java")
            .args(["-cp", JDBC_JAR])
            .arg(Path::new(SCRIPTS).join(program))
            .args([url, user, password])
            .args(args),
        program,
    )
}
