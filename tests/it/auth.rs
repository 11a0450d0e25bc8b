//! Issue #12, no one let in: wrong passwords, unknown users and empty passwords are refused on
//! both protocols with the same answer; an unknown user goes through the very same exchange
//! (and hashing) as a wrong password; the admin API off loopback refuses every request
//! without its token; and the logs of a run at the default level hold no password, SQL text or
//! parameter value.

// Blocking test code driving sockets and child processes, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::net::{IpAddr, Ipv4Addr, SocketAddr, UdpSocket};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use mysql::prelude::Queryable;
use querypilot::protocol::pg::frontend::{encode_sasl_initial_response, encode_sasl_response};
use querypilot::protocol::pg::{Authentication, BackendMessage, Frame, ScramClient};

use crate::admin::{http, with_metrics};
use crate::mysql_session::{my_config, my_pool};
use crate::pg_raw::{fields, msg, Raw};
use crate::pg_util::{connect, sqlstate};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, eventually, free_port};

fn pg_refusal(port: u16, user: &str, password: &str) -> (String, String) {
    let mut c = postgres::Config::new();
    c.host("127.0.0.1").port(port).user(user).password(password).dbname("main");
    c.connect_timeout(Duration::from_secs(10));
    let e = c.connect(postgres::NoTls).err().unwrap_or_else(|| panic!("{user}/{password:?} must be refused"));
    let db = e.as_db_error().unwrap_or_else(|| panic!("{user}/{password:?}: not a server error: {e}"));
    (db.code().code().to_owned(), db.message().to_owned())
}

#[test]
fn postgres_refuses_wrong_password_unknown_user_and_empty_password_alike() {
    for method in ["scram-sha-256", "md5"] {
        let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
        let toml = pg_config(&[0], &pools, "main")
            .replace("bind = \"127.0.0.1:0\"\n", &format!("bind = \"127.0.0.1:0\"\nauth_method = \"{method}\"\n"));
        let router = Router::start(&toml);
        let port = router.port();
        for (user, password) in [("app", "wrong"), ("nobody", "app"), ("nobody", "wrong"), ("app", "")] {
            let (code, message) = pg_refusal(port, user, password);
            assert_eq!(code, "28P01", "{method} {user}/{password:?}: {message}");
            // One answer whichever part was wrong: only the name the client gave differs.
            assert_eq!(message, format!("password authentication failed for user \"{user}\""), "{method}");
        }
        connect(port, "main", "app")
            .expect("the right credentials still work")
            .simple_query("SELECT 1")
            .expect("served");
    }
}

/// A protocol 3.0 StartupMessage for `user` and database `main`.
fn startup_as(user: &str) -> Vec<u8> {
    let mut body = 196608u32.to_be_bytes().to_vec();
    for s in ["user", user, "database", "main", ""] {
        body.extend_from_slice(s.as_bytes());
        body.push(0);
    }
    let mut packet = (body.len() as u32 + 4).to_be_bytes().to_vec();
    packet.extend_from_slice(&body);
    packet
}

/// One SCRAM login attempt over a raw socket, as a transcript of what the router asked for and
/// answered: message kinds, the SCRAM iteration count (the hashing work), and the error with
/// the user's own name blanked out.
fn scram_transcript(port: u16, user: &str, password: &str) -> Vec<String> {
    let mut c = Raw::open(port);
    c.send(&startup_as(user));
    let scram = ScramClient::new(user, password, "authTestNonce8Qm2xZ").expect("scram client");
    let mut transcript = Vec::new();
    while let Some((tag, body)) = c.recv() {
        let m = BackendMessage::decode(&Frame::new(tag, &body)).expect("decode");
        let mut out = Vec::new();
        match m {
            BackendMessage::Authentication(Authentication::Sasl { .. }) => {
                transcript.push("AuthenticationSASL".to_owned());
                encode_sasl_initial_response("SCRAM-SHA-256", Some(scram.client_first().as_bytes()), &mut out)
                    .expect("encode");
            }
            BackendMessage::Authentication(Authentication::SaslContinue(data)) => {
                let text = String::from_utf8_lossy(data).into_owned();
                let iterations = text.split(',').find(|a| a.starts_with("i=")).unwrap_or("no i=").to_owned();
                transcript.push(format!("AuthenticationSASLContinue {iterations}"));
                let (client_final, _) = scram.handle_server_first(data).expect("server-first");
                encode_sasl_response(client_final.as_bytes(), &mut out).expect("encode");
            }
            BackendMessage::Authentication(a) => transcript.push(format!("{a:?}")),
            BackendMessage::ErrorResponse(_) => {
                let f = fields(&body);
                let get = |k: u8| f.iter().find(|(key, _)| *key == k).map(|(_, v)| v.clone()).unwrap_or_default();
                transcript.push(format!("{} {} {}", get(b'S'), get(b'C'), get(b'M').replace(user, "<user>")));
            }
            other => transcript.push(format!("{other:?}")),
        }
        if !out.is_empty() {
            c.send(&out);
        }
    }
    transcript
}

#[test]
fn an_unknown_user_goes_through_the_same_exchange_as_a_wrong_password() {
    let router = crate::pg_util::router("transaction", 2, "");
    let port = router.port();
    let wrong_password = scram_transcript(port, "app", "wrong");
    assert_eq!(
        wrong_password,
        [
            "AuthenticationSASL",
            "AuthenticationSASLContinue i=4096",
            "FATAL 28P01 password authentication failed for user \"<user>\"",
        ],
        "the whole SCRAM exchange, then the refusal"
    );
    // Unknown user, and both wrong: the router still derives the pool secret (4096 rounds),
    // waits for the client's proof and checks it before refusing, so nothing differs.
    assert_eq!(scram_transcript(port, "nobody", "app"), wrong_password);
    assert_eq!(scram_transcript(port, "nobody", "wrong"), wrong_password);

    // MD5: an unknown user is asked for the salted hash like anyone else.
    let md5 = crate::pg_raw::md5_router("transaction", 2);
    let mut c = Raw::open(md5.port());
    c.send(&startup_as("nobody"));
    let (tag, body) = c.recv().expect("an auth request");
    assert_eq!((tag, body.get(..4)), (b'R', Some(&5u32.to_be_bytes()[..])), "MD5 challenge for an unknown user");
    c.send(&msg(b'p', b"md500000000000000000000000000000000\0"));
    let (tag, body) = c.recv().expect("the refusal");
    assert_eq!(tag, b'E');
    assert!(fields(&body).contains(&(b'C', "28P01".to_owned())), "{:?}", fields(&body));
}

#[test]
fn mysql_refuses_wrong_password_unknown_user_and_empty_password_alike() {
    let router = Router::start(&my_config(&[0], &my_pool("main", "transaction", 2), "main"));
    let my = &dbs().my;
    for (user, password, using) in [
        (my.user.as_str(), "wrong", "YES"),
        ("nobody", my.password.as_str(), "YES"),
        ("nobody", "wrong", "YES"),
        (my.user.as_str(), "", "NO"),
    ] {
        let e = mysql::Conn::new(my.opts(router.port(), user, password))
            .err()
            .unwrap_or_else(|| panic!("{user}/{password:?} let in"));
        let mysql::Error::MySqlError(e) = e else { panic!("{user}/{password:?}: not a server error: {e}") };
        assert_eq!((e.code, e.state.as_str()), (1045, "28000"), "{user}/{password:?}");
        assert_eq!(e.message, format!("Access denied for user '{user}'@'127.0.0.1' (using password: {using})"));
    }
    let mut ok = mysql::Conn::new(my.opts(router.port(), &my.user, &my.password)).expect("right credentials");
    ok.query_drop("SELECT 1").expect("served");
}

/// An address of this host that is not loopback (the source address of the default route), if
/// the machine has one. Connecting a UDP socket sends nothing.
fn non_loopback_address() -> Option<IpAddr> {
    let s = UdpSocket::bind((Ipv4Addr::UNSPECIFIED, 0)).ok()?;
    s.connect((Ipv4Addr::new(192, 0, 2, 254), 9)).ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_loopback() && !ip.is_unspecified()).then_some(ip)
}

#[test]
fn the_admin_api_off_loopback_needs_a_token_and_refuses_every_request_without_it() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
    let base = pg_config(&[0], &pools, "main");
    // Off loopback without a token the configuration itself is refused.
    let open = with_metrics(&base, None).replacen(
        "[metrics]\nenabled = true\nbind = \"127.0.0.1:0\"",
        "[metrics]\nenabled = true\nbind = \"0.0.0.0:0\"",
        1,
    );
    let err = querypilot::config::Config::parse(&open, "t.toml")
        .expect_err("a non-loopback admin API without a token is refused");
    assert!(err.to_string().contains("admin_token"), "{err}");

    let guarded = with_metrics(&base, Some("s3cret-admin-token")).replacen(
        "[metrics]\nenabled = true\nbind = \"127.0.0.1:0\"",
        "[metrics]\nenabled = true\nbind = \"0.0.0.0:0\"",
        1,
    );
    let router = Router::start(&guarded);
    let api_port = router.control().endpoints().admin.expect("admin endpoint").port();
    let host = non_loopback_address().unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
    eprintln!("admin API reached at {host}:{api_port}");
    let api = SocketAddr::new(host, api_port);
    let before = router.control().current().expect("current").version;
    let bearer = [("Authorization", "Bearer s3cret-admin-token")];
    for (method, path) in [
        ("POST", "/api/reload"),
        ("POST", "/api/pattern-rules"),
        ("DELETE", "/api/pattern-rules/1"),
        ("POST", "/api/translations"),
        ("DELETE", "/api/stats/digests"),
        ("GET", "/api/config"),
    ] {
        for headers in
            [&[][..], &[("Authorization", "Bearer wrong")][..], &[("Authorization", "s3cret-admin-token")][..]]
        {
            let reply = http(api, method, path, headers);
            assert_eq!(reply.status, 401, "{method} {path} {headers:?}: {}", reply.body);
        }
    }
    assert_eq!(router.control().current().expect("current").version, before, "nothing changed");
    let reply = http(api, "POST", "/api/reload", &bearer);
    assert_eq!(reply.status, 200, "with the token the API works: {}", reply.body);
}

/// Markers that must never reach the logs.
const SECRET_PASSWORD: &str = "Pw-Zebra-7731";
const SQL_MARKER: &str = "Sql_Marker_4417";
const PARAM_MARKER: &str = "Param-Secret-8812";
const BAD_PARAM_MARKER: &str = "Param-Bad-9931";
const MISSING_TABLE: &str = "no_such_table_marker_5529";
/// A number sqlparser quotes in the message of a panic (see below).
const NUMBER_MARKER: &str = "4417004277";

#[test]
fn logs_at_the_default_level_hold_no_password_sql_or_parameter() {
    let (pg_port, my_port) = (free_port(), free_port());
    let pg = pg_pool("pgmain", dbs().pg.primary_port, "transaction", 2);
    let my = my_pool("mymain", "transaction", 2);
    let toml = format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n\
         [[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:{pg_port}\"\n\n\
         [[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:{my_port}\"\n\n{pg}\n{my}\n\
         [routing]\ndefault_pool = \"pgmain\"\nmysql_default_pool = \"mymain\"\n"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("querypilot.toml");
    std::fs::write(&path, toml).expect("write config");
    let (out, err) = (dir.path().join("stdout.log"), dir.path().join("stderr.log"));
    let mut router = Command::new(env!("CARGO_BIN_EXE_querypilot"))
        .arg("-c")
        .arg(&path)
        .env_remove("QUERYPILOT_LOG")
        .env_remove("RUST_LOG")
        .stdout(Stdio::from(std::fs::File::create(&out).expect("stdout file")))
        .stderr(Stdio::from(std::fs::File::create(&err).expect("stderr file")))
        .spawn()
        .expect("start the router");
    eventually(Duration::from_secs(20), "the router to accept connections", || {
        std::net::TcpStream::connect(("127.0.0.1", pg_port)).is_ok()
            && std::net::TcpStream::connect(("127.0.0.1", my_port)).is_ok()
    });

    // PostgreSQL: a failed login, statements and parameters that succeed and fail.
    let mut cfg = postgres::Config::new();
    cfg.host("127.0.0.1").port(pg_port).user("app").dbname("pgmain").connect_timeout(Duration::from_secs(10));
    assert!(cfg.clone().password(SECRET_PASSWORD).connect(postgres::NoTls).is_err());
    let mut c = cfg.password("app").connect(postgres::NoTls).expect("login");
    c.simple_query(&format!("SELECT '{SQL_MARKER}' AS {SQL_MARKER}")).expect("query");
    let row = c.query_one("SELECT $1::text", &[&PARAM_MARKER]).expect("parameter");
    assert_eq!(row.get::<_, String>(0), PARAM_MARKER);
    let e = c.query_one("SELECT $1::text::int", &[&BAD_PARAM_MARKER]).expect_err("a bad parameter fails");
    assert_eq!(sqlstate(&e), "22P02");
    assert!(c.simple_query(&format!("SELECT * FROM {MISSING_TABLE} WHERE x = '{SQL_MARKER}'")).is_err());
    assert!(c.simple_query(&format!("SELEC '{SQL_MARKER}'")).is_err());

    // MySQL: the same.
    let my_env = &dbs().my;
    assert!(mysql::Conn::new(my_env.opts(my_port, &my_env.user, SECRET_PASSWORD)).is_err());
    let mut m = mysql::Conn::new(my_env.opts(my_port, &my_env.user, &my_env.password)).expect("login");
    let v: Option<String> = m.query_first(format!("SELECT '{SQL_MARKER}'")).expect("query");
    assert_eq!(v.as_deref(), Some(SQL_MARKER));
    let v: Option<String> = m.exec_first("SELECT CONCAT(?, '')", (PARAM_MARKER,)).expect("parameter");
    assert_eq!(v.as_deref(), Some(PARAM_MARKER));
    assert!(m.exec_drop(format!("SELECT * FROM {MISSING_TABLE} WHERE x = ?"), (BAD_PARAM_MARKER,)).is_err());
    assert!(m.query_drop(format!("SELEC '{SQL_MARKER}'")).is_err());
    // sqlparser panics on this (an unwrap in its error path) with the marker in its message:
    // the router refuses the statement for analysis, and the panic must not reach the logs.
    let _ = m.query_drop(format!("FLUSH RELAY LOGS FOR CHANNEL {NUMBER_MARKER}"));
    let v: Option<i64> = m.query_first("SELECT 1").expect("the session goes on");
    assert_eq!(v, Some(1));
    drop((c, m));

    let t = Instant::now();
    assert!(Command::new("kill").arg("-TERM").arg(router.id().to_string()).status().expect("kill").success());
    while router.try_wait().expect("wait").is_none() {
        assert!(t.elapsed() < Duration::from_secs(15), "router did not stop");
        std::thread::sleep(Duration::from_millis(20));
    }
    let logs =
        format!("{}{}", std::fs::read_to_string(&out).expect("stdout"), std::fs::read_to_string(&err).expect("stderr"));
    assert!(logs.contains("listening"), "the run's logs were captured: {logs}");
    for marker in [SECRET_PASSWORD, SQL_MARKER, PARAM_MARKER, BAD_PARAM_MARKER, MISSING_TABLE, NUMBER_MARKER] {
        assert!(!logs.to_lowercase().contains(&marker.to_lowercase()), "{marker} leaked into the logs:\n{logs}");
    }
}

/// PyMySQL logs in as `user`/`password` to database `db` on each port; one line each.
fn pymysql_to_database(ports: &[u16], user: &str, password: &str, db: &str) -> Vec<String> {
    let script = "import sys, pymysql\n\
                  for port in sys.argv[4:]:\n\
                  \x20   try:\n\
                  \x20       pymysql.connect(host='127.0.0.1', port=int(port), user=sys.argv[1], password=sys.argv[2],\n\
                  \x20                       database=sys.argv[3], connect_timeout=10).close()\n\
                  \x20       print('ok')\n\
                  \x20   except pymysql.err.OperationalError as e:\n\
                  \x20       print('err', e.args[0], e.args[1])\n";
    let out = Command::new("/usr/bin/python3")
        .args(["-c", script, user, password, db])
        .args(ports.iter().map(u16::to_string))
        .output()
        .expect("run python3");
    assert!(out.status.success(), "PyMySQL: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

/// Issue #33: the password is checked before the database name, as both servers do it — a
/// wrong password for a database no pool serves is a password failure (nothing learned about
/// the database), a right one learns that the database does not exist.
#[test]
fn the_password_is_checked_before_the_database_name() {
    use crate::passthrough_identity::asyncpg;
    let (pg, my) = (&dbs().pg, &dbs().my);
    let router = Router::start(&pg_config(&[0], &pg_pool("main", pg.primary_port, "transaction", 2), "main"));
    let cases = |port: u16| {
        [
            (port, pg.user.as_str(), "wrong", "qp_no_such_db"),
            (port, pg.user.as_str(), pg.password.as_str(), "qp_no_such_db"),
        ]
    };
    let (server, routed) = (asyncpg(&cases(pg.primary_port)), asyncpg(&cases(router.port())));
    assert_eq!(
        server,
        [
            format!("err 28P01 password authentication failed for user \"{}\"", pg.user),
            "err 3D000 database \"qp_no_such_db\" does not exist".to_owned()
        ],
        "the server's order"
    );
    // #36: the same order and codes; the unknown database in the router's words (it has no
    // pool for the name; the server might have the database).
    let no_pool = "the router has no pool for database \"qp_no_such_db\" (see [pool_template] in its configuration)";
    assert_eq!(routed, [server[0].clone(), format!("err 3D000 {no_pool}")], "the router's");

    let router = Router::start(&my_config(&[0], &my_pool("main", "transaction", 2), "main"));
    let ports = [my.primary_port, router.port()];
    let wrong = pymysql_to_database(&ports, &my.user, "wrong", "qp_no_such_db");
    let denied = format!("err 1045 Access denied for user '{}'@'127.0.0.1' (using password: YES)", my.user);
    assert_eq!(wrong, [denied.clone(), denied], "server, then router");
    let right = pymysql_to_database(&ports, &my.user, &my.password, "qp_no_such_db");
    let unknown = "err 1049 Unknown database 'qp_no_such_db'".to_owned();
    let no_pool =
        "err 1049 the router has no pool for database 'qp_no_such_db' (see [pool_template] in its configuration)";
    assert_eq!(right, [unknown, no_pool.to_owned()], "server, then router");
}
