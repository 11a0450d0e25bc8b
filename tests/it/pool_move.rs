//! Issue #39, a server connection moving between cores: with more than one core, a core holding
//! more than its part of a pool's connections while another core's checkouts wait gives one up.
//! It used to be closed there and a new one opened and logged in on the other core; it now
//! moves open, with the statements prepared on it. Proven by the server: the same backend
//! session (PostgreSQL's process id and start time, MariaDB's connection id) answers a client of
//! each core in turn, through a pool of one connection.

// Blocking test clients on their own threads, not data-plane code.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use mysql::prelude::Queryable;

use crate::mysql_session::{my_config, my_pool};
use crate::pool_queue::{router_on, sessions_per_core};
use crate::router::Router;
use crate::support::dbs;

/// One client on each of the router's two cores (the kernel spreads new connections at random:
/// clients are opened until each core has one; the others close).
fn one_on_each_core<C>(router: &Router, connect: impl Fn() -> C) -> [C; 2] {
    let (mut on0, mut on1) = (None, None);
    for _ in 0..40 {
        if on0.is_some() && on1.is_some() {
            break;
        }
        let before = sessions_per_core(router);
        let client = connect();
        let after = sessions_per_core(router);
        match (0..2).find(|&i| after.get(i) > before.get(i)) {
            Some(0) if on0.is_none() => on0 = Some(client),
            Some(1) if on1.is_none() => on1 = Some(client),
            _ => {}
        }
    }
    [on0.expect("a client on core 0"), on1.expect("a client on core 1")]
}

#[test]
fn a_postgresql_connection_given_up_for_another_core_moves_there_open_with_its_prepared_statements() {
    let router = router_on(&[0, 1], "20s");
    let [mut a, mut b] = one_on_each_core(&router, || {
        crate::pg_util::connect(router.port(), &dbs().pg.database, &dbs().pg.password).expect("login")
    });
    let who = "SELECT pid, backend_start::text FROM pg_stat_activity WHERE pid = pg_backend_pid()";
    let session = |c: &mut postgres::Client| -> (i32, String) {
        let stmt = c.prepare(who).expect("prepare");
        let row = c.query_one(&stmt, &[]).expect("run the prepared statement");
        (row.get(0), row.get(1))
    };
    // Core 0 keeps the pool's one connection idle; core 1's checkout waits for it until core 0
    // gives it up; then back.
    let first = session(&mut a);
    assert_eq!(session(&mut b), first, "core 1 was served by the server session core 0 opened");
    assert_eq!(session(&mut a), first, "and core 0 again");
}

#[test]
fn a_mariadb_connection_given_up_for_another_core_moves_there_open_with_its_prepared_statements() {
    let router = Router::start(&my_config(&[0, 1], &my_pool("main", "transaction", 1), "main"));
    let my = &dbs().my;
    let [mut a, mut b] = one_on_each_core(&router, || {
        mysql::Conn::new(my.opts(router.port(), &my.user, &my.password)).expect("connect through the router")
    });
    let session = |c: &mut mysql::Conn| -> u64 {
        let stmt = c.prep("SELECT CONNECTION_ID() + ?").expect("prepare");
        c.exec_first(&stmt, (0,)).expect("run the prepared statement").expect("a row")
    };
    let first = session(&mut a);
    assert_eq!(session(&mut b), first, "core 1 was served by the server connection core 0 opened");
    assert_eq!(session(&mut a), first, "and core 0 again");
}

#[test]
fn an_encrypted_connection_moves_with_its_tls_session() {
    let pool = crate::backend_tls::pool("moving_tls", dbs().pg_tls().port, "app", "app", "tls = \"require\"")
        .replace("mode = \"session\"", "mode = \"transaction\"")
        .replace("max_connections = 8", "max_connections = 1");
    let router = Router::start(&crate::router::pg_config(&[0, 1], &pool, "moving_tls"));
    let connect = || {
        let mut c = postgres::Config::new();
        c.host("127.0.0.1").port(router.port()).user("app").password("app").dbname("moving_tls");
        c.connect(postgres::NoTls).expect("login")
    };
    let [mut a, mut b] = one_on_each_core(&router, connect);
    let who = "SELECT a.pid, a.backend_start::text, s.ssl FROM pg_stat_activity a JOIN pg_stat_ssl s USING (pid) \
               WHERE a.pid = pg_backend_pid()";
    let session = |c: &mut postgres::Client| -> (i32, String, bool) {
        let row = c.query_one(who, &[]).expect("who serves");
        (row.get(0), row.get(1), row.get(2))
    };
    let first = session(&mut a);
    assert!(first.2, "the server connection is encrypted");
    assert_eq!(session(&mut b), first, "core 1 was served through the TLS session core 0 opened");
    assert_eq!(session(&mut a), first, "and core 0 again");
}
