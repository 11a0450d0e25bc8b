//! `engine::ryw`, table by table: each row a distinction a wire relies on.

use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::config::{Protocol, ReadYourWrites};
use crate::session::engine::tests::{route_context, router};
use crate::sql::mode::SessionModes;

#[test]
fn a_read_falls_back_to_the_primary_only_when_configured_and_there_is_one() {
    let rows = [
        (ReplicaFallback::Primary, Some("w"), Some("w")),
        (ReplicaFallback::Primary, None, None),
        (ReplicaFallback::Error, Some("w"), None),
        (ReplicaFallback::Error, None, None),
    ];
    for (mode, primary, want) in rows {
        assert_eq!(fallback(mode, primary), want, "{mode:?} {primary:?}");
    }
}

/// A causal session that ran `statements` in order on the primary (all unproven when `blind`).
fn session(statements: &[&str], blind: bool) -> RywState {
    let mut ryw = RywState::new(ReadYourWrites::Causal);
    let (pool, lex): (Arc<str>, _) = ("w".into(), SessionModes::default());
    for sql in statements {
        let input_ryw = ryw.clone();
        let input =
            route_context(Protocol::MySql, &pool, &input_ryw, &lex).input(sql, None, true, false, Instant::now());
        let decision = router().explain(&input).decision;
        if blind {
            ryw.observe_unproven();
        }
        ryw.observe(&decision, Instant::now());
    }
    ryw
}

#[test]
fn only_the_commit_of_an_unproven_open_transaction_with_replica_reads_is_probed() {
    let rows: [(&[&str], bool, bool, bool, bool); 7] = [
        // statements, unproven, in_block, replica_reads => probe
        (&["BEGIN", "SELECT a FROM t", "COMMIT"], true, true, true, true),
        (&["BEGIN", "SELECT a FROM t", "COMMIT"], true, false, true, false),
        (&["BEGIN", "SELECT a FROM t", "COMMIT"], true, true, false, false),
        // A write the analysis saw learns a position without asking.
        (&["BEGIN", "UPDATE t SET a = 1", "COMMIT"], true, true, true, false),
        // Proven (read-only) transactions leave nothing to learn.
        (&["BEGIN", "SELECT a FROM t", "COMMIT"], false, true, true, false),
        // No COMMIT yet: nothing is about to commit.
        (&["BEGIN", "SELECT a FROM t"], true, true, true, false),
        (&[], true, true, true, false),
    ];
    for (statements, blind, in_block, replica_reads, want) in rows {
        let ryw = session(statements, blind);
        assert_eq!(
            probes_commit(&ryw, in_block, replica_reads),
            want,
            "{statements:?} {blind} {in_block} {replica_reads}"
        );
    }
}

/// A session in `mode` whose position is the GTID domains `0..domains` (none when 0).
fn at_domains(mode: ReadYourWrites, domains: usize) -> RywState {
    let mut ryw = RywState::new(mode);
    if domains > 0 {
        let token = (0..domains).map(|d| format!("{d}-1-5")).collect::<Vec<_>>().join(",");
        set_token(&mut ryw, &format!("gtid:{token}")).unwrap();
    }
    ryw
}

#[test]
fn a_token_is_adopted_only_when_valid_within_limits_and_causal() {
    use crate::id::position::MAX_GTID_DOMAINS as MAX;
    let too_long = format!("pg:{}", "0".repeat(3000));
    let many = format!("gtid:{}", (0..MAX).map(|d| format!("{d}-1-5")).collect::<Vec<_>>().join(","));
    type Row<'a> = (ReadYourWrites, usize, &'a str, Result<&'a str, ()>);
    let rows: [Row; 14] = [
        // mode, domains held, token => what SHOW answers after, or an error
        (ReadYourWrites::Causal, 0, "pg:16/B374D848", Ok("pg:16/B374D848")),
        (ReadYourWrites::Causal, 0, "gtid:0-1-100", Ok("gtid:0-1-100")),
        (ReadYourWrites::Causal, 0, "nonsense", Err(())),
        (ReadYourWrites::Causal, 0, &too_long, Err(())),
        // What SHOW answers for a session that needs no position is a no-op (#34).
        (ReadYourWrites::Causal, 0, "", Ok("")),
        (ReadYourWrites::Causal, 1, "", Ok("gtid:0-1-5")),
        // A lost position's token: the holder's reads go to the primary, whatever it held.
        (ReadYourWrites::Causal, 0, "primary", Ok("primary")),
        (ReadYourWrites::Causal, MAX, "primary", Ok("primary")),
        // One more domain than the session may hold is refused; a known one raises in place.
        (ReadYourWrites::Causal, MAX, "gtid:999-1-1", Err(())),
        (ReadYourWrites::Causal, 1, "gtid:0-1-9", Ok("gtid:0-1-9")),
        (ReadYourWrites::Causal, MAX, &many, Ok(&many)),
        // Outside causal mode a valid token is accepted and changes nothing.
        (ReadYourWrites::Session, 0, "pg:16/B374D848", Ok("")),
        (ReadYourWrites::Session, 0, "primary", Ok("")),
        (ReadYourWrites::Session, 0, "", Ok("")),
    ];
    for (mode, domains, token, want) in rows {
        let mut ryw = at_domains(mode, domains);
        let before = ryw.clone();
        let got = set_token(&mut ryw, token);
        match want {
            Ok(shown) => {
                assert!(got.is_ok(), "{mode:?} {token:.40}: {got:?}");
                assert_eq!(show_token(&ryw), shown, "{mode:?} {token:.40}");
                let now = Instant::now();
                assert_eq!(ryw.pinned(now), shown == "primary", "{mode:?} {token:.40}: reads on the primary");
            }
            Err(()) => {
                assert!(got.is_err(), "{mode:?} {token:.40}");
                assert_eq!(ryw, before, "{mode:?} {token:.40}: an invalid token changes nothing");
            }
        }
    }
}

/// The token SHOW answers after a session lost its position, set on another session: each
/// keeps its reads on the primary until a commit position of its own is learned, and the
/// adopter hands out `primary` in turn meanwhile (#34).
#[test]
fn a_lost_position_hands_out_the_primary_token_until_a_commit_position_is_learned() {
    use crate::id::Position;
    let now = Instant::now();
    let mut writer = RywState::new(ReadYourWrites::Causal);
    writer.learned(Some(Position::Wal(100)));
    assert_eq!(show_token(&writer), "pg:0/64");
    // A later commit's position could not be read: never hand out the older one, which a
    // replica may have replayed without that commit.
    writer.learned(None);
    assert_eq!((show_token(&writer), writer.pinned(now)), ("primary".to_owned(), true));
    let mut holder = RywState::new(ReadYourWrites::Causal);
    set_token(&mut holder, &show_token(&writer)).expect("every token SHOW answers is accepted");
    assert_eq!((show_token(&holder), holder.pinned(now)), ("primary".to_owned(), true));
    // Any position the holder learns while lost keeps it lost: only its own commit frees it.
    set_token(&mut holder, "pg:0/C8").expect("a position");
    assert_eq!((show_token(&holder), holder.pinned(now)), ("primary".to_owned(), true));
    holder.learned(Some(Position::Wal(300)));
    assert_eq!((show_token(&holder), holder.pinned(now)), ("pg:0/12C".to_owned(), false));
    writer.learned(Some(Position::Wal(250)));
    assert_eq!((show_token(&writer), writer.pinned(now)), ("pg:0/FA".to_owned(), false));
    // A session reset (DISCARD ALL, COM_RESET_CONNECTION) forgets it as everything else.
    holder.adopt_token(crate::id::Token::Primary);
    holder.reset();
    assert_eq!((show_token(&holder), holder.pinned(now)), (String::new(), false));
}

#[test]
fn lone_commits_are_recognized() {
    let lone = ["COMMIT", "commit;", "END", "END WORK;", "COMMIT WORK;", "COMMIT ;", "/* c */ COMMIT TRANSACTION"];
    for sql in lone {
        assert!(is_lone_commit(sql), "{sql}");
    }
    let not = ["COMMIT PREPARED 'x'", "COMMIT AND CHAIN", "COMMIT; SELECT 1", "COMMIT;;", "ROLLBACK", "SELECT 1", ""];
    for sql in not {
        assert!(!is_lone_commit(sql), "{sql}");
    }
}
