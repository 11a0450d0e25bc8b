//! Issue #19, pool roles: rules and hints that point at a replica-role pool never take a write,
//! a row lock or a sequence step there, against the harness's real PostgreSQL primary + hot
//! standby (rust-postgres) and MariaDB primary + replica (the `mysql` crate). The MariaDB replica
//! is made writable for a dedicated user (`READ ONLY ADMIN`), so a misroute would succeed
//! silently there instead of failing; each test proves placement by what the servers hold.
//! (A PostgreSQL hot standby cannot be made writable: there a misroute fails, which the tests
//! would see as an error, and placement is proven by `pg_is_in_recovery()`.)
//!
//! This file also maps every hostile case of #19 to the test that runs it. Modes: t =
//! transaction, s = session, st = statement pooling; "n/a" where the mode refuses the premise.
//!
//! | case | PostgreSQL | MariaDB |
//! |---|---|---|
//! | 1 autocommit=0 read-modify-write | n/a (no autocommit mode) | `mysql_safety::autocommit_off_read_modify_write_runs_on_the_primary` (t, s), `mariadb_autocommit_off_never_writes_on_a_writable_replica` (t), PyMySQL/JDBC `*_read_modify_write_through_the_split` (t, s); st refuses it (case 2) |
//! | 2 statement pooling + autocommit=0 | n/a | `mysql_safety::statement_pooling_refuses_transactions_and_loses_no_write`, `statement_pooling_ends_a_session_a_procedure_left_in_a_transaction` (st) |
//! | 3 pipelines | `pg_pipeline::psycopg_pipeline_with_a_write_runs_whole_on_the_primary_and_reads_alone_on_the_standby`, `psycopg_pipeline_write_after_a_flushed_standby_read_is_refused_with_25006` (t, s, st) | n/a (no pipelines) |
//! | 4 server-side cursors | n/a (PostgreSQL cursors live in transactions: case "held replica") | `mysql_safety::an_open_cursor_on_the_replica_takes_no_write` (t, s, st), `jdbc_update_while_a_fetch_result_is_open_never_runs_on_the_replica` (t, s, st) |
//! | 5 lexer modes (standard_conforming_strings, NO_BACKSLASH_ESCAPES, ANSI_QUOTES) from SET, startup options, role defaults, server reports | `routing_safety_session::pg_standard_conforming_strings_off_sends_hidden_locks_and_writes_to_the_primary`, `pg_string_mode_from_options_role_defaults_and_server_reports` (t, s, st) | `routing_safety_session::mariadb_sql_mode_changes_what_reaches_the_replica` (t, s, st), `mariadb_no_backslash_escapes_set_out_of_sight_is_followed` (t, s); ANSI_QUOTES unseen by any SET: `routing_safety_sqlmode::mariadb_global_ansi_quotes_keeps_hidden_locks_and_writes_off_the_replica`, `mariadb_sql_mode_on_the_replica_alone_is_seen_on_its_connection`, `mariadb_ansi_quotes_from_a_prepared_set_is_followed` (t, s, st) |
//! | 6 quoted function names | `pg_quoted_function_names_keep_their_case` (t, s, st) | n/a (MySQL function names ignore case) |
//! | 7 stored functions' declarations | n/a (the server enforces STABLE/IMMUTABLE) | `mysql_safety::stored_functions_reach_a_replica_only_when_listed` (t, s, st) |
//! | 8 rules and hints, role checks, lagging/down replicas | `pg_rules_and_hints_never_send_writes_locks_or_nextval_to_the_standby` (t, s, st), `pg_rule_routed_reads_fall_back_when_the_replica_pool_is_down`, `pg_role_mismatch_is_detected_by_the_probe` | `mariadb_rules_never_send_writes_or_locks_to_a_writable_replica` (t, s, st), `mariadb_role_mismatch_is_detected_by_the_probe` |
//! | 9 serializable sessions | `routing_safety_session::serializable_sessions_read_from_the_primary` (t, s, st) | same test (t, s, st) |
//! | 10 read-your-writes from commit | `routing_safety_session::the_read_your_writes_window_starts_when_a_long_write_commits` (t, s, st) | same test (t, s, st) |
//! | held replica (transaction opened there) | `pg_pipeline::psycopg_pipeline_write_after_a_flushed_standby_read_is_refused_with_25006` (t, s) | `mysql_safety::a_replica_held_by_a_transaction_takes_no_unsafe_statement` (t, s); st refuses transactions |
//! | declared read-only transactions | `pg_pipeline::rust_postgres_read_only_transaction_does_not_pin_later_reads_to_the_primary` (t, s) | `mysql_safety::read_only_transactions_may_use_the_replica_and_write_nowhere` (t, s) |
//! | dry-run explains the decision | `dry_run_explains_the_role_check_the_lexer_mode_and_the_hold` | `dry_run_explains_mysql_session_decisions` |

use std::time::Duration;

use mysql::prelude::Queryable;

use crate::admin::{addrs, http, sum, with_metrics};
use crate::pg_util::{first_value, sqlstate};
use crate::router::{pg_pool, Router};
use crate::support::{dbs, eventually, free_port, unique_name};

/// PostgreSQL split config (`primary`, `replica` = the read pool, hence replica role) with a
/// regex rule sending `FROM <table>` to the replica pool, and `extra` appended. The standby's
/// health probe gets a generous timeout: on a loaded machine three slow probes in a row would
/// mark it down and send reads to the primary, which is not what these tests are about.
fn pg_config(table: &str, extra: &str) -> String {
    let pg = &dbs().pg;
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n{}\n{}\
         [pools.replica.health]\ntimeout = \"30s\"\n\n\
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
    let text = pg_config(&t, "")
        .replace(&format!("port = {} }}]", dbs().pg.replica_port), &format!("port = {dead} }}]"))
        .replace("[pools.replica.health]\n", "[pools.replica.health]\ninterval = \"200ms\"\nfailure_threshold = 1\n");
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

/// #19 case 6: `"Now"()` is not the built-in `now()` but a function of its own (here one that
/// writes), so it is volatile and runs on the primary, where its row lands, in every mode. It
/// lives in a database of its own: the function catalog merges case variants (the most
/// volatile wins), so in that database the built-in `now()` counts as volatile too, and the
/// other tests' routers must not load it.
#[test]
fn pg_quoted_function_names_keep_their_case() {
    let pg = &dbs().pg;
    let db = unique_name("qp_case_db");
    let t = unique_name("quoted_fn_");
    pg.superuser_client(pg.primary_port).batch_execute(&format!("CREATE DATABASE {db} OWNER {}", pg.user)).expect("db");
    let mut admin =
        pg.config(pg.primary_port, &pg.user, &pg.password).dbname(&db).connect(postgres::NoTls).expect("connect");
    admin
        .batch_execute(&format!(
            "CREATE TABLE {t}(id serial primary key); \
             CREATE FUNCTION \"Now\"() RETURNS int LANGUAGE sql AS $$ INSERT INTO {t} DEFAULT VALUES RETURNING id $$"
        ))
        .expect("setup");
    pg.wait_replica_caught_up(Duration::from_secs(20));
    for (i, mode) in ["transaction", "session", "statement"].into_iter().enumerate() {
        let text = pg_config("nothing_", "")
            .replace("mode = \"transaction\"", &format!("mode = \"{mode}\""))
            .replace(&format!("database = \"{}\"", pg.database), &format!("database = \"{db}\""));
        let r = Router::start(&text);
        let mut c = r.pg(&db);
        assert_eq!(first_value(&mut c, "SELECT pg_is_in_recovery(), \"Now\"()"), "f", "{mode}: the quoted one writes");
        let rows: i64 = admin.query_one(&format!("SELECT count(*) FROM {t}"), &[]).expect("count").get(0);
        assert_eq!(rows, i as i64 + 1, "{mode}: its row is on the primary");
    }
}

/// The dry-run explains MySQL session-level decisions as the session makes them (the session's
/// own settling function answers): an implicit write transaction under autocommit=0, a
/// declared READ ONLY one, a held replica refusing a write (transaction) or letting it detour
/// (cursor only), statement pooling refusing a transaction, and the lexer mode.
#[test]
fn dry_run_explains_mysql_session_decisions() {
    use crate::routing_api::{enc, http as api};
    let routers = [
        Router::start(&with_metrics(&crate::mysql_safety::split_config("transaction", ""), None)),
        Router::start(&with_metrics(&crate::mysql_safety::split_config("statement", ""), None)),
    ];
    let [(_, tx_admin), (_, st_admin)] = [addrs(&routers[0]), addrs(&routers[1])];
    let ask = |admin, sql: &str, session: &str| {
        let target = format!("/api/routing/test?sql={}&protocol=mysql{session}", enc(sql));
        let (status, v) = api(admin, "GET", &target, None);
        assert_eq!(status, 200, "{v}");
        v
    };
    let field = |v: &serde_json::Value, k: &str| v[k].as_str().map(str::to_owned);
    let read = "SELECT v FROM t WHERE id = 1";
    let plain = ask(tx_admin, read, "");
    assert_eq!(
        (field(&plain, "pool"), field(&plain, "session_check")),
        (Some("myread".into()), Some("as_routed".into()))
    );
    let ac0 = ask(tx_admin, read, "&autocommit=0");
    assert_eq!(
        (field(&ac0, "pool"), field(&ac0, "session_check"), field(&ac0, "hold")),
        (Some("mywrite".into()), Some("write_transaction_on_primary".into()), Some("autocommit_off".into())),
        "{ac0}"
    );
    let ro = ask(tx_admin, read, "&autocommit=0&transaction_read_only=1");
    assert_eq!(field(&ro, "pool"), Some("myread".into()), "a declared READ ONLY transaction may use the replica: {ro}");
    let update = "UPDATE t SET v = 1 WHERE id = 1";
    let held = ask(tx_admin, update, "&held_pool=myread&hold=transaction");
    assert_eq!(
        (field(&held, "outcome"), field(&held, "session_check"), field(&held, "hold")),
        (Some("error".into()), Some("refused_held_replica".into()), Some("transaction".into())),
        "{held}"
    );
    assert!(field(&held, "message").is_some_and(|m| m.contains("a transaction is open")), "{held}");
    let detour = ask(tx_admin, update, "&held_pool=myread&hold=cursor");
    assert_eq!(
        (field(&detour, "pool"), field(&detour, "session_check"), field(&detour, "hold")),
        (Some("mywrite".into()), Some("detour_to_primary".into()), Some("cursor".into())),
        "{detour}"
    );
    let pin = ask(tx_admin, "SET @x = 1", "&held_pool=myread&hold=cursor");
    assert!(field(&pin, "message").is_some_and(|m| m.contains("a cursor is open")), "state that would pin: {pin}");
    let safe = ask(tx_admin, read, "&held_pool=myread&hold=transaction");
    assert_eq!(
        (field(&safe, "pool"), field(&safe, "role_check")),
        (Some("myread".into()), Some("replica_safe".into()))
    );
    let lock = r"SELECT 'a\' , 1 FROM t FOR UPDATE -- '";
    let lexed = ask(tx_admin, lock, "&sql_mode=NO_BACKSLASH_ESCAPES");
    assert_eq!(
        (field(&lexed, "pool"), field(&lexed, "reason"), field(&lexed, "lexer_mode")),
        (Some("mywrite".into()), Some("lexer_mode".into()), Some("NO_BACKSLASH_ESCAPES".into()))
    );
    let quoted = ask(tx_admin, r#"SELECT "a\" , 1 FROM t FOR UPDATE -- ""#, "&sql_mode=ANSI_QUOTES");
    assert_eq!(
        (field(&quoted, "pool"), field(&quoted, "reason"), field(&quoted, "lexer_mode")),
        (Some("mywrite".into()), Some("lexer_mode".into()), Some("ANSI_QUOTES".into()))
    );
    let refused = ask(st_admin, "START TRANSACTION", "");
    assert_eq!(field(&refused, "session_check"), Some("refused_statement_pooling".into()), "{refused}");
    assert!(field(&refused, "message").is_some_and(|m| m.contains("statement pooling")), "{refused}");
    for bad in ["&hold=cursor", "&held_pool=myread&hold=forever", "&autocommit=maybe"] {
        let (status, v) = api(tx_admin, "GET", &format!("/api/routing/test?sql=SELECT+1&protocol=mysql{bad}"), None);
        assert_eq!(status, 400, "{bad}: {v}");
    }
}
