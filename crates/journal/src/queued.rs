//! [`QueuedAppend`]: an append already in its writer's queue, whose records the caller collects
//! later (see [`Journal::append_queued`](crate::Journal::append_queued)).

use tokio::sync::oneshot;

use crate::error::{JournalError, Result};
use crate::record::LogRecord;

/// The records of an append that is queued for its commit, or already committed.
#[derive(Debug)]
pub struct QueuedAppend(Inner);

#[derive(Debug)]
enum Inner {
    /// Committed, or refused, before it was handed back (a backend without a queue of its own).
    Answered(Result<Vec<LogRecord>>),
    /// In the writer's queue: the writer answers here once the batch is committed.
    Queued(oneshot::Receiver<Result<Vec<LogRecord>>>),
}

impl QueuedAppend {
    /// An append that was already committed (or refused) when it was handed back.
    #[must_use]
    pub fn answered(result: Result<Vec<LogRecord>>) -> Self {
        Self(Inner::Answered(result))
    }

    /// An append in a writer's queue, answered on `answer`.
    #[must_use]
    pub fn queued(answer: oneshot::Receiver<Result<Vec<LogRecord>>>) -> Self {
        Self(Inner::Queued(answer))
    }

    /// The committed records, once the writer has committed them.
    ///
    /// # Errors
    /// The writer's refusal of the append (a conflict, a fence, storage), or
    /// [`JournalError::Closed`] when the writer is gone.
    pub async fn records(self) -> Result<Vec<LogRecord>> {
        match self.0 {
            Inner::Answered(result) => result,
            Inner::Queued(answer) => answer.await.map_err(|_| JournalError::Closed)?,
        }
    }
}
