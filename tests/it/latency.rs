//! Issue #41, latency you can see: statements of a fast and a slow shape through the router on
//! both wires (real PostgreSQL and MariaDB), then the pool's `sqp_statement_duration_seconds`
//! histogram on `/metrics` and the shapes' p50/p99 in `GET /api/stats/digests`.

use std::time::Duration;

use mysql::prelude::Queryable;
use serde_json::Value;

use crate::admin::{addrs, http, sum};
use crate::mysql_session::my_pool;
use crate::router::{pg_pool, Router};
use crate::support::{dbs, eventually};

/// Statements of the fast shape, and of the slow one (each sleeps 0.2 s in the server).
const FAST: usize = 20;
const SLOW: usize = 3;

/// One router, two cores: a PostgreSQL listener on pool `pgmain` (first) and a MySQL listener
/// on pool `mymain` (second), metrics and the admin API on.
fn router() -> Router {
    let pg = pg_pool("pgmain", dbs().pg.primary_port, "transaction", 2);
    let my = my_pool("mymain", "transaction", 2);
    Router::start(&format!(
        "[general]\ncores = [0, 1]\nshutdown_drain = \"2s\"\n\n\
         [[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         [[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n{pg}\n{my}\n\
         [routing]\ndefault_pool = \"pgmain\"\nmysql_default_pool = \"mymain\"\n\n\
         [metrics]\nenabled = true\nbind = \"127.0.0.1:0\"\n"
    ))
}

/// The digest of `protocol` whose normalized text names `marker`.
fn digest(router: &Router, protocol: &str, marker: &str) -> Option<Value> {
    let (_, admin) = addrs(router);
    let v = http(admin, "GET", "/api/stats/digests?limit=1000", &[]).json();
    v["digests"]
        .as_array()?
        .iter()
        .find(|d| d["protocol"] == protocol && d["normalized"].to_string().contains(marker))
        .cloned()
}

/// Checks the pool's histogram and both shapes' percentiles once every statement is recorded.
fn check(router: &Router, protocol: &str, pool: &str) {
    let calls = |marker| digest(router, protocol, marker).and_then(|d| d["calls"].as_u64());
    eventually(Duration::from_secs(10), "every statement recorded", || {
        calls("qp_fast") == Some(FAST as u64) && calls("qp_slow") == Some(SLOW as u64)
    });
    let (metrics, _) = addrs(router);
    let text = http(metrics, "GET", "/metrics", &[]).body;
    let pool = format!("pool=\"{pool}\"");
    let series = |name: &str, le: Option<&str>| {
        let le = le.map(|b| format!("le=\"{b}\""));
        let filters: Vec<&str> = [Some(pool.as_str()), le.as_deref()].into_iter().flatten().collect();
        let (v, n) = sum(&text, name, &filters);
        assert!(n > 0, "{name} {filters:?} missing:\n{text}");
        v
    };
    let count = series("sqp_statement_duration_seconds_count", None);
    let bucket = |le| series("sqp_statement_duration_seconds_bucket", Some(le));
    assert_eq!(bucket("+Inf"), count, "the +Inf bucket holds every observation");
    assert!(count >= (FAST + SLOW) as f64, "{count} statements timed on {pool}");
    // The slow statements sleep 0.2 s: above the 0.1 s bound, so in the (0.1, 0.25] bucket, or
    // (on a loaded machine) a later one; 1 s leaves room without letting them go unseen.
    assert!(count - bucket("0.1") >= SLOW as f64, "the slow statements are above 0.1 s:\n{text}");
    assert!(bucket("1.0") - bucket("0.1") >= SLOW as f64, "the slow statements are between 0.1 s and 1 s:\n{text}");
    assert!(series("sqp_statement_duration_seconds_sum", None) >= 0.2 * SLOW as f64);

    let ms = |marker, field: &str| digest(router, protocol, marker).and_then(|d| d[field].as_f64()).expect(field);
    for field in ["p50_ms", "p99_ms"] {
        assert!(ms("qp_slow", field) >= 200.0, "{protocol} slow {field}: {}", ms("qp_slow", field));
        assert!(ms("qp_slow", field) <= ms("qp_slow", "max_ms"), "never above the slowest");
    }
    assert!(ms("qp_fast", "p50_ms") < 100.0, "{protocol} fast p50: {}", ms("qp_fast", "p50_ms"));
    assert!(ms("qp_fast", "p99_ms") < 200.0, "{protocol} fast p99: {}", ms("qp_fast", "p99_ms"));
}

#[test]
fn statement_times_reach_the_pool_histogram_and_digest_percentiles_on_both_wires() {
    let router = router();
    let mut pg = router.pg(&dbs().pg.database);
    for i in 0..FAST {
        let row = pg.query_one("SELECT $1::int AS qp_fast", &[&(i as i32)]).expect("fast pg statement");
        assert_eq!(row.get::<_, i32>(0), i as i32);
    }
    for _ in 0..SLOW {
        pg.simple_query("SELECT pg_sleep(0.2) AS qp_slow").expect("slow pg statement");
    }
    check(&router, "postgres", "pgmain");

    let my_env = &dbs().my;
    let opts = my_env.opts(router.listen[1].port(), &my_env.user, &my_env.password);
    let mut my = mysql::Conn::new(opts).expect("connect through the MySQL listener");
    for i in 0..FAST {
        let n: Option<u64> = my.query_first(format!("SELECT {i} AS qp_fast")).expect("fast mysql statement");
        assert_eq!(n, Some(i as u64));
    }
    for _ in 0..SLOW {
        my.query_drop("SELECT SLEEP(0.2) AS qp_slow").expect("slow mysql statement");
    }
    check(&router, "mysql", "mymain");
}
