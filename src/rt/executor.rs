//! One glommio executor per CPU, with the two task queues every core uses.

use std::time::Duration;

use glommio::{executor, Latency, LocalExecutorBuilder, Placement, Shares, TaskQueueHandle};

/// Failure to start a core's executor thread.
#[derive(Debug, thiserror::Error)]
pub enum RtError {
    /// glommio refused to build the executor (CPU not available, io_uring setup, memlock).
    #[error("cannot start executor on cpu {cpu}: {reason}")]
    Spawn {
        /// The CPU the executor was meant to be pinned to.
        cpu: usize,
        /// glommio's explanation.
        reason: String,
    },
}

/// A running core: joining it waits until its executor returns.
pub struct CoreHandle {
    inner: glommio::ExecutorJoinHandle<()>,
}

impl CoreHandle {
    /// Blocks the calling (non-core) thread until the core's main future finishes.
    pub fn join(self) -> Result<(), String> {
        self.inner.join().map_err(|e| e.to_string())
    }
}

/// The task queues of one core: request work must never wait behind upkeep.
#[derive(Clone, Copy)]
pub struct CoreQueues {
    /// Sessions and everything on a statement's path.
    pub latency: TaskQueueHandle,
    /// Control-message drain, health probes, cache upkeep, idle-connection reaping.
    pub background: TaskQueueHandle,
}

/// io_uring registered-buffer memory per core. Small on purpose: the router does socket I/O
/// only, and RLIMIT_MEMLOCK defaults to 8 MiB for non-root users (see tuning.md).
const IO_MEMORY: usize = 512 * 1024;

/// Starts an executor pinned to `cpu` (or unpinned when `cpu` is `None`) on its own thread and
/// runs `main(queues)` on it; the thread ends when that future returns.
pub fn spawn_core<F, Fut>(name: &str, cpu: Option<usize>, main: F) -> Result<CoreHandle, RtError>
where
    F: FnOnce(CoreQueues) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + 'static,
{
    let placement = match cpu {
        Some(c) => Placement::Fixed(c),
        None => Placement::Unbound,
    };
    let inner = LocalExecutorBuilder::new(placement)
        .name(name)
        .io_memory(IO_MEMORY)
        .preempt_timer(Duration::from_millis(50))
        .spawn(move || async move {
            let ex = executor();
            let queues = CoreQueues {
                latency: ex.create_task_queue(Shares::Static(1000), Latency::NotImportant, "latency"),
                background: ex.create_task_queue(Shares::Static(50), Latency::NotImportant, "background"),
            };
            main(queues).await
        })
        .map_err(|e| RtError::Spawn { cpu: cpu.unwrap_or(usize::MAX), reason: e.to_string() })?;
    Ok(CoreHandle { inner })
}
