use super::*;

fn execute(name: &str, sql: &str) -> Option<Command> {
    let start = sql.find(name)?;
    Some(Command::Execute { name: name.to_ascii_lowercase(), span: start..start + name.len() })
}

#[test]
fn recognizes_statements_naming_prepared_statements() {
    assert_eq!(parse("DEALLOCATE s1"), Some(Command::Deallocate("s1".into())));
    assert_eq!(parse("deallocate prepare _pg3_0;"), Some(Command::Deallocate("_pg3_0".into())));
    assert_eq!(parse("DEALLOCATE \"S1\""), Some(Command::Deallocate("S1".into())));
    assert_eq!(parse("DEALLOCATE S1"), Some(Command::Deallocate("s1".into())));
    assert_eq!(parse("DEALLOCATE prepare"), Some(Command::Deallocate("prepare".into())));
    assert_eq!(parse("DEALLOCATE ALL"), Some(Command::DeallocateAll));
    assert_eq!(parse("/* c */ DEALLOCATE PREPARE ALL ;"), Some(Command::DeallocateAll));
    assert_eq!(parse("EXECUTE s1"), execute("s1", "EXECUTE s1"));
    assert_eq!(parse("execute S1 (1, 'x')"), execute("S1", "execute S1 (1, 'x')"));
}

#[test]
fn leaves_everything_else_alone() {
    for sql in [
        "DEALLOCATE s1; SELECT 1",
        "DEALLOCATE",
        "DEALLOCATE a b",
        "EXECUTE",
        "EXECUTE s1 x",
        "SELECT 'DEALLOCATE s1'",
        "PREPARE s1 AS SELECT 1",
        "EXECUTE 'x'",
        "SELECT 1",
        "",
    ] {
        assert_eq!(parse(sql), None, "{sql}");
    }
}

#[test]
fn finds_every_execute_among_several_statements() {
    let sql = "SELECT 1; EXECUTE s1; execute \"S2\" (1, 'x;y') ; EXECUTE s3 x; SELECT 'EXECUTE s4'";
    let found = executes_in(sql);
    let names: Vec<&str> = found.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(names, ["s1", "S2"]);
    assert_eq!(found.iter().map(|(_, span)| &sql[span.clone()]).collect::<Vec<_>>(), ["s1", "\"S2\""]);
    assert!(executes_in("SELECT 1; SELECT 2").is_empty());
    assert!(executes_in("/* execute s1 */ SELECT 1").is_empty());
}

#[test]
fn a_chain_of_statements_runs_innermost_first() {
    let s1 = Rc::new(Stmt::new("SELECT 1", None, &[], 0));
    let mut s2 = Stmt::new("EXECUTE s1", Some(&format!("EXECUTE {}", s1.server_name)), &[], 0);
    s2.executes = Some(s1.clone());
    let s2 = Rc::new(s2);
    let keys: Vec<u64> = chain(&s2).iter().map(|s| s.key).collect();
    assert_eq!(keys, [s1.key, s2.key]);
    assert_eq!(chain(&s1).len(), 1);
}

#[test]
fn renames_the_statement_in_place() {
    let sql = "EXECUTE s1 (1, 2)";
    let Some(Command::Execute { span, .. }) = parse(sql) else { panic!("not recognized") };
    assert_eq!(renamed(sql, span, "qp_00000000000000ab"), "EXECUTE qp_00000000000000ab (1, 2)");
}
