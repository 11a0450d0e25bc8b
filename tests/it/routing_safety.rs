//! Issue #19, pool roles: rules and hints that point at a replica-role pool never take a write,
//! a row lock or a sequence step there, against the harness's real PostgreSQL primary + hot
//! standby (rust-postgres) and MariaDB primary + replica (the `mysql` crate). The MariaDB replica
//! is made writable for a dedicated user (`READ ONLY ADMIN`), so a misroute would succeed
//! silently there instead of failing; each test proves placement by what the servers hold.

use std::time::Duration;

use mysql::prelude::Queryable;

use crate::admin::{addrs, http, sum, with_metrics};
use crate::pg_util::{first_value, sqlstate};
use crate::router::{pg_pool, Router};
use crate::support::{dbs, eventually, free_port, unique_name};

/// PostgreSQL split config (`primary`, `replica` = the read pool, hence replica role) with a
/// regex rule sending `FROM <table>` to the replica pool, and `extra` appended.
fn pg_config(table: &str, extra: &str) -> String {
    let pg = &dbs().pg;
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n{}\n{}\n\
         [routing]\nread_write_split = true\nread_pool = \"replica\"\nwrite_pool = \"primary\"\nread_your_writes = \"none\"\n\n\
         [[routing.rules]]\nname = \"analytics\"\npattern = \"(?i)FROM {table}\"\npool = \"replica\"\n{extra}",
        pg_pool("primary", pg.primary_port, "transaction", 4),
        pg_pool("replica", pg.replica_port, "transaction", 4),
    )
}

fn pg_error(c: &mut postgres::Client, sql: &str) -> postgres::Error {
    match c.simple_query(sql) {
        Ok(_) => panic!("{sql}: expected an error"),
        Err(e) => e,
    }
}

#[test]
fn pg_rules_and_hints_never_send_writes_locks_or_nextval_to_the_standby() {
    let t = unique_name("analytics_");
    let s = unique_name("qp_seq_");
    let mut admin = dbs().pg.primary_client();
    admin
        .batch_execute(&format!(
            "CREATE TABLE {t}(id int primary key, v int); INSERT INTO {t} VALUES (1, 1), (2, 2); CREATE SEQUENCE {s};"
        ))
        .expect("setup");
    dbs().pg.wait_replica_caught_up(Duration::from_secs(20));
    for mode in ["transaction", "session", "statement"] {
        let text = pg_config(&t, "").replace("mode = \"transaction\"", &format!("mode = \"{mode}\""));
        pg_role_case(&text, &t, &s, mode, &mut admin);
    }
}

fn pg_role_case(text: &str, t: &str, s: &str, mode: &str, admin: &mut postgres::Client) {
    let r = Router::start(text);
    let mut c = r.pg("app");
    let read = format!("SELECT pg_is_in_recovery() FROM {t} LIMIT 1");
    assert_eq!(first_value(&mut c, &read), "t", "{mode}: rule read on standby");
    let refused = [
        format!("DELETE FROM {t} WHERE id = 1"),
        format!("SELECT * FROM {t} WHERE id = 1 FOR UPDATE"),
        format!("SELECT nextval('{s}') FROM {t}"),
        format!("WITH d AS (DELETE FROM {t} WHERE id = 2 RETURNING id) SELECT id FROM {t}"),
    ];
    for sql in &refused {
        let e = pg_error(&mut c, sql);
        let message = e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default();
        assert_eq!(sqlstate(&e), "25006", "{mode}: {sql}: {e:?}");
        // The router's refusal, not the standby's own read-only error: nothing reached it.
        assert!(message.contains("not replica-safe") && message.contains("`replica`"), "{mode}: {sql}: {message}");
    }
    // Nothing ran anywhere: both rows are still on the primary, the sequence never advanced.
    let rows: i64 = admin.query_one(&format!("SELECT count(*) FROM {t}"), &[]).expect("count").get(0);
    assert_eq!(rows, 2, "{mode}");
    let called: bool = admin.query_one(&format!("SELECT is_called FROM {s}"), &[]).expect("seq").get(0);
    assert!(!called, "{mode}: nextval never ran");
    // A route=replica hint is refused for what is not replica-eligible, as before.
    let e = pg_error(&mut c, &format!("/* querypilot: route=replica */ SELECT v FROM items_{t} FOR UPDATE"));
    assert_eq!(sqlstate(&e), "QP001", "{mode}");
    // A fresh session's writes outside the rule go to the primary.
    let mut w = r.pg("app");
    w.batch_execute(&format!("UPDATE {t} SET v = 10 WHERE id = 1")).expect("write through the split");
    let v: i32 = admin.query_one(&format!("SELECT v FROM {t} WHERE id = 1"), &[]).expect("v").get(0);
    assert_eq!(v, 10, "{mode}");
}

#[test]
fn pg_rule_routed_reads_fall_back_when_the_replica_pool_is_down() {
    let t = unique_name("analytics_");
    dbs()
        .pg
        .primary_client()
        .batch_execute(&format!("CREATE TABLE {t}(id int); INSERT INTO {t} VALUES (1)"))
        .expect("setup");
    dbs().pg.wait_replica_caught_up(Duration::from_secs(20));
    let dead = free_port();
    let text = pg_config(&t, "").replace(
        &format!("port = {} }}]", dbs().pg.replica_port),
        &format!("port = {dead} }}]\n[pools.replica.health]\ninterval = \"200ms\"\nfailure_threshold = 1"),
    );
    assert!(text.contains(&format!("port = {dead}")), "{text}");
    let r = Router::start(&text);
    // Before #19 a rule-routed read went to its pool whatever its health: a refused connect.
    eventually(Duration::from_secs(15), "rule-routed reads fall back to the primary", || {
        let Ok(mut c) = crate::pg_util::connect(r.port(), "app", "app") else { return false };
        let sql = format!("SELECT pg_is_in_recovery() FROM {t} LIMIT 1");
        matches!(c.query_one(sql.as_str(), &[]), Ok(row) if !row.get::<_, bool>(0))
    });
}

#[test]
fn pg_role_mismatch_is_detected_by_the_probe() {
    let pg = &dbs().pg;
    // `wrong_primary` claims the standby is a primary, `wrong_replica` the primary a replica.
    let pools = format!(
        "{}role = \"primary\"\n{}role = \"replica\"\n",
        pg_pool("wrong_primary", pg.replica_port, "transaction", 2),
        pg_pool("wrong_replica", pg.primary_port, "transaction", 2),
    );
    let text = with_metrics(&pg_config("nothing_", &pools), None);
    let r = Router::start(&text);
    let (metrics, _) = addrs(&r);
    let series = |pool: &str| {
        let body = http(metrics, "GET", "/metrics", &[]).body;
        sum(&body, "sqp_backend_role_mismatch", &[&format!("pool=\"{pool}\"")])
    };
    eventually(Duration::from_secs(15), "every pool's role is verified", || {
        ["wrong_primary", "wrong_replica", "primary", "replica"].iter().all(|p| series(p).1 == 1)
    });
    assert_eq!(series("wrong_primary").0, 1.0);
    assert_eq!(series("wrong_replica").0, 1.0);
    assert_eq!(series("primary").0, 0.0);
    assert_eq!(series("replica").0, 0.0);
}

/// MariaDB: a user that may write on the (read_only) replica, created on the primary so the
/// grant replicates. Returns (user, password).
fn writable_replica_user() -> (String, String) {
    let my = &dbs().my;
    let user = unique_name("qp_rw_");
    let password = "rw-pass".to_owned();
    let mut root = my.superuser_client(my.primary_port);
    root.query_drop(format!("CREATE USER '{user}'@'%' IDENTIFIED BY '{password}'")).expect("create user");
    root.query_drop(format!("GRANT ALL ON `{}`.* TO '{user}'@'%'", my.database)).expect("grant db");
    root.query_drop(format!("GRANT READ_ONLY ADMIN ON *.* TO '{user}'@'%'")).expect("grant read only admin");
    my.wait_replica_caught_up(Duration::from_secs(20));
    (user, password)
}

fn my_config(user: &str, password: &str, table: &str) -> String {
    let my = &dbs().my;
    let pool = |name: &str, port: u16| {
        format!(
            "[pools.{name}]\nmode = \"transaction\"\nusername = \"{user}\"\npassword = \"{password}\"\ndatabase = \"{d}\"\n\
             max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n",
            d = my.database
        )
    };
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n{}\n{}\n\
         [routing]\nread_write_split = true\nwrite_pool = \"mywrite\"\nread_pool = \"myread\"\nread_your_writes = \"none\"\n\n\
         [[routing.rules]]\nname = \"analytics\"\npattern = \"(?i)FROM {table}\"\npool = \"myread\"\n\n\
         [[routing.rules]]\nname = \"etl\"\npattern = \"(?i)INTO {table}_etl\"\npool = \"myread\"\nallow_writes = true\n",
        pool("mywrite", my.primary_port),
        pool("myread", my.replica_port),
    )
}

#[test]
fn mariadb_rules_never_send_writes_or_locks_to_a_writable_replica() {
    let my = &dbs().my;
    let (user, password) = writable_replica_user();
    let t = unique_name("analytics_");
    let mut primary = my.primary_client();
    primary.query_drop(format!("CREATE TABLE {t}(id int primary key, v int)")).expect("setup");
    primary.query_drop(format!("INSERT INTO {t} VALUES (1, 1), (2, 2)")).expect("rows");
    primary.query_drop(format!("CREATE TABLE {t}_etl(id int primary key)")).expect("setup etl");
    my.wait_replica_caught_up(Duration::from_secs(20));
    for (i, mode) in ["transaction", "session", "statement"].into_iter().enumerate() {
        let text = my_config(&user, &password, &t).replace("mode = \"transaction\"", &format!("mode = \"{mode}\""));
        my_role_case(&text, (&user, &password), &t, mode, 7 + i);
    }
}

fn my_role_case(text: &str, (user, password): (&str, &str), t: &str, mode: &str, etl_id: usize) {
    let my = &dbs().my;
    let r = Router::start(text);
    let opts = mysql::OptsBuilder::from_opts(my.opts(r.port(), user, password));
    let mut c = mysql::Conn::new(opts).expect("connect through the router");
    let server: u64 = c.query_first(format!("SELECT @@server_id FROM {t} LIMIT 1")).expect("read").expect("row");
    assert_eq!(server, 2, "{mode}: the rule's read runs on the replica");
    for sql in [
        format!("DELETE FROM {t} WHERE id = 1"),
        format!("SELECT v FROM {t} WHERE id = 2 FOR UPDATE"),
        format!("SELECT v FROM {t} WHERE id = 2 LOCK IN SHARE MODE"),
        format!("SELECT GET_LOCK('qp', 1) FROM {t}"),
    ] {
        match c.query_drop(&sql) {
            Err(mysql::Error::MySqlError(e)) => {
                assert_eq!((e.code, e.state.as_str()), (1792, "25006"), "{mode}: {sql}: {e:?}");
                assert!(e.message.contains("`myread`"), "{mode}: {sql}: {}", e.message);
            }
            other => panic!("{mode}: {sql}: expected the router's refusal, got {other:?}"),
        }
    }
    // Both rows are still on both servers: the replica (writable for this user) took nothing.
    let mut primary = my.primary_client();
    let mut replica = my.connect(my.replica_port, user, password);
    for (name, conn) in [("primary", &mut primary), ("replica", &mut replica)] {
        let n: u64 =
            conn.query_first(format!("SELECT count(*) FROM {}.{t}", my.database)).expect("count").expect("row");
        assert_eq!(n, 2, "{mode}: {name}");
    }
    // allow_writes = true is the operator's explicit, dangerous opt-out: the write then really
    // lands on the replica, which shows a misroute would have succeeded silently. A fresh
    // session, so a connection held on the replica above does not decide.
    let mut w = mysql::Conn::new(mysql::OptsBuilder::from_opts(my.opts(r.port(), user, password))).expect("connect");
    w.query_drop(format!("INSERT INTO {t}_etl VALUES ({etl_id})")).expect("allowed write");
    let find = |conn: &mut mysql::Conn| -> Option<u64> {
        conn.query_first(format!("SELECT id FROM {}.{t}_etl WHERE id = {etl_id}", my.database)).expect("read")
    };
    assert_eq!((find(&mut replica), find(&mut primary)), (Some(etl_id as u64), None), "{mode}");
}

#[test]
fn dry_run_explains_the_role_check_the_lexer_mode_and_the_hold() {
    use crate::routing_api::{enc, http as api};
    let text = with_metrics(&pg_config("analytics_x", ""), None);
    let r = Router::start(&text);
    let (_, admin) = addrs(&r);
    let ask = |sql: &str, session: &str| {
        let target = format!("/api/routing/test?sql={}&protocol=postgres{session}", enc(sql));
        let (status, v) = api(admin, "GET", &target, None);
        assert_eq!(status, 200, "{v}");
        v
    };
    let refused = ask("DELETE FROM analytics_x WHERE id = 1", "");
    assert_eq!((refused["outcome"].as_str(), refused["role_check"].as_str()), (Some("error"), Some("refused")));
    assert!(refused["message"].as_str().is_some_and(|m| m.contains("rule `analytics`")), "{refused}");
    let read = ask("SELECT a FROM analytics_x", "");
    assert_eq!((read["pool"].as_str(), read["role_check"].as_str()), (Some("replica"), Some("replica_safe")));
    assert_eq!(read["lexer_mode"], "default");
    let hidden = ask(r"SELECT 'x\' -- '; UPDATE t SET a = 1", "&standard_conforming_strings=off");
    assert_eq!((hidden["pool"].as_str(), hidden["reason"].as_str()), (Some("primary"), Some("lexer_mode")));
    assert_eq!(hidden["lexer_mode"], "standard_conforming_strings=off");
    let plain = ask(r"SELECT 'x\' -- '; UPDATE t SET a = 1", "");
    assert_eq!(plain["pool"], "replica", "the same text in the default mode is one string");
    let serializable = ask("SELECT 1", "&default_transaction_isolation=serializable");
    assert_eq!(
        (serializable["pool"].as_str(), serializable["hold"].as_str()),
        (Some("primary"), Some("serializable_session"))
    );
    let held = ask("UPDATE t SET a = 1", "&held_pool=replica");
    assert_eq!((held["hold"].as_str(), held["role_check"].as_str()), (Some("transaction"), Some("refused")));
}

#[test]
fn mariadb_role_mismatch_is_detected_by_the_probe() {
    let my = &dbs().my;
    let (user, password) = (&my.user, &my.password);
    let pool = |name: &str, port: u16, role: &str| {
        format!(
            "[pools.{name}]\nrole = \"{role}\"\nusername = \"{user}\"\npassword = \"{password}\"\ndatabase = \"{d}\"\n\
             max_connections = 2\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n",
            d = my.database
        )
    };
    let text = format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n{}{}{}\
         [routing]\nmysql_default_pool = \"mywrite\"\n",
        pool("mywrite", my.primary_port, "primary"),
        pool("wrong_primary", my.replica_port, "primary"),
        pool("wrong_replica", my.primary_port, "replica"),
    );
    let r = Router::start(&with_metrics(&text, None));
    let (metrics, _) = addrs(&r);
    let series = |pool: &str| {
        let body = http(metrics, "GET", "/metrics", &[]).body;
        sum(&body, "sqp_backend_role_mismatch", &[&format!("pool=\"{pool}\"")])
    };
    eventually(Duration::from_secs(15), "every pool's role is verified", || {
        ["mywrite", "wrong_primary", "wrong_replica"].iter().all(|p| series(p).1 == 1)
    });
    assert_eq!((series("mywrite").0, series("wrong_primary").0, series("wrong_replica").0), (0.0, 1.0, 1.0));
}

/// Issue #19 case 1 as an invariant that holds whichever pool the implicit transaction of
/// `autocommit = 0` is given: the UPDATE either runs on the primary or is refused, and never
/// lands on the (writable) replica alone.
#[test]
fn mariadb_autocommit_off_never_writes_on_a_writable_replica() {
    let my = &dbs().my;
    let (user, password) = writable_replica_user();
    let t = unique_name("ac0_");
    let mut primary = my.primary_client();
    primary.query_drop(format!("CREATE TABLE {t}(id int primary key, v int)")).expect("setup");
    primary.query_drop(format!("INSERT INTO {t} VALUES (1, 1)")).expect("row");
    my.wait_replica_caught_up(Duration::from_secs(20));
    let r = Router::start(&my_config(&user, &password, "nothing_matches_"));
    let mut c = mysql::Conn::new(mysql::OptsBuilder::from_opts(my.opts(r.port(), &user, &password))).expect("connect");
    c.query_drop("SET autocommit = 0").expect("autocommit off");
    let _: Option<u64> = c.query_first(format!("SELECT v FROM {t} WHERE id = 1")).expect("read");
    let update = c.query_drop(format!("UPDATE {t} SET v = v + 100 WHERE id = 1"));
    let commit = update.as_ref().ok().map(|_| c.query_drop("COMMIT"));
    drop(c);
    let on_primary: Option<i64> = primary.query_first(format!("SELECT v FROM {t} WHERE id = 1")).expect("primary");
    my.wait_replica_caught_up(Duration::from_secs(20));
    let mut replica = my.connect(my.replica_port, &user, &password);
    let on_replica: Option<i64> =
        replica.query_first(format!("SELECT v FROM {}.{t} WHERE id = 1", my.database)).expect("replica");
    assert_eq!(on_primary, on_replica, "the replica holds only what the primary replicated");
    match (update, commit) {
        (Ok(()), Some(Ok(()))) => assert_eq!(on_primary, Some(101), "an acknowledged write is on the primary"),
        (Err(mysql::Error::MySqlError(e)), None) => {
            assert_eq!((e.code, on_primary), (1792, Some(1)), "refused before reaching any server: {}", e.message)
        }
        other => panic!("unexpected outcome {other:?}"),
    }
}
