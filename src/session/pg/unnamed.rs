//! The client's unnamed statement follows it across backend connections (#36). On the server,
//! Parse of the unnamed statement replaces it, a simple Query or a failed Parse drops it, and it
//! lives until then — across Syncs, which is where transaction pooling may hand the client
//! another connection. psql's `\gdesc` parses in one round trip and describes in the next. So the
//! session keeps the Parse it last sent for its unnamed statement, and before a Bind or Describe
//! of the unnamed statement on a connection that may hold someone else's, it sends that Parse
//! again (or, when the client has none, a Close of the connection's, so the server reports it
//! missing as it would to the client directly).
//!
//! Held: one Parse message per session, of at most [`KEEP_MAX`] bytes. A longer one is not
//! kept: using it on another connection fails with an error that says so.

use std::rc::Rc;

use super::prepared::{Expect, Stmt};
use super::{End, Session};
use crate::protocol::pg::sqlstate;
use crate::session::client_error::PgClientError;
use crate::session::placement::Placed;

/// Longest Parse of the unnamed statement the session keeps to send again.
const KEEP_MAX: usize = 64 * 1024;

/// The client's unnamed statement, as far as the router can re-create it.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Kept {
    /// The client has none.
    #[default]
    None,
    /// It was created by the Parse the session holds.
    Parse,
    /// Its Parse was longer than [`KEEP_MAX`].
    TooLong,
}

/// What the session knows of its client's unnamed statement.
#[derive(Debug, Default)]
pub(super) struct Unnamed {
    /// The Parse that created it, as the server got it (translated, renamed); its buffer is
    /// reused from one statement to the next.
    parse: Vec<u8>,
    /// Whether the client has one, and whether `parse` holds it.
    kept: Kept,
    /// The router statement its text executes (`EXECUTE name`), needed wherever it runs.
    executes: Option<Rc<Stmt>>,
    /// The attached connection's unnamed statement is the client's (or, when the client has
    /// none, the connection has none either).
    here: bool,
}

/// The client's unnamed statement on its way to a new binary (#40).
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) enum FrozenUnnamed {
    None,
    /// The Parse that created it, as the server gets it.
    Parse(Vec<u8>),
    TooLong,
}

impl Unnamed {
    /// What a new binary needs of it (#40); `None` when its text runs a named statement (the
    /// session then stays).
    pub fn freeze(&self) -> Option<FrozenUnnamed> {
        if self.executes.is_some() {
            return None;
        }
        Some(match self.kept {
            Kept::None => FrozenUnnamed::None,
            Kept::Parse => FrozenUnnamed::Parse(self.parse.clone()),
            Kept::TooLong => FrozenUnnamed::TooLong,
        })
    }

    /// The statement [`Unnamed::freeze`] kept, on no connection yet.
    pub fn thaw(frozen: FrozenUnnamed) -> Unnamed {
        let (parse, kept) = match frozen {
            FrozenUnnamed::None => (Vec::new(), Kept::None),
            FrozenUnnamed::Parse(parse) => (parse, Kept::Parse),
            FrozenUnnamed::TooLong => (Vec::new(), Kept::TooLong),
        };
        Unnamed { parse, kept, executes: None, here: false }
    }

    /// The client's unnamed Parse `parse` goes to the attached connection.
    pub fn parsed(&mut self, parse: &[u8], executes: Option<Rc<Stmt>>) {
        self.parse.clear();
        if parse.len() > KEEP_MAX {
            self.parse = Vec::new();
            self.kept = Kept::TooLong;
        } else {
            self.parse.extend_from_slice(parse);
            self.kept = Kept::Parse;
        }
        self.executes = executes;
        self.here = true;
    }

    /// The server dropped the unnamed statement on the attached connection (a simple Query, a
    /// Close of it, a Parse of it that did not run).
    pub fn dropped(&mut self) {
        self.kept = Kept::None;
        self.executes = None;
        self.here = true;
    }

    /// The attached connection's unnamed statement is no longer known to be the client's: a
    /// connection was attached, or the router ran a query of its own on it.
    pub fn elsewhere(&mut self) {
        self.here = false;
    }
}

impl Session {
    /// Queues the client's Parse of its unnamed statement, `parse` as the server gets it;
    /// `executes`: the router statement its text runs (`EXECUTE name`).
    pub(super) async fn forward_unnamed_parse(&mut self, parse: &[u8], executes: Option<Rc<Stmt>>) -> Result<(), End> {
        self.forward_ext(parse, Expect::Parse { swallow: false, key: None }).await?;
        if self.seat.conn.is_some() && !self.ex.refused() {
            self.progress.unnamed.parsed(parse, executes);
        }
        Ok(())
    }

    /// Queues a Bind or Describe (`raw`) of the unnamed statement, on a connection that has it.
    pub(super) async fn forward_to_unnamed(&mut self, raw: &[u8], expect: Expect) -> Result<(), End> {
        if let Err(e) = self.ensure_backend().await {
            return self.fail_batch(e);
        }
        if let Err(e) = self.follow_unnamed() {
            return self.fail_batch(e);
        }
        self.forward_ext(raw, expect).await
    }

    /// Before a Bind or Describe of the unnamed statement on the attached connection: makes the
    /// connection's unnamed statement the client's, queuing a Parse (or a Close) whose answer
    /// the client does not get; an error when the session did not keep its Parse.
    fn follow_unnamed(&mut self) -> Result<(), PgClientError> {
        if self.progress.unnamed.here || self.seat.conn.is_none() {
            return Ok(());
        }
        match self.progress.unnamed.kept {
            Kept::None => {
                self.ex.close_on_backend("", None);
            }
            Kept::Parse => {
                if let Some(inner) = self.progress.unnamed.executes.clone() {
                    self.prepare_executed(&inner);
                }
                self.ex.forward(&self.progress.unnamed.parse, Expect::Parse { swallow: true, key: None });
            }
            Kept::TooLong => {
                let text = format!(
                    "the unnamed prepared statement is too long (over {KEEP_MAX} bytes) for the router to \
                     prepare again on another server connection; use a named statement"
                );
                return Err(PgClientError::new(sqlstate::PROGRAM_LIMIT_EXCEEDED, text));
            }
        }
        self.progress.unnamed.here = true;
        Ok(())
    }
}

#[cfg(test)]
mod tests;
