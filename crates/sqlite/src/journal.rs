//! [`SqliteJournal`]: the [`Log`] and [`Catalog`] traits over one SQLite file. Writes go to the
//! writer thread as commands, reads run on the pooled read connections; besides the traits, the
//! journal reads its raw rows and verifies a session's chain while reading.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentsessions_api::{CallerIdentity, ComputeState, Event, Timestamp};
use agentsessions_journal::approvals::{
    ApprovalPage, ApprovalsPlan, ApprovalsQuery, PendingApproval, decode_args,
};
use agentsessions_journal::chain::{
    ChainFault, ChainSummary, ChainVerifier, RawRecord, decode_event,
};
use agentsessions_journal::follow::{CommitFeed, HeadFollow};
use agentsessions_journal::rules;
use agentsessions_journal::writer_queue::{self, Ack};
use agentsessions_journal::{
    AppendRequest, Appended, Catalog, HarnessRow, JournalError, ListQuery, Log, LogRecord,
    RegisterOutcome, Result, SessionInfo, SessionPage, SessionRow, Wait,
};
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension as _, params};
use tokio::sync::mpsc;

use crate::options::{Durability, SqliteOptions};
use crate::readers::{QUICK_ROWS, Readers};
use crate::writer::{self, Command, Syncer, Watermark, Writer};
use crate::{codec, prefix, schema};

/// Rows [`SqliteJournal::verify_session`] reads ahead of the hashing.
const VERIFY_PART: usize = 4096;

/// WAL pages after which a commit checkpoints the WAL into the database (SQLite's default is
/// 1,000). Each checkpoint costs two fsyncs and stalls the writer; with many sessions appending,
/// the same index and `sessions` pages recur in the WAL, so a longer WAL copies fewer pages per
/// append. 10,000 pages keep the WAL under ~40 MiB; much longer made appends slower again.
const WAL_AUTOCHECKPOINT_PAGES: i64 = 10_000;

/// A journal in one SQLite file. Cheap to share behind an `Arc`; dropping the last handle stops
/// the writer thread after it has committed everything queued.
#[derive(Debug)]
pub struct SqliteJournal {
    path: PathBuf,
    writer: mpsc::Sender<Command>,
    readers: Readers,
    default_project: String,
    durability: Durability,
    watermark: Arc<Watermark>,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    /// Where appends announce their commits to followers.
    feed: Arc<CommitFeed>,
}

impl Drop for SqliteJournal {
    /// Closes the writer channel and waits for the threads to commit and acknowledge what is
    /// queued, so a file reopened right after the drop sees every acknowledged write.
    fn drop(&mut self) {
        let (closed, _) = mpsc::channel(1);
        drop(std::mem::replace(&mut self.writer, closed));
        let handle = self
            .writer_thread
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(handle) = handle {
            // The writer only exits by draining its queue; a panic there has already failed
            // every pending caller, so there is nothing more to report here.
            let _ = handle.join();
        }
    }
}

impl SqliteJournal {
    /// Opens (creating if needed) the journal at `path` with default options.
    ///
    /// # Errors
    /// [`JournalError::UnsupportedSchema`] for a file stamped by a newer build (nothing is
    /// written), storage and I/O failures.
    pub fn open(path: impl AsRef<Path>) -> Result<Self> {
        Self::open_with(path, SqliteOptions::default())
    }

    /// Opens the journal at `path`.
    ///
    /// # Errors
    /// As [`SqliteJournal::open`].
    pub fn open_with(path: impl AsRef<Path>, options: SqliteOptions) -> Result<Self> {
        let path = path.as_ref().to_path_buf();
        if path.as_os_str().is_empty() || path == Path::new(":memory:") {
            return Err(JournalError::InvalidArgument(
                "the SQLite journal needs a file path; use the memory journal for in-memory use"
                    .to_owned(),
            ));
        }
        let mut conn = schema::open_connection(&path, !options.read_only)?;
        let wal = if options.read_only {
            None
        } else {
            schema::prepare_writer(&mut conn, agentsessions_api::Timestamp::now().unix_nanos())?;
            conn.pragma_update(None, "wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES)?;
            match options.durability {
                Durability::Pipelined => open_wal(&conn)?,
                Durability::Full => None,
            }
        };
        let durability = if wal.is_some() {
            conn.pragma_update(None, "synchronous", "NORMAL")?;
            Durability::Pipelined
        } else {
            Durability::Full
        };
        let watermark = Arc::new(Watermark::default());
        let readers = Readers::open(
            &path,
            options.read_only,
            (durability == Durability::Pipelined).then(|| Arc::clone(&watermark)),
        )?;
        let syncer = match wal {
            Some(wal) => Syncer::spawn(wal, Arc::clone(&watermark), options.deferred_sync_delay)?,
            None => Syncer::InCommit,
        };
        // Bounded: when the disk falls behind, appenders wait for room (back-pressure) rather
        // than queueing without limit; the default depth is several full batches, so the writer
        // never idles while callers are waiting.
        let (tx, rx) = mpsc::channel(options.queue_depth.max(1));
        let feed = CommitFeed::new();
        let writer = Writer::new(
            conn,
            options.default_project.clone(),
            Arc::clone(&watermark),
            syncer,
            options.writer_spin,
            Arc::clone(&feed),
        );
        let handle = std::thread::Builder::new()
            .name("journal-writer".to_owned())
            .spawn(move || writer.run(rx))?;
        Ok(Self {
            path,
            writer: tx,
            readers,
            default_project: options.default_project,
            durability,
            watermark,
            writer_thread: Mutex::new(Some(handle)),
            feed,
        })
    }

    /// How this journal makes appends durable: the mode asked for, or [`Durability::Full`] when
    /// the file has no WAL to sync (an in-memory URI).
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// How many times this journal has fdatasync'd its WAL ([`Durability::Pipelined`]; under
    /// [`Durability::Full`] the COMMITs sync and this stays 0): the durable waits its appends
    /// cost, for tests and benchmarks.
    pub fn wal_syncs(&self) -> u64 {
        self.watermark.syncs()
    }

    /// How many committed batches the writer has handed to its `journal-sync` thread rather than
    /// syncing them itself: the thread hand-offs durability costs, for tests and benchmarks.
    pub fn wal_sync_handoffs(&self) -> u64 {
        self.watermark.handoffs()
    }

    /// How many times the writer thread has gone to sleep on an empty queue (rather than
    /// taking a command that came within its spin), for tests and benchmarks.
    pub fn writer_sleeps(&self) -> u64 {
        self.watermark.writer_sleeps()
    }

    /// The file this journal writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An append with the writer's `fence`, or minting the next one (`None`); `durable`: wait
    /// for the batch's WAL sync, not only its commit.
    async fn append_with(
        &self,
        session: &str,
        expected_last_seq: i64,
        fence: Option<i64>,
        events: Vec<Event>,
        durable: bool,
    ) -> Result<Vec<LogRecord>> {
        let records = writer_queue::append(
            &self.writer,
            Command::Append,
            session,
            expected_last_seq,
            fence,
            events,
            durable,
        )
        .await?;
        // Committed and visible to the read connections, which hand records out only once
        // durable; so followers may be woken now even for a deferred append.
        self.feed.publish_records(session, &records);
        Ok(records)
    }

    fn follow_head(&self, session: &str) -> HeadFollow {
        self.feed.follow(session)
    }

    async fn send<T>(&self, make: impl FnOnce(Ack<T>) -> Command) -> Result<T> {
        writer_queue::request(&self.writer, make).await
    }

    /// Raw stored rows of a session's chain in seq order (a fork child's prefix from its
    /// ancestors' rows), for verification without decoding to domain types.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn read_raw(&self, session: &str) -> Result<Vec<RawRecord>> {
        let session = session.to_owned();
        self.readers
            .with_reader(move |conn| {
                let mut stmt = conn.prepare_cached(prefix::RAW_RANGE)?;
                let mut out = Vec::new();
                for run in prefix::segments(conn, &session)? {
                    let rows = stmt.query_map(params![run.session, run.lo, run.hi], raw_record)?;
                    for row in rows {
                        out.push(row?);
                    }
                }
                Ok(out)
            })
            .await
    }

    /// Reads a session's stored rows and verifies its hash chain as [`verify_raw`] does, but
    /// while reading: this thread steps through the rows while the others hash the part read
    /// before, and the chain is never held in memory whole. A fork child's chain is verified
    /// whole, from its ancestors' rows through its own. The outer result is whether the rows
    /// could be read, the inner one the chain's verdict.
    ///
    /// [`verify_raw`]: agentsessions_journal::verify_raw
    ///
    /// # Errors
    /// Storage failures.
    pub async fn verify_session(
        &self,
        session: &str,
    ) -> Result<std::result::Result<ChainSummary, ChainFault>> {
        let session = session.to_owned();
        self.readers
            .with_reader(move |conn| {
                let runs = prefix::segments(conn, &session)?;
                let mut stmt = conn.prepare_cached(prefix::RAW_RANGE)?;
                std::thread::scope(|scope| {
                    // One part waits while the next is read: enough to overlap reading and hashing,
                    // and the chain in memory stays at most three parts.
                    let (to_verifier, parts) = std::sync::mpsc::sync_channel::<Vec<RawRecord>>(1);
                    let verifier = scope.spawn(move || {
                        let mut verifier = ChainVerifier::new();
                        // At the first fault this returns, and the reader below stops.
                        for part in parts {
                            verifier.push(&part)?;
                        }
                        Ok(verifier.finish())
                    });
                    let read = (|| -> Result<()> {
                        let mut part = Vec::with_capacity(VERIFY_PART);
                        for run in &runs {
                            let mut rows = stmt.query(params![run.session, run.lo, run.hi])?;
                            while let Some(row) = rows.next()? {
                                part.push(raw_record(row)?);
                                if part.len() == VERIFY_PART {
                                    let full = std::mem::replace(
                                        &mut part,
                                        Vec::with_capacity(VERIFY_PART),
                                    );
                                    if to_verifier.send(full).is_err() {
                                        return Ok(());
                                    }
                                }
                            }
                        }
                        if !part.is_empty() {
                            // A verifier that already stopped has its verdict.
                            drop(to_verifier.send(part));
                        }
                        Ok(())
                    })();
                    drop(to_verifier);
                    let verdict = verifier
                        .join()
                        .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
                    read.map(|()| verdict)
                })
            })
            .await
    }

    /// Every session uid that has events of its own or a shared prefix, sorted.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn sessions_with_events(&self) -> Result<Vec<String>> {
        self.readers
            .with_reader(|conn| {
                let mut stmt = conn.prepare(
                    "SELECT session FROM events UNION SELECT session FROM session_prefix
                 ORDER BY session",
                )?;
                let rows = stmt.query_map([], |r| r.get(0))?;
                Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
            })
            .await
    }
}

/// Opens the write connection's WAL file for `journal-sync`, or `None` when the database has no
/// WAL (an in-memory URI). The file exists from the connection's first read on, and SQLite
/// neither deletes nor replaces it while any connection (this one included) has the database
/// open, so the handle stays on the live WAL. SQLite keeps no locks on the WAL file itself (they
/// are on the database and `-shm` files), so this extra descriptor cannot disturb them.
fn open_wal(conn: &Connection) -> Result<Option<File>> {
    let mode: String = conn.query_row("PRAGMA journal_mode", [], |r| r.get(0))?;
    let db = conn.path().unwrap_or_default();
    if !mode.eq_ignore_ascii_case("wal") || db.is_empty() {
        return Ok(None);
    }
    Ok(Some(
        std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(format!("{db}-wal"))?,
    ))
}

fn raw_record(row: &rusqlite::Row<'_>) -> rusqlite::Result<RawRecord> {
    Ok(RawRecord {
        seq: row.get(0)?,
        prev_hash: row.get(1)?,
        hash: row.get(2)?,
        blob: row.get(3)?,
    })
}

#[async_trait]
impl Log for SqliteJournal {
    async fn append(&self, request: AppendRequest) -> Result<Appended> {
        let AppendRequest {
            session,
            expected_last_seq,
            fence,
            wait,
            events,
        } = request;
        let fence = fence.held();
        let durable = match wait {
            Wait::Durable => true,
            Wait::Committed => false,
            Wait::Queued => {
                // The writer wakes followers once it committed them: they are handed records
                // only once durable.
                return writer_queue::queue_append(
                    &self.writer,
                    Command::Append,
                    &session,
                    expected_last_seq,
                    fence,
                    events,
                )
                .await;
            }
        };
        Ok(Appended::answered(
            self.append_with(&session, expected_last_seq, fence, events, durable)
                .await,
        ))
    }

    fn follow(&self, session: &str) -> HeadFollow {
        self.follow_head(session)
    }

    async fn new_fence(&self, session: &str) -> Result<i64> {
        rules::check_session_uid(session)?;
        self.send(|ack| Command::NewFence {
            session: session.to_owned(),
            ack,
        })
        .await
    }

    async fn head(&self, session: &str) -> Result<i64> {
        let session = session.to_owned();
        self.readers
            .with_quick_reader(move |conn| {
                Ok(conn
                    .prepare_cached(
                        "SELECT COALESCE((SELECT MAX(seq) FROM events WHERE session = ?1),
                                     (SELECT fork_seq FROM session_prefix WHERE session = ?1), 0)",
                    )?
                    .query_row([&session], |r| r.get(0))?)
            })
            .await
    }

    async fn read(&self, session: &str, from: i64, to: i64) -> Result<Vec<LogRecord>> {
        let (from, to) = rules::read_window(from, to)?;
        let owned = session.to_owned();
        // The first records on this worker (an operation's tail read ends there), the rest of a
        // longer range on the blocking pool.
        let mut out = self
            .readers
            .with_quick_reader(move |conn| read_range(conn, &owned, from, to, QUICK_ROWS))
            .await?;
        let rest_from = match out.last() {
            Some(last) if out.len() == QUICK_ROWS && last.seq < to => last.seq + 1,
            _ => return Ok(out),
        };
        let owned = session.to_owned();
        let rest = self
            .readers
            .with_reader(move |conn| read_range(conn, &owned, rest_from, to, usize::MAX))
            .await?;
        out.extend(rest);
        Ok(out)
    }

    async fn fork_session(&self, parent: &str, at_seq: i64, child: &str) -> Result<i64> {
        rules::check_session_uid(parent)?;
        rules::check_session_uid(child)?;
        self.send(|ack| Command::Fork {
            parent: parent.to_owned(),
            at_seq,
            child: child.to_owned(),
            ack,
        })
        .await
    }
}

#[async_trait]
impl Catalog for SqliteJournal {
    async fn put_session(&self, row: SessionRow) -> Result<()> {
        rules::check_session_uid(&row.uid)?;
        let row = Box::new(row);
        self.send(|ack| Command::PutSession { row, ack }).await
    }

    async fn session_info(&self, uid: &str) -> Result<SessionInfo> {
        let uid = uid.to_owned();
        self.readers
            .with_quick_reader(move |conn| {
                let mut stmt = conn.prepare_cached(&format!(
                    "SELECT {} FROM sessions s WHERE s.session = ?1",
                    codec::SESSION_COLUMNS
                ))?;
                let mut rows = stmt.query([&uid])?;
                match rows.next()? {
                    Some(row) => codec::session_info_from_row(row),
                    None => Err(JournalError::SessionNotFound(uid.clone())),
                }
            })
            .await
    }

    async fn list_sessions(&self, query: ListQuery) -> Result<SessionPage> {
        let plan = rules::ListPlan::new(&query, &self.default_project)?;
        self.readers
            .with_reader(move |conn| {
                let (after_time, after_uid, has_cursor) = match &plan.cursor {
                    Some(c) => (c.created_at_ns, c.uid.clone(), 1),
                    None => (0, String::new(), 0),
                };
                // Two statements rather than one with an optional predicate, so that each one's plan
                // is a range scan of its own index (`sessions_owner_created` or
                // `sessions_project_created`) in the listing's order.
                let owner_clause = if query.owner.is_some() {
                    "s.owner_issuer = ?6 AND s.owner_subject = ?7 AND"
                } else {
                    "?6 = ?7 AND"
                };
                let mut stmt = conn.prepare_cached(&format!(
                    "SELECT {} FROM sessions s
                 WHERE {owner_clause} s.project = ?1
                   AND (?2 = 0 OR s.created_at < ?3 OR (s.created_at = ?3 AND s.session > ?4))
                 ORDER BY s.created_at DESC, s.session ASC
                 LIMIT ?5",
                    codec::SESSION_COLUMNS
                ))?;
                let owner = query.owner.unwrap_or_default();
                let mut rows = stmt.query(params![
                    plan.project,
                    has_cursor,
                    after_time,
                    after_uid,
                    plan.fetch_limit(),
                    owner.issuer,
                    owner.subject
                ])?;
                let mut sessions = Vec::new();
                while let Some(row) = rows.next()? {
                    sessions.push(codec::session_info_from_row(row)?);
                }
                Ok(plan.page(sessions))
            })
            .await
    }

    async fn list_pending_approvals(&self, query: ApprovalsQuery) -> Result<ApprovalPage> {
        let plan = ApprovalsPlan::new(&query, &self.default_project)?;
        self.readers
            .with_reader(move |conn| {
                let cursor = plan.cursor.clone().unwrap_or_default();
                let has_cursor = i64::from(plan.cursor.is_some());
                let owner_clause = if query.owner.is_some() {
                    "s.owner_issuer = ?7 AND s.owner_subject = ?8 AND"
                } else {
                    "?7 = ?8 AND"
                };
                // Walks `pending_approvals_requested` in listing order; the join only reads each
                // entry's session row by its key.
                let mut stmt = conn.prepare_cached(&format!(
                    "SELECT a.session, s.project, s.owner_issuer, s.owner_subject, a.execution_id,
                        a.tool_call_id, a.request_seq, a.tool, a.args, a.reason, a.requested_at
                 FROM pending_approvals a JOIN sessions s ON s.session = a.session
                 WHERE {owner_clause} s.project = ?1
                   AND (?2 = 0 OR (a.requested_at, a.session, a.tool_call_id) > (?3, ?4, ?5))
                 ORDER BY a.requested_at, a.session, a.tool_call_id
                 LIMIT ?6"
                ))?;
                let owner = query.owner.unwrap_or_default();
                let mut rows = stmt.query(params![
                    plan.project,
                    has_cursor,
                    cursor.requested_at_ns,
                    cursor.session,
                    cursor.tool_call_id,
                    i64::try_from(plan.size + 1).unwrap_or(i64::MAX),
                    owner.issuer,
                    owner.subject
                ])?;
                let mut approvals = Vec::new();
                while let Some(row) = rows.next()? {
                    approvals.push(PendingApproval {
                        session: row.get(0)?,
                        project: row.get(1)?,
                        owner: CallerIdentity::new(
                            row.get::<_, String>(2)?,
                            row.get::<_, String>(3)?,
                        ),
                        execution_id: row.get(4)?,
                        tool_call_id: row.get(5)?,
                        request_seq: row.get(6)?,
                        tool: row.get(7)?,
                        args: decode_args(&row.get::<_, String>(8)?),
                        reason: row.get(9)?,
                        requested_at: Timestamp::from_unix_nanos(row.get(10)?),
                    });
                }
                Ok(plan.page(approvals))
            })
            .await
    }

    async fn pending_deletions(&self, limit: usize) -> Result<Vec<String>> {
        self.readers
            .with_reader(move |conn| {
                let mut stmt = conn.prepare_cached(
                    "SELECT session FROM sessions
                 WHERE deletion_state NOT IN ('', 'ACTIVE') AND reclaimed_at = 0
                 ORDER BY updated_at, session LIMIT ?1",
                )?;
                let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                let rows = stmt.query_map([limit], |r| r.get::<_, String>(0))?;
                Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
            })
            .await
    }

    async fn mark_reclaimed(&self, uid: &str) -> Result<()> {
        let uid = uid.to_owned();
        self.send(|ack| Command::MarkReclaimed { uid, ack }).await
    }

    async fn settle_compute_state(
        &self,
        session: &str,
        at_seq: i64,
        state: ComputeState,
    ) -> Result<bool> {
        rules::check_settled_state(session, state)?;
        let session = session.to_owned();
        self.send(|ack| Command::SettleCompute {
            session,
            at_seq,
            state,
            ack,
        })
        .await
    }

    async fn register_harness(
        &self,
        name: &str,
        spec: &str,
        spec_digest: &str,
    ) -> Result<(HarnessRow, RegisterOutcome)> {
        self.send(|ack| Command::Register {
            name: name.to_owned(),
            spec: spec.to_owned(),
            spec_digest: spec_digest.to_owned(),
            ack,
        })
        .await
    }

    async fn get_harness(&self, name: &str) -> Result<Option<HarnessRow>> {
        let name = name.to_owned();
        self.readers
            .with_quick_reader(move |conn| {
                Ok(conn
                    .prepare_cached(&format!(
                        "SELECT {} FROM harnesses WHERE name = ?1",
                        codec::HARNESS_COLUMNS
                    ))?
                    .query_row([&name], codec::harness_from_row)
                    .optional()?)
            })
            .await
    }

    async fn list_harnesses(
        &self,
        after: &str,
        limit: usize,
        include_retired: bool,
    ) -> Result<Vec<HarnessRow>> {
        let after = after.to_owned();
        self.readers
            .with_reader(move |conn| {
                let mut stmt = conn.prepare_cached(&format!(
                    "SELECT {} FROM harnesses WHERE name > ?1 AND (?2 OR state = 'active')
                 ORDER BY name LIMIT ?3",
                    codec::HARNESS_COLUMNS
                ))?;
                let limit = i64::try_from(limit).unwrap_or(i64::MAX);
                let rows = stmt.query_map(
                    params![after, include_retired, limit],
                    codec::harness_from_row,
                )?;
                Ok(rows.collect::<rusqlite::Result<Vec<_>>>()?)
            })
            .await
    }

    async fn retire_harness(&self, name: &str, reason: &str) -> Result<HarnessRow> {
        self.send(|ack| Command::Retire {
            name: name.to_owned(),
            reason: reason.to_owned(),
            ack,
        })
        .await
    }

    async fn reserve_harness_names(&self, names: &[String]) -> Result<()> {
        let names = names.to_vec();
        self.send(|ack| Command::Reserve { names, ack }).await
    }

    async fn is_harness_name_reserved(&self, name: &str) -> Result<bool> {
        let name = name.to_owned();
        self.readers
            .with_quick_reader(move |conn| writer::is_reserved(conn, &name))
            .await
    }
}

/// Records `from..=to` of `session` (through its fork prefix), at most `limit` of them.
fn read_range(
    conn: &rusqlite::Connection,
    session: &str,
    from: i64,
    to: i64,
    limit: usize,
) -> Result<Vec<LogRecord>> {
    let mut stmt = conn.prepare_cached(
        "SELECT seq, prev_hash, hash, fence, event, committed_at FROM events
         WHERE session = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq",
    )?;
    let mut out = Vec::new();
    for run in prefix::segments(conn, session)? {
        let Some(run) = run.clip(from, to) else {
            continue;
        };
        let mut rows = stmt.query(params![run.session, run.lo, run.hi])?;
        while let Some(row) = rows.next()? {
            if out.len() == limit {
                return Ok(out);
            }
            let seq: i64 = row.get(0)?;
            let blob: Vec<u8> = row.get(4)?;
            let committed_at: i64 = row.get(5)?;
            out.push(LogRecord {
                seq,
                prev_hash: row.get(1)?,
                hash: row.get(2)?,
                fence: row.get(3)?,
                event: decode_event(&run.session, seq, &blob)?,
                committed_at: (committed_at != 0).then(|| Timestamp::from_unix_nanos(committed_at)),
            });
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use agentsessions_journal::{Catalog as _, Log as _};

    use super::{SqliteJournal, SqliteOptions};
    use crate::readers::READ_POOL;

    // Many more concurrent reads than pooled connections: they wait their turn for one, all
    // complete, and the pool is whole afterwards.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn reads_beyond_the_pool_wait_for_a_connection() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(SqliteJournal::open(dir.path().join("journal.db")).unwrap());
        journal.new_fence("s").await.unwrap();
        let mut reads = Vec::new();
        for _ in 0..(READ_POOL * 16) {
            let journal = Arc::clone(&journal);
            reads.push(tokio::spawn(async move {
                journal.session_info("s").await.map(|info| info.fence)
            }));
        }
        for read in reads {
            assert_eq!(read.await.unwrap().unwrap(), 1);
        }
        assert_eq!(journal.readers.idle(), (READ_POOL, READ_POOL));
    }

    // A reader's open: a missing file is refused and nothing is created in its place.
    #[test]
    fn a_read_only_open_never_creates_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("missing.db");
        let options = SqliteOptions {
            read_only: true,
            ..SqliteOptions::default()
        };
        SqliteJournal::open_with(&path, options).unwrap_err();
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
