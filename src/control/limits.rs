//! The shape limiter's views (#41): `GET /api/limits` (each pool's limited shapes merged over
//! cores) and the dry-run's answer to "would this statement be held back now".
//!
//! Limits are per core (`pool::limit`): a merged limit is the sum of the cores' limits, and a
//! statement would wait when the core it lands on has its shape at its limit, which the dry-run
//! reports when any core does.

use serde::Serialize;

use super::msg::CoreReport;
use crate::config::Config;
use crate::metrics::LimitRow;

/// `GET /api/limits`.
#[derive(Debug, Clone, Serialize)]
pub struct LimitsView {
    /// Cores whose figures are included.
    pub cores_reporting: usize,
    /// Per pool with a limiter configured.
    pub pools: Vec<PoolLimitsView>,
}

/// One pool's limiter.
#[derive(Debug, Clone, Serialize)]
pub struct PoolLimitsView {
    /// The pool.
    pub pool: String,
    /// `adaptive_limit`.
    pub adaptive: bool,
    /// `fair_share`.
    pub fair_share: bool,
    /// `limit_wait`, milliseconds.
    pub limit_wait_ms: u64,
    /// Statements refused by a limit or the fair share since start.
    pub rejections_total: u64,
    /// The shapes followed, busiest first.
    pub shapes: Vec<ShapeLimitView>,
}

/// One shape's limit and load, merged over cores.
#[derive(Debug, Clone, Serialize)]
pub struct ShapeLimitView {
    /// The shape's fingerprint, as `GET /api/stats/digests` shows it.
    pub fingerprint_hex: String,
    /// The start of a statement of the shape.
    pub statement: String,
    /// `max_concurrent` (fixed) or `adaptive` (learned).
    pub kind: &'static str,
    /// The limit, summed over cores.
    pub limit: u32,
    /// Permits held now.
    pub in_use: u32,
    /// Statements waiting for a permit now.
    pub queued: u32,
    /// Statements refused after `limit_wait`.
    pub rejected: u64,
}

impl From<&LimitRow> for ShapeLimitView {
    fn from(r: &LimitRow) -> Self {
        ShapeLimitView {
            fingerprint_hex: format!("{:016x}", r.digest),
            statement: r.text.clone(),
            kind: if r.fixed { "max_concurrent" } else { "adaptive" },
            limit: r.limit,
            in_use: r.in_use,
            queued: r.queued,
            rejected: r.rejected,
        }
    }
}

/// The dry-run's view of the shape limiter for the statement's pool.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LimitTest {
    /// `max_concurrent`, `adaptive`, or `none` (the pool limits nothing of this shape).
    pub kind: &'static str,
    /// The limit summed over cores; `null` when the shape is not limited (yet).
    pub limit: Option<u32>,
    /// Permits of the shape held now, over cores.
    pub in_use: u32,
    /// Statements of the shape waiting now, over cores.
    pub queued: u32,
    /// Whether a statement of the shape sent now would wait for its turn (on some core).
    pub would_wait: bool,
}

/// Every pool with a limiter, from the cores' reports.
pub fn limits_view(config: &Config, reports: &[CoreReport]) -> LimitsView {
    let pools = config
        .pools
        .iter()
        .filter(|p| p.shape_limits.any())
        .map(|p| {
            let mut rows = Vec::new();
            let mut rejections_total = 0;
            for snap in reports.iter().flat_map(|r| r.counters.pools.iter().filter(|s| s.name == p.name)) {
                crate::metrics::merge_limit_rows(&mut rows, &snap.limits);
                rejections_total += snap.limit_rejections_total;
            }
            rows.sort_by(|a, b| (b.in_use + b.queued).cmp(&(a.in_use + a.queued)).then(a.digest.cmp(&b.digest)));
            PoolLimitsView {
                pool: p.name.clone(),
                adaptive: p.shape_limits.adaptive,
                fair_share: p.shape_limits.fair_share,
                limit_wait_ms: u64::try_from(p.shape_limits.wait.as_millis()).unwrap_or(u64::MAX),
                rejections_total,
                shapes: rows.iter().map(ShapeLimitView::from).collect(),
            }
        })
        .collect();
    LimitsView { cores_reporting: reports.len(), pools }
}

/// What the limiter of `pool` would do now with a statement of shape `digest`; `None` when the
/// pool has no limiter.
pub fn limit_test(config: &Config, reports: &[CoreReport], pool: &str, digest: u64) -> Option<LimitTest> {
    let limits = &config.pool(pool).filter(|p| p.shape_limits.any())?.shape_limits;
    let fixed = limits.max_concurrent.get(&digest).map(|n| n.get());
    let rows: Vec<&LimitRow> = reports
        .iter()
        .flat_map(|r| r.counters.pools.iter().filter(|s| s.name == pool))
        .filter_map(|s| s.limits.iter().find(|l| l.digest == digest))
        .collect();
    let kind = match (fixed, limits.adaptive) {
        (Some(_), _) => "max_concurrent",
        (None, true) => "adaptive",
        (None, false) => "none",
    };
    let known = !rows.is_empty();
    Some(LimitTest {
        kind,
        limit: known.then(|| rows.iter().map(|l| l.limit).sum()).or(fixed),
        in_use: rows.iter().map(|l| l.in_use).sum(),
        queued: rows.iter().map(|l| l.queued).sum(),
        would_wait: rows.iter().any(|l| l.queued > 0 || l.in_use >= l.limit),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::control::msg::{CoreId, RulesVersion};
    use crate::metrics::{CounterSnapshot, PoolSnapshot};

    fn config() -> Config {
        let text = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\nmode = \"transaction\"\n\
                    backends = [{ host = \"db\", port = 5432 }]\n[pools.main.max_concurrent]\n\"00000000000000ab\" = 1\n\n\
                    [pools.other]\nbackends = [{ host = \"db\", port = 5432 }]\n\n[routing]\ndefault_pool = \"main\"\n";
        Config::parse(text, "t.toml").expect("config")
    }

    fn report(core: u16, in_use: u32) -> CoreReport {
        let row =
            LimitRow { digest: 0xab, text: "SELECT 1".into(), limit: 1, fixed: true, in_use, ..LimitRow::default() };
        let pool =
            PoolSnapshot { name: "main".into(), limits: vec![row], limit_rejections_total: 3, ..Default::default() };
        CoreReport {
            core: CoreId(core),
            version: RulesVersion(1),
            counters: CounterSnapshot { pools: vec![pool], ..Default::default() },
            digests: Default::default(),
        }
    }

    #[test]
    fn the_view_merges_the_cores_and_lists_only_pools_with_a_limiter() {
        let view = limits_view(&config(), &[report(0, 1), report(1, 0)]);
        assert_eq!(view.pools.len(), 1);
        let main = &view.pools[0];
        assert_eq!((main.pool.as_str(), main.rejections_total), ("main", 6));
        assert_eq!(main.shapes.len(), 1);
        assert_eq!((main.shapes[0].limit, main.shapes[0].in_use), (2, 1));
        assert_eq!(main.shapes[0].fingerprint_hex, "00000000000000ab");
    }

    #[test]
    fn the_dry_run_says_whether_a_statement_would_wait() {
        let config = config();
        let busy = limit_test(&config, &[report(0, 1), report(1, 0)], "main", 0xab);
        assert_eq!(busy.map(|t| (t.kind, t.would_wait)), Some(("max_concurrent", true)));
        let idle = limit_test(&config, &[report(0, 0)], "main", 0xab);
        assert_eq!(idle.map(|t| t.would_wait), Some(false));
        // A shape no core has seen: its configured limit, nothing waiting.
        let unseen = limit_test(&config, &[], "main", 0xab);
        assert_eq!(unseen.map(|t| (t.limit, t.would_wait)), Some((Some(1), false)));
        assert_eq!(limit_test(&config, &[], "main", 0xcd).map(|t| t.kind), Some("none"));
        assert_eq!(limit_test(&config, &[], "other", 0xab), None);
    }
}
