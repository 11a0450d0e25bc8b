//! Issue #3: `pgbench -i`, then pgbench in simple, extended and prepared mode (select-only and
//! TPC-B) through the router in transaction mode, 32 clients over a pool of 4 connections,
//! with zero failed transactions and consistent balances afterwards.

use std::process::Command;

use crate::pg_util::superuser;
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, unique_name};

/// A fresh database owned by `app`, dropped (with its connections) on drop.
pub(crate) struct Database(pub String);

impl Database {
    pub fn create() -> Database {
        let name = unique_name("pgb");
        superuser().batch_execute(&format!("CREATE DATABASE {name} OWNER app")).expect("create database");
        Database(name)
    }
}

impl Drop for Database {
    fn drop(&mut self) {
        let _ = superuser().batch_execute(&format!("DROP DATABASE IF EXISTS {} WITH (FORCE)", self.0));
    }
}

/// Runs pgbench against the router with `args`; returns its stdout, panicking with both
/// streams when it fails.
pub(crate) fn pgbench(port: u16, db: &str, args: &[&str]) -> String {
    let out = Command::new("pgbench")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-U", "app"])
        .args(args)
        .arg(db)
        .env("PGPASSWORD", "app")
        .output()
        .expect("run pgbench");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "pgbench {args:?} failed: {}\n{stdout}\n{stderr}", out.status);
    stdout
}

/// The number after `label` on its line of pgbench's report.
pub(crate) fn number(report: &str, label: &str) -> u64 {
    let line = report.lines().find(|l| l.starts_with(label)).unwrap_or_else(|| panic!("no {label:?} in:\n{report}"));
    let rest = line[label.len()..].trim_start_matches([':', ' ']);
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("no number in {line:?}"))
}

#[test]
fn pgbench_through_transaction_pooling_has_no_failures_and_consistent_balances() {
    let db = Database::create();
    let pools = pg_pool("pgb", dbs().pg.primary_port, "transaction", 4)
        .replace(&format!("database = \"{}\"", dbs().pg.database), &format!("database = \"{}\"", db.0));
    let r = Router::start(&pg_config(&[0], &pools, "pgb"));
    pgbench(r.port(), "pgb", &["-i", "-q", "-s", "1"]);
    for mode in ["simple", "extended", "prepared"] {
        for select_only in [true, false] {
            let mut args = vec!["-n", "-M", mode, "-c", "32", "-j", "4", "-t", "20"];
            if select_only {
                args.push("-S");
            }
            let report = pgbench(r.port(), "pgb", &args);
            let done = number(&report, "number of transactions actually processed");
            assert_eq!(done, 32 * 20, "{mode} select_only={select_only}:\n{report}");
            assert_eq!(number(&report, "number of failed transactions"), 0, "{mode}:\n{report}");
        }
    }
    // Every TPC-B transaction moved the same delta through all four tables.
    let pg = &dbs().pg;
    let mut cfg = pg.config(pg.primary_port, &pg.superuser, "");
    let mut direct = cfg.dbname(&db.0).connect(postgres::NoTls).expect("direct connection");
    let row = direct
        .query_one(
            "SELECT (SELECT sum(abalance) FROM pgbench_accounts)::int8, (SELECT sum(bbalance) FROM pgbench_branches)::int8, \
             (SELECT sum(tbalance) FROM pgbench_tellers)::int8, (SELECT coalesce(sum(delta), 0) FROM pgbench_history)::int8, \
             (SELECT count(*) FROM pgbench_history)",
            &[],
        )
        .expect("balances");
    let (a, b, t, h, n): (i64, i64, i64, i64, i64) = (row.get(0), row.get(1), row.get(2), row.get(3), row.get(4));
    assert_eq!(n, 3 * 32 * 20, "one history row per TPC-B transaction");
    assert_eq!((a, b, t), (h, h, h), "accounts, branches, tellers and history agree");
    drop(direct);
    drop(r);
}
