//! The end of extended-protocol batches (Flush, Sync), as the server sees them (#18): once the
//! backend reported an error in a batch whose Sync it has not received yet (after a Flush, or
//! while the batch streams in), the server discards every message up to that Sync; the session
//! then does the same, and the client's Sync goes to the backend, whose ReadyForQuery ends the
//! batch. When the router refuses a statement of a batch the backend already runs part of, it
//! makes the server abort that batch as if the statement had failed there. A long batch streams
//! to the backend before its Sync (`stream_batch`).
//!
//! Bounded (#33, #36): a batch without Sync never waits in the router. When the client stops
//! sending mid-batch, what it sent goes to the backend after a short pause and its answers
//! (an error above all) reach the client while it waits (`push_unsynced`,
//! `wait_client_mid_batch`), as from the server, which runs each message as it arrives. A
//! client that sends without reading gets backpressure, not buffering: past
//! [`BACKLOG`] unanswered messages the router flushes the backend and relays its answers
//! before it reads more (`stream_batch`).

use super::exchange::SyncStep;
use super::xact::Unseen;
use super::{relay, End, Session, READ_CHUNK};
use crate::protocol::pg::backend;
use crate::protocol::pg::tag::frontend as client;
use crate::rt;
use crate::session::client_error::PgClientError;

/// Bytes of an extended batch queued for the backend before they are sent ahead of its Sync
/// or Flush (larger than the batches kept for healing and retries, which are never streamed).
pub(super) const STREAM_AT: usize = 64 * 1024;

/// Messages of a batch the router may have sent or answered itself without their responses
/// having reached the client: past it, the backend is flushed and read before the client is.
/// What each message costs the router (its expectation, about 24 bytes) stays bounded however
/// long a pipeline without Sync runs.
pub(super) const BACKLOG: usize = 4096;

/// How long a client that stopped mid-batch may stay silent before what it sent goes to the
/// backend: drivers write a pipeline query by query, and a batch routed as a unit should
/// arrive whole; a client waiting for answers without Sync or Flush waits this much longer
/// than on the server.
const PAUSE: std::time::Duration = std::time::Duration::from_millis(50);

/// A Flush message: the backend sends what it has buffered, nothing else changes.
const FLUSH: [u8; 5] = [client::FLUSH, 0, 0, 0, 4];

impl Session {
    /// Flush: what was queued goes to the backend, and its answers so far to the client.
    pub(super) async fn on_flush(&mut self, raw: &[u8]) -> Result<(), End> {
        // Responses before Sync reach the client: a batch split by Flush is never replayed.
        self.ex.sent_before_sync();
        if self.seat.conn.is_none() {
            return self.relay_synth_only().await;
        }
        self.ex.forward_unanswered(raw);
        self.send_backend().await?;
        self.relay(relay::Until::Drained).await
    }

    /// Sync: the batch goes to the backend, and its answers to the client up to ReadyForQuery.
    pub(super) async fn on_sync(&mut self, raw: &[u8]) -> Result<(), End> {
        let retry = match self.ex.on_sync(raw, self.seat.conn.is_some(), &mut self.io.out) {
            SyncStep::AnswerHere => {
                self.progress.unseen = Unseen::No;
                backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
                return self.io.flush().await;
            }
            SyncStep::Send { retry } => retry,
        };
        // causal reads (#34): ahead of the retry's copy of the batch, which then carries it too.
        self.probe_unseen_batch();
        if retry {
            self.arm_retry(); // retry (#11)
        }
        if self.ex.aborting() {
            // The stand-in Parse of a refused statement is unnamed: it replaced the client's.
            self.progress.unnamed.elsewhere();
        }
        if self.sync_probe_due() {
            return self.on_probed_sync().await; // causal reads (#34)
        }
        self.send_backend_answered().await?;
        self.relay(relay::Until::Ready).await
    }

    /// Reports `e` for the current extended batch and skips the rest of it until Sync.
    pub(super) fn fail_batch(&mut self, e: PgClientError) -> Result<(), End> {
        // What the router answers itself for messages before the refused one (a named Parse
        // held for its first use) succeeded, as on the server: those answers come first.
        self.emit_synth();
        self.ex.refuse_batch();
        e.encode(&mut self.io.out);
        Ok(())
    }

    /// Emits synthesized responses when no backend is involved (a Flush with nothing sent).
    async fn relay_synth_only(&mut self) -> Result<(), End> {
        self.emit_synth();
        self.io.flush().await
    }

    /// Whether the batch grew long enough that [`Session::stream_batch`] may have something to
    /// do: looked at before its future is made, once per client message (#39).
    pub(super) fn streams_batch(&self) -> bool {
        self.ex.expects().len() >= BACKLOG || self.ex.queued().len() >= STREAM_AT
    }

    /// Sends a long extended batch on before its Sync, so that the router holds a bounded part
    /// of it, and relays what the backend answered so far: an error reaches the client while
    /// it is still sending (the server reports it at once and skips to Sync), and the answers
    /// are read as the batch goes rather than left to pile up unread.
    pub(super) async fn stream_batch(&mut self) -> Result<(), End> {
        if self.ex.expects().len() >= BACKLOG && !self.is_bridged() && !self.ex.refused() && !self.ex.aborted() {
            // As a server whose output fills while its client does not read: what is owed
            // goes out (the client's socket then pushes back) before more is taken in.
            return self.on_flush(&FLUSH).await;
        }
        if self.ex.queued().len() < STREAM_AT
            || self.seat.conn.is_none()
            || self.ex.refused()
            || self.ex.aborted()
            || self.is_bridged()
        {
            return Ok(());
        }
        // What was sent cannot be sent again: no stale-plan healing for this batch.
        self.ex.sent_before_sync();
        self.send_backend().await?;
        self.relay(relay::Until::Available).await
    }

    /// Whether part of a batch is held or queued unsent while nothing more of the client's is
    /// buffered: [`Session::push_unsynced`] has something to do.
    pub(super) fn unsynced_unsent(&self) -> bool {
        let unsent = !self.batch.is_empty() || (!self.ex.queued().is_empty() && self.seat.conn.is_some());
        let partial = self.io.buf.len() > self.io.pos;
        unsent && !self.is_bridged() && !partial
    }

    /// The client stopped in the middle of a batch (no Sync or Flush, nothing more buffered,
    /// nothing more within [`PAUSE`]): what it sent goes to the backend now, as the server runs
    /// each message as it arrives, so an error reaches the client that waits for it (#36). A
    /// batch held for unit routing is routed by what it holds, as at a Flush: a later statement
    /// that the pool it went to cannot take is handled as the routing-safety rules say
    /// (`replica_hold_refusal`). `Some`: the client sent more meanwhile (what the read gave).
    pub(super) async fn push_unsynced(&mut self) -> Result<Option<std::io::Result<usize>>, End> {
        if !self.unsynced_unsent() {
            return Ok(None);
        }
        let more = rt::read_some(&mut self.io.stream, &mut self.io.buf, READ_CHUNK);
        if let Ok(read) = rt::within(Some(PAUSE), more).await {
            return Ok(Some(read));
        }
        if !self.batch.is_empty() {
            self.release_batch().await?;
        }
        if self.ex.queued().is_empty() || self.seat.conn.is_none() || self.ex.refused() || self.ex.aborted() {
            return Ok(None);
        }
        // What was sent cannot be sent again: no stale-plan healing for this batch.
        self.ex.sent_before_sync();
        self.send_backend().await?;
        self.relay(relay::Until::Available).await?;
        Ok(None)
    }

    /// Whether the backend runs part of a batch whose Sync has not come, so that its answers
    /// must be relayed while the session waits for the client.
    pub(super) fn mid_batch(&self) -> bool {
        self.ex.awaiting() && self.seat.conn.is_some() && !self.is_bridged()
    }

    /// Waits for the client while a held backend may speak: mid-batch, with what the backend
    /// answers relayed (#36), or between statements, with what it sends unprompted relayed;
    /// within `limit` (`idle_transaction_timeout`). `Ok(None)`: something was relayed, wait
    /// again.
    pub(super) async fn wait_held(
        &mut self,
        mid_batch: bool,
        limit: Option<std::time::Duration>,
    ) -> Result<Option<std::io::Result<usize>>, End> {
        let wait = async {
            if mid_batch {
                self.wait_client_mid_batch().await
            } else {
                self.wait_client_or_backend().await
            }
        };
        let Ok(waited) = rt::within(limit, wait).await else {
            return Err(crate::session::driver::idle_transaction_expired(self).await);
        };
        waited
    }

    /// Waits for the client while the backend runs part of its batch, relaying what the
    /// backend answers meanwhile. `Ok(None)`: something was relayed, wait again.
    async fn wait_client_mid_batch(&mut self) -> Result<Option<std::io::Result<usize>>, End> {
        let Some(conn) = self.seat.conn.as_mut() else {
            return Ok(Some(rt::read_some(&mut self.io.stream, &mut self.io.buf, READ_CHUNK).await));
        };
        let (client, cbuf) = (&mut self.io.stream, &mut self.io.buf);
        let woke = rt::race(async { Some(rt::read_some(client, cbuf, READ_CHUNK).await) }, async {
            // Closed or failed: the relay below finds out and tells the client.
            let _ = rt::read_some(&mut conn.stream, &mut conn.rbuf, READ_CHUNK).await;
            None
        })
        .await;
        if let Some(read) = woke {
            return Ok(Some(read));
        }
        self.relay(relay::Until::Available).await?;
        Ok(None)
    }
}
