//! Panic containment: a panicking session must close itself, be counted, and leave its core alive.

use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::pin::Pin;
use std::task::{Context, Poll};

use super::executor::{self, TaskQueue};

/// Polls the inner future inside `catch_unwind`, turning a panic into `Err(message)`.
/// Boxing costs one allocation per session and keeps this free of `unsafe` pin projection.
struct CatchUnwind<F> {
    inner: Pin<Box<F>>,
}

impl<F: Future> Future for CatchUnwind<F> {
    type Output = Result<F::Output, String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let inner = self.inner.as_mut();
        // The session owns all state the future touches; after a panic that state is dropped
        // with the future, so no broken invariant is observed later.
        match catch_unwind(AssertUnwindSafe(|| inner.poll(cx))) {
            Ok(Poll::Ready(v)) => Poll::Ready(Ok(v)),
            Ok(Poll::Pending) => Poll::Pending,
            Err(payload) => Poll::Ready(Err(panic_message(payload.as_ref()))),
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
    // Boxed before the async block captures it: captured by value, the unstarted block would
    // hold the whole session future inline and the task allocation would be as big as the box.
    let inner = CatchUnwind { inner: Box::pin(fut) };
    let guarded = async move {
        if let Err(msg) = inner.await {
            on_panic(msg);
        }
    };
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
