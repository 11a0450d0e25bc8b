//! sysbench OLTP workloads through the router in transaction mode: 32 client threads over a
//! pool of 4 backend connections, prepared and not: sysbench stops at the first error other
//! than InnoDB deadlocks, so a successful run means zero errors from the router.

use std::process::Command;

use mysql::prelude::Queryable;

use crate::mysql_session::{my_config, my_pool};
use crate::router::Router;
use crate::support::{dbs, unique_name};

fn sysbench(port: u16, db: &str, args: &[&str]) -> String {
    let out = Command::new("sysbench")
        .args(args)
        .args([
            "--mysql-host=127.0.0.1",
            "--mysql-user=app",
            "--mysql-password=app",
            "--mysql-ssl=off",
            "--db-driver=mysql",
        ])
        .arg(format!("--mysql-port={port}"))
        .arg(format!("--mysql-db={db}"))
        .args(["--tables=2", "--table-size=5000"])
        .output()
        .expect("run sysbench");
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "sysbench {args:?} failed:\n{text}");
    text
}

/// The "ignored errors:" count of a sysbench summary (deadlocks and lock-wait timeouts).
fn errors(summary: &str) -> u64 {
    summary
        .lines()
        .find_map(|l| l.trim().strip_prefix("ignored errors:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no errors line in:\n{summary}"))
}

fn transactions(summary: &str) -> u64 {
    summary
        .lines()
        .find_map(|l| l.trim().strip_prefix("transactions:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

#[test]
fn sysbench_oltp_through_transaction_pool_of_four() {
    let db = unique_name("sb");
    dbs().my.superuser_client(dbs().my.primary_port).query_drop(format!("CREATE DATABASE {db}")).expect("create db");
    // sysbench's schema is served by no pool: it is selected on the default pool's server.
    let config = my_config(&[0, 1], &my_pool("main", "transaction", 4), "main").replace(
        "mysql_default_pool = \"main\"\n",
        "mysql_default_pool = \"main\"\nunknown_database = \"default_pool\"\n",
    );
    let router = Router::start(&config);
    let port = router.port();
    sysbench(port, &db, &["oltp_read_write", "prepare"]);
    for test in ["oltp_read_write", "oltp_read_only", "oltp_point_select"] {
        for ps in ["auto", "disable"] {
            let summary =
                sysbench(port, &db, &[test, "run", "--threads=32", "--time=3", &format!("--db-ps-mode={ps}")]);
            // sysbench aborts on any error but InnoDB's own deadlocks and lock-wait timeouts,
            // which a read-write mix can hit without any proxy; reads must see none at all.
            if test != "oltp_read_write" {
                assert_eq!(errors(&summary), 0, "{test} ps={ps}:\n{summary}");
            }
            assert!(transactions(&summary) > 0, "{test} ps={ps} made no progress:\n{summary}");
        }
    }
}
