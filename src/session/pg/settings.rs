//! Session settings on backend connections, beyond the replay on checkout (`Placed::replay`):
//! following what the server reports (ParameterStatus) during a client's statements, putting a
//! client's own startup values back after it RESETs them, and running settings statements
//! whose reports the caller needs (the login's probe of startup values).

use super::relay::frame_at;
use super::Session;
use crate::pool::{Conn, ConnInfo};
use crate::protocol::pg::tag::{backend as server, field};
use crate::protocol::pg::{frontend, BackendMessage, Frame};
use crate::rt;
use crate::session::cross;
use crate::session::error::RelayError;

/// Largest backend message a settings exchange accepts (its answers are small).
const SETTINGS_MAX: usize = 1 << 20;

/// How running settings statements on a backend failed.
#[derive(Debug)]
pub(super) enum SettingsError {
    /// The server refused a statement: its SQLSTATE and message.
    Refused { code: String, message: String },
    /// The connection broke or spoke out of turn.
    Lost(RelayError),
}

/// Runs `sql` as a simple query on `conn`; returns the parameters the server reported while
/// running it, in order. Any error fails the whole (one implicit transaction, so nothing of it
/// stays applied).
pub(super) async fn run_reporting(conn: &mut Conn, sql: &str) -> Result<Vec<(String, String)>, SettingsError> {
    let mut out = Vec::with_capacity(sql.len() + 8);
    frontend::encode_query(sql, &mut out)
        .map_err(|e| SettingsError::Refused { code: "08P01".into(), message: e.to_string() })?;
    rt::write_all(&mut conn.stream, &out).await.map_err(|e| SettingsError::Lost(RelayError::BackendClosed(Some(e))))?;
    let mut reports = Vec::new();
    let mut failure = None;
    loop {
        let (tag, body) = cross::pg_frame(conn, SETTINGS_MAX).await.map_err(SettingsError::Lost)?;
        match BackendMessage::decode(&Frame::new(tag, &body)) {
            Ok(BackendMessage::ParameterStatus { name, value }) => reports.push((name.to_owned(), value.to_owned())),
            Ok(BackendMessage::ErrorResponse(fields)) if failure.is_none() => {
                failure = Some(SettingsError::Refused {
                    code: fields.code().unwrap_or("XX000").to_owned(),
                    message: fields.get(field::MESSAGE).unwrap_or("").to_owned(),
                });
            }
            Ok(BackendMessage::ReadyForQuery(_)) => return failure.map_or(Ok(reports), Err),
            Ok(_) => {}
            Err(e) => return Err(malformed(e)),
        }
    }
}

/// A backend message the settings exchange cannot read.
fn malformed(e: impl std::fmt::Display) -> SettingsError {
    SettingsError::Lost(RelayError::Malformed(e.to_string()))
}

impl Session {
    /// The backend sent a ParameterStatus (at `pos`, `len` bytes in its read buffer) during
    /// this client's exchange: the session's view of its parameters follows it.
    pub(super) fn note_parameter_status(&mut self, pos: usize) {
        let Some(frame) = self.seat.conn.as_ref().and_then(|c| frame_at(&c.rbuf, pos)) else { return };
        if let Ok(BackendMessage::ParameterStatus { name, value }) =
            BackendMessage::decode(&Frame::new(server::PARAMETER_STATUS, frame.body()))
        {
            if name.eq_ignore_ascii_case("standard_conforming_strings") {
                // The server's report beats the router's reading of SETs: a function, a role
                // default or a rollback may have changed it where no SET showed (#19).
                self.identity.lex.mode.unknown = false;
                self.identity.lex.mode.set_standard_conforming_strings(value);
            }
            self.state.report(name, value);
        }
    }

    /// A NotificationResponse (at `pos`, `len` bytes in the backend's read buffer) sent by the
    /// client's own backend carries the pid the client was given, so that a listener tells its
    /// own notifications apart as on a direct connection.
    pub(super) fn own_notification_pid(&mut self, pos: usize) {
        let given = self.seat.cancel.key.pid;
        let Some(conn) = self.seat.conn.as_mut() else { return };
        let ConnInfo::Pg(info) = conn.info() else { return };
        let server = info.pid.to_be_bytes();
        let len = frame_at(&conn.rbuf, pos).map_or(0, |f| f.len());
        if len >= 9 && info.pid != given {
            if let Some(pid) = conn.rbuf.get_mut(pos + 5..pos + 9) {
                if *pid == server {
                    pid.copy_from_slice(&given.to_be_bytes());
                }
            }
        }
    }

    /// After a committed RESET: puts the client's own startup values back on the backend (the
    /// server reset them to the router's), and tells the client the values it ends up with
    /// ahead of the ReadyForQuery just queued, as the server would have.
    pub(super) async fn restore_startup_values(&mut self) {
        // Only between exchanges: with more responses due (a pipeline), the backend is busy
        // and the restore waits for a later ReadyForQuery.
        if !self.ex.expects().is_empty() || self.ex.awaiting() {
            return;
        }
        let Some(sql) = self.state.take_restore() else { return };
        self.progress.unnamed.elsewhere(); // a simple query of the router's drops it
        let Some(conn) = self.seat.conn.as_mut() else { return };
        match run_reporting(conn, &sql).await {
            Ok(reports) => {
                let mut status = Vec::new();
                for (name, value) in reports {
                    if self.state.report(&name, &value) {
                        let _ = BackendMessage::ParameterStatus { name: &name, value: &value }.encode(&mut status);
                    }
                }
                insert_before_ready(&mut self.io.out, &status);
                if let Some(c) = self.seat.conn.as_mut() {
                    c.settings = self.state.signature();
                }
            }
            Err(e) => {
                // The connection cannot be trusted with this client's settings: give it up,
                // and the next statement replays everything on another.
                tracing::warn!("restoring startup settings after RESET failed: {e:?}");
                if let Some(mut c) = self.seat.conn.take() {
                    c.broken = true;
                    self.seat.pool.checkin(c, false);
                }
            }
        }
    }
}

/// Inserts `msgs` before the ReadyForQuery that ends `out`, or appends them when `out` does not
/// end with one.
pub(super) fn insert_before_ready(out: &mut Vec<u8>, msgs: &[u8]) {
    let at = out.len().saturating_sub(6);
    let ends_ready = out.get(at..).is_some_and(|z| {
        z.len() == 6 && z.first() == Some(&server::READY_FOR_QUERY) && z.get(1..5) == Some(&[0, 0, 0, 5])
    });
    if ends_ready {
        out.splice(at..at, msgs.iter().copied());
    } else {
        out.extend_from_slice(msgs);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameter_status_goes_before_the_ready_for_query() {
        let mut out = b"C\0\0\0\x0aRESET\0Z\0\0\0\x05I".to_vec();
        insert_before_ready(&mut out, b"S..");
        assert_eq!(out, b"C\0\0\0\x0aRESET\0S..Z\0\0\0\x05I");
        let mut out = b"C\0\0\0\x0aRESET\0".to_vec();
        insert_before_ready(&mut out, b"S..");
        assert_eq!(out, b"C\0\0\0\x0aRESET\0S..");
    }
}
