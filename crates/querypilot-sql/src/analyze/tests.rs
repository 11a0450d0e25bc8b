//! Focused tests per rule, plus the corpus check over `tests/corpus/facts_*.tsv`.

use super::*;
use crate::volatility::{parse_mysql_udf_row, parse_pg_udf_row, FunctionCatalog, Volatility};
use crate::Dialect;

fn pg(sql: &str) -> StatementFacts {
    analyze(sql, Dialect::Postgres, &FunctionCatalog::builtin(Dialect::Postgres))
}

fn my(sql: &str) -> StatementFacts {
    analyze(sql, Dialect::MySql, &FunctionCatalog::builtin(Dialect::MySql))
}

fn has(f: &StatementFacts, fact: &str) -> bool {
    f.evidence.iter().any(|e| e.fact == fact)
}

/// Checks every corpus line and reports all mismatches at once.
fn check_corpus(text: &str, dialect: Dialect) -> usize {
    let catalog = FunctionCatalog::builtin(dialect);
    let mut mismatches = Vec::new();
    let mut checked = 0;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() || line.starts_with('#') {
            continue;
        }
        let cols: Vec<&str> = line.splitn(4, '\t').collect();
        let [op, eligible, reason, sql] = cols.as_slice() else {
            mismatches.push(format!("line {}: malformed: {line}", n + 1));
            continue;
        };
        let f = analyze(sql, dialect, &catalog);
        let got = (
            f.operation.name(),
            if f.replica_eligible() { "yes" } else { "no" },
            f.ineligibility_reason().unwrap_or("-"),
        );
        if got != (*op, *eligible, *reason) {
            mismatches.push(format!(
                "line {}: expected {op}/{eligible}/{reason}, got {}/{}/{} ({:?}): {sql}",
                n + 1,
                got.0,
                got.1,
                got.2,
                f.evidence
            ));
        }
        checked += 1;
    }
    assert!(mismatches.is_empty(), "{} corpus mismatches:\n{}", mismatches.len(), mismatches.join("\n"));
    checked
}

#[test]
fn corpus_pg() {
    let n = check_corpus(include_str!("../../../../tests/corpus/facts_pg.tsv"), Dialect::Postgres);
    assert!(n >= 300, "only {n} statements");
}

#[test]
fn corpus_mysql() {
    let n = check_corpus(include_str!("../../../../tests/corpus/facts_mysql.tsv"), Dialect::MySql);
    assert!(n >= 300, "only {n} statements");
}

#[test]
fn plain_read_is_eligible() {
    let f = pg("SELECT id, lower(name) FROM users WHERE id = $1");
    assert_eq!(f.operation, Operation::Read);
    assert_eq!(f.volatility, Volatility::Immutable);
    assert!(f.replica_eligible());
    assert_eq!(f.ineligibility_reason(), None);
    assert_eq!(f.statement_count, 1);
}

#[test]
fn stable_functions_are_eligible_volatile_are_not() {
    let f = pg("SELECT now(), current_setting('app.tenant')");
    assert_eq!(f.volatility, Volatility::Stable);
    assert!(f.replica_eligible());
    let f = pg("SELECT id FROM t WHERE x > random()");
    assert_eq!(f.volatility, Volatility::Volatile);
    assert_eq!(f.ineligibility_reason(), Some("volatile_function"));
    assert!(has(&f, "volatile_function"));
}

#[test]
fn unknown_function_is_volatile() {
    let f = pg("SELECT my_func(1)");
    assert_eq!(f.volatility, Volatility::Volatile);
    assert!(has(&f, "unknown_function"));
    assert!(!f.replica_eligible());
}

#[test]
fn function_in_from_clause_is_checked() {
    assert!(!pg("SELECT * FROM my_srf(1)").replica_eligible());
    assert!(pg("SELECT * FROM generate_series(1, 3)").replica_eligible());
}

#[test]
fn user_defined_functions_override_and_combine() {
    let mut cat = FunctionCatalog::builtin(Dialect::Postgres);
    cat.insert(Some("app"), "score", Volatility::Stable);
    assert!(analyze("SELECT app.score(1)", Dialect::Postgres, &cat).replica_eligible());
    assert!(analyze("SELECT score(1)", Dialect::Postgres, &cat).replica_eligible());
    // Another schema's volatile function of the same name makes the unqualified name volatile.
    cat.insert(Some("other"), "score", Volatility::Volatile);
    assert!(!analyze("SELECT score(1)", Dialect::Postgres, &cat).replica_eligible());
    assert!(analyze("SELECT app.score(1)", Dialect::Postgres, &cat).replica_eligible());
    // A loaded row never makes a built-in less volatile than our list says.
    cat.insert(Some("pg_catalog"), "txid_current", Volatility::Stable);
    assert_eq!(cat.volatility("txid_current"), Some(Volatility::Volatile));
    // Qualified names outside pg_catalog do not fall back to built-ins.
    assert_eq!(cat.volatility("myschema.lower"), None);
    assert_eq!(cat.volatility("pg_catalog.lower"), Some(Volatility::Immutable));
    // Names are matched after folding, as the server resolves them: `"LOWER"` is not `lower`.
    assert_eq!(cat.volatility("lower"), Some(Volatility::Immutable));
    assert_eq!(cat.volatility("LOWER"), None);
}

#[test]
fn udf_rows_parse() {
    let row = parse_pg_udf_row("app", "f", "s").map(|r| r.volatility);
    assert_eq!(row, Some(Volatility::Stable));
    assert_eq!(parse_pg_udf_row("app", "f", "i").map(|r| r.volatility), Some(Volatility::Immutable));
    assert_eq!(parse_pg_udf_row("app", "f", "v").map(|r| r.volatility), Some(Volatility::Volatile));
    assert_eq!(parse_pg_udf_row("app", "f", "x"), None);
    let v = |d: &str, a: &str| parse_mysql_udf_row("db", "f", d, a).map(|r| r.volatility);
    assert_eq!(v("YES", "NO SQL"), Some(Volatility::Stable));
    assert_eq!(v("YES", "READS SQL DATA"), Some(Volatility::Stable));
    assert_eq!(v("YES", "CONTAINS SQL"), Some(Volatility::Stable));
    assert_eq!(v("YES", "MODIFIES SQL DATA"), Some(Volatility::Volatile));
    assert_eq!(v("NO", "NO SQL"), Some(Volatility::Volatile));
    assert_eq!(v("maybe", "NO SQL"), None);
    let mut cat = FunctionCatalog::builtin(Dialect::MySql);
    if let Some(row) = parse_mysql_udf_row("shop", "price_of", "YES", "READS SQL DATA") {
        cat.insert_row(&row);
    }
    assert!(analyze("SELECT shop.price_of(1)", Dialect::MySql, &cat).replica_eligible());
}

#[test]
fn writes_and_data_changing_ctes() {
    assert_eq!(pg("UPDATE t SET x = 1").operation, Operation::Write);
    let f = pg("WITH d AS (DELETE FROM q RETURNING id) SELECT * FROM d");
    assert_eq!(f.operation, Operation::Write);
    assert!(has(&f, "data_changing_cte"));
    let f = pg("WITH r AS (SELECT 1) SELECT * FROM r");
    assert!(f.replica_eligible());
}

#[test]
fn locking_reads_record_exact_strength() {
    let cases = [
        ("SELECT * FROM t FOR UPDATE", LockStrength::Update, LockWait::Wait),
        ("SELECT * FROM t FOR NO KEY UPDATE", LockStrength::NoKeyUpdate, LockWait::Wait),
        ("SELECT * FROM t FOR SHARE NOWAIT", LockStrength::Share, LockWait::Nowait),
        ("SELECT * FROM t FOR KEY SHARE SKIP LOCKED", LockStrength::KeyShare, LockWait::SkipLocked),
    ];
    for (sql, strength, wait) in cases {
        let f = pg(sql);
        assert_eq!(f.locking, Some(LockClause { strength, wait }), "{sql}");
        assert_eq!(f.ineligibility_reason(), Some("row_lock"));
    }
    let f = my("SELECT * FROM t WHERE id = 1 LOCK IN SHARE MODE");
    assert_eq!(f.locking.map(|l| l.strength), Some(LockStrength::Share));
    // A lock inside a subquery still counts.
    assert!(pg("SELECT * FROM (SELECT * FROM t FOR UPDATE) s").locking.is_some());
    // The words in a string literal or quoted identifier are not a lock.
    assert!(pg("SELECT 'FOR UPDATE', \"for\" FROM t").replica_eligible());
}

#[test]
fn select_into() {
    let f = pg("SELECT * INTO TEMP t2 FROM t");
    assert_eq!(f.operation, Operation::Ddl);
    assert!(f.affinity.contains(Affinity::TempTable));
    let f = my("SELECT id INTO @v FROM t LIMIT 1");
    assert!(f.affinity.contains(Affinity::SelectInto));
    assert!(f.affinity.contains(Affinity::UserVariable));
    assert!(!f.replica_eligible());
}

#[test]
fn explain_rules() {
    assert!(pg("EXPLAIN UPDATE t SET x = 1").replica_eligible());
    assert_eq!(pg("EXPLAIN ANALYZE UPDATE t SET x = 1").operation, Operation::Write);
    assert_eq!(pg("EXPLAIN (ANALYZE, BUFFERS) DELETE FROM t").operation, Operation::Write);
    assert!(pg("EXPLAIN ANALYZE SELECT 1").replica_eligible());
}

#[test]
fn copy_rules() {
    assert!(pg("COPY t TO STDOUT").replica_eligible());
    assert_eq!(pg("COPY t FROM STDIN").operation, Operation::Write);
    assert_eq!(pg("COPY t TO '/tmp/x'").operation, Operation::Admin);
}

#[test]
fn show_is_never_eligible() {
    for sql in ["SHOW search_path", "SHOW ALL"] {
        assert_eq!(pg(sql).ineligibility_reason(), Some("server_state"), "{sql}");
    }
    for sql in ["SHOW TABLES", "SHOW VARIABLES LIKE 'x'", "DESCRIBE t", "SHOW FULL PROCESSLIST"] {
        assert!(my(sql).affinity.contains(Affinity::ServerState), "{sql}");
        assert!(!my(sql).replica_eligible(), "{sql}");
    }
}

/// The session effects the one classifier reads from `sql`, without statement indexes.
fn effects(sql: &str, dialect: Dialect) -> Vec<Effect> {
    session_effects(sql, dialect).into_effects().collect()
}

fn set(name: &str, stmt: &str) -> Effect {
    Effect::Set { name: name.into(), stmt: stmt.into() }
}

#[test]
fn set_details_for_the_session_layer() {
    let sql = "SET search_path TO app, public";
    assert_eq!(pg(sql).operation, Operation::Session);
    assert!(pg(sql).affinity.contains(Affinity::SessionSet));
    assert_eq!(effects(sql, Dialect::Postgres), [set("search_path", sql)]);
    let sql = "SET LOCAL statement_timeout = '5s'";
    assert!(pg(sql).affinity.contains(Affinity::TransactionScoped));
    assert_eq!(effects(sql, Dialect::Postgres), [], "dies with the transaction");
    let sql = "SET TIME ZONE 'UTC'";
    assert!(pg(sql).affinity.contains(Affinity::SessionSet));
    assert_eq!(effects(sql, Dialect::Postgres), [set("timezone", sql)]);
    let sql = "SET @@SESSION.sql_mode = 'TRADITIONAL', @x = 1";
    assert!(my(sql).affinity.contains(Affinity::SessionSet) && my(sql).affinity.contains(Affinity::UserVariable));
    assert_eq!(
        effects(sql, Dialect::MySql),
        [set("sql_mode", "SET SESSION sql_mode = 'TRADITIONAL'"), Effect::Pin(PinReason::UserVariable)]
    );
    let sql = "SET GLOBAL max_connections = 10";
    assert_eq!(my(sql).operation, Operation::Admin);
    assert_eq!(effects(sql, Dialect::MySql), []);
    assert_eq!(effects("SET NAMES utf8mb4", Dialect::MySql), [set("names", "SET NAMES utf8mb4")]);
    let sql = "SELECT set_config('app.tenant', '7', true)";
    assert!(pg(sql).affinity.contains(Affinity::TransactionScoped));
    // Pinned even when transaction-local: the classifier reads no argument past the name.
    assert_eq!(effects(sql, Dialect::Postgres), [Effect::Pin(PinReason::UntrackedSetting)]);
    assert_eq!(
        pg("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE").operation,
        Operation::TransactionControl(TxControl::SetTransaction)
    );
    assert_eq!(my("SET SESSION TRANSACTION READ ONLY").operation, Operation::Session);
}

#[test]
fn session_resets_and_pins() {
    assert_eq!(effects("DISCARD ALL", Dialect::Postgres), [Effect::ResetAll]);
    assert_eq!(effects("RESET ALL", Dialect::Postgres), [Effect::ResetAll]);
    assert_eq!(effects("RESET search_path", Dialect::Postgres), [Effect::Reset("search_path".into())]);
    let f = pg("LISTEN jobs");
    assert!(f.affinity.contains(Affinity::Listen));
    assert_eq!(effects("LISTEN jobs", Dialect::Postgres), [Effect::Pin(PinReason::Listen)]);
    assert!(pg("CREATE TEMP TABLE x (id int)").affinity.contains(Affinity::TempTable));
    assert_eq!(effects("CREATE TEMP TABLE x (id int)", Dialect::Postgres), [Effect::Pin(PinReason::TempObject)]);
    let f = pg("DECLARE c CURSOR WITH HOLD FOR SELECT 1");
    assert!(f.affinity.contains(Affinity::CursorWithHold));
    assert!(pg("PREPARE p AS SELECT 1").affinity.contains(Affinity::SqlPrepare));
    assert_eq!(effects("PREPARE p AS SELECT 1", Dialect::Postgres), [Effect::Pin(PinReason::SqlPrepare)]);
    assert_eq!(effects("USE shop", Dialect::MySql), [Effect::Use("shop".into())]);
    assert!(my("LOCK TABLES t WRITE").affinity.contains(Affinity::LockTables));
    assert!(my("UNLOCK TABLES").affinity.contains(Affinity::LockTables));
    assert!(my("SELECT GET_LOCK('a', 1)").affinity.contains(Affinity::GetLock));
    assert!(my("SELECT @x").affinity.contains(Affinity::UserVariable));
    let f = my("SET @x := 1");
    assert!(f.affinity.contains(Affinity::UserVariable));
    assert_eq!(effects("SET @x := 1", Dialect::MySql), [Effect::Pin(PinReason::UserVariable)]);
    assert!(my("SELECT LAST_INSERT_ID()").affinity.contains(Affinity::LastInsertId));
    assert!(pg("SELECT nextval('s')").affinity.contains(Affinity::Sequence));
    assert!(pg("SELECT pg_advisory_lock(1)").affinity.contains(Affinity::AdvisoryLock));
    // A system variable read is stable: it is how tests prove which server answered.
    assert!(my("SELECT @@server_id").replica_eligible());
}

#[test]
fn transaction_control() {
    assert_eq!(pg("BEGIN").operation, Operation::TransactionControl(TxControl::Begin));
    assert_eq!(pg("ROLLBACK TO sp").operation, Operation::TransactionControl(TxControl::RollbackTo));
    assert_eq!(pg("RELEASE sp").operation, Operation::TransactionControl(TxControl::Release));
    assert_eq!(pg("PREPARE TRANSACTION 'x'").operation, Operation::TransactionControl(TxControl::PrepareTransaction));
    assert!(has(&pg("PREPARE TRANSACTION 'x'"), "parse_error"));
}

#[test]
fn multi_statement_strings_combine() {
    let f = pg("SELECT 1; SELECT now()");
    assert_eq!(f.statement_count, 2);
    assert!(f.replica_eligible());
    let f = pg("SELECT 1; DELETE FROM t");
    assert_eq!(f.operation, Operation::Write);
    assert_eq!(f.statement_count, 2);
    let f = pg("SELECT 1; SELEC 2");
    assert_eq!(f.operation, Operation::Unknown);
    assert!(has(&f, "parse_error"));
    // A semicolon inside a literal does not split.
    assert_eq!(pg("SELECT $$a;b$$, 'c;d'").statement_count, 1);
}

#[test]
fn unparsable_and_empty_are_not_eligible() {
    for sql in ["SELEC 1", "SELECT (", "SELECT 'x", "", "  -- only a comment", ";;"] {
        let f = pg(sql);
        assert!(!f.replica_eligible(), "{sql:?}");
    }
    assert_eq!(pg("").statement_count, 0);
    assert_eq!(pg("CALL p()").operation, Operation::Unknown);
    assert_eq!(pg("DO $$ BEGIN END $$").operation, Operation::Unknown);
}

fn on_small_stack(sql: String, dialect: Dialect) -> StatementFacts {
    let handle = std::thread::Builder::new().stack_size(2 * 1024 * 1024).spawn(move || {
        let cat = FunctionCatalog::builtin(dialect);
        analyze(&sql, dialect, &cat)
    });
    match handle.map(|h| h.join()) {
        Ok(Ok(f)) => f,
        _ => panic!("analysis thread failed"),
    }
}

/// Nested shapes that each cost parser, walker and drop stack per level.
fn nested(kind: &str, n: usize) -> String {
    match kind {
        "parens" => format!("SELECT {}1{}", "(".repeat(n), ")".repeat(n)),
        "scalar_subquery" => format!("SELECT {}1{}", "(SELECT ".repeat(n), ")".repeat(n)),
        "derived_table" => {
            format!("SELECT * FROM {}t{}", "(SELECT * FROM ".repeat(n), ") x".repeat(n))
        }
        "function" => format!("SELECT {}1{}", "abs(".repeat(n), ")".repeat(n)),
        "not" => format!("SELECT {}true", "NOT ".repeat(n)),
        "minus" => format!("SELECT {}1", "- ".repeat(n)),
        "case" => format!("SELECT {}1{}", "CASE WHEN true THEN ".repeat(n), " END".repeat(n)),
        _ => format!("SELECT {}1{}", "ARRAY[".repeat(n), "]".repeat(n)),
    }
}

#[test]
fn deep_nesting_is_unknown_not_a_crash() {
    let deep = nested("parens", 10_000);
    assert_eq!(on_small_stack(deep, Dialect::Postgres).operation, Operation::Unknown);
    let kinds = ["parens", "scalar_subquery", "derived_table", "function", "not", "minus", "case", "array"];
    for kind in kinds {
        let n = crate::parse::MAX_NESTING;
        // At the limit: analyzed for real, on a 2 MiB stack, in a debug build.
        let f = on_small_stack(nested(kind, n), Dialect::Postgres);
        assert_eq!(f.operation, Operation::Read, "{kind} at {n}: {:?}", f.evidence);
        let f = on_small_stack(nested(kind, n), Dialect::MySql);
        assert_ne!(f.operation, Operation::Write, "{kind} at {n}");
        // Past it: refused before parsing.
        for beyond in [n + 1, 5_000] {
            let f = on_small_stack(nested(kind, beyond), Dialect::Postgres);
            assert_eq!(f.operation, Operation::Unknown, "{kind} at {beyond}");
            assert!(!f.replica_eligible());
        }
    }
}

#[test]
fn long_operator_chains_are_bounded() {
    let at_limit =
        (0..crate::parse::MAX_CHAIN_OPERATORS / 2).map(|i| format!("id = {i}")).collect::<Vec<_>>().join(" OR ");
    let f = on_small_stack(format!("SELECT * FROM t WHERE {at_limit}"), Dialect::Postgres);
    assert!(f.replica_eligible(), "{:?}", f.evidence);
    let huge = vec!["x = 1"; 50_000].join(" OR ");
    let f = on_small_stack(format!("SELECT * FROM t WHERE {huge}"), Dialect::Postgres);
    assert_eq!(f.operation, Operation::Unknown);
    assert!(has(&f, "too_complex"));
    let unions = vec!["SELECT 1"; 20_000].join(" UNION ALL ");
    assert_eq!(on_small_stack(unions, Dialect::MySql).operation, Operation::Unknown);
    // Long flat lists are not chains: a big IN list or bulk insert stays analyzable.
    let list = (0..20_000).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    assert!(on_small_stack(format!("SELECT * FROM t WHERE id IN ({list})"), Dialect::Postgres).replica_eligible());
}

#[test]
fn refused_statements_keep_what_their_leading_words_say() {
    let deep = format!("{}1{}", "(".repeat(12), ")".repeat(12));
    let insert = pg(&format!("INSERT INTO t VALUES ({deep})"));
    assert_eq!(insert.operation, Operation::Write);
    assert!(has(&insert, "too_deep"), "{:?}", insert.evidence);
    let set = my(&format!("SET @@session.sql_mode = {deep}"));
    assert_eq!(set.operation, Operation::Session);
    assert!(set.affinity.contains(Affinity::SessionSet));
    let select = pg(&format!("SELECT {}", "(a ".repeat(10) + &"x, ".repeat(5_000)));
    assert_eq!(select.operation, Operation::Unknown);
    assert!(has(&select, "too_complex"), "{:?}", select.evidence);
    assert!(!select.replica_eligible());
}
