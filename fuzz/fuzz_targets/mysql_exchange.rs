//! The MySQL session's response exchange (`session::mysql_exchange::Exchange`, #37) fed any
//! sequence of backend packets, long-packet headers and client file bytes, as the session
//! feeds it.
//!
//! Input: byte 0 picks the grammar (Query, LoadLocal, Execute, UntilEof, Single), whether
//! `CLIENT_DEPRECATE_EOF` was agreed and whether sequence ids are checked; byte 1 is the first
//! sequence id. The rest is a list of operations, each an op byte then its data: a backend
//! packet (sequence id, u8 length, payload), the header of a long packet (`on_large`), the
//! client's file bytes (`on_client_file`) or the client breaking off its file (`abandon`).
//!
//! Properties (the exchange's contract with the session), checked after every step:
//! - no panic;
//! - order: every packet accepted carries the sequence id after the one accepted before it
//!   (after the router's empty-file reply, the one after that reply; after a client file,
//!   the one after the file's last packet), so the client gets the server's packets in the
//!   server's order, none skipped;
//! - the end is last: once `done()` says the response is complete, no packet is accepted any
//!   more (an error, never an action that forwards); only a packet that ends a result, an
//!   ERR, or the answer to a refused file completes it;
//! - actions match the packet: `ForwardOk` is an OK packet (0x00, or 0xFE under
//!   `CLIENT_DEPRECATE_EOF`), `ForwardEnd` starts with 0xFE, `SendFile`/`RefuseFile` answer a
//!   LOCAL INFILE request (0xFB), and `SendFile` only for a `LoadLocal` statement;
//! - a retry is offered only before anything of the response reached the client;
//! - the client's file is taken in order: never more bytes than given, and only while the
//!   exchange streams a file.
#![no_main]

use libfuzzer_sys::fuzz_target;
use querypilot::protocol::mysql::Packet;
use querypilot::session::mysql_exchange::{Action, Exchange, Grammar};

const GRAMMARS: [Grammar; 5] =
    [Grammar::Query, Grammar::LoadLocal, Grammar::Execute, Grammar::UntilEof, Grammar::Single];
const OK: u8 = 0x00;
const EOF: u8 = 0xFE;
const ERR: u8 = 0xFF;
const INFILE: u8 = 0xFB;
/// The largest payload of one packet (16 MiB - 1); a packet that long continues in the next.
const MAX_PAYLOAD: usize = 0xFF_FFFF;

/// What the model expects of the next backend packet.
struct Model {
    grammar: Grammar,
    deprecate_eof: bool,
    /// Sequence id the next accepted packet carries (`None`: ids are not checked).
    next: Option<u8>,
    /// Something of the response reached the client.
    forwarded: bool,
    /// A client file streams (after `SendFile`, until the file's end or `abandon`).
    file: bool,
    /// A long packet continues in the next one.
    continued: bool,
}

impl Model {
    fn accept(&mut self, seq: u8) {
        if let Some(want) = self.next {
            assert_eq!(seq, want, "a packet out of sequence was accepted");
        }
        self.next = Some(seq.wrapping_add(1));
    }

    /// Checks the action the exchange took for a whole packet (`payload`, sequence id `seq`).
    fn check(&mut self, ex: &Exchange, action: Action, seq: u8, payload: &[u8]) {
        let was_continued = self.continued;
        self.continued = payload.len() == MAX_PAYLOAD;
        let first = payload.first().copied();
        match action {
            Action::ForwardOk if !was_continued => {
                assert!(first == Some(OK) || (first == Some(EOF) && self.deprecate_eof), "ForwardOk for {first:?}")
            }
            Action::ForwardEnd if !was_continued => assert_eq!(first, Some(EOF), "ForwardEnd for {first:?}"),
            Action::SendFile => {
                assert_eq!(first, Some(INFILE), "SendFile for {first:?}");
                assert_eq!(self.grammar, Grammar::LoadLocal, "a file sent for a statement not let through");
                assert!(!ex.file_done(), "SendFile but no file streams");
                self.file = true;
            }
            Action::RefuseFile { reply_seq } => {
                assert_eq!(first, Some(INFILE), "RefuseFile for {first:?}");
                assert_eq!(reply_seq, seq.wrapping_add(1), "the empty file takes the next sequence id");
                self.next = Some(reply_seq.wrapping_add(1));
            }
            Action::Refused { seq: request_seq, .. } => {
                assert_eq!(request_seq, seq.wrapping_sub(2), "the refusal answers the file request");
            }
            _ => {}
        }
        if ex.done() {
            let ends = matches!(action, Action::ForwardOk | Action::ForwardEnd | Action::Refused { .. })
                || first == Some(ERR)
                || self.grammar == Grammar::Single
                || matches!(action, Action::Forward if first == Some(EOF));
            assert!(ends, "{action:?} for {first:?} completed the response");
        }
        self.forwarded |= matches!(action, Action::Forward | Action::ForwardEnd | Action::ForwardOk | Action::SendFile);
    }
}

fuzz_target!(|data: &[u8]| {
    let [mode, seq0, tail @ ..] = data else { return };
    let mut rest: &[u8] = tail;
    let grammar = GRAMMARS[usize::from(mode % 5)];
    let deprecate_eof = mode & 0x08 != 0;
    let first_seq = (mode & 0x10 == 0).then_some(*seq0);
    let mut ex = Exchange::new(grammar, first_seq, deprecate_eof).limit_file_packets(64);
    let mut m = Model { grammar, deprecate_eof, next: first_seq, forwarded: false, file: false, continued: false };
    while let [op, tail @ ..] = rest {
        rest = tail;
        let done = ex.done();
        match op % 8 {
            // A client file's bytes: some or all are passed on to the server.
            0 | 1 => {
                let len = usize::from(rest.first().copied().unwrap_or(0)).min(rest.len().saturating_sub(1));
                let buf = rest.get(1..1 + len).unwrap_or_default();
                rest = rest.get(1 + len..).unwrap_or_default();
                let streaming = !ex.file_done();
                assert_eq!(streaming, m.file, "file streaming disagrees with the actions");
                match ex.on_client_file(buf) {
                    Ok(n) => {
                        assert!(n <= buf.len(), "took {n} of {} file bytes", buf.len());
                        assert!(streaming || n == 0, "file bytes taken while no file streams");
                        if streaming && ex.file_done() {
                            m.file = false;
                            m.next = ex.next_seq();
                        }
                    }
                    Err(_) => return, // the session ends the statement with an error
                }
            }
            // The client broke off its file: the response is over.
            2 => {
                if m.file {
                    ex.abandon();
                    assert!(ex.done() && ex.outcome().abandoned && ex.outcome().error);
                    m.file = false;
                }
            }
            // The header of a long packet passed on in pieces.
            3 => {
                let [seq, first, size, next @ ..] = rest else { return };
                rest = next;
                let len = match size % 3 {
                    0 => MAX_PAYLOAD,
                    1 => MAX_PAYLOAD - 1,
                    _ => 256 * 1024 + usize::from(*size),
                };
                let before = ex.outcome().rows;
                match ex.on_large(*seq, *first, len) {
                    Ok(Some(action)) => {
                        assert!(!done, "a long packet accepted after the response was complete");
                        assert_eq!(action, Action::Forward, "a long packet is only ever a row");
                        m.accept(*seq);
                        assert!(ex.outcome().rows >= before);
                        m.continued = len == MAX_PAYLOAD;
                        m.forwarded = true;
                    }
                    Ok(None) => return, // read whole by the session: too long for the fuzzer
                    Err(_) => return,   // the connection is out of step: the session drops it
                }
            }
            // A whole backend packet.
            _ => {
                let [seq, len, next @ ..] = rest else { return };
                let len = usize::from(*len).min(next.len());
                let (payload, next) = next.split_at(len);
                rest = next;
                let p = Packet { seq: *seq, payload };
                // The retry policy may resend only a failure that found nothing relayed.
                if ex.failure(&p).is_some_and(|f| !f.relayed) {
                    assert!(!m.forwarded, "a failure judged unrelayed after part of the response reached the client");
                }
                match ex.on_backend(&p) {
                    Ok(action) => {
                        assert!(!done, "{action:?} after the response was complete");
                        assert!(!m.file, "a backend packet accepted while the client's file streams");
                        m.accept(*seq);
                        m.check(&ex, action, *seq, payload);
                    }
                    Err(_) => return, // the session gives the connection up
                }
            }
        }
    }
});
