//! The prober: one task on core 0's background queue probes every (pool, backend) of the
//! current configuration every `health.interval`, each probe bounded by `health.timeout`, and
//! publishes the result to the shared [`BackendHealth`] table through the [`Hysteresis`].
//!
//! Each backend gets one dedicated, long-lived probe connection opened with the pool's own
//! connect code and credentials. It is *outside* the pool's `max_connections` budget: a probe
//! must not be refused because clients filled the pool (that would mark a busy backend
//! unhealthy), nor take a unit a client is waiting for. So a backend sees at most
//! `max_connections + 1` connections from the router per pool. A pool without a `username`
//! (clients' credentials passed through) cannot log in on its own: its probe is a TCP connect,
//! and lag cannot be measured there.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::net::{SocketAddr, ToSocketAddrs};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::lag::{lag_ok, my_lag, pg_lag, Lag, MySample, PgSample};
use super::query::{my_query, pg_query, ProbeError, Rows};
use super::{BackendHealth, Cause, Hysteresis, Verdict};
use crate::config::{Backend, Config, Engine, Pool as PoolConfig, PoolRole, Protocol, RuleTarget, DEFAULT_CHECK_QUERY};
use crate::id::{GtidPosition, Position};
use crate::pool::conn::BudgetUnit;
use crate::pool::{Budget, BudgetRegistry, Conn, ConnInfo, PoolError, Waiters};
use crate::rt;

/// How often the prober looks for due probes (well under any sensible interval).
const TICK: Duration = Duration::from_millis(20);

/// One query reads everything a PostgreSQL probe needs, on a primary and on a standby alike
/// (the `CASE` keeps `pg_current_wal_flush_lsn()`, which fails during recovery, off standbys).
const PG_PROBE: &str = "SELECT pg_is_in_recovery(), \
     (CASE WHEN pg_is_in_recovery() THEN NULL ELSE pg_current_wal_flush_lsn() END - '0/0'::pg_lsn)::text, \
     (pg_last_wal_receive_lsn() - '0/0'::pg_lsn)::text, \
     (pg_last_wal_replay_lsn() - '0/0'::pg_lsn)::text, \
     extract(epoch from pg_last_xact_replay_timestamp())::text, \
     extract(epoch from clock_timestamp())::text";

/// How long after a client asked for a database to be let go (#36) probes of pools on it keep
/// logging in to another database: long enough for the client's DROP, RENAME or copy and the
/// CREATE that often follows it.
const RELEASE_WINDOW: Duration = Duration::from_secs(60);

/// Probes the backends of `config()` (re-read every tick, so reloads apply) until the core
/// stops; health lands in the registry `prober` was made with.
pub async fn run(prober: Rc<Prober>, config: impl Fn() -> Arc<Config> + 'static) {
    let mut current: Option<Arc<Config>> = None;
    loop {
        let cfg = config();
        if !current.as_ref().is_some_and(|c| Arc::ptr_eq(c, &cfg)) {
            prober.sync(&cfg);
            current = Some(cfg);
        }
        let now = rt::now();
        let due: Vec<Rc<Target>> =
            prober.targets.borrow().values().filter(|t| !t.busy.get() && now >= t.next_due.get()).cloned().collect();
        for t in due {
            t.busy.set(true);
            t.next_due.set(now + t.pool.health.interval);
            rt::spawn_local(probe(prober.clone(), t));
        }
        rt::sleep(TICK).await;
    }
}

/// The prober's state: its targets with their probe connections. Core-local (core 0).
pub struct Prober {
    budgets: BudgetRegistry,
    /// The probe connections' own budget, which caps nothing (see the module docs).
    outside: Arc<Budget>,
    waiters: Rc<Waiters>,
    targets: RefCell<HashMap<(String, String), Rc<Target>>>,
    /// Latest flushed WAL position of the PostgreSQL write pool's backends, and when it was read.
    primary_lsn: Cell<Option<(u64, Instant)>>,
    /// Databases clients are dropping, renaming or copying (#36), until when their pools'
    /// probes log in elsewhere (see [`Prober::release`]).
    released: RefCell<HashMap<String, Instant>>,
}

/// One (pool, backend) being probed.
struct Target {
    pool: Rc<PoolConfig>,
    backend: Backend,
    index: usize,
    addr: SocketAddr,
    label: String,
    /// The protocol configured for the pool, else the one guessed from its clients.
    protocol: Protocol,
    /// The pool has no `protocol` and clients of both protocols may reach it: the backend is
    /// asked which it speaks.
    ambiguous: bool,
    /// What the backend itself speaks, once asked (when `ambiguous`).
    detected: Cell<Option<Protocol>>,
    /// A backend of the PostgreSQL write pool: its WAL position is the reference for byte lag.
    is_primary: bool,
    health: Arc<BackendHealth>,
    conn: RefCell<Option<Conn>>,
    tracker: Cell<Hysteresis>,
    next_due: Cell<Instant>,
    busy: Cell<bool>,
    /// Set when a reload replaced or removed the target: an in-flight probe must not publish.
    retired: Cell<bool>,
    /// The probe connection (or the one being opened) is logged in to another database than
    /// the pool's, which a client is dropping, renaming or copying (#36).
    on_elsewhere: Cell<bool>,
}

/// Clears `busy` however the probe task ends (even by a contained panic).
struct Busy(Rc<Target>);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.busy.set(false);
    }
}

async fn probe(prober: Rc<Prober>, target: Rc<Target>) {
    let guard = Busy(target);
    let t = &guard.0;
    let (verdict, lag) = t.check(&prober).await;
    if !t.retired.get() {
        t.publish(verdict, lag);
    }
}

fn has_lag_threshold(b: &Backend) -> bool {
    b.max_replica_lag.is_some() || b.max_replica_lag_bytes.is_some()
}

/// The protocol a pool's backends speak: its explicit `protocol`, else that of the clients that
/// reach it (MySQL when mysql listeners default or split reads to it, it is `routing.mysql`'s
/// default pool, or a mysql-only rule targets it, or when
/// every listener is mysql), else PostgreSQL.
fn backend_protocol(cfg: &Config, pool: &PoolConfig) -> Protocol {
    if let Some(p) = pool.protocol {
        return p;
    }
    let name = Some(pool.name.as_str());
    let has_mysql = cfg.listeners.iter().any(|l| l.protocol == Protocol::MySql);
    let mysql_default = has_mysql
        && (cfg.routing.primary_pool(Protocol::MySql) == name || cfg.routing.read_pool_of(Protocol::MySql) == name);
    let mysql_rule = cfg.routing.rules.iter().any(|r| {
        r.protocol == Some(Protocol::MySql) && matches!(&r.target, RuleTarget::Pool(p) if Some(p.as_str()) == name)
    });
    let all_mysql = !cfg.listeners.is_empty() && cfg.listeners.iter().all(|l| l.protocol == Protocol::MySql);
    let own_default = cfg.routing.mysql.as_ref().and_then(|m| m.default_pool.as_deref());
    if own_default == name || mysql_default || mysql_rule || all_mysql {
        Protocol::MySql
    } else {
        Protocol::Postgres
    }
}

/// What the prober knows of a pool's backends before it probes them.
struct Facts {
    protocol: Protocol,
    ambiguous: bool,
    is_primary: bool,
}

/// Whether clients of both protocols connect: a pool without `protocol` may then speak either.
fn mixed_listeners(cfg: &Config) -> bool {
    let has = |p: Protocol| cfg.listeners.iter().any(|l| l.protocol == p);
    has(Protocol::MySql) && has(Protocol::Postgres)
}

/// The replication-status statement this MySQL-family server understands.
fn replica_status_sql(server_version: &str) -> &'static str {
    if server_version.contains("MariaDB") {
        return "SHOW SLAVE STATUS";
    }
    let mut parts = server_version.split(|c: char| !c.is_ascii_digit()).map(|p| p.parse::<u32>().unwrap_or(0));
    let version = (parts.next().unwrap_or(0), parts.next().unwrap_or(0), parts.next().unwrap_or(0));
    if version >= (8, 0, 22) {
        "SHOW REPLICA STATUS"
    } else {
        "SHOW SLAVE STATUS"
    }
}

fn lsn(v: Option<&str>) -> Option<u64> {
    v.and_then(|s| s.split('.').next()).and_then(|s| s.parse().ok())
}

fn pg_sample(rows: &Rows) -> Result<PgSample, ProbeError> {
    let row = rows.rows.first().ok_or_else(|| ProbeError::Protocol("probe returned no row".into()))?;
    let col = |i: usize| row.get(i).and_then(|v| v.as_deref());
    Ok(PgSample {
        in_recovery: col(0) == Some("t"),
        flush_lsn: lsn(col(1)),
        receive_lsn: lsn(col(2)),
        replay_lsn: lsn(col(3)),
        replay_time: col(4).and_then(|s| s.parse().ok()),
        now: col(5).and_then(|s| s.parse().ok()).ok_or_else(|| ProbeError::Protocol("no clock reading".into()))?,
    })
}

fn my_sample(rows: &Rows) -> MySample {
    let yes = |names: &[&str]| rows.first(names).is_some_and(|v| v.eq_ignore_ascii_case("yes"));
    MySample {
        configured: !rows.rows.is_empty(),
        io_running: yes(&["Slave_IO_Running", "Replica_IO_Running"]),
        sql_running: yes(&["Slave_SQL_Running", "Replica_SQL_Running"]),
        seconds_behind: rows.first(&["Seconds_Behind_Master", "Seconds_Behind_Source"]).and_then(|v| v.parse().ok()),
    }
}

impl Prober {
    /// A prober feeding the health entries of `budgets`.
    pub fn new(budgets: BudgetRegistry) -> Rc<Prober> {
        Rc::new(Prober {
            budgets,
            outside: Budget::unlimited(),
            waiters: Rc::default(),
            targets: RefCell::default(),
            primary_lsn: Cell::new(None),
            released: RefCell::default(),
        })
    }

    /// #36: a client is about to drop, rename or copy `database`, which the server allows only
    /// while nobody else is connected to it. The probe connections of PostgreSQL pools on it
    /// close now, and for a while their probes log in to another database instead (the pool's
    /// health does not depend on which: the probe reads server-wide facts).
    pub fn release(&self, database: &str) {
        self.released.borrow_mut().insert(database.to_owned(), rt::now() + RELEASE_WINDOW);
        for t in self.targets.borrow().values().filter(|t| t.pool.database == database) {
            if !t.on_elsewhere.get() {
                t.conn.borrow_mut().take();
            }
        }
    }

    /// Whether a probe is still connected (or connecting) to `database`: one in flight when
    /// [`Prober::release`] was called keeps its connection until it ends, then drops it.
    pub fn holds(&self, database: &str) -> bool {
        let targets = self.targets.borrow();
        let mut on = targets.values().filter(|t| t.pool.database == database && t.speaks() == Protocol::Postgres);
        on.any(|t| !t.on_elsewhere.get() && (t.busy.get() || t.conn.borrow().is_some()))
    }

    /// The database a probe of a pool on `database` logs in to now: another one while clients
    /// may be dropping, renaming or copying it.
    fn login_database(&self, database: &str) -> Option<&'static str> {
        let mut released = self.released.borrow_mut();
        let now = rt::now();
        released.retain(|_, until| *until > now);
        released.contains_key(database).then_some(if database == "postgres" { "template1" } else { "postgres" })
    }

    /// Rebuilds the target list for `cfg`, keeping (with their connections and hysteresis)
    /// targets whose pool configuration did not change.
    fn sync(&self, cfg: &Config) {
        let primary = cfg.routing.primary_pool(Protocol::Postgres);
        let mut old = std::mem::take(&mut *self.targets.borrow_mut());
        let mut next = HashMap::new();
        for p in &cfg.pools {
            let protocol = backend_protocol(cfg, p);
            let ambiguous = p.protocol.is_none() && mixed_listeners(cfg);
            let is_primary = protocol == Protocol::Postgres && primary == Some(p.name.as_str());
            let pool = Rc::new(p.clone());
            for (index, b) in p.backends.iter().enumerate() {
                let label = format!("{}:{}", b.host, b.port);
                let key = (p.name.clone(), label.clone());
                let previous = old.remove(&key);
                let unchanged = |t: &Rc<Target>| {
                    *t.pool == *p && t.protocol == protocol && t.ambiguous == ambiguous && t.is_primary == is_primary
                };
                let target = match previous {
                    Some(t) if unchanged(&t) => Some(t),
                    previous => {
                        // A changed backend keeps its hysteresis: a reload is no shortcut back.
                        let tracker = previous.map(|t| {
                            t.retired.set(true);
                            t.tracker.get()
                        });
                        let facts = Facts { protocol, ambiguous, is_primary };
                        self.target(&pool, b, index, label, facts, tracker)
                    }
                };
                if let Some(t) = target {
                    next.insert(key, t);
                }
            }
        }
        for t in old.values() {
            t.retired.set(true);
        }
        *self.targets.borrow_mut() = next;
    }

    fn target(
        &self,
        pool: &Rc<PoolConfig>,
        b: &Backend,
        index: usize,
        label: String,
        facts: Facts,
        tracker: Option<Hysteresis>,
    ) -> Option<Rc<Target>> {
        let Facts { protocol, ambiguous, is_primary } = facts;
        // Resolution happens on (re)configuration only, as for the pools.
        let addr = (b.host.as_str(), b.port).to_socket_addrs().ok()?.next()?;
        if protocol == Protocol::MySql && b.max_replica_lag_bytes.is_some() {
            tracing::warn!(pool = %pool.name, backend = %label, "max_replica_lag_bytes is not measured on MySQL backends; only max_replica_lag and the replication threads are checked");
        }
        let health = self.budgets.health(&pool.name, &label, has_lag_threshold(b));
        let tracker = tracker.unwrap_or_else(|| Hysteresis::new(health.is_healthy()));
        Some(Rc::new(Target {
            pool: pool.clone(),
            backend: b.clone(),
            index,
            addr,
            label,
            protocol,
            ambiguous,
            detected: Cell::new(None),
            is_primary,
            health,
            conn: RefCell::new(None),
            tracker: Cell::new(tracker),
            next_due: Cell::new(rt::now()),
            busy: Cell::new(false),
            retired: Cell::new(false),
            on_elsewhere: Cell::new(false),
        }))
    }

    /// The write pool's WAL position, if read recently enough to compare with a standby probed
    /// every `interval`.
    fn primary_lsn(&self, interval: Duration) -> Option<u64> {
        let (lsn, at) = self.primary_lsn.get()?;
        (at.elapsed() <= interval * 3).then_some(lsn)
    }

    fn note_primary_lsn(&self, lsn: u64) {
        let newest = self.primary_lsn.get().map_or(lsn, |(old, _)| old.max(lsn));
        self.primary_lsn.set(Some((newest, rt::now())));
    }

    async fn connect(&self, t: &Target, deadline: Instant) -> Result<Conn, PoolError> {
        let unit = BudgetUnit::new(self.outside.clone(), None, self.waiters.clone());
        // The unit is released when the connection drops; `outside` never refuses.
        self.outside.try_acquire();
        match t.speaks() {
            Protocol::Postgres => {
                let elsewhere = self.login_database(&t.pool.database);
                t.on_elsewhere.set(elsewhere.is_some());
                let moved = elsewhere.map(|db| PoolConfig { database: db.to_owned(), ..PoolConfig::clone(&t.pool) });
                let pool = moved.as_ref().unwrap_or(&t.pool);
                crate::pool::pg::connect(pool, t.addr, &t.label, t.index, unit, None, deadline).await
            }
            Protocol::MySql => {
                crate::pool::mysql::connect(&t.pool, t.addr, &t.label, t.index, unit, None, deadline).await
            }
        }
    }
}

impl Target {
    /// The protocol to probe with: the configured one, else what the backend showed it speaks,
    /// else the guess (#18: a MySQL pool without `protocol` was probed as PostgreSQL for ever).
    fn speaks(&self) -> Protocol {
        self.detected.get().filter(|_| self.ambiguous).unwrap_or(self.protocol)
    }

    /// One probe: (verdict, measured lag). An ambiguous pool first asks the backend which
    /// protocol it speaks, and asks again after a probe that kept no connection failed (the
    /// server may have been too slow to greet, or replaced).
    async fn check(&self, prober: &Prober) -> (Verdict, Lag) {
        if self.ambiguous && self.pool.username.is_some() && self.detected.get().is_none() {
            let deadline = rt::now() + self.pool.health.timeout;
            self.detected.set(super::sniff::sniff(self.addr, deadline).await);
        }
        let (verdict, lag) = self.check_once(prober).await;
        if !matches!(verdict, Verdict::Pass) && self.conn.borrow().is_none() {
            self.detected.set(None);
        }
        (verdict, lag)
    }

    async fn check_once(&self, prober: &Prober) -> (Verdict, Lag) {
        let deadline = rt::now() + self.pool.health.timeout;
        if self.pool.username.is_none() {
            return match rt::connect(self.addr, deadline).await {
                Ok(_) => (self.judge(&Lag::UNKNOWN), Lag::UNKNOWN),
                Err(_) => (Self::unreachable(deadline), Lag::UNKNOWN),
            };
        }
        let reused = self.conn.borrow_mut().take();
        let fresh = reused.is_none();
        let Some(mut conn) = self.open(prober, reused, deadline).await else {
            return (Self::unreachable(deadline), Lag::UNKNOWN);
        };
        let mut result = rt::with_deadline(deadline, self.sample(prober, &mut conn)).await;
        if !fresh && matches!(result, Ok(Err(ProbeError::Io(_)))) {
            // The kept connection died (e.g. the server restarted): judge by a fresh one.
            drop(conn);
            let Some(again) = self.open(prober, None, deadline).await else {
                return (Self::unreachable(deadline), Lag::UNKNOWN);
            };
            conn = again;
            result = rt::with_deadline(deadline, self.sample(prober, &mut conn)).await;
        }
        // A database released while the probe ran (#36) gets its connection back now.
        let keep = self.on_elsewhere.get() || prober.login_database(&self.pool.database).is_none();
        match result {
            Ok(Ok(lag)) => {
                if keep {
                    *self.conn.borrow_mut() = Some(conn);
                }
                (self.judge(&lag), lag)
            }
            Ok(Err(e)) => {
                tracing::debug!(pool = %self.pool.name, backend = %self.label, error = %e, "health probe failed");
                if matches!(e, ProbeError::Server(_)) && keep {
                    *self.conn.borrow_mut() = Some(conn); // still in sync: keep it
                }
                (Verdict::Fail(Cause::Query), Lag::UNKNOWN)
            }
            // A probe cut off mid-answer leaves the connection out of sync: it is dropped.
            Err(_) => (Verdict::Fail(Cause::Query), Lag::UNKNOWN),
        }
    }

    /// A connection that failed before the probe's deadline was refused (down at once); one
    /// that ran out of time is a slow backend, judged with the failure threshold.
    fn unreachable(deadline: Instant) -> Verdict {
        if rt::now() < deadline {
            Verdict::Refused
        } else {
            Verdict::Fail(Cause::Connect)
        }
    }

    async fn open(&self, prober: &Prober, reused: Option<Conn>, deadline: Instant) -> Option<Conn> {
        if reused.is_some() {
            return reused;
        }
        match prober.connect(self, deadline).await {
            Ok(c) => Some(c),
            Err(e) => {
                tracing::debug!(pool = %self.pool.name, backend = %self.label, error = %e, "health probe cannot connect");
                None
            }
        }
    }

    fn judge(&self, lag: &Lag) -> Verdict {
        let max_bytes = self.backend.max_replica_lag_bytes.filter(|_| self.speaks() == Protocol::Postgres);
        if lag_ok(lag, self.backend.max_replica_lag, max_bytes) {
            Verdict::Pass
        } else {
            Verdict::Fail(Cause::Lag)
        }
    }

    async fn sample(&self, prober: &Prober, conn: &mut Conn) -> Result<Lag, ProbeError> {
        match self.speaks() {
            Protocol::Postgres if self.pool.engine == Engine::Generic => {
                // Not PostgreSQL: no recovery state, WAL position or role to read (#35).
                let sql = self.pool.health.check_query.as_deref().unwrap_or(DEFAULT_CHECK_QUERY);
                pg_query(conn, sql).await?;
                Ok(Lag::UNKNOWN)
            }
            Protocol::Postgres => {
                let s = pg_sample(&pg_query(conn, PG_PROBE).await?)?;
                if let Some(lsn) = s.flush_lsn.filter(|_| self.is_primary) {
                    prober.note_primary_lsn(lsn);
                }
                self.verify_role(s.in_recovery, "pg_is_in_recovery()");
                self.health.record_replayed(s.replay_lsn.filter(|_| s.in_recovery)); // causal (#22)
                self.health.record_written(s.flush_lsn.map(Position::Wal)); // switchover (#40)
                self.health.record_recovered(s.replay_lsn);
                Ok(pg_lag(&s, prober.primary_lsn(self.pool.health.interval)))
            }
            Protocol::MySql => {
                // Doubles as the liveness query of a backend without a lag threshold. MariaDB
                // also reports the GTID position it applied, for causal reads (#22).
                let mariadb = matches!(conn.info(), ConnInfo::MySql(i) if i.server_version.contains("MariaDB"));
                // A server with either flag set refuses writes (#40: a write pool lends only
                // servers with both off).
                let sql = if mariadb {
                    "SELECT @@read_only, @@gtid_slave_pos, @@innodb_read_only, @@gtid_binlog_pos"
                } else {
                    "SELECT @@read_only, NULL, @@innodb_read_only"
                };
                let answer = my_query(conn, sql).await?;
                let value = |i: usize| answer.rows.first().and_then(|r| r.get(i)).and_then(|v| v.as_deref());
                let read_only = value(0) == Some("1") || value(2) == Some("1");
                self.verify_role(read_only, "@@read_only/@@innodb_read_only");
                if mariadb {
                    self.health.record_applied_gtid(value(1).and_then(GtidPosition::parse));
                    // switchover (#40): a writable server's own binlog position.
                    let written = value(3).filter(|_| !read_only).and_then(GtidPosition::parse);
                    self.health.record_written(written.map(Position::Gtid));
                }
                if !has_lag_threshold(&self.backend) {
                    return Ok(Lag::UNKNOWN);
                }
                let sql = match conn.info() {
                    ConnInfo::MySql(info) => replica_status_sql(&info.server_version),
                    ConnInfo::Pg(_) => "SHOW SLAVE STATUS",
                };
                Ok(my_lag(&my_sample(&my_query(conn, sql).await?)))
            }
        }
    }

    /// Compares the pool's configured role with what the server says it is (#19): a mismatch
    /// is logged when it appears and counted in `sqp_backend_role_mismatch`. Routing keeps
    /// following the configured role, the safe direction for a replica-role pool; a primary-role
    /// pool on a read-only server fails its writes at the server.
    fn verify_role(&self, read_only: bool, source: &'static str) {
        let expected = self.pool.role == PoolRole::Replica;
        let mismatch = read_only != expected;
        if self.health.set_role_mismatch(mismatch) && mismatch {
            let (pool, backend) = (&self.pool.name, &self.label);
            let role = self.pool.role.as_str();
            let actual = if read_only { "read-only (a replica)" } else { "writable (a primary)" };
            tracing::warn!(%pool, %backend, role, source, "pool role mismatch: configured {role}, but {source} says the server is {actual}");
        }
    }

    /// Counts the result and moves the shared state when the hysteresis says so.
    fn publish(&self, verdict: Verdict, lag: Lag) {
        let h = &self.health;
        h.record_lag(lag);
        let cause = match verdict {
            Verdict::Pass => Cause::None,
            Verdict::Fail(c) => c,
            Verdict::Refused => Cause::Connect,
        };
        h.count_failure(cause);
        let shared = h.is_healthy();
        let mut tracker = self.tracker.get();
        if tracker.decided && tracker.healthy != shared {
            // A session's failed connect marked the backend down since the last probe.
            tracker = Hysteresis { healthy: shared, streak: 0, decided: true };
        }
        let hc = &self.pool.health;
        let next = tracker.step(verdict, hc.failure_threshold.get(), hc.success_threshold.get());
        if h.transition(shared, next.healthy, cause) {
            if next.healthy != shared {
                let (pool, backend) = (&self.pool.name, &self.label);
                if next.healthy {
                    tracing::info!(%pool, %backend, "backend healthy again");
                } else {
                    tracing::warn!(%pool, %backend, cause = cause.as_str(), "backend marked unhealthy");
                }
            }
            self.tracker.set(next);
        } else {
            self.tracker.set(Hysteresis { healthy: h.is_healthy(), streak: 0, decided: true });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replica_status_statement_follows_the_server_version() {
        assert_eq!(replica_status_sql("10.11.6-MariaDB-0+deb12u1"), "SHOW SLAVE STATUS");
        assert_eq!(replica_status_sql("8.0.21"), "SHOW SLAVE STATUS");
        assert_eq!(replica_status_sql("8.0.22"), "SHOW REPLICA STATUS");
        assert_eq!(replica_status_sql("8.4.0-commercial"), "SHOW REPLICA STATUS");
        assert_eq!(replica_status_sql("5.7.44-log"), "SHOW SLAVE STATUS");
    }

    fn rows(columns: &[&str], values: &[Option<&str>]) -> Rows {
        Rows {
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            rows: vec![values.iter().map(|v| v.map(str::to_owned)).collect()],
        }
    }

    #[test]
    fn samples_parse_from_text_results() {
        let r = rows(
            &["a", "b", "c", "d", "e", "f"],
            &[Some("t"), None, Some("5000"), Some("4000"), Some("10.5"), Some("12.25")],
        );
        let s = pg_sample(&r).expect("sample");
        assert_eq!(
            s,
            PgSample {
                in_recovery: true,
                flush_lsn: None,
                receive_lsn: Some(5000),
                replay_lsn: Some(4000),
                replay_time: Some(10.5),
                now: 12.25
            }
        );
        assert!(pg_sample(&Rows::default()).is_err());
        let m =
            rows(&["Slave_IO_Running", "Slave_SQL_Running", "Seconds_Behind_Master"], &[Some("Yes"), Some("No"), None]);
        assert_eq!(
            my_sample(&m),
            MySample { configured: true, io_running: true, sql_running: false, seconds_behind: None }
        );
        let m8 = rows(
            &["Replica_IO_Running", "Replica_SQL_Running", "Seconds_Behind_Source"],
            &[Some("Yes"), Some("Yes"), Some("7")],
        );
        assert_eq!(my_lag(&my_sample(&m8)).seconds, Some(7.0));
        assert!(!my_sample(&Rows::default()).configured);
    }

    /// With `[routing.mysql]` the MySQL read and write pools are probed as MySQL and the
    /// PostgreSQL split's pools as PostgreSQL (#24).
    #[test]
    fn each_split_pool_is_probed_in_its_clients_protocol() {
        let pool = |name: &str, port: u16| format!("[pools.{name}]\nbackends = [{{ host = \"h\", port = {port} }}]\n");
        let text = format!(
            "[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:1\"\n[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:2\"\n\
             {}{}{}{}[routing]\nread_write_split = true\nread_pool = \"pr\"\nwrite_pool = \"pw\"\n\
             [routing.mysql]\nread_write_split = true\nread_pool = \"mr\"\nwrite_pool = \"mw\"\n",
            pool("pr", 5433),
            pool("pw", 5432),
            pool("mr", 3307),
            pool("mw", 3306)
        );
        let cfg = Config::parse(&text, "t.toml").unwrap_or_else(|e| panic!("{e}"));
        let found: Vec<_> = cfg.pools.iter().map(|p| (p.name.as_str(), backend_protocol(&cfg, p))).collect();
        let want =
            [("mr", Protocol::MySql), ("mw", Protocol::MySql), ("pr", Protocol::Postgres), ("pw", Protocol::Postgres)];
        assert_eq!(found, want);
    }
}
