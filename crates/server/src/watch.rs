//! The Watch stream (extension): a session's records from a seq on, then each one as it commits
//! on any host sharing the journal, until the session's delete record. WatchUpdates is the same
//! stream with the session's running tools' progress between the records (extensions §11).
//!
//! ```text
//!  journal commit ─▶ Log::follow ─▶ RecordFollower ── journal.read(next ..) ──▶ [ STREAM_CAPACITY ] ─▶ client
//!  tool progress ─▶ ProgressBus ─▶ ProgressWatch (WatchUpdates only) ───────────────┘
//! ```
//!
//! Bounded like Replay: the task waits for room in the stream before reading on, and a follower
//! holds the newest head only, so a client that reads slowly (or not at all) costs one page of
//! records, never more. A client that goes away while the session is quiet is noticed at once,
//! not at the next commit. Records are read as they commit and handed out once durable, a
//! deferred one (an OUTPUT, a TOOL_RESULT) included.

use agentsessions_journal::RecordFollower;
use agentsessions_placement::ProgressWatch;
use agentsessions_wire::pb;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::error::ServerError;
use crate::render::record_to_pb;
use crate::streams::progress_to_pb;

/// What a Watch-like stream sends: Watch's bare records, or WatchUpdates' frames.
pub(crate) trait WatchFrame: Send + 'static {
    /// The frame of a record.
    fn record(record: pb::LogRecord) -> Self;
    /// The frame of a tool's progress.
    fn progress(progress: pb::ToolProgress) -> Self;
}

impl WatchFrame for pb::LogRecord {
    fn record(record: pb::LogRecord) -> Self {
        record
    }

    /// Never made: a Watch stream is given no progress to send.
    fn progress(_progress: pb::ToolProgress) -> Self {
        Self::default()
    }
}

impl WatchFrame for pb::WatchUpdate {
    fn record(record: pb::LogRecord) -> Self {
        Self {
            update: Some(pb::watch_update::Update::Record(record)),
        }
    }

    fn progress(progress: pb::ToolProgress) -> Self {
        Self {
            update: Some(pb::watch_update::Update::Progress(progress)),
        }
    }
}

/// Streams what `follower` returns into `tx` (and, when given, `progress` between the records)
/// until the session's delete record was sent (the stream then ends OK), the client goes away,
/// a read fails (the stream ends with its status) or the server stops (UNAVAILABLE, so that the
/// client knows to watch again).
pub(crate) async fn watch<F: WatchFrame>(
    mut follower: RecordFollower,
    mut progress: Option<ProgressWatch>,
    tx: mpsc::Sender<Result<F, Status>>,
    stop: CancellationToken,
) {
    let stopping = |tx: &mpsc::Sender<_>| {
        // Best effort: a client whose stream is full sees the stream end without the status,
        // and still knows it was cut short (no delete record came).
        drop(tx.try_send(Err(ServerError::ShuttingDown.status())));
    };
    loop {
        let reported = async {
            match progress.as_mut() {
                Some(progress) => progress.next().await,
                None => std::future::pending().await,
            }
        };
        let next = tokio::select! {
            next = follower.next_records() => next,
            report = reported => {
                // Transport only: a client with no room for it misses it.
                if let Err(mpsc::error::TrySendError::Closed(_)) =
                    tx.try_send(Ok(F::progress(progress_to_pb(report))))
                {
                    return;
                }
                continue;
            }
            () = tx.closed() => return,
            () = stop.cancelled() => return stopping(&tx),
        };
        let records = match next {
            Ok(Some(records)) => records,
            // The delete record went out: dropping the sender ends the stream OK.
            Ok(None) => return,
            Err(e) => {
                let failed = Err(ServerError::from(e).status());
                tokio::select! {
                    _sent = tx.send(failed) => {}
                    () = stop.cancelled() => {}
                }
                return;
            }
        };
        for record in &records {
            tokio::select! {
                sent = tx.send(Ok(F::record(record_to_pb(record)))) => {
                    if sent.is_err() {
                        return;
                    }
                }
                () = stop.cancelled() => return stopping(&tx),
            }
        }
    }
}
