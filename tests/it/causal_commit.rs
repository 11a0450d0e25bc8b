//! Issue #34, PostgreSQL: a COMMIT sent through the extended protocol (PgJDBC's and psycopg's
//! commit(), prepared COMMITs of psycopg and asyncpg) is probed for whether its transaction
//! wrote, as a simple-query COMMIT is. With replay paused on the standby and the primary's WAL
//! ahead of it, a transaction that only read leaves the next read on the standby
//! (`pg_is_in_recovery()`), and one that wrote where the parse cannot see it (a STABLE function
//! calling a VOLATILE one that inserts) is never read stale — in session and transaction pools.

use std::process::Command;
use std::time::Duration;

use crate::causal::{be, pool, router, where_read};
use crate::scripts::{python, run};
use crate::support::{eventually, unique_name, Dbs, Kind};

#[test]
fn an_extended_commit_of_a_read_only_transaction_leaves_reads_on_the_standby() {
    let env = Dbs::private();
    let pg = &env.pg;
    let table = unique_name("causal_xcommit");
    pg.primary_client()
        .batch_execute(&format!(
            "CREATE TABLE {table} (id int PRIMARY KEY);\n\
             CREATE FUNCTION {table}_w(i int) RETURNS int VOLATILE LANGUAGE sql AS 'INSERT INTO {table} VALUES (i) RETURNING i';\n\
             CREATE FUNCTION {table}_outer(i int) RETURNS int STABLE LANGUAGE plpgsql AS \
             $$ BEGIN RETURN {table}_w(i); END $$;"
        ))
        .expect("create");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    let pools = pool(pg, "primary", &[be(pg.primary_port, "")]) + &pool(pg, "replica", &[be(pg.replica_port, "")]);
    let read = format!("SELECT count(*), pg_is_in_recovery() FROM {table}");
    let mut first = 1;
    for mode in ["transaction", "session"] {
        let pools = pools.replace("mode = \"transaction\"", &format!("mode = \"{mode}\""));
        let router = router(&pools, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
        let mut c = router.pg(&pg.database);
        eventually(Duration::from_secs(15), "reads on the standby", || where_read(&mut c, &read)[1] == "t");
        env.pause_replication(Kind::Pg);
        // Another client's write: the primary's WAL is now ahead of the paused standby, so a
        // position learned at any commit would keep the next read off it.
        pg.primary_client().batch_execute(&format!("INSERT INTO {table} VALUES (-{first})")).expect("direct write");

        let port = router.port().to_string();
        let args = [&pg.host, &port, &pg.user, &pg.password, &pg.database, &table, &first.to_string()];
        let mut got = python("causal_commit.py", &args);
        let url = format!("jdbc:postgresql://127.0.0.1:{port}/{}?sslmode=disable", pg.database);
        let java = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/connectors/JdbcCausalCommit.java");
        let mut jdbc = Command::new("java");
        jdbc.args(["-cp", "/usr/share/java/postgresql.jar", java]);
        jdbc.args([&url, &pg.user, &pg.password, &table, &(first + 10).to_string()]);
        got.extend(run(&mut jdbc, "JdbcCausalCommit.java"));
        let mut want = [
            "psycopg commit() read-only t -",
            "psycopg prepared COMMIT read-only t -",
            "asyncpg prepared COMMIT read-only t -",
            "psycopg commit() wrote f seen",
            "psycopg prepared COMMIT wrote f seen",
            "asyncpg prepared COMMIT wrote f seen",
            "jdbc commit() read-only t -",
            "jdbc commit() wrote f seen",
        ];
        if mode == "session" {
            // asyncpg's session keeps its primary connection in a session pool after any
            // transaction, a simple-query COMMIT's too: not the commit's doing (#34 report).
            want[2] = "asyncpg prepared COMMIT read-only f -";
        }
        assert_eq!(got, want, "{mode} pool");
        env.resume_replication(Kind::Pg);
        pg.wait_replica_caught_up(Duration::from_secs(20));
        first += 100;
    }
}
