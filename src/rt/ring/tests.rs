//! Tests of the ring on its own, driven from the test's thread without a core: what it frees
//! when it goes away, and a burst of submissions on a full completion queue.

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::mpsc;
use std::time::Duration;

use io_uring::{opcode, squeue, types};

use super::{Keep, Ring, Slot, Stage};
use crate::rt::provided;

fn eventfd() -> OwnedFd {
    // SAFETY: eventfd(2) with valid flags; checked before it is owned.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    assert!(raw >= 0, "eventfd: {}", std::io::Error::last_os_error());
    // SAFETY: a new descriptor nobody else owns.
    unsafe { OwnedFd::from_raw_fd(raw) }
}

/// Whether every page of `len` bytes from `addr` (page-aligned) is mapped: mincore(2) fails
/// with ENOMEM on an unmapped page.
fn mapped(addr: *const u8, len: usize) -> bool {
    let mut pages = vec![0u8; len.div_ceil(4096)];
    // SAFETY: mincore only reads the page tables for the range and writes one byte per page
    // into `pages`, which has room for them.
    unsafe { libc::mincore(addr.cast_mut().cast(), len, pages.as_mut_ptr()) == 0 }
}

/// A ring with a receive selecting a provided buffer in the kernel, on a socket nobody writes;
/// the mapping its buffers live in.
fn ring_with_waiting_receive(efd: &OwnedFd, socket: &UnixStream) -> (Ring, (*const u8, usize)) {
    let mut ring = Ring::with_entries(efd.as_raw_fd(), 8).expect("io_uring");
    let mapping = ring.provided.as_ref().expect("provided buffer rings (Linux 5.19+)").mapping();
    let sqe = opcode::Recv::new(types::Fd(socket.as_raw_fd()), std::ptr::null_mut(), 64)
        .buf_group(provided::GROUP)
        .build()
        .flags(squeue::Flags::BUFFER_SELECT);
    ring.start(sqe, Keep::Select, false);
    ring.turn(Some(Duration::ZERO));
    assert_eq!(ring.ops.in_kernel, 1, "the receive waits in the kernel");
    (ring, mapping)
}

#[test]
fn buffers_a_receive_still_in_the_kernel_may_fill_are_leaked_not_freed() {
    let efd = eventfd();
    let (socket, _peer) = UnixStream::pair().expect("socket pair");
    let (mut ring, (addr, len)) = ring_with_waiting_receive(&efd, &socket);
    // No time for the cancellation to come back: the receive is still in the kernel.
    ring.shut_down(Duration::ZERO);
    assert!(ring.quiet().is_none());
    drop(ring);
    assert!(!provided::unmapped_here(addr), "the provided buffers were unmapped under a receive still in the kernel");
    assert!(mapped(addr, len), "and they are still mapped");
}

#[test]
fn buffers_are_freed_once_every_operation_came_back() {
    let efd = eventfd();
    let (socket, _peer) = UnixStream::pair().expect("socket pair");
    let (mut ring, (addr, _)) = ring_with_waiting_receive(&efd, &socket);
    ring.shut_down(Duration::from_secs(5));
    assert!(ring.quiet().is_some(), "the cancelled receive and the eventfd read came back");
    drop(ring);
    assert!(provided::unmapped_here(addr), "a quiet ring's buffers are unmapped, not leaked");
}

#[test]
fn a_burst_on_a_full_completion_queue_reaps_instead_of_spinning() {
    // On its own thread: before the fix, `push` spun forever here.
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let efd = eventfd();
        // Two submission entries, four completion entries: 64 operations overflow it many times.
        let mut ring = Ring::with_entries(efd.as_raw_fd(), 2).expect("io_uring");
        ring.refuse_while_overflowed = true;
        let ops: Vec<usize> = (0..64).map(|_| ring.start(opcode::Nop::new().build(), Keep::Nothing, false)).collect();
        let mut turns = 0;
        while ring.ops.in_kernel > 0 && turns < 1000 {
            ring.turn(Some(Duration::ZERO));
            turns += 1;
        }
        let done = ops
            .iter()
            .filter(|&&id| matches!(ring.ops.slots.get(id), Some(Slot { stage: Stage::Done, res: 0, .. })))
            .count();
        ring.shut_down(Duration::from_secs(5));
        let _ = tx.send(done);
    });
    let done = rx.recv_timeout(Duration::from_secs(10)).expect("64 operations pushed through a 2-entry ring in time");
    assert_eq!(done, 64, "every operation completed, none lost in the overflow");
}

/// A ring with a posted send of `msg` and a receive into a buffer of its own queued on `socket`.
fn posted_send_then_receive(efd: &OwnedFd, socket: &UnixStream, msg: &[u8]) -> (Ring, usize, usize) {
    let mut ring = Ring::with_entries(efd.as_raw_fd(), 8).expect("io_uring");
    let fd = socket.as_raw_fd();
    let buf = msg.to_vec();
    let sqe = opcode::Send::new(types::Fd(fd), buf.as_ptr(), buf.len() as u32).flags(libc::MSG_NOSIGNAL).build();
    let send = ring.start(sqe, Keep::Posted { buf, sent: 0, fd }, false);
    let mut room = Vec::with_capacity(64);
    let sqe = opcode::Recv::new(types::Fd(fd), room.as_mut_ptr(), 64).build();
    let recv = ring.start(sqe, Keep::Buf(room), false);
    (ring, send, recv)
}

#[test]
fn a_wait_after_a_posted_send_ends_at_the_next_real_completion_not_at_the_sends() {
    let efd = eventfd();
    let (socket, peer) = UnixStream::pair().expect("socket pair");
    let (mut ring, send, recv) = posted_send_then_receive(&efd, &socket, b"response");
    // The peer, on a plain thread: sleeping there blocks no ring.
    #[allow(clippy::disallowed_methods)]
    let answer = std::thread::spawn(move || {
        let mut got = [0u8; 8];
        std::io::Read::read_exact(&mut &peer, &mut got).expect("the posted send arrives");
        std::thread::sleep(Duration::from_millis(50));
        std::io::Write::write_all(&mut &peer, b"next").expect("write");
        (got, peer)
    });
    ring.turn(Some(Duration::from_secs(10)));
    assert!(
        matches!(ring.ops.slots.get(recv), Some(Slot { stage: Stage::Done, res: 4, .. })),
        "one turn waited for the receive"
    );
    assert!(matches!(ring.ops.slots.get(send), Some(Slot { stage: Stage::Done, res: 8, .. })), "and reaped the send");
    let (got, _peer) = answer.join().expect("peer");
    assert_eq!(&got, b"response");
    ring.shut_down(Duration::from_secs(5));
}

#[test]
fn a_posted_send_that_finds_its_socket_full_holds_a_wait_only_briefly() {
    let efd = eventfd();
    let (socket, _peer) = UnixStream::pair().expect("socket pair");
    socket.set_nonblocking(true).expect("nonblocking");
    let chunk = [0u8; 4096];
    while std::io::Write::write(&mut &socket, &chunk).is_ok() {}
    // Blocking again, as every socket of the loop: the send below waits for room in the kernel.
    socket.set_nonblocking(false).expect("blocking");
    let (mut ring, send, recv) = posted_send_then_receive(&efd, &socket, b"stuck");
    let t0 = std::time::Instant::now();
    ring.turn(Some(Duration::from_secs(30)));
    let waited = t0.elapsed();
    assert!(waited < Duration::from_secs(10), "the wait was cut short, not held for the loop's 30 s: {waited:?}");
    assert!(
        matches!(ring.ops.slots.get(send), Some(Slot { stage: Stage::Pending, .. })),
        "the send still waits for room"
    );
    assert!(matches!(ring.ops.slots.get(recv), Some(Slot { stage: Stage::Pending, .. })), "and the receive for bytes");
    ring.shut_down(Duration::from_secs(5));
}
