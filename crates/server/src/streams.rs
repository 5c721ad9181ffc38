//! The Exec and Replay response streams, bounded: a slow client slows its own stream, never the
//! daemon's memory.
//!
//! Replay's producer simply waits for room in the channel. A turn cannot wait for a client (the
//! controller's [`Observer`] is synchronous, and a client that stops reading must not hold the
//! session), so an Exec stream that fills up falls *behind*: records stop being queued, and
//! the Exec task sends the ones it missed again from the journal, which already holds them,
//! waiting for room as Replay does. Deltas are transport only (semantics §2.7): one that finds
//! the stream full, or behind, is dropped; the complete OUTPUT record still follows.
//!
//! ```text
//!  turn ──record──► ExecObserver ──try_send──► [ STREAM_CAPACITY ] ──► client
//!                        │ full: behind from seq n                ▲
//!                        └──► ExecFeed::follow ── journal.read(n..) ┘ send().await
//! ```

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use agentsessions_api::Delta;
use agentsessions_controller::Observer;
use agentsessions_journal::{Journal, LogRecord};
use agentsessions_wire::pb;
use agentsessions_wire::pb::exec_update::Update;
use tokio::sync::{Notify, mpsc};
use tokio_stream::wrappers::ReceiverStream;
use tokio_util::sync::CancellationToken;
use tonic::Status;

use crate::error::ServerError;
use crate::render::record_to_pb;

/// Items an Exec or Replay stream holds for a client that has not read them yet.
pub const STREAM_CAPACITY: usize = 64;
/// Records per journal read when streaming a Replay or catching an Exec stream up.
const PAGE: i64 = 1_000;

/// The stream an Exec answers with.
pub type ExecStream = ReceiverStream<Result<pb::ExecUpdate, Status>>;
/// The stream a Replay answers with.
pub type ReplayStream = ReceiverStream<Result<pb::LogRecord, Status>>;
/// The stream a Watch (extension) answers with: the same records as Replay's, bounded the same
/// way (`crate::watch`).
pub type WatchStream = ReplayStream;

/// The sending side of one Exec stream.
pub(crate) struct ExecFeed {
    tx: mpsc::Sender<Result<pb::ExecUpdate, Status>>,
    lag: Arc<Lag>,
    /// The server is shutting down: stop waiting for this client.
    stop: CancellationToken,
}

/// Where the live stream stands against the turn's records.
struct Lag {
    state: Mutex<LagState>,
    wake: Notify,
}

#[derive(Default)]
struct LagState {
    /// The first record that found the stream full; set while the stream is behind.
    behind_from: Option<i64>,
    /// The newest record the turn committed.
    last_seq: i64,
    /// The turn returned: no more records will come.
    ended: bool,
    /// The client went away; nothing more is sent.
    gone: bool,
}

impl Lag {
    fn state(&self) -> MutexGuard<'_, LagState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

impl ExecFeed {
    /// A feed and the stream its client reads.
    pub(crate) fn channel(stop: CancellationToken) -> (Self, ExecStream) {
        let (tx, rx) = mpsc::channel(STREAM_CAPACITY);
        let lag = Arc::new(Lag {
            state: Mutex::new(LagState::default()),
            wake: Notify::new(),
        });
        (Self { tx, lag, stop }, ReceiverStream::new(rx))
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
        if self.lag.state().gone {
            return false;
        }
        let sent = tokio::select! {
            sent = self.tx.send(item) => sent.is_ok(),
            () = self.stop.cancelled() => false,
        };
        if !sent {
            self.lag.state().gone = true;
        }
        sent
    }

    /// The observer a turn forwards its records and deltas through.
    pub(crate) fn observer(&self) -> Arc<dyn Observer> {
        Arc::new(ExecObserver {
            tx: self.tx.clone(),
            lag: Arc::clone(&self.lag),
        })
    }

    /// Runs `turn` on session `uid` while sending the records the stream fell behind on from
    /// `journal`; returns the turn's outcome once the stream has every record the turn
    /// committed (or the client left, or the server stops).
    pub(crate) async fn follow<T>(
        &self,
        journal: &dyn Journal,
        uid: &str,
        turn: impl Future<Output = T>,
    ) -> T {
        let turn = async {
            let outcome = turn.await;
            self.lag.state().ended = true;
            self.lag.wake.notify_one();
            outcome
        };
        let (outcome, ()) = tokio::join!(turn, self.catch_up(journal, uid));
        outcome
    }

    async fn catch_up(&self, journal: &dyn Journal, uid: &str) {
        loop {
            let behind = {
                let state = self.lag.state();
                if state.gone || (state.ended && state.behind_from.is_none()) {
                    return;
                }
                state.behind_from.map(|from| (from, state.last_seq))
            };
            let Some((from, to)) = behind else {
                // A permit stored by a wake before this wait makes it return at once.
                self.lag.wake.notified().await;
                continue;
            };
            if !self.resend(journal, uid, from, to).await {
                self.lag.state().gone = true;
                return;
            }
            let mut state = self.lag.state();
            state.behind_from = (state.last_seq > to).then_some(to + 1);
        }
    }

    /// Sends records `from..=to` of `uid` again from the journal; false when the stream ended.
    async fn resend(&self, journal: &dyn Journal, uid: &str, from: i64, to: i64) -> bool {
        let mut next = from;
        while next <= to {
            let last = next.saturating_add(PAGE - 1).min(to);
            match journal.read(uid, next, last).await {
                Ok(records) if records.is_empty() => return true,
                Ok(records) => {
                    for record in &records {
                        if !self.send(Update::Record(record_to_pb(record))).await {
                            return false;
                        }
                    }
                    // `to` may be i64::MAX (a client's range): stop there, never past it.
                    match last.checked_add(1) {
                        Some(after) => next = after,
                        None => return true,
                    }
                }
                Err(e) => {
                    self.fail(&ServerError::from(e)).await;
                    return false;
                }
            }
        }
        true
    }
}

/// Forwards a running turn's committed records and deltas to its Exec stream, in order, without
/// ever waiting for the client.
struct ExecObserver {
    tx: mpsc::Sender<Result<pb::ExecUpdate, Status>>,
    lag: Arc<Lag>,
}

/// What became of an update offered to the stream.
enum Offered {
    Queued,
    Full,
    Gone,
}

impl ExecObserver {
    fn offer(&self, update: Update) -> Offered {
        let item = Ok(pb::ExecUpdate {
            update: Some(update),
        });
        match self.tx.try_send(item) {
            Ok(()) => Offered::Queued,
            Err(mpsc::error::TrySendError::Full(_)) => Offered::Full,
            Err(mpsc::error::TrySendError::Closed(_)) => Offered::Gone,
        }
    }
}

impl Observer for ExecObserver {
    fn record(&self, record: &LogRecord) {
        let mut state = self.lag.state();
        state.last_seq = state.last_seq.max(record.seq);
        if state.gone || state.behind_from.is_some() {
            return;
        }
        match self.offer(Update::Record(record_to_pb(record))) {
            Offered::Queued => {}
            Offered::Full => {
                state.behind_from = Some(record.seq);
                drop(state);
                self.lag.wake.notify_one();
            }
            // A client that went away does not stop the turn (semantics §2.2 step 6).
            Offered::Gone => state.gone = true,
        }
    }

    fn delta(&self, delta: &Delta) {
        let mut state = self.lag.state();
        if state.gone || state.behind_from.is_some() {
            return;
        }
        let update = Update::Delta(pb::Delta {
            execution_id: delta.execution_id.clone(),
            part_index: delta.part_index,
            chunk: delta.chunk.clone(),
            done: delta.done,
        });
        match self.offer(update) {
            Offered::Queued | Offered::Full => {}
            Offered::Gone => state.gone = true,
        }
    }
}

/// The channel of one Replay stream.
pub(crate) fn replay_channel() -> (mpsc::Sender<Result<pb::LogRecord, Status>>, ReplayStream) {
    let (tx, rx) = mpsc::channel(STREAM_CAPACITY);
    (tx, ReceiverStream::new(rx))
}

/// Streams records `from..=to` of `session` into `tx`, a page at a time, waiting for room;
/// stops when the client goes away or `stop` fires.
pub(crate) async fn replay(
    journal: Arc<dyn Journal>,
    session: String,
    (from, to): (i64, i64),
    tx: mpsc::Sender<Result<pb::LogRecord, Status>>,
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
                    if !send(Ok(record_to_pb(record))).await {
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
