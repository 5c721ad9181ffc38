//! How the writer's committed batches become durable and reach their callers: the
//! [`Watermark`] readers wait on, and the `journal-sync` thread that fdatasyncs the WAL off the
//! writer thread in [`Durability::Pipelined`](crate::Durability::Pipelined).

use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use agentsessions_journal::{JournalError, Result};

use super::outcome::{Done, Failure};

/// Committed batches that may wait for `journal-sync` before the writer waits too.
const MAX_UNSETTLED_BATCHES: usize = 64;

/// The error for a write whose batch committed but whose WAL sync failed: it may or may not
/// survive a crash, and nothing more is written (after a failed fsync the kernel may already
/// have dropped the dirty pages, so a later successful one proves nothing).
pub(super) fn sync_failed(reason: &str) -> JournalError {
    JournalError::Io(std::io::Error::other(format!(
        "syncing the journal's WAL failed, so the journal refuses further writes: {reason}"
    )))
}

/// A batch the writer has committed (or failed), on its way to its callers.
pub(crate) struct Batch {
    /// The [`Watermark`] count when it committed.
    pub(super) id: u64,
    /// When it committed: a batch nobody waits for is synced by this plus the linger at latest.
    pub(super) committed: Instant,
    pub(super) done: Vec<Done>,
    pub(super) outcome: Result<(), Failure>,
}

impl Batch {
    /// Whether any caller waits for this batch's sync (else all were told at commit).
    fn awaited(&self) -> bool {
        !self.done.is_empty()
    }

    fn settle(self, sync_failure: Option<&str>) {
        match (self.outcome, sync_failure) {
            (Ok(()), None) => self.done.into_iter().for_each(Done::send),
            (Ok(()), Some(reason)) => self
                .done
                .into_iter()
                .for_each(|d| d.fail(|| sync_failed(reason))),
            (Err(failure), _) => self
                .done
                .into_iter()
                .for_each(|d| d.fail(|| failure.error())),
        }
    }
}

/// How far the batches have got, so that readers can wait for durability: in
/// [`Durability::Pipelined`](crate::Durability::Pipelined) a committed batch is visible before
/// its WAL sync.
#[derive(Debug, Default)]
pub(crate) struct Watermark {
    /// Batches whose COMMIT has begun; other connections may see their rows from then on.
    committing: AtomicU64,
    synced: Mutex<Synced>,
    changed: Condvar,
    /// The same news as `changed`, for readers waiting on a tokio worker.
    changed_async: tokio::sync::Notify,
    /// WAL syncs made so far, for tests and benchmarks that count a turn's durable waits.
    syncs: AtomicU64,
    /// Batches handed to `journal-sync` so far, for tests and benchmarks that count hand-offs.
    handoffs: AtomicU64,
    /// Times the writer went to sleep on an empty queue, for tests and benchmarks of its spin.
    writer_sleeps: AtomicU64,
}

#[derive(Debug, Default)]
struct Synced {
    /// Every batch up to this count is durable, or failed.
    through: u64,
    /// Set for good by a failed WAL sync.
    failure: Option<String>,
}

impl Watermark {
    pub(super) fn begin_commit(&self) -> u64 {
        self.committing.fetch_add(1, Ordering::SeqCst) + 1
    }

    pub(super) fn current(&self) -> u64 {
        self.committing.load(Ordering::SeqCst)
    }

    pub(super) fn failure(&self) -> Option<String> {
        self.lock().failure.clone()
    }

    /// WAL syncs made since the journal opened.
    pub(crate) fn syncs(&self) -> u64 {
        self.syncs.load(Ordering::Relaxed)
    }

    /// Batches handed to `journal-sync` since the journal opened.
    pub(crate) fn handoffs(&self) -> u64 {
        self.handoffs.load(Ordering::Relaxed)
    }

    /// Times the writer has gone to sleep on an empty queue since the journal opened.
    pub(crate) fn writer_sleeps(&self) -> u64 {
        self.writer_sleeps.load(Ordering::Relaxed)
    }

    pub(super) fn writer_sleeps_now(&self) {
        self.writer_sleeps.fetch_add(1, Ordering::Relaxed);
    }

    fn settled_through(&self) -> u64 {
        self.lock().through
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Synced> {
        self.synced.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn settle(&self, through: u64, failure: Option<&str>) {
        let mut synced = self.lock();
        synced.through = synced.through.max(through);
        if synced.failure.is_none() {
            synced.failure = failure.map(str::to_owned);
        }
        drop(synced);
        self.changed.notify_all();
        self.changed_async.notify_waiters();
    }

    /// Fails every wait for durability, now and later: the writer is gone (it panicked), so
    /// nothing it committed will be synced or settled. Without this a reader waiting for a batch
    /// the writer held would wait for ever.
    pub(super) fn writer_stopped(&self) {
        self.settle(
            u64::MAX,
            Some("the journal's writer stopped (a bug: its panic is in the log)"),
        );
    }

    /// Whether every batch up to `target` is durable: `None` while one is not yet, else the
    /// verdict.
    fn durable_through(&self, target: u64) -> Option<Result<()>> {
        let synced = self.lock();
        match &synced.failure {
            Some(reason) => Some(Err(sync_failed(reason))),
            None => (synced.through >= target).then_some(Ok(())),
        }
    }

    /// [`Watermark::wait_durable`] without blocking the thread: for reads run on a tokio
    /// worker. The target is taken when this is called (so call it right after the query), not
    /// when the future is first polled.
    ///
    /// # Errors
    /// The WAL sync failure that stopped the journal.
    pub(crate) fn durable(&self) -> impl std::future::Future<Output = Result<()>> + '_ {
        let target = self.current();
        async move {
            loop {
                // Registered before the check, so a settle between the two still wakes it.
                let mut changed = std::pin::pin!(self.changed_async.notified());
                changed.as_mut().enable();
                if let Some(verdict) = self.durable_through(target) {
                    return verdict;
                }
                changed.await;
            }
        }
    }

    /// Waits until every batch whose COMMIT had begun by now is durable. A read that calls this
    /// after its query therefore returns nothing that an OS crash could still take back.
    ///
    /// # Errors
    /// The WAL sync failure that stopped the journal.
    pub(crate) fn wait_durable(&self) -> Result<()> {
        let target = self.current();
        let mut synced = self.lock();
        while synced.through < target && synced.failure.is_none() {
            synced = self
                .changed
                .wait(synced)
                .unwrap_or_else(PoisonError::into_inner);
        }
        match &synced.failure {
            Some(reason) => Err(sync_failed(reason)),
            None => Ok(()),
        }
    }
}

/// Makes `batches` durable and acknowledges their callers in commit order. Each batch returned
/// from COMMIT before this call, so its WAL frames are written and one fdatasync of `wal` covers
/// them all; without `wal` their COMMIT synced them already.
fn settle_all(batches: &mut Vec<Batch>, wal: Option<&File>, watermark: &Watermark) {
    let through = batches.iter().map(|b| b.id).max().unwrap_or_default();
    let committed = batches.iter().any(|b| b.outcome.is_ok());
    let synced = match wal {
        Some(wal) if committed => {
            let started = Instant::now();
            let synced = wal.sync_data().map_err(|e| e.to_string());
            agentsessions_telemetry::metrics().journal_fsync(started.elapsed());
            watermark.syncs.fetch_add(1, Ordering::Relaxed);
            synced
        }
        _ => Ok(()),
    };
    // Recorded before anything is acknowledged, so that no later sync — which may succeed once
    // the kernel has reported the error — lets another batch through.
    let failure = synced.err().or_else(|| watermark.failure());
    watermark.settle(through, failure.as_deref());
    for batch in batches.drain(..) {
        batch.settle(failure.as_deref());
    }
}

/// How the writer gets its committed batches durable.
pub(crate) enum Syncer {
    /// `synchronous=FULL`: COMMIT synced the batch, acknowledge it at once.
    InCommit,
    /// `synchronous=NORMAL`: COMMIT only wrote the WAL, which is fdatasync'd before the batch is
    /// acknowledged — by `journal-sync` while the writer goes on, or by the writer itself when
    /// nothing else waits. The two never sync at the same time: the writer syncs only once
    /// `journal-sync` has settled everything it was handed, and hands it nothing meanwhile. (They
    /// share one open file description, so a write-back error is reported to exactly one of them.)
    Wal(Box<WalSyncer>),
}

/// The WAL side of [`Syncer`].
pub(crate) struct WalSyncer {
    wal: File,
    to_thread: std_mpsc::SyncSender<Batch>,
    thread: std::thread::JoinHandle<()>,
    /// Highest batch id handed to `journal-sync`.
    handed_off: u64,
    /// How long a batch nobody waits for may wait for company.
    linger: Duration,
    /// Batches of deferred appends the idle writer holds, waiting for a durable append to share
    /// their sync (so a turn's durable append is synced where it committed, without waking
    /// `journal-sync`), until `linger_until`.
    lingering: Vec<Batch>,
    linger_until: Option<Instant>,
    /// Whether the writer can wait with a deadline (see [`Syncer::writer_can_linger`]); when it
    /// cannot, `journal-sync` holds the lingering batches instead.
    writer_lingers: bool,
}

impl Syncer {
    /// Starts `journal-sync` for the WAL file `wal`. It holds batches nobody waits for
    /// (deferred appends only) up to `linger` before syncing them, so that the durable append
    /// that usually follows shares their sync.
    pub(crate) fn spawn(
        wal: File,
        watermark: std::sync::Arc<Watermark>,
        linger: Duration,
    ) -> std::io::Result<Self> {
        let thread_wal = wal.try_clone()?;
        // Bounded so that a WAL that syncs slower than the writer commits stalls the writer
        // (and through its full queue the appenders) instead of piling up unacknowledged batches.
        let (to_thread, batches) = std_mpsc::sync_channel::<Batch>(MAX_UNSETTLED_BATCHES);
        let thread = std::thread::Builder::new()
            .name("journal-sync".to_owned())
            .spawn(move || {
                let mut pending = Vec::new();
                while let Ok(first) = batches.recv() {
                    let until = first.committed + linger;
                    pending.push(first);
                    pending.extend(batches.try_iter());
                    while !pending.iter().any(Batch::awaited) {
                        let left = until.saturating_duration_since(Instant::now());
                        let Ok(next) = batches.recv_timeout(left) else {
                            break;
                        };
                        pending.push(next);
                        pending.extend(batches.try_iter());
                    }
                    settle_all(&mut pending, Some(&thread_wal), &watermark);
                }
            })?;
        Ok(Self::Wal(Box::new(WalSyncer {
            wal,
            to_thread,
            thread,
            handed_off: 0,
            linger,
            lingering: Vec::new(),
            linger_until: None,
            writer_lingers: false,
        })))
    }

    /// Lets the writer hold batches of deferred appends itself: it can now wait for its next
    /// command with a deadline ([`Syncer::linger_deadline`]).
    pub(super) fn writer_can_linger(&mut self) {
        if let Self::Wal(wal) = self {
            wal.writer_lingers = true;
        }
    }

    /// When the writer must stop waiting for commands to sync what it holds.
    pub(super) fn linger_deadline(&self) -> Option<Instant> {
        match self {
            Self::InCommit => None,
            Self::Wal(wal) => wal.linger_until,
        }
    }

    /// Gets `batch` durable and acknowledged, now or on `journal-sync`, or holds it for company;
    /// `idle` says no command is waiting. False when `journal-sync` is gone.
    pub(super) fn settle(&mut self, batch: Batch, idle: bool, watermark: &Watermark) -> bool {
        let Self::Wal(wal) = self else {
            settle_all(&mut vec![batch], None, watermark);
            return true;
        };
        if !batch.awaited() && wal.writer_lingers {
            // Nobody waits for it: held for the durable append that usually follows, idle or
            // not (its caller, told at commit, is often already sending that append).
            let due = *wal.linger_until.get_or_insert(batch.committed + wal.linger);
            wal.lingering.push(batch);
            return Instant::now() < due || self.linger_over(watermark);
        }
        wal.lingering.push(batch);
        // With no command waiting there is nothing to overlap a sync with, so the writer syncs
        // here, once `journal-sync` has nothing left of its own.
        if batch_is_due_here(idle, watermark, wal.handed_off) {
            wal.linger_until = None;
            settle_all(&mut wal.lingering, Some(&wal.wal), watermark);
            return true;
        }
        wal.hand_off(watermark)
    }

    /// The writer's wait for company is over: syncs what it holds, here when `journal-sync` has
    /// nothing left of its own, else there. False when `journal-sync` is gone.
    pub(super) fn linger_over(&mut self, watermark: &Watermark) -> bool {
        let Self::Wal(wal) = self else {
            return true;
        };
        wal.linger_until = None;
        if batch_is_due_here(true, watermark, wal.handed_off) {
            settle_all(&mut wal.lingering, Some(&wal.wal), watermark);
            return true;
        }
        wal.hand_off(watermark)
    }

    /// Waits for `journal-sync` to acknowledge what it holds, and what the writer held.
    pub(super) fn finish(self, watermark: &Watermark) {
        if let Self::Wal(mut wal) = self {
            wal.hand_off(watermark);
            let WalSyncer {
                to_thread, thread, ..
            } = *wal;
            drop(to_thread);
            // A panic there already failed its callers (their acks were dropped).
            let _ = thread.join();
        }
    }
}

/// Whether the writer syncs a batch itself: nothing waits for it (`idle`) and `journal-sync`
/// has settled everything it was handed (through `handed_off`), so the two never sync at once.
fn batch_is_due_here(idle: bool, watermark: &Watermark, handed_off: u64) -> bool {
    idle && watermark.settled_through() >= handed_off
}

impl WalSyncer {
    /// Hands every batch the writer holds to `journal-sync`, in commit order. False when
    /// `journal-sync` is gone (the callers of what was not handed see `Closed`).
    fn hand_off(&mut self, watermark: &Watermark) -> bool {
        self.linger_until = None;
        for batch in self.lingering.drain(..) {
            self.handed_off = batch.id;
            watermark.handoffs.fetch_add(1, Ordering::Relaxed);
            if self.to_thread.send(batch).is_err() {
                return false;
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use tokio::sync::oneshot;

    use super::*;

    fn batch(id: u64) -> (Batch, oneshot::Receiver<Result<()>>) {
        let (ack, done) = oneshot::channel();
        let batch = Batch {
            id,
            committed: Instant::now(),
            done: vec![Done::Unit(ack, Ok(()))],
            outcome: Ok(()),
        };
        (batch, done)
    }

    #[test]
    fn readers_wait_for_the_sync_of_what_they_may_have_seen() {
        let watermark = Arc::new(Watermark::default());
        watermark.wait_durable().unwrap();
        let id = watermark.begin_commit();
        let reader = {
            let watermark = Arc::clone(&watermark);
            std::thread::spawn(move || watermark.wait_durable())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!reader.is_finished(), "returned before the sync");
        let (batch, mut done) = batch(id);
        settle_all(&mut vec![batch], None, &watermark);
        reader.join().unwrap().unwrap();
        done.try_recv().unwrap().unwrap();
    }

    // A writer that panics takes nobody down with it: its guard fails the readers' waits.
    #[test]
    fn a_writer_that_panics_fails_the_waits_for_what_it_committed() {
        let watermark = Arc::new(Watermark::default());
        watermark.begin_commit();
        let (told, verdict) = std::sync::mpsc::channel();
        {
            let watermark = Arc::clone(&watermark);
            std::thread::spawn(move || told.send(watermark.wait_durable()));
        }
        let writer = {
            let watermark = Arc::clone(&watermark);
            std::thread::spawn(move || {
                let _stop = super::super::StopGuard(&watermark);
                panic!("a writer bug");
            })
        };
        assert!(writer.join().is_err());
        let verdict = verdict.recv_timeout(Duration::from_secs(10));
        assert!(
            matches!(verdict, Ok(Err(_))),
            "the reader was woken with an error"
        );
        let later = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap()
            .block_on(watermark.durable());
        assert!(later.is_err());
    }

    // A failed WAL sync fails its batch and every later one, and stops the readers: after an
    // fsync error the kernel may have dropped the pages, so no later success proves anything.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_failed_wal_sync_fails_its_batch_and_everything_after() {
        // fdatasync on /dev/null fails with EINVAL.
        let wal = File::options().write(true).open("/dev/null").unwrap();
        let watermark = Watermark::default();
        let (first, mut first_done) = batch(watermark.begin_commit());
        settle_all(&mut vec![first], Some(&wal), &watermark);
        assert!(matches!(
            first_done.try_recv().unwrap(),
            Err(JournalError::Io(_))
        ));
        let (second, mut second_done) = batch(watermark.begin_commit());
        settle_all(&mut vec![second], None, &watermark);
        assert!(matches!(
            second_done.try_recv().unwrap(),
            Err(JournalError::Io(_))
        ));
        assert!(watermark.failure().is_some());
        assert!(watermark.wait_durable().is_err());
    }
}
