//! One event loop per core: a single-threaded executor of `!Send` tasks in two priority queues
//! over one io_uring. Each iteration runs the ready tasks, fires due timers, then makes one
//! `io_uring_enter` that submits every queued operation and waits (if nothing is ready) until a
//! completion, the nearest timer or a wake-up from another thread.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::future::Future;
use std::marker::PhantomData;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use async_task::Runnable;

use super::ring::Ring;
use super::timer::Timers;

/// Failure to start a core's event loop.
#[derive(Debug, thiserror::Error)]
pub enum RtError {
    /// The thread, its eventfd or its ring could not be set up (io_uring disabled or too old,
    /// descriptors or memory exhausted).
    #[error("cannot start the event loop on cpu {cpu}: {reason}")]
    Spawn {
        /// The CPU the loop was meant to be pinned to (`usize::MAX`: unpinned).
        cpu: usize,
        /// What failed.
        reason: String,
    },
}

/// Which of a core's two queues a task runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TaskQueue(usize);

const LATENCY: TaskQueue = TaskQueue(0);
const BACKGROUND: TaskQueue = TaskQueue(1);

/// How many loop iterations ready background work may wait behind latency work.
const BACKGROUND_PATIENCE: u32 = 16;

/// The longest a loop waits in `io_uring_enter` after a turn that found work; each wait in a
/// row that ends with nothing to do doubles it, up to [`LONGEST_IDLE_WAIT`]. Not for anything
/// the core does (timers bound the wait themselves): valgrind (3.19) holds its thread lock
/// through `io_uring_enter`, so a core waiting without a bound stops every other core of the
/// process under callgrind, and `perf/percore.sh` hung with a core's upkeep timer at 50 ms
/// (#39); a wait that found nothing then yields the CPU, so another core takes valgrind's lock
/// (with 50 ms waits and no yield, an idle core held it for seconds). A loaded core finds work
/// before the bound; an idle one wakes 50 times a second, where its 5 ms upkeep tick used to
/// wake it 200 times.
const FIRST_IDLE_WAIT: Duration = Duration::from_millis(5);
/// See [`FIRST_IDLE_WAIT`].
const LONGEST_IDLE_WAIT: Duration = Duration::from_millis(20);

/// The task queues of one core: request work must never wait behind upkeep.
#[derive(Clone, Copy)]
pub struct CoreQueues {
    /// Sessions and everything on a statement's path.
    pub latency: TaskQueue,
    /// Control-message drain, health probes, cache upkeep, idle-connection reaping.
    pub background: TaskQueue,
}

/// What other threads may touch: tasks they woke, and the eventfd that wakes the loop.
struct Shared {
    efd: OwnedFd,
    /// Set while an eventfd write is outstanding, so a burst of wake-ups costs one write.
    kicked: AtomicBool,
    /// Set by [`Notifier::notify`]; the loop turns it into a local wake-up of [`notified`].
    notified: AtomicBool,
    remote: parking_lot::Mutex<Remote>,
}

#[derive(Default)]
struct Remote {
    /// Set once the core has ended: a task woken later is leaked, never dropped off its thread.
    closed: bool,
    woken: Vec<(TaskQueue, Runnable)>,
}

impl Shared {
    fn kick(&self) {
        if !self.kicked.swap(true, Ordering::AcqRel) {
            let one = 1u64.to_ne_bytes();
            // SAFETY: writes 8 bytes from a live buffer to an eventfd we own. A failed write
            // can only mean the counter is saturated, and then the loop is being woken anyway.
            unsafe { libc::write(self.efd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        }
    }

    fn push_remote(&self, queue: TaskQueue, runnable: Runnable) {
        let mut remote = self.remote.lock();
        if remote.closed {
            // Dropping it here would drop a `!Send` future on a foreign thread.
            std::mem::forget(runnable);
            return;
        }
        remote.woken.push((queue, runnable));
        drop(remote);
        self.kick();
    }
}

/// A core's loop state, reachable from its thread through [`with_core`].
pub(super) struct Core {
    pub(super) ring: RefCell<Ring>,
    pub(super) timers: RefCell<Timers>,
    pub(super) spares: RefCell<super::spare::Spares>,
    queues: [RefCell<VecDeque<Runnable>>; 2],
    current: Cell<TaskQueue>,
    /// Handles of live tasks: cancelled when the core ends, so no future outlives it.
    tasks: RefCell<Vec<async_task::Task<()>>>,
    prune_at: Cell<usize>,
    /// Loop iterations in a row that ran no background task although one was ready.
    background_skipped: Cell<u32>,
    notify_gen: Cell<u64>,
    notify_waiters: RefCell<Vec<Waker>>,
    /// Turns of the loop so far (see [`super::fair`]).
    turns: Cell<u64>,
    /// The bound of the next wait with nothing ready (see [`FIRST_IDLE_WAIT`]).
    idle_wait: Cell<Duration>,
    /// The clock as this turn's tasks see it (see [`clock`]).
    clock: Cell<Instant>,
    /// Nothing ran and nothing asked since `clock` was read from the real clock (see
    /// [`Core::read_now`]).
    clock_fresh: Cell<bool>,
    shared: Arc<Shared>,
}

thread_local! {
    /// The core this thread runs, null off a core (see [`Entered`]). A plain pointer in a
    /// `const` thread-local without a destructor: reaching it is one load, where the
    /// `RefCell<Option<Rc<Core>>>` it replaced cost a registration check, a borrow count and an
    /// option test on each of the ~40 reaches a transaction makes (timers, ring operations,
    /// wake-ups; #39).
    static CORE: Cell<*const Core> = const { Cell::new(std::ptr::null()) };
}

/// Runs `f` with the current thread's core; `None` off a core. Always inlined: it is a load and
/// a test, and as a call of its own (~19 a transaction) each paid a prologue and epilogue of
/// ~14 instructions around the closure it runs (#39).
#[inline(always)]
pub(super) fn with_core<R>(f: impl FnOnce(&Core) -> R) -> Option<R> {
    let core = CORE.with(Cell::get);
    // SAFETY: the pointer is non-null only while an `Entered` lives, and `run_core` keeps the
    // `Rc` it points into alive until after that guard is dropped. `Core` is reached only by
    // shared reference (its state is in cells), and only from this thread.
    unsafe { core.as_ref() }.map(f)
}

/// Makes `core` this thread's core until dropped; declared after the `Rc` it borrows from, so
/// it is dropped first, also when the loop unwinds.
struct Entered;

impl Entered {
    fn new(core: &Rc<Core>) -> Self {
        CORE.with(|c| c.set(Rc::as_ptr(core)));
        Entered
    }
}

impl Drop for Entered {
    fn drop(&mut self) {
        CORE.with(|c| c.set(std::ptr::null()));
    }
}

/// Spawns `fut` on the current core's `queue`; returns false off a core.
pub(super) fn spawn_on<F>(queue: TaskQueue, fut: F) -> bool
where
    F: Future<Output = ()> + 'static,
{
    let spawned = with_core(|core| {
        let (runnable, task) = local_task(fut, queue, core.shared.clone());
        core.tasks.borrow_mut().push(task);
        runnable
    });
    match spawned {
        Some(runnable) => {
            runnable.schedule();
            true
        }
        None => false,
    }
}

/// A task of `fut` on the core `shared` belongs to. Not `async_task::spawn_local`: that wraps
/// every future in a check of the thread's id at each poll and at its drop (a lazily set up
/// thread-local: ~57 instructions a poll, #39), a check the loop makes true by construction.
fn local_task<F>(fut: F, queue: TaskQueue, shared: Arc<Shared>) -> (Runnable, async_task::Task<()>)
where
    F: Future<Output = ()> + 'static,
{
    // SAFETY: `fut` may be `!Send`, so its `Runnable` must be run and dropped on this thread,
    // the core's: only the core's loop runs them (`run_ready`) or drops them (`shut_down`);
    // `schedule` hands one woken on another thread back to its core's list, and one woken once
    // its core has ended is leaked, never dropped (`Shared::push_remote`). The task handle is
    // kept and dropped by the core too (`Core::tasks`, `run_core`). `fut` is `'static` and the
    // schedule function `Send + Sync + 'static`, so its wakers may go anywhere.
    unsafe { async_task::spawn_unchecked(fut, move |r| schedule(&shared, queue, r)) }
}

/// A waker's way back: straight into the local queue on the core's own thread, through the
/// shared list and the eventfd from any other.
fn schedule(shared: &Arc<Shared>, queue: TaskQueue, runnable: Runnable) {
    let mut runnable = Some(runnable);
    with_core(|core| match (core.queues.get(queue.0), runnable.take()) {
        // A push, not `extend` from the option: that went through VecDeque's general extend,
        // ~45 instructions a wake-up where a push is a few (#39).
        (Some(q), Some(r)) if Arc::ptr_eq(&core.shared, shared) => q.borrow_mut().push_back(r),
        (_, r) => runnable = r,
    });
    // Off its own core (another core's thread, or this thread once its core has ended), the
    // task goes back through its core's shared list, which leaks it once that core has closed.
    if let Some(runnable) = runnable {
        shared.push_remote(queue, runnable);
    }
}

/// The queue of the task being run.
pub(super) fn current_queue() -> TaskQueue {
    with_core(|core| core.current.get()).unwrap_or(LATENCY)
}

impl Core {
    fn new(shared: Arc<Shared>) -> std::io::Result<Self> {
        Ok(Self {
            ring: RefCell::new(Ring::new(shared.efd.as_raw_fd())?),
            timers: RefCell::default(),
            spares: RefCell::default(),
            queues: Default::default(),
            current: Cell::new(LATENCY),
            tasks: RefCell::default(),
            prune_at: Cell::new(64),
            background_skipped: Cell::new(0),
            notify_gen: Cell::new(0),
            notify_waiters: RefCell::default(),
            turns: Cell::new(0),
            idle_wait: Cell::new(FIRST_IDLE_WAIT),
            clock: Cell::new(Instant::now()),
            clock_fresh: Cell::new(false),
            shared,
        })
    }

    /// The instant the tasks of this turn run at: read once a turn, as the loop's wait ends, so
    /// every deadline set, timer fired or armed and wait timed in one turn shares one clock read
    /// where each read its own (#39: ~6 a transaction, then 2 a turn). A turn's tasks run within
    /// microseconds; a session's first unit of work in a turn, and every
    /// `fair::CLOCK_EVERY`-th after it, moves it forward to that unit's start
    /// (`fair::take_share`), so a deadline is early by at most the few units that ran before it
    /// was set, never late.
    pub(super) fn clock(&self) -> Instant {
        self.clock.get()
    }

    fn read_clock(&self) {
        self.clock.set(Instant::now());
        self.clock_fresh.set(true);
    }

    /// Runs one task; the turn clock is then as old as its work.
    fn run_task(&self, r: Runnable, queue: TaskQueue) {
        self.current.set(queue);
        r.run();
        self.clock_fresh.set(false);
    }

    /// The time now, the turn clock moved forward to it: the turn's own reading when nothing
    /// ran and nothing asked since it was taken (the first unit of work a turn runs reads
    /// nothing; at one client that is the session's, #39), else a reading of the real clock.
    pub(super) fn read_now(&self) -> Instant {
        if self.clock_fresh.replace(false) {
            return self.clock.get();
        }
        let now = Instant::now();
        self.clock.set(self.clock.get().max(now));
        now
    }

    /// The number of the loop's current turn.
    pub(super) fn turn(&self) -> u64 {
        self.turns.get()
    }

    fn pop(&self, queue: TaskQueue) -> Option<Runnable> {
        self.queues.get(queue.0)?.borrow_mut().pop_front()
    }

    fn queued(&self, queue: TaskQueue) -> usize {
        self.queues.get(queue.0).map_or(0, |q| q.borrow().len())
    }

    /// Runs what is ready now: every latency task queued at the start; then, if no latency task
    /// became ready meanwhile, every queued background task. Background work waits behind
    /// requests, but never more than [`BACKGROUND_PATIENCE`] iterations (then one runs).
    fn run_ready(&self) {
        for _ in 0..self.queued(LATENCY) {
            let Some(r) = self.pop(LATENCY) else { break };
            self.run_task(r, LATENCY);
        }
        let waiting = self.queued(BACKGROUND);
        let background = if self.queued(LATENCY) == 0 {
            waiting
        } else if waiting > 0 && self.background_skipped.get() >= BACKGROUND_PATIENCE {
            1
        } else {
            self.background_skipped.set(self.background_skipped.get() + u32::from(waiting > 0));
            0
        };
        if background > 0 {
            self.background_skipped.set(0);
        }
        for _ in 0..background {
            let Some(r) = self.pop(BACKGROUND) else { break };
            self.run_task(r, BACKGROUND);
        }
    }

    /// Forgets the handles of finished tasks, amortized over spawns.
    fn prune(&self) {
        let mut tasks = self.tasks.borrow_mut();
        if tasks.len() >= self.prune_at.get() {
            tasks.retain(|t| !t.is_finished());
            self.prune_at.set((tasks.len() * 2).max(64));
        }
    }

    /// Moves tasks woken by other threads into the local queues and turns a notification into
    /// local wake-ups.
    fn take_remote(&self) {
        self.shared.kicked.store(false, Ordering::Release);
        let woken = std::mem::take(&mut self.shared.remote.lock().woken);
        for (queue, runnable) in woken {
            if let Some(q) = self.queues.get(queue.0) {
                q.borrow_mut().push_back(runnable);
            }
        }
        if self.shared.notified.swap(false, Ordering::AcqRel) {
            self.notify_gen.set(self.notify_gen.get() + 1);
            let waiters = std::mem::take(&mut *self.notify_waiters.borrow_mut());
            waiters.into_iter().for_each(Waker::wake);
        }
    }

    /// Wakes the tasks whose timers are due at `now`.
    fn fire_due(&self, now: Instant) {
        loop {
            // Taken out one at a time: what a wake-up runs must find the timers free.
            let due = self.timers.borrow_mut().pop_due(now);
            let Some(waker) = due else { break };
            waker.wake();
        }
    }

    /// Each turn: the timers due by the clock read as the last wait ended fire, their tasks run
    /// with those the completions woke, then one enter waits until a completion or the nearest
    /// timer. That wait is timed from the turn clock, so a timer that comes due while the
    /// turn's tasks run fires late by at most their running time; a clock read of its own
    /// before the timers (until #39) cost ~36 instructions a turn, and a timer's task ran a
    /// turn after the one its wait ended in.
    fn run_loop(&self, main: &async_task::Task<()>) {
        // The first turn runs before any wait: its clock is now, not when the core was built.
        self.read_clock();
        loop {
            self.turns.set(self.turns.get().wrapping_add(1));
            self.fire_due(self.clock());
            self.run_ready();
            if main.is_finished() {
                return;
            }
            self.prune();
            let wait = if self.queued(LATENCY) + self.queued(BACKGROUND) > 0 {
                self.idle_wait.set(FIRST_IDLE_WAIT);
                Some(Duration::ZERO)
            } else {
                let cap = self.idle_wait.replace((self.idle_wait.get() * 2).min(LONGEST_IDLE_WAIT));
                let now = self.clock();
                let next = self.timers.borrow_mut().next().map(|t| t.saturating_duration_since(now));
                Some(next.map_or(cap, |n| n.min(cap)))
            };
            let reaped = self.ring.borrow_mut().turn(wait);
            self.read_clock();
            if reaped.fired {
                self.take_remote();
            }
            if !reaped.any && wait.is_some_and(|w| !w.is_zero()) {
                // A wait that ran out with nothing: valgrind lets the other cores run only at a
                // system call it knows may block, and `io_uring_enter` is not one (see
                // `FIRST_IDLE_WAIT`). Costs an idle core one system call per wake-up. Not after
                // a completion that woke no task (a queued client write's, once per request at
                // one client): that wait did not run out, and a yield there hands the CPU to
                // whatever else is runnable, an involuntary context switch per request (#39).
                std::thread::yield_now();
            }
        }
    }

    /// Cancels every task (dropping its future here, on its own thread), then waits for the
    /// kernel to give back what it still holds.
    fn shut_down(&self) {
        // Taken out first, dropped after: what their drops wake or spawn must find the cells free.
        let tasks = std::mem::take(&mut *self.tasks.borrow_mut());
        drop(tasks);
        let timers = self.timers.borrow_mut().clear();
        drop(timers);
        let waiters = std::mem::take(&mut *self.notify_waiters.borrow_mut());
        drop(waiters);
        loop {
            let woken = std::mem::take(&mut self.shared.remote.lock().woken);
            let mut any = !woken.is_empty();
            drop(woken);
            for queue in [LATENCY, BACKGROUND] {
                while let Some(r) = self.pop(queue) {
                    any = true;
                    drop(r);
                }
            }
            if !any {
                break;
            }
        }
        let late = {
            let mut remote = self.shared.remote.lock();
            remote.closed = true;
            std::mem::take(&mut remote.woken)
        };
        drop(late);
        self.ring.borrow_mut().shut_down(Duration::from_secs(1));
    }
}

/// Wakes a core's loop from any thread; [`notified`] on that core completes. Lets a thread
/// that sends a core a message (a crossbeam channel) make the core look at once.
#[derive(Clone)]
pub struct Notifier {
    shared: Arc<Shared>,
}

impl Notifier {
    /// Marks the core notified and writes its eventfd (at most once until the core has looked).
    pub fn notify(&self) {
        self.shared.notified.store(true, Ordering::Release);
        self.shared.kick();
    }
}

/// Completes once a [`Notifier`] of this core has notified it after this call.
pub fn notified() -> Notified {
    Notified { seen: with_core(|core| core.notify_gen.get()), _core: PhantomData }
}

/// Future returned by [`notified`].
pub struct Notified {
    seen: Option<u64>,
    /// `!Send` and `!Sync` by type: `seen` is the notification count of the core that made it,
    /// and its waker belongs in that core's waiters, not another thread's.
    _core: PhantomData<*const ()>,
}

impl Future for Notified {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let seen = self.seen;
        let ready = with_core(|core| {
            if Some(core.notify_gen.get()) != seen {
                return true;
            }
            let mut waiters = core.notify_waiters.borrow_mut();
            if !waiters.iter().any(|w| w.will_wake(cx.waker())) {
                waiters.push(cx.waker().clone());
            }
            false
        });
        // Off a core nothing could notify it: it completes at once rather than hang.
        if ready.unwrap_or(true) {
            Poll::Ready(())
        } else {
            Poll::Pending
        }
    }
}

/// A running core: joining it waits until its loop returns.
pub struct CoreHandle {
    thread: std::thread::JoinHandle<()>,
    notifier: Notifier,
}

impl CoreHandle {
    /// Blocks the calling (non-core) thread until the core's main future finishes.
    pub fn join(self) -> Result<(), String> {
        self.thread.join().map_err(|p| super::guard::panic_message(p.as_ref()))
    }

    /// A handle that wakes this core from any thread.
    pub fn notifier(&self) -> Notifier {
        self.notifier.clone()
    }
}

/// Starts an event loop pinned to `cpu` (or unpinned when `cpu` is `None`) on its own thread and
/// runs `main(queues)` on it; the thread ends when that future returns, after cancelling every
/// task still pending.
pub fn spawn_core<F, Fut>(name: &str, cpu: Option<usize>, main: F) -> Result<CoreHandle, RtError>
where
    F: FnOnce(CoreQueues) -> Fut + Send + 'static,
    Fut: Future<Output = ()> + 'static,
{
    let err = |reason: String| RtError::Spawn { cpu: cpu.unwrap_or(usize::MAX), reason };
    // SAFETY: eventfd(2) with valid flags; the result is checked before it is owned. Blocking
    // on purpose: io_uring then waits for it instead of failing the read with EAGAIN.
    let raw = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC) };
    if raw < 0 {
        return Err(err(format!("eventfd: {}", std::io::Error::last_os_error())));
    }
    // SAFETY: `raw` is a new descriptor nobody else owns.
    let efd = unsafe { OwnedFd::from_raw_fd(raw) };
    let shared = Arc::new(Shared {
        efd,
        kicked: AtomicBool::new(false),
        notified: AtomicBool::new(false),
        remote: parking_lot::Mutex::default(),
    });
    let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
    let thread_shared = shared.clone();
    let thread = std::thread::Builder::new()
        .name(name.to_owned())
        .spawn(move || {
            if let Some(cpu) = cpu {
                if let Err(e) = pin_to(cpu) {
                    let _ = ready_tx.send(Err(format!("sched_setaffinity: {e}")));
                    return;
                }
            }
            let core = match Core::new(thread_shared) {
                Ok(core) => Rc::new(core),
                Err(e) => {
                    let _ = ready_tx.send(Err(format!("io_uring setup: {e}")));
                    return;
                }
            };
            let _ = ready_tx.send(Ok(()));
            run_core(core, main);
        })
        .map_err(|e| err(e.to_string()))?;
    match ready_rx.recv() {
        Ok(Ok(())) => Ok(CoreHandle { thread, notifier: Notifier { shared } }),
        Ok(Err(reason)) => {
            let _ = thread.join();
            Err(err(reason))
        }
        Err(_) => Err(err("the core thread exited during setup".to_owned())),
    }
}

fn run_core<F, Fut>(core: Rc<Core>, main: F)
where
    F: FnOnce(CoreQueues) -> Fut,
    Fut: Future<Output = ()> + 'static,
{
    let entered = Entered::new(&core);
    let (runnable, main_task) =
        local_task(main(CoreQueues { latency: LATENCY, background: BACKGROUND }), LATENCY, core.shared.clone());
    runnable.schedule();
    let outcome = catch_unwind(AssertUnwindSafe(|| core.run_loop(&main_task)));
    drop(main_task);
    core.shut_down();
    drop(entered);
    if let Err(panic) = outcome {
        resume_unwind(panic);
    }
}

fn pin_to(cpu: usize) -> std::io::Result<()> {
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET bounds-checks against its size.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(std::io::Error::from_raw_os_error(libc::EINVAL));
    }
    // SAFETY: `cpu` is below CPU_SETSIZE (checked above).
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pins the calling thread (pid 0) to a valid, initialized set of the right size.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}
