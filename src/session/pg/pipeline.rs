//! Extended-protocol batches as the server sees them (#18): once the backend reported an error
//! in a batch whose Sync it has not received yet (after a Flush, or while the batch streams in),
//! the server discards every message up to that Sync; the session then does the same, and the
//! client's Sync goes to the backend, whose ReadyForQuery ends the batch.

use super::prepared::Expect;
use super::{relay, End, Session};
use crate::protocol::pg::backend;

impl Session {
    /// The Sync of a batch that the backend aborted, or that the router refused after part of
    /// it had already reached the backend: only the backend can end the batch it is in.
    pub(super) async fn sync_aborted(&mut self, raw: &[u8]) -> Result<(), End> {
        self.aborted = false;
        self.skipping = false;
        self.flight.mark = None;
        self.bout.clear();
        self.expect.clear();
        if self.backend.is_none() {
            backend::encode_ready_for_query(self.tx, &mut self.out);
            return self.flush_client().await;
        }
        self.bout.extend_from_slice(raw);
        self.expect.push_back(Expect::Sync);
        self.send_backend().await?;
        self.relay(relay::Until::Ready).await
    }
}
