//! The error vocabulary shared by every layer: a stable code, where the fault came from, and
//! whether retrying elsewhere could help. Each layer's `thiserror` enum implements [`ErrorCode`].

/// Which party a failure is attributed to, for metrics labels and log levels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Origin {
    /// The client sent something invalid or unauthorized.
    Client,
    /// A backend server failed or refused.
    Backend,
    /// The router itself (configuration, capacity, a bug).
    Internal,
}

/// Implemented by every typed error of the crate.
pub trait ErrorCode {
    /// Stable dotted identifier such as `pool.exhausted`, used in logs and metric labels.
    fn code(&self) -> &'static str;
    /// Who caused the failure.
    fn origin(&self) -> Origin;
    /// Whether the same request may succeed on another attempt or backend.
    fn retryable(&self) -> bool {
        false
    }
}
