use std::sync::Arc;

use super::*;
use crate::config::Protocol;
use crate::routing::{Catalogs, Hold, RouteInput, Router, RuleSet};

const CONFIG: &str = "[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
    [pools.w]\nusername = \"u\"\npassword = \"p\"\nbackends = [{ host = \"127.0.0.1\", port = 3306 }]\n\n\
    [pools.r]\nusername = \"u\"\npassword = \"p\"\nbackends = [{ host = \"127.0.0.1\", port = 3307 }]\n\n\
    [routing]\nread_write_split = true\nwrite_pool = \"w\"\nread_pool = \"r\"\n";

/// The router's decision for `sql` with the session holding `held` (if any).
fn decide(sql: &str, held: Option<&Arc<str>>) -> Decision {
    let config = crate::config::Config::parse(CONFIG, "t.toml").expect("config");
    let rules = RuleSet::build(&config, &[], &[]).expect("rules");
    let router = Router::new(rules.for_core(), Catalogs::builtin());
    let mut input = RouteInput::new(sql, Protocol::MySql, "u", "d");
    input.session.transaction_pool = held;
    router.explain(&input).decision
}

fn session(hold: Option<Hold>) -> MySqlSession<'static> {
    MySqlSession {
        pool: "r",
        on_replica: true,
        hold,
        cursor_only: hold == Some(Hold::Cursor),
        opens_write_transaction: false,
        statement_pooling: false,
        primary: Some("w".into()),
    }
}

#[test]
fn a_held_replica_refuses_writes_unless_only_a_cursor_holds_it() {
    let r: Arc<str> = "r".into();
    let mut d = decide("UPDATE t SET a = 1", Some(&r));
    let s = settle(&mut d, "UPDATE t SET a = 1", &session(Some(Hold::Transaction)));
    assert!(matches!(&s, Settled::HeldReplica(t) if t.contains("a transaction is open")), "{s:?}");
    assert!(matches!(d.outcome, Outcome::Reject(_)));
    let mut d = decide("UPDATE t SET a = 1", Some(&r));
    assert_eq!(settle(&mut d, "UPDATE t SET a = 1", &session(Some(Hold::Cursor))), Settled::Detour);
    assert_eq!(d.pool().map(|p| &**p), Some("w"));
    let mut d = decide("SET @x = 1", Some(&r));
    let s = settle(&mut d, "SET @x = 1", &session(Some(Hold::Cursor)));
    assert!(matches!(&s, Settled::HeldReplica(t) if t.contains("a cursor is open")), "state pins: {s:?}");
    let mut d = decide("SELECT a FROM t", Some(&r));
    assert_eq!(settle(&mut d, "SELECT a FROM t", &session(Some(Hold::Transaction))), Settled::AsRouted);
    assert_eq!(d.pool().map(|p| &**p), Some("r"));
}

#[test]
fn a_read_opening_a_write_transaction_goes_to_the_primary() {
    let mut s = session(None);
    s.opens_write_transaction = true;
    let mut d = decide("SELECT a FROM t", None);
    assert_eq!(d.pool().map(|p| &**p), Some("r"), "the router alone would split it");
    assert_eq!(settle(&mut d, "SELECT a FROM t", &s), Settled::WriteTransaction);
    assert_eq!(d.pool().map(|p| &**p), Some("w"));
    s.opens_write_transaction = false;
    let mut d = decide("SELECT a FROM t", None);
    assert_eq!(settle(&mut d, "SELECT a FROM t", &s), Settled::AsRouted);
    assert_eq!(d.pool().map(|p| &**p), Some("r"));
}

#[test]
fn statement_pooling_refuses_transaction_openers_first() {
    let mut s = session(None);
    s.statement_pooling = true;
    let mut d = decide("START TRANSACTION", None);
    let settled = settle(&mut d, "START TRANSACTION", &s);
    assert!(matches!(&settled, Settled::StatementPooling(t) if t.contains("in statement pooling mode")), "{settled:?}");
    let mut d = decide("SELECT 1", None);
    assert_eq!(settle(&mut d, "SELECT 1", &s), Settled::AsRouted);
}
