//! Issue #38, client TLS: the router as a TLS server on listeners with `tls = "allow"` or
//! `"require"`. Certificates are made here with the openssl CLI (a CA, an unrelated CA, two
//! server certificates for localhost/127.0.0.1, client certificates). Every claim of encryption
//! is the client's own: psql's `\conninfo`, libpq's `ssl_in_use` through psycopg, the protocol
//! version of asyncpg's, PyMySQL's and a raw Python socket's `ssl` object, the certificate
//! `openssl s_client` received, the cipher the mariadb CLI reports.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use crate::mysql_session::{my_config, my_pool};
use crate::pg_util::sqlstate;
use crate::router::{pg_config, pg_pool, Router};
use crate::scripts::{python, python_command, Staged};
use crate::support::dbs;

/// The certificates of these tests, made once per run.
pub(crate) struct Certs {
    dir: PathBuf,
}

impl Certs {
    pub(crate) fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }
}

fn openssl(args: &[&str], dir: &Path) {
    let out = Command::new("openssl").args(args).current_dir(dir).output().expect("run openssl");
    assert!(out.status.success(), "openssl {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A CA and an unrelated one; `server` and `server2` (CN qp-router, qp-router-2; both for
/// localhost and 127.0.0.1) and client certificates `client-app` (CN app) and `client-other`
/// (CN other) from the CA, `client-rogue` (CN app) from the unrelated CA.
pub(crate) fn certs() -> &'static Certs {
    static CERTS: OnceLock<Certs> = OnceLock::new();
    CERTS.get_or_init(|| {
        let dir = tempfile::tempdir().expect("tempdir").keep();
        let ec = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"];
        for ca in ["ca", "other-ca"] {
            let (key, crt, subj) = (format!("{ca}.key"), format!("{ca}.crt"), format!("/CN=qp-client-tls-{ca}"));
            let mut args = vec!["req", "-x509"];
            args.extend(ec);
            args.extend(["-days", "3650", "-keyout", &key, "-out", &crt, "-subj", &subj]);
            args.extend(["-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign"]);
            openssl(&args, &dir);
        }
        std::fs::write(
            dir.join("server.ext"),
            "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n",
        )
        .expect("write");
        std::fs::write(dir.join("client.ext"), "extendedKeyUsage=clientAuth\n").expect("write");
        for (name, cn, ca, ext) in [
            ("server", "qp-router", "ca", "server.ext"),
            ("server2", "qp-router-2", "ca", "server.ext"),
            ("client-app", "app", "ca", "client.ext"),
            ("client-other", "other", "ca", "client.ext"),
            ("client-rogue", "app", "other-ca", "client.ext"),
        ] {
            let (key, csr, crt, subj) =
                (format!("{name}.key"), format!("{name}.csr"), format!("{name}.crt"), format!("/CN={cn}"));
            let mut args = vec!["req"];
            args.extend(ec);
            args.extend(["-keyout", &key, "-out", &csr, "-subj", &subj]);
            openssl(&args, &dir);
            let (ca_crt, ca_key) = (format!("{ca}.crt"), format!("{ca}.key"));
            openssl(
                &["x509", "-req", "-in", &csr, "-CA", &ca_crt, "-CAkey", &ca_key, "-CAcreateserial", "-days", "3650"]
                    .into_iter()
                    .chain(["-extfile", ext, "-out", &crt])
                    .collect::<Vec<_>>(),
                &dir,
            );
            // libpq refuses a client key others may read.
            std::fs::set_permissions(dir.join(&key), std::os::unix::fs::PermissionsExt::from_mode(0o600))
                .expect("chmod");
        }
        Certs { dir }
    })
}

/// The listener keys of `tls = mode` with certificate `server` (and anything else in `extra`).
pub(crate) fn tls_keys(mode: &str, server: &str, extra: &str) -> String {
    let c = certs();
    format!(
        "tls = \"{mode}\"\ntls_cert_file = \"{}\"\ntls_key_file = \"{}\"\n{extra}",
        c.path(&format!("{server}.crt")),
        c.path(&format!("{server}.key"))
    )
}

/// Adds `keys` to the (only) listener of a config made by `pg_config` / `my_config`.
pub(crate) fn with_listener_keys(toml: &str, keys: &str) -> String {
    toml.replacen("bind = \"127.0.0.1:0\"\n", &format!("bind = \"127.0.0.1:0\"\n{keys}\n"), 1)
}

/// A PostgreSQL router with pool `app` (database app as app/app), its listener's TLS `keys`.
pub(crate) fn pg_router(keys: &str) -> (Router, String) {
    let toml = pg_router_config(keys);
    (Router::start(&toml), toml)
}

/// The config of [`pg_router`].
pub(crate) fn pg_router_config(keys: &str) -> String {
    with_listener_keys(&pg_config(&[0], &pg_pool("app", dbs().pg.primary_port, "transaction", 4), "app"), keys)
}

/// A MySQL router with pool `app`, its listener's TLS `keys`.
pub(crate) fn my_router(keys: &str) -> Router {
    Router::start(&with_listener_keys(&my_config(&[0], &my_pool("app", "transaction", 4), "app"), keys))
}

/// psql through `r` with connection string options `opts` running `sql`.
fn psql(r: &Router, opts: &str, sql: &str) -> Output {
    let conn = format!("host=localhost port={} dbname=app user=app connect_timeout=20 {opts}", r.port());
    Command::new("psql")
        .args(["-X", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-d", &conn, "-c", sql])
        .env("PGPASSWORD", "app")
        // No client certificate unless a test names one (libpq would look in ~/.postgresql).
        .env("PGSSLCERT", "/nonexistent/qp.crt")
        .env("PGSSLKEY", "/nonexistent/qp.key")
        .output()
        .expect("run psql")
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

/// A plaintext `postgres` client through `r`.
pub(crate) fn plain(r: &Router) -> Result<postgres::Client, postgres::Error> {
    let mut c = postgres::Config::new();
    c.host("127.0.0.1").port(r.port()).user("app").password("app").dbname("app");
    c.connect_timeout(Duration::from_secs(20));
    c.connect(postgres::NoTls)
}

#[test]
fn psql_verify_full_and_require_run_their_queries_over_tls() {
    let (r, _) = pg_router(&tls_keys("allow", "server", ""));
    let ca = certs().path("ca.crt");
    // channel_binding=require: libpq logs in only with SCRAM-SHA-256-PLUS bound to the
    // certificate it received.
    let out = psql(&r, &format!("sslmode=verify-full sslrootcert={ca} channel_binding=require"), "SELECT 'tls ok'");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "tls ok");
    let out = psql(&r, &format!("sslmode=verify-full sslrootcert={ca}"), "\\conninfo");
    assert!(text(&out).contains("SSL connection (protocol: TLSv1.3"), "{}", text(&out));
    let out = psql(&r, "sslmode=require", "\\conninfo");
    assert!(text(&out).contains("SSL connection (protocol: TLSv1."), "{}", text(&out));
    // An unrelated CA: libpq refuses the router's certificate.
    let out = psql(&r, &format!("sslmode=verify-full sslrootcert={}", certs().path("other-ca.crt")), "SELECT 1");
    assert!(!out.status.success() && text(&out).contains("certificate verify failed"), "{}", text(&out));
    // `allow` still takes plaintext clients.
    let mut c = plain(&r).expect("plaintext on an allow listener");
    assert_eq!(c.query_one("SELECT 7", &[]).expect("query").get::<_, i32>(0), 7);
}

#[test]
fn psycopg_asyncpg_and_direct_tls_see_their_own_tls() {
    let (r, _) = pg_router(&tls_keys("require", "server", ""));
    let (port, ca) = (r.port().to_string(), certs().path("ca.crt"));
    let psycopg = python("client_tls.py", &["psycopg", &port, &ca]);
    assert_eq!(psycopg, ["psycopg ssl_in_use=True value=42"]);
    let asyncpg = python("client_tls.py", &["asyncpg", &port, &ca]);
    assert_eq!(asyncpg, ["asyncpg version=TLSv1.3 value=42"]);
    // PostgreSQL 17's direct TLS: the startup packet over TLS gets the password request ('R').
    let direct = python("client_tls.py", &["direct", &port, &ca, "postgresql"]);
    assert_eq!(direct, ["direct version=TLSv1.3 alpn=postgresql answer=R"]);
    // Without ALPN the handshake completes but the router refuses to go on ('E', 08P01)...
    let direct = python("client_tls.py", &["direct", &port, &ca, "-"]);
    assert_eq!(direct, ["direct version=TLSv1.3 alpn=None answer=E"]);
    // ...and with another protocol the handshake itself fails.
    let direct = python("client_tls.py", &["direct", &port, &ca, "http/1.1"]);
    assert_eq!(direct, ["direct handshake-failed SSLError"]);
}

#[test]
fn require_refuses_plaintext_postgresql_logins_with_the_servers_error() {
    let (r, _) = pg_router(&tls_keys("require", "server", ""));
    let Err(e) = plain(&r) else { panic!("plaintext logged in on a require listener") };
    assert_eq!(sqlstate(&e), "28000", "{e}");
    let message = e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default();
    assert_eq!(message, "no pg_hba.conf entry for host \"127.0.0.1\", user \"app\", database \"app\", no encryption");
    let out = psql(&r, "sslmode=disable", "SELECT 1");
    assert!(!out.status.success() && text(&out).contains("no encryption"), "{}", text(&out));
    // GSS encryption is still refused: libpq with gssencmode=prefer falls back to TLS.
    let out = psql(&r, "sslmode=require gssencmode=prefer", "\\conninfo");
    assert!(text(&out).contains("SSL connection"), "{}", text(&out));
}

/// The mariadb CLI through `r` with `opts`, running `sql`.
fn mariadb(r: &Router, opts: &[&str], sql: &str) -> Output {
    Command::new("mariadb")
        .args(["-h", "127.0.0.1", "-P", &r.port().to_string(), "-u", "app", "-papp", "--connect-timeout=20"])
        .args(opts)
        .args(["-N", "-B", "-e", sql, "app"])
        .output()
        .expect("run mariadb")
}

#[test]
fn mysql_clients_upgrade_to_tls_and_require_refuses_plaintext() {
    let r = my_router(&tls_keys("require", "server", ""));
    let ca = certs().path("ca.crt");
    let pymysql = python("client_tls.py", &["pymysql", &r.port().to_string(), &ca]);
    assert_eq!(pymysql, ["pymysql version=TLSv1.3 value=42"]);
    // The CLI's `status` shows the cipher its own TLS layer negotiated.
    let ssl = ["--ssl", &format!("--ssl-ca={ca}"), "--ssl-verify-server-cert"];
    let out = mariadb(&r, &ssl, "status");
    assert!(out.status.success(), "{}", text(&out));
    assert!(text(&out).contains("Cipher in use is TLS_"), "{}", text(&out));
    let out = mariadb(&r, &ssl, "SELECT 40 + 2");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42", "{}", text(&out));
    // An unrelated CA: the CLI refuses the router's certificate.
    let other = format!("--ssl-ca={}", certs().path("other-ca.crt"));
    let out = mariadb(&r, &["--ssl", &other, "--ssl-verify-server-cert"], "SELECT 1");
    assert!(!out.status.success(), "{}", text(&out));
    // Plaintext on a require listener: the server's own error.
    let out = mariadb(&r, &["--skip-ssl"], "SELECT 1");
    assert!(!out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains(
            "ERROR 3159 (HY000): Connections using insecure transport are prohibited while --require_secure_transport=ON."
        ),
        "{}",
        text(&out)
    );
}

#[test]
fn mysql_allow_takes_plaintext_and_disable_offers_no_ssl() {
    let r = my_router(&tls_keys("allow", "server", ""));
    let out = mariadb(&r, &["--skip-ssl"], "SELECT 40 + 2");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42", "{}", text(&out));
    drop(r);
    let r = my_router("");
    let out = mariadb(
        &r,
        &["--ssl", &format!("--ssl-ca={}", certs().path("ca.crt")), "--ssl-verify-server-cert"],
        "SELECT 1",
    );
    assert!(!out.status.success(), "no SSL offered: {}", text(&out));
}

#[test]
fn mutual_tls_accepts_a_certificate_naming_the_user_and_refuses_others() {
    let c = certs();
    let extra = format!("tls_client_ca_file = \"{}\"\ntls_client_cert_user = true\n", c.path("ca.crt"));
    let (r, _) = pg_router(&tls_keys("require", "server", &extra));
    let with = |name: &str| {
        format!(
            "sslmode=verify-full sslrootcert={} sslcert={} sslkey={}",
            c.path("ca.crt"),
            c.path(&format!("{name}.crt")),
            c.path(&format!("{name}.key"))
        )
    };
    let out = psql(&r, &with("client-app"), "SELECT current_user");
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "app");
    // No certificate, or one from a CA the listener does not trust: the handshake fails.
    let out = psql(&r, &format!("sslmode=verify-full sslrootcert={}", c.path("ca.crt")), "SELECT 1");
    assert!(!out.status.success(), "no client certificate: {}", text(&out));
    assert!(text(&out).contains("certificate required"), "{}", text(&out));
    let out = psql(&r, &with("client-rogue"), "SELECT 1");
    assert!(!out.status.success(), "untrusted client certificate: {}", text(&out));
    assert!(text(&out).contains("unknown ca"), "{}", text(&out));
    // A trusted certificate for another name: refused as the server refuses it.
    let out = psql(&r, &with("client-other"), "SELECT 1");
    assert!(!out.status.success(), "certificate for another user: {}", text(&out));
    assert!(text(&out).contains("certificate authentication failed for user \"app\""), "{}", text(&out));
}

/// The subject and serial of the certificate a new TLS connection through `port` receives, as
/// `openssl s_client` (SSLRequest first) prints them.
fn presented_certificate(port: u16) -> String {
    let out = Command::new("openssl")
        .args(["s_client", "-starttls", "postgres", "-connect", &format!("127.0.0.1:{port}")])
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run openssl s_client");
    let pem = String::from_utf8_lossy(&out.stdout).into_owned();
    let mut x509 = Command::new("openssl")
        .args(["x509", "-noout", "-subject", "-serial"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("run openssl x509");
    x509.stdin.take().expect("stdin").write_all(pem.as_bytes()).expect("write");
    let out = x509.wait_with_output().expect("openssl x509");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn serial_of(cert: &str) -> String {
    let out =
        Command::new("openssl").args(["x509", "-noout", "-subject", "-serial", "-in", cert]).output().expect("x509");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn a_reload_serves_the_new_certificate_to_new_handshakes_and_keeps_open_sessions() {
    let c = certs();
    let (r, toml) = pg_router(&tls_keys("require", "server", ""));
    let (first, second) = (serial_of(&c.path("server.crt")), serial_of(&c.path("server2.crt")));
    assert!(first.contains("CN = qp-router\n") && second.contains("CN = qp-router-2"), "{first}{second}");
    assert_eq!(presented_certificate(r.port()), first);
    let open = Staged::start(
        &mut python_command("client_tls.py", &["staged", &r.port().to_string(), &c.path("ca.crt")]),
        "staged psycopg",
    );
    // The same as a SIGHUP does: the control plane re-reads the file and publishes it.
    let reloaded = toml
        .replace(&c.path("server.crt"), &c.path("server2.crt"))
        .replace(&c.path("server.key"), &c.path("server2.key"));
    r.reload_with(&reloaded).expect("reload");
    assert_eq!(presented_certificate(r.port()), second, "a new handshake gets the new certificate");
    assert_eq!(open.finish(), ["staged ssl_in_use=True value=42"], "the session opened before runs on");
    // Bound to the new certificate's hash.
    let tls = format!("sslmode=verify-full sslrootcert={} channel_binding=require", c.path("ca.crt"));
    let out = psql(&r, &tls, "SELECT 'after'");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "after", "{}", text(&out));
    // A reload whose files are broken is refused and the running certificate stays.
    let broken = reloaded.replace(&c.path("server2.key"), "/nonexistent/qp.key");
    let e = r.reload_with(&broken).expect_err("broken files");
    assert!(e.to_string().contains("tls_key_file /nonexistent/qp.key"), "{e}");
    assert_eq!(presented_certificate(r.port()), second);
}

/// SSLRequest on a raw socket: the router's one-byte answer.
fn ssl_request(port: u16) -> (TcpStream, u8) {
    let mut s = TcpStream::connect(("127.0.0.1", port)).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    s.write_all(&[0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f]).expect("SSLRequest");
    let mut answer = [0u8];
    s.read_exact(&mut answer).expect("answer");
    (s, answer[0])
}

/// Reads until the router closes `s`; what it sent meanwhile.
fn until_closed(s: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        match s.read(&mut chunk) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&chunk[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return all,
            Err(e) => panic!("the router did not close the connection: {e}"),
        }
    }
}

#[test]
fn garbage_and_a_stalled_handshake_after_sslrequest_touch_no_other_session() {
    let (r, _) = pg_router(&tls_keys("allow", "server", ""));
    let mut other = plain(&r).expect("a plaintext session");
    // Garbage where the ClientHello belongs: the connection is closed (after a TLS alert).
    let (mut garbage, answer) = ssl_request(r.port());
    assert_eq!(answer, b'S');
    garbage.write_all(b"this is not a TLS record at all\r\n").expect("garbage");
    let sent = until_closed(&mut garbage);
    assert!(sent.is_empty() || sent[0] == 0x15, "only a TLS alert, if anything: {sent:?}");
    // Plaintext behind the SSLRequest, in the same packet: refused, never read as encrypted.
    let mut s = TcpStream::connect(("127.0.0.1", r.port())).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(60))).expect("timeout");
    let mut both = vec![0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f];
    both.extend_from_slice(&[0, 0, 0, 8, 0, 3, 0, 0]);
    s.write_all(&both).expect("SSLRequest and more");
    let sent = until_closed(&mut s);
    assert_eq!(sent.first(), Some(&b'E'), "an ErrorResponse: {sent:?}");
    assert!(String::from_utf8_lossy(&sent).contains("08P01"), "{}", String::from_utf8_lossy(&sent));
    // A client that stops half way through its ClientHello: the others go on meanwhile...
    let (mut stalled, answer) = ssl_request(r.port());
    assert_eq!(answer, b'S');
    stalled.write_all(&[0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00]).expect("a record header and a little");
    for i in 0..50 {
        assert_eq!(other.query_one("SELECT $1::int", &[&i]).expect("the other session").get::<_, i32>(0), i);
    }
    let out = psql(&r, &format!("sslmode=verify-full sslrootcert={}", certs().path("ca.crt")), "SELECT 'new'");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "new", "{}", text(&out));
    // ...and the router closes it at the login deadline, sending nothing into the handshake.
    assert_eq!(until_closed(&mut stalled), Vec::<u8>::new());
    stalled.shutdown(Shutdown::Both).ok();
}

#[test]
fn mysql_mutual_tls_checks_the_certificate_and_its_name() {
    let c = certs();
    let extra = format!("tls_client_ca_file = \"{}\"\ntls_client_cert_user = true\n", c.path("ca.crt"));
    let r = my_router(&tls_keys("allow", "server", &extra));
    let ca = format!("--ssl-ca={}", c.path("ca.crt"));
    let with = |name: &str| {
        [
            "--ssl".to_owned(),
            ca.clone(),
            "--ssl-verify-server-cert".to_owned(),
            format!("--ssl-cert={}", c.path(&format!("{name}.crt"))),
            format!("--ssl-key={}", c.path(&format!("{name}.key"))),
        ]
    };
    let args = with("client-app");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = mariadb(&r, &args, "SELECT 40 + 2");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42", "{}", text(&out));
    // A trusted certificate naming someone else: refused like a wrong password.
    let args = with("client-other");
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = mariadb(&r, &args, "SELECT 1");
    assert!(text(&out).contains("ERROR 1045 (28000)"), "{}", text(&out));
    // No certificate over TLS: the handshake fails; in plaintext there is no certificate either.
    let out = mariadb(&r, &["--ssl", &ca, "--ssl-verify-server-cert"], "SELECT 1");
    assert!(!out.status.success(), "{}", text(&out));
    let out = mariadb(&r, &["--skip-ssl"], "SELECT 1");
    assert!(text(&out).contains("ERROR 1045 (28000)"), "{}", text(&out));
}

/// `tests/connectors/JdbcTls.java` with `jar` on the class path: the line it prints.
fn jdbc_tls(jar: &str, url: &str) -> String {
    let program = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors/JdbcTls.java");
    let out = Command::new("java")
        .args(["--add-opens", "java.base/java.io=ALL-UNNAMED", "--add-opens", "java.base/sun.security.ssl=ALL-UNNAMED"])
        .args(["-cp", jar, program, url, "app", "app"])
        .output()
        .expect("run java");
    assert!(out.status.success(), "JdbcTls {url}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).trim().to_owned()
}

#[test]
fn pgjdbc_verifies_the_router_and_queries_over_its_own_tls_socket() {
    let (r, _) = pg_router(&tls_keys("require", "server", ""));
    let jar = "/usr/share/java/postgresql.jar";
    let url = |ca: &str| format!("jdbc:postgresql://localhost:{}/app?sslmode=verify-full&sslrootcert={ca}", r.port());
    assert_eq!(jdbc_tls(jar, &url(&certs().path("ca.crt"))), "tls TLSv1.3 value 42");
    // The same driver and settings with an unrelated CA: the router's certificate is refused.
    let refused = jdbc_tls(jar, &url(&certs().path("other-ca.crt")));
    assert!(refused.starts_with("refused ") && refused.contains("certification path"), "{refused}");
}

#[test]
fn connector_j_verifies_the_router_and_queries_over_its_own_tls_socket() {
    let r = my_router(&tls_keys("require", "server", ""));
    let jar = "/usr/share/java/mariadb-java-client.jar";
    // Connector/J 2.7 checks the chain against serverSslCert and the host name by default.
    let url = |ca: &str| format!("jdbc:mariadb://localhost:{}/app?useSsl=true&serverSslCert={ca}", r.port());
    assert_eq!(jdbc_tls(jar, &url(&certs().path("ca.crt"))), "tls TLSv1.3 value 42");
    let refused = jdbc_tls(jar, &url(&certs().path("other-ca.crt")));
    assert!(refused.starts_with("refused ") && refused.contains("certification path"), "{refused}");
}

#[test]
fn an_expired_client_certificate_is_refused_by_both_protocols() {
    // The harness's expired pair (CN app_cert, issued by its CA, valid only in 2020), the key
    // copied as ours: libpq refuses a key file owned by another user.
    let harness = &dbs().pg_tls().certs;
    let dir = tempfile::tempdir().expect("tempdir");
    let (crt, key) = (dir.path().join("expired.crt"), dir.path().join("expired.key"));
    std::fs::copy(harness.join("expired/expired.crt"), &crt).expect("copy expired.crt");
    std::fs::copy(harness.join("expired/expired.key"), &key).expect("copy expired.key");
    std::fs::set_permissions(&key, std::os::unix::fs::PermissionsExt::from_mode(0o600)).expect("chmod");
    let (crt, key) = (crt.display().to_string(), key.display().to_string());
    let extra = format!("tls_client_ca_file = \"{}\"\n", harness.join("ca.crt").display());
    let (r, _) = pg_router(&tls_keys("require", "server", &extra));
    let out = psql(&r, &format!("sslmode=require sslcert={crt} sslkey={key}"), "SELECT 1");
    assert!(!out.status.success(), "expired client certificate: {}", text(&out));
    assert!(text(&out).contains("certificate expired"), "{}", text(&out));
    let r = my_router(&tls_keys("require", "server", &extra));
    let (crt, key) = (format!("--ssl-cert={crt}"), format!("--ssl-key={key}"));
    let out = mariadb(&r, &["--ssl", &crt, &key], "SELECT 1");
    assert!(!out.status.success(), "expired client certificate: {}", text(&out));
    assert!(text(&out).contains("certificate expired"), "{}", text(&out));
}

#[test]
fn tls_resumption_lets_a_client_resume_its_session_and_is_off_by_default() {
    let ca = certs().path("ca.crt");
    let (r, _) = pg_router(&tls_keys("require", "server", "tls_resumption = true\n"));
    let resumed = python("client_tls.py", &["resume", &r.port().to_string(), &ca]);
    assert_eq!(resumed, ["resume first=False second=True answers=RR"]);
    // Without the key the router issues no ticket: every handshake is a full one.
    let (r, _) = pg_router(&tls_keys("require", "server", ""));
    let full = python("client_tls.py", &["resume", &r.port().to_string(), &ca]);
    assert_eq!(full, ["resume first=False second=False answers=RR"]);
    // A resumed session still carries the client certificate its full handshake verified: the
    // certificate-named user logs in on both (a password request, `R`, not `E`).
    let c = certs();
    let extra =
        format!("tls_client_ca_file = \"{}\"\ntls_client_cert_user = true\ntls_resumption = true\n", c.path("ca.crt"));
    let (r, _) = pg_router(&tls_keys("require", "server", &extra));
    let (crt, key) = (c.path("client-app.crt"), c.path("client-app.key"));
    let mutual = python("client_tls.py", &["resume", &r.port().to_string(), &ca, &crt, &key]);
    assert_eq!(mutual, ["resume first=False second=True answers=RR"]);
    let (crt, key) = (c.path("client-other.crt"), c.path("client-other.key"));
    let other = python("client_tls.py", &["resume", &r.port().to_string(), &ca, &crt, &key]);
    assert_eq!(other, ["resume first=False second=True answers=EE"]);
}
