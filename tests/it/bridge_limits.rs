//! Issue #37 on the bridged path: a MySQL client whose pool speaks PostgreSQL is held to the
//! same `[limits]` as a native MySQL session, with the same errors: its prepared statements by
//! `session_prepared_statements` (ER_MAX_PREPARED_STMT_COUNT_REACHED) and
//! `session_prepared_bytes`, its `COM_STMT_SEND_LONG_DATA` by `long_data` and the process's
//! `client_buffer_budget`, refused at the execute as MariaDB does.

use mysql::prelude::Queryable;

use crate::abuse_memory::{held, pymysql_long_data};
use crate::admin::with_metrics;
use crate::bridge_mysql_pg::{bridge_router_toml, client};
use crate::router::Router;
use crate::support::dbs;

/// A bridged router (transaction pooling) with `[limits]` as given and the metrics endpoint.
fn bridged(limits: &str) -> Router {
    let toml = format!("{}\n[limits]\n{limits}\n", bridge_router_toml("transaction", &dbs().pg.database));
    Router::start(&with_metrics(&toml, None))
}

fn server_error(e: mysql::Error) -> (u16, String, String) {
    match e {
        mysql::Error::MySqlError(e) => (e.code, e.state, e.message),
        other => panic!("expected a server error, got {other}"),
    }
}

#[test]
fn bridged_statements_are_capped_like_max_prepared_stmt_count() {
    let router = bridged("session_prepared_statements = 2");
    let mut c = client(&router);
    let a = c.prep("SELECT 1").expect("first");
    let _b = c.prep("SELECT 2").expect("second");
    let (code, state, message) = server_error(c.prep("SELECT 3").expect_err("third"));
    assert_eq!((code, state.as_str()), (1461, "42000"));
    assert!(message.contains("max_prepared_stmt_count statements (current value: 2)"), "{message}");
    c.close(a).expect("close one");
    let three = c.prep("SELECT 3").expect("room again after a close");
    let got: Option<i32> = c.exec_first(&three, ()).expect("execute");
    assert_eq!(got, Some(3));
}

#[test]
fn bridged_statement_text_is_capped_by_session_prepared_bytes() {
    let router = bridged("session_prepared_bytes = \"1KiB\"");
    let mut c = client(&router);
    c.prep("SELECT 1").expect("a short statement fits");
    let long = format!("SELECT '{}'", "x".repeat(600));
    let (code, state, message) = server_error(c.prep(&long).expect_err("past the session's text"));
    assert_eq!((code, state.as_str()), (1041, "HY000"));
    assert!(message.contains("limits.session_prepared_bytes"), "{message}");
    let one: Option<i32> = c.query_first("SELECT 1").expect("the session goes on");
    assert_eq!(one, Some(1));
}

/// `chunks` pieces of `kib` KiB for the parameter, then none; COM_STMT_RESET, then one piece.
fn long_data(router: &Router, kib: usize, chunks: usize) -> Vec<String> {
    let pg = &dbs().pg;
    pymysql_long_data(router.port(), kib, &[chunks, 0], &[&pg.user, &pg.password])
}

#[test]
fn bridged_long_data_past_the_limit_is_dropped_and_refused_at_execute() {
    let router = bridged("long_data = \"1MiB\"");
    // 1.5 MiB for one parameter: past the router's max_allowed_packet.
    let out = long_data(&router, 512, 3);
    assert_eq!(out.len(), 3, "{out:?}");
    assert!(out[0].starts_with("error 1105 Parameter of prepared statement"), "{out:?}");
    assert_eq!(out[1], out[0], "every execute fails until COM_STMT_RESET");
    assert_eq!(out[2], "ok 524288", "{out:?}");
    assert_eq!(held(&router, "long_data"), 0.0, "nothing held after the executes");
}

#[test]
fn bridged_long_data_past_the_process_budget_is_refused_at_execute() {
    let router = bridged("client_buffer_budget = \"1MiB\"");
    let out = long_data(&router, 64, 32);
    assert_eq!(out.len(), 3, "{out:?}");
    assert!(out[0].starts_with("error 1041 ") && out[0].contains("limits.client_buffer_budget"), "{out:?}");
    assert_eq!(out[1], out[0], "every execute fails until COM_STMT_RESET");
    assert_eq!(out[2], "ok 65536", "{out:?}");
    assert_eq!(held(&router, "long_data"), 0.0, "nothing held after the executes");
}
