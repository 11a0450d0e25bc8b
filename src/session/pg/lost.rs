//! A backend connection that broke under a session: what its client is told, and whether the
//! session lives on. A session that ends with its connection relays the server's own FATAL
//! when the server sent one before closing (`57P01` after `pg_terminate_backend`, #36), so the
//! client's driver raises what it raises on a direct connection; otherwise the router words
//! the loss itself (`08006`), naming the cause.

use super::{End, Session};
use crate::config::PoolMode;
use crate::error::ErrorCode;
use crate::protocol::pg::{backend, sqlstate, TransactionStatus};
use crate::rt;
use crate::session::client_error::PgClientError;
use crate::session::error::RelayError;

impl Session {
    /// The backend connection broke: tell the client, drop the connection, stay alive — unless
    /// a transaction was open, the session was pinned, or the pool is in session mode. A
    /// session that went on would run the client's next statements without what the server
    /// held for it (a COMMIT would be answered with success, the role would be gone), so the
    /// session ends with a FATAL error as a direct connection would. `cause` is what the
    /// relay saw; it is counted, never worded (the client hears what it always heard).
    pub(super) async fn backend_lost(&mut self, cause: RelayError) -> Result<(), End> {
        let was_in_tx = self.progress.tx != TransactionStatus::Idle;
        let (why, said) = self.drop_lost_backend(&cause);
        self.progress.tx = TransactionStatus::Idle;
        self.state.rollback();
        // A pinned session's server-side state (its role, temporary objects...) died too: going
        // on elsewhere would run its next statements without it, e.g. as the pool user (#18).
        // A session-mode client owns its server session outright, so it ends with it, as a
        // direct connection would (#18).
        let lost = match self.state.pin() {
            _ if was_in_tx => " inside a transaction; the transaction was rolled back".to_owned(),
            Some(pin) => format!("; the session's state ({}) is gone", pin.as_str()),
            // Only the pool it logged in to holds a session-mode client's own server session; a
            // pool it reached by routing (a translation onto an analytics engine, #35) does not.
            None if self.owns_server_session() => "; the server session is gone".to_owned(),
            None => String::new(),
        };
        if !lost.is_empty() {
            tracing::warn!("backend lost{why}{lost}");
            self.tell_fatal(said, &format!("the backend connection was lost{why}{lost}"));
            if self.flush_client().await.is_ok() {
                // The client may have sent more already: closing on it would reset the
                // connection and could destroy the error before the client read it.
                rt::linger_close(&mut self.io.client, rt::now() + super::super::FATAL_LINGER).await;
            }
            return Err(End::Fatal);
        }
        PgClientError::new(
            sqlstate::CONNECTION_FAILURE,
            format!("the backend connection was lost{why}; the statement may not have completed"),
        )
        .encode(&mut self.io.out);
        backend::encode_ready_for_query(TransactionStatus::Idle, &mut self.io.out);
        self.flush_client().await
    }

    /// The held backend went away while the client was idle. When it held the session's
    /// server-side state (a transaction, pinned state, a session-mode client's own server
    /// session) that state is gone, so the client is told and closed, as PostgreSQL itself
    /// would (`Some`). Otherwise (a pooled connection held between statements, or a pool the
    /// session reached only by routing, such as a translation's analytics engine, #35) the
    /// connection is dropped and the session goes on: its next statement takes a new one.
    pub(super) fn lost_while_idle(&mut self, cause: RelayError) -> Option<End> {
        let (why, said) = self.drop_lost_backend(&cause);
        if self.progress.tx == TransactionStatus::Idle && self.state.pin().is_none() && !self.owns_server_session() {
            tracing::debug!("an idle backend connection of pool {} went away", self.pool.name());
            return None;
        }
        self.tell_fatal(said, &format!("the backend connection was lost{why}"));
        Some(End::Fatal)
    }

    /// Whether the held connection is the client's own server session: session mode, on the
    /// pool the client logged in to.
    fn owns_server_session(&self) -> bool {
        self.mode() == PoolMode::Session && **self.pool.name() == *self.identity.home
    }

    /// Gives the broken connection up and forgets what was in flight on it; counts the loss
    /// under the server's FATAL if it sent one (the relay then only saw the close that followed
    /// it), else under `seen`; returns the cause as the router words it (" (…)", or empty) and
    /// the server's FATAL.
    fn drop_lost_backend(&mut self, seen: &RelayError) -> (String, Option<Vec<u8>>) {
        if let Some(mut c) = self.backend.take() {
            c.broken = true;
            self.pool.checkin(c, false);
        }
        self.ex.lost();
        self.cancel.slot.set_running(None);
        let gone = self.ex.flight.fatal.take();
        self.ex.flight.settle();
        self.ctx.counters.relay_failed(gone.as_ref().map_or(seen, |g| &g.cause).code()); // metrics
        let Some(gone) = gone else { return (String::new(), None) };
        let why = gone.cause.cause().map(|m| format!(" ({m})")).unwrap_or_default();
        (why, gone.said)
    }

    /// Queues the FATAL a closing session ends with: the server's own when it sent one.
    fn tell_fatal(&mut self, said: Option<Vec<u8>>, router_text: &str) {
        match said {
            Some(frame) => self.io.out.extend_from_slice(&frame),
            None => PgClientError::new(sqlstate::CONNECTION_FAILURE, router_text).encode_fatal(&mut self.io.out),
        }
    }
}
