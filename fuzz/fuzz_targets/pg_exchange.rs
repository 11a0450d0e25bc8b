//! The PostgreSQL session's exchange (`session::pg_exchange::Exchange`, #37) driven as the
//! session drives it (`session/pg/relay.rs`, `pipeline.rs`, `token.rs`): the client's messages
//! queue expectations, heal marks and the router's own answers, a Sync sends the batch (or is
//! answered here), and any sequence of backend frames comes back.
//!
//! Input: a list of operations, each an op byte and its data. Client side: queue a message's
//! expectation (Parse, Bind, Describe, Execute, Close, a synthesized answer), mark a healable
//! Bind/Describe, queue one of the router's answers, refuse the batch, Sync (attached or not),
//! Flush (the batch so far goes out, relayed until the queue is empty) and the query timeout
//! firing. Backend side: one frame from a menu of the kinds the exchange treats apart
//! (ParameterDescription, RowDescription, CommandComplete tags, stale-plan / canceled /
//! misnamed / FATAL errors, ReadyForQuery with each status, asynchronous messages) or any tag
//! with any body.
//!
//! "In order" is the exchange's contract, checked as properties after every frame:
//! - no panic;
//! - the backend frames the client gets (forwarded, or released from hold before a later
//!   frame) are a subsequence of the frames that arrived, in arrival order, each at most once;
//!   a released hold is exactly the frames held, in order; a hold is dropped only by healing
//!   (the batch runs again) or by an error the router words itself;
//! - ReadyForQuery ends the response: it is never held or replaced, it is swallowed only
//!   while a stale plan is healed (the batch goes out again), and when it goes to the client
//!   nothing of the response is still held and the exchange awaits nothing more (later
//!   frames are unprompted);
//! - the router's own answers reach the client in the order they were queued, each at most
//!   once, and none after the ReadyForQuery that ended their batch;
//! - after a FATAL (`Fail`) nothing more is relayed: the connection is lost.
#![no_main]

use std::rc::Rc;

use libfuzzer_sys::fuzz_target;
use querypilot::protocol::pg::decode_raw_frame;
use querypilot::protocol::pg::tag::{backend as server, frontend as client, tx_status};
use querypilot::session::pg_exchange::{Action, Exchange, ReadyStep, SyncStep, Unprompted};
use querypilot::session::{Expect, Stmt};

/// The statement a heal mark names (the fuzzer does not need a real one).
fn stmt(key: u64) -> Rc<Stmt> {
    let mut stmt = Stmt::new("SELECT 1", None, &[], 0);
    stmt.key = key;
    stmt.server_name = format!("qp_{key:016x}");
    stmt.parse_msg.clear();
    Rc::new(stmt)
}

fn frame(tag: u8, body: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    out.extend_from_slice(&u32::try_from(body.len() + 4).unwrap_or(u32::MAX).to_be_bytes());
    out.extend_from_slice(body);
    out
}

fn error(severity: &str, code: &str, message: &str) -> Vec<u8> {
    let mut body = Vec::new();
    for (f, v) in [(b'S', severity), (b'V', severity), (b'C', code), (b'M', message)] {
        body.push(f);
        body.extend_from_slice(v.as_bytes());
        body.push(0);
    }
    body.push(0);
    frame(server::ERROR_RESPONSE, &body)
}

/// The backend frame op byte `sel` (and `data` after it) picks; returns it and what it used.
fn backend_frame(sel: u8, data: &[u8]) -> (Vec<u8>, usize) {
    let arg = data.first().copied().unwrap_or(0);
    let f = match sel % 24 {
        0 => frame(server::PARSE_COMPLETE, b""),
        1 => frame(server::BIND_COMPLETE, b""),
        2 => frame(server::CLOSE_COMPLETE, b""),
        3 => frame(server::PARAMETER_DESCRIPTION, &[0, 1, 0, 0, 0, 23]),
        4 => frame(server::ROW_DESCRIPTION, &[0, 0]),
        5 => frame(server::NO_DATA, b""),
        6 => frame(server::DATA_ROW, &[0, 1, 0, 0, 0, 1, arg]),
        7 => frame(server::COMMAND_COMPLETE, b"COMMIT\0"),
        8 => frame(server::COMMAND_COMPLETE, b"ROLLBACK\0"),
        9 => frame(server::COMMAND_COMPLETE, b"SELECT 1\0"),
        10 => frame(server::EMPTY_QUERY_RESPONSE, b""),
        11 => frame(server::PORTAL_SUSPENDED, b""),
        12 => error("ERROR", "0A000", "cached plan must not change result type"),
        13 => error("ERROR", "57014", "canceling statement due to user request"),
        14 => error("ERROR", "26000", &format!("prepared statement \"qp_{:016x}\" does not exist", arg % 4)),
        15 => error("ERROR", "42P05", &format!("prepared statement \"qp_{:016x}\" already exists", arg % 4)),
        16 => error("FATAL", "57P01", "terminating connection due to administrator command"),
        17 => error("ERROR", "40001", "could not serialize access"),
        18 => frame(
            server::READY_FOR_QUERY,
            &[[tx_status::IDLE, tx_status::IN_BLOCK, tx_status::FAILED][usize::from(arg % 3)]],
        ),
        19 => frame(server::NOTICE_RESPONSE, b"SNOTICE\0\0"),
        20 => frame(server::PARAMETER_STATUS, b"TimeZone\0UTC\0"),
        21 => frame(server::NOTIFICATION_RESPONSE, &[0, 0, 0, 7, b'c', 0, 0]),
        // Any tag, any body.
        _ => {
            let len = usize::from(data.get(1).copied().unwrap_or(0) % 16).min(data.len().saturating_sub(2));
            return (frame(arg, data.get(2..2 + len).unwrap_or_default()), 2 + len);
        }
    };
    let used = usize::from(matches!(sel % 24, 6 | 14 | 15 | 18));
    (f, used)
}

/// What the client has been sent, as the property checks see it.
#[derive(Default)]
struct Client {
    /// Index of the last backend frame the client got.
    last_frame: Option<usize>,
    /// Number of the last router answer the client got.
    last_answer: Option<u16>,
    /// Backend frames held by the exchange, with their bytes, in arrival order.
    held: Vec<(usize, Vec<u8>)>,
}

impl Client {
    fn gets_frame(&mut self, index: usize) {
        assert!(
            self.last_frame.is_none_or(|last| index > last),
            "frame {index} reached the client after {:?}",
            self.last_frame
        );
        self.last_frame = Some(index);
    }

    /// Held frames released in `bytes`, which must be exactly the frames held, in order.
    fn release(&mut self, bytes: &[u8]) {
        let held: Vec<u8> = self.held.iter().flat_map(|(_, b)| b.iter().copied()).collect();
        assert_eq!(bytes, &held[..], "released bytes are not the frames held");
        for (i, _) in std::mem::take(&mut self.held) {
            self.gets_frame(i);
        }
    }

    /// Synthesized responses written to the client: each answer is a ParameterStatus `qp` n.
    fn gets_synth(&mut self, mut out: &[u8]) {
        while let Ok(Some(f)) = decode_raw_frame(out, 1 << 20) {
            if let Some(&[hi, lo, ..]) = f.body().strip_prefix(b"qp\0") {
                let n = u16::from_be_bytes([hi, lo]);
                assert!(self.last_answer.is_none_or(|last| n > last), "answer {n} after answer {:?}", self.last_answer);
                self.last_answer = Some(n);
            }
            out = out.get(f.len()..).unwrap_or_default();
        }
    }
}

struct Driver {
    ex: Exchange,
    client: Client,
    frames: usize,
    answers: u16,
    /// The batch went out up to a Flush: an error before its Sync aborts it.
    flushed_only: bool,
    /// The connection is lost.
    gone: bool,
}

impl Driver {
    fn queue(&mut self, sel: u8) {
        let key = (sel & 0x40 != 0).then_some(u64::from(sel >> 4 & 3));
        let e = match sel % 8 {
            0 => Expect::Parse { swallow: sel & 0x08 != 0, key },
            1 => Expect::Bind,
            2 => Expect::DescribeStatement,
            3 => Expect::DescribePortal,
            4 => Expect::Execute,
            5 => Expect::Close { swallow: sel & 0x08 != 0, key },
            6 => Expect::Synth(server::PARSE_COMPLETE),
            _ => Expect::Synth(server::CLOSE_COMPLETE),
        };
        if e == Expect::DescribeStatement {
            self.ex.describing((sel & 0x08 != 0).then(|| stmt(1)));
        }
        if let (Expect::Parse { swallow: false, key: Some(k) }, false) = (e, self.ex.refused()) {
            self.ex.parsing(&format!("s{k}"), stmt(k));
        }
        match e {
            Expect::Synth(tag) => self.ex.answer_here(tag),
            e => self.ex.forward(&frame(client::BIND, &[sel]), e),
        }
    }

    /// Relays one backend frame as `relay.rs` does.
    fn backend(&mut self, bytes: &[u8]) {
        let index = self.frames;
        self.frames += 1;
        let Ok(Some(f)) = decode_raw_frame(bytes, 1 << 20) else { return };
        if !self.ex.awaiting() {
            if matches!(self.ex.on_unprompted(&f), Unprompted::Relay) {
                self.client.gets_frame(index);
            } else {
                self.gone = true;
            }
            return;
        }
        let mut synth = Vec::new();
        self.ex.emit_synth(&mut synth);
        self.client.gets_synth(&synth);
        let healing = self.ex.healing();
        let step = self.ex.on_backend(&f, 1000);
        let ready = f.tag() == server::READY_FOR_QUERY;
        match step.action {
            Action::Forward => self.client.gets_frame(index),
            Action::ReleaseThenForward(held) => {
                self.client.release(&held);
                self.client.gets_frame(index);
            }
            Action::Hold => {
                assert!(!ready, "ReadyForQuery held");
                self.client.held.push((index, bytes.to_vec()));
                let held: usize = self.client.held.iter().map(|(_, b)| b.len()).sum();
                assert_eq!(self.ex.held().len(), held, "the hold is not the frames held");
            }
            Action::Swallow => assert!(!ready || healing, "ReadyForQuery swallowed with nothing to heal"),
            Action::Replace(_) => {
                assert!(!ready, "ReadyForQuery replaced");
                // The router words the error itself: a held description is dropped, not reordered.
                assert!(self.ex.held().is_empty(), "a hold outlived the router's error");
                self.client.held.clear();
            }
            // No retry policy here: the error goes out after what is held (relay.rs).
            Action::MayRetry => {
                let held = self.ex.take_held();
                self.client.release(&held);
                self.client.gets_frame(index);
            }
            Action::Fail => {
                assert!(!ready, "ReadyForQuery failed the connection");
                self.ex.lost();
                self.ex.response_done();
                self.gone = true;
                return;
            }
        }
        if self.ex.held().is_empty() && !self.client.held.is_empty() {
            // Healing a stale plan drops the hold: the batch runs again and describes anew.
            assert!(self.ex.healing(), "held frames dropped without healing");
            self.client.held.clear();
        }
        if ready {
            self.at_ready(f.body().first().copied());
        } else if f.tag() == server::ERROR_RESPONSE && self.flushed_only {
            self.ex.abort_before_sync();
            self.flushed_only = false;
        }
    }

    fn at_ready(&mut self, status: Option<u8>) {
        if let ReadyStep::Heal(replay) = self.ex.at_ready() {
            self.ex.start_over();
            self.ex.forward_all(&replay.bytes, &replay.expects);
            self.ex.begin_response();
            return;
        }
        assert!(self.client.held.is_empty(), "the response ended with frames still held");
        self.ex.response_done();
        self.ex.ready(status);
        assert!(!self.ex.awaiting(), "still awaiting after ReadyForQuery");
        assert!(!self.ex.expects().iter().any(|e| matches!(e, Expect::Synth(_))), "an answer outlived its batch");
        self.flushed_only = false;
    }

    /// The client's Sync; `probe`: the causal probe goes ahead of it when the batch is sent,
    /// as `xact.rs` puts it there (#34).
    fn sync(&mut self, attached: bool, probe: bool) {
        let mut out = Vec::new();
        let step = self.ex.on_sync(&frame(client::SYNC, b""), attached, &mut out);
        self.client.gets_synth(&out);
        match step {
            SyncStep::Send { .. } => {
                if probe {
                    let expects = [
                        Expect::Parse { swallow: true, key: None },
                        Expect::Swallow(server::BIND_COMPLETE),
                        Expect::XactProbe,
                    ];
                    self.ex.probe_before_sync(&frame(client::BIND, b"probe"), &expects);
                }
                self.ex.sent()
            }
            SyncStep::AnswerHere => {}
        }
        self.flushed_only = false;
        self.ex.begin_response();
    }
}

fuzz_target!(|data: &[u8]| {
    let mut d = Driver {
        ex: Exchange::default(),
        client: Client::default(),
        frames: 0,
        answers: 0,
        flushed_only: false,
        gone: false,
    };
    let mut rest = data;
    while let [op, tail @ ..] = rest {
        rest = tail;
        let arg = rest.first().copied().unwrap_or(0);
        match op % 16 {
            0..=2 => {
                d.queue(arg);
                rest = rest.get(1..).unwrap_or_default();
            }
            3 => {
                let bind = arg & 1 != 0;
                d.ex.mark_healable(&stmt(2), bind, true);
                rest = rest.get(1..).unwrap_or_default();
            }
            4 => {
                d.answers += 1; // at most one per input byte: no overflow
                let [hi, lo] = d.answers.to_be_bytes();
                let body = [b'q', b'p', 0, hi, lo, 0];
                d.ex.answer(frame(server::PARAMETER_STATUS, &body));
            }
            5 => {
                let mut out = Vec::new();
                d.ex.emit_synth(&mut out);
                d.client.gets_synth(&out);
                d.ex.refuse_batch();
            }
            6 => {
                d.sync(arg & 1 == 0, arg & 2 != 0);
                rest = rest.get(1..).unwrap_or_default();
            }
            // Flush: what is queued goes out and is relayed until nothing more is expected.
            7 => {
                if !d.ex.queued().is_empty() && !d.ex.refused() {
                    d.ex.written();
                    d.ex.sent();
                    d.flushed_only = true;
                }
            }
            8 => d.ex.cancel_sent(),
            _ => {
                let (bytes, used) = backend_frame(*op >> 4 | (op & 0x0F) << 4, rest);
                rest = rest.get(used..).unwrap_or_default();
                d.backend(&bytes);
            }
        }
        if d.gone {
            return;
        }
    }
});
