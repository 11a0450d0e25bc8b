//! Statement routing for MySQL clients against the harness's MariaDB primary (server id 1) and
//! replica (server id 2): each test proves where statements ran with `@@server_id`, or by what
//! the primary and the replica recorded.

use std::time::Duration;

use mysql::prelude::Queryable;
use mysql::Conn;
use querypilot::sql::analyze::{analyze, Operation};
use querypilot::sql::volatility::FunctionCatalog;
use querypilot::sql::Dialect;

use crate::router::Router;
use crate::support::{dbs, eventually, unique_name, MyEnv};

const PRIMARY: u64 = 1;
const REPLICA: u64 = 2;

/// A MySQL pool named `name` on `port` in transaction mode.
fn pool(name: &str, port: u16) -> String {
    let my: &MyEnv = &dbs().my;
    format!(
        "[pools.{name}]\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
         max_connections = 8\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n",
        u = my.user,
        p = my.password,
        d = my.database,
    )
}

/// One MySQL listener, `mywrite` on the primary, `myread` on the replica, split on, plus
/// `rules` (TOML for `[[routing.rules]]`).
/// sysbench's schemas are served by no pool: the clients opt in to the default pool's server.
fn split_config(rules: &str) -> String {
    let my = &dbs().my;
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n{w}\n{r}\n\
         [routing]\nread_write_split = true\nwrite_pool = \"mywrite\"\nread_pool = \"myread\"\n\
         unknown_database = \"default_pool\"\n\n{rules}",
        w = pool("mywrite", my.primary_port),
        r = pool("myread", my.replica_port),
    )
}

/// The split with `read_your_writes = "session"`: a write pins the session to the primary (the
/// default, causal, has its own tests in causal_mysql.rs).
fn session_ryw_config() -> String {
    split_config(&format!("read_your_writes = \"session\"\n{RULES}"))
}

/// Rules the tests exercise: a regex rule for MySQL clients that sends one read shape to the
/// primary, the same for PostgreSQL clients only (must not apply here), and a reject rule.
const RULES: &str = r#"
[[routing.rules]]
name = "forced_primary"
pattern = "AS forced_primary"
protocol = "mysql"
pool = "mywrite"

[[routing.rules]]
name = "pg_only"
pattern = "AS pg_only"
protocol = "postgres"
pool = "mywrite"

[[routing.rules]]
name = "no_secrets"
pattern = "(?i)\\bsecret_table\\b"
reject = "secret_table is not reachable through the router"
"#;

fn client(router: &Router) -> Conn {
    let my = &dbs().my;
    Conn::new(my.opts(router.port(), &my.user, &my.password)).unwrap_or_else(|e| panic!("connect through router: {e}"))
}

/// The first column of the first row of `sql` as a number; panics on an error.
fn num(c: &mut Conn, sql: &str) -> u64 {
    let row: Option<mysql::Row> = c.query_first(sql).unwrap_or_else(|e| panic!("{sql}: {e}"));
    let row = row.unwrap_or_else(|| panic!("{sql}: no row"));
    let v: Option<mysql::Value> = row.as_ref(row.len() - 1).cloned();
    mysql::from_value_opt::<u64>(v.unwrap_or(mysql::Value::NULL)).unwrap_or_else(|e| panic!("{sql}: last column: {e}"))
}

/// The server that ran `sql`, which must end its select list with `@@server_id`.
fn ran_on(c: &mut Conn, sql: &str) -> u64 {
    num(c, sql)
}

/// As [`ran_on`], through a prepared statement.
fn ran_on_prepared(c: &mut Conn, sql: &str) -> u64 {
    let row: Option<mysql::Row> = c.exec_first(sql, ()).unwrap_or_else(|e| panic!("prepared {sql}: {e}"));
    let row = row.unwrap_or_else(|| panic!("prepared {sql}: no row"));
    let v: Option<mysql::Value> = row.as_ref(row.len() - 1).cloned();
    mysql::from_value_opt::<u64>(v.unwrap_or(mysql::Value::NULL)).unwrap_or_else(|e| panic!("prepared {sql}: {e}"))
}

fn server_error(e: mysql::Error) -> (u16, String, String) {
    match e {
        mysql::Error::MySqlError(e) => (e.code, e.state, e.message),
        other => panic!("expected a server error, got {other}"),
    }
}

/// A fresh table `(id auto_increment, sid int)` created on the primary and replicated.
fn table() -> String {
    let name = unique_name("rt");
    let my = &dbs().my;
    my.primary_client()
        .query_drop(format!("CREATE TABLE {name} (id INT AUTO_INCREMENT PRIMARY KEY, sid INT)"))
        .expect("create table");
    my.wait_replica_caught_up(Duration::from_secs(30));
    name
}

#[test]
fn safe_reads_reach_the_replica_and_everything_else_the_primary() {
    let t = table();
    dbs().my.primary_client().query_drop(format!("INSERT INTO {t} (sid) VALUES (0)")).expect("seed");
    dbs().my.wait_replica_caught_up(Duration::from_secs(30));
    let router = Router::start(&split_config(RULES));
    let mut c = client(&router);
    assert_eq!(ran_on(&mut c, "SELECT @@server_id"), REPLICA, "a safe read");
    assert_eq!(ran_on(&mut c, &format!("SELECT COUNT(*), @@server_id FROM {t}")), REPLICA, "a safe read of a table");
    assert_eq!(ran_on(&mut c, &format!("SELECT id, @@server_id FROM {t} LIMIT 1 FOR UPDATE")), PRIMARY, "FOR UPDATE");
    assert_eq!(
        ran_on(&mut c, &format!("SELECT 1, @@server_id FROM {t} LOCK IN SHARE MODE")),
        PRIMARY,
        "LOCK IN SHARE MODE"
    );
    assert_eq!(ran_on(&mut c, "SELECT 1 AS forced_primary, @@server_id"), PRIMARY, "a mysql regex rule");
    assert_eq!(ran_on(&mut c, "SELECT 1 AS pg_only, @@server_id"), REPLICA, "a postgres-only rule does not apply");
    // Locking reads and rule targets change no data: reads still reach the replica.
    assert_eq!(ran_on(&mut c, "SELECT @@server_id"), REPLICA, "still unpinned");
    // What may change data (a volatile function, SQL the analysis cannot read) pins the
    // session to the primary afterwards: a fresh session each.
    assert_eq!(ran_on(&mut client(&router), "SELECT RAND(), @@server_id"), PRIMARY, "a volatile function");
    // MariaDB-only syntax sqlparser does not know: unknown never means safe.
    let unparsable = "SELECT @@server_id LIMIT ROWS EXAMINED 1000";
    let facts = analyze(unparsable, Dialect::MySql, &FunctionCatalog::builtin(Dialect::MySql));
    assert_eq!(facts.operation, Operation::Unknown, "the analysis cannot read it");
    assert_eq!(ran_on(&mut client(&router), unparsable), PRIMARY, "unparsable SQL");
    // Unparsable for both: the server's own syntax error comes back.
    let (code, _, _) = server_error(client(&router).query_drop("SELEKT @@server_id").expect_err("syntax error"));
    assert_eq!(code, 1064);
    // Session state pins these sessions to their primary connection: one session each.
    assert_eq!(ran_on(&mut client(&router), "SELECT LAST_INSERT_ID(), @@server_id"), PRIMARY, "LAST_INSERT_ID");
    let mut locker = client(&router);
    assert_eq!(ran_on(&mut locker, "SELECT GET_LOCK('qp_route', 0), @@server_id"), PRIMARY, "GET_LOCK");
    assert_eq!(num(&mut locker, "SELECT RELEASE_LOCK('qp_route')"), 1, "the lock is held by the same connection");
}

#[test]
fn after_a_write_the_session_reads_the_primary_and_others_the_replica() {
    let t = table();
    let router = Router::start(&session_ryw_config());
    let mut writer = client(&router);
    let mut other = client(&router);
    assert_eq!(ran_on(&mut writer, "SELECT @@server_id"), REPLICA);
    writer.query_drop(format!("INSERT INTO {t} (sid) SELECT @@server_id")).expect("write through the router");
    let sid: Option<u64> = dbs().my.primary_client().query_first(format!("SELECT sid FROM {t}")).expect("read primary");
    assert_eq!(sid, Some(PRIMARY), "the write ran on the primary");
    assert_eq!(ran_on(&mut writer, &format!("SELECT COUNT(*), @@server_id FROM {t}")), PRIMARY, "read your writes");
    assert_eq!(num(&mut writer, &format!("SELECT COUNT(*) FROM {t}")), 1, "the write is visible");
    assert_eq!(ran_on(&mut other, "SELECT @@server_id"), REPLICA, "another session is unaffected");
    assert_eq!(ran_on_prepared(&mut other, "SELECT @@server_id"), REPLICA, "prepared, other session");
    assert_eq!(ran_on_prepared(&mut writer, "SELECT @@server_id"), PRIMARY, "prepared, pinned session");
}

#[test]
fn prepared_statements_are_routed_at_execute() {
    let t = table();
    let router = Router::start(&session_ryw_config());
    let mut c = client(&router);
    let read = c.prep("SELECT ?, @@server_id").expect("prepare read");
    let lock = c.prep(format!("SELECT id, @@server_id FROM {t} LIMIT 1 FOR UPDATE")).expect("prepare locking read");
    let rand = c.prep("SELECT RAND(), @@server_id").expect("prepare volatile read");
    for i in 0..3u64 {
        let row: Option<(u64, u64)> = c.exec_first(&read, (i,)).expect("execute read");
        assert_eq!(row, Some((i, REPLICA)), "prepared safe read, execute {i}");
    }
    c.query_drop(format!("INSERT INTO {t} (sid) VALUES (0)")).expect("seed through the router");
    // The write pinned this session: the locking and the safe read both run on the primary,
    // where the statement was never prepared before (re-prepared there).
    let row: Option<(u64, u64)> = c.exec_first(&lock, ()).expect("execute locking read");
    assert_eq!(row.map(|r| r.1), Some(PRIMARY));
    let row: Option<(f64, u64)> = c.exec_first(&rand, ()).expect("execute volatile read");
    assert_eq!(row.map(|r| r.1), Some(PRIMARY));
    let row: Option<(u64, u64)> = c.exec_first(&read, (7u64,)).expect("execute read after write");
    assert_eq!(row, Some((7, PRIMARY)));
    // A second session's prepared write goes to the primary, its reads to the replica.
    let mut d = client(&router);
    let row: Option<(u64, u64)> = d.exec_first("SELECT ?, @@server_id", (1u64,)).expect("fresh session read");
    assert_eq!(row, Some((1, REPLICA)));
    d.exec_drop(format!("INSERT INTO {t} (sid) SELECT @@server_id"), ()).expect("prepared write");
    let n: Option<u64> = dbs()
        .my
        .primary_client()
        .query_first(format!("SELECT COUNT(*) FROM {t} WHERE sid = {PRIMARY}"))
        .expect("count");
    assert_eq!(n, Some(1), "the prepared write ran on the primary");
}

#[test]
fn hints_that_cannot_be_honored_and_rejects_run_nowhere() {
    let t = table();
    let router = Router::start(&split_config(RULES));
    let mut c = client(&router);
    let hinted = format!("/* querypilot: route=replica */ INSERT INTO {t} (sid) VALUES (99)");
    let (code, state, message) = server_error(c.query_drop(&hinted).expect_err("replica hint on a write"));
    assert_eq!((code, state.as_str()), (9001, "QP001"), "{message}");
    let (code, state, _) = server_error(c.exec_drop(&hinted, ()).expect_err("prepared replica hint on a write"));
    assert_eq!((code, state.as_str()), (9001, "QP001"));
    let (code, state, message) = server_error(c.query_drop("SELECT * FROM secret_table").expect_err("rejected"));
    assert_eq!((code, state.as_str()), (1227, "42000"));
    assert_eq!(message, "secret_table is not reachable through the router");
    // The session is still usable, unpinned (nothing ran), and honors a valid replica hint.
    assert_eq!(ran_on(&mut c, "/* querypilot: route=replica */ SELECT @@server_id"), REPLICA);
    assert_eq!(ran_on(&mut c, "/* querypilot: route=primary */ SELECT @@server_id"), PRIMARY);
    assert_eq!(ran_on(&mut c, "SELECT @@server_id"), PRIMARY, "route=primary pins the session");
    dbs().my.wait_replica_caught_up(Duration::from_secs(30));
    for port in [dbs().my.primary_port, dbs().my.replica_port] {
        let n: Option<u64> = dbs()
            .my
            .superuser_client(port)
            .query_first(format!("SELECT COUNT(*) FROM {}.{t}", dbs().my.database))
            .expect("count");
        assert_eq!(n, Some(0), "the refused write ran nowhere (port {port})");
    }
}

/// `Com_select` of the server on `port`.
fn com_select(port: u16) -> u64 {
    let row: Option<(String, u64)> =
        dbs().my.superuser_client(port).query_first("SHOW GLOBAL STATUS LIKE 'Com_select'").expect("status");
    row.map_or(0, |r| r.1)
}

fn sysbench(port: u16, db: &str, args: &[&str]) -> String {
    let out = std::process::Command::new("sysbench")
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
        .args(["--tables=1", "--table-size=2000"])
        .output()
        .expect("run sysbench");
    let text = format!("{}\n{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "sysbench {args:?} failed:\n{text}");
    text
}

#[test]
fn sysbench_read_only_reads_reach_the_replica() {
    let my = &dbs().my;
    let db = unique_name("sbroute");
    my.superuser_client(my.primary_port).query_drop(format!("CREATE DATABASE {db}")).expect("create db");
    sysbench(my.primary_port, &db, &["oltp_read_only", "prepare"]);
    my.wait_replica_caught_up(Duration::from_secs(60));
    let router = Router::start(&split_config(""));
    for ps in ["auto", "disable"] {
        let (p0, r0) = (com_select(my.primary_port), com_select(my.replica_port));
        // Without BEGIN/COMMIT around each event: a transaction holds its (primary) connection.
        // A fixed number of events, not a duration: the assertions must not depend on speed.
        let args = [
            "oltp_read_only",
            "run",
            "--threads=8",
            "--events=200",
            "--time=0",
            "--skip_trx=on",
            &format!("--db-ps-mode={ps}"),
        ];
        let summary = sysbench(router.port(), &db, &args);
        let (p1, r1) = (com_select(my.primary_port), com_select(my.replica_port));
        let (on_primary, on_replica, reads) = (p1 - p0, r1 - r0, reads(&summary));
        // Every read sysbench counted ran on the replica (the primary's count is not compared:
        // other tests of this binary use it concurrently).
        assert!(reads > 1000, "ps={ps}: too few reads to tell: {reads}\n{summary}");
        assert!(
            on_replica >= reads,
            "ps={ps}: {reads} reads, {on_replica} on the replica, {on_primary} on the primary\n{summary}"
        );
    }
}

/// The "read:" query count of a sysbench summary.
fn reads(summary: &str) -> u64 {
    summary
        .lines()
        .find_map(|l| l.trim().strip_prefix("read:"))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no read line in:\n{summary}"))
}

/// Issue #8 for MySQL clients: with no healthy replica, split reads go to the primary
/// (`replica_fallback = "primary"`, the default) or fail with a clear error (`"error"`), and
/// both are counted in `sqp_replica_fallbacks_total`.
#[test]
fn reads_fall_back_to_the_primary_when_no_replica_is_healthy() {
    let dead = crate::support::free_port(); // nothing listens there: connects are refused
    let toml = split_config("").replace(
        &pool("myread", dbs().my.replica_port),
        &format!("{}\n[pools.myread.health]\ninterval = \"200ms\"\nfailure_threshold = 1\n", pool("myread", dead)),
    );
    assert!(toml.contains(&format!("port = {dead}")), "{toml}");
    let r = Router::start(&toml);
    crate::support::eventually(std::time::Duration::from_secs(15), "reads fall back to the primary", || {
        let opts =
            mysql::OptsBuilder::from_opts(crate::support::dbs().my.opts(r.port(), "app", "app")).db_name(Some("app"));
        let Ok(mut c) = mysql::Conn::new(opts) else { return false };
        use mysql::prelude::Queryable;
        matches!(c.query_first::<u64, _>("SELECT @@server_id"), Ok(Some(1)))
    });
    drop(r);

    let metrics = "\n[metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n";
    let toml =
        toml.replace("read_write_split = true", "read_write_split = true\nreplica_fallback = \"error\"") + metrics;
    let r = Router::start(&toml);
    // The mysql crate reads session variables while connecting: once the replica is known to
    // be down, that read fails too, with the same error.
    crate::support::eventually(Duration::from_secs(15), "reads to fail clearly", || {
        let opts = dbs().my.opts(r.port(), &dbs().my.user, &dbs().my.password);
        match mysql::Conn::new(opts).and_then(|mut c| c.query_first::<u64, _>("SELECT @@server_id")) {
            Err(mysql::Error::MySqlError(e)) => {
                assert_eq!((e.code, e.state.as_str()), (1105, "HY000"), "{e:?}");
                assert!(e.message.contains("replica_fallback"), "{e:?}");
                true
            }
            Err(e) => panic!("{e}"),
            Ok(_) => false,
        }
    });
    let text = crate::health::get(r.control().endpoints().metrics.expect("metrics"), "/metrics");
    let refused = text
        .lines()
        .find_map(|l| l.strip_prefix("sqp_replica_fallbacks_total{core=\"0\",pool=\"myread\",outcome=\"error\"} "))
        .and_then(|n| n.parse::<f64>().ok());
    assert!(refused.is_some_and(|n| n >= 1.0), "{text}");
}

/// Without a split or a matching rule, a MySQL client whose handshake names a pool as its
/// database stays on that pool instead of `mysql_default_pool`, for text and prepared
/// statements alike, and across COM_CHANGE_USER to another pool's name.
#[test]
fn a_pool_chosen_by_database_name_is_the_default_target() {
    let my = &dbs().my;
    let pools = pool("primary", my.primary_port) + &pool("replica", my.replica_port);
    let r = Router::start(&crate::mysql_session::my_config(&[0], &pools, "primary"));
    let connect = |db: &str| {
        let opts = mysql::OptsBuilder::from_opts(my.opts(r.port(), &my.user, &my.password)).db_name(Some(db));
        Conn::new(opts).unwrap_or_else(|e| panic!("connect to {db} through the router: {e}"))
    };
    let mut on_replica = connect("replica");
    for _ in 0..3 {
        assert_eq!(ran_on(&mut on_replica, "SELECT @@server_id"), REPLICA, "database \"replica\" selects that pool");
        assert_eq!(ran_on_prepared(&mut on_replica, "SELECT @@server_id"), REPLICA, "prepared, database \"replica\"");
    }
    let db: Option<String> = on_replica.query_first("SELECT DATABASE()").expect("database");
    assert_eq!(db.as_deref(), Some(my.database.as_str()), "the pool's own database is selected on its backend");
    let mut other = connect(&my.database);
    assert_eq!(ran_on(&mut other, "SELECT @@server_id"), PRIMARY, "a plain database uses the default pool");
    on_replica.change_user(mysql::ChangeUserOpts::new().with_db_name(Some("primary".into()))).expect("change user");
    assert_eq!(ran_on(&mut on_replica, "SELECT @@server_id"), PRIMARY, "after COM_CHANGE_USER to database \"primary\"");
}

/// #22: read-your-writes follows the client's reset: after COM_RESET_CONNECTION (what a
/// connection pool sends before handing the connection to its next user) the session that wrote
/// reads from the replica again.
#[test]
fn a_connection_reset_ends_read_your_writes_pinning() {
    let t = table();
    let router = Router::start(&split_config(RULES));
    let mut writer = client(&router);
    writer.query_drop(format!("INSERT INTO {t} (sid) SELECT @@server_id")).expect("write through the router");
    assert_eq!(ran_on(&mut writer, "SELECT @@server_id"), PRIMARY, "pinned after the write");
    writer.reset().expect("COM_RESET_CONNECTION through the router");
    assert_eq!(ran_on(&mut writer, "SELECT @@server_id"), REPLICA, "the reset session reads the replica");
}

/// The digest of `router`'s MySQL shape whose normalized text contains each of `words` (a
/// word starting with `!`: does not contain it).
fn mysql_digest(router: &Router, words: &[&str]) -> Option<serde_json::Value> {
    let admin = router.control().endpoints().admin.expect("admin endpoint");
    let (status, v) = crate::routing_api::http(admin, "GET", "/api/stats/digests?limit=100", None);
    assert_eq!(status, 200, "{v}");
    v["digests"]
        .as_array()?
        .iter()
        .find(|d| {
            let text = d["normalized"].as_str().unwrap_or_default().to_lowercase();
            let has = |w: &str| w.strip_prefix('!').map_or(text.contains(w), |w| !text.contains(w));
            d["protocol"] == "mysql" && words.iter().all(|w| has(w))
        })
        .cloned()
}

#[test]
fn digests_count_text_and_prepared_statements_their_rows_and_errors() {
    let admin = "\n[metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n";
    let router = Router::start(&split_config(&format!("{RULES}{admin}")));
    let t = table();
    let mut c = client(&router);
    c.query_drop(format!("INSERT INTO {t} (sid) VALUES (1), (2), (3)")).expect("insert");
    for _ in 0..2 {
        let rows: Vec<u64> = c.query(format!("SELECT sid AS forced_primary FROM {t}")).expect("text read");
        assert_eq!(rows.len(), 3);
        let rows: Vec<u64> =
            c.exec(format!("SELECT sid AS forced_primary FROM {t} WHERE sid >= ?"), (2,)).expect("prepared read");
        assert_eq!(rows.len(), 2);
    }
    c.query_drop(format!("SELECT no_such_column FROM {t}")).expect_err("an unknown column");
    let figures = |words: &[&str]| {
        mysql_digest(&router, words).map(|d| (d["calls"].as_u64(), d["rows"].as_u64(), d["errors"].as_u64()))
    };
    eventually(Duration::from_secs(10), "the failed statement recorded", || figures(&["no_such_column"]).is_some());
    assert_eq!(figures(&["insert", &t]), Some((Some(1), Some(3), Some(0))), "affected rows count");
    assert_eq!(figures(&["forced_primary", "!where", &t]), Some((Some(2), Some(6), Some(0))), "rows returned count");
    assert_eq!(figures(&["where", &t]), Some((Some(2), Some(4), Some(0))), "prepared executes count");
    assert_eq!(figures(&["no_such_column"]), Some((Some(1), Some(0), Some(1))));
}
