//! Issue #38, PostgreSQL 17's direct TLS (`sslnegotiation=direct`) from libpq itself: the libpq
//! that psycopg's binary wheel bundles (18 or newer) opens the connection with a TLS ClientHello
//! and ALPN `postgresql`, no SSLRequest. psql here is 15, which cannot ask for it.

use std::process::Command;

use crate::client_tls::{certs, pg_router, tls_keys};
use crate::frontdoor::psycopg_venv;

const DIRECT: &str = r#"
import sys, psycopg
port, ca = sys.argv[1], sys.argv[2]
print(psycopg.pq.version())
dsn = f"host=localhost port={port} dbname=app user=app password=app connect_timeout=20 sslrootcert={ca}"
try:
    with psycopg.connect(dsn + " sslmode=verify-full sslnegotiation=direct") as c:
        print("direct", c.pgconn.ssl_in_use, c.execute("SELECT 40 + 2").fetchone()[0])
except psycopg.OperationalError as e:
    print("refused", str(e).replace("\n", " "))
"#;

/// Runs the direct-TLS client against `port`; its output lines after the libpq version.
fn direct(python: &std::path::Path, port: u16) -> Vec<String> {
    let out = Command::new(python)
        .args(["-c", DIRECT, &port.to_string(), &certs().path("ca.crt")])
        .output()
        .expect("run psycopg");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "psycopg failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let mut lines = stdout.lines().map(str::to_owned);
    let libpq: u32 = lines.next().and_then(|v| v.parse().ok()).expect("libpq version");
    assert!(libpq >= 170_000, "sslnegotiation=direct needs libpq 17 or newer: {libpq}");
    lines.collect()
}

#[test]
fn libpq_connects_with_direct_tls_and_a_listener_without_tls_refuses_it() {
    let Some(python) = psycopg_venv() else { return };
    let (r, _) = pg_router(&tls_keys("require", "server", ""));
    let lines = direct(&python, r.port());
    assert_eq!(lines.len(), 1, "{lines:?}");
    let fields: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(fields, ["direct", "True", "42"], "libpq says its connection is encrypted: {lines:?}");

    // The control: a listener that terminates no TLS cannot answer a ClientHello.
    let (plain, _) = pg_router("");
    let lines = direct(&python, plain.port());
    assert!(lines.len() == 1 && lines[0].starts_with("refused "), "{lines:?}");
}
