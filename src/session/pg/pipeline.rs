//! The end of extended-protocol batches (Flush, Sync), as the server sees them (#18): once the
//! backend reported an error in a batch whose Sync it has not received yet (after a Flush, or
//! while the batch streams in), the server discards every message up to that Sync; the session
//! then does the same, and the client's Sync goes to the backend, whose ReadyForQuery ends the
//! batch. When the router refuses a statement of a batch the backend already runs part of, it
//! makes the server abort that batch as if the statement had failed there. A long batch streams
//! to the backend before its Sync (`stream_batch`).

use super::exchange::SyncStep;
use super::{relay, End, Session};
use crate::protocol::pg::backend;
use crate::session::client_error::PgClientError;

/// Bytes of an extended batch queued for the backend before they are sent ahead of its Sync
/// or Flush (larger than the batches kept for healing and retries, which are never streamed).
pub(super) const STREAM_AT: usize = 64 * 1024;

impl Session {
    /// Flush: what was queued goes to the backend, and its answers so far to the client.
    pub(super) async fn on_flush(&mut self, raw: &[u8]) -> Result<(), End> {
        // Responses before Sync reach the client: a batch split by Flush is never replayed.
        self.ex.flight.mark = None;
        if self.backend.is_none() {
            return self.relay_synth_only().await;
        }
        self.ex.bout.extend_from_slice(raw);
        self.send_backend().await?;
        self.relay(relay::Until::Drained).await
    }

    /// Sync: the batch goes to the backend, and its answers to the client up to ReadyForQuery.
    pub(super) async fn on_sync(&mut self, raw: &[u8]) -> Result<(), End> {
        match self.ex.on_sync(raw, self.backend.is_some(), &mut self.io.out) {
            SyncStep::AnswerHere => {
                backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
                return self.flush_client().await;
            }
            SyncStep::Send { retry: true } => self.arm_retry(), // retry (#11)
            SyncStep::Send { retry: false } => {}
        }
        self.send_backend().await?;
        self.relay(relay::Until::Ready).await
    }

    /// Reports `e` for the current extended batch and skips the rest of it until Sync.
    pub(super) fn fail_batch(&mut self, e: PgClientError) -> Result<(), End> {
        self.ex.refuse_batch();
        e.encode(&mut self.io.out);
        Ok(())
    }

    /// Emits synthesized responses when no backend is involved (a Flush with nothing sent).
    async fn relay_synth_only(&mut self) -> Result<(), End> {
        self.emit_synth();
        self.flush_client().await
    }

    /// Sends a long extended batch on before its Sync, so that the router holds a bounded part
    /// of it, and relays what the backend answered so far: an error reaches the client while
    /// it is still sending (the server reports it at once and skips to Sync), and the answers
    /// are read as the batch goes rather than left to pile up unread.
    pub(super) async fn stream_batch(&mut self) -> Result<(), End> {
        if self.ex.bout.len() < STREAM_AT
            || self.backend.is_none()
            || self.ex.refused()
            || self.ex.aborted()
            || self.is_bridged()
        {
            return Ok(());
        }
        // What was sent cannot be sent again: no stale-plan healing for this batch.
        self.ex.flight.mark = None;
        self.send_backend().await?;
        self.relay(relay::Until::Available).await
    }
}
