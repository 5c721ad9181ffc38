//! How a backend's callers hand a write to its writer (a thread or tasks fed by one bounded
//! channel, with group commit) and wait for the answer: each command carries an [`Ack`], sent
//! once the command's batch is durable or has failed.

use tokio::sync::{mpsc, oneshot};

use crate::error::{JournalError, Result};

/// Where a writer sends one command's result.
pub type Ack<T> = oneshot::Sender<Result<T>>;

/// Sends the command `make` builds around a fresh [`Ack`] and waits for its answer. Waits for
/// room when the queue is full, which is the back-pressure on callers.
///
/// # Errors
/// The command's own error; [`JournalError::Closed`] when the writer is gone (before or after
/// it took the command).
pub async fn request<C, T>(queue: &mpsc::Sender<C>, make: impl FnOnce(Ack<T>) -> C) -> Result<T> {
    let (ack, done) = oneshot::channel();
    queue
        .send(make(ack))
        .await
        .map_err(|_| JournalError::Closed)?;
    done.await.map_err(|_| JournalError::Closed)?
}
