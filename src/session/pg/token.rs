//! The causal token on every route a statement can take (#34): `SHOW`, `SET` and `RESET` of
//! `querypilot.causal_token` concern the router, so whether they come as a simple Query or as
//! a Parse (unnamed or named, alone or in a pipeline) the router answers them itself, in their
//! place among the backend's answers, and none reaches a server: a server would keep a
//! placeholder setting the router never sees, and leave it on the pooled connection for the
//! next client. Any other statement naming the token (in a multi-statement text, `SET LOCAL`,
//! `set_config`) is refused with 0A000 before it reaches a server.

use std::collections::HashMap;

use super::route::INVALID_PARAMETER_VALUE;
use super::{End, Session};
use crate::config::Protocol;
use crate::protocol::pg::backend::{self, BackendMessage, FieldDescription};
use crate::protocol::pg::tag::backend as server;
use crate::protocol::pg::{sqlstate, Target};
use crate::routing::causal::{TokenCommand, TokenUse, TOKEN_ELSEWHERE, TOKEN_NAME};
use crate::session::client_error::PgClientError;
use crate::session::engine::ryw;

/// OID of `text`, the causal token's type in `SHOW querypilot.causal_token`.
const TEXT_OID: u32 = 25;
/// A ParameterDescription of no parameters: token statements take none.
const NO_PARAMETERS: [u8; 7] = [server::PARAMETER_DESCRIPTION, 0, 0, 0, 6, 0, 0];

/// The client's prepared statements and portals that are token statements, which the router
/// answers itself (the others are in the session's statement map and on backends).
#[derive(Debug, Default)]
pub(super) struct TokenStatements {
    // ahash: looked up at every Parse and Close, by names a client chooses (see `prepared::Stmts`).
    stmts: HashMap<String, TokenCommand, ahash::RandomState>,
    portals: HashMap<String, TokenCommand, ahash::RandomState>,
}

impl TokenStatements {
    /// Whether the client has none.
    pub fn is_empty(&self) -> bool {
        self.stmts.is_empty() && self.portals.is_empty()
    }

    /// The named and unnamed token statements as they move to a new binary (#40). Portals stay
    /// behind: a session moves between transactions, and PostgreSQL ends portals with them.
    pub fn freeze(&self) -> Vec<(String, TokenCommand)> {
        self.stmts.iter().map(|(name, command)| (name.clone(), command.clone())).collect()
    }

    /// The token statements of a session a former process handed over.
    pub fn thaw(stmts: Vec<(String, TokenCommand)>) -> Self {
        Self { stmts: stmts.into_iter().collect(), portals: HashMap::default() }
    }
}

impl Session {
    /// A simple Query naming the token: answered here (`SHOW`/`SET`/`RESET` alone) or refused;
    /// `None` when `sql` does not name it. Asked of the router, which reads the text for this,
    /// its opener and its effects in one pass (#39).
    pub(super) async fn on_token_query(&mut self, sql: &str) -> Option<Result<(), End>> {
        match self.seat.ctx.token_use(sql, Protocol::Postgres)? {
            TokenUse::Command(command) => {
                if command == TokenCommand::Show {
                    row_type(&command, &mut self.io.out);
                }
                let mut out = std::mem::take(&mut self.io.out);
                if let Err(e) = self.run_token(&command, &mut out) {
                    e.encode(&mut out);
                }
                self.io.out = out;
            }
            TokenUse::Elsewhere => elsewhere().encode(&mut self.io.out),
        }
        backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
        Some(self.io.flush().await)
    }

    /// A Parse: a token statement is kept by the router (ParseComplete in its place), one that
    /// names the token otherwise fails the batch; `None`: an ordinary statement.
    /// A repeated unnamed Parse's text is kept with its answer in the router's memo (#39).
    pub(super) fn on_token_parse(&mut self, name: &str, query: &str) -> Option<Result<(), End>> {
        let command = match self.seat.ctx.token_use(query, Protocol::Postgres) {
            Some(TokenUse::Command(command)) => Some(command),
            Some(TokenUse::Elsewhere) => return Some(self.fail_token_batch(elsewhere())),
            None => None,
        };
        if !name.is_empty() && self.progress.tokens.stmts.contains_key(name) {
            return Some(self.fail_token_batch(super::prepared::duplicate(name)));
        }
        let Some(command) = command else {
            // A new unnamed statement replaces a token statement of that name. Looked for only
            // when there are any: removing hashes the name even from an empty map, and lends
            // the session a box for the statements (#39).
            if !self.progress.tokens.stmts.is_empty() {
                self.progress.tokens.stmts.remove(name);
            }
            return None;
        };
        if self.stmts.contains_key(name) {
            return None; // the ordinary path reports the duplicate
        }
        self.progress.tokens.stmts.insert(name.to_owned(), command);
        self.ex.answer_here(server::PARSE_COMPLETE);
        Some(Ok(()))
    }

    /// A Bind of a token statement makes a token portal (BindComplete in its place); a Bind
    /// of another statement replaces a token portal of the same name.
    pub(super) fn on_token_bind(&mut self, portal: &str, statement: &str) -> Option<Result<(), End>> {
        let Some(command) = self.progress.tokens.stmts.get(statement).cloned() else {
            if !self.progress.tokens.portals.is_empty() {
                self.progress.tokens.portals.remove(portal); // as at Parse (#39)
            }
            return None;
        };
        self.progress.tokens.portals.insert(portal.to_owned(), command);
        self.ex.answer_here(server::BIND_COMPLETE);
        Some(Ok(()))
    }

    /// A Describe of a token statement (no parameters, then its row type) or portal.
    pub(super) fn on_token_describe(&mut self, kind: Target, name: &str) -> Option<Result<(), End>> {
        let map = if kind == Target::Statement { &self.progress.tokens.stmts } else { &self.progress.tokens.portals };
        let command = map.get(name)?;
        let mut answer = Vec::with_capacity(64);
        if kind == Target::Statement {
            answer.extend_from_slice(&NO_PARAMETERS);
        }
        row_type(command, &mut answer);
        self.ex.answer(answer);
        Some(Ok(()))
    }

    /// An Execute of a token portal: runs it here.
    pub(super) fn on_token_execute(&mut self, portal: &str) -> Option<Result<(), End>> {
        let command = self.progress.tokens.portals.get(portal)?.clone();
        let mut answer = Vec::with_capacity(64);
        Some(match self.run_token(&command, &mut answer) {
            Ok(()) => {
                self.ex.answer(answer);
                Ok(())
            }
            Err(e) => self.fail_token_batch(e),
        })
    }

    /// A Close of a token statement or portal (CloseComplete in its place).
    pub(super) fn on_token_close(&mut self, kind: Target, name: &str) -> Option<Result<(), End>> {
        let map =
            if kind == Target::Statement { &mut self.progress.tokens.stmts } else { &mut self.progress.tokens.portals };
        if map.is_empty() {
            return None; // nearly every session: no hashing of the name (a Close flood, #33)
        }
        map.remove(name)?;
        self.ex.answer_here(server::CLOSE_COMPLETE);
        Some(Ok(()))
    }

    /// Runs `command`, writing its rows and CommandComplete to `out`. An invalid token changes
    /// nothing.
    fn run_token(&mut self, command: &TokenCommand, out: &mut Vec<u8>) -> Result<(), PgClientError> {
        match command {
            TokenCommand::Show => {
                let value = ryw::show_token(&self.seat.ryw);
                let _ = backend::encode_data_row(&[Some(value.as_bytes())], out);
            }
            TokenCommand::Set(value) => ryw::set_token(&mut self.seat.ryw, value)
                .map_err(|e| PgClientError::new(INVALID_PARAMETER_VALUE, e.to_string()))?,
            TokenCommand::Default { .. } => {}
        }
        let _ = BackendMessage::CommandComplete(command.tag()).encode(out);
        Ok(())
    }

    /// Fails the batch with `e` after the router's answers due before it.
    fn fail_token_batch(&mut self, e: PgClientError) -> Result<(), End> {
        self.emit_synth();
        self.fail_batch(e)
    }
}

/// The row type of `command`: a text column for `SHOW`, none otherwise.
fn row_type(command: &TokenCommand, out: &mut Vec<u8>) {
    if *command != TokenCommand::Show {
        out.extend_from_slice(&[server::NO_DATA, 0, 0, 0, 4]);
        return;
    }
    let field = FieldDescription {
        name: TOKEN_NAME,
        table_oid: 0,
        column_attr: 0,
        type_oid: TEXT_OID,
        type_size: -1,
        type_modifier: -1,
        format: 0,
    };
    let _ = backend::encode_row_description(&[field], out);
}

fn elsewhere() -> PgClientError {
    PgClientError::new(sqlstate::FEATURE_NOT_SUPPORTED, TOKEN_ELSEWHERE)
}
