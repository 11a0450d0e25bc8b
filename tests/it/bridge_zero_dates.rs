//! Issue #35: MariaDB dates that name no calendar day (`0000-00-00`, `0000-00-00 00:00:00`,
//! `2020-00-00`, `2020-05-00`, and `2021-02-29` under ALLOW_INVALID_DATES) read by PostgreSQL
//! clients through the reverse bridge. Before, psycopg could not parse their text and binary
//! rows carried `-infinity`; now they arrive as NULL in both formats with one WARNING notice per
//! result, and real dates beside them are untouched.

use mysql::prelude::Queryable;

use crate::scripts::python;
use crate::support::{dbs, unique_name};

#[test]
fn zero_dates_reach_postgres_clients_as_null_in_text_and_binary() {
    let my = &dbs().my;
    let table = unique_name("zero_dates");
    let mut c = my.primary_client();
    c.query_drop("SET SESSION sql_mode = 'ALLOW_INVALID_DATES'").expect("sql_mode allowing zero dates");
    c.query_drop(format!(
        "CREATE TABLE {}.{table} (id INT PRIMARY KEY, d DATE NULL, ts DATETIME(3) NULL)",
        my.database
    ))
    .expect("table");
    c.query_drop(format!(
        "INSERT INTO {}.{table} VALUES (1, '0000-00-00', '0000-00-00 00:00:00'), (2, '2020-00-00', '2020-05-00 10:00:00'), \
         (3, '2024-02-29', '2024-02-29 12:34:56.789'), (4, NULL, NULL), (5, '2021-02-29', '2021-02-29 00:00:00')",
        my.database
    ))
    .expect("rows");
    let stored: Vec<(i32, Option<String>)> =
        c.query(format!("SELECT id, CAST(d AS CHAR) FROM {}.{table} ORDER BY id", my.database)).expect("direct");
    assert_eq!(stored[0].1.as_deref(), Some("0000-00-00"), "MariaDB kept the zero date: {stored:?}");
    assert_eq!(stored[4].1.as_deref(), Some("2021-02-29"), "and the invalid one: {stored:?}");

    let router = crate::bridge_pg_mysql::bridge_router("transaction");
    let pg = &dbs().pg;
    let dsn = format!(
        "host=127.0.0.1 port={} user={} password={} dbname={} connect_timeout=10",
        router.port(),
        pg.user,
        pg.password,
        my.database
    );
    let out = python("pg_zero_dates.py", &[&dsn, &table]);
    let notice =
        "notice WARNING 01000 6 MySQL date value(s) naming no calendar day (such as 0000-00-00) were sent as NULL";
    let mut want = Vec::new();
    for (driver, format) in [("psycopg", "text"), ("psycopg", "binary"), ("psycopg2", "text"), ("asyncpg", "binary")] {
        let row = |id: i32, d: &str, ts: &str| format!("{driver} {format} {id} {d} {ts}");
        let rows = [
            row(1, "None", "None"),
            row(2, "None", "None"),
            row(3, "datetime.date(2024, 2, 29)", "datetime.datetime(2024, 2, 29, 12, 34, 56, 789000)"),
            row(4, "None", "None"),
            row(5, "None", "None"),
        ];
        if driver == "psycopg" {
            want.push(notice.to_owned());
        }
        want.extend(rows);
    }
    assert_eq!(out, want);
    let _ = c.query_drop(format!("DROP TABLE {}.{table}", my.database));
}
