//! Issue #7 end to end: translation rules rewrite real traffic. Each rule turns a read of one
//! table into a read of another table with different rows (and adds where it ran), so the rows
//! that come back prove the rewrite and the server column proves the target pool. Covered:
//! `[[translation.rules]]` for PostgreSQL (simple query, named and unnamed prepared statements
//! with `$n` parameters) and MariaDB (COM_QUERY, COM_STMT_PREPARE with `?`), any literal value,
//! IN lists of varying length, strings with quotes, backslashes and non-ASCII text; a rule
//! registered through `POST /api/translations` that a reload removes; the hit counted in
//! `sqp_routing_decisions_total{decision="translation"}`.

use std::net::SocketAddr;
use std::time::Duration;

use mysql::prelude::Queryable;
use postgres::types::ToSql;
use postgres::SimpleQueryMessage;
use serde_json::json;

use querypilot::protocol::mysql::{
    decode_binary_row, BinaryValue, ColumnDefinition41, ErrPacket, StmtPrepareOk, ValueType,
};

use crate::mysql_commands::Raw;
use crate::router::{pg_config, pg_pool, Router};
use crate::routing_api::{enc, http};
use crate::support::{dbs, unique_name};

/// A string whose quoting matters in both dialects: quotes of both kinds, a backslash, a
/// would-be comment and non-ASCII text.
const AWKWARD: &str = "it's \"q\" \\ -- ü€😀";

/// `[[translation.rules]]` entry.
fn rule(original: &str, translated: &str, pool: &str) -> String {
    format!(
        "[[translation.rules]]\noriginal_sql = {}\ntranslated_sql = {}\ntarget_pool = \"{pool}\"\n\n",
        toml_str(original),
        toml_str(translated)
    )
}

/// A TOML basic string.
fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// Rows `(id, v)` of the two tables: `ta` has `a<id>`, `tb` has `b<id>`, for ids 1..=12.
fn rows(table_a: &str, table_b: &str) -> String {
    format!(
        "INSERT INTO {table_a} SELECT i, 'a' || i FROM generate_series(1, 12) i;\n\
         INSERT INTO {table_b} SELECT i, 'b' || i FROM generate_series(1, 12) i;"
    )
}

fn metrics_section() -> &'static str {
    "\n[metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n"
}

// ---------------------------------------------------------------------------------------------
// PostgreSQL

struct PgTables {
    a: String,
    b: String,
}

/// Creates `ta`/`tb` on the shared primary and waits until the standby has them.
fn pg_tables() -> PgTables {
    let pg = &dbs().pg;
    let t = PgTables { a: unique_name("tr_a"), b: unique_name("tr_b") };
    let mut c = pg.primary_client();
    c.batch_execute(&format!(
        "CREATE TABLE {a} (id int PRIMARY KEY, v text NOT NULL);\n\
         CREATE TABLE {b} (id int PRIMARY KEY, v text NOT NULL);\n{rows}\n\
         INSERT INTO {b} VALUES (100, $q${AWKWARD}$q$);",
        a = t.a,
        b = t.b,
        rows = rows(&t.a, &t.b)
    ))
    .expect("create tables");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    t
}

/// A split router (reads to the standby) with translation rules that send reads of `ta` to
/// `tb` on the primary, adding `pg_is_in_recovery()` so the rows say where they ran.
fn pg_router(t: &PgTables) -> Router {
    let pg = &dbs().pg;
    let pools =
        pg_pool("primary", pg.primary_port, "transaction", 4) + &pg_pool("replica", pg.replica_port, "transaction", 4);
    let (a, b) = (&t.a, &t.b);
    let rules = rule(
        &format!("SELECT v FROM {a} WHERE id = 1"),
        &format!("SELECT v, pg_is_in_recovery() FROM {b} WHERE id = 1"),
        "primary",
    ) + &rule(
        &format!("SELECT v FROM {a} WHERE id IN (1, 2) ORDER BY id"),
        &format!("SELECT v, pg_is_in_recovery() FROM {b} WHERE id IN (1, 2) ORDER BY id"),
        "primary",
    ) + &rule(
        &format!("SELECT id FROM {a} WHERE v = 'x'"),
        &format!("SELECT id, pg_is_in_recovery() FROM {b} WHERE v = 'x'"),
        "primary",
    ) + &rule(
        // The translation uses the two values in the other order: `$n` parameters follow them.
        &format!("SELECT v FROM {a} WHERE id >= 1 AND id <= 2 ORDER BY id"),
        &format!("SELECT v, pg_is_in_recovery() FROM {b} WHERE id <= 2 AND id >= 1 ORDER BY id"),
        "primary",
    );
    let toml = format!(
        "{}read_write_split = true\nread_pool = \"replica\"\nwrite_pool = \"primary\"\n\n{rules}{}",
        pg_config(&[0], &pools, "primary"),
        metrics_section()
    );
    Router::start(&toml)
}

/// `(first column, second column)` of every row of a simple query.
fn simple_rows(c: &mut postgres::Client, sql: &str) -> Vec<(String, String)> {
    c.simple_query(sql)
        .unwrap_or_else(|e| panic!("{sql}: {e}"))
        .into_iter()
        .filter_map(|m| match m {
            SimpleQueryMessage::Row(r) => {
                Some((r.get(0).unwrap_or("NULL").to_owned(), r.get(1).unwrap_or("<no second column>").to_owned()))
            }
            _ => None,
        })
        .collect()
}

/// The values `b<id>` read from `tb` on the primary (`f`: not in recovery).
fn from_b_on_primary(ids: &[i32]) -> Vec<(String, String)> {
    ids.iter().map(|i| (format!("b{i}"), "f".to_owned())).collect()
}

/// `(v, pg_is_in_recovery())` rows of a prepared query.
fn prepared_rows(rows: &[postgres::Row]) -> Vec<(String, String)> {
    rows.iter()
        .map(|r| {
            let recovery: bool = r.get(1);
            (r.get::<_, String>(0), if recovery { "t" } else { "f" }.to_owned())
        })
        .collect()
}

#[test]
fn pg_config_rule_rewrites_simple_queries_with_any_literals() {
    let t = pg_tables();
    let router = pg_router(&t);
    let mut c = router.pg("app");
    let a = &t.a;
    for id in [1, 7, 12] {
        assert_eq!(
            simple_rows(&mut c, &format!("SELECT v FROM {a} WHERE id = {id}")),
            from_b_on_primary(&[id]),
            "id = {id}"
        );
    }
    assert!(
        simple_rows(&mut c, &format!("SELECT v FROM {a} WHERE id = -5")).is_empty(),
        "a negative number is a literal like any other"
    );
    for len in [1usize, 2, 5, 12] {
        let ids: Vec<i32> = (1..=len as i32).rev().collect();
        let list: Vec<String> = ids.iter().map(i32::to_string).collect();
        let sql = format!("SELECT v FROM {a} WHERE id IN ({}) ORDER BY id", list.join(", "));
        let want: Vec<i32> = (1..=len as i32).collect();
        assert_eq!(simple_rows(&mut c, &sql), from_b_on_primary(&want), "IN list of {len}");
    }
    let quoted = AWKWARD.replace('\'', "''");
    assert_eq!(
        simple_rows(&mut c, &format!("SELECT id FROM {a} WHERE v = '{quoted}'")),
        vec![("100".to_owned(), "f".to_owned())],
        "a string with quotes and unicode reaches tb intact"
    );
    assert_eq!(
        simple_rows(&mut c, &format!("SELECT v FROM {a} WHERE id >= 4 AND id <= 5 ORDER BY id")),
        from_b_on_primary(&[4, 5]),
        "values land in the translation's order"
    );
    // Untranslated shapes still follow the split: ta's rows, from the standby.
    assert_eq!(
        simple_rows(&mut c, &format!("SELECT v, pg_is_in_recovery() FROM {a} WHERE id = 3")),
        vec![("a3".to_owned(), "t".to_owned())]
    );
}

#[test]
fn pg_config_rule_rewrites_prepared_statements_and_maps_parameters() {
    let t = pg_tables();
    let router = pg_router(&t);
    let mut c = router.pg("app");
    let a = &t.a;

    // Named statements (Parse "s0", Bind, Execute), executed with several values.
    let one = c.prepare(&format!("SELECT v FROM {a} WHERE id = $1")).expect("prepare");
    for id in [1i32, 6, 11] {
        let rows = c.query(&one, &[&id]).expect("execute");
        assert_eq!(prepared_rows(&rows), from_b_on_primary(&[id]), "id = {id}");
    }
    // IN lists of parameters: each length is its own statement.
    for len in [1usize, 3, 12] {
        let placeholders: Vec<String> = (1..=len).map(|i| format!("${i}")).collect();
        let sql = format!("SELECT v FROM {a} WHERE id IN ({}) ORDER BY id", placeholders.join(", "));
        let ids: Vec<i32> = (1..=len as i32).collect();
        let params: Vec<&(dyn ToSql + Sync)> = ids.iter().map(|i| i as &(dyn ToSql + Sync)).collect();
        let rows = c.query(&sql, &params).unwrap_or_else(|e| panic!("{sql}: {e}"));
        assert_eq!(prepared_rows(&rows), from_b_on_primary(&ids), "IN list of {len} parameters");
    }
    // A parameter and a literal mixed in one IN list.
    let rows = c.query(&format!("SELECT v FROM {a} WHERE id IN ($1, 9) ORDER BY id"), &[&8i32]).expect("mixed list");
    assert_eq!(prepared_rows(&rows), from_b_on_primary(&[8, 9]));
    // A text parameter carries any string: its value never becomes SQL text.
    let rows = c.query(&format!("SELECT id FROM {a} WHERE v = $1"), &[&AWKWARD]).expect("string parameter");
    let got: Vec<(i32, bool)> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    assert_eq!(got, vec![(100, false)]);
    // The translation swaps the two values; `$1` and `$2` keep their meaning.
    let rows = c
        .query(&format!("SELECT v FROM {a} WHERE id >= $1 AND id <= $2 ORDER BY id"), &[&2i32, &4i32])
        .expect("reordered parameters");
    assert_eq!(prepared_rows(&rows), from_b_on_primary(&[2, 3, 4]));
    // The unnamed statement (Parse "", typed parameters).
    let rows = c
        .query_typed(&format!("SELECT v FROM {a} WHERE id = $1"), &[(&5i32, postgres::types::Type::INT4)])
        .expect("unnamed statement");
    assert_eq!(prepared_rows(&rows), from_b_on_primary(&[5]));
    // Inside a transaction the statement stays where the transaction runs, untranslated.
    let mut tx = c.transaction().expect("begin");
    let rows = tx.query(&format!("SELECT v FROM {a} WHERE id = $1"), &[&5i32]).expect("in tx");
    assert_eq!(rows.first().map(|r| r.get::<_, String>(0)), Some("a5".to_owned()));
    tx.commit().expect("commit");
}

/// A rule posted to the admin API rewrites the next statement, is counted as a translation
/// decision and shown by the dry-run; a reload removes it and the statement reads its own table
/// again. A config rule survives the same reload.
#[test]
fn pg_api_rule_works_until_reload_and_hits_are_counted() {
    let t = pg_tables();
    let router = pg_router(&t);
    let admin = router.control().endpoints().admin.expect("admin endpoint");
    let metrics = router.control().endpoints().metrics.expect("metrics endpoint");
    let (a, b) = (&t.a, &t.b);
    let mut c = router.pg("app");
    let sql = |id: i32| format!("SELECT v, id FROM {a} WHERE id = {id} AND v <> 'zz'");
    assert_eq!(simple_rows(&mut c, &sql(4)), vec![("a4".to_owned(), "4".to_owned())]);

    let body = json!({
        "original_sql": sql(1),
        "translated_sql": format!("SELECT v, id FROM {b} WHERE id = 1 AND v <> 'zz'"),
        "target_pool": "replica",
    });
    let (status, v) = http(admin, "POST", "/api/translations", Some(&body));
    assert_eq!(status, 200, "{v}");
    let before = translations_counted(metrics, "replica");
    for id in [4, 9] {
        assert_eq!(
            simple_rows(&mut c, &sql(id)),
            vec![(format!("b{id}"), id.to_string())],
            "the API rule applies at once"
        );
    }
    let rows = c.query(&format!("SELECT v, id FROM {a} WHERE id = $1 AND v <> 'zz'"), &[&6i32]).expect("prepared");
    assert_eq!(rows.first().map(|r| r.get::<_, String>(0)), Some("b6".to_owned()));
    assert_eq!(
        translations_counted(metrics, "replica") - before,
        3,
        "each rewritten statement is one translation decision"
    );
    let (status, d) = http(admin, "GET", &format!("/api/routing/test?sql={}&protocol=postgres", enc(&sql(77))), None);
    assert_eq!(status, 200, "{d}");
    assert_eq!((d["decision"].as_str(), d["pool"].as_str()), (Some("translation"), Some("replica")));
    assert_eq!(
        d["rewritten_sql"].as_str(),
        Some(format!("SELECT v, id FROM {b} WHERE id = 77 AND v <> 'zz'").as_str())
    );

    router.control().reload().expect("reload");
    assert_eq!(simple_rows(&mut c, &sql(4)), vec![("a4".to_owned(), "4".to_owned())], "a reload clears API rules");
    assert_eq!(
        simple_rows(&mut c, &format!("SELECT v FROM {a} WHERE id = 2")),
        from_b_on_primary(&[2]),
        "config rules are registered again on reload"
    );
    let before = translations_counted(metrics, "primary");
    simple_rows(&mut c, &format!("SELECT v FROM {a} WHERE id = 3"));
    assert_eq!(translations_counted(metrics, "primary") - before, 1);
}

/// The sum over cores of `sqp_routing_decisions_total{decision="translation",pool}`.
fn translations_counted(metrics: SocketAddr, pool: &str) -> u64 {
    let text = crate::health::get(metrics, "/metrics");
    let wanted = format!("decision=\"translation\",pool=\"{pool}\"");
    text.lines()
        .filter(|l| l.starts_with("sqp_routing_decisions_total{") && l.contains(&wanted))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

// ---------------------------------------------------------------------------------------------
// MariaDB

const MY_PRIMARY: u64 = 1;

/// A MySQL split router (reads to the replica) whose rules send reads of `ta` to `tb` on the
/// primary, adding `@@server_id`.
fn my_router(a: &str, b: &str) -> Router {
    let rules = rule(
        &format!("SELECT v FROM {a} WHERE id = 1"),
        &format!("SELECT v, @@server_id FROM {b} WHERE id = 1"),
        "mywrite",
    ) + &rule(
        &format!("SELECT v FROM {a} WHERE id IN (1, 2) ORDER BY id"),
        &format!("SELECT v, @@server_id FROM {b} WHERE id IN (1, 2) ORDER BY id"),
        "mywrite",
    ) + &rule(
        &format!("SELECT id FROM {a} WHERE v = 'x'"),
        &format!("SELECT id, @@server_id FROM {b} WHERE v = 'x'"),
        "mywrite",
    );
    my_split_router("transaction", &rules)
}

/// `[pools.<name>]` of the MariaDB server on `port` in pool `mode`.
fn my_pool(name: &str, port: u16, mode: &str) -> String {
    let my = &dbs().my;
    format!(
        "[pools.{name}]\nmode = \"{mode}\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
         max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n",
        u = my.user,
        p = my.password,
        d = my.database,
    )
}

/// A MySQL router splitting reads (`myread`, the replica) from writes (`mywrite`, the primary),
/// both pools in `mode`, with translation `rules` and the admin API.
fn my_split_router(mode: &str, rules: &str) -> Router {
    let my = &dbs().my;
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n{w}{r}\
         [routing]\nread_write_split = true\nwrite_pool = \"mywrite\"\nread_pool = \"myread\"\n\n{rules}{m}",
        w = my_pool("mywrite", my.primary_port, mode),
        r = my_pool("myread", my.replica_port, mode),
        m = metrics_section()
    ))
}

/// Creates `ta`/`tb` on the MariaDB primary and waits until the replica has them.
fn my_tables() -> (String, String) {
    let my = &dbs().my;
    let (a, b) = (unique_name("tr_a"), unique_name("tr_b"));
    let mut c = my.primary_client();
    for table in [&a, &b] {
        c.query_drop(format!(
            "CREATE TABLE {table} (id int PRIMARY KEY, v varchar(64) CHARACTER SET utf8mb4 NOT NULL)"
        ))
        .expect("create");
    }
    for i in 1..=12 {
        c.exec_drop(format!("INSERT INTO {a} VALUES (?, ?)"), (i, format!("a{i}"))).expect("insert a");
        c.exec_drop(format!("INSERT INTO {b} VALUES (?, ?)"), (i, format!("b{i}"))).expect("insert b");
    }
    c.exec_drop(format!("INSERT INTO {b} VALUES (100, ?)"), (AWKWARD,)).expect("insert awkward");
    my.wait_replica_caught_up(Duration::from_secs(30));
    (a, b)
}

fn my_client(router: &Router) -> mysql::Conn {
    let my = &dbs().my;
    mysql::Conn::new(my.opts(router.port(), &my.user, &my.password).db_name(Some(my.database.as_str())))
        .unwrap_or_else(|e| panic!("connect through router: {e}"))
}

/// `(v, @@server_id)` values read from `tb` on the primary.
fn my_from_b_on_primary(ids: &[i32]) -> Vec<(String, u64)> {
    ids.iter().map(|i| (format!("b{i}"), MY_PRIMARY)).collect()
}

#[test]
fn mariadb_config_rule_rewrites_text_and_prepared_statements() {
    let (a, b) = my_tables();
    let router = my_router(&a, &b);
    let mut c = my_client(&router);
    let mut c2 = my_client(&router);

    for id in [1, 7, 12] {
        let text: Vec<(String, u64)> = c.query(format!("SELECT v FROM {a} WHERE id = {id}")).expect("text");
        assert_eq!(text, my_from_b_on_primary(&[id]), "COM_QUERY id = {id}");
        let prepared: Vec<(String, u64)> = c2.exec(format!("SELECT v FROM {a} WHERE id = ?"), (id,)).expect("prepared");
        assert_eq!(prepared, my_from_b_on_primary(&[id]), "COM_STMT_EXECUTE id = {id}");
    }
    for len in [1usize, 3, 12] {
        let ids: Vec<i32> = (1..=len as i32).collect();
        let list: Vec<String> = ids.iter().map(i32::to_string).collect();
        let text: Vec<(String, u64)> =
            c.query(format!("SELECT v FROM {a} WHERE id IN ({}) ORDER BY id", list.join(","))).expect("text list");
        assert_eq!(text, my_from_b_on_primary(&ids), "IN list of {len}");
        let marks = vec!["?"; len].join(", ");
        let params: Vec<mysql::Value> = ids.iter().map(|i| mysql::Value::from(*i)).collect();
        let prepared: Vec<(String, u64)> =
            c2.exec(format!("SELECT v FROM {a} WHERE id IN ({marks}) ORDER BY id"), params).expect("prepared list");
        assert_eq!(prepared, my_from_b_on_primary(&ids), "IN list of {len} parameters");
    }
    // MySQL escapes: a backslash-escaped quote, a doubled quote and an escaped backslash.
    let escaped = AWKWARD.replace('\\', "\\\\").replace('\'', "\\'").replace('"', "\\\"");
    let text: Vec<(i32, u64)> = c.query(format!("SELECT id FROM {a} WHERE v = '{escaped}'")).expect("text string");
    assert_eq!(text, vec![(100, MY_PRIMARY)]);
    let prepared: Vec<(i32, u64)> =
        c2.exec(format!("SELECT id FROM {a} WHERE v = ?"), (AWKWARD,)).expect("prepared string");
    assert_eq!(prepared, vec![(100, MY_PRIMARY)]);
    // Another shape follows the split: ta's rows, from the replica.
    let other: Vec<(String, u64)> = c.query(format!("SELECT v, @@server_id FROM {a} WHERE id = 3")).expect("other");
    assert_eq!(other, vec![("a3".to_owned(), 2)]);
}

// ---------------------------------------------------------------------------------------------
// MariaDB prepared statements whose `?` parameters the translation moves or repeats

/// Swaps the parameters: the string (filtering nothing) is echoed before the id filters, and
/// the backend connection that ran it comes back with the row.
fn my_swap_rule(a: &str, b: &str) -> (String, String) {
    (
        format!("SELECT v FROM {a} WHERE id = 1 AND v <> 'x'"),
        format!("SELECT v, @@server_id, 'x', CONNECTION_ID() FROM {b} WHERE id = 1"),
    )
}

/// Repeats both parameters and keeps the rule's own literals (`'/'`, `100`, `7`, `1`)
/// constant: rows `id` and `id + 1` of `tb`, the string, and `string/<id * 100 + 7>`.
fn my_repeat_rule(a: &str, b: &str) -> String {
    rule(
        &format!("SELECT v FROM {a} WHERE id = 5 AND v = 'x'"),
        &format!(
            "SELECT v, @@server_id, 'x', CONCAT('x', '/', 5 * 100 + 7) FROM {b} WHERE id = 5 OR id = 5 + 1 ORDER BY id"
        ),
        "mywrite",
    )
}

/// What the repeat rule's translation returns for `(id, s)`.
fn repeated(id: i64, s: Option<&str>) -> Vec<(String, u64, Option<String>, Option<String>)> {
    [id, id + 1]
        .iter()
        .map(|i| (format!("b{i}"), MY_PRIMARY, s.map(str::to_owned), s.map(|s| format!("{s}/{}", id * 100 + 7))))
        .collect()
}

/// Issue #7 for positional parameters: with the `mysql` crate (binary protocol), a translation
/// that swaps the two `?` and one that repeats them bind each value where the translation put
/// it (NULL, quotes, backslashes, non-ASCII), read the other table on the primary, in
/// transaction and session mode. The swap rule is registered through the API and the dry-run
/// reports the parameter order. In transaction mode an execute on a backend connection the
/// statement was never prepared on (another client holds the first one) prepares it there.
#[test]
fn mariadb_prepared_translations_move_and_repeat_parameters() {
    let (a, b) = my_tables();
    let swap = format!("SELECT v FROM {a} WHERE id = ? AND v <> ?");
    let repeat = format!("SELECT v FROM {a} WHERE id = ? AND v = ?");
    for mode in ["transaction", "session"] {
        let router = my_split_router(mode, &my_repeat_rule(&a, &b));
        let admin = router.control().endpoints().admin.expect("admin endpoint");
        let (original, translated) = my_swap_rule(&a, &b);
        let body = json!({"original_sql": original, "translated_sql": translated, "target_pool": "mywrite"});
        let (status, v) = http(admin, "POST", "/api/translations", Some(&body));
        assert_eq!(status, 200, "{mode}: {v}");
        let (status, d) = http(admin, "GET", &format!("/api/routing/test?sql={}&protocol=mysql", enc(&swap)), None);
        assert_eq!(status, 200, "{d}");
        assert_eq!((d["decision"].as_str(), d["pool"].as_str()), (Some("translation"), Some("mywrite")), "{d}");
        assert_eq!(
            d["rewritten_sql"].as_str(),
            Some(format!("SELECT v, @@server_id, ?, CONNECTION_ID() FROM {b} WHERE id = ?").as_str())
        );
        assert_eq!(d["rewritten_param_order"], json!([1, 0]), "{d}");

        let mut c = my_client(&router);
        for (id, s) in [(3, Some(AWKWARD)), (7, None), (12, Some("ü€😀 'q' \"d\" \\")), (1, Some(""))] {
            let rows: Vec<(String, u64, Option<String>, u64)> =
                c.exec(&swap, (id, s)).unwrap_or_else(|e| panic!("{mode}: swap: {e}"));
            let got: Vec<(String, u64, Option<String>)> = rows.into_iter().map(|r| (r.0, r.1, r.2)).collect();
            assert_eq!(
                got,
                vec![(format!("b{id}"), MY_PRIMARY, s.map(str::to_owned))],
                "{mode}: swapped ({id}, {s:?})"
            );
        }
        for (id, s) in [(3, Some("it's")), (11, None), (1, Some(AWKWARD))] {
            let rows: Vec<(String, u64, Option<String>, Option<String>)> =
                c.exec(&repeat, (id, s)).unwrap_or_else(|e| panic!("{mode}: repeat: {e}"));
            assert_eq!(rows, repeated(id, s), "{mode}: repeated ({id}, {s:?})");
        }
        if mode == "transaction" {
            assert_runs_on_other_connections(&router, &mut c, &swap);
        }
    }
}

/// Executes `swap` while another client holds a write-pool connection in a transaction, until
/// the executes have run on two backend connections (so on one the statement was prepared
/// again); every row stays right.
fn assert_runs_on_other_connections(router: &Router, c: &mut mysql::Conn, swap: &str) {
    let mut holder = my_client(router);
    let mut seen = std::collections::BTreeSet::new();
    for round in 0..10 {
        holder.query_drop("BEGIN").expect("begin");
        let held: Option<(u64, u64)> =
            holder.query_first("SELECT @@server_id, CONNECTION_ID() FOR UPDATE").expect("hold");
        assert_eq!(held.map(|h| h.0), Some(MY_PRIMARY), "the holder is on the write pool");
        for hold in [true, false] {
            let rows: Vec<(String, u64, Option<String>, u64)> = c.exec(swap, (round + 1, "r")).expect("execute");
            assert_eq!(rows.len(), 1);
            let (v, server, echo, conn) = rows.into_iter().next().unwrap_or_default();
            assert_eq!((v, server, echo), (format!("b{}", round + 1), MY_PRIMARY, Some("r".to_owned())));
            seen.insert(conn);
            if hold {
                holder.query_drop("COMMIT").expect("commit");
            }
        }
        if seen.len() >= 2 {
            return;
        }
    }
    panic!("every execute ran on one backend connection: {seen:?}");
}

/// COM_STMT_EXECUTE of statement `id` with NULL bitmap `nulls`, the parameter `types` when
/// bound (else the flag is 0) and the `values`.
fn execute_payload(id: u32, nulls: u8, types: Option<&[u8]>, values: &[u8]) -> Vec<u8> {
    let mut p = vec![0x17];
    p.extend_from_slice(&id.to_le_bytes());
    p.push(0);
    p.extend_from_slice(&1u32.to_le_bytes());
    p.push(nulls);
    p.push(u8::from(types.is_some()));
    p.extend_from_slice(types.unwrap_or_default());
    p.extend_from_slice(values);
    p
}

/// The rows of a binary result set, each value as text (`None` for NULL).
fn binary_rows(raw: &mut Raw) -> Vec<Vec<Option<String>>> {
    let count = raw.read();
    assert_ne!(count.first(), Some(&0xFF), "execute: {:?}", ErrPacket::decode(&count));
    let (defs, _) = raw.until_eof().expect("column definitions");
    let types: Vec<ValueType> =
        defs.iter().map(|d| ColumnDefinition41::decode(d).expect("column").value_type()).collect();
    let (rows, _) = raw.until_eof().expect("rows");
    rows.iter()
        .map(|r| {
            decode_binary_row(r, &types)
                .expect("binary row")
                .iter()
                .map(|v| match v {
                    BinaryValue::Null => None,
                    BinaryValue::Bytes(b) => Some(String::from_utf8_lossy(b).into_owned()),
                    BinaryValue::U64(n) => Some(n.to_string()),
                    BinaryValue::I64(n) => Some(n.to_string()),
                    BinaryValue::U32(n) => Some(n.to_string()),
                    BinaryValue::I32(n) => Some(n.to_string()),
                    other => panic!("unexpected value {other:?}"),
                })
                .collect()
        })
        .collect()
}

/// What the repeat rule returns for `(id, s)`, as text.
fn repeated_text(id: i64, s: Option<&str>) -> Vec<Vec<Option<String>>> {
    repeated(id, s)
        .into_iter()
        .map(|(v, server, echo, joined)| vec![Some(v), Some(server.to_string()), echo, joined])
        .collect()
}

/// With raw packets: the client's PREPARE_OK shows its own two parameters (the translation has
/// five `?`); a string sent in two COM_STMT_SEND_LONG_DATA pieces reaches both places the
/// translation uses it; an execute that does not bind types again (as clients do after the
/// first) and a NULL are bound right, in transaction and session mode.
#[test]
fn mariadb_reordered_translation_takes_long_data_and_types_bound_once() {
    let (a, b) = my_tables();
    for mode in ["transaction", "session"] {
        let router = my_split_router(mode, &my_repeat_rule(&a, &b));
        let mut raw = Raw::login(router.port());
        raw.command(&[&[0x16][..], format!("SELECT v FROM {a} WHERE id = ? AND v = ?").as_bytes()].concat());
        let first = raw.read();
        let ok = StmtPrepareOk::decode(&first)
            .unwrap_or_else(|e| panic!("{mode}: prepare: {e:?} {:?}", ErrPacket::decode(&first)));
        assert_eq!((ok.num_params, ok.num_columns), (2, 4), "{mode}");
        assert_eq!(raw.until_eof().map(|(p, _)| p.len()), Ok(2), "{mode}: parameter definitions");
        assert_eq!(raw.until_eof().map(|(c, _)| c.len()), Ok(4), "{mode}: column definitions");
        let pieces = ["long ü€ 'q' \\ ", "\"second\" piece 😀"];
        for piece in pieces {
            raw.command(&[&[0x18][..], &ok.stmt_id.to_le_bytes(), &1u16.to_le_bytes(), piece.as_bytes()].concat());
        }
        // LONGLONG id, VAR_STRING text (from long data, so no value bytes).
        raw.command(&execute_payload(ok.stmt_id, 0, Some(&[0x08, 0x00, 0xFD, 0x00]), &3i64.to_le_bytes()));
        assert_eq!(binary_rows(&mut raw), repeated_text(3, Some(&pieces.concat())), "{mode}: long data");
        let values = [&11i64.to_le_bytes()[..], &[6], b"second"].concat();
        raw.command(&execute_payload(ok.stmt_id, 0, None, &values));
        assert_eq!(binary_rows(&mut raw), repeated_text(11, Some("second")), "{mode}: types bound before");
        raw.command(&execute_payload(ok.stmt_id, 0b10, None, &5i64.to_le_bytes()));
        assert_eq!(binary_rows(&mut raw), repeated_text(5, None), "{mode}: NULL");
    }
}

// ---------------------------------------------------------------------------------------------
// MySQL client, PostgreSQL pool (cross-protocol)

/// A MySQL listener whose default pool `pgx` is the PostgreSQL primary (bridged), with rules
/// that turn MySQL-only SQL (backticks, `IFNULL`) reading `ta` into PostgreSQL SQL reading `tb`.
fn bridged_router(t: &PgTables) -> Router {
    let pg = &dbs().pg;
    let (a, b) = (&t.a, &t.b);
    let rules = rule(
        &format!("SELECT IFNULL(v, 'none') FROM `{a}` WHERE id = 1"),
        &format!("SELECT COALESCE(v, 'none') FROM {b} WHERE id = 1"),
        "pgx",
    ) + &rule(
        &format!("SELECT `v` FROM `{a}` WHERE id IN (1, 2) ORDER BY id"),
        &format!("SELECT v FROM {b} WHERE id IN (1, 2) ORDER BY id"),
        "pgx",
    ) + &rule(
        &format!("SELECT `id` FROM `{a}` WHERE v = 'x'"),
        &format!("SELECT id FROM {b} WHERE v = 'x'"),
        "pgx",
    ) + &rule(
        // Moves and repeats the parameters: PostgreSQL gets `$2 … $1 … $1`.
        &format!("SELECT `v` FROM `{a}` WHERE id = 1 AND v <> 'x'"),
        &format!("SELECT v || 'x' FROM {b} WHERE id = 1 OR id = 1 + 2 ORDER BY id"),
        "pgx",
    );
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.pgx]\nprotocol = \"postgres\"\nmode = \"transaction\"\nusername = \"{u}\"\npassword = \"{p}\"\ndatabase = \"{d}\"\n\
         max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n\n\
         [routing]\nmysql_default_pool = \"pgx\"\n\n{rules}{m}",
        u = pg.user,
        p = pg.password,
        d = pg.database,
        port = pg.primary_port,
        m = metrics_section()
    ))
}

/// Issue #7's cross-protocol case: a MySQL client's MySQL-dialect statement is rewritten into
/// PostgreSQL SQL and runs on the PostgreSQL pool (untranslated, PostgreSQL would reject the
/// backticks and `IFNULL`), as a text query and as a prepared statement, also when the
/// translation moves and repeats the `?` parameters.
#[test]
fn mysql_client_statements_are_rewritten_for_a_postgres_pool() {
    let t = pg_tables();
    let router = bridged_router(&t);
    let metrics = router.control().endpoints().metrics.expect("metrics endpoint");
    let my = &dbs().my;
    let pg = &dbs().pg;
    let mut c = mysql::Conn::new(my.opts(router.port(), &pg.user, &pg.password))
        .unwrap_or_else(|e| panic!("connect through the bridge: {e}"));
    let a = &t.a;
    let before = translations_counted(metrics, "pgx");
    for id in [1, 7, 40] {
        let text: Vec<String> =
            c.query(format!("SELECT IFNULL(v, 'nothing') FROM `{a}` WHERE id = {id}")).expect("text");
        let want = if id == 40 { vec![] } else { vec![format!("b{id}")] };
        assert_eq!(text, want, "COM_QUERY id = {id}");
        let prepared: Vec<String> =
            c.exec(format!("SELECT IFNULL(v, ?) FROM `{a}` WHERE id = ?"), ("nothing", id)).expect("prepared");
        assert_eq!(prepared, want, "COM_STMT_EXECUTE id = {id}");
    }
    for len in [1usize, 4, 12] {
        let ids: Vec<i32> = (1..=len as i32).collect();
        let list: Vec<String> = ids.iter().map(i32::to_string).collect();
        let want: Vec<String> = ids.iter().map(|i| format!("b{i}")).collect();
        let text: Vec<String> =
            c.query(format!("SELECT `v` FROM `{a}` WHERE id IN ({}) ORDER BY id", list.join(","))).expect("text list");
        assert_eq!(text, want, "IN list of {len}");
        let marks = vec!["?"; len].join(",");
        let params: Vec<mysql::Value> = ids.iter().map(|i| mysql::Value::from(*i)).collect();
        let prepared: Vec<String> =
            c.exec(format!("SELECT `v` FROM `{a}` WHERE id IN ({marks}) ORDER BY id"), params).expect("prepared list");
        assert_eq!(prepared, want, "IN list of {len} parameters");
    }
    // MySQL quoting in, PostgreSQL quoting out. The router's pools all speak PostgreSQL, so the
    // client was told NO_BACKSLASH_ESCAPES (#33): only quotes are doubled, backslashes are plain.
    let escaped = AWKWARD.replace('\'', "''");
    let text: Vec<i32> = c.query(format!("SELECT `id` FROM `{a}` WHERE v = '{escaped}'")).expect("text string");
    assert_eq!(text, vec![100]);
    let prepared: Vec<i32> =
        c.exec(format!("SELECT `id` FROM `{a}` WHERE v = ?"), (AWKWARD,)).expect("prepared string");
    assert_eq!(prepared, vec![100]);
    // 7 text queries and 5 prepares (the mysql crate prepares each distinct text once; a
    // bridged statement's translation is decided when it is prepared).
    assert_eq!(translations_counted(metrics, "pgx") - before, 12, "translations are counted");
    let moved = format!("SELECT `v` FROM `{a}` WHERE id = ? AND v <> ?");
    for (id, s) in [(3, " it's ü€"), (9, AWKWARD)] {
        let prepared: Vec<String> = c.exec(&moved, (id, s)).expect("prepared, parameters moved");
        assert_eq!(prepared, vec![format!("b{id}{s}"), format!("b{}{s}", id + 2)], "moved and repeated ({id}, {s})");
    }
}
