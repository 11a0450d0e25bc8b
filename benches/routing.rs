//! Routing hot paths on the pgbench and sysbench statements: lexer+fingerprint throughput, the
//! cache-hit decision (the common case, target well under 1 µs) and the analysis a miss costs,
//! including what hostile shapes cost next to an ordinary statement of the same length.
//! Run: `cargo bench --bench routing` (or `-- --test` to check it runs once).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use querypilot::config::{Config, Protocol};
use querypilot::routing::causal::token_use;
use querypilot::routing::{Catalogs, RouteInput, Router, RuleSet};
use querypilot::sql::analyze::{analyze, opens_transaction, session_effects};
use querypilot::sql::fingerprint::{fingerprint, fingerprint_ast};
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
        Ok(rules) => Router::new(rules.for_core(), Catalogs::builtin()),
        Err(e) => panic!("bench rules: {e}"),
    }
}

fn fingerprint_throughput(c: &mut Criterion) {
    let mut group = c.benchmark_group("fingerprint");
    for (name, set, dialect) in [("pgbench", PGBENCH, Dialect::Postgres), ("sysbench", SYSBENCH, Dialect::MySql)] {
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

/// The text prefilters every statement passes after its routing decision (#39): its session
/// effects (none for these) and the transaction-opener check, which a pool asks twice.
fn effect_prefilters(c: &mut Criterion) {
    let mut group = c.benchmark_group("effect_prefilter");
    for (name, set, dialect) in [("pgbench", PGBENCH, Dialect::Postgres), ("sysbench", SYSBENCH, Dialect::MySql)] {
        group.bench_function(name, |b| {
            b.iter(|| {
                for sql in set {
                    black_box(session_effects(black_box(sql), dialect));
                    black_box(opens_transaction(black_box(sql), dialect));
                }
            })
        });
    }
    // A parameterized text sent again (an unnamed Parse): scanned, and as the router keeps its
    // effects beside its remembered key once it routed it (#39).
    let sql = "SELECT abalance FROM pgbench_accounts WHERE aid = $1";
    group.bench_function("pgbench_parameterized_scan", |b| {
        b.iter(|| black_box(session_effects(black_box(sql), Dialect::Postgres)))
    });
    let mut r = router();
    r.route(&RouteInput::new(sql, Protocol::Postgres, "app", "app"));
    group.bench_function("pgbench_parameterized_kept", |b| {
        b.iter(|| black_box(r.session_effects(black_box(sql), Protocol::Postgres)))
    });
    // What a PostgreSQL session asks of each simple-protocol text (literals in it, so the memo
    // keeps none): its causal-token use, its opener and its effects, as three separate scans and
    // as the router answers them from one pass over the text (#39).
    group.bench_function("pgbench_three_asks_separate", |b| {
        b.iter(|| {
            for sql in PGBENCH {
                black_box(token_use(black_box(sql), Dialect::Postgres));
                black_box(opens_transaction(black_box(sql), Dialect::Postgres));
                black_box(session_effects(black_box(sql), Dialect::Postgres));
            }
        })
    });
    group.bench_function("pgbench_three_asks_router", |b| {
        b.iter(|| {
            for sql in PGBENCH {
                black_box(r.token_use(black_box(sql), Protocol::Postgres));
                black_box(r.opens_transaction(black_box(sql), Protocol::Postgres));
                black_box(r.session_effects(black_box(sql), Protocol::Postgres));
            }
        })
    });
    group.finish();
}

fn cache_hit_decision(c: &mut Criterion) {
    let mut group = c.benchmark_group("route_cache_hit");
    let mut r = router();
    for (name, sql, protocol) in [
        ("pgbench_select", PGBENCH[0], Protocol::Postgres),
        ("pgbench_update", PGBENCH[1], Protocol::Postgres),
        // The extended protocol's text: no literal, so the router's key memo answers (#39).
        ("pgbench_select_parameterized", "SELECT abalance FROM pgbench_accounts WHERE aid = $1", Protocol::Postgres),
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
    group.bench_function("route_miss_pgbench_select", |b| b.iter(|| black_box(r.explain(black_box(&input)))));
    group.finish();
}

/// Shapes sqlparser backtracks on (exponential in their nesting without `sql::parse`'s budget)
/// next to a flat statement of the same list: the ratio is what a hostile statement costs a core.
fn analysis_of_hostile_shapes(c: &mut Criterion) {
    let mut group = c.benchmark_group("analysis_hostile");
    group.sample_size(10);
    let pg = FunctionCatalog::builtin(Dialect::Postgres);
    let list = "x, ".repeat(5_000);
    let cases = [
        ("flat_list_5000", format!("SELECT {list}1 FROM t")),
        ("nested_calls_10_list_5000", format!("SELECT {}{list}1{} FROM t", "abs(".repeat(10), ")".repeat(10))),
        ("unbalanced_parens_10_list_5000", format!("SELECT {}{list}", "(a ".repeat(10))),
        ("unbalanced_calls_5_list_5000", format!("SELECT {}{list}", "(t(".repeat(5))),
        ("nested_casts_10", format!("SELECT {}1", "CAST(".repeat(10))),
    ];
    for (name, sql) in &cases {
        group.bench_function(*name, |b| b.iter(|| black_box(analyze(black_box(sql), Dialect::Postgres, &pg))));
    }
    // The sql_analyze fuzz campaign's slow input, through the AST fingerprint it stalled.
    let fuzzed =
        String::from_utf8_lossy(include_bytes!("../fuzz/regressions/sql_analyze/slow-nested-parens-debug-build"))
            .into_owned();
    group.bench_function("fuzzed_parens_fingerprint_ast", |b| {
        b.iter(|| black_box(fingerprint_ast(black_box(&fuzzed), Dialect::Postgres)))
    });
    group.finish();
}

criterion_group!(
    benches,
    fingerprint_throughput,
    effect_prefilters,
    cache_hit_decision,
    analysis_on_miss,
    analysis_of_hostile_shapes
);
criterion_main!(benches);
