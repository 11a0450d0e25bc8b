//! `engine::after`: one scenario table of statement ends, each row as both wires report it
//! (PostgreSQL from its ReadyForQuery status and command tags, MySQL from its status flags),
//! then the rules only one wire's facts can reach.

use std::cell::Cell;
use std::time::Instant;

use super::*;
use crate::config::ReadYourWrites;

/// A statement's end in protocol-neutral words: the pool's mode, the transaction around it,
/// whether it failed, and the transaction-ending word its answer carried (COMMIT: `Some(true)`).
#[derive(Debug, Clone, Copy)]
struct Scene {
    mode: PoolMode,
    before: bool,
    after: bool,
    error: bool,
    ended: Option<bool>,
}

const AUTOCOMMIT: Scene = Scene { mode: PoolMode::Transaction, before: false, after: false, error: false, ended: None };

/// `scene` as the PostgreSQL wire reports it: the ReadyForQuery statuses and the command tags.
fn pg(scene: Scene) -> StatementEnd {
    StatementEnd {
        mode: scene.mode,
        tx: TxMove { before: scene.before, after: scene.after, autocommit_off: false },
        error: scene.error,
        commits: Commits::Tagged {
            last_end: scene.ended,
            any_commit: scene.ended == Some(true),
            ends_uncommitted: scene.ended == Some(false),
            more_due: false,
        },
        insert_id: false,
        autocommit_drift: false,
    }
}

/// `scene` as the MySQL wire reports it: the last OK/EOF's status flags (autocommit on).
fn my(scene: Scene) -> StatementEnd {
    StatementEnd {
        mode: scene.mode,
        tx: TxMove { before: false, after: scene.after, autocommit_off: false },
        error: scene.error,
        commits: Commits::Carried { abandoned: false },
        insert_id: false,
        autocommit_drift: false,
    }
}

/// A causal session whose last routed statement wrote (its commit is awaited).
fn wrote() -> RywState {
    let mut ryw = RywState::new(ReadYourWrites::Causal);
    ryw.autocommit_unproven();
    ryw
}

/// What the event made of `end` for a session that just wrote, with reads split to replicas;
/// and whether a commit position is due after it.
fn run(end: &StatementEnd) -> (AfterStatement, bool) {
    let mut ryw = wrote();
    let after = statement(&mut ryw, end, Instant::now(), || true);
    (after, ryw.position_due())
}

/// What one wire must do: the effects, learn a position, and a position due after.
type Want = (Effects, bool, bool);

#[test]
fn one_table_of_statement_ends_for_both_wires() {
    let statement_pooling = Scene { mode: PoolMode::Statement, ..AUTOCOMMIT };
    #[rustfmt::skip]
    let rows: [(&str, Scene, Want, Want, bool); 8] = [
        // (what, scene, PostgreSQL, MySQL, the connection is closed)
        ("an autocommit write", AUTOCOMMIT,
            (Effects::Commit, true, true), (Effects::Keep, true, true), false),
        ("a failed autocommit write: PostgreSQL's tags say nothing committed, MySQL asks",
            Scene { error: true, ..AUTOCOMMIT },
            (Effects::Rollback, false, false), (Effects::Keep, true, true), false),
        ("BEGIN opens a transaction", Scene { after: true, ..AUTOCOMMIT },
            (Effects::Keep, false, false), (Effects::Keep, true, false), false),
        ("a statement inside it", Scene { before: true, after: true, ..AUTOCOMMIT },
            (Effects::Keep, false, false), (Effects::Keep, true, false), false),
        ("COMMIT", Scene { before: true, ended: Some(true), ..AUTOCOMMIT },
            (Effects::Commit, true, true), (Effects::Keep, true, true), false),
        ("ROLLBACK", Scene { before: true, ended: Some(false), ..AUTOCOMMIT },
            (Effects::Rollback, false, false), (Effects::Keep, true, true), false),
        ("a transaction that slipped past statement pooling", Scene { after: true, ..statement_pooling },
            (Effects::Keep, false, false), (Effects::Keep, true, false), true),
        ("an autocommit statement under statement pooling", statement_pooling,
            (Effects::Commit, true, true), (Effects::Keep, true, true), false),
    ];
    for (what, scene, want_pg, want_my, closed) in rows {
        for (wire, end, (effects, learn, due)) in [("pg", pg(scene), want_pg), ("mysql", my(scene), want_my)] {
            let (after, position_due) = run(&end);
            assert_eq!(after.effects, effects, "{wire}: {what}");
            assert_eq!(after.learn_position, learn, "{wire}: {what}");
            assert_eq!(position_due, due, "{wire}: {what}");
            assert_eq!(after.break_connection, closed, "{wire}: {what}");
            assert_eq!((after.pin, after.sticky), (None, false), "{wire}: {what}");
        }
    }
}

#[test]
fn the_read_your_writes_window_restarts_only_when_no_transaction_is_left_open() {
    for wire in [pg, my] {
        let mut ryw = RywState::new(ReadYourWrites::Causal);
        ryw.autocommit_unproven();
        statement(&mut ryw, &wire(Scene { after: true, ..AUTOCOMMIT }), Instant::now(), || true);
        assert!(ryw.commit_awaited() && !ryw.position_due(), "the commit is still to come");
        statement(&mut ryw, &wire(Scene { before: true, ended: Some(true), ..AUTOCOMMIT }), Instant::now(), || true);
        assert!(!ryw.commit_awaited() && ryw.position_due(), "committed: its position is due");
    }
}

#[test]
fn a_failed_block_commit_rolls_back_and_an_autocommit_statement_commits_unless_it_failed() {
    let rows = [
        // A failed block's COMMIT answers ROLLBACK; PREPARE TRANSACTION ends nothing committed.
        (Scene { before: true, ended: Some(false), ..AUTOCOMMIT }, Effects::Rollback),
        (Scene { before: true, ended: None, error: true, ..AUTOCOMMIT }, Effects::Rollback),
        (Scene { before: true, ended: Some(true), ..AUTOCOMMIT }, Effects::Commit),
        (AUTOCOMMIT, Effects::Commit),
        (Scene { error: true, ..AUTOCOMMIT }, Effects::Rollback),
        (Scene { before: true, after: true, error: true, ..AUTOCOMMIT }, Effects::Keep),
    ];
    for (scene, want) in rows {
        assert_eq!(run(&pg(scene)).0.effects, want, "{scene:?}");
    }
}

#[test]
fn a_text_that_committed_anything_keeps_its_position_due() {
    // `BEGIN; INSERT ...; COMMIT; ROLLBACK`: the last tag rolls back, the COMMIT before it held.
    let mut end = pg(Scene { ended: Some(false), ..AUTOCOMMIT });
    end.commits = Commits::Tagged { last_end: Some(false), any_commit: true, ends_uncommitted: true, more_due: false };
    let (after, due) = run(&end);
    assert!(after.learn_position && due);
    // PREPARE TRANSACTION: no COMMIT, the last tag leaves it uncommitted.
    end.commits = Commits::Tagged { last_end: None, any_commit: false, ends_uncommitted: true, more_due: false };
    assert_eq!(run(&end), (AfterStatement { learn_position: false, ..run(&pg(AUTOCOMMIT)).0 }, false));
}

#[test]
fn a_position_is_learned_only_when_due_on_an_idle_connection_and_a_replica_could_use_it() {
    let asked = Cell::new(0);
    let mut ryw = RywState::new(ReadYourWrites::Causal);
    // Nothing written: no position is due, and whether reads split is not even asked.
    let after = statement(&mut ryw, &pg(AUTOCOMMIT), Instant::now(), || {
        asked.set(asked.get() + 1);
        true
    });
    assert!(!after.learn_position);
    assert_eq!(asked.get(), 0);
    // A pipeline's next answer is due: the position waits for a later end.
    let mut busy = pg(AUTOCOMMIT);
    busy.commits = Commits::Tagged { last_end: None, any_commit: false, ends_uncommitted: false, more_due: true };
    assert!(!run(&busy).0.learn_position);
    assert!(run(&busy).1, "still due");
    // No read goes to a replica: the position is not worth a round trip.
    let mut ryw = wrote();
    assert!(!statement(&mut ryw, &pg(AUTOCOMMIT), Instant::now(), || false).learn_position);
    // MySQL reads what its answer carries, unless the client abandoned the exchange.
    let mut ryw = wrote();
    assert!(!statement(&mut ryw, &my(AUTOCOMMIT), Instant::now(), || false).learn_position);
    let mut gone = my(AUTOCOMMIT);
    gone.commits = Commits::Carried { abandoned: true };
    assert!(!run(&gone).0.learn_position);
}

#[test]
fn autocommit_off_escapes_statement_pooling_and_drifting_pins_under_transaction_pooling() {
    let mut off = my(Scene { mode: PoolMode::Statement, ..AUTOCOMMIT });
    off.tx.autocommit_off = true;
    assert!(run(&off).0.break_connection);
    off.mode = PoolMode::Transaction;
    assert!(!run(&off).0.break_connection, "transaction pooling keeps the connection instead");
    let rows = [
        (PoolMode::Transaction, true, Some(PinReason::UntrackedSetting)),
        (PoolMode::Transaction, false, None),
        (PoolMode::Session, true, None),
        (PoolMode::Statement, true, None),
    ];
    for (mode, drift, want) in rows {
        let mut end = my(Scene { mode, ..AUTOCOMMIT });
        end.autocommit_drift = drift;
        assert_eq!(run(&end).0.pin, want, "{mode:?} {drift}");
    }
}

#[test]
fn an_insert_id_keeps_the_connection_unless_the_statement_failed() {
    for (error, want) in [(false, true), (true, false)] {
        let mut end = my(Scene { error, ..AUTOCOMMIT });
        end.insert_id = true;
        assert_eq!(run(&end).0.sticky, want, "error: {error}");
    }
}
