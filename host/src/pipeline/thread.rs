//! Starting and joining a pipeline's named threads.

use std::thread::JoinHandle;

use super::error::RunError;

/// Start a named pipeline thread.
pub(crate) fn spawn<T: Send + 'static>(
    name: &str,
    work: impl FnOnce() -> Result<T, RunError> + Send + 'static,
) -> Result<JoinHandle<Result<T, RunError>>, RunError> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(work)
        .map_err(|source| RunError::Thread { name: name.to_string(), source })
}

/// Wait for a pipeline thread, turning a panic into an error.
pub(crate) fn join<T>(thread: JoinHandle<Result<T, RunError>>, what: &str) -> Result<T, RunError> {
    thread.join().unwrap_or_else(|_| Err(RunError::Panicked(what.to_string())))
}
