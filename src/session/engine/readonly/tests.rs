//! The read-only transaction rule, one table per case for both dialects.

use super::*;

/// A PostgreSQL session: the start goes to the server as the client wrote it.
const PG: Facts =
    Facts { tx: Tx::Idle, default_read_only: false, next_read_only: false, placeable: true, restates: false };
/// A MySQL session: the router answers the start and says it again later.
const MY: Facts = Facts { restates: true, ..PG };

fn pg(sql: &str, f: Facts) -> Step {
    step(&Text::pg(sql), || f)
}

fn my(sql: &str, f: Facts) -> Step {
    step(&Text::mysql(sql), || f)
}

const OPEN: Step = Step::Open { snapshot: false };

#[test]
fn a_declared_read_only_start_opens_a_read_only_transaction_on_both_wires() {
    for sql in [
        "START TRANSACTION READ ONLY",
        "/* app */ start transaction read only;",
        "START TRANSACTION READ WRITE, READ ONLY",
    ] {
        assert_eq!(pg(sql, PG), OPEN, "{sql}");
        assert_eq!(my(sql, MY), OPEN, "{sql}");
    }
    assert_eq!(pg("BEGIN READ ONLY", PG), OPEN);
    assert_eq!(pg("BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY", PG), OPEN, "the server takes it as written");
    let snapshot = "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY";
    assert_eq!(my(snapshot, MY), Step::Open { snapshot: true });
}

#[test]
fn read_write_or_undeclared_starts_pass_unless_the_session_defaults_to_read_only() {
    for sql in ["BEGIN", "START TRANSACTION", "START TRANSACTION READ WRITE", "START TRANSACTION READ ONLY, READ WRITE"]
    {
        assert_eq!(pg(sql, PG), Step::Pass, "{sql}");
        assert_eq!(my(sql, MY), Step::Pass, "{sql}");
    }
    let default = Facts { default_read_only: true, ..PG };
    for sql in ["BEGIN", "START TRANSACTION", "begin work"] {
        assert_eq!(pg(sql, default), OPEN, "{sql}");
        assert_eq!(my(sql, Facts { restates: true, ..default }), OPEN, "{sql}");
    }
    assert_eq!(pg("BEGIN READ WRITE", default), Step::Pass, "a declared mode wins over the default");
    assert_eq!(my("START TRANSACTION READ WRITE", Facts { restates: true, ..default }), Step::Pass);
}

#[test]
fn a_session_that_cannot_place_its_transaction_passes_every_start() {
    for (sql, f) in [
        ("BEGIN READ ONLY", Facts { placeable: false, ..PG }),
        ("START TRANSACTION READ ONLY", Facts { placeable: false, ..MY }),
        ("SET TRANSACTION READ ONLY", Facts { placeable: false, ..MY }),
        ("BEGIN", Facts { placeable: false, default_read_only: true, ..PG }),
    ] {
        let text = if f.restates { Text::mysql(sql) } else { Text::pg(sql) };
        assert_eq!(step(&text, || f), Step::Pass, "{sql}");
    }
}

#[test]
fn only_a_plain_start_is_restated() {
    for sql in ["START TRANSACTION READ ONLY; SELECT 1", "START TRANSACTION READ", "BEGIN NOT ATOMIC SELECT 1; END"] {
        assert_eq!(my(sql, MY), Step::Pass, "{sql}");
    }
    // The same reading as PostgreSQL's, where the server gets the client's text.
    assert_eq!(my("START TRANSACTION READ ONLY, ISOLATION", Facts { restates: false, ..MY }), OPEN);
}

#[test]
fn set_transaction_is_each_servers_own() {
    // Outside a transaction: nothing on PostgreSQL, the next transaction on MySQL.
    assert_eq!(pg("SET TRANSACTION READ ONLY", PG), Step::Pass);
    assert_eq!(my("SET TRANSACTION READ ONLY", MY), Step::Next);
    assert_eq!(my("SET TRANSACTION READ WRITE", MY), Step::Pass);
    assert_eq!(my("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", MY), Step::Pass);
    assert_eq!(my("SET SESSION TRANSACTION READ ONLY", MY), Step::Pass, "the session default is tracked state");
    // Inside one: PostgreSQL's declares the open transaction's mode, movable while it ran
    // nothing; MySQL's is refused (1568), by the router while it holds the start back.
    for (tx, fresh) in [(Tx::Fresh, true), (Tx::Open, false)] {
        let f = Facts { tx, ..PG };
        assert_eq!(pg("SET TRANSACTION READ ONLY", f), Step::Declare { access: AccessMode::ReadOnly, fresh });
        assert_eq!(pg("set transaction read write", f), Step::Declare { access: AccessMode::ReadWrite, fresh });
        assert_eq!(pg("SET TRANSACTION ISOLATION LEVEL SERIALIZABLE", f), Step::Pass);
    }
    for sql in ["SET TRANSACTION READ ONLY", "SET TRANSACTION READ WRITE"] {
        assert_eq!(my(sql, Facts { tx: Tx::Fresh, ..MY }), Step::Refuse, "{sql}");
        assert_eq!(my(sql, Facts { tx: Tx::Open, ..MY }), Step::Pass, "{sql}: the server refuses it");
    }
}

#[test]
fn a_start_inside_a_transaction_follows_each_server() {
    // PostgreSQL ignores it: the open transaction keeps its mode.
    for tx in [Tx::Fresh, Tx::Open] {
        assert_eq!(pg("BEGIN READ ONLY", Facts { tx, ..PG }), Step::Pass, "{tx:?}");
    }
    // MySQL commits the open one and starts another: a held-back start is replaced.
    let fresh = Facts { tx: Tx::Fresh, ..MY };
    assert_eq!(my("START TRANSACTION READ ONLY", fresh), OPEN);
    assert_eq!(my("START TRANSACTION", fresh), Step::Pass);
    assert_eq!(my("START TRANSACTION READ ONLY", Facts { tx: Tx::Open, ..MY }), Step::Pass, "the server's");
}

#[test]
fn a_pending_set_transaction_makes_the_next_start_read_only_and_a_commit_spends_it() {
    let next = Facts { next_read_only: true, ..MY };
    assert_eq!(my("START TRANSACTION", next), OPEN);
    assert_eq!(my("BEGIN", next), OPEN);
    assert_eq!(my("START TRANSACTION READ WRITE", next), Step::Pass, "a declared mode wins");
    assert_eq!(my("SET TRANSACTION READ ONLY", next), Step::Next);
    assert_eq!(my("COMMIT", next), Step::EndEmpty);
    assert_eq!(my("SELECT 1", next), Step::Pass, "an autocommit statement takes it with it");
}

#[test]
fn an_empty_transaction_ends_with_its_commit_or_rollback() {
    for sql in ["COMMIT", "commit work", "ROLLBACK"] {
        assert_eq!(my(sql, Facts { tx: Tx::Fresh, ..MY }), Step::EndEmpty, "{sql}");
        assert_eq!(pg(sql, Facts { tx: Tx::Fresh, ..PG }), Step::EndEmpty, "{sql}");
        assert_eq!(my(sql, MY), Step::Pass, "{sql}: nothing open");
        assert_eq!(pg(sql, Facts { tx: Tx::Open, ..PG }), Step::Pass, "{sql}: something ran");
    }
    assert_eq!(pg("END", Facts { tx: Tx::Fresh, ..PG }), Step::EndEmpty);
    for sql in ["COMMIT AND CHAIN", "ROLLBACK TO SAVEPOINT a"] {
        assert_eq!(my(sql, Facts { tx: Tx::Fresh, ..MY }), Step::Pass, "{sql}: the server's");
    }
}

#[test]
fn statements_inside_or_outside_pass() {
    for tx in [Tx::Idle, Tx::Fresh, Tx::Open] {
        for sql in ["SELECT 1", "INSERT INTO t VALUES (1)", "SELECT 'BEGIN READ ONLY'", ""] {
            assert_eq!(pg(sql, Facts { tx, ..PG }), Step::Pass, "{sql}");
            assert_eq!(my(sql, Facts { tx, ..MY }), Step::Pass, "{sql}");
        }
    }
}
