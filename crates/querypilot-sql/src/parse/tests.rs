use sqlparser::dialect::{MySqlDialect, PostgreSqlDialect};
use sqlparser::parser::Parser;

use super::*;

/// Every statement of the analysis and fingerprint corpora, with its dialect.
fn corpus() -> Vec<(Dialect, String)> {
    let facts = |text: &str, d: Dialect| -> Vec<(Dialect, String)> {
        text.lines()
            .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
            .filter_map(|l| l.splitn(4, '\t').nth(3))
            .map(|sql| (d, sql.to_owned()))
            .collect()
    };
    let mut all = facts(include_str!("../../../../tests/corpus/facts_pg.tsv"), Dialect::Postgres);
    all.extend(facts(include_str!("../../../../tests/corpus/facts_mysql.tsv"), Dialect::MySql));
    all.extend(generated());
    all
}

/// Long statements of the shapes ORMs and bulk loads send.
fn generated() -> Vec<(Dialect, String)> {
    let list = |n: usize| (0..n).map(|i| i.to_string()).collect::<Vec<_>>().join(", ");
    let rows = |n: usize| (0..n).map(|i| format!("({i}, 'name {i}', now(), NULL)")).collect::<Vec<_>>().join(", ");
    let mut out = Vec::new();
    for d in [Dialect::Postgres, Dialect::MySql] {
        out.push((d, format!("SELECT * FROM t WHERE id IN ({})", list(20_000))));
        out.push((d, format!("INSERT INTO t (a, b, c, d) VALUES {}", rows(5_000))));
        out.push((
            d,
            format!(
                "SELECT {} FROM t",
                (0..500).map(|i| format!("coalesce(c{i}, 0) + {i} AS x{i}")).collect::<Vec<_>>().join(", ")
            ),
        ));
        out.push((
            d,
            format!(
                "SELECT * FROM t WHERE {}",
                (0..200).map(|i| format!("(a = {i} AND b IN (1, 2))")).collect::<Vec<_>>().join(" OR ")
            ),
        ));
    }
    out
}

fn plain(sql: &str, dialect: Dialect) -> Result<Vec<Statement>, ParserError> {
    let parser = match dialect {
        Dialect::Postgres => Parser::new(&PostgreSqlDialect {}),
        Dialect::MySql => Parser::new(&MySqlDialect {}),
    };
    parser.with_recursion_limit(RECURSION_LIMIT).try_with_sql(sql)?.parse_statements()
}

fn summary<E: std::fmt::Display>(r: &Result<Vec<Statement>, E>) -> String {
    match r {
        Ok(s) => s.iter().map(|s| s.to_string().chars().take(80).collect::<String>()).collect::<Vec<_>>().join("; "),
        Err(e) => format!("error: {e}"),
    }
}

#[test]
fn parse_tokens_agree_with_the_plain_dialects() {
    let mut differ = Vec::new();
    let mut parsed = 0;
    for (d, sql) in corpus() {
        let Ok(tokens) = tokenize(&sql, d) else {
            continue;
        };
        let ours = parse_tokens(tokens, d);
        let theirs = plain(&sql, d);
        match (&ours, &theirs) {
            (Ok(a), Ok(b)) if a == b => parsed += 1,
            (Err(Refusal::Syntax(a)), Err(b)) if *a == b.to_string() => {}
            _ => differ.push(format!(
                "{d:?} {sql:.120}: ours {} plain {}",
                summary(&ours),
                summary(&theirs.map_err(|e| e.to_string()))
            )),
        }
    }
    assert!(differ.is_empty(), "{} differ:\n{}", differ.len(), differ.join("\n"));
    assert!(parsed >= 500, "only {parsed} statements parsed");
}

const UNLIMITED: Budget = Budget { calls: usize::MAX, visits: usize::MAX };

#[test]
fn ordinary_sql_spends_a_small_part_of_its_budget() {
    let mut worst = (0.0f64, String::new());
    for (d, sql) in corpus() {
        let Ok(tokens) = tokenize(&sql, d) else {
            continue;
        };
        let shape = Shape::of(&tokens);
        if shape.max_nesting > MAX_NESTING || shape.chain_operators > MAX_CHAIN_OPERATORS {
            continue;
        }
        let budget = shape.budget();
        let (_, spent) = parse_metered(tokens, d, UNLIMITED);
        assert!(spent.calls < budget.calls / 2, "{spent:?} of {budget:?}: {sql:.200}");
        assert!(spent.max_visits < budget.visits / 2, "{spent:?} of {budget:?}: {sql:.200}");
        let per_token = spent.calls as f64 / shape.significant_tokens as f64;
        if shape.significant_tokens >= 20 && per_token > worst.0 {
            worst = (per_token, sql.chars().take(120).collect());
        }
    }
    assert!(worst.0 < 2.0, "{:.2} hook calls per token: {}", worst.0, worst.1);
}

/// Inputs whose unbounded parse takes time exponential in their nesting, within the guards.
fn blow_ups() -> Vec<(Dialect, String)> {
    let list = "x, ".repeat(5_000);
    let mut out = Vec::new();
    for d in [Dialect::Postgres, Dialect::MySql] {
        out.push((d, format!("SELECT {}{list}", "(t(".repeat(5))));
        out.push((d, format!("SELECT {}{list}", "(a ".repeat(10))));
        out.push((d, format!("SELECT {}1", "CAST(".repeat(10))));
        out.push((d, format!("SELECT {}x", "(t(".repeat(5))));
    }
    // Legitimate SQL, but ten nested calls around a list cost 2^10 times the list (9.6 s
    // unbounded for 20,000 items in a release build).
    let args = "x, ".repeat(300);
    out.push((Dialect::Postgres, format!("SELECT {}{args}1{}", "abs(".repeat(10), ")".repeat(10))));
    out
}

#[test]
fn backtracking_blow_ups_run_out_of_budget() {
    let mut checked = 0;
    for (d, sql) in blow_ups() {
        let Ok(tokens) = tokenize(&sql, d) else { panic!("tokenize {sql:.60}") };
        let budget = Shape::of(&tokens).budget();
        // Unmetered, the parse needs far more than its budget: the blow-up being tested. Some
        // shapes do not blow up in one dialect; those only must not be refused.
        let (plain, unbounded) = parse_metered(tokens.clone(), d, UNLIMITED);
        let over = unbounded.calls > budget.calls || unbounded.max_visits > budget.visits;
        let (metered, spent) = parse_metered(tokens, d, budget);
        if over {
            assert_eq!(metered, Err(Refusal::OverBudget), "{d:?} {sql:.60}");
            assert!(spent.calls <= budget.calls + 1 && spent.max_visits <= budget.visits + 1);
            assert!(
                unbounded.calls > 2 * budget.calls || unbounded.max_visits > 2 * budget.visits,
                "{d:?} {sql:.60}: {unbounded:?} is not far past {budget:?}"
            );
            checked += 1;
        } else {
            assert_eq!(metered, plain, "{d:?} {sql:.60}");
        }
    }
    assert!(checked >= 4, "only {checked} inputs blew up");
}

#[test]
fn a_spent_budget_stops_the_parse_at_once() {
    // After the budget is gone every hook fails, so the parse unwinds instead of backtracking
    // through each alternative: one failing call, then no more counted.
    let d = Dialect::Postgres;
    let sql = format!("SELECT {}{}", "(a ".repeat(10), "x, ".repeat(2_000));
    let Ok(tokens) = tokenize(&sql, d) else { panic!("tokenize") };
    let budget = Budget { calls: 100, visits: usize::MAX };
    let (result, spent) = parse_metered(tokens.clone(), d, budget);
    assert_eq!(result, Err(Refusal::OverBudget));
    assert_eq!(spent.calls, 101);
    let budget = Budget { calls: usize::MAX, visits: 3 };
    let (result, spent) = parse_metered(tokens, d, budget);
    assert_eq!(result, Err(Refusal::OverBudget));
    assert_eq!(spent.max_visits, 4);
}

#[test]
fn the_budget_grows_with_the_statement() {
    let budget = |n: usize| Shape { chain_operators: 0, max_nesting: 0, significant_tokens: n }.budget();
    assert_eq!(budget(0), Budget { calls: BUDGET_BASE + BUDGET_PER_TOKEN, visits: REPARSE_LIMIT });
    assert_eq!(budget(1_000).calls, BUDGET_BASE + 1_000 * BUDGET_PER_TOKEN);
    assert_eq!(budget(1_000).visits, REPARSE_LIMIT / 1_000);
    assert_eq!(budget(10_000_000).visits, MIN_VISITS);
    assert_eq!(budget(usize::MAX).calls, usize::MAX);
}

#[test]
fn guards_come_before_the_parse() {
    let deep = format!("SELECT {}1{}", "(".repeat(MAX_NESTING + 1), ")".repeat(MAX_NESTING + 1));
    let Ok(tokens) = tokenize(&deep, Dialect::Postgres) else { panic!("tokenize") };
    assert_eq!(parse_tokens(tokens, Dialect::Postgres), Err(Refusal::TooDeep(MAX_NESTING + 1)));
    let at = format!("SELECT {}1{}", "(".repeat(MAX_NESTING), ")".repeat(MAX_NESTING));
    let Ok(tokens) = tokenize(&at, Dialect::Postgres) else { panic!("tokenize") };
    assert!(parse_tokens(tokens, Dialect::Postgres).is_ok());
    let chain = format!("SELECT 1 WHERE {}", vec!["a"; MAX_CHAIN_OPERATORS + 2].join(" OR "));
    let Ok(tokens) = tokenize(&chain, Dialect::MySql) else { panic!("tokenize") };
    assert_eq!(parse_tokens(tokens, Dialect::MySql), Err(Refusal::TooComplex(MAX_CHAIN_OPERATORS + 1)));
    // Prefix runs nest like brackets; whitespace and comments are not counted.
    let Ok(tokens) = tokenize("SELECT - - - 1 /* ( ( ( */", Dialect::Postgres) else { panic!("tokenize") };
    let shape = Shape::of(&tokens);
    assert_eq!((shape.max_nesting, shape.significant_tokens), (3, 5));
}

#[test]
fn the_fuzzed_slow_input_is_refused_before_parsing() {
    // The sql_analyze campaign's slow input: deeper than the guard, so never parsed.
    let fuzzed = String::from_utf8_lossy(include_bytes!(
        "../../../../fuzz/regressions/sql_analyze/slow-nested-parens-debug-build"
    ))
    .into_owned();
    for d in [Dialect::Postgres, Dialect::MySql] {
        let Ok(tokens) = tokenize(&fuzzed, d) else {
            continue;
        };
        assert!(matches!(parse_tokens(tokens, d), Err(Refusal::TooDeep(_))), "{d:?}");
    }
}

#[test]
fn refusal_labels() {
    assert_eq!(Refusal::TooDeep(11).label(), "too_deep");
    assert_eq!(Refusal::TooComplex(1001).label(), "too_complex");
    assert_eq!(Refusal::OverBudget.label(), "too_complex");
    assert_eq!(Refusal::Syntax("x".into()).label(), "parse_error");
    assert_eq!(Refusal::Tokenize("x".into()).label(), "parse_error");
}

#[test]
fn statements_sqlparser_panics_on_are_refused() {
    // The sql_analyze campaign's crash: MySqlDialect unwraps the operand after DIV.
    let crash =
        String::from_utf8_lossy(include_bytes!("../../../../fuzz/regressions/sql_analyze/mysql-div-without-operand"))
            .into_owned();
    for sql in [crash.as_str(), "SELECT 1 DIV /", "SELECT a DIV"] {
        let Ok(tokens) = tokenize(sql, Dialect::MySql) else { panic!("tokenize {sql}") };
        let refused = parse_tokens(tokens, Dialect::MySql);
        assert!(matches!(&refused, Err(Refusal::Syntax(m)) if m != "sqlparser panicked"), "{sql}: {refused:?}");
    }
    // DIV itself still parses as MySQL integer division.
    let Ok(tokens) = tokenize("SELECT 7 DIV 2", Dialect::MySql) else { panic!("tokenize") };
    let parsed = parse_tokens(tokens, Dialect::MySql).map(|s| s.iter().map(|s| s.to_string()).collect::<Vec<_>>());
    assert_eq!(parsed, Ok(vec!["SELECT 7 DIV 2".to_owned()]));
    // Another unwrap in sqlparser's error paths, caught rather than fixed one by one.
    let Ok(tokens) = tokenize("FLUSH RELAY LOGS FOR CHANNEL", Dialect::MySql) else { panic!("tokenize") };
    assert_eq!(parse_tokens(tokens, Dialect::MySql), Err(Refusal::Syntax("sqlparser panicked".to_owned())));
}
