//! Issue #35: the seed's own HTAP example, verbatim, against a real analytics engine that speaks
//! the PostgreSQL wire protocol but is not PostgreSQL: DuckDB behind buenavista
//! (`tests/support/buenavista.sh`), in pool `analytics` with `engine = "generic"`, and MariaDB
//! holding the OLTP side with the same rows as JSON, so rows alone prove nothing. Placement is
//! proven from the engine's side: buenavista logs every statement it runs, and the translated
//! text (`list_has_any(labels, [..])`) is DuckDB's alone.

use std::process::Command;

use mysql::prelude::Queryable;

use crate::pg_util::psql;
use crate::router::{pg_pool, Router};
use crate::routing_api::{enc, http};
use crate::scripts::{jdbc, python};
use crate::support::{dbs, unique_name, Buenavista};

pub(crate) const ORIGINAL: &str = "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '[1,2]')";
const TRANSLATED: &str = "SELECT id FROM tags WHERE list_has_any(labels, [1,2])";
/// A boolean column read from DuckDB (which sends `true`/`false` where PostgreSQL sends `t`/`f`).
const FLAG: &str = "SELECT on_sale FROM flags WHERE id = 1";

/// (JSON array the client sends, the list DuckDB must be asked about): the seed's value, one
/// item, more items than the example, none.
pub(crate) const ARRAYS: [(&str, &str); 4] =
    [("[1,2]", "[1, 2]"), ("[7]", "[7]"), ("[1,2,3,4,5]", "[1, 2, 3, 4, 5]"), ("[]", "[]")];

/// A value that is not a JSON array: refused, run nowhere.
pub(crate) const NOT_ARRAY: &str = "{\"a\":1}";

/// DuckDB's analytics copy of `tags`; MariaDB holds the same rows as JSON.
const DUCK_ROWS: &str = "(1, [1,2]), (2, [3]), (3, [7,8]), (4, []), (5, NULL), (6, [5,9,1])";
pub(crate) const MARIADB_ROWS: &str = "(1,'[1,2]'),(2,'[3]'),(3,'[7,8]'),(4,'[]'),(5,NULL),(6,'[5,9,1]')";

struct Htap {
    bv: Buenavista,
    /// The MariaDB database holding the OLTP `tags`.
    db: String,
    router: Router,
}

impl Htap {
    fn start() -> Htap {
        let bv = Buenavista::start(&format!(
            "CREATE TABLE tags (id INTEGER, labels INTEGER[]); INSERT INTO tags VALUES {DUCK_ROWS}; \
             CREATE TABLE flags (id INTEGER, on_sale BOOLEAN); INSERT INTO flags VALUES (1, true), (2, false), (3, NULL)"
        ));
        let db = unique_name("htap_duck");
        let mut my = dbs().my.primary_client();
        my.query_drop(format!("CREATE DATABASE {db}")).expect("database");
        my.query_drop(format!("CREATE TABLE {db}.tags (id INT PRIMARY KEY, labels JSON)")).expect("table");
        my.query_drop(format!("INSERT INTO {db}.tags VALUES {MARIADB_ROWS}")).expect("rows");
        my.query_drop(format!("CREATE TABLE {db}.flags (id INT PRIMARY KEY, on_sale BOOLEAN)")).expect("flags");
        my.query_drop(format!("INSERT INTO {db}.flags VALUES (1, TRUE), (2, FALSE), (3, NULL)")).expect("flags rows");
        let router = Router::start(&config(&db, bv.port));
        Htap { bv, db, router }
    }

    /// The MySQL listener's port.
    fn my_port(&self) -> u16 {
        self.router.listen[0].port()
    }

    /// What DuckDB itself answers for the translated statement with `list`, ids sorted.
    fn duckdb_ids(&self, list: &str) -> Vec<String> {
        let mut ids = self.bv.query(&format!("SELECT id FROM tags WHERE list_has_any(labels, {list})"));
        ids.sort();
        ids
    }

    /// The line a client prints for `value` run `how`: the ids DuckDB answers.
    fn expected(&self, how: &str, value: &str, list: &str) -> String {
        let ids = self.duckdb_ids(list);
        if ids.is_empty() {
            format!("{how} {value} ids")
        } else {
            format!("{how} {value} ids {}", ids.join(" "))
        }
    }
}

impl Drop for Htap {
    fn drop(&mut self) {
        let _ = dbs().my.primary_client().query_drop(format!("DROP DATABASE {}", self.db));
    }
}

/// MySQL listener (default pool `oltp` on the MariaDB primary), PostgreSQL listener (default pool
/// `pg` on the PostgreSQL primary), pool `analytics` on buenavista, and the seed's rule.
fn config(db: &str, duck_port: u16) -> String {
    let my = &dbs().my;
    format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n\
         [[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         [[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.oltp]\nprotocol = \"mysql\"\nusername = \"{mu}\"\npassword = \"{mp}\"\ndatabase = \"{db}\"\n\
         max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {mport} }}]\n\n\
         {pg}\n\
         [pools.analytics]\nprotocol = \"postgres\"\nengine = \"generic\"\nusername = \"duck\"\npassword = \"duck\"\n\
         max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {duck_port} }}]\n\
         [pools.analytics.health]\ninterval = \"200ms\"\ntimeout = \"5s\"\n\n\
         [routing]\ndefault_pool = \"pg\"\n\n[routing.mysql]\ndefault_pool = \"oltp\"\n\n\
         [[translation.rules]]\noriginal_sql = \"{ORIGINAL}\"\ntranslated_sql = \"{TRANSLATED}\"\n\
         target_pool = \"analytics\"\n\n\
         [[translation.rules]]\noriginal_sql = \"{FLAG}\"\ntranslated_sql = \"{FLAG}\"\ntarget_pool = \"analytics\"\n\n\
         [metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n",
        mu = my.user,
        mp = my.password,
        mport = my.primary_port,
        pg = pg_pool("pg", dbs().pg.primary_port, "transaction", 4)
            .replace("[pools.pg]\n", "[pools.pg]\nprotocol = \"postgres\"\n"),
    )
}

/// The seed's example with any array, from PyMySQL as a literal and as a parameter: DuckDB's
/// rows, each statement seen by DuckDB with the client's array as its list; a value that is no
/// JSON array is refused (1210) and reaches neither engine.
#[test]
fn pymysql_runs_the_seed_example_on_duckdb_with_any_array() {
    let h = Htap::start();
    let my = &dbs().my;
    let values: Vec<&str> = ARRAYS.iter().map(|(v, _)| *v).chain([NOT_ARRAY]).collect();
    let port = h.my_port().to_string();
    let args: Vec<&str> =
        ["127.0.0.1", &port, &my.user, &my.password, &h.db].into_iter().chain(values.iter().copied()).collect();
    let out = python("pymysql_htap_json.py", &args);
    let mut expected = Vec::new();
    for (value, list) in ARRAYS {
        for how in ["literal", "param"] {
            expected.push(h.expected(how, value, list));
        }
        let ran = h.bv.ran(&format!("list_has_any(labels, {list})"));
        assert_eq!(ran, 2, "{value}: literal and parameter each ran once on DuckDB:\n{}", h.bv.log_text());
    }
    expected.push(format!("literal {NOT_ARRAY} error 1210"));
    expected.push(format!("param {NOT_ARRAY} error 1210"));
    assert_eq!(out, expected);
    assert_eq!(h.bv.ran("JSON_OVERLAPS"), 0, "DuckDB never saw the original");
    assert_eq!(h.bv.ran("\"a\""), 0, "the refused value reached no engine");
}

/// The seed's example as a Connector/J PreparedStatement with `?`: server-side (the value known
/// only at execute, written into the translation there) and client-side (a literal in the
/// text). Rows are DuckDB's and each execute ran there with the client's array.
#[test]
fn jdbc_runs_the_seed_example_on_duckdb_with_server_side_parameters() {
    let h = Htap::start();
    let my = &dbs().my;
    let values: Vec<&str> = ARRAYS.iter().map(|(v, _)| *v).chain([NOT_ARRAY]).collect();
    for server_prepare in [true, false] {
        let before: Vec<usize> = ARRAYS.iter().map(|(_, l)| h.bv.ran(&format!("list_has_any(labels, {l})"))).collect();
        let url = format!(
            "jdbc:mariadb://127.0.0.1:{}/{}?useSsl=false&useServerPrepStmts={server_prepare}",
            h.my_port(),
            h.db
        );
        let out = jdbc("JdbcHtapJson.java", &url, &my.user, &my.password, &values);
        let mut expected: Vec<String> = ARRAYS.iter().map(|(v, l)| h.expected("prepared", v, l)).collect();
        expected.push(format!("prepared {NOT_ARRAY} error 1210 HY000"));
        assert_eq!(out, expected, "useServerPrepStmts={server_prepare}");
        for ((value, list), before) in ARRAYS.iter().zip(before) {
            let ran = h.bv.ran(&format!("list_has_any(labels, {list})")) - before;
            // Server-side, the prepare is described on DuckDB with the example's own value.
            let described = usize::from(server_prepare && *value == "[1,2]");
            assert_eq!(ran, 1 + described, "{value}, useServerPrepStmts={server_prepare}:\n{}", h.bv.log_text());
        }
    }
    assert_eq!(h.bv.ran("\"a\""), 0, "the refused value reached no engine");
}

/// The seed's example from psycopg 3 with the array as a server-side parameter (`$1` in the
/// JSON-array slot), unnamed and as a named prepared statement: DuckDB's rows for every array,
/// each execute seen by DuckDB with the client's array as its list; a value that is no JSON
/// array refused with 22023, reaching no engine, and the session going on. Before, the
/// statement was not translated and ran on the PostgreSQL default pool, which has no
/// `JSON_OVERLAPS`.
#[test]
fn psycopg_binds_the_seed_example_array_as_a_server_side_parameter() {
    let h = Htap::start();
    let pg = &dbs().pg;
    let dsn = format!(
        "host=127.0.0.1 port={} user={} password={} dbname=pg connect_timeout=10",
        h.router.listen[1].port(),
        pg.user,
        pg.password
    );
    let values: Vec<&str> = ARRAYS.iter().map(|(v, _)| *v).chain([NOT_ARRAY]).collect();
    let args: Vec<&str> = [dsn.as_str()].into_iter().chain(values.iter().copied()).collect();
    let out = python("psycopg_htap_json.py", &args);
    let mut expected = Vec::new();
    for (value, list) in ARRAYS {
        for how in ["param", "prepared"] {
            expected.push(h.expected(how, value, list));
        }
        let ran = h.bv.ran(&format!("list_has_any(labels, {list})"));
        assert_eq!(ran, 2, "{value}: unnamed and named each ran once on DuckDB:\n{}", h.bv.log_text());
    }
    expected.push(format!("param {NOT_ARRAY} error 22023"));
    expected.push(format!("prepared {NOT_ARRAY} error 22023"));
    expected.push("after 1".to_owned());
    assert_eq!(out, expected);
    assert_eq!(h.bv.ran("JSON_OVERLAPS"), 0, "DuckDB never saw the original");
    assert_eq!(h.bv.ran("\"a\""), 0, "the refused value reached no engine");
}

/// asyncpg describes the seed's example with `$1` in the JSON-array slot before it binds
/// (`prepare`, and `fetch`'s statement cache): the parameter is described as `text` and the
/// columns as DuckDB describes the translation with the rule's own example list, so the
/// describe runs on DuckDB with `[1, 2]` and never with a client value. Every execute (its
/// text parameter sent in binary) then runs on DuckDB with the client's array. Before, the
/// Describe got 0A000 and asyncpg could not run the statement at all.
#[test]
fn asyncpg_describes_and_runs_the_seed_example_with_a_server_side_parameter() {
    let h = Htap::start();
    let pg = &dbs().pg;
    let dsn = format!("postgresql://{}:{}@127.0.0.1:{}/pg", pg.user, pg.password, h.router.listen[1].port());
    let values: Vec<&str> = ARRAYS.iter().map(|(v, _)| *v).chain([NOT_ARRAY]).collect();
    let args: Vec<&str> = [dsn.as_str()].into_iter().chain(values.iter().copied()).collect();
    let out = python("asyncpg_htap_json.py", &args);
    let mut expected = vec!["described text | id:int4".to_owned()];
    for (value, list) in ARRAYS {
        for how in ["fetch", "prepared"] {
            expected.push(h.expected(how, value, list));
        }
    }
    expected.push(format!("fetch {NOT_ARRAY} error 22023"));
    expected.push(format!("prepared {NOT_ARRAY} error 22023"));
    expected.push("after 1".to_owned());
    assert_eq!(out, expected, "{}", h.bv.log_text());
    for (value, list) in ARRAYS {
        // Two describes (the prepared statement, fetch's cached one) ran the example's list.
        let described = if value == "[1,2]" { 2 } else { 0 };
        let ran = h.bv.ran(&format!("list_has_any(labels, {list})"));
        assert_eq!(ran, 2 + described, "{value}: each execute ran once on DuckDB:\n{}", h.bv.log_text());
    }
    assert_eq!(h.bv.ran("JSON_OVERLAPS"), 0, "DuckDB never saw the original");
    assert_eq!(h.bv.ran("\"a\""), 0, "the refused value reached no engine");
}

/// psycopg 3 binding the array in binary format (`%b`): a `text` value is decoded and runs on
/// DuckDB with the client's array; a binary int array is refused with a clear error (it is no
/// JSON array's text), reaching no engine, and the session goes on. Before, every binary
/// value was refused.
#[test]
fn psycopg_binary_parameters_in_the_json_array_slot_are_decoded_or_refused() {
    let h = Htap::start();
    let pg = &dbs().pg;
    let dsn = format!(
        "host=127.0.0.1 port={} user={} password={} dbname=pg connect_timeout=10",
        h.router.listen[1].port(),
        pg.user,
        pg.password
    );
    let values: Vec<&str> = ARRAYS.iter().map(|(v, _)| *v).chain([NOT_ARRAY]).collect();
    let args: Vec<&str> = [dsn.as_str()].into_iter().chain(values.iter().copied()).collect();
    let out = python("psycopg_htap_binary.py", &args);
    let mut expected: Vec<String> = ARRAYS.iter().map(|(v, l)| h.expected("binary", v, l)).collect();
    for (value, list) in ARRAYS {
        let ran = h.bv.ran(&format!("list_has_any(labels, {list})"));
        assert_eq!(ran, 1, "{value} ran once on DuckDB:\n{}", h.bv.log_text());
    }
    expected.push(format!("binary {NOT_ARRAY} error 22023"));
    expected.push(
        "list error 0A000 parameter $1 has type OID 1005 in binary format, which a statement whose translation is \
         written at Bind does not take (send it in text format)"
            .to_owned(),
    );
    expected.push("after 1".to_owned());
    assert_eq!(out, expected);
    assert_eq!(h.bv.ran("\"a\""), 0, "the refused value reached no engine");
}

/// Booleans from DuckDB reach MySQL clients as what they are, in text and binary rows (before
/// #35 DuckDB's `true` arrived as 0).
#[test]
fn duckdb_booleans_reach_mysql_clients_as_they_are() {
    let h = Htap::start();
    let my = &dbs().my;
    let mut c = mysql::Conn::new(my.opts(h.my_port(), &my.user, &my.password).db_name(Some(&h.db))).expect("connect");
    for (id, want) in [(1, Some(1)), (2, Some(0)), (3, None)] {
        let sql = FLAG.replace("= 1", &format!("= {id}"));
        let text: Option<Option<i64>> = c.query_first(&sql).expect("text");
        assert_eq!(text, Some(want), "text row {id}");
        // Without parameters: buenavista describes a statement by running it, with no values.
        let stmt = c.prep(&sql).expect("prepare");
        let binary: Option<Option<i64>> = c.exec_first(&stmt, ()).expect("binary");
        assert_eq!(binary, Some(want), "binary row {id}");
    }
    assert!(h.bv.ran("FROM flags WHERE id = ") >= 6, "every read ran on DuckDB:\n{}", h.bv.log_text());
}

/// DuckDB stopped mid-session (a session-mode MySQL session): the translated statement gets one
/// error with a server number (1105 / 08S01, which the mariadb CLI shows with the router's text
/// instead of `ERROR 2027 Received malformed packet`), the session goes on on MariaDB, and once
/// DuckDB is back the translated statement runs there again.
#[test]
fn a_lost_analytics_engine_fails_one_statement_and_the_session_goes_on() {
    let mut h = Htap::start();
    let my = &dbs().my;
    let mut c = mysql::Conn::new(my.opts(h.my_port(), &my.user, &my.password).db_name(Some(&h.db))).expect("connect");
    let before: Vec<i64> = c.query(ORIGINAL).expect("DuckDB up");
    assert!(!before.is_empty());
    h.bv.stop();
    for attempt in 0..2 {
        match c.query_drop(ORIGINAL).expect_err("DuckDB is down") {
            mysql::Error::MySqlError(e) => assert_eq!((e.code, e.state.as_str()), (1105, "08S01"), "{attempt}: {e:?}"),
            other => panic!("{attempt}: expected a server error, got {other}"),
        }
        let id: Option<u64> = c.query_first("SELECT @@server_id").expect("the session goes on");
        assert_eq!(id, Some(1), "MariaDB answers the next statement");
    }
    let cli = Command::new("mariadb")
        .args(["--no-defaults", "--protocol=TCP", "-h127.0.0.1", "--skip-ssl", "--batch"])
        .arg(format!("-u{}", my.user))
        .arg(format!("-p{}", my.password))
        .arg(format!("-P{}", h.my_port()))
        .arg(&h.db)
        .args(["-e", ORIGINAL])
        .output()
        .expect("mariadb CLI");
    let stderr = String::from_utf8_lossy(&cli.stderr);
    assert!(stderr.contains("ERROR 1105 (08S01)") && stderr.contains("analytics"), "{stderr}");
    h.bv.restart();
    let ran = h.bv.ran("list_has_any");
    crate::support::eventually(std::time::Duration::from_secs(20), "DuckDB to answer again", || {
        c.query::<i64, _>(ORIGINAL).is_ok_and(|ids| ids == before)
    });
    assert!(h.bv.ran("list_has_any") > ran, "it ran on DuckDB again");
}

/// The same from a PostgreSQL client (the `postgres` crate, simple queries, on the PostgreSQL
/// listener): with DuckDB stopped the translated statement gets one error, the session's next
/// statement runs on its PostgreSQL pool (`pg_is_in_recovery()` is PostgreSQL's alone), and once
/// DuckDB is back the translated statement runs there again.
#[test]
fn a_lost_analytics_engine_fails_one_statement_of_a_postgres_client() {
    let mut h = Htap::start();
    let mut c = postgres::Config::new()
        .host("127.0.0.1")
        .port(h.router.listen[1].port())
        .user(&dbs().pg.user)
        .password(&dbs().pg.password)
        .dbname("pg")
        .connect(postgres::NoTls)
        .expect("connect");
    let ids = |c: &mut postgres::Client| -> Result<Vec<String>, postgres::Error> {
        let rows = c.simple_query(ORIGINAL)?;
        let mut ids: Vec<String> = rows
            .iter()
            .filter_map(|m| match m {
                postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
                _ => None,
            })
            .collect();
        ids.sort();
        Ok(ids)
    };
    let before = ids(&mut c).expect("DuckDB up");
    assert_eq!(before, h.duckdb_ids("[1, 2]"));
    h.bv.stop();
    for attempt in 0..2 {
        let e = ids(&mut c).expect_err("DuckDB is down");
        assert!(e.as_db_error().is_some(), "{attempt}: a server error, not a lost session: {e}");
        let standby: bool = c.query_one("SELECT pg_is_in_recovery()", &[]).expect("the session goes on").get(0);
        assert!(!standby, "PostgreSQL's primary answers the next statement");
    }
    h.bv.restart();
    let ran = h.bv.ran("list_has_any");
    crate::support::eventually(std::time::Duration::from_secs(20), "DuckDB to answer again", || {
        ids(&mut c).is_ok_and(|ids| ids == before)
    });
    assert!(h.bv.ran("list_has_any") > ran, "it ran on DuckDB again");
}

/// `SET sql_select_limit = 1` refuses the translated statement (it would return other rows
/// there); `SET sql_select_limit = DEFAULT` lifts the refusal for the rest of the session.
#[test]
fn select_limit_back_to_default_lifts_the_refusal() {
    let h = Htap::start();
    let my = &dbs().my;
    let mut c = mysql::Conn::new(my.opts(h.my_port(), &my.user, &my.password).db_name(Some(&h.db))).expect("connect");
    c.query_drop("SET sql_select_limit = 1").expect("limit");
    match c.query_drop(ORIGINAL).expect_err("refused while the limit is set") {
        mysql::Error::MySqlError(e) => assert_eq!(e.code, 9005, "{e:?}"),
        other => panic!("{other}"),
    }
    c.query_drop("SET sql_select_limit = DEFAULT").expect("back to default");
    let ids: Vec<i64> = c.query(ORIGINAL).expect("runs again");
    assert_eq!(ids.len(), h.duckdb_ids("[1, 2]").len());
    assert_eq!(h.bv.ran("list_has_any(labels, [1, 2])"), 1, "{}", h.bv.log_text());
}

/// The seed's example verbatim from the mariadb CLI, between statements MariaDB answers.
#[test]
fn mariadb_cli_runs_the_seed_example_verbatim_on_duckdb() {
    let h = Htap::start();
    let my = &dbs().my;
    let out = crate::scripts::run(
        Command::new("mariadb")
            .args(["--no-defaults", "--protocol=TCP", "-h127.0.0.1", "--skip-ssl", "--batch", "--skip-column-names"])
            .arg(format!("-u{}", my.user))
            .arg(format!("-p{}", my.password))
            .arg(format!("-P{}", h.my_port()))
            .arg(&h.db)
            .args(["-e", &format!("SELECT @@server_id; {ORIGINAL}; SELECT @@server_id")]),
        "mariadb CLI",
    );
    let mut expected = vec!["1".to_owned()];
    expected.extend(h.duckdb_ids("[1, 2]"));
    expected.push("1".to_owned());
    let mut got = out.clone();
    let last = got.len().saturating_sub(1);
    got[1..last].sort();
    assert_eq!(got, expected);
    assert_eq!(h.bv.ran(TRANSLATED.replace("[1,2]", "[1, 2]").as_str()), 1, "{}", h.bv.log_text());
}

/// A generic engine's pool: healthy by its check query (DuckDB has no `pg_is_in_recovery()`),
/// a psql client's translated statement runs there without the PostgreSQL-only RESETs, and the
/// dry-run says what the router will not do there and where the client's array lands.
#[test]
fn generic_engine_pool_is_healthy_serves_psql_and_says_what_it_skips() {
    let h = Htap::start();
    let admin = h.router.control().endpoints().admin.expect("admin endpoint");
    crate::support::eventually(std::time::Duration::from_secs(20), "analytics probed healthy", || {
        let (_, pools) = http(admin, "GET", "/api/pools", None);
        let pool = pools["pools"].as_array().and_then(|p| p.iter().find(|p| p["name"] == "analytics").cloned());
        let backend = pool.map(|p| p["backends"][0].clone()).unwrap_or_default();
        backend["healthy"] == true && h.bv.ran("SELECT 1") >= 2
    });
    let (_, pools) = http(admin, "GET", "/api/pools", None);
    let pool = pools["pools"].as_array().and_then(|p| p.iter().find(|p| p["name"] == "analytics").cloned());
    assert_eq!(pool.map(|p| p["backends"][0]["health_check_failures_total"].clone()), Some(0.into()), "{pools}");
    assert_eq!(h.bv.ran("pg_is_in_recovery"), 0);

    let sql = ORIGINAL.replace("[1,2]", "[7]");
    let out = psql(h.router.listen[1].port(), "pg", "app", &["-At", "-v", "ON_ERROR_STOP=1"], &format!("{sql};\n"));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let mut ids: Vec<String> = stdout.lines().map(str::to_owned).collect();
    ids.sort();
    assert_eq!(ids, h.duckdb_ids("[7]"));
    assert_eq!(h.bv.ran("list_has_any(labels, [7])"), 1, "{}", h.bv.log_text());
    assert_eq!(h.bv.ran("RESET"), 0, "no PostgreSQL-only RESET reached DuckDB:\n{}", h.bv.log_text());

    let path = format!("/api/routing/test?sql={}&protocol=mysql", enc(&ORIGINAL.replace("[1,2]", "[4,5,6]")));
    let (status, d) = http(admin, "GET", &path, None);
    assert_eq!(status, 200, "{d}");
    assert_eq!((d["pool"].as_str(), d["pool_engine"].as_str()), (Some("analytics"), Some("generic")), "{d}");
    assert_eq!(d["rewritten_sql"].as_str(), Some("SELECT id FROM tags WHERE list_has_any(labels, [4, 5, 6])"));
    assert_eq!(d["rewritten_literals"], serde_json::json!([{"client": "'[4,5,6]'", "lands_as": "4, 5, 6"}]), "{d}");
    let skips = d["engine_skips"].to_string();
    assert!(skips.contains("RESET ALL") && skips.contains("check_query"), "{d}");
    let path = format!("/api/routing/test?sql={}&protocol=mysql", enc(&ORIGINAL.replace("'[1,2]'", "'nope'")));
    let (_, d) = http(admin, "GET", &path, None);
    assert_eq!(d["outcome"].as_str(), Some("error"), "{d}");
    assert!(d["message"].as_str().is_some_and(|m| m.contains("JSON array")), "{d}");
}

/// A rule whose translation keeps a value of the original as a constant is reported when it is
/// registered, and the answer shows which client literal lands where.
#[test]
fn registering_a_translation_reports_literals_that_map_to_nothing() {
    let h = Htap::start();
    let admin = h.router.control().endpoints().admin.expect("admin endpoint");
    let rule = serde_json::json!({
        "original_sql": "SELECT id FROM tags WHERE JSON_OVERLAPS(labels, '[1,2]') AND id > 3",
        "translated_sql": "SELECT id FROM tags WHERE list_has_any(labels, [2,1]) AND id > 3",
        "target_pool": "analytics",
    });
    let (status, answer) = http(admin, "POST", "/api/translations", Some(&rule));
    assert!(status < 300, "{answer}");
    let text = answer.to_string();
    assert!(
        text.contains("maps to no literal of the translation") && text.contains("looks like it came from"),
        "{answer}"
    );
    let good = serde_json::json!({"original_sql": ORIGINAL, "translated_sql": TRANSLATED, "target_pool": "analytics"});
    let (_, answer) = http(admin, "POST", "/api/translations", Some(&good));
    let text = answer.to_string();
    assert!(text.contains("\"json_array\":true") && !text.contains("maps to no literal"), "{answer}");
}
