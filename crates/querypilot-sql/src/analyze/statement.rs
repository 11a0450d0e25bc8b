//! Classification of one parsed top-level statement into an [`Operation`] plus the facts its
//! parts contribute. Anything not recognized here is `Operation::Unknown`.

use sqlparser::ast::{CloseCursor, CopySource, CopyTarget, DeclareType, Statement, Use};

use super::facts::{Affinity, Operation, StatementFacts, TxControl};
use super::session;
use super::walker::{object_name, Walker};
use crate::volatility::FunctionCatalog;
use crate::Dialect;

/// Facts for one parsed statement.
pub(super) fn analyze_statement(stmt: &Statement, dialect: Dialect, catalog: &FunctionCatalog) -> StatementFacts {
    let mut w = Walker::new(catalog, dialect);
    let op = classify(stmt, &mut w);
    finish(w, op)
}

/// Applies what the walk found to the statement's own operation.
fn finish(w: Walker<'_>, op: Operation) -> StatementFacts {
    let mut facts = w.facts;
    facts.operation = op;
    if op == Operation::Read && w.nested_other {
        facts.operation = Operation::Unknown;
    }
    if w.creates_table {
        facts.raise(Operation::Ddl);
    }
    if w.writes {
        facts.raise(Operation::Write);
    }
    facts
}

fn classify(stmt: &Statement, w: &mut Walker<'_>) -> Operation {
    if let Some(op) = classify_simple(stmt, w) {
        return op;
    }
    match stmt {
        Statement::Query(_) => {
            w.walk(stmt);
            Operation::Read
        }
        Statement::Insert(_) | Statement::Update { .. } | Statement::Delete(_) | Statement::Merge { .. } => {
            w.walk(stmt);
            Operation::Write
        }
        Statement::Copy { source, to, target, .. } => copy(source, *to, target, w),
        Statement::Explain { analyze, statement, options, .. } => {
            let analyzes = *analyze || options.iter().flatten().any(|o| o.name.value.eq_ignore_ascii_case("analyze"));
            if analyzes {
                // EXPLAIN ANALYZE executes the statement: its facts are the statement's.
                w.facts.note("explain_analyze", "");
                classify(statement, w)
            } else {
                w.facts.note("explain", "plan only, nothing executed");
                Operation::Read
            }
        }
        Statement::Set(set) => session::set(set, w),
        Statement::Declare { stmts } => declare(stmts, w),
        Statement::CreateTable(ct) => {
            if ct.temporary {
                w.affinity(Affinity::TempTable, object_name(&ct.name));
            }
            Operation::Ddl
        }
        Statement::CreateSequence { temporary: true, name, .. } => {
            w.affinity(Affinity::TempTable, object_name(name));
            Operation::Ddl
        }
        _ => classify_other(stmt, w),
    }
}

/// Statements whose classification needs no walk of their parts.
fn classify_simple(stmt: &Statement, w: &mut Walker<'_>) -> Option<Operation> {
    let op = match stmt {
        Statement::StartTransaction { .. } => Operation::TransactionControl(TxControl::Begin),
        Statement::Commit { .. } => Operation::TransactionControl(TxControl::Commit),
        Statement::Rollback { savepoint: None, .. } => Operation::TransactionControl(TxControl::Rollback),
        Statement::Rollback { savepoint: Some(_), .. } => Operation::TransactionControl(TxControl::RollbackTo),
        Statement::Savepoint { .. } => Operation::TransactionControl(TxControl::Savepoint),
        Statement::ReleaseSavepoint { .. } => Operation::TransactionControl(TxControl::Release),
        Statement::ShowFunctions { .. }
        | Statement::ShowVariable { .. }
        | Statement::ShowStatus { .. }
        | Statement::ShowVariables { .. }
        | Statement::ShowCreate { .. }
        | Statement::ShowColumns { .. }
        | Statement::ShowDatabases { .. }
        | Statement::ShowSchemas { .. }
        | Statement::ShowCharset(_)
        | Statement::ShowObjects(_)
        | Statement::ShowTables { .. }
        | Statement::ShowViews { .. }
        | Statement::ShowCollation { .. }
        | Statement::ExplainTable { .. } => {
            // SHOW / DESCRIBE answer about the server asked; schema tools issue them right after
            // DDL, and a lagging replica would answer stale. Rare and cheap: keep them on the primary.
            w.affinity(Affinity::ServerState, first_words(stmt));
            Operation::Read
        }
        Statement::NOTIFY { channel, .. } => {
            w.facts.note("notify", channel.value.clone());
            Operation::Write
        }
        Statement::Call(f) => {
            w.facts.note("call", object_name(&f.name));
            Operation::Unknown
        }
        _ => return connection_state(stmt, w),
    };
    Some(op)
}

/// Statements that create or drop per-connection state the session layer tracks.
fn connection_state(stmt: &Statement, w: &mut Walker<'_>) -> Option<Operation> {
    let op = match stmt {
        Statement::Use(u) => {
            let name = match u {
                Use::Object(n) | Use::Database(n) | Use::Schema(n) | Use::Catalog(n) => object_name(n),
                other => other.to_string(),
            };
            w.affinity(Affinity::SessionSet, format!("USE {name}"));
            Operation::Session
        }
        Statement::Discard { object_type } => {
            w.affinity(Affinity::SessionSet, format!("DISCARD {object_type}"));
            Operation::Session
        }
        Statement::LISTEN { channel } => {
            w.affinity(Affinity::Listen, channel.value.clone());
            Operation::Session
        }
        Statement::UNLISTEN { channel } => {
            w.affinity(Affinity::Listen, channel.value.clone());
            Operation::Session
        }
        Statement::LockTables { .. } => {
            w.affinity(Affinity::LockTables, "LOCK TABLES");
            Operation::Session
        }
        Statement::UnlockTables => {
            w.affinity(Affinity::LockTables, "UNLOCK TABLES");
            Operation::Session
        }
        _ => return prepared_or_cursor(stmt, w),
    };
    Some(op)
}

fn copy(source: &CopySource, to: bool, target: &CopyTarget, w: &mut Walker<'_>) -> Operation {
    if !to {
        return Operation::Write;
    }
    match target {
        CopyTarget::Stdout => {
            if let CopySource::Query(q) = source {
                w.walk_part(q.as_ref());
            }
            Operation::Read
        }
        // COPY TO a server file or program writes on the server: superuser work for the primary.
        _ => {
            w.facts.note("copy_to_server", target.to_string());
            Operation::Admin
        }
    }
}

fn declare(stmts: &[sqlparser::ast::Declare], w: &mut Walker<'_>) -> Operation {
    let mut op = Operation::Read;
    for d in stmts {
        if d.declare_type != Some(DeclareType::Cursor) && d.for_query.is_none() {
            // Variable declarations belong to procedural code this proxy does not model.
            op = Operation::Unknown;
            w.facts.note("declare", "not a cursor");
            continue;
        }
        for name in &d.names {
            w.affinity(Affinity::Cursor, name.value.clone());
            if d.hold == Some(true) {
                w.affinity(Affinity::CursorWithHold, name.value.clone());
            }
        }
        if let Some(q) = &d.for_query {
            w.walk_part(q.as_ref());
        }
    }
    op
}

fn classify_other(stmt: &Statement, w: &mut Walker<'_>) -> Operation {
    match stmt {
        Statement::Truncate { .. }
        | Statement::LoadData { .. }
        | Statement::Directory { .. }
        | Statement::Unload { .. }
        | Statement::CopyIntoSnowflake { .. }
        | Statement::ExportData(_) => Operation::Write,
        Statement::CreateView { .. }
        | Statement::CreateVirtualTable { .. }
        | Statement::CreateIndex(_)
        | Statement::CreateSecret { .. }
        | Statement::CreateServer(_)
        | Statement::CreatePolicy { .. }
        | Statement::CreateConnector(_)
        | Statement::AlterTable { .. }
        | Statement::AlterSchema(_)
        | Statement::AlterIndex { .. }
        | Statement::AlterView { .. }
        | Statement::AlterType(_)
        | Statement::AlterPolicy { .. }
        | Statement::AlterConnector { .. }
        | Statement::Drop { .. }
        | Statement::DropFunction { .. }
        | Statement::DropDomain(_)
        | Statement::DropProcedure { .. }
        | Statement::DropSecret { .. }
        | Statement::DropPolicy { .. }
        | Statement::DropConnector { .. }
        | Statement::CreateExtension { .. }
        | Statement::DropExtension { .. }
        | Statement::Comment { .. }
        | Statement::CreateSchema { .. }
        | Statement::CreateDatabase { .. }
        | Statement::CreateFunction(_)
        | Statement::CreateTrigger(_)
        | Statement::DropTrigger(_)
        | Statement::CreateProcedure { .. }
        | Statement::CreateMacro { .. }
        | Statement::CreateStage { .. }
        | Statement::CreateSequence { .. }
        | Statement::CreateDomain(_)
        | Statement::CreateType { .. }
        | Statement::RenameTable(_) => Operation::Ddl,
        Statement::Kill { .. }
        | Statement::Grant { .. }
        | Statement::Revoke { .. }
        | Statement::Deny(_)
        | Statement::Vacuum(_)
        | Statement::Analyze { .. }
        | Statement::Flush { .. }
        | Statement::OptimizeTable { .. }
        | Statement::CreateRole { .. }
        | Statement::AlterRole { .. }
        | Statement::CreateUser(_)
        | Statement::Msck { .. } => Operation::Admin,
        other => {
            w.facts.note("unsupported_statement", first_words(other));
            Operation::Unknown
        }
    }
}

/// The first two words of a statement's SQL rendering, for evidence details.
fn first_words(stmt: &Statement) -> String {
    let text = stmt.to_string();
    text.split_whitespace().take(2).collect::<Vec<_>>().join(" ")
}

/// SQL-level prepared statements and cursors.
fn prepared_or_cursor(stmt: &Statement, w: &mut Walker<'_>) -> Option<Operation> {
    let op = match stmt {
        Statement::Prepare { name, .. } => {
            w.affinity(Affinity::SqlPrepare, name.value.clone());
            Operation::Session
        }
        Statement::Deallocate { name, .. } => {
            w.affinity(Affinity::SqlPrepare, name.value.clone());
            Operation::Session
        }
        Statement::Execute { name, .. } => {
            let name = name.as_ref().map(object_name).unwrap_or_default();
            w.affinity(Affinity::SqlPrepare, name.clone());
            w.facts.note("execute", format!("{name}: prepared statement text unknown here"));
            Operation::Unknown
        }
        Statement::Fetch { name, .. } => {
            w.affinity(Affinity::Cursor, name.value.clone());
            Operation::Read
        }
        Statement::Close { cursor } => {
            let name = match cursor {
                CloseCursor::All => "ALL".into(),
                CloseCursor::Specific { name } => name.value.clone(),
            };
            w.affinity(Affinity::Cursor, name);
            Operation::Session
        }
        _ => return None,
    };
    Some(op)
}
