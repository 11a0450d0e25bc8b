//! A PostgreSQL client's `$n` in a translation's JSON-array slot (#35): psycopg 3 and psql's
//! `\bind` send `JSON_OVERLAPS(labels, $1)` with the array as a Bind value, so at Parse the
//! translation has no list to write. The statement (unnamed or named) is held here with a
//! synthesized ParseComplete; at each Bind its values are written into the client's own text as
//! literals (`sql::template::LateTranslation::inline`), which is then routed like a statement the
//! client wrote that way: translated onto its pool, a value that is no JSON array refused with
//! 22023 there, and sent as an unnamed Parse and a parameterless Bind for the client's portal.
//! That Parse (and the late Describe's) replaces the connection's unnamed statement, which the
//! client may still use: `unnamed.rs` is told, and prepares the client's again before its use.
//! A binary-format value is decoded to its type's text first (`bridge::pg_inline`) or refused:
//! its bytes never become SQL text.
//!
//! Describe of the statement before a Bind (asyncpg's prepare) is answered without any client
//! value: the columns are the target's own description of the translation with the rule's
//! example values in the slots (what every execute returns: only the values change), and each
//! parameter is described with the type the client declared, or else the type PostgreSQL gives
//! the example's literal at that place — the value the client binds is written exactly there,
//! as that literal's text. The translation cannot be described with the parameters in it: a
//! JSON-array slot becomes a list built from the value, which no placeholder can stand for,
//! and an engine like DuckDB behind buenavista reports no parameter types at all.
//!
//! Must not depend on: the MySQL session, control, admin.

use std::borrow::Cow;
use std::rc::Rc;

use super::prepared::{Expect, Stmt};
use super::{End, Session};
use crate::bridge::pg_inline::{binary_text, literal_type, BinaryTextError};
use crate::bridge::types::oid;
use crate::config::Protocol;
use crate::protocol::pg::tag::backend as server;
use crate::protocol::pg::{frontend, sqlstate, EncodeError, FrontendMessage, Target};
use crate::session::client_error::PgClientError;
use crate::session::engine::text::Text;
use crate::session::placement::Placed;
use crate::sql::template::{InlineError, LateTranslation, LiteralKind};

/// SQLSTATE of a NUL byte in a text value (`character_not_in_repertoire`).
const NUL_IN_TEXT: &str = "22021";
/// SQLSTATE of bytes that are not their type's binary form.
const INVALID_BINARY_REPRESENTATION: &str = "22P03";

impl Session {
    /// Handles `msg` when it concerns a held statement (or creates one); `None` otherwise.
    pub(super) async fn on_late_message(&mut self, msg: &FrontendMessage<'_>) -> Option<Result<(), End>> {
        match *msg {
            FrontendMessage::Parse { name, query, ref param_types } => {
                if name.is_empty() && self.late_stmt("").is_some() {
                    // A new unnamed statement replaces the held one, as on the server.
                    self.forget_stmt("");
                }
                self.late_parse(name, query, || param_types.iter().collect())
            }
            FrontendMessage::Bind { portal, statement, ref param_formats, ref params, ref result_formats } => {
                let stmt = self.late_stmt(statement)?;
                let formats: Vec<i16> = param_formats.iter().collect();
                let values: Vec<Option<&[u8]>> = params.iter().collect();
                let results: Vec<i16> = result_formats.iter().collect();
                Some(self.late_bind(&stmt, portal, &formats, &values, &results).await)
            }
            FrontendMessage::Describe { kind: Target::Statement, name } => {
                let stmt = self.late_stmt(name)?;
                Some(self.late_describe(&stmt).await)
            }
            FrontendMessage::Close { kind: Target::Statement, name } => {
                self.late_stmt(name)?;
                self.forget_stmt(name);
                self.ex.answer_here(server::CLOSE_COMPLETE);
                self.emit_synth();
                Some(Ok(()))
            }
            _ => None,
        }
    }

    fn late_stmt(&self, name: &str) -> Option<Rc<Stmt>> {
        if !self.progress.late_held {
            return None;
        }
        self.stmts.get(name).filter(|s| s.late).cloned()
    }

    /// A Parse of a translation's shape with a `$n` in a JSON-array slot: held, its
    /// ParseComplete synthesized in order. `types` lists the declared parameter types, only
    /// for a Parse held here: every other one would allocate them for nothing.
    fn late_parse(&mut self, name: &str, query: &str, types: impl FnOnce() -> Vec<u32>) -> Option<Result<(), End>> {
        let rules = self.seat.ctx.rules();
        if !rules.has_translations() || !query.contains('$') {
            return None; // the common case pays no fingerprint
        }
        let key = self.seat.ctx.statement_key(query, Protocol::Postgres);
        rules.late_translation(&key, query)?;
        if !name.is_empty() {
            if let Some(e) = self.named_parse_refusal(name, query) {
                return Some(self.fail_batch(e));
            }
        }
        let mut stmt = Stmt::new(query, None, &types(), self.seat.pool.schema_generation());
        stmt.route_key = Some(key);
        stmt.late = true;
        self.stmts.insert(name.to_owned(), Rc::new(stmt));
        self.progress.late_held = true;
        self.ex.answer_here(server::PARSE_COMPLETE);
        // Answered now when nothing is ahead of it: a pending answer would hold the session on
        // its connection, where the Bind's statement could not be translated onto its pool.
        self.emit_synth();
        Some(Ok(()))
    }

    /// A Bind of a held statement: its values written in, the text routed (and translated), and
    /// sent as an unnamed Parse plus a Bind of the client's portal with no parameters.
    async fn late_bind(
        &mut self,
        stmt: &Stmt,
        portal: &str,
        formats: &[i16],
        values: &[Option<&[u8]>],
        results: &[i16],
    ) -> Result<(), End> {
        let sql = match self.late_text(stmt, formats, values) {
            Ok(sql) => sql,
            Err(e) => return self.fail_batch(e),
        };
        let sql = match self.route_statement(&Text::pg(&sql), true, None).await {
            Ok(rewritten) => rewritten.unwrap_or(sql),
            Err(e) => return self.fail_batch(e),
        };
        if let Err(e) = self.ensure_backend().await {
            return self.fail_batch(e);
        }
        self.state.stage_sql(&sql);
        let bind = |msgs: &mut Vec<u8>| frontend::encode_bind(portal, "", &[], &[], results, msgs);
        if let Err(e) = self.queue_unnamed_parse(&sql, bind, Some(Expect::Bind)) {
            return self.fail_batch(e);
        }
        Ok(())
    }

    /// A Describe of a held statement: the translation with the rule's example values in the
    /// slots is described on its target pool; the target's ParameterDescription (of a statement
    /// with none) is swallowed and the router's own, of the client's parameters, goes in its place.
    async fn late_describe(&mut self, stmt: &Stmt) -> Result<(), End> {
        let late = match self.late_of(stmt) {
            Ok(late) => late,
            Err(e) => return self.fail_batch(e),
        };
        let examples = late.param_examples();
        let values: Vec<Option<&str>> = examples
            .iter()
            .map(|l| l.filter(|l| l.kind != LiteralKind::Null).and_then(|l| l.value.as_deref()))
            .collect();
        let sql = match late.inline(&stmt.query, &values) {
            Ok(sql) => sql,
            Err(e) => return self.fail_batch(inline_error(&e)),
        };
        let sql = match self.route_statement(&Text::pg(&sql), false, None).await {
            Ok(rewritten) => rewritten.unwrap_or(sql),
            Err(e) => return self.fail_batch(e),
        };
        if let Err(e) = self.ensure_backend().await {
            return self.fail_batch(e);
        }
        let describe = |msgs: &mut Vec<u8>| frontend::encode_describe(Target::Statement, "", msgs);
        if let Err(e) = self.queue_unnamed_parse(&sql, describe, None) {
            return self.fail_batch(e);
        }
        self.ex.described_with(parameter_description(&param_types(stmt, &late)));
        Ok(())
    }

    /// Queues `sql` as an unnamed Parse whose ParseComplete the client does not get, followed by
    /// the message `then` encodes (the Bind or Describe of it, answered by `answer`, if its
    /// answer is not the router's to arrange); refuses text that cannot be
    /// encoded. The Parse replaces the connection's unnamed statement, which may be the
    /// client's: its next Bind or Describe of `""` prepares it again first (`unnamed.rs`). This
    /// costs nothing unless the client reuses its unnamed statement after a held one, and then
    /// one pipelined Parse, no round trip; a router-private name would instead add a Close to
    /// every held statement's execution.
    fn queue_unnamed_parse(
        &mut self,
        sql: &str,
        then: impl FnOnce(&mut Vec<u8>) -> Result<(), EncodeError>,
        answer: Option<Expect>,
    ) -> Result<(), PgClientError> {
        let mut msgs = Vec::with_capacity(sql.len() + 32);
        frontend::encode_parse("", sql, &[], &mut msgs)
            .and_then(|()| then(&mut msgs))
            .map_err(|_| PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "translated SQL is not encodable"))?;
        self.progress.unnamed.elsewhere();
        let parsed = Expect::Parse { swallow: true, key: None };
        match answer {
            Some(then) => self.ex.forward_all(&msgs, &[parsed, then]),
            None => self.ex.forward_all(&msgs, &[parsed]),
        }
        Ok(())
    }

    /// The translation `stmt` is held for.
    fn late_of(&self, stmt: &Stmt) -> Result<LateTranslation, PgClientError> {
        let key = stmt.route_key.unwrap_or_else(|| self.seat.ctx.statement_key(&stmt.query, Protocol::Postgres));
        match self.seat.ctx.rules().late_translation(&key, &stmt.query) {
            Some((_, late)) => Ok(late),
            // The rule went away since Parse (a reload): the statement is no longer held.
            None => Err(PgClientError::new(
                sqlstate::FEATURE_NOT_SUPPORTED,
                "the translation this statement was prepared for no longer exists; prepare it again",
            )),
        }
    }

    /// The client's statement with the Bind's values written in as literals.
    fn late_text(&self, stmt: &Stmt, formats: &[i16], values: &[Option<&[u8]>]) -> Result<String, PgClientError> {
        let late = self.late_of(stmt)?;
        let types = param_types(stmt, &late);
        let binary = |i: usize| crate::bridge::pg_result::format_of(formats, i) != 0;
        let mut texts: Vec<Option<Cow<'_, str>>> = Vec::with_capacity(values.len());
        for (i, v) in values.iter().enumerate() {
            let text = match v {
                None => None,
                Some(b) if binary(i) => {
                    let ty = types.get(i).copied().unwrap_or(oid::TEXT);
                    Some(Cow::Owned(binary_text(ty, b).map_err(|e| binary_error(i, &e))?))
                }
                Some(b) => Some(Cow::Borrowed(std::str::from_utf8(b).map_err(|_| {
                    PgClientError::new(NUL_IN_TEXT, format!("parameter ${} is not valid UTF-8", i + 1))
                })?)),
            };
            texts.push(text);
        }
        let texts: Vec<Option<&str>> = texts.iter().map(Option::as_deref).collect();
        late.inline(&stmt.query, &texts).map_err(|e| inline_error(&e))
    }
}

/// The types the statement's parameters are described with, and their binary values read as:
/// the client's declared type, or the one PostgreSQL gives the example's literal there.
fn param_types(stmt: &Stmt, late: &LateTranslation) -> Vec<u32> {
    let examples = late.param_examples();
    let declared = &stmt.sent.1;
    (0..declared.len().max(examples.len()))
        .map(|i| match declared.get(i) {
            Some(&ty) if ty != 0 => ty,
            _ => examples.get(i).copied().flatten().map_or(oid::TEXT, literal_type),
        })
        .collect()
}

/// A ParameterDescription of `types` (at most 65535: a Parse declares no more, and `$n`
/// beyond that are not counted).
fn parameter_description(types: &[u32]) -> Vec<u8> {
    let count = u16::try_from(types.len()).unwrap_or(u16::MAX);
    let len = 4 + 2 + 4 * u32::from(count);
    let mut out = Vec::with_capacity(len as usize + 1);
    out.push(server::PARAMETER_DESCRIPTION);
    out.extend_from_slice(&len.to_be_bytes());
    out.extend_from_slice(&count.to_be_bytes());
    for ty in types.iter().take(usize::from(count)) {
        out.extend_from_slice(&ty.to_be_bytes());
    }
    out
}

fn inline_error(e: &InlineError) -> PgClientError {
    match e {
        InlineError::Count { .. } => PgClientError::new(sqlstate::PROTOCOL_VIOLATION, e.to_string()),
        InlineError::Nul(_) => PgClientError::new(NUL_IN_TEXT, e.to_string()),
    }
}

fn binary_error(i: usize, e: &BinaryTextError) -> PgClientError {
    let code = match e {
        BinaryTextError::Malformed(_) => INVALID_BINARY_REPRESENTATION,
        BinaryTextError::NotUtf8 => NUL_IN_TEXT,
        BinaryTextError::Unsupported(_) => sqlstate::FEATURE_NOT_SUPPORTED,
    };
    PgClientError::new(code, format!("parameter ${} {e}", i + 1))
}
