//! Routing hot paths on the pgbench and sysbench statements: lexer+fingerprint throughput, the
//! cache-hit decision (the common case, target well under 1 µs) and the analysis a miss costs.
//! Run: `cargo bench --bench routing` (or `-- --test` to check it runs once).

use std::hint::black_box;
use std::sync::Arc;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use querypilot::config::{Config, Protocol};
use querypilot::routing::{Catalogs, RouteInput, Router, RuleSet};
use querypilot::sql::analyze::analyze;
use querypilot::sql::fingerprint::fingerprint;
use querypilot::sql::volatility::FunctionCatalog;
use querypilot::sql::Dialect;

const PGBENCH: &[&str] = &[
    "SELECT abalance FROM pgbench_accounts WHERE aid = 48213;",
    "UPDATE pgbench_accounts SET abalance = abalance + -3201 WHERE aid = 48213;",
    "UPDATE pgbench_tellers SET tbalance = tbalance + -3201 WHERE tid = 7;",
    "UPDATE pgbench_branches SET bbalance = bbalance + -3201 WHERE bid = 1;",
    "INSERT INTO pgbench_history (tid, bid, aid, delta, mtime) VALUES (7, 1, 48213, -3201, CURRENT_TIMESTAMP);",
];

const SYSBENCH: &[&str] = &[
    "SELECT c FROM sbtest1 WHERE id=5021",
    "SELECT c FROM sbtest1 WHERE id BETWEEN 5021 AND 5120",
    "SELECT SUM(k) FROM sbtest1 WHERE id BETWEEN 5021 AND 5120",
    "SELECT c FROM sbtest1 WHERE id BETWEEN 5021 AND 5120 ORDER BY c",
    "SELECT DISTINCT c FROM sbtest1 WHERE id BETWEEN 5021 AND 5120 ORDER BY c",
];

const CONFIG: &str = r#"
[[listeners]]
protocol = "postgres"
bind = "127.0.0.1:6432"

[[listeners]]
protocol = "mysql"
bind = "127.0.0.1:3307"

[pools.primary]
backends = [{ host = "db1", port = 5432 }]

[pools.replicas]
backends = [{ host = "db2", port = 5432 }]

[routing]
read_write_split = true
read_pool = "replicas"
write_pool = "primary"
"#;

fn router() -> Router {
    let config = match Config::parse(CONFIG, "bench.toml") {
        Ok(c) => c,
        Err(e) => panic!("bench config: {e}"),
    };
    match RuleSet::build(&config, &[], &[]) {
        Ok(rules) => Router::new(Arc::new(rules), Catalogs::builtin()),
        Err(e) => panic!("bench rules: {e}"),
    }
}

fn fingerprint_throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("fingerprint");
    for (name, set, dialect) in [
        ("pgbench", PGBENCH, Dialect::Postgres),
        ("sysbench", SYSBENCH, Dialect::MySql),
    ] {
        let bytes: usize = set.iter().map(|s| s.len()).sum();
        group.throughput(Throughput::Bytes(bytes as u64));
        group.bench_function(name, |b| {
            b.iter(|| {
                for sql in set {
                    black_box(fingerprint(black_box(sql), dialect));
                }
            })
        });
    }
    group.finish();
}

fn cache_hit_decision(c: &mut Criterion) {
    let mut group = c.benchmark_group("route_cache_hit");
    let mut r = router();
    for (name, sql, protocol) in [
        ("pgbench_select", PGBENCH[0], Protocol::Postgres),
        ("pgbench_update", PGBENCH[1], Protocol::Postgres),
        ("sysbench_point_select", SYSBENCH[0], Protocol::MySql),
        ("sysbench_range_order", SYSBENCH[3], Protocol::MySql),
    ] {
        let input = RouteInput::new(sql, protocol, "app", "app");
        r.route(&input);
        group.bench_function(name, |b| b.iter(|| black_box(r.route(black_box(&input)))));
    }
    // The same statement's fingerprint alone: the part of a hit that is not the router's.
    let dialect = Dialect::Postgres;
    group.bench_function("pgbench_select_fingerprint_only", |b| {
        b.iter(|| black_box(fingerprint(black_box(PGBENCH[0]), dialect)))
    });
    group.finish();
}

fn analysis_on_miss(c: &mut Criterion) {
    let mut group = c.benchmark_group("analysis_miss");
    let pg = FunctionCatalog::builtin(Dialect::Postgres);
    let my = FunctionCatalog::builtin(Dialect::MySql);
    group.bench_function("pgbench_select", |b| {
        b.iter(|| black_box(analyze(black_box(PGBENCH[0]), Dialect::Postgres, &pg)))
    });
    group.bench_function("pgbench_insert", |b| {
        b.iter(|| black_box(analyze(black_box(PGBENCH[4]), Dialect::Postgres, &pg)))
    });
    group.bench_function("sysbench_range_order", |b| {
        b.iter(|| black_box(analyze(black_box(SYSBENCH[3]), Dialect::MySql, &my)))
    });
    let r = router();
    let input = RouteInput::new(PGBENCH[0], Protocol::Postgres, "app", "app");
    // `explain` is the full chain from a fresh analysis: what a miss costs end to end.
    group.bench_function("route_miss_pgbench_select", |b| {
        b.iter(|| black_box(r.explain(black_box(&input))))
    });
    group.finish();
}

criterion_group!(
    benches,
    fingerprint_throughput,
    cache_hit_decision,
    analysis_on_miss
);
criterion_main!(benches);
