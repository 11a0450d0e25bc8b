//! Issue #33, hostile backends: a PostgreSQL backend that demands an enormous SCRAM iteration
//! count (PgBouncer CVE-2026-6669 class), sends oversized or malformed SCRAM messages
//! (CVE-2026-6665 class), offers no mechanism the router speaks, or says AuthenticationOk without
//! proving it knows the password. Real servers do not do this, so scripted fake backends built
//! from the router's own codecs do. Each fails the backend login at once with an error naming
//! the pool and the backend, the client gets it, and the healthy pool of the same one-core router
//! keeps serving.

// Blocking fake servers on their own threads, not data-plane code.
#![allow(clippy::disallowed_methods)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::{Duration, Instant};

use querypilot::protocol::pg::auth::{MAX_ITERATIONS, MAX_SERVER_MESSAGE};
use querypilot::protocol::pg::{decode_frame, decode_startup_frame, frontend, Authentication, BackendMessage};

use crate::pg_util::connect;
use crate::router::{pg_pool, Router};
use crate::support::dbs;

/// What the fake backend answers the router's SCRAM login with.
#[derive(Clone, Copy)]
enum Hostile {
    /// A server-first message with this iteration count.
    Iterations(u64),
    /// A server-first message whose salt is this many bytes of base64.
    LongSalt(usize),
    /// A server-first message that is not UTF-8.
    NotUtf8,
    /// A server-first message without its iteration count.
    NoCount,
    /// AuthenticationSASL offering only a mechanism the router does not speak.
    OnlyPlus,
    /// AuthenticationOk right after the client's proof, without the server signature.
    OkWithoutSignature,
    /// A server-final message longer than any server sends.
    LongFinal,
    /// An AuthenticationSASLContinue frame announcing 16 MiB.
    HugeFrame,
}

fn auth(a: Authentication<'_>, out: &mut Vec<u8>) {
    BackendMessage::Authentication(a).encode(out).expect("encode");
}

/// Reads one tagged frame's body; `None` when the router hung up.
fn read_frame(s: &mut TcpStream, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    loop {
        if let Ok(Some(f)) = decode_frame(buf, 1 << 20) {
            let (body, n) = (f.body.to_vec(), f.total_len);
            buf.drain(..n);
            return Some(body);
        }
        let mut chunk = [0u8; 4096];
        match s.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

/// Serves one connection of the router with the hostile script.
fn serve(mut s: TcpStream, hostile: Hostile) -> Option<()> {
    let mut buf = Vec::new();
    while !matches!(decode_startup_frame(&buf, 1 << 16), Ok(Some(_))) {
        let mut chunk = [0u8; 4096];
        let n = s.read(&mut chunk).ok().filter(|n| *n > 0)?;
        buf.extend_from_slice(&chunk[..n]);
    }
    buf.clear();
    let mut out = Vec::new();
    let mechanisms: &[u8] =
        if matches!(hostile, Hostile::OnlyPlus) { b"SCRAM-SHA-256-PLUS\0\0" } else { b"SCRAM-SHA-256\0\0" };
    out.extend_from_slice(&[b'R', 0, 0, 0, 0, 0, 0, 0, 10]);
    out.extend_from_slice(mechanisms);
    let len = (out.len() - 1) as u32;
    out[1..5].copy_from_slice(&len.to_be_bytes());
    s.write_all(&out).ok()?;
    let body = read_frame(&mut s, &mut buf)?;
    let (_, first) = frontend::decode_sasl_initial_response(&body).ok()?;
    let first = String::from_utf8(first?.to_vec()).ok()?;
    let nonce = format!("{}srv", first.rsplit_once("r=")?.1);
    let server_first = match hostile {
        Hostile::Iterations(n) => format!("r={nonce},s=c2FsdHNhbHQ=,i={n}").into_bytes(),
        Hostile::LongSalt(n) => format!("r={nonce},s={},i=4096", "QUFB".repeat(n / 4)).into_bytes(),
        Hostile::NotUtf8 => [format!("r={nonce},s=").as_bytes(), &[0xff, 0xfe], b",i=4096"].concat(),
        Hostile::NoCount => format!("r={nonce},s=c2FsdHNhbHQ=").into_bytes(),
        Hostile::HugeFrame => {
            s.write_all(&[b'R', 0x01, 0, 0, 0, 0, 0, 0, 11]).ok()?;
            return hold(s);
        }
        _ => format!("r={nonce},s=c2FsdHNhbHQ=,i=16").into_bytes(),
    };
    out.clear();
    auth(Authentication::SaslContinue(&server_first), &mut out);
    s.write_all(&out).ok()?;
    read_frame(&mut s, &mut buf)?;
    out.clear();
    match hostile {
        Hostile::OkWithoutSignature => {}
        Hostile::LongFinal => auth(Authentication::SaslFinal(format!("v={}", "A".repeat(4096)).as_bytes()), &mut out),
        _ => return hold(s),
    }
    auth(Authentication::Ok, &mut out);
    out.extend_from_slice(&[b'Z', 0, 0, 0, 5, b'I']);
    s.write_all(&out).ok()?;
    hold(s)
}

/// Waits for the router to hang up.
fn hold(mut s: TcpStream) -> Option<()> {
    let mut sink = [0u8; 4096];
    while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
    None
}

/// A fake backend on an ephemeral port serving every connection with `hostile`.
fn fake(hostile: Hostile) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind fake backend");
    let port = listener.local_addr().expect("addr").port();
    thread::spawn(move || {
        for s in listener.incoming().flatten() {
            thread::spawn(move || serve(s, hostile));
        }
    });
    port
}

/// One core: pool `fake` (password login) on the fake backend, pool `real` on the primary.
fn router(fake_port: u16) -> Router {
    let real = pg_pool("real", dbs().pg.primary_port, "transaction", 2);
    Router::start(&format!(
        "[general]\ncores = [0]\nshutdown_drain = \"2s\"\n\n[[listeners]]\nprotocol = \"postgres\"\nbind = \"127.0.0.1:0\"\n\n\
         [pools.fake]\nmode = \"transaction\"\nusername = \"app\"\npassword = \"app\"\ndatabase = \"fake\"\nmax_connections = 1\n\
         acquire_timeout = \"10s\"\nconnect_timeout = \"5s\"\nbackends = [{{ host = \"127.0.0.1\", port = {fake_port} }}]\n\n\
         [pools.fake.health]\ninterval = \"1h\"\n\n{real}\n[routing]\ndefault_pool = \"real\"\n"
    ))
}

#[test]
fn hostile_scram_backends_fail_their_own_pool_at_once() {
    let long_salt = MAX_SERVER_MESSAGE + 100;
    // 08006 for a login the backend spoiled, 08001 for bytes that are no protocol at all.
    for (hostile, what, code_want, want) in [
        (
            Hostile::Iterations(u64::from(MAX_ITERATIONS) + 1),
            "one iteration over the cap",
            "08006",
            "100001 SCRAM iterations",
        ),
        (Hostile::Iterations(u64::from(u32::MAX)), "u32::MAX iterations", "08006", "4294967295 SCRAM iterations"),
        (Hostile::Iterations(1 << 40), "iterations beyond u32", "08006", "1099511627776 SCRAM iterations"),
        (Hostile::LongSalt(long_salt), "an oversized server-first message", "08006", "exceeds the 1024"),
        (Hostile::NotUtf8, "a server-first message that is not UTF-8", "08006", "malformed SCRAM message"),
        (
            Hostile::NoCount,
            "a server-first message without a count",
            "08006",
            "malformed SCRAM message: iteration count",
        ),
        (Hostile::OnlyPlus, "only SCRAM-SHA-256-PLUS", "08006", "no SASL mechanism the router speaks"),
        (
            Hostile::OkWithoutSignature,
            "Ok without the server signature",
            "08006",
            "without proving it knows the password",
        ),
        (Hostile::LongFinal, "an oversized server-final message", "08006", "exceeds the 1024"),
        (Hostile::HugeFrame, "a 16 MiB frame", "08001", "exceeds the limit"),
    ] {
        let port = fake(hostile);
        let r = router(port);
        let started = Instant::now();
        let e = connect(r.port(), "fake", "app").err().unwrap_or_else(|| panic!("{what}: the login succeeded"));
        let took = started.elapsed();
        let db = e.as_db_error().unwrap_or_else(|| panic!("{what}: no server error: {e}"));
        let (code, message) = (db.code().code(), db.message());
        assert_eq!(code, code_want, "{what}: {message}");
        for part in [want, "pool \"fake\"", &format!("127.0.0.1:{port}")] {
            assert!(message.contains(part), "{what}: {part:?} missing from {message:?}");
        }
        // Refused before any key derivation: far below one connect_timeout, even in a debug build.
        assert!(took < Duration::from_secs(3), "{what}: took {took:?}");
        let mut real = r.pg("real");
        let port: i32 = real.query_one("SELECT inet_server_port()", &[]).expect("healthy pool").get(0);
        assert_eq!(port as u16, dbs().pg.primary_port, "{what}: the healthy pool serves");
    }
}
