//! One io_uring per core: socket operations submitted with the resources the kernel may touch
//! (buffers, addresses, sockets) owned by the ring until their completion arrives, so a dropped
//! future can never leave the kernel writing into freed memory.
//!
//! Invariant: memory lent to the kernel is freed only with proof ([`Quiet`]) that no operation
//! is left in the kernel. When the ring goes away with operations still there (a shutdown whose
//! cancellations did not come back in time), that memory is leaked: the kernel may write into
//! it until the io_uring's exit work has cancelled them, after the descriptor is closed.

use std::future::Future;
use std::io;
use std::marker::PhantomData;
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::pin::Pin;
use std::ptr::NonNull;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use io_uring::{opcode, squeue, types, IoUring};

use super::executor::with_core;
use super::provided::Provided;

/// `user_data` of the eventfd read that wakes the core from other threads.
const EVENTFD_OP: u64 = u64::MAX;
/// `user_data` of cancellations: their own completions carry nothing we need.
const CANCEL_OP: u64 = u64::MAX - 1;
/// Submission queue size; the completion queue is twice that, and the kernel keeps overflowed
/// completions (IORING_FEAT_NODROP) rather than losing them.
const ENTRIES: u32 = 1024;
/// The longest a wait that also counts on the completions of the posted sends it submits may
/// last (see [`Ring::turn`]): such a send that finds its socket full completes only once the
/// peer reads, and a real completion could otherwise wait for that or the loop's full wait.
/// Unit tests wait longer, so that a peer thread's write comes within it on a loaded host.
const QUIET_WAIT_MAX: Duration = if cfg!(test) { Duration::from_secs(1) } else { Duration::from_millis(1) };

/// What the kernel may read or write while an operation is in flight; released only once the
/// completion has arrived.
pub(super) enum Keep {
    /// Nothing beyond the descriptor, which its owner keeps open.
    Nothing,
    /// A receive or send buffer. While the operation is in flight the kernel writes (receive)
    /// or reads (send) its heap memory, so the `Vec` is only moved, never looked into, until
    /// the completion: no reference to its contents exists meanwhile.
    Buf(Vec<u8>),
    /// A receive into a buffer the kernel picks from the core's provided ring when bytes arrive.
    Select,
    /// The provided buffer a completed [`Keep::Select`] receive filled; it goes back to the ring
    /// once read (or when nobody will).
    Picked(u16),
    /// A send its writer did not wait for (see `io::write_all`): `sent` bytes of `buf` have
    /// left. After a short send the ring sends the rest itself, so the message leaves whole and
    /// in order without its task. `fd` is the stream's, open while the send is pending: dropping
    /// the stream orphans the send first, and an orphan is never continued.
    Posted {
        /// Read by the kernel until the last send completes; never by us meanwhile.
        buf: Vec<u8>,
        /// A `u32`, so that the variant is no larger than the others (a slot per connection).
        sent: u32,
        fd: RawFd,
    },
    /// An accept: a successful result is a new descriptor, owned as `Fd` on completion.
    Accept,
    /// An accepted connection.
    Fd(OwnedFd),
    /// A connect: the address the kernel reads and the socket being connected.
    Connect {
        /// Read by the kernel until completion; never by us.
        _addr: Box<socket2::SockAddr>,
        /// The socket, handed back once connected.
        fd: OwnedFd,
    },
}

/// Where a slot's operation is.
#[derive(Clone, Copy)]
enum Stage {
    Free,
    /// In the kernel; the slot's waker is the task waiting for it.
    Pending,
    /// Completed, not yet taken by its future; the slot's `res` is the kernel's result.
    Done,
    /// In the kernel, its future dropped: the resources go when the completion arrives.
    Orphan,
}

/// One operation's place. A struct with its stage beside the resources, not an enum holding
/// them per stage: a completion then changes the stage and the result in place, where moving
/// the resources from one variant into the next (twice, through the send's continuation and
/// the accept's descriptor) cost ~150 instructions a completion (#39).
struct Slot {
    stage: Stage,
    res: i32,
    waker: Option<Waker>,
    /// `Keep::Nothing` while free.
    keep: Keep,
}

impl Slot {
    const FREE: Slot = Slot { stage: Stage::Free, res: 0, waker: None, keep: Keep::Nothing };
}

/// Proof that the kernel holds no operation of the ring: what operations pointed into may be
/// freed. Only [`Ring::quiet`] makes one.
pub(super) struct Quiet(());

/// What one turn of the ring reaped.
pub(super) struct Reaped {
    /// The eventfd fired: another thread woke a task of this core or notified it.
    pub fired: bool,
    /// Some completion came, even one that woke no task (a queued client write's): the wait
    /// did not end idle.
    pub any: bool,
}

/// The operations' places, apart from the io_uring: a turn then walks the completion queue in
/// place (a borrow of the io_uring) while it changes the slots, where copying every completion
/// out first cost ~170 instructions a transaction (#39).
struct Ops {
    slots: Vec<Slot>,
    /// Per slot, the generation of its current operation (in its `user_data`).
    gens: Vec<u32>,
    free: Vec<usize>,
    /// Operations the kernel still holds (pending and orphaned).
    in_kernel: usize,
}

/// The ring, its operations in flight and the eventfd read.
pub(super) struct Ring {
    ring: IoUring,
    /// Buffers receives may select; unmapped only when the ring is quiet (see the module doc).
    provided: Option<Provided>,
    ops: Ops,
    efd: i32,
    /// The eventfd read's 8 bytes, which the kernel writes: held by raw pointer (no reference
    /// to it exists) and freed only when quiet.
    efd_buf: NonNull<u64>,
    efd_armed: bool,
    /// Completions [`Ring::push`] set aside to make room (user data, result, flags), copied out
    /// of the queue; handled by the next reap before the queue's own.
    reaped: Vec<(u64, i32, u32)>,
    /// The kernel defers completions until we enter for them and flags when some are waiting
    /// (DEFER_TASKRUN with TASKRUN_FLAG): a turn that need not wait can then tell an enter that
    /// would do nothing, and skip it.
    flags_deferred: bool,
    /// Posted sends queued since the last enter (see [`Ring::turn`]).
    quiet_sends: u32,
    /// Stands in for a kernel before 5.19 in tests: a submission is refused with EBUSY while
    /// completions wait in the kernel's overflow list and the completion queue is full.
    #[cfg(test)]
    refuse_while_overflowed: bool,
}

impl Ring {
    /// A ring for the calling thread. SINGLE_ISSUER with DEFER_TASKRUN (Linux 6.1: completions
    /// are finished only when this thread enters the kernel to reap them, never by interrupting
    /// it) or else COOP_TASKRUN (no inter-processor interrupt per completion) are used when the
    /// kernel has them.
    pub(super) fn new(efd: i32) -> io::Result<Self> {
        Self::with_entries(efd, ENTRIES)
    }

    /// A ring whose submission queue holds `entries` operations (tests use tiny ones).
    fn with_entries(efd: i32, entries: u32) -> io::Result<Self> {
        let deferred =
            IoUring::builder().setup_single_issuer().setup_defer_taskrun().setup_taskrun_flag().build(entries);
        let flags_deferred = deferred.is_ok();
        let ring = deferred
            .or_else(|_| IoUring::builder().setup_coop_taskrun().setup_single_issuer().build(entries))
            .or_else(|_| IoUring::new(entries))?;
        if !ring.params().is_feature_ext_arg() {
            return Err(io::Error::new(
                io::ErrorKind::Unsupported,
                "io_uring without IORING_FEAT_EXT_ARG (Linux < 5.11)",
            ));
        }
        let provided = match Provided::register(&ring) {
            Ok(p) => Some(p),
            Err(e) => {
                tracing::debug!(error = %e, "no provided buffer ring (Linux < 5.19?): receives use their own buffers");
                None
            }
        };
        let mut me = Self {
            ring,
            provided,
            ops: Ops { slots: Vec::new(), gens: Vec::new(), free: Vec::new(), in_kernel: 0 },
            efd,
            efd_buf: NonNull::from(Box::leak(Box::new(0u64))),
            efd_armed: false,
            reaped: Vec::new(),
            flags_deferred,
            quiet_sends: 0,
            #[cfg(test)]
            refuse_while_overflowed: false,
        };
        me.arm_eventfd();
        Ok(me)
    }

    fn push(&mut self, sqe: &squeue::Entry) {
        // SAFETY: every pointer in `sqe` points into memory owned by a slot (or by `self`)
        // until the operation's completion is reaped.
        while unsafe { self.ring.submission().push(sqe) }.is_err() {
            self.make_room();
        }
    }

    /// The submission queue is full: hands it to the kernel. A kernel before 5.19 refuses any
    /// submission with EBUSY while completions wait in its overflow list, and moves them into
    /// the completion queue only once there is room there; retrying without reaping spun
    /// forever. So the completion queue is emptied first, its entries set aside in order for
    /// the next reap (handled there, not here: waking tasks from inside `push` is not wanted).
    /// Returns whether the kernel still refused (it had more overflowed completions than the
    /// queue holds: the next call moves more).
    #[cold]
    fn make_room(&mut self) -> bool {
        self.set_aside();
        match self.submit_queued() {
            Ok(_) => false,
            Err(e) => {
                if !matches!(e.raw_os_error(), Some(libc::EINTR | libc::EBUSY)) {
                    tracing::error!(error = %e, "io_uring submit failed");
                }
                e.raw_os_error() == Some(libc::EBUSY)
            }
        }
    }

    /// Moves the completions waiting in the queue to `reaped`, freeing their entries.
    fn set_aside(&mut self) {
        self.reaped.extend(self.ring.completion().map(|c| (c.user_data(), c.result(), c.flags())));
    }

    /// Submits what is queued without waiting.
    fn submit_queued(&mut self) -> io::Result<usize> {
        #[cfg(test)]
        if self.refuse_while_overflowed && self.ring.submission().cq_overflow() && self.ring.completion().is_full() {
            return Err(io::Error::from_raw_os_error(libc::EBUSY));
        }
        self.ring.submit()
    }

    fn arm_eventfd(&mut self) {
        let sqe = opcode::Read::new(types::Fd(self.efd), self.efd_buf.as_ptr().cast(), 8).build().user_data(EVENTFD_OP);
        self.push(&sqe);
        self.efd_armed = true;
    }

    /// Queues `sqe` (its `user_data` is set here) with the resources it points into. `answered`:
    /// a send whose completion, like a posted one's, need not end the next wait by itself (see
    /// [`Op::start_answered`]).
    fn start(&mut self, sqe: squeue::Entry, keep: Keep, answered: bool) -> usize {
        let posted = answered || matches!(keep, Keep::Posted { .. });
        let ops = &mut self.ops;
        let id = match ops.free.pop() {
            Some(id) => id,
            None => {
                ops.slots.push(Slot::FREE);
                ops.gens.push(0);
                ops.slots.len() - 1
            }
        };
        if let Some(slot) = ops.slots.get_mut(id) {
            // A free slot holds no waker and nothing kept.
            slot.stage = Stage::Pending;
            set_keep(&mut slot.keep, keep);
        }
        ops.in_kernel += 1;
        let ud = ops.user_data(id);
        self.push_counted(sqe.user_data(ud), posted);
        id
    }

    /// Queues `sqe`, counting it among the posted sends the next wait expects if it is one.
    fn push_counted(&mut self, sqe: squeue::Entry, posted: bool) {
        self.quiet_sends += u32::from(posted);
        self.push(&sqe);
    }

    fn cancel(&mut self, id: usize) {
        let target = self.ops.gens.get(id).map_or(0, |g| u64::from(*g) << 32) | id as u64;
        self.push(&opcode::AsyncCancel::new(target).build().user_data(CANCEL_OP));
    }

    /// One `io_uring_enter`: submits every queued operation and waits up to `wait` (`None`:
    /// until something completes) for a completion. Then reaps every completion, waking their
    /// tasks.
    ///
    /// A posted send usually completes during the submission itself, and its completion wakes
    /// no task: waiting for one completion would end the wait at once, for a turn with nothing
    /// to do and a second enter (#39: one per request at one client). So a wait counts on
    /// them: it ends at the first completion beyond the posted sends submitted. One that finds
    /// its socket full holds that wait up to [`QUIET_WAIT_MAX`] at most.
    pub(super) fn turn(&mut self, wait: Option<Duration>) -> Reaped {
        // Completions set aside by `push` are ready already: do not wait for more.
        let wait = if self.reaped.is_empty() { wait } else { Some(Duration::ZERO) };
        let quiet = std::mem::take(&mut self.quiet_sends);
        let (want, wait) = match wait {
            Some(d) if quiet > 0 && !d.is_zero() => (quiet.saturating_add(1), Some(d.min(QUIET_WAIT_MAX))),
            None if quiet > 0 => (quiet.saturating_add(1), Some(QUIET_WAIT_MAX)),
            other => (1, other),
        };
        let res = match wait {
            // With TASKRUN_FLAG the kernel flags pending deferred completions and `submit` then
            // enters with GETEVENTS, which finishes them.
            Some(d) if d.is_zero() && self.enter_is_idle() => Ok(0),
            Some(d) if d.is_zero() => self.ring.submit(),
            Some(d) => {
                let ts = types::Timespec::from(d);
                self.ring.submitter().submit_with_args(want as usize, &types::SubmitArgs::new().timespec(&ts))
            }
            None => self.ring.submit_and_wait(1),
        };
        if let Err(e) = res {
            // ETIME: the wait timed out; EINTR: a signal; EBUSY: the completion queue is full
            // and is reaped below.
            if !matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR | libc::EBUSY)) {
                tracing::error!(error = %e, "io_uring_enter failed");
            }
        }
        self.reap()
    }

    /// Whether an enter that does not wait would do nothing: nothing queued to submit, no
    /// deferred completion flagged, none overflowed. Known only where the kernel flags deferred
    /// completions; elsewhere every turn enters.
    fn enter_is_idle(&mut self) -> bool {
        let sq = self.ring.submission();
        self.flags_deferred && sq.is_empty() && !sq.taskrun() && !sq.cq_overflow()
    }

    /// Handles the completions set aside by [`Ring::push`], then the queue's own where they lie
    /// (their entries are freed when the queue's borrow ends). Nothing here pushes (which may
    /// set completions aside) until the queue is released: the rest of a short posted send and
    /// the eventfd read are queued after.
    fn reap(&mut self) -> Reaped {
        let mut fired = false;
        let mut rest = Vec::new();
        let mut any = !self.reaped.is_empty();
        if any {
            let mut aside = std::mem::take(&mut self.reaped);
            for &(ud, res, flags) in &aside {
                fired |= self.ops.complete(ud, res, flags, self.provided.as_mut(), &mut rest);
            }
            aside.clear();
            self.reaped = aside;
        }
        for cqe in self.ring.completion() {
            any = true;
            fired |= self.ops.complete(cqe.user_data(), cqe.result(), cqe.flags(), self.provided.as_mut(), &mut rest);
        }
        for (id, sqe) in rest {
            let ud = self.ops.user_data(id);
            self.push_counted(sqe.user_data(ud), true);
        }
        if fired {
            self.efd_armed = false;
            self.arm_eventfd();
        }
        Reaped { fired, any }
    }

    /// Proof that no operation is left in the kernel, if none is.
    fn quiet(&self) -> Option<Quiet> {
        (self.ops.in_kernel == 0 && !self.efd_armed).then_some(Quiet(()))
    }

    /// Cancels everything still in the kernel and waits (at most `limit`) for it to come back,
    /// so the buffers can be freed when the core ends. If something does not come back in time,
    /// dropping the ring leaks what it lent the kernel rather than freeing it.
    pub(super) fn shut_down(&mut self, limit: Duration) {
        let ids: Vec<usize> = (0..self.ops.slots.len())
            .filter(|i| matches!(self.ops.slots.get(*i).map(|s| s.stage), Some(Stage::Pending | Stage::Orphan)))
            .collect();
        for id in ids {
            self.cancel(id);
        }
        if self.efd_armed {
            self.push(&opcode::AsyncCancel::new(EVENTFD_OP).build().user_data(CANCEL_OP));
        }
        let until = Instant::now() + limit;
        while self.ops.in_kernel > 0 || self.efd_armed {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return;
            }
            let _ = self.ring.submitter().submit_with_args(1, &types::SubmitArgs::new().timespec(&left.into()));
            self.set_aside();
            for (ud, res, flags) in std::mem::take(&mut self.reaped) {
                if ud == EVENTFD_OP {
                    self.efd_armed = false;
                    continue;
                }
                let Some(id) = self.ops.slot_of(ud).filter(|_| ud != CANCEL_OP) else { continue };
                let Some(slot) = self.ops.slots.get_mut(id) else { continue };
                if matches!(slot.stage, Stage::Pending | Stage::Orphan) {
                    self.ops.in_kernel -= 1;
                    own_result(&mut slot.keep, res, flags);
                    let old = std::mem::replace(slot, Slot::FREE);
                    drop(old);
                }
            }
        }
    }
}

impl Drop for Ring {
    /// Frees what the kernel was lent only if it holds no operation any more; otherwise leaks it
    /// (see the module doc). The io_uring itself closes after this, which makes the kernel
    /// cancel what is left.
    fn drop(&mut self) {
        let Some(quiet) = self.quiet() else {
            tracing::error!(ops = self.ops.in_kernel, "io_uring operations did not finish; leaking their memory");
            std::mem::forget(std::mem::take(&mut self.ops.slots));
            return;
        };
        if let Some(provided) = self.provided.take() {
            provided.free(&self.ring, &quiet);
        }
        // SAFETY: made by `Box::leak` in `with_entries`; no read into it is in the kernel.
        drop(unsafe { Box::from_raw(self.efd_buf.as_ptr()) });
    }
}

impl Ops {
    /// The slot index in the low half and the slot's generation in the high half, so a late
    /// cancellation aimed at a finished operation can never hit the slot's next operation.
    fn user_data(&mut self, id: usize) -> u64 {
        let gen = self.gens.get_mut(id).map_or(0, |g| {
            *g = g.wrapping_add(1) & 0x7fff_ffff;
            *g
        });
        (u64::from(gen) << 32) | id as u64
    }

    /// The slot a completion's `user_data` names, unless it is stale.
    fn slot_of(&self, ud: u64) -> Option<usize> {
        let id = (ud & 0xffff_ffff) as usize;
        (self.gens.get(id).map(|g| u64::from(*g)) == Some(ud >> 32)).then_some(id)
    }

    /// Frees a completed operation's slot; returns what it kept.
    fn release(&mut self, id: usize) -> Keep {
        let Some(slot) = self.slots.get_mut(id) else { return Keep::Nothing };
        slot.stage = Stage::Free;
        self.free.push(id);
        std::mem::replace(&mut slot.keep, Keep::Nothing)
    }

    /// Handles one completion: wakes its task, or frees an orphan's slot and resources, or adds
    /// the rest of a short posted send to `rest` (its slot stays in the kernel). Returns whether
    /// it was the eventfd read's. Inlined into the loop over the queue: four calls a
    /// transaction, each paying a frame for a few branches.
    #[inline(always)]
    fn complete(
        &mut self,
        ud: u64,
        res: i32,
        flags: u32,
        provided: Option<&mut Provided>,
        rest: &mut Vec<(usize, squeue::Entry)>,
    ) -> bool {
        if ud == EVENTFD_OP {
            return true;
        }
        let Some(id) = self.slot_of(ud).filter(|_| ud != CANCEL_OP) else { return false };
        let Some(slot) = self.slots.get_mut(id) else { return false };
        match slot.stage {
            Stage::Pending => {
                let res = match posted_rest(&mut slot.keep, res) {
                    // Still in the kernel, as its next send.
                    Ok(sqe) => {
                        rest.push((id, sqe));
                        return false;
                    }
                    Err(res) => res,
                };
                own_result(&mut slot.keep, res, flags);
                slot.stage = Stage::Done;
                slot.res = res;
                let waker = slot.waker.take();
                self.in_kernel -= 1;
                if let Some(w) = waker {
                    w.wake();
                }
            }
            Stage::Orphan => {
                own_result(&mut slot.keep, res, flags);
                let keep = std::mem::replace(&mut slot.keep, Keep::Nothing);
                slot.stage = Stage::Free;
                self.in_kernel -= 1;
                self.free.push(id);
                give_back(provided, keep);
            }
            Stage::Free | Stage::Done => {}
        }
        false
    }
}

/// Returns a provided buffer nobody will read to the kernel; drops anything else kept.
fn give_back(provided: Option<&mut Provided>, keep: Keep) {
    if let (Keep::Picked(bid), Some(p)) = (keep, provided) {
        p.give_back(bid);
    }
}

/// Puts `new` in `keep` and drops what was there only if it owns something: the variants that
/// own nothing need no drop, which as an out-of-line `drop_in_place` call cost ~15 instructions
/// on each operation started and each receive's or accept's completion (#39).
fn set_keep(keep: &mut Keep, new: Keep) {
    let old = std::mem::replace(keep, new);
    if matches!(old, Keep::Nothing | Keep::Select | Keep::Accept | Keep::Picked(_)) {
        std::mem::forget(old);
    } else {
        drop(old);
    }
}

/// A posted send's next step after a completion with result `res`: `Ok` with the send of the
/// rest while bytes are left and the socket took some (or the send was interrupted); `Err` with
/// the outcome once it is over: every byte sent (the result is then the message's length, as a
/// whole send's would be) or failed. Its buffer then goes straight back to the core's spares, so
/// a client that goes idle after its answer holds none. Any other operation is over at its first
/// completion. Inlined into the completion loop: out of line (once `recycle` was inlined into
/// it) its frame cost ~150 instructions a transaction (#39).
#[inline(always)]
fn posted_rest(keep: &mut Keep, res: i32) -> Result<squeue::Entry, i32> {
    let Keep::Posted { buf, sent, fd } = keep else { return Err(res) };
    // At most the length the send was given, which fits.
    let total = sent.saturating_add(u32::try_from(res).unwrap_or(0));
    let left = buf.len().saturating_sub(total as usize);
    let failed = res == 0 || (res < 0 && res != -libc::EINTR && res != -libc::EAGAIN);
    if left == 0 || failed {
        // Moved out rather than dropped in place (see `set_keep`).
        if let Keep::Posted { mut buf, .. } = std::mem::replace(keep, Keep::Nothing) {
            super::recycle(&mut buf);
        }
        return Err(if left == 0 { i32::try_from(total).unwrap_or(i32::MAX) } else { res });
    }
    *sent = total;
    // `total` is within `buf`, so the pointer stays inside its allocation, which the slot
    // keeps where it is until the send completes.
    let from = buf.as_ptr().wrapping_add(total as usize);
    let len = u32::try_from(left).unwrap_or(u32::MAX);
    Ok(opcode::Send::new(types::Fd(*fd), from, len).flags(libc::MSG_NOSIGNAL).build())
}

/// An accept's successful result is a descriptor we now own (and must close if nobody takes it);
/// a selecting receive's is the provided buffer it filled. Changed in place.
fn own_result(keep: &mut Keep, res: i32, flags: u32) {
    match keep {
        // SAFETY: the kernel just created this descriptor for us; nothing else owns it.
        Keep::Accept if res >= 0 => set_keep(keep, Keep::Fd(unsafe { OwnedFd::from_raw_fd(res) })),
        Keep::Select => {
            if let Some(bid) = io_uring::cqueue::buffer_select(flags) {
                set_keep(keep, Keep::Picked(bid));
            }
        }
        _ => {}
    }
}

/// An operation in flight on the current core's ring; resolves to the kernel's result (a
/// negative errno on failure) and the resources handed over at submission. Dropping it before
/// completion cancels the operation (IORING_OP_ASYNC_CANCEL); its resources stay with the ring
/// until the completion arrives.
pub(super) struct Op {
    /// The slot's index plus one: four bytes, so that a stream's two operations and a
    /// connection carrying them stay small (#39: connections move by value on every checkout).
    id: Option<NonZeroU32>,
    /// `!Send` and `!Sync` by type: the slot `id` names is in the ring of the core that started
    /// the operation, and on another thread `with_core` would find another ring.
    _core: PhantomData<*const ()>,
}

impl Op {
    /// Submits `sqe` (which points into `keep`) on the current core's ring.
    pub(super) fn start(sqe: squeue::Entry, keep: Keep) -> io::Result<Op> {
        Op::submit(sqe, keep, false)
    }

    /// Submits `sqe`, a send whose peer answers into a receive already in the kernel, on the
    /// current core's ring. Its completion comes during the submission that carries it, and
    /// waking its task then would cost a loop turn (and an enter) before the task awaits the
    /// answer it was going to await anyway (#39: one per statement at one client); so, like a
    /// posted send, it does not end the next wait by itself, which ends with the answer's
    /// receive (or any other completion, a timer, or [`QUIET_WAIT_MAX`]).
    pub(super) fn start_answered(sqe: squeue::Entry, keep: Keep) -> io::Result<Op> {
        Op::submit(sqe, keep, true)
    }

    fn submit(sqe: squeue::Entry, keep: Keep, answered: bool) -> io::Result<Op> {
        let id = with_core(|core| core.ring.borrow_mut().start(sqe, keep, answered))
            .ok_or_else(|| io::Error::other("not on a querypilot core"))?;
        // A slot per operation in flight, each holding its resources: 2^32 of them cannot fit in
        // memory, so the error below is never met (the operation would be left to the ring).
        let id = u32::try_from(id + 1).ok().and_then(NonZeroU32::new);
        Ok(Op { id: Some(id.ok_or_else(|| io::Error::other("too many operations in flight"))?), _core: PhantomData })
    }

    /// The index of its slot while it is in flight.
    fn slot(&self) -> Option<usize> {
        self.id.map(|id| id.get() as usize - 1)
    }

    /// Whether the kernel holds a buffer of ours for this operation (a provided one does not
    /// count).
    #[cfg(test)]
    pub(super) fn holds_buffer(&self) -> bool {
        let Some(id) = self.slot() else { return false };
        with_core(|core| {
            matches!(
                core.ring.borrow().ops.slots.get(id),
                Some(Slot { stage: Stage::Pending | Stage::Done, keep: Keep::Buf(_), .. })
            )
        })
        .unwrap_or(false)
    }

    /// Asks the kernel to cancel the operation while its future stays: awaiting it then gives
    /// the cancellation's result, or the operation's own if it completed first (an accepted
    /// connection, a received message, is then not lost to the cancel).
    pub(super) fn cancel(&self) {
        if let Some(id) = self.slot() {
            with_core(|core| {
                let mut ring = core.ring.borrow_mut();
                if matches!(ring.ops.slots.get(id).map(|s| s.stage), Some(Stage::Pending)) {
                    ring.cancel(id);
                }
            });
        }
    }

    /// Whether the completion has arrived (the future would be ready).
    pub(super) fn is_done(&self) -> bool {
        let Some(id) = self.slot() else { return true };
        with_core(|core| matches!(core.ring.borrow().ops.slots.get(id).map(|s| s.stage), Some(Stage::Done)))
            .unwrap_or(true)
    }
}

impl Future for Op {
    type Output = (i32, Keep);

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<(i32, Keep)> {
        let Some(id) = self.slot() else { return Poll::Ready((-libc::ECANCELED, Keep::Nothing)) };
        let polled = with_core(|core| {
            let mut ring = core.ring.borrow_mut();
            let slot = ring.ops.slots.get_mut(id)?;
            match slot.stage {
                Stage::Pending => {
                    if !slot.waker.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
                        slot.waker = Some(cx.waker().clone());
                    }
                    Some(Poll::Pending)
                }
                Stage::Done => {
                    let res = slot.res;
                    Some(Poll::Ready((res, ring.ops.release(id))))
                }
                Stage::Free | Stage::Orphan => None,
            }
        });
        match polled.flatten() {
            Some(Poll::Pending) => Poll::Pending,
            Some(Poll::Ready(out)) => {
                self.id = None;
                Poll::Ready(out)
            }
            None => {
                self.id = None;
                Poll::Ready((-libc::ECANCELED, Keep::Nothing))
            }
        }
    }
}

impl Drop for Op {
    fn drop(&mut self) {
        let Some(id) = self.slot() else { return };
        self.id = None;
        // The slot's old content (a waker, a completed accept's descriptor) is dropped after the
        // ring is released: dropping a waker may schedule a task.
        let _old = with_core(|core| {
            let mut ring = core.ring.borrow_mut();
            let slot = ring.ops.slots.get_mut(id)?;
            match slot.stage {
                Stage::Pending => {
                    slot.stage = Stage::Orphan;
                    let waker = slot.waker.take();
                    ring.cancel(id);
                    Some((waker, None))
                }
                Stage::Done => {
                    let keep = match ring.ops.release(id) {
                        keep @ Keep::Picked(_) => {
                            give_back(ring.provided.as_mut(), keep);
                            None
                        }
                        other => Some(other),
                    };
                    Some((None, keep))
                }
                Stage::Free | Stage::Orphan => None,
            }
        });
    }
}

/// Whether receives on this core can select provided buffers.
pub(super) fn selects_buffers() -> bool {
    with_core(|core| core.ring.borrow().provided.is_some()).unwrap_or(false)
}

/// Appends the first `n` bytes of provided buffer `bid` to `out` and gives the buffer back.
pub(super) fn copy_picked(bid: u16, n: usize, out: &mut Vec<u8>) {
    with_core(|core| {
        if let Some(p) = core.ring.borrow_mut().provided.as_mut() {
            p.copy_out(bid, n, out);
        }
    });
}

/// Hands the queued submissions to the kernel now. Called before a descriptor with operations
/// still queued is closed: a queued SQE names the descriptor by number, and a number reused by
/// the next socket must not receive it.
pub(super) fn flush() {
    with_core(|core| {
        let mut ring = core.ring.borrow_mut();
        while ring.make_room() {}
    });
}

/// The raw descriptor of anything owning one, for building an SQE.
pub(super) fn fd_of(f: &impl AsRawFd) -> types::Fd {
    types::Fd(f.as_raw_fd())
}

#[cfg(test)]
mod tests;
