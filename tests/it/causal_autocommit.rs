//! Issue #34: an autocommit statement the parse calls a read may write through what the parse
//! cannot see — here a view over a VOLATILE function that inserts. Where it runs on the
//! primary (a `route=primary` hint, a fallback from a standby that has not replayed the
//! session's position), its commit must leave a position like any write: the token handed to
//! another connection names it, and that connection's read waits for it rather than reading
//! the paused standby without the row (`0 t`). Every route a client can send it by: simple
//! Query, extended unnamed and named, a multi-statement text, a psycopg pipeline, asyncpg's
//! prepared statements. A read on the
//! primary that wrote nothing leaves the session's position where it was, so it does not keep
//! later reads off the standby.

use std::time::Duration;

use crate::causal::{be, pool, router, where_read};
use crate::support::{eventually, unique_name, Dbs, Kind};

/// The session's token, by SHOW.
fn token(c: &mut postgres::Client) -> String {
    where_read(c, "SHOW querypilot.causal_token").remove(0)
}

/// A client library runs `sql` twice — psycopg 3 in a pipeline (one Sync for both), asyncpg
/// as a prepared statement — then prints its token.
const TWICE: &str = r#"
import sys, asyncio
client, host, port, user, password, db, sql = sys.argv[1:8]
if client == "psycopg":
    import psycopg
    with psycopg.connect(host=host, port=port, user=user, password=password, dbname=db, autocommit=True) as c:
        with c.pipeline():
            c.execute(sql)
            c.execute(sql)
        print(c.execute("SHOW querypilot.causal_token").fetchone()[0])
else:
    import asyncpg
    async def main():
        c = await asyncpg.connect(host=host, port=int(port), user=user, password=password, database=db)
        await c.fetchval(sql)
        await c.fetchval(sql)
        print(await c.fetchval("SHOW querypilot.causal_token"))
        await c.close()
    asyncio.run(main())
"#;

#[test]
fn an_autocommit_read_that_writes_through_a_view_on_the_primary_leaves_a_position() {
    reads_writing_through_a_view("transaction");
}

#[test]
fn in_session_mode_an_autocommit_read_that_writes_through_a_view_leaves_a_position() {
    reads_writing_through_a_view("session");
}

/// The scenario on pools in `mode`.
fn reads_writing_through_a_view(mode: &str) {
    let env = Dbs::private();
    let pg = &env.pg;
    let pools = pool(pg, "primary", &[be(pg.primary_port, "")]) + &pool(pg, "replica", &[be(pg.replica_port, "")]);
    let pools = pools.replace("mode = \"transaction\"", &format!("mode = \"{mode}\""));
    let router = router(&pools, "read_your_writes = \"causal\"\ncausal_wait = \"20ms\"");
    let t = unique_name("causal_view");
    pg.primary_client()
        .batch_execute(&format!(
            "CREATE TABLE {t} (id serial PRIMARY KEY);\n\
             CREATE FUNCTION {t}_w() RETURNS int VOLATILE LANGUAGE sql AS \
             'INSERT INTO {t} DEFAULT VALUES RETURNING 1';\n\
             CREATE VIEW {t}_v AS SELECT {t}_w() AS n;\n\
             CREATE TABLE {t}_child (parent int REFERENCES {t} DEFERRABLE INITIALLY DEFERRED);\n\
             CREATE FUNCTION {t}_orphan() RETURNS int VOLATILE LANGUAGE sql AS \
             'INSERT INTO {t}_child VALUES (-1) RETURNING 1';\n\
             CREATE VIEW {t}_bad AS SELECT {t}_orphan() AS n;"
        ))
        .expect("create");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    let read = format!("SELECT count(*), pg_is_in_recovery() FROM {t}");
    let (mut writer, mut holder) = (router.pg(&pg.database), router.pg(&pg.database));
    eventually(Duration::from_secs(15), "reads on the standby", || where_read(&mut holder, &read)[1] == "t");
    env.pause_replication(Kind::Pg);
    let hinted = format!("/* querypilot: route=primary */ SELECT n FROM {t}_v");
    let plain = format!("SELECT n FROM {t}_v");
    let mut rows = 0;
    let mut check = |writer: &mut postgres::Client, route: &str, wrote: usize| {
        rows += wrote;
        let token = token(writer);
        holder.batch_execute(&format!("SET querypilot.causal_token = '{token}'")).expect("adopt the token");
        assert_eq!(where_read(&mut holder, &read), [rows.to_string(), "f".to_owned()], "{route}: token {token}");
    };
    // The first write leaves the session a position the paused standby never replays: the
    // later plain reads fall back to the primary.
    writer.simple_query(&hinted).expect("simple Query");
    check(&mut writer, "simple Query, hinted", 1);
    writer.query_typed(&hinted, &[]).expect("extended, unnamed");
    check(&mut writer, "extended unnamed, hinted", 1);
    let named = writer.prepare(&plain).expect("prepare");
    writer.query(&named, &[]).expect("extended, named");
    check(&mut writer, "extended named, fallback", 1);
    writer.simple_query(&plain).expect("simple Query");
    check(&mut writer, "simple Query, fallback", 1);
    // The probe is prepared once per connection; a client's DEALLOCATE ALL drops it with the
    // client's own, and the next probe prepares it again.
    writer.batch_execute("DEALLOCATE ALL").expect("deallocate");
    writer.query_typed(&hinted, &[]).expect("extended, unnamed");
    check(&mut writer, "extended unnamed after DEALLOCATE ALL", 1);
    writer.simple_query(&format!("SELECT 1; {plain}; SELECT 2")).expect("multi-statement");
    check(&mut writer, "multi-statement text, fallback", 1);
    for client in ["psycopg", "asyncpg"] {
        let mut run = std::process::Command::new("/usr/bin/python3");
        run.args(["-c", TWICE, client, "127.0.0.1", &router.port().to_string(), &pg.user, &pg.password, &pg.database]);
        let out = run.arg(&hinted).output().expect("run python3 (psycopg 3 and asyncpg, installed by .ci/deps.sh)");
        let token = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        assert!(out.status.success(), "{client}: {token}\n{}", String::from_utf8_lossy(&out.stderr));
        rows += 2;
        holder.batch_execute(&format!("SET querypilot.causal_token = '{token}'")).expect("adopt the token");
        assert_eq!(where_read(&mut holder, &read), [rows.to_string(), "f".to_owned()], "{client}: token {token}");
    }
    // Reads on the primary that wrote nothing: the position stays.
    let before = token(&mut writer);
    writer.simple_query("/* querypilot: route=primary */ SELECT 1").expect("a read");
    writer.query_typed("/* querypilot: route=primary */ SELECT 2", &[]).expect("a read");
    assert_eq!(token(&mut writer), before, "a read that wrote nothing moves no position");
    // A read whose write fails at its commit (a deferred foreign key) reports the commit's
    // error as the server does to a direct client, after the row; nothing committed.
    let bad = format!("/* querypilot: route=primary */ SELECT n FROM {t}_bad");
    let direct = pg.primary_client().simple_query(&bad).expect_err("the commit fails");
    let routed = writer.simple_query(&bad).expect_err("the commit fails");
    assert_eq!(routed.code(), direct.code(), "{routed}");
    assert_eq!(routed.code(), Some(&postgres::error::SqlState::FOREIGN_KEY_VIOLATION), "{routed}");
    let routed = writer.query_typed(&bad, &[]).expect_err("the commit fails");
    assert_eq!(routed.code(), Some(&postgres::error::SqlState::FOREIGN_KEY_VIOLATION), "{routed}");
    assert_eq!(token(&mut writer), before, "nothing committed");
    assert_eq!(where_read(&mut writer, "SELECT 41 + 1"), ["42"], "the session goes on");
    env.resume_replication(Kind::Pg);
}
