//! The SQLite journal, the default backend: bundled SQLite, WAL, the reference table layout
//! (semantics §1.5), one writer thread with group commit, and a small pool of read connections.
//! rusqlite never runs on a tokio worker: writes go to the `journal-writer` thread, reads to
//! `spawn_blocking`. An append returns only once its batch is durable; [`Durability`] says how.

mod codec;
mod prefix;
mod schema;
mod writer;

use std::fs::File;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agentsessions_api::Event;
use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension as _, params};
use tokio::sync::{mpsc, oneshot};

pub use self::schema::{SCHEMA_VERSION, schema_version_of};
use self::writer::{Command, Syncer, Watermark, Writer};
use crate::chain::{ChainFault, ChainSummary, ChainVerifier, RawRecord, decode_event};
use crate::error::{JournalError, Result};
use crate::journal::{
    DEFAULT_PROJECT, HarnessRow, Journal, ListQuery, RegisterOutcome, SessionInfo, SessionPage,
    SessionRow,
};
use crate::page_token::PageCursor;
use crate::record::LogRecord;
use crate::rules;

/// Read connections, all kept open; a read waits for a free one rather than opening another
/// (opening one parses the schema and prepares every statement again, which under many
/// concurrent sessions cost more than the reads themselves).
const READ_POOL: usize = 4;

/// Rows [`SqliteJournal::verify_session`] reads ahead of the hashing.
const VERIFY_PART: usize = 4096;

/// WAL pages after which a commit checkpoints the WAL into the database (SQLite's default is
/// 1,000). Each checkpoint costs two fsyncs and stalls the writer; with many sessions appending,
/// the same index and `sessions` pages recur in the WAL, so a longer WAL copies fewer pages per
/// append. 10,000 pages keep the WAL under ~40 MiB; much longer made appends slower again.
const WAL_AUTOCHECKPOINT_PAGES: i64 = 10_000;

/// How a committed batch is made durable before its callers are acknowledged. Both modes give
/// an acknowledged write the same guarantee: its WAL frames have been fsync'd, so it survives
/// a process kill, an OS crash and a power loss.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Durability {
    /// `synchronous=FULL` on the write connection: `COMMIT` itself writes and fsyncs the WAL,
    /// and the writer starts the next batch only after that.
    Full,
    /// `COMMIT` writes the WAL frames without syncing (`synchronous=NORMAL` on the write
    /// connection), and the WAL file is then `fdatasync`'d before the batch is acknowledged — by
    /// the `journal-sync` thread while the writer already applies the next batch, or by the
    /// writer itself when no other command is waiting. One sync covers every batch committed
    /// before it. Checkpoints still sync the WAL before copying it into the database, and the
    /// database before the WAL is reused, as under `FULL`.
    ///
    /// A committed batch is visible to other connections between its `COMMIT` and its sync.
    /// Reads through this journal wait for that sync before they return, so they never hand
    /// out a record that an OS crash could still take back; a reader in another process may see
    /// it early (only an OS crash or power loss in that window loses it, and its writer was not
    /// acknowledged).
    #[default]
    Pipelined,
}

/// Options for [`SqliteJournal::open_with`].
#[derive(Debug, Clone)]
pub struct SqliteOptions {
    /// Project for sessions created without one.
    pub default_project: String,
    /// Queue depth of the writer channel (back-pressure on appenders).
    pub queue_depth: usize,
    /// How batches are made durable.
    pub durability: Durability,
    /// Open an existing file only to read it: nothing is created, migrated or written, and
    /// every write fails (for tools that read a file they may not write).
    pub read_only: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            default_project: DEFAULT_PROJECT.to_owned(),
            queue_depth: 4096,
            durability: Durability::default(),
            read_only: false,
        }
    }
}

/// A journal in one SQLite file. Cheap to share behind an `Arc`; dropping the last handle stops
/// the writer thread after it has committed everything queued.
#[derive(Debug)]
pub struct SqliteJournal {
    path: PathBuf,
    writer: mpsc::Sender<Command>,
    readers: Arc<Mutex<Vec<Connection>>>,
    /// One permit per connection in `readers`.
    read_permits: Arc<tokio::sync::Semaphore>,
    default_project: String,
    durability: Durability,
    watermark: Arc<Watermark>,
    writer_thread: Mutex<Option<std::thread::JoinHandle<()>>>,
    read_only: bool,
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
        let readers = (0..READ_POOL)
            .map(|_| open_reader(&path, options.read_only))
            .collect::<Result<Vec<_>>>()?;
        let watermark = Arc::new(Watermark::default());
        let syncer = match wal {
            Some(wal) => Syncer::spawn(wal, Arc::clone(&watermark))?,
            None => Syncer::InCommit,
        };
        let (tx, rx) = mpsc::channel(options.queue_depth.max(1));
        let writer = Writer::new(
            conn,
            options.default_project.clone(),
            Arc::clone(&watermark),
            syncer,
        );
        let handle = std::thread::Builder::new()
            .name("journal-writer".to_owned())
            .spawn(move || writer.run(rx))?;
        Ok(Self {
            path,
            writer: tx,
            readers: Arc::new(Mutex::new(readers)),
            read_permits: Arc::new(tokio::sync::Semaphore::new(READ_POOL)),
            default_project: options.default_project,
            durability,
            watermark,
            writer_thread: Mutex::new(Some(handle)),
            read_only: options.read_only,
        })
    }

    /// How this journal makes appends durable: the mode asked for, or [`Durability::Full`] when
    /// the file has no WAL to sync (an in-memory URI).
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The file this journal writes.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An append with the writer's `fence`, or minting the next one (`None`).
    async fn append_with(
        &self,
        session: &str,
        expected_last_seq: i64,
        fence: Option<i64>,
        events: Vec<Event>,
    ) -> Result<Vec<LogRecord>> {
        let events = rules::prepare_batch(session, events, fence.is_none())?;
        self.send(|ack| Command::Append {
            session: session.to_owned(),
            expected_last_seq,
            fence,
            events,
            ack,
        })
        .await
    }

    async fn send<T>(&self, make: impl FnOnce(oneshot::Sender<Result<T>>) -> Command) -> Result<T> {
        let (ack, done) = oneshot::channel();
        self.writer
            .send(make(ack))
            .await
            .map_err(|_| JournalError::Closed)?;
        done.await.map_err(|_| JournalError::Closed)?
    }

    /// Runs `f` on a pooled read connection on the blocking pool. In
    /// [`Durability::Pipelined`] the result is returned only once everything `f` could have
    /// seen is durable.
    async fn with_reader<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Connection) -> Result<T> + Send + 'static,
    ) -> Result<T> {
        let pool = Arc::clone(&self.readers);
        let path = self.path.clone();
        let read_only = self.read_only;
        let watermark =
            (self.durability == Durability::Pipelined).then(|| Arc::clone(&self.watermark));
        let permit = Arc::clone(&self.read_permits)
            .acquire_owned()
            .await
            .map_err(|_| JournalError::Closed)?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            let pooled = pool
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .pop();
            // Holding a permit, a connection is free unless one was lost with a panicking
            // read; that one is replaced.
            let conn = match pooled {
                Some(c) => c,
                None => open_reader(&path, read_only)?,
            };
            let out = f(&conn);
            pool.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(conn);
            let out = out?;
            if let Some(watermark) = watermark {
                watermark.wait_durable()?;
            }
            Ok(out)
        })
        .await
        .map_err(|e| JournalError::InvalidArgument(format!("reader task failed: {e}")))?
    }

    /// Raw stored rows of a session's chain in seq order (a fork child's prefix from its
    /// ancestors' rows), for verification without decoding to domain types.
    ///
    /// # Errors
    /// Storage failures.
    pub async fn read_raw(&self, session: &str) -> Result<Vec<RawRecord>> {
        let session = session.to_owned();
        self.with_reader(move |conn| {
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
    /// [`verify_raw`]: crate::verify_raw
    ///
    /// # Errors
    /// Storage failures.
    pub async fn verify_session(
        &self,
        session: &str,
    ) -> Result<std::result::Result<ChainSummary, ChainFault>> {
        let session = session.to_owned();
        self.with_reader(move |conn| {
            let runs = prefix::segments(conn, &session)?;
            let mut stmt = conn.prepare_cached(prefix::RAW_RANGE)?;
            std::thread::scope(|scope| {
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
                                let full =
                                    std::mem::replace(&mut part, Vec::with_capacity(VERIFY_PART));
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
        self.with_reader(|conn| {
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

fn open_reader(path: &Path, read_only: bool) -> Result<Connection> {
    let conn = schema::open_connection(path, !read_only)?;
    conn.pragma_update(None, "query_only", true)?;
    Ok(conn)
}

#[async_trait]
impl Journal for SqliteJournal {
    async fn append_batch(
        &self,
        session: &str,
        expected_last_seq: i64,
        fence: i64,
        events: Vec<Event>,
    ) -> Result<Vec<LogRecord>> {
        self.append_with(session, expected_last_seq, Some(fence), events)
            .await
    }

    async fn append_batch_fencing(
        &self,
        session: &str,
        expected_last_seq: i64,
        events: Vec<Event>,
    ) -> Result<Vec<LogRecord>> {
        self.append_with(session, expected_last_seq, None, events)
            .await
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
        self.with_reader(move |conn| {
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
        let session = session.to_owned();
        self.with_reader(move |conn| {
            let mut stmt = conn.prepare_cached(
                "SELECT seq, prev_hash, hash, fence, event FROM events
                 WHERE session = ?1 AND seq >= ?2 AND seq <= ?3 ORDER BY seq",
            )?;
            let mut out = Vec::new();
            for run in prefix::segments(conn, &session)? {
                let Some(run) = run.clip(from, to) else {
                    continue;
                };
                let mut rows = stmt.query(params![run.session, run.lo, run.hi])?;
                while let Some(row) = rows.next()? {
                    let seq: i64 = row.get(0)?;
                    let blob: Vec<u8> = row.get(4)?;
                    out.push(LogRecord {
                        seq,
                        prev_hash: row.get(1)?,
                        hash: row.get(2)?,
                        fence: row.get(3)?,
                        event: decode_event(&run.session, seq, &blob)?,
                    });
                }
            }
            Ok(out)
        })
        .await
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

    async fn put_session(&self, row: SessionRow) -> Result<()> {
        rules::check_session_uid(&row.uid)?;
        let row = Box::new(row);
        self.send(|ack| Command::PutSession { row, ack }).await
    }

    async fn session_info(&self, uid: &str) -> Result<SessionInfo> {
        let uid = uid.to_owned();
        self.with_reader(move |conn| {
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
        let cursor = PageCursor::decode(&query.page_token)?;
        rules::check_owner_filter(query.owner.as_ref())?;
        let size = query.effective_size();
        let project = if query.project.is_empty() {
            self.default_project.clone()
        } else {
            query.project.clone()
        };
        self.with_reader(move |conn| {
            let (after_time, after_uid, has_cursor) = match &cursor {
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
            let limit = i64::try_from(size + 1).unwrap_or(i64::MAX);
            let owner = query.owner.unwrap_or_default();
            let mut rows = stmt.query(params![
                project,
                has_cursor,
                after_time,
                after_uid,
                limit,
                owner.issuer,
                owner.subject
            ])?;
            let mut sessions = Vec::new();
            while let Some(row) = rows.next()? {
                sessions.push(codec::session_info_from_row(row)?);
            }
            let more = sessions.len() > size;
            sessions.truncate(size);
            Ok(rules::page_of(sessions, more))
        })
        .await
    }

    async fn pending_deletions(&self, limit: usize) -> Result<Vec<String>> {
        self.with_reader(move |conn| {
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
        self.with_reader(move |conn| {
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
        self.with_reader(move |conn| {
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
        self.with_reader(move |conn| writer::is_reserved(conn, &name))
            .await
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use crate::Journal;

    fn fresh() -> (Arc<dyn Journal>, tempfile::TempDir) {
        let dir = tempfile::tempdir().unwrap();
        let journal = super::SqliteJournal::open(dir.path().join("journal.db")).unwrap();
        (Arc::new(journal), dir)
    }

    crate::journal_conformance!(fresh());

    // Many more concurrent reads than pooled connections: they wait their turn for one, all
    // complete, and the pool is whole afterwards.
    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn reads_beyond_the_pool_wait_for_a_connection() {
        let dir = tempfile::tempdir().unwrap();
        let journal = Arc::new(super::SqliteJournal::open(dir.path().join("journal.db")).unwrap());
        journal.new_fence("s").await.unwrap();
        let mut reads = Vec::new();
        for _ in 0..(super::READ_POOL * 16) {
            let journal = Arc::clone(&journal);
            reads.push(tokio::spawn(async move {
                journal.session_info("s").await.map(|info| info.fence)
            }));
        }
        for read in reads {
            assert_eq!(read.await.unwrap().unwrap(), 1);
        }
        let pooled = journal
            .readers
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .len();
        assert_eq!(pooled, super::READ_POOL);
        assert_eq!(journal.read_permits.available_permits(), super::READ_POOL);
    }

    /// The same suite with `synchronous=FULL`.
    mod full {
        use std::sync::Arc;

        use crate::Journal;
        use crate::sqlite::{Durability, SqliteJournal, SqliteOptions};

        fn fresh() -> (Arc<dyn Journal>, tempfile::TempDir) {
            let dir = tempfile::tempdir().unwrap();
            let options = SqliteOptions {
                durability: Durability::Full,
                ..SqliteOptions::default()
            };
            let journal = SqliteJournal::open_with(dir.path().join("journal.db"), options).unwrap();
            assert_eq!(journal.durability(), Durability::Full);
            (Arc::new(journal), dir)
        }

        crate::journal_conformance!(fresh());
    }
}
