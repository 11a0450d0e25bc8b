//! SQL `EXECUTE name` / `DEALLOCATE [PREPARE] name` / `DEALLOCATE ALL` naming statements the
//! client prepared with the protocol's Parse (#18). On the server those names are one
//! namespace; through the router a protocol-level statement lives on backends under its router
//! name (`prepared`), so SQL that names it is answered or rewritten here. psycopg built against
//! libpq < 17 evicts its statement cache with SQL `DEALLOCATE`, so this is ordinary traffic.
//!
//! `EXECUTE name` is renamed on every route a text takes (#36): a simple query (also among
//! several statements), an unnamed Parse, and a named Parse — whose statement then runs the
//! client's statement as it was when it was prepared: the router prepares that one first
//! wherever it prepares the outer one (the server fixes a statement's row type at Parse).
//! `DEALLOCATE` is handled only as a query that is exactly one such statement. Anything else (a
//! name the client prepared with SQL `PREPARE`, which pins the session and lives on the server
//! under its own name) goes to the server unchanged.

use std::ops::Range;
use std::rc::Rc;

use super::prepared::{server_name, Expect, Stmt};
use super::{End, Session};
use crate::config::Protocol;
use crate::protocol::pg::{backend, frontend, BackendMessage, Target, TransactionStatus};
use crate::session::client_error::PgClientError;
use crate::session::engine::text::Text;
use crate::session::error::RelayError;
use crate::session::placement::Placed;
use crate::sql::lexer::{Lexer, Token, TokenKind};
use crate::sql::Dialect;

/// Name of the throwaway statement an extended-protocol `DEALLOCATE name` is rewritten to
/// deallocate: the server then answers every message of the client's batch itself.
const DEALLOCATE_STANDIN: &str = "qp_deallocate";

/// A statement naming a prepared statement in SQL.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Command {
    /// `EXECUTE name [(args)]`; `span` is where the name is in the query.
    Execute { name: String, span: Range<usize> },
    /// `DEALLOCATE [PREPARE] name`.
    Deallocate(String),
    /// `DEALLOCATE [PREPARE] ALL`.
    DeallocateAll,
}

/// Recognizes a query that is exactly one `EXECUTE` or `DEALLOCATE` statement.
pub(super) fn parse(sql: &str) -> Option<Command> {
    // Most queries are told apart by their first byte, sparing a lexer pass per statement.
    let first = sql.trim_start().bytes().next()?;
    // EXECUTE, DEALLOCATE, or a leading comment before either.
    if !b"ed/-".contains(&first.to_ascii_lowercase()) {
        return None;
    }
    let mut tokens: Vec<Token<'_>> =
        Lexer::new(sql, Dialect::Postgres).filter(|t| t.kind != TokenKind::Comment).collect();
    if tokens.last().is_some_and(|t| t.kind == TokenKind::Semicolon) {
        tokens.pop();
    }
    if tokens.iter().any(|t| t.kind == TokenKind::Semicolon) {
        return None;
    }
    let first = tokens.first()?;
    if first.is_word("EXECUTE") {
        let name = tokens.get(1)?;
        let rest_ok = tokens.get(2).is_none_or(|t| t.kind == TokenKind::LParen);
        if !rest_ok {
            return None;
        }
        return Some(Command::Execute { name: name.pg_identifier()?, span: name.span() });
    }
    if !first.is_word("DEALLOCATE") {
        return None;
    }
    let mut rest = tokens.get(1..).unwrap_or_default();
    if rest.len() == 2 && rest.first().is_some_and(|t| t.is_word("PREPARE")) {
        rest = rest.get(1..).unwrap_or_default();
    }
    match rest {
        [t] if t.is_word("ALL") => Some(Command::DeallocateAll),
        [t] => t.pg_identifier().map(Command::Deallocate),
        _ => None,
    }
}

/// Every statement of a (possibly multi-statement) query that is `EXECUTE name [(args)]`: the
/// name and where it is in the query.
pub(super) fn executes_in(sql: &str) -> Vec<(String, Range<usize>)> {
    // Most queries never say EXECUTE: spare them the lexer pass.
    if !sql.as_bytes().windows(7).any(|w| w.eq_ignore_ascii_case(b"execute")) {
        return Vec::new();
    }
    let tokens: Vec<Token<'_>> = Lexer::new(sql, Dialect::Postgres).filter(|t| t.kind != TokenKind::Comment).collect();
    tokens
        .split(|t| t.kind == TokenKind::Semicolon)
        .filter_map(|statement| match statement {
            [first, name] if first.is_word("EXECUTE") => Some((name.pg_identifier()?, name.span())),
            [first, name, open, ..] if first.is_word("EXECUTE") && open.kind == TokenKind::LParen => {
                Some((name.pg_identifier()?, name.span()))
            }
            _ => None,
        })
        .collect()
}

impl Session {
    /// A simple Query naming a protocol-level statement: `Some` when handled here.
    pub(super) async fn on_named_query(&mut self, sql: &str) -> Option<Result<(), End>> {
        if self.stmts.is_empty() {
            return None;
        }
        let Some(command) = parse(sql) else {
            // Several statements: each EXECUTE of the client's statements is renamed.
            let runs: Vec<_> = executes_in(sql)
                .into_iter()
                .filter_map(|(name, span)| Some((span, self.stmts.get(&name).cloned()?)))
                .collect();
            if runs.is_empty() {
                return None;
            }
            return Some(self.execute_named(sql, runs).await);
        };
        match command {
            Command::DeallocateAll => {
                // Also sent on: the server drops the client's SQL-level statements, and the
                // relay forgets the router's statements of that connection at its tag.
                self.stmts_cleared();
                None
            }
            Command::Deallocate(name) => {
                if self.progress.tx == TransactionStatus::Failed {
                    return None;
                }
                self.forget_stmt(&name)?;
                let _ = BackendMessage::CommandComplete("DEALLOCATE").encode(&mut self.io.out);
                backend::encode_ready_for_query(self.progress.tx, &mut self.io.out);
                Some(self.io.flush().await)
            }
            Command::Execute { name, span } => {
                let stmt = self.stmts.get(&name).cloned()?;
                Some(self.execute_named(sql, vec![(span, stmt)]).await)
            }
        }
    }

    /// An unnamed Parse naming a protocol-level statement: `Some` when handled here.
    pub(super) async fn on_named_parse(&mut self, query: &str, types: &[u32]) -> Option<Result<(), End>> {
        if self.stmts.is_empty() {
            return None;
        }
        let (name, span, deallocate) = match parse(query)? {
            Command::DeallocateAll => {
                self.stmts_cleared();
                return None;
            }
            Command::Deallocate(name) => (name, None, true),
            Command::Execute { name, span } => (name, Some(span), false),
        };
        if self.progress.tx == TransactionStatus::Failed {
            return None;
        }
        let stmt = self.stmts.get(&name).cloned()?;
        if span.is_some() {
            if let Err(e) = self.route_statement(&Text::pg(query), true, None).await {
                return Some(self.fail_batch(e));
            }
        }
        if let Err(e) = self.ensure_backend().await {
            return Some(self.fail_batch(e));
        }
        let sql = if deallocate {
            // The server runs a real DEALLOCATE of a throwaway statement: its responses to
            // the client's Parse, Bind, Describe and Execute are the ones a direct DEALLOCATE
            // gets. The Close first clears one a failed batch may have left.
            self.forget_stmt(&name);
            self.ex.close_on_backend(DEALLOCATE_STANDIN, None);
            let standin = |out: &mut Vec<u8>| frontend::encode_parse(DEALLOCATE_STANDIN, "SELECT 1", &[], out);
            let _ = self.ex.forward_encoded(standin, &[Expect::Parse { swallow: true, key: None }]);
            format!("DEALLOCATE {DEALLOCATE_STANDIN}")
        } else {
            self.state.stage(stmt.effects().iter().cloned());
            self.prepare_executed(&stmt);
            renamed(query, span.unwrap_or_default(), &stmt.server_name)
        };
        let mut parse = Vec::with_capacity(sql.len() + 16);
        if frontend::encode_parse("", &sql, types, &mut parse).is_err() {
            return Some(
                self.fail_batch(PgClientError::new(
                    crate::protocol::pg::sqlstate::PROTOCOL_VIOLATION,
                    "malformed Parse",
                )),
            );
        }
        self.ex.forward(&parse, Expect::Parse { swallow: false, key: None });
        self.progress.unnamed.parsed(&parse, (!deallocate).then_some(stmt));
        Some(Ok(()))
    }

    /// `EXECUTE name(...)` as a simple Query, alone or among other statements (`runs`: where
    /// each name is, and its statement): the statements are prepared on the connection first
    /// (an exchange of their own: a Parse error must not make the server skip the Query), then
    /// the Query runs under their router names.
    async fn execute_named(&mut self, sql: &str, runs: Vec<(Range<usize>, Rc<Stmt>)>) -> Result<(), End> {
        let ready = |s: &mut Self, e: PgClientError| {
            e.encode(&mut s.io.out);
            backend::encode_ready_for_query(s.progress.tx, &mut s.io.out);
        };
        if let Err(e) = self.route_statement(&Text::pg(sql), true, None).await {
            ready(self, e);
            return self.io.flush().await;
        }
        if let Err(e) = self.ensure_backend().await {
            ready(self, e);
            return self.io.flush().await;
        }
        for stmt in runs.iter().flat_map(|(_, stmt)| chain(stmt)) {
            if self.has_prepared(stmt.key) {
                continue;
            }
            match self.prepare_now(&stmt).await {
                Ok(None) => {}
                Ok(Some((error, status))) => {
                    self.io.out.extend_from_slice(&error);
                    self.progress.tx = status;
                    backend::encode_ready_for_query(status, &mut self.io.out);
                    self.maybe_release().await;
                    return self.io.flush().await;
                }
                Err(e) => return self.backend_lost(e).await,
            }
        }
        let mut text = sql.to_owned();
        // From the last name back, so that the spans before it stay where they are.
        for (span, stmt) in runs.iter().rev() {
            self.state.stage(stmt.effects().iter().cloned());
            text = renamed(&text, span.clone(), &stmt.server_name);
        }
        let mut query = Vec::with_capacity(text.len() + 8);
        let _ = frontend::encode_query(&text, &mut query);
        self.on_simple(&query).await
    }

    /// The statement a client's named Parse of `query` (types `types`) creates: one that runs
    /// another of the client's statements (`EXECUTE name`) runs it under its router name, and
    /// has its effects; otherwise what a translation rule makes of the text, if one applies.
    pub(super) fn client_stmt(&mut self, query: &str, types: &[u32]) -> Stmt {
        // Named statements are routed at execute time; here only a translation matters, since
        // it changes what is prepared on backends.
        let route_key = self.seat.ctx.statement_key(query, Protocol::Postgres);
        let executed = match parse(query) {
            Some(Command::Execute { name, span }) => self.stmts.get(&name).map(|inner| (inner.clone(), span)),
            _ => None,
        };
        let mut stmt = match executed {
            Some((inner, span)) => {
                let sent = renamed(query, span, &inner.server_name);
                let mut stmt = Stmt::new(query, Some(&sent), types, self.seat.pool.schema_generation());
                stmt.set_effects(inner.effects());
                stmt.executes = Some(inner);
                stmt
            }
            // Without translation rules no decision rewrites the text: the statement is first
            // analysed where it runs, not at each Parse of a flood of them (#33).
            None if !self.seat.ctx.rules().has_translations() => {
                Stmt::new(query, None, types, self.seat.pool.schema_generation())
            }
            None => {
                let translated = self.decide(query, Some(route_key)).rewritten.map(|t| t.sql);
                Stmt::new(query, translated.as_deref(), types, self.seat.pool.schema_generation())
            }
        };
        stmt.route_key = Some(route_key);
        stmt
    }

    /// Queues a Parse of `stmt`, and first of the statements its text runs, where the attached
    /// connection lacks them (the server fixes an `EXECUTE`'s row type when it is parsed).
    pub(super) fn prepare_executed(&mut self, stmt: &Rc<Stmt>) {
        for s in chain(stmt) {
            if !self.has_prepared(s.key) {
                self.prepare_on_backend(&s, true);
            }
        }
    }

    /// Prepares `stmt` on the attached connection in an exchange of its own (evicting the
    /// coldest statement at the limit). `Ok(Some)`: the server's ErrorResponse and the
    /// transaction status it reported; `Err`: the connection is lost.
    async fn prepare_now(&mut self, stmt: &Stmt) -> Result<Option<(Vec<u8>, TransactionStatus)>, RelayError> {
        let limit = self.seat.pool.config.limits.max_prepared_statements.get() as usize;
        let Some(conn) = self.seat.conn.as_mut() else { return Err(RelayError::BackendClosed(None)) };
        let mut out = Vec::with_capacity(stmt.parse_msg.len() + 32);
        for cold in crate::session::engine::prepared::make_room(&mut conn.prepared, limit) {
            let _ = frontend::encode_close(Target::Statement, &server_name(cold), &mut out);
        }
        out.extend_from_slice(&stmt.parse_msg);
        frontend::encode_sync(&mut out);
        let answer = super::verify::exchange(conn, &out, self.seat.pool.config.timeouts.query).await?;
        if answer.error.is_none() {
            conn.prepared.push(stmt.key);
        }
        Ok(answer.error.map(|e| (e, answer.status)))
    }
}

/// `stmt` and the statements its text runs, innermost first. A statement can run only one
/// that existed before it, so the chain ends.
fn chain(stmt: &Rc<Stmt>) -> Vec<Rc<Stmt>> {
    let mut chain = vec![stmt.clone()];
    while let Some(inner) = chain.last().and_then(|s| s.executes.clone()) {
        chain.push(inner);
    }
    chain.reverse();
    chain
}

/// `sql` with the name at `span` replaced by `server_name`.
fn renamed(sql: &str, span: Range<usize>, server_name: &str) -> String {
    let head = sql.get(..span.start).unwrap_or_default();
    let tail = sql.get(span.end..).unwrap_or_default();
    format!("{head}{server_name}{tail}")
}

#[cfg(test)]
mod tests;
