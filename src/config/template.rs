//! `[pool_template]` (#36): what a client naming a database no pool serves gets. Without it
//! such a client is refused; with it, a PostgreSQL client gets a pool made on demand for that
//! database as a copy of the named pool (same backends, credentials, mode and limits), and a
//! MySQL client gets the named pool with that schema selected (a MySQL connection changes
//! schema with `COM_INIT_DB`, so no pool of its own is needed).

use std::num::NonZeroU32;

use super::check::Checker;
use super::raw::RawPoolTemplate;

/// Default `max_pools`.
const DEFAULT_MAX_POOLS: u32 = 64;
/// Largest `max_pools`: each pool made may hold its own `max_connections` per backend.
const MAX_MAX_POOLS: i64 = 10_000;

/// `[pool_template]`.
#[derive(Debug, Clone, PartialEq)]
pub struct PoolTemplate {
    /// The pool a PostgreSQL client's unknown database gets a copy of; `None`: refused.
    pub postgres: Option<String>,
    /// The pool a MySQL client's unknown database is selected on; `None`: refused.
    pub mysql: Option<String>,
    /// Pools the PostgreSQL template may have made at once, whole process; a further database
    /// is refused (53300) until one of them has been unused for its `idle_timeout`.
    pub max_pools: NonZeroU32,
}

impl Default for PoolTemplate {
    fn default() -> Self {
        PoolTemplate {
            postgres: None,
            mysql: None,
            max_pools: NonZeroU32::new(DEFAULT_MAX_POOLS).unwrap_or(NonZeroU32::MIN),
        }
    }
}

/// Converts `[pool_template]`; `pools` are the configured pool names (the template must be one).
pub(crate) fn template(ck: &mut Checker<'_>, raw: &RawPoolTemplate, pools: &[super::Pool]) -> PoolTemplate {
    let mut name = |value: &Option<super::raw::Sp<String>>, path: &str| {
        let value = value.as_ref()?;
        let exists = pools.binary_search_by(|p| p.name.as_str().cmp(value.get_ref())).is_ok();
        if !exists {
            ck.report_at(value, path, format!("no pool named \"{}\"", value.get_ref()));
            return None;
        }
        Some(value.get_ref().clone())
    };
    let postgres = name(&raw.postgres, "pool_template.postgres");
    let mysql = name(&raw.mysql, "pool_template.mysql");
    let max = ck.int_in(&raw.max_pools, "pool_template.max_pools", 1, MAX_MAX_POOLS);
    let max_pools = max
        .and_then(|n| u32::try_from(n).ok())
        .and_then(NonZeroU32::new)
        .unwrap_or_else(|| PoolTemplate::default().max_pools);
    PoolTemplate { postgres, mysql, max_pools }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;

    const BASE: &str = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\n\
                        backends = [{ host = \"127.0.0.1\", port = 5432 }]\n\n[routing]\ndefault_pool = \"main\"\n";

    #[test]
    fn the_template_must_be_a_configured_pool() {
        let err =
            Config::parse(&format!("{BASE}[pool_template]\npostgres = \"nope\"\n"), "t.toml").expect_err("unknown");
        let issue = &err.issues[0];
        assert_eq!((issue.path.as_str(), issue.message.as_str()), ("pool_template.postgres", "no pool named \"nope\""));
        let ok = Config::parse(&format!("{BASE}[pool_template]\npostgres = \"main\"\nmysql = \"main\"\n"), "t.toml");
        let ok = ok.expect("valid");
        assert_eq!(ok.template_pool(crate::config::Protocol::Postgres).map(|p| p.name.as_str()), Some("main"));
        assert_eq!(ok.pool_template.max_pools.get(), 64, "default");
    }

    #[test]
    fn max_pools_is_bounded() {
        for bad in ["0", "10001"] {
            let text = format!("{BASE}[pool_template]\nmax_pools = {bad}\n");
            let err = Config::parse(&text, "t.toml").expect_err("out of range");
            assert_eq!(err.issues[0].path, "pool_template.max_pools", "{bad}");
        }
    }
}
