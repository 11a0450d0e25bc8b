//! Issue #41, the pool's queue for a connection, against the harness's real PostgreSQL:
//! - first come, first served: a connection given back while a checkout waits is that
//!   waiter's, not taken on the way in by a statement arriving in the same instant (a pipelined
//!   statement right behind the one that gave it back);
//! - and across cores: waiters arriving in turn on two cores are served in arrival order within
//!   the pool's size, though the pool's one connection is checked in on one core only;
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
    router_on(&[0], acquire)
}

/// A router on `cores` with pool `main` of one connection (see [`one_connection_router`]).
pub(crate) fn router_on(cores: &[usize], acquire: &str) -> Router {
    let pools = pg_pool("main", dbs().pg.primary_port, "transaction", 1)
        .replace("acquire_timeout = \"20s\"", &format!("acquire_timeout = \"{acquire}\""));
    let toml = pg_config(cores, &pools, "main")
        .replace("bind = \"127.0.0.1:0\"\n", "bind = \"127.0.0.1:0\"\nauth_method = \"md5\"\n");
    Router::start(&toml)
}

/// A superuser client, a table recording who ran (a `who` column of type `who`) and a table
/// for the test to lock: the client and the two tables' names.
fn arrivals_and_gate(who: &str) -> (postgres::Client, String, String) {
    let (table, gate) = (unique_name("arrivals"), unique_name("gate"));
    let mut su = superuser();
    su.batch_execute(&format!(
        "CREATE TABLE {table} (id serial PRIMARY KEY, who {who}); CREATE TABLE {gate} (x int); \
         GRANT ALL ON {table}, {table}_id_seq, {gate} TO PUBLIC"
    ))
    .expect("create");
    (su, table, gate)
}

/// Who `table`'s rows were inserted by, in the order the statements ran.
fn served_order<T: for<'a> postgres::types::FromSql<'a>>(su: &mut postgres::Client, table: &str) -> Vec<T> {
    let rows = su.query(&format!("SELECT who FROM {table} ORDER BY id"), &[]).expect("order");
    rows.iter().map(|r| r.get(0)).collect()
}

/// Sessions open on each core, in core order.
pub(crate) fn sessions_per_core(router: &Router) -> Vec<u64> {
    let mut reports = router.control().collect().expect("collect");
    reports.sort_by_key(|r| r.core);
    reports.iter().map(|r| r.counters.sessions_active).collect()
}

/// Opens clients until `per_core` of them landed on each of the router's two cores (the kernel
/// spreads them at random): the clients of core 0, then those of core 1.
fn clients_on_each_core(router: &Router, per_core: usize) -> [Vec<postgres::Client>; 2] {
    let mut by_core: [Vec<postgres::Client>; 2] = [Vec::new(), Vec::new()];
    for _ in 0..per_core * 20 {
        if by_core.iter().all(|c| c.len() >= per_core) {
            break;
        }
        let before = sessions_per_core(router);
        let client = crate::pg_util::connect(router.port(), &dbs().pg.database, &dbs().pg.password).expect("login");
        let after = sessions_per_core(router);
        let core = (0..2).find(|&i| after.get(i) > before.get(i)).expect("a core counts the new session");
        by_core[core].push(client);
    }
    assert!(by_core.iter().all(|c| c.len() >= per_core), "the kernel kept clients off a core");
    by_core
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
    let (mut su, table, gate) = arrivals_and_gate("text");
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

    let order: Vec<String> = served_order(&mut su, &table);
    assert_eq!(order, ["waiter", "pipelined"], "the waiter queued first and is served first");
}

#[test]
fn waiters_on_two_cores_are_served_in_arrival_order_within_the_pool() {
    // The pool's one connection is held on core `h` by a statement waiting on a lock; waiters
    // then arrive one by one, alternately on the other core and on core `h`. When the lock goes
    // the connection is checked in on core `h`: served per core, `h`'s waiters all go first
    // (before the other core's, however much older); across cores, each waiter goes within the
    // pool's size (one) of its turn, one more for the move in flight.
    const PER_CORE: usize = 6;
    let router = router_on(&[0, 1], "20s");
    let (mut su, table, gate) = arrivals_and_gate("int");
    let [on0, on1] = clients_on_each_core(&router, PER_CORE + 1);
    let mut locker = superuser();
    let mut lock = locker.transaction().expect("begin");
    lock.batch_execute(&format!("LOCK TABLE {gate} IN ACCESS EXCLUSIVE MODE")).expect("lock");

    let (mut held_core, mut other) = (on0.into_iter(), on1.into_iter());
    let mut holder = held_core.next().expect("a holder");
    let count = format!("SELECT count(*) FROM {gate}");
    let holding = thread::spawn(move || holder.batch_execute(&count));
    crate::support::eventually(Duration::from_secs(10), "the holder waits on the lock", || waiting_on(&gate) == 1);

    // Waiter `i` arrives i × 100 ms in: even on the other core, odd on the holder's.
    let mut waiters = Vec::new();
    for i in 0..2 * PER_CORE {
        let mut client = if i % 2 == 0 { other.next() } else { held_core.next() }.expect("a client");
        let insert = format!("INSERT INTO {table} (who) VALUES ({i})");
        waiters.push(thread::spawn(move || client.batch_execute(&insert)));
        thread::sleep(Duration::from_millis(100));
    }
    lock.commit().expect("unlock");
    holding.join().expect("holder thread").expect("the held statement");
    for w in waiters {
        w.join().expect("waiter thread").expect("every waiter served");
    }

    let served: Vec<i32> = served_order(&mut su, &table);
    assert_eq!(served.len(), 2 * PER_CORE, "{served:?}");
    for (at, later) in served.iter().enumerate() {
        for earlier in served.iter().skip(at + 1) {
            assert!(later - earlier <= 2, "waiter {later} served before {earlier}, which arrived first: {served:?}");
        }
    }
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
