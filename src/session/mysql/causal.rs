//! Causal reads for MySQL sessions on MariaDB (#22): a writing commit's GTID arrives in the
//! commit's own OK packet (backend connections track `last_gtid`, #34, so no query follows the
//! write and `ROW_COUNT()`, `FOUND_ROWS()` and the warnings read as on a direct connection); the
//! session keeps its high-water GTID position and sends a later read to a replica only once that
//! replica has applied it (cached `@@gtid_slave_pos` from the health probe, else
//! `MASTER_GTID_WAIT` up to `routing.causal_wait`); otherwise the primary serves it, or it
//! fails with `replica_fallback = "error"`. A commit that reports no GTID (`sql_log_bin = 0`)
//! keeps the session's reads on the primary and hands out the token `primary`; one inside a
//! result set, whose EOF packet carries no session state (`SELECT f(n)` of an inserting
//! function in autocommit), does so until the connection's GTID debt is collected for the
//! session as it gives the connection up ([`Session::settle_owed_gtid`]); a failed write that
//! committed nothing changes nothing (told without a statement the client could notice,
//! [`CommitGtid`]). Also answers
//! the causal token statements, the same two as for PostgreSQL clients:
//! `SHOW querypilot.causal_token` and `SET querypilot.causal_token = '...'`, for bridged
//! sessions too (their positions are WAL offsets, learned in `bridged::io`).

use super::warning::encode_result;
use super::{stmt, Session};
use crate::config::{Protocol, ReadYourWrites};
use crate::id::{GtidPosition, Position};
use crate::pool::health::my_failure_rolled_back;
use crate::pool::{Conn, ConnInfo, CorePool};
use crate::protocol::mysql::errcode::ErrorNumber;
use crate::protocol::mysql::tracking::GtidChange;
use crate::protocol::mysql::{encode_packets, encode_text_row, ColumnDefinition41, ColumnType, OkPacket};
use crate::routing::causal::{
    mentions_token, names_underscored, token_command, TokenCommand, TOKEN_ELSEWHERE, TOKEN_NAME,
};
use crate::session::client_error::MyClientError;
use crate::session::engine::ryw;
use crate::session::placement;
use crate::sql::analyze::{session_effects, Effect};
use crate::sql::lexer::{Lexer, TokenKind};
use crate::sql::Dialect;
use std::rc::Rc;

/// `ER_WRONG_VALUE_FOR_VAR` (1231, SQLSTATE 42000): an invalid causal token, as the server
/// refuses a bad value for a variable.
pub(super) const ER_WRONG_VALUE_FOR_VAR: ErrorNumber = ErrorNumber { code: 1231, sql_state: *b"42000" };
/// `ER_NOT_SUPPORTED_YET` (1235, SQLSTATE 42000): a statement naming the causal token that the
/// router does not answer alone (#34); it never reaches a server.
const ER_NOT_SUPPORTED_YET: ErrorNumber = ErrorNumber { code: 1235, sql_state: *b"42000" };
/// `ER_UNKNOWN_ERROR`: no replica caught up and the configuration forbids the primary.
pub(super) const ER_NO_CAUGHT_UP_REPLICA: ErrorNumber = ErrorNumber { code: 1105, sql_state: *b"HY000" };
/// `utf8mb3_general_ci`, the token column's collation (the token is ASCII).
const UTF8_CHARSET: u16 = 33;

/// What the command being relayed committed (#34): its OK packets' `last_gtid`, and whether
/// a failure of it rolls back everything it changed.
#[derive(Debug, Default)]
pub(super) struct CommitGtid {
    seen: Seen,
    /// One statement that commits nothing before it fails: a query or DML (a function or
    /// trigger it fires runs inside it). Not a CALL (a procedure commits as it goes), nor a
    /// statement that commits implicitly (DDL, TRUNCATE, LOCK TABLES), nor a multi-statement
    /// text; unknown (the default) counts as not.
    atomic: bool,
}

/// What the OK packets of the command being relayed said of `last_gtid` (#34).
#[derive(Debug, Default)]
enum Seen {
    /// Nothing: no commit reached the binary log.
    #[default]
    None,
    /// The commits' GTIDs, merged.
    Position(GtidPosition),
    /// A commit reported a GTID the router cannot read.
    Unreadable,
}

/// First words of the statements [`CommitGtid::atomic`] holds for.
const ATOMIC: [&str; 8] = ["SELECT", "INSERT", "REPLACE", "UPDATE", "DELETE", "WITH", "VALUES", "TABLE"];

impl CommitGtid {
    /// Before `sql` (of `statements` statements) is sent: nothing seen yet. `atomic_word`:
    /// [`opens_with_atomic_word`] of `sql` when the caller kept it.
    pub(super) fn expecting(sql: &str, statements: u16, atomic_word: Option<bool>) -> CommitGtid {
        let atomic = statements == 1 && atomic_word.unwrap_or_else(|| opens_with_atomic_word(sql));
        CommitGtid { seen: Seen::None, atomic }
    }

    /// Takes one OK packet's report; `last` is the connection's last known `last_gtid`.
    pub(super) fn note(&mut self, change: GtidChange<'_>, last: &mut String) {
        let value = match change {
            GtidChange::Unchanged => return,
            GtidChange::Unreadable => {
                self.seen = Seen::Unreadable;
                return;
            }
            GtidChange::Value(v) => String::from_utf8_lossy(v),
        };
        last.clear();
        last.push_str(&value);
        let parsed = GtidPosition::parse(&value).filter(|p| *p != GtidPosition::default());
        self.seen = match (std::mem::take(&mut self.seen), parsed) {
            (Seen::Unreadable, _) | (_, None) => Seen::Unreadable,
            (Seen::Position(mut old), Some(p)) => {
                old.include(&p);
                Seen::Position(old)
            }
            (Seen::None, Some(p)) => Seen::Position(p),
        };
    }
}

/// Whether the first token of `sql` that is not a comment is one of the [`ATOMIC`] words. Asked
/// of every statement: the common text starts with such a word and whitespace after it, which
/// its bytes settle; anything else (a comment first, a word run into punctuation, digits or a
/// non-ASCII letter) goes to the lexer, whose start and eight word compares were ~270
/// instructions a statement (#39).
pub(super) fn opens_with_atomic_word(sql: &str) -> bool {
    const fn space(b: u8) -> bool {
        matches!(b, b' ' | b'\t' | b'\n' | b'\r')
    }
    let b = sql.as_bytes();
    let rest = b.iter().position(|&c| !space(c)).and_then(|at| b.get(at..)).unwrap_or_default();
    let len = rest.iter().position(|c| !c.is_ascii_alphabetic()).unwrap_or(rest.len());
    match rest.split_at_checked(len) {
        Some((word, after)) if len > 0 && after.first().is_none_or(|&c| space(c)) => {
            ATOMIC.iter().any(|w| word.eq_ignore_ascii_case(w.as_bytes()))
        }
        _ => first_word_lexed_atomic(sql),
    }
}

/// [`opens_with_atomic_word`] read by the lexer.
pub(super) fn first_word_lexed_atomic(sql: &str) -> bool {
    let first = Lexer::new(sql, Dialect::MySql).find(|t| t.kind != TokenKind::Comment);
    first.is_some_and(|t| ATOMIC.iter().any(|w| t.is_word(w)))
}

/// The setting [`Session::refuses_tracking_change`] refuses a change of.
const TRACKING_SETTING: &str = "session_track_system_variables";

/// Whether `b` spells [`TRACKING_SETTING`] in any ASCII case. Asked of every text query (causal
/// reads are the default): found by the text's underscores, as the causal token's name is;
/// comparing every window was ~240 instructions of a sysbench point select (#39).
fn names_tracking_setting(b: &[u8]) -> bool {
    names_underscored(b, TRACKING_SETTING.as_bytes(), 7)
}

impl Session {
    /// causal: what the command just relayed committed, from its OK packets' `last_gtid`
    /// (`seen`). A GTID when no write was expected (a function or procedure the analysis
    /// cannot see into) raises the position too. `failed`: the command's first answer was an
    /// error, so it may have committed nothing at all.
    pub(super) async fn learn_commit(&mut self, commit: CommitGtid, failed: bool) {
        let due = self.seat.ryw.position_due();
        match commit.seen {
            Seen::Position(p) if due => self.seat.ryw.learned(Some(Position::Gtid(p))),
            Seen::Position(p) => self.seat.ryw.adopt(Position::Gtid(p)),
            Seen::Unreadable => self.seat.ryw.learned(None),
            Seen::None if !due => {}
            Seen::None if failed && commit.atomic => self.learn_after_failure().await,
            // Committed without a GTID (`sql_log_bin = 0`, or nothing reached the binary log),
            // or failed after committing who knows what (a procedure, DDL): only the primary is
            // sure to have it, and `gtid:` would be a token SET refuses. Or it committed inside
            // a statement whose result set ended in an EOF packet, which carries no session
            // state (an autocommit `SELECT f(n)` of an inserting function): the connection then
            // owes the GTID (`MyInfo::owes_gtid`), which its next OK reports, this session's or,
            // once given up, collected for it ([`Session::settle_owed_gtid`]).
            Seen::None => self.seat.ryw.learned(None),
        }
    }

    /// causal (#34): before the session gives `conn` up, collects the GTID it owes
    /// ([`crate::pool::MyInfo::owes_gtid`]) for this session's position, so that it is never
    /// reported to (and credited to) the next client; `false` when that failed and the
    /// connection must be closed instead. A collected GTID counts as a commit position learned,
    /// so the session's reads go to replicas that applied it. Outside `causal` mode nothing
    /// reads positions, and the round trip is not spent.
    pub(super) async fn settle_owed_gtid(&mut self, conn: &mut Conn) -> bool {
        let owes = matches!(conn.info(), ConnInfo::MySql(i) if i.owes_gtid);
        if !owes || self.seat.ctx.read_your_writes() != ReadYourWrites::Causal {
            return true;
        }
        let db = self.state.db().unwrap_or(&self.seat.pool.config.database).to_owned();
        let Some(commit) = stmt::collect_owed_gtid(conn, &db).await else {
            tracing::debug!("causal reads: cannot collect the GTID a connection owes; closing it");
            return false;
        };
        match commit.seen {
            Seen::Position(p) => self.seat.ryw.learned(Some(Position::Gtid(p))),
            Seen::Unreadable => self.seat.ryw.learned(None),
            Seen::None => {}
        }
        true
    }

    /// causal: one statement that commits nothing before it fails ([`CommitGtid`]) failed. An
    /// error packet carries no session state, but such a failure keeps only changes to
    /// non-transactional tables, which the server then warns of: asked with `SHOW WARNINGS`,
    /// which changes nothing the client can read (`FOUND_ROWS()`, `ROW_COUNT()`, the list
    /// itself). Nothing kept: the session's reads stay where they were. The client has its
    /// answer first. A client's own `max_error_count` could have dropped the warning: then
    /// the reads stay on the primary, as when the answer cannot be read.
    async fn learn_after_failure(&mut self) {
        let _ = self.io.flush().await;
        let bridged = self.is_bridged();
        let clean = self.link.pos == 0;
        let limited = self.state.iter().any(|(name, _)| name == "max_error_count");
        let Some(conn) = self.seat.conn.as_mut().filter(|_| !bridged && clean && !limited) else {
            self.seat.ryw.learned(None);
            return;
        };
        match my_failure_rolled_back(conn).await {
            Ok(true) => self.seat.ryw.nothing_committed(),
            Ok(false) => self.seat.ryw.learned(None),
            Err(e) => {
                tracing::debug!("causal reads: cannot tell whether the failed statement kept changes: {e}");
                conn.broken |= e.breaks_connection();
                self.seat.ryw.learned(None);
            }
        }
    }

    /// Where a causal read goes when no replica caught up within `wait`: the MySQL primary
    /// pool (one whose backends speak `speaking`, when given), or the error
    /// `replica_fallback = "error"` asks for. Counted either way.
    pub(super) fn causal_fallback(
        &self,
        wait: std::time::Duration,
        speaking: Option<Protocol>,
    ) -> Result<Rc<CorePool>, MyClientError> {
        self.seat
            .ctx
            .causal_fallback(&self.seat.pool, Protocol::MySql, speaking)
            .ok_or_else(|| MyClientError::new(ER_NO_CAUGHT_UP_REPLICA, placement::behind(&self.seat.pool, wait)))
    }

    /// causal token: answers `SHOW querypilot.causal_token` (a one-row result set, empty when
    /// the session needs no position, `primary` when it lost it) and `SET
    /// querypilot.causal_token = '...'` itself; `false` when `sql` is neither. An invalid token
    /// gets error 1231 and changes nothing.
    pub(super) fn on_token_query(&mut self, sql: &str) -> bool {
        if self.refuses_tracking_change(sql) {
            return true;
        }
        let Some(command) = token_command(sql, Dialect::MySql) else {
            if !mentions_token(sql) {
                return false;
            }
            MyClientError::new(ER_NOT_SUPPORTED_YET, TOKEN_ELSEWHERE).encode(self.client.reply_seq, &mut self.io.out);
            return true;
        };
        let status = self.tx.status;
        match command {
            TokenCommand::Show => {
                let value = ryw::show_token(&self.seat.ryw);
                let column = ColumnDefinition41 {
                    catalog: b"def",
                    schema: b"",
                    table: b"",
                    org_table: b"",
                    name: TOKEN_NAME.as_bytes(),
                    org_name: b"",
                    charset: UTF8_CHARSET,
                    column_length: 1024,
                    column_type: ColumnType::VAR_STRING,
                    flags: 0,
                    decimals: 0,
                };
                let mut def = Vec::with_capacity(64);
                column.encode(&mut def);
                let mut eof = Vec::with_capacity(5);
                crate::protocol::mysql::EofPacket { warnings: 0, status }.encode(&mut eof);
                let mut row = Vec::with_capacity(value.len() + 2);
                encode_text_row(&[Some(value.as_bytes())], &mut row);
                encode_result(self.client.reply_seq, [&[1u8][..], &def, &eof, &row], status, &mut self.io.out);
            }
            TokenCommand::Set(value) => match ryw::set_token(&mut self.seat.ryw, &value) {
                Ok(()) => self.token_ok(),
                Err(e) => MyClientError::new(ER_WRONG_VALUE_FOR_VAR, e.to_string())
                    .encode(self.client.reply_seq, &mut self.io.out),
            },
            TokenCommand::Default { .. } => self.token_ok(),
        }
        true
    }

    /// COM_STMT_PREPARE of a statement naming the causal token: refused with 1235 before it
    /// reaches a server (which would refuse the unknown variable with a less helpful error or,
    /// for `set_config`-like texts, keep it on the pooled connection); the router answers the
    /// token only in a text query. `false` when `sql` does not name it.
    pub(super) fn refuses_token_prepare(&mut self, sql: &[u8]) -> bool {
        if self.refuses_tracking_change(&String::from_utf8_lossy(sql)) {
            return true;
        }
        if !mentions_token(&String::from_utf8_lossy(sql)) {
            return false;
        }
        let text = "querypilot.causal_token cannot be prepared (COM_STMT_PREPARE): send SHOW or SET querypilot.causal_token as a text query, which the router answers itself";
        MyClientError::new(ER_NOT_SUPPORTED_YET, text).encode(self.client.reply_seq, &mut self.io.out);
        true
    }

    /// causal (#34): refuses, with 1235 before it reaches a server, a statement that sets
    /// `session_track_system_variables`: without `last_gtid` tracked, commits would report no
    /// GTID and every write would keep the session on the primary. No client sees tracked
    /// state through the router (it never offers `CLIENT_SESSION_TRACK`), so the setting has
    /// nothing to give a client; the refusal says so rather than quietly ignoring it.
    fn refuses_tracking_change(&mut self, sql: &str) -> bool {
        const NAME: &str = TRACKING_SETTING;
        let named = names_tracking_setting(sql.as_bytes());
        // A bridged session's backends are PostgreSQL: the setting is the bridge's to answer.
        if !named || self.seat.ctx.read_your_writes() != ReadYourWrites::Causal || self.is_bridged() {
            return false;
        }
        let effects = session_effects(sql, Dialect::MySql);
        if !effects.effects().any(|e| matches!(e, Effect::Set { name, .. } | Effect::Reset(name) if name == NAME)) {
            return false;
        }
        let text = "session_track_system_variables is kept by the router for causal reads (it tracks last_gtid), \
                    and the router offers no CLIENT_SESSION_TRACK to clients, so the setting has no effect to give";
        MyClientError::new(ER_NOT_SUPPORTED_YET, text).encode(self.client.reply_seq, &mut self.io.out);
        true
    }

    /// The OK a token statement that succeeded gets.
    fn token_ok(&mut self) {
        let mut ok = Vec::with_capacity(16);
        OkPacket { status: self.tx.status, ..OkPacket::default() }.encode(self.client.caps, &mut ok);
        encode_packets(&ok, self.client.reply_seq, &mut self.io.out);
    }
}

#[cfg(test)]
mod tests;
