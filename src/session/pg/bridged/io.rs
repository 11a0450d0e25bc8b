//! MySQL backend I/O for a bridged PostgreSQL session: checkout (setting `utf8mb4` and
//! `NO_BACKSLASH_ESCAPES` once per connection), sending one command, reading payloads, streaming a response through the
//! bridge's `PgResultWriter`, and giving the connection back.

use crate::bridge::pg_result::{PgResultWriter, PgStep};
use crate::config::{PoolMode, Protocol};
use crate::pool::ConnInfo;
use crate::protocol::mysql::{decode_payload, encode_packets, Command};
use crate::protocol::pg::TransactionStatus;
use crate::session::client_error::PgClientError;
use crate::session::cross::{self, malformed, Sink, Translate, MAX_BACKEND_FRAME};
use crate::session::error::RelayError;

use super::super::Session;

/// `conn.settings` of a connection the bridge set up with [`BRIDGE_SETUP`] (any value but 0, so
/// a native session resets the connection before using it).
const BRIDGE_SETTINGS: u64 = 0x5150_7574_6638_6e62;

/// PostgreSQL clients speak UTF-8, and are told `standard_conforming_strings = on`: the
/// connection reads backslashes as ordinary characters too (the server's other modes stay).
const BRIDGE_SETUP: &[u8] =
    b"SET NAMES utf8mb4, sql_mode = CONCAT_WS(',', NULLIF(@@sql_mode, ''), 'NO_BACKSLASH_ESCAPES')";

impl Session {
    /// Attaches a MySQL connection; a fresh one gets [`BRIDGE_SETUP`].
    pub(super) async fn my_backend(&mut self) -> Result<(), PgClientError> {
        if self.seat.conn.is_some() {
            return Ok(());
        }
        let conn = self.seat.checkout::<PgClientError>(Protocol::MySql, false, &self.identity.user).await?;
        let fresh = conn.settings != BRIDGE_SETTINGS;
        *self.seat.conn = Some(conn);
        if fresh {
            if !self.my_quiet(BRIDGE_SETUP, 0).await {
                self.drop_my_backend();
                return Err(PgClientError::new(
                    crate::protocol::pg::sqlstate::CONNECTION_FAILURE,
                    "cannot set utf8mb4 and NO_BACKSLASH_ESCAPES on the MySQL backend connection",
                ));
            }
            if let Some(c) = self.seat.conn.as_mut() {
                c.settings = BRIDGE_SETTINGS;
            }
        }
        Ok(())
    }

    /// Runs `SET` statement `sql` without telling the client anything (`status`: the
    /// connection's flags before it); whether it succeeded.
    pub(super) async fn my_quiet(&mut self, sql: &[u8], status: u16) -> bool {
        let mut w = PgResultWriter::new(vec!["SET"], false, false, &[], self.my_caps(), status);
        let r = self.my_run(&Command::Query(sql), &mut w, &mut Vec::new(), false).await;
        r.is_ok() && !w.errored
    }

    /// Sends `cmd` and feeds its whole response through `writer` to the client, in order.
    pub(super) async fn my_answer(
        &mut self,
        cmd: &Command<'_>,
        writer: &mut PgResultWriter<'_>,
    ) -> Result<(), RelayError> {
        let mut out = std::mem::take(&mut self.io.out);
        let r = self.my_run(cmd, writer, &mut out, true).await;
        self.io.out = out;
        r
    }

    /// Capabilities of the attached MySQL connection.
    pub(super) fn my_caps(&self) -> u64 {
        match self.seat.conn.as_ref().map(|c| c.info()) {
            Some(ConnInfo::MySql(info)) => info.capabilities,
            _ => 0,
        }
    }

    /// Closes the attached connection (an open transaction rolls back).
    pub(super) fn drop_my_backend(&mut self) {
        self.seat.close_conn();
        self.progress.tx = TransactionStatus::Idle;
    }

    /// Sends `cmd` (sequence 0), marking the statement cancellable by `KILL QUERY`.
    pub(super) async fn my_send(&mut self, cmd: &Command<'_>) -> Result<(), RelayError> {
        let caps = self.my_caps();
        self.seat.cancel.slot.settle().await; // an earlier statement's KILL must not reach this one
        let conn = self.seat.conn.as_mut().ok_or(RelayError::BackendClosed(None))?;
        self.seat.cancel.slot.running_on(conn, Protocol::MySql);
        let mut payload = Vec::with_capacity(64);
        cmd.encode(caps, &mut payload);
        let mut packets = Vec::with_capacity(payload.len() + 4);
        encode_packets(&payload, 0, &mut packets);
        self.ex.discard_queued();
        cross::send(conn, &packets).await
    }

    /// Reads one logical payload and its last sequence id.
    pub(super) async fn my_payload(&mut self) -> Result<(Vec<u8>, u8), RelayError> {
        let conn = self.seat.conn.as_mut().ok_or(RelayError::BackendClosed(None))?;
        cross::my_payload(conn, MAX_BACKEND_FRAME).await
    }

    /// Sends `cmd` and feeds its whole response through `writer` into `out`; with `flush`
    /// (`out` is what the client gets next, in order) it is written out as it grows large.
    pub(super) async fn my_run(
        &mut self,
        cmd: &Command<'_>,
        writer: &mut PgResultWriter<'_>,
        out: &mut Vec<u8>,
        flush: bool,
    ) -> Result<(), RelayError> {
        self.my_send(cmd).await?;
        let mut sink = Sink { out, client: flush.then_some(&mut self.io.stream), flushed: false };
        cross::stream(&mut self.seat, writer, &mut sink).await?;
        if let Some(ConnInfo::MySql(info)) = self.seat.conn.as_mut().map(|c| c.info_mut()) {
            info.status = writer.status;
        }
        self.progress.tx = writer.transaction_status();
        Ok(())
    }

    /// Gives the connection back when the pool mode allows: no transaction open and not
    /// session pooling.
    pub(super) fn my_maybe_release(&mut self) {
        if self.seat.pool.config.mode != PoolMode::Session && self.progress.tx == TransactionStatus::Idle {
            self.my_release(false);
        }
    }

    /// Returns the connection to the pool. One inside a transaction is closed (rolling it
    /// back); so is one at the end of a session-pooled session, whose session state (variables,
    /// temporary tables) must not reach another client.
    pub(in crate::session::pg) fn my_release(&mut self, session_end: bool) {
        let keeps_state = session_end && self.seat.pool.config.mode == PoolMode::Session;
        self.seat.check_in(self.progress.tx == TransactionStatus::Idle && !keeps_state);
        self.progress.tx = TransactionStatus::Idle;
    }
}

/// A MySQL result, read payload by payload, for a PostgreSQL client.
impl Translate for PgResultWriter<'_> {
    type End = ();

    fn feed(
        &mut self,
        bytes: &[u8],
        out: &mut Vec<u8>,
        reply: &mut Vec<u8>,
    ) -> Result<(usize, Option<()>), RelayError> {
        let mut taken = 0;
        while let Some(f) =
            decode_payload(bytes.get(taken..).unwrap_or_default(), MAX_BACKEND_FRAME).map_err(malformed)?
        {
            taken += f.consumed;
            match self.on_payload(&f.payload, out).map_err(malformed)? {
                PgStep::More => {}
                PgStep::Done => return Ok((taken, Some(()))),
                PgStep::LocalInfile => {
                    // No file: an empty packet ends the transfer; the server then answers.
                    encode_packets(&[], f.last_seq.wrapping_add(1), reply);
                    break;
                }
            }
        }
        Ok((taken, None))
    }

    fn errored(&self) -> bool {
        self.errored
    }
}
