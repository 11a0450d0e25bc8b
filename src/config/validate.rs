//! Checks that span sections: listeners against each other, every pool reference against
//! `[pools]`, routing against the listeners it must serve, and credentials against exposure.
//! Positions come from the raw file; values from the typed config built before.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;

use super::build::is_loopback;
use super::check::Checker;
use super::model::{Listener, RuleTarget};
use super::raw::{RawConfig, RawPool, Sp};
use super::value::{PoolRole, Protocol};
use super::Config;

/// Runs every cross-section check, reporting into `ck`.
pub(crate) fn cross_check(ck: &mut Checker<'_>, raw: &RawConfig, config: &Config) {
    listeners(ck, raw, config);
    pool_references(ck, raw, config);
    split(ck, raw);
    primaries_are_primary(ck, raw, config);
    routable(ck, raw, config);
    mysql_passthrough(ck, raw, config);
    postgres_local_infile(ck, raw, config);
    exposure(ck, raw, config);
}

/// The listeners whose protocol and bind were valid, with their raw entry, so a bad value is
/// reported once and not again by every check that reads it.
fn valid_listeners<'r>(
    raw: &'r RawConfig,
    config: &'r Config,
) -> impl Iterator<Item = (usize, &'r Listener, SocketAddr)> + 'r {
    raw.listeners.iter().zip(&config.listeners).enumerate().filter_map(|(i, (r, l))| {
        let r = r.get_ref();
        let bind = r.bind.get_ref().trim().parse::<SocketAddr>().ok()?;
        r.protocol.get_ref().parse::<Protocol>().ok()?;
        Some((i, l, bind))
    })
}

fn listeners(ck: &mut Checker<'_>, raw: &RawConfig, config: &Config) {
    if raw.listeners.is_empty() {
        ck.report(0, "listeners", "at least one [[listeners]] entry is required");
    }
    let mut names: HashMap<&str, usize> = HashMap::new();
    for (i, (entry, listener)) in raw.listeners.iter().zip(&config.listeners).enumerate() {
        if let Some(first) = names.get(listener.name.as_str()) {
            let message = format!("duplicate listener name `{}` (first used by listeners[{first}])", listener.name);
            match &entry.get_ref().name {
                Some(name) => ck.report_at(name, &format!("listeners[{i}].name"), message),
                None => ck.report_at(entry, &format!("listeners[{i}]"), message),
            }
        } else {
            names.insert(&listener.name, i);
        }
    }
    let valid: Vec<_> = valid_listeners(raw, config).collect();
    for (n, &(i, listener, bind)) in valid.iter().enumerate() {
        let clash = valid.iter().take(n).find(|(_, _, other)| binds_overlap(bind, *other));
        if let (Some((_, first, other)), Some(entry)) = (clash, raw.listeners.get(i)) {
            ck.report_at(
                &entry.get_ref().bind,
                &format!("listeners[{i}].bind"),
                format!("bind {bind} of listener `{}` overlaps {other} of listener `{}`", listener.name, first.name),
            );
        }
    }
}

/// Two binds overlap when they share a port and an address, or one is the wildcard address.
/// With SO_REUSEPORT on both, an overlap would not fail at bind time but silently split
/// connections between the two listeners. Port 0 (ephemeral) never overlaps.
fn binds_overlap(a: SocketAddr, b: SocketAddr) -> bool {
    a.port() != 0 && a.port() == b.port() && (a.ip() == b.ip() || a.ip().is_unspecified() || b.ip().is_unspecified())
}

fn pool_references(ck: &mut Checker<'_>, raw: &RawConfig, config: &Config) {
    let known: BTreeSet<&str> = config.pools.iter().map(|p| p.name.as_str()).collect();
    let check = |ck: &mut Checker<'_>, value: &Option<Sp<String>>, path: &str| {
        if let Some(name) = value {
            if !known.contains(name.get_ref().as_str()) {
                ck.report_at(name, path, format!("unknown pool `{}`", name.get_ref()));
            }
        }
    };
    let routing = &raw.routing;
    check(ck, &routing.default_pool, "routing.default_pool");
    check(ck, &routing.read_pool, "routing.read_pool");
    check(ck, &routing.write_pool, "routing.write_pool");
    check(ck, &routing.mysql_default_pool, "routing.mysql_default_pool");
    if let Some(m) = &routing.mysql {
        check(ck, &m.read_pool, "routing.mysql.read_pool");
        check(ck, &m.write_pool, "routing.mysql.write_pool");
        check(ck, &m.default_pool, "routing.mysql.default_pool");
    }
    for (i, rule) in routing.pattern_rules.iter().enumerate() {
        check(ck, &rule.get_ref().pool, &format!("routing.pattern_rules[{i}].pool"));
    }
    for (i, rule) in routing.rules.iter().enumerate() {
        check(ck, &rule.get_ref().pool, &format!("routing.rules[{i}].pool"));
    }
    for (i, rule) in raw.translation.rules.iter().enumerate() {
        check(ck, &Some(rule.get_ref().target_pool.clone()), &format!("translation.rules[{i}].target_pool"));
    }
}

/// The pools that take writes must not be replica-role: every statement that is not provably a
/// read goes there, and a replica-role pool refuses such statements (#19).
fn primaries_are_primary(ck: &mut Checker<'_>, raw: &RawConfig, config: &Config) {
    let routing = &raw.routing;
    let mysql = routing.mysql.as_ref();
    let keys = [
        ("routing.default_pool", routing.default_pool.as_ref()),
        ("routing.write_pool", routing.write_pool.as_ref()),
        ("routing.mysql_default_pool", routing.mysql_default_pool.as_ref()),
        ("routing.mysql.write_pool", mysql.and_then(|m| m.write_pool.as_ref())),
        ("routing.mysql.default_pool", mysql.and_then(|m| m.default_pool.as_ref())),
    ];
    for (key, value) in keys {
        let Some(name) = value else { continue };
        if config.pool(name.get_ref()).is_some_and(|p| p.role == PoolRole::Replica) {
            let message = format!(
                "pool `{}` has role = \"replica\" but {key} sends writes to it: give it role = \"primary\"",
                name.get_ref()
            );
            ck.report_at(name, key, message);
        }
    }
}

fn split(ck: &mut Checker<'_>, raw: &RawConfig) {
    let routing = &raw.routing;
    split_pools(ck, "routing", &routing.read_write_split, &routing.read_pool, &routing.write_pool);
    if let Some(m) = &routing.mysql {
        split_pools(ck, "routing.mysql", &m.read_write_split, &m.read_pool, &m.write_pool);
    }
}

/// A split (the `table`'s `read_write_split`) needs both its read and its write pool.
fn split_pools(
    ck: &mut Checker<'_>,
    table: &str,
    flag: &Option<Sp<bool>>,
    read: &Option<Sp<String>>,
    write: &Option<Sp<String>>,
) {
    let Some(flag) = flag.as_ref().filter(|v| *v.get_ref()) else {
        return;
    };
    for (key, value) in [("read_pool", read), ("write_pool", write)] {
        if value.is_none() {
            let message = format!("read_write_split = true requires {table}.{key}");
            ck.report_at(flag, &format!("{table}.read_write_split"), message);
        }
    }
}

/// Every listener's clients must have somewhere to go when no rule matches.
fn routable(ck: &mut Checker<'_>, raw: &RawConfig, config: &Config) {
    for (i, listener, _) in valid_listeners(raw, config) {
        if config.routing.primary_pool(listener.protocol).is_some() {
            continue;
        }
        let hint = match listener.protocol {
            Protocol::Postgres => "set routing.default_pool, or routing.write_pool with read_write_split = true",
            Protocol::MySql => {
                if config.routing.mysql.is_some() {
                    "set routing.mysql.default_pool or routing.default_pool, or routing.mysql.write_pool with routing.mysql.read_write_split = true"
                } else {
                    "set routing.mysql.default_pool or routing.default_pool, or routing.write_pool with read_write_split = true"
                }
            }
        };
        if let Some(entry) = raw.listeners.get(i) {
            ck.report_at(
                entry,
                &format!("listeners[{i}]"),
                format!("routing has no pool for listener `{}` ({}): {hint}", listener.name, listener.protocol),
            );
        }
    }
}

/// Raw passthrough relays bytes without parsing, which the MySQL session cannot do (it must
/// track sequence ids and capabilities). A pool counts as MySQL when mysql clients reach it by
/// default or through a rule restricted to mysql clients. (A pool with an explicit `protocol`
/// is already refused for passthrough in `pool`.)
fn mysql_passthrough(ck: &mut Checker<'_>, raw: &RawConfig, config: &Config) {
    let routing = &config.routing;
    let mut mysql_pools: BTreeSet<&str> = routing.mysql.iter().filter_map(|m| m.default_pool.as_deref()).collect();
    if config.listeners.iter().any(|l| l.protocol == Protocol::MySql) {
        mysql_pools.extend(routing.primary_pool(Protocol::MySql));
        mysql_pools.extend(routing.read_pool_of(Protocol::MySql));
    }
    for rule in routing.rules.iter().filter(|r| r.protocol == Some(Protocol::MySql)) {
        if let RuleTarget::Pool(pool) = &rule.target {
            mysql_pools.insert(pool);
        }
    }
    refuse_flag(
        ck,
        raw,
        mysql_pools,
        "raw_passthrough",
        |p| &p.raw_passthrough,
        "raw_passthrough is not supported on a pool serving mysql clients",
    );
}

/// Reports pool flag `key` (read by `flag`) where it is on for one of `pools` that speaks its
/// clients' protocol (a pool with an explicit `protocol` is judged in `pool`).
fn refuse_flag<'a>(
    ck: &mut Checker<'_>,
    raw: &'a RawConfig,
    pools: BTreeSet<&str>,
    key: &str,
    flag: impl Fn(&'a RawPool) -> &'a Option<Sp<bool>>,
    message: &str,
) {
    for name in pools {
        let Some(pool) = raw.pools.get(name).filter(|p| p.protocol.is_none()) else {
            continue;
        };
        if let Some(on) = flag(pool).as_ref().filter(|v| *v.get_ref()) {
            ck.report_at(on, &format!("pools.{name}.{key}"), message);
        }
    }
}

/// `LOAD DATA LOCAL INFILE` is a MySQL exchange: a pool reached by PostgreSQL clients (by
/// default, as the split's read pool, or through a rule restricted to postgres clients) has
/// PostgreSQL backends and no use for it. (A pool with an explicit `protocol` is already refused
/// in `pool`.)
fn postgres_local_infile(ck: &mut Checker<'_>, raw: &RawConfig, config: &Config) {
    let routing = &config.routing;
    let mut pg_pools: BTreeSet<&str> = BTreeSet::new();
    if config.listeners.iter().any(|l| l.protocol == Protocol::Postgres) {
        pg_pools.extend(routing.primary_pool(Protocol::Postgres));
        pg_pools.extend(routing.read_pool_of(Protocol::Postgres));
    }
    for rule in routing.rules.iter().filter(|r| r.protocol == Some(Protocol::Postgres)) {
        if let RuleTarget::Pool(pool) = &rule.target {
            pg_pools.insert(pool);
        }
    }
    refuse_flag(
        ck,
        raw,
        pg_pools,
        "local_infile",
        |p| &p.local_infile,
        "local_infile is a MySQL setting and this pool serves postgres clients",
    );
}

/// Clients are authenticated against the pools' credentials or, on pass-through pools, against
/// the `[auth] file`; with neither configured the router has nothing to check a password
/// against, so exposing a listener beyond loopback then has to be asked for explicitly with
/// `allow_anonymous`.
fn exposure(ck: &mut Checker<'_>, raw: &RawConfig, config: &Config) {
    if config.pools.iter().any(|p| p.has_credentials()) || config.auth.file.is_some() || config.auth.query.is_some() {
        return;
    }
    for (i, listener, bind) in valid_listeners(raw, config) {
        if listener.allow_anonymous || is_loopback(&bind) {
            continue;
        }
        if let Some(entry) = raw.listeners.get(i) {
            ck.report_at(
                &entry.get_ref().bind,
                &format!("listeners[{i}].bind"),
                format!(
                    "listener `{}` binds non-loopback {bind} but no pool has username and password and there is no [auth] file; set allow_anonymous = true to accept that",
                    listener.name
                ),
            );
        }
    }
}
