//! Issue #18, session settings as on a direct connection: startup `options` are applied,
//! `RESET` returns to the client's own startup values (every spelling, tracked across the
//! connections a transaction-pooled client borrows), partial settings are replayed whole, and
//! `client_encoding` is the server's, non-UTF-8 encodings included. Pools of ONE server
//! connection, so consecutive or interleaved clients share it. Clients: psql (libpq), psycopg 3
//! and the Rust `postgres` crate.

use std::process::{Command, Output};

use crate::pg_util::router;
use crate::router::Router;

/// Runs psql (libpq) as `app` through `r` with `env` set, `script` on stdin; quiet, unaligned,
/// tuples only.
fn psql(r: &Router, env: &[(&str, &str)], script: &str) -> Output {
    use std::io::Write;
    let mut cmd = Command::new("psql");
    cmd.args(["-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1", "-U", "app", "-d", "main"])
        .args(["-p", &r.port().to_string()])
        .env("PGPASSWORD", "app")
        .env("PGCONNECT_TIMEOUT", "20")
        .envs(env.iter().copied())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn psql");
    child.stdin.take().expect("stdin").write_all(script.as_bytes()).expect("write script");
    child.wait_with_output().expect("psql output")
}

fn lines(out: &Output) -> Vec<String> {
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "psql failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    stdout.lines().map(str::to_owned).collect()
}

#[test]
fn psql_startup_options_are_applied_for_that_client_only() {
    for mode in ["session", "transaction"] {
        let r = router(mode, 1, "");
        let show = "SHOW statement_timeout; SELECT interval '1 day'; SHOW search_path; SELECT pg_backend_pid();\n";
        let opts = r"-c statement_timeout=1234 -c intervalstyle=postgres_verbose --search-path=qp_iso\ x";
        let a = lines(&psql(&r, &[("PGOPTIONS", opts)], show));
        assert_eq!(a[..3], ["1234ms", "@ 1 day", "\"qp_iso x\""], "{mode}: {a:?}");
        let b = lines(&psql(&r, &[], show));
        assert_eq!(b[..3], ["0", "1 day", "\"$user\", public"], "{mode}: the next client has none of it");
        assert_eq!(a[3], b[3], "{mode}: both on the one server connection");
        // The server's own checks apply, at login, as directly.
        let bad = psql(&r, &[("PGOPTIONS", "-c statement_timeout=soon")], show);
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(!bad.status.success() && err.contains("invalid value for parameter \"statement_timeout\""), "{err}");
        let bad = psql(&r, &[("PGOPTIONS", "-B 100")], show);
        let err = String::from_utf8_lossy(&bad.stderr);
        assert!(!bad.status.success() && err.contains("invalid command-line argument"), "{err}");
    }
}

#[test]
fn psql_reset_returns_to_the_clients_own_startup_values() {
    // As in the issue's transcript R7: PGDATESTYLE and PGAPPNAME are startup parameters.
    let script = "SET datestyle TO ISO;\nRESET datestyle;\nSHOW datestyle;\nSET application_name = 'other';\n\
                  RESET ALL;\nSHOW application_name;\nSHOW datestyle;\nSET datestyle TO DEFAULT;\nSHOW datestyle;\n";
    for mode in ["session", "transaction"] {
        let r = router(mode, 1, "");
        let out = lines(&psql(&r, &[("PGDATESTYLE", "SQL, DMY"), ("PGAPPNAME", "myapp")], script));
        assert_eq!(out, ["SQL, DMY", "myapp", "SQL, DMY", "SQL, DMY"], "{mode}");
        // psql falls back to `psql`.
        let out = lines(&psql(&r, &[], "SHOW application_name;\nRESET ALL;\nSHOW application_name;\n"));
        assert_eq!(out, ["psql", "psql"], "{mode}");
        // The Rust `postgres` crate sends none: empty, as directly (not the router's own name).
        let mut c = r.pg("main");
        c.batch_execute("SET application_name = 'x'; RESET ALL").expect("reset");
        assert_eq!(setting(&mut c, "application_name"), "", "{mode}");
    }
}

fn setting(c: &mut postgres::Client, name: &str) -> String {
    c.query_one("SELECT current_setting($1)", &[&name]).expect("current_setting").get(0)
}

/// Another client with settings of its own uses the one connection, so `a`'s next statement
/// finds it carrying someone else's settings and must replay its own.
fn interleave(other: &mut postgres::Client) {
    other.batch_execute("SELECT 1").expect("other client");
}

#[test]
fn postgres_crate_every_reset_spelling_is_tracked_across_borrowed_connections() {
    let r = router("transaction", 1, "");
    let mut plain = r.pg("main");
    let default_zone = setting(&mut plain, "TimeZone");
    let mut other = r.pg("main");
    other.batch_execute("SET TIME ZONE 'America/Lima'; SET datestyle TO 'German'").expect("other's settings");
    let mut a = r.pg("main");
    for reset in [
        "RESET TIME ZONE",
        "reset timezone",
        "RESET \"TimeZone\"",
        "SET TIME ZONE DEFAULT",
        "SET TIME ZONE LOCAL",
        "SET timezone TO DEFAULT",
        "SET SESSION timezone = default",
        "RESET ALL",
        "DISCARD ALL",
    ] {
        a.batch_execute("SET TIME ZONE 'Asia/Tokyo'").expect("set");
        a.batch_execute(reset).expect(reset);
        assert_eq!(setting(&mut a, "TimeZone"), default_zone, "{reset}");
        interleave(&mut other);
        assert_eq!(setting(&mut a, "TimeZone"), default_zone, "{reset} stays after another client's turn");
        assert_eq!(setting(&mut other, "TimeZone"), "America/Lima");
    }
    // A partial DateStyle is replayed as the whole value the server reported (transcript R4).
    a.batch_execute("SET datestyle TO 'SQL'").expect("style");
    a.batch_execute("SET datestyle TO dmy").expect("order");
    for _ in 0..2 {
        interleave(&mut other);
        let row = a.query_one("SELECT current_setting('DateStyle'), date '2024-03-01'::text", &[]).expect("date");
        assert_eq!((row.get::<_, String>(0), row.get::<_, String>(1)), ("SQL, DMY".into(), "01/03/2024".into()));
    }
    assert_eq!(setting(&mut other, "DateStyle"), "German, DMY");
}

/// psycopg 3 with `PGCLIENTENCODING=utf8` (libpq sends `client_encoding=utf8`), then LATIN9 and
/// SJIS (whose `ソ` is the bytes 0x83 0x5C: a backslash as its second byte), with a second
/// client in between on the one server connection.
const PSYCOPG_ENCODING: &str = r#"
import os, sys, psycopg
dsn = sys.argv[1]
os.environ["PGCLIENTENCODING"] = "utf8"
os.environ["PGAPPNAME"] = "enc app"
a = psycopg.connect(dsn, autocommit=True)
print("status", a.pgconn.parameter_status(b"client_encoding").decode(), a.execute("show client_encoding").fetchone()[0])
a.execute("set client_encoding to latin9")
print("status", a.pgconn.parameter_status(b"client_encoding").decode())
print("latin9", a.execute("select 'a€b', length('a€b')").fetchone())
shared = sys.argv[2] == "transaction"
if shared:
    b = psycopg.connect(dsn, autocommit=True)
    print("other", b.execute("select 'a€b', current_setting('client_encoding')").fetchone())
print("latin9 again", a.execute("select 'é€' || %s", ["ü"]).fetchone()[0])
a.execute("reset all")
print("after reset", a.pgconn.parameter_status(b"client_encoding").decode(),
      a.pgconn.parameter_status(b"application_name").decode(), a.execute("show application_name").fetchone()[0])
pid = a.execute("select pg_backend_pid()").fetchone()[0]
if shared:
    b.close()
a.execute("set client_encoding to sjis")
print("sjis", a.execute("select 'ソ表' || E'\\x41', length('ソ表')").fetchone())
a.close()
c = psycopg.connect(dsn, autocommit=True)
print("next", c.execute("select current_setting('client_encoding'), pg_backend_pid() = %s", [pid]).fetchone())
c.close()
os.environ["PGCLIENTENCODING"] = "sjis"
d = psycopg.connect(dsn, autocommit=True)
print("startup", d.pgconn.parameter_status(b"client_encoding").decode(), d.execute("select 'ソ表' || E'\\x41'").fetchone()[0])
"#;

#[test]
fn psycopg_client_encoding_is_the_servers_and_non_utf8_encodings_work() {
    for mode in ["session", "transaction"] {
        let r = router(mode, 1, "");
        let dsn = format!("host=127.0.0.1 port={} user=app password=app dbname=main", r.port());
        let out =
            Command::new("/usr/bin/python3").args(["-c", PSYCOPG_ENCODING, &dsn, mode]).output().expect("python3");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.status.success(), "{mode}:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
        let mut want = vec![
            "status UTF8 UTF8",
            "status LATIN9",
            "latin9 ('a€b', 3)",
            "other ('a€b', 'UTF8')",
            "latin9 again é€ü",
            "after reset UTF8 enc app enc app",
            "sjis ('ソ表A', 2)",
            "next ('UTF8', True)",
            "startup SJIS ソ表A",
        ];
        if mode == "session" {
            // A session-mode client keeps the one connection: no second client gets in before
            // the first leaves.
            want.retain(|l| !l.starts_with("other"));
        }
        assert_eq!(stdout.lines().collect::<Vec<_>>(), want, "{mode}");
    }
}
