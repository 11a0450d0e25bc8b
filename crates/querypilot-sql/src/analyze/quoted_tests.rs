//! Quoted function names keep their meaning (#19 case 6): PostgreSQL folds only unquoted
//! identifiers, so `"Now"()` is some other (unknown, hence volatile) function than `now()`;
//! a MySQL function name in backticks is not taken for the built-in either.

use super::*;
use crate::volatility::{FunctionCatalog, Volatility};
use crate::Dialect;

#[test]
fn quoted_names_are_not_folded_into_built_ins() {
    let pg = FunctionCatalog::builtin(Dialect::Postgres);
    let my = FunctionCatalog::builtin(Dialect::MySql);
    // (dialect, sql, replica-eligible)
    let cases = [
        (Dialect::Postgres, "SELECT now()", true),
        (Dialect::Postgres, "SELECT NOW()", true),
        (Dialect::Postgres, "SELECT \"now\"()", true),
        (Dialect::Postgres, "SELECT \"Now\"()", false),
        (Dialect::Postgres, "SELECT \"NOW\"()", false),
        (Dialect::Postgres, "SELECT pg_catalog.\"Lower\"('a')", false),
        (Dialect::Postgres, "SELECT \"PG_CATALOG\".lower('a')", false),
        (Dialect::Postgres, "SELECT pg_catalog.\"lower\"('a')", true),
        (Dialect::Postgres, "SELECT a FROM t WHERE b = \"Lower\"('x')", false),
        (Dialect::MySql, "SELECT NOW()", true),
        (Dialect::MySql, "SELECT `now`()", false),
        (Dialect::MySql, "SELECT `Lower`('a')", false),
    ];
    for (dialect, sql, eligible) in cases {
        let catalog = if dialect == Dialect::Postgres { &pg } else { &my };
        let f = analyze(sql, dialect, catalog);
        assert_eq!(f.replica_eligible(), eligible, "{sql}: {f:?}");
        if !eligible {
            assert_eq!(f.volatility, Volatility::Volatile, "{sql}");
        }
    }
}

#[test]
fn quoted_names_still_find_what_the_backend_reported() {
    let mut pg = FunctionCatalog::builtin(Dialect::Postgres);
    pg.insert(Some("app"), "Score", Volatility::Stable);
    assert!(analyze("SELECT app.\"Score\"(1)", Dialect::Postgres, &pg).replica_eligible());
    assert!(analyze("SELECT \"Score\"(1)", Dialect::Postgres, &pg).replica_eligible());
    // PostgreSQL names differ by case once quoted: a volatile `score` changes nothing for
    // `"Score"`, and a volatile user function `"Now"` leaves the built-in `now()` alone.
    pg.insert(Some("app"), "score", Volatility::Volatile);
    assert!(analyze("SELECT \"Score\"(1)", Dialect::Postgres, &pg).replica_eligible());
    assert!(!analyze("SELECT score(1)", Dialect::Postgres, &pg).replica_eligible());
    assert!(!analyze("SELECT SCORE(1)", Dialect::Postgres, &pg).replica_eligible());
    pg.insert(Some("public"), "Now", Volatility::Volatile);
    assert!(analyze("SELECT now()", Dialect::Postgres, &pg).replica_eligible());
    assert!(analyze("SELECT NOW()", Dialect::Postgres, &pg).replica_eligible());
    assert!(!analyze("SELECT \"Now\"()", Dialect::Postgres, &pg).replica_eligible());
    assert!(!analyze("SELECT public.\"Now\"()", Dialect::Postgres, &pg).replica_eligible());
    let mut my = FunctionCatalog::builtin(Dialect::MySql);
    my.insert(Some("shop"), "price", Volatility::Stable);
    assert!(analyze("SELECT `price`(1)", Dialect::MySql, &my).replica_eligible());
    assert_eq!(my.lookup_loaded("now"), None, "built-ins are not loaded entries");
}
