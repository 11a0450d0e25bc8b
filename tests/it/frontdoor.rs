//! Issue #33, the front door speaks the protocol exactly: a StartupMessage asking for a newer
//! minor version or for `_pq_.` protocol options gets exactly one NegotiateProtocolVersion (down
//! to 3.0) and then logs in as usual, with raw packets and with libpq 18 asking for 3.2; and the
//! input classes of PgBouncer's recent CVEs replayed at the front door — a second StartupMessage
//! during authentication (CVE-2026-107350), malformed `-c` forms in `options` (CVE-2026-107349,
//! compared with what the real server answers), and lengths and counts near their integer limits
//! (CVE-2026-107348). Each gets a clean error and a closed connection, never a login as anyone,
//! and the same one-core router serves the next client.

use std::path::{Path, PathBuf};
use std::process::Command;

use querypilot::protocol::pg::ScramClient;

use crate::pg_raw::{bind, code, fields, md5_router, msg, parse, query, startup, startup_packet, sync, tags, Msg, Raw};
use crate::pg_util::connect;
use crate::router::{pg_config, pg_pool, Router};
use crate::support::dbs;

const V3_0: u32 = 0x0003_0000;

/// Reads messages until the router closes; returns them.
fn drain(c: &mut Raw) -> Vec<Msg> {
    let mut out = Vec::new();
    while let Some(m) = c.recv() {
        out.push(m);
    }
    out
}

/// Asserts one FATAL ErrorResponse with `want` and then a closed connection.
fn assert_fatal(got: &[Msg], want: &str, what: &str) {
    assert_eq!(tags(got), "E", "{what}: one ErrorResponse then close: {got:?}");
    assert_eq!(code(&got[0].1), want, "{what}: {:?}", fields(&got[0].1));
    assert!(fields(&got[0].1).iter().any(|(k, v)| *k == b'S' && v == "FATAL"), "{what}: FATAL");
}

/// The version and option names of a NegotiateProtocolVersion body.
fn negotiated(body: &[u8]) -> (u32, Vec<String>) {
    let version = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
    let count = u32::from_be_bytes([body[4], body[5], body[6], body[7]]) as usize;
    let names: Vec<String> =
        body[8..].split(|b| *b == 0).take(count).map(|n| String::from_utf8_lossy(n).into_owned()).collect();
    assert_eq!(names.len(), count, "count matches the names");
    (version, names)
}

/// The first column of the first row of `sql` on a raw connection.
fn value(c: &mut Raw, sql: &str) -> Option<String> {
    c.send(&query(sql));
    let msgs = c.until_ready();
    let row = msgs.iter().find(|(t, _)| *t == b'D').unwrap_or_else(|| panic!("{sql}: {msgs:?}"));
    crate::pg_raw::columns(&row.1)[0].as_ref().map(|v| String::from_utf8_lossy(v).into_owned())
}

#[test]
fn newer_versions_and_protocol_options_get_one_negotiation_then_a_normal_login() {
    let r = md5_router("transaction", 2);
    let user = [("user", "app"), ("database", "main")];
    let opts = [("user", "app"), ("_pq_.a", "1"), ("database", "main"), ("_pq_.b", "x")];
    for (what, version, params, want) in [
        ("3.0 without options", V3_0, &user[..], None),
        ("3.2", V3_0 | 2, &user[..], Some(vec![])),
        ("3.9999", V3_0 | 9999, &user[..], Some(vec![])),
        ("3.0 with _pq_ options", V3_0, &opts[..], Some(vec!["_pq_.a", "_pq_.b"])),
        ("3.2 with _pq_ options", V3_0 | 2, &opts[..], Some(vec!["_pq_.a", "_pq_.b"])),
    ] {
        let (mut c, msgs) = Raw::login_with(r.port(), &startup_packet(version, params), "app")
            .unwrap_or_else(|e| panic!("{what}: login refused: {e:?}"));
        let negotiations: Vec<&Msg> = msgs.iter().filter(|(t, _)| *t == b'v').collect();
        match want {
            None => assert!(negotiations.is_empty(), "{what}: nothing to negotiate: {}", tags(&msgs)),
            Some(names) => {
                assert_eq!(negotiations.len(), 1, "{what}: exactly one NegotiateProtocolVersion: {}", tags(&msgs));
                assert_eq!(msgs[0].0, b'v', "{what}: before authentication: {}", tags(&msgs));
                let names: Vec<String> = names.into_iter().map(str::to_owned).collect();
                assert_eq!(negotiated(&msgs[0].1), (V3_0, names), "{what}");
            }
        }
        // A protocol option is not a setting: the server never sees it.
        assert_eq!(value(&mut c, "SELECT current_setting('_pq_.a', true)"), None, "{what}");
        assert_eq!(value(&mut c, "SELECT inet_server_port()"), Some(dbs().pg.primary_port.to_string()), "{what}");
    }
    // A startup packet full of options (the most the router decodes) still gets one bounded answer.
    let many: Vec<(String, String)> = (0..900).map(|i| (format!("_pq_.{i}"), String::new())).collect();
    let mut params: Vec<(&str, &str)> = many.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    params.extend(user);
    let packet = startup_packet(V3_0 | 2, &params);
    assert!(packet.len() < 10_000, "within PostgreSQL's startup packet limit");
    let (_, msgs) = Raw::login_with(r.port(), &packet, "app").expect("login after a long negotiation");
    assert_eq!(tags(&msgs).matches('v').count(), 1);
    assert_eq!(negotiated(&msgs[0].1).1.len(), 900);
}

/// A Python with psycopg and the libpq its binary wheel bundles (18 or newer at the time of
/// writing), in a venv created once under the test target directory; `None` with the reason
/// printed when PyPI cannot be reached.
pub(crate) fn psycopg_venv() -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("psycopg-binary-venv");
    let python = dir.join("bin/python");
    let ready = |py: &Path| Command::new(py).args(["-c", "import psycopg"]).output().is_ok_and(|o| o.status.success());
    if ready(&python) {
        return Some(python);
    }
    // Built under a temporary name and renamed, so a run that dies half-way leaves nothing used.
    let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let made = Command::new("/usr/bin/python3").args(["-m", "venv"]).arg(&tmp).output();
    let installed = made.is_ok_and(|o| o.status.success())
        && Command::new(tmp.join("bin/pip"))
            .args(["install", "-q", "--disable-pip-version-check", "psycopg[binary]"])
            .output()
            .is_ok_and(|o| o.status.success());
    if !installed {
        eprintln!("SKIPPED the libpq 18 part: cannot create a venv with psycopg[binary] (PyPI unreachable?)");
        let _ = std::fs::remove_dir_all(&tmp);
        return None;
    }
    if std::fs::rename(&tmp, &dir).is_err() {
        let _ = std::fs::remove_dir_all(&tmp);
    }
    ready(&python).then_some(python)
}

#[test]
fn libpq_18_asking_for_protocol_3_2_connects_at_3_0() {
    let Some(python) = psycopg_venv() else { return };
    let r = md5_router("transaction", 2);
    let script = r#"
import sys, psycopg
print(psycopg.pq.version())
with psycopg.connect(f"host=127.0.0.1 port={sys.argv[1]} dbname=main user=app password=app max_protocol_version=3.2") as c:
    print(c.pgconn.full_protocol_version)
    print(c.execute("SELECT inet_server_port()").fetchone()[0])
    c.cancel_safe()
    print(c.execute("SELECT 'after cancel'").fetchone()[0])
"#;
    let out = Command::new(&python).args(["-c", script, &r.port().to_string()]).output().expect("run psycopg");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "psycopg failed:\n{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<&str> = stdout.lines().collect();
    let libpq: u32 = lines[0].parse().expect("libpq version");
    assert!(libpq >= 180_000, "the bundled libpq asks for 3.2 only from 18 on: {libpq}");
    assert_eq!(lines[1..], ["30000", &dbs().pg.primary_port.to_string(), "after cancel"], "{stdout}");
}

/// A router whose listener authenticates with SCRAM (the default), pool `main` on the primary.
fn scram_router() -> Router {
    Router::start(&pg_config(&[0], &pg_pool("main", dbs().pg.primary_port, "transaction", 2), "main"))
}

/// The type and the Int32 auth code of an Authentication message.
fn auth_code(m: &Msg) -> (u8, u32) {
    (m.0, u32::from_be_bytes([m.1[0], m.1[1], m.1[2], m.1[3]]))
}

/// SASLInitialResponse for SCRAM-SHA-256 carrying `data`.
fn sasl_initial(data: &[u8]) -> Vec<u8> {
    let mut b = b"SCRAM-SHA-256\0".to_vec();
    b.extend_from_slice(&(data.len() as i32).to_be_bytes());
    b.extend_from_slice(data);
    msg(b'p', &b)
}

/// The healthy client: a real driver logs in with SCRAM and runs a statement on the primary.
fn serves_the_next_client(port: u16, what: &str) {
    let mut ok = connect(port, "main", "app").unwrap_or_else(|e| panic!("after {what}: next client refused: {e}"));
    let port: i32 = ok.query_one("SELECT inet_server_port()", &[]).expect("next client").get(0);
    assert_eq!(port as u16, dbs().pg.primary_port, "after {what}");
}

#[test]
fn a_second_startup_message_during_authentication_is_a_protocol_violation() {
    let r = scram_router();
    let other = startup_packet(V3_0, &[("user", "postgres"), ("database", "main")]);
    let ssl_request = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
    for (what, second) in [("as postgres", &other[..]), ("a short one (SSLRequest)", &ssl_request[..])] {
        // Instead of SASLInitialResponse.
        let mut c = Raw::open(r.port());
        c.send(&startup("main"));
        assert_eq!(auth_code(&c.recv().expect("SASL")), (b'R', 10), "{what}");
        c.send_lossy(second);
        assert_fatal(&drain(&mut c), "08P01", &format!("{what} instead of SASLInitialResponse"));

        // Instead of SASLResponse, after the server-first message.
        let mut c = Raw::open(r.port());
        c.send(&startup("main"));
        assert_eq!(auth_code(&c.recv().expect("SASL")), (b'R', 10), "{what}");
        let client = ScramClient::new("", "app", "fd33nonce").expect("client");
        c.send(&sasl_initial(client.client_first().as_bytes()));
        assert_eq!(auth_code(&c.recv().expect("SASL continue")), (b'R', 11), "{what}");
        c.send_lossy(second);
        assert_fatal(&drain(&mut c), "08P01", &format!("{what} instead of SASLResponse"));
    }
    // On an MD5 listener, instead of the password message.
    let md5 = md5_router("transaction", 2);
    let mut c = Raw::open(md5.port());
    c.send(&startup("main"));
    assert_eq!(auth_code(&c.recv().expect("MD5 request")), (b'R', 5));
    c.send_lossy(&other);
    assert_fatal(&drain(&mut c), "08P01", "second startup on MD5");
    serves_the_next_client(r.port(), "second startup messages");
}

/// `SQLSTATE message` of a refused connection as user `app` to `database` on `port` with
/// `options`, or the value of `x.y` when it connects.
fn options_outcome(port: u16, database: &str, options: &str) -> String {
    let pg = &dbs().pg;
    let mut c = postgres::Config::new();
    c.host("127.0.0.1").port(port).user(&pg.user).password(&pg.password).dbname(database).options(options);
    c.connect_timeout(std::time::Duration::from_secs(10));
    match c.connect(postgres::NoTls) {
        Ok(mut client) => {
            let row = client.query_one("SELECT current_setting('x.y', true)", &[]).expect("x.y");
            format!("connected, x.y = {:?}", row.get::<_, Option<String>>(0))
        }
        Err(e) => match e.as_db_error() {
            Some(d) => format!("{} {}", d.code().code(), d.message()),
            None => format!("no server error: {e}"),
        },
    }
}

#[test]
fn malformed_options_switches_get_exactly_the_servers_answer() {
    let r = scram_router();
    let direct = dbs().pg.primary_port;
    for options in [
        "-c=",
        "-c=x",
        "--=x",
        "-c",
        "-c a",
        "--a",
        "-c -c x.y=1",
        "-c search_path=public -c",
        "--",
        "-- x.y=1",
        "-c x.y=1 --",
        "-",
        "-c x.y==1=",
        r"-c x.y=a\ b",
        "-c x.y=1 b",
    ] {
        let want = options_outcome(direct, &dbs().pg.database, options);
        assert_eq!(options_outcome(r.port(), "main", options), want, "options {options:?}");
    }
    serves_the_next_client(r.port(), "malformed options");
}

#[test]
fn lengths_and_counts_near_their_integer_limits_get_a_clean_error() {
    let r = md5_router("transaction", 2);
    let port = r.port();
    // The untagged startup length: negative, the largest, below its fixed part.
    for (what, bytes) in [
        ("startup length -1", vec![0xff, 0xff, 0xff, 0xff, 0, 3, 0, 0]),
        ("startup length i32::MAX", vec![0x7f, 0xff, 0xff, 0xff, 0, 3, 0, 0]),
        ("startup length 3", vec![0, 0, 0, 3, 0, 3, 0, 0]),
        ("1001 startup parameters", many_params(1001)),
    ] {
        let mut c = Raw::open(port);
        c.send_lossy(&bytes);
        assert_fatal(&drain(&mut c), "08P01", what);
    }
    // The password message's length during authentication.
    for (what, bytes) in [
        ("password length -1", vec![b'p', 0xff, 0xff, 0xff, 0xff]),
        ("password length u32::MAX - 15", vec![b'p', 0xff, 0xff, 0xff, 0xf0]),
        ("password length 3", vec![b'p', 0, 0, 0, 3]),
    ] {
        let mut c = Raw::open(port);
        c.send(&startup("main"));
        assert_eq!(auth_code(&c.recv().expect("MD5 request")), (b'R', 5), "{what}");
        c.send_lossy(&bytes);
        assert_fatal(&drain(&mut c), "08P01", what);
    }
    // SASLInitialResponse whose inner length disagrees with its message.
    let scram = scram_router();
    for (what, len) in [("-2", -2i32), ("i32::MAX", i32::MAX), ("one too many", 28), ("i32::MIN", i32::MIN)] {
        let mut body = b"SCRAM-SHA-256\0".to_vec();
        body.extend_from_slice(&len.to_be_bytes());
        body.extend_from_slice(b"n,,n=,r=fd33-nonce-abcdefgh");
        let mut c = Raw::open(scram.port());
        c.send(&startup("main"));
        assert_eq!(auth_code(&c.recv().expect("SASL")), (b'R', 10), "{what}");
        c.send_lossy(&msg(b'p', &body));
        assert_fatal(&drain(&mut c), "08P01", &format!("SASL data length {what}"));
    }
    // After login: counts in Bind and Parse far beyond the bytes that follow.
    let mut huge_bind = b"\0\0".to_vec();
    huge_bind.extend_from_slice(&[0, 0, 0xff, 0xff]);
    let mut params_no_data = b"\0\0\0\0".to_vec();
    params_no_data.extend_from_slice(&[0xff, 0xff]);
    let mut formats_no_data = b"\0\0".to_vec();
    formats_no_data.extend_from_slice(&[0xff, 0xff, 0, 0]);
    let mut value_too_long = b"\0\0\0\0\0\x01".to_vec();
    value_too_long.extend_from_slice(&[0x7f, 0xff, 0xff, 0xff, b'x']);
    let mut parse_types = b"\0SELECT 1\0".to_vec();
    parse_types.extend_from_slice(&[0xff, 0xff, 0, 0, 0, 23]);
    for (what, bytes) in [
        ("Bind with 65535 parameters and no data", msg(b'B', &params_no_data)),
        ("Bind with 65535 formats and no data", msg(b'B', &formats_no_data)),
        ("Bind with a value of i32::MAX bytes", msg(b'B', &value_too_long)),
        ("Bind with a huge result format count", msg(b'B', &huge_bind)),
        ("Parse with 65535 parameter types", msg(b'P', &parse_types)),
        ("message length -1", vec![b'Q', 0xff, 0xff, 0xff, 0xff]),
    ] {
        let mut c = Raw::login(port, "main", "app").expect("login");
        c.send_lossy(&bytes);
        c.send_lossy(&sync());
        let got = drain(&mut c);
        assert_eq!(got.first().map(|(t, _)| *t), Some(b'E'), "{what}: an error: {}", tags(&got));
        assert_eq!(code(&got[0].1), "08P01", "{what}: {:?}", fields(&got[0].1));
    }
    // A well-formed statement on a fresh connection still runs.
    let mut c = Raw::login(port, "main", "app").expect("login after the hostile inputs");
    c.send(&parse("", "SELECT $1::int + 1"));
    c.send(&bind("", &["41"], 0));
    c.send(&crate::pg_raw::execute());
    c.send(&sync());
    let msgs = c.until_ready();
    assert_eq!(tags(&msgs), "12DCZ");
}

/// A startup packet with `n` parameters, within the packet length limit.
fn many_params(n: usize) -> Vec<u8> {
    let names: Vec<String> = (0..n).map(|i| format!("p{i}")).collect();
    let params: Vec<(&str, &str)> = names.iter().map(|k| (k.as_str(), "")).collect();
    startup_packet(V3_0, &params)
}
