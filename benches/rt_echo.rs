//! The event loop's own overhead: a client and an echo server on one core, over loopback TCP,
//! exchanging small messages one at a time. Each message costs a send and a receive on both
//! ends (four ring operations) and the task wake-ups between them, so ns per message is the
//! loop's cost per relayed request/response plus the kernel's loopback path.
//! Run: `cargo bench --bench rt_echo` (or `-- --test` to check it runs once).

use std::net::SocketAddr;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use querypilot::rt::{self, Stream};

/// Message size: a pgbench `-S` Bind/Execute or a small result is of this order.
const MESSAGE: usize = 64;

/// Echoes whatever arrives until the peer closes.
async fn echo(mut stream: Stream) {
    let mut buf = Vec::with_capacity(MESSAGE);
    loop {
        buf.clear();
        match rt::read_some(&mut stream, &mut buf, MESSAGE).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {
                if rt::write_all(&mut stream, &buf).await.is_err() {
                    return;
                }
            }
        }
    }
}

/// Sends `n` messages one after another, each after the previous echo came back whole.
async fn round_trips(client: &mut Stream, n: u64) -> Duration {
    let message = [7u8; MESSAGE];
    let mut buf = Vec::with_capacity(MESSAGE);
    let start = Instant::now();
    for _ in 0..n {
        if rt::write_all(client, &message).await.is_err() {
            break;
        }
        buf.clear();
        while buf.len() < MESSAGE {
            match rt::read_some(client, &mut buf, MESSAGE).await {
                Ok(0) | Err(_) => return start.elapsed(),
                Ok(_) => {}
            }
        }
    }
    start.elapsed()
}

/// A core running the echo server and a client; `requests` carries batch sizes in, `done`
/// carries each batch's time out. Between batches the core looks at the channel every
/// millisecond (outside the timed part).
fn start_core(requests: mpsc::Receiver<u64>, done: mpsc::Sender<Duration>) -> rt::CoreHandle {
    let started = rt::spawn_core("bench-echo", None, move |queues| async move {
        let Ok(listener) = rt::bind_reuseport(SocketAddr::from(([127, 0, 0, 1], 0))) else { return };
        let Ok(addr) = listener.local_addr() else { return };
        rt::spawn_guarded(
            queues.latency,
            async move {
                if let Ok(server) = listener.accept().await {
                    echo(server).await;
                }
            },
            |_| {},
        );
        let Ok(mut client) = rt::connect(addr, Instant::now() + Duration::from_secs(5)).await else { return };
        loop {
            match requests.try_recv() {
                Ok(n) => {
                    let _ = done.send(round_trips(&mut client, n).await);
                }
                Err(mpsc::TryRecvError::Empty) => rt::sleep(Duration::from_millis(1)).await,
                Err(mpsc::TryRecvError::Disconnected) => return,
            }
        }
    });
    match started {
        Ok(core) => core,
        Err(e) => panic!("cannot start the bench core: {e}"),
    }
}

fn bench_echo(c: &mut Criterion) {
    let (req_tx, req_rx) = mpsc::channel();
    let (done_tx, done_rx) = mpsc::channel();
    let core = start_core(req_rx, done_tx);
    let mut group = c.benchmark_group("rt_echo");
    group.throughput(Throughput::Elements(1));
    group.bench_function("64B_round_trip_one_core", |b| {
        b.iter_custom(|iters| {
            req_tx.send(iters).expect("core is running");
            done_rx.recv().expect("core answers")
        })
    });
    group.finish();
    drop(req_tx);
    let _ = core.join();
}

criterion_group!(benches, bench_echo);
criterion_main!(benches);
