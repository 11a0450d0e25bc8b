//! The sqlparser `Visitor` that walks every expression, query and table factor of a statement
//! and records function volatility, row locks, `SELECT ... INTO`, nested data-changing
//! statements and MySQL variables.

use std::ops::ControlFlow;

use sqlparser::ast::{
    Expr, FunctionArg, FunctionArgExpr, FunctionArguments, NonBlock, ObjectName, ObjectNamePart, Query, SelectInto,
    SetExpr, Statement, TableFactor, Value, Visit, Visitor,
};

use super::facts::{Affinity, LockClause, LockStrength, LockWait, StatementFacts};
use crate::volatility::{FunctionCatalog, Volatility};
use crate::Dialect;

/// Accumulates facts while walking one top-level statement.
pub(super) struct Walker<'a> {
    pub facts: StatementFacts,
    catalog: &'a FunctionCatalog,
    dialect: Dialect,
    /// Nesting of `Statement` nodes seen by the visitor (1 = the walked statement itself).
    depth: usize,
    /// A nested INSERT/UPDATE/DELETE/MERGE (data-changing CTE) or a function that writes.
    pub writes: bool,
    /// PostgreSQL `SELECT ... INTO table` creates a table.
    pub creates_table: bool,
    /// A nested statement of a kind a read cannot contain.
    pub nested_other: bool,
}

impl<'a> Walker<'a> {
    pub fn new(catalog: &'a FunctionCatalog, dialect: Dialect) -> Self {
        Walker {
            facts: StatementFacts::read(),
            catalog,
            dialect,
            depth: 0,
            writes: false,
            creates_table: false,
            nested_other: false,
        }
    }

    pub fn dialect(&self) -> Dialect {
        self.dialect
    }

    /// Walks any AST node; nodes already bounded in depth by the token guards.
    pub fn walk<V: Visit + ?Sized>(&mut self, node: &V) {
        // The visitor never breaks, so the result carries nothing.
        let _ = node.visit(self);
    }

    /// Walks a part of a statement (a query, an expression) as if inside a statement, so any
    /// statement nested in it counts as nested.
    pub fn walk_part<V: Visit + ?Sized>(&mut self, node: &V) {
        self.depth += 1;
        self.walk(node);
        self.depth -= 1;
    }

    pub fn affinity(&mut self, a: Affinity, detail: impl Into<String>) {
        self.facts.affinity.insert(a);
        self.facts.note(a.name(), detail);
    }

    /// Records a call of `name` (as written, possibly qualified) with its arguments.
    fn call(&mut self, name: &ObjectName, args: Option<&[FunctionArg]>) {
        let full = function_name(name, self.catalog.dialect());
        let info = if quoted_case(name, self.catalog.dialect()) {
            self.catalog.lookup_loaded(&full)
        } else {
            self.catalog.lookup(&full)
        };
        let Some(info) = info else {
            self.facts.volatility = Volatility::Volatile;
            self.facts.note("unknown_function", full);
            return;
        };
        self.facts.volatility = self.facts.volatility.max(info.volatility);
        if info.volatility == Volatility::Volatile {
            self.facts.note("volatile_function", full.clone());
        }
        if info.writes {
            self.writes = true;
            self.facts.note("writing_function", full.clone());
        }
        for a in info.affinity.iter() {
            self.affinity(a, full.clone());
        }
        if full.rsplit('.').next() == Some("set_config") {
            self.set_config(args.unwrap_or(&[]));
        }
    }

    /// `set_config(name, value, is_local)` with a literal name: a transaction-local one lasts
    /// until the end of the transaction.
    fn set_config(&mut self, args: &[FunctionArg]) {
        let lit = |i: usize| match args.get(i) {
            Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) => Some(&v.value),
            _ => None,
        };
        let named = lit(0).is_some_and(|v| v.clone().into_string().is_some());
        if named && matches!(lit(2), Some(Value::Boolean(true))) {
            self.affinity(Affinity::TransactionScoped, "set_config(..., true)");
        }
    }

    fn lock(&mut self, query: &Query) {
        for l in &query.locks {
            let strength = match l.lock_type {
                sqlparser::ast::LockType::Update => LockStrength::Update,
                sqlparser::ast::LockType::Share => LockStrength::Share,
            };
            let wait = match l.nonblock {
                None => LockWait::Wait,
                Some(NonBlock::Nowait) => LockWait::Nowait,
                Some(NonBlock::SkipLocked) => LockWait::SkipLocked,
            };
            let clause = LockClause { strength, wait };
            self.facts.note("row_lock", clause.to_string());
            self.facts.locking = match self.facts.locking {
                Some(old) if old.strength >= strength => Some(old),
                _ => Some(clause),
            };
        }
    }

    fn select_into(&mut self, into: &SelectInto) {
        let name = object_name(&into.name);
        match self.dialect {
            Dialect::Postgres => {
                self.creates_table = true;
                self.facts.note("select_into", name.clone());
                if into.temporary {
                    self.affinity(Affinity::TempTable, name);
                }
            }
            Dialect::MySql => {
                if name.starts_with('@') {
                    self.affinity(Affinity::UserVariable, name.clone());
                }
                self.affinity(Affinity::SelectInto, name);
            }
        }
    }

    /// MySQL `@user` and `@@system` variables appearing as identifiers.
    fn variable(&mut self, first: &str) {
        if self.dialect == Dialect::MySql && first.starts_with('@') && !first.starts_with("@@") {
            self.affinity(Affinity::UserVariable, first.to_owned());
        }
    }
}

/// Views whose rows describe the server (or session) answering rather than the data: activity,
/// locks, statistics, settings, replication. Monitoring asks these about the primary.
fn server_state_relation(dialect: Dialect, name: &str) -> bool {
    let (schema, base) = name.rsplit_once('.').unwrap_or(("", name));
    match dialect {
        Dialect::Postgres => {
            base.starts_with("pg_stat")
                || matches!(
                    base,
                    "pg_locks"
                        | "pg_settings"
                        | "pg_prepared_xacts"
                        | "pg_prepared_statements"
                        | "pg_cursors"
                        | "pg_replication_slots"
                        | "pg_backend_memory_contexts"
                        | "pg_file_settings"
                        | "pg_hba_file_rules"
                        | "pg_replication_origin_status"
                )
        }
        Dialect::MySql => {
            matches!(schema, "performance_schema" | "sys")
                || (schema == "information_schema"
                    && (base.starts_with("innodb_")
                        || matches!(
                            base,
                            "processlist"
                                | "session_variables"
                                | "session_status"
                                | "global_variables"
                                | "global_status"
                                | "user_variables"
                        )))
        }
    }
}

/// Whether a quoted part of a function name keeps the name from meaning a built-in: in
/// PostgreSQL a quoted identifier keeps its case (`"Now"` is not `now`, `"now"` is); in MySQL a
/// quoted function name is not taken for the built-in, whatever its case.
fn quoted_case(name: &ObjectName, dialect: Dialect) -> bool {
    name.0.iter().any(|part| match part {
        ObjectNamePart::Identifier(i) => match (i.quote_style, dialect) {
            (None, _) => false,
            (Some(_), Dialect::MySql) => true,
            (Some(_), Dialect::Postgres) => i.value.bytes().any(|b| b.is_ascii_uppercase()),
        },
        _ => true,
    })
}

/// A called function's dotted name as the server resolves it: PostgreSQL folds unquoted parts
/// to lower case and keeps quoted ones as written; MySQL function names ignore case.
fn function_name(name: &ObjectName, dialect: Dialect) -> String {
    let mut out = String::new();
    for part in &name.0 {
        if !out.is_empty() {
            out.push('.');
        }
        match (part, dialect) {
            (ObjectNamePart::Identifier(i), Dialect::Postgres) if i.quote_style.is_some() => out.push_str(&i.value),
            (ObjectNamePart::Identifier(i), _) => out.push_str(&i.value.to_ascii_lowercase()),
            (other, _) => out.push_str(&other.to_string().to_ascii_lowercase()),
        }
    }
    out
}

/// Lower-cased dotted name, identifiers unquoted.
pub(super) fn object_name(name: &ObjectName) -> String {
    let mut out = String::new();
    for part in &name.0 {
        if !out.is_empty() {
            out.push('.');
        }
        match part {
            ObjectNamePart::Identifier(i) => out.push_str(&i.value.to_ascii_lowercase()),
            other => out.push_str(&other.to_string().to_ascii_lowercase()),
        }
    }
    out
}

impl Visitor for Walker<'_> {
    type Break = ();

    fn pre_visit_statement(&mut self, statement: &Statement) -> ControlFlow<()> {
        self.depth += 1;
        if self.depth > 1 {
            match statement {
                Statement::Insert(_) | Statement::Update { .. } | Statement::Delete(_) | Statement::Merge { .. } => {
                    self.writes = true;
                    let kind = match statement {
                        Statement::Insert(_) => "INSERT",
                        Statement::Update { .. } => "UPDATE",
                        Statement::Delete(_) => "DELETE",
                        _ => "MERGE",
                    };
                    self.facts.note("data_changing_cte", kind);
                }
                Statement::Query(_) => {}
                _ => {
                    self.nested_other = true;
                    self.facts.note("nested_statement", "non-query statement inside a query");
                }
            }
        }
        ControlFlow::Continue(())
    }

    fn post_visit_statement(&mut self, _statement: &Statement) -> ControlFlow<()> {
        self.depth = self.depth.saturating_sub(1);
        ControlFlow::Continue(())
    }

    fn pre_visit_query(&mut self, query: &Query) -> ControlFlow<()> {
        self.lock(query);
        // Walk this query's own set-operation tree (not nested queries: the visitor reaches
        // those itself). Iterative so a long UNION chain cannot deepen the stack.
        let mut stack = vec![query.body.as_ref()];
        while let Some(body) = stack.pop() {
            match body {
                SetExpr::Select(select) => {
                    if let Some(into) = &select.into {
                        self.select_into(into);
                    }
                }
                SetExpr::SetOperation { left, right, .. } => {
                    stack.push(left);
                    stack.push(right);
                }
                _ => {}
            }
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_relation(&mut self, relation: &ObjectName) -> ControlFlow<()> {
        let name = object_name(relation);
        if server_state_relation(self.dialect, &name) {
            self.affinity(Affinity::ServerState, name);
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_table_factor(&mut self, factor: &TableFactor) -> ControlFlow<()> {
        match factor {
            TableFactor::Table { name, args: Some(args), .. } => self.call(name, Some(&args.args)),
            TableFactor::Function { name, args, .. } => self.call(name, Some(args)),
            _ => {}
        }
        ControlFlow::Continue(())
    }

    fn pre_visit_expr(&mut self, expr: &Expr) -> ControlFlow<()> {
        match expr {
            Expr::Function(f) => {
                let args = match &f.args {
                    FunctionArguments::List(list) => Some(list.args.as_slice()),
                    _ => None,
                };
                self.call(&f.name, args);
            }
            Expr::Identifier(i) => self.variable(&i.value),
            Expr::CompoundIdentifier(parts) => {
                if let Some(first) = parts.first() {
                    self.variable(&first.value);
                }
            }
            _ => {}
        }
        ControlFlow::Continue(())
    }
}
