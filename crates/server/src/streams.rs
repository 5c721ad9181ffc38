//! The Exec and Replay response streams, bounded: a slow client slows its own stream, never the
//! daemon's memory.
//!
//! Replay's producer simply waits for room in the channel. An Exec stream forwards its turn's
//! events from placement's one bounded channel ([`TurnEvents`]), waiting for room as Replay
//! does: the turn never waits for the client, because that channel falls *behind* when it fills
//! up and reads the records it missed from the journal, which already holds them. Deltas are
//! transport only (semantics §2.7): one that finds the turn's channel full, or behind, is
//! dropped; the complete OUTPUT record still follows. A running tool's progress (extensions §11)
//! comes from the session's [`ProgressWatch`] between them, transport only as well.
//!
//! ```text
//!  turn ──► TurnEvents [ TURN_EVENT_CAPACITY ] ──► ExecFeed::forward ──send().await──► [ EXEC_FRAMES ] ──► client
//!              └─ full: behind from seq n ─ journal.read(n..) ─┘
//! ```

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use agentsessions_controller::ToolProgress;
use agentsessions_journal::Journal;
use agentsessions_placement::{ProgressWatch, TurnEvent, TurnEvents};
use agentsessions_wire::pb;
use agentsessions_wire::pb::exec_update::Update;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::error::ServerError;
use crate::render::record_to_pb;
use crate::watch::WatchFrame;

/// Items a Replay or Watch stream holds for a client that has not read them yet (an Exec
/// stream's turn holds as many in its own channel, [`agentsessions_placement::TURN_EVENT_CAPACITY`],
/// plus its frames in transit).
pub const STREAM_CAPACITY: usize = 64;
/// Frames an Exec stream holds in transit to its client: its turn's events wait in the turn's
/// own bounded channel, so this only hands them over.
const EXEC_FRAMES: usize = 8;
/// Records per journal read when streaming a Replay.
const PAGE: i64 = 1_000;

/// The stream an Exec answers with.
pub type ExecStream = ReceiverStream<Result<pb::ExecUpdate, Status>>;
/// The stream a Replay answers with.
pub type ReplayStream = ReceiverStream<Result<pb::LogRecord, Status>>;
/// The stream a Watch (extension) answers with: the same records as Replay's, bounded the same
/// way (`crate::watch`).
pub type WatchStream = ReplayStream;
/// The stream a WatchUpdates (extension) answers with: Watch's records with the session's tool
/// progress between them.
pub type WatchUpdatesStream = ReceiverStream<Result<pb::WatchUpdate, Status>>;

/// The sending side of one Exec stream.
pub(crate) struct ExecFeed {
    tx: mpsc::Sender<Result<pb::ExecUpdate, Status>>,
    /// The client went away (or the server stops): nothing more is sent.
    gone: AtomicBool,
    /// The server is shutting down: stop waiting for this client.
    stop: CancellationToken,
}

impl ExecFeed {
    /// A feed and the stream its client reads.
    pub(crate) fn channel(stop: CancellationToken) -> (Self, ExecStream) {
        let (tx, rx) = mpsc::channel(EXEC_FRAMES);
        let feed = Self {
            tx,
            gone: AtomicBool::new(false),
            stop,
        };
        (feed, ReceiverStream::new(rx))
    }

    /// Sends `update`, waiting for room; false once the client is gone or the server stops.
    pub(crate) async fn send(&self, update: Update) -> bool {
        self.send_item(Ok(pb::ExecUpdate {
            update: Some(update),
        }))
        .await
    }

    /// Ends the stream with `err`'s status.
    pub(crate) async fn fail(&self, err: &ServerError) {
        let _sent = self.send_item(Err(err.status())).await;
    }

    async fn send_item(&self, item: Result<pb::ExecUpdate, Status>) -> bool {
        if self.gone.load(Ordering::Acquire) {
            return false;
        }
        let sent = tokio::select! {
            sent = self.tx.send(item) => sent.is_ok(),
            () = self.stop.cancelled() => false,
        };
        if !sent {
            self.gone.store(true, Ordering::Release);
        }
        sent
    }

    /// Sends a turn's `events` as they come, with its session's tool `progress` between them,
    /// waiting for room; returns once the turn returned and every record it committed was
    /// sent, or the client left, or the server stops. A client that goes away does not stop
    /// the turn (semantics §2.2 step 6): the events are dropped and the turn runs on.
    pub(crate) async fn forward(&self, mut events: TurnEvents, mut progress: ProgressWatch) {
        loop {
            let event = tokio::select! {
                event = events.next() => match event {
                    Some(event) => event,
                    None => return,
                },
                report = progress.next() => {
                    if !self.send(Update::Progress(progress_to_pb(report))).await {
                        return;
                    }
                    continue;
                }
            };
            let update = match event {
                Ok(TurnEvent::Record(record)) => Update::Record(record_to_pb(&record)),
                Ok(TurnEvent::Delta(delta)) => Update::Delta(pb::Delta {
                    execution_id: delta.execution_id,
                    part_index: delta.part_index,
                    chunk: delta.chunk,
                    done: delta.done,
                }),
                // The stream says a turn runs with its EXECUTION_START record.
                Ok(TurnEvent::Opened { .. }) => continue,
                Err(err) => {
                    self.fail(&ServerError::from(err)).await;
                    self.gone.store(true, Ordering::Release);
                    return;
                }
            };
            if !self.send(update).await {
                return;
            }
        }
    }
}

/// A tool's progress as the streams send it (extensions §11).
pub(crate) fn progress_to_pb(progress: ToolProgress) -> pb::ToolProgress {
    pb::ToolProgress {
        execution_id: progress.execution_id,
        tool_call_id: progress.tool_call_id,
        tool: progress.tool,
        progress: progress.progress,
        total: progress.total,
        message: progress.message,
    }
}

/// The sending end of a Replay or Watch-like stream.
pub(crate) type FrameSender<F> = mpsc::Sender<Result<F, Status>>;

/// The channel of one Replay (or Watch) stream.
pub(crate) fn replay_channel<F>() -> (FrameSender<F>, ReceiverStream<Result<F, Status>>) {
    let (tx, rx) = mpsc::channel(STREAM_CAPACITY);
    (tx, ReceiverStream::new(rx))
}

/// Streams records `from..=to` of `session` into `tx`, a page at a time, waiting for room;
/// stops when the client goes away or `stop` fires.
pub(crate) async fn replay<F: WatchFrame>(
    journal: Arc<dyn Journal>,
    session: String,
    (from, to): (i64, i64),
    tx: mpsc::Sender<Result<F, Status>>,
    stop: CancellationToken,
) {
    let send = |item| async {
        tokio::select! {
            sent = tx.send(item) => sent.is_ok(),
            () = stop.cancelled() => false,
        }
    };
    let mut next = from;
    while next <= to {
        let last = next.saturating_add(PAGE - 1).min(to);
        match journal.read(&session, next, last).await {
            Ok(records) if records.is_empty() => return,
            Ok(records) => {
                for record in &records {
                    if !send(Ok(F::record(record_to_pb(record)))).await {
                        return;
                    }
                }
                match last.checked_add(1) {
                    Some(after) => next = after,
                    None => return,
                }
            }
            Err(e) => {
                let _sent = send(Err(ServerError::from(e).status())).await;
                return;
            }
        }
    }
}
