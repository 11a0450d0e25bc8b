//! Focused tests per rule, plus the corpus check.

use super::*;
use crate::sql::volatility::FunctionCatalog;
use crate::sql::Dialect;

fn pg(sql: &str) -> StatementFacts {
    analyze(sql, Dialect::Postgres, &FunctionCatalog::builtin(Dialect::Postgres))
}

#[test]
fn debug_print() {
    for s in ["SELECT @x, @@session.sql_mode", "SET @@session.sql_mode = 'x'", "SET @x := 1"] {
        let f = analyze(s, Dialect::MySql, &FunctionCatalog::builtin(Dialect::MySql));
        println!("{s}: {f:?}");
    }
    println!("{:?}", pg("SELECT 1"));
}
