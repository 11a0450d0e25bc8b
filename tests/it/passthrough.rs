//! Issue #23, clients log in as themselves: a pool without `username` passes each client's
//! own identity to PostgreSQL. Clients are checked against their stored SCRAM-SHA-256 or MD5
//! verifier from an auth file (PgBouncer's format, filled from `pg_authid`), and the router logs
//! in to the server with what the client's proof revealed; no plaintext password is configured
//! anywhere. Each role sees only what its grants allow and appears as itself in
//! `pg_stat_activity`; transaction pooling never lends one user's connection to another.

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::pg_util::{sqlstate, superuser};
use crate::router::Router;
use crate::support::{dbs, unique_name};

/// Three roles with their own table each, readable by that role alone.
pub(crate) struct Roles {
    pub(crate) names: Vec<String>,
}

impl Roles {
    /// Creates three roles whose passwords are stored as `encryption` (`scram-sha-256` or
    /// `md5`), each granted SELECT on its own table `<role>_t` holding its name.
    pub(crate) fn create(prefix: &str, encryption: &str) -> Roles {
        let names: Vec<String> = (0..3).map(|i| unique_name(&format!("{prefix}{i}"))).collect();
        let mut su = superuser();
        for n in &names {
            su.batch_execute(&format!(
                "SET password_encryption = '{encryption}';
                 CREATE ROLE {n} LOGIN PASSWORD 'pw_{n}';
                 RESET password_encryption;
                 CREATE TABLE public.{n}_t(owner text);
                 INSERT INTO public.{n}_t VALUES ('{n}');
                 GRANT SELECT ON public.{n}_t TO {n};"
            ))
            .expect("create role");
        }
        Roles { names }
    }

    /// `"role" "rolpassword"` lines from `pg_authid`: the server's own verifiers.
    pub(crate) fn userlist(&self) -> String {
        let mut su = superuser();
        let rows = su
            .query(
                "SELECT rolname::text, rolpassword FROM pg_authid WHERE rolname = ANY($1) ORDER BY 1",
                &[&self.names],
            )
            .expect("pg_authid");
        rows.iter().map(|r| format!("\"{}\" \"{}\"\n", r.get::<_, String>(0), r.get::<_, String>(1))).collect()
    }
}

impl Drop for Roles {
    fn drop(&mut self) {
        let mut su = superuser();
        for n in &self.names {
            let _ = su.batch_execute(&format!(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = '{n}';
                 DROP TABLE IF EXISTS public.{n}_t; DROP ROLE IF EXISTS {n};"
            ));
        }
    }
}

/// A router whose one pool `app` (transaction mode) has no credentials, checking clients
/// against `auth_file` with `auth_method`.
fn router(auth_file: &Path, auth_method: &str, max: u32) -> (Router, String) {
    let toml = config_text(auth_file, auth_method, max);
    (Router::start(&toml), toml)
}

/// The configuration [`router`] starts.
fn config_text(auth_file: &Path, auth_method: &str, max: u32) -> String {
    let toml = format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\
         auth_method = \"{auth_method}\"\n\n[pools.app]\nmode = \"transaction\"\nmax_connections = {max}\n\
         acquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
         [routing]\ndefault_pool = \"app\"\n\n[auth]\nfile = \"{file}\"\n",
        port = dbs().pg.primary_port,
        file = auth_file.display(),
    );
    assert!(!toml.contains("password"), "no plaintext password anywhere in the config");
    toml
}

pub(crate) fn client(port: u16, user: &str, password: &str) -> Result<postgres::Client, postgres::Error> {
    dbs().pg.config(port, user, password).connect(postgres::NoTls)
}

/// Each role logs in through the one credential-less pool, is itself on the server, reads its
/// own table and is refused the others'.
pub(crate) fn each_role_is_itself(port: u16, roles: &Roles) {
    let mut su = superuser();
    for n in &roles.names {
        let mut c = client(port, n, &format!("pw_{n}")).unwrap_or_else(|e| panic!("{n} logs in: {e:?}"));
        let row = c.query_one("SELECT current_user::text, session_user::text, pg_backend_pid()", &[]).expect("whoami");
        assert_eq!((row.get::<_, String>(0), row.get::<_, String>(1)), (n.clone(), n.clone()));
        let pid: i32 = row.get(2);
        let seen: String = su
            .query_one("SELECT usename::text FROM pg_stat_activity WHERE pid = $1", &[&pid])
            .expect("pg_stat_activity")
            .get(0);
        assert_eq!(&seen, n, "the server process serving {n} is attributed to {n}");
        let own: String = c.query_one(&format!("SELECT owner FROM public.{n}_t"), &[]).expect("own table").get(0);
        assert_eq!(&own, n);
        for other in roles.names.iter().filter(|o| *o != n) {
            let e = c.query_one(&format!("SELECT owner FROM public.{other}_t"), &[]).expect_err("not granted");
            assert_eq!(sqlstate(&e), "42501", "{n} reading {other}_t: {e}");
        }
    }
}

pub(crate) fn refusal(port: u16, user: &str, password: &str) -> (String, String) {
    let e = client(port, user, password).err().unwrap_or_else(|| panic!("{user}/{password} must be refused"));
    let db = e.as_db_error().unwrap_or_else(|| panic!("{user}: not a server error: {e}"));
    (db.code().code().to_owned(), db.message().to_owned())
}

#[test]
fn scram_roles_log_in_as_themselves_from_an_auth_file_and_reload_picks_up_a_new_password() {
    let roles = Roles::create("pt_scram", "scram-sha-256");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    std::fs::write(&file, roles.userlist()).expect("write auth file");
    let (router, toml) = router(&file, "scram-sha-256", 4);
    each_role_is_itself(router.port(), &roles);

    // A wrong password and an unknown user get the same answer.
    let a = &roles.names[0];
    for (user, password) in [(a.as_str(), "wrong"), ("pt_nobody", "wrong"), (a.as_str(), "")] {
        let (code, message) = refusal(router.port(), user, password);
        assert_eq!(code, "28P01", "{user}");
        assert_eq!(message, format!("password authentication failed for user \"{user}\""));
    }

    // The password changes on the server and in the auth file: after a reload the old one is
    // refused and the new one logs in (with a new backend connection: the new verifier's salt).
    superuser().batch_execute(&format!("ALTER ROLE {a} PASSWORD 'new_{a}'")).expect("alter role");
    std::fs::write(&file, roles.userlist()).expect("rewrite auth file");
    router.reload_with(&toml).expect("reload");
    assert_eq!(refusal(router.port(), a, &format!("pw_{a}")).0, "28P01", "old password after reload");
    let mut c = client(router.port(), a, &format!("new_{a}")).expect("new password after reload");
    let me: String = c.query_one("SELECT current_user::text", &[]).expect("whoami").get(0);
    assert_eq!(&me, a);
}

/// Adds `host all +<group> 127.0.0.1/32 md5` ahead of the harness's catch-all SCRAM line, so
/// members of `group` are challenged with MD5, and reloads the server's configuration.
pub(crate) fn md5_for_members_of(group: &str) {
    let mut su = superuser();
    su.batch_execute(&format!(
        "DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '{group}') THEN CREATE ROLE {group} NOLOGIN; END IF; END $$"
    ))
    .expect("group role");
    let hba: String = su.query_one("SHOW hba_file", &[]).expect("hba_file").get(0);
    let text = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
    let line = format!("host    all          +{group}   127.0.0.1/32    md5");
    if !text.contains(&line) {
        let patched: String =
            text.lines()
                .map(|l| {
                    if l.starts_with("host    all          all") {
                        format!("{line}\n{l}\n")
                    } else {
                        format!("{l}\n")
                    }
                })
                .collect();
        assert!(patched.contains(&line), "pg_hba.conf has a catch-all line to go before:\n{text}");
        std::fs::write(&hba, patched).expect("write pg_hba.conf");
    }
    su.batch_execute("SELECT pg_reload_conf()").expect("reload");
}

#[test]
fn md5_roles_log_in_as_themselves_from_an_auth_file() {
    let group = "pt_md5_users";
    md5_for_members_of(group);
    let roles = Roles::create("pt_md5", "md5");
    for n in &roles.names {
        superuser().batch_execute(&format!("GRANT {group} TO {n}")).expect("grant group");
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    let list = roles.userlist();
    assert!(list.lines().all(|l| l.contains("\"md5")), "MD5 secrets: {list}");
    std::fs::write(&file, list).expect("write auth file");
    let (router, _) = router(&file, "md5", 4);
    // The server's hba demands MD5 of these roles: the router answers with the stored secret.
    crate::support::eventually(Duration::from_secs(10), "pg_hba.conf reloaded", || {
        client(dbs().pg.primary_port, &roles.names[0], &format!("pw_{}", roles.names[0])).is_ok()
    });
    each_role_is_itself(router.port(), &roles);
    assert_eq!(refusal(router.port(), &roles.names[1], "wrong").0, "28P01");
}

/// A SCRAM verifier cannot check an MD5 client (nor an MD5 secret a SCRAM client): refused
/// like a wrong password, not served with someone else's identity.
#[test]
fn a_secret_of_the_other_kind_is_refused_like_a_wrong_password() {
    let roles = Roles::create("pt_kind", "scram-sha-256");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    std::fs::write(&file, roles.userlist()).expect("write auth file");
    let (router, _) = router(&file, "md5", 2);
    let n = &roles.names[0];
    let (code, message) = refusal(router.port(), n, &format!("pw_{n}"));
    assert_eq!((code.as_str(), message), ("28P01", format!("password authentication failed for user \"{n}\"")));
}

/// A pgbench script run as `user`: every statement fails (division by zero) unless it runs as
/// `user`, so a statement on another user's connection aborts the run.
fn whoami_script(dir: &Path, user: &str) -> String {
    let path = dir.join(format!("{user}.sql"));
    // Not a CASE with a constant 1/0, which the planner folds (and raises) whatever the test.
    let check = format!("SELECT 1 / (current_user = '{user}' AND session_user = '{user}')::int;");
    std::fs::write(&path, format!("BEGIN;\n{check}\nSELECT count(*) FROM public.{user}_t;\n{check}\nEND;\n{check}\n"))
        .expect("write script");
    path.display().to_string()
}

#[test]
fn transaction_pooling_never_runs_one_users_statement_on_anothers_connection_under_pgbench() {
    let roles = Roles::create("pt_bench", "scram-sha-256");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    std::fs::write(&file, roles.userlist()).expect("write auth file");
    // Fewer server connections than clients: users take turns, closing each other's idle ones.
    let (router, _) = router(&file, "scram-sha-256", 3);
    let port = router.port().to_string();
    // Every role at once, four clients each.
    let runs: Vec<_> = roles
        .names
        .iter()
        .map(|user| {
            let script = whoami_script(dir.path(), user);
            let child = Command::new("pgbench")
                .args(["-h", "127.0.0.1", "-p", &port, "-U", user, "-n", "-c", "4", "-j", "2", "-t", "100"])
                .args(["-M", "extended", "-f", &script, &dbs().pg.database])
                .env("PGPASSWORD", format!("pw_{user}"))
                .stdout(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("spawn pgbench");
            (user.clone(), child)
        })
        .collect();
    for (user, child) in runs {
        let out = child.wait_with_output().expect("pgbench output");
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success(), "pgbench as {user}: {}\n{stdout}\n{stderr}", out.status);
        assert!(stdout.contains("number of transactions actually processed: 400/400"), "{user}: {stdout}");
    }
    // The server never had more connections from these users than the pool-wide cap.
    let mut su = superuser();
    let open: i64 = su
        .query_one("SELECT count(*) FROM pg_stat_activity WHERE usename = ANY($1)", &[&roles.names])
        .expect("count")
        .get(0);
    assert!(open <= 3, "{open} server connections for a pool capped at 3");
}

/// MariaDB users created with `mysql_native_password`, each granted SELECT on its own table.
pub(crate) struct MyUsers {
    pub(crate) names: Vec<String>,
}

impl MyUsers {
    pub(crate) fn create(prefix: &str) -> MyUsers {
        use mysql::prelude::Queryable;
        let my = &dbs().my;
        let names: Vec<String> = (0..3).map(|i| unique_name(&format!("{prefix}{i}"))).collect();
        let mut root = my.superuser_client(my.primary_port);
        for n in &names {
            root.query_drop(format!(
                "CREATE USER '{n}'@'%' IDENTIFIED VIA mysql_native_password USING PASSWORD('pw_{n}');
                 CREATE TABLE {db}.{n}_t (owner VARCHAR(64));
                 INSERT INTO {db}.{n}_t VALUES ('{n}');
                 GRANT SELECT ON {db}.{n}_t TO '{n}'@'%';",
                db = my.database
            ))
            .expect("create user");
        }
        MyUsers { names }
    }

    /// `"user" "*HEX"` lines from `mysql.user`: the server's own stored hashes.
    fn userlist(&self) -> String {
        use mysql::prelude::Queryable;
        let my = &dbs().my;
        let mut root = my.superuser_client(my.primary_port);
        let list = self.names.iter().map(|n| format!("'{n}'")).collect::<Vec<_>>().join(", ");
        let rows: Vec<(String, String)> = root
            .query(format!("SELECT User, authentication_string FROM mysql.user WHERE User IN ({list}) ORDER BY 1"))
            .expect("mysql.user");
        rows.iter().map(|(u, h)| format!("\"{u}\" \"{h}\"\n")).collect()
    }
}

impl Drop for MyUsers {
    fn drop(&mut self) {
        use mysql::prelude::Queryable;
        let my = &dbs().my;
        let mut root = my.superuser_client(my.primary_port);
        for n in &self.names {
            let _ =
                root.query_drop(format!("DROP USER IF EXISTS '{n}'@'%'; DROP TABLE IF EXISTS {}.{n}_t", my.database));
        }
    }
}

/// One router, both protocols, no plaintext password anywhere: PostgreSQL roles and MariaDB
/// users log in through credential-less pools with their stored verifiers and hashes, each as
/// itself (mysql crate, mariadb CLI, PyMySQL and JDBC on the MariaDB side).
#[test]
fn a_config_without_any_plaintext_password_serves_postgres_and_mariadb_users_as_themselves() {
    use mysql::prelude::Queryable;
    let roles = Roles::create("pt_both", "scram-sha-256");
    let users = MyUsers::create("pt_my");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    let list = format!("{}{}", roles.userlist(), users.userlist());
    assert!(list.lines().all(|l| l.contains("\"SCRAM-SHA-256$") || l.contains("\"*")), "hashes only: {list}");
    std::fs::write(&file, list).expect("write auth file");
    let my = &dbs().my;
    let toml = both_protocols_config(4, &format!("file = \"{}\"\n", file.display()));
    assert!(!toml.contains("password"), "no plaintext password anywhere in the config");
    let router = Router::start(&crate::admin::with_metrics(&toml, None));
    each_role_is_itself(router.port(), &roles);

    let my_port = router.listen[1].port();
    let mut root = my.superuser_client(my.primary_port);
    for n in &users.names {
        let mut c = mysql::Conn::new(my.opts(my_port, n, &format!("pw_{n}")))
            .unwrap_or_else(|e| panic!("{n} logs in through the router: {e}"));
        let (me, id): (String, u64) =
            c.query_first("SELECT CURRENT_USER(), CONNECTION_ID()").expect("whoami").expect("row");
        assert_eq!(me, format!("{n}@%"));
        let seen: Option<String> = root
            .exec_first("SELECT USER FROM information_schema.PROCESSLIST WHERE ID = ?", (id,))
            .expect("processlist");
        assert_eq!(seen.as_deref(), Some(n.as_str()), "the server thread serving {n} is attributed to {n}");
        let own: Option<String> = c.query_first(format!("SELECT owner FROM {n}_t")).expect("own table");
        assert_eq!(own.as_deref(), Some(n.as_str()));
        for other in users.names.iter().filter(|o| *o != n) {
            match c.query_drop(format!("SELECT owner FROM {other}_t")) {
                Err(mysql::Error::MySqlError(e)) => assert_eq!(e.code, 1142, "{n} reading {other}_t: {e}"),
                other => panic!("{n} reading {other:?}_t must be denied"),
            }
        }
    }
    // A wrong password and an unknown user look the same: 1045.
    for (user, password) in [(users.names[0].as_str(), "wrong"), ("pt_my_nobody", "wrong")] {
        match mysql::Conn::new(my.opts(my_port, user, password)) {
            Err(mysql::Error::MySqlError(e)) => {
                assert_eq!(e.code, 1045, "{user}");
                assert_eq!(e.message, format!("Access denied for user '{user}'@'127.0.0.1' (using password: YES)"));
            }
            other => panic!("{user}/{password} must be refused, got {:?}", other.map(|_| ())),
        }
    }

    // The mariadb CLI, PyMySQL and JDBC log in as themselves too.
    let n = &users.names[1];
    let password = format!("pw_{n}");
    let cli = Command::new("mariadb")
        .args(["--no-defaults", "--protocol=TCP", "-h127.0.0.1", "--skip-ssl", "--batch", "--skip-column-names"])
        .arg(format!("-P{my_port}"))
        .arg(format!("-u{n}"))
        .arg(format!("-p{password}"))
        .arg(&my.database)
        .args(["-e", &format!("SELECT CURRENT_USER(); SELECT owner FROM {n}_t")])
        .output()
        .expect("run the mariadb CLI");
    let out = String::from_utf8_lossy(&cli.stdout);
    assert!(cli.status.success(), "mariadb CLI: {out}{}", String::from_utf8_lossy(&cli.stderr));
    assert_eq!(out.lines().collect::<Vec<_>>(), vec![format!("{n}@%"), n.clone()]);

    let py = format!(
        "import pymysql\nc = pymysql.connect(host='127.0.0.1', port={my_port}, user='{n}', password='{password}', database='{db}')\n\
         cur = c.cursor()\ncur.execute('SELECT CURRENT_USER()')\nprint(cur.fetchone()[0])\n\
         cur.execute('SELECT owner FROM {n}_t WHERE owner = %s', ('{n}',))\nprint(cur.fetchone()[0])\n",
        db = my.database
    );
    let out = Command::new("/usr/bin/python3").args(["-c", &py]).output().expect("run python3 (PyMySQL)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "PyMySQL: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.lines().collect::<Vec<_>>(), vec![format!("{n}@%"), n.clone()]);

    let url = format!("jdbc:mariadb://127.0.0.1:{my_port}/{}?useSsl=false", my.database);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors/JdbcWhoAmI.java");
    let out = Command::new("java")
        .args(["-cp", "/usr/share/java/mariadb-java-client.jar", script, &url, n, &password, &format!("{n}_t")])
        .output()
        .expect("run java (installed by .ci/deps.sh)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "JDBC: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.lines().collect::<Vec<_>>(), vec![format!("current_user {n}@%"), format!("owner {n}")]);

    // Metrics show the connections per user (idle ones stay open in transaction mode), and
    // neither they nor the admin API's view of the config show any secret.
    let (metrics, admin) = crate::admin::addrs(&router);
    let text = crate::admin::http(metrics, "GET", "/metrics", &[]).body;
    for (pool, user) in roles.names.iter().map(|r| ("pg", r)).chain(users.names.iter().map(|u| ("my", u))) {
        let (open, series) = crate::admin::sum(
            &text,
            "sqp_pool_user_connections",
            &[&format!("pool=\"{pool}\""), &format!("user=\"{user}\"")],
        );
        assert_eq!(series, 1, "one series for {user} on {pool}:\n{text}");
        assert!(open >= 1.0, "{user} has a connection open on {pool}");
    }
    let config = crate::admin::http(admin, "GET", "/api/config", &[]).body;
    for shown in [&text, &config] {
        assert!(!shown.contains("pw_") && !shown.contains("SCRAM-SHA-256$") && !shown.contains("\"*"), "{shown}");
    }
    assert!(config.contains("userlist.txt"), "the auth file's path is shown: {config}");
}

/// `auth.max_failed_logins`: after two failures from 127.0.0.1 even the right password is
/// refused (unchecked, with the same 28P01) until a reload lifts the limit.
#[test]
fn an_address_with_too_many_failed_logins_is_refused_even_with_the_right_password() {
    let roles = Roles::create("pt_limit", "scram-sha-256");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    std::fs::write(&file, roles.userlist()).expect("write auth file");
    let base = config_text(&file, "scram-sha-256", 2);
    let limited = base.replace("[auth]\n", "[auth]\nmax_failed_logins = 2\n");
    let router = Router::start(&limited);
    let n = &roles.names[0];
    let right = format!("pw_{n}");
    client(router.port(), n, &right).expect("the right password before any failure");
    for _ in 0..2 {
        assert_eq!(refusal(router.port(), n, "wrong").0, "28P01");
    }
    let (code, message) = refusal(router.port(), n, &right);
    assert_eq!((code.as_str(), message), ("28P01", format!("password authentication failed for user \"{n}\"")));
    router.reload_with(&base).expect("reload without the limit");
    client(router.port(), n, &right).expect("the limit is lifted by the reload");
}

/// PyMySQL threads for every user at once, each checking `CURRENT_USER()` inside explicit
/// transactions and outside them (autocommit), through a pool with fewer server connections
/// than clients: a statement on another user's connection fails the run.
#[test]
fn transaction_pooling_never_runs_one_mariadb_users_statement_on_anothers_connection_under_load() {
    let users = MyUsers::create("pt_myload");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    std::fs::write(&file, users.userlist()).expect("write auth file");
    let my = &dbs().my;
    let toml = format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.my]\nmode = \"transaction\"\ndatabase = \"{db}\"\nmax_connections = 3\nacquire_timeout = \"30s\"\n\
         backends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
         [routing]\ndefault_pool = \"my\"\nmysql_default_pool = \"my\"\n\n[auth]\nfile = \"{file}\"\n",
        db = my.database,
        port = my.primary_port,
        file = file.display(),
    );
    let router = Router::start(&toml);
    let py = format!(
        "import pymysql, threading\nerrors = []\ndone = []\n\
         def run(user):\n    try:\n\
         \x20       c = pymysql.connect(host='127.0.0.1', port={port}, user=user, password='pw_' + user, database='{db}', autocommit=True)\n\
         \x20       cur = c.cursor()\n        me = user + '@%'\n        for i in range(60):\n\
         \x20           cur.execute('BEGIN')\n            cur.execute('SELECT CURRENT_USER()')\n            a = cur.fetchone()[0]\n\
         \x20           cur.execute('SELECT owner FROM ' + user + '_t')\n            b = cur.fetchone()[0]\n\
         \x20           cur.execute('COMMIT')\n            cur.execute('SELECT CURRENT_USER()')\n            d = cur.fetchone()[0]\n\
         \x20           if (a, b, d) != (me, user, me):\n                raise Exception('%s saw %r' % (user, (a, b, d)))\n\
         \x20       done.append(user)\n    except Exception as e:\n        errors.append(repr(e))\n\
         users = {users:?}\nts = [threading.Thread(target=run, args=(u,)) for u in users for _ in range(3)]\n\
         for t in ts: t.start()\nfor t in ts: t.join()\n\
         print(len(done), errors)\nassert not errors and len(done) == 3 * len(users), errors\n",
        port = router.port(),
        db = my.database,
        users = users.names,
    );
    let out = Command::new("/usr/bin/python3").args(["-c", &py]).output().expect("run python3 (PyMySQL)");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "PyMySQL load: {stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(stdout.trim(), "9 []");
}

/// A router config with a PostgreSQL and a MySQL listener, one credential-less transaction pool
/// per server (`max` connections each) and `auth` as the body of its `[auth]` table.
pub(crate) fn both_protocols_config(max: u32, auth: &str) -> String {
    let (pg, my) = (&dbs().pg, &dbs().my);
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n\
         [[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         [[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.pg]\nmode = \"transaction\"\ndatabase = \"{pgdb}\"\nmax_connections = {max}\n\
         backends = [{{ host = \"127.0.0.1\", port = {pgport} }}]\n\n\
         [pools.my]\nmode = \"transaction\"\ndatabase = \"{mydb}\"\nmax_connections = {max}\n\
         backends = [{{ host = \"127.0.0.1\", port = {myport} }}]\n\n\
         [routing]\ndefault_pool = \"pg\"\nmysql_default_pool = \"my\"\n\n[auth]\n{auth}",
        pgdb = pg.database,
        pgport = pg.primary_port,
        mydb = my.database,
        myport = my.primary_port,
    )
}

/// A pass-through pool with room, a user at its own `max_user_connections`: the user's second
/// statement waits for its first one's connection (never a second connection of its own), the
/// core meanwhile serves another user, and the waiting statement runs once the first is done.
#[test]
fn a_user_at_its_own_cap_waits_for_its_connection_while_the_core_serves_the_others() {
    use crate::shape_limit::{held_pg, lock_key, pg_waiting_on};
    use std::sync::mpsc;
    let roles = Roles::create("pt_cap", "scram-sha-256");
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("userlist.txt");
    std::fs::write(&file, roles.userlist()).expect("write auth file");
    let toml = config_text(&file, "scram-sha-256", 4)
        .replace("max_connections = 4\n", "max_connections = 4\nmax_user_connections = 1\n");
    let router = Router::start(&toml);
    let (alice, bob) = (&roles.names[0], &roles.names[1]);
    let login =
        |user: &str| client(router.port(), user, &format!("pw_{user}")).unwrap_or_else(|e| panic!("{user}: {e}"));
    let (mut first, mut second, mut other) = (login(alice), login(alice), login(bob));
    let key = lock_key();
    let mut lock = superuser();
    lock.execute("SELECT pg_advisory_lock($1)", &[&key]).expect("take the lock");
    let held = held_pg(key);
    let running = {
        let held = held.clone();
        std::thread::spawn(move || first.simple_query(&held).map(|_| ()))
    };
    crate::support::eventually(Duration::from_secs(20), "the first statement to wait on the lock", || {
        pg_waiting_on(key) == 1
    });
    let waiting = std::thread::spawn(move || second.simple_query(&held).map(|_| ()));
    // The second statement waits in the router for the user's one connection...
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(pg_waiting_on(key), 1, "{alice}'s second statement is not on a connection of its own");
    // ...and the core goes on serving the others (a checkout spinning on its user's cap would
    // hold the one core, and this would never answer).
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || tx.send(other.simple_query("SELECT 1").map(|_| ())));
    rx.recv_timeout(Duration::from_secs(20)).expect("the other user is answered").expect("SELECT 1");
    let conns: i64 = superuser()
        .query_one("SELECT count(*) FROM pg_stat_activity WHERE usename = $1", &[alice])
        .expect("pg_stat_activity")
        .get(0);
    assert_eq!(conns, 1, "{alice} holds one server connection at most");
    lock.execute("SELECT pg_advisory_unlock($1)", &[&key]).expect("let go");
    running.join().expect("thread").expect("the first statement ran");
    waiting.join().expect("thread").expect("the second statement ran after it");
}
