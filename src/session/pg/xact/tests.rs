use super::{block_neutral, commits_only};

#[test]
fn only_texts_a_transaction_block_leaves_unchanged_are_wrapped() {
    for sql in
        ["SELECT 1", "/* c */ with x AS (SELECT 1) SELECT * FROM x", "SHOW x; VALUES (1)", "(SELECT 1)", "TABLE t"]
    {
        assert!(block_neutral(sql), "{sql}");
    }
    for sql in ["DECLARE c CURSOR FOR SELECT 1", "SELECT 1; FETCH c", "", "-- nothing", "SELECT 1; VACUUM"] {
        assert!(!block_neutral(sql), "{sql}");
    }
}
use crate::protocol::pg::{frontend, Target};

fn parse_bind_execute(name: &str, sql: Option<&str>, out: &mut Vec<u8>) {
    if let Some(sql) = sql {
        frontend::encode_parse(name, sql, &[], out).expect("parse");
    }
    frontend::encode_bind("", name, &[], &[], &[], out).expect("bind");
    frontend::encode_describe(Target::Portal, "", out).expect("describe");
    frontend::encode_execute("", 0, out).expect("execute");
}

fn none(_: &str) -> Option<&'static str> {
    None
}

#[test]
fn an_extended_batch_is_probed_only_when_its_one_execute_commits() {
    let mut b = Vec::new();
    parse_bind_execute("", Some("COMMIT"), &mut b);
    frontend::encode_sync(&mut b);
    assert!(commits_only(&b, none), "unnamed Parse/Bind/Describe/Execute/Sync of COMMIT");
    let mut b = Vec::new();
    parse_bind_execute("qp_1", None, &mut b);
    assert!(commits_only(&b, |n| (n == "qp_1").then_some("commit")), "a named COMMIT prepared before");
    assert!(!commits_only(&b, none), "a name the router does not know");
    let mut b = Vec::new();
    parse_bind_execute("", None, &mut b);
    assert!(!commits_only(&b, |_| Some("COMMIT")), "an unnamed statement parsed before: unknown");
    let mut b = Vec::new();
    parse_bind_execute("", Some("SELECT w_outer(1)"), &mut b);
    parse_bind_execute("", Some("COMMIT"), &mut b);
    assert!(!commits_only(&b, none), "a statement before the COMMIT in the same batch");
    let mut b = Vec::new();
    parse_bind_execute("", Some("COMMIT AND CHAIN"), &mut b);
    assert!(!commits_only(&b, none));
    let mut b = Vec::new();
    frontend::encode_parse("", "COMMIT", &[], &mut b).expect("parse");
    assert!(!commits_only(&b, none), "nothing executed");
    frontend::encode_query("COMMIT", &mut b).expect("query");
    assert!(!commits_only(&b, none), "anything but extended messages");
}
