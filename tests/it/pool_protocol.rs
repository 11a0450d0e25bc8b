//! Issue #25: a pool without `protocol` serves each client with the client's own protocol; when
//! its backend speaks the other one, the login fails with an error that names the pool and the
//! fix, instead of a malformed packet on the first statement. `--check` warns about such pools
//! when both listener kinds could reach them.

// Blocking test code driving child processes, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::io::Write as _;
use std::process::Command;

use crate::mysql_session::{my_config, my_pool};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::dbs;

/// A pool without `protocol` named `name` on the PostgreSQL primary, with a short connect timeout.
fn pg_backed(name: &str) -> String {
    pg_pool(name, dbs().pg.primary_port, "transaction", 2) + "connect_timeout = \"10s\"\n"
}

#[test]
fn mariadb_cli_and_pymysql_on_a_pool_of_postgresql_servers_get_the_explicit_error() {
    let pg = &dbs().pg;
    let pools = my_pool("main", "transaction", 2) + &pg_backed("pgside");
    let router = Router::start(&my_config(&[0], &pools, "main"));
    let port = router.port().to_string();
    let cli = Command::new("mariadb")
        .args(["--no-defaults", "-h", "127.0.0.1", "-P", &port, "-u", &pg.user])
        .arg(format!("-p{}", pg.password))
        .args(["-N", "-B", "-e", "SELECT 1", "pgside"])
        .output()
        .expect("run mariadb");
    let err = String::from_utf8_lossy(&cli.stderr);
    assert!(!cli.status.success(), "mariadb CLI must be refused: {err}");
    assert!(err.contains("ERROR 9003 (08004)"), "mariadb CLI: {err}");
    assert!(err.contains("pool \"pgside\"") && err.contains("speaks the postgres protocol"), "names the pool: {err}");
    assert!(err.contains("set protocol = \"postgres\" on [pools.pgside]"), "gives the fix: {err}");

    let script = "import sys, pymysql\ntry:\n    c = pymysql.connect(host='127.0.0.1', port=int(sys.argv[1]), \
                  user=sys.argv[2], password=sys.argv[3], database='pgside')\n    c.cursor().execute('SELECT 1')\n    \
                  print('connected')\nexcept pymysql.err.OperationalError as e:\n    print('refused', e.args[0], e.args[1])\n";
    let out = Command::new("/usr/bin/python3")
        .args(["-c", script, &port, &pg.user, &pg.password])
        .output()
        .expect("run python3");
    let out = String::from_utf8_lossy(&out.stdout);
    assert!(out.starts_with("refused 9003") && out.contains("[pools.pgside]"), "PyMySQL: {out}");
    // The MySQL pool still serves its clients.
    let ok = Command::new("mariadb")
        .args(["--no-defaults", "-h", "127.0.0.1", "-P", &port, "-u", &dbs().my.user])
        .arg(format!("-p{}", dbs().my.password))
        .args(["-N", "-B", "-e", "SELECT @@port", "main"])
        .output()
        .expect("run mariadb");
    assert_eq!(String::from_utf8_lossy(&ok.stdout).trim(), dbs().my.primary_port.to_string());
}

#[test]
fn postgres_crate_and_psql_on_a_pool_of_mariadb_servers_get_the_explicit_fatal() {
    let (pg, my) = (&dbs().pg, &dbs().my);
    let pools = pg_pool("main", pg.primary_port, "transaction", 2) + &my_pool("myside", "transaction", 2);
    let router = Router::start(&pg_config(&[0], &pools, "main"));
    let err = pg
        .config(router.port(), &my.user, &my.password)
        .dbname("myside")
        .connect(postgres::NoTls)
        .err()
        .expect("the login must fail");
    let db = err.as_db_error().unwrap_or_else(|| panic!("a server error, got {err}"));
    assert_eq!(db.code(), &postgres::error::SqlState::SQLSERVER_REJECTED_ESTABLISHMENT_OF_SQLCONNECTION);
    assert_eq!(db.severity(), "FATAL");
    assert!(db.message().contains("pool \"myside\"") && db.message().contains("speaks the mysql protocol"), "{db}");
    assert!(db.message().contains("set protocol = \"mysql\" on [pools.myside]"), "gives the fix: {db}");

    let out = Command::new("psql")
        .args(["-X", "-h", "127.0.0.1", "-p", &router.port().to_string(), "-U", &my.user, "-d", "myside"])
        .args(["-c", "SELECT 1"])
        .env("PGPASSWORD", &my.password)
        .env("PGCONNECT_TIMEOUT", "10")
        .output()
        .expect("run psql");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && stderr.contains("FATAL:") && stderr.contains("[pools.myside]"), "psql: {stderr}");
    let mut main =
        pg.config(router.port(), &pg.user, &pg.password).dbname("main").connect(postgres::NoTls).expect("main");
    let row = main.query_one("SELECT pg_is_in_recovery()", &[]).expect("the PostgreSQL pool still serves");
    assert!(!row.get::<_, bool>(0));
}

#[test]
fn check_warns_about_a_pool_without_protocol_behind_both_listeners_and_still_accepts_it() {
    let text = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:6432\"\n\n\
                [[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:6433\"\n\n\
                [pools.shared]\nusername = \"u\"\npassword = \"p\"\nbackends = [{ host = \"127.0.0.1\", port = 5432 }]\n\n\
                [pools.my]\nprotocol = \"mysql\"\nusername = \"u\"\npassword = \"p\"\n\
                backends = [{ host = \"127.0.0.1\", port = 3306 }]\n\n\
                [routing]\ndefault_pool = \"shared\"\nmysql_default_pool = \"my\"\n";
    let run = |text: &str| {
        let mut f = tempfile::NamedTempFile::new().expect("tempfile");
        f.write_all(text.as_bytes()).expect("write");
        Command::new(env!("CARGO_BIN_EXE_querypilot")).arg("--check").arg("-c").arg(f.path()).output().expect("run")
    };
    let out = run(text);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "warnings do not fail the check: {stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.starts_with("warning: ")).collect();
    assert_eq!(warnings.len(), 1, "only the pool without protocol: {stderr}");
    assert!(warnings[0].contains("pool \"shared\" has no `protocol`"), "{stderr}");
    assert!(warnings[0].contains("set protocol = \"postgres\" or \"mysql\" on [pools.shared]"), "{stderr}");
    let fixed = run(&text.replace("[pools.shared]\n", "[pools.shared]\nprotocol = \"postgres\"\n"));
    assert!(fixed.status.success() && fixed.stderr.is_empty(), "{}", String::from_utf8_lossy(&fixed.stderr));
}
