//! Semantic analysis (`sql::analyze::analyze` with the built-in function catalogs) and the
//! sqlparser-based `fingerprint_ast`, on both dialects.
//!
//! Properties: no panic and no stack overflow on any text (the analyzer promises "never panics
//! and never fails", with token guards against deep nesting); eligible facts are consistent.
#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use querypilot::sql::analyze::{analyze, Operation};
use querypilot::sql::fingerprint::fingerprint_ast;
use querypilot::sql::volatility::FunctionCatalog;
use querypilot::sql::Dialect;

fn catalogs() -> &'static [(Dialect, FunctionCatalog); 2] {
    static CATALOGS: OnceLock<[(Dialect, FunctionCatalog); 2]> = OnceLock::new();
    CATALOGS.get_or_init(|| {
        [Dialect::Postgres, Dialect::MySql].map(|d| (d, FunctionCatalog::builtin(d)))
    })
}

fuzz_target!(|data: &[u8]| {
    let sql = String::from_utf8_lossy(data);
    for (dialect, catalog) in catalogs() {
        let facts = analyze(&sql, *dialect, catalog);
        if facts.replica_eligible() {
            assert_eq!(facts.operation, Operation::Read);
            assert!(facts.statement_count > 0 && facts.locking.is_none() && facts.affinity.is_empty());
        }
        let _ = facts.session_set();
        let _ = fingerprint_ast(&sql, *dialect);
    }
});
