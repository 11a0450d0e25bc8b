//! Prepared statements of a bridged session: `COM_STMT_PREPARE` describes the statement on
//! PostgreSQL (Parse + Describe of the unnamed statement) to learn parameter and column types;
//! each `COM_STMT_EXECUTE` runs Parse/Bind/Describe/Execute/Sync on whichever connection the
//! session holds, so a statement needs no per-connection bookkeeping in transaction pooling.

use std::collections::HashMap;
use std::sync::Arc;

use crate::bridge::placeholder::number_placeholders;
use crate::bridge::response::encode_prepare_ok;
use crate::bridge::types::oid;
use crate::bridge::value::{bind_param, template_value, BindParam};
use crate::bridge::RowFormat;
use crate::metrics::{BufferKind, Charge, ClientBudget};
use crate::protocol::mysql::column::ValueType;
use crate::protocol::mysql::errcode::ER_WRONG_ARGUMENTS;
use crate::protocol::mysql::{decode_execute_params, BinaryValue, Command};
use crate::protocol::pg::{frontend, BackendMessage, Target};
use crate::session::client_error::MyClientError;
use crate::session::error::RelayError;
use crate::sql::template::{LateTranslation, ParamValue};

use super::super::prepared::{long_data_admission, LongRefusal};
use super::super::stmt::{long_data_error, statement_refusal_error};
use super::super::{End, Session};

/// A client statement as PostgreSQL runs it.
#[derive(Debug)]
pub(super) struct PgStmt {
    /// The statement text with `$n` parameters.
    sql: String,
    /// The client's text, routed at each execute (#34) when the session is bridged and no
    /// translation chose the text: a session whose last read moved it to the standby must not
    /// run a prepared write there.
    origin: Option<String>,
    /// Parameter types PostgreSQL inferred at prepare time.
    param_oids: Vec<u32>,
    /// MySQL parameter types from the last execute that bound them.
    types: Vec<ValueType>,
    /// `COM_STMT_SEND_LONG_DATA` pieces per parameter, until the next execute.
    long_data: Vec<(u16, Vec<u8>)>,
    /// What `long_data` holds against the process's client buffer budget.
    long_charge: Option<Charge>,
    /// Long data was dropped (#33): executes fail with this error until COM_STMT_RESET, as
    /// on MariaDB and in a native session.
    long_refused: Option<LongRefusal>,
    /// A translation that needs the values (#35): each execute runs `sql` with them written in.
    late: Option<LateTranslation>,
}

/// A client statement as it moves to a new binary (#40).
#[derive(serde::Serialize, serde::Deserialize)]
pub(super) struct FrozenPgStmt {
    sql: String,
    origin: Option<String>,
    param_oids: Vec<u32>,
    /// Each type's byte and whether it is unsigned.
    types: Vec<(u8, bool)>,
}

impl PgStmt {
    /// `None` while it holds what only this process has: long data sent for its next execute,
    /// or a translation waiting for values (made from the rules of this process's config).
    pub(super) fn freeze(&self) -> Option<FrozenPgStmt> {
        if !self.long_data.is_empty() || self.long_refused.is_some() || self.late.is_some() {
            return None;
        }
        Some(FrozenPgStmt {
            sql: self.sql.clone(),
            origin: self.origin.clone(),
            param_oids: self.param_oids.clone(),
            types: self.types.iter().map(|t| (t.column_type.0, t.unsigned)).collect(),
        })
    }

    pub(super) fn thaw(f: FrozenPgStmt) -> Self {
        let types = f
            .types
            .into_iter()
            .map(|(t, unsigned)| ValueType { column_type: crate::protocol::mysql::ColumnType(t), unsigned })
            .collect();
        Self::new(f.sql, f.origin, f.param_oids, types, None)
    }

    fn new(
        sql: String,
        origin: Option<String>,
        param_oids: Vec<u32>,
        types: Vec<ValueType>,
        late: Option<LateTranslation>,
    ) -> Self {
        Self { sql, origin, param_oids, types, long_data: Vec::new(), long_charge: None, long_refused: None, late }
    }

    /// Bytes of text it holds (`limits.session_prepared_bytes`).
    fn text_len(&self) -> usize {
        self.sql.len() + self.origin.as_ref().map_or(0, String::len)
    }

    /// Drops its long data and what it holds of the budget, and any refusal of it.
    pub(super) fn reset_long_data(&mut self) {
        self.long_data = Vec::new();
        self.long_charge = None;
        self.long_refused = None;
    }
}

/// A bridged client's statements by client id, bounded as a native session's are (#33, #37):
/// their count and text by the session's limits, their text against the process's budget.
#[derive(Debug, Default)]
pub(super) struct PgStmts {
    by_id: HashMap<u32, PgStmt>,
    /// Bytes of statement text held.
    bytes: usize,
    /// What they hold against the process's client buffer budget.
    charge: Option<Charge>,
}

impl PgStmts {
    pub(super) fn get(&self, id: &u32) -> Option<&PgStmt> {
        self.by_id.get(id)
    }

    pub(super) fn get_mut(&mut self, id: &u32) -> Option<&mut PgStmt> {
        self.by_id.get_mut(id)
    }

    pub(super) fn contains_key(&self, id: &u32) -> bool {
        self.by_id.contains_key(id)
    }

    pub(super) fn iter(&self) -> impl Iterator<Item = (&u32, &PgStmt)> {
        self.by_id.iter()
    }

    pub(super) fn insert(&mut self, id: u32, stmt: PgStmt) {
        self.bytes += stmt.text_len();
        if let Some(old) = self.by_id.insert(id, stmt) {
            self.bytes -= old.text_len();
        }
    }

    pub(super) fn remove(&mut self, id: &u32) {
        if let Some(stmt) = self.by_id.remove(id) {
            self.bytes -= stmt.text_len();
            if let Some(c) = &mut self.charge {
                c.resize(self.bytes as u64, 0); // shrinking always succeeds
            }
        }
    }

    pub(super) fn clear(&mut self) {
        *self = Self::default();
    }

    /// Whether the client may prepare one more statement of `len` bytes of text, by the
    /// engine's admission (#37); the error a native session would send when not.
    fn admission(
        &mut self,
        limits: &crate::config::Limits,
        budget: &Arc<ClientBudget>,
        len: usize,
    ) -> Option<MyClientError> {
        // Each statement keeps its text about twice (as prepared and as the client sent it).
        let (count, held, want) = (self.by_id.len(), self.bytes as u64, 2 * len as u64);
        let charge = &mut self.charge;
        let verdict = crate::session::engine::prepared::admission(limits, count, held, want, |n, b| {
            charge.get_or_insert_with(|| budget.charge(BufferKind::Statements)).resize(n, b)
        });
        verdict.err().map(statement_refusal_error)
    }
}

impl FromIterator<(u32, PgStmt)> for PgStmts {
    fn from_iter<I: IntoIterator<Item = (u32, PgStmt)>>(iter: I) -> Self {
        let mut out = Self::default();
        for (id, stmt) in iter {
            out.insert(id, stmt);
        }
        out
    }
}

/// One execution's statement text, parameter types and Bind parameters.
struct Execution {
    sql: String,
    oids: Vec<u32>,
    binds: Vec<BindParam>,
}

/// What describing a statement on PostgreSQL returned.
#[derive(Default)]
struct Described {
    params: Vec<u32>,
    /// (name, type oid, typmod) per result column.
    columns: Vec<(String, u32, i32)>,
    error: Option<Vec<u8>>,
}

/// The long data sent for parameter `i`, in the order it came.
fn long_value(long_data: &[(u16, Vec<u8>)], i: usize) -> Vec<u8> {
    long_data.iter().filter(|(p, _)| usize::from(*p) == i).flat_map(|(_, d)| d.iter().copied()).collect()
}

/// An execution of a statement whose translation waits for its values: the values written into
/// the translation as literals (no Bind parameters); a value the translation refuses is the
/// client's error, and the statement runs nowhere.
fn bind_late(
    late: &LateTranslation,
    values: &[Option<BinaryValue<'_>>],
    long_data: &[(u16, Vec<u8>)],
) -> Result<Execution, MyClientError> {
    let params: Vec<ParamValue> = values
        .iter()
        .enumerate()
        .map(|(i, v)| match v {
            Some(v) => template_value(v),
            None => template_value(&BinaryValue::Bytes(&long_value(long_data, i))),
        })
        .collect();
    match late.bind(&params) {
        Ok(Some(sql)) => Ok(Execution { sql: super::carry_translation(&sql)?, oids: Vec::new(), binds: Vec::new() }),
        Ok(None) => {
            Err(MyClientError::new(ER_WRONG_ARGUMENTS, "the parameters do not fit the statement's translation"))
        }
        Err(e) => Err(MyClientError::new(ER_WRONG_ARGUMENTS, e.to_string())),
    }
}

impl Session {
    pub(super) async fn bridged_prepare(&mut self, body: &[u8]) -> Result<(), End> {
        let limits = self.seat.ctx.config().limits.clone();
        let budget = self.seat.ctx.client_budget().clone();
        if let Some(e) = self.foreign.bridge.stmts.admission(&limits, &budget, body.len()) {
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        }
        let text = String::from_utf8_lossy(body);
        let (sql, late, translated) = match self.prepared_text(&text) {
            Ok(prepared) => prepared,
            Err(e) => {
                e.encode(self.client.reply_seq, &mut self.io.out);
                return Ok(());
            }
        };
        if let Err(e) = self.pg_backend().await {
            e.encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        }
        let encoded = frontend::encode_parse("", &sql, &[], &mut self.link.out)
            .and_then(|()| frontend::encode_describe(Target::Statement, "", &mut self.link.out));
        if encoded.is_err() {
            self.link.out.clear();
            MyClientError::new(
                ER_WRONG_ARGUMENTS,
                "statement text cannot be sent to PostgreSQL (NUL byte or too long)",
            )
            .encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        }
        frontend::encode_sync(&mut self.link.out);
        let described = match self.pg_send().await {
            Ok(()) => self.read_description().await,
            Err(e) => Err(e),
        };
        let mut d = match described {
            Ok(d) => d,
            Err(e) => return self.bridged_lost(e).await,
        };
        self.sync_status();
        if let Some(err) = d.error {
            self.io.out.extend_from_slice(&err);
        } else {
            if let Some(l) = &late {
                d.params = vec![oid::TEXT; l.params()];
            }
            let origin = (self.is_bridged() && !translated).then(|| text.into_owned());
            self.answer_prepare(origin, sql, d, late);
        }
        self.pg_maybe_release();
        Ok(())
    }

    /// What a client's statement is prepared as on PostgreSQL, and its translation waiting for
    /// values if it has one. A translation is decided (and counted) once, here: what is
    /// prepared is what every execute runs. PostgreSQL binds `$n` by number, so a rewrite that
    /// moves or repeats the client's `?` just numbers each after the client parameter it takes.
    fn prepared_text(&self, text: &str) -> Result<(String, Option<LateTranslation>, bool), MyClientError> {
        // Only where this session runs it: the pool it crossed to, or a bridged session's own.
        let late = self.late_translation(text).filter(|(p, _)| **p == *self.seat.pool.config.name).map(|(_, l)| l);
        // Described with the example's values: the columns every execute returns.
        if let Some(example) = late.as_ref().and_then(LateTranslation::example_sql) {
            return Ok((self.for_postgres(&example, true)?, late, true));
        }
        let (carried, order, translated) = match self.bridged_translation(text) {
            Some((translated, order)) => (self.for_postgres(&translated, true)?, order, true),
            None => (self.for_postgres(text, false)?, None, late.is_some()),
        };
        Ok((number_placeholders(&carried, order.as_deref()).0, late, translated))
    }

    async fn read_description(&mut self) -> Result<Described, RelayError> {
        let mut d = Described::default();
        let seq = self.client.reply_seq;
        self.pg_until_ready(|_, msg| {
            match msg {
                BackendMessage::ParameterDescription(oids) => d.params = oids.iter().collect(),
                BackendMessage::RowDescription(rd) => {
                    d.columns = rd.iter().map(|f| (f.name.to_owned(), f.type_oid, f.type_modifier)).collect();
                }
                BackendMessage::ErrorResponse(f) => {
                    let mut out = Vec::new();
                    crate::bridge::errmap::encode_error(&f, seq, &mut out);
                    d.error = Some(out);
                }
                _ => {}
            }
            Ok(())
        })
        .await?;
        Ok(d)
    }

    /// Sends `COM_STMT_PREPARE_OK` with parameter and column definitions.
    fn answer_prepare(&mut self, origin: Option<String>, sql: String, d: Described, late: Option<LateTranslation>) {
        let bridge = &mut self.foreign.bridge;
        let id = crate::session::engine::prepared::next_id(bridge.next_stmt, |id| bridge.stmts.contains_key(&id));
        bridge.next_stmt = id;
        encode_prepare_ok(self.client.caps, id, &d.params, &d.columns, self.tx.status, &mut self.io.out);
        let stmt = PgStmt::new(sql, origin, d.params, Vec::new(), late);
        self.foreign.bridge.stmts.insert(id, stmt);
    }

    /// `COM_STMT_SEND_LONG_DATA`: buffered until the execute (no response, as on MySQL),
    /// within the limits a native session's long data has.
    pub(super) fn stmt_long_data(&mut self, payload: &[u8]) {
        let Ok(Command::StmtSendLongData { stmt_id, param, data }) = Command::decode(payload, self.client.caps) else {
            return;
        };
        let limits = self.seat.ctx.config().limits.clone();
        let budget = self.seat.ctx.client_budget().clone();
        let Some(s) = self.foreign.bridge.stmts.get_mut(&stmt_id) else { return };
        if s.long_refused.is_some() {
            return; // dropped: the execute fails anyway
        }
        let held = s.long_data.iter().filter(|(p, _)| *p == param).map(|(_, d)| d.len()).sum();
        let charge = s.long_charge.get_or_insert_with(|| budget.charge(BufferKind::LongData));
        if let Err(why) = long_data_admission(&limits, held, data.len(), charge) {
            s.reset_long_data();
            s.long_refused = Some(why);
            return;
        }
        s.long_data.push((param, data.to_vec()));
    }

    /// `COM_STMT_RESET`: drops buffered long data.
    pub(super) fn stmt_reset(&mut self, body: &[u8]) {
        if let Some(s) = self.foreign.bridge.stmts.get_mut(&super::leading_id(body).unwrap_or(0)) {
            s.reset_long_data();
        }
    }

    /// Decodes the execute's parameters into Bind parameters for statement `id`.
    fn bind_params(&mut self, id: u32, params: &[u8]) -> Option<Result<Execution, MyClientError>> {
        let stmt = self.foreign.bridge.stmts.get_mut(&id)?;
        if let Some(why) = stmt.long_refused {
            stmt.long_data = Vec::new();
            stmt.long_charge = None;
            return Some(Err(long_data_error(why)));
        }
        let count = u16::try_from(stmt.param_oids.len()).unwrap_or(u16::MAX);
        let long: Vec<bool> = (0..count).map(|i| stmt.long_data.iter().any(|(p, _)| *p == i)).collect();
        let decoded = match decode_execute_params(params, count, &stmt.types, &long) {
            Ok(d) => d,
            Err(e) => {
                return Some(Err(MyClientError::new(
                    ER_WRONG_ARGUMENTS,
                    format!("Incorrect arguments to mysqld_stmt_execute: {e}"),
                )))
            }
        };
        if decoded.new_params_bound {
            stmt.types = decoded.types.to_vec();
        }
        let long_data = std::mem::take(&mut stmt.long_data);
        stmt.long_charge = None; // sent, or dropped with the execution
        if let Some(late) = &stmt.late {
            return Some(bind_late(late, &decoded.values, &long_data));
        }
        let binds = decoded
            .values
            .iter()
            .zip(&stmt.param_oids)
            .enumerate()
            .map(|(i, (v, oid))| match v {
                Some(v) => bind_param(v, *oid),
                None => bind_param(&BinaryValue::Bytes(&long_value(&long_data, i)), *oid),
            })
            .collect();
        Some(Ok(Execution { sql: stmt.sql.clone(), oids: stmt.param_oids.clone(), binds }))
    }

    pub(super) async fn bridged_execute(&mut self, payload: &[u8]) -> Result<(), End> {
        let Ok(Command::StmtExecute { stmt_id, params, .. }) = Command::decode(payload, self.client.caps) else {
            MyClientError::new(ER_WRONG_ARGUMENTS, "malformed COM_STMT_EXECUTE")
                .encode(self.client.reply_seq, &mut self.io.out);
            return Ok(());
        };
        let Execution { sql, oids, binds } = match self.bind_params(stmt_id, params) {
            None => {
                super::super::stmt::unknown_stmt(stmt_id).encode(self.client.reply_seq, &mut self.io.out);
                return Ok(());
            }
            Some(Err(e)) => {
                e.encode(self.client.reply_seq, &mut self.io.out);
                return Ok(());
            }
            Some(Ok(parts)) => parts,
        };
        let origin = self.foreign.bridge.stmts.get(&stmt_id).and_then(|s| s.origin.clone());
        if let Some(o) = origin {
            if let Err(e) = self.bridged_routed(&o).await {
                e.encode(self.client.reply_seq, &mut self.io.out);
                return Ok(());
            }
        }
        let probed = match self.pg_ready(&sql).await {
            Ok(probed) => probed, // #34: a prepared COMMIT, as a text one
            Err(answered) => return answered,
        };
        let formats: Vec<i16> = binds.iter().map(|b| b.format).collect();
        let values: Vec<Option<&[u8]>> = binds.iter().map(|b| b.value.as_deref()).collect();
        let encoded = frontend::encode_parse("", &sql, &oids, &mut self.link.out)
            .and_then(|()| frontend::encode_bind("", "", &formats, &values, &[0], &mut self.link.out))
            .and_then(|()| frontend::encode_describe(Target::Portal, "", &mut self.link.out))
            .and_then(|()| frontend::encode_execute("", 0, &mut self.link.out));
        if encoded.is_err() {
            self.link.out.clear();
            MyClientError::new(ER_WRONG_ARGUMENTS, "parameters cannot be sent to PostgreSQL (too many or too large)")
                .encode(self.client.reply_seq, &mut self.io.out);
            self.pg_maybe_release();
            return Ok(());
        }
        frontend::encode_sync(&mut self.link.out);
        self.run_queued(probed, RowFormat::Binary).await
    }
}
