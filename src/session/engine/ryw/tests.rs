//! `engine::ryw`, table by table: each row a distinction a wire relies on.

use std::sync::Arc;
use std::time::Instant;

use super::*;
use crate::config::{Protocol, ReadYourWrites};
use crate::session::engine::tests::{router, seat};
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
        let input = seat(Protocol::MySql, &pool, &input_ryw, &lex).input(sql, None, true, false, Instant::now());
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
    type Row<'a> = (ReadYourWrites, usize, &'a str, Result<Option<&'a str>, ()>);
    let rows: [Row; 8] = [
        // mode, domains held, token => the session's position after, or an error
        (ReadYourWrites::Causal, 0, "pg:16/B374D848", Ok(Some("pg:16/B374D848"))),
        (ReadYourWrites::Causal, 0, "gtid:0-1-100", Ok(Some("gtid:0-1-100"))),
        (ReadYourWrites::Causal, 0, "nonsense", Err(())),
        (ReadYourWrites::Causal, 0, "", Err(())),
        (ReadYourWrites::Causal, 0, &too_long, Err(())),
        // One more domain than the session may hold is refused; a known one raises in place.
        (ReadYourWrites::Causal, MAX, "gtid:999-1-1", Err(())),
        (ReadYourWrites::Causal, 1, "gtid:0-1-9", Ok(Some("gtid:0-1-9"))),
        // Outside causal mode a valid token is accepted and changes nothing.
        (ReadYourWrites::Session, 0, "pg:16/B374D848", Ok(None)),
    ];
    for (mode, domains, token, want) in rows {
        let mut ryw = at_domains(mode, domains);
        let before = ryw.clone();
        let got = set_token(&mut ryw, token);
        let now = ryw.required_position().map(|p| p.to_string());
        match want {
            Ok(position) => {
                assert!(got.is_ok(), "{mode:?} {token}: {got:?}");
                assert_eq!(now.as_deref(), position, "{mode:?} {token}");
            }
            Err(()) => {
                assert!(got.is_err(), "{mode:?} {token}");
                assert_eq!(ryw, before, "{mode:?} {token}: an invalid token changes nothing");
            }
        }
    }
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
