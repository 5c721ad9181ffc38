//! What an append asks of the log ([`AppendRequest`]: the session, the cursor, how it uses the
//! fence, when it wants its answer, the events) and what it hands back ([`Appended`]: the
//! records, now or once its writer has committed them). [`Log::append`](crate::Log::append)
//! is the one way to append; [`LogExt`](crate::LogExt) adds the two shorthands tests and hosts
//! use most.

use agentsessions_api::Event;
use tokio::sync::oneshot;

use crate::error::{JournalError, Result};
use crate::record::LogRecord;

pub use crate::extension::FenceUse;

/// When an append's answer comes (see [`Log::append`](crate::Log::append)).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Wait {
    /// Once the records are durable.
    #[default]
    Durable,
    /// Once they are committed, perhaps before they are durable (the next durable append makes
    /// them durable).
    Committed,
    /// Once the append is in its writer's queue; the records come through
    /// [`Appended::records`].
    Queued,
}

/// One append.
#[derive(Debug, Clone, PartialEq)]
pub struct AppendRequest {
    /// The session appended to.
    pub session: String,
    /// The head the writer believes in (the CAS cursor).
    pub expected_last_seq: i64,
    /// The writer's fence, or mint the next one.
    pub fence: FenceUse,
    /// When the answer comes.
    pub wait: Wait,
    /// The events, appended in order, all or nothing.
    pub events: Vec<Event>,
}

impl AppendRequest {
    /// A durable append of `events` at `expected_last_seq` with `fence`.
    pub fn new(
        session: impl Into<String>,
        expected_last_seq: i64,
        fence: FenceUse,
        events: Vec<Event>,
    ) -> Self {
        Self {
            session: session.into(),
            expected_last_seq,
            fence,
            wait: Wait::Durable,
            events,
        }
    }

    /// The same append, answered as `wait` says.
    #[must_use]
    pub fn wait(mut self, wait: Wait) -> Self {
        self.wait = wait;
        self
    }
}

/// What an append hands back: its records, already known or still in its writer's queue.
#[derive(Debug)]
pub struct Appended(Inner);

#[derive(Debug)]
enum Inner {
    /// Committed, or refused, before it was handed back.
    Answered(Result<Vec<LogRecord>>),
    /// In the writer's queue: the writer answers here once the batch is committed.
    Queued(oneshot::Receiver<Result<Vec<LogRecord>>>),
}

impl Appended {
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
