//! Issue #38, backend TLS to MySQL/MariaDB: the router upgrades its connections with
//! `CLIENT_SSL` before logging in. Against the harness's TLS-only MariaDB
//! (`require_secure_transport = ON`, certificates made by the harness) and the plaintext
//! primary: every `tls` mode, certificate verification failing on a wrong name or an unrelated
//! CA with an error naming pool and backend, mutual TLS for a `REQUIRE X509` account, health
//! probes, pass-through logins with their auth query, and `KILL QUERY`. That a session is
//! encrypted is proven by the server's own `Ssl_cipher` of the session's connection and where it
//! ran by `@@port`, never by the router's word.

use std::thread;
use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::Conn;

use crate::backend_tls::{assert_probes_use_tls, probed_pools};
use crate::mysql_session::my_config;
use crate::router::Router;
use crate::support::{dbs, eventually, unique_name, MyTls};

fn tls_server() -> &'static MyTls {
    dbs().my_tls()
}

fn cert(name: &str) -> String {
    tls_server().certs.join(name).display().to_string()
}

/// `[pools.NAME]` of MySQL backend `127.0.0.1:port` as `user`/`password` on database app, with
/// the given TLS keys (and anything else) in `extra`.
fn pool(name: &str, port: u16, user: &str, password: &str, extra: &str) -> String {
    format!(
        "[pools.{name}]\nprotocol = \"mysql\"\nmode = \"session\"\nusername = \"{user}\"\npassword = \"{password}\"\n\
         database = \"app\"\nmax_connections = 8\nacquire_timeout = \"20s\"\nconnect_timeout = \"10s\"\n{extra}\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n"
    )
}

/// A router with one pool `name` (the default) as app/app on `port`.
fn router(name: &str, port: u16, extra: &str) -> Router {
    Router::start(&my_config(&[0], &pool(name, port, "app", "app", extra), name))
}

/// Connects through `r` as `user`/`password` and runs a first statement (a session pool may
/// open its backend connection only then).
fn client(r: &Router, user: &str, password: &str) -> Result<Conn, mysql::Error> {
    let mut c = Conn::new(dbs().my.opts(r.port(), user, password))?;
    c.query_drop("SELECT 1")?;
    Ok(c)
}

/// (the server port the session ran on, the cipher of its connection as the server sees it).
fn where_and_cipher(c: &mut Conn) -> (u16, String) {
    let port: Option<u16> = c.query_first("SELECT @@port").expect("@@port");
    let cipher: Option<(String, String)> = c.query_first("SHOW SESSION STATUS LIKE 'Ssl_cipher'").expect("Ssl_cipher");
    (port.expect("a port"), cipher.map(|(_, v)| v).unwrap_or_default())
}

/// Asserts the session of `c` runs on `port` over TLS.
fn assert_encrypted_on(c: &mut Conn, port: u16) {
    let (on, cipher) = where_and_cipher(c);
    assert_eq!(on, port, "the session's server");
    assert!(!cipher.is_empty(), "the server sees an encrypted connection");
}

/// The error number and message a client of `r` gets when the pool cannot log in.
fn refused(r: &Router, user: &str, password: &str) -> (u16, String) {
    match client(r, user, password) {
        Ok(_) => panic!("the backend connection must fail"),
        Err(mysql::Error::MySqlError(e)) => (e.code, e.message),
        Err(other) => panic!("expected a server error, got {other}"),
    }
}

#[test]
fn verify_full_with_the_servers_ca_encrypts_sessions_by_ip_and_by_name() {
    let port = tls_server().port;
    let ca = cert("ca.crt");
    // The backend host 127.0.0.1 is verified against the certificate's IP address...
    let r = router("my_tls_full", port, &format!("tls = \"verify-full\"\ntls_ca_file = \"{ca}\""));
    let mut c = client(&r, "app", "app").expect("verify-full by IP");
    assert_encrypted_on(&mut c, port);
    // Many records each way: a 3 MB statement in, a 5 MB row out, many rows.
    let big = "y".repeat(3 << 20);
    let n: Option<u64> = c.query_first(format!("SELECT LENGTH('{big}')")).expect("a big statement");
    assert_eq!(n, Some(3 << 20));
    let row: Option<String> = c.query_first("SELECT REPEAT('x', 5 << 20)").expect("a big row");
    assert_eq!(row.map(|r| r.len()), Some(5 << 20));
    let rows: Vec<u64> = c.query("SELECT seq FROM seq_1_to_50000").expect("many rows");
    assert_eq!((rows.len(), rows.last().copied()), (50_000, Some(50_000)));
    drop((c, r));
    // ...and `tls_server_name` against its DNS name.
    let extra = format!("tls = \"verify-full\"\ntls_ca_file = \"{ca}\"\ntls_server_name = \"localhost\"");
    let r = router("my_tls_full_name", port, &extra);
    let mut c = client(&r, "app", "app").expect("verify-full by name");
    assert_encrypted_on(&mut c, port);
}

#[test]
fn verify_full_refuses_a_wrong_name_and_an_unrelated_ca_naming_pool_and_backend() {
    let port = tls_server().port;
    let extra =
        format!("tls = \"verify-full\"\ntls_ca_file = \"{}\"\ntls_server_name = \"db.example.com\"", cert("ca.crt"));
    let r = router("my_tls_wrong_name", port, &extra);
    let (code, message) = refused(&r, "app", "app");
    assert_eq!(code, 1105, "a connect error of the backend: {message}");
    assert!(message.contains("\"my_tls_wrong_name\""), "names the pool: {message}");
    assert!(message.contains(&format!("127.0.0.1:{port}")), "names the backend: {message}");
    assert!(message.contains("not valid for name \"db.example.com\""), "says why: {message}");
    drop(r);
    let extra = format!("tls = \"verify-full\"\ntls_ca_file = \"{}\"", cert("other-ca.crt"));
    let r = router("my_tls_other_ca", port, &extra);
    let (_, message) = refused(&r, "app", "app");
    assert!(message.contains("\"my_tls_other_ca\"") && message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(message.contains("UnknownIssuer"), "says why: {message}");
}

#[test]
fn verify_ca_checks_the_chain_but_not_the_name() {
    let port = tls_server().port;
    let extra =
        format!("tls = \"verify-ca\"\ntls_ca_file = \"{}\"\ntls_server_name = \"db.example.com\"", cert("ca.crt"));
    let r = router("my_tls_ca", port, &extra);
    let mut c = client(&r, "app", "app").expect("verify-ca with the right CA and another name");
    assert_encrypted_on(&mut c, port);
    drop((c, r));
    let r =
        router("my_tls_ca_other", port, &format!("tls = \"verify-ca\"\ntls_ca_file = \"{}\"", cert("other-ca.crt")));
    let (_, message) = refused(&r, "app", "app");
    assert!(message.contains("UnknownIssuer"), "says why: {message}");
}

#[test]
fn require_encrypts_and_never_falls_back_to_plaintext() {
    let port = tls_server().port;
    let r = router("my_tls_req", port, "tls = \"require\"");
    let mut c = client(&r, "app", "app").expect("require on the TLS server");
    assert_encrypted_on(&mut c, port);
    drop((c, r));
    // The harness's primary has no TLS (have_ssl = DISABLED): it offers no CLIENT_SSL.
    let r = router("my_tls_req_plain", dbs().my.primary_port, "tls = \"require\"");
    let (code, message) = refused(&r, "app", "app");
    assert_eq!(code, 1105, "{message}");
    assert!(message.contains("\"my_tls_req_plain\""), "names the pool: {message}");
    assert!(message.contains("never falls back to plaintext"), "{message}");
}

#[test]
fn prefer_uses_tls_where_offered_and_plaintext_where_not() {
    let port = tls_server().port;
    let r = router("my_tls_prefer", port, "tls = \"prefer\"");
    let mut c = client(&r, "app", "app").expect("prefer on the TLS server");
    assert_encrypted_on(&mut c, port);
    drop((c, r));
    let plain = dbs().my.primary_port;
    let r = router("my_tls_prefer_plain", plain, "tls = \"prefer\"");
    let mut c = client(&r, "app", "app").expect("prefer on the plaintext server");
    assert_eq!(where_and_cipher(&mut c), (plain, String::new()));
}

#[test]
fn disable_against_the_tls_only_server_gets_the_servers_own_refusal() {
    // What makes the tests above meaningful: the server refuses what is not encrypted.
    let r = router("my_tls_off", tls_server().port, "");
    let (code, message) = refused(&r, "app", "app");
    assert_eq!(code, 1045, "{message}");
    assert!(message.contains("Access denied for user 'app'"), "the server's refusal: {message}");
}

#[test]
fn mutual_tls_logs_in_a_require_x509_account() {
    let port = tls_server().port;
    let files = format!("tls_cert_file = \"{}\"\ntls_key_file = \"{}\"", cert("client.crt"), cert("client.key"));
    let extra = format!("tls = \"verify-full\"\ntls_ca_file = \"{}\"\n{files}", cert("ca.crt"));
    let toml = my_config(&[0], &pool("my_tls_mtls", port, "app_x509", "app", &extra), "my_tls_mtls");
    let r = Router::start(&toml);
    let mut c = client(&r, "app_x509", "app").expect("mutual TLS");
    let user: Option<String> = c.query_first("SELECT CURRENT_USER()").expect("CURRENT_USER");
    assert_eq!(user.as_deref(), Some("app_x509@%"));
    assert_encrypted_on(&mut c, port);
    drop((c, r));
    // The same account over TLS without the certificate: refused by the server.
    let extra = format!("tls = \"verify-full\"\ntls_ca_file = \"{}\"", cert("ca.crt"));
    let toml = my_config(&[0], &pool("my_tls_no_cert", port, "app_x509", "app", &extra), "my_tls_no_cert");
    let r = Router::start(&toml);
    let (code, message) = refused(&r, "app_x509", "app");
    assert_eq!(code, 1045, "{message}");
}

#[test]
fn health_probes_use_the_pools_tls() {
    let port = tls_server().port;
    let pools = probed_pools(
        |name, extra| pool(name, port, "app", "app", extra),
        "my_tls_h_ok",
        "my_tls_h_bad",
        &cert("ca.crt"),
    );
    let toml =
        format!("{}\n[metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n", my_config(&[0], &pools, "my_tls_h_ok"));
    assert_probes_use_tls(&Router::start(&toml), "my_tls_h_ok", "my_tls_h_bad", port);
}

#[test]
fn pass_through_logins_and_their_auth_query_use_the_pools_tls() {
    let port = tls_server().port;
    // No username: the client's identity is passed through, its secret fetched by the auth
    // query as root; the server takes both only over TLS.
    let text = format!(
        "[pools.my_tls_pass]\nprotocol = \"mysql\"\nmode = \"session\"\ndatabase = \"app\"\ntls = \"require\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n[auth]\nmysql_query_user = \"root\"\n"
    );
    let r = Router::start(&my_config(&[0], &text, "my_tls_pass"));
    let mut c = client(&r, "app", "app").expect("pass-through login checked by the auth query");
    let user: Option<String> = c.query_first("SELECT CURRENT_USER()").expect("CURRENT_USER");
    assert_eq!(user.as_deref(), Some("app@%"));
    assert_encrypted_on(&mut c, port);
    let Err(mysql::Error::MySqlError(wrong)) = client(&r, "app", "not-the-password") else {
        panic!("a wrong password logged in")
    };
    assert_eq!(wrong.code, 1045, "{}", wrong.message);
}

#[test]
fn kill_query_reaches_the_tls_only_server() {
    let port = tls_server().port;
    let r = router("my_tls_kill", port, "tls = \"require\"");
    let mut victim = client(&r, "app", "app").expect("victim");
    let mut killer = client(&r, "app", "app").expect("killer");
    let id = victim.connection_id();
    let marker = unique_name("my_tls_kill");
    let sql = format!("SELECT SLEEP(30) AS {marker}");
    let sleeper = thread::spawn(move || victim.query_first::<i64, _>(sql));
    eventually(Duration::from_secs(20), "the SLEEP to run on the TLS server", || {
        let sql = format!(
            "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE INFO LIKE '%{marker}%' \
             AND INFO NOT LIKE '%PROCESSLIST%'"
        );
        killer.query_first::<i64, _>(sql).ok().flatten() == Some(1)
    });
    // The router opens its own connection to send KILL QUERY: over TLS, or the server refuses it.
    killer.query_drop(format!("KILL QUERY {id}")).expect("KILL QUERY");
    // Interrupted, the statement ends with 1317 (or an interrupted SLEEP returns 1); left
    // alone it returns 0 after 30 s.
    match sleeper.join().expect("sleeper") {
        Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1317, "{}", e.message),
        Ok(slept) => assert_eq!(slept, Some(1)),
        Err(other) => panic!("the SLEEP statement: {other}"),
    }
}
