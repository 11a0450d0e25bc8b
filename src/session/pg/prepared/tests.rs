use super::*;
use crate::protocol::pg::tag::frontend as client;

#[test]
fn statements_are_let_go_a_slice_at_a_time() {
    use std::future::Future;
    use std::rc::Rc;
    use std::task::{Context, Poll, Waker};
    let kept = Rc::new(Stmt::new("SELECT 1", None, &[], 0));
    let stmts: Stmts = (0..DROP_SLICE * 3 + 1).map(|i| (format!("s{i}"), kept.clone())).collect();
    let mut dropping = std::pin::pin!(drop_in_slices(stmts));
    let mut cx = Context::from_waker(Waker::noop());
    let mut polls = 1;
    while dropping.as_mut().poll(&mut cx) == Poll::Pending {
        // Between two polls the other tasks of the core run: one slice went each time.
        assert_eq!(Rc::strong_count(&kept), 1 + DROP_SLICE * (3 - polls) + 1, "poll {polls}");
        polls += 1;
    }
    assert_eq!(polls, 4, "three full slices and the last statement");
    assert_eq!(Rc::strong_count(&kept), 1, "every statement let go");
}

#[test]
fn a_statement_is_scanned_for_effects_at_its_first_use_only() {
    let set = Stmt::new("SET search_path = a", None, &[], 0);
    assert!(set.effects.get().is_none(), "not when parsed");
    assert!(!set.effects().is_empty());
    assert!(Stmt::new("SELECT 1", None, &[], 0).effects().is_empty());
    // A statement running another has that one's effects, not its own text's (none).
    let mut outer = Stmt::new("EXECUTE s1", Some("EXECUTE qp_0000000000000001"), &[], 0);
    outer.set_effects(set.effects());
    assert_eq!(outer.effects(), set.effects());
    assert_eq!(outer.regenerated(1).effects(), set.effects(), "kept under a new generation");
}

#[test]
fn same_text_and_types_share_a_name() {
    let a = Stmt::new("SELECT $1", None, &[23], 0);
    let b = Stmt::new("SELECT $1", None, &[23], 0);
    let c = Stmt::new("SELECT $1", None, &[25], 0);
    let d = Stmt::new("SELECT $2", None, &[23], 0);
    assert_eq!(a.server_name, b.server_name);
    assert_ne!(a.server_name, c.server_name);
    assert_ne!(a.server_name, d.server_name);
    assert!(a.server_name.starts_with("qp_") && a.server_name.len() == 19);
    assert_eq!(a.parse_msg.first(), Some(&client::PARSE));
}

#[test]
fn a_regenerated_statement_keeps_its_text_under_a_new_name() {
    let mut s = Stmt::new("SELECT ?", Some("SELECT $1"), &[23], 1);
    s.route_key = None;
    let fresh = s.regenerated(2);
    assert_ne!(fresh.server_name, s.server_name);
    assert_eq!(fresh.key, Stmt::new("SELECT ?", Some("SELECT $1"), &[23], 2).key);
    assert_eq!((fresh.query.as_str(), &fresh.sent), ("SELECT ?", &("SELECT $1".to_owned(), vec![23])));
}

#[test]
fn a_schema_change_gives_a_new_name() {
    let before = Stmt::new("SELECT * FROM t", None, &[], 3);
    let after = Stmt::new("SELECT * FROM t", None, &[], 4);
    assert_ne!(before.server_name, after.server_name);
    assert_ne!(before.key, after.key);
}

#[test]
fn finds_the_router_statement_a_server_message_names() {
    let s = Stmt::new("SELECT 1", None, &[], 0);
    let missing = format!("prepared statement \"{}\" does not exist", s.server_name);
    assert_eq!(key_in_message(&missing), Some(s.key));
    let exists = format!("prepared statement \"{}\" already exists", s.server_name);
    assert_eq!(key_in_message(&exists), Some(s.key));
    assert_eq!(key_in_message("prepared statement \"s1\" does not exist"), None);
    assert_eq!(key_in_message("prepared statement \"qp_0123\" does not exist"), None);
    assert_eq!(key_in_message("prepared statement \"qp_0123456789abcdefx\" does not exist"), None);
    assert_eq!(key_in_message("prepared statement \"qp_zz23456789abcdef\" does not exist"), None);
}

#[test]
fn schema_changes_are_told_by_their_command_tag() {
    for tag in ["ALTER TABLE", "DROP TABLE", "DROP VIEW", "CREATE VIEW", "CREATE FUNCTION", "CREATE RULE"] {
        assert!(changes_schema(tag.as_bytes()), "{tag}");
    }
    for tag in ["CREATE TABLE", "CREATE TABLE AS", "CREATE INDEX", "SELECT 1", "INSERT 0 1", "DEALLOCATE"] {
        assert!(!changes_schema(tag.as_bytes()), "{tag}");
    }
}
