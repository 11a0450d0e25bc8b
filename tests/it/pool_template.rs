//! Issue #36 (`r_wrong_database.py`): a database the server has but no pool serves. With
//! `[pool_template]` a PostgreSQL client gets a pool made for it (psycopg, session and
//! transaction mode), whose statements run in that database (`current_database()` on the
//! server); a name the server refuses gets the server's own 3D000 and leaves no pool behind,
//! and `max_pools` bounds how many databases clients can make pools for. A MySQL client naming
//! `mysql` or `information_schema` gets the template pool with that schema selected.

// Blocking test code driving child processes, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::process::Command;

use crate::mysql_session::{my_config, my_pool};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, unique_name};

/// psycopg connects to each database, runs a statement, and prints
/// `name=<current_database()>` or `name!<message>`; every connection stays open until the end
/// (so its pool is in use).
const PSYCOPG: &str = r#"
import sys, psycopg
port, dbs = sys.argv[1], sys.argv[2:]
held = []
for db in dbs:
    try:
        c = psycopg.connect(host="127.0.0.1", port=port, user="app", password="app", dbname=db, autocommit=True)
        print(f"{db}={c.execute('select current_database()').fetchone()[0]}")
        held.append(c)
    except psycopg.OperationalError as e:
        print(f"{db}!{str(e).strip().splitlines()[-1]}")
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

fn template_router(mode: &str, max_pools: u32) -> Router {
    let pools = pg_pool("main", dbs().pg.primary_port, mode, 4);
    let config =
        format!("{}\n[pool_template]\npostgres = \"main\"\nmax_pools = {max_pools}\n", pg_config(&[0], &pools, "main"));
    Router::start(&config)
}

#[test]
fn psycopg_gets_a_pool_made_for_a_database_the_server_has() {
    let pg = &dbs().pg;
    let mut admin =
        pg.config(pg.primary_port, &pg.superuser, "").dbname("postgres").connect(postgres::NoTls).expect("admin");
    let (a, b) = (unique_name("qp_tpl_a"), unique_name("qp_tpl_b"));
    for db in [&a, &b] {
        admin.batch_execute(&format!("CREATE DATABASE {db}")).expect("create database");
    }
    for mode in ["session", "transaction"] {
        let router = template_router(mode, 1);
        // The refused name is tried first: were its pool left behind, it would hold the only
        // place (max_pools = 1) and `a` would be refused with 53300.
        let code = |db: &str| {
            let refused = pg.config(router.port(), &pg.user, &pg.password).dbname(db).connect(postgres::NoTls).err();
            refused.and_then(|e| e.code().map(|c| c.code().to_owned())).unwrap_or_default()
        };
        assert_eq!(code("nosuchdb"), "3D000", "{mode}");
        let out = psycopg(&router, &["nosuchdb", &a, &b]);
        assert!(
            out.contains("nosuchdb!connection failed: FATAL:  database \"nosuchdb\" does not exist"),
            "{mode}: the server's own refusal:\n{out}"
        );
        assert!(out.contains(&format!("{a}={a}")), "{mode}: the made pool runs in its database:\n{out}");
        assert!(
            out.contains(&format!(
                "{b}!connection failed: FATAL:  the router serves 1 databases from its pool template"
            )),
            "{mode}: a second database while the first is in use is over max_pools:\n{out}"
        );
        // The pool's own database and name still reach the configured pool.
        let out = psycopg(&router, &["main", &pg.database]);
        assert!(out.contains(&format!("main={}", pg.database)), "{mode}:\n{out}");
    }
    for db in [&a, &b] {
        admin.batch_execute(&format!("DROP DATABASE {db} WITH (FORCE)")).expect("drop database");
    }
}

#[test]
fn without_a_template_the_router_says_it_has_no_pool_for_the_database() {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 2);
    let router = Router::start(&pg_config(&[0], &pools, "main"));
    let out = psycopg(&router, &["postgres"]);
    assert!(
        out.contains("postgres!connection failed: FATAL:  the router has no pool for database \"postgres\""),
        "a database the server has is not said not to exist:\n{out}"
    );
    let pg = &dbs().pg;
    let refused = pg.config(router.port(), &pg.user, &pg.password).dbname("postgres").connect(postgres::NoTls).err();
    assert_eq!(refused.and_then(|e| e.code().cloned()), Some(postgres::error::SqlState::INVALID_CATALOG_NAME));
}

#[test]
fn mariadb_cli_selects_a_database_no_pool_serves_on_the_template_pool() {
    let my = &dbs().my;
    let port_of = |router: &Router| router.port().to_string();
    let cli = |port: &str, db: &str| {
        Command::new("mariadb")
            .args(["--no-defaults", "-h", "127.0.0.1", "-P", port, "-u", &my.user])
            .arg(format!("-p{}", my.password))
            .args(["-N", "-B", "-e", "SELECT DATABASE(), @@server_id", db])
            .output()
            .expect("run mariadb")
    };
    let direct = cli(&my.primary_port.to_string(), "mysql");
    let server_id = String::from_utf8_lossy(&direct.stdout).split('\t').nth(1).unwrap_or_default().trim().to_owned();
    assert!(!server_id.is_empty(), "{}", String::from_utf8_lossy(&direct.stderr));
    for mode in ["session", "transaction"] {
        let config =
            format!("{}\n[pool_template]\nmysql = \"main\"\n", my_config(&[0], &my_pool("main", mode, 2), "main"));
        let router = Router::start(&config);
        let port = port_of(&router);
        for db in ["mysql", "information_schema"] {
            let out = cli(&port, db);
            assert!(out.status.success(), "{mode} {db}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), format!("{db}\t{server_id}"), "{mode} {db}");
        }
        let refused = cli(&port, "nosuchdb");
        let err = String::from_utf8_lossy(&refused.stderr);
        assert!(!refused.status.success(), "{mode}: {err}");
        assert!(
            err.contains("1049") && err.contains("Unknown database 'nosuchdb'"),
            "{mode}: the server's error: {err}"
        );
        // The connection that was refused the schema is not lent with it selected.
        let after = cli(&port, "main");
        assert_eq!(String::from_utf8_lossy(&after.stdout).trim(), format!("{}\t{server_id}", my.database), "{mode}");
    }
    let plain = Router::start(&my_config(&[0], &my_pool("main", "transaction", 2), "main"));
    let refused = cli(&port_of(&plain), "mysql");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("1049") && err.contains("the router has no pool for database 'mysql'"), "{err}");
}
