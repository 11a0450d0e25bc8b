//! Recording, snapshot, merge and exposition of the per-core counters.

use std::time::Duration;

use super::*;

fn pool_snapshot(p: &PoolCounters, idle: u64) -> PoolSnapshot {
    p.snapshot(8, &|_| idle)
}

/// One core's counters after some traffic; `k` scales the figures so cores differ.
fn core(k: u64) -> CounterSnapshot {
    let c = CoreCounters::default();
    let pool = PoolCounters::new("main");
    let backend = pool.backend("db1:5432");
    assert!(std::rc::Rc::ptr_eq(&backend, &pool.backend("db1:5432")), "resolved once, shared");
    for _ in 0..k {
        c.session_opened();
        c.client_connected(0);
        let mut slot = pool.acquire_started();
        slot.queue();
        drop(slot);
        pool.acquire_finished(Duration::from_millis(2));
        backend.checked_out();
        c.client_active(0, true);
        pool.statement();
        pool.statement_finished(Duration::from_millis(210));
        pool.decided(Decision::ReadWriteSplit);
        c.operation(Operation::Read);
        c.bytes(Direction::ClientIn, 10);
        pool.error("pool.exhausted");
        c.pinned("listen");
        c.relay_failed("relay.backend_closed");
    }
    backend.connect_failed();
    c.client_refused(0);
    c.auth_failed(0, AuthFailure::UnknownUser);
    pool.acquire_timed_out();
    c.rejected();
    c.session_closed();
    c.session_panicked();
    let mut s = c.snapshot(&["pg"], vec![pool_snapshot(&pool, k)]);
    // The core copies its router's plan-cache figures into the report.
    s.cache_ops_total[CacheOp::Miss.index()] = k;
    // And the process-wide client buffers, read at slightly different times.
    s.client_buffer_bytes = [0, 3 + k, 0, 0, 0];
    s
}

#[test]
fn counters_record_into_the_snapshot() {
    let s = core(3);
    assert_eq!((s.sessions_active, s.sessions_accepted_total, s.session_panics_total), (2, 3, 1));
    let mut auth_failures_total = [0; AuthFailure::COUNT];
    auth_failures_total[AuthFailure::UnknownUser.index()] = 1;
    assert_eq!(
        s.clients,
        vec![ClientSnapshot { listener: "pg".into(), idle: 0, active: 3, refused_total: 1, auth_failures_total }]
    );
    assert_eq!(s.bytes_total[Direction::ClientIn.index()], 30);
    assert_eq!(s.operations_total[Operation::Read.index()], 3);
    assert_eq!(s.pins_total, vec![("listen", 3)]);
    assert_eq!(s.relay_errors_total, vec![("relay.backend_closed", 3)]);
    let p = s.pool("main").expect("pool");
    assert_eq!((p.acquires_total, p.timeouts_total, p.statements_total, p.queue_depth), (3, 1, 3, 0));
    assert_eq!(p.decisions_total[Decision::ReadWriteSplit.index()], 3);
    assert_eq!(p.errors_total, vec![("pool.exhausted", 3)]);
    assert_eq!(p.wait.count(), 3);
    assert_eq!(p.statement_duration.count(), 3);
    assert_eq!(p.backends[0].active, 3);
    assert_eq!(p.backends[0].idle, 3);
    assert!((p.utilization() - 3.0 / 8.0).abs() < 1e-12);
}

#[test]
fn queue_slot_counts_only_while_queued_and_gauges_never_underflow() {
    let pool = PoolCounters::new("p");
    let mut a = pool.acquire_started();
    a.queue();
    a.queue();
    let _b = pool.acquire_started(); // served at once: never queued
    assert_eq!(pool_snapshot(&pool, 0).queue_depth, 1);
    drop(a);
    assert_eq!(pool_snapshot(&pool, 0).queue_depth, 0);
    let b = pool.backend("x");
    b.checked_in();
    let c = CoreCounters::default();
    c.client_disconnected(2);
    c.client_active(2, false);
    c.session_closed();
    let s = c.snapshot(&["a", "b", "c"], Vec::new());
    assert_eq!(s.sessions_active, 0);
    assert_eq!(s.clients.len(), 3);
    assert!(s.clients.iter().all(|l| l.idle == 0 && l.active == 0));
    assert_eq!(pool_snapshot(&pool, 0).backends[0].active, 0);
}

#[test]
fn merge_sums_by_pool_backend_listener_and_key() {
    let a = core(1);
    let mut b = core(2);
    b.pools[0].backends.push(BackendSnapshot {
        label: "db2:5432".into(),
        idle: 1,
        active: 0,
        connect_failures_total: 4,
        checkouts_total: 0,
        health: None,
    });
    b.pools.push(PoolSnapshot { name: "other".into(), ..a.pools[0].clone() });
    b.pins_total.push(("temp_object", 1));
    b.relay_errors_total.push(("relay.malformed", 2));
    let mut total = a.clone();
    total.merge(&b);
    assert_eq!(total.sessions_accepted_total, 3);
    assert_eq!(total.pins_total, vec![("listen", 3), ("temp_object", 1)]);
    assert_eq!(total.relay_errors_total, vec![("relay.backend_closed", 3), ("relay.malformed", 2)]);
    assert_eq!(total.clients[0].active, 3);
    assert_eq!(total.pools.len(), 2);
    let main = total.pool("main").expect("main");
    assert_eq!(main.acquires_total, 3);
    assert_eq!(main.errors_total, vec![("pool.exhausted", 3)]);
    assert_eq!(main.wait.count(), 3);
    assert_eq!(main.statement_duration.count(), 3, "statement times merge by pool");
    assert_eq!(main.capacity, 8, "capacity is process-wide, not summed");
    assert_eq!(main.backends.len(), 2);
    assert_eq!(main.backends[0].active, 3);
    assert_eq!(main.backends[1].connect_failures_total, 4);
    assert!((main.utilization() - (a.pools[0].utilization() + b.pools[0].utilization())).abs() < 1e-12);
}

/// The value of the sample whose line starts with `series` (name plus labels).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[test]
fn render_writes_every_catalog_metric_with_a_core_label_summing_to_the_merge() {
    let cores = vec![(0, core(1)), (1, core(4))];
    let mut merged = CounterSnapshot::default();
    for (_, s) in &cores {
        merged.merge(s);
    }
    let scrape = Scrape { cores, config_version: 2, reloads_applied: 1, reloads_rejected: 3, log_lines_dropped: 5 };
    let open = render(scrape.clone(), Format::OpenMetrics).expect("render");
    assert!(open.ends_with("# EOF\n"));
    assert!(open.contains("# TYPE sqp_bytes counter\n"));
    let text = render(scrape, Format::Prometheus).expect("render");
    assert!(!text.contains("# EOF"));
    assert!(text.contains("# HELP sqp_bytes_total Bytes relayed"));
    assert!(text.contains("# TYPE sqp_bytes_total counter\n"));
    for def in catalog::ALL {
        assert!(text.contains(&format!("# TYPE {} ", def.name)), "{} missing", def.name);
    }
    let acq = |c: u8| sample(&text, &format!("sqp_pool_acquire_total{{core=\"{c}\",pool=\"main\"}}")).expect("acquire");
    assert_eq!(acq(0) + acq(1), merged.pool("main").expect("main").acquires_total as f64);
    let active = |c: u8| sample(&text, &format!("sqp_sessions_active{{core=\"{c}\"}}")).expect("active");
    assert_eq!(active(0) + active(1), merged.sessions_active as f64);
    assert_eq!(sample(&text, "sqp_pool_wait_duration_seconds_count{core=\"1\",pool=\"main\"}"), Some(4.0));
    assert_eq!(
        sample(&text, "sqp_pool_wait_duration_seconds_bucket{le=\"0.005\",core=\"1\",pool=\"main\"}"),
        Some(4.0)
    );
    assert_eq!(sample(&text, "sqp_pool_wait_duration_seconds_bucket{le=\"+Inf\",core=\"1\",pool=\"main\"}"), Some(4.0));
    let statement = |le: &str| {
        sample(&text, &format!("sqp_statement_duration_seconds_bucket{{le=\"{le}\",core=\"1\",pool=\"main\"}}"))
    };
    assert_eq!((statement("0.1"), statement("0.25"), statement("+Inf")), (Some(0.0), Some(4.0), Some(4.0)));
    assert_eq!(sample(&text, "sqp_statement_duration_seconds_count{core=\"1\",pool=\"main\"}"), Some(4.0));
    assert_eq!(sample(&text, "sqp_statement_duration_seconds_sum{core=\"1\",pool=\"main\"}"), Some(0.84));
    assert_eq!(sample(&text, "sqp_config_reloads_total{outcome=\"rejected\"}"), Some(3.0));
    assert_eq!(sample(&text, "sqp_config_version"), Some(2.0));
    assert_eq!(sample(&text, "sqp_relay_errors_total{core=\"1\",code=\"relay.backend_closed\"}"), Some(4.0));
    assert_eq!(sample(&text, "sqp_log_lines_dropped_total"), Some(5.0));
    assert_eq!(sample(&text, "sqp_client_buffer_bytes{kind=\"long_data\"}"), Some(7.0), "process-wide, written once");
    assert_eq!(
        sample(&text, "sqp_routing_decisions_total{core=\"0\",decision=\"read_write_split\",pool=\"main\"}"),
        Some(1.0)
    );
}

#[test]
fn label_values_are_escaped() {
    let pool = PoolCounters::new("we\"ird\\pool\nname");
    let c = CoreCounters::default();
    let scrape = Scrape { cores: vec![(0, c.snapshot(&[], vec![pool.snapshot(1, &|_| 0)]))], ..Scrape::default() };
    let text = render(scrape, Format::Prometheus).expect("render");
    assert!(text.contains("pool=\"we\\\"ird\\\\pool\\nname\""), "{text}");
}

#[test]
fn health_is_written_once_per_backend_without_a_core_label() {
    let figures = HealthFigures {
        healthy: false,
        cause: "lag",
        lag_micros: Some(2_500_000),
        lag_bytes: Some(8192),
        check_failures_total: [("connect", 1), ("query", 0), ("lag", 4)],
        role_mismatch: Some(true),
        applied_position: None,
        written_position: None,
        replayed_position: None,
    };
    let with_health = |k| {
        let mut s = core(k);
        s.pools[0].backends[0].health = Some(figures.clone());
        s
    };
    let mut merged = with_health(1);
    merged.merge(&with_health(2));
    assert_eq!(merged.pools[0].backends[0].health, Some(figures.clone()), "process-wide: not summed");
    let scrape = Scrape { cores: vec![(0, with_health(1)), (1, with_health(2))], ..Scrape::default() };
    let text = render(scrape, Format::Prometheus).expect("render");
    let b = "pool=\"main\",backend=\"db1:5432\"";
    assert_eq!(sample(&text, &format!("sqp_backend_healthy{{{b}}}")), Some(0.0));
    assert_eq!(sample(&text, &format!("sqp_backend_replica_lag_seconds{{{b}}}")), Some(2.5));
    assert_eq!(sample(&text, &format!("sqp_backend_replica_lag_bytes{{{b}}}")), Some(8192.0));
    assert_eq!(sample(&text, &format!("sqp_backend_health_check_failures_total{{{b},reason=\"lag\"}}")), Some(4.0));
    assert_eq!(text.matches("sqp_backend_healthy{").count(), 1);
    assert_eq!(sample(&text, &format!("sqp_backend_role_mismatch{{{b}}}")), Some(1.0));
    // Unknown lag is absent rather than a made-up number.
    let unknown = HealthFigures { lag_micros: None, lag_bytes: None, role_mismatch: None, ..figures };
    let mut s = core(1);
    s.pools[0].backends[0].health = Some(unknown);
    let text = render(Scrape { cores: vec![(0, s)], ..Scrape::default() }, Format::Prometheus).expect("render");
    assert!(!text.contains("sqp_backend_replica_lag_seconds{"), "{text}");
    assert!(!text.contains("sqp_backend_role_mismatch{"), "unverified roles are absent: {text}");
}
