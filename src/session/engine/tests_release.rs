//! Scenario tables over the engine's release, loss and idle rules. Each exhaustive table checks
//! the one rule against what each wire decided on its own before #37 (the `old_*` oracles below
//! restate those wires' conditions as they were written), over every combination of the facts
//! that wire can report; the named scenarios pin the distinctions one by one.

use std::time::{Duration, Instant};

use super::effects::setting_on;
use super::hold::{Hold, HoldFacts};
use super::release::{
    after_loss, escaped_statement_pooling, gives_back, idle_limit, release, resends_unanswered,
    statement_pooling_refusal, without_effect, Gone, LossFacts, Release, ReleaseFacts, ResendKept, Resends, Unfit,
    RESEND_ATTEMPTS,
};
use crate::config::PoolMode;
use crate::sql::analyze::PinReason;
use crate::sql::Dialect;

const MODES: [PoolMode; 3] = [PoolMode::Session, PoolMode::Transaction, PoolMode::Statement];
const PINS: [Option<PinReason>; 13] = [
    None,
    Some(PinReason::TempObject),
    Some(PinReason::AdvisoryLock),
    Some(PinReason::Listen),
    Some(PinReason::SqlPrepare),
    Some(PinReason::HoldCursor),
    Some(PinReason::UntrackedSetting),
    Some(PinReason::Role),
    Some(PinReason::DoBlock),
    Some(PinReason::UserVariable),
    Some(PinReason::LockTables),
    Some(PinReason::LastInsertId),
    Some(PinReason::ClientEncoding),
];

/// Every assignment of `N` booleans.
fn flags<const N: usize>() -> impl Iterator<Item = [bool; N]> {
    (0u32..1 << N).map(|bits| std::array::from_fn(|i| bits & (1 << i) != 0))
}
const LIMIT: Option<Duration> = Some(Duration::from_secs(5));

/// Everything a wire reported of a connection it gave up before #37, flat: what holds it
/// (transaction, cursor, exchange, pin) and the release facts proper.
#[derive(Debug, Clone, Copy)]
struct Facts {
    session_end: bool,
    mode: PoolMode,
    broken: bool,
    in_transaction: bool,
    cursor: bool,
    mid_exchange: bool,
    pinned: bool,
    settings_linger: bool,
    can_reset: bool,
    settings_stale: bool,
}

/// The engine's verdict on `f`: the hold as the wires compute it, then the release rule.
fn verdict(f: &Facts) -> Release {
    let hold = hold(|h| {
        (h.in_transaction, h.cursor, h.mid_exchange) = (f.in_transaction, f.cursor, f.mid_exchange);
        h.pin = f.pinned.then_some(PinReason::TempObject);
    });
    let facts = ReleaseFacts {
        session_end: f.session_end,
        mode: f.mode,
        broken: f.broken,
        settings_linger: f.settings_linger,
        can_reset: f.can_reset,
        settings_stale: f.settings_stale,
    };
    release(hold, &facts)
}

/// A connection a session gives up between statements, with nothing on it.
const IDLE: Facts = Facts {
    session_end: false,
    mode: PoolMode::Transaction,
    broken: false,
    in_transaction: false,
    cursor: false,
    mid_exchange: false,
    pinned: false,
    settings_linger: false,
    can_reset: true,
    settings_stale: false,
};

fn released(change: impl FnOnce(&mut Facts)) -> Release {
    let mut f = IDLE;
    change(&mut f);
    verdict(&f)
}

/// A transaction-pooled session that lost a connection holding nothing.
const QUIET: LossFacts =
    LossFacts { mode: PoolMode::Transaction, home_pool: true, in_transaction: false, pin: None, out_of_step: false };

fn lost(change: impl FnOnce(&mut LossFacts)) -> Option<Gone> {
    let mut f = QUIET;
    change(&mut f);
    after_loss(&f)
}

fn hold(change: impl FnOnce(&mut HoldFacts)) -> Hold {
    let mut f = HoldFacts { connected: true, ..HoldFacts::default() };
    change(&mut f);
    Hold::of(&f)
}

/// Every combination of the booleans of [`Facts`] under every mode.
fn every_release_fact() -> Vec<Facts> {
    let mut all = Vec::new();
    for mode in MODES {
        for [session_end, broken, in_transaction, cursor, mid_exchange, pinned, linger, can_reset, stale] in flags() {
            let (settings_linger, settings_stale) = (linger, stale);
            all.push(Facts {
                session_end,
                mode,
                broken,
                in_transaction,
                cursor,
                mid_exchange,
                pinned,
                settings_linger,
                can_reset,
                settings_stale,
            });
        }
    }
    all
}

// ---- the wires' rules before #37 -----------------------------------------------------------

/// PostgreSQL's `maybe_release`: no transaction, no pin, no answer still due; in session
/// pooling also a backend marked down.
fn old_pg_gives_back(mode: PoolMode, in_tx: bool, answers_due: bool, pinned: bool, move_off: bool) -> bool {
    let release = match mode {
        PoolMode::Session => !in_tx && !pinned && move_off,
        PoolMode::Transaction | PoolMode::Statement => !in_tx && !pinned,
    };
    release && !answers_due
}

/// MySQL's `maybe_release` over `between_transactions`.
fn old_mysql_gives_back(mode: PoolMode, in_tx: bool, cursor: bool, pinned: bool, sticky: bool, move_off: bool) -> bool {
    let between = !in_tx && !pinned && !cursor && !sticky;
    match mode {
        PoolMode::Session => move_off && between,
        PoolMode::Transaction | PoolMode::Statement => between,
    }
}

/// PostgreSQL's `release_backend` (`mid_exchange`: answers due or a batch awaiting Sync;
/// `can_reset`: not a generic engine); the outcome as (reusable, reset, settings kept).
fn old_pg_release(f: &Facts) -> (bool, bool, bool) {
    let clean = !f.in_transaction && !f.mid_exchange && !f.broken;
    if !clean {
        return (false, false, false);
    }
    let leaves_state = f.session_end && (f.mode == PoolMode::Session || f.pinned);
    if leaves_state && !f.can_reset {
        return (false, false, false);
    }
    if leaves_state {
        return (true, true, false);
    }
    (true, false, !f.settings_stale)
}

/// MySQL's `release_backend` (`settings_linger`: a settings signature other than 0).
fn old_mysql_release(f: &Facts) -> (bool, bool, bool) {
    let clean = !f.in_transaction && !f.cursor && !f.broken && !f.mid_exchange;
    if !clean {
        return (false, false, false);
    }
    if f.session_end && (f.mode == PoolMode::Session || f.pinned || f.settings_linger) {
        return (true, true, false);
    }
    (true, false, true)
}

/// The engine's verdict in the old functions' terms (a reset that succeeds).
fn as_old(r: Release) -> (bool, bool, bool) {
    match r {
        Release::Close(_) => (false, false, false),
        Release::Reset => (true, true, false),
        Release::Return { stale: true } => (true, false, false),
        Release::Return { stale: false } => (true, false, true),
    }
}

/// PostgreSQL's `backend_lost` / `lost_while_idle`: a transaction, a pin, or the client's own
/// server session (session mode on the pool it logged in to) ends the session.
fn old_pg_ends(mode: PoolMode, home: bool, in_tx: bool, pin: Option<PinReason>) -> bool {
    in_tx || pin.is_some() || (mode == PoolMode::Session && home)
}

/// MySQL's `backend_lost` before #37, which passed no pin and counted every pool as the one the
/// client logged in to; pins and routed pools now follow PostgreSQL's rule.
fn old_mysql_ends(mode: PoolMode, in_tx: bool, mid_response: bool) -> bool {
    mid_response || in_tx || mode == PoolMode::Session
}

// ---- giving the connection back after a statement ------------------------------------------

#[test]
fn postgresql_gives_back_exactly_when_it_did() {
    for (mode, [in_tx, due, move_off]) in MODES.into_iter().flat_map(|m| flags().map(move |b| (m, b))) {
        for pin in PINS {
            let h = hold(|f| (f.in_transaction, f.mid_exchange, f.pin) = (in_tx, due, pin));
            let want = old_pg_gives_back(mode, in_tx, due, pin.is_some(), move_off);
            assert_eq!(gives_back(mode, h, move_off), want, "{mode:?} tx={in_tx} due={due} {pin:?} off={move_off}");
        }
    }
}

#[test]
fn mysql_gives_back_exactly_when_it_did() {
    for mode in MODES {
        for [in_tx, cursor, sticky, move_off] in flags() {
            for pin in PINS {
                let h = hold(|f| (f.in_transaction, f.cursor, f.sticky, f.pin) = (in_tx, cursor, sticky, pin));
                let want = old_mysql_gives_back(mode, in_tx, cursor, pin.is_some(), sticky, move_off);
                assert_eq!(
                    gives_back(mode, h, move_off),
                    want,
                    "{mode:?} {in_tx} {cursor} {sticky} {move_off} {pin:?}"
                );
            }
        }
    }
}

#[test]
fn transaction_pooling_gives_a_free_connection_back() {
    assert!(gives_back(PoolMode::Transaction, Hold::Free, false));
}

#[test]
fn statement_pooling_gives_a_free_connection_back() {
    assert!(gives_back(PoolMode::Statement, Hold::Free, false));
}

#[test]
fn session_pooling_keeps_a_free_connection_on_a_healthy_backend() {
    assert!(!gives_back(PoolMode::Session, Hold::Free, false));
}

#[test]
fn session_pooling_moves_off_a_backend_marked_down() {
    assert!(gives_back(PoolMode::Session, Hold::Free, true));
}

#[test]
fn a_backend_marked_down_does_not_free_a_held_session_pooled_connection() {
    for h in [Hold::Tx { read_only: false }, Hold::Cursor, Hold::Pin(PinReason::TempObject), Hold::Sticky] {
        assert!(!gives_back(PoolMode::Session, h, true), "{h:?}");
    }
}

#[test]
fn an_open_transaction_keeps_the_connection_in_every_mode() {
    for mode in MODES {
        assert!(!gives_back(mode, Hold::Tx { read_only: false }, true), "{mode:?}");
        assert!(!gives_back(mode, Hold::Tx { read_only: true }, true), "{mode:?}: read-only too");
    }
}

#[test]
fn a_pin_keeps_the_connection_in_transaction_pooling() {
    for pin in PINS.into_iter().flatten() {
        assert!(!gives_back(PoolMode::Transaction, Hold::Pin(pin), false), "{pin:?}");
    }
}

#[test]
fn an_open_cursor_keeps_the_connection() {
    assert!(!gives_back(PoolMode::Transaction, Hold::Cursor, false));
}

#[test]
fn a_sticky_insert_id_keeps_the_connection() {
    assert!(!gives_back(PoolMode::Transaction, Hold::Sticky, false));
}

#[test]
fn answers_still_due_keep_the_connection() {
    assert!(!gives_back(PoolMode::Transaction, Hold::MidBatch, false));
    assert!(!gives_back(PoolMode::Statement, Hold::MidBatch, true));
}

// ---- statement pooling's escape hatch -------------------------------------------------------

#[test]
fn only_statement_pooling_closes_a_transaction_left_open() {
    let rows = [
        (PoolMode::Statement, true, true),
        (PoolMode::Statement, false, false),
        (PoolMode::Transaction, true, false),
        (PoolMode::Transaction, false, false),
        (PoolMode::Session, true, false),
        (PoolMode::Session, false, false),
    ];
    for (mode, open, want) in rows {
        assert_eq!(escaped_statement_pooling(mode, open), want, "{mode:?} open={open}");
    }
}

// ---- releasing a connection ------------------------------------------------------------------

/// Checks the engine against `old` over every fact combination `wire` can report (3 modes x
/// 2^7 of the booleans: two of the nine are fixed for each wire).
fn releases_as(wire: impl Fn(&Facts) -> bool, old: fn(&Facts) -> (bool, bool, bool)) {
    let facts: Vec<Facts> = every_release_fact().into_iter().filter(|f| wire(f)).collect();
    assert_eq!(facts.len(), 3 * 128);
    for f in facts {
        assert_eq!(as_old(verdict(&f)), old(&f), "{f:?}");
    }
}

#[test]
fn postgresql_releases_exactly_as_it_did() {
    // PostgreSQL reports no cursor (one lives in a transaction or is a pin) and no lingering
    // settings (its replay starts with RESET ALL).
    releases_as(|f| !f.cursor && !f.settings_linger, old_pg_release);
}

#[test]
fn mysql_releases_exactly_as_it_did() {
    // MySQL always has a reset and never a stale startup value.
    releases_as(|f| f.can_reset && !f.settings_stale, old_mysql_release);
}

#[test]
fn a_free_connection_goes_back_with_the_session_settings() {
    assert_eq!(verdict(&IDLE), Release::Return { stale: false });
}

#[test]
fn a_broken_connection_is_closed() {
    assert_eq!(released(|f| f.broken = true), Release::Close(Unfit::Broken));
}

#[test]
fn a_broken_connection_is_closed_even_when_it_could_be_reset() {
    let r = released(|f| (f.broken, f.session_end, f.mode) = (true, true, PoolMode::Session));
    assert_eq!(r, Release::Close(Unfit::Broken));
}

#[test]
fn broken_is_named_before_unfinished() {
    let r = released(|f| (f.broken, f.in_transaction, f.mid_exchange) = (true, true, true));
    assert_eq!(r, Release::Close(Unfit::Broken));
}

#[test]
fn an_open_transaction_is_closed_not_handed_on() {
    assert_eq!(released(|f| f.in_transaction = true), Release::Close(Unfit::Unfinished));
}

#[test]
fn an_open_cursor_is_closed_not_handed_on() {
    assert_eq!(released(|f| f.cursor = true), Release::Close(Unfit::Unfinished));
}

#[test]
fn an_unfinished_exchange_is_closed_not_handed_on() {
    assert_eq!(released(|f| f.mid_exchange = true), Release::Close(Unfit::Unfinished));
}

#[test]
fn something_open_is_closed_even_at_session_end() {
    for mode in MODES {
        let r = released(|f| (f.session_end, f.mode, f.in_transaction) = (true, mode, true));
        assert_eq!(r, Release::Close(Unfit::Unfinished), "{mode:?}");
    }
}

#[test]
fn the_end_of_a_session_pooled_session_resets_the_connection() {
    assert_eq!(released(|f| (f.session_end, f.mode) = (true, PoolMode::Session)), Release::Reset);
}

#[test]
fn a_session_pooled_connection_given_back_mid_session_is_not_reset() {
    // Moving off a backend marked down: the session's own state follows it by replay.
    assert_eq!(released(|f| f.mode = PoolMode::Session), Release::Return { stale: false });
}

#[test]
fn the_end_of_a_pinned_session_resets_the_connection() {
    for mode in [PoolMode::Transaction, PoolMode::Statement] {
        assert_eq!(released(|f| (f.session_end, f.mode, f.pinned) = (true, mode, true)), Release::Reset, "{mode:?}");
    }
}

#[test]
fn a_pinned_connection_given_back_mid_session_is_not_reset() {
    assert_eq!(released(|f| f.pinned = true), Release::Return { stale: false });
}

#[test]
fn the_end_of_a_clean_transaction_pooled_session_hands_the_connection_on_as_it_is() {
    assert_eq!(released(|f| f.session_end = true), Release::Return { stale: false });
}

#[test]
fn lingering_settings_are_reset_at_the_end_of_a_session() {
    assert_eq!(released(|f| (f.session_end, f.settings_linger) = (true, true)), Release::Reset);
}

#[test]
fn lingering_settings_go_back_with_the_session_between_statements() {
    assert_eq!(released(|f| f.settings_linger = true), Release::Return { stale: false });
}

#[test]
fn without_a_reset_state_left_behind_closes_the_connection() {
    let rows = [
        released(|f| (f.session_end, f.mode, f.can_reset) = (true, PoolMode::Session, false)),
        released(|f| (f.session_end, f.pinned, f.can_reset) = (true, true, false)),
        released(|f| (f.session_end, f.settings_linger, f.can_reset) = (true, true, false)),
    ];
    for r in rows {
        assert_eq!(r, Release::Close(Unfit::NoReset));
    }
}

#[test]
fn without_a_reset_a_clean_connection_still_goes_back() {
    assert_eq!(released(|f| (f.session_end, f.can_reset) = (true, false)), Release::Return { stale: false });
    assert_eq!(released(|f| (f.pinned, f.can_reset) = (true, false)), Release::Return { stale: false });
}

#[test]
fn stale_startup_settings_make_the_next_client_replay() {
    assert_eq!(released(|f| f.settings_stale = true), Release::Return { stale: true });
}

#[test]
fn a_reset_outranks_stale_settings() {
    let r = released(|f| (f.session_end, f.mode, f.settings_stale) = (true, PoolMode::Session, true));
    assert_eq!(r, Release::Reset);
}

#[test]
fn stale_settings_do_not_save_an_unfinished_connection() {
    let r = released(|f| (f.settings_stale, f.mid_exchange) = (true, true));
    assert_eq!(r, Release::Close(Unfit::Unfinished));
}

#[test]
fn every_verdict_closes_what_it_cannot_clean() {
    // Whatever else holds, a connection that is broken or has something open never goes back.
    for f in every_release_fact() {
        let dirty = f.broken || f.in_transaction || f.cursor || f.mid_exchange;
        assert_eq!(matches!(verdict(&f), Release::Close(Unfit::Broken | Unfit::Unfinished)), dirty, "{f:?}");
    }
}

#[test]
fn only_a_session_end_resets_or_closes_a_clean_connection() {
    for f in every_release_fact().into_iter().filter(|f| !f.session_end) {
        let dirty = f.broken || f.in_transaction || f.cursor || f.mid_exchange;
        assert_eq!(matches!(verdict(&f), Release::Return { .. }), !dirty, "{f:?}");
    }
}

// ---- losing the connection -------------------------------------------------------------------

#[test]
fn an_unpinned_mysql_session_on_its_own_pool_ends_on_loss_exactly_when_it_did() {
    for mode in MODES {
        for [in_tx, mid] in flags() {
            let f = LossFacts { mode, home_pool: true, in_transaction: in_tx, pin: None, out_of_step: mid };
            let ends = after_loss(&f).is_some();
            assert_eq!(ends, old_mysql_ends(mode, in_tx, mid), "{f:?}");
        }
    }
}

#[test]
fn postgresql_ends_a_session_on_loss_and_words_it_as_it_did() {
    // The old order: the transaction first, then the pin, then the server session.
    for mode in MODES {
        for [home, in_tx] in flags() {
            for pin in PINS {
                let f = LossFacts { mode, home_pool: home, in_transaction: in_tx, pin, out_of_step: false };
                let want = match pin {
                    _ if in_tx => Some(Gone::Transaction),
                    Some(p) => Some(Gone::State(p)),
                    None if mode == PoolMode::Session && home => Some(Gone::ServerSession),
                    None => None,
                };
                assert_eq!(want.is_some(), old_pg_ends(mode, home, in_tx, pin), "{f:?}: ends as it did");
                assert_eq!(after_loss(&f), want, "{f:?}");
            }
        }
    }
}

#[test]
fn a_pooled_session_that_lost_nothing_goes_on() {
    assert_eq!(after_loss(&QUIET), None);
    assert_eq!(lost(|f| f.mode = PoolMode::Statement), None);
}

#[test]
fn a_lost_transaction_ends_the_session() {
    assert_eq!(lost(|f| f.in_transaction = true), Some(Gone::Transaction));
}

#[test]
fn a_lost_transaction_is_named_before_a_pin() {
    let r = lost(|f| (f.in_transaction, f.pin) = (true, Some(PinReason::Role)));
    assert_eq!(r, Some(Gone::Transaction));
}

#[test]
fn lost_session_state_ends_the_session_and_is_named() {
    for pin in PINS.into_iter().flatten() {
        assert_eq!(lost(|f| f.pin = Some(pin)), Some(Gone::State(pin)), "{pin:?}");
    }
}

#[test]
fn a_session_pooled_client_ends_with_its_server_session() {
    assert_eq!(lost(|f| f.mode = PoolMode::Session), Some(Gone::ServerSession));
}

#[test]
fn a_pool_reached_by_routing_holds_no_server_session_of_the_client() {
    assert_eq!(lost(|f| (f.mode, f.home_pool) = (PoolMode::Session, false)), None);
}

#[test]
fn home_pool_matters_only_in_session_pooling() {
    for mode in [PoolMode::Transaction, PoolMode::Statement] {
        assert_eq!(lost(|f| (f.mode, f.home_pool) = (mode, false)), None, "{mode:?}");
    }
}

#[test]
fn a_client_left_mid_result_ends_the_session() {
    assert_eq!(lost(|f| f.out_of_step = true), Some(Gone::Step));
}

#[test]
fn being_out_of_step_is_named_last() {
    let rows = [
        (lost(|f| (f.out_of_step, f.in_transaction) = (true, true)), Gone::Transaction),
        (lost(|f| (f.out_of_step, f.pin) = (true, Some(PinReason::Listen))), Gone::State(PinReason::Listen)),
        (lost(|f| (f.out_of_step, f.mode) = (true, PoolMode::Session)), Gone::ServerSession),
    ];
    for (r, gone) in rows {
        assert_eq!(r, Some(gone));
    }
}

// ---- a silent client --------------------------------------------------------------------------

#[test]
fn postgresql_times_a_silent_client_exactly_when_it_did() {
    // Old rule: a backend attached and a transaction open or an exchange unfinished.
    for [connected, in_tx, mid] in flags() {
        for pin in PINS {
            let f = HoldFacts { connected, in_transaction: in_tx, mid_exchange: mid, pin, ..HoldFacts::default() };
            let want = (connected && (in_tx || mid)).then_some(LIMIT).flatten();
            assert_eq!(idle_limit(Hold::of(&f), LIMIT), want, "{f:?}");
        }
    }
}

#[test]
fn mysql_times_a_silent_client_exactly_when_it_did() {
    // Old rule, with a connection attached: a transaction or a cursor open (between commands
    // no response is left half read).
    for [in_tx, cursor, sticky] in flags() {
        for pin in PINS {
            let h = hold(|f| (f.in_transaction, f.cursor, f.sticky, f.pin) = (in_tx, cursor, sticky, pin));
            let want = LIMIT.filter(|_| in_tx || cursor);
            assert_eq!(idle_limit(h, LIMIT), want, "tx={in_tx} cursor={cursor} sticky={sticky} {pin:?}");
        }
    }
}

#[test]
fn a_silent_client_in_a_transaction_is_timed() {
    assert_eq!(idle_limit(Hold::Tx { read_only: false }, LIMIT), LIMIT);
    assert_eq!(idle_limit(Hold::Tx { read_only: true }, LIMIT), LIMIT);
}

#[test]
fn a_silent_client_with_a_cursor_open_is_timed() {
    assert_eq!(idle_limit(Hold::Cursor, LIMIT), LIMIT);
}

#[test]
fn a_silent_client_mid_exchange_is_timed() {
    assert_eq!(idle_limit(Hold::MidBatch, LIMIT), LIMIT);
}

#[test]
fn a_free_client_may_stay_silent() {
    assert_eq!(idle_limit(Hold::Free, LIMIT), None);
}

#[test]
fn a_pinned_client_may_stay_silent() {
    for pin in PINS.into_iter().flatten() {
        assert_eq!(idle_limit(Hold::Pin(pin), LIMIT), None, "{pin:?}");
    }
}

#[test]
fn a_sticky_client_may_stay_silent() {
    assert_eq!(idle_limit(Hold::Sticky, LIMIT), None);
}

#[test]
fn without_a_configured_timeout_nothing_is_timed() {
    for h in [Hold::Free, Hold::Tx { read_only: false }, Hold::Cursor, Hold::MidBatch, Hold::Sticky] {
        assert_eq!(idle_limit(h, None), None, "{h:?}");
    }
}

#[test]
fn the_configured_timeout_is_the_one_applied() {
    let short = Some(Duration::from_millis(250));
    assert_eq!(idle_limit(Hold::Tx { read_only: false }, short), short);
}

// ---- the rules together ----------------------------------------------------------------------

/// The end of a clean transaction-pooled session.
const END: ReleaseFacts = ReleaseFacts {
    session_end: true,
    mode: PoolMode::Transaction,
    broken: false,
    settings_linger: false,
    can_reset: true,
    settings_stale: false,
};

/// Every hold a connected session can be in.
fn every_hold() -> Vec<Hold> {
    let mut all = vec![Hold::Free, Hold::Tx { read_only: false }, Hold::Tx { read_only: true }];
    all.extend([Hold::Cursor, Hold::MidBatch, Hold::Sticky]);
    all.extend(PINS.into_iter().flatten().map(Hold::Pin));
    all
}

#[test]
fn what_a_silent_client_is_timed_for_is_what_a_release_must_close() {
    for h in every_hold() {
        let closes = release(h, &END) == Release::Close(Unfit::Unfinished);
        assert_eq!(idle_limit(h, LIMIT).is_some(), closes, "{h:?}");
    }
}

#[test]
fn every_pin_is_reset_at_the_end_of_a_session() {
    for pin in PINS.into_iter().flatten() {
        assert_eq!(release(Hold::Pin(pin), &END), Release::Reset, "{pin:?}");
    }
}

#[test]
fn stickiness_leaves_nothing_to_reset() {
    assert_eq!(release(Hold::Sticky, &END), Release::Return { stale: false });
}

#[test]
fn a_read_only_transaction_is_closed_like_any_other() {
    let r = release(
        Hold::Tx { read_only: true },
        &ReleaseFacts {
            session_end: false,
            mode: PoolMode::Transaction,
            broken: false,
            settings_linger: false,
            can_reset: true,
            settings_stale: false,
        },
    );
    assert_eq!(r, Release::Close(Unfit::Unfinished));
}

#[test]
fn a_held_connection_is_never_given_back_after_a_statement() {
    for mode in MODES {
        for h in every_hold() {
            assert_eq!(gives_back(mode, h, true), h == Hold::Free, "{mode:?} {h:?}");
        }
    }
}

#[test]
fn a_lost_pin_is_named_before_the_server_session() {
    let r = lost(|f| (f.mode, f.pin) = (PoolMode::Session, Some(PinReason::AdvisoryLock)));
    assert_eq!(r, Some(Gone::State(PinReason::AdvisoryLock)));
}

#[test]
fn a_lost_transaction_ends_the_session_on_any_pool() {
    // A transaction on a pool reached by routing is still the client's transaction.
    assert_eq!(lost(|f| (f.in_transaction, f.home_pool) = (true, false)), Some(Gone::Transaction));
}

#[test]
fn a_client_out_of_step_on_a_routed_pool_still_ends() {
    let r = lost(|f| (f.mode, f.home_pool, f.out_of_step) = (PoolMode::Session, false, true));
    assert_eq!(r, Some(Gone::Step));
}

#[test]
fn the_end_of_a_clean_statement_pooled_session_hands_the_connection_on() {
    let r = released(|f| (f.session_end, f.mode) = (true, PoolMode::Statement));
    assert_eq!(r, Release::Return { stale: false });
}

#[test]
fn a_session_pooled_connection_moving_off_keeps_stale_settings_stale() {
    let r = released(|f| (f.mode, f.settings_stale) = (PoolMode::Session, true));
    assert_eq!(r, Release::Return { stale: true });
}

#[test]
fn a_connection_left_with_nothing_to_correct_goes_back_as_it_is() {
    // What `leaving` assumes (a reset exists, settings are the session's and undone by the next
    // replay) decides nothing by itself: only session pooling's end resets.
    for mode in MODES {
        for [end, broken] in flags() {
            let want = match (broken, end && mode == PoolMode::Session) {
                (true, _) => Release::Close(Unfit::Broken),
                (false, true) => Release::Reset,
                (false, false) => Release::Return { stale: false },
            };
            assert_eq!(release(Hold::Free, &ReleaseFacts::leaving(end, mode, broken)), want, "{mode:?} {end} {broken}");
        }
    }
}

#[test]
fn statement_pooling_refuses_transaction_openers_in_both_dialects() {
    let rows = ["BEGIN", "begin work", "START TRANSACTION READ ONLY", "SELECT 1; START TRANSACTION", "SELECT 1; BEGIN"];
    for dialect in [Dialect::Postgres, Dialect::MySql] {
        for sql in rows {
            let why = statement_pooling_refusal(sql, dialect).unwrap_or_default();
            assert!(why.ends_with("opens a transaction"), "{dialect:?} {sql}: {why}");
            // Both wires say it in the same words (PgBouncer's, which clients know, and why).
            assert!(why.starts_with("transaction blocks are not allowed in statement pooling mode: "), "{why}");
        }
        for sql in ["SELECT 1", "UPDATE t SET a = 1", "SELECT 'BEGIN'", "COMMIT", "SET search_path = s"] {
            assert_eq!(statement_pooling_refusal(sql, dialect), None, "{dialect:?} {sql}");
        }
    }
}

#[test]
fn statement_pooling_sees_a_postgresql_transaction_block_in_any_statement_of_a_text() {
    for sql in [
        "BEGIN",
        "begin isolation level serializable",
        "START TRANSACTION READ ONLY",
        "/* app */ start transaction",
        "SELECT 1; BEGIN",
        "SELECT 1;BEGIN READ ONLY;",
        "SELECT 1; -- x\n START TRANSACTION; SELECT 2",
    ] {
        assert!(statement_pooling_refusal(sql, Dialect::Postgres).is_some(), "{sql}");
    }
    for sql in [
        "SELECT 1",
        "SELECT 'BEGIN'",
        "SELECT 1; SELECT 'START TRANSACTION'",
        "SELECT begin FROM t",
        "COMMIT; SELECT 1",
        "START",
        "SET x = 'BEGIN'; -- BEGIN",
    ] {
        assert!(statement_pooling_refusal(sql, Dialect::Postgres).is_none(), "{sql}");
    }
}

#[test]
fn statement_pooling_refuses_mysql_autocommit_off_only() {
    for sql in [
        "XA START 'x'",
        "SET autocommit=0",
        "SET @@session.autocommit = OFF",
        "set autocommit = false",
        "SET SESSION autocommit = @v",
        "SET autocommit = DEFAULT",
        "SET time_zone = '+00:00', autocommit = 0",
    ] {
        assert!(statement_pooling_refusal(sql, Dialect::MySql).is_some(), "{sql}");
    }
    for sql in [
        "SET autocommit = 1",
        "SET autocommit=ON",
        "SET @@autocommit = 'true'",
        "UPDATE t SET autocommit = 0",
        "BEGIN NOT ATOMIC SELECT 1; END",
        "CREATE PROCEDURE p() BEGIN START TRANSACTION; SET autocommit = 0; END",
        "SET STATEMENT max_statement_time = 1 FOR SELECT 1",
    ] {
        assert_eq!(statement_pooling_refusal(sql, Dialect::MySql), None, "{sql}");
    }
    let why = statement_pooling_refusal("SET autocommit = 0", Dialect::MySql).unwrap_or_default();
    assert!(why.contains("SET SESSION autocommit = 0"), "{why}");
    // PostgreSQL has no such setting: the server answers it, as it answers any unknown one.
    assert_eq!(statement_pooling_refusal("SET autocommit = 0", Dialect::Postgres), None);
}

#[test]
fn a_setting_is_on_only_when_its_value_reads_as_true() {
    for stmt in
        ["SET SESSION autocommit = 1", "SET SESSION autocommit = ON", "SET SESSION x = 'true'", "SET x = \"on\""]
    {
        assert!(setting_on(stmt), "{stmt}");
    }
    for stmt in ["SET SESSION autocommit = 0", "SET SESSION autocommit = @v", "SET SESSION x = DEFAULT", "SET x"] {
        assert!(!setting_on(stmt), "{stmt}");
    }
}

/// #40 before #37, as each wire wrote it: PostgreSQL resent an unanswered lone BEGIN when no
/// transaction was open and nothing ended the session; MySQL the same, its facts' `out_of_step`
/// being any answer already buffered for the client.
fn old_resends(f: &LossFacts, unanswered: bool) -> bool {
    let ends = f.in_transaction || f.pin.is_some() || (f.mode == PoolMode::Session && f.home_pool) || f.out_of_step;
    unanswered && !f.in_transaction && !ends
}

#[test]
fn a_lone_begin_goes_again_exactly_when_both_wires_resent_it() {
    for mode in MODES {
        for pin in PINS {
            for [home_pool, in_transaction, out_of_step, unanswered] in flags::<4>() {
                let f = LossFacts { mode, home_pool, in_transaction, pin, out_of_step };
                assert_eq!(resends_unanswered(&f, unanswered), old_resends(&f, unanswered), "{f:?} {unanswered}");
            }
        }
    }
}

#[test]
fn a_lone_begin_goes_again_only_unanswered_and_with_nothing_lost() {
    assert!(resends_unanswered(&QUIET, true));
    assert!(!resends_unanswered(&QUIET, false), "part of its answer reached the client");
    let session = LossFacts { mode: PoolMode::Session, ..QUIET };
    assert!(!resends_unanswered(&session, true), "a session-mode client's server session died");
    assert!(resends_unanswered(&LossFacts { home_pool: false, ..session }, true), "a routed pool holds none");
    let pinned = LossFacts { pin: Some(PinReason::TempObject), ..QUIET };
    assert!(!resends_unanswered(&pinned, true), "its temporary table died");
}

#[test]
fn a_lone_begin_goes_past_connections_idle_since_its_first_loss_and_counts_the_others() {
    let t0 = Instant::now();
    let (first, later) = (t0 + Duration::from_millis(10), t0 + Duration::from_millis(20));
    let mut losses = Resends::default();
    // The first loss counts, however long its connection sat idle.
    assert_eq!(losses.lost(&QUIET, true, Some(t0), first), Ok(()));
    // Connections idle since before it died with it: any number of them, none counted.
    for _ in 0..100 {
        assert_eq!(losses.lost(&QUIET, true, Some(t0), later), Ok(()));
        assert_eq!(losses.lost(&QUIET, true, Some(first), later), Ok(()), "given back as the first was lost");
    }
    // Connections opened or given back since count, and end the resends at RESEND_ATTEMPTS.
    for _ in 2..RESEND_ATTEMPTS {
        assert_eq!(losses.lost(&QUIET, true, Some(later), later), Ok(()));
    }
    assert_eq!(losses.lost(&QUIET, true, Some(later), later), Err(ResendKept::Exhausted));
    let mut unknown = Resends::default();
    for _ in 1..RESEND_ATTEMPTS {
        assert_eq!(unknown.lost(&QUIET, true, None, later), Ok(()));
    }
    assert_eq!(unknown.lost(&QUIET, true, None, later), Err(ResendKept::Exhausted), "not known: counted");
}

#[test]
fn a_lone_begin_not_sent_again_says_why() {
    let mut losses = Resends::default();
    assert_eq!(losses.lost(&QUIET, false, None, Instant::now()), Err(ResendKept::Answered));
    let in_tx = LossFacts { in_transaction: true, ..QUIET };
    assert_eq!(losses.lost(&in_tx, true, None, Instant::now()), Err(ResendKept::Gone(Gone::Transaction)));
    let session = LossFacts { mode: PoolMode::Session, ..QUIET };
    assert_eq!(losses.lost(&session, true, None, Instant::now()), Err(ResendKept::Gone(Gone::ServerSession)));
    assert_eq!(losses, Resends::default(), "a loss that ends the resends is not counted");
}

#[test]
fn only_one_read_routing_found_fit_for_a_replica_is_without_effect() {
    use crate::routing::Facts;
    use crate::sql::analyze::analyze;
    use crate::sql::volatility::FunctionCatalog;
    let facts =
        |sql: &str, dialect: Dialect| Facts::from_analysis(&analyze(sql, dialect, &FunctionCatalog::builtin(dialect)));
    for (sql, dialect, want) in [
        ("SELECT a FROM t WHERE id = 1", Dialect::Postgres, true),
        ("SELECT @@max_allowed_packet", Dialect::MySql, true),
        ("INSERT INTO t VALUES (1)", Dialect::Postgres, false),
        ("UPDATE t SET a = 1", Dialect::MySql, false),
        ("SELECT a FROM t FOR UPDATE", Dialect::Postgres, false),
        ("SELECT nextval('s')", Dialect::Postgres, false),
        ("SELECT RAND()", Dialect::MySql, false),
        ("SELECT set_config('a', 'b', false)", Dialect::Postgres, false),
        ("SELECT 1; SELECT 2", Dialect::Postgres, false),
        // A read like any other: lost unanswered, no CopyOutResponse reached the client.
        ("COPY t TO STDOUT", Dialect::Postgres, true),
        ("COPY t FROM STDIN", Dialect::Postgres, false),
        ("LOAD DATA LOCAL INFILE 'f' INTO TABLE t", Dialect::MySql, false),
    ] {
        assert_eq!(without_effect(Some(&facts(sql, dialect))), want, "{sql}");
    }
    assert!(!without_effect(None), "a translation's text was not what routing analysed");
}
