//! The Watch stream (extension): a session's records from a seq on, then each one as it commits
//! on any host sharing the journal, until the session's delete record.
//!
//! ```text
//!  journal commit ─▶ Log::follow ─▶ RecordFollower ── journal.read(next ..) ──▶ [ STREAM_CAPACITY ] ─▶ client
//! ```
//!
//! Bounded like Replay: the task waits for room in the stream before reading on, and a follower
//! holds the newest head only, so a client that reads slowly (or not at all) costs one page of
//! records, never more. A client that goes away while the session is quiet is noticed at once,
//! not at the next commit.

use agentsessions_journal::RecordFollower;
use agentsessions_wire::pb;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::error::ServerError;
use crate::render::record_to_pb;

/// Streams what `follower` returns into `tx` until the session's delete record was sent (the
/// stream then ends OK), the client goes away, a read fails (the stream ends with its status)
/// or the server stops (UNAVAILABLE, so that the client knows to watch again).
pub(crate) async fn watch(
    mut follower: RecordFollower,
    tx: mpsc::Sender<Result<pb::LogRecord, Status>>,
    stop: CancellationToken,
) {
    let stopping = |tx: &mpsc::Sender<_>| {
        // Best effort: a client whose stream is full sees the stream end without the status,
        // and still knows it was cut short (no delete record came).
        drop(tx.try_send(Err(ServerError::ShuttingDown.status())));
    };
    loop {
        let next = tokio::select! {
            next = follower.next_records() => next,
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
                sent = tx.send(Ok(record_to_pb(record))) => {
                    if sent.is_err() {
                        return;
                    }
                }
                () = stop.cancelled() => return stopping(&tx),
            }
        }
    }
}
