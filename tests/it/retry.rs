//! Issue #11: opt-in retry of serialization failures and deadlocks, proven with real failures
//! produced by two real sessions (one direct, one through the router) on the harness servers.
//! Waits use the server's own view of lock waits, never a guess of how long they take.

use std::thread;
use std::time::Duration;

use postgres::error::SqlState;

use crate::router::{pg_config, pg_pool, Router};
use crate::support::{dbs, eventually, unique_name};

/// `[pools.main.retry]` allowing `attempts` attempts.
fn retry_section(attempts: u32) -> String {
    format!(
        "[pools.main.retry]\nmaximum_attempts = {attempts}\nbackoff_base = \"10ms\"\nbackoff_max = \"100ms\"\n\
         deadline = \"20s\"\nnotify_client = true\n"
    )
}

/// A backoff of exactly `LONG_BACKOFF` before the first retry (no jitter).
const LONG_RETRY: &str = "[pools.main.retry]\nmaximum_attempts = 3\nbackoff_base = \"10s\"\nbackoff_max = \"10s\"\njitter = false\ndeadline = \"60s\"\n";
const LONG_BACKOFF: Duration = Duration::from_secs(10);

/// `sqp_retries_total` of `outcome`, summed over cores and pools.
fn retries(router: &Router, outcome: &str) -> f64 {
    let scrape = router.control().scrape().expect("scrape");
    let text = querypilot::metrics::render(scrape, querypilot::metrics::Format::Prometheus).expect("render");
    text.lines()
        .filter(|l| l.starts_with("sqp_retries_total{") && l.contains(&format!("outcome=\"{outcome}\"")))
        .filter_map(|l| l.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()))
        .sum()
}

fn pg_router(mode: &str, attempts: u32) -> Router {
    let pools = format!("{}{}", pg_pool("main", dbs().pg.primary_port, mode, 4), retry_section(attempts));
    Router::start(&pg_config(&[0], &pools, "main"))
}

/// A fresh `(id int primary key, bal int)` table with rows (1,100),(2,100).
fn pg_table(direct: &mut postgres::Client) -> String {
    let t = unique_name("retry");
    direct
        .batch_execute(&format!(
            "CREATE TABLE {t} (id int PRIMARY KEY, bal int); INSERT INTO {t} VALUES (1, 100), (2, 100)"
        ))
        .expect("create table");
    t
}

fn balances(direct: &mut postgres::Client, t: &str) -> (i32, i32) {
    let r = direct
        .query_one(&format!("SELECT (SELECT bal FROM {t} WHERE id = 1), (SELECT bal FROM {t} WHERE id = 2)"), &[])
        .expect("read");
    (r.get(0), r.get(1))
}

/// Waits until `n` backends running a statement containing `needle` wait for a lock.
fn pg_wait_lock(monitor: &mut postgres::Client, needle: &str, n: i64) {
    let sql = "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%' || $1 || '%' AND pid <> pg_backend_pid()";
    eventually(Duration::from_secs(20), "a backend waiting for a lock", || {
        monitor.query_one(sql, &[&needle]).map(|r| r.get::<_, i64>(0) >= n).unwrap_or(false)
    });
}

/// A real 40P01 whose victim is the router's client: its autocommit DO block locks row 2,
/// waits for an advisory lock the test holds while a direct session X (holding row 1) starts
/// waiting for row 2, and after X's deadlock check has passed, goes for row 1 and closes the
/// cycle (so its own check, deadlock_timeout later, picks it). Returns the client's result
/// and the balances after X committed.
fn pg_deadlock(router: &Router, explicit: bool) -> (Result<(), postgres::Error>, (i32, i32)) {
    let pg = &dbs().pg;
    let mut direct = pg.primary_client();
    let t = pg_table(&mut direct);
    let key: i64 = rand_key();
    let mut holder = pg.primary_client();
    holder.query_one("SELECT pg_advisory_lock($1)", &[&key]).expect("advisory lock");
    let mut x = pg.primary_client();
    x.batch_execute(&format!("BEGIN; UPDATE {t} SET bal = bal + 10 WHERE id = 1")).expect("x holds row 1");
    let mut v = router.pg("main");
    let victim_sql = format!(
        "DO $$BEGIN UPDATE {t} SET bal = bal + 1 WHERE id = 2; PERFORM pg_advisory_xact_lock({key}); \
         UPDATE {t} SET bal = bal + 1 WHERE id = 1; END$$"
    );
    let victim = thread::spawn(move || {
        if explicit {
            v.batch_execute("BEGIN")?;
        }
        let r = v.batch_execute(&victim_sql);
        if explicit {
            v.batch_execute("ROLLBACK")?;
        }
        r
    });
    let mut monitor = pg.primary_client();
    pg_wait_lock(&mut monitor, &format!("pg_advisory_xact_lock({key})"), 1);
    let t2 = t.clone();
    let x_thread = thread::spawn(move || {
        x.batch_execute(&format!("UPDATE {t2} SET bal = bal + 10 WHERE id = 2; COMMIT")).expect("x survives");
    });
    pg_wait_lock(&mut monitor, &format!("UPDATE {t} SET bal = bal + 10 WHERE id = 2"), 1);
    // X's own deadlock check runs deadlock_timeout (100 ms) after it began to wait and must
    // find no cycle yet, so that the victim is the router's client. The server shows no sign
    // that the check ran, so this one wait is timed (4x deadlock_timeout).
    #[allow(clippy::disallowed_methods)]
    thread::sleep(Duration::from_millis(400));
    holder.query_one("SELECT pg_advisory_unlock($1)", &[&key]).expect("advisory unlock");
    let result = victim.join().expect("victim thread");
    x_thread.join().expect("x thread");
    let after = balances(&mut direct, &t);
    direct.batch_execute(&format!("DROP TABLE {t}")).expect("drop");
    (result, after)
}

/// A key for advisory locks unique to this test run.
fn rand_key() -> i64 {
    let name = unique_name("k");
    name.bytes().fold(0x5151_i64, |h, b| h.wrapping_mul(31).wrapping_add(i64::from(b))).abs()
}

fn code(e: &postgres::Error) -> Option<&SqlState> {
    e.code()
}

#[test]
fn pg_autocommit_deadlock_victim_succeeds_on_retry() {
    let router = pg_router("transaction", 3);
    let (result, after) = pg_deadlock(&router, false);
    result.expect("the victim's autocommit statement succeeds on retry");
    assert_eq!(after, (111, 111), "X's and the victim's updates each applied exactly once");
    assert!(retries(&router, "retried") >= 1.0, "sqp_retries_total counts the retry");
    assert!(retries(&router, "settled") >= 1.0, "and the statement that finally succeeded");
}

#[test]
fn pg_deadlock_reaches_the_client_without_retry() {
    let router = pg_router("transaction", 1);
    let (result, after) = pg_deadlock(&router, false);
    let e = result.expect_err("no retry: the client sees the deadlock");
    assert_eq!(code(&e), Some(&SqlState::T_R_DEADLOCK_DETECTED), "{e}");
    assert_eq!(after, (110, 110), "only X's updates");
}

#[test]
fn pg_deadlock_inside_a_transaction_is_never_retried() {
    let router = pg_router("transaction", 3);
    let (result, after) = pg_deadlock(&router, true);
    let e = result.expect_err("explicit transaction: the client owns it and sees the error");
    assert_eq!(code(&e), Some(&SqlState::T_R_DEADLOCK_DETECTED), "{e}");
    assert_eq!(after, (110, 110));
}

/// A real 40001: the router's client runs an autocommit UPDATE at REPEATABLE READ that waits
/// for row 1, which a direct session updates and commits. Returns the client's result and
/// the final balance of row 1.
fn pg_serialization(router: &Router, explicit: bool) -> (Result<u64, postgres::Error>, i32) {
    let pg = &dbs().pg;
    let mut direct = pg.primary_client();
    let t = pg_table(&mut direct);
    let mut x = pg.primary_client();
    x.batch_execute(&format!("BEGIN; UPDATE {t} SET bal = bal + 10 WHERE id = 1")).expect("x holds row 1");
    let mut v = router.pg("main");
    v.batch_execute("SET default_transaction_isolation = 'repeatable read'").expect("isolation");
    let sql = format!("UPDATE {t} SET bal = bal + 1 WHERE id = 1");
    let victim = thread::spawn(move || {
        if explicit {
            v.batch_execute("BEGIN")?;
        }
        // The extended protocol (Parse/Bind/Execute/Sync).
        let r = v.execute(sql.as_str(), &[]);
        if explicit {
            v.batch_execute("ROLLBACK")?;
        }
        r
    });
    let mut monitor = pg.primary_client();
    pg_wait_lock(&mut monitor, &format!("UPDATE {t} SET bal = bal + 1 WHERE id = 1"), 1);
    x.batch_execute("COMMIT").expect("x commits");
    let result = victim.join().expect("victim thread");
    let after = balances(&mut direct, &t).0;
    direct.batch_execute(&format!("DROP TABLE {t}")).expect("drop");
    (result, after)
}

#[test]
fn pg_serialization_failure_succeeds_on_retry() {
    let router = pg_router("session", 3);
    let (result, after) = pg_serialization(&router, false);
    assert_eq!(result.expect("retried at a new snapshot"), 1);
    assert_eq!(after, 111);
}

#[test]
fn pg_serialization_failure_without_retry_and_in_a_transaction_reaches_the_client() {
    for (attempts, explicit) in [(1, false), (3, true)] {
        let router = pg_router("session", attempts);
        let (result, after) = pg_serialization(&router, explicit);
        let e = result.expect_err("the client sees the serialization failure");
        assert_eq!(
            code(&e),
            Some(&SqlState::T_R_SERIALIZATION_FAILURE),
            "attempts {attempts}, explicit {explicit}: {e}"
        );
        assert_eq!(after, 110);
    }
}

fn my_router(mode: &str, attempts: u32) -> Router {
    my_router_notifying(mode, attempts, true)
}

fn my_router_notifying(mode: &str, attempts: u32, notify: bool) -> Router {
    use crate::mysql_session::{my_config, my_pool};
    let retry = retry_section(attempts).replace("notify_client = true", &format!("notify_client = {notify}"));
    Router::start(&my_config(&[0], &format!("{}{retry}", my_pool("main", mode, 4)), "main"))
}

/// A fresh InnoDB `(id int primary key, bal int)` table with rows (1,100),(2,100).
fn my_table(direct: &mut mysql::Conn) -> String {
    use mysql::prelude::Queryable;
    let t = unique_name("retry");
    direct.query_drop(format!("CREATE TABLE {t} (id int PRIMARY KEY, bal int) ENGINE=InnoDB")).expect("create");
    direct.query_drop(format!("INSERT INTO {t} VALUES (1, 100), (2, 100)")).expect("fill");
    t
}

/// Waits until the statement containing `needle` waits for a row lock. INNODB_TRX lists a
/// transaction that has only taken read locks so far (an `UPDATE ... ORDER BY` reads its rows
/// before changing any) only intermittently, so the process list's own timer is used too: two
/// rows are read in microseconds, so 300 ms in that state is a lock wait.
fn my_wait_lock(needle: &str) {
    use mysql::prelude::Queryable;
    let my = &dbs().my;
    let mut monitor = my.superuser_client(my.primary_port);
    let sql = format!(
        "SELECT (SELECT count(*) FROM information_schema.INNODB_TRX WHERE trx_state = 'LOCK WAIT' AND trx_query LIKE '%{needle}%') \
         + (SELECT count(*) FROM information_schema.PROCESSLIST WHERE info LIKE '%{needle}%' \
            AND state = 'Searching rows for update' AND time_ms > 300)"
    );
    eventually(Duration::from_secs(20), "a statement waiting for a row lock", || {
        monitor.query_first::<i64, _>(sql.as_str()).ok().flatten().unwrap_or(0) >= 1
    });
}

fn my_code(r: &Result<(), mysql::Error>) -> Option<u16> {
    match r {
        Err(mysql::Error::MySqlError(e)) => Some(e.code),
        _ => None,
    }
}

/// How the victim of [`my_deadlock_with`] sends its statement.
#[derive(Clone, Copy)]
enum Victim {
    /// COM_QUERY.
    Text,
    /// COM_STMT_PREPARE, then COM_STMT_EXECUTE with the ids as parameters.
    Prepared,
    /// COM_QUERY of the UPDATE followed by `DO 1/0`, whose "Division by 0" warning (1365) the
    /// server reports in the final OK packet.
    TextWithWarning,
    /// COM_QUERY of the UPDATE followed by a SELECT: the response ends with a result set's EOF
    /// packet, not an OK packet.
    TextThenRows,
}

fn my_deadlock(router: &Router, explicit: bool) -> (Result<(), mysql::Error>, (i32, i32)) {
    my_deadlock_with(router, explicit, Victim::Text, |_| {})
}

/// A real 1213 whose victim is the router's client: its autocommit UPDATE locks row 2, then
/// waits for row 1, held by a direct session X made heavier (more undo) so that InnoDB picks
/// the client when X closes the cycle by updating row 2. Once X survived the deadlock and
/// committed (the victim's attempt has failed), `after_failure` runs with the victim's
/// router-issued connection id. Returns the client's result and the balances after X committed.
fn my_deadlock_with(
    router: &Router,
    explicit: bool,
    how: Victim,
    after_failure: impl FnOnce(u32),
) -> (Result<(), mysql::Error>, (i32, i32)) {
    let (result, after, _) = my_deadlock_on(router, explicit, how, after_failure);
    (result, after)
}

/// [`my_deadlock_with`], also returning the victim's connection for what it asks next.
fn my_deadlock_on(
    router: &Router,
    explicit: bool,
    how: Victim,
    after_failure: impl FnOnce(u32),
) -> (Result<(), mysql::Error>, (i32, i32), mysql::Conn) {
    use mysql::prelude::Queryable;
    let my = &dbs().my;
    let mut direct = my.primary_client();
    let t = my_table(&mut direct);
    direct.query_drop(format!("CREATE TABLE {t}_w (id int PRIMARY KEY) ENGINE=InnoDB")).expect("weight table");
    let mut x = my.primary_client();
    x.query_drop("BEGIN").expect("x begins");
    let weight: Vec<String> = (1..=50).map(|i| format!("({i})")).collect();
    x.query_drop(format!("INSERT INTO {t}_w VALUES {}", weight.join(","))).expect("x gains weight");
    x.query_drop(format!("UPDATE {t} SET bal = bal + 10 WHERE id = 1")).expect("x holds row 1");
    let t2 = t.clone();
    let mut v = crate::mysql_session::client(router);
    let victim_id = v.connection_id();
    let victim = thread::spawn(move || {
        let mut run = || {
            if explicit {
                v.query_drop("BEGIN")?;
            }
            let update = format!("UPDATE {t2} SET bal = bal + 1 WHERE id IN (1, 2) ORDER BY id DESC");
            let r = match how {
                Victim::Text => v.query_drop(&update),
                Victim::Prepared => {
                    v.exec_drop(format!("UPDATE {t2} SET bal = bal + 1 WHERE id IN (?, ?) ORDER BY id DESC"), (1, 2))
                }
                Victim::TextWithWarning => v.query_drop(format!("{update}; DO 1/0")),
                Victim::TextThenRows => v.query_drop(format!("{update}; SELECT bal FROM {t2} ORDER BY id")),
            };
            if explicit {
                v.query_drop("ROLLBACK")?;
            }
            r
        };
        let r = run();
        (r, v)
    });
    my_wait_lock(&format!("UPDATE {t} SET bal = bal + 1"));
    x.query_drop(format!("UPDATE {t} SET bal = bal + 10 WHERE id = 2")).expect("x survives the deadlock");
    x.query_drop("COMMIT").expect("x commits");
    after_failure(victim_id);
    let (result, v) = victim.join().expect("victim thread");
    let after: (i32, i32) = direct
        .query_first(format!("SELECT (SELECT bal FROM {t} WHERE id = 1), (SELECT bal FROM {t} WHERE id = 2)"))
        .expect("read")
        .expect("row");
    direct.query_drop(format!("DROP TABLE {t}, {t}_w")).expect("drop");
    (result, after, v)
}

#[test]
fn mysql_autocommit_deadlock_victim_succeeds_on_retry() {
    let router = my_router("transaction", 3);
    let (result, after) = my_deadlock(&router, false);
    result.expect("the victim's autocommit statement succeeds on retry");
    assert_eq!(after, (111, 111), "X's and the victim's updates each applied exactly once");
}

/// (Level, Code, Message) rows of SHOW WARNINGS.
fn my_show_warnings(c: &mut mysql::Conn) -> Vec<(String, u32, String)> {
    use mysql::prelude::Queryable;
    c.query("SHOW WARNINGS").expect("show warnings")
}

/// With `notify_client`, a deadlock victim that succeeded on retry sees one more warning than
/// the server reported, in every pool mode; its next SHOW WARNINGS lists the router's note and
/// the statement's own warning (read from the connection it ran on, which transaction and
/// statement mode gave back to the pool meanwhile); the command after that is the server's again.
#[test]
fn mysql_retried_statement_reports_a_warning_when_notify_client() {
    use mysql::prelude::Queryable;
    for mode in ["session", "transaction", "statement"] {
        let router = my_router(mode, 3);
        let (result, after, mut v) = my_deadlock_on(&router, false, Victim::TextWithWarning, |_| {});
        result.unwrap_or_else(|e| panic!("{mode}: the victim succeeds on retry: {e}"));
        assert_eq!(after, (111, 111), "{mode}");
        assert_eq!(v.warnings(), 2, "{mode}: DO 1/0's warning and the router's");
        let rows = my_show_warnings(&mut v);
        assert_eq!(rows.len(), 2, "{mode}: {rows:?}");
        let (level, code, message) = &rows[0];
        assert_eq!((level.as_str(), *code), ("Note", 1213), "{mode}: {rows:?}");
        assert!(
            message.contains("failed with error 1213 (40001) before any result; retried, attempt 2 of 3"),
            "{mode}: {message}"
        );
        assert_eq!(
            (rows[1].0.as_str(), rows[1].1),
            ("Warning", 1365),
            "{mode}: the server's own warning is kept: {rows:?}"
        );
        // Answered once: the next command is the server's business again.
        let one: Option<i64> = v.query_first("SELECT 1").expect("select");
        assert_eq!(one, Some(1));
        // (A SELECT without tables does not clear the server's own list.)
        let later = my_show_warnings(&mut v);
        assert!(
            later.iter().all(|(level, _, _)| level != "Note"),
            "{mode}: the note is gone after another command: {later:?}"
        );
    }
}

/// `SHOW COUNT(*) WARNINGS` and `SELECT @@warning_count` right after a retried statement count
/// the router's note too.
#[test]
fn mysql_warning_count_after_a_retried_statement() {
    use mysql::prelude::Queryable;
    for (question, expected) in [("SHOW COUNT(*) WARNINGS", 1u64), ("SELECT @@warning_count", 1)] {
        let router = my_router("transaction", 3);
        let (result, _, mut v) = my_deadlock_on(&router, false, Victim::Text, |_| {});
        result.expect("the victim succeeds on retry");
        assert_eq!(v.warnings(), 1, "the router's note only");
        let n: Option<u64> = v.query_first(question).expect(question);
        assert_eq!(n, Some(expected), "{question}");
    }
}

/// A retried statement whose response ends with rows gets its warning in the EOF packet that
/// ends them.
#[test]
fn mysql_retried_statement_ending_with_rows_reports_a_warning_in_the_last_eof() {
    let router = my_router("transaction", 3);
    let (result, after, mut v) = my_deadlock_on(&router, false, Victim::TextThenRows, |_| {});
    result.expect("the victim succeeds on retry");
    assert_eq!(after, (111, 111));
    assert_eq!(v.warnings(), 1, "the router's note, in the EOF after the rows");
    let rows = my_show_warnings(&mut v);
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!((rows[0].0.as_str(), rows[0].1), ("Note", 1213));
}

/// Without `notify_client` the retried statement's response is relayed as the server sent it.
#[test]
fn mysql_retried_statement_without_notify_client_adds_no_warning() {
    let router = my_router_notifying("transaction", 3, false);
    let (result, after, mut v) = my_deadlock_on(&router, false, Victim::TextWithWarning, |_| {});
    result.expect("the victim succeeds on retry");
    assert_eq!(after, (111, 111));
    assert!(retries(&router, "settled") >= 1.0, "it was retried");
    assert_eq!(v.warnings(), 1, "DO 1/0's warning only");
    let rows = my_show_warnings(&mut v);
    assert!(rows.iter().all(|(level, _, _)| level != "Note"), "{rows:?}");
}

#[test]
fn mysql_deadlock_without_retry_and_in_a_transaction_reaches_the_client() {
    for (attempts, explicit) in [(1, false), (3, true)] {
        let router = my_router("transaction", attempts);
        let (result, after) = my_deadlock(&router, explicit);
        assert_eq!(my_code(&result), Some(1213), "attempts {attempts}, explicit {explicit}: {result:?}");
        assert_eq!(after, (110, 110));
    }
}

#[test]
fn mysql_lock_wait_timeout_is_not_retried() {
    use mysql::prelude::Queryable;
    let router = my_router("session", 3);
    let my = &dbs().my;
    let mut direct = my.primary_client();
    let t = my_table(&mut direct);
    let mut x = my.primary_client();
    x.query_drop("BEGIN").expect("x begins");
    x.query_drop(format!("UPDATE {t} SET bal = bal + 10 WHERE id = 1")).expect("x holds row 1");
    let mut v = crate::mysql_session::client(&router);
    v.query_drop("SET SESSION innodb_lock_wait_timeout = 1").expect("short lock wait");
    let started = std::time::Instant::now();
    let result = v.query_drop(format!("UPDATE {t} SET bal = bal + 1 WHERE id = 1"));
    let took = started.elapsed();
    assert_eq!(my_code(&result), Some(1205), "{result:?}");
    // A retry would have waited for the lock a second time.
    assert!(took < Duration::from_millis(1900), "relayed after one wait, not retried: {took:?}");
    x.query_drop("ROLLBACK").expect("x rolls back");
    direct.query_drop(format!("DROP TABLE {t}")).expect("drop");
}

/// A real 40001 as in [`pg_serialization`] on a pool whose first retry waits `LONG_BACKOFF`.
/// Once the victim's first attempt has failed (its backend is idle again), `interrupt` runs
/// with the victim's cancel token. Returns the client's result, the final balance of row 1 and
/// how long after `interrupt` began the client had its answer.
fn pg_serialization_interrupted(
    router: &Router,
    interrupt: impl FnOnce(postgres::CancelToken),
) -> (Result<u64, postgres::Error>, i32, Duration) {
    let pg = &dbs().pg;
    let mut direct = pg.primary_client();
    let t = pg_table(&mut direct);
    let mut x = pg.primary_client();
    x.batch_execute(&format!("BEGIN; UPDATE {t} SET bal = bal + 10 WHERE id = 1")).expect("x holds row 1");
    let mut v = router.pg("main");
    v.batch_execute("SET default_transaction_isolation = 'repeatable read'").expect("isolation");
    let token = v.cancel_token();
    let victim_sql = format!("UPDATE {t} SET bal = bal + 1 WHERE id = 1");
    let sql = victim_sql.clone();
    let victim = thread::spawn(move || {
        let r = v.execute(sql.as_str(), &[]);
        (r, std::time::Instant::now())
    });
    let mut monitor = pg.primary_client();
    pg_wait_lock(&mut monitor, &victim_sql, 1);
    x.batch_execute("COMMIT").expect("x commits");
    // The failed attempt is over when the victim's backend is idle with the UPDATE as its last
    // statement; the router now holds the error for LONG_BACKOFF.
    let idle = "SELECT count(*) FROM pg_stat_activity WHERE state = 'idle' AND query = $1 AND pid <> pg_backend_pid()";
    eventually(Duration::from_secs(20), "the victim's first attempt failed", || {
        monitor.query_one(idle, &[&victim_sql]).map(|r| r.get::<_, i64>(0) >= 1).unwrap_or(false)
    });
    let interrupted = std::time::Instant::now();
    interrupt(token);
    let (result, answered) = victim.join().expect("victim thread");
    let after = balances(&mut direct, &t).0;
    direct.batch_execute(&format!("DROP TABLE {t}")).expect("drop");
    (result, after, answered.saturating_duration_since(interrupted))
}

/// A router whose pool retries after `LONG_BACKOFF`; a drain waits up to `drain` for busy
/// sessions.
fn pg_long_backoff_router(drain: &str) -> Router {
    let pools = format!("{}{LONG_RETRY}", pg_pool("main", dbs().pg.primary_port, "transaction", 4));
    Router::start(
        &pg_config(&[0, 1], &pools, "main")
            .replace("shutdown_drain = \"2s\"", &format!("shutdown_drain = \"{drain}\"")),
    )
}

#[test]
fn pg_cancel_during_the_backoff_returns_the_error_at_once() {
    let router = pg_long_backoff_router("2s");
    let (result, after, took) = pg_serialization_interrupted(&router, |token| {
        token.cancel_query(postgres::NoTls).expect("cancel request");
    });
    // Had the wait run out, the retry would have succeeded: the error proves it was cut short.
    let e = result.expect_err("a cancelled retry hands the client the last error");
    assert_eq!(code(&e), Some(&SqlState::T_R_SERIALIZATION_FAILURE), "{e}");
    assert_eq!(after, 110, "the victim's update never ran again");
    assert!(took < LONG_BACKOFF, "answered {took:?} after the cancel, before the {LONG_BACKOFF:?} backoff ended");
    assert!(retries(&router, "cancelled") >= 1.0, "sqp_retries_total counts the cancelled retry");
    assert_eq!(retries(&router, "retried"), 0.0);
}

#[test]
fn pg_drain_during_the_backoff_returns_the_error_at_once() {
    // The drain window outlasts the backoff: had the wait not ended, the retry would have run
    // (busy sessions may finish) and succeeded.
    let router = pg_long_backoff_router("60s");
    let control = router.control().clone();
    let (result, after, took) = pg_serialization_interrupted(&router, move |_| control.drain());
    let e = result.expect_err("a drained retry hands the client the last error");
    // The router sends the held 40001 and, the session being idle then, its own 57P01 FATAL;
    // the postgres crate may report the connection's FATAL instead when both arrive together.
    let message = e.as_db_error().map(|d| d.message().to_owned()).unwrap_or_default();
    let shutdown = code(&e) == Some(&SqlState::ADMIN_SHUTDOWN) && message.contains("the router is shutting down");
    assert!(code(&e) == Some(&SqlState::T_R_SERIALIZATION_FAILURE) || shutdown, "{e:?}");
    assert_eq!(after, 110, "the victim's update never ran again");
    assert!(took < LONG_BACKOFF, "answered {took:?} after the drain began, before the backoff ended");
}

#[test]
fn pg_rule_level_retry_on_a_pool_without_retry() {
    // The pool has no retry section; only the statements the rule routes are retried.
    let pools = pg_pool("main", dbs().pg.primary_port, "session", 4);
    let rule = "[[routing.rules]]\nname = \"victim\"\npattern = \"bal = bal \\\\+ 1 \"\npool = \"main\"\n\
                retry = { maximum_attempts = 3, backoff_base = \"10ms\", deadline = \"20s\" }\n";
    let router = Router::start(&format!("{}{rule}", pg_config(&[0], &pools, "main")));
    let (result, after) = pg_serialization(&router, false);
    assert_eq!(result.expect("the rule's policy retried it at a new snapshot"), 1);
    assert_eq!(after, 111);
    assert!(retries(&router, "retried") >= 1.0);
}

/// A real 1213 as in [`my_deadlock`] but the victim's statement is a prepared execute with
/// parameters (COM_STMT_PREPARE + COM_STMT_EXECUTE).
#[test]
fn mysql_prepared_deadlock_victim_succeeds_on_retry() {
    let router = my_router("transaction", 3);
    let (result, after) = my_deadlock_with(&router, false, Victim::Prepared, |_| {});
    result.expect("the victim's prepared execute succeeds on retry");
    assert_eq!(after, (111, 111), "X's and the victim's updates each applied exactly once");
    assert!(retries(&router, "settled") >= 1.0);
}

#[test]
fn mysql_prepared_deadlock_without_retry_and_in_a_transaction_reaches_the_client() {
    for (attempts, explicit) in [(1, false), (3, true)] {
        let router = my_router("transaction", attempts);
        let (result, after) = my_deadlock_with(&router, explicit, Victim::Prepared, |_| {});
        assert_eq!(my_code(&result), Some(1213), "attempts {attempts}, explicit {explicit}: {result:?}");
        assert_eq!(after, (110, 110));
    }
}

#[test]
fn mysql_kill_query_during_the_backoff_returns_the_error_at_once() {
    use crate::mysql_session::{my_config, my_pool};
    use mysql::prelude::Queryable;
    let router =
        Router::start(&my_config(&[0, 1], &format!("{}{LONG_RETRY}", my_pool("main", "transaction", 4)), "main"));
    let mut killer = crate::mysql_session::client(&router);
    let mut killed = None;
    let (result, after) = my_deadlock_with(&router, false, Victim::Text, |id| {
        killed = Some(std::time::Instant::now());
        killer.query_drop(format!("KILL QUERY {id}")).expect("kill query through the router");
    });
    let took = killed.map(|k| k.elapsed()).unwrap_or_default();
    // Had the wait run out, the retry would have succeeded: the error proves it was cut short.
    assert_eq!(my_code(&result), Some(1213), "a killed retry hands the client the last error: {result:?}");
    assert_eq!(after, (110, 110), "the victim's update never ran again");
    assert!(took < LONG_BACKOFF, "answered {took:?} after the kill, before the {LONG_BACKOFF:?} backoff ended");
    assert!(retries(&router, "cancelled") >= 1.0, "sqp_retries_total counts the cancelled retry");
}

/// A read on the standby cancelled by a real recovery conflict (SQLSTATE 40001): while it
/// scans a table, the primary takes an ACCESS EXCLUSIVE lock on that table; the standby replays
/// the lock and, `max_standby_streaming_delay` later, cancels the read. The retry is a new
/// attempt on a primary connection, proven by `pg_is_in_recovery()` in the client's answer.
#[test]
fn pg_replica_recovery_conflict_is_retried_on_a_primary_connection() {
    let env = crate::support::Dbs::private();
    let pg = &env.pg;
    let mut standby = pg.superuser_client(pg.replica_port);
    standby.batch_execute("ALTER SYSTEM SET max_standby_streaming_delay = '100ms'").expect("alter system");
    standby.batch_execute("SELECT pg_reload_conf()").expect("reload");
    eventually(Duration::from_secs(20), "the standby's new max_standby_streaming_delay", || {
        standby
            .query_one("SHOW max_standby_streaming_delay", &[])
            .map(|r| r.get::<_, String>(0) == "100ms")
            .unwrap_or(false)
    });
    let mut direct = pg.primary_client();
    let t = unique_name("conflict");
    direct.batch_execute(&format!("CREATE TABLE {t} (id int); INSERT INTO {t} VALUES (1)")).expect("table");
    pg.wait_replica_caught_up(Duration::from_secs(30));
    let pool = |name: &str, port: u16| {
        format!(
            "[pools.{name}]\nmode = \"transaction\"\nusername = \"{}\"\npassword = \"{}\"\ndatabase = \"{}\"\n\
             max_connections = 4\nacquire_timeout = \"20s\"\nbackends = [{{ host = \"127.0.0.1\", port = {port} }}]\n",
            pg.user, pg.password, pg.database
        )
    };
    let pools = format!(
        "{}{}[pools.ro.retry]\nmaximum_attempts = 3\nbackoff_base = \"10ms\"\ndeadline = \"60s\"\n",
        pool("rw", pg.primary_port),
        pool("ro", pg.replica_port)
    );
    let text =
        format!("{}read_write_split = true\nread_pool = \"ro\"\nwrite_pool = \"rw\"\n", pg_config(&[0], &pools, "rw"));
    let router = Router::start(&text);
    let mut v =
        pg.config(router.port(), &pg.user, &pg.password).connect(postgres::NoTls).expect("connect through the router");
    // A simple Query: a batch that needs nothing prepared on the replica connection.
    let sql = format!("SELECT pg_is_in_recovery(), count(*) FROM {t}, generate_series(1, 30000000) g");
    let victim_sql = sql.clone();
    let victim = thread::spawn(move || {
        let rows = v.simple_query(&sql)?;
        Ok::<_, postgres::Error>(rows.into_iter().find_map(|m| match m {
            postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        }))
    });
    let running = "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query = $1";
    eventually(Duration::from_secs(20), "the read running on the standby", || {
        standby.query_one(running, &[&victim_sql]).map(|r| r.get::<_, i64>(0) >= 1).unwrap_or(false)
    });
    direct.batch_execute(&format!("BEGIN; LOCK TABLE {t} IN ACCESS EXCLUSIVE MODE")).expect("primary locks the table");
    // The lock's WAL record goes to the standby once flushed: another session's commit does it.
    pg.primary_client().batch_execute("SELECT txid_current()").expect("a commit flushes the WAL");
    let conflicts = "SELECT confl_lock FROM pg_stat_database_conflicts WHERE datname = current_database()";
    eventually(Duration::from_secs(30), "the standby cancelled the read (recovery conflict)", || {
        standby.query_one(conflicts, &[]).map(|r| r.get::<_, i64>(0) >= 1).unwrap_or(false)
    });
    // The retry waits for the lock on the primary until it is released.
    direct.batch_execute("ROLLBACK").expect("primary releases the lock");
    let in_recovery = victim.join().expect("victim thread").expect("the read succeeds on retry");
    assert_eq!(in_recovery.as_deref(), Some("f"), "the retry ran on the primary");
    assert!(retries(&router, "retried") >= 1.0);
    direct.batch_execute(&format!("DROP TABLE {t}")).expect("drop");
}
