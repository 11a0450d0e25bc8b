//! Issue #41, the pool's queue for a connection, against the harness's real PostgreSQL:
//! - first come, first served: a connection given back while a checkout waits is that
//!   waiter's, not taken on the way in by a statement arriving in the same instant (a pipelined
//!   statement right behind the one that gave it back);
//! - under overload a checkout the line ahead would keep past its `acquire_timeout` is turned
//!   away at once with SQLSTATE 53000 naming the queue, and never runs (a sequence the statement
//!   advances counts the runs).

// Blocking test clients on their own threads, not data-plane code.
#![allow(clippy::disallowed_methods, clippy::disallowed_types)]

use std::sync::{Arc, Barrier};
use std::thread;
use std::time::{Duration, Instant};

use crate::pg_raw::{query, tags, Raw};
use crate::pg_util::{sqlstate, superuser};
use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, unique_name};

/// A one-core router with pool `main` of one connection on the primary, its acquire_timeout
/// `acquire`, logins in MD5 (the raw client speaks it).
fn one_connection_router(acquire: &str) -> Router {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 1)
        .replace("acquire_timeout = \"20s\"", &format!("acquire_timeout = \"{acquire}\""));
    let toml = pg_config(&[0], &pools, "main")
        .replace("bind = \"127.0.0.1:0\"\n", "bind = \"127.0.0.1:0\"\nauth_method = \"md5\"\n");
    Router::start(&toml)
}

/// Backends of the primary waiting for a lock, running a statement that names `table`.
fn waiting_on(table: &str) -> i64 {
    let sql = format!(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%{table}%' \
         AND query NOT LIKE '%pg_stat_activity%'"
    );
    superuser().query_one(&sql, &[]).expect("pg_stat_activity").get(0)
}

#[test]
fn a_connection_given_back_goes_to_the_waiter_not_to_a_statement_arriving_as_it_frees() {
    let router = one_connection_router("20s");
    let table = unique_name("arrivals");
    let gate = unique_name("gate");
    let mut su = superuser();
    su.batch_execute(&format!(
        "CREATE TABLE {table} (id serial PRIMARY KEY, who text); CREATE TABLE {gate} (x int); \
         GRANT ALL ON {table}, {table}_id_seq, {gate} TO PUBLIC"
    ))
    .expect("create");
    // The test holds the gate table: the holder's first statement, reading it, keeps the pool's
    // one connection (a plain lock wait: an advisory lock function would pin the session).
    let mut locker = superuser();
    let mut lock = locker.transaction().expect("begin");
    lock.batch_execute(&format!("LOCK TABLE {gate} IN ACCESS EXCLUSIVE MODE")).expect("lock");

    let db = &dbs().pg.database;
    let mut holder = Raw::login(router.port(), db, &dbs().pg.password).expect("holder login");
    // Its second statement is pipelined behind the first: the router reads it the moment the
    // first one's answer gave the connection back.
    let mut both = query(&format!("SELECT count(*) FROM {gate}"));
    both.extend(query(&format!("INSERT INTO {table} (who) VALUES ('pipelined')")));
    holder.send(&both);
    crate::support::eventually(Duration::from_secs(10), "the holder waits on the lock", || waiting_on(&gate) == 1);

    let port = router.port();
    let insert = format!("INSERT INTO {table} (who) VALUES ('waiter')");
    let waiter = thread::spawn(move || {
        let mut c = crate::pg_util::connect(port, &dbs().pg.database, &dbs().pg.password).expect("waiter login");
        c.batch_execute(&insert)
    });
    // The waiter queues for the pool's only connection (nothing else can make it wait here).
    thread::sleep(Duration::from_millis(500));
    lock.commit().expect("unlock");
    assert_eq!(tags(&holder.until_ready()), "TDCZ", "the held statement's answer");
    assert_eq!(tags(&holder.until_ready()), "CZ", "the pipelined insert's answer");
    waiter.join().expect("waiter thread").expect("the waiter's insert");

    let order: Vec<String> = su
        .query(&format!("SELECT who FROM {table} ORDER BY id"), &[])
        .expect("order")
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(order, ["waiter", "pipelined"], "the waiter queued first and is served first");
}

#[test]
fn a_checkout_the_queue_would_keep_past_its_deadline_gets_53000_at_once_and_never_runs() {
    let router = one_connection_router("1s");
    let seq = unique_name("runs");
    let mut su = superuser();
    su.batch_execute(&format!("CREATE SEQUENCE {seq}; GRANT ALL ON {seq} TO PUBLIC")).expect("sequence");
    let sql = Arc::new(format!("SELECT nextval('{seq}'), pg_sleep(0.05)"));
    let port = router.port();
    // A first wave queues at once (the router learns how fast the line moves: one connection,
    // 50 ms a statement); a second wave arrives behind it, most of it more than two seconds'
    // worth of statements back in line.
    let run_wave = |n: usize| {
        let gate = Arc::new(Barrier::new(n));
        (0..n)
            .map(|_| {
                let (gate, sql) = (gate.clone(), sql.clone());
                thread::spawn(move || {
                    let mut c = crate::pg_util::connect(port, &dbs().pg.database, &dbs().pg.password).expect("login");
                    gate.wait();
                    let started = Instant::now();
                    let res = c.batch_execute(&sql);
                    let code_and_text =
                        res.err().map(|e| (sqlstate(&e), e.as_db_error().map(|d| d.message().to_owned())));
                    (code_and_text, started.elapsed())
                })
            })
            .collect::<Vec<_>>()
    };
    // The first wave is longer than a second of statements: its tail waits out the deadline,
    // which is what lets the router refuse on its estimate.
    let first = run_wave(30);
    thread::sleep(Duration::from_millis(1300));
    let second = run_wave(60);
    let outcomes: Vec<_> = first.into_iter().chain(second).map(|h| h.join().expect("client thread")).collect();

    let ran = outcomes.iter().filter(|(e, _)| e.is_none()).count();
    let early: Vec<_> = outcomes.iter().filter(|(e, _)| e.as_ref().is_some_and(|(c, _)| c == "53000")).collect();
    let late = outcomes.iter().filter(|(e, _)| e.as_ref().is_some_and(|(c, _)| c == "53300")).count();
    assert_eq!(ran + early.len() + late, outcomes.len(), "every client ran or was told why: {outcomes:?}");
    assert!(!early.is_empty(), "the second wave's tail is turned away at once: {outcomes:?}");
    for (e, took) in &early {
        let text = e.as_ref().and_then(|(_, t)| t.as_deref()).unwrap_or_default();
        assert!(text.contains("queue for a connection") && text.contains("\"main\""), "{text}");
        assert!(*took < Duration::from_millis(900), "refused before its 1 s deadline, not at it: {took:?}");
    }
    assert!(ran > 0, "the pool kept serving: {outcomes:?}");
    let runs: i64 = su.query_one(&format!("SELECT last_value FROM {seq}"), &[]).expect("runs").get(0);
    assert_eq!(runs as usize, ran, "exactly the statements answered ran: none turned away did");
}
