//! The writer thread with group commit, and how its batches are made durable.
//!
//! Callers send commands over a bounded channel. `journal-writer` takes one command, drains
//! whatever else is already queued (up to [`MAX_BATCH`]), applies them all in one `IMMEDIATE`
//! transaction and commits. Only once the batch is durable does it acknowledge every caller in
//! it. A failed commit fails the whole batch, so no caller is told its record is durable unless
//! it is. In [`Durability::Full`](crate::Durability::Full) the COMMIT itself syncs the WAL. In
//! [`Durability::Pipelined`](crate::Durability::Pipelined) the COMMIT only writes it, and the
//! sync overlaps the next batch:
//!
//! ```text
//!  callers ──▶ journal-writer: BEGIN · apply N · COMMIT ──▶ journal-sync: fdatasync WAL · ack N
//!                              BEGIN · apply N+1 · COMMIT ─┐            (meanwhile)
//!                                                          └▶ journal-sync: fdatasync WAL · ack N+1
//! ```
//!
//! When no command is waiting there is nothing to overlap, so the writer syncs and acknowledges
//! the batch itself and saves the thread hand-off. A batch of deferred appends only (nobody
//! waits for its sync) is held by the idle writer for up to `deferred_sync_delay`, waiting for
//! its next command with that deadline: the durable append that usually follows is then synced
//! with it right where it committed, and `journal-sync` is not woken at all.
//!
//! An append needs its session's head (seq, hash), fence and compute state. The writer keeps
//! them in memory instead of reading them back for every append. That cache is exact because
//! every batch holds the write lock (`BEGIN IMMEDIATE`) and first asks `PRAGMA data_version`
//! whether any other connection — another process, or another journal on the same file — has
//! committed since this connection's last transaction; if so, the cache is dropped and reloaded
//! from the file. The `PRIMARY KEY (session, seq)` of `events` stays the last word: a duplicate
//! seq is refused by SQLite whatever the cache says. Each session's `sessions` row is touched
//! once per batch, not once per append.
//!
//! Module map: this module is the batch loop and the head cache; `sync` makes committed batches
//! durable (the watermark and `journal-sync`); `outcome` holds each caller's result until then;
//! `statements` is the SQL text with the helpers that run it.

mod outcome;
mod statements;
mod sync;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use agentsessions_api::{ComputeState, Timestamp};
use agentsessions_journal::chain::PreparedEvent;
use agentsessions_journal::follow::CommitFeed;
use agentsessions_journal::writer_queue::Append;
use agentsessions_journal::{
    FenceUse, HarnessRow, JournalError, LogHead, LogRecord, RegisterOutcome, Result, SessionRow,
    UsageTotals, extend, rules,
};
use rusqlite::Connection;
use tokio::sync::mpsc;

use self::outcome::{Ack, Done, Failure, fail_command, failed};
pub(crate) use self::statements::is_reserved;
use self::statements::{
    ForkedColumns, atomically, fork_parent_columns, insert_fork_child, insert_records, load_head,
    mark_reclaimed, new_fence, put_session, register, reserve, retire, session_has_row,
    session_taken, set_compute_state, touch_session_rows,
};
use self::sync::{Batch, sync_failed};
pub(crate) use self::sync::{Syncer, Watermark};
use crate::prefix;

/// Most commands committed in one transaction.
pub(crate) const MAX_BATCH: usize = 1024;

/// Sessions whose head the writer keeps; past this the cache starts over.
const MAX_CACHED_SESSIONS: usize = 16_384;

/// A write the thread performs.
#[derive(Debug)]
pub(crate) enum Command {
    Append(Append),
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
    SettleCompute {
        session: String,
        at_seq: i64,
        state: ComputeState,
        ack: Ack<bool>,
    },
}

/// What a batch's appends leave to write on a session's `sessions` row.
#[derive(Debug, Clone, Copy)]
struct Touch {
    /// The compute projection after the batch.
    state: ComputeState,
    /// A `LIFECYCLE_DELETE` was committed: the row turns `PENDING` in the same transaction.
    deletes: bool,
    /// USAGE records committed in the batch, summed: the row's totals grow by this.
    usage: UsageTotals,
}

/// What an append needs to know about its session, as committed.
#[derive(Debug)]
struct SessionHead {
    seq: i64,
    hash: String,
    fence: i64,
    state: ComputeState,
}

impl SessionHead {
    /// The head as the append rule reads it.
    fn log_head(&self) -> LogHead {
        LogHead {
            seq: self.seq,
            hash: self.hash.clone(),
            fence: self.fence,
            compute: self.state,
        }
    }
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
    /// How long to watch the queue after a commit before sleeping
    /// ([`SqliteOptions::writer_spin`](crate::SqliteOptions::writer_spin)).
    spin: Duration,
    /// The journal's followers: woken here for deferred appends, whose callers are told at
    /// commit but show them to nobody until a later durable append.
    feed: std::sync::Arc<CommitFeed>,
    /// This batch's deferred appends: the session and its new head, announced once committed.
    deferred_heads: Vec<(String, i64)>,
}

impl Writer {
    pub(crate) fn new(
        conn: Connection,
        default_project: String,
        watermark: std::sync::Arc<Watermark>,
        syncer: Syncer,
        spin: Duration,
        feed: std::sync::Arc<CommitFeed>,
    ) -> Self {
        Self {
            conn,
            default_project,
            watermark,
            syncer,
            data_version: None,
            heads: HashMap::new(),
            touched: HashMap::new(),
            spin,
            feed,
            deferred_heads: Vec::new(),
        }
    }

    /// Runs the writer loop until every sender is dropped and every batch is acknowledged.
    pub(crate) fn run(mut self, mut rx: mpsc::Receiver<Command>) {
        let watermark = std::sync::Arc::clone(&self.watermark);
        let _stop = StopGuard(&watermark);
        // A timer for waiting on the next command with a deadline, while the writer holds
        // deferred batches for company. Without one, `journal-sync` holds them instead.
        let clock = tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .build();
        match &clock {
            Ok(_) => self.syncer.writer_can_linger(),
            Err(e) => {
                tracing::warn!(error = %e, "journal writer has no timer; journal-sync holds deferred batches")
            }
        }
        let mut commands = Vec::with_capacity(MAX_BATCH);
        let mut just_committed = false;
        loop {
            let watched = if just_committed {
                self.watch_queue(&mut rx)
            } else {
                None
            };
            let next = match watched {
                Some(command) => Ok(Some(command)),
                None => {
                    self.watermark.writer_sleeps_now();
                    match (self.syncer.linger_deadline(), &clock) {
                        // The timer is made inside `block_on`, where the runtime's time driver is.
                        (Some(until), Ok(clock)) => clock.block_on(async {
                            tokio::time::timeout_at(
                                tokio::time::Instant::from_std(until),
                                rx.recv(),
                            )
                            .await
                        }),
                        _ => Ok(rx.blocking_recv()),
                    }
                }
            };
            just_committed = false;
            let first = match next {
                Ok(Some(first)) => first,
                Ok(None) => break,
                Err(_deadline) => {
                    if self.syncer.linger_over(&self.watermark) {
                        continue;
                    }
                    break;
                }
            };
            commands.push(first);
            while commands.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(cmd) => commands.push(cmd),
                    Err(_) => break,
                }
            }
            let taken = commands.len();
            let started = Instant::now();
            just_committed = true;
            let Some(batch) = self.commit_batch(&mut commands) else {
                continue;
            };
            agentsessions_telemetry::metrics().journal_batch(
                "sqlite",
                taken,
                started.elapsed(),
                rx.len(),
            );
            if !self.syncer.settle(batch, rx.is_empty(), &self.watermark) {
                break;
            }
        }
        self.syncer.finish(&self.watermark);
    }

    /// The next command, if one comes within the spin (and before a held batch is due): a
    /// turn's next append usually follows its last within tens of microseconds, and taking it
    /// here spares both threads the sleep and the wake. Between looks it yields its CPU, so a
    /// thread it just woke on the same CPU (the caller it acknowledged) runs first; spinning
    /// without yielding made such a caller wait out the whole spin.
    fn watch_queue(&self, rx: &mut mpsc::Receiver<Command>) -> Option<Command> {
        let mut until = Instant::now() + self.spin;
        if let Some(due) = self.syncer.linger_deadline() {
            until = until.min(due);
        }
        loop {
            match rx.try_recv() {
                Ok(command) => return Some(command),
                Err(mpsc::error::TryRecvError::Empty) if Instant::now() < until => {
                    std::thread::yield_now();
                }
                Err(_) => return None,
            }
        }
    }

    /// Applies and commits one batch; `None` when there is nothing left to make durable: it
    /// failed before anything was applied, or it held observations only (its callers are
    /// already told either way).
    ///
    /// A batch of settled compute states only is an observation of the runtimes that a crash
    /// may take back and the next settle makes again: it is committed without becoming a batch
    /// readers wait for. Readers' durability target stays the batch before it, and the next
    /// WAL sync covers its pages; otherwise every read after a turn's settle would wait out the
    /// settle's sync (or a held batch's linger).
    fn commit_batch(&mut self, commands: &mut Vec<Command>) -> Option<Batch> {
        let observations_only = commands
            .iter()
            .all(|cmd| matches!(cmd, Command::SettleCompute { .. }));
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
        let mut done: Vec<Done> = commands.drain(..).map(|cmd| self.apply(cmd, now)).collect();
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
                if !observations_only {
                    self.watermark.begin_commit();
                }
                self.commit()
            }
        };
        let deferred_heads = std::mem::take(&mut self.deferred_heads);
        if outcome.is_err() {
            // The cache holds this batch's appends; the file does not.
            self.heads.clear();
            self.touched.clear();
        } else {
            // Followers read through the read connections, which hand records out only once
            // durable, so they may be woken at commit: a deferred record then reaches a Watch
            // (and an Exec stream) within a sync of its commit, not at the turn's next durable
            // append (extensions §11).
            for (session, head) in &deferred_heads {
                self.feed.publish(session, *head);
            }
            // Deferred appends are told now; the rest once the batch is durable.
            let (at_commit, at_sync): (Vec<Done>, Vec<Done>) =
                done.into_iter().partition(Done::at_commit);
            at_commit.into_iter().for_each(Done::send);
            done = at_sync;
            if observations_only {
                return None;
            }
        }
        Some(Batch {
            id: self.watermark.current(),
            committed: Instant::now(),
            done,
            outcome,
        })
    }

    fn begin(&mut self) -> rusqlite::Result<()> {
        statements::begin_immediate(&self.conn)?;
        let version = match statements::data_version(&self.conn) {
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
        match statements::commit(&self.conn) {
            Ok(()) => Ok(()),
            Err(e) => {
                self.rollback();
                Err(Failure::of(&e))
            }
        }
    }

    fn rollback(&self) {
        if !self.conn.is_autocommit() {
            // Should the rollback itself fail, the next BEGIN fails and reports it.
            drop(statements::rollback(&self.conn));
        }
    }

    fn apply(&mut self, cmd: Command, now: i64) -> Done {
        if !matches!(cmd, Command::Append(_))
            && let Err(e) = self.touch_sessions(now)
        {
            // Other commands see the `sessions` rows as the per-command order leaves them.
            return failed(cmd, e);
        }
        let conn = &self.conn;
        let project = self.default_project.as_str();
        match cmd {
            Command::Append(Append {
                session,
                expected_last_seq,
                fence,
                events,
                durable,
                ack,
            }) => {
                let appended = self.append(&session, expected_last_seq, fence, events, now);
                if durable {
                    Done::Append(ack, appended)
                } else {
                    if let Some(last) = appended.as_ref().ok().and_then(|records| records.last()) {
                        self.deferred_heads.push((session, last.seq));
                    }
                    Done::Committed(ack, appended)
                }
            }
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
            Command::SettleCompute {
                session,
                at_seq,
                state,
                ack,
            } => Done::Flag(ack, self.settle_compute(&session, at_seq, state)),
        }
    }

    /// Sets the session's compute projection to `state` when its head is still `at_seq`, and
    /// keeps the cached head's state in step for the batch's later appends.
    fn settle_compute(&mut self, session: &str, at_seq: i64, state: ComputeState) -> Result<bool> {
        if !session_has_row(&self.conn, session)? {
            return Err(JournalError::SessionNotFound(session.to_owned()));
        }
        let head = cached_head(&mut self.heads, &self.conn, session)?;
        if head.seq != at_seq {
            return Ok(false);
        }
        set_compute_state(&self.conn, session, state)?;
        head.state = state;
        Ok(true)
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
        let extension = extend(
            session,
            &head.log_head(),
            expected_last_seq,
            FenceUse::from_option(fence),
            events.into_iter(),
        )?;
        if extension.records.is_empty() {
            return Ok(Vec::new());
        }
        let writes = extension.records.len() + usize::from(extension.minted);
        let stored = atomically(conn, writes, || {
            if extension.minted {
                let minted = new_fence(conn, session, now, project)?;
                if minted != extension.fence {
                    // The cached fence was behind the file: refuse, and read it again.
                    return Err(JournalError::Conflict {
                        session: session.to_owned(),
                        expected: expected_last_seq,
                        actual: head.seq,
                    });
                }
            }
            insert_records(conn, session, expected_last_seq, &extension, now)
        });
        if let Err(e) = stored {
            if matches!(e, JournalError::Conflict { .. }) {
                // Only reachable if the file changed behind the cache; read it again.
                self.heads.remove(session);
            }
            return Err(e);
        }
        head.seq = extension.head.seq;
        head.hash.clone_from(&extension.head.hash);
        head.fence = extension.head.fence;
        head.state = extension.head.compute;
        let (state, deletes, usage) = (head.state, extension.deletes, extension.usage);
        match self.touched.get_mut(session) {
            Some(touch) => {
                touch.state = state;
                touch.deletes |= deletes;
                touch.usage = touch.usage.plus(usage);
            }
            None => drop(self.touched.insert(
                session.to_owned(),
                Touch {
                    state,
                    deletes,
                    usage,
                },
            )),
        }
        Ok(extension.into_records(Some(Timestamp::from_unix_nanos(now))))
    }

    /// Creates `child` as a shared-prefix fork of `parent` at `at_seq` (see
    /// [`Log::fork_session`](agentsessions_journal::Log::fork_session)): one `session_prefix` row and one
    /// `sessions` row, nothing of the prefix. The parent's head comes from the cache, so appends
    /// earlier in this batch count.
    fn fork(&mut self, parent: &str, at_seq: i64, child: &str, now: i64) -> Result<i64> {
        let conn = &self.conn;
        let head = cached_head(&mut self.heads, conn, parent)?.seq;
        let parent_row = fork_parent_columns(conn, parent)?;
        rules::check_fork_parent(parent, at_seq, head, parent_row.is_some())?;
        if session_taken(conn, child)? {
            return Err(JournalError::SessionExists(child.to_owned()));
        }
        let segments = prefix::segments(conn, parent)?;
        let fork_hash = prefix::hash_at(conn, &segments, at_seq)?
            .ok_or_else(|| rules::no_record_to_fork(parent, at_seq))?;
        let state = prefix::state_at(conn, &segments, at_seq)?;
        let inherited = parent_row.unwrap_or_else(|| ForkedColumns {
            project: self.default_project.clone(),
            ..ForkedColumns::default()
        });
        atomically(conn, 2, || {
            insert_fork_child(
                conn, child, parent, at_seq, &fork_hash, state, now, &inherited,
            )
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
        touch_session_rows(&self.conn, self.touched.drain(), now, &self.default_project)
    }
}

/// Held by the writer thread: should it panic, every wait for durability fails instead of
/// waiting for ever (its callers' acknowledgements are dropped with it and see `Closed`).
pub(super) struct StopGuard<'w>(pub(super) &'w Watermark);

impl Drop for StopGuard<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.writer_stopped();
        }
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
