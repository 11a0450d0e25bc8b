//! Issue #33, pass-through identity never widens access: a login through a credential-less
//! pool is admitted exactly when the server would admit the same client directly — MySQL's
//! account hosts matched against the client's own address, empty passwords only by opt-in,
//! PostgreSQL's `rolvaliduntil` and `rolcanlogin` — and refusals tell an outsider nothing
//! (an unknown user's SCRAM salt is the same on every try; a backend refusing what the client
//! proved looks like a wrong password). Each case is checked against the server's own answer
//! to the same client, with PyMySQL, the mariadb CLI and asyncpg.
//!
//! The harness's servers and router listen on 127.0.0.1; clients that the accounts must not
//! admit connect from 127.0.0.2 (their own source address on loopback), while the router's
//! backend connections keep coming from 127.0.0.1.

// Blocking test code driving child processes, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::process::Command;
use std::time::Duration;

use mysql::prelude::Queryable;

use crate::passthrough::both_protocols_config;
use crate::pg_util::superuser;
use crate::router::Router;
use crate::support::{dbs, unique_name};

/// The source address the accounts under test do not admit.
const OUTSIDE: &str = "127.0.0.2";
/// The harness's own (and the router's) address.
const INSIDE: &str = "127.0.0.1";

/// The auth query keys of every router here: the harness's superusers (trusted from 127.0.0.1
/// without a password) fetch secrets with the default queries.
const QUERY_USERS: &str = "pg_query_user = \"postgres\"\nmysql_query_user = \"root\"\n";

/// MariaDB accounts created for one test, dropped at its end.
struct Accounts {
    /// `'user'@'host'` of each.
    names: Vec<(String, String)>,
}

impl Accounts {
    /// Creates `(user, host, password)` accounts (`None`: no password at all) that may use the
    /// harness's database.
    fn create(list: &[(&str, &str, Option<&str>)]) -> Accounts {
        let my = &dbs().my;
        let mut root = my.superuser_client(my.primary_port);
        for (user, host, password) in list {
            let how = password.map(|p| format!(" IDENTIFIED BY '{p}'")).unwrap_or_default();
            // The router's connections select the pool's database, which takes a privilege there.
            root.query_drop(format!(
                "CREATE USER '{user}'@'{host}'{how}; GRANT SHOW VIEW ON {db}.* TO '{user}'@'{host}'",
                db = my.database
            ))
            .expect("create user");
        }
        Accounts { names: list.iter().map(|(u, h, _)| ((*u).to_owned(), (*h).to_owned())).collect() }
    }
}

impl Drop for Accounts {
    fn drop(&mut self) {
        let my = &dbs().my;
        let mut root = my.superuser_client(my.primary_port);
        for (user, host) in &self.names {
            let _ = root.query_drop(format!("DROP USER IF EXISTS '{user}'@'{host}'"));
        }
    }
}

/// PyMySQL logs in once per `(port, user, password, source address)`; one line each:
/// `ok <CURRENT_USER()>` or `err <code> <message>`.
const PYMYSQL: &str = r#"
import sys, pymysql
for spec in sys.argv[1:]:
    port, user, password, bind = spec.split('\t')
    try:
        c = pymysql.connect(host='127.0.0.1', port=int(port), user=user, password=password,
                            bind_address=bind, connect_timeout=10)
        cur = c.cursor()
        cur.execute('SELECT CURRENT_USER()')
        print('ok', cur.fetchone()[0])
        c.close()
    except pymysql.err.OperationalError as e:
        print('err', e.args[0], e.args[1])
"#;

fn pymysql(attempts: &[(u16, &str, &str, &str)]) -> Vec<String> {
    let specs = attempts.iter().map(|(port, user, password, bind)| format!("{port}\t{user}\t{password}\t{bind}"));
    let out = Command::new("/usr/bin/python3").args(["-c", PYMYSQL]).args(specs).output().expect("run python3");
    assert!(out.status.success(), "PyMySQL script: {}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), attempts.len(), "{lines:?}");
    lines
}

/// The mariadb CLI logs in as `user` (from 127.0.0.1: it cannot choose its address); its
/// error line, or `ok`.
fn mariadb_cli(port: u16, user: &str, password: Option<&str>) -> String {
    let mut cmd = Command::new("mariadb");
    cmd.args(["--no-defaults", "--protocol=TCP", "-h127.0.0.1", "--skip-ssl", "--batch", "--skip-column-names"])
        .arg(format!("-P{port}"))
        .arg(format!("-u{user}"));
    if let Some(p) = password {
        cmd.arg(format!("-p{p}"));
    }
    let out = cmd.args(["-e", "SELECT 1"]).output().expect("run the mariadb CLI");
    if out.status.success() {
        return "ok".to_owned();
    }
    String::from_utf8_lossy(&out.stderr).trim().to_owned()
}

/// A router over the harness's servers whose `[auth]` is the query users and `extra_auth`.
fn start(extra_auth: &str) -> Router {
    Router::start(&both_protocols_config(4, &format!("{QUERY_USERS}{extra_auth}")))
}

#[test]
fn mysql_accounts_are_admitted_only_from_the_hosts_the_server_admits_them_from() {
    let n = |s: &str| unique_name(&format!("h_{s}"));
    let (exact, pattern, one, mask, mask1, local, multi, anyone) =
        (n("exact"), n("pat"), n("one"), n("mask"), n("mask1"), n("local"), n("multi"), n("any"));
    let _accounts = Accounts::create(&[
        (&exact, "127.0.0.1", Some("x")),
        (&pattern, "127.0.0.%", Some("x")),
        (&one, "127.0.0._", Some("x")),
        (&mask, "127.0.0.0/255.255.255.0", Some("x")),
        (&mask1, "127.0.0.1/255.255.255.255", Some("x")),
        (&local, "localhost", Some("x")),
        (&multi, "127.0.0.1", Some("one")),
        (&multi, "%", Some("any")),
        (&anyone, "%", Some("x")),
    ]);
    let router = start("");
    let (direct, through) = (dbs().my.primary_port, router.listen[1].port());
    let mut cases: Vec<(&str, &str, &str)> = Vec::new();
    for user in [&exact, &pattern, &one, &mask, &mask1, &local, &anyone] {
        for bind in [INSIDE, OUTSIDE] {
            cases.push((user, "x", bind));
        }
    }
    // The most specific host decides: from 127.0.0.1 only the 127.0.0.1 account's password
    // counts, never the '%' one's.
    cases.extend([(multi.as_str(), "one", INSIDE), (multi.as_str(), "any", INSIDE)]);
    let attempts = |port: u16| cases.iter().map(|(u, p, b)| (port, *u, *p, *b)).collect::<Vec<_>>();
    let (server, routed) = (pymysql(&attempts(direct)), pymysql(&attempts(through)));
    for (i, (user, password, bind)) in cases.iter().enumerate() {
        assert_eq!(routed[i], server[i], "{user}/{password} from {bind}: the router answers as the server does");
    }
    // The cases cover both answers, so the comparison above proves something either way.
    assert!(server.iter().any(|l| l.starts_with("ok")) && server.iter().any(|l| l.starts_with("err 1045")));
    assert_eq!(routed[0], format!("ok {exact}@127.0.0.1"));
    assert_eq!(routed[1], format!("err 1045 Access denied for user '{exact}'@'{OUTSIDE}' (using password: YES)"));

    // With skip-name-resolve a client of 127.0.0.1 is not 'localhost'.
    let cli = mariadb_cli(through, &local, Some("x"));
    assert!(
        cli.contains(&format!("ERROR 1045 (28000): Access denied for user '{local}'@'{INSIDE}' (using password: YES)")),
        "mariadb CLI: {cli}"
    );
    assert_eq!(mariadb_cli(through, &exact, Some("x")), "ok");
}

#[test]
fn an_empty_mysql_password_never_logs_in_through_the_router_without_the_opt_in() {
    let (local_only, open) = (unique_name("nopw_local"), unique_name("nopw_open"));
    // A password-less account the server admits from 127.0.0.1 only (a stock root@localhost),
    // and one it admits from anywhere.
    let _accounts = Accounts::create(&[(&local_only, "127.0.0.1", None), (&open, "%", None)]);
    let direct = dbs().my.primary_port;
    let denied =
        |user: &str, bind: &str| format!("err 1045 Access denied for user '{user}'@'{bind}' (using password: NO)");
    let server = pymysql(&[(direct, &local_only, "", INSIDE), (direct, &local_only, "", OUTSIDE)]);
    assert_eq!(server[0], format!("ok {local_only}@127.0.0.1"), "the server's view");
    // MariaDB challenges a login no account admits with a random loaded plugin; an ed25519
    // answer to an empty password is not empty, so its "using password" varies.
    let refused = format!("err 1045 Access denied for user '{local_only}'@'{OUTSIDE}' (using password: ");
    assert!(server[1].starts_with(&refused), "the server's view: {}", server[1]);

    let strict = start("");
    let port = strict.listen[1].port();
    let routed = pymysql(&[
        (port, &local_only, "", OUTSIDE),
        (port, &local_only, "", INSIDE),
        (port, &open, "", OUTSIDE),
        (port, &open, "", INSIDE),
    ]);
    assert_eq!(
        routed,
        [denied(&local_only, OUTSIDE), denied(&local_only, INSIDE), denied(&open, OUTSIDE), denied(&open, INSIDE)],
        "no empty password gets in, whatever its host"
    );
    let cli = mariadb_cli(port, &local_only, None);
    assert!(cli.contains(&format!("Access denied for user '{local_only}'@'{INSIDE}' (using password: NO)")), "{cli}");

    // The opt-in lets them in, still only from where the server would.
    let lenient = start("allow_empty_password = true\n");
    let port = lenient.listen[1].port();
    let routed =
        pymysql(&[(port, &local_only, "", OUTSIDE), (port, &local_only, "", INSIDE), (port, &open, "", OUTSIDE)]);
    assert_eq!(routed, [denied(&local_only, OUTSIDE), format!("ok {local_only}@127.0.0.1"), format!("ok {open}@%")]);
}

/// asyncpg logs in once per `(port, user, password, database)`; one line each:
/// `ok <current_user>` or `err <SQLSTATE> <message>`.
const ASYNCPG: &str = r#"
import sys, asyncio, asyncpg
async def main():
    for spec in sys.argv[1:]:
        port, user, password, db = spec.split('\t')
        try:
            c = await asyncpg.connect(host='127.0.0.1', port=int(port), user=user, password=password,
                                      database=db, timeout=10)
            print('ok', await c.fetchval('SELECT current_user'))
            await c.close()
        except asyncpg.PostgresError as e:
            print('err', e.sqlstate, e.args[0])
asyncio.run(main())
"#;

pub(crate) fn asyncpg(attempts: &[(u16, &str, &str, &str)]) -> Vec<String> {
    let specs = attempts.iter().map(|(port, user, password, db)| format!("{port}\t{user}\t{password}\t{db}"));
    let out = Command::new("/usr/bin/python3").args(["-c", ASYNCPG]).args(specs).output().expect("run python3");
    assert!(out.status.success(), "asyncpg script: {}", String::from_utf8_lossy(&out.stderr));
    let lines: Vec<String> = String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect();
    assert_eq!(lines.len(), attempts.len(), "{lines:?}");
    lines
}

/// PostgreSQL roles created for one test, dropped at its end.
struct PgRoles(Vec<String>);

impl PgRoles {
    fn create(sql: &[String], names: &[&str]) -> PgRoles {
        superuser().batch_execute(&sql.join(";\n")).expect("create roles");
        PgRoles(names.iter().map(|s| (*s).to_owned()).collect())
    }
}

impl Drop for PgRoles {
    fn drop(&mut self) {
        for n in &self.0 {
            let _ = superuser().batch_execute(&format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{n}'; DROP ROLE IF EXISTS {n}"
            ));
        }
    }
}

#[test]
fn expired_and_nologin_roles_are_refused_as_the_server_refuses_them() {
    let (expired, nologin, soon) = (unique_name("pt_expired"), unique_name("pt_nologin"), unique_name("pt_soon"));
    let _roles = PgRoles::create(
        &[
            format!("CREATE ROLE {expired} LOGIN PASSWORD 'pw' VALID UNTIL '2001-01-01'"),
            format!("CREATE ROLE {nologin} NOLOGIN PASSWORD 'pw'"),
            format!("CREATE ROLE {soon} LOGIN PASSWORD 'pw'"),
        ],
        &[&expired, &nologin, &soon],
    );
    let router = start("");
    let until = valid_until_in(Duration::from_secs(5));
    superuser().batch_execute(&format!("ALTER ROLE {soon} VALID UNTIL '{until}'")).expect("valid until");
    let (direct, through, db) = (dbs().pg.primary_port, router.port(), dbs().pg.database.as_str());
    let cases = [
        (expired.as_str(), "pw", db),
        (nologin.as_str(), "pw", db),
        (nologin.as_str(), "wrong", db),
        (soon.as_str(), "pw", db),
        (soon.as_str(), "wrong", "no_such_db"),
        (soon.as_str(), "pw", "no_such_db"),
    ];
    let attempts = |port: u16| cases.iter().map(|(u, p, d)| (port, *u, *p, *d)).collect::<Vec<_>>();
    let (server, routed) = (asyncpg(&attempts(direct)), asyncpg(&attempts(through)));
    // #36: the unknown database in the router's words (it has no pool for it), same code.
    let no_pool =
        "err 3D000 the router has no pool for database \"no_such_db\" (see [pool_template] in its configuration)";
    assert_eq!(routed[..5], server[..5], "the router answers as the server does");
    assert_eq!(routed[5], no_pool, "and refuses the database no pool serves");
    assert_eq!(server[0], format!("err 28P01 password authentication failed for user \"{expired}\""));
    assert_eq!(server[1], format!("err 28000 role \"{nologin}\" is not permitted to log in"));
    assert_eq!(server[2], format!("err 28P01 password authentication failed for user \"{nologin}\""));
    assert_eq!(server[3], format!("ok {soon}"));
    assert_eq!(server[4], format!("err 28P01 password authentication failed for user \"{soon}\""), "password first");
    assert_eq!(server[5], "err 3D000 database \"no_such_db\" does not exist");

    // Message for message: a role that may not log in completes the exchange (same verifier,
    // so the same salt) and is refused after AuthenticationOk.
    let direct_nologin = scram_transcript(direct, &nologin, "pw");
    assert_eq!(direct_nologin.last(), Some(&server[1].replacen("err", "E", 1)));
    assert_eq!(scram_transcript(through, &nologin, "pw"), direct_nologin);
    // An expired role is challenged with a mock salt by both (each its own), then refused.
    let shape = |seen: Vec<String>| -> Vec<String> {
        seen.into_iter()
            .map(|m| match m.strip_prefix("SASLContinue ") {
                Some(p) => {
                    format!("SASLContinue {}", p.split(',').filter(|a| !a.starts_with("s=")).collect::<String>())
                }
                None => m,
            })
            .collect()
    };
    let direct_expired = shape(scram_transcript(direct, &expired, "pw"));
    assert_eq!(direct_expired.last(), Some(&server[0].replacen("err", "E", 1)));
    assert_eq!(shape(scram_transcript(through, &expired, "pw")), direct_expired);

    // The router's answer for `soon` is cached (cache_ttl 60s), yet expires with the password.
    crate::support::eventually(Duration::from_secs(20), "the password expired", || {
        superuser().query_one(&format!("SELECT now() > '{until}'"), &[]).expect("now").get::<_, bool>(0)
    });
    let (server, routed) = (asyncpg(&attempts(direct)[3..4]), asyncpg(&attempts(through)[3..4]));
    assert_eq!(server, [format!("err 28P01 password authentication failed for user \"{soon}\"")]);
    assert_eq!(routed, server, "expired while cached");
}

/// A `VALID UNTIL` timestamp `d` from the server's now.
fn valid_until_in(d: Duration) -> String {
    superuser()
        .query_one(&format!("SELECT (now() + interval '{} seconds')::text", d.as_secs()), &[])
        .expect("now")
        .get(0)
}

/// One SCRAM login of `user` with `password` over a raw socket, as the messages the server
/// (or router) sent: `SASL`, `SASLContinue s=<salt>,i=<iterations>`, `SASLFinal`, `Ok`, and
/// `E <code> <message>` or `ReadyForQuery` to end it (no client library shows the salt or the
/// order of messages).
fn scram_transcript(port: u16, user: &str, password: &str) -> Vec<String> {
    use querypilot::protocol::pg::frontend::{encode_sasl_initial_response, encode_sasl_response};
    use querypilot::protocol::pg::{Authentication, BackendMessage, Frame, ScramClient};
    let mut body = 196608u32.to_be_bytes().to_vec();
    for s in ["user", user, "database", dbs().pg.database.as_str(), ""] {
        body.extend_from_slice(s.as_bytes());
        body.push(0);
    }
    let mut packet = (body.len() as u32 + 4).to_be_bytes().to_vec();
    packet.extend_from_slice(&body);
    let mut c = crate::pg_raw::Raw::open(port);
    c.send(&packet);
    let scram = ScramClient::new(user, password, "transcriptNonce1234").expect("scram client");
    let mut seen = Vec::new();
    while let Some((tag, body)) = c.recv() {
        let mut out = Vec::new();
        match BackendMessage::decode(&Frame::new(tag, &body)).expect("decode") {
            BackendMessage::Authentication(Authentication::Sasl { .. }) => {
                seen.push("SASL".to_owned());
                encode_sasl_initial_response("SCRAM-SHA-256", Some(scram.client_first().as_bytes()), &mut out)
                    .expect("encode");
            }
            BackendMessage::Authentication(Authentication::SaslContinue(data)) => {
                let text = String::from_utf8_lossy(data);
                let params: Vec<&str> = text.split(',').filter(|a| !a.starts_with("r=")).collect();
                seen.push(format!("SASLContinue {}", params.join(",")));
                let (client_final, _) = scram.handle_server_first(data).expect("server-first");
                encode_sasl_response(client_final.as_bytes(), &mut out).expect("encode");
            }
            BackendMessage::Authentication(Authentication::SaslFinal(_)) => seen.push("SASLFinal".to_owned()),
            BackendMessage::Authentication(Authentication::Ok) => seen.push("Ok".to_owned()),
            BackendMessage::ErrorResponse(_) => {
                let f = crate::pg_raw::fields(&body);
                let get = |k: u8| f.iter().find(|(key, _)| *key == k).map(|(_, v)| v.clone()).unwrap_or_default();
                seen.push(format!("E {} {}", get(b'C'), get(b'M')));
                break;
            }
            BackendMessage::ReadyForQuery(_) => {
                seen.push("ReadyForQuery".to_owned());
                break;
            }
            _ => {}
        }
        if !out.is_empty() {
            c.send(&out);
        }
    }
    seen
}

/// The salt the router challenges `user` with.
fn scram_salt(port: u16, user: &str) -> String {
    let seen = scram_transcript(port, user, "guess");
    let challenge = seen.iter().find_map(|m| m.strip_prefix("SASLContinue ")).expect("a SCRAM challenge");
    challenge.split(',').find_map(|a| a.strip_prefix("s=")).expect("a salt").to_owned()
}

#[test]
fn an_unknown_user_is_challenged_with_the_same_salt_every_time_and_a_backend_refusal_looks_like_a_wrong_password() {
    let known = unique_name("pt_salted");
    let _roles = PgRoles::create(&[format!("CREATE ROLE {known} LOGIN PASSWORD 'pw'")], &[&known]);
    let stored: String = superuser()
        .query_one("SELECT rolpassword FROM pg_authid WHERE rolname = $1", &[&known])
        .expect("pg_authid")
        .get(0);
    let stored_salt = stored.split(['$', ':']).nth(2).expect("the verifier's salt").to_owned();

    let toml = both_protocols_config(4, QUERY_USERS);
    let router = Router::start(&toml);
    let port = router.port();
    assert_eq!(scram_salt(port, &known), stored_salt, "a known role: its stored salt");
    let unknown = scram_salt(port, "pt_nobody_at_all");
    assert_eq!(scram_salt(port, "pt_nobody_at_all"), unknown, "an unknown user: the same salt on every try");
    assert_ne!(scram_salt(port, "pt_nobody_else"), unknown, "each name its own");
    router.reload_with(&toml).expect("reload");
    assert_eq!(scram_salt(port, "pt_nobody_at_all"), unknown, "across a reload");
    drop(router);
    // With mock_salt_key, across restarts too.
    let keyed = both_protocols_config(4, &format!("{QUERY_USERS}mock_salt_key = \"a key the operator keeps\"\n"));
    let (first, second) = (Router::start(&keyed), Router::start(&keyed));
    let salt = scram_salt(first.port(), "pt_nobody_at_all");
    assert_eq!(scram_salt(second.port(), "pt_nobody_at_all"), salt, "the same salt from another router (a restart)");
    drop((first, second));

    // The auth file holds the role's old verifier; the server now has another (same password,
    // new salt). The router accepts the right password, the backend refuses what it proved:
    // the client is told exactly what a wrong password gets.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    std::fs::write(&file, format!("\"{known}\" \"{stored}\"\n")).expect("write auth file");
    superuser().batch_execute(&format!("ALTER ROLE {known} PASSWORD 'pw'")).expect("new salt");
    let router = start(&format!("file = \"{}\"\n", file.display()));
    let db = dbs().pg.database.as_str();
    let answers = asyncpg(&[(router.port(), &known, "pw", db), (router.port(), &known, "wrong", db)]);
    let refused = format!("err 28P01 password authentication failed for user \"{known}\"");
    assert_eq!(answers, [refused.clone(), refused], "a right password the backend refuses looks like a wrong one");
}

#[test]
fn the_auth_query_resolves_no_name_through_the_connections_search_path() {
    let (q, victim, evil) = (unique_name("pt_authq"), unique_name("pt_victim"), unique_name("evil"));
    let lookup = format!("public.{q}_lookup");
    let _roles = PgRoles::create(
        &[
            format!("CREATE ROLE {q} LOGIN PASSWORD 'pw_{q}'"),
            format!("CREATE ROLE {victim} LOGIN PASSWORD 'pw'"),
            format!(
                "CREATE FUNCTION {lookup}(wanted text) RETURNS TABLE (r_name text, r_secret text)
                   LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog
                   AS $$ SELECT a.rolname::text, a.rolpassword FROM pg_authid a WHERE a.rolname = wanted $$"
            ),
            format!("REVOKE ALL ON FUNCTION {lookup}(text) FROM PUBLIC"),
            format!("GRANT EXECUTE ON FUNCTION {lookup}(text) TO {q}"),
            // Someone who can write a schema on the query user's search_path, ahead of
            // pg_catalog, puts a lower() of their own there.
            format!("CREATE SCHEMA {evil}"),
            format!("CREATE TABLE {evil}.calls (arg text)"),
            format!(
                "CREATE FUNCTION {evil}.lower(text) RETURNS text LANGUAGE plpgsql SECURITY DEFINER
                   AS $$ BEGIN INSERT INTO {evil}.calls VALUES ($1); RETURN $1; END $$"
            ),
            format!("GRANT USAGE ON SCHEMA {evil} TO {q}"),
            format!("ALTER ROLE {q} SET search_path = {evil}, pg_catalog"),
        ],
        &[&q, &victim],
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    std::fs::write(&file, format!("\"{q}\" \"pw_{q}\"\n")).expect("write auth file");
    let auth = format!(
        "file = \"{}\"\npg_query_user = \"{q}\"\npg_query = \"SELECT r_name, r_secret FROM {lookup}(lower($1))\"\n",
        file.display()
    );
    let router = Router::start(&both_protocols_config(4, &auth));
    let answers = asyncpg(&[(router.port(), &victim, "pw", dbs().pg.database.as_str())]);
    assert_eq!(answers, [format!("ok {victim}")], "the auth query ran");
    let calls: i64 = superuser().query_one(&format!("SELECT count(*) FROM {evil}.calls"), &[]).expect("calls").get(0);
    let _ = superuser().batch_execute(&format!("DROP SCHEMA {evil} CASCADE; DROP FUNCTION {lookup}(text)"));
    assert_eq!(calls, 0, "the query user's search_path never reached the auth query");
}
