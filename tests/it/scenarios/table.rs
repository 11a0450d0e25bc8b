//! The scenario table: data only. Each wire's runner gives these statements their SQL.

use std::time::Duration;

use super::{Class, Expect, PinKind, Place, Route, Scenario, Setup, Sql, Step, Wire, ROUTES};

use Place::{Primary, Replica};
use Route::Text;

const TRANSACTION: &str = "transaction";

fn run(c: usize, route: Route, sql: Sql, expect: Expect) -> Step {
    Step::Run { c, route, sql, expect }
}

fn ok(c: usize, route: Route, sql: Sql) -> Step {
    run(c, route, sql, Expect::Ok)
}

/// A [`Sql::Count`] of `id` on `c` over `route` that must run `on` and see the row or not.
fn count(c: usize, route: Route, id: u32, seen: Option<bool>, on: Place) -> Step {
    run(c, route, Sql::Count(id), Expect::Row { seen, on })
}

fn refused(c: usize, route: Route, sql: Sql, class: Class) -> Step {
    run(c, route, sql, Expect::Error { class, after_rows: false })
}

fn only(wire: Wire, why: &'static str, step: Step) -> Step {
    Step::Only { wire, why, step: Box::new(step) }
}

fn setup(mode: &'static str, ryw: &'static str, retry: bool) -> Setup {
    Setup { mode, ryw, retry }
}

/// Every scenario, both wires.
pub fn table() -> Vec<Scenario> {
    let mut all = vec![ryw_window()];
    all.extend(ROUTES.iter().map(|r| causal_token(*r)));
    all.extend(ROUTES.iter().map(|r| begin_read_only(*r)));
    all.push(set_transaction_in_read_only());
    all.extend([retry(true), retry(false), statement_pooling(), statement_pooling_trailing_begin()]);
    all.extend(
        [PinKind::TempTable, PinKind::AdvisoryLock, PinKind::Cursor, PinKind::Listen, PinKind::UserVariable].map(pin),
    );
    all.push(pipeline_errors());
    all.push(lost_unpinned());
    all.extend([PinKind::TempTable, PinKind::AdvisoryLock, PinKind::UserVariable].map(lost_pinned));
    all.extend([lost_session_mode(false), lost_session_mode(true)]);
    all
}

/// `read_your_writes = "3s"` (long enough for the reads inside it on a loaded machine): after a
/// write on any route, the session's reads on every route go
/// to the primary for the window, another session's to the replica, and after the window the
/// writer's reads are the replica's again.
fn ryw_window() -> Scenario {
    let mut steps = Vec::new();
    for (i, route) in ROUTES.iter().enumerate() {
        let id = i as u32 + 1;
        steps.push(ok(0, *route, Sql::Insert(id)));
        steps.extend(ROUTES.iter().map(|r| count(0, *r, id, Some(true), Primary)));
        steps.push(count(1, *route, id, None, Replica));
    }
    steps.extend([Step::Wait(Duration::from_millis(3500)), Step::CaughtUp]);
    steps.extend(ROUTES.iter().map(|r| count(0, *r, 1, Some(true), Replica)));
    Scenario { name: "ryw_window".into(), setup: setup(TRANSACTION, "3s", false), known: None, steps }
}

/// A token statement (`SHOW`/`SET querypilot.causal_token`) on `route`: where the wire's router
/// refuses it there, the refusal is checked and the statement sent as text instead, so the rest
/// of the scenario still proves the position of a write made on `route`.
fn token_statement(c: usize, route: Route, sql: Sql) -> Vec<Step> {
    match route {
        Text => vec![ok(c, Text, sql)],
        Route::Extended | Route::Prepared => vec![
            only(Wire::Pg, "PostgreSQL's router answers token statements on every Parse (session/pg/token.rs)", ok(c, route, sql.clone())),
            only(
                Wire::My,
                "MySQL's router refuses COM_STMT_PREPARE of a token statement with 1235 and answers it only as text (session/mysql/causal.rs)",
                refused(c, route, sql.clone(), Class::TokenRoute),
            ),
            only(Wire::My, "the refused token statement, as text", ok(c, Text, sql)),
        ],
        Route::Multi => vec![refused(c, route, sql.clone(), Class::TokenRoute), ok(c, Text, sql)],
    }
}

/// `read_your_writes = "causal"` with the replica stopped: a write on `route` makes the writer's
/// reads on `route` go to the primary; its token, shown on one connection and set on another,
/// does the same there, while a connection without it reads the stale replica; once the replica
/// replayed the write both read it there.
fn causal_token(route: Route) -> Scenario {
    let mut steps = vec![Step::Pause, ok(0, route, Sql::Insert(1)), count(0, route, 1, Some(true), Primary)];
    steps.extend(token_statement(0, route, Sql::ShowToken));
    steps.push(count(1, route, 1, Some(false), Replica));
    steps.extend(token_statement(1, route, Sql::SetToken));
    steps.extend([count(1, route, 1, Some(true), Primary), Step::Resume]);
    steps.extend([count(0, route, 1, Some(true), Replica), count(1, route, 1, Some(true), Replica)]);
    Scenario { name: format!("causal_token_{route:?}"), setup: setup(TRANSACTION, "causal", false), known: None, steps }
}

/// A declared read-only transaction opened on `route` runs whole on the replica when the
/// session has nothing there to wait for, and whole on the primary right after the session's
/// own write while the replica is stopped; a read-write one runs on the primary; a write in a
/// read-only one is refused. The multi-statement route opens its transactions as text after
/// showing that one opened inside a multi-statement text runs on the primary on both wires (the
/// text runs there as a unit, and its transaction with it).
fn begin_read_only(route: Route) -> Scenario {
    let opener = if route == Route::Multi { Text } else { route };
    let ro = |c| ok(c, opener, Sql::Begin { read_only: true });
    let mut steps = Vec::new();
    if route == Route::Multi {
        let multi = ok(0, Route::Multi, Sql::Begin { read_only: true });
        steps.extend([multi, count(0, Text, 1, Some(false), Primary), ok(0, Text, Sql::Commit)]);
    }
    steps.extend([
        ro(0),
        count(0, route, 1, Some(false), Replica),
        count(0, Text, 1, Some(false), Replica),
        ok(0, Text, Sql::Commit),
        ok(0, opener, Sql::Begin { read_only: false }),
        count(0, route, 1, Some(false), Primary),
        ok(0, Text, Sql::Commit),
        ro(0),
        refused(0, route, Sql::Insert(1), Class::ReadOnlyTransaction),
        ok(0, Text, Sql::Rollback),
        Step::Pause,
        ok(0, route, Sql::Insert(2)),
        ro(0),
        count(0, route, 2, Some(true), Primary),
        ok(0, Text, Sql::Commit),
        ro(1),
        count(1, route, 2, Some(false), Replica),
        ok(1, Text, Sql::Commit),
        Step::Resume,
        ro(0),
        count(0, route, 2, Some(true), Replica),
        ok(0, Text, Sql::Commit),
    ]);
    Scenario {
        name: format!("begin_read_only_{route:?}"),
        setup: setup(TRANSACTION, "causal", false),
        known: None,
        steps,
    }
}

/// `SET TRANSACTION READ ONLY` in a declared read-only transaction that ran nothing yet is a
/// statement inside it on both wires, each as its server makes it: PostgreSQL's declares the
/// mode the transaction has, MySQL's is refused (1568) while the router still holds the start
/// back. Either way the transaction stays open and runs whole on the replica (#37).
fn set_transaction_in_read_only() -> Scenario {
    let set = Sql::SetTransactionReadOnly;
    let steps = vec![
        ok(0, Text, Sql::Begin { read_only: true }),
        only(Wire::Pg, "PostgreSQL's SET TRANSACTION sets the open transaction's mode", ok(0, Text, set.clone())),
        only(
            Wire::My,
            "MySQL's server refuses SET TRANSACTION inside a transaction (1568)",
            refused(0, Text, set, Class::InTransaction),
        ),
        count(0, Text, 1, Some(false), Replica),
        refused(0, Text, Sql::Insert(1), Class::ReadOnlyTransaction),
        ok(0, Text, Sql::Rollback),
        count(0, Text, 1, Some(false), Replica),
    ];
    Scenario {
        name: "set_transaction_in_read_only".into(),
        setup: setup(TRANSACTION, "causal", false),
        known: None,
        steps,
    }
}

/// With retry on (`enabled`): a serialization failure before any byte of the answer reached the
/// client is retried (it ran twice and the client sees success), on text and extended routes;
/// one after ~3 MB of rows were relayed is not (it ran once, the client sees the error), nor one
/// inside a transaction. With retry off, the first failure reaches the client.
fn retry(enabled: bool) -> Scenario {
    let victim = |counter, rows_first| Sql::Victim { counter, rows_first };
    let steps = if enabled {
        vec![
            ok(0, Text, victim(1, false)),
            Step::Runs { counter: 1, expect: 2 },
            ok(0, Route::Extended, victim(2, false)),
            Step::Runs { counter: 2, expect: 2 },
            run(0, Text, victim(3, true), Expect::Error { class: Class::Serialization, after_rows: true }),
            Step::Runs { counter: 3, expect: 1 },
            run(0, Route::Extended, victim(5, true), Expect::Error { class: Class::Serialization, after_rows: true }),
            Step::Runs { counter: 5, expect: 1 },
            ok(0, Text, Sql::Begin { read_only: false }),
            refused(0, Text, victim(4, false), Class::Serialization),
            ok(0, Text, Sql::Rollback),
            Step::Runs { counter: 4, expect: 1 },
            count(0, Text, 0, Some(false), Replica),
        ]
    } else {
        vec![refused(0, Text, victim(1, false), Class::Serialization), Step::Runs { counter: 1, expect: 1 }]
    };
    let name = if enabled { "retry_before_first_byte_only" } else { "retry_off" };
    Scenario { name: name.into(), setup: setup(TRANSACTION, "none", enabled), known: None, steps }
}

/// Statement pooling refuses what opens a transaction spanning statements, on every route but
/// the multi-statement text (see [`statement_pooling_trailing_begin`]) and as a block, before it
/// runs; the session goes on.
fn statement_pooling() -> Scenario {
    let routes = [Text, Route::Extended, Route::Prepared];
    let mut steps: Vec<Step> =
        routes.iter().map(|r| refused(0, *r, Sql::Begin { read_only: false }, Class::StatementPooling)).collect();
    steps.extend([
        refused(0, Text, Sql::Begin { read_only: true }, Class::StatementPooling),
        refused(0, Text, Sql::TxBlock(1), Class::StatementPooling),
        ok(0, Text, Sql::Insert(2)),
        Step::CaughtUp,
        count(0, Text, 1, Some(false), Replica),
        count(0, Text, 2, Some(true), Replica),
    ]);
    Scenario { name: "statement_pooling_refusals".into(), setup: setup("statement", "none", false), known: None, steps }
}

/// Statement pooling and a transaction opened by the last statement of a multi-statement text
/// (`SELECT 1; BEGIN`): refused like a leading BEGIN, so a later write and its ROLLBACK mean
/// what the client meant.
fn statement_pooling_trailing_begin() -> Scenario {
    let steps = vec![
        refused(0, Route::Multi, Sql::Begin { read_only: false }, Class::StatementPooling),
        ok(0, Text, Sql::Insert(1)),
        ok(0, Text, Sql::Rollback),
        Step::CaughtUp,
        count(0, Text, 1, Some(true), Replica),
    ];
    Scenario {
        name: "statement_pooling_trailing_begin".into(),
        setup: setup("statement", "none", false),
        known: None,
        steps,
    }
}

/// Why a pin kind has no equivalent on a wire, if it has none.
fn unmapped(kind: PinKind) -> Option<(Wire, &'static str)> {
    match kind {
        PinKind::Listen => Some((Wire::My, "MySQL has no LISTEN/NOTIFY")),
        PinKind::Cursor => Some((
            Wire::My,
            "the mysql crate never executes with a cursor (CURSOR_TYPE_READ_ONLY), and such a cursor holds \
             MySQL's replica connection instead of pinning the primary: covered with a raw client by \
             mysql_safety::an_open_cursor_on_the_replica_takes_no_write and \
             mysql_commands::cursors_fetch_in_chunks_and_hold_the_connection_while_open",
        )),
        PinKind::UserVariable => {
            Some((Wire::Pg, "PostgreSQL has no user variables; its custom settings are replayed, not pinned"))
        }
        PinKind::TempTable | PinKind::AdvisoryLock => None,
    }
}

/// State on the connection pins the session there (transaction pooling, no read-your-writes):
/// its reads run on the primary connection holding the state, which every route sees; another
/// session still reads the replica.
fn pin(kind: PinKind) -> Scenario {
    let mut steps = vec![ok(0, Text, Sql::PinOn(kind)), count(0, Text, 0, Some(false), Primary)];
    steps.extend(ROUTES.iter().map(|r| run(0, *r, Sql::PinHeld(kind), Expect::Value("1"))));
    steps.extend([count(1, Text, 0, Some(false), Replica), count(0, Route::Prepared, 0, Some(false), Primary)]);
    // Both routers keep a pinned session on its connection after the state is gone: neither
    // tracks the release (DROP, unlock, CLOSE, UNLISTEN), so the pin lasts for the session.
    steps.extend([ok(0, Text, Sql::PinOff(kind)), count(0, Text, 0, Some(false), Primary)]);
    if let Some((wire, why)) = unmapped(kind) {
        let other = if wire == Wire::Pg { Wire::My } else { Wire::Pg };
        steps = steps.into_iter().map(|s| only(other, why, s)).collect();
    }
    Scenario { name: format!("pin_{kind:?}"), setup: setup(TRANSACTION, "none", false), known: None, steps }
}

/// A statement failing in the middle of a pipeline (PostgreSQL: one Sync; MySQL: one
/// multi-statement text): the ones after it are skipped, a pipeline with a write runs whole on
/// the primary, and the session's placement afterwards is as before (reads on the replica).
fn pipeline_errors() -> Scenario {
    let skipped = |id| (Sql::Count(id), Expect::Skipped);
    let failed = (Sql::Missing, Expect::Error { class: Class::UndefinedTable, after_rows: false });
    let steps = vec![
        Step::Pipeline {
            c: 0,
            stmts: vec![(Sql::Count(1), Expect::Row { seen: Some(false), on: Replica }), failed.clone(), skipped(1)],
        },
        count(0, Text, 1, Some(false), Replica),
        Step::Pipeline {
            c: 0,
            stmts: vec![
                (Sql::Insert(2), Expect::Ok),
                (Sql::Count(2), Expect::Row { seen: Some(true), on: Primary }),
                failed,
                (Sql::Insert(3), Expect::Skipped),
            ],
        },
        count(0, Text, 0, Some(false), Replica),
        Step::CaughtUp,
        count(0, Text, 3, Some(false), Replica),
        only(
            Wire::Pg,
            "one Sync is one implicit transaction: the error rolls back the INSERT before it",
            count(0, Text, 2, Some(false), Replica),
        ),
        only(
            Wire::My,
            "each statement of a multi-statement text commits on its own (autocommit)",
            count(0, Text, 2, Some(true), Replica),
        ),
    ];
    Scenario { name: "pipeline_errors".into(), setup: setup(TRANSACTION, "none", false), known: None, steps }
}

/// A transaction-pooled session holding nothing on its connection loses it (killed on the
/// server, on either server): nothing of the client's is gone, so it goes on transparently, on
/// another connection (#18).
fn lost_unpinned() -> Scenario {
    let steps = vec![
        count(0, Text, 0, Some(false), Replica),
        Step::Kill { c: 0, on: Primary },
        ok(0, Text, Sql::Count(0)),
        Step::Kill { c: 0, on: Replica },
        ok(0, Text, Sql::Count(0)),
        ok(0, Text, Sql::Insert(1)),
        count(0, Text, 1, Some(true), Primary),
    ];
    Scenario { name: "lost_unpinned".into(), setup: setup(TRANSACTION, "3s", false), known: None, steps }
}

/// A session pinned by state on its connection loses the connection: the state (a temporary
/// table, a lock, user variables) is gone, and going on without it on a new connection would
/// change what the client's next statements mean, so the session ends with the error a killed
/// connection gets (#18, #37); other sessions are unaffected.
fn lost_pinned(kind: PinKind) -> Scenario {
    let mut steps = vec![
        ok(0, Text, Sql::PinOn(kind)),
        run(0, Text, Sql::PinHeld(kind), Expect::Value("1")),
        Step::Kill { c: 0, on: Primary },
        run(0, Text, Sql::Count(0), Expect::Ended),
        count(1, Text, 0, Some(false), Replica),
    ];
    if let Some((wire, why)) = unmapped(kind) {
        let other = if wire == Wire::Pg { Wire::My } else { Wire::Pg };
        steps = steps.into_iter().map(|s| only(other, why, s)).collect();
    }
    Scenario { name: format!("lost_pinned_{kind:?}"), setup: setup(TRANSACTION, "none", false), known: None, steps }
}

/// Session pooling: a session owns the server session of the pool it logged in to (the
/// primary), so losing that connection ends it (`home`); a replica connection it reached by
/// routing holds no server session of its own, so losing that one does not, and the session
/// goes on (#18, #35).
fn lost_session_mode(home: bool) -> Scenario {
    let mut steps = Vec::new();
    if home {
        let kill = Step::Kill { c: 0, on: Primary };
        steps.extend([ok(0, Text, Sql::Insert(1)), kill, run(0, Text, Sql::Count(1), Expect::Ended)]);
    } else {
        steps.extend([count(0, Text, 0, Some(false), Replica), Step::Kill { c: 0, on: Replica }]);
        steps.extend([ok(0, Text, Sql::Count(0)), ok(0, Text, Sql::Insert(1))]);
    }
    steps.push(ok(1, Text, Sql::Count(0)));
    let name = if home { "lost_session_mode_home" } else { "lost_session_mode_routed" };
    Scenario { name: name.into(), setup: setup("session", "30s", false), known: None, steps }
}
