//! The statement a session is timing for per-shape statistics (`/api/stats/digests`): started
//! when the statement is routed, finished at the next ReadyForQuery or the next routed
//! statement, whichever comes first.

use std::time::{Duration, Instant};

use crate::sql::fingerprint::Fingerprint;

/// One finished statement.
pub(super) struct Finished<'a> {
    pub fingerprint: Fingerprint,
    pub sql: &'a str,
    pub elapsed: Duration,
    pub rows: u64,
    pub error: bool,
}

/// The statement being timed; its text buffer is reused so timing costs no allocation.
#[derive(Default)]
pub(super) struct DigestTracker {
    running: Option<(Fingerprint, Instant)>,
    sql: String,
    rows: u64,
    error: bool,
}

impl DigestTracker {
    /// Starts timing `sql`.
    pub fn begin(&mut self, fingerprint: Fingerprint, sql: &str, now: Instant) {
        self.running = Some((fingerprint, now));
        self.sql.clear();
        self.sql.push_str(sql);
        self.rows = 0;
        self.error = false;
    }

    /// Counts rows reported by a CommandComplete tag (`SELECT 3`, `UPDATE 7`, `INSERT 0 1`).
    pub fn command_complete(&mut self, tag: &[u8]) {
        let digits = tag.rsplit(|b| *b == b' ').next().unwrap_or_default();
        if let Some(n) = std::str::from_utf8(digits).ok().and_then(|d| d.parse::<u64>().ok()) {
            self.rows += n;
        }
    }

    /// The statement failed.
    pub fn error(&mut self) {
        self.error = true;
    }

    /// Stops timing and returns what was measured, if a statement was running.
    pub fn finish(&mut self, now: Instant) -> Option<Finished<'_>> {
        let (fingerprint, started) = self.running.take()?;
        Some(Finished {
            fingerprint,
            sql: &self.sql,
            elapsed: now.saturating_duration_since(started),
            rows: self.rows,
            error: self.error,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_rows_from_tags_and_errors() {
        let mut d = DigestTracker::default();
        let t0 = Instant::now();
        assert!(d.finish(t0).is_none(), "nothing running");
        d.begin(Fingerprint(7), "SELECT 1", t0);
        d.command_complete(b"SELECT 3");
        d.command_complete(b"INSERT 0 2");
        d.command_complete(b"BEGIN");
        d.error();
        let f = d.finish(t0 + Duration::from_millis(5)).expect("running");
        assert_eq!((f.fingerprint, f.sql, f.rows, f.error), (Fingerprint(7), "SELECT 1", 5, true));
        assert_eq!(f.elapsed, Duration::from_millis(5));
        assert!(d.finish(t0).is_none(), "finished once");
    }
}
