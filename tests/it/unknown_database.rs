//! Issues #25 and #18 (`r_wrong_database.py`): a database name means what it says. A client that
//! asks for a database no pool serves is refused as the server refuses it (PostgreSQL `3D000`,
//! MySQL `1049`), instead of being served silently from the default pool's database; a pool's
//! name and the database a pool serves keep working, and `routing.unknown_database =
//! "default_pool"` brings the old fallback back for those who want it.

// Blocking test code driving child processes, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::process::Command;

use crate::mysql_session::{my_config, my_pool};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, unique_name};

/// psycopg connects to each database and prints `name=<current_database()>` or `name!<SQLSTATE>`.
const PSYCOPG: &str = r#"
import sys, psycopg
port, dbs = sys.argv[1], sys.argv[2:]
for db in dbs:
    try:
        c = psycopg.connect(host="127.0.0.1", port=port, user="app", password="app", dbname=db, autocommit=True)
        print(f"{db}={c.execute('select current_database()').fetchone()[0]}")
        c.close()
    except psycopg.OperationalError as e:
        print(f"{db}!{getattr(e, 'sqlstate', None) or str(e).strip().splitlines()[-1]}")
"#;

fn psycopg(router: &Router, databases: &[&str]) -> String {
    let out = Command::new("/usr/bin/python3")
        .args(["-c", PSYCOPG, &router.port().to_string()])
        .args(databases)
        .output()
        .expect("run python3");
    assert!(out.status.success(), "psycopg script failed: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn psycopg_is_refused_a_database_no_pool_serves() {
    let pg = &dbs().pg;
    // A database that exists on the server but that no pool serves.
    let other = unique_name("qp_otherdb");
    let mut admin =
        pg.config(pg.primary_port, &pg.superuser, "").dbname("postgres").connect(postgres::NoTls).expect("admin");
    admin.batch_execute(&format!("CREATE DATABASE {other}")).expect("create database");
    let pools = pg_pool("main", pg.primary_port, "transaction", 2);
    let router = Router::start(&pg_config(&[0], &pools, "main"));
    let out = psycopg(&router, &["nosuchdb", &other, "main", &pg.database]);
    // #36: in the router's words (the server may have the database), with the server's code.
    let refused = |db: &str| format!("{db}!connection failed: FATAL:  the router has no pool for database \"{db}\"");
    assert!(out.contains(&refused("nosuchdb")), "an unknown database is refused:\n{out}");
    assert!(out.contains(&refused(&other)), "so is one that exists but no pool serves:\n{out}");
    let code = pg.config(router.port(), &pg.user, &pg.password).dbname("nosuchdb").connect(postgres::NoTls).err();
    assert_eq!(code.and_then(|e| e.code().cloned()), Some(postgres::error::SqlState::INVALID_CATALOG_NAME));
    assert!(out.contains(&format!("main={}", pg.database)), "a pool's name works:\n{out}");
    assert!(out.contains(&format!("{0}={0}", pg.database)), "and so does the database a pool serves:\n{out}");

    let fallback = Router::start(
        &pg_config(&[0], &pools, "main")
            .replace("default_pool = \"main\"\n", "default_pool = \"main\"\nunknown_database = \"default_pool\"\n"),
    );
    let out = psycopg(&fallback, &["nosuchdb"]);
    assert_eq!(out.trim(), format!("nosuchdb={}", pg.database), "the opt-in fallback serves the default pool");
    admin.batch_execute(&format!("DROP DATABASE {other}")).expect("drop database");
}

#[test]
fn mariadb_cli_and_pymysql_are_refused_an_unknown_database_with_1049() {
    let my = &dbs().my;
    let router = Router::start(&my_config(&[0], &my_pool("main", "transaction", 2), "main"));
    let port = router.port().to_string();
    let cli = |db: &str| {
        Command::new("mariadb")
            .args(["--no-defaults", "-h", "127.0.0.1", "-P", &port, "-u", &my.user])
            .arg(format!("-p{}", my.password))
            .args(["-N", "-B", "-e", "SELECT DATABASE()", db])
            .output()
            .expect("run mariadb")
    };
    let refused = cli("nosuchdb");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(!refused.status.success() && err.contains("1049"), "mariadb CLI: {err}");
    assert!(err.contains("the router has no pool for database 'nosuchdb'"), "{err}");
    for db in ["main", my.database.as_str()] {
        let ok = cli(db);
        assert!(ok.status.success(), "{db}: {}", String::from_utf8_lossy(&ok.stderr));
        assert_eq!(String::from_utf8_lossy(&ok.stdout).trim(), my.database, "{db} selects the pool's database");
    }
    let script = "import sys, pymysql\ntry:\n    pymysql.connect(host='127.0.0.1', port=int(sys.argv[1]), user=sys.argv[2], \
                  password=sys.argv[3], database='nosuchdb')\n    print('connected')\nexcept pymysql.err.OperationalError as e:\n    \
                  print('refused', e.args[0])\n";
    let out = Command::new("/usr/bin/python3")
        .args(["-c", script, &port, &my.user, &my.password])
        .output()
        .expect("run python3");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "refused 1049", "PyMySQL");
}
