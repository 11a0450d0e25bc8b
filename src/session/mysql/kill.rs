//! `KILL [QUERY | CONNECTION] n` and `COM_PROCESS_KILL` from a MySQL client (#18): `n` is the
//! id the router greeted a session with, or the server thread id a session-mode session holds
//! (what its `CONNECTION_ID()` shows); either finds the session on whichever core owns it. A
//! pooled server connection belongs to no client, so its id is refused like an unknown one.

use super::{End, Session, ER_CONNECTION_KILLED};
use crate::config::PoolMode;
use crate::id::{CancelKey, KillRequest, KillTarget};
use crate::protocol::mysql::errcode::{ErrorNumber, ER_QUERY_INTERRUPTED};
use crate::session::client_error::MyClientError;

/// `ER_NO_SUCH_THREAD`.
const ER_NO_SUCH_THREAD: ErrorNumber = ErrorNumber { code: 1094, sql_state: *b"HY000" };

impl Session {
    /// `KILL [QUERY|CONNECTION] id` / COM_PROCESS_KILL: `id` is the router-issued id of a
    /// session, or the server thread id a session-mode session holds on this client's pool
    /// (what its `CONNECTION_ID()` shows). QUERY cancels that session's running statement and
    /// answers once the cancel reached the server; CONNECTION ends the session. Any other id
    /// gets the server's "Unknown thread id": a pooled server connection belongs to no client,
    /// so killing it could hit whoever borrowed it (#18).
    pub(super) async fn kill(&mut self, id: u32, connection: bool) -> Result<(), End> {
        let own_server = self.slot_server_thread() == Some(id);
        let target = match CancelKey::from_mysql_connection_id(id) {
            Some(key) => KillTarget::Session(key),
            None => KillTarget::Thread { id, pool: self.seat.pool.config.name.clone() },
        };
        if own_server || target == KillTarget::Session(self.seat.cancel.key) {
            // As the server answers a client's KILL of itself: the statement interrupted is the
            // KILL itself, and KILL CONNECTION also closes the connection.
            let (number, text) = match connection {
                true => (ER_CONNECTION_KILLED, "Connection was killed"),
                false => (ER_QUERY_INTERRUPTED, "Query execution was interrupted"),
            };
            MyClientError::new(number, text).encode(self.client.reply_seq, &mut self.io.out);
            if connection {
                let _ = self.io.flush().await;
                return Err(End::KilledByClient);
            }
            return Ok(());
        }
        if self.seat.ctx.kill(KillRequest { target, connection }).await {
            return self.ok_local();
        }
        let text = format!(
            "Unknown thread id: {id} (through the router, KILL takes the id a client was greeted with, or \
             the server id of a session-mode client's connection)"
        );
        MyClientError::new(ER_NO_SUCH_THREAD, text).encode(self.client.reply_seq, &mut self.io.out);
        Ok(())
    }

    /// The server thread id of the connection a session-mode session holds.
    fn slot_server_thread(&self) -> Option<u32> {
        match (self.seat.pool.config.mode, self.seat.conn.as_ref().map(|c| c.info())) {
            (PoolMode::Session, Some(crate::pool::ConnInfo::MySql(info))) => Some(info.thread_id),
            _ => None,
        }
    }
}

/// `KILL [QUERY | CONNECTION] <number>`: (id, whether the connection itself is meant).
pub(super) fn parse_kill(sql: &str) -> Option<(u32, bool)> {
    // Asked of every text query, which almost never is one: the lexer's start and first word
    // were ~190 instructions of a sysbench point select (#39).
    if !crate::sql::lexer::may_start_with(sql, &["kill"]) {
        return None;
    }
    kill_lexed(sql)
}

/// [`parse_kill`] read by the lexer.
fn kill_lexed(sql: &str) -> Option<(u32, bool)> {
    use crate::sql::lexer::{Lexer, TokenKind};
    let mut words = Lexer::new(sql, crate::sql::Dialect::MySql)
        .filter(|t| t.kind != TokenKind::Comment && t.kind != TokenKind::Semicolon);
    if !words.next()?.is_word("KILL") {
        return None;
    }
    let mut t = words.next()?;
    let mut connection = true;
    if t.is_word("HARD") || t.is_word("SOFT") {
        t = words.next()?;
    }
    if t.is_word("QUERY") {
        connection = false;
        t = words.next()?;
    } else if t.is_word("CONNECTION") {
        t = words.next()?;
    }
    let id = t.text.parse().ok().filter(|_| t.kind == TokenKind::Number)?;
    words.next().is_none().then_some((id, connection))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_forms() {
        assert_eq!(parse_kill("KILL 42"), Some((42, true)));
        assert_eq!(parse_kill("kill query 7;"), Some((7, false)));
        assert_eq!(parse_kill("KILL CONNECTION 9"), Some((9, true)));
        assert_eq!(parse_kill("KILL HARD QUERY 9"), Some((9, false)));
        assert_eq!(parse_kill("KILL QUERY ID 9"), None);
        assert_eq!(parse_kill("SELECT 1"), None);
        assert_eq!(parse_kill("KILL 1; SELECT 2"), None);
    }

    #[test]
    fn the_prefilter_passes_every_kill() {
        for sql in [
            "KILL 42",
            "  kill query 7;",
            "\u{b}Kill Connection 9",
            ";KILL 3",
            "/* app */ KILL 5",
            "# note\nKILL 6",
            "-- note\nKILL QUERY 8",
            "/*!KILL 10*/",
            "KILL/**/11",
            "KILL 1; SELECT 2",
            "KILLS 1",
            "KILL",
            "SELECT 1",
            "SELECT 'KILL 1'",
            "--x\nKILL 1",
            "`KILL` 1",
            "",
        ] {
            assert_eq!(parse_kill(sql), kill_lexed(sql), "{sql:?}");
        }
        for (sql, id) in [("/* app */ KILL 5", 5), ("/*!KILL 10*/", 10), (";KILL 3", 3), ("KILL/**/11", 11)] {
            assert_eq!(parse_kill(sql), Some((id, true)), "{sql:?}");
        }
    }
}
