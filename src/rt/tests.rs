//! Unit tests of the event loop: each runs a real core (thread, io_uring, loopback sockets).

use std::cell::RefCell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc};
use std::time::{Duration, Instant};

use super::*;

/// Runs `main` on a fresh core and returns what it sends, failing after 10 s.
fn on_core<T, F, Fut>(main: F) -> T
where
    T: Send + 'static,
    F: FnOnce(CoreQueues, mpsc::Sender<T>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let (tx, rx) = mpsc::channel();
    let core = spawn_core("rt-test", None, move |queues| main(queues, tx)).expect("core starts");
    let out = rx.recv_timeout(Duration::from_secs(10)).expect("the core answers in time");
    core.join().expect("the core ends cleanly");
    out
}

/// A connected (client, server) pair over loopback, both owned by the current core.
async fn pair() -> (Stream, Stream) {
    let listener = bind_reuseport(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bind");
    let addr = listener.local_addr().expect("addr");
    let accept = async { Some(listener.accept().await.expect("accept")) };
    let client = connect(addr, Instant::now() + Duration::from_secs(5));
    let (server, client) = futures_lite::future::zip(accept, client).await;
    (client.expect("connect"), server.expect("accepted"))
}

#[test]
fn timers_fire_in_deadline_order_not_spawn_order() {
    let order = on_core(|queues, tx| async move {
        let fired = Rc::new(RefCell::new(Vec::new()));
        for ms in [30u64, 10, 20, 10] {
            let fired = fired.clone();
            spawn_guarded(
                queues.latency,
                async move {
                    sleep(Duration::from_millis(ms)).await;
                    fired.borrow_mut().push(ms);
                },
                |_| {},
            );
        }
        // A sleep lasts at least its length by the runtime's clock, which trails the real one
        // by the part of the turn run so far; the real clock at the end must have passed it.
        let started = now();
        sleep(Duration::from_millis(60)).await;
        let _ = tx.send((fired.borrow().clone(), started.elapsed()));
    });
    assert_eq!(order.0, vec![10, 10, 20, 30]);
    assert!(order.1 >= Duration::from_millis(60), "slept only {:?}", order.1);
}

#[test]
fn a_dropped_timer_never_fires_and_a_deadline_cuts_work_short() {
    let out = on_core(|_, tx| async move {
        let cut = with_deadline(Instant::now() + Duration::from_millis(20), sleep(Duration::from_secs(30))).await;
        let done = within(Some(Duration::from_secs(30)), sleep(Duration::from_millis(5))).await;
        let _ = tx.send((cut, done));
    });
    assert_eq!(out, (Err(Elapsed), Ok(())));
}

#[test]
fn a_task_woken_by_its_timer_runs_in_the_turn_its_wait_ended_in() {
    // Alone on its core: the loop's one wait ends at the deadline, and nothing else turns it.
    let turns = on_core(|_, tx| async move {
        let armed = turn();
        sleep(Duration::from_millis(1)).await;
        let _ = tx.send(turn() - armed);
    });
    assert_eq!(turns, 1, "the timer fired and its task ran in the turn after the one that armed it");
}

#[test]
fn an_abandoned_recv_stays_parked_and_loses_no_byte() {
    let got = on_core(|_, tx| async move {
        let (mut client, mut server) = pair().await;
        let mut buf = Vec::new();
        // Nothing arrives: the read is abandoned at its deadline with its receive in flight.
        let first =
            with_deadline(Instant::now() + Duration::from_millis(30), read_some(&mut client, &mut buf, 64)).await;
        let parked = client.recv.is_some() && !readable_now(&client) && idle_stream_usable(&client);
        write_all(&mut server, b"hello").await.expect("write");
        // The parked receive completes; the next read takes its bytes.
        sleep(Duration::from_millis(20)).await;
        let ready = readable_now(&client) && !idle_stream_usable(&client);
        let n = read_some(&mut client, &mut buf, 64).await.expect("read");
        let _ = tx.send((first.is_err(), parked, ready, n, buf));
    });
    assert_eq!(got, (true, true, true, 5, b"hello".to_vec()));
}

#[test]
fn dropping_a_stream_with_a_parked_recv_cancels_it_and_closes_the_connection() {
    let eof = on_core(|_, tx| async move {
        let (mut client, mut server) = pair().await;
        let mut buf = Vec::new();
        let _ = with_deadline(Instant::now() + Duration::from_millis(10), read_some(&mut client, &mut buf, 64)).await;
        drop(client);
        // Without the cancellation the in-flight receive would hold the socket open.
        let n = with_deadline(Instant::now() + Duration::from_secs(2), read_some(&mut server, &mut buf, 64)).await;
        let _ = tx.send(matches!(n, Ok(Ok(0))));
    });
    assert!(eof, "the peer saw no EOF after the stream was dropped");
}

#[test]
fn a_raced_accept_stays_parked_and_the_next_accept_gets_the_connection() {
    let echoed = on_core(|_, tx| async move {
        let listener = bind_reuseport(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bind");
        let addr = listener.local_addr().expect("addr");
        let lost = race(async { listener.accept().await.is_ok() }, async {
            sleep(Duration::from_millis(10)).await;
            false
        })
        .await;
        let parked = listener.pending.take().is_some_and(|op| {
            let in_flight = !op.is_done();
            listener.pending.set(Some(op));
            in_flight
        });
        let accept = async { listener.accept().await.expect("accept") };
        let (mut server, client) =
            futures_lite::future::zip(accept, connect(addr, Instant::now() + Duration::from_secs(5))).await;
        let mut client = client.expect("connect");
        write_all(&mut client, b"ping").await.expect("write");
        let mut buf = Vec::new();
        let n = read_some(&mut server, &mut buf, 64).await.expect("read");
        let _ = tx.send((lost, parked, n, buf));
    });
    assert_eq!(echoed, (false, true, 4, b"ping".to_vec()));
}

#[test]
fn large_writes_arrive_whole_and_in_order() {
    let ok = on_core(|_, tx| async move {
        let (mut client, mut server) = pair().await;
        let data: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
        let expected = data.clone();
        let reader = async move {
            let mut got = Vec::new();
            while got.len() < expected.len() {
                if read_some(&mut server, &mut got, 64 * 1024).await.unwrap_or(0) == 0 {
                    break;
                }
            }
            got == expected
        };
        let (_, same) = futures_lite::future::zip(write_all(&mut client, &data), reader).await;
        let _ = tx.send(same);
    });
    assert!(ok);
}

#[test]
fn a_notifier_and_a_foreign_waker_wake_a_sleeping_core() {
    let (note_tx, note_rx) = mpsc::channel::<Notifier>();
    let (chan_tx, chan_rx) = mpsc::channel::<futures_channel::oneshot::Sender<u32>>();
    // A plain thread standing in for the control plane: sleeping there blocks no core.
    #[allow(clippy::disallowed_methods)]
    let waker_thread = std::thread::spawn(move || {
        let notifier = note_rx.recv().expect("notifier");
        let reply = chan_rx.recv().expect("reply sender");
        std::thread::sleep(Duration::from_millis(50));
        let _ = reply.send(7);
        std::thread::sleep(Duration::from_millis(50));
        notifier.notify();
    });
    let (tx, rx) = mpsc::channel();
    let (answer_tx, answer_rx) = futures_channel::oneshot::channel::<u32>();
    let core = spawn_core("rt-test", None, move |_| async move {
        // No timer is armed: only the eventfd can wake the loop.
        let woken = notified();
        let _ = chan_tx.send(answer_tx);
        let answer = answer_rx.await.ok();
        woken.await;
        let _ = tx.send(answer);
    })
    .expect("core starts");
    note_tx.send(core.notifier()).expect("send notifier");
    assert_eq!(rx.recv_timeout(Duration::from_secs(10)).expect("woken in time"), Some(7));
    core.join().expect("core ends");
    waker_thread.join().expect("waker thread");
}

#[test]
fn a_panicking_task_is_contained_and_the_core_lives_on() {
    let (panics, after) = on_core(|queues, tx| async move {
        let panics = Rc::new(RefCell::new(Vec::new()));
        let seen = panics.clone();
        spawn_guarded(
            queues.latency,
            async {
                sleep(Duration::from_millis(1)).await;
                panic!("boom in a session");
            },
            move |msg| seen.borrow_mut().push(msg),
        );
        sleep(Duration::from_millis(20)).await;
        let after = Rc::new(RefCell::new(false));
        let flag = after.clone();
        spawn_guarded(queues.background, async move { *flag.borrow_mut() = true }, |_| {});
        sleep(Duration::from_millis(5)).await;
        let _ = tx.send((panics.borrow().clone(), *after.borrow()));
    });
    assert_eq!(panics, vec!["boom in a session".to_owned()]);
    assert!(after, "a task spawned after the panic did not run");
}

/// Sets its flag when dropped.
struct DropFlag(Arc<AtomicBool>);

impl Drop for DropFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Holds its flag in a field of its own, around `inner`: a panic in `inner` unwinds through its
/// poll without dropping the flag (an `async` block's locals would be dropped by the unwind).
struct Holding<F> {
    _flag: DropFlag,
    inner: std::pin::Pin<Box<F>>,
}

impl<F: std::future::Future> std::future::Future for Holding<F> {
    type Output = F::Output;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<F::Output> {
        self.get_mut().inner.as_mut().poll(cx)
    }
}

#[test]
fn a_panicked_task_is_dropped_before_its_panic_is_reported() {
    let dropped_first = on_core(|queues, tx| async move {
        let dropped = Arc::new(AtomicBool::new(false));
        let seen = dropped.clone();
        let report = Rc::new(RefCell::new(None));
        let reported = report.clone();
        let panicking = Box::pin(async {
            sleep(Duration::from_millis(1)).await;
            panic!("boom while holding state");
        });
        spawn_guarded(queues.latency, Holding { _flag: DropFlag(dropped), inner: panicking }, move |_| {
            *reported.borrow_mut() = Some(seen.load(Ordering::SeqCst))
        });
        sleep(Duration::from_millis(20)).await;
        let _ = tx.send(*report.borrow());
    });
    assert_eq!(dropped_first, Some(true), "the panic was reported with the task's state still held");
}

#[test]
fn tasks_still_pending_when_the_core_ends_are_dropped_on_it() {
    let dropped = Arc::new(AtomicBool::new(false));
    let flag = dropped.clone();
    let core = spawn_core("rt-test", None, move |queues| async move {
        let guard = DropFlag(flag);
        spawn_guarded(
            queues.background,
            async move {
                let _guard = guard;
                let (mut client, _server) = pair().await;
                let mut buf = Vec::new();
                let _ = read_some(&mut client, &mut buf, 64).await; // never completes
            },
            |_| {},
        );
        sleep(Duration::from_millis(20)).await;
    })
    .expect("core starts");
    core.join().expect("core ends");
    assert!(dropped.load(Ordering::SeqCst), "a pending task outlived its core");
}

#[test]
fn latency_tasks_run_before_background_tasks_queued_with_them() {
    let order = on_core(|queues, tx| async move {
        let order = Rc::new(RefCell::new(Vec::new()));
        let count = Rc::new(AtomicUsize::new(0));
        for (queue, name) in [(queues.background, "bg"), (queues.latency, "lat"), (queues.background, "bg")] {
            let (order, count) = (order.clone(), count.clone());
            spawn_guarded(
                queue,
                async move {
                    order.borrow_mut().push((name, current_queue() == queue));
                    count.fetch_add(1, Ordering::Relaxed);
                },
                |_| {},
            );
        }
        while count.load(Ordering::Relaxed) < 3 {
            sleep(Duration::from_millis(1)).await;
        }
        let _ = tx.send(order.borrow().clone());
    });
    assert_eq!(order, vec![("lat", true), ("bg", true), ("bg", true)]);
}

#[test]
fn more_waiting_reads_than_provided_buffers_all_get_their_bytes() {
    // 300 readers wait at once on empty buffers (each selecting a provided buffer, of which the
    // core has 256), then every peer sends at once: readers the ring cannot serve retry with a
    // buffer of their own, and every reader gets exactly its own bytes.
    const N: usize = 300;
    let got = on_core(|queues, tx| async move {
        let selects = ring::selects_buffers();
        let results = Rc::new(RefCell::new(Vec::new()));
        let mut writers = Vec::new();
        for i in 0..N {
            let (mut client, server) = pair().await;
            writers.push(server);
            let results = results.clone();
            spawn_guarded(
                queues.latency,
                async move {
                    let mut buf = Vec::new();
                    let mut want = format!("message {i} ").repeat(20).into_bytes();
                    while buf.len() < want.len() {
                        match read_some(&mut client, &mut buf, 64 * 1024).await {
                            Ok(0) | Err(_) => break,
                            Ok(_) => {}
                        }
                    }
                    results.borrow_mut().push(std::mem::take(&mut want) == buf);
                },
                |_| {},
            );
        }
        sleep(Duration::from_millis(50)).await;
        // Sent synchronously, all within this one poll, so every receive completes in the same
        // turn of the loop, before any reader hands its buffer back.
        for (i, w) in writers.iter().enumerate() {
            let msg = format!("message {i} ").repeat(20);
            // SAFETY: a plain send from a live buffer on a socket this test owns.
            let sent = unsafe { libc::send(w.raw(), msg.as_ptr().cast(), msg.len(), libc::MSG_NOSIGNAL) };
            assert_eq!(sent, msg.len() as isize, "a small send on an empty socket goes whole");
        }
        while results.borrow().len() < N {
            sleep(Duration::from_millis(5)).await;
        }
        let all_right = results.borrow().iter().all(|ok| *ok);
        let _ = tx.send((selects, all_right));
    });
    assert!(got.0, "this kernel has provided buffer rings (Linux 5.19+)");
    assert!(got.1, "a reader got bytes that were not its own");
}

#[test]
fn an_idle_stream_and_its_reader_hold_no_buffer() {
    let out = on_core(|_, tx| async move {
        let (mut client, mut server) = pair().await;
        write_all(&mut server, b"ping").await.expect("write");
        let mut buf = Vec::new();
        let n = read_some(&mut client, &mut buf, 64).await.expect("read");
        let read = buf.clone();
        recycle(&mut buf);
        // Waiting again: the receive in flight selects a provided buffer, none of its own.
        let waited =
            with_deadline(Instant::now() + Duration::from_millis(20), read_some(&mut client, &mut buf, 64)).await;
        let parked_without_buffer =
            matches!(client.recv.as_ref().map(|op| op.holds_buffer()), Some(false)) && buf.capacity() == 0;
        // The spare left behind is reused instead of a new allocation.
        let reused = spare_buffer().capacity() > 0;
        let _ = tx.send((n, read, waited.is_err(), parked_without_buffer, reused));
    });
    assert_eq!(out, (4, b"ping".to_vec(), true, true, true));
}

#[test]
fn a_task_that_took_its_share_lets_the_others_run_before_it_goes_on() {
    let order = on_core(|queues, tx| async move {
        let order = Rc::new(RefCell::new(Vec::new()));
        let done = Rc::new(AtomicUsize::new(0));
        let (o, d) = (order.clone(), done.clone());
        // Never waits for I/O: without its share it would do all its work in one poll.
        spawn_guarded(
            queues.latency,
            async move {
                let mut share = Share::default();
                for _ in 0..3 * fair::SHARE_MESSAGES {
                    take_share(&mut share).await;
                    o.borrow_mut().push('f');
                }
                d.fetch_add(1, Ordering::Relaxed);
            },
            |_| {},
        );
        let (o, d) = (order.clone(), done.clone());
        spawn_guarded(
            queues.latency,
            async move {
                for _ in 0..3 {
                    o.borrow_mut().push('o');
                    yield_now().await;
                }
                d.fetch_add(1, Ordering::Relaxed);
            },
            |_| {},
        );
        while done.load(Ordering::Relaxed) < 2 {
            sleep(Duration::from_millis(1)).await;
        }
        let _ = tx.send(order.borrow().iter().collect::<String>());
    });
    let runs: Vec<usize> = order.split('o').map(str::len).collect();
    let share = fair::SHARE_MESSAGES as usize;
    assert_eq!(runs.iter().sum::<usize>(), 3 * share, "{order}");
    assert!(runs.iter().all(|&n| n <= share), "no run of the flooding task is longer than its share: {runs:?}");
}

#[test]
fn a_write_abandoned_mid_message_breaks_the_stream_instead_of_truncating_it() {
    // Far more than loopback's socket buffers hold: the write is cut off by its deadline.
    const BIG: usize = 32 << 20;
    let out = on_core(|_, tx| async move {
        let (mut client, mut server) = pair().await;
        let big: Vec<u8> = (0..BIG).map(|i| (i % 251) as u8).collect();
        let cut = with_deadline(Instant::now() + Duration::from_millis(30), write_all(&mut client, &big)).await;
        let usable = idle_stream_usable(&client);
        let reader = async {
            let mut got = Vec::new();
            while let Ok(n) = read_some(&mut server, &mut got, 64 * 1024).await {
                if n == 0 {
                    break;
                }
            }
            got
        };
        let writer = async {
            let next = write_all(&mut client, b"next").await.map_err(|e| e.kind());
            let again = write_all(&mut client, b"again").await.map_err(|e| e.kind());
            drop(client);
            (next, again)
        };
        let ((next, again), got) = futures_lite::future::zip(writer, reader).await;
        let truncated = got.len() < big.len() && big.starts_with(&got);
        let _ = tx.send((cut.is_err(), usable, next, again, truncated));
    });
    let broken = Err(std::io::ErrorKind::BrokenPipe);
    assert_eq!(out, (true, false, broken, broken, true), "(cut, usable, next write, later write, peer got a prefix)");
}

#[test]
fn a_small_write_to_a_client_returns_at_once_and_the_next_waits_for_it() {
    let out = on_core(|_, tx| async move {
        let (mut client, mut server) = pair().await;
        let first: Vec<u8> = (0..1000u32).map(|i| (i % 251) as u8).collect();
        // The accepted end posts: the write is done at its first poll, before the loop turns.
        let at_once = futures_lite::future::poll_once(write_all(&mut server, &first)).await.map(|r| r.is_ok());
        // The next write waits for the first to leave, so both arrive whole and in order.
        let second = write_all(&mut server, b"second").await.is_ok();
        let mut got = Vec::new();
        while got.len() < first.len() + 6 {
            if read_some(&mut client, &mut got, 64 * 1024).await.unwrap_or(0) == 0 {
                break;
            }
        }
        let mut expected = first.clone();
        expected.extend_from_slice(b"second");
        // A backend (connected) end waits for every send.
        let backend = futures_lite::future::poll_once(write_all(&mut client, b"query")).await.is_some();
        let _ = tx.send((at_once, second, got == expected, backend));
    });
    assert_eq!(
        out,
        (Some(true), true, true, false),
        "(first returned at once, second ok, arrived in order, backend write returned at once)"
    );
}

#[test]
fn posted_writes_to_a_slow_reader_arrive_whole_and_in_order() {
    // Far more than loopback's socket buffers hold: sends go short or wait, and the ring sends
    // the rest of each itself.
    const WRITES: usize = 400;
    let ok = on_core(|_, tx| async move {
        let (mut client, mut server) = pair().await;
        let message = |i: usize| -> Vec<u8> { (0..16 * 1024).map(|j| ((i * 31 + j) % 251) as u8).collect() };
        let expected: Vec<u8> = (0..WRITES).flat_map(message).collect();
        let writer = async {
            for i in 0..WRITES {
                if write_all(&mut server, &message(i)).await.is_err() {
                    return false;
                }
            }
            true
        };
        let reader = async {
            let mut got = Vec::new();
            while got.len() < expected.len() {
                if got.len() % (256 * 1024) < 16 * 1024 {
                    sleep(Duration::from_millis(2)).await;
                }
                if read_some(&mut client, &mut got, 16 * 1024).await.unwrap_or(0) == 0 {
                    break;
                }
            }
            got
        };
        let (wrote, got) = futures_lite::future::zip(writer, reader).await;
        let _ = tx.send(wrote && got == expected);
    });
    assert!(ok);
}

#[test]
fn a_posted_write_leaves_before_its_stream_closes_and_a_failed_one_fails_the_next_write() {
    let out = on_core(|_, tx| async move {
        let (mut client, mut server) = pair().await;
        // Written and dropped in the same poll: the queued send goes ahead of the close.
        write_all(&mut server, b"bye").await.expect("posted");
        drop(server);
        let mut got = Vec::new();
        while let Ok(n) = read_some(&mut client, &mut got, 64).await {
            if n == 0 {
                break;
            }
        }
        // The other way round: the peer is gone, and some later write must say so.
        let (gone, mut live) = pair().await;
        drop(gone);
        let mut failed_at = None;
        for i in 0..100 {
            if write_all(&mut live, b"anyone there?").await.is_err() {
                failed_at = Some(i);
                break;
            }
            sleep(Duration::from_millis(1)).await;
        }
        let _ = tx.send((got, failed_at.is_some()));
    });
    assert_eq!(out, (b"bye".to_vec(), true));
}

/// A peer on its own thread that answers each message it reads with `answer` (after sending
/// `first` unasked, if given), until the router's end closes.
fn answering_peer(first: Option<&'static [u8]>, answer: &'static [u8]) -> SocketAddr {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).expect("bind");
    let addr = listener.local_addr().expect("addr");
    std::thread::spawn(move || {
        use std::io::{Read, Write};
        let (mut conn, _) = listener.accept().expect("accept");
        if let Some(first) = first {
            conn.write_all(first).expect("unasked bytes");
        }
        let mut buf = [0u8; 64];
        while matches!(conn.read(&mut buf), Ok(1..)) {
            if conn.write_all(answer).is_err() {
                return;
            }
        }
    });
    addr
}

#[test]
fn a_write_for_an_answer_returns_with_the_answer_already_received() {
    let out = on_core(|_, tx| async move {
        let addr = answering_peer(None, b"pong");
        let mut stream = connect(addr, Instant::now() + Duration::from_secs(5)).await.expect("connect");
        let mut got = Vec::new();
        let mut turns = Vec::new();
        for _ in 0..3 {
            let written = write_for_answer(&mut stream, b"ping").await.is_ok();
            let after_write = turn();
            got.clear();
            let read = read_some(&mut stream, &mut got, 64).await.unwrap_or(0);
            // The task woke once, with the answer in: reading it needs no turn of its own.
            turns.push((written, read, turn() - after_write));
        }
        let _ = tx.send((turns, got));
    });
    assert_eq!(
        out,
        (vec![(true, 4, 0); 3], b"pong".to_vec()),
        "(written, bytes read, turns the read took) per message"
    );
}

#[test]
fn a_write_for_an_answer_after_unread_bytes_loses_none_of_them() {
    let out = on_core(|_, tx| async move {
        let addr = answering_peer(Some(b"early"), b"pong");
        let mut stream = connect(addr, Instant::now() + Duration::from_secs(5)).await.expect("connect");
        watch(&mut stream);
        // The parked receive takes the unasked bytes; the write cannot count on it for the answer.
        let deadline = Instant::now() + Duration::from_secs(5);
        while !readable_now(&stream) && Instant::now() < deadline {
            yield_now().await;
        }
        let written = write_for_answer(&mut stream, b"ping").await.is_ok();
        let mut got = Vec::new();
        while got.len() < b"earlypong".len() {
            if read_some(&mut stream, &mut got, 64).await.unwrap_or(0) == 0 {
                break;
            }
        }
        let _ = tx.send((written, got));
    });
    assert_eq!(out, (true, b"earlypong".to_vec()));
}
