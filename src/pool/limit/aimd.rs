//! One shape's learned concurrency limit: additive increase, multiplicative decrease, driven by
//! two congestion signals (#41).
//!
//! Why AIMD on the pool's queue and not a latency gradient (Netflix's Gradient2, Envoy's
//! adaptive concurrency) or Vegas: those shrink a limit when the shape's *own* latency rises over
//! its learned minimum or average. The shape that hurts a pool most often is not one that slows
//! down when more of it runs (a 20 ms report stays 20 ms at 64 at once) but one whose
//! connections everyone else queues behind: the damage is the pool's queue, which its own
//! latency does not show. And a latency signal hits the victims: measured on a loaded router, the
//! ordinary lookups' hold times jittered over twice their average, and a gradient cut them to a
//! limit of 1 and refused them while the report kept six connections (perf/RESULTS.md). So a
//! sample is congested when a lighter shape (a shorter round trip) was queueing for a connection
//! as this one gave its connection back; congestion cuts the limit by a fifth, at most once per
//! the shape's own round trip without a queue (one burst is one cut), and each uncongested sample
//! of a shape using its limit adds 1/limit (about one per round trip). A 1 ms lookup keeps its
//! room and regains it twenty times faster than a 20 ms aggregate that made it queue; the
//! aggregate's limit settles where the lookups stop queueing, never below 1. Pure: time is a
//! parameter.

use std::time::{Duration, Instant};

/// Factor a congested round cuts the limit by.
const BACKOFF: f64 = 0.8;

/// What one checkout of a shape measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// How long the connection was held (the wait for it is left out: other shapes cause it).
    pub latency: Duration,
    /// Whether a lighter shape was queueing for a connection as this one was given back (the
    /// pool's table fills it in): the pool was full, and this shape's connections were in the way.
    pub queued: bool,
    /// Permits of the shape in use when it was released, itself included.
    pub in_use: u32,
}

/// A learned limit between 1 and `max`.
#[derive(Debug, Clone, PartialEq)]
pub struct Aimd {
    limit: f64,
    max: f64,
    /// The shortest latency seen, seconds: the shape's round trip without any queue.
    floor: Option<f64>,
    last_cut: Option<Instant>,
}

impl Aimd {
    /// A limit starting at `max` (a shape is not limited until it congests the pool).
    pub fn new(max: u32) -> Self {
        let max = f64::from(max.max(1));
        Self { limit: max, max, floor: None, last_cut: None }
    }

    /// The limit in force: whole permits, never below 1.
    pub fn limit(&self) -> u32 {
        // In 1..=max by construction, so the cast cannot truncate.
        self.limit.floor().max(1.0) as u32
    }

    /// The shape's round trip without a queue (its shortest latency seen; zero before any).
    pub fn round_trip(&self) -> Duration {
        Duration::from_secs_f64(self.floor.unwrap_or(0.0))
    }

    /// Learns from one released permit at `now`.
    pub fn sample(&mut self, s: Sample, now: Instant) {
        let secs = s.latency.as_secs_f64();
        self.floor = Some(self.floor.map_or(secs, |f| f.min(secs)));
        if s.queued {
            // One cut per round trip of this shape without a queue: the samples of one congested
            // round all report it, and cutting for each would collapse the limit.
            let round = self.round_trip();
            if self.last_cut.is_none_or(|at| now.saturating_duration_since(at) >= round) {
                self.limit = (self.limit * BACKOFF).max(1.0);
                self.last_cut = Some(now);
            }
        } else if f64::from(s.in_use) + 1.0 >= self.limit {
            // Grow only while the limit is what holds the shape back.
            self.limit = (self.limit + 1.0 / self.limit).min(self.max);
        }
    }
}
