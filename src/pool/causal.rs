//! causal reads (#22): a checkout that lends only a connection to a backend known to have
//! applied a session's commit position, reading (PostgreSQL) or waiting for (MariaDB) the
//! position on demand when the health probe's cached one is too old.

use std::rc::Rc;
use std::time::{Duration, Instant};

use super::{health, Conn, CorePool, Eligible, PassThrough, PoolError, Shape};
use crate::config::Protocol;
use crate::id::Position;
use crate::metrics::CausalOutcome;
use crate::rt;

/// How often a causal read re-reads a standby's replay position while it waits for it
/// (PostgreSQL; MariaDB's `MASTER_GTID_WAIT` waits on the server instead).
const CAUSAL_POLL: Duration = Duration::from_millis(1);

impl CorePool {
    /// causal (#22): borrows a connection to a backend that has applied `position`, or `None`
    /// when none has within `wait` — the caller then reads on the primary. Cached positions
    /// (from the health probe) decide first; when none is far enough, the position is checked
    /// on demand on a connection to the backend the balance policy chooses, until it is there
    /// or `wait` is over.
    pub async fn checkout_caught_up(
        self: &Rc<Self>,
        protocol: Protocol,
        who: Option<&PassThrough>,
        deadline: Instant,
        position: &Position,
        wait: Duration,
    ) -> Result<Option<Conn>, PoolError> {
        let caught_up = |i: usize| self.backends.get(i).is_some_and(|b| b.health.has_applied(position));
        let u = self.usable_now();
        if (0..self.backends.len()).any(|i| self.usable(i, u) && caught_up(i)) {
            self.counters.causal_read(CausalOutcome::ServedByReplica); // metrics
            return self
                .checkout_where(protocol, who, deadline, Eligible(Some(&caught_up)), &Shape::default(), None)
                .await
                .map(Some);
        }
        let started = rt::now();
        let mut conn = self.checkout(protocol, who, deadline).await?;
        let applied = match (position, protocol) {
            (Position::Wal(p), Protocol::Postgres) => self.poll_replayed(&mut conn, *p, started + wait).await,
            (Position::Gtid(g), Protocol::MySql) => health::my_wait_for_gtid(&mut conn, g, wait).await,
            // A position of the other engine (a token handed across protocols) is never
            // known to be applied here.
            _ => Ok(false),
        };
        self.counters.causal_waited(rt::since(started)); // metrics
        match applied {
            Ok(true) => {
                if let Some(b) = self.backends.get(conn.backend()) {
                    b.health.note_applied(position);
                }
                self.counters.causal_read(CausalOutcome::Waited); // metrics
                Ok(Some(conn))
            }
            Ok(false) => {
                self.checkin(conn, true);
                Ok(None)
            }
            Err(e) => {
                conn.broken |= e.breaks_connection();
                self.checkin(conn, true);
                Ok(None)
            }
        }
    }

    /// PostgreSQL: reads the standby's replay position on `conn` every [`CAUSAL_POLL`] until
    /// it reaches `position` (true) or `until` passes (false).
    async fn poll_replayed(
        &self,
        conn: &mut Conn,
        position: u64,
        until: Instant,
    ) -> Result<bool, health::PositionError> {
        loop {
            let replayed = health::pg_replay_position(conn).await?;
            if let Some(b) = self.backends.get(conn.backend()) {
                b.health.note_replayed(replayed);
            }
            if replayed >= position {
                return Ok(true);
            }
            if rt::now() >= until {
                return Ok(false);
            }
            rt::sleep(CAUSAL_POLL).await;
        }
    }
}
