//! Exposition: per-core snapshots written through `prometheus-client`, each per-core series
//! carrying a `core` label. A fresh registry with one collector over the scrape is built per
//! request; nothing is registered globally.
//!
//! `prometheus-client` writes OpenMetrics; scrapers that do not ask for it (and `promtool check
//! metrics`) get the classic Prometheus text format, derived from it line by line: counter
//! families are named with their `_total` suffix and the `# EOF` marker is dropped.

use std::fmt::{self, Write as _};

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelValue, LabelValueEncoder, MetricEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;
use prometheus_client::registry::Registry;

use super::catalog::{self as cat, Kind, MetricDef};
use super::histogram::{HistogramSnapshot, BOUNDS_MICROS};
use super::label::{
    AuthFailure, CacheOp, CausalOutcome, ClientState, Decision, Direction, FallbackOutcome, Operation, RetryOutcome,
};
use super::CounterSnapshot;

/// The two text formats a scraper may ask for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// Prometheus text format 0.0.4 (the default).
    Prometheus,
    /// OpenMetrics 1.0 text.
    OpenMetrics,
}

impl Format {
    /// The format to answer a request with this `Accept` header in.
    pub fn negotiate(accept: Option<&str>) -> Format {
        match accept {
            Some(a) if a.contains("application/openmetrics-text") => Format::OpenMetrics,
            _ => Format::Prometheus,
        }
    }

    /// The response's `Content-Type`.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => "text/plain; version=0.0.4; charset=utf-8",
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
        }
    }
}

/// Everything one scrape shows: each core's snapshot and the control plane's own figures.
#[derive(Debug, Clone, Default)]
pub struct Scrape {
    /// `(core id, snapshot)` for every core that answered.
    pub cores: Vec<(u16, CounterSnapshot)>,
    /// Version of the configuration being served.
    pub config_version: u64,
    /// Reloads applied since start.
    pub reloads_applied: u64,
    /// Reloads rejected (invalid file, unreadable file, silent cores).
    pub reloads_rejected: u64,
    /// Log lines dropped because the log could not be written.
    pub log_lines_dropped: u64,
}

/// Writes `scrape` in `format`.
pub fn render(scrape: Scrape, format: Format) -> Result<String, fmt::Error> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(ScrapeCollector(scrape)));
    let mut out = String::with_capacity(16 * 1024);
    prometheus_client::encoding::text::encode(&mut out, &registry)?;
    Ok(match format {
        Format::OpenMetrics => out,
        Format::Prometheus => to_prometheus(&out),
    })
}

/// Rewrites OpenMetrics text as Prometheus 0.0.4 text: the descriptor lines of counters carry
/// the sample name (`_total`), and there is no `# EOF`.
fn to_prometheus(open_metrics: &str) -> String {
    let counters: Vec<(&str, &str)> = cat::ALL
        .iter()
        .filter(|d| d.kind == Kind::Counter)
        .filter_map(|d| Some((d.name.strip_suffix("_total")?, d.name)))
        .collect();
    let mut out = String::with_capacity(open_metrics.len());
    for line in open_metrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|tag| {
            let rest = line.strip_prefix(tag)?;
            let (name, tail) = rest.split_once(' ')?;
            let (_, full) = counters.iter().find(|(base, _)| *base == name)?;
            Some(format!("{tag}{full} {tail}"))
        });
        out.push_str(renamed.as_deref().unwrap_or(line));
        out.push('\n');
    }
    out
}

/// A label value with the escapes the text format requires (`\\`, `\"`, `\n`); config names
/// may contain any of them.
#[derive(Debug, Clone, Copy)]
struct Escaped<'a>(&'a str);

impl EncodeLabelValue for Escaped<'_> {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> fmt::Result {
        for ch in self.0.chars() {
            match ch {
                '\\' => encoder.write_str("\\\\")?,
                '"' => encoder.write_str("\\\"")?,
                '\n' => encoder.write_str("\\n")?,
                c => encoder.write_char(c)?,
            }
        }
        Ok(())
    }
}

/// One sample's value.
enum Value<'a> {
    Count(u64),
    Gauge(u64),
    Ratio(f64),
    Histogram(&'a HistogramSnapshot),
}

/// Writes the series of one metric; label names come from its catalog entry.
struct Family<'a> {
    def: &'static MetricDef,
    enc: MetricEncoder<'a>,
}

impl Family<'_> {
    fn series(&mut self, values: &[&str], value: Value<'_>) -> fmt::Result {
        if self.def.labels.len() != values.len() {
            return Err(fmt::Error); // a renderer bug; refuse rather than mislabel
        }
        let labels: Vec<(&str, Escaped<'_>)> =
            self.def.labels.iter().copied().zip(values.iter().map(|v| Escaped(v))).collect();
        if labels.is_empty() {
            return encode_value(&mut self.enc, value);
        }
        encode_value(&mut self.enc.encode_family(&labels)?, value)
    }
}

fn encode_value(enc: &mut MetricEncoder<'_>, value: Value<'_>) -> fmt::Result {
    {
        match value {
            Value::Count(v) => enc.encode_counter::<NoLabelSet, _, u64>(&v, None),
            Value::Gauge(v) => enc.encode_gauge(&v),
            Value::Ratio(v) => enc.encode_gauge(&v),
            Value::Histogram(h) => {
                let buckets: Vec<(f64, u64)> = BOUNDS_MICROS
                    .iter()
                    .map(|b| *b as f64 / 1e6)
                    .chain(std::iter::once(f64::MAX))
                    .zip(h.counts.iter().copied())
                    .collect();
                enc.encode_histogram::<NoLabelSet>(h.sum_seconds(), h.count(), &buckets, None)
            }
        }
    }
}

fn family<'a>(encoder: &'a mut DescriptorEncoder, def: &'static MetricDef) -> Result<Family<'a>, fmt::Error> {
    let (name, ty) = match def.kind {
        Kind::Counter => (def.name.strip_suffix("_total").unwrap_or(def.name), MetricType::Counter),
        Kind::Gauge => (def.name, MetricType::Gauge),
        Kind::Histogram => (def.name, MetricType::Histogram),
    };
    Ok(Family { def, enc: encoder.encode_descriptor(name, def.help, None, ty)? })
}

#[derive(Debug)]
struct ScrapeCollector(Scrape);

impl Collector for ScrapeCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let cores: Vec<(String, &CounterSnapshot)> = self.0.cores.iter().map(|(id, s)| (id.to_string(), s)).collect();
        core_metrics(&mut encoder, &cores)?;
        statement_metrics(&mut encoder, &cores)?;
        pool_metrics(&mut encoder, &cores)?;
        health_metrics(&mut encoder, &cores)?;
        user_metrics(&mut encoder, &cores)?;
        buffer_metrics(&mut encoder, &cores)?;
        let s = &self.0;
        let mut f = family(&mut encoder, &cat::CONFIG_RELOADS)?;
        f.series(&["applied"], Value::Count(s.reloads_applied))?;
        f.series(&["rejected"], Value::Count(s.reloads_rejected))?;
        family(&mut encoder, &cat::LOG_LINES_DROPPED)?.series(&[], Value::Count(s.log_lines_dropped))?;
        family(&mut encoder, &cat::CONFIG_VERSION)?.series(&[], Value::Gauge(s.config_version))
    }
}

type Cores<'a> = [(String, &'a CounterSnapshot)];

/// Reads one pool-level value out of a pool's figures.
type PoolValue = for<'p> fn(&'p super::PoolSnapshot) -> Value<'p>;

fn core_metrics(encoder: &mut DescriptorEncoder, cores: &Cores<'_>) -> fmt::Result {
    let mut f = family(encoder, &cat::SESSIONS_ACTIVE)?;
    for (c, s) in cores {
        f.series(&[c], Value::Gauge(s.sessions_active))?;
    }
    let mut f = family(encoder, &cat::SESSIONS_ACCEPTED)?;
    for (c, s) in cores {
        f.series(&[c], Value::Count(s.sessions_accepted_total))?;
    }
    let mut f = family(encoder, &cat::SESSION_PANICS)?;
    for (c, s) in cores {
        f.series(&[c], Value::Count(s.session_panics_total))?;
    }
    let mut f = family(encoder, &cat::CLIENT_CONNECTIONS)?;
    for (c, s) in cores {
        for l in &s.clients {
            f.series(&[c, &l.listener, ClientState::Idle.as_str()], Value::Gauge(l.idle))?;
            f.series(&[c, &l.listener, ClientState::Active.as_str()], Value::Gauge(l.active))?;
        }
    }
    let mut f = family(encoder, &cat::CLIENT_REFUSED)?;
    for (c, s) in cores {
        for l in &s.clients {
            f.series(&[c, &l.listener], Value::Count(l.refused_total))?;
        }
    }
    let mut f = family(encoder, &cat::AUTH_FAILURES)?;
    for (c, s) in cores {
        for l in &s.clients {
            for (reason, n) in AuthFailure::ALL.iter().zip(l.auth_failures_total) {
                f.series(&[c, &l.listener, reason.as_str()], Value::Count(n))?;
            }
        }
    }
    let mut f = family(encoder, &cat::BYTES)?;
    for (c, s) in cores {
        for (d, n) in Direction::ALL.iter().zip(s.bytes_total.iter()) {
            f.series(&[c, d.as_str()], Value::Count(*n))?;
        }
    }
    Ok(())
}

fn statement_metrics(encoder: &mut DescriptorEncoder, cores: &Cores<'_>) -> fmt::Result {
    let mut f = family(encoder, &cat::ROUTING_DECISIONS)?;
    for (c, s) in cores {
        for p in &s.pools {
            for (d, n) in Decision::ALL.iter().zip(p.decisions_total.iter()) {
                if *d != Decision::Reject {
                    f.series(&[c, d.as_str(), &p.name], Value::Count(*n))?;
                }
            }
        }
        f.series(&[c, Decision::Reject.as_str(), ""], Value::Count(s.rejects_total))?;
    }
    let mut f = family(encoder, &cat::ROUTING_CACHE)?;
    for (c, s) in cores {
        for (op, n) in CacheOp::ALL.iter().zip(s.cache_ops_total.iter()) {
            f.series(&[c, op.as_str()], Value::Count(*n))?;
        }
    }
    let mut f = family(encoder, &cat::STATEMENT_OPERATIONS)?;
    for (c, s) in cores {
        for (op, n) in Operation::ALL.iter().zip(s.operations_total.iter()) {
            f.series(&[c, op.as_str()], Value::Count(*n))?;
        }
    }
    let mut f = family(encoder, &cat::SESSION_PINS)?;
    for (c, s) in cores {
        for (reason, n) in &s.pins_total {
            f.series(&[c, reason], Value::Count(*n))?;
        }
    }
    let mut f = family(encoder, &cat::RELAY_ERRORS)?;
    for (c, s) in cores {
        for (code, n) in &s.relay_errors_total {
            f.series(&[c, code], Value::Count(*n))?;
        }
    }
    let mut f = family(encoder, &cat::STATEMENTS)?;
    for (c, s) in cores {
        for p in &s.pools {
            f.series(&[c, &p.name], Value::Count(p.statements_total))?;
        }
    }
    let mut f = family(encoder, &cat::STATEMENT_DURATION)?;
    for (c, s) in cores {
        for p in &s.pools {
            f.series(&[c, &p.name], Value::Histogram(&p.statement_duration))?;
        }
    }
    let mut f = family(encoder, &cat::ERRORS)?;
    for (c, s) in cores {
        for p in &s.pools {
            for (code, n) in &p.errors_total {
                f.series(&[c, &p.name, code], Value::Count(*n))?;
            }
        }
    }
    let mut f = family(encoder, &cat::RETRIES)?;
    for (c, s) in cores {
        for p in &s.pools {
            for (o, n) in RetryOutcome::ALL.iter().zip(p.retries_total.iter()) {
                f.series(&[c, &p.name, o.as_str()], Value::Count(*n))?;
            }
        }
    }
    let mut f = family(encoder, &cat::REPLICA_FALLBACKS)?;
    for (c, s) in cores {
        for p in &s.pools {
            for (o, n) in FallbackOutcome::ALL.iter().zip(p.fallbacks_total.iter()) {
                f.series(&[c, &p.name, o.as_str()], Value::Count(*n))?;
            }
        }
    }
    let mut f = family(encoder, &cat::CAUSAL_READS)?;
    for (c, s) in cores {
        for p in &s.pools {
            for (o, n) in CausalOutcome::ALL.iter().zip(p.causal_total.iter()) {
                f.series(&[c, &p.name, o.as_str()], Value::Count(*n))?;
            }
        }
    }
    let mut f = family(encoder, &cat::CAUSAL_WAIT)?;
    for (c, s) in cores {
        for p in &s.pools {
            f.series(&[c, &p.name], Value::Histogram(&p.causal_wait))?;
        }
    }
    let mut f = family(encoder, &cat::REPREPARES)?;
    for (c, s) in cores {
        for p in &s.pools {
            f.series(&[c, &p.name], Value::Count(p.reprepares_total))?;
        }
    }
    let mut f = family(encoder, &cat::IDLE_TRANSACTION_TIMEOUTS)?;
    for (c, s) in cores {
        for p in &s.pools {
            f.series(&[c, &p.name], Value::Count(p.idle_transaction_timeouts_total))?;
        }
    }
    let mut f = family(encoder, &cat::PASSTHROUGH_BYTES)?;
    for (c, s) in cores {
        for p in &s.pools {
            f.series(&[c, &p.name], Value::Count(p.passthrough_bytes_total))?;
        }
    }
    Ok(())
}

fn pool_metrics(encoder: &mut DescriptorEncoder, cores: &Cores<'_>) -> fmt::Result {
    let mut f = family(encoder, &cat::POOL_CONNECTIONS)?;
    for (c, s) in cores {
        for p in &s.pools {
            for b in &p.backends {
                f.series(&[c, &p.name, &b.label, "idle"], Value::Gauge(b.idle))?;
                f.series(&[c, &p.name, &b.label, "active"], Value::Gauge(b.active))?;
            }
        }
    }
    let per_pool: [(&'static MetricDef, PoolValue); 11] = [
        (&cat::POOL_ACQUIRE, |p| Value::Count(p.acquires_total)),
        (&cat::POOL_QUEUE_DEPTH, |p| Value::Gauge(p.queue_depth)),
        (&cat::POOL_WAIT, |p| Value::Histogram(&p.wait)),
        (&cat::POOL_TIMEOUTS, |p| Value::Count(p.timeouts_total)),
        (&cat::POOL_RECHECK_FINDS, |p| Value::Count(p.recheck_finds_total)),
        (&cat::POOL_CONNECTIONS_MOVED, |p| Value::Count(p.connections_moved_total)),
        (&cat::POOL_UTILIZATION, |p| Value::Ratio(p.utilization())),
        // #41: per pool; the shapes themselves are in the API and console views.
        (&cat::LIMIT_SHAPES, |p| {
            Value::Gauge(p.limits.iter().filter(|l| u64::from(l.limit) < p.capacity).count() as u64)
        }),
        (&cat::LIMIT_IN_USE, |p| Value::Gauge(p.limits.iter().map(|l| u64::from(l.in_use)).sum())),
        (&cat::LIMIT_QUEUED, |p| Value::Gauge(p.limit_queue_depth)),
        (&cat::LIMIT_REJECTIONS, |p| Value::Count(p.limit_rejections_total)),
    ];
    for (def, value) in per_pool {
        let mut f = family(encoder, def)?;
        for (c, s) in cores {
            for p in &s.pools {
                f.series(&[c, &p.name], value(p))?;
            }
        }
    }
    let mut f = family(encoder, &cat::CONNECT_FAILURES)?;
    for (c, s) in cores {
        for p in &s.pools {
            for b in &p.backends {
                f.series(&[c, &p.name, &b.label], Value::Count(b.connect_failures_total))?;
            }
        }
    }
    let mut f = family(encoder, &cat::BACKEND_CHECKOUTS)?;
    for (c, s) in cores {
        for p in &s.pools {
            for b in &p.backends {
                f.series(&[c, &p.name, &b.label], Value::Count(b.checkouts_total))?;
            }
        }
    }
    Ok(())
}

/// Connections per user are process-wide: each pool's are written once, without a `core`
/// label, from the first core that reports them.
fn user_metrics(encoder: &mut DescriptorEncoder, cores: &Cores<'_>) -> fmt::Result {
    let mut f = family(encoder, &cat::POOL_USER_CONNECTIONS)?;
    let mut done: Vec<&str> = Vec::new();
    for (_, s) in cores {
        for p in s.pools.iter().filter(|p| !p.users.is_empty()) {
            if done.contains(&p.name.as_str()) {
                continue;
            }
            done.push(&p.name);
            for (user, n) in &p.users {
                f.series(&[&p.name, user], Value::Gauge(*n))?;
            }
        }
    }
    Ok(())
}

/// What client sessions hold is process-wide (#33): every core reports the same figures, so
/// each kind is written once, without a `core` label, from the highest reading.
fn buffer_metrics(encoder: &mut DescriptorEncoder, cores: &Cores<'_>) -> fmt::Result {
    let mut held = [0u64; super::BufferKind::COUNT];
    for (_, s) in cores {
        for (h, v) in held.iter_mut().zip(s.client_buffer_bytes) {
            *h = (*h).max(v);
        }
    }
    let mut f = family(encoder, &cat::CLIENT_BUFFER_BYTES)?;
    for kind in super::BufferKind::ALL {
        f.series(&[kind.as_str()], Value::Gauge(held.get(kind.index()).copied().unwrap_or(0)))?;
    }
    Ok(())
}

/// Health is process-wide: every core reports the same figures, so each (pool, backend) is
/// written once, without a `core` label, from the first core that has it.
fn health_metrics(encoder: &mut DescriptorEncoder, cores: &Cores<'_>) -> fmt::Result {
    let mut seen: Vec<(&str, &str, &super::HealthFigures)> = Vec::new();
    for (_, s) in cores {
        for p in &s.pools {
            for b in &p.backends {
                if let Some(h) = &b.health {
                    if !seen.iter().any(|(pool, backend, _)| *pool == p.name && *backend == b.label) {
                        seen.push((&p.name, &b.label, h));
                    }
                }
            }
        }
    }
    let mut f = family(encoder, &cat::BACKEND_HEALTHY)?;
    for (p, b, h) in &seen {
        f.series(&[p, b], Value::Gauge(u64::from(h.healthy)))?;
    }
    let mut f = family(encoder, &cat::BACKEND_LAG_SECONDS)?;
    for (p, b, h) in &seen {
        if let Some(lag) = h.lag_seconds() {
            f.series(&[p, b], Value::Ratio(lag))?;
        }
    }
    let mut f = family(encoder, &cat::BACKEND_LAG_BYTES)?;
    for (p, b, h) in &seen {
        if let Some(bytes) = h.lag_bytes {
            f.series(&[p, b], Value::Gauge(bytes))?;
        }
    }
    let mut f = family(encoder, &cat::BACKEND_ROLE_MISMATCH)?;
    for (p, b, h) in &seen {
        if let Some(mismatch) = h.role_mismatch {
            f.series(&[p, b], Value::Gauge(u64::from(mismatch)))?;
        }
    }
    let mut f = family(encoder, &cat::HEALTH_CHECK_FAILURES)?;
    for (p, b, h) in &seen {
        for (reason, n) in &h.check_failures_total {
            f.series(&[p, b, reason], Value::Count(*n))?;
        }
    }
    Ok(())
}
