//! Read-your-writes in its three modes, with time as a parameter, driven through the router as a
//! session would: route with `pinned(now)`, then `observe(decision, now)`.

use std::time::{Duration, Instant};

use super::*;
use crate::config::ReadYourWrites;
use crate::id::Position;

const READ: &str = "SELECT a FROM t WHERE id = 1";
const WRITE: &str = "UPDATE t SET a = 1 WHERE id = 1";

/// A session: its own read-your-writes state and an optional open transaction.
struct Session {
    ryw: RywState,
    tx: Option<Arc<str>>,
    read_only: bool,
}

impl Session {
    fn new(r: &Router) -> Session {
        Session { ryw: RywState::new(r.rules().read_your_writes()), tx: None, read_only: false }
    }

    /// Routes and executes `sql` at `now`; returns the decision.
    fn run(&mut self, r: &mut Router, sql: &str, now: Instant) -> Decision {
        let mut input = RouteInput::new(sql, Protocol::Postgres, "app", "app");
        input.session.pinned_to_primary = self.ryw.pinned(now);
        input.session.transaction_pool = self.tx.as_ref();
        input.session.read_only_transaction = self.read_only;
        let d = r.route(&input);
        self.ryw.observe(&d, now);
        d
    }
}

fn router(mode: &str) -> Router {
    router_for(&config(&format!("{SPLIT}\nread_your_writes = \"{mode}\""), ""))
}

#[test]
fn session_mode_pins_for_the_rest_of_the_session_only() {
    let mut r = router("session");
    assert_eq!(r.rules().read_your_writes(), ReadYourWrites::Session);
    let t0 = Instant::now();
    let (mut a, mut b) = (Session::new(&r), Session::new(&r));
    assert_eq!(pool(&a.run(&mut r, READ, t0)), "replicas");
    assert_eq!(pool(&a.run(&mut r, WRITE, t0)), "primary");
    let later = t0 + Duration::from_secs(3600);
    let d = a.run(&mut r, READ, later);
    assert_eq!((pool(&d), d.reason, d.kind), ("primary", "read_your_writes", DecisionKind::Cache));
    // Another session is unaffected by a's write.
    assert_eq!(pool(&b.run(&mut r, READ, later)), "replicas");
}

#[test]
fn none_mode_never_pins_on_writes() {
    let mut r = router("none");
    let t0 = Instant::now();
    let mut s = Session::new(&r);
    s.run(&mut r, WRITE, t0);
    assert_eq!(pool(&s.run(&mut r, READ, t0)), "replicas");
}

#[test]
fn window_mode_pins_for_the_window_after_the_last_write() {
    let mut r = router("2s");
    assert_eq!(r.rules().read_your_writes(), ReadYourWrites::Window(Duration::from_secs(2)));
    let t0 = Instant::now();
    let mut s = Session::new(&r);
    s.run(&mut r, WRITE, t0);
    let table = [(0, "primary"), (1_999, "primary"), (2_000, "replicas"), (10_000, "replicas")];
    for (ms, want) in table {
        let now = t0 + Duration::from_millis(ms);
        let mut input = RouteInput::new(READ, Protocol::Postgres, "app", "app");
        input.session.pinned_to_primary = s.ryw.pinned(now);
        assert_eq!(pool(&r.route(&input)), want, "{ms} ms");
    }
    assert_eq!(s.ryw.window_left(t0 + Duration::from_millis(500)), Some(Duration::from_millis(1_500)));
    assert_eq!(s.ryw.window_left(t0 + Duration::from_secs(3)), None);
}

#[test]
fn window_restarts_when_a_writing_transaction_commits() {
    let mut r = router("2s");
    let t0 = Instant::now();
    let mut s = Session::new(&r);
    s.run(&mut r, "BEGIN", t0);
    s.tx = Some(Arc::from("primary"));
    s.run(&mut r, WRITE, t0);
    let commit = t0 + Duration::from_secs(5);
    s.run(&mut r, "COMMIT", commit);
    s.tx = None;
    assert!(s.ryw.pinned(commit + Duration::from_millis(1_500)), "the window counts from the commit");
    assert!(!s.ryw.pinned(commit + Duration::from_secs(2)));
    // A transaction without writes does not restart it.
    s.run(&mut r, "BEGIN", commit + Duration::from_secs(10));
    s.run(&mut r, "COMMIT", commit + Duration::from_secs(10));
    assert!(!s.ryw.pinned(commit + Duration::from_secs(10)));
}

#[test]
fn what_starts_pinning() {
    let table = [
        (WRITE, true),
        ("INSERT INTO t VALUES (1)", true),
        ("CREATE TABLE x (a int)", true),
        ("SELECT nextval('s')", true),
        ("SELECT random()", true),
        ("SELECT my_udf(1)", true),
        ("CALL proc()", true),
        ("garbage (((", true),
        ("VACUUM t", true),
        (READ, false),
        ("BEGIN", false),
        ("COMMIT", false),
        ("SET search_path = app", false),
        ("SHOW search_path", false),
        ("SELECT a FROM t FOR UPDATE", false),
    ];
    let mut r = router("session");
    let t0 = Instant::now();
    for (sql, pins) in table {
        let mut s = Session::new(&r);
        let d = s.run(&mut r, sql, t0);
        assert_eq!((d.writes, s.ryw.pinned(t0)), (pins, pins), "{sql}");
    }
}

#[test]
fn read_only_transactions_and_refused_statements_do_not_pin() {
    let tail = "[[routing.rules]]\nname = \"deny\"\npattern = \"^DELETE\"\nreject = \"no\"\n";
    let mut r = router_for(&config(SPLIT, tail));
    let t0 = Instant::now();
    let mut s = Session::new(&r);
    s.tx = Some(Arc::from("primary"));
    s.read_only = true;
    let d = s.run(&mut r, "SELECT random()", t0);
    assert!(!d.writes && !s.ryw.pinned(t0));
    s.tx = None;
    s.read_only = false;
    assert_eq!(rejected(&s.run(&mut r, "DELETE FROM t", t0)), "no");
    assert!(!s.ryw.pinned(t0), "a refused statement never ran");
    let d = s.run(&mut r, "/* querypilot: route=banana */ UPDATE t SET a = 1", t0);
    assert!(d.pool().is_none() && !s.ryw.pinned(t0), "an erroring statement never ran");
}

#[test]
fn primary_hint_pins_in_every_mode() {
    for mode in ["none", "session", "1s"] {
        let mut r = router(mode);
        let t0 = Instant::now();
        let mut s = Session::new(&r);
        s.run(&mut r, &format!("/* querypilot: route=primary */ {READ}"), t0);
        let later = t0 + Duration::from_secs(3600);
        assert_eq!(pool(&s.run(&mut r, READ, later)), "primary", "{mode}");
    }
}

#[test]
fn mode_change_keeps_what_was_observed() {
    let mut r = router("none");
    let t0 = Instant::now();
    let mut s = Session::new(&r);
    s.run(&mut r, WRITE, t0);
    assert!(!s.ryw.pinned(t0));
    s.ryw.set_mode(ReadYourWrites::Session);
    assert!(s.ryw.pinned(t0));
}

#[test]
fn the_window_starts_when_a_long_write_completes() {
    let mut r = router("2s");
    let t0 = Instant::now();
    let mut s = Session::new(&r);
    // A 5-second autocommit UPDATE: routed at t0, done at t0 + 5 s.
    s.run(&mut r, WRITE, t0);
    let done = t0 + Duration::from_secs(5);
    s.ryw.statement_done(done, false);
    assert!(s.ryw.pinned(done + Duration::from_millis(1_900)), "the window counts from completion");
    assert!(!s.ryw.pinned(done + Duration::from_secs(2)));
    // Inside a transaction completion does not start it; the commit's completion does.
    let t1 = done + Duration::from_secs(10);
    s.run(&mut r, "BEGIN", t1);
    s.tx = Some(Arc::from("primary"));
    s.run(&mut r, WRITE, t1);
    s.ryw.statement_done(t1 + Duration::from_secs(5), true);
    let commit = t1 + Duration::from_secs(6);
    s.run(&mut r, "COMMIT", commit);
    s.tx = None;
    let committed = commit + Duration::from_secs(3);
    s.ryw.statement_done(committed, false);
    assert!(s.ryw.pinned(committed + Duration::from_millis(1_900)));
    assert!(!s.ryw.pinned(committed + Duration::from_secs(2)));
    // A read's completion changes nothing.
    s.run(&mut r, READ, committed + Duration::from_secs(5));
    s.ryw.statement_done(committed + Duration::from_secs(60), false);
    assert!(!s.ryw.pinned(committed + Duration::from_secs(60)));
}

#[test]
fn causal_mode_asks_for_the_commit_position_and_keeps_the_highest() {
    let mut r = router("causal");
    assert_eq!(r.rules().read_your_writes(), ReadYourWrites::Causal);
    let t0 = Instant::now();
    let mut s = Session::new(&r);
    s.run(&mut r, READ, t0);
    s.ryw.statement_done(t0, false);
    assert!(!s.ryw.position_due() && s.ryw.required_position().is_none(), "reads pay nothing");
    s.run(&mut r, WRITE, t0);
    assert!(s.ryw.pinned(t0), "a write in flight: its position is not known yet");
    s.ryw.statement_done(t0, false);
    assert!(s.ryw.position_due() && s.ryw.pinned(t0));
    s.ryw.learned(Some(Position::Wal(5000)));
    assert!(!s.ryw.pinned(t0), "a replica that replayed 5000 may serve the reads");
    assert_eq!(s.ryw.required_position(), Some(&Position::Wal(5000)));
    assert_eq!(pool(&s.run(&mut r, READ, t0)), "replicas");
    s.run(&mut r, WRITE, t0);
    s.ryw.statement_done(t0, false);
    s.ryw.learned(Some(Position::Wal(4000))); // the high-water mark never goes back
    assert_eq!(s.ryw.required_position(), Some(&Position::Wal(5000)));
    s.run(&mut r, WRITE, t0);
    s.ryw.statement_done(t0, false);
    s.ryw.learned(None);
    assert!(s.ryw.pinned(t0), "an unreadable position keeps reads on the primary");
    s.ryw.reset();
    assert!(!s.ryw.pinned(t0) && s.ryw.required_position().is_none(), "DISCARD ALL forgets it all");
}

#[test]
fn a_declared_read_only_transaction_runs_whole_on_a_replica() {
    let mut r = router("causal");
    let t0 = Instant::now();
    let mut s = Session::new(&r);
    s.read_only = true;
    let d = s.run(&mut r, "BEGIN READ ONLY", t0);
    assert_eq!((pool(&d), d.reason), ("replicas", "read_only_transaction"));
    assert_eq!(pool(&s.run(&mut r, "BEGIN READ ONLY; SELECT 1", t0)), "primary", "more than the BEGIN");
    s.tx = Some(Arc::from("replicas"));
    assert_eq!(pool(&s.run(&mut r, READ, t0)), "replicas");
    let locked = s.run(&mut r, "SELECT a FROM t WHERE id = 1 FOR UPDATE", t0);
    assert!(
        matches!(locked.outcome, Outcome::Error(DecisionError::ReplicaUnsafe { .. })),
        "refused on the replica, never split: {:?}",
        locked.outcome
    );
    assert_eq!(pool(&s.run(&mut r, "SELECT random()", t0)), "replicas", "the server refuses its writes alike");
    let unknown = s.run(&mut r, "SELECT my_unknown_function()", t0);
    assert!(matches!(unknown.outcome, Outcome::Error(DecisionError::ReplicaUnsafe { .. })), "unknown never means safe");
    (s.tx, s.read_only) = (None, false);
    assert_eq!(pool(&s.run(&mut r, "BEGIN", t0)), "primary", "not declared read-only");
    s.run(&mut r, WRITE, t0);
    s.read_only = true;
    let d = s.run(&mut r, "BEGIN READ ONLY", t0);
    assert_eq!((pool(&d), d.reason), ("primary", "read_your_writes"), "a write in flight");
}

#[test]
fn an_unproven_transaction_that_wrote_nothing_leaves_no_position() {
    let mut r = router("causal");
    let t0 = Instant::now();
    let mut s = Session::new(&r);
    s.run(&mut r, "BEGIN", t0);
    s.ryw.observe_unproven();
    s.run(&mut r, READ, t0);
    s.run(&mut r, "COMMIT", t0);
    assert!(s.ryw.commit_unproven(), "nothing the analysis saw wrote");
    s.ryw.wrote_nothing();
    s.ryw.statement_done(t0, false);
    assert!(!s.ryw.position_due() && !s.ryw.pinned(t0), "no transaction id: nothing to wait for");
    s.run(&mut r, "BEGIN", t0);
    s.ryw.observe_unproven();
    s.run(&mut r, WRITE, t0);
    s.run(&mut r, "COMMIT", t0);
    assert!(!s.ryw.commit_unproven(), "a write the analysis saw needs no probe");
    s.ryw.wrote_nothing();
    s.ryw.statement_done(t0, false);
    assert!(s.ryw.position_due(), "its position is learned");
    s.ryw.learned(Some(Position::Wal(10)));
    s.run(&mut r, WRITE, t0);
    s.ryw.statement_done(t0, false);
    s.ryw.nothing_committed();
    assert!(!s.ryw.pinned(t0), "a failed write holds nothing");
    assert_eq!(s.ryw.required_position(), Some(&Position::Wal(10)), "what was learned before stays");
    s.ryw.observe_unproven(); // `BEGIN; SELECT f(); COMMIT` as one text
    s.run(&mut r, "BEGIN; SELECT f(); COMMIT", t0);
    s.ryw.statement_done(t0, false);
    assert!(s.ryw.position_due(), "a whole unproven transaction in one text learns its position");
}

#[test]
fn the_token_is_the_position_or_primary_when_it_is_lost() {
    use crate::id::Token;
    let mut r = router("causal");
    let t0 = Instant::now();
    let mut s = Session::new(&r);
    assert_eq!(s.ryw.token(), Token::Empty, "nothing written: nothing to wait for");
    s.run(&mut r, WRITE, t0);
    s.ryw.statement_done(t0, false);
    s.ryw.learned(Some(Position::Wal(10)));
    assert_eq!(s.ryw.token(), Token::At(Position::Wal(10)));
    s.run(&mut r, WRITE, t0);
    s.ryw.statement_done(t0, false);
    s.ryw.learned(None);
    // A replica that replayed 10 may lack this commit: handing out 10 would read stale.
    assert_eq!(s.ryw.token(), Token::Primary);
    let mut holder = Session::new(&r);
    holder.ryw.adopt_token(s.ryw.token());
    assert!(holder.ryw.pinned(t0) && holder.ryw.token() == Token::Primary, "the holder reads on the primary");
    assert_eq!(pool(&holder.run(&mut r, READ, t0)), "primary");
    holder.ryw.adopt_token(Token::Empty);
    assert!(holder.ryw.pinned(t0), "the empty token changes nothing");
    holder.run(&mut r, WRITE, t0);
    holder.ryw.statement_done(t0, false);
    holder.ryw.learned(Some(Position::Wal(30)));
    assert_eq!((holder.ryw.token(), holder.ryw.pinned(t0)), (Token::At(Position::Wal(30)), false));
    // A `route=primary` hint pins only its own session: its position is handed over still.
    let mut hinted = Session::new(&r);
    hinted.run(&mut r, &format!("/* querypilot: route=primary */ {READ}"), t0);
    hinted.run(&mut r, WRITE, t0);
    hinted.ryw.statement_done(t0, false);
    hinted.ryw.learned(Some(Position::Wal(20)));
    assert!(hinted.ryw.pinned(t0) && hinted.ryw.required_position().is_none(), "its own reads: the primary");
    assert_eq!(hinted.ryw.token(), Token::At(Position::Wal(20)));
    // Outside causal mode there is no token to hand out, and none is adopted.
    let mut r = router("session");
    let mut off = Session::new(&r);
    off.run(&mut r, WRITE, t0);
    off.ryw.learned(None);
    off.ryw.adopt_token(Token::Primary);
    assert_eq!(off.ryw.token(), Token::Empty);
}

#[test]
fn an_unproven_autocommit_read_learns_a_position_only_when_it_wrote() {
    let mut r = router("causal");
    let t0 = Instant::now();
    let mut s = Session::new(&r);
    s.run(&mut r, READ, t0);
    s.ryw.autocommit_unproven();
    assert!(s.ryw.commit_unproven() && s.ryw.commit_awaited(), "its own commit is awaited, blind");
    s.ryw.wrote_nothing();
    s.ryw.statement_done(t0, false);
    assert!(!s.ryw.position_due() && !s.ryw.pinned(t0), "no transaction id: nothing to wait for");
    s.run(&mut r, READ, t0);
    s.ryw.autocommit_unproven();
    s.ryw.statement_done(t0, false);
    assert!(s.ryw.position_due(), "a transaction id (or no answer): its position is learned");
    s.ryw.learned(Some(Position::Wal(10)));
    s.run(&mut r, WRITE, t0);
    s.ryw.autocommit_unproven();
    assert!(!s.ryw.commit_unproven(), "a write the analysis saw is not probed away");
    let mut off = Session::new(&router("session"));
    off.ryw.autocommit_unproven();
    assert!(!off.ryw.commit_awaited(), "other modes trust the analysis");
}

#[test]
fn a_session_moving_to_a_new_binary_keeps_what_its_reads_must_see() {
    use crate::id::Token;
    let mut r = router("causal");
    let t0 = Instant::now();
    let mut s = Session::new(&r);
    s.run(&mut r, WRITE, t0);
    s.ryw.statement_done(t0, false);
    s.ryw.learned(Some(Position::Wal(7000)));
    let later = t0 + Duration::from_secs(2);
    let moved = RywState::thaw(ReadYourWrites::Causal, &s.ryw.freeze(later), later);
    assert_eq!(moved.required_position(), Some(&Position::Wal(7000)), "the position moves along");
    assert!(!moved.pinned(later), "a replica that replayed it may serve the moved session's reads");
    // A commit whose position is not learned yet: the moved session reads on the primary.
    s.run(&mut r, WRITE, t0);
    s.ryw.statement_done(t0, false);
    let moved = RywState::thaw(ReadYourWrites::Causal, &s.ryw.freeze(later), later);
    assert!(moved.pinned(later) && moved.token() == Token::Primary);
    // A hint pins the moved session as it pinned the old one.
    let mut hinted = Session::new(&r);
    hinted.run(&mut r, &format!("/* querypilot: route=primary */ {READ}"), t0);
    assert!(RywState::thaw(ReadYourWrites::Causal, &hinted.ryw.freeze(t0), t0).pinned(t0));
    // session mode: the write window moves with its age.
    let mut r = router("session");
    let mut w = Session::new(&r);
    w.run(&mut r, WRITE, t0);
    w.ryw.statement_done(t0, false);
    let moved = RywState::thaw(ReadYourWrites::Session, &w.ryw.freeze(later), later);
    assert!(moved.pinned(later + Duration::from_secs(3600)), "session mode pins for the session");
    let fresh = Session::new(&r);
    assert!(!RywState::thaw(ReadYourWrites::Session, &fresh.ryw.freeze(later), later).pinned(later));
}
