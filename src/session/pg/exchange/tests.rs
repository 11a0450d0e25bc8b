//! Recorded frame sequences through the exchange, without sockets: the backend's messages are
//! built with the protocol's encoders (or as bare headers by their named tags) and fed one by
//! one; each test checks what the client would get and where the exchange ends up.

use super::*;
use crate::protocol::pg::{backend, decode_raw_frame, encode_error, frontend, ErrorFields, Severity};
use crate::session::error::RelayError;
use crate::session::pg::flight::Replay;
use crate::session::pg::prepared::server_name;
use crate::session::pg::retry::RetryBatch;

/// A message of type `tag` with `body`.
fn msg(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&u32::try_from(body.len() + 4).expect("small").to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn command_complete(tag: &str) -> Vec<u8> {
    msg(server::COMMAND_COMPLETE, format!("{tag}\0").as_bytes())
}

fn ready(status: u8) -> Vec<u8> {
    msg(server::READY_FOR_QUERY, &[status])
}

fn error(severity: Severity, code: &str, message: &str) -> Vec<u8> {
    let mut out = Vec::new();
    encode_error(severity, code, message, &mut out);
    out
}

fn row_description() -> Vec<u8> {
    let mut out = Vec::new();
    backend::encode_row_description(&[], &mut out).expect("encodes");
    out
}

fn data_row(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    backend::encode_data_row(&[Some(value)], &mut out).expect("encodes");
    out
}

/// Feeds one recorded backend message.
fn feed(ex: &mut Exchange, bytes: &[u8]) -> Step {
    let frame = decode_raw_frame(bytes, 1 << 20).expect("well-formed").expect("whole");
    assert_eq!(frame.bytes(), bytes, "the frame holds exactly its message");
    ex.on_backend(&frame, 50)
}

/// Feeds messages that must all reach the client unchanged.
fn forwards(ex: &mut Exchange, frames: &[Vec<u8>]) {
    for f in frames {
        let step = feed(ex, f);
        assert!(matches!(step.action, Action::Forward), "{:?} for {:?}", step.action, f.first().map(|t| *t as char));
    }
}

fn exchange(expects: &[Expect]) -> Exchange {
    let mut ex = Exchange { expect: expects.iter().copied().collect(), ..Exchange::default() };
    ex.sent();
    ex.begin_response();
    ex
}

#[test]
fn a_pipelined_extended_batch_swallows_injected_parses_and_answers_for_the_router() {
    // Client: Parse s1 (already on the backend: the router answers) / Bind / Describe portal /
    // Execute, then an unnamed Parse / Bind / Describe / Execute, and Sync. The router put a
    // Parse of its own (swallowed) in front of the first Bind.
    let mut ex = exchange(&[
        Expect::Synth(server::PARSE_COMPLETE),
        Expect::Parse { swallow: true, key: Some(7) },
        Expect::Bind,
        Expect::DescribePortal,
        Expect::Execute,
        Expect::Parse { swallow: false, key: None },
        Expect::Bind,
        Expect::DescribePortal,
        Expect::Execute,
        Expect::Sync,
    ]);
    let mut out = Vec::new();
    ex.emit_synth(&mut out);
    assert_eq!(out, msg(server::PARSE_COMPLETE, b""), "the router's own ParseComplete first");
    let injected = feed(&mut ex, &msg(server::PARSE_COMPLETE, b""));
    assert!(matches!(injected.action, Action::Swallow), "the router's Parse is not the client's");
    forwards(&mut ex, &[msg(server::BIND_COMPLETE, b""), row_description(), data_row(b"1")]);
    let done = feed(&mut ex, &command_complete("SELECT 1"));
    assert!(matches!((done.action, done.note), (Action::Forward, Note::CommandTag)));
    forwards(&mut ex, &[msg(server::PARSE_COMPLETE, b""), msg(server::BIND_COMPLETE, b""), row_description()]);
    forwards(&mut ex, &[data_row(b"2"), command_complete("SELECT 1")]);
    assert_eq!(ex.expect, [Expect::Sync], "every response before Sync matched");
    forwards(&mut ex, &[ready(tx_status::IDLE)]);
    assert_eq!(ex.ready(Some(tx_status::IDLE)), TransactionStatus::Idle);
    assert!(ex.expect.is_empty() && ex.phase == Phase::Idle && !ex.outcome().error);
}

#[test]
fn copy_from_stdin_and_copy_to_stdout_pass_through() {
    // COPY FROM STDIN (simple query): CopyInResponse goes to the client, which then streams
    // its data (pumped by the session); the server ends with CommandComplete.
    let mut ex = exchange(&[]);
    forwards(&mut ex, &[msg(server::COPY_IN_RESPONSE, &[0, 0, 1, 0, 0]), command_complete("COPY 2")]);
    forwards(&mut ex, &[ready(tx_status::IDLE)]);
    assert_eq!(ex.ready(Some(tx_status::IDLE)), TransactionStatus::Idle);
    // COPY TO STDOUT: the rows come as CopyData, unchanged.
    let mut ex = exchange(&[]);
    forwards(
        &mut ex,
        &[
            msg(server::COPY_OUT_RESPONSE, &[0, 0, 1, 0, 0]),
            msg(server::COPY_DATA, b"1\n"),
            msg(server::COPY_DATA, b"2\n"),
            msg(server::COPY_DONE, b""),
            command_complete("COPY 2"),
            ready(tx_status::IN_BLOCK),
        ],
    );
    assert_eq!(ex.ready(Some(tx_status::IN_BLOCK)), TransactionStatus::InBlock);
    assert!(!ex.awaiting());
}

#[test]
fn an_error_mid_pipeline_skips_to_sync_and_names_what_did_not_run() {
    let mut ex = exchange(&[
        Expect::Parse { swallow: false, key: None },
        Expect::Bind,
        Expect::Execute,
        Expect::Parse { swallow: false, key: Some(9) },
        Expect::Bind,
        Expect::Execute,
        Expect::Sync,
    ]);
    forwards(&mut ex, &[msg(server::PARSE_COMPLETE, b""), msg(server::BIND_COMPLETE, b"")]);
    let failed = feed(&mut ex, &error(Severity::Error, "22012", "division by zero"));
    assert!(matches!(failed.action, Action::MayRetry), "an ordinary error is relayed unless retried");
    assert_eq!(
        failed.skipped,
        [Expect::Execute, Expect::Parse { swallow: false, key: Some(9) }, Expect::Bind, Expect::Execute],
        "the failed Execute and everything after it up to Sync did not run"
    );
    assert_eq!(ex.expect, [Expect::Sync]);
    assert!(ex.outcome().error);
    forwards(&mut ex, &[ready(tx_status::IDLE)]);
    assert_eq!(ex.ready(Some(tx_status::IDLE)), TransactionStatus::Idle);

    // The same error before the batch's Sync was sent (after a Flush): the batch is aborted,
    // the client's messages are skipped until its Sync, which the backend must then get.
    let mut ex = exchange(&[Expect::Bind, Expect::Execute]);
    let _ = feed(&mut ex, &error(Severity::Error, "22012", "division by zero"));
    ex.abort_before_sync();
    assert!(ex.aborted() && ex.awaiting() && !ex.refused());
    ex.synced();
    assert_eq!(ex.phase, Phase::Awaiting, "the Sync goes on to the backend");
}

#[test]
fn a_refused_statement_after_part_of_the_batch_went_out_is_stood_in_for() {
    let mut ex = exchange(&[Expect::Parse { swallow: false, key: None }]);
    ex.refuse();
    assert_eq!(ex.phase, Phase::RefusedMidBatch);
    ex.flight.aborting = true; // the Sync's stand-in Parse is on its way
    let stand_in = feed(&mut ex, &error(Severity::Error, "42601", "syntax error"));
    assert!(matches!(stand_in.action, Action::Swallow), "the client already has the router's error");
    assert!(ex.outcome().error);
    ex.settled();
    assert_eq!(ex.phase, Phase::Refused);
    ex.synced();
    assert_eq!(ex.phase, Phase::Idle);
}

#[test]
fn a_cancel_sent_at_query_timeout_is_reported_as_the_routers() {
    let mut ex = exchange(&[Expect::Execute, Expect::Sync]);
    ex.flight.timed_out = true;
    let canceled = feed(&mut ex, &error(Severity::Error, "57014", "canceling statement due to user request"));
    let Action::Replace(reply) = canceled.action else { panic!("{:?}", canceled.action) };
    assert_eq!(reply, PgClientError::new(sqlstate::QUERY_CANCELED, "canceling statement due to query_timeout (50 ms)"));
    // A cancel the client asked for itself is the server's to word.
    let mut ex = exchange(&[Expect::Execute, Expect::Sync]);
    let theirs = feed(&mut ex, &error(Severity::Error, "57014", "canceling statement due to user request"));
    assert!(matches!(theirs.action, Action::MayRetry));
}

#[test]
fn a_misnamed_router_statement_corrects_the_bookkeeping() {
    let key = 0x0123_4567_89ab_cdef;
    let name = server_name(key);
    let mut ex = exchange(&[Expect::Parse { swallow: true, key: Some(key) }, Expect::Bind, Expect::Sync]);
    let dup = feed(&mut ex, &error(Severity::Error, "42P05", &format!("prepared statement \"{name}\" already exists")));
    assert!(matches!(dup.note, Note::Misnamed { key: k, exists: true } if k == key));
    assert!(matches!(dup.action, Action::Forward), "the client sees the error once");
    assert_eq!(dup.skipped, [Expect::Parse { swallow: true, key: Some(key) }, Expect::Bind]);

    let mut ex = exchange(&[Expect::Bind, Expect::Sync]);
    let gone =
        feed(&mut ex, &error(Severity::Error, "26000", &format!("prepared statement \"{name}\" does not exist")));
    assert!(matches!(gone.note, Note::Misnamed { key: k, exists: false } if k == key));
}

fn stale_replay(expects: &[Expect]) -> Replay {
    Replay { stmt: Rc::new(Stmt::new("SELECT * FROM t", None, &[], 0)), bytes: Vec::new(), expects: expects.to_vec() }
}

#[test]
fn a_stale_plan_is_healed_once_and_the_batch_succeeds() {
    let batch = [Expect::Bind, Expect::DescribePortal, Expect::Execute, Expect::Sync];
    let mut ex = exchange(&batch);
    ex.flight.replay = Some(stale_replay(&batch));
    let stale = feed(&mut ex, &error(Severity::Error, "0A000", "cached plan must not change result type"));
    assert!(matches!((stale.action, stale.note), (Action::Swallow, Note::SchemaChanged)));
    assert!(ex.flight.healing.is_some() && ex.flight.replay.is_none());
    assert!(!ex.outcome().error, "healed: the client never sees the error");
    let rfq = feed(&mut ex, &ready(tx_status::IDLE));
    assert!(matches!(rfq.action, Action::Swallow), "the response goes on after the resend");
    // The session re-prepares and resends the replay: a new attempt, answered in full.
    let ReadyStep::Heal(replay) = ex.at_ready() else { panic!("the batch is healed at ReadyForQuery") };
    assert!(matches!(ex.at_ready(), ReadyStep::Settle), "once");
    ex.expect = replay.expects.iter().copied().collect();
    ex.begin_response();
    forwards(&mut ex, &[msg(server::BIND_COMPLETE, b""), row_description(), data_row(b"x")]);
    forwards(&mut ex, &[command_complete("SELECT 1"), ready(tx_status::IDLE)]);
    assert_eq!(ex.expect, [Expect::Sync]);
    // Healed once only: the same error on the resent batch reaches the client.
    let again = feed(&mut ex, &error(Severity::Error, "0A000", "cached plan must not change result type"));
    assert!(matches!(again.action, Action::MayRetry));
}

#[test]
fn a_parameter_description_waits_for_the_plan_to_prove_valid() {
    let batch = [Expect::DescribeStatement, Expect::Sync];
    let mut ex = exchange(&batch);
    ex.flight.replay = Some(stale_replay(&batch));
    let params = msg(server::PARAMETER_DESCRIPTION, &[0, 0]);
    assert!(matches!(feed(&mut ex, &params).action, Action::Hold));
    let rows = feed(&mut ex, &row_description());
    assert!(matches!(rows.action, Action::ReleaseThenForward(ref held) if *held == params));
    assert!(ex.flight.replay.is_none(), "no healing once the Describe passed");
}

#[test]
fn a_serialization_failure_is_held_then_the_retry_is_relayed() {
    let batch = [Expect::Synth(server::PARSE_COMPLETE), Expect::Bind, Expect::Execute, Expect::Sync];
    let mut ex = exchange(&batch);
    ex.emit_synth(&mut Vec::new());
    forwards(&mut ex, &[msg(server::BIND_COMPLETE, b"")]);
    let failure = error(Severity::Error, "40001", "could not serialize access");
    let step = feed(&mut ex, &failure);
    assert!(matches!(step.action, Action::MayRetry), "the session's retry decides");
    // The session's retry took it: the error and its ReadyForQuery are held back.
    ex.flight.retry = Some(Box::new(RetryBatch::holding(3, &failure)));
    assert!(ex.retry_pending());
    assert!(matches!(feed(&mut ex, &ready(tx_status::IDLE)).action, Action::Swallow));
    // The batch runs again and succeeds: its answers reach the client.
    ex.flight.retry = None;
    ex.expect = batch.iter().copied().collect();
    ex.begin_response();
    let mut out = Vec::new();
    ex.emit_synth(&mut out);
    assert_eq!(out, msg(server::PARSE_COMPLETE, b""));
    forwards(&mut ex, &[msg(server::BIND_COMPLETE, b""), command_complete("UPDATE 1"), ready(tx_status::IDLE)]);
    assert!(!ex.outcome().error);
}

#[test]
fn a_fatal_mid_response_ends_the_relay_with_its_cause() {
    let mut ex = exchange(&[Expect::Bind, Expect::Execute, Expect::Sync]);
    forwards(&mut ex, &[msg(server::BIND_COMPLETE, b""), row_description(), data_row(b"1")]);
    let said = error(Severity::Fatal, "57P01", "terminating connection due to administrator command");
    let fatal = feed(&mut ex, &said);
    assert!(matches!(fatal.action, Action::Fail));
    let gone = ex.flight.fatal.as_ref().expect("a cause");
    assert!(matches!(
        gone.cause,
        RelayError::BackendFatal { ref code, ref message }
            if code == "57P01" && message == "terminating connection due to administrator command"
    ));
    assert_eq!(gone.said.as_deref(), Some(&said[..]), "the server's own FATAL, whole, for a session that ends (#36)");
    assert_eq!(
        gone.cause.cause().as_deref(),
        Some("57P01: terminating connection due to administrator command"),
        "the client's 08006 names it as before"
    );
    ex.lost();
    assert!(ex.expect.is_empty() && ex.phase == Phase::Idle);
}

#[test]
fn phases_combine_only_as_the_flags_did() {
    let mut ex = Exchange::default();
    ex.refuse();
    assert_eq!((ex.refused(), ex.awaiting()), (true, false));
    ex.sent();
    assert_eq!(ex.phase, Phase::RefusedMidBatch);
    ex.abort_before_sync();
    assert_eq!(ex.phase, Phase::Aborted { refused: true });
    ex.lost();
    assert_eq!(ex.phase, Phase::Refused, "the refusal outlives the connection: the client still owes its Sync");
    ex.synced();
    assert_eq!(ex.phase, Phase::Idle);
}

#[test]
fn a_sync_ends_the_batch_where_it_stands() {
    let mut sync = Vec::new();
    frontend::encode_sync(&mut sync);
    let mut out = Vec::new();
    // A whole batch on a held connection: the Sync follows it, and a retry may keep it.
    let mut ex = Exchange::default();
    ex.bout.extend_from_slice(b"queued");
    ex.expect.push_back(Expect::Execute);
    assert_eq!(ex.on_sync(&sync, true, &mut out), SyncStep::Send { retry: true });
    assert_eq!((ex.bout.strip_suffix(sync.as_slice()), ex.expect.back()), (Some(&b"queued"[..]), Some(&Expect::Sync)));
    // Nothing reached a backend: the router answers, its synthesized replies first.
    let mut ex = Exchange::default();
    ex.expect.push_back(Expect::Synth(server::PARSE_COMPLETE));
    assert_eq!(ex.on_sync(&sync, false, &mut out), SyncStep::AnswerHere);
    assert_eq!(out, msg(server::PARSE_COMPLETE, b""));
    // Refused before anything went out: the client has its error, the Sync only its answer.
    out.clear();
    let mut ex = Exchange::default();
    ex.expect.push_back(Expect::Synth(server::PARSE_COMPLETE));
    ex.refuse_batch();
    assert_eq!(ex.on_sync(&sync, true, &mut out), SyncStep::AnswerHere);
    assert!(out.is_empty() && ex.expect.is_empty() && ex.phase == Phase::Idle);
    // Refused after part of the batch went out: a stand-in error makes the backend abort it.
    let mut ex = exchange(&[Expect::Bind]);
    ex.refuse_batch();
    assert_eq!(ex.phase, Phase::RefusedMidBatch);
    assert_eq!(ex.on_sync(&sync, true, &mut out), SyncStep::Send { retry: false });
    assert!(ex.flight.aborting && String::from_utf8_lossy(&ex.bout).contains(ABORT_SQL));
    assert_eq!((ex.expect.iter().copied().collect::<Vec<_>>(), ex.phase), (vec![Expect::Sync], Phase::Awaiting));
    // Aborted by the backend before its Sync: the Sync alone goes, to end it there.
    let mut ex = exchange(&[Expect::Bind, Expect::Execute]);
    ex.abort_before_sync();
    assert_eq!(ex.on_sync(&sync, true, &mut out), SyncStep::Send { retry: false });
    assert_eq!((ex.bout.as_slice(), ex.flight.aborting), (sync.as_slice(), false));
}

#[test]
fn what_a_backend_says_unprompted_is_relayed_or_ends_it() {
    let mut ex = Exchange::default();
    let notify = msg(server::NOTIFICATION_RESPONSE, b"\0\0\0\x07chan\0payload\0");
    let status = msg(server::PARAMETER_STATUS, b"TimeZone\0UTC\0");
    let mut notice = Vec::new();
    ErrorFields::new(Severity::Notice, "01000", "note").encode_notice(&mut notice).expect("encodes");
    assert_eq!(notice.first(), Some(&server::NOTICE_RESPONSE));
    for relayed in [notify, status, notice] {
        let frame = decode_raw_frame(&relayed, 1 << 20).expect("well-formed").expect("whole");
        assert!(matches!(ex.on_unprompted(&frame), Unprompted::Relay));
    }
    assert!(ex.flight.fatal.is_none());
    let fatal = error(Severity::Fatal, "57P01", "terminating connection due to administrator command");
    let frame = decode_raw_frame(&fatal, 1 << 20).expect("well-formed").expect("whole");
    assert!(matches!(ex.on_unprompted(&frame), Unprompted::Lost(_)));
    let gone = ex.flight.fatal.as_ref().expect("a cause");
    assert!(matches!(gone.cause, RelayError::BackendFatal { ref code, .. } if code == "57P01"));
    assert_eq!(gone.said.as_deref(), Some(&fatal[..]));
    let stray = ready(tx_status::IDLE);
    let frame = decode_raw_frame(&stray, 1 << 20).expect("well-formed").expect("whole");
    let lost = ex.on_unprompted(&frame);
    assert!(
        matches!(lost, Unprompted::Lost(RelayError::OutOfStep { tag }) if tag == server::READY_FOR_QUERY),
        "an answer nobody asked for: out of step, {lost:?}"
    );
}

#[test]
fn a_frame_after_a_held_parameter_description_does_not_overtake_it() {
    // Found by the `pg_exchange` fuzz target (#37): a notice between the held
    // ParameterDescription and its RowDescription reached the client first.
    let batch = [Expect::DescribeStatement, Expect::Sync];
    let mut ex = exchange(&batch);
    ex.flight.replay = Some(stale_replay(&batch));
    let params = msg(server::PARAMETER_DESCRIPTION, &[0, 0]);
    assert!(matches!(feed(&mut ex, &params).action, Action::Hold));
    let notice = msg(server::NOTICE_RESPONSE, b"SNOTICE\0\0");
    let step = feed(&mut ex, &notice);
    assert!(matches!(step.action, Action::ReleaseThenForward(ref held) if *held == params), "{:?}", step.action);
    assert!(ex.flight.replay.is_none(), "the client saw the description: no healing");
    assert!(matches!(feed(&mut ex, &row_description()).action, Action::Forward));
}

#[test]
fn the_transaction_probe_runs_ahead_of_the_sync_and_the_client_sees_none_of_it() {
    let mut ex = Exchange::default();
    let mut batch = Vec::new();
    frontend::encode_bind("", "s1", &[], &[], &[], &mut batch).expect("bind");
    frontend::encode_execute("", 0, &mut batch).expect("execute");
    ex.forward_all(&batch, &[Expect::Bind, Expect::Execute]);
    let probe = [Expect::Parse { swallow: true, key: None }, Expect::Swallow(server::BIND_COMPLETE), Expect::XactProbe];
    assert!(!ex.probe_before_sync(b"probe", &probe), "no Sync queued: nothing to go ahead of");
    let mut sync = Vec::new();
    frontend::encode_sync(&mut sync);
    ex.forward(&sync, Expect::Sync);
    assert!(ex.probe_before_sync(b"probe", &probe));
    assert_eq!(ex.queued(), [batch, b"probe".to_vec(), sync].concat(), "the probe goes right before the Sync");
    ex.sent();
    ex.begin_response();
    let bind_complete = msg(server::BIND_COMPLETE, &[]);
    forwards(&mut ex, &[bind_complete.clone(), data_row(b"7"), command_complete("SELECT 1")]);
    assert!(matches!(feed(&mut ex, &msg(server::PARSE_COMPLETE, &[])).action, Action::Swallow));
    assert!(matches!(feed(&mut ex, &bind_complete).action, Action::Swallow));
    let row = feed(&mut ex, &data_row(b"t"));
    assert!(matches!((row.action, row.note), (Action::Swallow, Note::XactProbe)), "the probe's row is noted");
    assert!(matches!(feed(&mut ex, &command_complete("SELECT 1")).action, Action::Swallow));
    assert_eq!(ex.expects().iter().copied().collect::<Vec<_>>(), [Expect::Sync]);
    // After an error the server skips the probe with the rest of the batch: so do the
    // expectations, and nothing of it is swallowed in place of the client's answers.
    let mut ex = exchange(&[Expect::Execute, Expect::Swallow(server::BIND_COMPLETE), Expect::XactProbe, Expect::Sync]);
    let failed = feed(&mut ex, &error(Severity::Error, "22012", "division by zero"));
    assert!(failed.skipped.contains(&Expect::XactProbe), "{:?}", failed.skipped);
    forwards(&mut ex, &[ready(tx_status::IDLE)]);
}
