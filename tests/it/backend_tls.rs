//! Issue #38, backend TLS: the router as a TLS client of PostgreSQL. Against the harness's
//! TLS-only server (`ssl = on`, `hostssl` rules, `hostnossl ... reject`, certificates made by
//! the harness) and the plaintext primary: every `tls` mode, certificate verification failing
//! on a wrong name, an unrelated CA or an expired certificate with an error naming pool and
//! backend, mutual TLS, cancels reaching the TLS server, and SCRAM-SHA-256-PLUS catching a TLS
//! interceptor. Where a statement ran is proven by the server's own `inet_server_port()` and
//! `pg_stat_ssl`, never by the router's word.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, ClientConnection, RootCertStore, ServerConfig, ServerConnection, StreamOwned};

use crate::pg_util::sqlstate;
use crate::router::{pg_config, Router};
use crate::support::{dbs, eventually, unique_name, PgTls};

/// `[pools.NAME]` for backend `127.0.0.1:port` as `user`/`password` on database app, with the
/// given TLS keys (and anything else) in `extra`.
pub(crate) fn pool(name: &str, port: u16, user: &str, password: &str, extra: &str) -> String {
    format!(
        "[pools.{name}]\nmode = \"session\"\nusername = \"{user}\"\npassword = \"{password}\"\ndatabase = \"app\"\n\
         max_connections = 8\nacquire_timeout = \"20s\"\nconnect_timeout = \"10s\"\n{extra}\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n"
    )
}

fn tls_server() -> &'static PgTls {
    dbs().pg_tls()
}

fn cert(name: &str) -> String {
    tls_server().certs.join(name).display().to_string()
}

/// A router with one pool `name` (the default) as app/app on `port`.
fn router(name: &str, port: u16, extra: &str) -> Router {
    Router::start(&pg_config(&[0], &pool(name, port, "app", "app", extra), name))
}

/// Connects through `r` as `user`/`password` to database `name`.
fn client(r: &Router, name: &str, user: &str, password: &str) -> Result<postgres::Client, postgres::Error> {
    let mut c = postgres::Config::new();
    c.host("127.0.0.1").port(r.port()).user(user).password(password).dbname(name);
    c.connect_timeout(Duration::from_secs(20));
    c.connect(postgres::NoTls)
}

/// (the server port the session ran on, whether its connection is encrypted).
pub(crate) fn where_and_ssl(c: &mut postgres::Client) -> (i32, bool) {
    let row = c
        .query_one("SELECT inet_server_port(), ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()", &[])
        .expect("pg_stat_ssl");
    (row.get(0), row.get(1))
}

/// The error a client gets from a router whose pool cannot reach its backend, as text.
fn refused(r: &Router, name: &str) -> (String, String) {
    let e = match client(r, name, "app", "app") {
        Err(e) => e,
        // A session pool may connect lazily, at the first statement.
        Ok(mut c) => c.batch_execute("SELECT 1").expect_err("the backend connection must fail"),
    };
    (sqlstate(&e), e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_else(|| e.to_string()))
}

#[test]
fn require_encrypts_every_session_connection() {
    let port = tls_server().port;
    let r = router("tls_req", port, "tls = \"require\"");
    let mut c = client(&r, "tls_req", "app", "app").expect("connect through the router");
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true));
    // Messages of many records each way: a 3 MB parameter in, a 5 MB row out.
    let big = "y".repeat(3 << 20);
    let row = c.query_one("SELECT length($1::text), repeat('x', 5 << 20)", &[&big]).expect("big messages");
    assert_eq!(row.get::<_, i32>(0), 3 << 20);
    assert_eq!(row.get::<_, String>(1).len(), 5 << 20);
    let n: i64 = c.query_one("SELECT count(*) FROM generate_series(1, 200000)", &[]).expect("many rows").get(0);
    assert_eq!(n, 200_000);
    let rows = c.query("SELECT g, md5(g::text) FROM generate_series(1, 50000) g", &[]).expect("many small rows");
    assert_eq!(rows.len(), 50_000);
    assert_eq!(rows[49_999].get::<_, i32>(0), 50_000);
}

#[test]
fn verify_full_with_the_servers_ca_connects_by_ip_and_by_name() {
    let port = tls_server().port;
    let ca = cert("ca.crt");
    // The backend host 127.0.0.1 is verified against the certificate's IP address...
    let r = router("tls_full", port, &format!("tls = \"verify-full\"\ntls_ca_file = \"{ca}\""));
    let mut c = client(&r, "tls_full", "app", "app").expect("verify-full by IP");
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true));
    drop((c, r));
    // ...and `tls_server_name` against its DNS name.
    let extra = format!("tls = \"verify-full\"\ntls_ca_file = \"{ca}\"\ntls_server_name = \"localhost\"");
    let r = router("tls_full_name", port, &extra);
    let mut c = client(&r, "tls_full_name", "app", "app").expect("verify-full by name");
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true));
    drop((c, r));
    // A backend's own tls_server_name wins over the pool's (here a name the certificate lacks).
    let keys = format!("tls = \"verify-full\"\ntls_ca_file = \"{ca}\"\ntls_server_name = \"db.example.com\"");
    let text = format!(
        "[pools.tls_full_backend]\nmode = \"session\"\nusername = \"app\"\npassword = \"app\"\ndatabase = \"app\"\n{keys}\n\
         backends = [{{ host = \"127.0.0.1\", port = {port}, tls_server_name = \"localhost\" }}]\n"
    );
    let r = Router::start(&pg_config(&[0], &text, "tls_full_backend"));
    let mut c = client(&r, "tls_full_backend", "app", "app").expect("verify-full by the backend's name");
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true));
}

#[test]
fn verify_full_refuses_a_certificate_for_another_name_naming_pool_and_backend() {
    let port = tls_server().port;
    let extra =
        format!("tls = \"verify-full\"\ntls_ca_file = \"{}\"\ntls_server_name = \"db.example.com\"", cert("ca.crt"));
    let r = router("tls_wrong_name", port, &extra);
    let (code, message) = refused(&r, "tls_wrong_name");
    assert_eq!(code, "08001", "{message}");
    assert!(message.contains("\"tls_wrong_name\""), "names the pool: {message}");
    assert!(message.contains(&format!("127.0.0.1:{port}")), "names the backend: {message}");
    assert!(message.contains("not valid for name \"db.example.com\""), "says why: {message}");
}

#[test]
fn verify_ca_checks_the_chain_but_not_the_name() {
    let port = tls_server().port;
    // The right CA with a name the certificate does not carry: verify-ca connects.
    let extra =
        format!("tls = \"verify-ca\"\ntls_ca_file = \"{}\"\ntls_server_name = \"db.example.com\"", cert("ca.crt"));
    let r = router("tls_ca", port, &extra);
    let mut c = client(&r, "tls_ca", "app", "app").expect("verify-ca with the right CA");
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true));
    drop((c, r));
    // An unrelated CA: refused, saying the issuer is unknown.
    let r = router("tls_ca_other", port, &format!("tls = \"verify-ca\"\ntls_ca_file = \"{}\"", cert("other-ca.crt")));
    let (code, message) = refused(&r, "tls_ca_other");
    assert_eq!(code, "08001", "{message}");
    assert!(message.contains("\"tls_ca_other\"") && message.contains(&format!("127.0.0.1:{port}")), "{message}");
    assert!(message.contains("UnknownIssuer"), "says why: {message}");
}

#[test]
fn verify_full_without_a_ca_file_uses_the_built_in_roots_which_do_not_know_the_test_ca() {
    let port = tls_server().port;
    let r = router("tls_roots", port, "tls = \"verify-full\"");
    let (code, message) = refused(&r, "tls_roots");
    assert_eq!(code, "08001", "{message}");
    assert!(message.contains("UnknownIssuer"), "{message}");
}

#[test]
fn disable_against_the_tls_only_server_gets_the_servers_own_refusal() {
    let r = router("tls_off", tls_server().port, "tls = \"disable\"");
    let (_, message) = refused(&r, "tls_off");
    assert!(message.contains("no encryption"), "the server's pg_hba refusal: {message}");
}

#[test]
fn prefer_uses_tls_where_offered_and_plaintext_where_not() {
    let tls_port = tls_server().port;
    let r = router("tls_prefer", tls_port, "tls = \"prefer\"");
    let mut c = client(&r, "tls_prefer", "app", "app").expect("prefer on the TLS server");
    assert_eq!(where_and_ssl(&mut c), (i32::from(tls_port), true));
    drop((c, r));
    // The harness's primary has ssl = off: it answers the SSLRequest with N.
    let plain = dbs().pg.primary_port;
    let r = router("tls_prefer_plain", plain, "tls = \"prefer\"");
    let mut c = client(&r, "tls_prefer_plain", "app", "app").expect("prefer on the plaintext server");
    assert_eq!(where_and_ssl(&mut c), (i32::from(plain), false));
}

#[test]
fn require_never_falls_back_to_plaintext() {
    let plain = dbs().pg.primary_port;
    let r = router("tls_req_plain", plain, "tls = \"require\"");
    let (code, message) = refused(&r, "tls_req_plain");
    assert_eq!(code, "08001", "{message}");
    assert!(message.contains("never falls back to plaintext"), "{message}");
}

#[test]
fn mutual_tls_logs_in_by_client_certificate() {
    let port = tls_server().port;
    let extra = format!(
        "tls = \"verify-full\"\ntls_ca_file = \"{}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"",
        cert("ca.crt"),
        cert("client.crt"),
        cert("client.key")
    );
    // app_cert has no password on the server: its pg_hba line is `cert`, so only the client
    // certificate logs it in. The pool's password is what clients of the router give.
    let toml = pg_config(&[0], &pool("tls_mtls", port, "app_cert", "router-side", &extra), "tls_mtls");
    let r = Router::start(&toml);
    let mut c = client(&r, "tls_mtls", "app_cert", "router-side").expect("mutual TLS");
    let user: String = c.query_one("SELECT current_user::text", &[]).expect("current_user").get(0);
    assert_eq!(user, "app_cert");
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true));
}

/// SSLRequest: length 8, request code 1234/5679.
const SSL_REQUEST: [u8; 8] = [0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];

/// A TCP relay to `upstream` that, like a managed database's TLS-enforcing front end, drops
/// every connection whose first message is not SSLRequest (PostgreSQL itself processes a
/// plaintext CancelRequest before consulting pg_hba.conf, so the server alone cannot show
/// that cancels are encrypted). Returns its port and the count of connections it dropped.
fn tls_only_relay(upstream: u16) -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind relay");
    let port = listener.local_addr().expect("relay address").port();
    let dropped = Arc::new(AtomicUsize::new(0));
    let count = dropped.clone();
    thread::spawn(move || {
        for client in listener.incoming().flatten() {
            let count = count.clone();
            thread::spawn(move || relay_one(client, upstream, &count));
        }
    });
    (port, dropped)
}

fn relay_one(mut client: TcpStream, upstream: u16, dropped: &AtomicUsize) {
    let mut first = [0u8; 8];
    if client.read_exact(&mut first).is_err() || first != SSL_REQUEST {
        dropped.fetch_add(1, Ordering::SeqCst);
        return;
    }
    let Ok(mut server) = TcpStream::connect(("127.0.0.1", upstream)) else { return };
    if server.write_all(&first).is_err() {
        return;
    }
    let (Ok(mut client_rx), Ok(mut server_tx)) = (client.try_clone(), server.try_clone()) else { return };
    let up = thread::spawn(move || {
        let _ = std::io::copy(&mut client_rx, &mut server_tx);
        let _ = server_tx.shutdown(Shutdown::Write);
    });
    let _ = std::io::copy(&mut server, &mut client);
    let _ = client.shutdown(Shutdown::Write);
    let _ = up.join();
}

#[test]
fn a_client_cancel_reaches_the_tls_only_server_over_tls() {
    let port = tls_server().port;
    let (relay, dropped) = tls_only_relay(port);
    let r = router("tls_cancel", relay, "tls = \"require\"");
    let mut c = client(&r, "tls_cancel", "app", "app").expect("connect");
    let marker = unique_name("tls_cancel_me");
    let token = c.cancel_token();
    let mut watcher = client(&r, "tls_cancel", "app", "app").expect("second connection");
    let m = marker.clone();
    let canceller = thread::spawn(move || {
        eventually(Duration::from_secs(20), "the statement to run on the TLS server", || {
            let n: i64 = watcher
                .query_one(
                    "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%' || $1 || '%' \
                     AND pid <> pg_backend_pid()",
                    &[&m],
                )
                .expect("pg_stat_activity")
                .get(0);
            n > 0
        });
        token.cancel_query(postgres::NoTls).expect("send cancel");
    });
    // Without the cancel the statement would run its 30 s and succeed.
    let e = c.batch_execute(&format!("SELECT pg_sleep(30) /* {marker} */")).expect_err("canceled");
    canceller.join().expect("canceller");
    assert_eq!(sqlstate(&e), "57014", "{e}");
    let text = e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default();
    assert!(text.contains("user request"), "the server's own cancel error: {text}");
    assert_eq!(dropped.load(Ordering::SeqCst), 0, "no connection, the cancel's included, came in plaintext");
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true), "the session goes on, encrypted");
}

#[test]
fn query_timeout_cancels_on_the_tls_only_server() {
    let port = tls_server().port;
    let (relay, dropped) = tls_only_relay(port);
    let r = router("tls_timeout", relay, "tls = \"require\"\nquery_timeout = \"500ms\"");
    let mut c = client(&r, "tls_timeout", "app", "app").expect("connect");
    let e = c.batch_execute("SELECT pg_sleep(60)").expect_err("timed out");
    // 57014 is the server's answer to the cancel; a cancel that never arrived would end, one
    // more query_timeout later, with the router giving the connection up (08006).
    assert_eq!(sqlstate(&e), "57014", "{e}");
    assert_eq!(dropped.load(Ordering::SeqCst), 0, "no connection, the cancel's included, came in plaintext");
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true));
}

#[test]
fn health_probes_use_the_pools_tls() {
    let port = tls_server().port;
    let pools =
        probed_pools(|name, extra| pool(name, port, "app", "app", extra), "tls_h_ok", "tls_h_bad", &cert("ca.crt"));
    let toml = format!("{}\n[metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n", pg_config(&[0], &pools, "tls_h_ok"));
    // A probe that logged in and asked pg_is_in_recovery() has verified the pool's role.
    assert_probes_use_tls(&Router::start(&toml), "tls_h_ok", "tls_h_bad", port);
}

/// Two pools made by `pool(name, tls settings)`, each probed every 200 ms: `ok` with `require`,
/// `bad` verifying (against CA file `ca`) a name its server's certificate does not carry.
pub(crate) fn probed_pools(pool: impl Fn(&str, &str) -> String, ok: &str, bad: &str, ca: &str) -> String {
    let health = |name: &str| {
        format!("[pools.{name}.health]\ninterval = \"200ms\"\ntimeout = \"5s\"\nfailure_threshold = 1\n\n")
    };
    let wrong = format!("tls = \"verify-full\"\ntls_ca_file = \"{}\"\ntls_server_name = \"db.example.com\"", ca);
    format!("{}{}{}{}", pool(ok, "tls = \"require\""), health(ok), pool(bad, &wrong), health(bad))
}

/// Waits until the probe of pool `ok` passed over TLS on backend `port` (the server logs in
/// only encrypted connections) and that of `bad` failed to connect.
pub(crate) fn assert_probes_use_tls(r: &Router, ok: &str, bad: &str, port: u16) {
    eventually(Duration::from_secs(30), "a health probe over TLS to pass", || {
        let b = crate::health::backend(r, ok, port);
        b["role_mismatch"] == false && b["health_cause"] == "none"
    });
    eventually(Duration::from_secs(30), "the probe of the pool with the wrong name to fail", || {
        let b = crate::health::backend(r, bad, port);
        b["healthy"] == false && b["health_cause"] == "connect"
    });
}

#[test]
fn a_reload_that_changes_no_tls_file_keeps_the_pools_connections() {
    let port = tls_server().port;
    // One connection at most, so the one lent after the reload is the one from before or a new one.
    let text = format!(
        "[pools.tls_reload]\nmode = \"session\"\nusername = \"app\"\npassword = \"app\"\ndatabase = \"app\"\n\
         min_connections = 0\nmax_connections = 1\nacquire_timeout = \"20s\"\ntls = \"verify-full\"\n\
         tls_ca_file = \"{}\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n",
        cert("ca.crt")
    );
    let toml = pg_config(&[0], &text, "tls_reload");
    let r = Router::start(&toml);
    let pid = |r: &Router| -> i32 {
        let mut c = client(r, "tls_reload", "app", "app").expect("connect");
        c.query_one("SELECT pg_backend_pid()", &[]).expect("pid").get(0)
    };
    let before = pid(&r);
    r.reload_with(&toml).expect("reload");
    // The files were read again and are the same: the idle connection is lent again.
    assert_eq!(pid(&r), before);
}

#[test]
fn auth_queries_and_pass_through_logins_use_the_pools_tls() {
    let port = tls_server().port;
    // No username: the client's own identity is passed through, its secret fetched by the auth
    // query as postgres (trusted over hostssl only), both on TLS connections of the pool.
    let text = format!(
        "[pools.tls_pass]\nmode = \"session\"\ndatabase = \"app\"\ntls = \"require\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n[auth]\npg_query_user = \"postgres\"\n"
    );
    let r = Router::start(&pg_config(&[0], &text, "tls_pass"));
    let mut c = client(&r, "tls_pass", "app", "app").expect("pass-through login checked by the auth query");
    let user: String = c.query_one("SELECT current_user::text", &[]).expect("current_user").get(0);
    assert_eq!(user, "app");
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true));
    let Err(wrong) = client(&r, "tls_pass", "app", "not-the-password") else { panic!("a wrong password logged in") };
    assert_eq!(sqlstate(&wrong), "28P01", "{wrong}");
}

/// A TLS-terminating interceptor in front of the TLS-only server, as an attacker on the path
/// would be: it answers the router's SSLRequest itself, completes TLS with a certificate of its
/// own (the harness's client certificate, which `require` accepts as it checks none), opens its
/// own TLS connection to the server and relays the plaintext between the two. Returns its port
/// and whether the router asked it for `SCRAM-SHA-256-PLUS`.
fn interceptor(upstream: u16) -> (u16, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind interceptor");
    let port = listener.local_addr().expect("interceptor address").port();
    let saw_plus = Arc::new(AtomicBool::new(false));
    let flag = saw_plus.clone();
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = CertificateDer::pem_file_iter(cert("client.crt"))
        .and_then(|c| c.collect::<Result<Vec<_>, _>>())
        .expect("client.crt");
    let key = PrivateKeyDer::from_pem_file(cert("client.key")).expect("client.key");
    let towards_router = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .expect("interceptor's server side");
    let mut roots = RootCertStore::empty();
    roots.add(CertificateDer::from_pem_file(cert("ca.crt")).expect("ca.crt")).expect("a root");
    let towards_server = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map(|b| b.with_root_certificates(roots).with_no_client_auth())
        .expect("interceptor's client side");
    let (down, up) = (Arc::new(towards_router), Arc::new(towards_server));
    thread::spawn(move || {
        for router_side in listener.incoming().flatten() {
            let (down, up, flag) = (down.clone(), up.clone(), flag.clone());
            thread::spawn(move || intercept_one(router_side, upstream, (down, up), &flag));
        }
    });
    (port, saw_plus)
}

fn intercept_one(
    mut router_side: TcpStream,
    upstream: u16,
    (down, up): (Arc<ServerConfig>, Arc<ClientConfig>),
    saw_plus: &AtomicBool,
) -> std::io::Result<()> {
    let mut first = [0u8; 8];
    router_side.read_exact(&mut first)?;
    if first != SSL_REQUEST {
        return Ok(());
    }
    router_side.write_all(b"S")?;
    let mut server_side = TcpStream::connect(("127.0.0.1", upstream))?;
    server_side.write_all(&SSL_REQUEST)?;
    let mut answer = [0u8; 1];
    server_side.read_exact(&mut answer)?;
    let session = ClientConnection::new(up, ServerName::try_from("localhost").expect("name"));
    let mut server = StreamOwned::new(session.map_err(std::io::Error::other)?, server_side);
    let mut router = StreamOwned::new(ServerConnection::new(down).map_err(std::io::Error::other)?, router_side);
    // Both handshakes first, with blocking reads, so that no timeout can cut one short.
    while router.conn.is_handshaking() {
        router.conn.complete_io(&mut router.sock)?;
    }
    while server.conn.is_handshaking() {
        server.conn.complete_io(&mut server.sock)?;
    }
    // Then both directions in one thread: short read timeouts let each side be polled in turn.
    for s in [&router.sock, &server.sock] {
        s.set_read_timeout(Some(Duration::from_millis(10)))?;
    }
    let (mut from_router, mut buf) = (Vec::new(), vec![0u8; 1 << 16]);
    let idle = |e: &std::io::Error| matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut);
    loop {
        match router.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => {
                from_router.extend_from_slice(&buf[..n]);
                if from_router.windows(19).any(|w| w == b"SCRAM-SHA-256-PLUS\0") {
                    saw_plus.store(true, Ordering::SeqCst);
                }
                server.write_all(&buf[..n])?;
            }
            Err(e) if idle(&e) => {}
            Err(e) => return Err(e),
        }
        match server.read(&mut buf) {
            Ok(0) => return Ok(()),
            Ok(n) => router.write_all(&buf[..n])?,
            Err(e) if idle(&e) => {}
            Err(e) => return Err(e),
        }
    }
}

#[test]
fn scram_over_tls_is_bound_to_the_servers_certificate_so_an_interceptor_is_caught() {
    let port = tls_server().port;
    // Directly: the login (scram-sha-256 for app on the server) binds to the server's own
    // certificate and succeeds.
    let r = router("tls_plus", port, "tls = \"require\"");
    let mut c = client(&r, "tls_plus", "app", "app").expect("SCRAM-SHA-256-PLUS login");
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true));
    drop((c, r));
    let (relay, saw_plus) = interceptor(port);
    // The interceptor relays faithfully: a login that needs no password (postgres is trusted
    // over hostssl) works through it.
    let text = pool("tls_mitm_trust", relay, "postgres", "router-side", "tls = \"require\"");
    let r = Router::start(&pg_config(&[0], &text, "tls_mitm_trust"));
    let mut c = client(&r, "tls_mitm_trust", "postgres", "router-side").expect("a trusted login through it");
    assert_eq!(where_and_ssl(&mut c), (i32::from(port), true));
    drop((c, r));
    // A SCRAM login through it: the router binds to the interceptor's certificate, the server
    // checks against its own, and refuses.
    let r = router("tls_mitm", relay, "tls = \"require\"");
    let (_, message) = refused(&r, "tls_mitm");
    assert!(message.contains("SCRAM channel binding check failed"), "the server's refusal: {message}");
    assert!(saw_plus.load(Ordering::SeqCst), "the router asked for SCRAM-SHA-256-PLUS");
}

/// A server that answers SSLRequest with `S` and completes TLS presenting the harness's expired
/// certificate (issued by ca.crt for 127.0.0.1/localhost), as a PostgreSQL server whose
/// certificate lapsed would; it closes each connection after the handshake attempt.
fn server_with_an_expired_certificate() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let port = listener.local_addr().expect("address").port();
    #[allow(deprecated)]
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let chain = CertificateDer::pem_file_iter(cert("expired/expired.crt"))
        .and_then(|c| c.collect::<Result<Vec<_>, _>>())
        .expect("expired/expired.crt");
    let key = PrivateKeyDer::from_pem_file(cert("expired/expired.key")).expect("expired/expired.key");
    let config = ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .and_then(|b| b.with_no_client_auth().with_single_cert(chain, key))
        .map(Arc::new)
        .expect("a server config with the expired certificate");
    thread::spawn(move || {
        for mut s in listener.incoming().flatten() {
            let config = config.clone();
            thread::spawn(move || -> std::io::Result<()> {
                let mut first = [0u8; 8];
                s.read_exact(&mut first)?;
                if first != SSL_REQUEST {
                    return Ok(());
                }
                s.write_all(b"S")?;
                let mut tls = ServerConnection::new(config).map_err(std::io::Error::other)?;
                while tls.is_handshaking() {
                    tls.complete_io(&mut s)?;
                }
                Ok(())
            });
        }
    });
    port
}

#[test]
fn verify_modes_refuse_an_expired_certificate_naming_pool_and_backend() {
    let port = server_with_an_expired_certificate();
    for mode in ["verify-ca", "verify-full"] {
        let name = format!("tls_lapsed_{}", mode.replace('-', "_"));
        let r = router(&name, port, &format!("tls = \"{mode}\"\ntls_ca_file = \"{}\"", cert("ca.crt")));
        let (code, message) = refused(&r, &name);
        assert_eq!(code, "08001", "{message}");
        assert!(message.contains(&format!("\"{name}\"")), "names the pool: {message}");
        assert!(message.contains(&format!("127.0.0.1:{port}")), "names the backend: {message}");
        assert!(message.contains("certificate expired"), "says why: {message}");
    }
}
