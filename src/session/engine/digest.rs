//! The statement a session times for per-shape statistics (`/api/stats/digests`), both wires:
//! from routing to the end of its response (PostgreSQL: ReadyForQuery or the next routed
//! statement, whichever comes first). One whose response never came is dropped by the next
//! start. The figures are stored per core (`session::digest`).

use std::time::{Duration, Instant};

use crate::config::Protocol;
use crate::sql::fingerprint::Fingerprint;

/// One execution to record in the core's statistics.
#[derive(Debug, Clone, Copy)]
pub struct Execution<'a> {
    /// The statement's fingerprint (as routing computed it).
    pub fingerprint: Fingerprint,
    /// The SQL text, normalized only if the shape is new.
    pub sql: &'a str,
    /// The client's protocol.
    pub protocol: Protocol,
    /// From routing the statement to the end of its response.
    pub elapsed: Duration,
    /// Rows returned or affected.
    pub rows: u64,
    /// Whether it ended in an error.
    pub error: bool,
    /// The pool it ran on.
    pub pool: &'a str,
}

/// The statement being timed; its text buffer is reused so timing costs no allocation.
#[derive(Debug, Default)]
pub struct Timing {
    running: Option<(Fingerprint, Instant)>,
    sql: String,
    rows: u64,
    error: bool,
}

impl Timing {
    /// Starts timing `sql` at `now` (a statement still timed is dropped: its response never ended).
    pub fn begin(&mut self, fingerprint: Fingerprint, sql: &str, now: Instant) {
        self.running = Some((fingerprint, now));
        self.sql.clear();
        self.sql.push_str(sql);
        self.rows = 0;
        self.error = false;
    }

    /// The statement being timed (fingerprint and text), if any: the shape a checkout made now
    /// is for (#41).
    pub fn statement(&self) -> Option<(u64, &str)> {
        self.running.map(|(f, _)| (f.0, self.sql.as_str()))
    }

    /// Adds rows the response returned or said were affected.
    pub fn rows(&mut self, n: u64) {
        self.rows = self.rows.saturating_add(n);
    }

    /// Notes whether (part of) the response was an error; one error marks the statement.
    pub fn failed(&mut self, error: bool) {
        self.error |= error;
    }

    /// Stops timing at `now`: the execution measured, if any, of a `protocol` client on `pool`.
    pub fn finish<'a>(&'a mut self, now: Instant, protocol: Protocol, pool: &'a str) -> Option<Execution<'a>> {
        let (fingerprint, started) = self.running.take()?;
        Some(Execution {
            fingerprint,
            sql: &self.sql,
            protocol,
            elapsed: now.saturating_duration_since(started),
            rows: self.rows,
            error: self.error,
            pool,
        })
    }
}

#[cfg(test)]
mod tests;
