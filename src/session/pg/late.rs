//! A PostgreSQL client's `$n` in a translation's JSON-array slot (#35): psycopg 3 and psql's
//! `\bind` send `JSON_OVERLAPS(labels, $1)` with the array as a Bind value, so at Parse the
//! translation has no list to write. The statement (unnamed or named) is held here with a
//! synthesized ParseComplete; at each Bind its values are written into the client's own text as
//! literals (`sql::template::LateTranslation::inline`), which is then routed like a statement the
//! client wrote that way: translated onto its pool, a value that is no JSON array refused with
//! 22023 there, and sent as an unnamed Parse and a parameterless Bind for the client's portal.
//! Describe of such a statement before a Bind has no answer yet and is refused (0A000); Describe
//! of the portal, Execute and Close work as usual.
//!
//! Must not depend on: the MySQL session, control, admin.

use std::rc::Rc;

use super::prepared::{Expect, Stmt};
use super::{End, Session};
use crate::config::Protocol;
use crate::protocol::pg::tag::backend as server;
use crate::protocol::pg::{frontend, sqlstate, FrontendMessage, Target};
use crate::session::client_error::PgClientError;
use crate::sql::template::InlineError;

/// SQLSTATE of a NUL byte in a text value (`character_not_in_repertoire`).
const NUL_IN_TEXT: &str = "22021";

impl Session {
    /// Handles `msg` when it concerns a held statement (or creates one); `None` otherwise.
    pub(super) async fn on_late_message(&mut self, msg: &FrontendMessage<'_>) -> Option<Result<(), End>> {
        match *msg {
            FrontendMessage::Parse { name, query, ref param_types } => {
                if name.is_empty() && self.stmts.get("").is_some_and(|s| s.late) {
                    // A new unnamed statement replaces the held one, as on the server.
                    let gone = self.stmts.remove("");
                    self.stmt_forgotten(gone);
                }
                self.late_parse(name, query, &param_types.iter().collect::<Vec<_>>())
            }
            FrontendMessage::Bind { portal, statement, ref param_formats, ref params, ref result_formats } => {
                let stmt = self.late_stmt(statement)?;
                let formats: Vec<i16> = param_formats.iter().collect();
                let values: Vec<Option<&[u8]>> = params.iter().collect();
                let results: Vec<i16> = result_formats.iter().collect();
                Some(self.late_bind(&stmt, portal, &formats, &values, &results).await)
            }
            FrontendMessage::Describe { kind: Target::Statement, name } => {
                self.late_stmt(name)?;
                Some(self.fail_batch(PgClientError::new(
                    sqlstate::FEATURE_NOT_SUPPORTED,
                    "this statement's translation is written when its parameters are bound (a parameter sits in a \
                     JSON-array slot): Describe its portal after Bind instead",
                )))
            }
            FrontendMessage::Close { kind: Target::Statement, name } => {
                self.late_stmt(name)?;
                let gone = self.stmts.remove(name);
                self.stmt_forgotten(gone);
                self.ex.expect.push_back(Expect::Synth(server::CLOSE_COMPLETE));
                self.emit_synth();
                Some(Ok(()))
            }
            _ => None,
        }
    }

    fn late_stmt(&self, name: &str) -> Option<Rc<Stmt>> {
        self.stmts.get(name).filter(|s| s.late).cloned()
    }

    /// A Parse of a translation's shape with a `$n` in a JSON-array slot: held, its
    /// ParseComplete synthesized in order.
    fn late_parse(&mut self, name: &str, query: &str, types: &[u32]) -> Option<Result<(), End>> {
        let rules = self.ctx.rules();
        if !rules.has_translations() || !query.contains('$') {
            return None; // the common case pays no fingerprint
        }
        let key = self.ctx.statement_key(query, Protocol::Postgres);
        rules.late_translation(&key, query)?;
        if !name.is_empty() {
            if let Some(e) = self.named_parse_refusal(name, query) {
                return Some(self.fail_batch(e));
            }
        }
        let mut stmt = Stmt::new(query, None, types, self.pool.schema_generation());
        stmt.route_key = Some(key);
        stmt.late = true;
        self.stmts.insert(name.to_owned(), Rc::new(stmt));
        self.ex.expect.push_back(Expect::Synth(server::PARSE_COMPLETE));
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
        let sql = match self.route_statement(&sql, None, true).await {
            Ok(rewritten) => rewritten.unwrap_or(sql),
            Err(e) => return self.fail_batch(e),
        };
        if let Err(e) = self.ensure_backend().await {
            return self.fail_batch(e);
        }
        self.state.stage_sql(&sql);
        let mut msgs = Vec::with_capacity(sql.len() + portal.len() + 32);
        let encoded = frontend::encode_parse("", &sql, &[], &mut msgs)
            .and_then(|()| frontend::encode_bind(portal, "", &[], &[], results, &mut msgs));
        if encoded.is_err() {
            return self
                .fail_batch(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, "translated SQL is not encodable"));
        }
        self.ex.bout.extend_from_slice(&msgs);
        self.ex.expect.push_back(Expect::Parse { swallow: true, key: None });
        self.ex.expect.push_back(Expect::Bind);
        Ok(())
    }

    /// The client's statement with the Bind's values written in as literals.
    fn late_text(&self, stmt: &Stmt, formats: &[i16], values: &[Option<&[u8]>]) -> Result<String, PgClientError> {
        let key = stmt.route_key.unwrap_or_else(|| self.ctx.statement_key(&stmt.query, Protocol::Postgres));
        let Some((_, late)) = self.ctx.rules().late_translation(&key, &stmt.query) else {
            // The rule went away since Parse (a reload): the statement is no longer held.
            return Err(PgClientError::new(
                sqlstate::FEATURE_NOT_SUPPORTED,
                "the translation this statement was prepared for no longer exists; prepare it again",
            ));
        };
        let binary = |i: usize| crate::bridge::pg_result::format_of(formats, i) != 0;
        let mut texts = Vec::with_capacity(values.len());
        for (i, v) in values.iter().enumerate() {
            let text = match v {
                None => None,
                Some(_) if binary(i) => {
                    let what = format!(
                        "parameter ${} is in binary format; a statement whose translation is written at Bind \
                         takes its parameters as text",
                        i + 1
                    );
                    return Err(PgClientError::new(sqlstate::FEATURE_NOT_SUPPORTED, what));
                }
                Some(b) => Some(std::str::from_utf8(b).map_err(|_| {
                    PgClientError::new(NUL_IN_TEXT, format!("parameter ${} is not valid UTF-8", i + 1))
                })?),
            };
            texts.push(text);
        }
        late.inline(&stmt.query, &texts).map_err(|e| match e {
            InlineError::Count { .. } => PgClientError::new(sqlstate::PROTOCOL_VIOLATION, e.to_string()),
            InlineError::Nul(_) => PgClientError::new(NUL_IN_TEXT, e.to_string()),
        })
    }
}
