//! Runs `tests/support/dbs.sh` and parses what it reports.
//!
//! Owns the process-level contract with the script: arguments, the single `KEY=VALUE`
//! stdout line of `up`, the `export K=V` lines of `BASE/env.sh`, and error reporting with
//! the script's stderr. Depends on nothing else in the harness.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

/// Variables reported by `dbs.sh up` (`PG_PRIMARY_PORT`, `MY_USER`, ...).
pub type Vars = HashMap<String, String>;

/// The script, found through the crate root so any working directory works.
fn script_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/support/dbs.sh")
}

fn command(cmd: &str, base: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("bash");
    c.arg(script_path()).arg(cmd).arg(base).args(args).stdin(Stdio::null());
    c
}

fn describe_failure(out: &Output) -> String {
    format!("exit status {}\n--- dbs.sh stderr ---\n{}", out.status, String::from_utf8_lossy(&out.stderr))
}

/// `dbs.sh up BASE --owner-pid <this process>`: starts all four servers.
pub fn up(base: &Path) -> Result<(PathBuf, Vars), String> {
    let started = Instant::now();
    let pid = std::process::id().to_string();
    let out = command("up", base, &["--owner-pid", &pid])
        .output()
        .map_err(|e| format!("cannot run bash {}: {e}", script_path().display()))?;
    if !out.status.success() {
        return Err(format!("dbs.sh up {} failed: {}", base.display(), describe_failure(&out)));
    }
    let line = String::from_utf8_lossy(&out.stdout);
    let vars = parse_line(line.trim());
    eprintln!("[support] databases up in {:.2?} at {}", started.elapsed(), base.display());
    Ok((base.to_path_buf(), vars))
}

/// Uses servers someone else started (`QP_DBS_ENV=BASE`): reads `BASE/env.sh`.
pub fn attach(base: PathBuf) -> Result<(PathBuf, Vars, super::Role), String> {
    let env = base.join("env.sh");
    let text = std::fs::read_to_string(&env).map_err(|e| format!("QP_DBS_ENV: read {}: {e}", env.display()))?;
    let vars = text
        .lines()
        .filter_map(|l| l.strip_prefix("export "))
        .filter_map(|kv| kv.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
    Ok((base, vars, super::Role::External))
}

/// Runs a management subcommand (`stop`, `start`, `pause-replication`, ...).
pub fn run(cmd: &str, base: &Path, args: &[&str]) -> Result<(), String> {
    let out = command(cmd, base, args).output().map_err(|e| format!("cannot run dbs.sh: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(describe_failure(&out))
    }
}

/// `dbs.sh down BASE`, best effort: teardown failures are reported, never fatal, because
/// this runs in `Drop` and at process exit.
pub fn down(base: &Path) {
    let result = command("down", base, &[]).stdout(Stdio::null()).stderr(Stdio::piped()).output();
    match result {
        Ok(out) if out.status.success() => {}
        Ok(out) => eprintln!("[support] dbs.sh down {} failed: {}", base.display(), describe_failure(&out)),
        Err(e) => eprintln!("[support] cannot run dbs.sh down {}: {e}", base.display()),
    }
}

/// Splits `K1=V1 K2=V2 ...` (values never contain spaces: the script refuses such paths).
fn parse_line(line: &str) -> Vars {
    line.split_whitespace().filter_map(|kv| kv.split_once('=')).map(|(k, v)| (k.to_owned(), v.to_owned())).collect()
}

/// The value of `key`, or an error naming the missing key.
pub fn get<'a>(vars: &'a Vars, key: &str) -> Result<&'a str, String> {
    vars.get(key).map(String::as_str).ok_or_else(|| format!("dbs.sh did not report {key}"))
}

/// The port in `key`.
pub fn get_port(vars: &Vars, key: &str) -> Result<u16, String> {
    let v = get(vars, key)?;
    v.parse().map_err(|e| format!("{key}={v} is not a port: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_up_line() {
        let vars = parse_line("DBS_BASE=/tmp/x PG_PRIMARY_PORT=25400 PG_PRIMARY_URL=postgres://a:b@h:1/d\n");
        assert_eq!(get(&vars, "DBS_BASE"), Ok("/tmp/x"));
        assert_eq!(get_port(&vars, "PG_PRIMARY_PORT"), Ok(25400));
        assert_eq!(get(&vars, "PG_PRIMARY_URL"), Ok("postgres://a:b@h:1/d"));
        assert!(get(&vars, "MY_USER").is_err());
        assert!(get_port(&vars, "DBS_BASE").is_err());
    }
}
