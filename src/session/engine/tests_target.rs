//! Where a decided statement goes, or why it runs nowhere, and what a lost connection's client
//! hears: one table each, run for both wires.

use std::cell::Cell;
use std::sync::Arc;

use super::release::Gone;
use super::route::{checked_target, on_replica, target, Refusal, Refused, Target};
use crate::config::{PoolRole, Protocol};
use crate::routing::{Catalogs, Decision, DecisionError, DecisionKind, Outcome, RouteInput, Router, RuleSet};
use crate::sql::analyze::PinReason;

/// No split: a statement no rule decides goes to the default pool `w`; `r` is a replica-role
/// pool a client may name as its database.
const CONFIG: &str = "[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
    [[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
    [pools.w]\nusername = \"u\"\npassword = \"p\"\nbackends = [{ host = \"127.0.0.1\", port = 3306 }]\n\n\
    [pools.r]\nrole = \"replica\"\nusername = \"u\"\npassword = \"p\"\nbackends = [{ host = \"127.0.0.1\", port = 3307 }]\n\n\
    [routing]\ndefault_pool = \"w\"\n";

const BOTH: [Protocol; 2] = [Protocol::Postgres, Protocol::MySql];

fn rules() -> RuleSet {
    let config = crate::config::Config::parse(CONFIG, "t.toml").expect("config");
    RuleSet::build(&config, &[], &[]).expect("rules")
}

fn decided(protocol: Protocol, sql: &str) -> Decision {
    let router = Router::new(rules().for_core(), Catalogs::builtin());
    router.explain(&RouteInput::new(sql, protocol, "u", "d")).decision
}

fn named() -> Option<Arc<str>> {
    Some("r".into())
}

#[test]
fn a_statement_nothing_decided_goes_to_the_default_pool_or_the_named_one() {
    for protocol in BOTH {
        let d = decided(protocol, "SELECT 1");
        assert_eq!(d.step, DecisionKind::Default, "{protocol:?}");
        assert_eq!(target(&d, || None), Ok(Target { pool: "w".into(), named: false }), "{protocol:?}");
        assert_eq!(target(&d, named), Ok(Target { pool: "r".into(), named: true }), "{protocol:?}");
    }
}

#[test]
fn a_decided_pool_stands_and_the_named_pool_is_not_looked_up() {
    for protocol in BOTH {
        let mut d = decided(protocol, "SELECT 1");
        d.step = DecisionKind::PatternRule;
        d.outcome = Outcome::Route("w".into());
        let asked = Cell::new(false);
        let t = target(&d, || {
            asked.set(true);
            named()
        });
        assert_eq!(t, Ok(Target { pool: "w".into(), named: false }), "{protocol:?}");
        assert!(!asked.get(), "{protocol:?}: a pool lookup per statement spared");
    }
}

#[test]
fn a_rule_refusal_carries_the_rules_text_for_both_wires() {
    for protocol in BOTH {
        let mut d = decided(protocol, "DELETE FROM t");
        d.outcome = Outcome::Reject("deletes are refused here".into());
        let want = Refusal { kind: Refused::Rule, text: "deletes are refused here".into() };
        assert_eq!(target(&d, named), Err(want), "{protocol:?}: refused before the named pool counts");
    }
}

#[test]
fn every_routing_error_is_one_kind_of_refusal_worded_by_the_router() {
    let rows = [
        (DecisionError::HintNotHonored { reason: "row_lock".into() }, Refused::Hint),
        (DecisionError::InvalidHint, Refused::Hint),
        (
            DecisionError::ReplicaUnsafe { pool: "r".into(), chosen_by: "rule `x`".into(), reason: "write" },
            Refused::ReplicaUnsafe,
        ),
        (DecisionError::NoPool { protocol: Protocol::MySql }, Refused::NoPool),
        (DecisionError::TranslationValue { message: "slot 1 is no JSON array".into() }, Refused::BadValue),
    ];
    for protocol in BOTH {
        for (e, kind) in &rows {
            let mut d = decided(protocol, "SELECT 1");
            d.outcome = Outcome::Error(e.clone());
            let want = Refusal { kind: *kind, text: e.to_string() };
            assert_eq!(target(&d, named), Err(want), "{protocol:?} {e:?}");
        }
    }
}

#[test]
fn a_named_replica_pool_refuses_what_is_not_replica_safe() {
    let rules = rules();
    for protocol in BOTH {
        let write = decided(protocol, "UPDATE t SET a = 1");
        let refused = checked_target(&write, named, || &rules).expect_err("a write on a named replica");
        assert_eq!(refused.kind, Refused::ReplicaUnsafe, "{protocol:?}");
        assert!(refused.text.contains("the database name the client connected with"), "{}", refused.text);
        let read = decided(protocol, "SELECT a FROM t");
        let t = checked_target(&read, named, || &rules);
        assert_eq!(t, Ok(Target { pool: "r".into(), named: true }), "{protocol:?}: a read may run there");
    }
}

#[test]
fn a_pool_the_router_chose_is_not_checked_again() {
    let rules = rules();
    for protocol in BOTH {
        let write = decided(protocol, "UPDATE t SET a = 1");
        let asked = Cell::new(false);
        let t = checked_target(
            &write,
            || None,
            || {
                asked.set(true);
                &rules
            },
        );
        assert_eq!(t, Ok(Target { pool: "w".into(), named: false }), "{protocol:?}");
        assert!(!asked.get(), "{protocol:?}: the rules are read only for a named pool");
    }
}

#[test]
fn a_named_primary_pool_takes_writes() {
    let rules = rules();
    for protocol in BOTH {
        let write = decided(protocol, "UPDATE t SET a = 1");
        let t = checked_target(&write, || Some("w".into()), || &rules);
        assert_eq!(t, Ok(Target { pool: "w".into(), named: true }), "{protocol:?}");
    }
}

#[test]
fn a_lost_connections_client_hears_what_died_with_it() {
    let rows = [
        (Gone::Transaction, " inside a transaction; the transaction was rolled back"),
        (Gone::State(PinReason::TempObject), "; the session's state (temp_object) is gone"),
        (Gone::ServerSession, "; the server session is gone"),
        (Gone::Step, "; the response was cut off"),
    ];
    for (gone, want) in rows {
        assert_eq!(gone.wording(), want, "{gone:?}");
    }
}

/// Rules with the split of both protocols reading from `read` and writing to `write`.
fn split(read: &str, write: &str) -> RuleSet {
    let config = CONFIG.replace(
        "[routing]\ndefault_pool = \"w\"\n",
        &format!("[routing]\nread_write_split = true\nread_pool = \"{read}\"\nwrite_pool = \"{write}\"\n"),
    );
    let config = crate::config::Config::parse(&config, "t.toml").expect("config");
    RuleSet::build(&config, &[], &[]).expect("rules")
}

#[test]
fn a_replica_is_a_replica_role_pool_or_a_read_pool_that_is_not_also_the_primary() {
    let (plain, read_r, read_w) = (rules(), split("r", "w"), split("w", "w"));
    let rows: [(&RuleSet, PoolRole, &str, bool); 7] = [
        (&plain, PoolRole::Primary, "w", false),
        (&plain, PoolRole::Replica, "r", true),
        (&plain, PoolRole::Primary, "r", true), // the rules name its role
        (&read_r, PoolRole::Primary, "r", true),
        (&read_r, PoolRole::Primary, "w", false),
        // One pool reads and writes: a transaction held there takes writes (#37: PostgreSQL
        // sessions refused them while MySQL sessions did not).
        (&read_w, PoolRole::Primary, "w", false),
        (&read_w, PoolRole::Replica, "r", true),
    ];
    for protocol in BOTH {
        for (i, (rules, role, pool, want)) in rows.iter().enumerate() {
            assert_eq!(on_replica(*role, pool, rules, protocol), *want, "{protocol:?} row {i}");
        }
    }
}
