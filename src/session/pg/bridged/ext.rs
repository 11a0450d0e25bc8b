//! The extended query protocol over a MySQL backend: Parse prepares the statement on MySQL
//! (so errors surface at Parse and the result columns are known for Describe), Bind converts
//! the parameters, Execute runs `COM_STMT_EXECUTE`. Statements are kept per client under their
//! text and prepared again on whichever connection a later Execute lands on.

use crate::protocol::pg::tag::backend as server;
use std::rc::Rc;
use std::sync::Arc;

use smallvec::SmallVec;

use crate::bridge::errmap;
use crate::bridge::pg_column::{encode_described, encode_parameter_description, pg_column, PgColumn};
use crate::bridge::pg_portal::{limit_rows, resume_rows};
use crate::bridge::pg_result::{encode_error_fields, PgResultWriter};
use crate::bridge::pg_value::{my_params, MyParam};
use crate::bridge::placeholder::question_placeholders;
use crate::pool::ConnInfo;
use crate::protocol::mysql::response::{classify_response, ResponseKind, StmtPrepareOk};
use crate::protocol::mysql::{encode_execute_params, ColumnDefinition41, Command, ErrPacket, ExecuteParams};
use crate::protocol::pg::{sqlstate, BackendMessage};
use crate::session::client_error::PgClientError;
use crate::session::engine::prepared as engine;

use super::super::{End, Session};
use crate::session::cross::malformed;
use crate::session::error::RelayError;

/// `invalid_sql_statement_name`.
const INVALID_SQL_STATEMENT_NAME: &str = "26000";
/// `invalid_cursor_name`.
const INVALID_CURSOR_NAME: &str = "34000";
/// `invalid_binary_representation`.
const INVALID_BINARY_REPRESENTATION: &str = "22P03";

/// A statement the client prepared.
#[derive(Debug)]
pub(super) struct Prepared {
    /// Identity of the MySQL text on backend connections.
    key: u64,
    /// The text with `$n` rewritten to `?`.
    sql: String,
    /// For each `?`, the 0-based PostgreSQL parameter it takes.
    order: Vec<u16>,
    /// Parameter types as declared by Parse (0: unspecified, described as text).
    param_types: Vec<u32>,
    /// Result columns MySQL reported at prepare time.
    columns: Vec<PgColumn>,
    /// The pool it was prepared on (where a native session's Executes of it run, #24).
    pub(super) pool: Arc<str>,
}

/// A prepared statement as it moves to a new binary (#40).
#[derive(serde::Serialize, serde::Deserialize)]
pub(in crate::session::pg) struct FrozenPrepared {
    sql: String,
    order: Vec<u16>,
    param_types: Vec<u32>,
    columns: Vec<PgColumn>,
    pool: String,
}

impl Prepared {
    pub(super) fn freeze(&self) -> FrozenPrepared {
        let (sql, order, param_types) = (self.sql.clone(), self.order.clone(), self.param_types.clone());
        FrozenPrepared { sql, order, param_types, columns: self.columns.clone(), pool: self.pool.to_string() }
    }

    /// The statement again, in a process whose backend connections know it by the same key.
    pub(super) fn thaw(f: FrozenPrepared) -> Self {
        let key = key_of(&f.sql);
        let (sql, order, param_types, columns) = (f.sql, f.order, f.param_types, f.columns);
        Self { key, sql, order, param_types, columns, pool: Arc::from(f.pool) }
    }
}

/// A bound portal.
#[derive(Debug)]
pub(super) struct Portal {
    pub(super) stmt: Rc<Prepared>,
    /// Parameters in MySQL's `?` order.
    params: Vec<MyParam>,
    /// Result format codes.
    formats: Vec<i16>,
    /// Rows of a row-limited Execute not handed out yet (PortalSuspended was sent).
    kept: Option<Vec<u8>>,
    /// The portal ran to completion: a further Execute returns no rows, as on PostgreSQL.
    done: bool,
}

/// What a successful `COM_STMT_PREPARE` reported.
struct PrepareOk {
    id: u32,
    columns: Vec<PgColumn>,
}

/// The key of MySQL text `sql` on the connections of a bridged pool: fixed-seed, so a new
/// binary's is the same (#40); a seed of its own keeps it apart from MySQL clients' keys.
fn key_of(sql: &str) -> u64 {
    engine::statement_key(0x6272, sql)
}

impl Session {
    /// Parse of `query` (the client's, or a translation's MySQL text when `translated`).
    pub(super) async fn bridged_parse(
        &mut self,
        name: &str,
        query: &str,
        mut types: Vec<u32>,
        translated: bool,
    ) -> Result<(), End> {
        if let Some(e) = self.statement_pooling_refusal(query) {
            return self.fail_batch(e);
        }
        if !name.is_empty() && self.bridge.stmts.contains_key(name) {
            // As PostgreSQL: the existing statement stays and the batch fails (#18).
            return self.fail_batch(super::super::prepared::duplicate(name));
        }
        let carried = match self.my_backend().await.and_then(|()| self.for_mysql(query, translated)) {
            Ok(carried) => carried,
            Err(e) => return self.fail_batch(e),
        };
        let (sql, order) = question_placeholders(&carried, self.my_string_mode());
        let count = order.iter().max().map_or(0, |m| usize::from(*m) + 1).max(types.len());
        types.resize(count, 0);
        let key = key_of(&sql);
        // Columns this session already learned for the same text; otherwise it is prepared
        // afresh even when the connection has it (another client's statement), to learn them.
        let known = self.bridge.stmts.values().find(|s| s.key == key).map(|s| s.columns.clone());
        let columns = match self.ensure_prepared(key, &sql, known.is_none()).await {
            Ok(Some((_, columns))) => columns.or(known),
            Ok(None) => {
                self.ex.refuse();
                return Ok(());
            }
            Err(e) => return self.bridged_lost(true, e).await,
        };
        let pool = self.seat.pool.name().clone();
        let stmt = Prepared { key, sql, order, param_types: types, columns: columns.unwrap_or_default(), pool };
        self.bridge.stmts.insert(name.to_owned(), Rc::new(stmt));
        self.io.out.extend_from_slice(&[server::PARSE_COMPLETE, 0, 0, 0, 4]);
        Ok(())
    }

    /// The backend statement id of `sql` on the attached connection, preparing it there when
    /// needed or when `describe` asks for its columns (evicting the coldest statement at the
    /// pool's limit). The columns are returned when it was prepared now. `Ok(None)`: MySQL
    /// refused it and the client was told.
    async fn ensure_prepared(
        &mut self,
        key: u64,
        sql: &str,
        describe: bool,
    ) -> Result<Option<(u32, Option<Vec<PgColumn>>)>, RelayError> {
        let limit = self.seat.pool.config.limits.max_prepared_statements.get() as usize;
        let Some(ConnInfo::MySql(info)) = self.seat.conn.as_mut().map(|c| c.info_mut()) else {
            return Err(RelayError::BackendClosed(None));
        };
        if !describe {
            if let Some((_, id)) = engine::touch(&mut info.prepared, key) {
                return Ok(Some((id, None)));
            }
        }
        // Prepared afresh, to learn its columns: the older copy goes too.
        let mut stale: Vec<_> = engine::forget(&mut info.prepared, key).into_iter().collect();
        stale.extend(engine::make_room(&mut info.prepared, limit));
        for (_, id) in stale {
            // COM_STMT_CLOSE has no response.
            self.my_send(&Command::StmtClose(id)).await?;
        }
        let Some(ok) = self.my_prepare(sql).await? else { return Ok(None) };
        if let Some(ConnInfo::MySql(info)) = self.seat.conn.as_mut().map(|c| c.info_mut()) {
            info.prepared.push((key, ok.id));
        }
        Ok(Some((ok.id, Some(ok.columns))))
    }

    /// `COM_STMT_PREPARE`; `None` when MySQL refused (the ErrorResponse is written).
    async fn my_prepare(&mut self, sql: &str) -> Result<Option<PrepareOk>, RelayError> {
        self.my_send(&Command::StmtPrepare(sql.as_bytes())).await?;
        let (first, _) = self.my_payload().await?;
        if classify_response(&first).map_err(malformed)? == ResponseKind::Err {
            self.seat.cancel.slot.set_running(None);
            let err = ErrPacket::decode(&first).map_err(malformed)?;
            let state = errmap::sqlstate(err.code, err.sql_state);
            let detail = format!("MySQL error {}", err.code);
            encode_error_fields(
                std::str::from_utf8(&state).unwrap_or("XX000"),
                &String::from_utf8_lossy(err.message),
                Some(&detail),
                &mut self.io.out,
            );
            return Ok(None);
        }
        let ok = StmtPrepareOk::decode(&first).map_err(malformed)?;
        // Parameter definitions say nothing useful (MySQL types parameters at execute time).
        self.skip_definitions(ok.num_params).await?;
        let mut columns = Vec::with_capacity(usize::from(ok.num_columns));
        for _ in 0..ok.num_columns {
            let (payload, _) = self.my_payload().await?;
            columns.push(pg_column(&ColumnDefinition41::decode(&payload).map_err(malformed)?));
        }
        if ok.num_columns > 0 {
            self.my_payload().await?; // EOF
        }
        self.seat.cancel.slot.set_running(None);
        Ok(Some(PrepareOk { id: ok.stmt_id, columns }))
    }

    async fn skip_definitions(&mut self, count: u16) -> Result<(), RelayError> {
        for _ in 0..count {
            self.my_payload().await?;
        }
        if count > 0 {
            self.my_payload().await?; // EOF
        }
        Ok(())
    }

    pub(super) fn bridged_bind(
        &mut self,
        portal: &str,
        statement: &str,
        formats: &[i16],
        values: &[Option<&[u8]>],
        result_formats: Vec<i16>,
    ) -> Result<(), End> {
        let Some(stmt) = self.bridge.stmts.get(statement).cloned() else {
            let msg = format!("prepared statement \"{statement}\" does not exist");
            return self.fail_batch(PgClientError::new(INVALID_SQL_STATEMENT_NAME, msg));
        };
        if values.len() != stmt.param_types.len() {
            let msg = format!(
                "bind message supplies {} parameters, but prepared statement \"{statement}\" requires {}",
                values.len(),
                stmt.param_types.len()
            );
            return self.fail_batch(PgClientError::new(sqlstate::PROTOCOL_VIOLATION, msg));
        }
        let params = match my_params(&stmt.param_types, formats, values, &stmt.order) {
            Ok(params) => params,
            Err(e) => return self.fail_batch(PgClientError::new(INVALID_BINARY_REPRESENTATION, e.to_string())),
        };
        self.bridge
            .portals
            .insert(portal.to_owned(), Portal { stmt, params, formats: result_formats, kept: None, done: false });
        self.io.out.extend_from_slice(&[server::BIND_COMPLETE, 0, 0, 0, 4]);
        Ok(())
    }

    pub(super) fn describe_statement(&mut self, name: &str) -> Result<(), End> {
        let Some(stmt) = self.bridge.stmts.get(name).cloned() else {
            return self.fail_batch(PgClientError::new(
                INVALID_SQL_STATEMENT_NAME,
                format!("prepared statement \"{name}\" does not exist"),
            ));
        };
        encode_parameter_description(&stmt.param_types, &mut self.io.out);
        encode_described(&stmt.columns, &[], &mut self.io.out);
        Ok(())
    }

    pub(super) fn describe_portal(&mut self, name: &str) -> Result<(), End> {
        let Some(p) = self.bridge.portals.get(name) else {
            return self
                .fail_batch(PgClientError::new(INVALID_CURSOR_NAME, format!("portal \"{name}\" does not exist")));
        };
        encode_described(&p.stmt.columns, &p.formats, &mut self.io.out);
        Ok(())
    }

    pub(super) async fn bridged_execute(&mut self, portal: &str, max_rows: i32) -> Result<(), End> {
        let Some(mut p) = self.bridge.portals.remove(portal) else {
            return self
                .fail_batch(PgClientError::new(INVALID_CURSOR_NAME, format!("portal \"{portal}\" does not exist")));
        };
        let max_rows = usize::try_from(max_rows).unwrap_or(0);
        let r = match p.kept.take() {
            Some(kept) => {
                p.kept = resume_rows(&kept, max_rows, &mut self.io.out);
                Ok(())
            }
            None if p.done => {
                let _ = BackendMessage::CommandComplete("SELECT 0").encode(&mut self.io.out);
                Ok(())
            }
            None => self.execute_portal(&mut p, max_rows).await,
        };
        p.done = p.kept.is_none();
        self.bridge.portals.insert(portal.to_owned(), p);
        match r {
            Ok(()) => Ok(()),
            Err(e) => self.bridged_lost(true, e).await,
        }
    }

    async fn execute_portal(&mut self, p: &mut Portal, max_rows: usize) -> Result<(), RelayError> {
        if let Err(e) = self.my_backend().await {
            let _ = self.fail_batch(e);
            return Ok(());
        }
        let id = match self.ensure_prepared(p.stmt.key, &p.stmt.sql, false).await? {
            Some((id, _)) => id,
            None => {
                self.ex.refuse();
                return Ok(());
            }
        };
        let block = ExecuteParams {
            new_params_bound: true,
            types: p.params.iter().map(|x| x.ty).collect(),
            values: p.params.iter().map(|x| Some(x.value())).collect::<SmallVec<_>>(),
        };
        let mut params = Vec::with_capacity(16 * p.params.len());
        encode_execute_params(&block, &mut params);
        let cmd = Command::StmtExecute { stmt_id: id, flags: 0, iteration_count: 1, params: &params };
        let status = self.my_status();
        let mut writer =
            PgResultWriter::new(vec![p.stmt.sql.as_str()], true, false, &p.formats, self.my_caps(), status);
        if max_rows == 0 {
            self.my_answer(&cmd, &mut writer).await?;
        } else {
            // Held whole: only the first `max_rows` rows go out now.
            let mut all = Vec::new();
            self.my_run(&cmd, &mut writer, &mut all, false).await?;
            p.kept = limit_rows(&all, max_rows, &mut self.io.out);
        }
        if writer.errored {
            self.ex.refuse();
        }
        Ok(())
    }
}
