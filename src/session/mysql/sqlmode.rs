//! The SQL mode a MySQL session's statements are lexed in, as the servers report it (#19).
//! `ANSI_QUOTES` and `NO_BACKSLASH_ESCAPES` change what a statement's text means, and each
//! backend connection has its own `sql_mode`: the server's global one from its login (which
//! may differ between primary and replica, or change under a running router), or whatever the
//! session set, through a SET the router reads or a prepared SET, a procedure or an executable
//! comment it does not. MariaDB reports both modes in every answer's status flags, and the
//! connection keeps its last ones, so a statement routed to a replica is checked against the
//! connection it is about to run on before anything is sent.
//!
//! Owns no state of its own: it reads the session's lexer mode and its backend connection.

use super::route::ER_HELD_REPLICA;
use super::Session;
use crate::pool::{Conn, ConnInfo};
use crate::protocol::mysql::response::sql_mode_flags;
use crate::session::client_error::MyClientError;
use crate::session::placement::Placed;
use crate::sql::mode::LexMode;
use crate::sql::Dialect;

impl Session {
    /// The session's lexer mode with the sql_mode flags `conn` last reported (at its login, after
    /// a replayed SET or a reset, or in its last answer); without a connection, the mode as it is.
    pub(super) fn server_mode(&self, conn: Option<&Conn>) -> LexMode {
        let mut mode = self.routing.lex.mode;
        if let Some(ConnInfo::MySql(info)) = conn.map(|c| c.info()) {
            let (no_backslash_escapes, ansi_quotes) = sql_mode_flags(info.status, &info.server_version);
            mode.follow_mysql_server(no_backslash_escapes, ansi_quotes);
        }
        mode
    }

    /// For `sql`, routed in the session's lexer mode to the replica connection it is about to
    /// run on (taken here if the session has none yet): when that connection's sql_mode differs
    /// (its login saw another global mode, say) and the text could read differently there,
    /// analysis of the text cannot be trusted. Nothing was sent yet, so the statement moves to
    /// the primary (where it reads as it would for a client connected there), or is refused when
    /// the session is held on that connection. The session's mode becomes the connection's.
    pub(super) async fn keep_misread_off_the_replica(&mut self, sql: &str) -> Result<(), MyClientError> {
        self.ensure_backend().await?;
        let actual = self.server_mode(self.seat.conn.as_ref());
        if actual == self.routing.lex.mode {
            return Ok(());
        }
        self.routing.lex.mode = actual;
        if !actual.may_misread(sql, Dialect::MySql) {
            return Ok(());
        }
        let refuse = |why: &str| {
            let text = format!(
                "statement is not replica-safe (lexer mode {} on the replica connection): {why}",
                actual.describe()
            );
            MyClientError::new(ER_HELD_REPLICA, text)
        };
        if self.holding().held() {
            return Err(refuse("the session is held on that connection"));
        }
        let Some(primary) = self.primary_pool() else { return Err(refuse("there is no primary pool")) };
        self.release_backend(false).await;
        self.seat.pool = primary;
        Ok(())
    }
}
