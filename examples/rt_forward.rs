//! The zero-work floor of a proxy on the router's runtime (#39): a TCP forwarder on one core of
//! `querypilot::rt` — the same io_uring loop, ring setup, provided-buffer receives, spare
//! buffers and posted client sends the router uses — that pairs each accepted client with its
//! own backend connection and copies bytes both ways without looking at them. No parsing, no
//! pool, no routing: what it costs per transaction is what any proxy built on this runtime pays
//! (the loop, the ring operations and the kernel's loopback path) before it does any work, so
//! the router's CPU per transaction minus this one is the router's own work. perf/cpu_split.sh
//! (`FLOOR=1`) runs it beside the routers, PgBouncer and HAProxy.
//!
//! Run: `cargo build --release --example rt_forward`, then
//! `rt_forward LISTEN_ADDR BACKEND_ADDR [CPU]` (e.g. `rt_forward 127.0.0.1:6433 127.0.0.1:5432 0`;
//! without CPU the loop is not pinned). It runs until killed.

use std::io;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use querypilot::rt::{self, Stream};

/// Largest read: what the router's sessions read at most at once.
const READ_CHUNK: usize = 16 * 1024;
/// How long a backend connect may take before the client is dropped.
const CONNECT_LIMIT: Duration = Duration::from_secs(5);
/// Pause after a failed accept (EMFILE and friends), so a failing accept does not spin.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Which side a read came from, and what it returned.
enum Got {
    Client(io::Result<usize>),
    Backend(io::Result<usize>),
}

/// Copies bytes between `client` and a new connection to `backend` until either side closes
/// or fails; then both close. One task for both directions: a read that loses the race stays in
/// flight on its stream (see `rt::read_some`), so each side always has one receive posted, as a
/// router session has on its client and on the backend it holds.
async fn forward(mut client: Stream, backend: SocketAddr) {
    let Ok(mut server) = rt::connect(backend, rt::now() + CONNECT_LIMIT).await else { return };
    // Empty between messages: a read takes a spare allocation of the core, a write gives it back.
    let (mut up, mut down) = (Vec::new(), Vec::new());
    loop {
        let got = rt::race(async { Got::Client(rt::read_some(&mut client, &mut up, READ_CHUNK).await) }, async {
            Got::Backend(rt::read_some(&mut server, &mut down, READ_CHUNK).await)
        })
        .await;
        let (to, buf) = match got {
            Got::Client(Ok(n)) if n > 0 => (&mut server, &mut up),
            Got::Backend(Ok(n)) if n > 0 => (&mut client, &mut down),
            _ => return,
        };
        let sent = rt::write_all(to, buf).await;
        rt::recycle(buf);
        if sent.is_err() {
            return;
        }
    }
}

/// Accepts clients on `listen` for ever, one forwarding task each.
async fn serve(listen: SocketAddr, backend: SocketAddr, queues: rt::CoreQueues) {
    let listener = match rt::bind_reuseport(listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("rt_forward: cannot listen on {listen}: {e}");
            return;
        }
    };
    loop {
        match listener.accept().await {
            Ok(client) => rt::spawn_guarded(queues.latency, forward(client, backend), |_| {}),
            Err(e) => {
                eprintln!("rt_forward: accept failed: {e}");
                rt::sleep(ACCEPT_BACKOFF).await;
            }
        }
    }
}

fn parse_args() -> Result<(SocketAddr, SocketAddr, Option<usize>), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let addr = |i: usize| -> Result<SocketAddr, String> {
        let text = args.get(i).ok_or("usage: rt_forward LISTEN_ADDR BACKEND_ADDR [CPU]")?;
        text.parse().map_err(|e| format!("{text}: {e}"))
    };
    let cpu = match args.get(2) {
        Some(text) => Some(text.parse().map_err(|e| format!("CPU {text}: {e}"))?),
        None => None,
    };
    Ok((addr(0)?, addr(1)?, cpu))
}

fn main() -> ExitCode {
    let (listen, backend, cpu) = match parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("rt_forward: {e}");
            return ExitCode::from(2);
        }
    };
    let core = match rt::spawn_core("rt-forward", cpu, move |queues| serve(listen, backend, queues)) {
        Ok(core) => core,
        Err(e) => {
            eprintln!("rt_forward: {e}");
            return ExitCode::FAILURE;
        }
    };
    // The loop returns only when it could not listen.
    let _ = core.join();
    ExitCode::FAILURE
}
