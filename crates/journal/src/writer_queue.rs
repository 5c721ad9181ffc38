//! How a backend's callers hand a write to its writer (a thread or tasks fed by one bounded
//! channel, with group commit) and wait for the answer: each command carries an [`Ack`], sent
//! once the command's batch is durable or has failed.

use agentsessions_api::Event;
use tokio::sync::{mpsc, oneshot};
use tracing::Instrument as _;

use crate::append::Appended;
use crate::chain::PreparedEvent;
use crate::error::{JournalError, Result};
use crate::record::LogRecord;
use crate::rules;

/// Where a writer sends one command's result.
pub type Ack<T> = oneshot::Sender<Result<T>>;

/// Sends the command `make` builds around a fresh [`Ack`] and waits for its answer. Waits for
/// room when the queue is full, which is the back-pressure on callers.
///
/// # Errors
/// The command's own error; [`JournalError::Closed`] when the writer is gone (before or after
/// it took the command).
pub async fn request<C, T>(queue: &mpsc::Sender<C>, make: impl FnOnce(Ack<T>) -> C) -> Result<T> {
    let done = hand_over(queue, make).await?;
    done.await.map_err(|_| JournalError::Closed)?
}

/// Sends the command `make` builds around a fresh [`Ack`], waiting only for room in the queue;
/// returns where its answer will come.
async fn hand_over<C, T>(
    queue: &mpsc::Sender<C>,
    make: impl FnOnce(Ack<T>) -> C,
) -> Result<oneshot::Receiver<Result<T>>> {
    let (ack, done) = oneshot::channel();
    queue
        .send(make(ack))
        .await
        .map_err(|_| JournalError::Closed)?;
    Ok(done)
}

/// An append as every backend's writer receives it: checked and canonicalized on the caller's
/// task, so a bad event never reaches (or fails) a batch.
#[derive(Debug)]
pub struct Append {
    /// Session uid.
    pub session: String,
    /// The caller's CAS cursor.
    pub expected_last_seq: i64,
    /// The writer's fence, or `None` to mint the next one in the same commit.
    pub fence: Option<i64>,
    /// The events, ready to chain.
    pub events: Vec<PreparedEvent>,
    /// Whether the caller waits for durability (else only for the commit; see
    /// [`Wait::Committed`](crate::Wait::Committed)). Backends that cannot
    /// tell the two apart treat every append as durable.
    pub durable: bool,
    /// Where the records go once durable (or committed, for a deferred append).
    pub ack: Ack<Vec<LogRecord>>,
}

/// Prepares an append (see [`rules::prepare_batch`]), sends it to the writer as the command
/// `wrap` makes of it, and waits for its records.
///
/// # Errors
/// As [`rules::prepare_batch`] and [`request`], and the writer's refusal.
pub async fn append<C>(
    queue: &mpsc::Sender<C>,
    wrap: impl FnOnce(Append) -> C,
    session: &str,
    expected_last_seq: i64,
    fence: Option<i64>,
    events: Vec<Event>,
    durable: bool,
) -> Result<Vec<LogRecord>> {
    let events = rules::prepare_batch(session, events, fence.is_none())?;
    // The caller's view of the group commit its records rode in: queueing, the transaction and
    // the sync, as one span of the turn and one latency sample. A deferred append waits for no
    // sync (its records become durable with the next durable commit), so it gets no span of its
    // own: a turn's trace shows the commits it waited for, and tracing costs less per turn.
    let span = if durable {
        tracing::info_span!(
            "journal_commit",
            otel.name = "journal commit",
            // As i64: tracing-opentelemetry exports unsigned fields as strings.
            agentsessions.journal.records = i64::try_from(events.len()).unwrap_or(i64::MAX),
            agentsessions.journal.durable = true,
            expected_last_seq,
        )
    } else {
        tracing::Span::none()
    };
    let started = std::time::Instant::now();
    let appended = request(queue, |ack| {
        wrap(Append {
            session: session.to_owned(),
            expected_last_seq,
            fence,
            events,
            durable,
            ack,
        })
    })
    .instrument(span)
    .await;
    agentsessions_telemetry::metrics().journal_append(started.elapsed());
    appended
}

/// Prepares a deferred append with `fence` (or minting, `None`) and hands it to the writer as
/// the command `wrap` makes of it, without waiting for its commit (see
/// [`Wait::Queued`](crate::Wait::Queued)). Waits only for room in the
/// queue, so appends queued one after another reach the writer in that order.
///
/// # Errors
/// As [`rules::prepare_batch`]; [`JournalError::Closed`] when the writer is gone.
pub async fn queue_append<C>(
    queue: &mpsc::Sender<C>,
    wrap: impl FnOnce(Append) -> C,
    session: &str,
    expected_last_seq: i64,
    fence: Option<i64>,
    events: Vec<Event>,
) -> Result<Appended> {
    let events = rules::prepare_batch(session, events, fence.is_none())?;
    let answer = hand_over(queue, |ack| {
        wrap(Append {
            session: session.to_owned(),
            expected_last_seq,
            fence,
            events,
            durable: false,
            ack,
        })
    })
    .await?;
    Ok(Appended::queued(answer))
}
