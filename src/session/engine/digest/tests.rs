//! `engine::digest`: when a timed statement starts and ends, and what it reports.

use super::*;
use crate::session::digest::DigestTable;

const PG: Protocol = Protocol::Postgres;

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// The figures of the execution `t` reports at `now`, owned.
fn finished(t: &mut Timing, now: Instant) -> Option<(Fingerprint, String, Duration, u64, bool)> {
    t.finish(now, PG, "p").map(|e| (e.fingerprint, e.sql.to_owned(), e.elapsed, e.rows, e.error))
}

#[test]
fn nothing_is_reported_before_a_start() {
    let mut t = Timing::default();
    assert!(t.finish(Instant::now(), PG, "p").is_none());
}

#[test]
fn a_statement_is_reported_once() {
    let (mut t, t0) = (Timing::default(), Instant::now());
    t.begin(Fingerprint(7), "SELECT 1", t0);
    assert!(t.finish(t0 + ms(5), PG, "p").is_some());
    assert!(t.finish(t0 + ms(6), PG, "p").is_none(), "finished once");
}

#[test]
fn elapsed_runs_from_start_to_finish() {
    let (mut t, t0) = (Timing::default(), Instant::now());
    t.begin(Fingerprint(7), "SELECT 1", t0 + ms(2));
    let (fp, sql, elapsed, rows, error) = finished(&mut t, t0 + ms(9)).unwrap();
    assert_eq!((fp, sql.as_str(), elapsed, rows, error), (Fingerprint(7), "SELECT 1", ms(7), 0, false));
}

#[test]
fn a_finish_before_the_start_is_no_time() {
    let (mut t, t0) = (Timing::default(), Instant::now() + ms(10));
    t.begin(Fingerprint(1), "SELECT 1", t0);
    assert_eq!(finished(&mut t, t0 - ms(10)).unwrap().2, Duration::ZERO);
}

#[test]
fn rows_add_up_over_the_response() {
    let (mut t, t0) = (Timing::default(), Instant::now());
    t.begin(Fingerprint(1), "SELECT 1; UPDATE t SET a = 1", t0);
    t.rows(3);
    t.rows(0);
    t.rows(2);
    assert_eq!(finished(&mut t, t0).unwrap().3, 5);
}

#[test]
fn rows_saturate() {
    let (mut t, t0) = (Timing::default(), Instant::now());
    t.begin(Fingerprint(1), "SELECT 1", t0);
    t.rows(u64::MAX);
    t.rows(4);
    assert_eq!(finished(&mut t, t0).unwrap().3, u64::MAX);
}

#[test]
fn an_error_marks_the_execution() {
    let (mut t, t0) = (Timing::default(), Instant::now());
    t.begin(Fingerprint(1), "SELECT 1/0", t0);
    t.failed(false);
    assert!(!finished(&mut t, t0).unwrap().4, "no error part");
    t.begin(Fingerprint(1), "SELECT 1/0", t0);
    t.failed(true);
    t.failed(false);
    assert!(finished(&mut t, t0).unwrap().4, "a later message does not clear it");
}

#[test]
fn a_new_start_forgets_the_last_statements_rows_and_error() {
    let (mut t, t0) = (Timing::default(), Instant::now());
    t.begin(Fingerprint(1), "UPDATE t SET a = 1", t0);
    t.rows(9);
    t.failed(true);
    let _ = t.finish(t0, PG, "p");
    t.begin(Fingerprint(2), "SELECT 2", t0);
    let (fp, _, _, rows, error) = finished(&mut t, t0).unwrap();
    assert_eq!((fp, rows, error), (Fingerprint(2), 0, false));
}

#[test]
fn a_start_while_timing_drops_the_unfinished_statement() {
    let (mut t, t0) = (Timing::default(), Instant::now());
    t.begin(Fingerprint(1), "SELECT 1", t0);
    t.rows(4);
    t.begin(Fingerprint(2), "SELECT 2", t0 + ms(3));
    let (fp, sql, elapsed, rows, _) = finished(&mut t, t0 + ms(4)).unwrap();
    assert_eq!((fp, sql.as_str(), elapsed, rows), (Fingerprint(2), "SELECT 2", ms(1), 0));
    assert!(t.finish(t0 + ms(5), PG, "p").is_none(), "the dropped one is never reported");
}

#[test]
fn pipelined_statements_each_get_their_own_figures() {
    // PostgreSQL finishes the previous statement when the next one is routed.
    let (mut t, t0) = (Timing::default(), Instant::now());
    t.begin(Fingerprint(1), "INSERT INTO t VALUES (1)", t0);
    t.rows(1);
    let first = finished(&mut t, t0 + ms(2)).unwrap();
    t.begin(Fingerprint(2), "SELECT * FROM t", t0 + ms(2));
    t.failed(true);
    let second = finished(&mut t, t0 + ms(7)).unwrap();
    assert_eq!((first.0, first.2, first.3, first.4), (Fingerprint(1), ms(2), 1, false));
    assert_eq!((second.0, second.2, second.3, second.4), (Fingerprint(2), ms(5), 0, true));
}

#[test]
fn a_shorter_text_leaves_nothing_of_a_longer_one() {
    let (mut t, t0) = (Timing::default(), Instant::now());
    t.begin(Fingerprint(1), "SELECT a_long_column_name FROM a_long_table_name", t0);
    let _ = t.finish(t0, PG, "p");
    t.begin(Fingerprint(2), "SELECT 1", t0);
    assert_eq!(finished(&mut t, t0).unwrap().1, "SELECT 1");
}

#[test]
fn the_wire_names_protocol_and_pool() {
    let (mut t, t0) = (Timing::default(), Instant::now());
    t.begin(Fingerprint(1), "SELECT 1", t0);
    let e = t.finish(t0, Protocol::MySql, "replica").unwrap();
    assert_eq!((e.protocol, e.pool), (Protocol::MySql, "replica"));
}

#[test]
fn executions_accumulate_in_the_cores_table() {
    let (mut t, mut table, t0) = (Timing::default(), DigestTable::default(), Instant::now());
    let sql = "SELECT * FROM t WHERE id = 1";
    let fp = crate::sql::fingerprint::fingerprint(sql, crate::sql::Dialect::Postgres);
    for (i, failed) in [false, true, false].into_iter().enumerate() {
        t.begin(fp, sql, t0);
        t.rows(2);
        t.failed(failed);
        table.record(&t.finish(t0 + ms(i as u64 + 1), PG, "primary").unwrap());
    }
    let s = table.snapshot();
    assert_eq!(s.rows.len(), 1);
    let r = &s.rows[0];
    assert_eq!((r.calls, r.rows, r.errors, r.total, r.max), (3, 6, 1, ms(6), ms(3)));
}
