//! A core's client-login key derivations (SCRAM's PBKDF2), run one slice per loop turn by one
//! task in the core's background queue (#41). Sliced inside each login's own task, a storm of
//! 2,000 logins made every loop turn run 2,000 slices, and a running statement's next step
//! waited behind all of them; here a turn runs at most one slice, and only when no request is
//! ready (or after the executor's patience), so statements keep their latency while logins
//! take longer. Logins are served in arrival order, so each finishes as soon as it can rather
//! than all of them together at the end of the storm; a login whose client left is skipped.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::rc::{Rc, Weak};

use crate::protocol::pg::{Derivation, ScramSecret};
use crate::rt::{self, Event, TaskQueue};

/// HMAC rounds per slice: a few hundred microseconds of one core.
pub const DERIVE_SLICE: u32 = 256;

/// The derivations waiting on one core, and whether its worker runs.
pub struct Derivations {
    waiting: RefCell<VecDeque<Weak<Job>>>,
    working: Cell<bool>,
    queue: TaskQueue,
}

/// One login's derivation, and the event its login waits on.
struct Job {
    work: RefCell<Derivation>,
    done: Event,
}

impl Derivations {
    /// No derivation waiting; the worker will run in task queue `queue`.
    pub fn new(queue: TaskQueue) -> Rc<Self> {
        Rc::new(Self { waiting: RefCell::default(), working: Cell::new(false), queue })
    }

    /// Runs `derivation` to its last round, after the derivations that came before it, and
    /// returns the verifier it derived.
    pub async fn run(self: &Rc<Self>, derivation: Derivation) -> ScramSecret {
        let job = Rc::new(Job { work: RefCell::new(derivation), done: Event::new() });
        self.waiting.borrow_mut().push_back(Rc::downgrade(&job));
        if !self.working.replace(true) {
            let (this, after_panic) = (self.clone(), self.clone());
            rt::spawn_guarded(self.queue, async move { this.work().await }, move |msg| {
                tracing::error!(panic = %msg, "the login key derivation task panicked");
                // The next login starts a new worker; the waiting ones end at their timeout.
                after_panic.working.set(false);
            });
        }
        job.done.wait().await;
        let secret = job.work.borrow().secret();
        secret
    }

    /// Runs one slice of the oldest derivation whose login still waits, per turn of the loop,
    /// until none is left.
    async fn work(self: Rc<Self>) {
        loop {
            let next = self.waiting.borrow().front().cloned();
            let Some(next) = next else {
                self.working.set(false);
                return;
            };
            match next.upgrade() {
                Some(job) => {
                    if job.work.borrow_mut().step(DERIVE_SLICE) {
                        self.waiting.borrow_mut().pop_front();
                        job.done.set();
                    }
                }
                None => {
                    self.waiting.borrow_mut().pop_front(); // its client left
                }
            }
            rt::yield_now().await;
        }
    }
}

#[cfg(test)]
mod tests;
