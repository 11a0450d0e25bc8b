//! Panic containment: a panicking session must close itself, be counted, and leave its core alive.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::executor::{self, TaskQueue};

/// Polls the inner future inside `catch_unwind`; a panic drops it, then runs `on_panic` with
/// the panic's message. One layer per poll, where an `async` block awaiting a `catch_unwind`
/// wrapper made two (#39). Boxing costs one allocation per session and keeps this free of
/// `unsafe` pin projection.
struct Guarded<F, P> {
    /// `None` once it panicked.
    inner: Option<Pin<Box<F>>>,
    on_panic: Option<P>,
}

// Nothing in it is pinned in place: the future is in its box, and `on_panic` is only moved.
impl<F, P> Unpin for Guarded<F, P> {}

impl<F: Future<Output = ()>, P: FnOnce(String)> Future for Guarded<F, P> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        let Some(inner) = this.inner.as_mut() else { return Poll::Ready(()) };
        // The session owns all state the future touches; after a panic that state is dropped
        // with the future (before `on_panic` runs), so no broken invariant is observed later.
        match catch_unwind(AssertUnwindSafe(|| inner.as_mut().poll(cx))) {
            Ok(polled) => polled,
            Err(payload) => {
                this.inner = None;
                if let Some(on_panic) = this.on_panic.take() {
                    on_panic(panic_message(payload.as_ref()));
                }
                Poll::Ready(())
            }
        }
    }
}

/// The text of a panic payload (`&str` and `String` payloads; anything else is named as such).
pub(super) fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_owned()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_owned()
    }
}

/// Spawns `fut` detached on `queue` of the current core; if it panics, `on_panic` runs with the
/// panic message instead of the panic unwinding into the loop. The task is cancelled (its
/// future dropped) if the core ends first.
pub fn spawn_guarded<F>(queue: TaskQueue, fut: F, on_panic: impl FnOnce(String) + 'static)
where
    F: Future<Output = ()> + 'static,
{
    // Boxed: held inline, the whole session future would be in the task's allocation, and the
    // task as big as the box.
    let guarded = Guarded { inner: Some(Box::pin(fut)), on_panic: Some(on_panic) };
    if !executor::spawn_on(queue, guarded) {
        tracing::error!("a task was spawned off a core and dropped");
    }
}

/// The task queue of the running task (to spawn helpers next to it).
pub fn current_queue() -> TaskQueue {
    executor::current_queue()
}

/// Spawns a detached helper task on the current task queue, contained like a session.
pub fn spawn_local<F>(fut: F)
where
    F: Future<Output = ()> + 'static,
{
    spawn_guarded(current_queue(), fut, |msg| tracing::error!(panic = %msg, "helper task panicked"));
}
