//! Semantic analysis (`sql::analyze::analyze` with the built-in function catalogs), the
//! sqlparser-based `fingerprint_ast` and the session-effect classifier, on both dialects.
//!
//! Properties: no panic and no stack overflow on any text (the analyzer promises "never panics
//! and never fails", with token guards against deep nesting); eligible facts are consistent.
//!
//! A panic inside sqlparser itself is caught by `sql::parse` and the statement refused; that
//! class is reported (fuzz/README.md), so such panics do not stop a campaign unless
//! `QP_FUZZ_STRICT=1`. Any other panic still aborts, as libFuzzer expects.
#![no_main]

use std::sync::{Once, OnceLock};

use libfuzzer_sys::fuzz_target;
use querypilot::sql::analyze::{analyze, session_effects, Operation};
use querypilot::sql::fingerprint::fingerprint_ast;
use querypilot::sql::volatility::FunctionCatalog;
use querypilot::sql::Dialect;

fn catalogs() -> &'static [(Dialect, FunctionCatalog); 2] {
    static CATALOGS: OnceLock<[(Dialect, FunctionCatalog); 2]> = OnceLock::new();
    CATALOGS.get_or_init(|| [Dialect::Postgres, Dialect::MySql].map(|d| (d, FunctionCatalog::builtin(d))))
}

/// Lets panics raised in sqlparser's own code unwind to `sql::parse`'s `catch_unwind`, quietly;
/// every other panic aborts as under libfuzzer-sys's own hook.
fn tolerate_caught_sqlparser_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        if std::env::var_os("QP_FUZZ_STRICT").is_some_and(|v| v == "1") {
            return;
        }
        let fuzzer_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info.location().is_some_and(querypilot::sql::parse::raised_in_sqlparser) {
                fuzzer_hook(info);
            }
        }));
    });
}

fuzz_target!(|data: &[u8]| {
    tolerate_caught_sqlparser_panics();
    let sql = String::from_utf8_lossy(data);
    for (dialect, catalog) in catalogs() {
        let facts = analyze(&sql, *dialect, catalog);
        if facts.replica_eligible() {
            assert_eq!(facts.operation, Operation::Read);
            assert!(facts.statement_count > 0 && facts.locking.is_none() && facts.affinity.is_empty());
        }
        let _ = session_effects(&sql, *dialect);
        let _ = fingerprint_ast(&sql, *dialect);
    }
});
