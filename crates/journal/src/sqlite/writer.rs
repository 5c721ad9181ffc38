//! The writer thread with group commit, and how its batches are made durable.
//!
//! Callers send commands over a bounded channel. `journal-writer` takes one command, drains
//! whatever else is already queued (up to [`MAX_BATCH`]), applies them all in one `IMMEDIATE`
//! transaction and commits. Only once the batch is durable does it acknowledge every caller in
//! it. A failed commit fails the whole batch, so no caller is told its record is durable unless
//! it is. In [`Durability::Full`](super::Durability::Full) the COMMIT itself syncs the WAL. In
//! [`Durability::Pipelined`](super::Durability::Pipelined) the COMMIT only writes it, and the
//! sync overlaps the next batch:
//!
//! ```text
//!  callers ──▶ journal-writer: BEGIN · apply N · COMMIT ──▶ journal-sync: fdatasync WAL · ack N
//!                              BEGIN · apply N+1 · COMMIT ─┐            (meanwhile)
//!                                                          └▶ journal-sync: fdatasync WAL · ack N+1
//! ```
//!
//! When no command is waiting there is nothing to overlap, so the writer syncs and acknowledges
//! the batch itself and saves the thread hand-off.
//!
//! An append needs its session's head (seq, hash), fence and compute state. The writer keeps
//! them in memory instead of reading them back for every append. That cache is exact because
//! every batch holds the write lock (`BEGIN IMMEDIATE`) and first asks `PRAGMA data_version`
//! whether any other connection — another process, or another journal on the same file — has
//! committed since this connection's last transaction; if so, the cache is dropped and reloaded
//! from the file. The `PRIMARY KEY (session, seq)` of `events` stays the last word: a duplicate
//! seq is refused by SQLite whatever the cache says. Each session's `sessions` row is touched
//! once per batch, not once per append.

use std::collections::HashMap;
use std::fs::File;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc as std_mpsc;
use std::sync::{Condvar, Mutex, PoisonError};

use agentsessions_api::{CallerIdentity, ComputeState, DeletionState, Timestamp};
use rusqlite::{Connection, OptionalExtension as _, params};
use tokio::sync::{mpsc, oneshot};

use crate::chain::PreparedEvent;
use crate::error::{JournalError, Result, is_contention};
use crate::journal::{HarnessRow, RegisterOutcome, SessionRow};
use crate::projection::{marks_deletion, project_compute_state};
use crate::record::LogRecord;
use crate::rules;
use crate::sqlite::{codec, prefix};

/// Most commands committed in one transaction.
pub(crate) const MAX_BATCH: usize = 1024;

/// Committed batches that may wait for `journal-sync` before the writer waits too.
const MAX_UNSETTLED_BATCHES: usize = 64;

/// Sessions whose head the writer keeps; past this the cache starts over.
const MAX_CACHED_SESSIONS: usize = 16_384;

type Ack<T> = oneshot::Sender<Result<T>>;

/// A write the thread performs.
#[derive(Debug)]
pub(crate) enum Command {
    Append {
        session: String,
        expected_last_seq: i64,
        /// The writer's fence, or `None` to mint the next one in the same commit.
        fence: Option<i64>,
        events: Vec<PreparedEvent>,
        ack: Ack<Vec<LogRecord>>,
    },
    NewFence {
        session: String,
        ack: Ack<i64>,
    },
    Fork {
        parent: String,
        at_seq: i64,
        child: String,
        ack: Ack<i64>,
    },
    PutSession {
        row: Box<SessionRow>,
        ack: Ack<()>,
    },
    Register {
        name: String,
        spec: String,
        spec_digest: String,
        ack: Ack<(HarnessRow, RegisterOutcome)>,
    },
    Retire {
        name: String,
        reason: String,
        ack: Ack<HarnessRow>,
    },
    Reserve {
        names: Vec<String>,
        ack: Ack<()>,
    },
    MarkReclaimed {
        uid: String,
        ack: Ack<()>,
    },
}

/// A command's result held until its batch is durable.
enum Done {
    Append(Ack<Vec<LogRecord>>, Result<Vec<LogRecord>>),
    Fence(Ack<i64>, Result<i64>),
    Unit(Ack<()>, Result<()>),
    Register(
        Ack<(HarnessRow, RegisterOutcome)>,
        Result<(HarnessRow, RegisterOutcome)>,
    ),
    Harness(Ack<HarnessRow>, Result<HarnessRow>),
}

impl Done {
    fn send(self) {
        // A caller that stopped waiting has nothing to be told.
        match self {
            Self::Append(ack, r) => drop(ack.send(r)),
            Self::Fence(ack, r) => drop(ack.send(r)),
            Self::Unit(ack, r) => drop(ack.send(r)),
            Self::Register(ack, r) => drop(ack.send(r)),
            Self::Harness(ack, r) => drop(ack.send(r)),
        }
    }

    fn fail(self, err: impl Fn() -> JournalError) {
        match self {
            Self::Append(ack, _) => drop(ack.send(Err(err()))),
            Self::Fence(ack, _) => drop(ack.send(Err(err()))),
            Self::Unit(ack, _) => drop(ack.send(Err(err()))),
            Self::Register(ack, _) => drop(ack.send(Err(err()))),
            Self::Harness(ack, _) => drop(ack.send(Err(err()))),
        }
    }

    /// Storage failures poison the transaction; logical refusals (CAS, fence) wrote nothing.
    fn storage_failure(&self) -> Option<Failure> {
        let err = match self {
            Self::Append(_, Err(e)) | Self::Fence(_, Err(e)) | Self::Unit(_, Err(e)) => e,
            Self::Register(_, Err(e)) | Self::Harness(_, Err(e)) => e,
            _ => return None,
        };
        matches!(err, JournalError::Storage(_)).then(|| Failure::of_journal(err))
    }
}

/// Why a whole batch failed; every caller in it gets the same error.
struct Failure {
    reason: String,
    retryable: bool,
}

impl Failure {
    fn of(e: &rusqlite::Error) -> Self {
        Self {
            reason: e.to_string(),
            retryable: is_contention(e),
        }
    }

    fn of_journal(e: &JournalError) -> Self {
        Self {
            reason: e.to_string(),
            retryable: e.is_retryable(),
        }
    }

    fn error(&self) -> JournalError {
        JournalError::CommitFailed {
            reason: self.reason.clone(),
            retryable: self.retryable,
        }
    }
}

/// The error for a write whose batch committed but whose WAL sync failed: it may or may not
/// survive a crash, and nothing more is written (after a failed fsync the kernel may already
/// have dropped the dirty pages, so a later successful one proves nothing).
fn sync_failed(reason: &str) -> JournalError {
    JournalError::Io(std::io::Error::other(format!(
        "syncing the journal's WAL failed, so the journal refuses further writes: {reason}"
    )))
}

/// A batch the writer has committed (or failed), on its way to its callers.
pub(crate) struct Batch {
    /// The [`Watermark`] count when it committed.
    id: u64,
    done: Vec<Done>,
    outcome: Result<(), Failure>,
}

impl Batch {
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
/// [`Durability::Pipelined`](super::Durability::Pipelined) a committed batch is visible before
/// its WAL sync.
#[derive(Debug, Default)]
pub(crate) struct Watermark {
    /// Batches whose COMMIT has begun; other connections may see their rows from then on.
    committing: AtomicU64,
    synced: Mutex<Synced>,
    changed: Condvar,
}

#[derive(Debug, Default)]
struct Synced {
    /// Every batch up to this count is durable, or failed.
    through: u64,
    /// Set for good by a failed WAL sync.
    failure: Option<String>,
}

impl Watermark {
    fn begin_commit(&self) -> u64 {
        self.committing.fetch_add(1, Ordering::SeqCst) + 1
    }

    fn current(&self) -> u64 {
        self.committing.load(Ordering::SeqCst)
    }

    fn failure(&self) -> Option<String> {
        self.lock().failure.clone()
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
        Some(wal) if committed => wal.sync_data().map_err(|e| e.to_string()),
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
    Wal {
        wal: File,
        to_thread: std_mpsc::SyncSender<Batch>,
        thread: std::thread::JoinHandle<()>,
        /// Highest batch id handed to `journal-sync`.
        handed_off: u64,
    },
}

impl Syncer {
    /// Starts `journal-sync` for the WAL file `wal`.
    pub(crate) fn spawn(wal: File, watermark: std::sync::Arc<Watermark>) -> std::io::Result<Self> {
        let thread_wal = wal.try_clone()?;
        let (to_thread, batches) = std_mpsc::sync_channel::<Batch>(MAX_UNSETTLED_BATCHES);
        let thread = std::thread::Builder::new()
            .name("journal-sync".to_owned())
            .spawn(move || {
                let mut pending = Vec::new();
                while let Ok(first) = batches.recv() {
                    pending.push(first);
                    pending.extend(batches.try_iter());
                    settle_all(&mut pending, Some(&thread_wal), &watermark);
                }
            })?;
        Ok(Self::Wal {
            wal,
            to_thread,
            thread,
            handed_off: 0,
        })
    }

    /// Gets `batch` durable and acknowledged, now or on `journal-sync`; `idle` says no command is
    /// waiting. False when `journal-sync` is gone.
    fn settle(&mut self, batch: Batch, idle: bool, watermark: &Watermark) -> bool {
        match self {
            Self::InCommit => settle_all(&mut vec![batch], None, watermark),
            Self::Wal {
                wal,
                to_thread,
                handed_off,
                ..
            } => {
                if idle && watermark.settled_through() >= *handed_off {
                    settle_all(&mut vec![batch], Some(wal), watermark);
                } else {
                    *handed_off = batch.id;
                    // Should `journal-sync` have died, the batch's callers see `Closed`.
                    return to_thread.send(batch).is_ok();
                }
            }
        }
        true
    }

    /// Waits for `journal-sync` to acknowledge what it holds.
    fn finish(self) {
        if let Self::Wal {
            to_thread, thread, ..
        } = self
        {
            drop(to_thread);
            // A panic there already failed its callers (their acks were dropped).
            let _ = thread.join();
        }
    }
}

/// What a batch's appends leave to write on a session's `sessions` row.
#[derive(Debug, Clone, Copy)]
struct Touch {
    /// The compute projection after the batch.
    state: ComputeState,
    /// A `LIFECYCLE_DELETE` was committed: the row turns `PENDING` in the same transaction.
    deletes: bool,
}

/// What an append needs to know about its session, as committed.
#[derive(Debug)]
struct SessionHead {
    seq: i64,
    hash: String,
    fence: i64,
    state: ComputeState,
}

/// The connection that writes, with what it caches about the file.
pub(crate) struct Writer {
    conn: Connection,
    default_project: String,
    watermark: std::sync::Arc<Watermark>,
    syncer: Syncer,
    /// `PRAGMA data_version` at the start of the current batch.
    data_version: Option<i64>,
    /// Session heads as committed, plus this batch's appends.
    heads: HashMap<String, SessionHead>,
    /// Sessions appended to in this batch whose `sessions` row is still to be touched, with
    /// their new compute state.
    touched: HashMap<String, Touch>,
}

impl Writer {
    pub(crate) fn new(
        conn: Connection,
        default_project: String,
        watermark: std::sync::Arc<Watermark>,
        syncer: Syncer,
    ) -> Self {
        Self {
            conn,
            default_project,
            watermark,
            syncer,
            data_version: None,
            heads: HashMap::new(),
            touched: HashMap::new(),
        }
    }

    /// Runs the writer loop until every sender is dropped and every batch is acknowledged.
    pub(crate) fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let mut commands = Vec::with_capacity(MAX_BATCH);
        while let Some(first) = rx.blocking_recv() {
            commands.push(first);
            while commands.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(cmd) => commands.push(cmd),
                    Err(_) => break,
                }
            }
            let Some(batch) = self.commit_batch(&mut commands) else {
                continue;
            };
            if !self.syncer.settle(batch, rx.is_empty(), &self.watermark) {
                break;
            }
        }
        self.syncer.finish();
    }

    /// Applies and commits one batch; `None` when it failed before anything was applied (its
    /// callers are already told).
    fn commit_batch(&mut self, commands: &mut Vec<Command>) -> Option<Batch> {
        let refusal: Option<Box<dyn Fn() -> JournalError>> =
            if let Some(reason) = self.watermark.failure() {
                Some(Box::new(move || sync_failed(&reason)))
            } else if let Err(e) = self.begin() {
                let failure = Failure::of(&e);
                Some(Box::new(move || failure.error()))
            } else {
                None
            };
        if let Some(refusal) = refusal {
            for cmd in commands.drain(..) {
                fail_command(cmd, &refusal);
            }
            return None;
        }
        let now = Timestamp::now().unix_nanos();
        let done: Vec<Done> = commands.drain(..).map(|cmd| self.apply(cmd, now)).collect();
        let failure = match done.iter().find_map(Done::storage_failure) {
            Some(failure) => Some(failure),
            None => self
                .touch_sessions(now)
                .err()
                .map(|e| Failure::of_journal(&e)),
        };
        let outcome = match failure {
            Some(failure) => {
                self.rollback();
                Err(failure)
            }
            None => {
                self.watermark.begin_commit();
                self.commit()
            }
        };
        if outcome.is_err() {
            // The cache holds this batch's appends; the file does not.
            self.heads.clear();
            self.touched.clear();
        }
        Some(Batch {
            id: self.watermark.current(),
            done,
            outcome,
        })
    }

    fn begin(&mut self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        let version = self
            .conn
            .prepare_cached("PRAGMA data_version")
            .and_then(|mut s| s.query_row([], |r| r.get::<_, i64>(0)));
        let version = match version {
            Ok(v) => v,
            Err(e) => {
                self.rollback();
                return Err(e);
            }
        };
        if self.data_version != Some(version) || self.heads.len() > MAX_CACHED_SESSIONS {
            // Another connection committed since our last transaction: what we cached may be
            // stale.
            self.heads.clear();
            self.data_version = Some(version);
        }
        Ok(())
    }

    fn commit(&mut self) -> Result<(), Failure> {
        match self
            .conn
            .prepare_cached("COMMIT")
            .and_then(|mut s| s.execute([]))
        {
            Ok(_) => Ok(()),
            Err(e) => {
                self.rollback();
                Err(Failure::of(&e))
            }
        }
    }

    fn rollback(&self) {
        if !self.conn.is_autocommit() {
            // Should the rollback itself fail, the next BEGIN fails and reports it.
            drop(self.conn.execute_batch("ROLLBACK"));
        }
    }

    fn apply(&mut self, cmd: Command, now: i64) -> Done {
        if !matches!(cmd, Command::Append { .. })
            && let Err(e) = self.touch_sessions(now)
        {
            // Other commands see the `sessions` rows as the per-command order leaves them.
            return failed(cmd, e);
        }
        let conn = &self.conn;
        let project = self.default_project.as_str();
        match cmd {
            Command::Append {
                session,
                expected_last_seq,
                fence,
                events,
                ack,
            } => Done::Append(
                ack,
                self.append(&session, expected_last_seq, fence, events, now),
            ),
            Command::NewFence { session, ack } => {
                let fence = new_fence(conn, &session, now, project);
                if let (Ok(fence), Some(head)) = (&fence, self.heads.get_mut(&session)) {
                    head.fence = *fence;
                }
                Done::Fence(ack, fence)
            }
            Command::Fork {
                parent,
                at_seq,
                child,
                ack,
            } => Done::Fence(ack, self.fork(&parent, at_seq, &child, now)),
            Command::PutSession { row, ack } => {
                Done::Unit(ack, put_session(conn, *row, now, project))
            }
            Command::Register {
                name,
                spec,
                spec_digest,
                ack,
            } => Done::Register(ack, register(conn, &name, &spec, &spec_digest, now)),
            Command::Retire { name, reason, ack } => {
                Done::Harness(ack, retire(conn, &name, &reason, now))
            }
            Command::Reserve { names, ack } => Done::Unit(ack, reserve(conn, &names, now)),
            Command::MarkReclaimed { uid, ack } => Done::Unit(ack, mark_reclaimed(conn, &uid, now)),
        }
    }

    /// An append with the writer's `fence`, or (`None`) one that mints the next fence in the same
    /// savepoint, only once the CAS check passed.
    fn append(
        &mut self,
        session: &str,
        expected_last_seq: i64,
        fence: Option<i64>,
        events: Vec<PreparedEvent>,
        now: i64,
    ) -> Result<Vec<LogRecord>> {
        let conn = &self.conn;
        let project = self.default_project.as_str();
        let head = cached_head(&mut self.heads, conn, session)?;
        match fence {
            Some(fence) => {
                rules::check_append(session, expected_last_seq, head.seq, fence, head.fence)?;
            }
            None => rules::check_append(session, expected_last_seq, head.seq, head.fence, 0)?,
        }
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let writes = events.len() + usize::from(fence.is_none());
        let appended = atomically(conn, writes, || {
            let fence = match fence {
                Some(fence) => fence,
                None => new_fence(conn, session, now, project)?,
            };
            insert_records(conn, session, expected_last_seq, head, fence, events)
        });
        match appended {
            Ok(records) => {
                if fence.is_none()
                    && let Some(first) = records.first()
                {
                    head.fence = first.fence;
                }
                let deletes = records.iter().any(|r| marks_deletion(&r.event));
                match self.touched.get_mut(session) {
                    Some(touch) => {
                        touch.state = head.state;
                        touch.deletes |= deletes;
                    }
                    None => drop(self.touched.insert(
                        session.to_owned(),
                        Touch {
                            state: head.state,
                            deletes,
                        },
                    )),
                }
                Ok(records)
            }
            Err(e) => {
                if matches!(e, JournalError::Conflict { .. }) {
                    // Only reachable if the file changed behind the cache; read it again.
                    self.heads.remove(session);
                }
                Err(e)
            }
        }
    }

    /// Creates `child` as a shared-prefix fork of `parent` at `at_seq` (see
    /// [`Journal::fork_session`](crate::Journal::fork_session)): one `session_prefix` row and one
    /// `sessions` row, nothing of the prefix. The parent's head comes from the cache, so appends
    /// earlier in this batch count.
    fn fork(&mut self, parent: &str, at_seq: i64, child: &str, now: i64) -> Result<i64> {
        let conn = &self.conn;
        let head = cached_head(&mut self.heads, conn, parent)?.seq;
        let parent_row: Option<ForkedColumns> = conn
            .prepare_cached(
                "SELECT project, harness, model, owner_issuer, owner_subject
                 FROM sessions WHERE session = ?1",
            )?
            .query_row([parent], |r| {
                Ok(ForkedColumns {
                    project: r.get(0)?,
                    harness: r.get(1)?,
                    model: r.get(2)?,
                    owner_issuer: r.get(3)?,
                    owner_subject: r.get(4)?,
                })
            })
            .optional()?;
        if head == 0 && parent_row.is_none() {
            return Err(JournalError::SessionNotFound(parent.to_owned()));
        }
        rules::check_fork_seq(parent, at_seq, head)?;
        if session_taken(conn, child)? {
            return Err(JournalError::SessionExists(child.to_owned()));
        }
        let segments = prefix::segments(conn, parent)?;
        let fork_hash = prefix::hash_at(conn, &segments, at_seq)?.ok_or_else(|| {
            JournalError::InvalidArgument(format!(
                "session {parent} has no stored record at seq {at_seq} to fork from"
            ))
        })?;
        let state = prefix::state_at(conn, &segments, at_seq)?;
        let inherited = parent_row.unwrap_or_else(|| ForkedColumns {
            project: self.default_project.clone(),
            ..ForkedColumns::default()
        });
        atomically(conn, 2, || {
            conn.prepare_cached(
                "INSERT INTO session_prefix(session, parent_uid, fork_seq, fork_hash)
                 VALUES (?1, ?2, ?3, ?4)",
            )?
            .execute(params![child, parent, at_seq, fork_hash])?;
            conn.prepare_cached(
                "INSERT INTO sessions(session, fence, project, harness, model, parent_uid,
                                      fork_seq, compute_state, created_at, updated_at,
                                      owner_issuer, owner_subject)
                 VALUES (?1, 1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?8, ?9, ?10)",
            )?
            .execute(params![
                child,
                inherited.project,
                inherited.harness,
                inherited.model,
                parent,
                at_seq,
                state.as_str(),
                now,
                inherited.owner_issuer,
                inherited.owner_subject
            ])?;
            Ok(())
        })?;
        self.heads.insert(
            child.to_owned(),
            SessionHead {
                seq: at_seq,
                hash: fork_hash,
                fence: 1,
                state,
            },
        );
        Ok(1)
    }

    /// Touches the `sessions` row of every session appended to since the last touch: sets its
    /// update time and compute state, creating the row when missing. A complete row takes a
    /// plain `UPDATE`, which leaves the listing index alone; only a missing row, or one without
    /// project or creation time, needs the upsert.
    fn touch_sessions(&mut self, now: i64) -> Result<()> {
        if self.touched.is_empty() {
            return Ok(());
        }
        let mut update = self.conn.prepare_cached(
            "UPDATE sessions SET updated_at = ?2, compute_state = ?3
             WHERE session = ?1 AND project != '' AND created_at != 0",
        )?;
        let mut upsert = self.conn.prepare_cached(
            "INSERT INTO sessions(session, project, created_at, updated_at, compute_state)
             VALUES (?1, ?2, ?3, ?3, ?4)
             ON CONFLICT(session) DO UPDATE SET
                 updated_at = excluded.updated_at,
                 compute_state = excluded.compute_state,
                 project = CASE WHEN project = '' THEN excluded.project ELSE project END,
                 created_at = CASE WHEN created_at = 0 THEN excluded.created_at ELSE created_at END",
        )?;
        for (session, touch) in self.touched.drain() {
            let state = touch.state.as_str();
            if update.execute(params![session, now, state])? == 0 {
                upsert.execute(params![session, self.default_project, now, state])?;
            }
            if touch.deletes {
                // A state this build does not know stays as it is: it already reads as deleted.
                self.conn
                    .prepare_cached(
                        "UPDATE sessions SET deletion_state = 'PENDING'
                         WHERE session = ?1 AND deletion_state IN ('', 'ACTIVE')",
                    )?
                    .execute([session])?;
            }
        }
        Ok(())
    }
}

/// A command that was not applied, with its caller's error.
fn failed(cmd: Command, e: JournalError) -> Done {
    match cmd {
        Command::Append { ack, .. } => Done::Append(ack, Err(e)),
        Command::NewFence { ack, .. } | Command::Fork { ack, .. } => Done::Fence(ack, Err(e)),
        Command::PutSession { ack, .. }
        | Command::Reserve { ack, .. }
        | Command::MarkReclaimed { ack, .. } => Done::Unit(ack, Err(e)),
        Command::Register { ack, .. } => Done::Register(ack, Err(e)),
        Command::Retire { ack, .. } => Done::Harness(ack, Err(e)),
    }
}

fn fail_command(cmd: Command, err: impl Fn() -> JournalError) {
    match cmd {
        Command::Append { ack, .. } => drop(ack.send(Err(err()))),
        Command::NewFence { ack, .. } | Command::Fork { ack, .. } => drop(ack.send(Err(err()))),
        Command::PutSession { ack, .. }
        | Command::Reserve { ack, .. }
        | Command::MarkReclaimed { ack, .. } => {
            drop(ack.send(Err(err())));
        }
        Command::Register { ack, .. } => drop(ack.send(Err(err()))),
        Command::Retire { ack, .. } => drop(ack.send(Err(err()))),
    }
}

/// The cached head of `session`, loaded from the file on a miss.
fn cached_head<'h>(
    heads: &'h mut HashMap<String, SessionHead>,
    conn: &Connection,
    session: &str,
) -> Result<&'h mut SessionHead> {
    if !heads.contains_key(session) {
        heads.insert(session.to_owned(), load_head(conn, session)?);
    }
    Ok(heads.get_mut(session).expect("inserted above"))
}

fn load_head(conn: &Connection, session: &str) -> Result<SessionHead> {
    let own: Option<(i64, String)> = conn
        .prepare_cached(
            "SELECT seq, hash FROM events WHERE session = ?1 ORDER BY seq DESC LIMIT 1",
        )?
        .query_row([session], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?;
    // A shared-prefix child without records of its own stands at its fork point.
    let (seq, hash) = match own {
        Some(head) => head,
        None => prefix::link_head(conn, session)?.unwrap_or_default(),
    };
    let (fence, state): (i64, String) = conn
        .prepare_cached("SELECT fence, compute_state FROM sessions WHERE session = ?1")?
        .query_row([session], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()?
        .unwrap_or_default();
    Ok(SessionHead {
        seq,
        hash,
        fence,
        state: ComputeState::parse(&state).unwrap_or(ComputeState::None),
    })
}

/// Runs a multi-record append inside a savepoint so a refusal half-way through leaves nothing
/// of it in the batch's transaction. A single-record append needs none: its checks precede its
/// only insert, and a failed insert writes nothing.
fn atomically<T>(conn: &Connection, records: usize, f: impl FnOnce() -> Result<T>) -> Result<T> {
    if records <= 1 {
        return f();
    }
    conn.prepare_cached("SAVEPOINT command")?.execute([])?;
    let out = f();
    if out.is_err() {
        conn.prepare_cached("ROLLBACK TO command")?.execute([])?;
    }
    conn.prepare_cached("RELEASE command")?.execute([])?;
    out
}

/// Inserts `events` after `head` and returns their records; `head` moves past them only when
/// all are inserted.
fn insert_records(
    conn: &Connection,
    session: &str,
    expected_last_seq: i64,
    head: &mut SessionHead,
    fence: i64,
    events: Vec<PreparedEvent>,
) -> Result<Vec<LogRecord>> {
    let mut insert = conn.prepare_cached(
        "INSERT INTO events(session, seq, prev_hash, hash, fence, event) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
    )?;
    let mut seq = head.seq;
    let mut prev_hash = head.hash.clone();
    let mut state = head.state;
    let mut out = Vec::with_capacity(events.len());
    for event in events {
        seq += 1;
        let hash = event.hash_at(&prev_hash, seq);
        match insert.execute(params![session, seq, prev_hash, hash, fence, event.blob]) {
            Ok(_) => {}
            Err(rusqlite::Error::SqliteFailure(f, _))
                if f.code == rusqlite::ErrorCode::ConstraintViolation =>
            {
                // The seq is taken: refuse like a CAS miss.
                return Err(JournalError::Conflict {
                    session: session.to_owned(),
                    expected: expected_last_seq,
                    actual: seq,
                });
            }
            Err(e) => return Err(e.into()),
        }
        state = project_compute_state(state, &event.event);
        out.push(LogRecord {
            seq,
            prev_hash: std::mem::replace(&mut prev_hash, hash.clone()),
            hash,
            fence,
            event: event.event,
        });
    }
    head.seq = seq;
    head.hash = prev_hash;
    head.state = state;
    Ok(out)
}

fn new_fence(conn: &Connection, session: &str, now: i64, default_project: &str) -> Result<i64> {
    Ok(conn
        .prepare_cached(
            "INSERT INTO sessions(session, fence, project, created_at, updated_at, compute_state)
             VALUES (?1, 1, ?2, ?3, ?3, 'NONE')
             ON CONFLICT(session) DO UPDATE SET
                 fence = fence + 1,
                 updated_at = excluded.updated_at,
                 project = CASE WHEN project = '' THEN excluded.project ELSE project END,
                 created_at = CASE WHEN created_at = 0 THEN excluded.created_at ELSE created_at END
             RETURNING fence",
        )?
        .query_row(params![session, default_project, now], |r| r.get(0))?)
}

/// Whether `session` has a row, records or a prefix link.
fn session_taken(conn: &Connection, session: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached(
            "SELECT EXISTS (SELECT 1 FROM sessions WHERE session = ?1)
                 OR EXISTS (SELECT 1 FROM events WHERE session = ?1)
                 OR EXISTS (SELECT 1 FROM session_prefix WHERE session = ?1)",
        )?
        .query_row([session], |r| r.get(0))?)
}

fn put_session(conn: &Connection, row: SessionRow, now: i64, default_project: &str) -> Result<()> {
    if let Some(link) = prefix::link(conn, &row.uid)? {
        rules::check_lineage_kept(&row, &link.parent, link.fork_seq)?;
    }
    let project = if row.project.is_empty() {
        default_project.to_owned()
    } else {
        row.project
    };
    let created = row.created_at.map_or(0, Timestamp::unix_nanos);
    let stored_owner = conn
        .prepare_cached("SELECT owner_issuer, owner_subject FROM sessions WHERE session = ?1")?
        .query_row([&row.uid], |r| {
            Ok(CallerIdentity::new(
                r.get::<_, String>(0)?,
                r.get::<_, String>(1)?,
            ))
        })
        .optional()?
        .unwrap_or_default();
    let owner = rules::owner_after(&row.uid, &stored_owner, &row.owner)?;
    conn.prepare_cached(
        "INSERT INTO sessions(session, project, name, harness, model, parent_uid, fork_seq,
                              labels, annotations, origin, identity, created_at, updated_at,
                              compute_state, owner_issuer, owner_subject)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11,
                 CASE WHEN ?12 = 0 THEN ?13 ELSE ?12 END, ?13, 'NONE', ?14, ?15)
         ON CONFLICT(session) DO UPDATE SET
             owner_issuer = excluded.owner_issuer, owner_subject = excluded.owner_subject,
             project = excluded.project, name = excluded.name, harness = excluded.harness,
             model = excluded.model, parent_uid = excluded.parent_uid,
             fork_seq = excluded.fork_seq, labels = excluded.labels,
             annotations = excluded.annotations, origin = excluded.origin,
             identity = excluded.identity, updated_at = excluded.updated_at,
             created_at = CASE WHEN ?12 != 0 THEN ?12
                               WHEN created_at = 0 THEN excluded.created_at
                               ELSE created_at END",
    )?
    .execute(params![
        row.uid,
        project,
        row.name,
        row.harness,
        row.model,
        row.parent_uid,
        row.fork_seq,
        codec::encode_map(&row.labels),
        codec::encode_map(&row.annotations),
        codec::encode_origin(row.origin.as_ref())?,
        codec::encode_identity(&row.identity)?,
        created,
        now,
        owner.issuer,
        owner.subject,
    ])?;
    Ok(())
}

/// The `sessions` columns a fork child takes from its parent.
#[derive(Default)]
struct ForkedColumns {
    project: String,
    harness: String,
    model: String,
    owner_issuer: String,
    owner_subject: String,
}

fn mark_reclaimed(conn: &Connection, uid: &str, now: i64) -> Result<()> {
    let state: String = conn
        .prepare_cached("SELECT deletion_state FROM sessions WHERE session = ?1")?
        .query_row([uid], |r| r.get(0))
        .optional()?
        .ok_or_else(|| JournalError::SessionNotFound(uid.to_owned()))?;
    rules::check_reclaimable(uid, &DeletionState::parse(&state))?;
    conn.prepare_cached(
        "UPDATE sessions SET reclaimed_at = ?2 WHERE session = ?1 AND reclaimed_at = 0",
    )?
    .execute(params![uid, now])?;
    Ok(())
}

fn load_harness(conn: &Connection, name: &str) -> Result<Option<HarnessRow>> {
    Ok(conn
        .prepare_cached(&format!(
            "SELECT {} FROM harnesses WHERE name = ?1",
            codec::HARNESS_COLUMNS
        ))?
        .query_row([name], codec::harness_from_row)
        .optional()?)
}

fn store_harness(conn: &Connection, h: &HarnessRow) -> Result<()> {
    conn.prepare_cached(
        "INSERT INTO harnesses(name, uid, spec, spec_digest, state, retire_reason, retired_at,
                               created_at, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)
         ON CONFLICT(name) DO UPDATE SET
             state = excluded.state, retire_reason = excluded.retire_reason,
             retired_at = excluded.retired_at, updated_at = excluded.updated_at",
    )?
    .execute(params![
        h.name,
        h.uid,
        h.spec,
        h.spec_digest,
        codec::harness_state_str(h.state),
        h.retire_reason,
        h.retired_at.map_or(0, Timestamp::unix_nanos),
        h.created_at.unix_nanos(),
        h.updated_at.unix_nanos(),
    ])?;
    Ok(())
}

fn register(
    conn: &Connection,
    name: &str,
    spec: &str,
    spec_digest: &str,
    now: i64,
) -> Result<(HarnessRow, RegisterOutcome)> {
    let existing = load_harness(conn, name)?;
    let reserved = is_reserved(conn, name)?;
    let (row, outcome) = rules::register_decision(
        existing,
        reserved,
        name,
        spec,
        spec_digest,
        Timestamp::from_unix_nanos(now),
    )?;
    if outcome != RegisterOutcome::Unchanged {
        store_harness(conn, &row)?;
    }
    Ok((row, outcome))
}

fn retire(conn: &Connection, name: &str, reason: &str, now: i64) -> Result<HarnessRow> {
    let mut row =
        load_harness(conn, name)?.ok_or_else(|| JournalError::HarnessNotFound(name.to_owned()))?;
    rules::retire(&mut row, reason, Timestamp::from_unix_nanos(now));
    store_harness(conn, &row)?;
    Ok(row)
}

fn reserve(conn: &Connection, names: &[String], now: i64) -> Result<()> {
    let mut stmt = conn.prepare_cached(
        "INSERT OR IGNORE INTO reserved_harness_names(name, reserved_at) VALUES (?1, ?2)",
    )?;
    for name in names.iter().filter(|n| !n.is_empty()) {
        stmt.execute(params![name, now])?;
    }
    Ok(())
}

pub(crate) fn is_reserved(conn: &Connection, name: &str) -> Result<bool> {
    Ok(conn
        .prepare_cached("SELECT 1 FROM reserved_harness_names WHERE name = ?1")?
        .query_row([name], |_| Ok(()))
        .optional()?
        .is_some())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;

    fn batch(id: u64) -> (Batch, oneshot::Receiver<Result<()>>) {
        let (ack, done) = oneshot::channel();
        let batch = Batch {
            id,
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
