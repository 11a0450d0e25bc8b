//! Issue #18: a `COPY FROM STDIN` that the server rejects while psql (libpq) is still sending
//! its data leaves the session alive, as on a direct connection: the router swallows the rest
//! of the client's copy data, relays the server's error and ReadyForQuery, and the next
//! statement runs. Both rejections of the issue: bad data mid-stream, and a rejection right
//! after CopyInResponse (`FREEZE` outside the table's creating transaction), in session and
//! transaction mode.

use crate::pg_util::{psql, router};
use crate::support::{dbs, unique_name};

/// A psql script: `copy` with `lines` data rows (a bad one second), `\.`, then a SELECT.
fn script(copy: &str, lines: usize) -> String {
    let mut s = format!("{copy}\n1\nnot_a_number\n");
    for i in 0..lines {
        s.push_str(&format!("{i}\n"));
    }
    s.push_str("\\.\nSELECT 'still ' || 'connected' AS after_copy;\n");
    s
}

/// Runs `stdin` with psql through the router and checks the rejection and the survival.
fn run(port: u16, stdin: &str, error: &str, what: &str) {
    let out = psql(port, "main", "app", &["-q", "-t", "-A"], stdin);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(error), "{what}: expected {error:?} from the server, got stderr:\n{stderr}");
    assert!(
        stdout.lines().any(|l| l == "still connected"),
        "{what}: the session did not survive the rejected COPY:\nstdout:\n{stdout}\nstderr:\n{stderr}"
    );
    assert!(!stderr.contains("FATAL"), "{what}: {stderr}");
}

#[test]
fn psql_copy_rejected_mid_stream_or_at_once_leaves_the_session_alive() {
    let t = unique_name("copy_rej");
    dbs().pg.primary_client().batch_execute(&format!("CREATE TABLE {t}(a int)")).expect("create table");
    for mode in ["session", "transaction"] {
        let r = router(mode, 2, "");
        run(r.port(), &script(&format!("COPY {t} FROM STDIN;"), 20_000), "invalid input syntax", mode);
        // The server refuses FREEZE right after CopyInResponse, racing the client's data.
        for attempt in 0..10 {
            let what = format!("{mode} FREEZE attempt {attempt}");
            run(r.port(), &script(&format!("COPY {t} FROM STDIN (FREEZE);"), 5_000), "FREEZE", &what);
        }
    }
    let n: i64 = dbs().pg.primary_client().query_one(&format!("SELECT count(*) FROM {t}"), &[]).expect("count").get(0);
    assert_eq!(n, 0, "no row of a rejected COPY may remain");
}

#[test]
fn rust_postgres_extended_copy_rejected_mid_stream_leaves_the_session_alive() {
    use std::io::Write;
    let t = unique_name("copy_rej_ext");
    dbs().pg.primary_client().batch_execute(&format!("CREATE TABLE {t}(a int)")).expect("create table");
    for mode in ["session", "transaction"] {
        let r = router(mode, 2, "");
        let mut c = r.pg("main");
        for round in 0..3 {
            // tokio-postgres sends COPY in the extended protocol (Bind, Execute, Sync), then
            // its data, CopyDone and another Sync.
            let mut w = c.copy_in(&format!("COPY {t} FROM STDIN")).expect("copy in");
            let mut sent = writeln!(w, "not_a_number");
            for i in 0..200_000 {
                if sent.is_err() {
                    break;
                }
                sent = writeln!(w, "{i}");
            }
            let e = w.finish().expect_err("bad COPY data fails");
            assert_eq!(crate::pg_util::sqlstate(&e), "22P02", "{mode} round {round}: {e}");
            let n: i64 = c.query_one(&format!("SELECT count(*) FROM {t}"), &[]).expect("session alive").get(0);
            assert_eq!(n, 0, "{mode} round {round}");
        }
    }
}
