//! Issue #23, the auth query: a credential-less pool checks clients against the secrets their
//! server stores, fetched at login through a dedicated query user, cached for `cache_ttl`.
//! The query users log in with what the auth file holds for them — PostgreSQL an MD5 secret,
//! MariaDB `sha1:` + SHA1(password) — so no plaintext password is configured anywhere.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::passthrough::{
    both_protocols_config, client, each_role_is_itself, md5_for_members_of, refusal, MyUsers, Roles,
};
use crate::pg_util::superuser;
use crate::router::Router;
use crate::support::{dbs, unique_name};

/// The group whose members the server challenges with MD5 (see [`md5_for_members_of`]).
const MD5_GROUP: &str = "pt_md5_users";

/// The PostgreSQL query user: a role stored as MD5 (so the router can answer the server's MD5
/// challenge with the stored secret) that may run one SECURITY DEFINER lookup function — the
/// documented setup, since `pg_authid` is readable by superusers only.
struct PgQueryUser {
    name: String,
}

impl PgQueryUser {
    fn create() -> PgQueryUser {
        md5_for_members_of(MD5_GROUP);
        let n = unique_name("pq_auth");
        superuser()
            .batch_execute(&format!(
                "SET password_encryption = 'md5';
                 CREATE ROLE {n} LOGIN PASSWORD 'pw_{n}' IN ROLE {MD5_GROUP};
                 RESET password_encryption;
                 CREATE FUNCTION public.{n}_lookup(wanted text) RETURNS TABLE (r_name text, r_secret text)
                   LANGUAGE sql SECURITY DEFINER SET search_path = pg_catalog
                   AS $$ SELECT a.rolname::text, a.rolpassword FROM pg_authid a
                         WHERE a.rolname = wanted AND a.rolcanlogin $$;
                 REVOKE ALL ON FUNCTION public.{n}_lookup(text) FROM PUBLIC;
                 GRANT EXECUTE ON FUNCTION public.{n}_lookup(text) TO {n};"
            ))
            .expect("create the query user");
        PgQueryUser { name: n }
    }

    /// Its auth file line: the MD5 secret from `pg_authid`.
    fn entry(&self) -> String {
        let secret: String = superuser()
            .query_one("SELECT rolpassword FROM pg_authid WHERE rolname = $1", &[&self.name])
            .expect("pg_authid")
            .get(0);
        assert!(secret.starts_with("md5"), "stored as MD5: {secret}");
        format!("\"{}\" \"{secret}\"\n", self.name)
    }

    /// `[auth]` keys running the query as this user.
    fn keys(&self) -> String {
        format!("pg_query_user = \"{n}\"\npg_query = \"SELECT * FROM public.{n}_lookup($1)\"\n", n = self.name)
    }
}

impl Drop for PgQueryUser {
    fn drop(&mut self) {
        let n = &self.name;
        let _ = superuser().batch_execute(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{n}';
             DROP FUNCTION IF EXISTS public.{n}_lookup(text); DROP ROLE IF EXISTS {n};"
        ));
    }
}

/// The MariaDB query user: a `mysql_native_password` account that may read `mysql.user` and
/// connect to the pool's database (MariaDB wants some privilege there; SHOW VIEW reads no data).
struct MyQueryUser {
    name: String,
}

impl MyQueryUser {
    fn create() -> MyQueryUser {
        use mysql::prelude::Queryable;
        let my = &dbs().my;
        let n = unique_name("mq_auth");
        my.superuser_client(my.primary_port)
            .query_drop(format!(
                "CREATE USER '{n}'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('pw_{n}');
                 GRANT SELECT ON mysql.user TO '{n}'@'%';
                 GRANT SHOW VIEW ON {db}.* TO '{n}'@'%';",
                db = my.database
            ))
            .expect("create the query user");
        MyQueryUser { name: n }
    }

    /// Its auth file line: `sha1:` + SHA1(password), which answers a native scramble.
    fn entry(&self) -> String {
        use mysql::prelude::Queryable;
        let my = &dbs().my;
        let stage1: String = my
            .superuser_client(my.primary_port)
            .query_first(format!("SELECT SHA1('pw_{}')", self.name))
            .expect("sha1")
            .expect("row");
        format!("\"{}\" \"sha1:{stage1}\"\n", self.name)
    }
}

impl Drop for MyQueryUser {
    fn drop(&mut self) {
        use mysql::prelude::Queryable;
        let my = &dbs().my;
        let _ = my.superuser_client(my.primary_port).query_drop(format!("DROP USER IF EXISTS '{}'@'%'", self.name));
    }
}

/// A router with one credential-less PostgreSQL pool `app` (transaction mode) checking clients
/// with `auth_method` against what `[auth]` fetches; also returns its configuration.
fn pg_router(file: &Path, auth: &str, auth_method: &str) -> (Router, String) {
    let toml = pg_config(file, auth, auth_method);
    (Router::start(&toml), toml)
}

/// The configuration [`pg_router`] starts.
fn pg_config(file: &Path, auth: &str, auth_method: &str) -> String {
    let pg = &dbs().pg;
    let toml = format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\n\
         bind = \"127.0.0.1:0\"\nauth_method = \"{auth_method}\"\n\n[pools.app]\nmode = \"transaction\"\n\
         database = \"{db}\"\nmax_connections = 6\nacquire_timeout = \"20s\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n[routing]\ndefault_pool = \"app\"\n\n\
         [auth]\nfile = \"{file}\"\n{auth}",
        db = pg.database,
        port = pg.primary_port,
        file = file.display(),
    );
    assert!(!toml.lines().any(|l| l.starts_with("password")), "no plaintext password anywhere in the config");
    toml
}

fn whoami(port: u16, user: &str, password: &str) -> String {
    let mut c = client(port, user, password).unwrap_or_else(|e| panic!("{user}/{password} logs in: {e:?}"));
    c.query_one("SELECT current_user::text", &[]).expect("whoami").get(0)
}

#[test]
fn scram_roles_log_in_through_the_auth_query_and_a_changed_password_counts_after_the_ttl() {
    let query_user = PgQueryUser::create();
    let roles = Roles::create("pq_scram", "scram-sha-256");
    let changing = Roles::create("pq_pw", "scram-sha-256");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    // The file holds the query user's MD5 secret and nothing else.
    std::fs::write(&file, query_user.entry()).expect("write auth file");
    let ttl = Duration::from_secs(4);
    let (router, toml) = pg_router(&file, &format!("{}cache_ttl = \"4s\"\n", query_user.keys()), "scram-sha-256");
    let port = router.port();

    // Cached: a password changed on the server is refused once (the cached verifier is the old
    // one), and that failure has the next login fetch the new verifier.
    let a = &changing.names[0];
    assert_eq!(whoami(port, a, &format!("pw_{a}")), *a);
    superuser().batch_execute(&format!("ALTER ROLE {a} PASSWORD 'new_{a}'")).expect("alter role");
    assert_eq!(refusal(port, a, &format!("new_{a}")).0, "28P01", "the cached verifier is the old one");
    assert_eq!(whoami(port, a, &format!("new_{a}")), *a, "fetched again after the failure");

    // After the TTL the old password is refused and the new one accepted, no failure needed.
    let b = &changing.names[1];
    assert_eq!(whoami(port, b, &format!("pw_{b}")), *b);
    superuser().batch_execute(&format!("ALTER ROLE {b} PASSWORD 'new_{b}'")).expect("alter role");
    std::thread::sleep(ttl + Duration::from_millis(500));
    assert_eq!(refusal(port, b, &format!("pw_{b}")).0, "28P01", "old password after the TTL");
    assert_eq!(whoami(port, b, &format!("new_{b}")), *b, "new password after the TTL");

    // A reload flushes the cache: the new password works at once.
    let c = &changing.names[2];
    assert_eq!(whoami(port, c, &format!("pw_{c}")), *c);
    superuser().batch_execute(&format!("ALTER ROLE {c} PASSWORD 'new_{c}'")).expect("alter role");
    router.reload_with(&toml).expect("reload");
    assert_eq!(whoami(port, c, &format!("new_{c}")), *c, "fetched again after the reload");

    // Three roles with different grants, each itself; unknown users and wrong passwords alike.
    each_role_is_itself(port, &roles);
    for (user, password) in [(roles.names[0].as_str(), "wrong"), ("pq_nobody", "wrong")] {
        let (code, message) = refusal(port, user, password);
        assert_eq!((code.as_str(), message), ("28P01", format!("password authentication failed for user \"{user}\"")));
    }
}

#[test]
fn md5_roles_log_in_through_the_auth_query() {
    let query_user = PgQueryUser::create();
    let roles = Roles::create("pq_md5", "md5");
    for n in &roles.names {
        superuser().batch_execute(&format!("GRANT {MD5_GROUP} TO {n}")).expect("grant group");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    std::fs::write(&file, query_user.entry()).expect("write auth file");
    let (router, _) = pg_router(&file, &query_user.keys(), "md5");
    crate::support::eventually(Duration::from_secs(10), "pg_hba.conf reloaded", || {
        client(dbs().pg.primary_port, &query_user.name, &format!("pw_{}", query_user.name)).is_ok()
    });
    each_role_is_itself(router.port(), &roles);
    assert_eq!(refusal(router.port(), &roles.names[1], "wrong").0, "28P01");
}

/// One MariaDB user through the router with the mariadb CLI, PyMySQL and JDBC: each prints
/// `CURRENT_USER()`, and the CLI the owner of the user's own table.
fn mariadb_clients_are(port: u16, user: &str, password: &str) {
    let my = &dbs().my;
    let cli = Command::new("mariadb")
        .args(["--no-defaults", "--protocol=TCP", "-h127.0.0.1", "--skip-ssl", "--batch", "--skip-column-names"])
        .arg(format!("-P{port}"))
        .arg(format!("-u{user}"))
        .arg(format!("-p{password}"))
        .arg(&my.database)
        .args(["-e", &format!("SELECT CURRENT_USER(); SELECT owner FROM {user}_t")])
        .output()
        .expect("run the mariadb CLI");
    let out = String::from_utf8_lossy(&cli.stdout);
    assert!(cli.status.success(), "mariadb CLI: {out}{}", String::from_utf8_lossy(&cli.stderr));
    assert_eq!(out.lines().collect::<Vec<_>>(), vec![format!("{user}@%"), user.to_owned()]);

    let py = format!(
        "import pymysql\nc = pymysql.connect(host='127.0.0.1', port={port}, user='{user}', password='{password}', database='{db}')\n\
         cur = c.cursor()\ncur.execute('SELECT CURRENT_USER()')\nprint(cur.fetchone()[0])\n",
        db = my.database
    );
    let out = Command::new("/usr/bin/python3").args(["-c", &py]).output().expect("run python3 (PyMySQL)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "PyMySQL: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.trim(), format!("{user}@%"));

    let url = format!("jdbc:mariadb://127.0.0.1:{port}/{}?useSsl=false", my.database);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors/JdbcWhoAmI.java");
    let out = Command::new("java")
        .args(["-cp", "/usr/share/java/mariadb-java-client.jar", script, &url, user, password, &format!("{user}_t")])
        .output()
        .expect("run java (installed by .ci/deps.sh)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "JDBC: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.lines().next(), Some(format!("current_user {user}@%").as_str()));
}

fn my_login(port: u16, user: &str, password: &str) -> Result<mysql::Conn, mysql::Error> {
    mysql::Conn::new(dbs().my.opts(port, user, password))
}

fn my_refused(port: u16, user: &str, password: &str) {
    match my_login(port, user, password) {
        Err(mysql::Error::MySqlError(e)) => {
            assert_eq!(e.code, 1045, "{user}");
            assert_eq!(e.message, format!("Access denied for user '{user}'@'127.0.0.1' (using password: YES)"));
        }
        other => panic!("{user}/{password} must be refused, got {:?}", other.map(|_| ())),
    }
}

/// One router, both protocols, secrets from the auth query only and no plaintext password
/// anywhere: PostgreSQL roles and MariaDB users log in as themselves with their grants, and a
/// MariaDB password changed on the server counts once the TTL is over.
#[test]
fn a_config_without_plaintext_serves_postgres_and_mariadb_users_through_the_auth_query() {
    use mysql::prelude::Queryable;
    let (pg_query, my_query) = (PgQueryUser::create(), MyQueryUser::create());
    let roles = Roles::create("pq_both", "scram-sha-256");
    let users = MyUsers::create("mq_my");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    let list = format!("{}{}", pg_query.entry(), my_query.entry());
    assert!(list.lines().all(|l| l.contains("\"md5") || l.contains("\"sha1:")), "hashes only: {list}");
    std::fs::write(&file, list).expect("write auth file");
    let auth = format!(
        "file = \"{}\"\n{}mysql_query_user = \"{}\"\ncache_ttl = \"3s\"\n",
        file.display(),
        pg_query.keys(),
        my_query.name
    );
    let my = &dbs().my;
    let toml = both_protocols_config(5, &auth);
    assert!(!toml.contains("password"), "no plaintext password anywhere in the config");
    let router = Router::start(&crate::admin::with_metrics(&toml, None));
    each_role_is_itself(router.port(), &roles);
    assert_eq!(refusal(router.port(), "pq_nobody", "wrong").0, "28P01");

    let my_port = router.listen[1].port();
    for n in &users.names {
        let mut c = my_login(my_port, n, &format!("pw_{n}")).unwrap_or_else(|e| panic!("{n} logs in: {e}"));
        let me: Option<String> = c.query_first("SELECT CURRENT_USER()").expect("whoami");
        assert_eq!(me, Some(format!("{n}@%")));
        let own: Option<String> = c.query_first(format!("SELECT owner FROM {n}_t")).expect("own table");
        assert_eq!(own.as_deref(), Some(n.as_str()));
        for other in users.names.iter().filter(|o| *o != n) {
            match c.query_drop(format!("SELECT owner FROM {other}_t")) {
                Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1142, "{n} reading {other}_t: {e}"),
                res => panic!("{n} reading {other}_t must be denied, got {res:?}"),
            }
        }
    }
    my_refused(my_port, &users.names[0], "wrong");
    my_refused(my_port, "mq_nobody", "wrong");
    let n = &users.names[1];
    mariadb_clients_are(my_port, n, &format!("pw_{n}"));

    // The password changes on the server: after the TTL the old one is refused, the new one in.
    let n = &users.names[2];
    my.superuser_client(my.primary_port)
        .query_drop(format!("ALTER USER '{n}'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('new_{n}')"))
        .expect("alter user");
    std::thread::sleep(Duration::from_millis(3500));
    my_refused(my_port, n, &format!("pw_{n}"));
    let mut c = my_login(my_port, n, &format!("new_{n}")).expect("the new password after the TTL");
    let me: Option<String> = c.query_first("SELECT CURRENT_USER()").expect("whoami");
    assert_eq!(me, Some(format!("{n}@%")));

    // Failed logins are counted by listener and reason, never by user.
    let (metrics, _) = crate::admin::addrs(&router);
    let text = crate::admin::http(metrics, "GET", "/metrics", &[]).body;
    let count = |listener: &str, reason: &str| {
        let filters = [format!("listener=\"{listener}\""), format!("reason=\"{reason}\"")];
        crate::admin::sum(&text, "sqp_auth_failures_total", &[&filters[0], &filters[1]]).0
    };
    assert_eq!(count("postgres-0", "unknown_user"), 1.0, "{text}");
    assert_eq!(count("mysql-1", "unknown_user"), 1.0, "{text}");
    assert_eq!(count("mysql-1", "wrong_password"), 2.0, "a wrong and an old password:\n{text}");
    assert_eq!(count("mysql-1", "auth_query_failed"), 0.0, "{text}");
    let series: Vec<&str> = text.lines().filter(|l| l.starts_with("sqp_auth_failures_total")).collect();
    assert!(series.iter().all(|l| !l.contains("user=") && !l.contains("mq_")), "{series:?}");
}

/// An auth query that fails on the server (the query user may not read `pg_authid`) refuses
/// the client exactly like a wrong password, and is counted as `auth_query_failed`.
#[test]
fn a_failing_auth_query_looks_like_a_wrong_password_and_is_counted() {
    let query_user = PgQueryUser::create();
    let roles = Roles::create("pq_fail", "scram-sha-256");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    std::fs::write(&file, query_user.entry()).expect("write auth file");
    // pg_authid itself, not the SECURITY DEFINER function: permission denied.
    let keys = format!(
        "pg_query_user = \"{}\"\npg_query = \"SELECT rolname, rolpassword FROM pg_authid WHERE rolname = $1\"\n",
        query_user.name
    );
    let router = Router::start(&crate::admin::with_metrics(&pg_config(&file, &keys, "scram-sha-256"), None));
    let n = &roles.names[0];
    let (code, message) = refusal(router.port(), n, &format!("pw_{n}"));
    assert_eq!((code.as_str(), message), ("28P01", format!("password authentication failed for user \"{n}\"")));
    let (metrics, _) = crate::admin::addrs(&router);
    let text = crate::admin::http(metrics, "GET", "/metrics", &[]).body;
    let failed = crate::admin::sum(&text, "sqp_auth_failures_total", &["reason=\"auth_query_failed\""]).0;
    assert_eq!(failed, 1.0, "{text}");
    assert_eq!(crate::admin::sum(&text, "sqp_auth_failures_total", &["reason=\"wrong_password\""]).0, 0.0);
}
