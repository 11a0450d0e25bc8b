use super::*;

fn exec<'a>(sql: &'a str, ms: u64, pool: &'a str, error: bool) -> Execution<'a> {
    Execution {
        fingerprint: crate::sql::fingerprint::fingerprint(sql, crate::sql::Dialect::Postgres),
        sql,
        protocol: Protocol::Postgres,
        elapsed: Duration::from_millis(ms),
        rows: 2,
        error,
        pool,
    }
}

#[test]
fn one_shape_accumulates_calls_time_rows_errors_and_pools() {
    let mut t = DigestTable::default();
    t.record(&exec("SELECT * FROM t WHERE id = 1", 3, "primary", false));
    t.record(&exec("select * from t where id = 42", 7, "replica", true));
    t.record(&exec("SELECT * FROM t WHERE id = 9", 1, "primary", false));
    let s = t.snapshot();
    assert_eq!(s.rows.len(), 1);
    let r = &s.rows[0];
    assert_eq!((r.calls, r.rows, r.errors), (3, 6, 1));
    assert_eq!((r.total, r.max), (Duration::from_millis(11), Duration::from_millis(7)));
    assert_eq!(r.latency.count(), 3, "every execution timed in the sketch");
    let (p50, p100) = (r.percentile(0.5), r.percentile(1.0));
    assert!(p50 > Duration::from_micros(2_625) && p50 < Duration::from_micros(3_375), "3 ms ± 12.5%: {p50:?}");
    assert!(p100 > Duration::from_micros(6_125) && p100 <= Duration::from_millis(7), "{p100:?}");
    assert_eq!(r.pools, vec!["primary".to_owned(), "replica".to_owned()]);
    assert_eq!(r.protocol, "postgres");
    assert!(!r.normalized.contains("42") && !r.normalized.contains('1'), "{}", r.normalized);
}

#[test]
fn a_full_table_refuses_new_shapes_counts_them_and_reset_makes_room() {
    let mut t = DigestTable::with_capacity(2);
    t.record(&exec("SELECT a FROM t", 1, "p", false));
    t.record(&exec("SELECT b FROM t", 1, "p", false));
    t.record(&exec("SELECT c FROM t", 1, "p", false));
    t.record(&exec("SELECT a FROM t", 1, "p", false));
    let s = t.snapshot();
    assert_eq!((s.rows.len(), s.dropped), (2, 1));
    assert_eq!(s.rows.iter().map(|r| r.calls).sum::<u64>(), 3, "known shapes still count");
    t.reset();
    assert!(t.snapshot().rows.is_empty());
    assert_eq!(t.snapshot().dropped, 0);
    t.record(&exec("SELECT c FROM t", 1, "p", false));
    assert_eq!(t.snapshot().rows.len(), 1);
}

#[test]
fn the_same_hash_under_two_protocols_is_two_shapes() {
    let mut t = DigestTable::default();
    let pg = exec("SELECT 1", 1, "p", false);
    let my = Execution { protocol: Protocol::MySql, ..pg };
    t.record(&pg);
    t.record(&my);
    assert_eq!(t.snapshot().rows.len(), 2);
}
