//! The tables the console's `SHOW` commands answer with, built from the configuration and the
//! cores' merged counters. Column names and types follow PgBouncer's where the concept is the
//! same, so its exporters and dashboards read them; figures the router does not keep (bytes per
//! pool, cancel requests, query time per pool) are 0, as tuning.md lists.

use super::command::Show;
use crate::config::Config;
use crate::metrics::{CounterSnapshot, PoolSnapshot};

/// A column's PostgreSQL type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// `text`.
    Text,
    /// `int8`.
    Int8,
}

impl Kind {
    /// The type's OID.
    pub fn oid(self) -> u32 {
        match self {
            Kind::Text => 25,
            Kind::Int8 => 20,
        }
    }
}

/// One value of a row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cell {
    /// A text value.
    Text(String),
    /// An integer value.
    Int(u64),
    /// SQL NULL.
    Null,
}

impl Cell {
    /// The value in PostgreSQL's text format; `None` for NULL.
    pub fn text(&self) -> Option<String> {
        match self {
            Cell::Text(s) => Some(s.clone()),
            Cell::Int(n) => Some(n.to_string()),
            Cell::Null => None,
        }
    }
}

/// A result set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Table {
    /// Column names and types.
    pub columns: Vec<(&'static str, Kind)>,
    /// Rows, each with one cell per column.
    pub rows: Vec<Vec<Cell>>,
}

impl Table {
    fn new(columns: &[(&'static str, Kind)]) -> Self {
        Self { columns: columns.to_vec(), rows: Vec::new() }
    }
}

fn text(s: impl Into<String>) -> Cell {
    Cell::Text(s.into())
}

use Kind::{Int8 as I, Text as T};

/// The answer to `SHOW what`. `memory` is the process's resident and virtual size in bytes.
pub fn table(what: Show, config: &Config, merged: &CounterSnapshot, memory: (u64, u64)) -> Table {
    match what {
        Show::Pools => pools(config, merged),
        Show::Stats => stats(merged),
        Show::StatsTotals => stats_totals(merged),
        Show::StatsAverages => stats_averages(merged),
        Show::Databases => databases(config, merged),
        Show::Config => config_rows(config),
        Show::Lists => lists(config, merged),
        Show::Version => {
            let mut t = Table::new(&[("version", T)]);
            t.rows.push(vec![text(format!("QueryPilot Router {}", env!("CARGO_PKG_VERSION")))]);
            t
        }
        Show::Mem => {
            let mut t = Table::new(&[("name", T), ("bytes", I)]);
            t.rows.push(vec![text("resident"), Cell::Int(memory.0)]);
            t.rows.push(vec![text("virtual"), Cell::Int(memory.1)]);
            t
        }
        Show::Servers => servers(merged),
        Show::Clients => clients(merged),
        Show::Users => users(config),
        Show::Limits => limits(merged),
    }
}

/// #41: the shapes each pool's limiter follows, merged over cores (a limit is per core, so the
/// merged one is the sum of the cores' limits).
fn limits(merged: &CounterSnapshot) -> Table {
    let mut t = Table::new(&[
        ("pool", T),
        ("fingerprint_hex", T),
        ("statement", T),
        ("kind", T),
        ("limit", I),
        ("in_use", I),
        ("queued", I),
        ("rejected", I),
    ]);
    for p in &merged.pools {
        for l in &p.limits {
            t.rows.push(vec![
                text(&p.name),
                text(format!("{:016x}", l.digest)),
                text(&l.text),
                text(if l.fixed { "max_concurrent" } else { "adaptive" }),
                Cell::Int(u64::from(l.limit)),
                Cell::Int(u64::from(l.in_use)),
                Cell::Int(u64::from(l.queued)),
                Cell::Int(l.rejected),
            ]);
        }
    }
    t
}

fn idle(p: &PoolSnapshot) -> u64 {
    p.backends.iter().map(|b| b.idle).sum()
}

fn pools(config: &Config, merged: &CounterSnapshot) -> Table {
    let mut t = Table::new(&[
        ("database", T),
        ("user", T),
        ("cl_active", I),
        ("cl_waiting", I),
        ("cl_active_cancel_req", I),
        ("cl_waiting_cancel_req", I),
        ("sv_active", I),
        ("sv_active_cancel", I),
        ("sv_being_canceled", I),
        ("sv_idle", I),
        ("sv_used", I),
        ("sv_tested", I),
        ("sv_login", I),
        ("maxwait", I),
        ("maxwait_us", I),
        ("pool_mode", T),
        ("statements", I),
        ("acquire_timeouts", I),
    ]);
    for p in &merged.pools {
        let cfg = config.pool(&p.name);
        let user = cfg.and_then(|c| c.username.clone()).unwrap_or_default();
        let mode = cfg.map_or("", |c| c.mode.as_str());
        let active = p.active();
        let zero = Cell::Int(0);
        t.rows.push(vec![
            text(&p.name),
            text(user),
            Cell::Int(active),
            Cell::Int(p.queue_depth),
            zero.clone(),
            zero.clone(),
            Cell::Int(active),
            zero.clone(),
            zero.clone(),
            Cell::Int(idle(p)),
            zero.clone(),
            zero.clone(),
            zero.clone(),
            zero.clone(),
            zero,
            text(mode),
            Cell::Int(p.statements_total),
            Cell::Int(p.timeouts_total),
        ]);
    }
    t
}

/// Per pool: transactions (checkouts), queries (statements), bytes, times, waits.
fn totals(p: &PoolSnapshot) -> [u64; 7] {
    [p.acquires_total, p.statements_total, 0, 0, 0, 0, p.wait.sum_micros]
}

fn averages(p: &PoolSnapshot) -> [u64; 7] {
    let per = |n: u64, over: u64| n.checked_div(over).unwrap_or(0);
    // Since start, not per stats period: the router keeps no periods.
    [0, 0, 0, 0, 0, 0, per(p.wait.sum_micros, p.acquires_total)]
}

fn stats(merged: &CounterSnapshot) -> Table {
    let mut t = Table::new(&[
        ("database", T),
        ("total_xact_count", I),
        ("total_query_count", I),
        ("total_received", I),
        ("total_sent", I),
        ("total_xact_time", I),
        ("total_query_time", I),
        ("total_wait_time", I),
        ("avg_xact_count", I),
        ("avg_query_count", I),
        ("avg_recv", I),
        ("avg_sent", I),
        ("avg_xact_time", I),
        ("avg_query_time", I),
        ("avg_wait_time", I),
        // PgBouncer before 1.8 called total_query_count this; exporters of that era read it.
        ("total_requests", I),
    ]);
    for p in &merged.pools {
        let mut row = vec![text(&p.name)];
        row.extend(totals(p).into_iter().chain(averages(p)).map(Cell::Int));
        row.push(Cell::Int(p.statements_total));
        t.rows.push(row);
    }
    t
}

const PERIOD_COLUMNS: [(&str, Kind); 8] = [
    ("database", T),
    ("xact_count", I),
    ("query_count", I),
    ("bytes_received", I),
    ("bytes_sent", I),
    ("xact_time", I),
    ("query_time", I),
    ("wait_time", I),
];

fn stats_totals(merged: &CounterSnapshot) -> Table {
    let mut t = Table::new(&PERIOD_COLUMNS);
    for p in &merged.pools {
        t.rows.push(std::iter::once(text(&p.name)).chain(totals(p).map(Cell::Int)).collect());
    }
    t
}

fn stats_averages(merged: &CounterSnapshot) -> Table {
    let mut t = Table::new(&PERIOD_COLUMNS);
    for p in &merged.pools {
        t.rows.push(std::iter::once(text(&p.name)).chain(averages(p).map(Cell::Int)).collect());
    }
    t
}

fn databases(config: &Config, merged: &CounterSnapshot) -> Table {
    let mut t = Table::new(&[
        ("name", T),
        ("host", T),
        ("port", I),
        ("database", T),
        ("force_user", T),
        ("pool_size", I),
        ("min_pool_size", I),
        ("reserve_pool", I),
        ("pool_mode", T),
        ("max_connections", I),
        ("current_connections", I),
        ("paused", I),
        ("disabled", I),
        ("protocol", T),
        ("backends", I),
    ]);
    for pool in &config.pools {
        let first = pool.backends.first();
        let snap = merged.pools.iter().find(|p| p.name == pool.name);
        let current = snap.map_or(0, |p| p.active() + idle(p));
        let max = u64::from(pool.limits.max_connections.get());
        t.rows.push(vec![
            text(&pool.name),
            first.map_or(Cell::Null, |b| text(&b.host)),
            first.map_or(Cell::Null, |b| Cell::Int(u64::from(b.port))),
            text(&pool.database),
            pool.username.clone().map_or(Cell::Null, text),
            Cell::Int(max),
            Cell::Int(u64::from(pool.limits.min_connections)),
            Cell::Int(0),
            text(pool.mode.as_str()),
            Cell::Int(max * pool.backends.len() as u64),
            Cell::Int(current),
            Cell::Int(0),
            Cell::Int(0),
            pool.protocol.map_or_else(|| text("client's"), |p| text(p.as_str())),
            Cell::Int(pool.backends.len() as u64),
        ]);
    }
    t
}

/// Every key of the configuration as the file would spell it, secrets redacted.
fn config_rows(config: &Config) -> Table {
    let mut t = Table::new(&[("key", T), ("value", T)]);
    let rendered: toml::Table = toml::from_str(&config.redacted_toml()).unwrap_or_default();
    flatten("", &toml::Value::Table(rendered), &mut t.rows);
    t
}

fn flatten(prefix: &str, value: &toml::Value, rows: &mut Vec<Vec<Cell>>) {
    match value {
        toml::Value::Table(table) => {
            for (k, v) in table {
                let key = if prefix.is_empty() { k.clone() } else { format!("{prefix}.{k}") };
                flatten(&key, v, rows);
            }
        }
        toml::Value::String(s) => rows.push(vec![text(prefix), text(s)]),
        other => rows.push(vec![text(prefix), text(other.to_string())]),
    }
}

fn lists(config: &Config, merged: &CounterSnapshot) -> Table {
    let mut t = Table::new(&[("list", T), ("items", I)]);
    let users = users(config).rows.len() as u64;
    let (idle_servers, used_servers) = merged.pools.iter().fold((0, 0), |(i, u), p| (i + idle(p), u + p.active()));
    let rows: [(&str, u64); 12] = [
        ("databases", config.pools.len() as u64),
        ("users", users),
        ("pools", merged.pools.len() as u64),
        ("free_clients", 0),
        ("used_clients", merged.sessions_active),
        ("login_clients", 0),
        ("free_servers", idle_servers),
        ("used_servers", used_servers),
        ("dns_names", 0),
        ("dns_zones", 0),
        ("dns_queries", 0),
        ("dns_pending", 0),
    ];
    for (name, n) in rows {
        t.rows.push(vec![text(name), Cell::Int(n)]);
    }
    t
}

fn servers(merged: &CounterSnapshot) -> Table {
    let mut t = Table::new(&[
        ("database", T),
        ("backend", T),
        ("active", I),
        ("idle", I),
        ("healthy", I),
        ("lag_us", I),
        ("connect_failures", I),
    ]);
    for p in &merged.pools {
        for b in &p.backends {
            let health = b.health.as_ref();
            t.rows.push(vec![
                text(&p.name),
                text(&b.label),
                Cell::Int(b.active),
                Cell::Int(b.idle),
                health.map_or(Cell::Null, |h| Cell::Int(u64::from(h.healthy))),
                health.and_then(|h| h.lag_micros).map_or(Cell::Null, Cell::Int),
                Cell::Int(b.connect_failures_total),
            ]);
        }
    }
    t
}

fn clients(merged: &CounterSnapshot) -> Table {
    let mut t = Table::new(&[("listener", T), ("active", I), ("idle", I), ("refused", I)]);
    for c in &merged.clients {
        t.rows.push(vec![text(&c.listener), Cell::Int(c.active), Cell::Int(c.idle), Cell::Int(c.refused_total)]);
    }
    t
}

fn users(config: &Config) -> Table {
    let mut t = Table::new(&[("name", T), ("pool_mode", T)]);
    let mut seen = std::collections::BTreeSet::new();
    for pool in &config.pools {
        if let Some(user) = &pool.username {
            if seen.insert(user.clone()) {
                t.rows.push(vec![text(user), text(pool.mode.as_str())]);
            }
        }
    }
    for user in config.console.admin_users.iter().chain(&config.console.stats_users) {
        if seen.insert(user.clone()) {
            t.rows.push(vec![text(user), Cell::Null]);
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::BackendSnapshot;

    fn config() -> Config {
        let text = "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n[pools.main]\nusername = \"u\"\n\
                    password = \"p\"\nmax_connections = 4\nbackends = [{ host = \"db1\", port = 5433 }]\n\n\
                    [routing]\ndefault_pool = \"main\"\n\n[console]\nadmin_users = [\"boss\"]\n\
                    passwords = { boss = \"secret\" }\n";
        Config::parse(text, "t.toml").expect("config")
    }

    fn merged() -> CounterSnapshot {
        let mut pool =
            PoolSnapshot { name: "main".into(), statements_total: 12, acquires_total: 4, ..Default::default() };
        pool.queue_depth = 2;
        pool.wait.sum_micros = 800;
        pool.backends.push(BackendSnapshot { label: "db1:5433".into(), idle: 1, active: 3, ..Default::default() });
        pool.limits.push(crate::metrics::LimitRow {
            digest: 0xab,
            text: "SELECT count(*) FROM t".into(),
            limit: 2,
            fixed: true,
            in_use: 2,
            queued: 5,
            rejected: 7,
        });
        CounterSnapshot { sessions_active: 5, pools: vec![pool], ..Default::default() }
    }

    fn column<'t>(t: &'t Table, name: &str) -> Vec<&'t Cell> {
        let i = t.columns.iter().position(|(c, _)| *c == name).unwrap_or_else(|| panic!("no column {name}"));
        t.rows.iter().map(|r| &r[i]).collect()
    }

    #[test]
    fn every_row_has_one_cell_per_column() {
        let (c, m) = (config(), merged());
        for what in [
            Show::Pools,
            Show::Stats,
            Show::StatsTotals,
            Show::StatsAverages,
            Show::Databases,
            Show::Config,
            Show::Lists,
            Show::Version,
            Show::Mem,
            Show::Servers,
            Show::Clients,
            Show::Users,
            Show::Limits,
        ] {
            let t = table(what, &c, &m, (1, 2));
            assert!(t.rows.iter().all(|r| r.len() == t.columns.len()), "{what:?}");
        }
    }

    #[test]
    fn pools_stats_and_lists_carry_the_counters() {
        let (c, m) = (config(), merged());
        let pools = table(Show::Pools, &c, &m, (0, 0));
        assert_eq!(column(&pools, "cl_active"), [&Cell::Int(3)]);
        assert_eq!(column(&pools, "cl_waiting"), [&Cell::Int(2)]);
        assert_eq!(column(&pools, "sv_idle"), [&Cell::Int(1)]);
        assert_eq!(column(&pools, "user"), [&text("u")]);
        assert_eq!(column(&pools, "pool_mode"), [&text("session")]);
        let stats = table(Show::Stats, &c, &m, (0, 0));
        assert_eq!(column(&stats, "total_query_count"), [&Cell::Int(12)]);
        assert_eq!(column(&stats, "total_requests"), [&Cell::Int(12)]);
        assert_eq!(column(&stats, "total_xact_count"), [&Cell::Int(4)]);
        assert_eq!(column(&stats, "avg_wait_time"), [&Cell::Int(200)]);
        let lists = table(Show::Lists, &c, &m, (0, 0));
        let items: Vec<(String, u64)> = lists
            .rows
            .iter()
            .map(|r| match (&r[0], &r[1]) {
                (Cell::Text(k), Cell::Int(v)) => (k.clone(), *v),
                other => panic!("{other:?}"),
            })
            .collect();
        assert!(items.contains(&("used_clients".into(), 5)));
        assert!(items.contains(&("used_servers".into(), 3)));
        assert!(items.contains(&("users".into(), 2)), "the pool user and the console user: {items:?}");
        let dbs = table(Show::Databases, &c, &m, (0, 0));
        assert_eq!(column(&dbs, "pool_size"), [&Cell::Int(4)]);
        assert_eq!(column(&dbs, "port"), [&Cell::Int(5433)]);
    }

    #[test]
    fn show_config_redacts_secrets() {
        let t = table(Show::Config, &config(), &merged(), (0, 0));
        let values: Vec<String> = t.rows.iter().filter_map(|r| r[1].text()).collect();
        assert!(!values.iter().any(|v| v.contains("secret") || v == "p"), "{values:?}");
        let keys: Vec<String> = t.rows.iter().filter_map(|r| r[0].text()).collect();
        assert!(keys.contains(&"console.passwords.boss".to_string()), "{keys:?}");
    }

    #[test]
    fn limits_show_each_limited_shape_of_each_pool() {
        let (c, m) = (config(), merged());
        let limits = table(Show::Limits, &c, &m, (0, 0));
        assert_eq!(column(&limits, "fingerprint_hex"), [&text("00000000000000ab")]);
        assert_eq!(column(&limits, "kind"), [&text("max_concurrent")]);
        assert_eq!(column(&limits, "queued"), [&Cell::Int(5)]);
        assert_eq!(column(&limits, "rejected"), [&Cell::Int(7)]);
    }
}
