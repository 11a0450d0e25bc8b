//! Scenario tables over the engine's hold and routing plan: every row is a small session state
//! either wire can be in, and what the one policy makes of it.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::hold::{Exchange, Hold, HoldFacts};
use super::replica::{guard, Guard, HeldReplica};
use super::route::{causal_position, plan, replica_read, Plan, RouteContext};
use crate::config::{PoolRole, Protocol, ReadYourWrites};
use crate::id::Position;
use crate::routing::{self, Catalogs, RouteInput, Router, RuleSet, RywState};
use crate::sql::analyze::PinReason;
use crate::sql::mode::SessionModes;
use crate::sql::Dialect;

const CONNECTED: HoldFacts = HoldFacts {
    connected: true,
    in_transaction: false,
    read_only: false,
    cursor: false,
    mid_exchange: false,
    pin: None,
    sticky: false,
};

/// A connected session with `change` applied to its facts.
fn facts(change: impl FnOnce(&mut HoldFacts)) -> HoldFacts {
    let mut f = CONNECTED;
    change(&mut f);
    f
}

#[test]
fn one_thing_holding_names_the_hold() {
    let rows: [(HoldFacts, Hold); 13] = [
        (CONNECTED, Hold::Free),
        (HoldFacts::default(), Hold::Free),
        (facts(|f| f.in_transaction = true), Hold::Tx { read_only: false }),
        (facts(|f| (f.in_transaction, f.read_only) = (true, true)), Hold::Tx { read_only: true }),
        (facts(|f| f.cursor = true), Hold::Cursor),
        (facts(|f| f.mid_exchange = true), Hold::MidBatch),
        (facts(|f| f.sticky = true), Hold::Sticky),
        (facts(|f| f.pin = Some(PinReason::TempObject)), Hold::Pin(PinReason::TempObject)),
        (facts(|f| f.pin = Some(PinReason::AdvisoryLock)), Hold::Pin(PinReason::AdvisoryLock)),
        (facts(|f| f.pin = Some(PinReason::Listen)), Hold::Pin(PinReason::Listen)),
        (facts(|f| f.pin = Some(PinReason::HoldCursor)), Hold::Pin(PinReason::HoldCursor)),
        (facts(|f| f.pin = Some(PinReason::SqlPrepare)), Hold::Pin(PinReason::SqlPrepare)),
        // Reported read-only outside a transaction holds nothing.
        (facts(|f| f.read_only = true), Hold::Free),
    ];
    for (f, want) in rows {
        assert_eq!(Hold::of(&f), want, "{f:?}");
    }
}

/// The wires count an unfinished exchange by comparing parts: routing counts every part, the
/// release and idle rules from an open batch or response on, a statement's end only answers due.
#[test]
fn each_rule_counts_the_parts_of_an_exchange_from_its_own_on() {
    let counts = |rule: Exchange, part: Exchange| rule <= part;
    assert!(counts(Exchange::Queued, Exchange::Queued) && counts(Exchange::Queued, Exchange::Due));
    assert!(!counts(Exchange::Open, Exchange::Queued) && counts(Exchange::Open, Exchange::Open));
    assert!(!counts(Exchange::Due, Exchange::Open) && counts(Exchange::Due, Exchange::Due));
}

#[test]
fn without_a_connection_nothing_holds() {
    let all = HoldFacts {
        connected: false,
        in_transaction: true,
        read_only: true,
        cursor: true,
        mid_exchange: true,
        pin: Some(PinReason::Listen),
        sticky: true,
    };
    assert_eq!(Hold::of(&all), Hold::Free);
    assert!(!Hold::of(&all).held());
}

#[test]
fn a_transaction_outranks_everything_else() {
    let f = facts(|f| {
        (f.in_transaction, f.cursor, f.mid_exchange, f.sticky) = (true, true, true, true);
        f.pin = Some(PinReason::Listen);
    });
    assert_eq!(Hold::of(&f), Hold::Tx { read_only: false });
}

#[test]
fn a_cursor_outranks_a_response_in_progress_and_pins() {
    let f = facts(|f| {
        (f.cursor, f.mid_exchange, f.sticky) = (true, true, true);
        f.pin = Some(PinReason::TempObject);
    });
    assert_eq!(Hold::of(&f), Hold::Cursor);
}

#[test]
fn a_batch_in_flight_outranks_pins_and_stickiness() {
    // PostgreSQL names the pipeline first when a pinned session is mid-batch.
    let f = facts(|f| (f.mid_exchange, f.pin, f.sticky) = (true, Some(PinReason::AdvisoryLock), true));
    assert_eq!(Hold::of(&f), Hold::MidBatch);
}

#[test]
fn a_pin_outranks_stickiness() {
    let f = facts(|f| (f.pin, f.sticky) = (Some(PinReason::UntrackedSetting), true));
    assert_eq!(Hold::of(&f), Hold::Pin(PinReason::UntrackedSetting));
}

#[test]
fn held_means_anything_but_free() {
    let holds = [
        (Hold::Free, false),
        (Hold::Tx { read_only: false }, true),
        (Hold::Tx { read_only: true }, true),
        (Hold::Cursor, true),
        (Hold::MidBatch, true),
        (Hold::Pin(PinReason::Listen), true),
        (Hold::Sticky, true),
    ];
    for (hold, held) in holds {
        assert_eq!(hold.held(), held, "{hold:?}");
    }
}

#[test]
fn every_hold_has_one_dry_run_name() {
    let rows = [
        (Hold::Free, None),
        (Hold::Tx { read_only: false }, Some(routing::Hold::Transaction)),
        (Hold::Tx { read_only: true }, Some(routing::Hold::Transaction)),
        (Hold::Cursor, Some(routing::Hold::Cursor)),
        (Hold::MidBatch, Some(routing::Hold::Pin)),
        (Hold::Pin(PinReason::TempObject), Some(routing::Hold::Pin)),
        (Hold::Sticky, Some(routing::Hold::Pin)),
    ];
    for (hold, kind) in rows {
        assert_eq!(hold.kind(), kind, "{hold:?}");
        assert_eq!(hold.kind().is_some(), hold.held(), "{hold:?}: named exactly when held");
    }
}

#[test]
fn the_dry_run_names_what_the_mysql_session_reported_before() {
    // MySQL's old order: a transaction, else a cursor, else anything else that held it.
    let rows = [
        (facts(|f| (f.in_transaction, f.cursor) = (true, true)), "transaction"),
        (facts(|f| (f.cursor, f.sticky) = (true, true)), "cursor"),
        (facts(|f| f.mid_exchange = true), "session_pin"),
        (facts(|f| f.sticky = true), "session_pin"),
        (facts(|f| f.pin = Some(PinReason::UserVariable)), "session_pin"),
    ];
    for (f, name) in rows {
        assert_eq!(Hold::of(&f).kind().map(routing::Hold::as_str), Some(name), "{f:?}");
    }
}

#[test]
fn a_session_moves_only_when_free_and_sent_elsewhere() {
    let held = [
        Hold::Tx { read_only: false },
        Hold::Tx { read_only: true },
        Hold::Cursor,
        Hold::MidBatch,
        Hold::Pin(PinReason::Listen),
        Hold::Pin(PinReason::TempObject),
        Hold::Sticky,
    ];
    for hold in held {
        assert_eq!(plan(hold, "r", "w"), Plan::Stay, "{hold:?} keeps the session where it is");
        assert_eq!(plan(hold, "w", "w"), Plan::Stay, "{hold:?}");
    }
    assert_eq!(plan(Hold::Free, "r", "w"), Plan::Move);
    assert_eq!(plan(Hold::Free, "w", "r"), Plan::Move);
    assert_eq!(plan(Hold::Free, "w", "w"), Plan::Stay);
    assert_eq!(plan(Hold::Free, "w", "w2"), Plan::Move, "pool names compare whole");
}

#[test]
fn plan_follows_the_facts_a_wire_fills() {
    let rows = [
        (CONNECTED, Plan::Move),
        (HoldFacts::default(), Plan::Move),
        (facts(|f| f.in_transaction = true), Plan::Stay),
        (facts(|f| f.cursor = true), Plan::Stay),
        (facts(|f| f.mid_exchange = true), Plan::Stay),
        (facts(|f| f.pin = Some(PinReason::Role)), Plan::Stay),
        (facts(|f| f.sticky = true), Plan::Stay),
    ];
    for (f, want) in rows {
        assert_eq!(plan(Hold::of(&f), "a", "b"), want, "{f:?}");
    }
}

const CONFIG: &str = "[[listeners]]\nprotocol = \"mysql\"\nbind = \"127.0.0.1:0\"\n\n\
    [pools.w]\nusername = \"u\"\npassword = \"p\"\nbackends = [{ host = \"127.0.0.1\", port = 3306 }]\n\n\
    [pools.r]\nusername = \"u\"\npassword = \"p\"\nbackends = [{ host = \"127.0.0.1\", port = 3307 }]\n\n\
    [routing]\nread_write_split = true\nwrite_pool = \"w\"\nread_pool = \"r\"\n";

pub(super) fn router() -> Router {
    let config = crate::config::Config::parse(CONFIG, "t.toml").expect("config");
    let rules = RuleSet::build(&config, &[], &[]).expect("rules");
    Router::new(rules.for_core(), Catalogs::builtin())
}

pub(super) fn route_context<'a>(
    protocol: Protocol,
    pool: &'a Arc<str>,
    ryw: &'a RywState,
    lex: &'a SessionModes,
) -> RouteContext<'a> {
    RouteContext::new(protocol, "u", "d", pool, ryw, lex)
}

#[test]
fn the_route_input_carries_the_seat_for_both_wires() {
    let (pool, ryw, lex): (Arc<str>, _, _) = ("r".into(), RywState::new(ReadYourWrites::None), SessionModes::default());
    let now = Instant::now();
    for protocol in [Protocol::Postgres, Protocol::MySql] {
        let input = route_context(protocol, &pool, &ryw, &lex).input("SELECT 1", None, false, false, now);
        assert_eq!((input.sql, input.protocol, input.user, input.database), ("SELECT 1", protocol, "u", "d"));
        assert_eq!(input.session.transaction_pool, None, "{protocol:?}: not held");
        assert!(!input.session.pinned_to_primary && !input.session.read_only_transaction);
        assert_eq!(input.session.primary_only, None);
        let held = route_context(protocol, &pool, &ryw, &lex).input("SELECT 1", None, true, true, now);
        assert_eq!(held.session.transaction_pool.map(|p| &**p), Some("r"), "{protocol:?}: held there");
        assert!(held.session.read_only_transaction, "{protocol:?}: as the wire said");
    }
}

#[test]
fn a_serializable_session_keeps_its_reads_on_the_primary() {
    let (pool, ryw): (Arc<str>, _) = ("r".into(), RywState::new(ReadYourWrites::None));
    let mut lex = SessionModes::default();
    lex.serializable = true;
    let input =
        route_context(Protocol::Postgres, &pool, &ryw, &lex).input("SELECT 1", None, false, false, Instant::now());
    assert_eq!(input.session.primary_only, Some("serializable_session"));
}

#[test]
fn the_read_your_writes_window_is_read_at_the_time_given() {
    let r = router();
    let write = r.explain(&RouteInput::new("UPDATE t SET a = 1", Protocol::MySql, "u", "d")).decision;
    let (pool, lex): (Arc<str>, _) = ("w".into(), SessionModes::default());
    let start = Instant::now();
    let mut ryw = RywState::new(ReadYourWrites::Window(Duration::from_secs(5)));
    ryw.observe(&write, start);
    ryw.statement_done(start, false);
    let at =
        |secs| route_context(Protocol::MySql, &pool, &ryw, &lex).input("SELECT 1", None, false, false, start + secs);
    assert!(at(Duration::ZERO).session.pinned_to_primary);
    assert!(at(Duration::from_secs(4)).session.pinned_to_primary);
    assert!(!at(Duration::from_secs(5)).session.pinned_to_primary, "the window closed");
    assert!(!at(Duration::from_secs(60)).session.pinned_to_primary);
}

#[test]
fn the_router_sends_a_held_read_to_the_held_pool_and_a_free_one_to_the_split() {
    let r = router();
    let (pool, ryw, lex): (Arc<str>, _, _) = ("w".into(), RywState::new(ReadYourWrites::None), SessionModes::default());
    let now = Instant::now();
    for protocol in [Protocol::MySql, Protocol::Postgres] {
        let s = route_context(protocol, &pool, &ryw, &lex);
        let free = r.explain(&s.input("SELECT a FROM t", None, false, false, now)).decision;
        let held = r.explain(&s.input("SELECT a FROM t", None, true, false, now)).decision;
        assert_eq!(held.pool().map(|p| &**p), Some("w"), "{protocol:?}: the transaction's pool");
        if protocol == Protocol::MySql {
            assert_eq!(free.pool().map(|p| &**p), Some("r"), "split read");
        }
    }
}

/// The router's decision for `sql` from a session `held` on pool `w` or free.
fn decided(protocol: Protocol, sql: &str, held: bool) -> crate::routing::Decision {
    let (pool, ryw, lex): (Arc<str>, _, _) = ("w".into(), RywState::new(ReadYourWrites::None), SessionModes::default());
    let input = route_context(protocol, &pool, &ryw, &lex).input(sql, None, held, false, Instant::now());
    router().explain(&input).decision
}

#[test]
fn a_split_read_is_a_replica_read_for_both_wires() {
    for protocol in [Protocol::MySql, Protocol::Postgres] {
        for sql in ["SELECT a FROM t", "SELECT 1", "SELECT a FROM t WHERE b = 2"] {
            let d = decided(protocol, sql, false);
            if d.pool().map(|p| &**p) == Some("r") {
                assert!(replica_read(&d), "{protocol:?} {sql}");
            }
        }
    }
    assert!(replica_read(&decided(Protocol::MySql, "SELECT a FROM t", false)));
}

#[test]
fn a_statement_kept_where_the_session_is_held_is_no_new_replica_read() {
    for protocol in [Protocol::MySql, Protocol::Postgres] {
        for sql in ["SELECT a FROM t", "UPDATE t SET a = 1", "SELECT 1"] {
            assert!(!replica_read(&decided(protocol, sql, true)), "{protocol:?} {sql}");
        }
    }
}

/// A causal-mode session that learned the commit position of a write.
fn after_commit(position: u64) -> RywState {
    let write = decided(Protocol::Postgres, "UPDATE t SET a = 1", false);
    let mut ryw = RywState::new(ReadYourWrites::Causal);
    let now = Instant::now();
    ryw.observe(&write, now);
    ryw.statement_done(now, false);
    ryw.learned(Some(Position::Wal(position)));
    ryw
}

#[test]
fn a_free_replica_read_waits_for_the_sessions_last_commit() {
    let ryw = after_commit(42);
    assert_eq!(causal_position(&ryw, true, Hold::Free, PoolRole::Replica), Some(&Position::Wal(42)));
}

#[test]
fn causal_waits_only_for_a_free_replica_read_on_a_replica_pool() {
    let ryw = after_commit(7);
    let rows = [
        (false, Hold::Free, PoolRole::Replica),
        (true, Hold::Free, PoolRole::Primary),
        (true, Hold::Tx { read_only: true }, PoolRole::Replica),
        (true, Hold::Tx { read_only: false }, PoolRole::Replica),
        (true, Hold::Cursor, PoolRole::Replica),
        (true, Hold::MidBatch, PoolRole::Replica),
        (true, Hold::Pin(PinReason::TempObject), PoolRole::Replica),
        (true, Hold::Sticky, PoolRole::Replica),
        (false, Hold::Tx { read_only: false }, PoolRole::Primary),
    ];
    for (read, hold, role) in rows {
        assert_eq!(causal_position(&ryw, read, hold, role), None, "{read} {hold:?} {role:?}");
    }
}

#[test]
fn without_a_known_commit_nothing_is_waited_for() {
    for mode in [ReadYourWrites::Causal, ReadYourWrites::None, ReadYourWrites::Session] {
        let ryw = RywState::new(mode);
        assert_eq!(causal_position(&ryw, true, Hold::Free, PoolRole::Replica), None, "{mode:?}");
    }
}

#[test]
fn a_token_adopted_from_another_connection_is_waited_for() {
    let mut ryw = RywState::new(ReadYourWrites::Causal);
    ryw.adopt(Position::Wal(99));
    assert_eq!(causal_position(&ryw, true, Hold::Free, PoolRole::Replica), Some(&Position::Wal(99)));
    let mut off = RywState::new(ReadYourWrites::Window(Duration::from_secs(1)));
    off.adopt(Position::Wal(99));
    assert_eq!(causal_position(&off, true, Hold::Free, PoolRole::Replica), None, "only causal mode adopts");
}

/// Every combination of the facts (with or without a pin), for exhaustive checks against the
/// definitions each session had before the engine.
fn every_state() -> Vec<HoldFacts> {
    let mut all = Vec::new();
    for bits in 0u8..64 {
        for pin in [None, Some(PinReason::TempObject)] {
            let bit = |n: u8| bits & (1 << n) != 0;
            all.push(HoldFacts {
                connected: bit(0),
                in_transaction: bit(1),
                read_only: bit(2),
                cursor: bit(3),
                mid_exchange: bit(4),
                pin,
                sticky: bit(5),
            });
        }
    }
    all
}

#[test]
fn held_is_what_the_mysql_session_meant_in_every_state() {
    for f in every_state() {
        // MySQL before: a connection, and a transaction, pin, cursor, sticky insert id or a
        // response in progress.
        let old = f.connected && (f.in_transaction || f.pin.is_some() || f.cursor || f.sticky || f.mid_exchange);
        assert_eq!(Hold::of(&f).held(), old, "{f:?}");
    }
}

#[test]
fn held_is_what_the_postgresql_session_meant_in_every_state() {
    for f in every_state().into_iter().filter(|f| !f.cursor && !f.sticky) {
        // PostgreSQL before: a backend, and a transaction, a batch in flight or a pin.
        let old = f.connected && (f.in_transaction || f.mid_exchange || f.pin.is_some());
        assert_eq!(Hold::of(&f).held(), old, "{f:?}");
    }
}

#[test]
fn the_dry_run_kind_is_what_the_mysql_session_reported_in_every_state() {
    for f in every_state() {
        let held = Hold::of(&f).held();
        let old = match (held, f.in_transaction, f.cursor) {
            (false, _, _) => None,
            (true, true, _) => Some(routing::Hold::Transaction),
            (true, false, true) => Some(routing::Hold::Cursor),
            (true, false, false) => Some(routing::Hold::Pin),
        };
        assert_eq!(Hold::of(&f).kind(), old, "{f:?}");
    }
}

#[test]
fn only_a_batch_in_flight_holds_when_the_hold_is_mid_batch_and_unpinned() {
    // The PostgreSQL session's "held only by an open extended batch" (#35).
    for f in every_state().into_iter().filter(|f| !f.cursor && !f.sticky) {
        let held = Hold::of(&f).held();
        let old = held && !f.in_transaction && f.pin.is_none();
        let new = Hold::of(&f) == Hold::MidBatch && f.pin.is_none();
        assert_eq!(new, old, "{f:?}");
    }
}

#[test]
fn the_postgresql_refusal_names_the_transaction_then_the_pipeline_then_the_pin() {
    for f in every_state().into_iter().filter(|f| f.connected && !f.cursor && !f.sticky) {
        let old = if f.in_transaction {
            Some("transaction")
        } else if f.mid_exchange {
            Some("pipeline")
        } else {
            f.pin.map(|_| "pin")
        };
        let named = match Hold::of(&f) {
            Hold::Tx { .. } => Some("transaction"),
            Hold::MidBatch => Some("pipeline"),
            Hold::Pin(_) => Some("pin"),
            Hold::Free => None,
            other => panic!("{other:?} from {f:?}"),
        };
        assert_eq!(named, old, "{f:?}");
    }
}

#[test]
fn a_read_only_transaction_reports_itself_only_inside_a_transaction() {
    for f in every_state().into_iter().filter(|f| f.connected) {
        let read_only = matches!(Hold::of(&f), Hold::Tx { read_only: true });
        assert_eq!(read_only, f.in_transaction && f.read_only, "{f:?}");
    }
}

/// [`guard`] of a write for a session in the hold `hold` on a replica connection or not, in
/// `dialect`.
fn write_guard(hold: Hold, on_replica: bool, dialect: Dialect, may_detour: bool) -> Guard {
    let protocol = if dialect == Dialect::Postgres { Protocol::Postgres } else { Protocol::MySql };
    let sql = "UPDATE t SET a = 1";
    let facts = decided(protocol, sql, false).facts;
    let read_only_tx = matches!(hold, Hold::Tx { read_only: true });
    guard(&HeldReplica { held: hold.held(), on_replica, dialect, read_only_tx }, &facts, sql, || may_detour)
}

#[test]
fn an_unsafe_statement_is_refused_on_a_replica_in_every_held_state() {
    for dialect in [Dialect::Postgres, Dialect::MySql] {
        for f in every_state() {
            let hold = Hold::of(&f);
            let g = write_guard(hold, true, dialect, false);
            assert_eq!(g == Guard::Refuse("write"), hold.held(), "{dialect:?} {f:?}");
            assert_eq!(write_guard(hold, false, dialect, false), Guard::Pass, "not a replica: {dialect:?} {f:?}");
        }
    }
}

#[test]
fn a_session_that_may_move_is_never_refused_for_its_hold() {
    for dialect in [Dialect::Postgres, Dialect::MySql] {
        for f in every_state() {
            let hold = Hold::of(&f);
            let moves = plan(hold, "r", "w") == Plan::Move;
            let g = write_guard(hold, true, dialect, true);
            assert_eq!(moves, g == Guard::Pass, "moving and being held exclude each other: {dialect:?} {f:?}");
        }
    }
}

#[test]
fn the_sessions_tokenizing_mode_reaches_the_router() {
    let (pool, ryw): (Arc<str>, _) = ("w".into(), RywState::new(ReadYourWrites::None));
    let mut lex = SessionModes::default();
    lex.mode.ansi_quotes = true;
    let input =
        route_context(Protocol::MySql, &pool, &ryw, &lex).input("SELECT \"a\"", None, false, false, Instant::now());
    assert_eq!(input.session.lex_mode, lex.mode);
    assert_ne!(input.session.lex_mode, SessionModes::default().mode);
}

#[test]
fn a_memoized_key_is_handed_to_the_router() {
    let r = router();
    let key = r.key("SELECT a FROM t", Protocol::MySql);
    let (pool, ryw, lex): (Arc<str>, _, _) = ("w".into(), RywState::new(ReadYourWrites::None), SessionModes::default());
    let input = route_context(Protocol::MySql, &pool, &ryw, &lex).input(
        "SELECT a FROM t",
        Some(key),
        false,
        false,
        Instant::now(),
    );
    assert_eq!(input.key, Some(key));
}

#[test]
fn session_mode_read_your_writes_pins_reads_at_any_later_time() {
    let write = decided(Protocol::MySql, "UPDATE t SET a = 1", false);
    let (pool, lex): (Arc<str>, _) = ("w".into(), SessionModes::default());
    let start = Instant::now();
    let mut ryw = RywState::new(ReadYourWrites::Session);
    let before = route_context(Protocol::MySql, &pool, &ryw, &lex).input("SELECT 1", None, false, false, start);
    assert!(!before.session.pinned_to_primary, "nothing written yet");
    ryw.observe(&write, start);
    ryw.statement_done(start, false);
    for later in [0, 1, 3600, 86_400] {
        let at = start + Duration::from_secs(later);
        let input = route_context(Protocol::MySql, &pool, &ryw, &lex).input("SELECT 1", None, false, false, at);
        assert!(input.session.pinned_to_primary, "{later}s after the write");
    }
}

#[test]
fn a_pinned_session_sends_its_free_reads_to_the_primary() {
    let write = decided(Protocol::MySql, "UPDATE t SET a = 1", false);
    let (pool, lex): (Arc<str>, _) = ("r".into(), SessionModes::default());
    let now = Instant::now();
    let mut ryw = RywState::new(ReadYourWrites::Session);
    ryw.observe(&write, now);
    ryw.statement_done(now, false);
    let r = router();
    let input = route_context(Protocol::MySql, &pool, &ryw, &lex).input("SELECT a FROM t", None, false, false, now);
    let d = r.explain(&input).decision;
    assert_eq!(d.pool().map(|p| &**p), Some("w"), "read-your-writes");
}

#[test]
fn pools_compare_by_name_not_by_identity() {
    let (a, b): (Arc<str>, Arc<str>) = ("w".into(), "w".into());
    assert!(!Arc::ptr_eq(&a, &b));
    assert_eq!(plan(Hold::Free, &a, &b), Plan::Stay);
}
