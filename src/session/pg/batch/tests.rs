use super::super::prepared::Stmt;
use super::*;
use crate::protocol::pg::frontend;
use std::rc::Rc;

fn parse(name: &str, sql: &str, out: &mut Vec<u8>) {
    frontend::encode_parse(name, sql, &[], out).expect("parse");
}

fn bind(statement: &str, out: &mut Vec<u8>) {
    let mut body = Vec::new();
    body.extend_from_slice(b"\0"); // unnamed portal
    body.extend_from_slice(statement.as_bytes());
    body.extend_from_slice(&[0, 0, 0, 0, 0, 0, 0]); // no formats, no params, no result formats
    out.push(client::BIND);
    out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(&body);
}

#[test]
fn lists_what_each_message_runs_in_order() {
    let mut known = Stmts::default();
    let mut before = Stmt::new("SELECT 2", None, &[], 0);
    let key = crate::routing::StatementKey {
        fingerprint: crate::sql::fingerprint::Fingerprint(7),
        lexer: crate::sql::fingerprint::Fingerprint(7),
        space: crate::routing::KeySpace::Lexer,
        strategy: crate::config::NormalizationStrategy::String,
        protocol: Protocol::Postgres,
        mode: Default::default(),
    };
    before.route_key = Some(key);
    known.insert("old".to_owned(), Rc::new(before));
    let mut b = Vec::new();
    parse("", "SELECT 1", &mut b);
    bind("", &mut b);
    parse("s1", "UPDATE t SET v = 1", &mut b);
    bind("s1", &mut b);
    bind("old", &mut b);
    bind("nobody", &mut b);
    frontend::encode_describe(Target::Statement, "s1", &mut b).expect("describe");
    frontend::encode_close(Target::Statement, "old", &mut b).expect("close");
    let got = statements(&b, &known);
    let texts: Vec<&str> = got.iter().map(|(s, _)| s.as_str()).collect();
    assert_eq!(texts, ["SELECT 1", "UPDATE t SET v = 1", "SELECT 2", "UPDATE t SET v = 1"]);
    assert_eq!(got[2].1, Some(key), "a statement prepared before the batch keeps its routing key");
    assert_eq!(got[1].1, None);
}

#[test]
fn holds_up_to_the_limits() {
    let mut h = Held::default();
    assert!(h.is_empty());
    assert!(h.push(&[0u8; 100]));
    assert!(!h.is_empty());
    assert!(!h.push(&vec![0u8; HOLD_BYTES]), "over the byte limit");
    assert_eq!(h.take().len(), 100, "a message over the limit is not copied in");
    assert!(h.is_empty());
    assert!(h.push(&vec![0u8; HOLD_BYTES]), "up to the byte limit");
    h.take();
    for _ in 0..HOLD_MESSAGES {
        assert!(h.push(b"x"));
    }
    assert!(!h.push(b"x"), "over the message limit");
    assert_eq!(h.take().len(), HOLD_MESSAGES);
}
